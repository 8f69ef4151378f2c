//! The runtime's side of traces (`crate::trace`): starting the recorder,
//! the clock exchange with universe rank 0, and the hooks the calls use.
//!
//! Clock exchange: a tracing process sends universe rank 0 a few small
//! messages on a context of its own and rank 0 answers each with its
//! clock; the exchange with the shortest round trip gives the offset
//! (NTP's method), once at join and once at finalize. Rank 0 always keeps
//! a receive posted for them and answers from its progress loop, traced
//! or not, so that tracing some programs of a universe and not others
//! cannot hang; a process being traced waits at join until rank 0 makes
//! progress (calls into Tether) and gives the exchange up after
//! `TETHER_CONNECT_TIMEOUT`.

use std::path::Path;
use std::time::{Duration, Instant};

use tether_proto::{Region, ReqId};

use super::Runtime;
use crate::error::{err, ErrorClass, Result};
use crate::trace::{best_sample, Identity, Recorder, Span};

/// The context of the clock exchange, apart from every communicator's and
/// the fields'.
const CLOCK_CONTEXT: u32 = u32::MAX - 4;
const ASK: i32 = 0;
const ANSWER: i32 = 1;
/// Exchanges per measurement: enough for one without a delay on the way.
const EXCHANGES: usize = 8;

/// The first byte of a clock question asked at finalize; 0 at join.
const AT_FINALIZE: u8 = 1;

/// Rank 0's side: the receive it keeps posted, the answers in flight, and
/// who asked: a process that asked at join asks [`EXCHANGES`] times again
/// at its finalize, and rank 0 answers them all before its own goodbye
/// (after which its links send nothing more).
#[derive(Default)]
pub(super) struct ClockServer {
    asked: Option<(ReqId, Box<[u8; 8]>)>,
    answers: Vec<(ReqId, Box<[u8; 8]>)>,
    joined: rustc_hash::FxHashSet<u32>,
    /// Finalize questions answered, by process.
    finished: rustc_hash::FxHashMap<u32, usize>,
}

impl Runtime {
    /// Starts what traces need: rank 0's clock answers always; with
    /// `TETHER_TRACE`, the recorder and the clock measurement at join.
    pub(super) fn start_tracing(&mut self) -> Result<()> {
        self.trace_shift = parse_shift(self.settings.trace_clock_shift_ns())?;
        if self.me == 0 {
            self.post_clock_ask();
        }
        let Some(dir) = self.settings.trace().map(str::to_string) else {
            return Ok(());
        };
        let program = &self.universe.programs[self.universe.my_program];
        let who = Identity {
            program: program.name.clone(),
            program_id: self.universe.my_program,
            rank: self.universe.my_rank,
            universe_rank: self.me,
        };
        let recorder = Recorder::new(Path::new(&dir), who, self.trace_shift).map_err(|e| {
            err(
                ErrorClass::Arg,
                format!("TETHER_TRACE={dir}: cannot create the directory: {e}"),
            )
        })?;
        self.trace = Some(Box::new(recorder));
        self.engine.enable_ordinals();
        self.measure_clock("join");
        Ok(())
    }

    /// The trace clock, also when this process records no trace (rank 0
    /// answers clock questions either way).
    fn trace_clock(&self) -> i64 {
        crate::trace::clock(self.trace_shift)
    }

    /// Now, if a trace is recorded.
    #[inline]
    pub(super) fn trace_now(&self) -> Option<i64> {
        self.trace.as_ref().map(|t| t.now())
    }

    /// Opens the span of request `req`, started at `start`.
    pub(super) fn trace_open(&mut self, req: ReqId, span: Span) {
        if let Some(trace) = self.trace.as_deref_mut() {
            trace.open(req.to_wire(), span);
        }
    }

    /// Records a finished span.
    pub(super) fn trace_push(&mut self, mut span: Span) {
        if let Some(trace) = self.trace.as_deref_mut() {
            span.end = trace.now();
            trace.push(span);
        }
    }

    /// Closes the span of `req` as its completion is taken.
    pub(super) fn trace_close(
        &mut self,
        req: ReqId,
        source: u32,
        bytes: u64,
        ordinal: Option<u64>,
        tag: i32,
    ) {
        if let Some(trace) = self.trace.as_deref_mut() {
            let now = trace.now();
            let peer = (source != u32::MAX).then_some(source);
            trace.close(req.to_wire(), now, peer, bytes, ordinal, tag);
        }
    }

    /// Records a wait that blocked from `start` until now.
    pub(super) fn trace_wait(&mut self, start: i64) {
        if let Some(trace) = self.trace.as_deref_mut() {
            let now = trace.now();
            trace.push_wait(start, now);
        }
    }

    /// Rank 0: answers the clock questions that came, and asks for more.
    pub(super) fn serve_clock(&mut self) {
        let Some((asked, _)) = &self.clock_server.asked else {
            return;
        };
        let asked = *asked;
        if self.engine.completion(asked).is_none() {
            if !self.clock_server.answers.is_empty() {
                // An answer sent is taken, freeing its request and buffer.
                let engine = &mut self.engine;
                self.clock_server
                    .answers
                    .retain(|(req, _)| engine.take_completion(*req).is_none());
            }
            return;
        }
        let completion = self.engine.take_completion(asked);
        let question = self.clock_server.asked.take().map(|(_, q)| q[0]);
        if let Some(c) = completion.filter(|c| c.error.is_none()) {
            if question == Some(AT_FINALIZE) {
                *self.clock_server.finished.entry(c.source).or_default() += 1;
            } else {
                self.clock_server.joined.insert(c.source);
            }
            let answer = Box::new(self.trace_clock().to_le_bytes());
            let req = self.engine.isend(
                c.source,
                CLOCK_CONTEXT,
                ANSWER,
                Region::from_const(answer.as_ptr(), answer.len()),
            );
            self.clock_server.answers.push((req, answer));
        }
        self.post_clock_ask();
    }

    fn post_clock_ask(&mut self) {
        let mut buffer = Box::new([0u8; 8]);
        let req = self.engine.irecv(
            None,
            CLOCK_CONTEXT,
            Some(ASK),
            Region {
                ptr: buffer.as_mut_ptr(),
                len: buffer.len(),
            },
        );
        self.clock_server.asked = Some((req, buffer));
    }

    /// Measures this process's offset to rank 0's clock and records it;
    /// gives up (recording nothing) if rank 0 does not answer in time.
    pub(super) fn measure_clock(&mut self, when: &'static str) {
        if self.trace.is_none() {
            return;
        }
        if self.me == 0 {
            let now = self.trace_clock();
            if let Some(sample) = best_sample(when, &[(now, now, now)]) {
                self.trace.as_deref_mut().expect("tracing").clock(sample);
            }
            return;
        }
        let deadline = Instant::now() + Duration::from_secs(self.settings.connect_timeout());
        let mut exchanges = Vec::with_capacity(EXCHANGES);
        let at_finalize = when == "finalize";
        for _ in 0..EXCHANGES {
            match self.exchange_clock(deadline, at_finalize) {
                Some(exchange) => exchanges.push(exchange),
                None => {
                    tracing::warn!(
                        "trace: universe rank 0 did not answer the clock exchange at {when}; its clock offset is not measured"
                    );
                    break;
                }
            }
        }
        if let Some(sample) = best_sample(when, &exchanges) {
            self.trace.as_deref_mut().expect("tracing").clock(sample);
        }
    }

    /// One question to rank 0: (sent, rank 0's time, received).
    fn exchange_clock(&mut self, deadline: Instant, at_finalize: bool) -> Option<(i64, i64, i64)> {
        let mut question = Box::new([0u8; 8]);
        if at_finalize {
            question[0] = AT_FINALIZE;
        }
        let mut answer = Box::new([0u8; 8]);
        let sent = self.trace_clock();
        let ask = self.engine.isend(
            0,
            CLOCK_CONTEXT,
            ASK,
            Region::from_const(question.as_ptr(), question.len()),
        );
        let reply = self.engine.irecv(
            Some(0),
            CLOCK_CONTEXT,
            Some(ANSWER),
            Region {
                ptr: answer.as_mut_ptr(),
                len: answer.len(),
            },
        );
        loop {
            self.progress_once(Some(Duration::from_millis(1)));
            if self.engine.completion(reply).is_some() && self.engine.completion(ask).is_some() {
                break;
            }
            if Instant::now() >= deadline {
                // The transport may still hold the question and a late
                // answer may still land: their 16 bytes are left to them.
                self.engine.cancel(reply);
                Box::leak(question);
                Box::leak(answer);
                return None;
            }
        }
        let received = self.trace_clock();
        let ok = self
            .engine
            .take_completion(reply)
            .is_some_and(|c| c.error.is_none());
        let _ = self.engine.take_completion(ask);
        ok.then(|| (sent, i64::from_le_bytes(*answer), received))
    }

    /// Rank 0 at finalize, before its goodbye: answers the finalize clock
    /// questions of every process that asked at join and is not lost,
    /// until `deadline`.
    pub(super) fn answer_final_clocks(&mut self, deadline: Instant) {
        if self.me != 0 {
            return;
        }
        let waiting = |rt: &Runtime| {
            let server = &rt.clock_server;
            server.joined.iter().any(|p| {
                server.finished.get(p).copied().unwrap_or(0) < EXCHANGES && !rt.engine.is_lost(*p)
            })
        };
        while waiting(self) && Instant::now() < deadline {
            self.progress_once(Some(Duration::from_millis(10)));
        }
    }

    /// Finalize: the clock once more, then the file.
    pub(super) fn finish_trace(&mut self) {
        if self.trace.is_none() {
            return;
        }
        self.measure_clock("finalize");
        let Some(trace) = self.trace.take() else {
            return;
        };
        let me = self.me;
        let transport = &self.transport;
        match trace.write(|peer| transport.router().transport_of(peer, me)) {
            Ok(path) => tracing::debug!("trace written to {}", path.display()),
            Err(e) => tracing::warn!("trace: cannot write {}: {e}", trace.path().display()),
        }
    }
}

fn parse_shift(text: Option<&str>) -> Result<i64> {
    match text {
        None => Ok(0),
        Some(t) => t.trim().parse().map_err(|_| {
            err(
                ErrorClass::HintValue,
                format!("TETHER_TRACE_CLOCK_SHIFT_NS={t:?} is not a whole number of nanoseconds"),
            )
        }),
    }
}
