//! Near misses of the sparse `mma.sp` and `mma.sp::ordered_metadata`: the plain `.sp` form of
//! the sm_120a kinds, the register counts of the compressed A, the sparsity selector, and the
//! shapes and targets people carry over from the dense instructions.

use super::{Rejected, entry};

/// `head` (the opcode) with f32 accumulators, 4 registers of A and 4 of B (the FP8, FP6 and
/// FP4 shapes), the metadata register, then `tail` (the selector, any scale operands, `;`).
macro_rules! sp_regs {
    ($head:literal, $tail:literal) => {
        concat!(
            $head,
            " {%d0, %d1, %d2, %d3}, {%a0, %a1, %a2, %a3}, {%b0, %b1, %b2, %b3}, {%c0, %c1, %c2, %c3}, %e, ",
            $tail
        )
    };
}

pub(super) fn rejected() -> Vec<Rejected> {
    vec![
        // --- which sparse form ------------------------------------------------------------
        entry(
            sp_regs!(
                "mma.sp.sync.aligned.m16n8k64.row.col.kind::f8f6f4.f32.e4m3.e4m3.f32",
                "0;"
            ),
            "sm_120a",
            "Illegal modifier '.sp' for instruction 'mma'",
            "mma.sp::ordered_metadata: the sm_120a kinds (and FP8 with f16 accumulators) have no \
             plain .sp form",
        ),
        entry(
            sp_regs!(
                "mma.sp.sync.aligned.m16n8k128.row.col.kind::mxf4.block_scale.scale_vec::2X.f32.e2m1.e2m1.f32.ue8m0",
                "0, %sa, {0, 0}, %sb, {0, 0};"
            ),
            "sm_120a",
            "Illegal modifier '.sp' for instruction 'mma'",
            "mma.sp::ordered_metadata.sync.aligned.m16n8k128.row.col.kind::mxf4.block_scale...",
        ),
        Rejected {
            ptx: "mma.sp::ordered_metadata.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 \
                  {%d0, %d1, %d2, %d3}, {%a0, %a1}, {%b0, %b1}, {%c0, %c1, %c2, %c3}, %e, 0;",
            target: "sm_80",
            ptx_version: "8.4",
            ptxas_says: "Feature '.sp::ordered_metadata' requires PTX ISA .version 8.5 or later",
            instead: ".version 8.5 or later, or mma.sp (PTX 7.1)",
        },
        // --- operands -----------------------------------------------------------------------
        entry(
            "mma.sp::ordered_metadata.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 \
             {%d0, %d1, %d2, %d3}, {%a0, %a1, %a2, %a3}, {%b0, %b1}, {%c0, %c1, %c2, %c3}, %e, 0;",
            "sm_80",
            "Argument vector size mismatch for instruction 'Sparse mma'",
            "A holds only the kept half of the 2:4-sparse A: 2 registers at m16n8k16 f16 (the \
             dense instruction's 4 hold all of it)",
        ),
        entry(
            "mma.sp::ordered_metadata.sync.aligned.m16n8k16.row.col.f32.f16.f16.f16 \
             {%d0, %d1, %d2, %d3}, {%a0, %a1}, {%b0, %b1}, {%hc0, %hc1}, %e, 0;",
            "sm_80",
            "Arguments mismatch for instruction 'mma'",
            ".f32.f16.f16.f32 or .f16.f16.f16.f16: C and D of sparse f16 have one type",
        ),
        entry(
            "mma.sp::ordered_metadata.sync.aligned.m16n8k32.row.col.f16.f16.f16.f16 \
             {%hd0, %hd1}, {%a0, %a1, %a2, %a3}, {%b0, %b1, %b2, %b3}, {%hc0, %hc1}, %e, 2;",
            "sm_80",
            "Argument 6 of instruction 'Sparse mma': value '2' out of range, expected to be in \
             range [0..1]",
            "the sparsity selector of m16n8k32 f16 with f16 accumulators is 0 or 1 (`fp4probe \
             catalog` gives each sparse variant's range)",
        ),
        entry(
            sp_regs!(
                "mma.sp::ordered_metadata.sync.aligned.m16n8k64.row.col.f32.e4m3.e4m3.f32",
                "1;"
            ),
            "sm_89",
            "Argument 5 of instruction 'mma': unexpected value '1', expected to be 0",
            "the sparsity selector is 0 for FP8, for the larger integer K and for every sm_120a \
             kind",
        ),
        entry(
            "mma.sp::ordered_metadata.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 \
             {%d0, %d1, %d2, %d3}, {%a0, %a1}, {%b0, %b1}, {%c0, %c1, %c2, %c3}, %e, %ba;",
            "sm_80",
            "Arguments mismatch for instruction 'mma'",
            "the sparsity selector is an immediate (0 to 3 at most); only the metadata is a \
             register",
        ),
        // --- shapes and types ---------------------------------------------------------------
        entry(
            "mma.sp::ordered_metadata.sync.aligned.m16n8k256.row.col.s32.b1.b1.s32.and.popc \
             {%id0, %id1, %id2, %id3}, {%a0, %a1}, {%b0, %b1}, {%ic0, %ic1, %ic2, %ic3}, %e, 0;",
            "sm_80",
            "Arguments mismatch for instruction 'mma'",
            "b1 has no sparse form: mma.sync.aligned.m16n8k256.row.col.s32.b1.b1.s32.and.popc",
        ),
        entry(
            "mma.sp::ordered_metadata.sync.aligned.m16n8k4.row.col.f32.tf32.tf32.f32 \
             {%d0, %d1, %d2, %d3}, {%a0}, {%b0}, {%c0, %c1, %c2, %c3}, %e, 0;",
            "sm_80",
            "Illegal matrix shape '.m16n8k4' for instruction 'Sparse mma'",
            "sparse tf32 is m16n8k8 or m16n8k16: twice the dense K",
        ),
        entry(
            sp_regs!(
                "mma.sp::ordered_metadata.sync.aligned.m16n8k64.row.col.kind::mxf4.block_scale.scale_vec::2X.f32.e2m1.e2m1.f32.ue8m0",
                "0, %sa, {0, 0}, %sb, {0, 0};"
            ),
            "sm_120a",
            "Illegal matrix shape '.m16n8k64' for instruction 'Sparse mma'",
            "sparse kind::mxf4 and kind::mxf4nvf4 are m16n8k128: twice the dense K",
        ),
        entry(
            sp_regs!(
                "mma.sp::ordered_metadata.sync.aligned.m16n8k32.row.col.kind::mxf8f6f4.block_scale.scale_vec::1X.f32.e2m1.e2m1.f32.ue8m0",
                "0, %sa, {0, 0}, %sb, {0, 0};"
            ),
            "sm_120a",
            "Incorrect instruction type specified for mma with shape '.m16n8k32'",
            "sparse kind::mxf8f6f4 and kind::f8f6f4 are m16n8k64: twice the dense K",
        ),
        Rejected {
            ptx: sp_regs!(
                "mma.sp::ordered_metadata.sync.aligned.m16n8k128.row.col.kind::mxf4nvf4.block_scale.scale_vec::4X.f32.e2m1.e2m1.f32.ue8m0",
                "0, %sa, {0, 0}, %sb, {0, 0};"
            ),
            target: "sm_120a",
            ptx_version: "8.7",
            ptxas_says: "Feature 'mma with .scale_vec::4X and .ue8m0 scale type' requires PTX ISA \
                         .version 9.1 or later",
            instead: ".version 9.1, or scale_vec::4X with ue4m3, or scale_vec::2X with ue8m0",
        },
        // --- targets ------------------------------------------------------------------------
        entry(
            "mma.sp.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 \
             {%d0, %d1, %d2, %d3}, {%a0, %a1}, {%b0, %b1}, {%c0, %c1, %c2, %c3}, %e, 0;",
            "sm_75",
            "Feature 'Sparse MMA' requires .target sm_80 or higher",
            ".target sm_80 or later",
        ),
        entry(
            "mma.sp::ordered_metadata.sync.aligned.m16n8k64.row.col.f16.e4m3.e4m3.f16 \
             {%hd0, %hd1}, {%a0, %a1, %a2, %a3}, {%b0, %b1, %b2, %b3}, {%hc0, %hc1}, %e, 0;",
            "sm_90",
            "Instruction 'mma with with F16 accumulator and F8 floating point type' not \
             supported on .target 'sm_90'",
            ".target sm_120a; on sm_89 and sm_90 sparse FP8 accumulates in f32 \
             (.f32.e4m3.e4m3.f32)",
        ),
        entry(
            sp_regs!(
                "mma.sp::ordered_metadata.sync.aligned.m16n8k64.row.col.kind::f8f6f4.f32.e2m1.e2m1.f32",
                "0;"
            ),
            "sm_100a",
            "Instruction 'mma with with FP6/FP4 floating point type' not supported on .target \
             'sm_100a'",
            ".target sm_120a (on sm_100a only e4m3/e5m2 under kind::f8f6f4 assemble, as for the \
             dense instruction)",
        ),
    ]
}
