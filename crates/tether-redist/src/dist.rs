//! Distribution descriptors: what a side declares, validated once so that
//! the planner and the copy loops can use plain `i64` arithmetic without
//! overflow checks.

use std::fmt::Write as _;

use thiserror::Error;

use crate::dim::Pattern;

/// The most dimensions a descriptor may have. Any array with more than 63
/// dimensions of extent 2 or more overflows `i64` anyway; the limit keeps
/// decoding of hostile input cheap.
pub const MAX_DIMS: usize = 32;

/// Storage order of a local part and, on a regular grid, the order in which
/// ranks map to grid coordinates (DESIGN 3.8).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Order {
    /// Last dimension fastest; rank `r = (c0*P1 + c1)*P2 + c2`.
    C,
    /// First dimension fastest; rank `r = c0 + P0*(c1 + P1*c2)`.
    Fortran,
}

/// How one dimension of a regular distribution is dealt out.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Kind {
    /// One block of `ceil(n/P)` per coordinate; trailing ones may own nothing.
    Block,
    /// Block size 1.
    Cyclic,
    /// Blocks of the given size (>= 1) dealt round-robin.
    BlockCyclic(i64),
    /// Not distributed: needs a grid extent of 1.
    None,
}

/// One box of global indices, 0-based: `start[d] .. start[d] + count[d]`.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Region {
    pub start: Vec<i64>,
    pub count: Vec<i64>,
}

impl Region {
    pub fn new(start: Vec<i64>, count: Vec<i64>) -> Region {
        Region { start, count }
    }

    /// Elements in the box (0 when any count is 0).
    pub fn len(&self) -> i64 {
        self.count.iter().product()
    }

    pub fn is_empty(&self) -> bool {
        self.count.contains(&0)
    }
}

/// How the global array is split over the ranks of one side.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Layout {
    /// A process grid with one kind per dimension.
    Regular { grid: Vec<i64>, kinds: Vec<Kind> },
    /// `[rank] -> that rank's boxes`, in the order they are stored locally.
    Boxes(Vec<Vec<Region>>),
}

/// Why a descriptor was refused.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum DistError {
    #[error("a distribution needs at least one dimension")]
    NoDims,
    #[error("{ndims} dimensions is more than the supported {MAX_DIMS}")]
    TooManyDims { ndims: usize },
    #[error("{what} has {got} entries, the shape has {ndims} dimensions")]
    Length {
        what: &'static str,
        got: usize,
        ndims: usize,
    },
    #[error("extent {extent} of dimension {dim} is negative")]
    NegativeExtent { dim: usize, extent: i64 },
    #[error("the global array has more elements than an int64 can count")]
    TooLarge,
    #[error("grid extent {extent} of dimension {dim} is below 1")]
    BadGrid { dim: usize, extent: i64 },
    #[error("the grid has more ranks than this machine can count")]
    GridTooLarge,
    #[error("dimension {dim} is NONE but its grid extent is {extent}, not 1")]
    NoneNeedsGrid1 { dim: usize, extent: i64 },
    #[error("block size {block} of dimension {dim} is below 1")]
    BadBlock { dim: usize, block: i64 },
    #[error("rank {rank} box {index}: {what} has {got} entries, the shape has {ndims} dimensions")]
    BoxDims {
        rank: usize,
        index: usize,
        what: &'static str,
        got: usize,
        ndims: usize,
    },
    #[error("rank {rank} box {index}: count {count} of dimension {dim} is negative")]
    NegativeCount {
        rank: usize,
        index: usize,
        dim: usize,
        count: i64,
    },
    #[error("rank {rank} box {index}: start {start} count {count} of dimension {dim} is outside 0..{extent}")]
    BoxOutside {
        rank: usize,
        index: usize,
        dim: usize,
        start: i64,
        count: i64,
        extent: i64,
    },
    #[error("rank {rank}: its boxes hold more elements than an int64 can count")]
    LocalTooLarge { rank: usize },
    #[error("rank {rank_a} box {box_a} overlaps rank {rank_b} box {box_b} at index {index:?}")]
    Overlap {
        rank_a: usize,
        box_a: usize,
        rank_b: usize,
        box_b: usize,
        index: Vec<i64>,
    },
    #[error("descriptor bytes: {0}")]
    Decode(&'static str),
}

/// A validated distribution of a global array over the ranks of one side.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Dist {
    shape: Vec<i64>,
    layout: Layout,
    order: Order,
}

impl Dist {
    /// The same distribution with its dimensions reversed and C order: a
    /// Fortran-order description of the same memory and the same ranks
    /// (a Fortran grid numbers ranks first-coordinate-fastest, as C does
    /// the reversed grid).
    pub(crate) fn mirrored(&self) -> Dist {
        let reversed = |v: &[i64]| v.iter().rev().copied().collect::<Vec<i64>>();
        let layout = match &self.layout {
            Layout::Regular { grid, kinds } => Layout::Regular {
                grid: reversed(grid),
                kinds: kinds.iter().rev().copied().collect(),
            },
            Layout::Boxes(ranks) => Layout::Boxes(
                ranks
                    .iter()
                    .map(|boxes| {
                        boxes
                            .iter()
                            .map(|b| Region::new(reversed(&b.start), reversed(&b.count)))
                            .collect()
                    })
                    .collect(),
            ),
        };
        Dist {
            shape: reversed(&self.shape),
            layout,
            order: match self.order {
                Order::C => Order::Fortran,
                Order::Fortran => Order::C,
            },
        }
    }

    /// A process grid. `kinds[d]` says how dimension `d` is dealt out over
    /// `grid[d]` coordinates.
    pub fn regular(
        shape: &[i64],
        grid: &[i64],
        kinds: &[Kind],
        order: Order,
    ) -> Result<Dist, DistError> {
        check_shape(shape)?;
        let ndims = shape.len();
        if grid.len() != ndims {
            return Err(DistError::Length {
                what: "grid",
                got: grid.len(),
                ndims,
            });
        }
        if kinds.len() != ndims {
            return Err(DistError::Length {
                what: "kinds",
                got: kinds.len(),
                ndims,
            });
        }
        let mut ranks: usize = 1;
        for (dim, (&extent, kind)) in grid.iter().zip(kinds).enumerate() {
            if extent < 1 {
                return Err(DistError::BadGrid { dim, extent });
            }
            match *kind {
                Kind::None if extent != 1 => return Err(DistError::NoneNeedsGrid1 { dim, extent }),
                Kind::BlockCyclic(block) if block < 1 => {
                    return Err(DistError::BadBlock { dim, block })
                }
                _ => {}
            }
            ranks = usize::try_from(extent)
                .ok()
                .and_then(|e| ranks.checked_mul(e))
                .ok_or(DistError::GridTooLarge)?;
        }
        Ok(Dist {
            shape: shape.to_vec(),
            layout: Layout::Regular {
                grid: grid.to_vec(),
                kinds: kinds.to_vec(),
            },
            order,
        })
    }

    /// Explicit boxes per rank; a rank's local buffer holds its boxes one
    /// after another, each dense in `order`.
    pub fn boxes(shape: &[i64], ranks: Vec<Vec<Region>>, order: Order) -> Result<Dist, DistError> {
        check_shape(shape)?;
        let ndims = shape.len();
        for (rank, boxes) in ranks.iter().enumerate() {
            let mut total: i64 = 0;
            for (index, region) in boxes.iter().enumerate() {
                for (what, got) in [("start", region.start.len()), ("count", region.count.len())] {
                    if got != ndims {
                        return Err(DistError::BoxDims {
                            rank,
                            index,
                            what,
                            got,
                            ndims,
                        });
                    }
                }
                let dims = region.start.iter().zip(&region.count).zip(shape);
                for (dim, ((&start, &count), &extent)) in dims.enumerate() {
                    if count < 0 {
                        return Err(DistError::NegativeCount {
                            rank,
                            index,
                            dim,
                            count,
                        });
                    }
                    // Ordered so that `extent - count` is only taken when it
                    // cannot overflow.
                    if start < 0 || count > extent || start > extent - count {
                        return Err(DistError::BoxOutside {
                            rank,
                            index,
                            dim,
                            start,
                            count,
                            extent,
                        });
                    }
                }
                // Inside the shape, so the product fits (check_shape).
                total = total
                    .checked_add(region.len())
                    .ok_or(DistError::LocalTooLarge { rank })?;
            }
        }
        Ok(Dist {
            shape: shape.to_vec(),
            layout: Layout::Boxes(ranks),
            order,
        })
    }

    pub fn ndims(&self) -> usize {
        self.shape.len()
    }

    pub fn shape(&self) -> &[i64] {
        &self.shape
    }

    pub fn order(&self) -> Order {
        self.order
    }

    pub fn layout(&self) -> &Layout {
        &self.layout
    }

    /// `prod(grid)` for a regular distribution, the number of box lists otherwise.
    pub fn ranks(&self) -> usize {
        match &self.layout {
            // Validated to fit a usize.
            Layout::Regular { grid, .. } => grid.iter().map(|&g| g as usize).product(),
            Layout::Boxes(ranks) => ranks.len(),
        }
    }

    /// Elements in `rank`'s local buffer. Panics if `rank >= ranks()`.
    pub fn local_len(&self, rank: usize) -> u64 {
        match &self.layout {
            Layout::Regular { .. } => self.local_shape(rank).iter().map(|&m| m as u64).product(),
            Layout::Boxes(ranks) => ranks[rank].iter().map(|b| b.len() as u64).sum(),
        }
    }

    /// Regular: the local extents. Boxes: the single box's counts, zeros when
    /// the rank has none; with several boxes only the product (the element
    /// count) is meaningful: it is put in dimension 0, the others are 1.
    /// Panics if `rank >= ranks()`.
    pub fn local_shape(&self, rank: usize) -> Vec<i64> {
        match &self.layout {
            Layout::Regular { .. } => {
                let coords = self.coords(rank);
                (0..self.ndims())
                    .map(|d| self.pattern(d).extent(coords[d]))
                    .collect()
            }
            Layout::Boxes(ranks) => match ranks[rank].as_slice() {
                [] => vec![0; self.ndims()],
                [only] => only.count.clone(),
                several => {
                    let mut shape = vec![1; self.ndims()];
                    shape[0] = several.iter().map(Region::len).sum();
                    shape
                }
            },
        }
    }

    /// Producer boxes may not overlap; regular distributions never do.
    pub fn check_disjoint(&self) -> Result<(), DistError> {
        match &self.layout {
            Layout::Regular { .. } => Ok(()),
            Layout::Boxes(ranks) => crate::check::disjoint(ranks),
        }
    }

    /// Human text for error messages, e.g.
    /// `2-D 100x200 C, grid 2x2 BLOCK x CYCLIC`.
    pub fn describe(&self) -> String {
        let mut text = format!(
            "{}-D {} {}",
            self.ndims(),
            join(self.shape.iter(), "x"),
            match self.order {
                Order::C => "C",
                Order::Fortran => "FORTRAN",
            }
        );
        match &self.layout {
            Layout::Regular { grid, kinds } => {
                let kinds = kinds.iter().map(|k| match k {
                    Kind::Block => "BLOCK".to_string(),
                    Kind::Cyclic => "CYCLIC".to_string(),
                    Kind::BlockCyclic(b) => format!("BLOCK_CYCLIC({b})"),
                    Kind::None => "NONE".to_string(),
                });
                let _ = write!(
                    text,
                    ", grid {} {}",
                    join(grid.iter(), "x"),
                    join(kinds, " x ")
                );
            }
            Layout::Boxes(ranks) => {
                let total: usize = ranks.iter().map(Vec::len).sum();
                let _ = write!(text, ", boxes on {} ranks ({total} in all)", ranks.len());
            }
        }
        text
    }

    pub fn encode(&self) -> Vec<u8> {
        crate::codec::encode(self)
    }

    /// Never panics, whatever the bytes: the result is validated like a
    /// descriptor built by [`Dist::regular`] or [`Dist::boxes`].
    pub fn decode(bytes: &[u8]) -> Result<Dist, DistError> {
        crate::codec::decode(bytes)
    }

    /// The 1-D pattern of dimension `d` of a regular distribution.
    pub(crate) fn pattern(&self, d: usize) -> Pattern {
        match &self.layout {
            Layout::Regular { grid, kinds } => Pattern::new(self.shape[d], grid[d], kinds[d]),
            Layout::Boxes(_) => unreachable!("a box distribution has no pattern"),
        }
    }

    /// Grid coordinates of `rank` (regular only), by the side's order.
    pub(crate) fn coords(&self, rank: usize) -> Vec<i64> {
        let Layout::Regular { grid, .. } = &self.layout else {
            unreachable!("a box distribution has no grid")
        };
        assert!(
            rank < self.ranks(),
            "rank {rank} outside a grid of {} ranks",
            self.ranks()
        );
        let mut coords = vec![0; grid.len()];
        let mut rest = rank as i64;
        for d in storage_dims(self.order, grid.len()) {
            coords[d] = rest % grid[d];
            rest /= grid[d];
        }
        coords
    }

    /// Per dimension, what one step of that coordinate adds to the rank
    /// (regular only): the rank is `sum(coords[d] * weights[d])`.
    pub(crate) fn rank_weights(&self) -> Vec<usize> {
        let Layout::Regular { grid, .. } = &self.layout else {
            unreachable!("a box distribution has no grid")
        };
        let mut weights = vec![0; grid.len()];
        let mut step = 1usize;
        for d in storage_dims(self.order, grid.len()) {
            weights[d] = step;
            // Ends at ranks(), validated to fit.
            step *= grid[d] as usize;
        }
        weights
    }

    /// The rank at grid coordinates `coords` (regular only).
    pub(crate) fn rank_of(&self, coords: &[i64]) -> usize {
        self.rank_weights()
            .iter()
            .zip(coords)
            .map(|(&w, &c)| w * c as usize)
            .sum()
    }
}

/// Dimensions from the fastest-varying to the slowest in `order`.
pub(crate) fn storage_dims(order: Order, ndims: usize) -> impl DoubleEndedIterator<Item = usize> {
    let forward = order == Order::Fortran;
    (0..ndims).map(move |i| if forward { i } else { ndims - 1 - i })
}

/// Element strides of a dense array of `extents` stored in `order`.
pub(crate) fn strides(order: Order, extents: &[i64]) -> Vec<i64> {
    let mut strides = vec![0; extents.len()];
    let mut step = 1i64;
    for d in storage_dims(order, extents.len()) {
        strides[d] = step;
        // Products of local extents fit: validation bounds the global product.
        step = step.saturating_mul(extents[d].max(1));
    }
    strides
}

fn check_shape(shape: &[i64]) -> Result<(), DistError> {
    if shape.is_empty() {
        return Err(DistError::NoDims);
    }
    if shape.len() > MAX_DIMS {
        return Err(DistError::TooManyDims { ndims: shape.len() });
    }
    let mut product: i64 = 1;
    for (dim, &extent) in shape.iter().enumerate() {
        if extent < 0 {
            return Err(DistError::NegativeExtent { dim, extent });
        }
        // Counting zero extents as 1 bounds every stride, not just the
        // element count, so no index arithmetic downstream can overflow.
        product = product
            .checked_mul(extent.max(1))
            .ok_or(DistError::TooLarge)?;
    }
    Ok(())
}

fn join<T: std::fmt::Display>(items: impl Iterator<Item = T>, sep: &str) -> String {
    let mut out = String::new();
    for (i, item) in items.enumerate() {
        if i > 0 {
            out.push_str(sep);
        }
        let _ = write!(out, "{item}");
    }
    out
}
