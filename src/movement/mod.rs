//! Probes of the warp-level data movement that feeds the tensor cores: `ldmatrix` (shared memory
//! to registers), `stmatrix` (registers to shared memory) and `movmatrix` (a transpose from
//! registers to registers), whose catalog is [`crate::isa::matrix`].
//!
//! One experiment is one warp over a 1 KiB shared tile of 64 rows of 16 bytes: every lane's
//! address names a row of its own (rows scattered over the tile, so an instruction that reads
//! from a base address plus an offset shows), the tile and the source registers hold values
//! that name their place, and the kernel hands back the registers and the whole tile. From one
//! such experiment `probe` infers which lane's address supplies (receives) which row and which
//! (lane, register, element) receives (gives) which element, then validates the inferred map
//! bit for bit on random tiles, random registers and other address permutations.
//!
//! The probes run the 16-bit m8n8 forms, the ones sm_90 has; the sm_100a forms (8-bit and
//! unpacking 6/4-bit elements) are catalogued and assembled, not probed.

pub mod backend;
pub mod emulator;
pub mod kernel;
pub mod map;
pub mod probe;
pub mod sass;

use crate::isa::matrix::{self, MatrixElem, MatrixOp, MatrixVariant};
use serde::{Deserialize, Serialize};

/// Bytes of one shared-memory row an address names: eight 16-bit elements.
pub const ROW_BYTES: u32 = 16;
/// Rows of the shared tile.
pub const TILE_ROWS: u32 = 64;
/// 16-bit elements of one row and of the tile.
pub const ROW_ELEMS: u32 = ROW_BYTES / 2;
pub const TILE_ELEMS: usize = (TILE_ROWS * ROW_ELEMS) as usize;
/// Lanes of the warp.
pub const LANES: u32 = 32;
/// Elements per 32-bit register (16-bit elements).
pub const ELEMS_PER_REG: u32 = 2;

/// Why the probes do not run `v`, or `None` when they do.
pub fn not_probed(v: &MatrixVariant) -> Option<&'static str> {
    if v.elem != MatrixElem::B16 || v.shape.rows != 8 || v.shape.cols != 8 {
        Some(
            "the sm_100a forms (8-bit elements, 6- and 4-bit elements unpacked) are catalogued \
             and assembled, not probed: no device that runs them was available",
        )
    } else {
        None
    }
}

/// The variants the probes run, in catalog order.
pub fn probed_catalog() -> Vec<MatrixVariant> {
    matrix::catalog()
        .into_iter()
        .filter(|v| not_probed(v).is_none())
        .collect()
}

/// 32-bit registers each lane gives the instruction.
pub fn src_regs(v: &MatrixVariant) -> u32 {
    match v.op {
        MatrixOp::Ldmatrix => 0,
        MatrixOp::Stmatrix | MatrixOp::Movmatrix => v.regs(),
    }
}

/// 32-bit registers each lane receives.
pub fn dst_regs(v: &MatrixVariant) -> u32 {
    match v.op {
        MatrixOp::Stmatrix => 0,
        MatrixOp::Ldmatrix | MatrixOp::Movmatrix => v.regs(),
    }
}

/// Rows of the matrices an instruction moves, stacked: matrix `i`'s row `r` is row `8·i + r`.
pub fn stacked_rows(v: &MatrixVariant) -> u32 {
    v.num * v.shape.rows
}

/// The inputs of one experiment.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Experiment {
    /// The tile row each lane's address names (the address is the tile's base plus 16 bytes
    /// per row).
    pub addr_rows: [u32; LANES as usize],
    /// The tile before the instruction, row-major 16-bit elements.
    pub tile: Vec<u16>,
    /// Source registers, `[lane][reg]` ([`src_regs`] per lane; element 0 in the low half).
    pub src: Vec<u32>,
}

/// What one experiment left behind.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Observed {
    /// Destination registers, `[lane][reg]` ([`dst_regs`] per lane).
    pub dst: Vec<u32>,
    /// The tile after the instruction.
    pub tile: Vec<u16>,
}

/// Element `e` (0 low, 1 high) of a 32-bit register.
pub fn half(word: u32, e: u32) -> u16 {
    (word >> (16 * e)) as u16
}

/// A register from its two elements.
pub fn pack(lo: u16, hi: u16) -> u32 {
    lo as u32 | (hi as u32) << 16
}

/// Slot index `(lane · regs + reg) · 2 + elem` of a register operand, and back.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct Slot {
    pub lane: u32,
    pub reg: u32,
    pub elem: u32,
}

impl Slot {
    pub fn index(self, regs: u32) -> usize {
        ((self.lane * regs + self.reg) * ELEMS_PER_REG + self.elem) as usize
    }
    pub fn of(index: usize, regs: u32) -> Slot {
        let i = index as u32;
        Slot {
            lane: i / (regs * ELEMS_PER_REG),
            reg: i / ELEMS_PER_REG % regs,
            elem: i % ELEMS_PER_REG,
        }
    }
}

/// Where a slot's element comes from or goes to, the way the instruction moves it: for
/// `ldmatrix`/`stmatrix` the lane whose address names the row and the element within that row;
/// for `movmatrix` the source slot's lane and element.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Route {
    pub lane: u32,
    pub elem: u32,
}

/// A whole instruction's movement: one [`Route`] per register slot (ldmatrix: per destination
/// slot; stmatrix: per source slot; movmatrix: per destination slot), in slot index order.
/// Slots the instruction leaves alone do not occur: every register slot moves one element.
pub type Routes = Vec<Route>;

/// The registers per lane a [`Routes`] is indexed by.
pub fn route_regs(v: &MatrixVariant) -> u32 {
    v.regs()
}
