//! The layouts the PTX ISA documents ("Matrix Fragments for mma.m16n8kK" and friends), as
//! formulas in lane bits. `g = lane / 4` (groupID) and `t = lane % 4` (threadID_in_group).
//!
//! One rule covers every variant in the catalog, because each register holds a run of
//! consecutive k (A, B) or n (C/D) elements:
//! - A (m×k): row = g + 8·(reg mod R), k = (reg div R)·4E + t·E + e, with R = m/8 row blocks
//!   and E elements per register.
//! - B (k×n): col = g, k = reg·4E + t·E + e.
//! - C/D (m×n): with j = reg·E + e, row = g + 8·(j div 2), col = 2t + (j mod 2).
//!
//! For the FP4/FP6/FP8 kinds of sm_120a the same rule is the ISA's statement with 8-bit
//! containers (kind::f8f6f4, kind::mxf8f6f4) or packed nibbles (kind::mxf4, kind::mxf4nvf4).

use super::{Coord, Layout, SlotSpace};
use crate::isa::{Operand, Variant};

pub fn documented(v: &Variant) -> Layout {
    let m = v.shape.m;
    let map = |op: Operand| -> Vec<Coord> {
        let f = v.fragment(op);
        let space = SlotSpace::of(&f);
        let e_per = space.elems_per_reg;
        (0..space.len())
            .map(|i| {
                let s = space.slot(i);
                let (g, t) = (s.lane / 4, s.lane % 4);
                match op {
                    Operand::A => {
                        let r_blocks = m / 8;
                        Coord {
                            row: g + 8 * (s.reg % r_blocks),
                            col: (s.reg / r_blocks) * 4 * e_per + t * e_per + s.elem,
                        }
                    }
                    Operand::B => Coord {
                        row: s.reg * 4 * e_per + t * e_per + s.elem,
                        col: g,
                    },
                    Operand::C | Operand::D => {
                        let j = s.reg * e_per + s.elem;
                        Coord {
                            row: g + 8 * (j / 2),
                            col: 2 * t + j % 2,
                        }
                    }
                }
            })
            .collect()
    };
    Layout {
        a: map(Operand::A),
        b: map(Operand::B),
        c: map(Operand::C),
        d: map(Operand::D),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::isa::probed;

    #[test]
    fn every_documented_layout_is_a_bijection() {
        for v in probed() {
            documented(&v)
                .check_bijective(&v)
                .unwrap_or_else(|e| panic!("{}: {e}", v.id()));
        }
    }

    #[test]
    fn spot_checks_against_the_isa_figures() {
        let v = crate::isa::find("m16n8k16.f32.f16.f16.f32").unwrap();
        let l = documented(&v);
        let fa = SlotSpace::of(&v.fragment(Operand::A));
        // Lane 5 (g=1, t=1), a2 element 1: row 1, k = 8 + 2 + 1.
        assert_eq!(
            l.a[fa.index(crate::layout::Slot {
                lane: 5,
                reg: 2,
                elem: 1
            })],
            Coord { row: 1, col: 11 }
        );
        // D lane 6 (g=1, t=2), d3: row 9, col 5.
        let fd = SlotSpace::of(&v.fragment(Operand::D));
        assert_eq!(
            l.d[fd.index(crate::layout::Slot {
                lane: 6,
                reg: 3,
                elem: 0
            })],
            Coord { row: 9, col: 5 }
        );
        // The seed article's measured FP4 layout: a0/a1 rows g, g+8 at the same k; a2/a3 at k+16.
        let v = crate::isa::find(
            "m16n8k32.kind::mxf8f6f4.block_scale.scale_vec::1X.f32.e2m1.e2m1.f32.ue8m0",
        )
        .unwrap();
        let l = documented(&v);
        let fa = SlotSpace::of(&v.fragment(Operand::A));
        assert_eq!(
            l.a[fa.index(crate::layout::Slot {
                lane: 7,
                reg: 3,
                elem: 2
            })],
            Coord {
                row: 9,
                col: 16 + 12 + 2
            }
        );
        let fb = SlotSpace::of(&v.fragment(Operand::B));
        assert_eq!(
            l.b[fb.index(crate::layout::Slot {
                lane: 7,
                reg: 1,
                elem: 0
            })],
            Coord {
                row: 16 + 12,
                col: 1
            }
        );
    }
}
