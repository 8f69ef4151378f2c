//! The dispatch target: `tether_proto::classify`, the one place every
//! transport routes a decoded header, and `tether_proto::deliver`, the one
//! place a data-path frame reaches the engine.
//!
//! The fuzz bytes are one header as it comes off a link (56 raw bytes,
//! decoded as the transports decode them) and a few switches. The header
//! is classified for every [`LinkKind`], on an open link and on one whose
//! handshake has not ended; what the module's contract says each link may
//! carry is checked against the answer, and so are the payload bounds a
//! transport relies on when it reads what follows the header (a handshake
//! payload is allocated at the length the header gives; nothing is read
//! after `Bye` or `Abort`). A data-path frame is then
//! delivered to an engine that has granted one receive, so that a `Data`
//! frame whose payload waits in a file can be matched to it.

use tether_proto::wire::{FLAG_PAYLOAD_IN_FILE, HEADER_LEN, MAGIC, MAX_CONTROL_PAYLOAD, VERSION};
use tether_proto::{
    classify, deliver, Class, Delivery, Engine, EngineConfig, FrameHeader, FrameKind, LinkKind,
    PayloadSink, Region, WireError,
};

use crate::input::Input;

/// The rank the header comes from.
const PEER: u32 = 1;
/// The decoder's bound on an `Eager` payload.
const MAX_EAGER: u64 = 4096;
/// The `Rts` handle of the message the engine has granted a receive to.
const SENDER_REQ: u64 = 77;
const LINK_KINDS: [LinkKind; 3] = [LinkKind::Stream, LinkKind::Ring, LinkKind::File];

/// Input: one byte of switches, the size of the granted receive's buffer
/// (1 byte) and of the message announced to it (2 bytes), then 56 header
/// bytes. Switch bit 0 writes a valid magic and version into the header
/// (so that the decoder passes more often); bit 1 aims the header at the
/// granted receive (its `sender_req`, `receiver_req` and `msg_size`).
///
/// The header is decoded with the sequence number it carries: the
/// sequence is the link's to check, not the dispatcher's.
pub fn dispatch(data: &[u8]) {
    let mut input = Input::new(data);
    let (Some(switches), Some(buf_len), Some(msg_size)) = (input.u8(), input.u8(), input.u16())
    else {
        return;
    };
    let Some(bytes) = input.take(HEADER_LEN) else {
        return;
    };
    let mut bytes: [u8; HEADER_LEN] = bytes.try_into().expect("HEADER_LEN bytes");
    if switches & 1 != 0 {
        bytes[0..4].copy_from_slice(&MAGIC);
        bytes[4..6].copy_from_slice(&VERSION.to_le_bytes());
    }
    let mut granted = Granted::new(usize::from(buf_len), u64::from(msg_size));
    if switches & 2 != 0 {
        bytes[32..40].copy_from_slice(&granted.size.to_le_bytes());
        bytes[40..48].copy_from_slice(&SENDER_REQ.to_le_bytes());
        bytes[48..56].copy_from_slice(&granted.receiver_req.to_le_bytes());
    }
    let seq = u64::from_le_bytes(bytes[8..16].try_into().expect("8 bytes"));
    let header = match FrameHeader::decode(&bytes, seq, MAX_EAGER) {
        Ok(header) => header,
        Err(e) => {
            let _ = e.to_string();
            return;
        }
    };
    let mut data_path = false;
    for kind in LINK_KINDS {
        for open in [false, true] {
            let class = classify(&header, kind, open);
            check_class(&header, kind, open, &class);
            data_path |= class == Ok(Class::Data);
        }
    }
    if data_path {
        granted.deliver(&header);
    }
}

/// What the module promises of `classify(header, kind, open)`: which
/// frames a link of `kind` may carry, and that a refusal says the frame
/// was unexpected.
fn check_class(header: &FrameHeader, kind: LinkKind, open: bool, class: &Result<Class, WireError>) {
    let in_file = header.flags & FLAG_PAYLOAD_IN_FILE != 0;
    let expected = match header.kind {
        FrameKind::Hello
        | FrameKind::HelloAck
        | FrameKind::HelloReject
        | FrameKind::Challenge
        | FrameKind::Proof => (kind == LinkKind::Stream).then_some(Class::Handshake),
        FrameKind::Bye => Some(Class::Bye),
        FrameKind::Abort => Some(Class::Abort(header.tag)),
        FrameKind::Eager
        | FrameKind::Rts
        | FrameKind::Cts
        | FrameKind::Data
        | FrameKind::ReadDone
        | FrameKind::Landed
        | FrameKind::RmaRequest
        | FrameKind::RmaReply => {
            // A payload in a file is announced beside a socket or ring,
            // and only for rendezvous data.
            let placed = !in_file || (kind != LinkKind::File && header.kind == FrameKind::Data);
            (open && placed).then_some(Class::Data)
        }
    };
    match (expected, class) {
        (Some(expected), Ok(got)) => assert_eq!(*got, expected, "{header:?} {kind:?} {open}"),
        (None, Err(WireError::UnexpectedFrame { got, .. })) => {
            assert_eq!(*got, header.kind, "{header:?} {kind:?} {open}");
        }
        (expected, got) => panic!("{header:?} {kind:?} open {open}: {got:?}, not {expected:?}"),
    }
    if let Err(e) = class {
        let _ = e.to_string();
    }
    // What follows a header the transport handles itself.
    match class {
        Ok(Class::Handshake) => assert!(header.payload_len <= MAX_CONTROL_PAYLOAD, "{header:?}"),
        Ok(Class::Bye | Class::Abort(_)) => {
            assert_eq!(header.payload_len, 0, "{header:?}")
        }
        Ok(Class::Data) | Err(_) => {}
    }
}

/// An engine (rank 0) with one receive from [`PEER`] that has answered
/// the peer's `Rts` with a `Cts`: a `Data` frame for it is awaited.
struct Granted {
    engine: Engine,
    buf: Box<[u8]>,
    /// The message size the `Rts` announced.
    size: u64,
    /// The receive's handle, as its `Cts` named it.
    receiver_req: u64,
}

impl Granted {
    fn new(buf_len: usize, size: u64) -> Granted {
        let mut engine = Engine::new(EngineConfig {
            me: 0,
            eager_limit: 64,
        });
        let mut buf = vec![0u8; buf_len].into_boxed_slice();
        let region = Region {
            ptr: buf.as_mut_ptr(),
            len: buf.len(),
        };
        engine.irecv(Some(PEER), 0, Some(0), region);
        let mut rts = FrameHeader::new(FrameKind::Rts);
        rts.msg_size = size;
        rts.sender_req = SENDER_REQ;
        assert!(matches!(
            deliver(&mut engine, PEER, &rts),
            Ok(Delivery::Payload(PayloadSink::None))
        ));
        let cts = engine.poll_transmit().expect("a matched Rts is answered");
        assert_eq!(cts.header.kind, FrameKind::Cts);
        Granted {
            engine,
            buf,
            size,
            receiver_req: cts.header.receiver_req,
        }
    }

    /// Delivers a data-path frame and checks the delivery: the payload
    /// goes where the sink says and is exactly `payload_len` bytes; a
    /// payload in a file is announced with no bytes on the link and
    /// matched as if it had followed the header.
    fn deliver(&mut self, header: &FrameHeader) {
        let in_file = header.flags & FLAG_PAYLOAD_IN_FILE != 0;
        let delivery = deliver(&mut self.engine, PEER, header);
        match delivery {
            Err(e) => {
                if in_file && header.payload_len != 0 {
                    assert!(
                        matches!(e, WireError::DataLength { expected: 0, got } if got == header.payload_len),
                        "{header:?}: {e:?}"
                    );
                }
                let _ = e.to_string();
            }
            Ok(Delivery::InFile(file)) => {
                assert!(in_file, "{header:?}");
                assert_eq!(header.payload_len, 0, "{header:?}");
                assert_eq!(file.peer, PEER);
                let mut expected = *header;
                expected.payload_len = header.msg_size;
                expected.flags &= !FLAG_PAYLOAD_IN_FILE;
                assert_eq!(file.header, expected);
                assert!(file.region.len as u64 <= file.header.payload_len);
                self.check_region(file.region);
                self.engine.payload_done(file.token, None);
            }
            Ok(Delivery::Payload(sink)) => match sink {
                PayloadSink::None => assert!(in_file || header.payload_len == 0, "{header:?}"),
                PayloadSink::Region {
                    region,
                    discard,
                    token,
                } => {
                    assert!(!in_file, "{header:?}");
                    assert_eq!(region.len as u64 + discard, header.payload_len);
                    self.check_region(region);
                    self.engine.payload_done(token, None);
                }
                PayloadSink::Owned { buf, token } => {
                    assert!(!in_file, "{header:?}");
                    assert_eq!(buf.len() as u64, header.payload_len);
                    self.engine.payload_done(token, Some(buf));
                }
            },
        }
    }

    /// A region handed out lies inside the granted receive's buffer (the
    /// only memory the engine was given); an empty one names no memory.
    fn check_region(&self, region: Region) {
        if region.len == 0 {
            return;
        }
        let start = self.buf.as_ptr() as usize;
        let at = region.ptr as usize;
        assert!(
            at >= start
                && at
                    .checked_add(region.len)
                    .is_some_and(|end| end <= start + self.buf.len()),
            "{region:?} outside the receive's {} bytes",
            self.buf.len()
        );
    }
}
