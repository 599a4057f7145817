//! The structure of `mma.sp`'s sparse A and its metadata, in the terms the sparse probe measures.
//!
//! A row of the dense m×k A is cut into chunks of four metadata positions; two positions of each
//! chunk are kept, and the metadata holds a 2-bit index per kept position (bits 1..0 the first,
//! bits 3..2 the second: a 4-bit nibble per chunk). A position is one element for 16- and 8-bit
//! types (and for FP4/FP6 in byte containers), two consecutive elements for packed 4-bit types;
//! a tf32 element spans two positions, so only the nibbles 0b0100 and 0b1110 are valid and a
//! chunk is two tf32 elements of which one is kept.
//!
//! The compressed A (m×k/2, what the registers hold) lists each chunk's kept elements in order:
//! compressed column j belongs to chunk j / kept_per_chunk.

use super::Variant;
use crate::formats::ElemType;

/// Geometry of a sparse variant's metadata.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SparseGeom {
    /// Elements of the dense row one position holds (2 for packed 4-bit types, else 1).
    pub pos_elems: u32,
    /// Positions one element spans (2 for tf32, else 1).
    pub elem_positions: u32,
    /// Chunks in one row of the dense A.
    pub chunks: u32,
    /// Compressed elements per chunk.
    pub kept: u32,
}

/// The metadata nibble keeping positions `i0 < i1`.
pub const fn nibble(i0: u32, i1: u32) -> u32 {
    i0 | (i1 << 2)
}

/// Every nibble keeps positions 0 and 1 ("lo") or 2 and 3 ("hi").
pub const LO: u32 = nibble(0, 1);
pub const HI: u32 = nibble(2, 3);

/// A register word with the same nibble in all eight places.
pub const fn splat(n: u32) -> u32 {
    n * 0x1111_1111
}

impl SparseGeom {
    pub fn of(v: &Variant) -> Option<Self> {
        v.sparse?;
        let bits = v.fragment(super::Operand::A).container_bits;
        let (pos_elems, elem_positions) = match (v.a, bits) {
            (ElemType::Tf32, _) => (1, 2),
            (_, 4) => (2, 1),
            _ => (1, 1),
        };
        let positions = v.shape.k * elem_positions / pos_elems;
        Some(SparseGeom {
            pos_elems,
            elem_positions,
            chunks: positions / 4,
            kept: 2 * pos_elems / elem_positions,
        })
    }

    /// The valid nibbles: pairs of positions for most types, one whole element for tf32.
    pub fn valid_nibbles(&self) -> Vec<u32> {
        if self.elem_positions == 2 {
            return vec![LO, HI];
        }
        let mut out = Vec::new();
        for i0 in 0..4 {
            for i1 in i0 + 1..4 {
                out.push(nibble(i0, i1));
            }
        }
        out
    }

    /// Chunk of compressed column `j`.
    pub fn chunk_of(&self, j: u32) -> u32 {
        j / self.kept
    }

    /// The dense k compressed column `j` lands on when its chunk's nibble is `nib`.
    pub fn dense_k(&self, j: u32, nib: u32) -> u32 {
        let c = self.chunk_of(j);
        let within = j % self.kept;
        let chunk_k = 4 * self.pos_elems / self.elem_positions;
        if self.elem_positions == 2 {
            // One element per chunk: the first index names its first position.
            return c * chunk_k + (nib & 3) / 2;
        }
        let p = within / self.pos_elems;
        let sub = within % self.pos_elems;
        let idx = (nib >> (2 * p)) & 3;
        c * chunk_k + idx * self.pos_elems + sub
    }

    /// Metadata bits of one dense row.
    pub fn row_bits(&self) -> u32 {
        4 * self.chunks
    }

    /// Lanes of each group of four whose metadata one sparsity selector reads, in the model of
    /// the documented layout: rows g and g + 8 of each group fill whole registers.
    pub fn threads_per_selector(&self, m: u32) -> u32 {
        (self.row_bits() * m / 8).div_ceil(32)
    }

    /// The sparsity selectors the PTX ISA names (0 up to this, exclusive): one per set of
    /// [`Self::threads_per_selector`] lanes in a group of four. ptxas takes more for m16n8k32
    /// f16 with f32 accumulators (see `Variant::sparsity_selectors`).
    pub fn documented_selectors(&self, m: u32) -> u32 {
        4 / self.threads_per_selector(m)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::isa::catalog;

    #[test]
    fn every_sparse_variant_has_a_geometry_that_fills_its_selectors() {
        for v in catalog().into_iter().filter(|v| v.sparse.is_some()) {
            let g = SparseGeom::of(&v).unwrap();
            let a = v.fragment(crate::isa::Operand::A);
            assert_eq!(g.chunks * g.kept, a.cols, "{}", v.id());
            // ptxas takes as many selectors as the groups of four hold sets of threads, but for
            // m16n8k32 f16 with f32 accumulators, where it takes four (the PTX ISA says two).
            let model = g.documented_selectors(v.shape.m);
            let f16_k32_f32 = v.a == crate::formats::ElemType::F16
                && v.shape.k == 32
                && v.d == crate::formats::ElemType::F32;
            let want = if f16_k32_f32 { 2 * model } else { model };
            assert_eq!(want, v.sparsity_selectors(), "{}", v.id());
        }
    }

    #[test]
    fn dense_k_of_the_kept_elements() {
        let v = crate::isa::find("sp.m16n8k16.f32.f16.f16.f32").unwrap();
        let g = SparseGeom::of(&v).unwrap();
        assert_eq!(g.dense_k(3, nibble(1, 3)), 4 + 3);
        assert_eq!(g.dense_k(2, nibble(1, 3)), 4 + 1);
        assert_eq!(g.dense_k(5, nibble(0, 2)), 8 + 2);
        let v = crate::isa::find("sp.m16n8k8.f32.tf32.tf32.f32").unwrap();
        let g = SparseGeom::of(&v).unwrap();
        assert_eq!((g.dense_k(3, LO), g.dense_k(3, HI)), (6, 7));
        let v = crate::isa::find("sp.m16n8k64.s32.s4.s4.s32").unwrap();
        let g = SparseGeom::of(&v).unwrap();
        // Chunk 1 holds compressed 4..8 (two pairs): the second pair at position 2 is k 12, 13.
        assert_eq!(g.dense_k(7, nibble(0, 2)), 8 + 5);
    }
}
