//! The messages of fields: where they travel (contexts and tags) and how
//! they are encoded. Fields use two contexts of their own, apart from every
//! communicator's: control messages (descriptions, hellos, step
//! announcements, acknowledgements) and data. Tags come from a hash of the
//! field's key (producer program and name), so two programs agree on them
//! without talking, whatever order they create their fields in; the hello
//! carries the key itself, so a collision is caught, not obeyed.

use tether_redist::Dist;

use super::{LocalDist, Mode};
use crate::datatype::Family;

/// Context of fields' control messages. Communicator contexts count up
/// from 2 and never reach the top of the range.
pub const CONTROL_CONTEXT: u32 = u32::MAX - 3;
/// Context of fields' step data.
pub const DATA_CONTEXT: u32 = u32::MAX - 2;

/// Announced instead of a step when the producer freed the field.
pub const END: i64 = i64::MIN;
/// Acknowledged instead of a step when a consumer freed the field.
pub const LEFT: i64 = i64::MAX;

/// The kinds of control message, in a tag's low bits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// A rank's local description, to its program's rank 0.
    Describe = 0,
    /// Rank 0's combined distribution of its side (or why there is none).
    Side = 1,
    /// A side's distribution and element type, to every rank of the other.
    Hello = 2,
    /// The producer's next step, to every consumer rank.
    Step = 3,
    /// A consumer rank took a step, to the producer ranks it heard from.
    Ack = 4,
}

/// The 28-bit key of the field `name` of program `producer`, created
/// for the `generation`-th time (from 0) by this process: a name used
/// again gets other tags, so messages of the field before it that are
/// still in flight (data, an end announced to a consumer that left, a
/// consumer's leaving) never meet the new one.
pub fn field_key(producer: &str, name: &str, generation: u32) -> u32 {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    let bytes = producer.bytes().chain([0]).chain(name.bytes());
    for byte in bytes.chain([0]).chain(generation.to_le_bytes()) {
        hash = (hash ^ u64::from(byte)).wrapping_mul(0x0100_0000_01b3);
    }
    ((hash ^ (hash >> 32)) & 0x0fff_ffff) as u32
}

/// The control tag of message `kind` of the field with key `key`.
pub fn control_tag(key: u32, kind: Kind) -> i32 {
    ((key << 3) | kind as u32) as i32
}

/// The data tag of the field with key `key`.
pub fn data_tag(key: u32) -> i32 {
    key as i32
}

/// A rank's local description: a regular distribution or its boxes.
pub fn encode_local(local: &LocalDist) -> Vec<u8> {
    match local {
        LocalDist::Regular(dist) => [&[0u8][..], &dist.encode()].concat(),
        LocalDist::Boxes {
            shape,
            boxes,
            order,
        } => {
            let one_rank = Dist::boxes(shape, vec![boxes.clone()], *order)
                .expect("boxes were checked when the dist was created");
            [&[1u8][..], &one_rank.encode()].concat()
        }
    }
}

pub fn decode_local(bytes: &[u8]) -> Option<LocalDist> {
    let (&tag, rest) = bytes.split_first()?;
    let dist = Dist::decode(rest).ok()?;
    match tag {
        0 => Some(LocalDist::Regular(dist)),
        1 => {
            let tether_redist::Layout::Boxes(mut ranks) = dist.layout().clone() else {
                return None;
            };
            if ranks.len() != 1 {
                return None;
            }
            Some(LocalDist::Boxes {
                shape: dist.shape().to_vec(),
                boxes: ranks.pop()?,
                order: dist.order(),
            })
        }
        _ => None,
    }
}

/// Rank 0's answer to its ranks: the side's distribution or why not.
pub fn encode_side(side: &std::result::Result<Dist, String>) -> Vec<u8> {
    match side {
        Ok(dist) => [&[0u8][..], &dist.encode()].concat(),
        Err(why) => [&[1u8][..], why.as_bytes()].concat(),
    }
}

pub fn decode_side(bytes: &[u8]) -> Option<std::result::Result<Dist, String>> {
    let (&tag, rest) = bytes.split_first()?;
    match tag {
        0 => Dist::decode(rest).ok().map(Ok),
        1 => Some(Err(String::from_utf8_lossy(rest).into_owned())),
        _ => None,
    }
}

/// What one side tells every rank of the other.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Hello {
    pub mode: Mode,
    pub producer: String,
    pub name: String,
    pub family: Family,
    pub element_size: u32,
    pub dist: Dist,
}

const HELLO_VERSION: u8 = 1;

impl Hello {
    pub fn encode(&self) -> Vec<u8> {
        let mut out = vec![
            HELLO_VERSION,
            match self.mode {
                Mode::Put => 0,
                Mode::Get => 1,
            },
            self.family as u8,
        ];
        out.extend_from_slice(&self.element_size.to_le_bytes());
        for text in [&self.producer, &self.name] {
            out.extend_from_slice(&(text.len() as u32).to_le_bytes());
            out.extend_from_slice(text.as_bytes());
        }
        out.extend_from_slice(&self.dist.encode());
        out
    }

    /// `None` for anything that is not a hello of this version.
    pub fn decode(bytes: &[u8]) -> Option<Hello> {
        let mut rest = bytes;
        let mut take = |n: usize| -> Option<&[u8]> {
            let (head, tail) = rest.split_at_checked(n)?;
            rest = tail;
            Some(head)
        };
        let head = take(3)?;
        if head[0] != HELLO_VERSION {
            return None;
        }
        let mode = match head[1] {
            0 => Mode::Put,
            1 => Mode::Get,
            _ => return None,
        };
        let family = Family::from_code(head[2])?;
        let element_size = u32::from_le_bytes(take(4)?.try_into().ok()?);
        let mut text = || -> Option<String> {
            let len = u32::from_le_bytes(take(4)?.try_into().ok()?) as usize;
            String::from_utf8(take(len)?.to_vec()).ok()
        };
        let producer = text()?;
        let name = text()?;
        let dist = Dist::decode(rest).ok()?;
        Some(Hello {
            mode,
            producer,
            name,
            family,
            element_size,
            dist,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tether_redist::{Kind as DistKind, Order, Region};

    fn dist() -> Dist {
        Dist::regular(
            &[9, 4],
            &[2, 1],
            &[DistKind::Block, DistKind::None],
            Order::C,
        )
        .unwrap()
    }

    #[test]
    fn hellos_round_trip_and_garbage_is_refused() {
        let hello = Hello {
            mode: Mode::Get,
            producer: "sim".into(),
            name: "temperature".into(),
            family: Family::Real,
            element_size: 8,
            dist: dist(),
        };
        let bytes = hello.encode();
        assert_eq!(Hello::decode(&bytes), Some(hello));
        for cut in 0..bytes.len() {
            assert!(Hello::decode(&bytes[..cut]).is_none(), "cut at {cut}");
        }
        let mut other_version = bytes.clone();
        other_version[0] = 9;
        assert!(Hello::decode(&other_version).is_none());
    }

    #[test]
    fn local_descriptions_and_sides_round_trip() {
        let regular = LocalDist::Regular(dist());
        assert_eq!(decode_local(&encode_local(&regular)), Some(regular));
        let boxes = LocalDist::Boxes {
            shape: vec![9, 4],
            boxes: vec![Region {
                start: vec![1, 0],
                count: vec![2, 4],
            }],
            order: Order::Fortran,
        };
        assert_eq!(decode_local(&encode_local(&boxes)), Some(boxes));
        assert_eq!(decode_local(&[7, 1, 2]), None);
        let ok = Ok(dist());
        assert_eq!(decode_side(&encode_side(&ok)), Some(ok));
        let refused = Err("rank 2 disagrees".to_string());
        assert_eq!(decode_side(&encode_side(&refused)), Some(refused));
    }

    #[test]
    fn tags_keep_kinds_and_fields_apart() {
        let a = field_key("sim", "t", 0);
        let b = field_key("sim", "u", 0);
        assert_ne!(a, b);
        assert_ne!(field_key("si", "mt", 0), field_key("sim", "t", 0));
        assert_ne!(field_key("sim", "t", 1), a);
        assert!(control_tag(a, Kind::Ack) >= 0);
        assert!(control_tag(0x0fff_ffff, Kind::Ack) >= 0);
        assert_ne!(control_tag(a, Kind::Step), control_tag(a, Kind::Ack));
    }
}
