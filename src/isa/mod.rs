//! The catalog of warp-level `mma` variants (`mma.sync` and the sparse `mma.sp`): what each one
//! is, how many registers each operand takes, how wide an element's container is, the minimum
//! target, and the exact PTX text. The warp-level data movement beside them (`ldmatrix`,
//! `stmatrix`, `movmatrix`) is catalogued in [`matrix`].
//!
//! A variant's id is its PTX qualifier string without `mma.sync.aligned.` and `.row.col`
//! (for example `m16n8k32.kind::mxf8f6f4.block_scale.scale_vec::1X.f32.e2m1.e2m1.f32.ue8m0`);
//! that is the catalog's own spelling, used in JSON, file names (with `::` as `_`) and the CLI.
//! The sparse forms start with their variant qualifier (`sp.m16n8k32.f32.f16.f16.f32`,
//! `sp::ordered_metadata.m16n8k64.kind::f8f6f4.f32.e4m3.e4m3.f32`), as the sparse wgmma ids
//! do; m8n8k4 with f16, the one shape with a choice of layouts, names them after the shape
//! (`m8n8k4.col.row.f32.f16.f16.f32`).

mod catalog;
pub mod matrix;
pub mod module;
mod rejected;
pub mod sparse;
mod target;

pub use catalog::{catalog, probed};
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

/// Row- or column-major storage of A or B (`.row`, `.col`). Every shape is `.row.col` but
/// m8n8k4 with f16, which takes either for each.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Major {
    #[default]
    Row,
    Col,
}

impl Major {
    pub fn ptx(self) -> &'static str {
        match self {
            Major::Row => "row",
            Major::Col => "col",
        }
    }
}

/// B's default layout: `.col`.
fn col() -> Major {
    Major::Col
}

/// The sparse forms of `mma`: A is 2:4 structured-sparse and holds only its non-zero half, and
/// a metadata register says where each kept element sits.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Sparsity {
    /// `mma.sp`.
    #[serde(rename = "sp")]
    Sp,
    /// `mma.sp::ordered_metadata` (PTX 8.5): the only sparse form of the sm_120a kinds.
    #[serde(rename = "sp::ordered_metadata")]
    OrderedMetadata,
}

impl Sparsity {
    pub fn ptx(self) -> &'static str {
        match self {
            Sparsity::Sp => "sp",
            Sparsity::OrderedMetadata => "sp::ordered_metadata",
        }
    }
}

/// The single-bit operations of `b1` variants.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum BitOp {
    And,
    Xor,
}

/// One `mma.sync` or `mma.sp` variant.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Variant {
    /// `None` for `mma.sync`; the sparse variant qualifier of `mma.sp`.
    #[serde(default)]
    pub sparse: Option<Sparsity>,
    pub shape: Shape,
    /// Layouts of A and B: `.row.col` but for m8n8k4 with f16.
    #[serde(default)]
    pub alayout: Major,
    #[serde(default = "col")]
    pub blayout: Major,
    pub kind: Kind,
    pub a: ElemType,
    pub b: ElemType,
    pub c: ElemType,
    pub d: ElemType,
    pub scale: Option<BlockScale>,
    pub bitop: Option<BitOp>,
    pub satfinite: bool,
    /// The oldest target whose ptxas accepts it (`sm_75`, `sm_80`, `sm_89`, `sm_90`,
    /// `sm_120a`). ptxas 13.5 knows no target older than sm_75, so variants of sm_70 (m8n8k4
    /// with f16) say sm_75.
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
    /// (rows, cols) of the operand matrix: A is m×k, B is k×n, C and D are m×n. The A of a
    /// sparse variant is what its registers hold: the m×k/2 kept elements.
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
    /// Whether the layouts of A and B are a choice the id and the opcode spell: only m8n8k4
    /// with f16 has one.
    fn layout_choice(&self) -> bool {
        self.shape == (Shape { m: 8, n: 8, k: 4 }) && self.a == ElemType::F16
    }

    /// The qualifiers after the shape and the layouts: kind, block scaling, `.satfinite`, the
    /// types, the scale type and the b1 operation.
    fn qualifiers(&self) -> String {
        let mut s = String::new();
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

    /// The catalog id: the PTX qualifiers without `mma.sync.aligned.` and `.row.col`.
    pub fn id(&self) -> String {
        let mut s = String::new();
        if let Some(sp) = self.sparse {
            s += sp.ptx();
            s += ".";
        }
        s += &self.shape.to_string();
        if self.layout_choice() {
            s += &format!(".{}.{}", self.alayout.ptx(), self.blayout.ptx());
        }
        s + &self.qualifiers()
    }

    /// File-name stem: the id with `::` as `_`.
    pub fn file_stem(&self) -> String {
        self.id().replace("::", "_")
    }

    /// The full PTX opcode, e.g. `mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32` or
    /// `mma.sp::ordered_metadata.sync.aligned.m16n8k32.row.col.f32.f16.f16.f32`.
    pub fn opcode(&self) -> String {
        let sp = self
            .sparse
            .map(|s| format!(".{}", s.ptx()))
            .unwrap_or_default();
        format!(
            "mma{sp}.sync.aligned.{}.{}.{}{}",
            self.shape,
            self.alayout.ptx(),
            self.blayout.ptx(),
            self.qualifiers()
        )
    }

    /// The instruction family as `fp4probe catalog` groups it: `mma.sync` or `mma.sp`.
    pub fn family(&self) -> &'static str {
        if self.sparse.is_some() {
            "mma.sp"
        } else {
            "mma.sync"
        }
    }

    /// Why the probes other than `fragment` (numerics, container, scale, bench, codegen) do not
    /// run this variant, or `None` when they do: they share one model of an instruction's
    /// operands, which has no metadata operand, so the sparse forms are `fragment`'s alone.
    pub fn not_probed(&self) -> Option<&'static str> {
        if self.sparse.is_some() {
            return Some(SPARSE_NOTE);
        }
        self.not_lane_mapped()
    }

    /// Why `fragment` (the lane-map probe, its emulator and reports) does not run this variant,
    /// or `None` when it does: every `mma.sync` variant but the m8n8 shapes beside f64, and
    /// every `mma.sp` variant (with its metadata map).
    pub fn not_lane_mapped(&self) -> Option<&'static str> {
        if self.layout_choice() {
            return Some(
                "m8n8k4 with f16 computes four 8x8x4 products per warp, one per quad pair, \
                 which the lane-map probes do not model",
            );
        }
        if self.shape.m == 8 && self.a != ElemType::F64 {
            return Some("the lane-map probes cover the m8n8 shapes only for f64");
        }
        None
    }

    /// Products one warp computes: 4 for m8n8k4 with f16 (one per quad pair of lanes), else 1.
    pub fn products_per_warp(&self) -> u32 {
        if self.layout_choice() { 4 } else { 1 }
    }

    /// Valid values of a sparse variant's sparsity selector (the immediate after the metadata
    /// register: which threads of each group supply metadata), as ptxas 13.5 enforces them;
    /// 0 for a dense variant.
    pub fn sparsity_selectors(&self) -> u32 {
        if self.sparse.is_none() {
            return 0;
        }
        // 0..3 at the smaller K of f16, bf16 and tf32 (and for m16n8k32 f16 with f32
        // accumulators, where ptxas takes what it refuses with f16 ones); 0..1 at the larger K
        // of those and the smaller K of the integer types; only 0 at the larger integer K, for
        // FP8 and for every sm_120a kind.
        let (k, a) = (self.shape.k, self.a);
        match a {
            ElemType::F16 if k == 16 => 4,
            ElemType::F16 if self.d == ElemType::F32 => 4,
            ElemType::F16 | ElemType::Bf16 if k == 32 => 2,
            ElemType::Bf16 => 4,
            ElemType::Tf32 if k == 8 => 4,
            ElemType::Tf32 => 2,
            ElemType::S8 | ElemType::U8 if k == 32 => 2,
            ElemType::S4 | ElemType::U4 if k == 64 => 2,
            _ => 1,
        }
    }

    /// Element container width of each operand's elements inside registers.
    fn container_bits(&self, op: Operand, t: ElemType) -> u32 {
        match (op, self.kind) {
            // kind::f8f6f4 and kind::mxf8f6f4 put every A/B element, FP4 and FP6 too, in a byte.
            (Operand::A | Operand::B, Kind::F8f6f4 | Kind::Mxf8f6f4) => 8,
            _ => t.value_bits(),
        }
    }

    /// The PTX register type an operand's registers are declared with: `.f64`, `.f32` (f32
    /// accumulators), `.s32` (integer accumulators), else `.b32`.
    pub fn reg_type(&self, op: Operand) -> &'static str {
        match self.fragment(op).elem.ptx() {
            "f64" => "f64",
            "f32" if matches!(op, Operand::C | Operand::D) => "f32",
            "s32" => "s32",
            _ => "b32",
        }
    }

    pub fn fragment(&self, op: Operand) -> Fragment {
        let Shape { m, n, k } = self.shape;
        let a_cols = if self.sparse.is_some() { k / 2 } else { k };
        let (elem, rows, cols) = match op {
            Operand::A => (self.a, m, a_cols),
            Operand::B => (self.b, k, n),
            Operand::C => (self.c, m, n),
            Operand::D => (self.d, m, n),
        };
        let container_bits = self.container_bits(op, elem);
        let reg_bits = container_bits.max(32);
        let regs = rows * cols * container_bits * self.products_per_warp() / (32 * reg_bits);
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
        2 * (self.shape.m * self.shape.n * self.shape.k * self.products_per_warp()) as u64
    }

    /// Operand text of the instruction with the given register names: for a sparse variant
    /// the metadata register and the sparsity selector follow C, and for a block-scaled one
    /// the scale operands and their `{byte-id, thread-id}` selectors come last (immediates from
    /// `selectors`, or the `.u16` registers of [`OperandRegs::selector_regs`]).
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
        if self.sparse.is_some() {
            s += &format!(", {}, {}", regs.meta, regs.sparsity_selector);
        }
        if self.scale.is_some() {
            let [byte_a, thread_a, byte_b, thread_b] = match &regs.selector_regs {
                Some(r) => r.clone(),
                None => [
                    selectors.byte_a,
                    selectors.thread_a,
                    selectors.byte_b,
                    selectors.thread_b,
                ]
                .map(|x| x.to_string()),
            };
            s += &format!(
                ", {}, {{{byte_a}, {thread_a}}}, {}, {{{byte_b}, {thread_b}}}",
                regs.scale_a, regs.scale_b,
            );
        }
        s + ";"
    }
}

/// What the sparse forms are left out of, and why.
pub const SPARSE_NOTE: &str = "mma.sp: `fp4probe fragment` measures its lane and metadata maps; \
numerics, container, scale, bench and codegen do not model the metadata operand";

/// Register names to splice into the instruction text.
#[derive(Clone, Debug, Default)]
pub struct OperandRegs {
    pub a: Vec<String>,
    pub b: Vec<String>,
    pub c: Vec<String>,
    pub d: Vec<String>,
    pub scale_a: String,
    pub scale_b: String,
    /// The metadata register of a sparse variant (PTX's operand `e`).
    pub meta: String,
    /// The sparsity selector of a sparse variant (PTX's operand `f`, an immediate).
    pub sparsity_selector: u32,
    /// `.u16` (or `.b16`) registers holding `[byte-id-a, thread-id-a, byte-id-b, thread-id-b]`,
    /// given in place of the immediate selectors: ptxas takes either.
    pub selector_regs: Option<[String; 4]>,
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
/// non-type qualifiers (`sp` or `sp::ordered_metadata`, shape, `kind::`, `block_scale`,
/// `scale_vec::`, its default where it is left out, `satfinite`, the b1 operation), the
/// layouts unless they are `.row.col` (or
/// absent), and the type qualifiers in their order (D, A, B, C, then the scale type: their
/// position is their meaning). `mma`, `sync` and `aligned` name nothing that tells catalog
/// variants apart; the operand list after the opcode and a final `;` are ignored. `None` when
/// the text holds no shape.
fn spelling_key(text: &str) -> Option<(std::collections::BTreeSet<String>, Vec<ElemType>)> {
    let opcode = text
        .trim()
        .trim_end_matches(';')
        .split_whitespace()
        .next()?;
    let mut quals = std::collections::BTreeSet::new();
    let mut types = Vec::new();
    let mut layouts = Vec::new();
    for tok in opcode.split('.').filter(|t| !t.is_empty()) {
        let tok = tok.replace("::", "_");
        match tok.as_str() {
            "mma" | "sync" | "aligned" => continue,
            "row" | "col" => {
                layouts.push(tok);
                continue;
            }
            _ => {}
        }
        match tok.parse::<ElemType>() {
            Ok(t) => types.push(t),
            Err(_) => {
                quals.insert(tok);
            }
        }
    }
    if !layouts.is_empty() && layouts != ["row", "col"] {
        quals.insert(format!("layout {}", layouts.join(".")));
    }
    // Without `.scale_vec::NX`, kind::mxf4 means 2X and kind::mxf8f6f4 1X (the PTX ISA's
    // defaults, which ptxas applies); kind::mxf4nvf4 has none.
    if quals.contains("block_scale") && !quals.iter().any(|q| q.starts_with("scale_vec_")) {
        let default = if quals.contains("kind_mxf4") {
            Some("scale_vec_2X")
        } else if quals.contains("kind_mxf8f6f4") {
            Some("scale_vec_1X")
        } else {
            None
        };
        quals.extend(default.map(String::from));
    }
    quals
        .iter()
        .any(|q| q.parse::<Shape>().is_ok())
        .then_some((quals, types))
}

#[cfg(test)]
mod tests;
