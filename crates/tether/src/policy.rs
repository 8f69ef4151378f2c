//! The connection policy: when this process connects to its peers (on
//! first use, or all at start-up), which peers it connects at once when a
//! communication kernel starts, how long a connection and its handshake
//! may take, how a peer that is not there yet is tried again, and what a
//! hint changes.
//!
//! [`ConnectionPolicy::apply_hint`] is the one place that knows what
//! changing a setting at run time does. It matches on the typed
//! [`Key`] of the setting's row, with every row named, so a new setting
//! does not compile until it says; it returns the change as an
//! [`Effect`] for the runtime to carry out, which keeps the policy free
//! of the engine and the transports and lets it be tested alone.

use std::time::{Duration, Instant};

use crate::peers::Peers;
use crate::settings::{Key, Settings};
use crate::transport::rails::RailPolicy;
use crate::transport::retry::Retry;

/// When this process connects to a peer (`TETHER_CONNECT`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Connect {
    /// On first use.
    Lazy,
    /// To every peer at start-up (and when the hint is set).
    Eager,
}

impl Connect {
    fn of(settings: &Settings) -> Connect {
        match settings.connect() {
            "eager" => Connect::Eager,
            _ => Connect::Lazy,
        }
    }
}

/// What a change of a setting asks of the runtime.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Effect {
    /// The engine's eager limit for peers without one of their own.
    EagerLimit(u64),
    /// How waits poll is decided again (`TETHER_WAIT`).
    ChoosePolling,
    /// The longest time a wait polls before it sleeps.
    SpinMax(Duration),
    /// The transport order for peers not reached yet.
    TransportOrder(Vec<String>),
    /// How chunks are spread over the rails (from the next chunk), and
    /// cut (for peers reached from now on).
    Rails {
        policy: RailPolicy,
        stripe: tether_proto::Stripe,
    },
    /// TCP's connect, handshake and goodbye timeouts (it keeps a copy:
    /// its connect attempts and links read them).
    Timeouts {
        connect: Duration,
        handshake: Duration,
        goodbye: Duration,
    },
    /// Connect to every peer now.
    ConnectAll,
    /// Connect to these peers now.
    Connect(Vec<u32>),
    /// The most dedicated links this process keeps (0: no cap).
    MaxLinks(usize),
}

/// The connection policy of this process, from its settings and hints.
#[derive(Debug, Clone)]
pub struct ConnectionPolicy {
    connect: Connect,
    connect_timeout: Duration,
    handshake_timeout: Duration,
    goodbye_timeout: Duration,
    in_kernel: bool,
}

impl ConnectionPolicy {
    pub fn new(settings: &Settings) -> ConnectionPolicy {
        ConnectionPolicy {
            connect: Connect::of(settings),
            connect_timeout: Duration::from_secs(settings.connect_timeout()),
            handshake_timeout: Duration::from_secs(settings.handshake_timeout()),
            goodbye_timeout: Duration::from_secs(settings.finalize_timeout()),
            in_kernel: settings.in_kernel(),
        }
    }

    /// What start-up does: with eager connections, connect every peer.
    pub fn at_start(&self) -> Option<Effect> {
        (self.connect == Connect::Eager).then_some(Effect::ConnectAll)
    }

    /// How long a peer may take to be reached (`TETHER_CONNECT_TIMEOUT`).
    pub fn connect_timeout(&self) -> Duration {
        self.connect_timeout
    }

    /// How long an accepted connection may take to complete its handshake.
    pub fn handshake_timeout(&self) -> Duration {
        self.handshake_timeout
    }

    /// How long a link waits for the peer's goodbye after ours
    /// (`TETHER_FINALIZE_TIMEOUT`).
    pub fn goodbye_timeout(&self) -> Duration {
        self.goodbye_timeout
    }

    /// Whether the program is in a communication kernel (`IN_KERNEL`):
    /// waits spin longer, and the peers it uses are marked so that they
    /// are connected at once when the next kernel starts.
    #[inline(always)]
    pub fn in_kernel(&self) -> bool {
        self.in_kernel
    }

    /// The schedule of a peer that a first try at `now` did not reach:
    /// the [`Retry`] of its next tries and the deadline after which it is
    /// given up.
    pub fn after_first_try(&self, now: Instant) -> (Retry, Instant) {
        let mut retry = Retry::starting(now);
        retry.tried(now);
        (retry, now + self.connect_timeout)
    }

    /// Takes in the hint `hint` that `settings` now holds and says what
    /// the runtime must do about it (nothing for a setting that is read
    /// where it is used). `peers` tells which peers a kernel used.
    pub fn apply_hint(&mut self, hint: Key, settings: &Settings, peers: &Peers) -> Option<Effect> {
        match hint {
            Key::EagerLimit => Some(Effect::EagerLimit(settings.eager_limit())),
            Key::Wait => Some(Effect::ChoosePolling),
            Key::PollSpinUs => Some(Effect::SpinMax(Duration::from_micros(
                settings.poll_spin_us(),
            ))),
            Key::Transports => Some(Effect::TransportOrder(settings.transports())),
            Key::RailPolicy | Key::RailThreshold | Key::RailChunk => Some(Effect::Rails {
                policy: RailPolicy::of(settings.rail_policy()),
                stripe: crate::router::rail_stripe(settings),
            }),
            Key::Connect => {
                self.connect = Connect::of(settings);
                self.at_start()
            }
            Key::ConnectTimeout | Key::HandshakeTimeout | Key::FinalizeTimeout => {
                self.connect_timeout = Duration::from_secs(settings.connect_timeout());
                self.handshake_timeout = Duration::from_secs(settings.handshake_timeout());
                self.goodbye_timeout = Duration::from_secs(settings.finalize_timeout());
                Some(Effect::Timeouts {
                    connect: self.connect_timeout,
                    handshake: self.handshake_timeout,
                    goodbye: self.goodbye_timeout,
                })
            }
            Key::InKernel => {
                self.in_kernel = settings.in_kernel();
                self.in_kernel
                    .then(|| Effect::Connect(peers.kernel_peers()))
            }
            Key::MaxLinks => Some(Effect::MaxLinks(settings.max_links() as usize)),
            // Read where they are used, at their next use (the progress
            // thread's by the C boundary, which owns the thread).
            Key::FieldQueue | Key::ProgressThread | Key::ProgressIntervalUs => None,
            // Start-up settings: `Settings::set_hint` refuses them.
            Key::Rendezvous
            | Key::Program
            | Key::Programs
            | Key::Rank
            | Key::Size
            | Key::RunId
            | Key::HostId
            | Key::UcxLib
            | Key::UcxRma
            | Key::Rails
            | Key::ShmRingBytes
            | Key::ShmCma
            | Key::ShmMembarrier
            | Key::ShmSplitBytes
            | Key::RmaDirectBytes
            | Key::FileDir
            | Key::FileEagerLimit
            | Key::FileFsync
            | Key::FileNotify
            | Key::FilePollUs
            | Key::FilePollMaxUs
            | Key::FilePeerTimeout
            | Key::PeerTimeout
            | Key::HybridThreshold
            | Key::TcpInterface
            | Key::RunKey
            | Key::RunKeyFile
            | Key::TcpPort
            | Key::TcpPublish
            | Key::LocalProcesses
            | Key::Trace
            | Key::TraceClockShiftNs
            | Key::Stats
            | Key::OutputRelay
            | Key::Launcher
            | Key::LogLevel
            | Key::LogFile => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn settings(vars: &[(&str, &str)]) -> Settings {
        let vars = vars
            .iter()
            .map(|(k, v)| (format!("TETHER_{k}"), v.to_string()));
        Settings::from_vars(vars).unwrap().0
    }

    /// Sets hint `key` to `value` and applies it.
    fn hint(
        policy: &mut ConnectionPolicy,
        settings: &mut Settings,
        peers: &Peers,
        key: &str,
        value: &str,
    ) -> Option<Effect> {
        let hint = settings.set_hint(key, value).unwrap();
        policy.apply_hint(hint, settings, peers)
    }

    #[test]
    fn start_up_connects_every_peer_only_when_eager() {
        assert_eq!(ConnectionPolicy::new(&settings(&[])).at_start(), None);
        let eager = ConnectionPolicy::new(&settings(&[("CONNECT", "eager")]));
        assert_eq!(eager.at_start(), Some(Effect::ConnectAll));
    }

    #[test]
    fn hints_become_their_effects() {
        let mut s = settings(&[]);
        let mut policy = ConnectionPolicy::new(&s);
        let peers = Peers::default();
        let mut apply = |key, value| hint(&mut policy, &mut s, &peers, key, value);
        assert_eq!(apply("EAGER_LIMIT", "512"), Some(Effect::EagerLimit(512)));
        assert_eq!(apply("WAIT", "yield"), Some(Effect::ChoosePolling));
        assert_eq!(
            apply("POLL_SPIN_US", "7"),
            Some(Effect::SpinMax(Duration::from_micros(7)))
        );
        assert_eq!(
            apply("TRANSPORTS", "tcp,file"),
            Some(Effect::TransportOrder(vec!["tcp".into(), "file".into()]))
        );
        assert_eq!(apply("CONNECT", "lazy"), None);
        assert_eq!(apply("CONNECT", "eager"), Some(Effect::ConnectAll));
        assert_eq!(apply("FIELD_QUEUE", "3"), None);
        assert_eq!(apply("MAX_LINKS", "4"), Some(Effect::MaxLinks(4)));
        // The links' goodbye deadline follows TETHER_FINALIZE_TIMEOUT.
        assert!(matches!(
            apply("FINALIZE_TIMEOUT", "1"),
            Some(Effect::Timeouts { goodbye, .. }) if goodbye == Duration::from_secs(1)
        ));
    }

    #[test]
    fn timeouts_change_the_policy_and_tcp() {
        let mut s = settings(&[]);
        let mut policy = ConnectionPolicy::new(&s);
        assert_eq!(policy.connect_timeout(), Duration::from_secs(30));
        let peers = Peers::default();
        let expected = Effect::Timeouts {
            connect: Duration::from_secs(5),
            handshake: Duration::from_secs(10),
            goodbye: Duration::from_secs(s.finalize_timeout()),
        };
        let effect = hint(&mut policy, &mut s, &peers, "CONNECT_TIMEOUT", "5");
        assert_eq!(effect, Some(expected));
        let effect = hint(&mut policy, &mut s, &peers, "HANDSHAKE_TIMEOUT", "2");
        assert_eq!(
            effect,
            Some(Effect::Timeouts {
                connect: Duration::from_secs(5),
                handshake: Duration::from_secs(2),
                goodbye: Duration::from_secs(s.finalize_timeout()),
            })
        );
        assert_eq!(policy.connect_timeout(), Duration::from_secs(5));
        assert_eq!(policy.handshake_timeout(), Duration::from_secs(2));
        // A peer not there at the first try is tried again on the retry
        // schedule, until the new timeout.
        let now = Instant::now();
        let (retry, deadline) = policy.after_first_try(now);
        assert_eq!(retry.tries(), 1);
        assert!(!retry.is_due(now));
        assert_eq!(retry.next_try() - now, Duration::from_millis(1));
        assert_eq!(deadline - now, Duration::from_secs(5));
    }

    #[test]
    fn a_kernel_connects_the_peers_the_last_ones_used() {
        let mut s = settings(&[("IN_KERNEL", "1")]);
        let mut policy = ConnectionPolicy::new(&s);
        assert!(policy.in_kernel());
        let mut peers = Peers::default();
        peers.mark_kernel(4);
        peers.mark_kernel(2);
        assert_eq!(hint(&mut policy, &mut s, &peers, "IN_KERNEL", "0"), None);
        assert!(!policy.in_kernel());
        assert_eq!(
            hint(&mut policy, &mut s, &peers, "IN_KERNEL", "1"),
            Some(Effect::Connect(vec![2, 4]))
        );
        assert!(policy.in_kernel());
    }

    #[test]
    fn every_hint_row_is_handled_without_a_panic() {
        let mut s = settings(&[]);
        let mut policy = ConnectionPolicy::new(&s);
        let peers = Peers::default();
        for &key in Key::ALL.iter().filter(|k| k.row().hint) {
            let row = key.row();
            let value = match row.default {
                "" => "1",
                default => default,
            };
            let applied = s.set_hint(row.key, value).map(|k| {
                assert_eq!(k, key);
                policy.apply_hint(k, &s, &peers)
            });
            assert!(applied.is_ok(), "{}: {applied:?}", row.key);
        }
    }
}
