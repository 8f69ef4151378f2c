//! The reactor: the one epoll every transport's descriptors wait in, owned
//! by the router, not by any transport.
//!
//! Each transport registers its descriptors (sockets, the shared-memory
//! doorbell, pidfds, the file inbox's inotify descriptor) under tokens of
//! its own [`TokenSpace`], so the router can hand every ready token to the
//! transport that owns it without any transport knowing of another. A
//! transport registers through a [`mio::Registry`] (borrowed, or its own
//! clone for one that registers during progress); only the router waits.
//!
//! Contract: [`Reactor::wait`] is the only call that may block, for at
//! most the timeout it is given (`None`: until a descriptor is ready); an
//! interrupted wait returns with nothing ready. Registration errors are
//! the registering transport's to report.

use std::io;
use std::time::Duration;

use mio::{Events, Poll, Registry, Token};

/// Bits of a token that number a descriptor within its owner's space.
const INDEX_BITS: u32 = 40;
const INDEX_MASK: usize = (1 << INDEX_BITS) - 1;

/// The transport a token belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Owner {
    Tcp = 1,
    Shm = 2,
    File = 3,
    Ucx = 4,
}

/// Bits of an index that number a descriptor within a part of its
/// owner's space ([`TokenSpace::part`]: one TCP rail).
const PART_BITS: u32 = 32;

/// The tokens of one owner: `owner` in the high bits, an index the owner
/// chooses in the low [`INDEX_BITS`]. A space has parts, for several
/// transports of one kind (the rails of TCP), each with its own indices
/// below `2^32`; the spaces below are part 0 of theirs.
#[derive(Debug, Clone, Copy)]
pub struct TokenSpace {
    owner: Owner,
    base: usize,
}

pub const TCP_TOKENS: TokenSpace = TokenSpace {
    owner: Owner::Tcp,
    base: 0,
};
pub const SHM_TOKENS: TokenSpace = TokenSpace {
    owner: Owner::Shm,
    base: 0,
};
pub const FILE_TOKENS: TokenSpace = TokenSpace {
    owner: Owner::File,
    base: 0,
};
pub const UCX_TOKENS: TokenSpace = TokenSpace {
    owner: Owner::Ucx,
    base: 0,
};

impl TokenSpace {
    /// The token numbered `index` in this space.
    pub const fn token(self, index: usize) -> Token {
        assert!(index < 1 << PART_BITS, "token index out of its part");
        let index = self.base + index;
        assert!(index <= INDEX_MASK, "token index out of its space");
        Token(((self.owner as usize) << INDEX_BITS) | index)
    }

    /// The index of `token` if it is in this part of this space.
    pub fn index(self, token: Token) -> Option<usize> {
        let index = token.0 & INDEX_MASK;
        (owner(token) == Some(self.owner) && index >> PART_BITS == self.base >> PART_BITS)
            .then_some(index - self.base)
    }

    /// Part `number` of this space: its own indices, below `2^32` each.
    pub const fn part(self, number: usize) -> TokenSpace {
        TokenSpace {
            owner: self.owner,
            base: number << PART_BITS,
        }
    }

    /// Which part of this space `token` belongs to.
    pub fn part_of(self, token: Token) -> Option<usize> {
        (owner(token) == Some(self.owner)).then_some((token.0 & INDEX_MASK) >> PART_BITS)
    }
}

/// The owner of `token`, if it is any transport's.
pub fn owner(token: Token) -> Option<Owner> {
    match token.0 >> INDEX_BITS {
        1 => Some(Owner::Tcp),
        2 => Some(Owner::Shm),
        3 => Some(Owner::File),
        4 => Some(Owner::Ucx),
        _ => None,
    }
}

/// One ready descriptor of the last wait.
#[derive(Debug, Clone, Copy)]
pub struct Ready {
    pub token: Token,
    /// Readable, or closed or in error (a read then says which).
    pub readable: bool,
    pub writable: bool,
    /// The peer closed its side (or the descriptor is in error): a read
    /// ends in end of stream once the bytes before it are read, and no
    /// later event will say so again.
    pub closed: bool,
}

pub struct Reactor {
    poll: Poll,
    events: Events,
    /// The ready descriptors of the last wait (kept to reuse its memory).
    ready: Vec<Ready>,
}

impl Reactor {
    pub fn new() -> io::Result<Reactor> {
        Ok(Reactor {
            poll: Poll::new()?,
            events: Events::with_capacity(256),
            ready: Vec::new(),
        })
    }

    pub fn registry(&self) -> &Registry {
        self.poll.registry()
    }

    /// Waits up to `timeout` for descriptors to become ready and returns
    /// them, in the order epoll reported them.
    pub fn wait(&mut self, timeout: Option<Duration>) -> &[Ready] {
        self.ready.clear();
        if let Err(e) = self.poll.poll(&mut self.events, timeout) {
            if e.kind() != io::ErrorKind::Interrupted {
                tracing::error!("epoll wait failed: {e}");
            }
            return &self.ready;
        }
        self.ready.extend(self.events.iter().map(|e| Ready {
            token: e.token(),
            readable: e.is_readable() || e.is_read_closed() || e.is_error(),
            writable: e.is_writable(),
            closed: e.is_read_closed() || e.is_error(),
        }));
        &self.ready
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_name_their_owner_and_index() {
        let token = SHM_TOKENS.token(7);
        assert_eq!(owner(token), Some(Owner::Shm));
        assert_eq!(SHM_TOKENS.index(token), Some(7));
        assert_eq!(TCP_TOKENS.index(token), None);
        assert_eq!(FILE_TOKENS.index(FILE_TOKENS.token(0)), Some(0));
        assert_eq!(owner(Token(5)), None);
        let rail = TCP_TOKENS.part(3).token(9);
        assert_eq!(owner(rail), Some(Owner::Tcp));
        assert_eq!(TCP_TOKENS.part_of(rail), Some(3));
        assert_eq!(TCP_TOKENS.part(3).index(rail), Some(9));
        assert_eq!(TCP_TOKENS.index(rail), None);
        assert_eq!(TCP_TOKENS.part(2).index(rail), None);
        assert_eq!(TCP_TOKENS.part_of(TCP_TOKENS.token(4)), Some(0));
        assert_eq!(SHM_TOKENS.part_of(rail), None);
    }
}
