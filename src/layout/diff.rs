//! Differences between two layouts of the same variant, slot by slot.

use super::{Coord, Layout, SlotSpace};
use crate::isa::{Operand, Variant};
use serde::{Deserialize, Serialize};

/// One slot whose coordinate differs.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SlotDiff {
    pub operand: Operand,
    pub lane: u32,
    pub reg: u32,
    pub elem: u32,
    pub left: Coord,
    pub right: Coord,
}

/// Per-operand count of differing slots, and the first few of them.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct DiffSummary {
    /// (operand, differing slots, total slots)
    pub counts: Vec<(Operand, usize, usize)>,
    pub first: Vec<SlotDiff>,
}

impl DiffSummary {
    pub fn identical(&self) -> bool {
        self.counts.iter().all(|&(_, d, _)| d == 0)
    }
}

pub fn diff(v: &Variant, left: &Layout, right: &Layout) -> DiffSummary {
    let mut counts = Vec::new();
    let mut first = Vec::new();
    for op in Operand::ALL {
        let space = SlotSpace::of(&v.fragment(op));
        let (l, r) = (left.operand(op), right.operand(op));
        let mut count = 0;
        for (i, (a, b)) in l.iter().zip(r).enumerate() {
            if a != b {
                count += 1;
                if first.len() < 32 {
                    let s = space.slot(i);
                    first.push(SlotDiff {
                        operand: op,
                        lane: s.lane,
                        reg: s.reg,
                        elem: s.elem,
                        left: *a,
                        right: *b,
                    });
                }
            }
        }
        counts.push((op, count + l.len().abs_diff(r.len()), l.len().max(r.len())));
    }
    DiffSummary { counts, first }
}
