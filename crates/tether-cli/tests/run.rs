//! `tether run` end to end, with shell commands as programs. Every run is
//! bounded by a watchdog that kills it and fails the test.

use std::io::{BufRead, BufReader, Read};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::mpsc;
use std::thread;
use std::time::{Duration, Instant};

/// Longest any run in these tests may take.
const LIMIT: Duration = Duration::from_secs(20);

struct Finished {
    status: ExitStatus,
    stdout: String,
    stderr: String,
    elapsed: Duration,
}

fn spawn(args: &[&str], env: &[(&str, &str)]) -> Child {
    Command::new(env!("CARGO_BIN_EXE_tether"))
        .args(args)
        .envs(env.iter().copied())
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

fn collect(source: impl Read + Send + 'static) -> thread::JoinHandle<String> {
    thread::spawn(move || {
        let mut text = String::new();
        let _ = BufReader::new(source).read_to_string(&mut text);
        text
    })
}

/// Waits for `child` within [`LIMIT`], killing it and failing otherwise;
/// collects the output streams not taken yet.
fn finish(mut child: Child, started: Instant) -> Finished {
    let stdout = child.stdout.take().map(collect);
    let stderr = child.stderr.take().map(collect);
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if started.elapsed() > LIMIT {
            let _ = child.kill();
            let _ = child.wait();
            panic!("tether run did not end within {LIMIT:?}");
        }
        thread::sleep(Duration::from_millis(20));
    };
    Finished {
        status,
        stdout: stdout.map(|t| t.join().unwrap()).unwrap_or_default(),
        stderr: stderr.map(|t| t.join().unwrap()).unwrap_or_default(),
        elapsed: started.elapsed(),
    }
}

fn run(args: &[&str]) -> Finished {
    run_with_env(args, &[])
}

fn run_with_env(args: &[&str], env: &[(&str, &str)]) -> Finished {
    let started = Instant::now();
    finish(spawn(args, env), started)
}

fn sorted_lines(text: &str) -> Vec<&str> {
    let mut lines: Vec<&str> = text.lines().collect();
    lines.sort_unstable();
    lines
}

#[test]
fn prefixes_and_environment_of_two_segments() {
    let show = "echo $TETHER_PROGRAM $TETHER_RANK $TETHER_SIZE $TETHER_PROGRAMS; echo oops >&2";
    let done = run(&[
        "run", "--name", "sim", "-n", "2", "sh", "-c", show, ":", "--name", "ml", "-n", "3", "sh",
        "-c", show,
    ]);
    assert!(done.status.success(), "{}", done.stderr);
    assert_eq!(
        sorted_lines(&done.stdout),
        [
            "[ml:0] ml 0 3 sim,ml",
            "[ml:1] ml 1 3 sim,ml",
            "[ml:2] ml 2 3 sim,ml",
            "[sim:0] sim 0 2 sim,ml",
            "[sim:1] sim 1 2 sim,ml",
        ]
    );
    assert_eq!(
        sorted_lines(&done.stderr),
        [
            "[ml:0] oops",
            "[ml:1] oops",
            "[ml:2] oops",
            "[sim:0] oops",
            "[sim:1] oops"
        ]
    );
}

#[test]
fn every_child_shares_the_run_id_and_the_rendezvous() {
    let show = "echo $TETHER_RUN_ID $TETHER_RENDEZVOUS";
    let done = run(&[
        "run", "--name", "a", "-n", "2", "sh", "-c", show, ":", "--name", "b", "sh", "-c", show,
    ]);
    assert!(done.status.success(), "{}", done.stderr);
    let values: Vec<&str> = done
        .stdout
        .lines()
        .map(|line| line.split_once("] ").unwrap().1)
        .collect();
    assert_eq!(values.len(), 3);
    assert!(values.iter().all(|v| *v == values[0]), "{values:?}");
    let (run_id, rendezvous) = values[0].split_once(' ').unwrap();
    assert_eq!(run_id.len(), 16);
    assert!(run_id.chars().all(|c| c.is_ascii_hexdigit()), "{run_id}");
    assert!(rendezvous.starts_with("tcp://127.0.0.1:"), "{rendezvous}");
}

#[test]
fn a_given_rendezvous_is_passed_on() {
    let done = run(&[
        "run",
        "--rendezvous",
        "/shared/rv",
        "--name",
        "a",
        "-n",
        "1",
        "sh",
        "-c",
        "echo $TETHER_RENDEZVOUS",
    ]);
    assert!(done.status.success(), "{}", done.stderr);
    assert_eq!(done.stdout, "[a:0] /shared/rv\n");
}

#[test]
fn the_launchers_rendezvous_server_refuses_entries_without_the_runs_key() {
    // bash's /dev/tcp speaks the line protocol without a client library;
    // it does not seal its entry with the run's key, so the server
    // refuses it, and the waiters never see it.
    let connect = "a=${TETHER_RENDEZVOUS#tcp://}; exec 3<>/dev/tcp/${a%:*}/${a##*:}";
    let put = format!(
        "{connect}; echo \"PUT greeting hello from $TETHER_PROGRAM\" >&3; read -r r <&3; echo $r"
    );
    let wait = format!("{connect}; echo 'WAIT greeting 1000' >&3; read -r r <&3; echo $r");
    let done = run(&[
        "run", "--name", "a", "-n", "1", "bash", "-c", &put, ":", "--name", "b", "-n", "2", "bash",
        "-c", &wait,
    ]);
    assert!(done.status.success(), "{}", done.stderr);
    assert_eq!(
        sorted_lines(&done.stdout),
        [
            "[a:0] ERR the entry \"greeting\" is not sealed with this run's key; refused",
            "[b:0] NONE",
            "[b:1] NONE"
        ]
    );
}

#[test]
fn lines_of_concurrent_children_never_mix() {
    let print = "i=0; while [ $i -lt 200 ]; do printf '%01000d\\n' $TETHER_RANK; i=$((i+1)); done";
    let done = run(&["run", "--name", "a", "-n", "4", "sh", "-c", print]);
    assert!(done.status.success(), "{}", done.stderr);
    let lines: Vec<&str> = done.stdout.lines().collect();
    assert_eq!(lines.len(), 800);
    for line in lines {
        let rank = &line[3..4];
        assert_eq!(line, format!("[a:{rank}] {rank:0>1000}"));
    }
}

#[test]
fn a_segment_without_n_runs_once_without_rank() {
    let done = run_with_env(
        &[
            "run",
            "--name",
            "solo",
            "sh",
            "-c",
            "echo rank=${TETHER_RANK-unset} size=${TETHER_SIZE-unset} $TETHER_PROGRAM",
        ],
        &[("TETHER_RANK", "7"), ("TETHER_SIZE", "9")],
    );
    assert!(done.status.success(), "{}", done.stderr);
    assert_eq!(done.stdout, "[solo] rank=unset size=unset solo\n");
}

#[test]
fn a_failing_child_ends_the_run_with_its_code() {
    let done = run(&[
        "run",
        "--name",
        "sim",
        "-n",
        "2",
        "sh",
        "-c",
        "[ $TETHER_RANK = 1 ] && exit 3; sleep 30",
        ":",
        "--name",
        "ml",
        "-n",
        "1",
        "sleep",
        "30",
    ]);
    assert_eq!(done.status.code(), Some(3), "{}", done.stderr);
    assert!(done.elapsed < Duration::from_secs(10), "{:?}", done.elapsed);
    assert!(
        done.stderr.contains("tether run: sim:1 exited with code 3"),
        "{}",
        done.stderr
    );
}

#[test]
fn a_child_killed_by_a_signal_gives_128_plus_the_signal() {
    let done = run(&[
        "run",
        "--name",
        "a",
        "-n",
        "1",
        "sh",
        "-c",
        "kill -9 $$",
        ":",
        "--name",
        "b",
        "-n",
        "1",
        "sleep",
        "30",
    ]);
    assert_eq!(done.status.code(), Some(137), "{}", done.stderr);
    assert!(
        done.stderr.contains("a:0 killed by signal 9"),
        "{}",
        done.stderr
    );
}

#[test]
fn the_timeout_ends_the_run_with_124() {
    let done = run(&[
        "run",
        "--timeout",
        "1",
        "--name",
        "a",
        "-n",
        "2",
        "sleep",
        "30",
    ]);
    assert_eq!(done.status.code(), Some(124), "{}", done.stderr);
    assert!(done.elapsed < Duration::from_secs(10), "{:?}", done.elapsed);
    assert!(
        done.stderr.contains("tether run: timeout after 1 s"),
        "{}",
        done.stderr
    );
}

#[test]
fn sigterm_to_the_launcher_reaches_the_children() {
    let started = Instant::now();
    let mut child = spawn(
        &[
            "run",
            "--name",
            "a",
            "-n",
            "2",
            "sh",
            "-c",
            "echo ready; exec sleep 30",
        ],
        &[],
    );
    let (lines, ready) = mpsc::channel();
    let stdout = child.stdout.take().unwrap();
    let reader = thread::spawn(move || {
        let mut text = String::new();
        for line in BufReader::new(stdout).lines() {
            let line = line.unwrap();
            let _ = lines.send(());
            text.push_str(&line);
            text.push('\n');
        }
        text
    });
    for _ in 0..2 {
        if ready.recv_timeout(LIMIT).is_err() {
            let _ = child.kill();
            panic!("the children did not start");
        }
    }
    // SAFETY: kill has no memory-safety preconditions; the pid is our child's.
    unsafe {
        libc::kill(child.id() as libc::pid_t, libc::SIGTERM);
    }
    let done = finish(child, started);
    assert_eq!(done.status.code(), Some(128 + libc::SIGTERM));
    assert!(
        done.stderr.contains("received signal 15"),
        "{}",
        done.stderr
    );
    assert_eq!(
        sorted_lines(&reader.join().unwrap()),
        ["[a:0] ready", "[a:1] ready"]
    );
}

#[test]
fn a_command_that_cannot_start_gives_127() {
    let done = run(&["run", "--name", "a", "-n", "1", "/nonexistent/program"]);
    assert_eq!(done.status.code(), Some(127));
    assert!(
        done.stderr
            .contains("cannot start a:0 (/nonexistent/program)"),
        "{}",
        done.stderr
    );
}

#[test]
fn env_options_reach_only_their_own_segment() {
    let show = "echo ${COLOUR-unset} ${SHAPE-unset} ${SIZE_HINT-unset} $INHERITED";
    let done = run_with_env(
        &[
            "run",
            "--name",
            "a",
            "-n",
            "2",
            "--env",
            "COLOUR=red",
            "--env=SHAPE=x=1",
            "sh",
            "-c",
            show,
            ":",
            "--name",
            "b",
            "--env",
            "COLOUR=blue",
            "--env",
            "INHERITED=mine",
            "--env",
            "COLOUR=green",
            "sh",
            "-c",
            show,
        ],
        &[("INHERITED", "launcher"), ("SIZE_HINT", "kept")],
    );
    assert!(done.status.success(), "{}", done.stderr);
    assert_eq!(
        sorted_lines(&done.stdout),
        [
            "[a:0] red x=1 kept launcher",
            "[a:1] red x=1 kept launcher",
            "[b] green unset kept mine",
        ]
    );
    let done = run(&["run", "--name", "a", "--env", "TETHER_SIZE=4", "true"]);
    assert_eq!(done.status.code(), Some(2));
    assert!(
        done.stderr.contains("tether run sets TETHER_SIZE itself"),
        "{}",
        done.stderr
    );
}

#[test]
fn invalid_syntax_is_a_usage_error() {
    for args in [
        &["run"][..],
        &["run", "--name", "a"],
        &["run", "-n", "2", "true"],
        &["run", "--name", "a", "-n", "0", "true"],
        &["run", "--name", "a", "--frobnicate", "true"],
        &["run", "--name", "a", "true", ":"],
        &["run", "--timeout", "soon", "--name", "a", "true"],
        &["run", "--name", "a", "true", ":", "--name", "a", "true"],
        &["run", "--name", "a", "--env", "NOVALUE", "true"],
    ] {
        let done = run(args);
        assert_eq!(done.status.code(), Some(2), "{args:?}");
        assert!(
            done.stderr.starts_with("error: "),
            "{args:?}: {}",
            done.stderr
        );
    }
    let done = run(&["run", "--name", "a", "true", ":", "--name", "a", "true"]);
    assert!(
        done.stderr.contains("\"a\" is given to two segments"),
        "{}",
        done.stderr
    );
    assert!(done.stderr.contains("Usage: tether run"), "{}", done.stderr);
}

/// The CPUs `/proc/self/status` of each child lists, by label.
fn cpus_of_children(args: &[&str]) -> Vec<String> {
    let done = run(args);
    assert!(done.status.success(), "{}", done.stderr);
    sorted_lines(&done.stdout)
        .into_iter()
        .map(|line| {
            line.replace("Cpus_allowed_list:", "")
                .split_whitespace()
                .collect::<Vec<_>>()
                .join(" ")
        })
        .collect()
}

#[test]
fn bind_to_core_places_ranks_round_robin_and_leaves_others_alone() {
    let show = "grep Cpus_allowed_list /proc/self/status";
    let unbound = cpus_of_children(&["run", "--name", "a", "-n", "1", "sh", "-c", show]);
    let all = unbound[0].split(' ').nth(1).unwrap().to_string();
    let bound = cpus_of_children(&[
        "run",
        "--bind-to",
        "core",
        "--name",
        "a",
        "-n",
        "3",
        "sh",
        "-c",
        show,
        ":",
        "--name",
        "b",
        "-n",
        "1",
        "sh",
        "-c",
        show,
        ":",
        "--name",
        "c",
        "sh",
        "-c",
        show,
    ]);
    // CPUs of the launcher, in order: what the children must cycle through.
    let mut cpus = Vec::new();
    for part in all.split(',') {
        match part.split_once('-') {
            Some((lo, hi)) => cpus.extend(lo.parse::<usize>().unwrap()..=hi.parse().unwrap()),
            None => cpus.push(part.parse().unwrap()),
        }
    }
    let expect = |i: usize| cpus[i % cpus.len()].to_string();
    assert_eq!(
        bound,
        [
            format!("[a:0] {}", expect(0)),
            format!("[a:1] {}", expect(1)),
            format!("[a:2] {}", expect(2)),
            format!("[b:0] {}", expect(3)),
            format!("[c] {all}"),
        ],
        "a program without -n keeps every CPU"
    );
}
