//! Lane maps: which (lane, register, element) slot of each operand holds which matrix element.
//!
//! `Layout` is the in-memory form (one coordinate per slot, slots indexed as
//! `(lane * regs + reg) * elems_per_reg + elem`); `LaneMap` is the versioned JSON record with
//! provenance; `documented` holds the PTX ISA's layouts; `convention` pins labels; `fit` finds
//! closed forms; `diff` compares two maps.

pub mod convention;
pub mod diff;
pub mod documented;
pub mod fit;
pub mod lanemap;
pub mod meta;

pub use lanemap::LaneMap;

use crate::isa::{Fragment, Operand, Variant};
use serde::{Deserialize, Serialize};

/// A matrix coordinate. For A it is (m, k), for B (k, n), for C and D (m, n).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct Coord {
    pub row: u32,
    pub col: u32,
}

/// A register slot of one operand.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct Slot {
    pub lane: u32,
    pub reg: u32,
    pub elem: u32,
}

/// Slot geometry of one operand.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SlotSpace {
    pub regs: u32,
    pub elems_per_reg: u32,
}

impl SlotSpace {
    pub fn of(f: &Fragment) -> Self {
        SlotSpace {
            regs: f.regs,
            elems_per_reg: f.elems_per_reg(),
        }
    }
    pub fn len(&self) -> usize {
        (32 * self.regs * self.elems_per_reg) as usize
    }
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
    pub fn index(&self, s: Slot) -> usize {
        ((s.lane * self.regs + s.reg) * self.elems_per_reg + s.elem) as usize
    }
    pub fn slot(&self, index: usize) -> Slot {
        let i = index as u32;
        Slot {
            lane: i / (self.regs * self.elems_per_reg),
            reg: (i / self.elems_per_reg) % self.regs,
            elem: i % self.elems_per_reg,
        }
    }
}

/// Slot → coordinate maps of all four operands of one variant.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Layout {
    pub a: Vec<Coord>,
    pub b: Vec<Coord>,
    pub c: Vec<Coord>,
    pub d: Vec<Coord>,
}

impl Layout {
    pub fn operand(&self, op: Operand) -> &[Coord] {
        match op {
            Operand::A => &self.a,
            Operand::B => &self.b,
            Operand::C => &self.c,
            Operand::D => &self.d,
        }
    }

    /// Every operand's map is a bijection between its slots and its matrix.
    pub fn check_bijective(&self, v: &Variant) -> Result<(), String> {
        for op in Operand::ALL {
            let f = v.fragment(op);
            let map = self.operand(op);
            if map.len() != SlotSpace::of(&f).len() {
                return Err(format!(
                    "{}: {} slots, expected {}",
                    op.name(),
                    map.len(),
                    SlotSpace::of(&f).len()
                ));
            }
            let mut seen = vec![false; (f.rows * f.cols) as usize];
            for (i, c) in map.iter().enumerate() {
                if c.row >= f.rows || c.col >= f.cols {
                    return Err(format!(
                        "{}: slot {i} maps outside the {}x{} matrix",
                        op.name(),
                        f.rows,
                        f.cols
                    ));
                }
                let cell = (c.row * f.cols + c.col) as usize;
                if std::mem::replace(&mut seen[cell], true) {
                    return Err(format!(
                        "{}: element ({}, {}) held by two slots",
                        op.name(),
                        c.row,
                        c.col
                    ));
                }
            }
        }
        Ok(())
    }
}
