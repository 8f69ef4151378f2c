//! `hybrid` (WaitIO-Hybrid): a link for control frames and small
//! messages, and files for large payloads, composed as one [`Transport`].
//!
//! [`Hybrid`] wraps a link transport `A` (shared memory or TCP) and a
//! payload carrier `B` (files): a rendezvous `Data` frame above the
//! threshold has its payload written by `B` and only its announcement
//! sent on `A`; everything else goes to `A` as it is. The receiving side
//! reads announced payloads through `B` ([`Transport::place_in_file`]).
//! Both halves report in their own events, which the router drains.
//!
//! Why a wrapper that borrows: the transports are per process, `hybrid`
//! is per peer. One TCP transport carries hybrid and plain peers, and one
//! file transport carries the payloads of every hybrid peer and the
//! frames of peers reached through files, so the router builds a
//! `Hybrid` over its transports for the call that needs one, and the
//! choice stays per peer. Rails (`MultiRail<T>`) take the same shape.

use tether_proto::{FileData, FrameKind, PayloadSink, RmaOp, Transmit, WireError};

use super::api::{Caps, NoResource, PayloadFiles, RmaOutcome, Transport};
use super::events::Events;

pub struct Hybrid<'a, A, B> {
    link: &'a mut A,
    files: &'a mut B,
    /// Payloads above this many bytes go by `files`.
    threshold: u64,
}

impl<'a, A: Transport, B: PayloadFiles> Hybrid<'a, A, B> {
    pub fn new(link: &'a mut A, files: &'a mut B, threshold: u64) -> Self {
        Hybrid {
            link,
            files,
            threshold,
        }
    }

    /// Whether `t`'s payload goes by file.
    #[inline]
    fn by_file(&self, t: &Transmit) -> bool {
        t.header.kind == FrameKind::Data && t.payload.len() as u64 > self.threshold
    }
}

impl<A: Transport, B: PayloadFiles> Transport for Hybrid<'_, A, B> {
    /// The link's, except that remote memory moves no payload that goes
    /// by file.
    fn caps(&self) -> Caps {
        let link = self.link.caps();
        Caps {
            remote_memory: link.remote_memory.min(self.threshold),
            // Large payloads go by file, not in chunks on the link.
            stripe: None,
            ..link
        }
    }

    /// A payload written to its file before the link refuses the
    /// announcement stays written: the announcement given back is
    /// payload-less, so offering it again sends it on the link.
    fn send(&mut self, t: Transmit) -> Result<(), NoResource> {
        let t = if self.by_file(&t) {
            self.files.send_payload(t)
        } else {
            t
        };
        self.link.send(t)
    }

    fn rma(&mut self, op: &RmaOp) -> RmaOutcome {
        self.link.rma(op)
    }

    fn place(&mut self, peer: u32, sink: PayloadSink) {
        self.link.place(peer, sink);
    }

    fn place_in_file(&mut self, data: FileData) {
        let peer = data.peer;
        self.files.add_payload(data);
        self.link.place(peer, PayloadSink::None);
    }

    fn broke_protocol(&mut self, peer: u32, error: WireError) {
        self.link.broke_protocol(peer, error);
    }

    /// The link's; the files report in their own.
    fn events(&mut self) -> &mut Events {
        self.link.events()
    }

    fn has_output(&self) -> bool {
        self.link.has_output()
    }

    fn say_goodbye(&mut self) {
        self.link.say_goodbye();
    }

    fn all_goodbyes_heard(&self) -> bool {
        self.link.all_goodbyes_heard()
    }

    fn broadcast_abort(&mut self, code: i32) {
        self.link.broadcast_abort(code);
    }
}

#[cfg(test)]
mod tests {
    use tether_proto::{FrameHeader, TransmitPayload};

    use super::*;

    /// A link that records what it is given and refuses when full.
    #[derive(Default)]
    struct Link {
        sent: Vec<Transmit>,
        full: bool,
        remote_memory: u64,
        events: Events,
    }

    impl Transport for Link {
        fn caps(&self) -> Caps {
            Caps {
                eager_limit: Some(7),
                remote_memory: self.remote_memory,
                stripe: None,
                window_rma: None,
            }
        }
        fn send(&mut self, t: Transmit) -> Result<(), NoResource> {
            if self.full {
                return Err(NoResource(t));
            }
            self.sent.push(t);
            Ok(())
        }
        fn place(&mut self, _: u32, _: PayloadSink) {}
        fn broke_protocol(&mut self, _: u32, _: WireError) {}
        fn events(&mut self) -> &mut Events {
            &mut self.events
        }
        fn has_output(&self) -> bool {
            false
        }
        fn say_goodbye(&mut self) {}
        fn all_goodbyes_heard(&self) -> bool {
            true
        }
        fn broadcast_abort(&mut self, _: i32) {}
    }

    /// Files that record the payloads written and announce them.
    #[derive(Default)]
    struct Files {
        written: Vec<usize>,
    }

    impl PayloadFiles for Files {
        fn send_payload(&mut self, mut t: Transmit) -> Transmit {
            self.written.push(t.payload.len());
            t.payload = TransmitPayload::None;
            t.header.payload_len = 0;
            t
        }
        fn add_payload(&mut self, _: FileData) {}
    }

    fn frame(kind: FrameKind, len: usize) -> Transmit {
        let mut header = FrameHeader::new(kind);
        header.payload_len = len as u64;
        Transmit {
            peer: 1,
            header,
            payload: TransmitPayload::Owned(vec![0; len]),
            completes: None,
            copy_if_blocked: false,
        }
    }

    #[test]
    fn payloads_above_the_threshold_go_by_file_and_the_rest_on_the_link() {
        let (mut link, mut files) = (Link::default(), Files::default());
        let mut hybrid = Hybrid::new(&mut link, &mut files, 100);
        for t in [
            frame(FrameKind::Data, 101),
            frame(FrameKind::Data, 100),
            frame(FrameKind::Eager, 500),
            frame(FrameKind::Rts, 0),
        ] {
            hybrid.send(t).unwrap();
        }
        assert_eq!(files.written, vec![101]);
        let on_link: Vec<usize> = link.sent.iter().map(|t| t.payload.len()).collect();
        assert_eq!(on_link, vec![0, 100, 500, 0]);
        assert_eq!(link.sent[0].header.kind, FrameKind::Data);
    }

    #[test]
    fn an_announcement_the_link_refuses_comes_back_without_its_payload() {
        let (mut link, mut files) = (Link::default(), Files::default());
        link.full = true;
        let mut hybrid = Hybrid::new(&mut link, &mut files, 100);
        let Err(NoResource(back)) = hybrid.send(frame(FrameKind::Data, 4096)) else {
            panic!("a full link takes nothing");
        };
        assert_eq!(back.payload.len(), 0);
        link.full = false;
        Hybrid::new(&mut link, &mut files, 100).send(back).unwrap();
        assert_eq!(files.written, vec![4096], "written once");
        assert_eq!(link.sent.len(), 1);
    }

    #[test]
    fn remote_memory_stops_at_the_threshold() {
        let (mut link, mut files) = (Link::default(), Files::default());
        link.remote_memory = u64::MAX;
        let caps = Hybrid::new(&mut link, &mut files, 100).caps();
        assert_eq!(caps.remote_memory, 100);
        assert_eq!(caps.eager_limit, Some(7), "the link's otherwise");
        link.remote_memory = 0;
        assert_eq!(
            Hybrid::new(&mut link, &mut files, 100).caps().remote_memory,
            0
        );
    }
}
