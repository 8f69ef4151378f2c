//! A field's handshake: the other side's hello is received whenever it
//! arrives; once every peer program's came, each rank checks the two
//! sides against each other and plans what it exchanges with each rank.

use tether_proto::{Completion, CompletionError, Engine, Region};
use tether_redist::Side;

use super::steps::post_ack;
use super::{Field, HelloState, Receiver};
use crate::error::err;
use crate::error::ErrorClass;
use crate::field::wire::{self, Hello, Kind, CONTROL_CONTEXT};
use crate::field::Mode;
use crate::runtime::activities::Progress;

impl Field {
    /// Takes in the other side's hellos and, once all came, checks the
    /// two sides against each other and plans.
    pub(super) fn receive_hellos(&mut self, progress: &mut Progress<'_>) {
        let tag = wire::control_tag(self.key, Kind::Hello);
        let mut lost = None;
        for peer in &mut self.peers {
            if let HelloState::Waiting = peer.hello {
                if let Some((_, size)) =
                    progress
                        .engine
                        .iprobe(Some(peer.first), CONTROL_CONTEXT, Some(tag))
                {
                    let mut buffer = vec![0u8; size as usize];
                    let request = progress.engine.irecv(
                        Some(peer.first),
                        CONTROL_CONTEXT,
                        Some(tag),
                        Region {
                            ptr: buffer.as_mut_ptr(),
                            len: buffer.len(),
                        },
                    );
                    peer.hello = HelloState::Receiving { request, buffer };
                } else if progress.engine.is_lost(peer.first) {
                    lost = Some(peer.first);
                }
            }
            if let HelloState::Receiving { request, buffer } = &mut peer.hello {
                match progress.engine.take_completion(*request) {
                    None => {}
                    Some(Completion { error: Some(_), .. }) => lost = Some(peer.first),
                    Some(_) => {
                        let decoded = Hello::decode(buffer);
                        match decoded {
                            Some(hello) => peer.hello = HelloState::Arrived(Box::new(hello)),
                            None => {
                                let error = err(
                                    ErrorClass::Protocol,
                                    format!(
                                        "field {:?}: {} sent a hello this version cannot read",
                                        self.name,
                                        progress.universe.describe(peer.first)
                                    ),
                                );
                                self.failure.get_or_insert(error);
                                peer.hello = HelloState::Waiting;
                                return;
                            }
                        }
                    }
                }
            }
        }
        if let Some(peer) = lost {
            let error = self.transfer_error(progress, peer, CompletionError::PeerLost);
            self.fail(error);
            return;
        }
        if self.failure.is_some() || self.is_ready() {
            return;
        }
        if self
            .peers
            .iter()
            .all(|p| matches!(p.hello, HelloState::Arrived(_)))
        {
            self.agree_and_plan(progress.engine);
        }
    }

    pub(super) fn is_ready(&self) -> bool {
        self.peers.iter().all(|p| p.plan.is_some())
    }

    /// Checks each hello against this side and plans; any disagreement
    /// fails the field with `FieldMismatch`. Both sides run the same
    /// checks on the same two descriptions, so both reach one verdict.
    fn agree_and_plan(&mut self, engine: &mut Engine) {
        for index in 0..self.peers.len() {
            let HelloState::Arrived(hello) = &self.peers[index].hello else {
                unreachable!("called once every hello arrived");
            };
            if let Err(what) = self.compare(hello, self.peers[index].size) {
                let error = err(
                    ErrorClass::FieldMismatch,
                    format!(
                        "field {:?} (producer {:?}) disagrees with program {:?}: {what}",
                        self.name, self.producer, self.peers[index].name
                    ),
                );
                self.fail(error);
                return;
            }
        }
        let my_rank = self.my_rank as usize;
        for index in 0..self.peers.len() {
            let peer = &mut self.peers[index];
            let HelloState::Arrived(hello) = &peer.hello else {
                unreachable!("called once every hello arrived");
            };
            let plan = match self.mode {
                Mode::Put => tether_redist::plan(&self.side, &hello.dist, Side::Producer, my_rank),
                Mode::Get => tether_redist::plan(&hello.dist, &self.side, Side::Consumer, my_rank),
            };
            if self.mode == Mode::Put {
                let mut ranks: Vec<u32> = plan
                    .peers()
                    .iter()
                    .map(|p| peer.first + p.peer() as u32)
                    .collect();
                if self.my_rank == 0 {
                    ranks = (peer.first..peer.first + peer.size).collect();
                }
                let tag = wire::control_tag(self.key, Kind::Ack);
                peer.receivers = ranks
                    .into_iter()
                    .map(|rank| {
                        let (request, buffer) = post_ack(engine, rank, tag);
                        Receiver {
                            rank,
                            acked: None,
                            posted: Some((request, buffer)),
                        }
                    })
                    .collect();
            }
            peer.plan = Some(plan);
        }
    }

    /// What differs between this side and `hello`'s, described as
    /// expected (the producer's) against received (the consumer's).
    fn compare(&self, hello: &Hello, peer_size: u32) -> std::result::Result<(), String> {
        if hello.name != self.name || hello.producer != self.producer {
            return Err(format!(
                "its hello names field {:?} of producer {:?} (the two names share a tag: rename one)",
                hello.name, hello.producer
            ));
        }
        // Plans name the other side's ranks by the hello's distribution:
        // one that does not describe every joined process is refused
        // before any rank is addressed by it.
        if hello.dist.ranks() != peer_size as usize {
            return Err(format!(
                "its distribution places {} processes but the program has {peer_size} joined processes",
                hello.dist.ranks()
            ));
        }
        let expected_mode = match self.mode {
            Mode::Put => Mode::Get,
            Mode::Get => Mode::Put,
        };
        if hello.mode != expected_mode {
            return Err("both programs created it in the same mode".to_string());
        }
        let mine = (self.element.family(), self.element.size as u32);
        let theirs = (hello.family, hello.element_size);
        if mine != theirs {
            let (expected, received) = match self.mode {
                Mode::Put => (mine, theirs),
                Mode::Get => (theirs, mine),
            };
            return Err(format!(
                "element type: expected {} of {} bytes, received {} of {} bytes",
                expected.0.name(),
                expected.1,
                received.0.name(),
                received.1
            ));
        }
        let (producer, consumer) = match self.mode {
            Mode::Put => (&self.side, &hello.dist),
            Mode::Get => (&hello.dist, &self.side),
        };
        tether_redist::check(producer, consumer).map_err(|m| m.to_string())
    }
}
