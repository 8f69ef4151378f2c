//! Remote memory in the test world: every engine lives in this process,
//! so a remote key's address is an address here, and a put or get is a
//! copy — checked against its key as a transport checks it, and ending
//! as the test's model says.

use super::World;
use crate::rma::{PutSource, RmaKind, RmaOp, RmaStatus};

/// How the world's remote memory operations end.
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
            RmaKind::Put(_) if model.puts != RmaStatus::Done => model.puts,
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
        }
    }
}
