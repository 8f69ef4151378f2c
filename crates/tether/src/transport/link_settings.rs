//! What every link of a transport with a handshake (tcp, ucx) starts
//! from: this process's `Hello`, the handshake and goodbye timeouts, and
//! the run's key, with a fresh nonce for each link.

use std::sync::Arc;
use std::time::Duration;

use tether_auth::Key;
use tether_proto::link::{LinkAuth, LinkConfig};
use tether_proto::Hello;

use crate::settings::MAX_EAGER_LIMIT;
use crate::universe::Universe;

#[derive(Debug, Clone)]
pub struct LinkSettings {
    config: LinkConfig,
    key: Option<Arc<Key>>,
}

impl LinkSettings {
    /// Links that say this process's `Hello` in `universe`, authenticate
    /// with `key` when there is one, and wait `handshake` and `goodbye`.
    pub fn new(
        universe: &Universe,
        key: Option<Arc<Key>>,
        handshake: Duration,
        goodbye: Duration,
    ) -> LinkSettings {
        let me = &universe.programs[universe.my_program];
        let config = LinkConfig {
            hello: Hello {
                universe_id: universe.id,
                universe_rank: universe.my_universe_rank(),
                capabilities: 0,
                program: me.name.clone(),
                program_rank: universe.my_rank,
            },
            handshake_timeout: handshake,
            goodbye_timeout: goodbye,
            max_eager: MAX_EAGER_LIMIT,
            auth: None,
        };
        LinkSettings { config, key }
    }

    /// New timeouts, for the links made from now on.
    pub fn set_timeouts(&mut self, handshake: Duration, goodbye: Duration) {
        self.config.handshake_timeout = handshake;
        self.config.goodbye_timeout = goodbye;
    }

    /// The settings of a new link: with a fresh nonce of its own when the
    /// run has a key.
    pub fn new_link(&self) -> LinkConfig {
        let mut config = self.config.clone();
        config.auth = self.key.clone().map(|key| LinkAuth {
            key,
            nonce: tether_auth::nonce(),
        });
        config
    }
}
