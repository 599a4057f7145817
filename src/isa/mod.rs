//! The catalog of `mma.sync` variants: what each one is, how many registers each operand takes,
//! how wide an element's container is, the minimum target, and the exact PTX text.
//!
//! A variant's id is its PTX qualifier string without `mma.sync.aligned.` and `.row.col`
//! (for example `m16n8k32.kind::mxf8f6f4.block_scale.scale_vec::1X.f32.e2m1.e2m1.f32.ue8m0`);
//! that is the catalog's own spelling, used in JSON, file names (with `::` as `_`) and the CLI.

mod catalog;
mod rejected;
mod target;

pub use catalog::catalog;
pub use rejected::{Rejected, rejected_spellings};
pub use target::Target;

use crate::formats::ElemType;
use serde::{Deserialize, Serialize};
use std::fmt;

/// PTX ISA version of the probe modules unless a variant needs newer: 8.7 is the first with
/// sm_120a and block-scaled `mma.sync`, and every CUDA 12.8+ driver loads it.
pub const DEFAULT_PTX: (u32, u32) = (8, 7);

/// `m16n8k32` and friends.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Shape {
    pub m: u32,
    pub n: u32,
    pub k: u32,
}

impl fmt::Display for Shape {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "m{}n{}k{}", self.m, self.n, self.k)
    }
}

impl std::str::FromStr for Shape {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        let bad = || format!("shape '{s}' is not of the form m16n8k32");
        let rest = s.strip_prefix('m').ok_or_else(bad)?;
        let (m, rest) = rest.split_once('n').ok_or_else(bad)?;
        let (n, k) = rest.split_once('k').ok_or_else(bad)?;
        Ok(Shape {
            m: m.parse().map_err(|_| bad())?,
            n: n.parse().map_err(|_| bad())?,
            k: k.parse().map_err(|_| bad())?,
        })
    }
}

/// The `.kind::` qualifier, where there is one.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Kind {
    /// No kind qualifier (all pre-Blackwell variants).
    Plain,
    F8f6f4,
    Mxf8f6f4,
    Mxf4,
    Mxf4nvf4,
}

impl Kind {
    pub fn ptx(self) -> Option<&'static str> {
        match self {
            Kind::Plain => None,
            Kind::F8f6f4 => Some("f8f6f4"),
            Kind::Mxf8f6f4 => Some("mxf8f6f4"),
            Kind::Mxf4 => Some("mxf4"),
            Kind::Mxf4nvf4 => Some("mxf4nvf4"),
        }
    }
}

impl std::str::FromStr for Kind {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        let s = s.trim_start_matches("kind::");
        match s {
            "" | "plain" | "none" => Ok(Kind::Plain),
            "f8f6f4" => Ok(Kind::F8f6f4),
            "mxf8f6f4" => Ok(Kind::Mxf8f6f4),
            "mxf4" => Ok(Kind::Mxf4),
            "mxf4nvf4" => Ok(Kind::Mxf4nvf4),
            _ => Err(format!(
                "unknown kind '{s}' (known: plain, f8f6f4, mxf8f6f4, mxf4, mxf4nvf4)"
            )),
        }
    }
}

/// Block scaling: how many scale factors per row of A / column of B (`scale_vec::NX`), and
/// their type.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct BlockScale {
    pub vec: u32,
    pub stype: ElemType,
}

/// The single-bit operations of `b1` variants.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum BitOp {
    And,
    Xor,
}

/// One `mma.sync` variant.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Variant {
    pub shape: Shape,
    pub kind: Kind,
    pub a: ElemType,
    pub b: ElemType,
    pub c: ElemType,
    pub d: ElemType,
    pub scale: Option<BlockScale>,
    pub bitop: Option<BitOp>,
    pub satfinite: bool,
    /// The oldest target whose ptxas accepts it (`sm_80`, `sm_89`, `sm_90`, `sm_120a`).
    pub min_target: Target,
    /// The oldest PTX ISA version that has it, as (major, minor): 8.7 for most (the probe
    /// modules' default), 9.1 for `mxf4nvf4` 4X with ue8m0 scales (ptxas says so).
    pub min_ptx: (u32, u32),
}

/// Which operand of D = A·B + C.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub enum Operand {
    A,
    B,
    C,
    D,
}

impl Operand {
    pub const ALL: [Operand; 4] = [Operand::A, Operand::B, Operand::C, Operand::D];
    pub fn name(self) -> &'static str {
        match self {
            Operand::A => "A",
            Operand::B => "B",
            Operand::C => "C",
            Operand::D => "D",
        }
    }
}

/// Register geometry of one operand in one lane.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Fragment {
    pub elem: ElemType,
    /// Bits one element occupies in its register (8 for an e2m1 under kind::f8f6f4).
    pub container_bits: u32,
    /// 32, or 64 for f64 registers.
    pub reg_bits: u32,
    pub regs: u32,
    /// (rows, cols) of the operand matrix: A is m×k, B is k×n, C and D are m×n.
    pub rows: u32,
    pub cols: u32,
}

impl Fragment {
    pub fn elems_per_reg(&self) -> u32 {
        self.reg_bits / self.container_bits
    }
    pub fn slots(&self) -> u32 {
        self.regs * self.elems_per_reg() * 32
    }
    /// 32-bit words one lane stores for this operand (an f64 register is two).
    pub fn words_per_lane(&self) -> u32 {
        self.regs * self.reg_bits / 32
    }
    /// Where the value bits sit inside an element's container: the shift of the lowest bit.
    /// PTX ISA: an e2m1 in an 8-bit container sits in bits 5..2, e3m2/e2m3 in bits 5..0.
    pub fn value_shift(&self) -> u32 {
        if self.container_bits == 8 && self.elem == ElemType::E2m1 {
            2
        } else {
            0
        }
    }
    /// Read element `elem` of a lane's register (given as 32-bit words) into its value bits.
    pub fn extract(&self, words: &[u32], reg: u32, elem: u32) -> u64 {
        let reg_val: u64 = if self.reg_bits == 64 {
            words[(2 * reg) as usize] as u64 | (words[(2 * reg + 1) as usize] as u64) << 32
        } else {
            words[reg as usize] as u64
        };
        let container = if self.container_bits == 64 {
            reg_val
        } else {
            (reg_val >> (elem * self.container_bits)) & ((1u64 << self.container_bits) - 1)
        };
        let value_mask = if self.elem.value_bits() >= 64 {
            u64::MAX
        } else {
            (1u64 << self.elem.value_bits()) - 1
        };
        (container >> self.value_shift()) & value_mask
    }
    /// Write value bits into element `elem` of a lane's register.
    pub fn insert(&self, words: &mut [u32], reg: u32, elem: u32, value: u64) {
        if self.reg_bits == 64 {
            words[(2 * reg) as usize] = value as u32;
            words[(2 * reg + 1) as usize] = (value >> 32) as u32;
            return;
        }
        let shift = elem * self.container_bits + self.value_shift();
        let width = self.elem.value_bits().min(self.container_bits);
        let mask = ((1u64 << width) - 1) << shift;
        let w = &mut words[reg as usize];
        *w = ((*w as u64 & !mask) | ((value << shift) & mask)) as u32;
    }
}

impl Variant {
    /// The catalog id: the PTX qualifiers without `mma.sync.aligned.` and `.row.col`.
    pub fn id(&self) -> String {
        let mut s = self.shape.to_string();
        if let Some(k) = self.kind.ptx() {
            s += &format!(".kind::{k}");
        }
        if let Some(sc) = self.scale {
            s += &format!(".block_scale.scale_vec::{}X", sc.vec);
        }
        if self.satfinite {
            s += ".satfinite";
        }
        s += &format!(".{}.{}.{}.{}", self.d, self.a, self.b, self.c);
        if let Some(sc) = self.scale {
            s += &format!(".{}", sc.stype);
        }
        if let Some(op) = self.bitop {
            s += match op {
                BitOp::And => ".and.popc",
                BitOp::Xor => ".xor.popc",
            };
        }
        s
    }

    /// File-name stem: the id with `::` as `_`.
    pub fn file_stem(&self) -> String {
        self.id().replace("::", "_")
    }

    /// The full PTX opcode, e.g. `mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32`.
    pub fn opcode(&self) -> String {
        let id = self.id();
        let (shape, rest) = id.split_once('.').expect("id has qualifiers");
        format!("mma.sync.aligned.{shape}.row.col.{rest}")
    }

    /// Element container width of each operand's elements inside registers.
    fn container_bits(&self, op: Operand, t: ElemType) -> u32 {
        match (op, self.kind) {
            // kind::f8f6f4 and kind::mxf8f6f4 put every A/B element, FP4 and FP6 too, in a byte.
            (Operand::A | Operand::B, Kind::F8f6f4 | Kind::Mxf8f6f4) => 8,
            _ => t.value_bits(),
        }
    }

    pub fn fragment(&self, op: Operand) -> Fragment {
        let Shape { m, n, k } = self.shape;
        let (elem, rows, cols) = match op {
            Operand::A => (self.a, m, k),
            Operand::B => (self.b, k, n),
            Operand::C => (self.c, m, n),
            Operand::D => (self.d, m, n),
        };
        let container_bits = self.container_bits(op, elem);
        let reg_bits = container_bits.max(32);
        let regs = rows * cols * container_bits / (32 * reg_bits);
        Fragment {
            elem,
            container_bits,
            reg_bits,
            regs,
            rows,
            cols,
        }
    }

    /// The `.version` a module holding this variant declares.
    pub fn ptx_version(&self) -> String {
        let (maj, min) = self.min_ptx.max(DEFAULT_PTX);
        format!("{maj}.{min}")
    }

    pub fn flops(&self) -> u64 {
        2 * (self.shape.m * self.shape.n * self.shape.k) as u64
    }

    /// Operand text of the instruction with the given register names, including the scale
    /// operands and their `{byte-id, thread-id}` selectors where the variant is block-scaled.
    pub fn instruction(&self, regs: &OperandRegs, selectors: ScaleSelectors) -> String {
        let list = |v: &[String]| format!("{{{}}}", v.join(", "));
        let mut s = format!(
            "{} {}, {}, {}, {}",
            self.opcode(),
            list(&regs.d),
            list(&regs.a),
            list(&regs.b),
            list(&regs.c)
        );
        if self.scale.is_some() {
            s += &format!(
                ", {}, {{{}, {}}}, {}, {{{}, {}}}",
                regs.scale_a,
                selectors.byte_a,
                selectors.thread_a,
                regs.scale_b,
                selectors.byte_b,
                selectors.thread_b
            );
        }
        s + ";"
    }
}

/// Register names to splice into the instruction text.
#[derive(Clone, Debug, Default)]
pub struct OperandRegs {
    pub a: Vec<String>,
    pub b: Vec<String>,
    pub c: Vec<String>,
    pub d: Vec<String>,
    pub scale_a: String,
    pub scale_b: String,
}

/// Immediate `{byte-id, thread-id}` selectors of the scale operands.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ScaleSelectors {
    pub byte_a: u32,
    pub thread_a: u32,
    pub byte_b: u32,
    pub thread_b: u32,
}

/// Look a variant up by id (exact catalog spelling, `::` or `_` accepted), or by the PTX
/// instruction as written in a kernel (`mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32`,
/// operands and `;` allowed, qualifiers in any order: see [`spelling_key`]).
pub fn find(text: &str) -> Option<Variant> {
    let text = text.trim();
    if let Some(v) = catalog()
        .into_iter()
        .find(|v| v.id() == text || v.file_stem() == text)
    {
        return Some(v);
    }
    let key = spelling_key(text)?;
    catalog()
        .into_iter()
        .find(|v| spelling_key(&v.opcode()).as_ref() == Some(&key))
}

/// What identifies an instruction spelling whatever the order of its qualifiers: the set of
/// non-type qualifiers (shape, `kind::`, `block_scale`, `scale_vec::`, `satfinite`, the b1
/// operation), and the type qualifiers in their order (D, A, B, C, then the scale type: their
/// position is their meaning). `mma`, `sync`, `aligned`, `row` and `col` name nothing that tells
/// catalog variants apart; the operand list after the opcode and a final `;` are ignored.
/// `None` when the text holds no shape.
fn spelling_key(text: &str) -> Option<(std::collections::BTreeSet<String>, Vec<ElemType>)> {
    let opcode = text
        .trim()
        .trim_end_matches(';')
        .split_whitespace()
        .next()?;
    let mut quals = std::collections::BTreeSet::new();
    let mut types = Vec::new();
    for tok in opcode.split('.').filter(|t| !t.is_empty()) {
        let tok = tok.replace("::", "_");
        if matches!(tok.as_str(), "mma" | "sync" | "aligned" | "row" | "col") {
            continue;
        }
        match tok.parse::<ElemType>() {
            Ok(t) => types.push(t),
            Err(_) => {
                quals.insert(tok);
            }
        }
    }
    quals
        .iter()
        .any(|q| q.parse::<Shape>().is_ok())
        .then_some((quals, types))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn register_counts_match_the_isa() {
        let cat = catalog();
        let get = |id: &str| {
            cat.iter()
                .find(|v| v.id() == id)
                .unwrap_or_else(|| panic!("{id} missing"))
                .clone()
        };
        let regs = |v: &Variant| {
            (
                v.fragment(Operand::A).regs,
                v.fragment(Operand::B).regs,
                v.fragment(Operand::C).regs,
            )
        };
        assert_eq!(regs(&get("m16n8k16.f32.f16.f16.f32")), (4, 2, 4));
        assert_eq!(regs(&get("m16n8k16.f16.f16.f16.f16")), (4, 2, 2));
        assert_eq!(regs(&get("m16n8k8.f32.tf32.tf32.f32")), (4, 2, 4));
        assert_eq!(regs(&get("m8n8k4.f64.f64.f64.f64")), (1, 1, 2));
        assert_eq!(regs(&get("m16n8k16.f64.f64.f64.f64")), (8, 4, 4));
        assert_eq!(regs(&get("m16n8k32.s32.s8.s8.s32")), (4, 2, 4));
        assert_eq!(regs(&get("m16n8k64.s32.s4.s4.s32")), (4, 2, 4));
        assert_eq!(regs(&get("m16n8k256.s32.b1.b1.s32.and.popc")), (4, 2, 4));
        // The FP4 mistake the seed article made: 4 A and 2 B registers, not 2 and 1.
        let mx = get("m16n8k32.kind::mxf8f6f4.block_scale.scale_vec::1X.f32.e2m1.e2m1.f32.ue8m0");
        assert_eq!(regs(&mx), (4, 2, 4));
        assert_eq!(mx.fragment(Operand::A).container_bits, 8);
        let nv = get("m16n8k64.kind::mxf4nvf4.block_scale.scale_vec::4X.f32.e2m1.e2m1.f32.ue4m3");
        assert_eq!(regs(&nv), (4, 2, 4));
        assert_eq!(nv.fragment(Operand::A).container_bits, 4);
    }

    #[test]
    fn container_insert_extract_roundtrip() {
        let v = find("m16n8k32.kind::f8f6f4.f32.e2m1.e2m1.f32").unwrap();
        let fa = v.fragment(Operand::A);
        let mut w = vec![0u32; fa.words_per_lane() as usize];
        fa.insert(&mut w, 1, 2, 0x2);
        // 1.0 as e2m1 sits in bits 5..2 of byte 2 of register 1: 0x08 << 16.
        assert_eq!(w[1], 0x0008_0000);
        assert_eq!(fa.extract(&w, 1, 2), 0x2);
    }

    #[test]
    fn ptx_spellings_find_their_variant() {
        let bf16 = find("m16n8k16.f32.bf16.bf16.f32").unwrap();
        for text in [
            "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32",
            "  mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%f0, %f1, %f2, %f3}, {%r0, %r1, %r2, %r3}, {%r4, %r5}, {%f4, %f5, %f6, %f7};",
            "mma.sync.aligned.row.col.m16n8k16.f32.bf16.bf16.f32;",
        ] {
            assert_eq!(find(text).as_ref(), Some(&bf16), "{text}");
        }
        let nv = find("m16n8k64.kind::mxf4nvf4.block_scale.scale_vec::4X.f32.e2m1.e2m1.f32.ue4m3");
        assert_eq!(
            find(
                "mma.sync.aligned.m16n8k64.row.col.kind::mxf4nvf4.block_scale.scale_vec::4X.f32.e2m1.e2m1.f32.ue4m3"
            ),
            nv
        );
        assert_eq!(
            find(
                "mma.sync.aligned.kind::mxf4nvf4.m16n8k64.row.col.scale_vec::4X.block_scale.f32.e2m1.e2m1.f32.ue4m3"
            ),
            nv
        );
        // Types are positional: swapping A and B names another variant, or none.
        let e4e5 = find("m16n8k32.f32.e4m3.e5m2.f32").unwrap();
        assert_eq!(
            find("mma.sync.aligned.m16n8k32.row.col.f32.e4m3.e5m2.f32").as_ref(),
            Some(&e4e5)
        );
        assert_ne!(
            find("mma.sync.aligned.m16n8k32.row.col.f32.e5m2.e4m3.f32").as_ref(),
            Some(&e4e5)
        );
        assert!(find("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16").is_none());
        assert!(find("f32.bf16.bf16.f32").is_none());
        for v in catalog() {
            assert_eq!(find(&v.opcode()).as_ref(), Some(&v), "{}", v.opcode());
        }
    }

    #[test]
    fn ids_roundtrip_through_find() {
        for v in catalog() {
            assert_eq!(find(&v.id()).as_ref(), Some(&v));
            assert_eq!(find(&v.file_stem()).as_ref(), Some(&v));
        }
    }
}
