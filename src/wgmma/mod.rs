//! `wgmma.mma_async`, the warpgroup MMA of sm_90a: its catalog, register geometry, shared-memory
//! descriptors, the probe kernel, the CPU model the emulator runs, and the probes.
//!
//! A variant's id is its PTX qualifier string without `wgmma.mma_async` and `.sync.aligned`,
//! followed by where A comes from: `m64n256k16.f32.bf16.bf16.ss` (A and B from shared memory
//! through descriptors) or `...rs` (A from registers). The sparse forms start with `sp.`:
//! `sp.m64n256k32.f32.bf16.bf16.ss`. File names use the id as it is.

pub mod arith;
pub mod backend;
mod batch;
pub mod bench;
pub mod catalog;
pub mod desc;
pub mod emulator;
pub mod grid;
pub mod kernel;
pub mod map;
pub mod model;
pub mod numerics;
pub mod probe;
pub mod rejected;
pub mod sass;
pub mod setting;
pub mod smem;
#[cfg(test)]
pub(crate) mod testing;

pub use catalog::catalog;

use crate::formats::ElemType;
use crate::isa::Target;
use serde::{Deserialize, Serialize};

/// Threads of a warpgroup: four consecutive warps.
pub const THREADS: u32 = 128;
/// Every wgmma is m64.
pub const M: u32 = 64;

/// Where A is read from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum ASource {
    /// A and B from shared memory (`a-desc`, `b-desc`).
    Ss,
    /// A from registers, B from shared memory.
    Rs,
}

impl ASource {
    pub fn name(self) -> &'static str {
        match self {
            ASource::Ss => "ss",
            ASource::Rs => "rs",
        }
    }
}

/// One `wgmma.mma_async` variant.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct WgVariant {
    pub n: u32,
    /// K of the instruction (for the sparse forms: of the dense product, twice the dense K).
    pub k: u32,
    pub a: ElemType,
    pub b: ElemType,
    /// The accumulator type: C and D are the same registers.
    pub d: ElemType,
    pub a_src: ASource,
    pub sparse: bool,
    pub satfinite: bool,
    /// `.and.popc` (the only b1 operation wgmma has).
    pub and_popc: bool,
}

impl WgVariant {
    pub fn id(&self) -> String {
        let mut s = String::new();
        if self.sparse {
            s += "sp.";
        }
        s += &format!("m64n{}k{}", self.n, self.k);
        if self.satfinite {
            s += ".satfinite";
        }
        s += &format!(".{}.{}.{}", self.d, self.a, self.b);
        if self.and_popc {
            s += ".and.popc";
        }
        s + "." + self.a_src.name()
    }

    /// The PTX opcode, e.g. `wgmma.mma_async.sync.aligned.m64n256k16.f32.bf16.bf16`.
    pub fn opcode(&self) -> String {
        let sp = if self.sparse { ".sp" } else { "" };
        let sat = if self.satfinite { ".satfinite" } else { "" };
        let op = if self.and_popc { ".and.popc" } else { "" };
        format!(
            "wgmma.mma_async{sp}.sync.aligned.m64n{}k{}{sat}.{}.{}.{}{op}",
            self.n, self.k, self.d, self.a, self.b
        )
    }

    pub fn min_target(&self) -> Target {
        Target::sm_a(9, 0)
    }

    /// PTX ISA version the variant needs, as ptxas enforces it: 8.0 introduced wgmma, 8.2 its
    /// sparse forms, 8.4 mixed integer types (s8 × u8, u8 × s8; dense and sparse).
    pub fn ptx_version(&self) -> &'static str {
        if !self.a.is_float() && self.a != self.b {
            "8.4"
        } else if self.sparse {
            "8.2"
        } else {
            "8.0"
        }
    }

    /// f16 and bf16 accept the transpose immediates (A: only from shared memory).
    pub fn transposable(&self) -> bool {
        matches!(self.a, ElemType::F16 | ElemType::Bf16)
    }

    /// Floating-point variants take `imm-scale-a`/`imm-scale-b` (±1).
    pub fn has_imm_scale(&self) -> bool {
        self.a.is_float()
    }

    /// K of the A tile as stored: half the instruction's K for the sparse forms.
    pub fn a_k(&self) -> u32 {
        if self.sparse { self.k / 2 } else { self.k }
    }

    pub fn flops(&self) -> u64 {
        2 * (M * self.n * self.k) as u64
    }

    /// Bits of one A/B element in memory and in registers.
    pub fn elem_bits(&self) -> u32 {
        self.a.value_bits()
    }

    /// D (and C) register geometry per thread.
    pub fn d_frag(&self) -> RegFrag {
        let bits = self.d.value_bits();
        let elems = M * self.n / THREADS;
        let per_reg = 32 / bits;
        RegFrag {
            elem: self.d,
            elem_bits: bits,
            regs: elems / per_reg,
            elems_per_reg: per_reg,
            rows: M,
            cols: self.n,
        }
    }

    /// A register geometry per thread (`rs` form): the m64 × K tile (K/2 for sparse) over 128
    /// threads, packed into 32-bit registers.
    pub fn a_frag(&self) -> RegFrag {
        let bits = self.elem_bits();
        let elems = M * self.a_k() / THREADS;
        let per_reg = 32 / bits;
        RegFrag {
            elem: self.a,
            elem_bits: bits,
            regs: elems / per_reg,
            elems_per_reg: per_reg,
            rows: M,
            cols: self.a_k(),
        }
    }

    /// Shared-memory bytes of the A tile (m64 × K) and the B tile (K × N), densely packed.
    pub fn a_tile_bytes(&self) -> u32 {
        M * self.a_k() * self.elem_bits() / 8
    }
    pub fn b_tile_bytes(&self) -> u32 {
        self.k * self.n * self.elem_bits() / 8
    }
}

/// Operand names spliced into the instruction text.
#[derive(Clone, Debug, Default)]
pub struct WgOperands {
    pub d: Vec<String>,
    /// A's registers (`rs`) — ignored for `ss`, which reads `a_desc`.
    pub a: Vec<String>,
    pub a_desc: String,
    pub b_desc: String,
    /// The `scale-d` predicate: false makes the instruction ignore D's old value.
    pub scale_d: String,
    /// Sparse forms: the metadata register and the sparsity selector (0 or 1 for f16, bf16
    /// and tf32; ptxas takes only 0 for the 8-bit types).
    pub sp_meta: String,
    pub sp_sel: u32,
}

/// The immediates of one instruction: negation (floating-point types; 1 or -1) and transpose
/// (f16/bf16; A only from shared memory).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Immediates {
    pub scale_a: i32,
    pub scale_b: i32,
    pub trans_a: bool,
    pub trans_b: bool,
}

impl Default for Immediates {
    fn default() -> Self {
        Immediates {
            scale_a: 1,
            scale_b: 1,
            trans_a: false,
            trans_b: false,
        }
    }
}

impl WgVariant {
    /// The whole instruction, operands and immediates in the order the PTX ISA gives:
    /// `d, a-desc|{a}, b-desc[, sp-meta, sp-sel], scale-d[, imm-scale-a, imm-scale-b]
    /// [, imm-trans-a][, imm-trans-b]`.
    pub fn instruction(&self, ops: &WgOperands, imm: Immediates) -> String {
        let scale = [imm.scale_a.to_string(), imm.scale_b.to_string()];
        let trans = [
            u8::from(imm.trans_a).to_string(),
            u8::from(imm.trans_b).to_string(),
        ];
        self.instruction_text(ops, [&scale[0], &scale[1]], [&trans[0], &trans[1]])
    }

    /// [`instruction`](Self::instruction) with the immediates as text (`%5` of an inline-asm
    /// operand, say): `imm_scale` for imm-scale-a/b, `trans` for imm-trans-a/b, each written
    /// only where the variant takes it.
    pub fn instruction_text(
        &self,
        ops: &WgOperands,
        imm_scale: [&str; 2],
        trans: [&str; 2],
    ) -> String {
        let list = |v: &[String]| format!("{{{}}}", v.join(", "));
        let a = match self.a_src {
            ASource::Ss => ops.a_desc.clone(),
            ASource::Rs => list(&ops.a),
        };
        let mut s = format!("{} {}, {a}, {}", self.opcode(), list(&ops.d), ops.b_desc);
        if self.sparse {
            s += &format!(", {}, {}", ops.sp_meta, ops.sp_sel);
        }
        s += &format!(", {}", ops.scale_d);
        if self.has_imm_scale() {
            s += &format!(", {}, {}", imm_scale[0], imm_scale[1]);
        }
        if self.transposable() {
            if self.a_src == ASource::Ss {
                s += &format!(", {}", trans[0]);
            }
            s += &format!(", {}", trans[1]);
        }
        s + ";"
    }

    /// The PTX register type of D (`f32`, `s32`, or `b32` for packed f16 pairs).
    pub fn d_reg_type(&self) -> &'static str {
        match self.d {
            ElemType::F32 => "f32",
            ElemType::S32 => "s32",
            _ => "b32",
        }
    }
}

/// Register geometry of one operand of one thread.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct RegFrag {
    pub elem: ElemType,
    pub elem_bits: u32,
    pub regs: u32,
    pub elems_per_reg: u32,
    pub rows: u32,
    pub cols: u32,
}

impl RegFrag {
    /// Slots over the warpgroup: `(thread * regs + reg) * elems_per_reg + elem`.
    pub fn slots(&self) -> usize {
        (THREADS * self.regs * self.elems_per_reg) as usize
    }
    pub fn slot(&self, index: usize) -> (u32, u32, u32) {
        let i = index as u32;
        (
            i / (self.regs * self.elems_per_reg),
            (i / self.elems_per_reg) % self.regs,
            i % self.elems_per_reg,
        )
    }
    pub fn index(&self, thread: u32, reg: u32, elem: u32) -> usize {
        ((thread * self.regs + reg) * self.elems_per_reg + elem) as usize
    }
    /// Value bits of one slot from a thread's register words.
    pub fn extract(&self, words: &[u32], reg: u32, elem: u32) -> u64 {
        let w = words[reg as usize] as u64;
        if self.elem_bits == 32 {
            return w;
        }
        (w >> (elem * self.elem_bits)) & ((1u64 << self.elem_bits) - 1)
    }
    pub fn insert(&self, words: &mut [u32], reg: u32, elem: u32, value: u64) {
        if self.elem_bits == 32 {
            words[reg as usize] = value as u32;
            return;
        }
        let shift = elem * self.elem_bits;
        let mask = ((1u64 << self.elem_bits) - 1) << shift;
        let w = &mut words[reg as usize];
        *w = ((*w as u64 & !mask) | ((value << shift) & mask)) as u32;
    }
}

/// Look a variant up by id, or by the PTX opcode with `.ss`/`.rs` appended (`ss` when no
/// source is named; an id without its source is `ss` too).
pub fn find(text: &str) -> Option<WgVariant> {
    let text = text.trim().trim_end_matches(';');
    let text = text.split_whitespace().next().unwrap_or("");
    let (cat, index) = lookup();
    index.get(text).map(|&i| cat[i].clone())
}

/// The catalog and every spelling [`find`] accepts, to the entry's position: built on first
/// use, so a lookup is a hash probe rather than a walk over the catalog.
fn lookup() -> &'static (Vec<WgVariant>, std::collections::HashMap<String, usize>) {
    static LOOKUP: std::sync::OnceLock<(Vec<WgVariant>, std::collections::HashMap<String, usize>)> =
        std::sync::OnceLock::new();
    LOOKUP.get_or_init(|| {
        let cat = catalog();
        let mut index = std::collections::HashMap::new();
        for (i, v) in cat.iter().enumerate() {
            let src = v.a_src.name();
            index.insert(v.id(), i);
            index.insert(format!("{}.{src}", v.opcode()), i);
            if v.a_src == ASource::Ss {
                index.insert(v.opcode(), i);
                let id = v.id();
                index.insert(id[..id.len() - ".ss".len()].to_string(), i);
            }
        }
        (cat, index)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn register_geometry_matches_the_isa() {
        let v = find("m64n256k16.f32.bf16.bf16.rs").unwrap();
        assert_eq!(v.d_frag().regs, 128);
        assert_eq!(v.a_frag().regs, 4);
        let v = find("m64n64k16.f16.f16.f16.ss").unwrap();
        assert_eq!(v.d_frag().regs, 16);
        let v = find("m64n8k8.f32.tf32.tf32.rs").unwrap();
        assert_eq!((v.a_frag().regs, v.d_frag().regs), (4, 4));
        let v = find("m64n16k32.f32.e4m3.e5m2.rs").unwrap();
        assert_eq!(v.a_frag().regs, 4);
        let v = find("m64n256k256.s32.b1.b1.and.popc.rs").unwrap();
        assert_eq!(v.a_frag().regs, 4);
        let v = find("sp.m64n64k32.f32.bf16.bf16.rs").unwrap();
        assert_eq!(v.a_frag().regs, 4);
    }

    #[test]
    fn opcodes_find_their_variant() {
        for v in catalog() {
            assert_eq!(find(&v.id()).as_ref(), Some(&v));
            assert_eq!(
                find(&format!("{}.{}", v.opcode(), v.a_src.name())).as_ref(),
                Some(&v)
            );
        }
        assert_eq!(
            find("wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16")
                .unwrap()
                .a_src,
            ASource::Ss
        );
        assert_eq!(
            find("m64n128k16.f32.bf16.bf16").unwrap().id(),
            "m64n128k16.f32.bf16.bf16.ss"
        );
        assert_eq!(
            find(" wgmma.mma_async.sp.sync.aligned.m64n64k32.f32.bf16.bf16.rs {%d0}, ...;")
                .unwrap()
                .id(),
            "sp.m64n64k32.f32.bf16.bf16.rs"
        );
        assert_eq!(find("m64n40k32.s32.s8.s8.ss"), None);
        assert_eq!(find(""), None);
    }
}
