//! The one place a decoded frame header is routed: to the engine's data
//! path, to the link's handshake, to the link's end (goodbye, abort), or
//! to a payload that waits in a file.
//!
//! Two steps, so that no transport calls the engine:
//! 1. the transport decodes a header with [`FrameHeader::decode`] and
//!    asks [`classify`] what it is. Which frames a link may carry depends
//!    on its [`LinkKind`]: handshakes only on a stream, data only once the
//!    stream's peer is known, a payload in a file nowhere but beside a
//!    socket or ring. A frame a
//!    link may not carry is a [`WireError::UnexpectedFrame`]: the peer
//!    broke the protocol. The transport handles the link's own frames and
//!    reports a data-path frame to the router, reading nothing more from
//!    that link until told where its payload goes;
//! 2. the router hands that frame to [`deliver`], the one caller of
//!    [`Engine::on_header`], and gives the transport the [`Delivery`].
//!
//! Neither step blocks or reads anything from the link: the header's
//! payload (`payload_len` bytes, bounded by the decoder) is still on the
//! link and is the transport's to read where the delivery says.

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

/// What a frame is, by [`classify`]: the transport handles everything
/// but [`Class::Data`] itself, and reports data-path frames to the router
/// for [`deliver`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Class {
    /// A data-path frame (`Eager`, `Rts`, `Cts`, `Data`, `ReadDone`,
    /// `RmaRequest`, `RmaReply`) for the engine.
    Data,
    /// A handshake frame (`Hello`, `HelloAck`, `HelloReject`): read its
    /// payload and hand both to the link's handshake.
    Handshake,
    /// The peer finalized: it sends nothing more on this link.
    Bye,
    /// The peer aborts the universe with this exit code.
    Abort(i32),
}

/// Says what `header`, which arrived on a link of `kind`, is; a frame
/// the link may not carry is a [`WireError::UnexpectedFrame`]. `open`:
/// the link's peer is known (a stream's handshake is done), so data may
/// flow. Reads nothing but the header.
pub fn classify(header: &FrameHeader, kind: LinkKind, open: bool) -> Result<Class, WireError> {
    let unexpected = |state| {
        Err(WireError::UnexpectedFrame {
            got: header.kind,
            state,
        })
    };
    match header.kind {
        FrameKind::Hello
        | FrameKind::HelloAck
        | FrameKind::HelloReject
        | FrameKind::Challenge
        | FrameKind::Proof => match kind {
            LinkKind::Stream => Ok(Class::Handshake),
            other => unexpected(other.describe()),
        },
        FrameKind::Bye => Ok(Class::Bye),
        FrameKind::Abort => Ok(Class::Abort(header.tag)),
        FrameKind::Eager
        | FrameKind::Rts
        | FrameKind::Cts
        | FrameKind::Data
        | FrameKind::ReadDone
        | FrameKind::Landed
        | FrameKind::RmaRequest
        | FrameKind::RmaReply
            if !open =>
        {
            unexpected("before the handshake completed")
        }
        // One-sided frames travel on every kind of link: over files and
        // tcp always, over shared memory where cross-memory attach is
        // refused. Their payloads always follow the header (large puts
        // and get replies land in place through the sink, as rendezvous
        // data does).
        FrameKind::Eager
        | FrameKind::Rts
        | FrameKind::Cts
        | FrameKind::Data
        | FrameKind::ReadDone
        | FrameKind::Landed
        | FrameKind::RmaRequest
        | FrameKind::RmaReply => {
            if header.flags & FLAG_PAYLOAD_IN_FILE != 0 {
                if kind == LinkKind::File {
                    return unexpected("in a message file (a payload in another file)");
                }
                if header.kind != FrameKind::Data {
                    return unexpected("with its payload in a file (only rendezvous data may be)");
                }
            }
            Ok(Class::Data)
        }
    }
}

/// Where a data-path frame's payload goes, by [`deliver`].
#[derive(Debug)]
pub enum Delivery {
    /// Read the payload (`payload_len` bytes) where the sink says, then
    /// call [`Engine::payload_done`] with its token.
    Payload(PayloadSink),
    /// A rendezvous `Data` frame whose payload waits in a file (`hybrid`):
    /// the file transport reads it into the receive. Nothing follows the
    /// header on its own link.
    InFile(FileData),
}

/// A `Data` frame whose payload waits in a file, matched to its receive:
/// fill `region` from the file, then call [`Engine::payload_done`] with
/// `token`.
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

/// Hands a data-path frame from `peer` ([`Class::Data`]) to the engine:
/// here and nowhere else is [`Engine::on_header`] called. An error means
/// the peer broke the protocol: its link is to be closed.
pub fn deliver(
    engine: &mut Engine,
    peer: u32,
    header: &FrameHeader,
) -> Result<Delivery, WireError> {
    if header.flags & FLAG_PAYLOAD_IN_FILE != 0 {
        return in_file(engine, peer, *header);
    }
    engine.on_header(peer, header).map(Delivery::Payload)
}

/// A `Data` frame announcing that its payload waits in a file: matched
/// to its receive as if the payload had followed it.
fn in_file(engine: &mut Engine, peer: u32, mut header: FrameHeader) -> Result<Delivery, WireError> {
    if header.payload_len != 0 {
        return Err(WireError::DataLength {
            expected: 0,
            got: header.payload_len,
        });
    }
    header.payload_len = header.msg_size;
    header.flags &= !FLAG_PAYLOAD_IN_FILE;
    match engine.on_header(peer, &header)? {
        PayloadSink::None => Ok(Delivery::Payload(PayloadSink::None)),
        PayloadSink::Region { region, token, .. } => Ok(Delivery::InFile(FileData {
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
    const KINDS: [LinkKind; 3] = [LinkKind::Stream, LinkKind::Ring, LinkKind::File];

    fn engine() -> Engine {
        Engine::new(EngineConfig {
            me: 0,
            eager_limit: 64,
        })
    }

    fn frame(kind: FrameKind) -> FrameHeader {
        FrameHeader::new(kind)
    }

    fn refused(result: Result<Class, WireError>) -> bool {
        matches!(result, Err(WireError::UnexpectedFrame { .. }))
    }

    #[test]
    fn handshakes_only_on_streams() {
        for kind in [
            FrameKind::Hello,
            FrameKind::HelloAck,
            FrameKind::HelloReject,
            FrameKind::Challenge,
            FrameKind::Proof,
        ] {
            let header = frame(kind);
            assert_eq!(
                classify(&header, LinkKind::Stream, false),
                Ok(Class::Handshake)
            );
            assert!(refused(classify(&header, LinkKind::Ring, true)));
            assert!(refused(classify(&header, LinkKind::File, true)));
        }
    }

    #[test]
    fn data_frames_need_an_open_link() {
        for kind in [
            FrameKind::Eager,
            FrameKind::Rts,
            FrameKind::Cts,
            FrameKind::Data,
            FrameKind::ReadDone,
            FrameKind::Landed,
            FrameKind::RmaRequest,
            FrameKind::RmaReply,
        ] {
            let header = frame(kind);
            assert!(refused(classify(&header, LinkKind::Stream, false)));
            for link in KINDS {
                assert_eq!(classify(&header, link, true), Ok(Class::Data));
            }
        }
    }

    #[test]
    fn goodbye_and_abort_end_the_link_on_every_kind() {
        let mut abort = frame(FrameKind::Abort);
        abort.tag = 3;
        for link in KINDS {
            assert_eq!(classify(&frame(FrameKind::Bye), link, true), Ok(Class::Bye));
            assert_eq!(classify(&abort, link, true), Ok(Class::Abort(3)));
        }
    }

    #[test]
    fn a_payload_in_a_file_only_for_data_beside_a_socket_or_ring() {
        let mut data = frame(FrameKind::Data);
        data.flags = FLAG_PAYLOAD_IN_FILE;
        assert_eq!(classify(&data, LinkKind::Stream, true), Ok(Class::Data));
        assert_eq!(classify(&data, LinkKind::Ring, true), Ok(Class::Data));
        assert!(refused(classify(&data, LinkKind::File, true)));
        let mut eager = frame(FrameKind::Eager);
        eager.flags = FLAG_PAYLOAD_IN_FILE;
        assert!(refused(classify(&eager, LinkKind::Ring, true)));
        for kind in [FrameKind::RmaRequest, FrameKind::RmaReply] {
            let mut rma = frame(kind);
            rma.flags = FLAG_PAYLOAD_IN_FILE;
            assert!(refused(classify(&rma, LinkKind::Stream, true)));
        }
    }

    #[test]
    fn an_eager_frame_is_delivered_to_the_engine() {
        let mut e = engine();
        let mut header = frame(FrameKind::Eager);
        header.payload_len = 8;
        let delivered = deliver(&mut e, PEER, &header);
        assert!(
            matches!(delivered, Ok(Delivery::Payload(PayloadSink::Owned { ref buf, .. })) if buf.len() == 8)
        );
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
            deliver(e, PEER, &rts),
            Ok(Delivery::Payload(PayloadSink::None))
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
        let Ok(Delivery::InFile(file)) = deliver(&mut e, PEER, &data) else {
            panic!("an in-file payload for a granted receive");
        };
        assert_eq!(file.peer, PEER);
        assert_eq!(file.region.len, 100);
        assert_eq!(file.header.payload_len, 100);
        assert_eq!(file.header.flags & FLAG_PAYLOAD_IN_FILE, 0);
    }

    #[test]
    fn a_payload_in_a_file_announced_with_bytes_is_refused() {
        let mut e = engine();
        let mut buf = [0u8; 100];
        let mut data = granted_receive(&mut e, &mut buf);
        data.flags = FLAG_PAYLOAD_IN_FILE;
        data.payload_len = 4;
        assert!(matches!(
            deliver(&mut e, PEER, &data),
            Err(WireError::DataLength {
                expected: 0,
                got: 4
            })
        ));
    }
}
