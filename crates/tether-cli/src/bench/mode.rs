//! What each benchmark mode measures, in which unit, and its defaults.

use clap::ValueEnum;
use serde::Serialize;

/// A benchmark, named as the OSU micro-benchmarks name theirs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum, Serialize)]
#[serde(rename_all = "snake_case")]
#[value(rename_all = "snake_case")]
pub enum Mode {
    /// Ping-pong between two programs: half the round trip (us).
    Latency,
    /// A window of non-blocking sends answered by one ack (MB/s).
    Bw,
    /// `bw` with blocking calls: a stream of blocking sends to a receiver
    /// looping on blocking receives, one ack per window (MB/s).
    BwBlocking,
    /// Windows in both directions at once (MB/s, both directions summed).
    Bibw,
    /// Several sender/receiver pairs streaming at once (messages/s).
    MbwMr,
    /// `bw` with TETHER_RAILS connections per peer (MB/s).
    MultiRail,
    /// Allreduce of doubles with SUM over every process (us per operation).
    Allreduce,
    /// Broadcast from a rotating root (us per operation).
    Bcast,
    /// Barrier over every process (us per operation).
    Barrier,
    /// One-sided put, then a flush of the target (us per operation).
    Put,
    /// One-sided get, then a flush (us per operation).
    Get,
    /// fetch_and_op of an INT64 SUM, then a flush (us per operation).
    FetchOp,
    /// A window of one-sided puts, then one flush (MB/s).
    PutBw,
    /// An active message answered from its handler: the round trip (us).
    Am,
}

/// The unit of a mode's figures and which way is better.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Metric {
    /// Microseconds; lower is better.
    LatencyUs,
    /// 10^6 bytes per second; higher is better.
    BandwidthMbS,
    /// Messages per second over all pairs; higher is better.
    MessagesPerS,
}

impl Metric {
    pub fn unit(self) -> &'static str {
        match self {
            Metric::LatencyUs => "us",
            Metric::BandwidthMbS => "MB/s",
            Metric::MessagesPerS => "msg/s",
        }
    }

    pub fn higher_is_better(self) -> bool {
        !matches!(self, Metric::LatencyUs)
    }
}

impl Mode {
    /// The name on the command line and in JSON.
    pub fn name(self) -> &'static str {
        match self {
            Mode::Latency => "latency",
            Mode::Bw => "bw",
            Mode::BwBlocking => "bw_blocking",
            Mode::Bibw => "bibw",
            Mode::MbwMr => "mbw_mr",
            Mode::MultiRail => "multi_rail",
            Mode::Allreduce => "allreduce",
            Mode::Bcast => "bcast",
            Mode::Barrier => "barrier",
            Mode::Put => "put",
            Mode::Get => "get",
            Mode::FetchOp => "fetch_op",
            Mode::PutBw => "put_bw",
            Mode::Am => "am",
        }
    }

    pub fn metric(self) -> Metric {
        match self {
            Mode::Latency
            | Mode::Allreduce
            | Mode::Bcast
            | Mode::Barrier
            | Mode::Put
            | Mode::Get
            | Mode::FetchOp
            | Mode::Am => Metric::LatencyUs,
            Mode::Bw | Mode::BwBlocking | Mode::Bibw | Mode::MultiRail | Mode::PutBw => {
                Metric::BandwidthMbS
            }
            Mode::MbwMr => Metric::MessagesPerS,
        }
    }

    /// A collective over every process of every program (rather than
    /// traffic between pairs).
    pub fn collective(self) -> bool {
        matches!(self, Mode::Allreduce | Mode::Bcast | Mode::Barrier)
    }

    /// Streaming modes send windows of non-blocking messages.
    pub fn windowed(self) -> bool {
        matches!(
            self,
            Mode::Bw | Mode::BwBlocking | Mode::Bibw | Mode::MbwMr | Mode::MultiRail | Mode::PutBw
        )
    }

    /// Sizes measured when none are given.
    pub fn default_sizes(self) -> Vec<u64> {
        match self {
            Mode::Latency => vec![8, 64, 512, 4 << 10, 32 << 10, 256 << 10, 1 << 20],
            Mode::Bw | Mode::BwBlocking | Mode::Bibw | Mode::MultiRail => {
                vec![8, 512, 4 << 10, 64 << 10, 1 << 20, 16 << 20]
            }
            Mode::MbwMr => vec![8, 64, 1 << 10],
            Mode::Allreduce | Mode::Bcast => vec![8, 64 << 10, 1 << 20],
            Mode::Barrier => vec![0],
            Mode::Put | Mode::Get | Mode::Am => vec![8, 4 << 10, 64 << 10, 1 << 20],
            Mode::FetchOp => vec![8],
            Mode::PutBw => vec![64 << 10, 1 << 20, 16 << 20],
        }
    }

    /// Smallest size the mode can move: an allreduce of doubles needs one.
    pub fn min_size(self) -> u64 {
        match self {
            Mode::Allreduce | Mode::FetchOp => 8,
            _ => 0,
        }
    }

    /// Timed iterations per size when `--iters` is not given, OSU-like:
    /// many for small messages, fewer for large ones (for windowed modes,
    /// iterations are windows).
    pub fn default_iters(self, size: u64) -> u64 {
        if self.windowed() {
            match size {
                0..=65536 => 100,
                65537..=1_048_576 => 20,
                _ => 5,
            }
        } else {
            match size {
                0..=8192 => 5000,
                8193..=1_048_576 => 500,
                _ => 50,
            }
        }
    }

    /// Untimed iterations before the timed ones when `--warmup` is not given.
    pub fn default_warmup(self, size: u64) -> u64 {
        (self.default_iters(size) / 10).max(1)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_match_the_command_line() {
        for mode in Mode::value_variants() {
            let parsed = Mode::from_str(mode.name(), false).unwrap();
            assert_eq!(parsed, *mode);
        }
    }

    #[test]
    fn defaults_fit_the_mode() {
        for mode in Mode::value_variants() {
            let sizes = mode.default_sizes();
            assert!(!sizes.is_empty());
            assert!(sizes.iter().all(|s| *s >= mode.min_size()));
            assert!(sizes.iter().all(|s| mode.default_warmup(*s) >= 1));
        }
    }
}
