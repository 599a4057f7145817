//! The warp-level data movement that feeds the tensor cores: `ldmatrix` (shared memory to
//! registers), `stmatrix` (registers to shared memory) and `movmatrix` (a transpose from
//! registers to registers), in every shape, count and `.trans` ptxas accepts.
//!
//! An id is the PTX opcode without `.sync.aligned` and the state space:
//! `ldmatrix.m8n8.x4.trans.b16`, `ldmatrix.m16n16.x2.trans.b8x16.b4x16_p64`,
//! `stmatrix.m16n8.x1.trans.b8`, `movmatrix.m8n8.trans.b16`.
//!
//! ptxas is the authority: `tests/ptxas_catalog.rs` assembles each entry for every target in
//! [`MatrixVariant::targets`], checks that the target before its minimum refuses it, and that
//! the near misses of [`rejected_spellings`] stay rejected.

mod rejected;

pub use rejected::rejected_spellings;

use super::Target;
use serde::{Deserialize, Serialize};
use std::fmt;

/// The instruction.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum MatrixOp {
    Ldmatrix,
    Stmatrix,
    Movmatrix,
}

impl MatrixOp {
    pub const ALL: [MatrixOp; 3] = [MatrixOp::Ldmatrix, MatrixOp::Stmatrix, MatrixOp::Movmatrix];
    pub fn name(self) -> &'static str {
        match self {
            MatrixOp::Ldmatrix => "ldmatrix",
            MatrixOp::Stmatrix => "stmatrix",
            MatrixOp::Movmatrix => "movmatrix",
        }
    }
}

/// Rows × columns of one matrix: `.m8n8`, `.m16n16`, `.m8n16`, `.m16n8`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct MatrixShape {
    pub rows: u32,
    pub cols: u32,
}

impl fmt::Display for MatrixShape {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "m{}n{}", self.rows, self.cols)
    }
}

/// The element format: 16-bit or 8-bit elements, or (sm_100a, `ldmatrix` only) 6-bit or 4-bit
/// elements unpacked into 8-bit containers as they load.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum MatrixElem {
    #[serde(rename = "b16")]
    B16,
    #[serde(rename = "b8")]
    B8,
    /// `.b8x16.b6x16_p32`: sixteen 6-bit elements and 32 bits of padding in memory, one per
    /// byte in registers.
    #[serde(rename = "b8x16.b6x16_p32")]
    B6x16P32,
    /// `.b8x16.b4x16_p64`: sixteen 4-bit elements and 64 bits of padding in memory, one per
    /// byte in registers.
    #[serde(rename = "b8x16.b4x16_p64")]
    B4x16P64,
}

impl MatrixElem {
    pub fn ptx(self) -> &'static str {
        match self {
            MatrixElem::B16 => "b16",
            MatrixElem::B8 => "b8",
            MatrixElem::B6x16P32 => "b8x16.b6x16_p32",
            MatrixElem::B4x16P64 => "b8x16.b4x16_p64",
        }
    }
    /// Bits of one element as it sits in a register.
    pub fn register_bits(self) -> u32 {
        match self {
            MatrixElem::B16 => 16,
            _ => 8,
        }
    }
}

/// The arch-specific targets whose ptxas (13.5) accepts the sm_100a forms: data-center and
/// consumer Blackwell alike (and the family targets sm_100f and sm_120f, which [`Target`]
/// does not spell).
pub const BLACKWELL_A: [Target; 5] = [
    Target::sm_a(10, 0),
    Target::sm_a(10, 3),
    Target::sm_a(11, 0),
    Target::sm_a(12, 0),
    Target::sm_a(12, 1),
];

/// One `ldmatrix`, `stmatrix` or `movmatrix` variant.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct MatrixVariant {
    pub op: MatrixOp,
    pub shape: MatrixShape,
    /// Matrices moved at once (`.x1`, `.x2`, `.x4`); 1 for `movmatrix`, which has no count.
    pub num: u32,
    pub trans: bool,
    pub elem: MatrixElem,
    /// The oldest target whose ptxas accepts it: sm_75 (`ldmatrix`/`movmatrix` m8n8), sm_90
    /// (`stmatrix` m8n8) or sm_100a (the 8-bit and unpacking forms, see [`BLACKWELL_A`]).
    pub min_target: Target,
}

impl MatrixVariant {
    /// The qualifiers in PTX order, with `.sync.aligned` and the state space `.shared::cta`
    /// (for `ldmatrix`/`stmatrix`) when `full`.
    fn spell(&self, full: bool) -> String {
        let mut s = self.op.name().to_string();
        if full {
            s += ".sync.aligned";
        }
        s += &format!(".{}", self.shape);
        if self.op != MatrixOp::Movmatrix {
            s += &format!(".x{}", self.num);
        }
        if self.trans {
            s += ".trans";
        }
        if full && self.op != MatrixOp::Movmatrix {
            s += ".shared::cta";
        }
        s + "." + self.elem.ptx()
    }

    /// The catalog id: the opcode without `.sync.aligned` and the state space.
    pub fn id(&self) -> String {
        self.spell(false)
    }

    /// The PTX opcode, with the state space `.shared::cta` for `ldmatrix`/`stmatrix`:
    /// `ldmatrix.sync.aligned.m8n8.x4.trans.shared::cta.b16`.
    pub fn opcode(&self) -> String {
        self.spell(true)
    }

    /// 32-bit registers each lane gives or receives: one per 8x8 (or 8x16, 16x8) matrix and
    /// two per 16x16 one.
    pub fn regs(&self) -> u32 {
        let per_matrix = self.shape.rows * self.shape.cols * self.elem.register_bits() / (32 * 32);
        self.num * per_matrix
    }

    /// Every target ptxas accepts it for among those a device is told apart by: the minimum
    /// and, for an arch-specific minimum, the other arch-specific targets that take it.
    pub fn targets(&self) -> Vec<Target> {
        if self.min_target.arch_specific {
            BLACKWELL_A
                .into_iter()
                .filter(|t| *t >= self.min_target)
                .collect()
        } else {
            vec![self.min_target]
        }
    }

    /// Code for one of [`MatrixVariant::targets`] runs on a device of compute capability `cc`.
    pub fn runs_on(&self, cc: (u32, u32)) -> bool {
        self.targets().iter().any(|t| t.runs_on(cc))
    }

    /// The instruction with the given registers and shared-memory address register.
    pub fn instruction(&self, regs: &[String], addr: &str) -> String {
        let list = format!("{{{}}}", regs.join(", "));
        match self.op {
            MatrixOp::Ldmatrix => format!("{} {list}, [{addr}];", self.opcode()),
            MatrixOp::Stmatrix => format!("{} [{addr}], {list};", self.opcode()),
            MatrixOp::Movmatrix => format!("{} {}, {};", self.opcode(), regs[0], regs[1]),
        }
    }
}

const fn m(rows: u32, cols: u32) -> MatrixShape {
    MatrixShape { rows, cols }
}

/// The catalog in a stable order: `ldmatrix`, `stmatrix`, `movmatrix`; within each, by shape,
/// element format, count and `.trans`.
pub fn catalog() -> Vec<MatrixVariant> {
    let sm75 = Target::sm(7, 5);
    let sm100a = Target::sm_a(10, 0);
    let mut out = Vec::new();
    let mut push = |op, shape, nums: &[u32], trans: &[bool], elems: &[MatrixElem], min| {
        for &elem in elems {
            for &num in nums {
                for &trans in trans {
                    out.push(MatrixVariant {
                        op,
                        shape,
                        num,
                        trans,
                        elem,
                        min_target: min,
                    });
                }
            }
        }
    };
    use MatrixElem::*;
    use MatrixOp::*;
    let unpacking = [B8, B6x16P32, B4x16P64];
    push(Ldmatrix, m(8, 8), &[1, 2, 4], &[false, true], &[B16], sm75);
    // m16n16 is transposing only and at most .x2; m8n16 never transposes and only unpacks.
    push(Ldmatrix, m(16, 16), &[1, 2], &[true], &unpacking, sm100a);
    push(
        Ldmatrix,
        m(8, 16),
        &[1, 2, 4],
        &[false],
        &[B6x16P32, B4x16P64],
        sm100a,
    );
    push(
        Stmatrix,
        m(8, 8),
        &[1, 2, 4],
        &[false, true],
        &[B16],
        Target::sm(9, 0),
    );
    push(Stmatrix, m(16, 8), &[1, 2, 4], &[true], &[B8], sm100a);
    push(Movmatrix, m(8, 8), &[1], &[true], &[B16], sm75);
    out
}

/// Look a variant up by id, or by the instruction as written in a kernel (any state space or
/// none; operands and `;` ignored).
pub fn find(text: &str) -> Option<MatrixVariant> {
    let opcode = text
        .trim()
        .trim_end_matches(';')
        .split_whitespace()
        .next()?;
    let key: Vec<&str> = opcode
        .split('.')
        .filter(|t| !matches!(*t, "sync" | "aligned" | "shared" | "shared::cta" | ""))
        .collect();
    let key = key.join(".");
    catalog().into_iter().find(|v| v.id() == key)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_instruction_has_its_count() {
        let cat = catalog();
        let count = |op: MatrixOp| cat.iter().filter(|v| v.op == op).count();
        assert_eq!(count(MatrixOp::Ldmatrix), 18);
        assert_eq!(count(MatrixOp::Stmatrix), 9);
        assert_eq!(count(MatrixOp::Movmatrix), 1);
        let ids: std::collections::HashSet<String> = cat.iter().map(|v| v.id()).collect();
        assert_eq!(ids.len(), cat.len(), "ids are unique");
        let sm100a = cat
            .iter()
            .filter(|v| v.min_target == Target::sm_a(10, 0))
            .count();
        assert_eq!(sm100a, 15);
    }

    #[test]
    fn registers_and_spellings() {
        let get = |id: &str| find(id).unwrap_or_else(|| panic!("{id} missing"));
        assert_eq!(get("ldmatrix.m8n8.x4.trans.b16").regs(), 4);
        assert_eq!(get("ldmatrix.m16n16.x2.trans.b8x16.b4x16_p64").regs(), 4);
        assert_eq!(get("ldmatrix.m16n16.x1.trans.b8").regs(), 2);
        assert_eq!(get("ldmatrix.m8n16.x4.b8x16.b6x16_p32").regs(), 4);
        assert_eq!(get("stmatrix.m16n8.x2.trans.b8").regs(), 2);
        assert_eq!(get("movmatrix.m8n8.trans.b16").regs(), 1);
        let v = get("ldmatrix.sync.aligned.m8n8.x2.trans.shared.b16 {%r0, %r1}, [%p];");
        assert_eq!(v.id(), "ldmatrix.m8n8.x2.trans.b16");
        assert_eq!(
            v.opcode(),
            "ldmatrix.sync.aligned.m8n8.x2.trans.shared::cta.b16"
        );
        assert_eq!(
            get("stmatrix.sync.aligned.m8n8.x1.b16").opcode(),
            "stmatrix.sync.aligned.m8n8.x1.shared::cta.b16"
        );
        assert_eq!(
            get("movmatrix.sync.aligned.m8n8.trans.b16 %r0, %r1;").opcode(),
            "movmatrix.sync.aligned.m8n8.trans.b16"
        );
        assert!(find("ldmatrix.m16n16.x4.trans.b8").is_none());
        assert!(find("movmatrix.m8n8.b16").is_none());
        for v in catalog() {
            assert_eq!(find(&v.opcode()).as_ref(), Some(&v));
            assert_eq!(find(&v.id()).as_ref(), Some(&v));
        }
    }

    #[test]
    fn targets_say_where_it_runs() {
        let ld = find("ldmatrix.m8n8.x1.b16").unwrap();
        assert!(ld.runs_on((9, 0)) && ld.runs_on((7, 5)) && !ld.runs_on((7, 0)));
        let st = find("stmatrix.m8n8.x1.b16").unwrap();
        assert!(st.runs_on((9, 0)) && !st.runs_on((8, 9)));
        let unpack = find("ldmatrix.m16n16.x1.trans.b8").unwrap();
        assert_eq!(unpack.targets(), BLACKWELL_A.to_vec());
        assert!(unpack.runs_on((12, 0)) && unpack.runs_on((10, 0)) && !unpack.runs_on((9, 0)));
    }
}
