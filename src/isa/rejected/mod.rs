//! Near-miss spellings that look plausible (and that people have tried) but ptxas rejects.
//! Each message is what ptxas [`Rejected::PTXAS_VERSION`] printed for [`Rejected::module`];
//! `tests/ptxas_catalog.rs` checks that each is still rejected with that message by the pinned
//! ptxas (`.ci/install-cuda-tools`). This file holds the dense `mma.sync` ones, `sparse.rs` the
//! `mma.sp` ones; `isa::matrix` has its own.

mod sparse;

use serde::Serialize;

#[derive(Clone, Debug, Serialize)]
pub struct Rejected {
    /// The instruction as someone might write it: one complete PTX statement over the
    /// registers [`Rejected::DECLS`] declares.
    pub ptx: &'static str,
    /// The `.target` of the module, which is also ptxas's `-arch`.
    pub target: &'static str,
    /// The module's `.version` (8.7, the probe modules' default, unless the version is the
    /// point).
    pub ptx_version: &'static str,
    /// The essential part of ptxas's error message.
    pub ptxas_says: &'static str,
    /// What to write instead.
    pub instead: &'static str,
}

impl Rejected {
    /// The ptxas whose messages `ptxas_says` quotes.
    pub const PTXAS_VERSION: &'static str = "13.5.37";

    /// Registers the `ptx` lines use: A and B fragments, scale words and sparse metadata
    /// (`%e`) as `.b32`, f32 accumulators as `.f32`, f16x2 (or bf16x2) accumulators as `.b32`
    /// `%hc`/`%hd`, integer ones as `.s32` `%ic`/`%id`, scale selectors as `.u16` `%ba`/`%ta`
    /// and as `.u32` `%bw`/`%tw`, and for `ldmatrix`/`stmatrix`/`movmatrix` an address `%p` and
    /// registers `%r`.
    pub const DECLS: &'static str = "    .reg .b32 %a<4>, %b<4>, %sa, %sb, %e;\n    \
         .reg .f32 %c<8>, %d<8>;\n    .reg .b32 %hc<4>, %hd<4>;\n    \
         .reg .s32 %ic<4>, %id<4>;\n    .reg .u16 %ba, %ta;\n    .reg .u32 %bw, %tw;\n    \
         .reg .b64 %p;\n    .reg .b32 %r<8>;";

    /// A complete module holding the instruction, as ptxas is given it.
    pub fn module(&self) -> String {
        format!(
            ".version {}\n.target {}\n.address_size 64\n\n.visible .entry fp4probe_rejected()\n{{\n{}\n    {}\n    ret;\n}}\n",
            self.ptx_version,
            self.target,
            Self::DECLS,
            self.ptx
        )
    }
}

/// `head` (the opcode) with the f32-accumulator register lists, then `tail` (`;`, or the scale
/// operands and `;`).
macro_rules! regs {
    ($head:literal, $tail:literal) => {
        concat!(
            $head,
            " {%d0, %d1, %d2, %d3}, {%a0, %a1, %a2, %a3}, {%b0, %b1}, {%c0, %c1, %c2, %c3}",
            $tail
        )
    };
}

pub(crate) fn entry(
    ptx: &'static str,
    target: &'static str,
    ptxas_says: &'static str,
    instead: &'static str,
) -> Rejected {
    Rejected {
        ptx,
        target,
        ptx_version: "8.7",
        ptxas_says,
        instead,
    }
}

/// Every near miss of `mma`: the dense ones, then the sparse ones.
pub fn rejected_spellings() -> Vec<Rejected> {
    let mut v = dense();
    v.extend(sparse::rejected());
    v
}

fn dense() -> Vec<Rejected> {
    vec![
        // --- FP4 under the wrong kind, shape or scale vector -----------------------------------
        entry(
            regs!(
                "mma.sync.aligned.m16n8k32.row.col.kind::mxf8f6f4.block_scale.scale_vec::2X.f32.e2m1.e2m1.f32.ue8m0",
                ", %sa, {0, 0}, %sb, {0, 0};"
            ),
            "sm_120a",
            "Illegal modifier '.scale_vec::2X' for instruction 'mma'",
            "kind::mxf8f6f4 has only scale_vec::1X (one ue8m0 per 32 k); for two scales per row \
             of FP4 use m16n8k64.kind::mxf4.block_scale.scale_vec::2X (or kind::mxf4nvf4)",
        ),
        entry(
            regs!(
                "mma.sync.aligned.m16n8k64.row.col.kind::mxf8f6f4.block_scale.scale_vec::1X.f32.e2m1.e2m1.f32.ue8m0",
                ", %sa, {0, 0}, %sb, {0, 0};"
            ),
            "sm_120a",
            "Incorrect instruction type specified for mma with shape '.m16n8k64'",
            "kind::mxf8f6f4 is k32 with every element, FP4 too, in a byte; packed FP4 at k64 is \
             kind::mxf4 (scale_vec::2X, ue8m0) or kind::mxf4nvf4",
        ),
        entry(
            regs!(
                "mma.sync.aligned.m16n8k64.row.col.kind::f8f6f4.f32.e2m1.e2m1.f32",
                ";"
            ),
            "sm_120a",
            "Incorrect instruction type specified for mma with shape '.m16n8k64'",
            "unscaled FP4 is m16n8k32.kind::f8f6f4 (bytes); k64 FP4 exists only block-scaled \
             (kind::mxf4, kind::mxf4nvf4)",
        ),
        entry(
            "mma.sync.aligned.m16n8k32.row.col.kind::mxf8f6f4.block_scale.scale_vec::1X.f32.e2m1.e2m1.f32.ue8m0 \
             {%d0, %d1, %d2, %d3}, {%a0, %a1}, {%b0}, {%c0, %c1, %c2, %c3}, %sa, {0, 0}, %sb, {0, 0};",
            "sm_120a",
            "Argument vector size mismatch for instruction 'mma'",
            "FP4 under kind::mxf8f6f4 sits one element per byte: A is 4 registers and B is 2, as \
             for FP8",
        ),
        entry(
            regs!(
                "mma.sync.aligned.m16n8k32.row.col.kind::mxf4.block_scale.scale_vec::2X.f32.e2m1.e2m1.f32.ue8m0",
                ", %sa, {0, 0}, %sb, {0, 0};"
            ),
            "sm_120a",
            "Illegal matrix shape '.m16n8k32' for instruction 'mma'",
            "kind::mxf4 and kind::mxf4nvf4 are m16n8k64 only",
        ),
        entry(
            regs!(
                "mma.sync.aligned.m16n8k64.row.col.kind::mxf4.block_scale.scale_vec::2X.f32.e3m2.e2m1.f32.ue8m0",
                ", %sa, {0, 0}, %sb, {0, 0};"
            ),
            "sm_120a",
            "Incorrect instruction type specified for mma with shape '.m16n8k64'",
            "kind::mxf4 takes e2m1 only; FP6 (and mixed FP4/FP6/FP8) is \
             m16n8k32.kind::mxf8f6f4.block_scale.scale_vec::1X",
        ),
        entry(
            regs!("mma.sync.aligned.m16n8k32.row.col.f32.e2m1.e2m1.f32", ";"),
            "sm_120a",
            ".kind::f8f6f4 modifier required for instruction 'mma'",
            "m16n8k32.kind::f8f6f4.f32.e2m1.e2m1.f32 (FP4/FP6 need a kind; only e4m3/e5m2 have a \
             kindless form)",
        ),
        // --- scale vectors and scale types --------------------------------------------------
        entry(
            regs!(
                "mma.sync.aligned.m16n8k64.row.col.kind::mxf4.block_scale.scale_vec::2X.f32.e2m1.e2m1.f32.ue4m3",
                ", %sa, {0, 0}, %sb, {0, 0};"
            ),
            "sm_120a",
            "Illegal modifier '.kind::mxf4' for instruction 'mma' with type '.ue4m3'",
            "kind::mxf4 scales are ue8m0; ue4m3 (NVFP4) is \
             kind::mxf4nvf4.block_scale.scale_vec::4X ... .ue4m3",
        ),
        entry(
            regs!(
                "mma.sync.aligned.m16n8k32.row.col.kind::mxf8f6f4.block_scale.scale_vec::1X.f32.e2m1.e2m1.f32.ue4m3",
                ", %sa, {0, 0}, %sb, {0, 0};"
            ),
            "sm_120a",
            "Incorrect instruction type specified for mma with shape '.m16n8k32'",
            "kind::mxf8f6f4 scales are ue8m0; ue4m3 scales exist only for FP4 at k64 \
             (kind::mxf4nvf4.block_scale.scale_vec::4X)",
        ),
        entry(
            regs!(
                "mma.sync.aligned.m16n8k64.row.col.kind::mxf4nvf4.block_scale.scale_vec::1X.f32.e2m1.e2m1.f32.ue8m0",
                ", %sa, {0, 0}, %sb, {0, 0};"
            ),
            "sm_120a",
            "Illegal modifier '.scale_vec::1X' for instruction 'mma'",
            "kind::mxf4nvf4 is scale_vec::2X (ue8m0) or scale_vec::4X (ue4m3, or ue8m0 from PTX 9.1)",
        ),
        entry(
            regs!(
                "mma.sync.aligned.m16n8k64.row.col.kind::mxf4.block_scale.scale_vec::1X.f32.e2m1.e2m1.f32.ue8m0",
                ", %sa, {0, 0}, %sb, {0, 0};"
            ),
            "sm_120a",
            "Modifier '.scale_vec::1X' cannot be combined with modifier '.kind::mxf4'",
            "kind::mxf4 is scale_vec::2X (one ue8m0 per 32 k)",
        ),
        entry(
            regs!(
                "mma.sync.aligned.m16n8k64.row.col.kind::mxf4nvf4.block_scale.scale_vec::2X.f32.e2m1.e2m1.f32.ue4m3",
                ", %sa, {0, 0}, %sb, {0, 0};"
            ),
            "sm_120a",
            "Illegal modifier '.scale_vec::2X' for instruction 'mma' with type '.ue4m3'",
            "ue4m3 scales (NVFP4, one per 16 k) go with scale_vec::4X",
        ),
        Rejected {
            ptx: regs!(
                "mma.sync.aligned.m16n8k64.row.col.kind::mxf4nvf4.block_scale.scale_vec::4X.f32.e2m1.e2m1.f32.ue8m0",
                ", %sa, {0, 0}, %sb, {0, 0};"
            ),
            target: "sm_120a",
            ptx_version: "8.7",
            ptxas_says: "Feature 'mma with .scale_vec::4X and .ue8m0 scale type' requires PTX ISA \
                         .version 9.1 or later",
            instead: ".version 9.1 (ptxas 13.0 knows only up to 9.0; 13.5 has it), or scale_vec::4X \
                      with ue4m3, or scale_vec::2X with ue8m0",
        },
        entry(
            regs!(
                "mma.sync.aligned.m16n8k64.row.col.kind::mxf4nvf4.block_scale.f32.e2m1.e2m1.f32.ue8m0",
                ", %sa, {0, 0}, %sb, {0, 0};"
            ),
            "sm_120a",
            ".scale_vec_size modifier required for instruction 'mma'",
            "kind::mxf4nvf4 names its scale vector: .scale_vec::2X or .scale_vec::4X (kind::mxf4 \
             defaults to 2X and kind::mxf8f6f4 to 1X)",
        ),
        entry(
            regs!(
                "mma.sync.aligned.m16n8k32.row.col.kind::mxf8f6f4.block_scale.scale_vec::1X.f32.e4m3.e4m3.f32.e8m0",
                ", %sa, {0, 0}, %sb, {0, 0};"
            ),
            "sm_120a",
            "Unknown modifier '.e8m0'",
            "the scale type is .ue8m0 (unsigned)",
        ),
        entry(
            "mma.sync.aligned.m16n8k32.row.col.kind::mxf8f6f4.block_scale.scale_vec::1X.f16.e4m3.e4m3.f16.ue8m0 \
             {%hd0, %hd1}, {%a0, %a1, %a2, %a3}, {%b0, %b1}, {%hc0, %hc1}, %sa, {0, 0}, %sb, {0, 0};",
            "sm_120a",
            "Unexpected instruction types specified for 'mma'",
            "block-scaled mma accumulates in f32 only: .f32 ... .f32 (kind::f8f6f4 without scales \
             has .f16 accumulators)",
        ),
        // --- block_scale operands and selectors ---------------------------------------------
        entry(
            regs!(
                "mma.sync.aligned.m16n8k32.row.col.kind::mxf8f6f4.block_scale.scale_vec::1X.f32.e2m1.e2m1.f32.ue8m0",
                ", %sa, %sb;"
            ),
            "sm_120a",
            "Arguments mismatch for instruction 'mma'",
            "each scale register takes a {byte-id, thread-id} pair, of immediates or of .u16 \
             registers: ..., %sa, {0, 0}, %sb, {%ba, %ta};",
        ),
        entry(
            regs!(
                "mma.sync.aligned.m16n8k32.row.col.kind::mxf8f6f4.block_scale.scale_vec::1X.f32.e2m1.e2m1.f32.ue8m0",
                ", %sa, {%bw, %tw}, %sb, {0, 0};"
            ),
            "sm_120a",
            "Arguments mismatch for instruction 'mma'",
            "the selectors are 16-bit: immediates or .u16 (or .b16) registers; convert a 32-bit \
             value first (cvt.u16.u32)",
        ),
        entry(
            regs!(
                "mma.sync.aligned.m16n8k64.row.col.kind::mxf4nvf4.block_scale.scale_vec::4X.f32.e2m1.e2m1.f32.ue4m3",
                ", %sa, {1, 0}, %sb, {0, 0};"
            ),
            "sm_120a",
            "Argument 5 of instruction 'mma': unexpected value '1', expected to be 0",
            "byte-id is 0 with scale_vec::4X (the four scales fill the scale register)",
        ),
        entry(
            regs!(
                "mma.sync.aligned.m16n8k64.row.col.kind::mxf4nvf4.block_scale.scale_vec::2X.f32.e2m1.e2m1.f32.ue8m0",
                ", %sa, {1, 0}, %sb, {0, 0};"
            ),
            "sm_120a",
            "Argument 5 of instruction 'mma': unexpected value '1', expected to be 0 or 2",
            "byte-id is 0 or 2 with scale_vec::2X",
        ),
        entry(
            regs!(
                "mma.sync.aligned.m16n8k32.row.col.kind::mxf8f6f4.block_scale.scale_vec::1X.f32.e2m1.e2m1.f32.ue8m0",
                ", %sa, {0, 3}, %sb, {0, 0};"
            ),
            "sm_120a",
            "Argument 5 of instruction 'mma': value '3' out of range, expected to be in range [0..1]",
            "thread-id is 0 or 1 (byte-id is 0..3 with scale_vec::1X)",
        ),
        // --- targets and PTX versions -----------------------------------------------------------
        entry(
            regs!(
                "mma.sync.aligned.m16n8k32.row.col.kind::f8f6f4.f32.e2m1.e2m1.f32",
                ";"
            ),
            "sm_90a",
            "Feature '.kind::f8f6f4' not supported on .target 'sm_90a'",
            ".target sm_120a (FP6/FP4 mma.sync is consumer Blackwell); on Hopper FP8 is the \
             kindless m16n8k32.f32.e4m3.e4m3.f32",
        ),
        entry(
            regs!(
                "mma.sync.aligned.m16n8k32.row.col.kind::f8f6f4.f32.e2m1.e2m1.f32",
                ";"
            ),
            "sm_100a",
            "FP6/FP4 floating point type' not supported on .target 'sm_100a'",
            ".target sm_120a; on sm_100a FP4 is tcgen05.mma (e4m3/e5m2 under kind::f8f6f4 do \
             assemble for sm_100a, as emulated HMMA)",
        ),
        entry(
            regs!(
                "mma.sync.aligned.m16n8k32.row.col.kind::mxf8f6f4.block_scale.scale_vec::1X.f32.e4m3.e4m3.f32.ue8m0",
                ", %sa, {0, 0}, %sb, {0, 0};"
            ),
            "sm_100a",
            "Instruction 'mma with block scale' not supported on .target 'sm_100a'",
            ".target sm_120a; block-scaled MMA on sm_100a is tcgen05.mma.block_scale",
        ),
        entry(
            regs!(
                "mma.sync.aligned.m16n8k32.row.col.kind::mxf8f6f4.block_scale.scale_vec::1X.f32.e4m3.e4m3.f32.ue8m0",
                ", %sa, {0, 0}, %sb, {0, 0};"
            ),
            "sm_120",
            "Feature '.block_scale' not supported on .target 'sm_120'",
            "the arch-specific target: .target sm_120a (or the family target sm_120f, which needs \
             .version 8.8)",
        ),
        entry(
            regs!("mma.sync.aligned.m16n8k32.row.col.f32.e4m3.e4m3.f32", ";"),
            "sm_80",
            "Feature 'mma with FP8 floating point type' requires .target sm_89 or higher",
            ".target sm_89 or later (on sm_90 it assembles to emulated HMMA, not QMMA)",
        ),
        Rejected {
            ptx: "mma.sync.aligned.m16n8k32.row.col.f16.e4m3.e4m3.f16 \
                  {%hd0, %hd1}, {%a0, %a1, %a2, %a3}, {%b0, %b1}, {%hc0, %hc1};",
            target: "sm_89",
            ptx_version: "8.6",
            ptxas_says: "Feature 'mma with FP8 floating point type and FP16 accumulation' requires \
                         PTX ISA .version 8.7 or later",
            instead: ".version 8.7, or f32 accumulation (.f32.e4m3.e4m3.f32, PTX 8.4)",
        },
        // --- kinds and qualifiers -------------------------------------------------------------
        entry(
            regs!(
                "mma.sync.aligned.m16n8k32.row.col.kind::f8f6f4.block_scale.f32.e4m3.e4m3.f32.ue8m0",
                ", %sa, {0, 0}, %sb, {0, 0};"
            ),
            "sm_120a",
            "Illegal modifier '.kind::f8f6f4' for instruction 'mma'",
            "block-scaled FP8/FP6/FP4 is kind::mxf8f6f4 (kind::f8f6f4 is the unscaled form)",
        ),
        entry(
            regs!(
                "mma.sync.aligned.m16n8k32.row.col.block_scale.f32.e4m3.e4m3.f32.ue8m0",
                ", %sa, {0, 0}, %sb, {0, 0};"
            ),
            "sm_120a",
            ".kind::mxf8f6f4 modifier required for instruction 'mma'",
            "m16n8k32.kind::mxf8f6f4.block_scale.scale_vec::1X.f32.e4m3.e4m3.f32.ue8m0",
        ),
        entry(
            "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f16 \
             {%d0, %d1, %d2, %d3}, {%a0, %a1, %a2, %a3}, {%b0, %b1}, {%hc0, %hc1};",
            "sm_80",
            ".dtype must be '.f16' when .ctype is '.f16' for 'mma' instruction with shape '.m16n8k16'",
            ".f32.f16.f16.f32 or .f16.f16.f16.f16: for m16n8 shapes C and D have one type",
        ),
        entry(
            "mma.sync.aligned.m16n8k16.row.col.f16.f16.f16.f32 \
             {%hd0, %hd1}, {%a0, %a1, %a2, %a3}, {%b0, %b1}, {%c0, %c1, %c2, %c3};",
            "sm_80",
            ".dtype must be '.f32' when .ctype is '.f32' for 'mma' instruction with shape '.m16n8k16'",
            ".f32.f16.f16.f32 or .f16.f16.f16.f16: for m16n8 shapes C and D have one type",
        ),
        entry(
            "mma.sync.aligned.m16n8k16.row.col.bf16.bf16.bf16.bf16 \
             {%hd0, %hd1}, {%a0, %a1, %a2, %a3}, {%b0, %b1}, {%hc0, %hc1};",
            "sm_80",
            "Unexpected instruction types specified for 'mma'",
            ".f32.bf16.bf16.f32: bf16 products accumulate in f32 only",
        ),
        entry(
            regs!(
                "mma.sync.m16n8k32.row.col.kind::f8f6f4.f32.e4m3.e4m3.f32",
                ";"
            ),
            "sm_120a",
            ".aligned modifier required for instruction 'mma'",
            "mma.sync.aligned.m16n8k32...",
        ),
        entry(
            regs!(
                "mma.sync.aligned.m16n8k32.row.row.kind::f8f6f4.f32.e4m3.e4m3.f32",
                ";"
            ),
            "sm_120a",
            "Illegal blayout '.row' for instruction 'mma'",
            ".row.col: the only layout of every m16n8 shape (other layouts exist only for m8n8k4 with f16)",
        ),
        // --- m8n8 ------------------------------------------------------------------------
        entry(
            "mma.sync.aligned.m8n8k4.row.col.f16.f16.f16.f32 \
             {%hd0, %hd1, %hd2, %hd3}, {%a0, %a1}, {%b0, %b1}, {%c0, %c1, %c2, %c3, %c4, %c5, %c6, %c7};",
            "sm_80",
            ".dtype must be '.f32' when .ctype is '.f32' for 'mma' instruction with shape '.m8n8k4'",
            "m8n8k4 with f16 takes D f32 with C f32 or f16, or D f16 with C f16",
        ),
        entry(
            "mma.sync.aligned.m8n8k4.row.col.f32.f16.f16.f32 \
             {%d0, %d1, %d2, %d3}, {%a0, %a1}, {%b0, %b1}, {%c0, %c1, %c2, %c3};",
            "sm_80",
            "Argument vector size mismatch for instruction 'mma'",
            "f32 C and D of m8n8k4 are 8 registers per lane: a warp computes four 8x8x4 \
             products, one per quad pair",
        ),
        entry(
            "mma.sync.aligned.m8n8k4.row.col.bf16.bf16.bf16.bf16 \
             {%hd0, %hd1, %hd2, %hd3}, {%a0, %a1}, {%b0, %b1}, {%hc0, %hc1, %hc2, %hc3};",
            "sm_80",
            "Unexpected instruction types specified for 'mma'",
            "m8n8k4 multiplies f16 (and f64) only; bf16 is m16n8k8 or m16n8k16 .f32.bf16.bf16.f32. \
             ptxas 13.5 accepts m8n8k4 .f32.bf16.bf16.f32 but emits no MMA for it \
             (tests/ptxas_catalog.rs checks the SASS): do not use it",
        ),
        entry(
            "mma.sync.aligned.m8n8k128.row.col.s32.b1.b1.s32.and.popc \
             {%id0, %id1}, {%a0}, {%b0}, {%ic0, %ic1};",
            "sm_75",
            "Modifier '.and' on 'mma' requires .target sm_80 or higher",
            ".target sm_80, or .xor.popc (sm_75)",
        ),
        entry(
            "mma.sync.aligned.m8n8k128.row.col.s32.b1.b1.s32.xor \
             {%id0, %id1}, {%a0}, {%b0}, {%ic0, %ic1};",
            "sm_80",
            "Unexpected number of operations specified for mma with shape '.m8n8k128'",
            "the b1 operation is .xor.popc or .and.popc",
        ),
    ]
}
