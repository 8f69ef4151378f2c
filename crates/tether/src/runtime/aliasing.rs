//! The up-front check that a collective's send and receive buffers do not
//! share bytes.
//!
//! MPI forbids aliased buffers (MPI-4.0 2.3) and offers `MPI_IN_PLACE`
//! instead. Tether checks it before a collective starts because aliased
//! buffers are not merely wrong results here: a reduction reads its
//! operand from the send buffer while writing the receive buffer, and the
//! executor (`coll/exec.rs`) treats overlapping operands as a broken
//! invariant. `TETHER_IN_PLACE` leaves no send buffer (length 0), so it
//! never trips this check.

use crate::coll::Buffers;
use crate::error::{err, ErrorClass, Result};

/// `TETHER_ERR_ARG` when `buffers`' send and receive buffers overlap, naming
/// both (address and length) and the collective `what`. Buffers of no
/// bytes overlap nothing.
pub(super) fn check_disjoint(what: &str, buffers: &Buffers) -> Result<()> {
    let send = (buffers.send as usize, buffers.send_len);
    let recv = (buffers.recv as usize, buffers.recv_len);
    if !overlap(send, recv) {
        return Ok(());
    }
    Err(err(
        ErrorClass::Arg,
        format!(
            "{what}: sendbuf ({} bytes at {:#x}) overlaps recvbuf ({} bytes at {:#x}); \
             MPI forbids aliased buffers: pass TETHER_IN_PLACE where the collective allows it, \
             or separate buffers",
            send.1, send.0, recv.1, recv.0
        ),
    ))
}

/// Whether two (address, length) ranges share a byte. An end past the
/// address space counts as its end, so a bogus length cannot wrap.
fn overlap((a, a_len): (usize, usize), (b, b_len): (usize, usize)) -> bool {
    a_len > 0 && b_len > 0 && a < b.saturating_add(b_len) && b < a.saturating_add(a_len)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn buffers(send: usize, send_len: usize, recv: usize, recv_len: usize) -> Buffers {
        Buffers {
            send: send as *const u8,
            send_len,
            recv: recv as *mut u8,
            recv_len,
        }
    }

    #[test]
    fn overlapping_buffers_are_refused_naming_both() {
        let error = check_disjoint("allreduce", &buffers(0x1000, 32, 0x1010, 32)).unwrap_err();
        assert_eq!(error.class, ErrorClass::Arg);
        assert!(
            error.message.starts_with(
                "allreduce: sendbuf (32 bytes at 0x1000) overlaps recvbuf (32 bytes at 0x1010)"
            ),
            "{}",
            error.message
        );
        assert!(check_disjoint("bcast", &buffers(0x1000, 8, 0x1000, 8)).is_err());
        assert!(check_disjoint("gather", &buffers(0x1010, 8, 0x1000, 64)).is_err());
        assert!(check_disjoint("scatter", &buffers(0x1000, 64, 0x1038, 8)).is_err());
    }

    #[test]
    fn adjacent_empty_or_in_place_buffers_pass() {
        assert!(check_disjoint("allreduce", &buffers(0x1000, 16, 0x1010, 16)).is_ok());
        assert!(check_disjoint("allreduce", &buffers(0x1010, 16, 0x1000, 16)).is_ok());
        assert!(check_disjoint("gather", &buffers(0x1000, 0, 0x1000, 64)).is_ok());
        assert!(check_disjoint("allreduce", &buffers(0, 0, 0x1000, 64)).is_ok());
        assert!(check_disjoint("reduce", &buffers(0x1000, 64, 0x1000, 0)).is_ok());
        assert!(check_disjoint("x", &buffers(usize::MAX - 4, 16, 0x1000, 16)).is_ok());
    }
}
