//! The doorbell a sleeping process is woken with: a datagram socket in the
//! abstract Unix namespace (no file, nothing to clean up, gone with the
//! process), named by the owner's pid and start time. The owner registers
//! it in the same epoll as its TCP sockets, so one wait sleeps on both.
//! Senders send it an empty datagram only when the owner's
//! [`tether_ring::Doorbell`] says it sleeps.

use std::io;
use std::os::linux::net::SocketAddrExt;
use std::os::unix::net::{SocketAddr, UnixDatagram};

fn address(pid: u32, start: u64) -> io::Result<SocketAddr> {
    SocketAddr::from_abstract_name(format!("tether-bell-{pid}-{start}").as_bytes())
}

/// The receiving end, owned by the process it wakes.
pub struct Bell {
    pub socket: mio::net::UnixDatagram,
}

impl Bell {
    pub fn bind(pid: u32, start: u64) -> io::Result<Bell> {
        let socket = UnixDatagram::bind_addr(&address(pid, start)?)?;
        socket.set_nonblocking(true)?;
        Ok(Bell {
            socket: mio::net::UnixDatagram::from_std(socket),
        })
    }

    /// Reads every pending ring.
    pub fn drain(&self) {
        let mut buf = [0u8; 8];
        while self.socket.recv(&mut buf).is_ok() {}
    }
}

/// The sending side: one unbound socket for every peer.
pub struct Ringer {
    socket: UnixDatagram,
}

impl Ringer {
    pub fn new() -> io::Result<Ringer> {
        let socket = UnixDatagram::unbound()?;
        socket.set_nonblocking(true)?;
        Ok(Ringer { socket })
    }

    /// The address of the doorbell of (`pid`, `start`), checked by ringing
    /// it once: an error means this process cannot wake that one (another
    /// network namespace, or the process is gone).
    pub fn reach(&self, pid: u32, start: u64) -> io::Result<SocketAddr> {
        let addr = address(pid, start)?;
        match self.socket.send_to_addr(&[], &addr) {
            Ok(_) => Ok(addr),
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => Ok(addr),
            Err(e) => Err(e),
        }
    }

    /// Wakes the owner of `addr`. A full queue means it has wake-ups
    /// pending already; any other failure means it is gone, which its
    /// liveness check reports.
    pub fn ring(&self, addr: &SocketAddr) {
        let _ = self.socket.send_to_addr(&[], addr);
    }
}
