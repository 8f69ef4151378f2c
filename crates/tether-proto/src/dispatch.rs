//! The one place a decoded frame header is routed: to the engine's data
//! path, to the link's handshake, to the link's end (goodbye, abort), or
//! to a payload that waits in a file.
//!
//! Every transport decodes a header with [`FrameHeader::decode`] and hands
//! it to [`dispatch`], then does what the returned [`Dispatch`] says; no
//! transport matches on frame kinds to decide where a frame goes. Which
//! frames a link may carry depends on its [`LinkKind`]: handshakes only on
//! a stream, data only once the stream's peer is known, `PartRead` only on
//! a shared-memory ring. A frame a link may not carry is a
//! [`WireError::UnexpectedFrame`]: the peer broke the protocol.
//!
//! Contract: [`dispatch`] never blocks and reads nothing from the link; the
//! header's payload (`payload_len` bytes, bounded by the decoder) is still
//! on the link and is the caller's to read where the result says.

use crate::engine::{Engine, PayloadSink, SinkToken};
use crate::request::Region;
use crate::wire::{FrameHeader, FrameKind, WireError, FLAG_PAYLOAD_IN_FILE};

/// What kind of link a frame arrived on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LinkKind {
    /// A byte stream with a handshake (TCP): data frames only after it.
    Stream,
    /// A shared-memory ring: attached, so no handshake.
    Ring,
    /// Message files in a shared directory: no handshake.
    File,
}

impl LinkKind {
    fn describe(self) -> &'static str {
        match self {
            LinkKind::Stream => "on a TCP connection",
            LinkKind::Ring => "on a shared-memory ring",
            LinkKind::File => "in a message file",
        }
    }
}

/// What the transport does with a frame, by [`dispatch`].
#[derive(Debug)]
pub enum Dispatch {
    /// A data-path frame the engine took: read the payload where the sink
    /// says, then call [`Engine::payload_done`] with its token.
    Payload(PayloadSink),
    /// A handshake frame (`Hello`, `HelloAck`, `HelloReject`): read its
    /// payload and hand both to the link's handshake.
    Handshake(FrameHeader),
    /// The peer finalized: it sends nothing more on this link.
    Bye,
    /// The peer aborts the universe with this exit code.
    Abort(i32),
    /// A rendezvous `Data` frame whose payload waits in a file (`hybrid`):
    /// the file transport reads it into the receive.
    InFile(FileData),
    /// Shared memory's split copy: the receiver read its part of
    /// `sender_req`'s buffer (`ok`), or could not.
    PartRead { sender_req: u64, ok: bool },
}

/// A rendezvous `Data` frame whose payload waits in a file, matched to
/// its receive: fill `region` from the file, then call
/// [`Engine::payload_done`] with `token`.
#[derive(Debug)]
pub struct FileData {
    /// The peer that announced it.
    pub peer: u32,
    /// The frame as if the payload had followed it: `payload_len` is the
    /// message size and the in-file flag is cleared.
    pub header: FrameHeader,
    pub region: Region,
    pub token: SinkToken,
}

/// Routes `header`, which arrived on a link of `kind` from the peer of
/// `engine` (`None` on a stream before its handshake names the peer).
/// Data-path frames go to [`Engine::on_header`] here and nowhere else.
pub fn dispatch(
    engine: Option<(&mut Engine, u32)>,
    header: &FrameHeader,
    kind: LinkKind,
) -> Result<Dispatch, WireError> {
    let unexpected = |state| {
        Err(WireError::UnexpectedFrame {
            got: header.kind,
            state,
        })
    };
    match header.kind {
        FrameKind::Hello | FrameKind::HelloAck | FrameKind::HelloReject => match kind {
            LinkKind::Stream => Ok(Dispatch::Handshake(*header)),
            other => unexpected(other.describe()),
        },
        FrameKind::PartRead => match kind {
            LinkKind::Ring => Ok(Dispatch::PartRead {
                sender_req: header.sender_req,
                ok: header.tag == 0,
            }),
            LinkKind::Stream => unexpected("on a TCP connection (shared memory only)"),
            LinkKind::File => unexpected("in a message file (shared memory only)"),
        },
        FrameKind::Bye => Ok(Dispatch::Bye),
        FrameKind::Abort => Ok(Dispatch::Abort(header.tag)),
        FrameKind::Eager | FrameKind::Rts | FrameKind::Cts | FrameKind::Data => {
            let Some((engine, peer)) = engine else {
                return unexpected("before the handshake completed");
            };
            if header.flags & FLAG_PAYLOAD_IN_FILE != 0 {
                if kind == LinkKind::File {
                    return unexpected("in a message file (a payload in another file)");
                }
                return in_file(engine, peer, *header);
            }
            engine.on_header(peer, header).map(Dispatch::Payload)
        }
    }
}

/// [`dispatch`] for a frame the caller already knows is a data-path frame
/// (its own framing said so, like a one-line frame of shared memory):
/// where its payload goes. Anything else is a
/// [`WireError::UnexpectedFrame`].
pub fn dispatch_data(
    engine: &mut Engine,
    peer: u32,
    header: &FrameHeader,
    kind: LinkKind,
) -> Result<PayloadSink, WireError> {
    match dispatch(Some((engine, peer)), header, kind)? {
        Dispatch::Payload(sink) => Ok(sink),
        _ => Err(WireError::UnexpectedFrame {
            got: header.kind,
            state: "where a data-path frame was expected",
        }),
    }
}

/// A `Data` frame announcing that its payload waits in a file: matched
/// to its receive as if the payload had followed it.
fn in_file(engine: &mut Engine, peer: u32, mut header: FrameHeader) -> Result<Dispatch, WireError> {
    if header.kind != FrameKind::Data {
        return Err(WireError::UnexpectedFrame {
            got: header.kind,
            state: "with its payload in a file (only rendezvous data may be)",
        });
    }
    if header.payload_len != 0 {
        return Err(WireError::DataLength {
            expected: 0,
            got: header.payload_len,
        });
    }
    header.payload_len = header.msg_size;
    header.flags &= !FLAG_PAYLOAD_IN_FILE;
    match engine.on_header(peer, &header)? {
        PayloadSink::None => Ok(Dispatch::Payload(PayloadSink::None)),
        PayloadSink::Region { region, token, .. } => Ok(Dispatch::InFile(FileData {
            peer,
            header,
            region,
            token,
        })),
        PayloadSink::Owned { .. } => Err(WireError::data_not_awaited()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::EngineConfig;

    const PEER: u32 = 1;

    fn engine() -> Engine {
        Engine::new(EngineConfig {
            me: 0,
            eager_limit: 64,
        })
    }

    fn frame(kind: FrameKind) -> FrameHeader {
        FrameHeader::new(kind)
    }

    fn refused(result: Result<Dispatch, WireError>) -> bool {
        matches!(result, Err(WireError::UnexpectedFrame { .. }))
    }

    #[test]
    fn handshakes_only_on_streams() {
        for kind in [
            FrameKind::Hello,
            FrameKind::HelloAck,
            FrameKind::HelloReject,
        ] {
            let header = frame(kind);
            assert!(matches!(
                dispatch(None, &header, LinkKind::Stream),
                Ok(Dispatch::Handshake(h)) if h == header
            ));
            let mut e = engine();
            assert!(refused(dispatch(
                Some((&mut e, PEER)),
                &header,
                LinkKind::Ring
            )));
            assert!(refused(dispatch(
                Some((&mut e, PEER)),
                &header,
                LinkKind::File
            )));
        }
    }

    #[test]
    fn data_frames_need_a_known_peer() {
        let mut header = frame(FrameKind::Eager);
        header.payload_len = 8;
        assert!(refused(dispatch(None, &header, LinkKind::Stream)));
        let mut e = engine();
        let taken = dispatch(Some((&mut e, PEER)), &header, LinkKind::Stream);
        assert!(
            matches!(taken, Ok(Dispatch::Payload(PayloadSink::Owned { ref buf, .. })) if buf.len() == 8)
        );
    }

    #[test]
    fn goodbye_and_abort_end_the_link_on_every_kind() {
        let mut abort = frame(FrameKind::Abort);
        abort.tag = 3;
        for kind in [LinkKind::Stream, LinkKind::Ring, LinkKind::File] {
            let mut e = engine();
            assert!(matches!(
                dispatch(Some((&mut e, PEER)), &frame(FrameKind::Bye), kind),
                Ok(Dispatch::Bye)
            ));
            assert!(matches!(
                dispatch(Some((&mut e, PEER)), &abort, kind),
                Ok(Dispatch::Abort(3))
            ));
        }
    }

    #[test]
    fn part_read_only_on_rings() {
        let mut header = frame(FrameKind::PartRead);
        header.sender_req = 9;
        header.tag = 1;
        let mut e = engine();
        assert!(matches!(
            dispatch(Some((&mut e, PEER)), &header, LinkKind::Ring),
            Ok(Dispatch::PartRead {
                sender_req: 9,
                ok: false
            })
        ));
        assert!(refused(dispatch(
            Some((&mut e, PEER)),
            &header,
            LinkKind::Stream
        )));
        assert!(refused(dispatch(
            Some((&mut e, PEER)),
            &header,
            LinkKind::File
        )));
    }

    /// A receive granted by `Cts`, so that a `Data` frame for it is awaited.
    fn granted_receive(e: &mut Engine, buf: &mut [u8]) -> FrameHeader {
        let region = Region {
            ptr: buf.as_mut_ptr(),
            len: buf.len(),
        };
        e.irecv(Some(PEER), 0, Some(5), region);
        let mut rts = frame(FrameKind::Rts);
        rts.tag = 5;
        rts.msg_size = buf.len() as u64;
        rts.sender_req = 77;
        assert!(matches!(
            dispatch(Some((e, PEER)), &rts, LinkKind::Ring),
            Ok(Dispatch::Payload(PayloadSink::None))
        ));
        let cts = e.poll_transmit().expect("the receive answers with Cts");
        let mut data = frame(FrameKind::Data);
        data.sender_req = 77;
        data.receiver_req = cts.header.receiver_req;
        data.msg_size = buf.len() as u64;
        data
    }

    #[test]
    fn a_payload_in_a_file_is_matched_to_its_receive() {
        let mut e = engine();
        let mut buf = [0u8; 100];
        let mut data = granted_receive(&mut e, &mut buf);
        data.flags = FLAG_PAYLOAD_IN_FILE;
        let Ok(Dispatch::InFile(file)) = dispatch(Some((&mut e, PEER)), &data, LinkKind::Stream)
        else {
            panic!("an in-file payload for a granted receive");
        };
        assert_eq!(file.peer, PEER);
        assert_eq!(file.region.len, 100);
        assert_eq!(file.header.payload_len, 100);
        assert_eq!(file.header.flags & FLAG_PAYLOAD_IN_FILE, 0);
    }

    #[test]
    fn a_payload_in_a_file_is_refused_where_it_cannot_be() {
        let mut e = engine();
        let mut buf = [0u8; 100];
        let data = granted_receive(&mut e, &mut buf);
        let mut in_file = data;
        in_file.flags = FLAG_PAYLOAD_IN_FILE;
        assert!(refused(dispatch(
            Some((&mut e, PEER)),
            &in_file,
            LinkKind::File
        )));
        let mut eager = frame(FrameKind::Eager);
        eager.flags = FLAG_PAYLOAD_IN_FILE;
        assert!(refused(dispatch(
            Some((&mut e, PEER)),
            &eager,
            LinkKind::Ring
        )));
        in_file.payload_len = 4;
        assert!(matches!(
            dispatch(Some((&mut e, PEER)), &in_file, LinkKind::Ring),
            Err(WireError::DataLength {
                expected: 0,
                got: 4
            })
        ));
    }

    #[test]
    fn dispatch_data_refuses_what_is_not_data() {
        let mut e = engine();
        let bye = frame(FrameKind::Bye);
        assert!(matches!(
            dispatch_data(&mut e, PEER, &bye, LinkKind::Ring),
            Err(WireError::UnexpectedFrame { .. })
        ));
    }
}
