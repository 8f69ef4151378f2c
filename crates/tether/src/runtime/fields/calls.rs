//! Fields on the runtime (DESIGN 3.8): creation (its collective part, over
//! this program's joined processes), steps put and got, and free. What
//! happens between calls is the field activity's (`field_activity.rs`).

use std::time::Duration;

use tether_proto::{Region, ReqId};
use tether_redist::{Dist, Layout};

use super::{Field, FieldParts, PeerProgram};
use crate::datatype::Datatype;
use crate::error::{err, Error, ErrorClass, Result};
use crate::field::wire::{self, Kind, CONTROL_CONTEXT, END};
use crate::field::{LocalDist, Mode};
use crate::runtime::Runtime;
use crate::trace::Span;

impl Runtime {
    /// Creates field `name` of `datatype` elements distributed by `local`
    /// (this process's description), put to the programs named in `peers`
    /// (comma-separated) or got from the one named there. Collective over
    /// this program's joined processes: returns once the program agreed on
    /// its side; the other side's description may come later (a mismatch
    /// already known is reported here, otherwise by the first step).
    pub fn field_create(
        &mut self,
        name: &str,
        datatype: Datatype,
        local: &LocalDist,
        peers: &str,
        mode: Mode,
    ) -> Result<i32> {
        let universe = self.universe.clone();
        let me = &universe.programs[universe.my_program];
        if name.is_empty() {
            return Err(err(ErrorClass::Arg, "a field needs a name"));
        }
        let peer_programs = self.field_peers(peers, mode)?;
        let producer = match mode {
            Mode::Put => me.name.clone(),
            Mode::Get => universe.programs[peer_programs[0]].name.clone(),
        };
        if let Some(other) = self
            .activities
            .find::<Field>(|f| !f.is_freed() && f.name == name && f.producer == producer)
        {
            return Err(err(
                ErrorClass::Arg,
                format!(
                    "field {name:?} of program {producer:?} exists already (handle {})",
                    other.handle
                ),
            ));
        }
        let generation_key = (producer.clone(), name.to_string());
        let generation = self
            .field_generations
            .get(&generation_key)
            .copied()
            .unwrap_or(0);
        let key = wire::field_key(&producer, name, generation);
        if let Some(other) = self.activities.find::<Field>(|f| f.key == key) {
            return Err(err(
                ErrorClass::Arg,
                format!(
                    "field {name:?} of program {producer:?} shares its tag with field {:?} of {:?}: rename one",
                    other.name, other.producer
                ),
            ));
        }
        let side = self.agree_on_side(name, key, local, mode)?;
        let peers = peer_programs
            .iter()
            .map(|&p| {
                let program = &universe.programs[p];
                PeerProgram::new(program.name.clone(), program.first, program.size)
            })
            .collect();
        self.next_field += 1;
        let handle = self.next_field;
        let mut field = Field::new(FieldParts {
            handle,
            name: name.to_string(),
            producer,
            key,
            mode,
            element: datatype,
            my_rank: universe.my_rank,
            side,
            peers,
            queue_limit: self.settings.field_queue() as usize,
        });
        field.start(&mut self.engine);
        self.activities.push(Box::new(field));
        self.progress_once(Some(Duration::ZERO));
        *self.field_generations.entry(generation_key).or_insert(0) += 1;
        if let Some(error) = self.field(handle)?.failure().cloned() {
            let _ = self.field_free(handle);
            return Err(error);
        }
        Ok(handle)
    }

    /// The universe indices of the programs named in `peers`.
    fn field_peers(&self, peers: &str, mode: Mode) -> Result<Vec<usize>> {
        let universe = &self.universe;
        let mut found = Vec::new();
        for name in peers.split(',').map(str::trim).filter(|n| !n.is_empty()) {
            let index = universe.find(name).ok_or_else(|| {
                err(
                    ErrorClass::Arg,
                    format!("peers: no program named {name:?} in this universe"),
                )
            })?;
            if index == universe.my_program {
                return Err(err(
                    ErrorClass::Arg,
                    format!("peers: {name:?} is this program; a field joins two programs"),
                ));
            }
            if found.contains(&index) {
                return Err(err(
                    ErrorClass::Arg,
                    format!("peers: {name:?} is named twice"),
                ));
            }
            found.push(index);
        }
        match (mode, found.len()) {
            (_, 0) => Err(err(
                ErrorClass::Arg,
                format!("peers {peers:?} names no program"),
            )),
            (Mode::Get, n) if n > 1 => Err(err(
                ErrorClass::Arg,
                format!("peers {peers:?}: a field is got from one producer program, not {n}"),
            )),
            _ => Ok(found),
        }
    }

    /// Rank 0 gathers every rank's description, combines them into this
    /// program's side and tells every rank; `Err(Arg)` on every rank when
    /// they do not combine.
    fn agree_on_side(
        &mut self,
        name: &str,
        key: u32,
        local: &LocalDist,
        mode: Mode,
    ) -> Result<Dist> {
        let me = &self.universe.programs[self.universe.my_program];
        let (first, size) = (me.first, me.size);
        let describe = wire::control_tag(key, Kind::Describe);
        let side_tag = wire::control_tag(key, Kind::Side);
        let side = if self.universe.my_rank == 0 {
            let mut locals = vec![local.clone()];
            for rank in 1..size {
                let bytes = self.receive_whole(first + rank, describe)?;
                let described = wire::decode_local(&bytes)
                    .ok_or_else(|| self.garbled(first + rank, "description", name))?;
                locals.push(described);
            }
            let side = combine(&locals, mode);
            let encoded = wire::encode_side(&side);
            for rank in 1..size {
                self.send_whole(first + rank, side_tag, &encoded)?;
            }
            side
        } else {
            self.send_whole(first, describe, &wire::encode_local(local))?;
            let bytes = self.receive_whole(first, side_tag)?;
            wire::decode_side(&bytes).ok_or_else(|| self.garbled(first, "side", name))?
        };
        side.map_err(|why| err(ErrorClass::Arg, format!("field {name:?}: {why}")))
    }

    fn garbled(&self, rank: u32, what: &str, name: &str) -> Error {
        err(
            ErrorClass::Protocol,
            format!(
                "field {name:?}: {} sent a {what} this version cannot read",
                self.universe.describe(rank)
            ),
        )
    }

    /// Receives the next control message with `tag` from `source`,
    /// whatever its size (blocking).
    fn receive_whole(&mut self, source: u32, tag: i32) -> Result<Vec<u8>> {
        self.wait_until(|rt| {
            rt.engine
                .iprobe(Some(source), CONTROL_CONTEXT, Some(tag))
                .is_some()
                || rt.engine.is_lost(source)
        });
        let Some((_, size)) = self.engine.iprobe(Some(source), CONTROL_CONTEXT, Some(tag)) else {
            return Err(self.lost(source));
        };
        let mut buffer = vec![0u8; size as usize];
        let request = self.engine.irecv(
            Some(source),
            CONTROL_CONTEXT,
            Some(tag),
            Region {
                ptr: buffer.as_mut_ptr(),
                len: buffer.len(),
            },
        );
        self.wait_transfer(request, source)?;
        Ok(buffer)
    }

    /// Sends `bytes` to `dest` as a control message (blocking).
    fn send_whole(&mut self, dest: u32, tag: i32, bytes: &[u8]) -> Result<()> {
        let request = self.engine.isend(
            dest,
            CONTROL_CONTEXT,
            tag,
            Region::from_const(bytes.as_ptr(), bytes.len()),
        );
        self.wait_transfer(request, dest)
    }

    fn wait_transfer(&mut self, request: ReqId, peer: u32) -> Result<()> {
        self.wait_until(|rt| rt.engine.completion(request).is_some());
        match self.engine.take_completion(request) {
            Some(done) if done.error.is_none() => Ok(()),
            _ => Err(self.lost(peer)),
        }
    }

    fn lost(&self, peer: u32) -> Error {
        self.transport
            .router()
            .peers()
            .lost(peer)
            .cloned()
            .unwrap_or_else(|| {
                err(
                    ErrorClass::PeerLost,
                    format!("{} was lost", self.universe.describe(peer)),
                )
            })
    }

    fn field(&mut self, handle: i32) -> Result<&mut Field> {
        self.activities
            .find::<Field>(|f| f.handle == handle && !f.is_freed())
            .ok_or_else(|| err(ErrorClass::Arg, format!("{handle} is not a live field")))
    }

    /// Bytes of this process's local part of field `handle`.
    pub fn field_local_bytes(&mut self, handle: i32) -> Result<usize> {
        Ok(self.field(handle)?.local_bytes())
    }

    /// Starts step `step` of field `handle`, putting from or getting into
    /// `local` (its local part). A blocking put (`copy`) copies what it
    /// sends, so its request completes once the step is queued.
    ///
    /// # Safety
    /// `local` must hold the field's local part (`field_local_bytes`) and
    /// stay valid (and, for a put, unchanged) until the request completes.
    unsafe fn field_step(
        &mut self,
        handle: i32,
        step: i64,
        local: *mut u8,
        mode: Mode,
        copy: bool,
    ) -> Result<ReqId> {
        let tracing = self.trace.is_some();
        let field = self.field(handle)?;
        if field.mode() != mode {
            let (asked, made) = match mode {
                Mode::Put => ("put", "get"),
                Mode::Get => ("get", "put"),
            };
            return Err(err(
                ErrorClass::Arg,
                format!(
                    "field {:?} was created to {made}; it cannot {asked}",
                    field.name
                ),
            ));
        }
        if let Some(error) = field.failure() {
            return Err(error.clone());
        }
        if step == END {
            return Err(err(ErrorClass::Arg, format!("step {step} is reserved")));
        }
        // A consumer's step is checked against the producer's announcement
        // when its turn comes: a get that names another fails alone.
        let increasing = mode == Mode::Get || field.last_step.is_none_or(|last| step > last);
        if let (false, Some(last)) = (increasing, field.last_step) {
            return Err(err(
                ErrorClass::Arg,
                format!(
                    "field {:?}: step {step} after step {last}: steps must increase",
                    field.name
                ),
            ));
        }
        let len = field.local_bytes();
        if local.is_null() && len > 0 {
            return Err(err(
                ErrorClass::Arg,
                format!(
                    "field {:?}: the local part is NULL but holds {len} bytes here",
                    field.name
                ),
            ));
        }
        let ptr = if local.is_null() {
            std::ptr::NonNull::<u8>::dangling().as_ptr()
        } else {
            local
        };
        field.last_step = Some(step);
        let name = tracing.then(|| (field.name.clone(), field.other_side()));
        let request = self.engine.start_generalized();
        if let (Some(start), Some((name, other_side))) = (self.trace_now(), name) {
            let mut span = Span::new(
                match mode {
                    Mode::Put => "field_put",
                    Mode::Get => "field_get",
                },
                start,
            );
            (span.detail, span.step, span.bytes) = (Some(name), Some(step), len as u64);
            span.peer = other_side;
            self.trace_open(request, span);
        }
        let field = self.field(handle)?;
        field.queue(request, step, Region { ptr, len }, copy);
        self.progress_once(Some(Duration::ZERO));
        Ok(request)
    }

    /// Starts putting step `step` of `handle` from `local`; the request
    /// completes when the step left (the buffer is the library's until then).
    ///
    /// # Safety
    /// As [`Runtime::field_step`].
    pub unsafe fn field_iput(&mut self, handle: i32, step: i64, local: *const u8) -> Result<ReqId> {
        self.field_step(handle, step, local.cast_mut(), Mode::Put, false)
    }

    /// Starts getting step `step` of `handle` into `local`.
    ///
    /// # Safety
    /// As [`Runtime::field_step`].
    pub unsafe fn field_iget(&mut self, handle: i32, step: i64, local: *mut u8) -> Result<ReqId> {
        self.field_step(handle, step, local, Mode::Get, false)
    }

    /// Puts step `step`: returns once it is queued (copied), blocking
    /// while `FIELD_QUEUE` steps wait for the slowest consumer program.
    ///
    /// # Safety
    /// `local` holds the field's local part and is valid for this call.
    pub unsafe fn field_put(&mut self, handle: i32, step: i64, local: *const u8) -> Result<()> {
        let request = self.field_step(handle, step, local.cast_mut(), Mode::Put, true)?;
        self.field_finish(request)
    }

    /// Gets step `step` into `local`.
    ///
    /// # Safety
    /// `local` holds the field's local part and is valid for this call.
    pub unsafe fn field_get(&mut self, handle: i32, step: i64, local: *mut u8) -> Result<()> {
        let request = self.field_step(handle, step, local, Mode::Get, false)?;
        self.field_finish(request)
    }

    fn field_finish(&mut self, request: ReqId) -> Result<()> {
        match self.wait(request)?.error {
            None => Ok(()),
            Some(error) => Err(error),
        }
    }

    /// Frees field `handle`: a producer returns once every queued step was
    /// taken by every consumer still in the field (or an error ended it);
    /// a consumer leaves at once.
    pub fn field_free(&mut self, handle: i32) -> Result<()> {
        let field = self
            .activities
            .find::<Field>(|f| f.handle == handle && !f.is_freed())
            .ok_or_else(|| err(ErrorClass::Arg, format!("{handle} is not a live field")))?;
        field.free(&mut self.engine);
        self.wait_until(|rt| {
            rt.activities
                .find::<Field>(|f| f.handle == handle)
                .is_none_or(|f| f.is_settled())
        });
        let failure = self
            .activities
            .find::<Field>(|f| f.handle == handle)
            .and_then(|f| f.failure().cloned());
        self.progress_once(Some(Duration::ZERO));
        match failure {
            Some(error) if error.class != ErrorClass::FieldMismatch => Err(error),
            _ => Ok(()),
        }
    }

    /// Frees every field still live (at finalize).
    pub(in crate::runtime) fn free_fields(&mut self) {
        let mut live = Vec::new();
        while let Some(field) = self
            .activities
            .find::<Field>(|f| !f.is_freed() && !live.contains(&f.handle))
        {
            live.push(field.handle);
        }
        for handle in live {
            let _ = self.field_free(handle);
        }
    }
}

/// Combines every rank's description into one side, or says why they do
/// not combine.
fn combine(locals: &[LocalDist], mode: Mode) -> std::result::Result<Dist, String> {
    match &locals[0] {
        LocalDist::Regular(first) => {
            for (rank, local) in locals.iter().enumerate().skip(1) {
                match local {
                    LocalDist::Regular(dist) if dist == first => {}
                    LocalDist::Regular(dist) => {
                        return Err(format!(
                            "rank {rank} passed {} but rank 0 {}",
                            dist.describe(),
                            first.describe()
                        ))
                    }
                    LocalDist::Boxes { .. } => {
                        return Err(format!(
                            "rank {rank} passed boxes but rank 0 a regular distribution"
                        ))
                    }
                }
            }
            Ok(first.clone())
        }
        LocalDist::Boxes { shape, order, .. } => {
            let mut ranks = Vec::with_capacity(locals.len());
            for (rank, local) in locals.iter().enumerate() {
                match local {
                    LocalDist::Boxes {
                        shape: s,
                        boxes,
                        order: o,
                    } if s == shape && o == order => ranks.push(boxes.clone()),
                    LocalDist::Boxes { shape: s, order: o, .. } => {
                        return Err(format!(
                            "rank {rank} passed boxes of an array {s:?} ({o:?} order) but rank 0 of {shape:?} ({order:?} order)"
                        ))
                    }
                    LocalDist::Regular(_) => {
                        return Err(format!(
                            "rank {rank} passed a regular distribution but rank 0 boxes"
                        ))
                    }
                }
            }
            let dist = Dist::boxes(shape, ranks, *order).map_err(|e| e.to_string())?;
            if mode == Mode::Put {
                dist.check_disjoint()
                    .map_err(|e| format!("the producer's boxes overlap: {e}"))?;
            }
            debug_assert!(matches!(dist.layout(), Layout::Boxes(_)));
            Ok(dist)
        }
    }
}
