//! Delivering a sound message file: the link's own frames (goodbye,
//! abort) here; a data-path frame is reported to the router and its file
//! stays in the inbox until the router has delivered the frame and placed
//! its payload (`Transport::place`), which is then read straight
//! from the file into its place and verified there. A file that fails its
//! checks after its frame was placed keeps the place: the file that
//! replaces it is read into the same buffer.

use tether_proto::{classify, Class, FrameHeader, FrameKind, LinkKind, PayloadSink, WireError};

use super::chunks::{self, Progress};
use super::io::Checksum;
use super::parts::Incoming;
use super::{Arrival, FileTransport};
use crate::error::{err, ErrorClass};
use crate::transport::events::LinkEvent;

/// Where the next file of a peer stands with the router.
#[derive(Debug, Default)]
pub(super) enum Placement {
    /// Not reported.
    #[default]
    Unreported,
    /// Its frame (as the engine sees it) was reported; no place yet.
    Reported(FrameHeader),
    /// Its frame was delivered, and its payload goes here.
    Placed(FrameHeader, PayloadSink),
}

impl FileTransport {
    /// Delivers the file of `arrival`, which passed the file checks.
    /// Returns whether it was consumed.
    pub(super) fn deliver(&mut self, arrival: Arrival<'_>) -> bool {
        let Arrival {
            from, frame, path, ..
        } = arrival;
        if self.peer(from).incoming.is_some() {
            return self.deliver_part(arrival);
        }
        match classify(frame, LinkKind::File, true) {
            Ok(Class::Data) => {}
            Ok(class @ (Class::Bye | Class::Abort(_))) => {
                return self.deliver_control(arrival, class)
            }
            Ok(Class::Handshake) => {
                let e = WireError::UnexpectedFrame {
                    got: frame.kind,
                    state: "in a message file",
                };
                self.broke_protocol_in(from, path, e);
                return true;
            }
            Err(e) => {
                self.broke_protocol_in(from, path, e);
                return true;
            }
        }
        // The engine sees a payload sent in parts as one frame.
        let mut whole = *frame;
        if chunks::is_first_part(frame) {
            whole.payload_len = frame.msg_size;
        }
        match std::mem::take(&mut self.peer(from).placement) {
            Placement::Unreported => {
                self.peer(from).placement = Placement::Reported(whole);
                self.events.frames.push_back((from, whole));
                false
            }
            reported @ Placement::Reported(_) => {
                self.peer(from).placement = reported;
                false
            }
            Placement::Placed(placed, _) if placed != whole => {
                let e = WireError::UnexpectedFrame {
                    got: frame.kind,
                    state: "in place of a refused file, but not the same frame",
                };
                self.broke_protocol_in(from, path, e);
                true
            }
            Placement::Placed(placed, sink) => match self.fill(arrival, sink) {
                None => true,
                Some(sink) => {
                    self.peer(from).placement = Placement::Placed(placed, sink);
                    false
                }
            },
        }
    }

    /// Says where the payload of the data-path frame reported for `peer`'s
    /// next file goes, and reads on.
    pub(super) fn place_frame(&mut self, peer: u32, sink: PayloadSink) {
        let state = self.peer(peer);
        let Placement::Reported(header) = std::mem::take(&mut state.placement) else {
            return;
        };
        state.placement = Placement::Placed(header, sink);
        while self.consume(peer) {}
    }

    /// The engine refused the frame of `peer`'s next file: the peer broke
    /// the protocol.
    pub(super) fn refuse_frame(&mut self, peer: u32, e: WireError) {
        let seq = self.peer(peer).recv_seq;
        let path = self.layout.incoming_message(peer, seq);
        self.peer(peer).placement = Placement::Unreported;
        self.broke_protocol_in(peer, &path, e);
    }

    /// Reads the payload of `arrival` into `sink` and verifies it there.
    /// `None`: consumed (filled, or a protocol error reported); the sink
    /// back when the file failed its checks and was refused, for the file
    /// that replaces it.
    fn fill(&mut self, arrival: Arrival<'_>, sink: PayloadSink) -> Option<PayloadSink> {
        let Arrival {
            from, frame, path, ..
        } = arrival;
        let data = frame.kind == FrameKind::Data;
        match sink {
            PayloadSink::None => None,
            PayloadSink::Region {
                region,
                discard,
                token,
            } if chunks::is_first_part(frame) => {
                if region.len as u64 != frame.msg_size {
                    self.broke_protocol_in(from, path, WireError::data_not_awaited());
                    return None;
                }
                let mut incoming = Incoming::new(
                    Progress {
                        first: *frame,
                        offset: 0,
                    },
                    region,
                    token,
                );
                if !self.read_part(arrival, &mut incoming) {
                    let (region, token) = incoming.into_place();
                    return Some(PayloadSink::Region {
                        region,
                        discard,
                        token,
                    });
                }
                self.peer(from).incoming = Some(incoming);
                None
            }
            PayloadSink::Region {
                region,
                discard,
                token,
            } => {
                if data && region.len as u64 != frame.payload_len {
                    self.broke_protocol_in(from, path, WireError::data_not_awaited());
                    return None;
                }
                let read = if region.len as u64 == frame.payload_len {
                    // SAFETY: a receive's granted or posted buffer is
                    // reserved for it until it completes.
                    let dst = unsafe { std::slice::from_raw_parts_mut(region.ptr, region.len) };
                    self.read_arrival(arrival, dst, Checksum::Beside)
                } else {
                    // Truncated: the whole file is verified, its start kept.
                    let mut whole = vec![0u8; frame.payload_len as usize];
                    let read = self.read_arrival(arrival, &mut whole, Checksum::Beside);
                    if read {
                        // SAFETY: as above; `region.len` is less than the
                        // payload (the engine's prefix of the buffer).
                        unsafe {
                            region
                                .ptr
                                .copy_from_nonoverlapping(whole.as_ptr(), region.len)
                        };
                    }
                    read
                };
                if read {
                    self.events.filled.push((token, None));
                    None
                } else {
                    Some(PayloadSink::Region {
                        region,
                        discard,
                        token,
                    })
                }
            }
            PayloadSink::Owned { .. } if data => {
                self.broke_protocol_in(from, path, WireError::data_not_awaited());
                None
            }
            PayloadSink::Owned { mut buf, token } => {
                if self.read_arrival(arrival, &mut buf, Checksum::Beside) {
                    self.events.filled.push((token, Some(buf)));
                    None
                } else {
                    Some(PayloadSink::Owned { buf, token })
                }
            }
        }
    }

    /// The link's own frames: a goodbye ends the peer's files, an abort
    /// ends the universe.
    fn deliver_control(&mut self, arrival: Arrival<'_>, class: Class) -> bool {
        let mut payload = vec![0u8; arrival.frame.payload_len as usize];
        if !self.read_arrival(arrival, &mut payload, Checksum::Beside) {
            return false;
        }
        let from = arrival.from;
        match class {
            Class::Bye => {
                self.peer(from).bye_received = true;
                let who = self.universe.describe(from);
                self.lose(
                    from,
                    err(ErrorClass::PeerLost, format!("{who} has finalized")),
                );
            }
            Class::Abort(code) => self
                .events
                .links
                .push(LinkEvent::Abort { peer: from, code }),
            Class::Data | Class::Handshake => {}
        }
        true
    }
}
