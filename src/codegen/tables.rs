//! The types of the generated Rust module (`crate::generated`): the lane maps of every variant
//! as static tables, for host code that packs matrices into register order or reads D back.

use crate::isa::Operand;
use crate::layout::Slot;

/// One operand's tables. Slots are flat indices `(lane * regs + reg) * elems_per_reg + elem`;
/// elements are `row * cols + col` (A is m×k, B is k×n, C and D are m×n).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct OperandTable {
    pub operand: Operand,
    pub rows: u32,
    pub cols: u32,
    pub regs: u32,
    /// 32, or 64 for f64 registers.
    pub reg_bits: u32,
    pub elems_per_reg: u32,
    pub container_bits: u32,
    /// Width of the value inside its container.
    pub value_bits: u32,
    /// Lowest bit of the value inside its container (2 for an e2m1 in a byte).
    pub value_shift: u32,
    /// Per slot: the row it holds.
    pub row: &'static [u16],
    /// Per slot: the column it holds.
    pub col: &'static [u16],
    /// Per element: the slot that holds it.
    pub slot: &'static [u16],
}

impl OperandTable {
    pub fn slots(&self) -> usize {
        self.row.len()
    }
    /// The flat index of (lane, reg, elem).
    pub fn index(&self, lane: u32, reg: u32, elem: u32) -> usize {
        ((lane * self.regs + reg) * self.elems_per_reg + elem) as usize
    }
    /// The (row, col) that slot (lane, reg, elem) holds.
    pub fn coord(&self, lane: u32, reg: u32, elem: u32) -> (u32, u32) {
        let i = self.index(lane, reg, elem);
        (self.row[i] as u32, self.col[i] as u32)
    }
    /// The slot that holds (row, col).
    pub fn slot_of(&self, row: u32, col: u32) -> Slot {
        let i = self.slot[(row * self.cols + col) as usize] as u32;
        Slot {
            lane: i / (self.regs * self.elems_per_reg),
            reg: (i / self.elems_per_reg) % self.regs,
            elem: i % self.elems_per_reg,
        }
    }
    /// Bit position of the value of element `elem` inside its register.
    pub fn bit_offset(&self, elem: u32) -> u32 {
        elem * self.container_bits + self.value_shift
    }
}

/// One variant's tables and where they came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct VariantTables {
    /// The catalog id, e.g. `m16n8k32.f32.e4m3.e4m3.f32`.
    pub id: &'static str,
    /// The namespace of the variant's C++ header (`fp4probe::<cpp_name>`).
    pub cpp_name: &'static str,
    /// The lane map the tables come from, relative to the repository root.
    pub source: &'static str,
    /// True for a hardware-measured map; false for an emulator map (the documented layout).
    pub hardware: bool,
    /// A, B, C, D.
    pub operands: [OperandTable; 4],
}

impl VariantTables {
    pub fn operand(&self, op: Operand) -> &OperandTable {
        &self.operands[op as usize]
    }
}

/// The tables of variant `id` (catalog spelling, `::` or `_` accepted).
pub fn lookup(id: &str) -> Option<&'static VariantTables> {
    let want = id.replace("::", "_");
    crate::generated::VARIANTS
        .iter()
        .find(|v| v.id == id || v.id.replace("::", "_") == want)
}
