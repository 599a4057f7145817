//! The wgmma bench on the CPU side: the kernel text (`probes/wgmma_bench.ptx` filled for one
//! variant and one loop shape), its input image, the SASS guard for it, and which variants can
//! be benchmarked. Preparation, timing and the report are `crate::probe::bench::wgmma_prepare`,
//! `wgmma_measure` and `wgmma`.
//!
//! Kernel. A persistent grid: every CTA holds W warpgroups, each with C accumulator sets,
//! issuing commit groups of G wgmma back to back from shared memory (`ss`: A and B through
//! descriptors; `rs`: A from registers) and waiting with `wgmma.wait_group F` after each group,
//! so with F ≥ 1 the next group is queued while earlier ones run and the tensor core is never
//! left idle. The latency kernel is one warpgroup with one accumulator set and F = 0: each
//! wgmma waits for the previous one, cycles per wgmma from `%clock64`.
//!
//! Shared memory. One stage of four k-steps: B as N rows of 128 bytes (every dense wgmma reads
//! 32 bytes of K per row: 16 bf16, 8 tf32, 32 e4m3 or s8, 256 b1), then per warpgroup an A tile
//! of 64 rows of 128 bytes (`ss` only). wgmma j of a group reads k-step j mod 4. Layouts
//! ([`Layout`]): the 128-byte swizzle production GEMMs use (8-row × 128-byte atoms, stride
//! byte offset 1024, k-steps 32 bytes apart inside the atom), or the canonical K-major layout
//! without swizzle (8 × 16-byte core matrices, leading byte offset 128 along K, stride byte
//! offset 1024 per 8 rows, k-steps 256 bytes apart). Either way every descriptor reads inside
//! the filled image, and every byte of the image is a random non-zero element ([`wg_inputs`]):
//! the tensor core never multiplies zeros.
//!
//! Values: floats uniform over the codes of magnitude 1/8 to 1/2 (every mantissa pattern, both
//! signs), integers ±1..3 (1..3 unsigned), b1 random non-zero words. Every wgmma adds the same
//! A·B of its k-step to its accumulator, so accumulators grow linearly: |increment| ≤ K/4
//! (at most 8, e4m3 K = 32); an f32 accumulator stays far from overflow over any trip count a
//! launch runs, an f16 one stops growing once the increment is below half its unit in the last
//! place (below 2^15 < 65504), s32 wraps. The host checks the final accumulators are finite.
//!
//! The SASS guard ([`check_wg_loop`]) requires of the timed loop (the one backward branch
//! between the two `%clock64` reads): exactly G × groups tensor instructions per iteration, all
//! of them the variant's own (`HGMMA.64x256x16.F32.BF16`, QGMMA for FP8, IGMMA for s8/u8,
//! BGMMA for b1); exactly one `WARPGROUP.DEPBAR` per commit group, waiting for F (ptxas adds
//! more where it serialises wgmma); no other branch in the loop; no local memory anywhere in
//! the kernel (spills); and no ptxas advisory about wgmma (C7515 "serialized", C7517 "wait_group
//! injected" and the like).

use super::{ASource, Immediates, M, THREADS, WgOperands, WgVariant};
use crate::formats::ElemType;
use crate::isa::Target;
use crate::probe::bench::{CheckStatus, SassCheck, parse_sass, timed_loop};
use crate::rng::SplitMix64;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::fmt::Write;

const TEMPLATE: &str = include_str!("../../probes/wgmma_bench.ptx");

/// The kernel entry point's name.
pub const WG_BENCH_ENTRY: &str = "fp4probe_wgmma_bench";

/// u64 words each warpgroup writes to the timing buffer: cycles, nanoseconds, smid, 0.
pub const WG_TIMING_WORDS: usize = 4;

/// k-steps in one 128-byte row of the image: every dense wgmma reads 32 bytes of K per row.
pub const K_STEPS: u32 = 4;

/// Bytes of one row of a tile in shared memory (four k-steps).
pub const ROW_BYTES: u32 = 128;

/// Extra dynamic shared memory so the kernel can round its base up to 1024 bytes.
pub const ALIGN_SLACK: u32 = 1024;

/// Registers per thread one SM gives a CTA of `threads` threads (65536 per SM, allocated in
/// units of 8 per thread, at most 255).
pub fn register_limit(threads: u32) -> u32 {
    ((65536 / threads.max(1)) / 8 * 8).min(255)
}

/// How the tiles sit in shared memory, which the descriptors say.
#[derive(
    Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize, clap::ValueEnum,
)]
#[serde(rename_all = "lowercase")]
pub enum Layout {
    /// 128-byte swizzle, K-major (descriptor layout type 1).
    #[default]
    Swizzle128,
    /// No swizzle: the canonical K-major layout of 8 × 16-byte core matrices (layout type 0).
    Interleave,
}

impl Layout {
    pub fn name(self) -> &'static str {
        match self {
            Layout::Swizzle128 => "swizzle128",
            Layout::Interleave => "interleave",
        }
    }

    /// Byte distance between consecutive k-steps of one tile.
    pub fn k_step_bytes(self) -> u32 {
        match self {
            Layout::Swizzle128 => 32,
            Layout::Interleave => 256,
        }
    }

    /// Bits 16..63 of a descriptor: leading byte offset, stride byte offset (both ÷ 16) and the
    /// layout type in bits 62..63. The start address (÷ 16) goes in bits 0..13.
    pub fn descriptor_high(self) -> u64 {
        let (lbo, sbo, mode): (u64, u64, u64) = match self {
            // K-major swizzled: the leading byte offset is not used.
            Layout::Swizzle128 => (16, 1024, 1),
            Layout::Interleave => (128, 1024, 0),
        };
        ((lbo >> 4) << 16) | ((sbo >> 4) << 32) | (mode << 62)
    }
}

/// The loop shape of one wgmma bench kernel.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct WgShape {
    /// Warpgroups per CTA.
    pub warpgroups: u32,
    /// Accumulator sets per warpgroup (wgmma j of an iteration writes set j mod chains).
    pub chains: u32,
    /// Commit groups per loop iteration.
    pub groups: u32,
    /// wgmma per commit group.
    pub per_group: u32,
    /// `wgmma.wait_group` after each commit: groups left in flight (0: the latency kernel).
    pub in_flight: u32,
    pub layout: Layout,
}

impl WgShape {
    /// One warpgroup, one accumulator set, `steps` wgmma per iteration each waited for.
    pub fn latency(steps: u32, layout: Layout) -> Self {
        WgShape {
            warpgroups: 1,
            chains: 1,
            groups: steps,
            per_group: 1,
            in_flight: 0,
            layout,
        }
    }

    /// `warpgroups` per CTA, `chains` accumulator sets each, one group of `per_group` wgmma per
    /// iteration with `in_flight` groups left running after each.
    pub fn throughput(
        warpgroups: u32,
        chains: u32,
        per_group: u32,
        in_flight: u32,
        layout: Layout,
    ) -> Self {
        WgShape {
            warpgroups,
            chains,
            groups: 1,
            per_group,
            in_flight,
            layout,
        }
    }

    pub fn is_latency(&self) -> bool {
        self.in_flight == 0
    }

    /// wgmma per warpgroup per loop iteration.
    pub fn wgmma_per_iter(&self) -> u32 {
        self.groups * self.per_group
    }

    pub fn threads(&self) -> u32 {
        THREADS * self.warpgroups
    }
}

/// Bytes of the B tile in shared memory (N rows of four k-steps).
pub fn b_bytes(v: &WgVariant) -> u32 {
    v.n * ROW_BYTES
}

/// Bytes of one warpgroup's A tile in shared memory (64 rows of four k-steps; `ss` only).
pub fn a_bytes(v: &WgVariant) -> u32 {
    match v.a_src {
        ASource::Ss => M * ROW_BYTES,
        ASource::Rs => 0,
    }
}

/// Bytes of the shared-memory image for `warpgroups` warpgroups.
pub fn image_bytes(v: &WgVariant, warpgroups: u32) -> u32 {
    b_bytes(v) + warpgroups * a_bytes(v)
}

/// Dynamic shared memory a CTA of `warpgroups` warpgroups asks for.
pub fn smem_bytes(v: &WgVariant, warpgroups: u32) -> u32 {
    image_bytes(v, warpgroups) + ALIGN_SLACK
}

/// 32-bit words of A registers per thread in the input (`rs`: four k-step sets).
pub fn a_reg_words(v: &WgVariant) -> u32 {
    match v.a_src {
        ASource::Ss => 0,
        ASource::Rs => K_STEPS * v.a_frag().regs,
    }
}

/// Byte offset of the shared-memory image in the input buffer (after the `rs` A registers of
/// the 128 threads of a warpgroup).
pub fn image_offset(v: &WgVariant) -> u32 {
    THREADS * a_reg_words(v) * 4
}

/// 32-bit accumulator words per thread.
pub fn d_words(v: &WgVariant, shape: WgShape) -> u32 {
    shape.chains * v.d_frag().regs
}

/// Registers per thread the kernel needs at least: accumulators, `rs` A registers, and 32 for
/// addresses, the counter and the timers (ptxas 13.5 gives the m64n256k16 kernels 26 beyond
/// the first two; where the sum passes the limit, ptxas serialises the wgmma or spills).
pub fn register_need(v: &WgVariant, shape: WgShape) -> u32 {
    d_words(v, shape) + a_reg_words(v) + 32
}

/// The PTX ISA version of the bench kernels: the variant's own (8.0), or 8.4 for wgmma with
/// mixed integer types (s8 × u8, u8 × s8), which ptxas accepts from 8.4 on.
pub fn bench_ptx_version(v: &WgVariant) -> &'static str {
    let int = |t: ElemType| matches!(t, ElemType::S8 | ElemType::U8);
    if int(v.a) && int(v.b) && v.a != v.b {
        "8.4"
    } else {
        v.ptx_version()
    }
}

/// Why `shape` cannot be built for `v`, if it cannot: its registers exceed what a CTA of its
/// size gets per thread.
pub fn unfit(v: &WgVariant, shape: WgShape) -> Option<String> {
    let need = register_need(v, shape);
    let limit = register_limit(shape.threads());
    (need > limit).then(|| {
        format!(
            "{} accumulator set(s) of {} registers need about {need} registers per thread; a CTA \
             of {} warpgroup(s) gets {limit}",
            shape.chains,
            v.d_frag().regs,
            shape.warpgroups
        )
    })
}

/// The SASS mnemonic one wgmma of `v` becomes, up to its shape: `HGMMA.64x256x16` (f16, bf16,
/// tf32), `QGMMA` (FP8), `IGMMA` (s8/u8), `BGMMA` (b1).
pub fn sass_mnemonic(v: &WgVariant) -> String {
    let base = match v.a {
        ElemType::E4m3 | ElemType::E5m2 => "QGMMA",
        ElemType::S8 | ElemType::U8 => "IGMMA",
        ElemType::B1 => "BGMMA",
        _ => "HGMMA",
    };
    format!("{base}.{M}x{}x{}", v.n, v.k)
}

/// The bench kernel of `v` (dense) for `target` (sm_90a) with loop shape `shape`.
pub fn wg_bench_kernel(v: &WgVariant, target: Target, shape: WgShape) -> String {
    assert!(!v.sparse, "the wgmma bench has no sparse kernel");
    assert!(
        shape.warpgroups >= 1 && shape.chains >= 1 && shape.groups >= 1 && shape.per_group >= 1,
        "warpgroups, chains, groups and wgmma per group must be at least 1"
    );
    let d_regs = v.d_frag().regs;
    let a_regs = v.a_frag().regs;
    let rs = v.a_src == ASource::Rs;
    let names = |p: String, n: u32| -> Vec<String> { (0..n).map(|i| format!("{p}_{i}")).collect() };
    let d: Vec<Vec<String>> = (0..shape.chains)
        .map(|c| names(format!("%d{c}"), d_regs))
        .collect();
    let a: Vec<Vec<String>> = (0..K_STEPS)
        .map(|s| names(format!("%ra{s}"), a_regs))
        .collect();

    let mut decls = String::new();
    let join = |v: &[Vec<String>]| v.iter().flatten().cloned().collect::<Vec<_>>().join(", ");
    writeln!(decls, "    .reg .{} {};", v.d_reg_type(), join(&d)).unwrap();
    if rs {
        writeln!(decls, "    .reg .b32 {};", join(&a)).unwrap();
    }
    let descs: Vec<String> = (0..K_STEPS)
        .flat_map(|s| {
            let mut v = vec![format!("%db{s}")];
            if !rs {
                v.push(format!("%da{s}"));
            }
            v
        })
        .collect();
    writeln!(decls, "    .reg .b64 {};", descs.join(", ")).unwrap();
    writeln!(decls, "    .reg .b32 %dlo;").unwrap();

    let mut load_a = String::new();
    if rs {
        writeln!(
            load_a,
            "    // This thread's A registers: {K_STEPS} k-step sets of {a_regs}."
        )
        .unwrap();
        writeln!(load_a, "    mul.wide.u32 %off, %t, {};", a_reg_words(v) * 4).unwrap();
        writeln!(load_a, "    add.u64 %ptr, %in, %off;").unwrap();
        for (s, set) in a.iter().enumerate() {
            for (i, r) in set.iter().enumerate() {
                let byte = (s as u32 * a_regs + i as u32) * 4;
                writeln!(load_a, "    ld.global.b32 {r}, [%ptr+{byte}];").unwrap();
            }
        }
    }

    let mut setup = String::new();
    let hi = shape.layout.descriptor_high();
    writeln!(
        setup,
        "    // Descriptors of the {K_STEPS} k-steps ({} layout): start address / 16 in bits \
         0..13, then {hi:#018x}.",
        shape.layout.name()
    )
    .unwrap();
    let step = shape.layout.k_step_bytes();
    for s in 0..K_STEPS {
        let mut pairs = vec![("%b_addr", format!("%db{s}"))];
        if !rs {
            pairs.push(("%a_addr", format!("%da{s}")));
        }
        for (addr, reg) in pairs {
            writeln!(setup, "    add.u32 %dlo, {addr}, {};", s * step).unwrap();
            writeln!(setup, "    and.b32 %dlo, %dlo, 262143;").unwrap();
            writeln!(setup, "    shr.u32 %dlo, %dlo, 4;").unwrap();
            writeln!(setup, "    cvt.u64.u32 {reg}, %dlo;").unwrap();
            writeln!(setup, "    or.b64 {reg}, {reg}, {hi:#x};").unwrap();
        }
    }
    for r in d.iter().flatten() {
        writeln!(setup, "    mov.b32 {r}, 0;").unwrap();
    }

    let mut body = String::new();
    writeln!(body, "    wgmma.fence.sync.aligned;").unwrap();
    for g in 0..shape.groups {
        for j in 0..shape.per_group {
            let idx = g * shape.per_group + j;
            let s = (idx % K_STEPS) as usize;
            let c = (idx % shape.chains) as usize;
            let ops = WgOperands {
                d: d[c].clone(),
                a: if rs { a[s].clone() } else { Vec::new() },
                a_desc: format!("%da{s}"),
                b_desc: format!("%db{s}"),
                scale_d: "%scale_d".into(),
                sp_meta: String::new(),
                sp_sel: 0,
            };
            writeln!(body, "    {}", v.instruction(&ops, Immediates::default())).unwrap();
        }
        writeln!(body, "    wgmma.commit_group.sync.aligned;").unwrap();
        writeln!(
            body,
            "    wgmma.wait_group.sync.aligned {};",
            shape.in_flight
        )
        .unwrap();
    }

    let mut stores = String::new();
    for (i, r) in d.iter().flatten().enumerate() {
        writeln!(stores, "    st.global.b32 [%ptr+{}], {r};", i * 4).unwrap();
    }

    TEMPLATE
        .replace("{{PTX_VERSION}}", bench_ptx_version(v))
        .replace("{{TARGET}}", &target.to_string())
        .replace("{{THREADS}}", &shape.threads().to_string())
        .replace("{{CHAINS}}", &shape.chains.to_string())
        .replace("{{GROUPS}}", &shape.groups.to_string())
        .replace("{{PER_GROUP}}", &shape.per_group.to_string())
        .replace("{{IN_FLIGHT}}", &shape.in_flight.to_string())
        .replace("{{IMAGE_OFFSET}}", &image_offset(v).to_string())
        .replace("{{A_WORDS}}", &(a_bytes(v) / 4).to_string())
        .replace("{{B_WORDS}}", &(b_bytes(v) / 4).to_string())
        .replace("{{A_BYTES}}", &a_bytes(v).to_string())
        .replace("{{B_BYTES}}", &b_bytes(v).to_string())
        .replace("{{D_WORDS}}", &d_words(v, shape).to_string())
        .replace("{{D_BYTES}}", &(d_words(v, shape) * 4).to_string())
        .replace("{{DECLS}}", decls.trim_end())
        .replace("{{LOAD_A}}", load_a.trim_end())
        .replace("{{SETUP}}", setup.trim_end())
        .replace("{{BODY}}", body.trim_end())
        .replace("{{STORES}}", stores.trim_end())
}

// ---------------------------------------------------------------------------------------------
// Inputs
// ---------------------------------------------------------------------------------------------

/// The codes an A/B element of type `t` is drawn from (see the module doc); b1 has none (its
/// words are random non-zero bits).
pub fn element_codes(t: ElemType) -> Vec<u64> {
    match t {
        ElemType::S8 => [1i8, -1, 2, -2, 3, -3]
            .iter()
            .map(|&x| x as u8 as u64)
            .collect(),
        ElemType::U8 => vec![1, 2, 3],
        ElemType::B1 => Vec::new(),
        // tf32 sits in 32 bits whose low 13 the tensor core ignores: every (sign, exponent,
        // 10-bit mantissa) of 1/8..1/2.
        ElemType::Tf32 => (0..1u64 << 11)
            .flat_map(|m| {
                [124u64, 125]
                    .into_iter()
                    .map(move |e| ((m >> 10) << 31) | (e << 23) | ((m & 0x3ff) << 13))
            })
            .collect(),
        _ => {
            let bits = t.value_bits();
            (0..1u64 << bits)
                .filter(|&c| {
                    let x = t.decode(c).abs();
                    (0.125..=0.5).contains(&x)
                })
                .collect()
        }
    }
}

/// Fill `out` with elements of `t` packed little-endian into 32-bit words.
fn fill_words(t: ElemType, codes: &[u64], rng: &mut SplitMix64, out: &mut [u32]) {
    let bits = t.value_bits();
    for w in out.iter_mut() {
        if t == ElemType::B1 {
            *w = (rng.next_u64() as u32) | 1;
            continue;
        }
        let mut word = 0u64;
        for e in 0..32 / bits {
            word |= codes[rng.below(codes.len())] << (e * bits);
        }
        *w = word as u32;
    }
}

/// The input buffer of the bench kernels of `v` for up to `warpgroups` warpgroups per CTA:
/// the `rs` A registers of 128 threads (four k-step sets each), then the shared-memory image
/// (B, then one A tile per warpgroup for `ss`), as 32-bit words.
pub fn wg_inputs(v: &WgVariant, warpgroups: u32, seed: u64) -> Vec<u32> {
    let codes = element_codes(v.a);
    let b_codes = element_codes(v.b);
    let mut rng = SplitMix64::new(seed ^ 0x7767_6d6d_6100_0000);
    let regs = (THREADS * a_reg_words(v)) as usize;
    let b = (b_bytes(v) / 4) as usize;
    let a = (warpgroups * a_bytes(v) / 4) as usize;
    let mut out = vec![0u32; regs + b + a];
    fill_words(v.a, &codes, &mut rng, &mut out[..regs]);
    fill_words(v.b, &b_codes, &mut rng, &mut out[regs..regs + b]);
    fill_words(v.a, &codes, &mut rng, &mut out[regs + b..]);
    out
}

/// Whether every accumulator element in `words` (32-bit words of D registers) is finite.
pub fn accumulators_finite(v: &WgVariant, words: &[u32]) -> bool {
    let f = v.d_frag();
    if !f.elem.is_float() {
        return true;
    }
    words
        .iter()
        .all(|&w| (0..f.elems_per_reg).all(|e| f.elem.decode(f.extract(&[w], 0, e)).is_finite()))
}

// ---------------------------------------------------------------------------------------------
// The SASS guard
// ---------------------------------------------------------------------------------------------

/// Lines of a ptxas log that say it changed how wgmma run: C7515 ("wgmma.mma_async instructions
/// are serialized due to ..."), C7517 ("wgmma.wait_group is injected"), and any other
/// advisory naming wgmma.
pub fn wgmma_advisories(ptxas_log: &str) -> Vec<String> {
    ptxas_log
        .lines()
        .filter(|l| {
            let l = l.to_ascii_lowercase();
            l.contains("wgmma") || l.contains("serialized") || l.contains("(c751")
        })
        .map(|l| l.trim().to_string())
        .collect()
}

/// The SASS guard for a wgmma bench kernel of `v` with loop shape `shape` (see the module doc).
pub fn check_wg_loop(sass_text: &str, ptxas_log: &str, v: &WgVariant, shape: WgShape) -> SassCheck {
    let expected = shape.wgmma_per_iter();
    let mnemonic = sass_mnemonic(v);
    let sass = parse_sass(sass_text);
    let reject = |detail: String| SassCheck {
        status: CheckStatus::Rejected,
        detail,
        body_mmas: expected,
        tensor_per_mma: Some(1),
        expected: Some(expected),
        found: None,
        loop_opcodes: BTreeMap::new(),
        loop_sass: Vec::new(),
    };
    if sass.instrs.is_empty() {
        return reject("the disassembly has no instructions".into());
    }
    let lp = match timed_loop(&sass) {
        Ok(l) => l,
        Err(why) => return reject(why),
    };
    let found = lp.counts.tensor;
    let mut problems = Vec::new();
    if found != expected {
        problems.push(format!(
            "{found} tensor instructions per loop iteration, expected {expected} ({} group(s) × \
             {} wgmma)",
            shape.groups, shape.per_group
        ));
    }
    let foreign: Vec<&str> = lp
        .body
        .iter()
        .filter(|i| i.is_tensor() && !i.never_runs())
        .map(|i| i.opcode.as_str())
        .filter(|o| !o.starts_with(&format!("{mnemonic}.")) && *o != mnemonic)
        .collect();
    if !foreign.is_empty() {
        problems.push(format!(
            "tensor instructions other than {mnemonic} in the loop: {}",
            foreign.join(", ")
        ));
    }
    let depbars: Vec<&crate::probe::bench::SassInstr> = lp
        .body
        .iter()
        .filter(|i| i.opcode.starts_with("WARPGROUP.DEPBAR") && !i.never_runs())
        .collect();
    if depbars.len() as u32 != shape.groups {
        problems.push(format!(
            "{} WARPGROUP.DEPBAR per loop iteration, expected {} (one per commit group): ptxas \
             made wgmma wait for each other",
            depbars.len(),
            shape.groups
        ));
    }
    let want = format!("{:#x}", shape.in_flight);
    let wrong: Vec<String> = depbars
        .iter()
        .filter(|i| {
            i.operands
                .rsplit(',')
                .next()
                .is_none_or(|n| n.trim() != want)
        })
        .map(|i| i.text())
        .collect();
    if !wrong.is_empty() {
        problems.push(format!(
            "wait_group {} expected, the loop waits with {}",
            shape.in_flight,
            wrong.join("; ")
        ));
    }
    let spills = sass
        .instrs
        .iter()
        .filter(|i| matches!(i.base(), "LDL" | "STL") && !i.never_runs())
        .count();
    if spills > 0 {
        problems.push(format!(
            "{spills} local-memory accesses (register spills) in the kernel"
        ));
    }
    if lp.counts.other_branches > 0 || lp.counts.calls > 0 {
        problems.push(format!(
            "{} branches and {} calls inside the loop body: the count is not what one iteration \
             executes",
            lp.counts.other_branches, lp.counts.calls
        ));
    }
    let advisories = wgmma_advisories(ptxas_log);
    if !advisories.is_empty() {
        problems.push(format!("ptxas: {}", advisories.join(" / ")));
    }
    let (status, detail) = if problems.is_empty() {
        (
            CheckStatus::Verified,
            format!(
                "{found} × {mnemonic} per loop iteration, as expected ({} group(s) × {} wgmma), \
                 {} WARPGROUP.DEPBAR (wait_group {}), no spills, no ptxas wgmma advisory",
                shape.groups,
                shape.per_group,
                depbars.len(),
                shape.in_flight
            ),
        )
    } else {
        (CheckStatus::Rejected, problems.join("; "))
    };
    SassCheck {
        status,
        detail,
        body_mmas: expected,
        tensor_per_mma: Some(1),
        expected: Some(expected),
        found: Some(found),
        loop_opcodes: lp.counts.opcodes,
        loop_sass: lp.body.iter().map(|i| i.text()).collect(),
    }
}

// ---------------------------------------------------------------------------------------------
// Which variants
// ---------------------------------------------------------------------------------------------

/// The variants of one type set (`f32.bf16.bf16.ss`, or without the source for `ss`), every N
/// the catalog has, in N order; or why there are none.
pub fn type_set(spec: &str) -> Result<Vec<WgVariant>, String> {
    let spec = spec.trim().trim_start_matches('.');
    if spec.starts_with("sp.") {
        return Err(format!(
            "'{spec}': the sparse wgmma forms are not benchmarked yet (their metadata operand \
             needs its own input); name a dense type set such as f32.bf16.bf16.ss"
        ));
    }
    let with_src = if spec.ends_with(".ss") || spec.ends_with(".rs") {
        spec.to_string()
    } else {
        format!("{spec}.ss")
    };
    let found: Vec<WgVariant> = super::catalog()
        .into_iter()
        .filter(|v| !v.sparse)
        .filter(|v| {
            v.id()
                .split_once('.')
                .is_some_and(|(_, rest)| rest == with_src)
        })
        .collect();
    if found.is_empty() {
        return Err(format!(
            "'{spec}' is no wgmma type set; give the part of a catalog id after the shape, e.g. \
             f32.bf16.bf16.ss, f32.e4m3.e4m3.rs, s32.s8.s8.ss, satfinite.s32.u8.s8.ss"
        ));
    }
    Ok(found)
}

/// The dense variant a catalog id names, or why it cannot be benchmarked.
pub fn bench_variant(id: &str) -> Result<WgVariant, String> {
    let v = super::find(id).ok_or_else(|| {
        format!(
            "'{id}' is not a wgmma catalog id; ids look like m64n256k16.f32.bf16.bf16.ss or \
             m64n256k32.f32.e4m3.e4m3.rs"
        )
    })?;
    if v.sparse {
        let dense = v.id().trim_start_matches("sp.").replacen(
            &format!("k{}", v.k),
            &format!("k{}", v.k / 2),
            1,
        );
        return Err(format!(
            "{}: the sparse wgmma forms are not benchmarked yet (their metadata operand needs its \
             own input); its dense counterpart {dense} is",
            v.id()
        ));
    }
    Ok(v)
}

/// The variants `--wgmma ID` or `--wgmma-sweep TYPE` (restricted to the N in `ns` when there
/// are any) name, or why there are none.
pub fn select(id: Option<&str>, sweep: Option<&str>, ns: &[u32]) -> Result<Vec<WgVariant>, String> {
    if let Some(id) = id {
        return bench_variant(id).map(|v| vec![v]);
    }
    let spec = sweep.ok_or("name a wgmma variant or a type set")?;
    let all = type_set(spec)?;
    let have: Vec<u32> = all.iter().map(|v| v.n).collect();
    if let Some(n) = ns.iter().find(|n| !have.contains(n)) {
        let list: Vec<String> = have.iter().map(u32::to_string).collect();
        return Err(format!(
            "{spec} has no N = {n}; its N are {}",
            list.join(", ")
        ));
    }
    Ok(all
        .into_iter()
        .filter(|v| ns.is_empty() || ns.contains(&v.n))
        .collect())
}
