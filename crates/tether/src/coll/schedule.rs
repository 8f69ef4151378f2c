//! A collective operation as data: rounds of point-to-point transfers, each
//! followed by local copies and reductions, over the caller's send and
//! receive buffers and scratch buffers the schedule owns.
//!
//! Contract: the transfers of a round are posted together; the round's local
//! steps run, in order, once all of its transfers have completed; then the
//! next round starts. Ranks are ranks of the communicator the schedule runs
//! on. A schedule never writes the send buffer. A schedule is not changed
//! by running it, so one schedule may run many times ([`super::cache`]).

/// Which buffer a [`Span`] lies in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Buf {
    /// The caller's send buffer (read only).
    Send,
    /// The caller's receive buffer (or the one buffer of a broadcast).
    Recv,
    /// Scratch buffer `i` of the schedule.
    Temp(usize),
}

/// `len` bytes at `offset` in a buffer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Span {
    pub buf: Buf,
    pub offset: usize,
    pub len: usize,
}

impl Span {
    pub fn new(buf: Buf, offset: usize, len: usize) -> Span {
        Span { buf, offset, len }
    }

    /// The whole of a buffer of `len` bytes.
    pub fn whole(buf: Buf, len: usize) -> Span {
        Span::new(buf, 0, len)
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Transfer {
    Send { to: u32, span: Span },
    Recv { from: u32, span: Span },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Local {
    /// Copies bytes; the spans may overlap.
    Copy { from: Span, to: Span },
    /// `into = into (op) from`, element-wise, with the schedule's reduction.
    Reduce { from: Span, into: Span },
}

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Round {
    pub transfers: Vec<Transfer>,
    pub locals: Vec<Local>,
}

impl Round {
    /// How many of the round's transfers receive from `rank`.
    pub fn receives_from(&self, rank: u32) -> usize {
        self.transfers
            .iter()
            .filter(|t| matches!(t, Transfer::Recv { from, .. } if *from == rank))
            .count()
    }
}

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Schedule {
    pub rounds: Vec<Round>,
    /// Sizes of the scratch buffers.
    pub temps: Vec<usize>,
}

impl Schedule {
    pub fn new() -> Schedule {
        Schedule::default()
    }

    /// A new scratch buffer of `len` bytes.
    pub fn temp(&mut self, len: usize) -> Buf {
        self.temps.push(len);
        Buf::Temp(self.temps.len() - 1)
    }

    /// Starts a new round; the calls that follow add to it.
    pub fn round(&mut self) -> &mut Schedule {
        self.rounds.push(Round::default());
        self
    }

    fn current(&mut self) -> &mut Round {
        if self.rounds.is_empty() {
            self.rounds.push(Round::default());
        }
        self.rounds.last_mut().expect("a round exists")
    }

    pub fn send(&mut self, to: u32, span: Span) -> &mut Schedule {
        self.current().transfers.push(Transfer::Send { to, span });
        self
    }

    pub fn recv(&mut self, from: u32, span: Span) -> &mut Schedule {
        self.current().transfers.push(Transfer::Recv { from, span });
        self
    }

    /// A copy after this round's transfers; empty copies are dropped.
    pub fn copy(&mut self, from: Span, to: Span) -> &mut Schedule {
        debug_assert_eq!(from.len, to.len);
        if from.len > 0 && from != to {
            self.current().locals.push(Local::Copy { from, to });
        }
        self
    }

    /// A reduction after this round's transfers; empty ones are dropped.
    pub fn reduce(&mut self, from: Span, into: Span) -> &mut Schedule {
        debug_assert_eq!(from.len, into.len);
        if from.len > 0 {
            self.current().locals.push(Local::Reduce { from, into });
        }
        self
    }
}
