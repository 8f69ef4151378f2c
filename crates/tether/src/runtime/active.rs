//! Active messages (DESIGN 3.7): a message runs a handler the receiving
//! program registered, inside the receiver's progress, without a
//! matching receive.
//!
//! An active message is a message of the point-to-point engine on a
//! context of its own ([`AM_CONTEXT`]), tagged with the handler id:
//! `[context of the sender's communicator: u32][header length: u32]
//! [header][payload]`, sent as one gathered message so that the payload
//! is not copied and a large one goes by rendezvous like any message.
//! Delivery therefore inherits the engine's exactly-once, and every
//! blocking call of any kind runs handlers, since each makes progress:
//! progress probes the context, receives each message into a buffer the
//! library owns (its rendezvous, when large, completes on a later round)
//! and calls the handler with it.
//!
//! A handler cannot borrow the runtime that calls it, so what it sends
//! comes back from it ([`Handler`]) and leaves when it returns; the C
//! boundary refuses every other call from inside a handler.

use rustc_hash::FxHashMap as HashMap;
use tether_proto::{Gather, Region, ReqId};

use super::Runtime;
use crate::comm::AM_CONTEXT;
use crate::error::{err, ErrorClass, Result};

/// Handler ids a program may register (DESIGN 3.7).
pub const AM_IDS: std::ops::Range<i32> = 0..1024;

/// Bytes before the header: the sender's communicator context and the
/// header's length.
const PREFIX: usize = 8;

/// A message as its handler sees it; `header` and `payload` are the
/// library's, valid during the call.
pub struct AmMessage<'a> {
    /// The sender's rank in the communicator it sent on (its universe
    /// rank when this process has no such communicator).
    pub source: i32,
    pub header: &'a [u8],
    pub payload: &'a [u8],
}

/// A message a handler sends, copied: it leaves once the handler returns.
pub struct AmReply {
    pub dest: i32,
    pub id: i32,
    pub comm: i32,
    pub header: Vec<u8>,
    pub payload: Vec<u8>,
}

/// A registered handler: called with each message for its id, it returns
/// what it sent meanwhile.
pub type Handler = Box<dyn FnMut(&AmMessage) -> Vec<AmReply> + Send>;

/// What progress keeps for active messages.
#[derive(Default)]
pub(super) struct Active {
    handlers: HashMap<i32, Handler>,
    /// Receives of messages whose rendezvous is under way, into their
    /// buffers.
    arriving: Vec<(ReqId, Vec<u8>)>,
    /// The prefix (and header) of each send, until its request is taken.
    sending: HashMap<ReqId, Box<[u8]>>,
    /// Sends nobody waits for (a handler's), with their buffers.
    detached: Vec<(ReqId, Box<[u8]>)>,
    /// Ids of unregistered messages already warned about.
    warned: Vec<i32>,
    /// The engine's count of arrivals on the context when it was last
    /// probed empty.
    probed: u64,
}

impl Active {
    /// Whether progress has nothing to look at beyond the probe.
    fn is_idle(&self) -> bool {
        self.arriving.is_empty() && self.detached.is_empty()
    }
}

fn check_id(id: i32) -> Result<()> {
    if AM_IDS.contains(&id) {
        Ok(())
    } else {
        Err(err(
            ErrorClass::Arg,
            format!("active-message id {id} is outside 0..1024"),
        ))
    }
}

impl Runtime {
    /// Registers `handler` for `id` (local to this process), replacing
    /// the one before; `None` unregisters.
    pub fn am_register(&mut self, id: i32, handler: Option<Handler>) -> Result<()> {
        check_id(id)?;
        match handler {
            Some(h) => self.active.handlers.insert(id, h),
            None => self.active.handlers.remove(&id),
        };
        Ok(())
    }

    /// Sends an active message for handler `id` to rank `dest` of `comm`;
    /// the request completes when `header` and `payload` may be reused.
    ///
    /// # Safety
    /// `payload` stays valid and unmodified until the request completes.
    pub unsafe fn am_send(
        &mut self,
        dest: i32,
        id: i32,
        header: &[u8],
        payload: Region,
        comm: i32,
    ) -> Result<ReqId> {
        check_id(id)?;
        let (prefix, to) = self.am_prefix(dest, header, comm)?;
        let gather = Gather::new(vec![
            Region::from_const(prefix.as_ptr(), prefix.len()),
            payload,
        ]);
        let req = self.engine.isend_gather(to, AM_CONTEXT, id, gather);
        self.active.sending.insert(req, prefix);
        self.push_transmits();
        Ok(req)
    }

    /// The prefix and header of a message to `dest` of `comm`, and
    /// `dest`'s universe rank.
    fn am_prefix(&self, dest: i32, header: &[u8], comm: i32) -> Result<(Box<[u8]>, u32)> {
        let c = self.comms.get(comm)?;
        let to = c.universe_rank(dest)?;
        let header_len = u32::try_from(header.len()).map_err(|_| {
            err(
                ErrorClass::Count,
                format!(
                    "an active message's header of {} bytes is over 4 GiB",
                    header.len()
                ),
            )
        })?;
        let mut prefix = Vec::with_capacity(PREFIX + header.len());
        prefix.extend_from_slice(&c.context.to_le_bytes());
        prefix.extend_from_slice(&header_len.to_le_bytes());
        prefix.extend_from_slice(header);
        Ok((prefix.into_boxed_slice(), to))
    }

    /// Lets go of a send's prefix once its request is taken.
    pub(super) fn am_taken(&mut self, req: ReqId) {
        if !self.active.sending.is_empty() {
            self.active.sending.remove(&req);
        }
    }

    /// Receives the active messages that arrived and runs their handlers;
    /// drops the buffers of handlers' sends that completed.
    pub(super) fn serve_active(&mut self) {
        let arrivals = self.engine.watched_arrivals();
        while arrivals != self.active.probed {
            let Some((envelope, size)) = self.engine.iprobe(None, AM_CONTEXT, None) else {
                self.active.probed = arrivals;
                break;
            };
            // The size is the sender's word: a buffer that cannot be had
            // is not allocated (no abort); the message is received into
            // nothing, truncated, and dropped.
            let mut buffer = Vec::new();
            let wanted = usize::try_from(size).unwrap_or(usize::MAX);
            if buffer.try_reserve_exact(wanted).is_ok() {
                buffer.resize(wanted, 0);
            } else {
                tracing::error!(
                    "an active message of {size} bytes from {} cannot be given a buffer: dropped",
                    self.universe.describe(envelope.source)
                );
            }
            let region = Region {
                ptr: buffer.as_mut_ptr(),
                len: buffer.len(),
            };
            let req = self.engine.irecv(
                Some(envelope.source),
                AM_CONTEXT,
                Some(envelope.tag),
                region,
            );
            self.active.arriving.push((req, buffer));
        }
        if self.active.is_idle() {
            return;
        }
        let mut i = 0;
        while i < self.active.arriving.len() {
            let req = self.active.arriving[i].0;
            match self.engine.take_completion_with_user(req) {
                Some((completion, _)) => {
                    let (_, buffer) = self.active.arriving.swap_remove(i);
                    if completion.error.is_none() {
                        self.run_handler(completion.source, completion.tag, &buffer);
                    }
                }
                None => i += 1,
            }
        }
        let engine = &mut self.engine;
        self.active
            .detached
            .retain(|(req, _)| engine.take_completion_with_user(*req).is_none());
    }

    /// Runs the handler of `id` for a message `buffer` from universe rank
    /// `from`, then sends what it sent.
    fn run_handler(&mut self, from: u32, id: i32, buffer: &[u8]) {
        let Some((context, header, payload)) = split(buffer) else {
            tracing::error!(
                "an active message from {} is malformed ({} bytes): dropped",
                self.universe.describe(from),
                buffer.len()
            );
            return;
        };
        let Some(mut handler) = self.active.handlers.remove(&id) else {
            if !self.active.warned.contains(&id) {
                self.active.warned.push(id);
                tracing::warn!(
                    "an active message for id {id} from {} has no handler here: dropped (once per id)",
                    self.universe.describe(from)
                );
            }
            return;
        };
        let source = self
            .comms
            .by_context(context)
            .and_then(|c| c.rank_of(from))
            .map_or(from as i32, |r| r as i32);
        let replies = handler(&AmMessage {
            source,
            header,
            payload,
        });
        self.active.handlers.entry(id).or_insert(handler);
        for reply in replies {
            if let Err(e) = self.send_reply(&reply) {
                tracing::error!(
                    "an active message sent from the handler of id {id} to rank {} of communicator {} was not sent: {e}",
                    reply.dest,
                    reply.comm
                );
            }
        }
    }

    /// Sends a handler's message, owning its buffers until it completes.
    fn send_reply(&mut self, reply: &AmReply) -> Result<()> {
        check_id(reply.id)?;
        let (prefix, to) = self.am_prefix(reply.dest, &reply.header, reply.comm)?;
        let mut message = prefix.into_vec();
        message.extend_from_slice(&reply.payload);
        let message = message.into_boxed_slice();
        let region = Region::from_const(message.as_ptr(), message.len());
        let req = self.engine.isend(to, AM_CONTEXT, reply.id, region);
        self.active.detached.push((req, message));
        Ok(())
    }
}

/// A message's communicator context, header and payload.
fn split(buffer: &[u8]) -> Option<(u32, &[u8], &[u8])> {
    let context = u32::from_le_bytes(buffer.get(0..4)?.try_into().ok()?);
    let header_len = u32::from_le_bytes(buffer.get(4..8)?.try_into().ok()?) as usize;
    let rest = buffer.get(PREFIX..)?;
    let header = rest.get(..header_len)?;
    Some((context, header, &rest[header_len..]))
}
