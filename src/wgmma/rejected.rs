//! Near-miss `wgmma.mma_async` spellings that look plausible but ptxas rejects. Each message is
//! what ptxas [`Rejected::PTXAS_VERSION`] printed for [`Rejected::module`];
//! `tests/ptxas_wgmma.rs` checks that each is still rejected with that message by the pinned
//! ptxas (`.ci/install-cuda-tools`).
//!
//! The texts come from [`WgVariant::instruction`] over variants the catalog lacks, with extra
//! immediates appended where the near miss is an argument the generator never writes.

use super::{ASource, Immediates, WgOperands, WgVariant};
use crate::formats::ElemType::{self, *};
use serde::Serialize;

#[derive(Clone, Debug, Serialize)]
pub struct Rejected {
    /// The instruction as someone might write it: one complete PTX statement over the
    /// registers [`Rejected::DECLS`] declares.
    pub ptx: String,
    /// The `.target` of the module, which is also ptxas's `-arch`.
    pub target: &'static str,
    /// The module's `.version`: [`Rejected::PTX_VERSION`] unless the version is the point.
    pub ptx_version: &'static str,
    /// The essential part of ptxas's error message.
    pub ptxas_says: &'static str,
    /// What to write instead.
    pub instead: &'static str,
}

impl Rejected {
    /// The ptxas whose messages `ptxas_says` quotes.
    pub const PTXAS_VERSION: &'static str = "13.5.37";

    /// The newest PTX ISA version a catalog entry needs (mixed integer types), so that a
    /// rejection is not about the version.
    pub const PTX_VERSION: &'static str = "8.4";

    /// Registers the `ptx` lines use: f32 accumulators `%d`, s32 accumulators `%s`, f16x2
    /// accumulators `%h`, A from registers `%a`, the descriptors `%ad` and `%bd`, the scale-d
    /// predicate `%p` and the sparsity metadata `%m`.
    pub const DECLS: &'static str = "    .reg .f32 %d<128>;\n    .reg .s32 %s<128>;\n    \
         .reg .b32 %h<64>;\n    .reg .b32 %a<4>;\n    .reg .b64 %ad, %bd;\n    \
         .reg .pred %p;\n    .reg .b32 %m;";

    /// The operands of `v` over [`Rejected::DECLS`] (sp-sel 0).
    pub fn operands(v: &WgVariant) -> WgOperands {
        let d = match v.d {
            F32 => "%d",
            S32 => "%s",
            _ => "%h",
        };
        let regs = |prefix: &str, n: u32| (0..n).map(|i| format!("{prefix}{i}")).collect();
        WgOperands {
            d: regs(d, v.d_frag().regs),
            a: regs("%a", v.a_frag().regs),
            a_desc: "%ad".into(),
            b_desc: "%bd".into(),
            scale_d: "%p".into(),
            sp_meta: "%m".into(),
            sp_sel: 0,
        }
    }

    /// The entry for `v`'s instruction with immediates `imm`, at [`Rejected::PTX_VERSION`].
    pub fn of(
        v: &WgVariant,
        imm: Immediates,
        target: &'static str,
        ptxas_says: &'static str,
        instead: &'static str,
    ) -> Rejected {
        Rejected {
            ptx: v.instruction(&Self::operands(v), imm),
            target,
            ptx_version: Self::PTX_VERSION,
            ptxas_says,
            instead,
        }
    }

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

/// A variant by its parts; `k` follows from the A type (doubled for sparse), as in the catalog.
fn var(n: u32, a: ElemType, b: ElemType, d: ElemType, a_src: ASource, sparse: bool) -> WgVariant {
    WgVariant {
        n,
        k: super::catalog::dense_k(a) * if sparse { 2 } else { 1 },
        a,
        b,
        d,
        a_src,
        sparse,
        satfinite: false,
        and_popc: a == B1,
    }
}

/// `v`'s instruction with ` extra` immediates before the `;`.
fn with_extra(v: &WgVariant, extra: &str) -> String {
    let text = v.instruction(&Rejected::operands(v), Immediates::default());
    format!("{}, {extra};", text.trim_end_matches(';'))
}

fn entry(
    ptx: String,
    target: &'static str,
    ptxas_says: &'static str,
    instead: &'static str,
) -> Rejected {
    Rejected {
        ptx,
        target,
        ptx_version: Rejected::PTX_VERSION,
        ptxas_says,
        instead,
    }
}

pub fn rejected_spellings() -> Vec<Rejected> {
    use ASource::{Rs, Ss};
    let imm = Immediates::default();
    let sm90a = "sm_90a";
    let int_n = "the integer and b1 types take N = 8, 16, 24 and the multiples of 16 up to 256";
    let mut out = Vec::new();

    // --- N the integer and b1 types lack --------------------------------------------------
    for (n, a, b, src, says) in [
        (
            40,
            S8,
            S8,
            Ss,
            "Illegal matrix shape '.m64n40k32' for instruction 'wgmma.mma_async with integer types'",
        ),
        (
            56,
            U8,
            U8,
            Rs,
            "Illegal matrix shape '.m64n56k32' for instruction 'wgmma.mma_async with integer types'",
        ),
        (
            72,
            S8,
            U8,
            Ss,
            "Illegal matrix shape '.m64n72k32' for instruction 'wgmma.mma_async with mixed \
             integer types'",
        ),
    ] {
        out.push(Rejected::of(
            &var(n, a, b, S32, src, false),
            imm,
            sm90a,
            says,
            int_n,
        ));
    }
    out.push(Rejected::of(
        &var(248, S8, S8, S32, Rs, false),
        imm,
        sm90a,
        "Illegal matrix shape '.m64n248k32' for instruction 'wgmma.mma_async with integer types'",
        "m64n240k32 or m64n256k32 (only the floating-point types have every multiple of 8)",
    ));
    out.push(Rejected::of(
        &var(40, B1, B1, S32, Ss, false),
        imm,
        sm90a,
        "Unknown modifier '.m64n40k256'",
        int_n,
    ));
    out.push(Rejected::of(
        &var(248, B1, B1, S32, Rs, false),
        imm,
        sm90a,
        "Unknown modifier '.m64n248k256'",
        "m64n240k256 or m64n256k256",
    ));
    out.push(Rejected::of(
        &var(64, B1, B1, S32, Ss, true),
        imm,
        sm90a,
        "Unknown modifier '.m64n64k512'",
        "b1 has no sparse form: the dense m64nNk256.s32.b1.b1.and.popc",
    ));

    // --- shapes, types and qualifiers -----------------------------------------------------
    out.push(Rejected::of(
        &WgVariant {
            k: 32,
            ..var(64, F16, F16, F32, Ss, false)
        },
        imm,
        sm90a,
        "Illegal matrix shape '.m64n64k32' for instruction 'wgmma.mma_async with floating point types'",
        "K is 32 bytes of A: k16 for f16/bf16, k8 for tf32, k32 for FP8 and 8-bit integers, \
         k256 for b1 (twice that for the sparse forms)",
    ));
    out.push(Rejected::of(
        &var(64, Bf16, Bf16, F16, Ss, false),
        imm,
        sm90a,
        "Unexpected instruction types specified for 'wgmma.mma_async'",
        ".f32.bf16.bf16: bf16 accumulates in f32 only (f16 accumulation is for f16 and FP8)",
    ));
    out.push(Rejected::of(
        &var(64, Tf32, Tf32, F16, Ss, false),
        imm,
        sm90a,
        "Unexpected instruction types specified for 'wgmma.mma_async'",
        ".f32.tf32.tf32: tf32 accumulates in f32 only",
    ));
    out.push(Rejected::of(
        &var(64, Bf16, F16, F32, Ss, false),
        imm,
        sm90a,
        "Unexpected instruction types specified for 'wgmma.mma_async'",
        "A and B of one 16-bit type; only FP8 (e4m3/e5m2) and the 8-bit integers mix",
    ));
    out.push(Rejected::of(
        &WgVariant {
            satfinite: true,
            ..var(64, F16, F16, F32, Ss, false)
        },
        imm,
        sm90a,
        "Illegal modifier '.satfinite' for instruction 'wgmma.mma_async with floating point types'",
        ".satfinite is for the integer types (s32 accumulation) only",
    ));
    let b1 = var(64, B1, B1, S32, Ss, false);
    out.push(entry(
        b1.instruction(&Rejected::operands(&b1), imm)
            .replace(".and.popc", ".xor.popc"),
        sm90a,
        "Incorrect operations specified for wgmma.mma_async with boolean type",
        ".and.popc: the only b1 operation wgmma has (mma.sync has .xor.popc too)",
    ));

    // --- immediates -----------------------------------------------------------------------
    out.push(entry(
        with_extra(&var(64, Tf32, Tf32, F32, Ss, false), "0, 0"),
        sm90a,
        "Arguments mismatch for instruction 'wgmma.mma_async with floating point types'",
        "tf32 takes no transpose immediates: ..., scale-d, imm-scale-a, imm-scale-b; \
         (A and B K-major in shared memory)",
    ));
    out.push(entry(
        with_extra(&var(64, Tf32, Tf32, F32, Rs, false), "0"),
        sm90a,
        "Arguments mismatch for instruction 'wgmma.mma_async'",
        "tf32 takes no transpose immediates: ..., scale-d, imm-scale-a, imm-scale-b;",
    ));
    out.push(entry(
        with_extra(&var(64, E4m3, E4m3, F32, Ss, false), "0, 1"),
        sm90a,
        "Arguments mismatch for instruction 'wgmma.mma_async with FP8 types'",
        "FP8 takes no transpose immediates: ..., scale-d, imm-scale-a, imm-scale-b; \
         (A and B K-major in shared memory)",
    ));
    out.push(entry(
        with_extra(&var(64, E5m2, E4m3, F16, Rs, false), "1"),
        sm90a,
        "Arguments mismatch for instruction 'wgmma.mma_async'",
        "FP8 takes no transpose immediates: ..., scale-d, imm-scale-a, imm-scale-b;",
    ));
    out.push(entry(
        with_extra(&var(64, F16, F16, F32, Rs, false), "0"),
        sm90a,
        "Arguments mismatch for instruction 'wgmma.mma_async'",
        "with A from registers only B transposes: ..., scale-d, imm-scale-a, imm-scale-b, \
         imm-trans-b;",
    ));
    out.push(Rejected::of(
        &var(64, F16, F16, F32, Ss, false),
        Immediates { scale_a: 2, ..imm },
        sm90a,
        "Argument 4 of instruction 'wgmma.mma_async with floating point types': unexpected \
         value '2', expected to be -1 or 1",
        "imm-scale-a and imm-scale-b negate (-1) or not (1); they do not scale",
    ));
    out.push(entry(
        with_extra(&var(64, S8, S8, S32, Ss, false), "1, 1"),
        sm90a,
        "Arguments mismatch for instruction 'wgmma.mma_async with integer types'",
        "the integer and b1 types take no imm-scale (nor transpose): ..., scale-d;",
    ));
    out.push(entry(
        with_extra(&var(64, U8, S8, S32, Rs, false), "1, 1"),
        sm90a,
        "Arguments mismatch for instruction 'wgmma.mma_async with mixed integer types'",
        "the integer and b1 types take no imm-scale (nor transpose): ..., scale-d;",
    ));
    let sp = var(64, Bf16, Bf16, F32, Ss, true);
    let mut ops = Rejected::operands(&sp);
    ops.sp_sel = 2;
    out.push(entry(
        sp.instruction(&ops, imm),
        sm90a,
        "Argument 4 of instruction 'Sparse wgmma.mma_async with floating point types': \
         unexpected value '2', expected to be 0 or 1",
        "sp-sel is 0 or 1 for f16, bf16 and tf32; 0 for FP8 and the 8-bit integers",
    ));
    for (a, b, says) in [
        (
            E4m3,
            E5m2,
            "Argument 4 of instruction 'Sparse wgmma.mma_async with FP8 types': unexpected \
             value '1', expected to be 0",
        ),
        (
            S8,
            S8,
            "Argument 4 of instruction 'Sparse wgmma.mma_async with integer types': unexpected \
             value '1', expected to be 0",
        ),
    ] {
        let d = if a.is_float() { F32 } else { S32 };
        let sp = var(64, a, b, d, Rs, true);
        let mut ops = Rejected::operands(&sp);
        ops.sp_sel = 1;
        out.push(entry(
            sp.instruction(&ops, imm),
            sm90a,
            says,
            "sp-sel is 0 for FP8 and the 8-bit integers (0 or 1 only for f16, bf16 and tf32)",
        ));
    }

    // --- targets and PTX versions ---------------------------------------------------------
    out.push(Rejected::of(
        &var(64, Bf16, Bf16, F32, Ss, false),
        imm,
        "sm_90",
        "Instruction 'wgmma.mma_async with floating point types' not supported on .target 'sm_90'",
        ".target sm_90a: wgmma is an arch-specific feature",
    ));
    out.push(Rejected::of(
        &var(64, S8, S8, S32, Rs, false),
        imm,
        "sm_90",
        "Instruction 'wgmma.mma_async with integer types' not supported on .target 'sm_90'",
        ".target sm_90a: wgmma is an arch-specific feature",
    ));
    out.push(Rejected {
        ptx_version: "8.1",
        ..Rejected::of(
            &var(64, Bf16, Bf16, F32, Rs, true),
            imm,
            sm90a,
            "Feature 'Sparse WGMMA with floating point types' requires PTX ISA .version 8.2 or later",
            ".version 8.2 (dense wgmma needs 8.0)",
        )
    });
    out.push(Rejected {
        ptx_version: "8.3",
        ..Rejected::of(
            &var(64, S8, U8, S32, Ss, false),
            imm,
            sm90a,
            "Feature 'WGMMA with mixed integer types' requires PTX ISA .version 8.4 or later",
            ".version 8.4 for s8 × u8 and u8 × s8 (dense and sparse); s8.s8 and u8.u8 need 8.0",
        )
    });
    out
}
