//! Fields (DESIGN 3.8): what one process knows of a distributed array it
//! puts or gets step after step, and the messages the two sides of a field
//! exchange. The runtime's field activity (`runtime/field_activity.rs`)
//! moves the steps; the plan of who sends which elements to whom comes
//! from [`tether_redist`].
//!
//! Protocol, per field (identified by its producer program and its name):
//! - **Creation** (collective over each program's joined processes): every
//!   rank sends its local description to its program's rank 0
//!   ([`wire::Kind::Describe`]), which combines them into the side's
//!   distribution and sends it back to every rank ([`wire::Kind::Side`]) and
//!   to every rank of every peer program ([`wire::Kind::Hello`]). Each rank
//!   then checks the two sides against each other and plans on its own, so
//!   both sides reach the same verdict without another round trip. Hellos
//!   are received whenever they arrive: two programs may create their
//!   fields in different orders.
//! - **Steps**: the producer's rank 0 announces each step to every rank of
//!   every consumer program ([`wire::Kind::Step`]), each producer rank sends
//!   each consumer peer its elements of the step as one message on the
//!   data context, and each consumer rank acknowledges the step
//!   ([`wire::Kind::Ack`]) to every producer rank it heard from. A producer
//!   keeps at most `FIELD_QUEUE` unacknowledged steps per consumer program.
//! - **Leaving**: a consumer's free acknowledges [`wire::LEFT`]; a
//!   producer's free announces [`wire::END`] after its last step.

pub mod wire;

use tether_redist::{Dist, Order, Region};

use crate::error::{err, ErrorClass, Result};

/// Whether this program puts the field or gets it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    Put,
    Get,
}

/// What one process passed as its distribution (`tether_dist_create` or
/// `tether_dist_create_boxes`): a regular distribution is the same on
/// every rank; boxes describe this process's part only.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LocalDist {
    Regular(Dist),
    Boxes {
        shape: Vec<i64>,
        boxes: Vec<Region>,
        order: Order,
    },
}

impl LocalDist {
    /// A regular distribution for a program of `program_size` joined
    /// processes. `Err(Arg)` names what is wrong.
    pub fn regular(
        shape: &[i64],
        grid: &[i64],
        kinds: &[tether_redist::Kind],
        order: Order,
        program_size: u32,
    ) -> Result<LocalDist> {
        let dist = Dist::regular(shape, grid, kinds, order)
            .map_err(|e| err(ErrorClass::Arg, format!("distribution: {e}")))?;
        if dist.ranks() != program_size as usize {
            return Err(err(
                ErrorClass::Arg,
                format!(
                    "distribution: the process grid {grid:?} has {} places but this program has {program_size} joined processes",
                    dist.ranks()
                ),
            ));
        }
        Ok(LocalDist::Regular(dist))
    }

    /// This process's boxes. `Err(Arg)` names what is wrong.
    pub fn boxes(shape: &[i64], boxes: Vec<Region>, order: Order) -> Result<LocalDist> {
        // Validates shape and boxes the way the combined side will be.
        Dist::boxes(shape, vec![boxes.clone()], order)
            .map_err(|e| err(ErrorClass::Arg, format!("boxes: {e}")))?;
        Ok(LocalDist::Boxes {
            shape: shape.to_vec(),
            boxes,
            order,
        })
    }

    /// The local extents of rank `rank` (DESIGN 3.8: a single box's counts,
    /// zeros for no box; for several boxes only the product is defined, and
    /// this gives their element count in dimension 0 and ones elsewhere).
    pub fn local_shape(&self, rank: u32) -> Vec<i64> {
        match self {
            LocalDist::Regular(dist) => dist.local_shape(rank as usize),
            LocalDist::Boxes { shape, boxes, .. } => match boxes.as_slice() {
                [] => vec![0; shape.len()],
                [single] => single.count.clone(),
                several => {
                    let total: i64 = several
                        .iter()
                        .map(|b| b.count.iter().product::<i64>())
                        .sum();
                    let mut extents = vec![1; shape.len()];
                    extents[0] = total;
                    extents
                }
            },
        }
    }

    /// Elements in rank `rank`'s local buffer.
    pub fn local_len(&self, rank: u32) -> u64 {
        match self {
            LocalDist::Regular(dist) => dist.local_len(rank as usize),
            LocalDist::Boxes { boxes, .. } => boxes
                .iter()
                .map(|b| b.count.iter().product::<i64>() as u64)
                .sum(),
        }
    }

    pub fn shape(&self) -> &[i64] {
        match self {
            LocalDist::Regular(dist) => dist.shape(),
            LocalDist::Boxes { shape, .. } => shape,
        }
    }
}
