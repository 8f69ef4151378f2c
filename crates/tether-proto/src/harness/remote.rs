//! Remote memory in the test world: every engine lives in this process,
//! so a remote key's address is an address here, and a put or get is a
//! copy — checked against its key as a transport checks it, and ending
//! as the test's model says.

use super::World;
use crate::rma::{Atomic, AtomicCode, PutSource, RmaKind, RmaOp, RmaStatus};

/// How the world's remote memory operations end (atomics as puts).
#[derive(Debug, Clone, Copy)]
pub struct RemoteModel {
    pub puts: RmaStatus,
    pub gets: RmaStatus,
}

/// One operation carried out.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RmaRecord {
    pub rank: u32,
    pub put: bool,
    pub bytes: usize,
    pub status: RmaStatus,
}

impl World {
    /// Lets every pair of ranks move rendezvous data by remote memory,
    /// both sides copying from `split_bytes` on (0: never), with puts and
    /// gets ending as `model` says.
    pub fn enable_remote_memory(&mut self, split_bytes: u64, model: RemoteModel) {
        let n = self.engines.len() as u32;
        for (rank, engine) in self.engines.iter_mut().enumerate() {
            for peer in (0..n).filter(|&p| p != rank as u32) {
                engine.set_remote_memory(peer, u64::MAX);
            }
            engine.set_split_bytes(split_bytes);
        }
        self.remote = Some(model);
    }

    /// Carries out `rank`'s remote memory operations.
    pub(super) fn run_rma(&mut self, rank: usize) -> bool {
        let mut moved = false;
        while let Some(op) = self.engines[rank].poll_rma() {
            moved = true;
            let status = self.execute(&op);
            self.rma_log.push(RmaRecord {
                rank: rank as u32,
                put: matches!(op.kind, RmaKind::Put(_)),
                bytes: op.len(),
                status,
            });
            self.engines[rank].rma_done(op, status);
        }
        moved
    }

    fn execute(&self, op: &RmaOp) -> RmaStatus {
        let model = self.remote.expect("remote memory enabled");
        let address = op
            .remote_address()
            .expect("the engine asks only for accesses inside the key");
        let remote = address as *mut u8;
        match &op.kind {
            RmaKind::Put(_) | RmaKind::Atomic(_) if model.puts != RmaStatus::Done => model.puts,
            RmaKind::Get(_) if model.gets != RmaStatus::Done => model.gets,
            // SAFETY: the key names a live buffer of another engine of this
            // world (checked above to hold the access), and the source is
            // the request's memory, valid until `rma_done`.
            RmaKind::Put(PutSource::Region(r)) => unsafe {
                std::ptr::copy_nonoverlapping(r.ptr, remote, r.len);
                RmaStatus::Done
            },
            // SAFETY: as above, for the packed runs.
            RmaKind::Put(PutSource::Gathered(g)) => unsafe {
                let bytes = g.to_vec();
                std::ptr::copy_nonoverlapping(bytes.as_ptr(), remote, bytes.len());
                RmaStatus::Done
            },
            // SAFETY: as above, in the other direction.
            RmaKind::Get(r) => unsafe {
                std::ptr::copy_nonoverlapping(remote, r.ptr, r.len);
                RmaStatus::Done
            },
            // SAFETY: as above; the result region is the origin's, valid
            // until `rma_done`.
            RmaKind::Atomic(a) => unsafe {
                let size = usize::from(a.size);
                let mut old = [0u8; 8];
                std::ptr::copy_nonoverlapping(remote, old.as_mut_ptr(), size);
                let new = atomic_value(a, u64::from_le_bytes(old));
                if let Some(result) = a.result {
                    std::ptr::copy_nonoverlapping(old.as_ptr(), result.ptr, size);
                }
                std::ptr::copy_nonoverlapping(new.to_le_bytes().as_ptr(), remote, size);
                RmaStatus::Done
            },
        }
    }
}

/// The value an atomic leaves where the value was `old` (the low
/// `size` bytes count).
fn atomic_value(a: &Atomic, old: u64) -> u64 {
    let operand = u64::from_le_bytes(a.operand);
    match a.code {
        AtomicCode::Add => old.wrapping_add(operand),
        AtomicCode::Swap => operand,
        AtomicCode::CompareSwap => {
            let mask = if a.size == 8 {
                u64::MAX
            } else {
                u64::from(u32::MAX)
            };
            if old & mask == operand & mask {
                u64::from_le_bytes(a.swap)
            } else {
                old
            }
        }
        AtomicCode::And => old & operand,
        AtomicCode::Or => old | operand,
        AtomicCode::Xor => old ^ operand,
    }
}
