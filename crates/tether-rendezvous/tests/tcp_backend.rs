mod common;

use std::io::{BufRead, BufReader, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::thread;
use std::time::Duration;

use tether_rendezvous::{Backend, Rendezvous, RendezvousError, Server, ServerHandle};

fn start() -> ServerHandle {
    Server::bind("127.0.0.1:0").unwrap().spawn().unwrap()
}

fn client(server: &ServerHandle) -> Rendezvous {
    Rendezvous::open(&server.url()).unwrap()
}

/// A raw connection with a bounded read timeout, for speaking the protocol
/// by hand.
fn raw(server: &ServerHandle) -> (TcpStream, BufReader<TcpStream>) {
    let stream = TcpStream::connect(server.local_addr()).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    let reader = BufReader::new(stream.try_clone().unwrap());
    (stream, reader)
}

fn reply(reader: &mut BufReader<TcpStream>) -> String {
    let mut line = String::new();
    reader.read_line(&mut line).unwrap();
    line
}

#[test]
fn url_and_describe() {
    let server = start();
    let url = server.url();
    assert!(url.starts_with("tcp://127.0.0.1:"), "{url}");
    assert_ne!(server.local_addr().port(), 0);
    let rv = client(&server);
    assert!(matches!(rv.backend(), Backend::Tcp(_)));
    assert_eq!(rv.describe(), url);
}

#[test]
fn put_get_overwrite_remove() {
    let server = start();
    common::put_get_overwrite_remove(&client(&server));
}

#[test]
fn wait_times_out() {
    let server = start();
    common::wait_times_out(&client(&server));
}

#[test]
fn wait_sees_a_put_from_another_client() {
    let server = start();
    common::wait_sees_concurrent_put(&client(&server), client(&server));
}

#[test]
fn bad_keys_and_values_are_rejected() {
    let server = start();
    common::bad_keys_and_values_are_rejected(&client(&server));
}

#[test]
fn the_line_protocol_by_hand() {
    let server = start();
    let (mut stream, mut reader) = raw(&server);
    stream.write_all(b"PUT a/b hello world\n").unwrap();
    assert_eq!(reply(&mut reader), "OK\n");
    stream.write_all(b"GET a/b\nGET nope\n").unwrap();
    assert_eq!(reply(&mut reader), "VALUE hello world\n");
    assert_eq!(reply(&mut reader), "NONE\n");
    stream
        .write_all(b"WAIT nope 20\nDEL a/b\nGET a/b\n")
        .unwrap();
    assert_eq!(reply(&mut reader), "NONE\n");
    assert_eq!(reply(&mut reader), "OK\n");
    assert_eq!(reply(&mut reader), "NONE\n");
}

#[test]
fn garbage_gets_err_and_does_not_disturb_a_good_client() {
    let server = start();
    let good = client(&server);
    good.put("k", "v").unwrap();
    for garbage in [
        &b"HELLO there\n"[..],
        b"GET bad key\n",
        b"PUT k\xff\n",
        b"WAIT k soon\n",
    ] {
        let (mut stream, mut reader) = raw(&server);
        stream.write_all(garbage).unwrap();
        assert!(reply(&mut reader).starts_with("ERR "));
        assert_eq!(reply(&mut reader), "", "the server closes after ERR");
    }
    let (mut stream, mut reader) = raw(&server);
    let long_line = vec![b'x'; 80 * 1024];
    let _ = stream.write_all(&long_line);
    let mut answer = String::new();
    // The server may reset the connection before its ERR is read.
    let _ = reader.read_line(&mut answer);
    assert!(answer.is_empty() || answer.starts_with("ERR "), "{answer}");
    let (mut stream, _) = raw(&server);
    stream.write_all(b"GET k").unwrap();
    stream.shutdown(Shutdown::Write).unwrap();
    assert_eq!(good.get("k").unwrap().as_deref(), Some("v"));
    good.put("k", "w").unwrap();
    assert_eq!(good.get("k").unwrap().as_deref(), Some("w"));
}

#[test]
fn an_out_of_range_wait_is_refused() {
    let server = start();
    let (mut stream, mut reader) = raw(&server);
    stream.write_all(b"WAIT k 99999999999\n").unwrap();
    assert!(reply(&mut reader).contains("timeout"));
}

#[test]
fn client_reconnects_once_when_the_server_closed_the_connection() {
    // A stand-in server that answers one request per connection and then
    // closes it, as a restarted or idle-pruning server would.
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let fake = thread::spawn(move || {
        for answer in ["OK\n", "VALUE v\n"] {
            let (stream, _) = listener.accept().unwrap();
            stream
                .set_read_timeout(Some(Duration::from_secs(10)))
                .unwrap();
            let mut request = String::new();
            BufReader::new(&stream).read_line(&mut request).unwrap();
            (&stream).write_all(answer.as_bytes()).unwrap();
        }
    });
    let rv = Rendezvous::open(&format!("tcp://{addr}")).unwrap();
    rv.put("k", "v").unwrap();
    assert_eq!(rv.get("k").unwrap().as_deref(), Some("v"));
    fake.join().unwrap();
}

#[test]
fn a_dead_server_gives_an_error_not_a_hang() {
    let server = start();
    let url = server.url();
    let rv = client(&server);
    rv.put("k", "v").unwrap();
    server.stop();
    let error = rv.get("k").unwrap_err();
    assert!(matches!(error, RendezvousError::Io { .. }), "{error}");
    let message = error.to_string();
    assert!(
        message.contains(&url) && message.contains("\"k\""),
        "{message}"
    );
    let error = Rendezvous::open(&url).unwrap_err();
    assert!(error.to_string().contains(&url), "{error}");
}

#[test]
fn stopping_ends_a_pending_wait() {
    let server = start();
    let rv = client(&server);
    let waiter = thread::spawn(move || rv.wait("never", Duration::from_secs(60)));
    thread::sleep(Duration::from_millis(100));
    server.stop();
    assert!(waiter.join().unwrap().is_err());
}

#[test]
fn unresolvable_address_is_a_spec_error() {
    let error = Rendezvous::open("tcp://no-port-here").unwrap_err();
    assert!(matches!(error, RendezvousError::Spec { .. }), "{error}");
    assert!(error.to_string().contains("tcp://no-port-here"), "{error}");
}

fn run_key(byte: u8) -> Option<std::sync::Arc<tether_auth::Key>> {
    Some(std::sync::Arc::new(
        tether_auth::Key::new(&[byte; 32], "test").unwrap(),
    ))
}

#[test]
fn a_keyed_server_takes_sealed_entries_only_and_stays_healthy() {
    let server = Server::bind("127.0.0.1:0")
        .unwrap()
        .with_key(run_key(1))
        .spawn()
        .unwrap();
    let member = client(&server).with_key(run_key(1));
    member.put("addr/a/0", "tcp=127.0.0.1:9").unwrap();
    // Junk, a forged entry, another run's key and a bare DEL: refused, the
    // entry stays as the member wrote it.
    let (mut stream, mut reader) = raw(&server);
    stream.write_all(b"PUT addr/a/0 tcp=10.9.9.9:9\n").unwrap();
    assert!(reply(&mut reader).starts_with("ERR the entry \"addr/a/0\" is not sealed"));
    assert!(client(&server).put("addr/a/0", "x").is_err());
    assert!(client(&server)
        .with_key(run_key(2))
        .put("addr/a/0", "x")
        .is_err());
    assert!(client(&server).remove("addr/a/0").is_err());
    assert_eq!(
        member.get("addr/a/0").unwrap().as_deref(),
        Some("tcp=127.0.0.1:9")
    );
    // What a keyless or wrongly keyed reader sees is not believed.
    assert_eq!(
        client(&server)
            .with_key(run_key(2))
            .get("addr/a/0")
            .unwrap(),
        None
    );
    member.remove("addr/a/0").unwrap();
    assert_eq!(member.get("addr/a/0").unwrap(), None);
}
