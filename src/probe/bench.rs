//! `fp4probe bench`: dependent-chain latency and independent-chain throughput of one `mma.sync`
//! variant, with the SASS of the timed loop checked before a figure is trusted.
//!
//! Pieces, in the order they run:
//! 1. [`bench_kernel`] fills `probes/bench.ptx` for a variant and a [`KernelShape`] (chains per
//!    warp, dependent steps per chain per iteration, A/B operand sets per chain).
//! 2. [`Toolchain`] assembles it to a cubin and disassembles it. On a GPU machine the system
//!    ptxas comes first (`FP4PROBE_CUDA_BIN`, `PATH`, `/usr/local/cuda/bin`: the one installed
//!    with the driver), the pinned one under `.tools/` only where there is no other.
//!    [`lowering`] reads what one `mma.sync` becomes from the single-mma fragment kernel
//!    (`crate::probe::ptx::fragment_kernel`, same variant, target and toolchain);
//!    [`check_loop`] finds the timed loop (the one backward branch between the two `%clock64`
//!    reads), follows the CALLs in it (ptxas emulates some variants in a subroutine), and
//!    requires UNROLL × CHAINS × (tensor instructions of one mma.sync) per iteration and no
//!    local memory. Where ptxas merged identical A·B products (lowerings that add C outside the
//!    tensor instruction, e.g. FP8 on sm_90: the first build finds fewer tensor instructions
//!    than expected), [`prepare`] rebuilds the kernel with distinct A/B for every `mma.sync` of
//!    the loop body ([`KernelShape::distinct`]) and records that it did.
//! 3. [`measure`] loads exactly the inspected cubin (`cuModuleLoadData`; what runs is what was
//!    checked). If the cubin cannot be loaded (a ptxas newer than the driver), the PTX goes
//!    through the driver's JIT instead and every figure of that kernel is rejected as
//!    unverified. It then calibrates the trip count per point (launches of about
//!    `target_ms`), runs `warmup` untimed and `runs` timed launches, and keeps median, min,
//!    max and n of each figure. Latency: one warp, one chain, one block; cycles per dependent
//!    mma.sync from `%clock64`. Throughput: SMs × `blocks_per_sm` blocks, W warps per SM, C
//!    chains per warp; TFLOP/s from CUDA-event time, flops per SM per clock from the longest
//!    warp's `%clock64` cycles (= TFLOP/s ÷ (SMs × measured clock), the measured clock being
//!    those cycles ÷ the event time; `%globaltimer` gives a second clock estimate). `%smid`
//!    shows where the warps ran.
//!
//! A point's figures are results only if its kernel's SASS check passed and every final
//! accumulator is finite; otherwise the point is `rejected` (the JSON keeps what was measured,
//! the CSV and the table leave the figures out). Points that cannot run (too many registers
//! for W warps on one SM) are `skipped`.
//!
//! Output: `<dir>/<variant>.bench.json` ([`BenchReport`], schema `fp4probe.bench/1`) and
//! `<dir>/bench.csv` ([`merge_csv`]: one row per throughput point, every variant benchmarked
//! into that folder; re-running a variant replaces its rows). The CSV's `latency_cycles` is the
//! point's own cycles per dependent mma.sync of one chain (its median warp); the dedicated
//! one-warp latency is `latency` in the JSON.
//!
//! Inputs ([`bench_inputs`]): every (warp, chain, lane) gets its own A, B and C words from a
//! hash, so no two chains of a launch compute the same thing. Values are non-zero, exactly
//! representable and small: A and B elements are ±0.25 or ±0.5 (±0.5 for e2m1, whose smallest
//! non-zero magnitude is 0.5; ±1 or ±2 for signed integers, 1 or 2 for unsigned; random
//! non-zero words for b1), C elements ±0.5 or ±1 (integers ±1, ±2), scale factors 1. Each chain
//! adds the same A·B to its accumulator every step, so the accumulator grows linearly until the
//! increment falls below half a unit in the last place of the accumulator and rounding absorbs
//! it: with |a·b| ≤ 0.25 and k ≤ 32 for the f16-accumulating variants the increment is at most
//! 8, which stalls an f16 accumulator below 2^15 (the largest finite f16 is 65504); f32 and f64
//! accumulators stall near 2^24 and 2^53 times the increment; s32 wraps (or saturates with
//! `.satfinite`). So no Inf or NaN ever appears, and the host checks the final accumulators
//! of the last launch to make sure ([`PointResult::finite`]).
//!
//! A and B do not change inside the loop, so conversions of A and B (F2FP for FP8 on sm_90)
//! may be hoisted out of it by ptxas: [`hoisted_note`] says so where it happened, and the
//! figure is then the tensor work plus what stayed in the loop.

use crate::device::BackendKind;
use crate::device::cuda::{CudaBackend, DeviceBuffer, KernelArg};
use crate::formats::ElemType;
use crate::isa::{Operand, OperandRegs, ScaleSelectors, Target, Variant};
use crate::probe::ptx::fragment_kernel;
use crate::provenance::Provenance;
use crate::tools::{self, AssembleError};
use anyhow::{Context, Result, anyhow, bail};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::fmt::Write;
use std::path::{Path, PathBuf};
use std::process::Command;

const BENCH_TEMPLATE: &str = include_str!("../../probes/bench.ptx");

/// The kernel entry point's name.
pub const BENCH_ENTRY: &str = "fp4probe_bench";

/// u64 words each warp writes to the timing buffer: cycles, nanoseconds, smid, 0.
pub const TIMING_WORDS: usize = 4;

// ---------------------------------------------------------------------------------------------
// PTX
// ---------------------------------------------------------------------------------------------

fn reg_type(v: &Variant, op: Operand) -> &'static str {
    let f = v.fragment(op);
    match f.elem.ptx() {
        "f64" => "f64",
        "f32" if matches!(op, Operand::C | Operand::D) => "f32",
        "s32" => "s32",
        _ => "b32",
    }
}

/// The shape of a bench kernel's loop body.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct KernelShape {
    /// Independent accumulator chains per warp.
    pub chains: u32,
    /// Dependent `mma.sync` per chain per loop iteration.
    pub unroll: u32,
    /// A/B operand sets per chain: 1 (every step of a chain reuses its A and B), or `unroll`
    /// (every `mma.sync` of the loop body has its own A and B; used where ptxas would otherwise
    /// merge identical A·B products, see [`KernelShape::distinct`]).
    pub sets_per_chain: u32,
}

impl KernelShape {
    pub fn new(chains: u32, unroll: u32) -> Self {
        KernelShape {
            chains,
            unroll,
            sets_per_chain: 1,
        }
    }

    /// Every `mma.sync` of the body gets its own A and B, with the body kept at `unroll` (or
    /// `chains`, if more) instructions so the register cost stays that of `unroll` operand sets.
    pub fn distinct(chains: u32, unroll: u32) -> Self {
        let u = (unroll / chains).max(1);
        KernelShape {
            chains,
            unroll: u,
            sets_per_chain: u,
        }
    }

    /// `mma.sync` per loop iteration.
    pub fn body_mmas(&self) -> u32 {
        self.chains * self.unroll
    }
}

/// 32-bit words of one A/B operand set per lane: A, B (f64 registers as two words), then one
/// scale word each for A and B where the variant is block-scaled.
pub fn set_words_per_lane(v: &Variant) -> usize {
    let w = |op| v.fragment(op).words_per_lane() as usize;
    w(Operand::A) + w(Operand::B) + if v.scale.is_some() { 2 } else { 0 }
}

/// 32-bit words per lane of one chain's input record: its A/B operand sets, then C. f64
/// operands are an even number of words, so their registers stay 8-byte aligned.
pub fn in_words_per_lane(v: &Variant, shape: KernelShape) -> usize {
    shape.sets_per_chain as usize * set_words_per_lane(v)
        + v.fragment(Operand::C).words_per_lane() as usize
}

/// 32-bit words per lane of one chain's output (D).
pub fn out_words_per_lane(v: &Variant) -> usize {
    v.fragment(Operand::D).words_per_lane() as usize
}

/// The target to assemble the bench kernel of `v` for on a device of compute capability `cc`:
/// the variant's own arch-specific target where it has one (sm_120a), else the device's plain
/// target (sm_90), so the SASS is the device's own.
pub fn bench_target(v: &Variant, cc: (u32, u32)) -> Target {
    if v.min_target.arch_specific {
        v.min_target
    } else {
        Target::sm(cc.0, cc.1)
    }
}

/// The bench kernel of `v` for `target` with the given loop shape.
pub fn bench_kernel(v: &Variant, target: Target, shape: KernelShape) -> String {
    let KernelShape {
        chains,
        unroll,
        sets_per_chain: sets,
    } = shape;
    assert!(
        chains >= 1 && unroll >= 1 && sets >= 1,
        "chains, unroll and operand sets must be at least 1"
    );
    let n_regs = |op: Operand| v.fragment(op).regs;
    let names = |p: String, n: u32| -> Vec<String> { (0..n).map(|i| format!("{p}_{i}")).collect() };
    // Chain c: accumulators %d<c>_<i> (C and D share registers: the instruction accumulates in
    // place); operand set s of chain c: %a<c>s<s>_<i>, %b<c>s<s>_<i>, %sa<c>s<s>, %sb<c>s<s>.
    let d_regs: Vec<Vec<String>> = (0..chains)
        .map(|c| names(format!("%d{c}"), n_regs(Operand::D)))
        .collect();
    let set_regs = |c: u32, s: u32| -> OperandRegs {
        OperandRegs {
            a: names(format!("%a{c}s{s}"), n_regs(Operand::A)),
            b: names(format!("%b{c}s{s}"), n_regs(Operand::B)),
            c: d_regs[c as usize].clone(),
            d: d_regs[c as usize].clone(),
            scale_a: format!("%sa{c}s{s}"),
            scale_b: format!("%sb{c}s{s}"),
        }
    };
    let all_sets: Vec<(u32, u32, OperandRegs)> = (0..chains)
        .flat_map(|c| (0..sets).map(move |s| (c, s)))
        .map(|(c, s)| (c, s, set_regs(c, s)))
        .collect();

    let mut decls = String::new();
    let join = |it: &mut dyn Iterator<Item = String>| it.collect::<Vec<_>>().join(", ");
    let a: String = join(&mut all_sets.iter().flat_map(|(_, _, r)| r.a.clone()));
    let b: String = join(&mut all_sets.iter().flat_map(|(_, _, r)| r.b.clone()));
    let d: String = join(&mut d_regs.iter().flatten().cloned());
    writeln!(decls, "    .reg .{} {a};", reg_type(v, Operand::A)).unwrap();
    writeln!(decls, "    .reg .{} {b};", reg_type(v, Operand::B)).unwrap();
    writeln!(decls, "    .reg .{} {d};", reg_type(v, Operand::D)).unwrap();
    if v.scale.is_some() {
        let sc = join(
            &mut all_sets
                .iter()
                .flat_map(|(_, _, r)| [r.scale_a.clone(), r.scale_b.clone()]),
        );
        writeln!(decls, "    .reg .b32 {sc};").unwrap();
    }

    let in_words = in_words_per_lane(v, shape) as u32;
    let set_bytes = set_words_per_lane(v) as u32 * 4;
    let mut loads = String::new();
    writeln!(loads, "    ld.param.u64 %ptr, [p_in];").unwrap();
    writeln!(loads, "    cvta.to.global.u64 %ptr, %ptr;").unwrap();
    writeln!(loads, "    mul.lo.u64 %off, %slot, {};", in_words * 4).unwrap();
    writeln!(loads, "    add.u64 %ptr, %ptr, %off;").unwrap();
    let mut load = |ty: &str, reg: &str, byte: u32| {
        writeln!(loads, "    ld.global.{ty} {reg}, [%ptr+{byte}];").unwrap();
    };
    for c in 0..chains {
        // Chain c of this lane starts c × 32 lanes further on.
        let record = c * 32 * in_words * 4;
        for (_, s, r) in all_sets.iter().filter(|(cc, _, _)| *cc == c) {
            let mut byte = record + s * set_bytes;
            for (op, list) in [(Operand::A, &r.a), (Operand::B, &r.b)] {
                for name in list {
                    load(reg_type(v, op), name, byte);
                    byte += v.fragment(op).reg_bits / 8;
                }
            }
            if v.scale.is_some() {
                load("b32", &r.scale_a, byte);
                load("b32", &r.scale_b, byte + 4);
            }
        }
        let mut byte = record + sets * set_bytes;
        for name in &d_regs[c as usize] {
            load(reg_type(v, Operand::C), name, byte);
            byte += v.fragment(Operand::C).reg_bits / 8;
        }
    }

    let mut body = String::new();
    for u in 0..unroll {
        for c in 0..chains {
            let r = &all_sets[(c * sets + u % sets) as usize].2;
            writeln!(body, "    {}", v.instruction(r, ScaleSelectors::default())).unwrap();
        }
    }

    let fd = v.fragment(Operand::D);
    let out_words = out_words_per_lane(v) as u32;
    let mut stores = String::new();
    writeln!(stores, "    ld.param.u64 %ptr, [p_out];").unwrap();
    writeln!(stores, "    cvta.to.global.u64 %ptr, %ptr;").unwrap();
    writeln!(stores, "    mul.lo.u64 %off, %slot, {};", out_words * 4).unwrap();
    writeln!(stores, "    add.u64 %ptr, %ptr, %off;").unwrap();
    for (c, regs) in d_regs.iter().enumerate() {
        let base = c as u32 * 32 * out_words * 4;
        for (i, name) in regs.iter().enumerate() {
            writeln!(
                stores,
                "    st.global.{} [%ptr+{}], {name};",
                reg_type(v, Operand::D),
                base + i as u32 * fd.reg_bits / 8
            )
            .unwrap();
        }
    }

    BENCH_TEMPLATE
        .replace("{{PTX_VERSION}}", &v.ptx_version())
        .replace("{{TARGET}}", &target.to_string())
        .replace("{{CHAINS_X32}}", &(chains * 32).to_string())
        .replace("{{CHAINS}}", &chains.to_string())
        .replace("{{UNROLL}}", &unroll.to_string())
        .replace("{{SETS}}", &sets.to_string())
        .replace("{{DECLS}}", decls.trim_end())
        .replace("{{LOADS}}", loads.trim_end())
        .replace("{{BODY}}", body.trim_end())
        .replace("{{STORES}}", stores.trim_end())
}

// ---------------------------------------------------------------------------------------------
// Inputs
// ---------------------------------------------------------------------------------------------

/// splitmix64: deterministic, no dependency.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
}

/// A and B element values (see the module doc): non-zero, exact, small.
pub fn ab_values(t: ElemType) -> &'static [f64] {
    match t {
        ElemType::E2m1 => &[0.5, -0.5],
        ElemType::S8 | ElemType::S4 => &[1.0, -1.0, 2.0, -2.0],
        ElemType::U8 | ElemType::U4 => &[1.0, 2.0],
        ElemType::B1 => &[1.0],
        _ => &[0.25, -0.25, 0.5, -0.5],
    }
}

/// Initial C element values.
pub fn c_values(t: ElemType) -> &'static [f64] {
    match t {
        ElemType::S32 => &[1.0, -1.0, 2.0, -2.0],
        _ => &[0.5, -0.5, 1.0, -1.0],
    }
}

/// Fill one lane's registers of `op` with values drawn from `values`.
fn fill(v: &Variant, op: Operand, values: &[u64], rng: &mut Rng, out: &mut [u32]) {
    let f = v.fragment(op);
    if f.elem == ElemType::B1 {
        // Random bits, never an all-zero word.
        for w in out.iter_mut() {
            *w = (rng.next() as u32) | 1;
        }
        return;
    }
    for reg in 0..f.regs {
        for elem in 0..f.elems_per_reg() {
            let code = values[(rng.next() % values.len() as u64) as usize];
            f.insert(out, reg, elem, code);
        }
    }
}

/// The bench kernel's input buffer for `records` (warp, chain) records of 32 lanes each, laid
/// out `[record][lane][word]` as [`bench_kernel`] reads it (record = warp × chains + chain):
/// every record draws its own values, so inputs differ between chains and between warps.
pub fn bench_inputs(v: &Variant, shape: KernelShape, records: usize, seed: u64) -> Vec<u32> {
    let codes = |t: ElemType, vals: &[f64]| -> Vec<u64> {
        vals.iter()
            .map(|&x| {
                t.encode_exact(x)
                    .unwrap_or_else(|| panic!("{x} is not exact in {t}"))
            })
            .collect()
    };
    let (fa, fb, fc) = (
        v.fragment(Operand::A),
        v.fragment(Operand::B),
        v.fragment(Operand::C),
    );
    let a_codes = codes(fa.elem, ab_values(fa.elem));
    let b_codes = codes(fb.elem, ab_values(fb.elem));
    let c_codes = codes(fc.elem, c_values(fc.elem));
    let scale_word = v
        .scale
        .map(|s| s.stype.one() as u32 * 0x0101_0101)
        .unwrap_or(0);
    let (wa, wb, wc) = (
        fa.words_per_lane() as usize,
        fb.words_per_lane() as usize,
        fc.words_per_lane() as usize,
    );
    let in_words = in_words_per_lane(v, shape);
    let mut out = vec![0u32; records * 32 * in_words];
    let mut rng = Rng(seed ^ 0x6265_6e63_6800_0000);
    for lane_words in out.chunks_mut(in_words) {
        let mut at = 0;
        for _ in 0..shape.sets_per_chain {
            fill(
                v,
                Operand::A,
                &a_codes,
                &mut rng,
                &mut lane_words[at..at + wa],
            );
            at += wa;
            fill(
                v,
                Operand::B,
                &b_codes,
                &mut rng,
                &mut lane_words[at..at + wb],
            );
            at += wb;
            if v.scale.is_some() {
                lane_words[at] = scale_word;
                lane_words[at + 1] = scale_word;
                at += 2;
            }
        }
        fill(
            v,
            Operand::C,
            &c_codes,
            &mut rng,
            &mut lane_words[at..at + wc],
        );
    }
    out
}

/// Whether every D element in `words` (`[record][lane][word]`) is finite.
pub fn all_finite(v: &Variant, words: &[u32]) -> bool {
    let f = v.fragment(Operand::D);
    if !f.elem.is_float() {
        return true;
    }
    let per_lane = f.words_per_lane() as usize;
    words.chunks(per_lane).all(|lane| {
        (0..f.regs).all(|r| {
            (0..f.elems_per_reg()).all(|e| f.elem.decode(f.extract(lane, r, e)).is_finite())
        })
    })
}

// ---------------------------------------------------------------------------------------------
// Toolchain: which ptxas, which disassembler
// ---------------------------------------------------------------------------------------------

/// Where the ptxas in use was found.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ToolSource {
    /// The directory named by `FP4PROBE_CUDA_BIN`.
    Env,
    /// `PATH` or `/usr/local/cuda/bin`: the CUDA installation of this machine.
    System,
    /// The pinned pip wheels (`.ci/install-cuda-tools`): under `.tools/`, or in the cache
    /// folder (`crate::locate::pinned_roots`).
    Pinned,
}

/// The ptxas that assembles bench kernels and the disassembler that reads them back.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Toolchain {
    pub ptxas: PathBuf,
    /// cuobjdump (preferred) or nvdisasm; `None` where neither exists.
    pub disassembler: Option<PathBuf>,
    /// `13.0.88`, as `ptxas --version` prints it.
    pub version: Option<String>,
    pub source: ToolSource,
}

fn executable_in(dir: &Path, name: &str) -> Option<PathBuf> {
    let p = dir.join(format!("{name}{}", std::env::consts::EXE_SUFFIX));
    let meta = std::fs::metadata(&p).ok()?;
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        (meta.is_file() && meta.permissions().mode() & 0o111 != 0).then_some(p)
    }
    #[cfg(not(unix))]
    {
        meta.is_file().then_some(p)
    }
}

fn ptxas_version_of(ptxas: &Path) -> Option<String> {
    let out = Command::new(ptxas).arg("--version").output().ok()?;
    let text = String::from_utf8_lossy(&out.stdout);
    let line = text.lines().find(|l| l.contains("release"))?;
    line.split(|c: char| c == ',' || c.is_whitespace())
        .find_map(|w| w.strip_prefix('V'))
        .filter(|v| v.starts_with(|c: char| c.is_ascii_digit()))
        .map(str::to_string)
        .or_else(|| Some(line.trim().to_string()))
}

impl Toolchain {
    /// The toolchain around a given ptxas: cuobjdump from the same directory if there is one,
    /// else wherever `tools::find_tool` finds cuobjdump, else nvdisasm.
    pub fn at(ptxas: PathBuf, source: ToolSource) -> Self {
        let dir = ptxas.parent().map(Path::to_path_buf).unwrap_or_default();
        let disassembler = executable_in(&dir, "cuobjdump")
            .or_else(|| tools::find_tool("cuobjdump"))
            .or_else(|| executable_in(&dir, "nvdisasm"))
            .or_else(|| tools::find_tool("nvdisasm"));
        let version = ptxas_version_of(&ptxas);
        Toolchain {
            ptxas,
            disassembler,
            version,
            source,
        }
    }

    /// For a run on the device: the system's ptxas first (the one installed with, and so
    /// matching, the driver): `FP4PROBE_CUDA_BIN`, then `PATH`, then `/usr/local/cuda/bin`;
    /// the pinned one under `.tools/` only where there is no other.
    pub fn for_device() -> Option<Self> {
        let env = std::env::var_os(tools::CUDA_BIN_ENV)
            .filter(|d| !d.is_empty())
            .map(PathBuf::from);
        if let Some(p) = env.as_deref().and_then(|d| executable_in(d, "ptxas")) {
            return Some(Self::at(p, ToolSource::Env));
        }
        let dirs = tools::search_dirs();
        let system = dirs
            .iter()
            .filter(|d| Some(d.as_path()) != env.as_deref() && !crate::locate::is_pinned(d))
            .find_map(|d| executable_in(d, "ptxas"));
        if let Some(p) = system {
            return Some(Self::at(p, ToolSource::System));
        }
        dirs.iter()
            .filter(|d| crate::locate::is_pinned(d))
            .find_map(|d| executable_in(d, "ptxas"))
            .map(|p| Self::at(p, ToolSource::Pinned))
    }

    /// Offline (tests, CI, `--sass-only`): the order of `tools::find_tool`, pinned first.
    pub fn offline() -> Option<Self> {
        let p = tools::find_tool("ptxas")?;
        let source = if std::env::var_os(tools::CUDA_BIN_ENV)
            .is_some_and(|d| !d.is_empty() && p.starts_with(&d))
        {
            ToolSource::Env
        } else if p.parent().is_some_and(crate::locate::is_pinned) {
            ToolSource::Pinned
        } else {
            ToolSource::System
        };
        Some(Self::at(p, source))
    }

    /// (major, minor) of the ptxas version.
    pub fn version_pair(&self) -> Option<(u32, u32)> {
        let v = self.version.as_deref()?;
        let mut it = v.split('.');
        Some((it.next()?.parse().ok()?, it.next()?.parse().ok()?))
    }

    /// `ptxas -arch=<target>`: the cubin, or everything ptxas printed.
    pub fn assemble(&self, ptx: &str, target: Target) -> Result<Vec<u8>, AssembleError> {
        tools::assemble_with(&self.ptxas, ptx, target)
    }

    /// The SASS of a cubin (`cuobjdump --dump-sass`, or `nvdisasm`).
    pub fn sass(&self, cubin: &[u8]) -> Result<String> {
        let tool = self.disassembler.as_ref().ok_or_else(|| {
            anyhow!(
                "neither cuobjdump nor nvdisasm found ({})",
                tools::SEARCH_ORDER
            )
        })?;
        tools::disassemble_with(tool, cubin)
    }

    /// "ptxas 13.0.88 (system: /usr/local/cuda/bin/ptxas)".
    pub fn describe(&self) -> String {
        format!(
            "ptxas {} ({}: {})",
            self.version.as_deref().unwrap_or("of unknown version"),
            self.source.name(),
            self.ptxas.display()
        )
    }
}

impl ToolSource {
    pub fn name(self) -> &'static str {
        match self {
            ToolSource::Env => tools::CUDA_BIN_ENV,
            ToolSource::System => "system",
            ToolSource::Pinned => "pinned",
        }
    }
}

// ---------------------------------------------------------------------------------------------
// SASS: parsing, the timed loop, the lowering of one mma.sync
// ---------------------------------------------------------------------------------------------

/// One SASS instruction as cuobjdump or nvdisasm prints it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SassInstr {
    pub addr: u64,
    /// `@!P0` and the like.
    pub pred: Option<String>,
    /// Mnemonic with its modifiers: `HMMA.16816.F32.BF16`.
    pub opcode: String,
    pub operands: String,
}

impl SassInstr {
    /// The mnemonic without modifiers: `HMMA`.
    pub fn base(&self) -> &str {
        self.opcode.split('.').next().unwrap_or("")
    }
    pub fn is_tensor(&self) -> bool {
        is_tensor_opcode(&self.opcode)
    }
    /// Predicated on the constant false predicate (`@!PT`, `@!UPT`): ptxas's padding, never
    /// executed.
    pub fn never_runs(&self) -> bool {
        matches!(self.pred.as_deref(), Some("@!PT" | "@!UPT"))
    }
    /// `/*0270*/ HMMA.16816.F32.BF16 R12, R4, R20, R12 ;`
    pub fn text(&self) -> String {
        let pred = self
            .pred
            .as_deref()
            .map(|p| format!("{p} "))
            .unwrap_or_default();
        let ops = if self.operands.is_empty() {
            String::new()
        } else {
            format!(" {}", self.operands)
        };
        format!("/*{:04x}*/ {pred}{}{ops} ;", self.addr, self.opcode)
    }
}

/// Tensor-core instructions: every mnemonic ending in `MMA` (HMMA, IMMA, DMMA, BMMA, QMMA,
/// OMMA, HGMMA, ...).
pub fn is_tensor_opcode(opcode: &str) -> bool {
    let base = opcode.split('.').next().unwrap_or("");
    base.len() > 3 && base.ends_with("MMA")
}

/// A SASS listing: instructions in address order and the labels nvdisasm prints.
#[derive(Clone, Debug, Default)]
pub struct Sass {
    pub instrs: Vec<SassInstr>,
    labels: BTreeMap<String, u64>,
}

/// Parse `cuobjdump --dump-sass` or `nvdisasm` output (one function per cubin, subroutines
/// included).
pub fn parse_sass(text: &str) -> Sass {
    let mut sass = Sass::default();
    let mut pending: Vec<String> = Vec::new();
    for line in text.lines() {
        let t = line.trim();
        if let Some(label) = t.strip_suffix(':')
            && !label.is_empty()
            && !label.contains(char::is_whitespace)
        {
            pending.push(label.to_string());
            continue;
        }
        let Some(rest) = t.strip_prefix("/*") else {
            continue;
        };
        let Some((addr, rest)) = rest.split_once("*/") else {
            continue;
        };
        let Ok(addr) = u64::from_str_radix(addr.trim(), 16) else {
            continue;
        };
        // Drop the encoding comment and everything from the terminating ';'.
        let rest = rest.split("/*").next().unwrap_or("");
        let Some((body, _)) = rest.split_once(';') else {
            continue;
        };
        let mut words = body.trim();
        let mut pred = None;
        if words.starts_with('@') {
            let (p, r) = words.split_once(char::is_whitespace).unwrap_or((words, ""));
            pred = Some(p.to_string());
            words = r.trim_start();
        }
        let (opcode, operands) = words
            .split_once(char::is_whitespace)
            .map(|(o, r)| (o, r.trim()))
            .unwrap_or((words, ""));
        if opcode.is_empty() || !opcode.starts_with(|c: char| c.is_ascii_uppercase()) {
            continue;
        }
        for l in pending.drain(..) {
            sass.labels.insert(l, addr);
        }
        sass.instrs.push(SassInstr {
            addr,
            pred,
            opcode: opcode.to_string(),
            operands: operands.to_string(),
        });
    }
    sass
}

/// What a stretch of SASS executes, calls followed.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Counts {
    /// Opcode (with modifiers) → how many times it executes.
    pub opcodes: BTreeMap<String, u32>,
    pub tensor: u32,
    /// CALLs followed (subroutines ptxas emits, e.g. to emulate an mma.sync).
    pub calls: u32,
    /// Local-memory accesses (LDL/STL: register spills).
    pub local_mem: u32,
    /// Branches other than the loop's own back edge: the count is then a static one.
    pub other_branches: u32,
}

impl Counts {
    fn add(&mut self, i: &SassInstr) {
        if i.never_runs() {
            return;
        }
        *self.opcodes.entry(i.opcode.clone()).or_default() += 1;
        if i.is_tensor() {
            self.tensor += 1;
        }
        if matches!(i.base(), "LDL" | "STL") {
            self.local_mem += 1;
        }
    }
    fn merge(&mut self, o: &Counts) {
        for (k, n) in &o.opcodes {
            *self.opcodes.entry(k.clone()).or_default() += n;
        }
        self.tensor += o.tensor;
        self.calls += o.calls;
        self.local_mem += o.local_mem;
        self.other_branches += o.other_branches;
    }
}

impl Sass {
    /// The address a branch or call goes to: `0x270`, or a label `` `(.L_x_0) ``.
    pub fn target(&self, i: &SassInstr) -> Option<u64> {
        let ops = i.operands.as_str();
        if let Some(start) = ops.find("`(") {
            let name = ops[start + 2..].split(')').next()?;
            return self.labels.get(name).copied();
        }
        ops.split(|c: char| c == ',' || c.is_whitespace())
            .find_map(|w| w.strip_prefix("0x"))
            .and_then(|h| u64::from_str_radix(h, 16).ok())
    }

    fn index_of(&self, addr: u64) -> Option<usize> {
        self.instrs.binary_search_by_key(&addr, |i| i.addr).ok()
    }

    /// Walk from instruction `from` up to and including the first instruction for which
    /// `stop` holds, following CALLs into their subroutines (up to RET).
    fn walk(&self, from: usize, stop: &dyn Fn(&SassInstr) -> bool, depth: u32) -> Counts {
        let mut c = Counts::default();
        for i in &self.instrs[from..] {
            c.add(i);
            if stop(i) {
                break;
            }
            match i.base() {
                "CALL" if depth < 8 => {
                    c.calls += 1;
                    if let Some(at) = self.target(i).and_then(|a| self.index_of(a)) {
                        let sub = self.walk(at, &|x| x.base() == "RET", depth + 1);
                        c.merge(&sub);
                    }
                }
                "BRA" | "BRX" | "JMP" | "JMX" => c.other_branches += 1,
                _ => {}
            }
        }
        c
    }

    /// What one run of the kernel executes from its entry to the first unconditional EXIT
    /// (for the single-mma fragment kernel: exactly one mma.sync's worth).
    pub fn straight_line(&self) -> Counts {
        if self.instrs.is_empty() {
            return Counts::default();
        }
        self.walk(0, &|i| i.base() == "EXIT" && i.pred.is_none(), 0)
    }
}

/// The timed loop of a bench kernel: the one backward branch between the two `%clock64` reads.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TimedLoop {
    /// Address of the loop's first instruction (the back edge's target).
    pub start: u64,
    /// Address of the back edge.
    pub end: u64,
    /// One iteration, subroutines followed.
    pub counts: Counts,
    /// The loop's own instructions (not those of the subroutines it calls).
    pub body: Vec<SassInstr>,
}

/// Find the timed loop in a bench kernel's SASS.
pub fn timed_loop(sass: &Sass) -> Result<TimedLoop, String> {
    let clocks: Vec<u64> = sass
        .instrs
        .iter()
        .filter(|i| i.operands.contains("SR_CLOCKLO"))
        .map(|i| i.addr)
        .collect();
    if clocks.len() < 2 {
        return Err(format!(
            "expected two %clock64 reads (SR_CLOCKLO) around the loop, found {}",
            clocks.len()
        ));
    }
    let (c0, c1) = (clocks[0], clocks[1]);
    let back: Vec<(&SassInstr, u64)> = sass
        .instrs
        .iter()
        .filter(|i| i.addr > c0 && i.addr < c1 && i.base() == "BRA")
        .filter_map(|i| sass.target(i).map(|t| (i, t)))
        .filter(|(i, t)| *t < i.addr)
        .collect();
    let (edge, start) = match back.as_slice() {
        [one] => *one,
        [] => {
            return Err(
                "no backward branch between the clock reads: ptxas removed or unrolled the loop"
                    .into(),
            );
        }
        many => {
            return Err(format!(
                "{} backward branches between the clock reads: the loop was restructured",
                many.len()
            ));
        }
    };
    let from = sass
        .index_of(start)
        .ok_or_else(|| format!("the loop's branch target {start:#x} is not an instruction"))?;
    let end = edge.addr;
    // The back edge is the walk's stop, so it is not among `other_branches`.
    let counts = sass.walk(from, &|i| i.addr == end, 0);
    let body = sass
        .instrs
        .iter()
        .filter(|i| i.addr >= start && i.addr <= end)
        .cloned()
        .collect();
    Ok(TimedLoop {
        start,
        end,
        counts,
        body,
    })
}

/// What one `mma.sync` of a variant becomes on a target, read from the SASS of the single-mma
/// fragment kernel (`crate::probe::ptx::fragment_kernel`) assembled by the same toolchain.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Lowering {
    /// Tensor-core instructions one `mma.sync` executes.
    pub tensor_per_mma: u32,
    /// Those instructions, in order.
    pub tensor_ops: Vec<String>,
    /// Format conversions it executes (F2FP, F2F, I2F, I2I, ...), by opcode.
    pub conversions: BTreeMap<String, u32>,
    /// The first tensor instruction accumulates onto RZ: C is added by other instructions
    /// (FADD, HADD2, IADD3), so a chain through C runs through those, not the tensor core.
    pub c_added_outside: bool,
    /// The mma.sync is a call to a subroutine ptxas emits (an emulation).
    pub via_call: bool,
    /// One line: "2 × HMMA.16816.F32 + 12 × F2FP.F16.E4M3.UNPACK_B; C added outside ...".
    pub summary: String,
}

fn is_conversion(base: &str) -> bool {
    matches!(
        base,
        "F2FP" | "F2F" | "I2F" | "F2I" | "I2I" | "I2FP" | "F2IP" | "HADD2.F32"
    )
}

/// The lowering of one `mma.sync`, from the fragment kernel's SASS.
pub fn lowering(fragment_sass: &str) -> Result<Lowering, String> {
    let sass = parse_sass(fragment_sass);
    if sass.instrs.is_empty() {
        return Err("the disassembly of the fragment kernel has no instructions".into());
    }
    let counts = sass.straight_line();
    if counts.tensor == 0 {
        return Err("the fragment kernel's SASS has no tensor instruction".into());
    }
    // Tensor ops in execution order (calls followed).
    let mut ops: Vec<&SassInstr> = Vec::new();
    fn collect<'a>(
        sass: &'a Sass,
        from: usize,
        ret: bool,
        depth: u32,
        out: &mut Vec<&'a SassInstr>,
    ) {
        for i in &sass.instrs[from..] {
            if i.is_tensor() && !i.never_runs() {
                out.push(i);
            }
            if (ret && i.base() == "RET") || (!ret && i.base() == "EXIT" && i.pred.is_none()) {
                break;
            }
            if i.base() == "CALL"
                && depth < 8
                && let Some(at) = sass.target(i).and_then(|a| sass.index_of(a))
            {
                collect(sass, at, true, depth + 1, out);
            }
        }
    }
    collect(&sass, 0, false, 0, &mut ops);
    let c_added_outside = ops.first().is_some_and(|i| {
        i.operands
            .rsplit(',')
            .next()
            .is_some_and(|last| last.trim() == "RZ")
    });
    let conversions: BTreeMap<String, u32> = counts
        .opcodes
        .iter()
        .filter(|(k, _)| is_conversion(k.split('.').next().unwrap_or("")))
        .map(|(k, n)| (k.clone(), *n))
        .collect();
    let mut tensor_hist: BTreeMap<String, u32> = BTreeMap::new();
    for i in &ops {
        *tensor_hist.entry(i.opcode.clone()).or_default() += 1;
    }
    let mut parts: Vec<String> = tensor_hist
        .iter()
        .chain(conversions.iter())
        .map(|(k, n)| format!("{n} × {k}"))
        .collect();
    if parts.is_empty() {
        parts.push("nothing".into());
    }
    let mut summary = parts.join(" + ");
    if counts.calls > 0 {
        summary += " (in a subroutine ptxas calls)";
    }
    if c_added_outside {
        summary += "; C is added outside the tensor instruction";
    }
    Ok(Lowering {
        tensor_per_mma: counts.tensor,
        tensor_ops: ops.iter().map(|i| i.opcode.clone()).collect(),
        conversions,
        c_added_outside,
        via_call: counts.calls > 0,
        summary,
    })
}

/// Outcome of the SASS guard for one kernel.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum CheckStatus {
    /// The timed loop executes exactly the expected tensor instructions, without spills.
    Verified,
    /// It does not: the figure is rejected.
    Rejected,
    /// What ran could not be inspected (PTX JIT, no ptxas or disassembler): figure rejected.
    Unverified,
}

/// The SASS guard's verdict on one bench kernel.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SassCheck {
    pub status: CheckStatus,
    /// Why, in words ("16 tensor instructions per iteration, as expected (8 mma.sync × 2)").
    pub detail: String,
    /// mma.sync per loop iteration (UNROLL × CHAINS).
    pub body_mmas: u32,
    pub tensor_per_mma: Option<u32>,
    pub expected: Option<u32>,
    pub found: Option<u32>,
    /// One iteration of the timed loop, by opcode, subroutines followed.
    pub loop_opcodes: BTreeMap<String, u32>,
    /// The loop's SASS, as disassembled.
    pub loop_sass: Vec<String>,
}

impl SassCheck {
    pub fn unverified(body_mmas: u32, why: impl Into<String>) -> Self {
        SassCheck {
            status: CheckStatus::Unverified,
            detail: why.into(),
            body_mmas,
            tensor_per_mma: None,
            expected: None,
            found: None,
            loop_opcodes: BTreeMap::new(),
            loop_sass: Vec::new(),
        }
    }

    /// The CSV's `sass_check` cell: `verified`, `rejected: ...`, `unverified: ...`.
    pub fn cell(&self) -> String {
        match self.status {
            CheckStatus::Verified => "verified".into(),
            CheckStatus::Rejected => format!("rejected: {}", self.detail),
            CheckStatus::Unverified => format!("unverified: {}; figure rejected", self.detail),
        }
    }
}

/// Check a bench kernel's SASS: the timed loop must execute exactly
/// `body_mmas × tensor_per_mma` tensor instructions per iteration and touch no local memory.
pub fn check_loop(bench_sass: &str, tensor_per_mma: u32, body_mmas: u32) -> SassCheck {
    let expected = body_mmas * tensor_per_mma;
    let sass = parse_sass(bench_sass);
    let lp = match timed_loop(&sass) {
        Ok(l) => l,
        Err(why) => {
            return SassCheck {
                status: CheckStatus::Rejected,
                detail: why,
                body_mmas,
                tensor_per_mma: Some(tensor_per_mma),
                expected: Some(expected),
                found: None,
                loop_opcodes: BTreeMap::new(),
                loop_sass: Vec::new(),
            };
        }
    };
    let found = lp.counts.tensor;
    let mut problems = Vec::new();
    if found != expected {
        problems.push(format!(
            "{found} tensor instructions per loop iteration, expected {expected} ({body_mmas} \
             mma.sync × {tensor_per_mma}){}",
            if found < expected {
                ": ptxas merged or removed some"
            } else {
                ""
            }
        ));
    }
    if lp.counts.local_mem > 0 {
        problems.push(format!(
            "{} local-memory accesses (register spills) in the timed loop",
            lp.counts.local_mem
        ));
    }
    if lp.counts.other_branches > 0 {
        problems.push(format!(
            "{} branches inside the loop body: the count is not what one iteration executes",
            lp.counts.other_branches
        ));
    }
    let (status, detail) = if problems.is_empty() {
        (
            CheckStatus::Verified,
            format!(
                "{found} tensor instructions per loop iteration, as expected ({body_mmas} \
                 mma.sync × {tensor_per_mma})"
            ),
        )
    } else {
        (CheckStatus::Rejected, problems.join("; "))
    };
    SassCheck {
        status,
        detail,
        body_mmas,
        tensor_per_mma: Some(tensor_per_mma),
        expected: Some(expected),
        found: Some(found),
        loop_opcodes: lp.counts.opcodes,
        loop_sass: lp.body.iter().map(SassInstr::text).collect(),
    }
}

// ---------------------------------------------------------------------------------------------
// Preparation (CPU only): PTX, cubin, lowering, SASS check per chain count
// ---------------------------------------------------------------------------------------------

/// One bench kernel, assembled and checked.
#[derive(Clone, Debug)]
pub struct PreparedKernel {
    pub shape: KernelShape,
    pub ptx: String,
    /// The cubin the check read; `None` where there was no ptxas or it refused the module.
    pub cubin: Option<Vec<u8>>,
    pub check: SassCheck,
    /// Set when the first build (one A/B set per chain) was rejected because ptxas merged
    /// identical A·B products, and this kernel is the rebuild with distinct A/B per mma.sync.
    pub rebuilt: Option<String>,
}

/// Everything about one variant that needs no GPU.
#[derive(Clone, Debug)]
pub struct Prepared {
    pub variant: Variant,
    pub target: Target,
    pub toolchain: Option<Toolchain>,
    pub lowering: Result<Lowering, String>,
    /// One per chain count, in the order asked (chain count 1 always included: the latency).
    pub kernels: Vec<PreparedKernel>,
}

impl Prepared {
    pub fn kernel(&self, chains: u32) -> Option<&PreparedKernel> {
        self.kernels.iter().find(|k| k.shape.chains == chains)
    }
}

fn build(
    v: &Variant,
    target: Target,
    tc: Option<&Toolchain>,
    per_mma: &Result<Lowering, String>,
    shape: KernelShape,
) -> PreparedKernel {
    let ptx = bench_kernel(v, target, shape);
    let body = shape.body_mmas();
    let Some(tc) = tc else {
        return PreparedKernel {
            shape,
            ptx,
            cubin: None,
            check: SassCheck::unverified(body, "no ptxas to assemble the kernel with"),
            rebuilt: None,
        };
    };
    let cubin = match tc.assemble(&ptx, target) {
        Ok(c) => c,
        Err(e) => {
            return PreparedKernel {
                shape,
                ptx,
                cubin: None,
                check: SassCheck::unverified(body, format!("{} failed: {e}", tc.describe())),
                rebuilt: None,
            };
        }
    };
    let check = match (per_mma, tc.sass(&cubin)) {
        (Err(why), _) => SassCheck::unverified(
            body,
            format!("the lowering of one mma.sync is unknown ({why})"),
        ),
        (_, Err(e)) => SassCheck::unverified(body, format!("no SASS: {e:#}")),
        (Ok(l), Ok(text)) => check_loop(&text, l.tensor_per_mma, body),
    };
    PreparedKernel {
        shape,
        ptx,
        cubin: Some(cubin),
        check,
        rebuilt: None,
    }
}

/// Assemble and check the bench kernels of `v` for `target`, one per chain count (plus chain
/// count 1 for the latency). Where ptxas merges identical A·B products (lowerings that add C
/// outside the tensor instruction, e.g. FP8 on sm_90), the kernel is rebuilt with distinct
/// A/B registers for every mma.sync of the loop body ([`KernelShape::distinct`]).
pub fn prepare(
    v: &Variant,
    target: Target,
    tc: Option<&Toolchain>,
    chains: &[u32],
    unroll: u32,
) -> Prepared {
    let per_mma: Result<Lowering, String> = match tc {
        None => Err("no ptxas".into()),
        Some(tc) => tc
            .assemble(
                &fragment_kernel(v, target, ScaleSelectors::default()),
                target,
            )
            .map_err(|e| format!("assembling the fragment kernel: {e}"))
            .and_then(|cubin| {
                tc.sass(&cubin)
                    .map_err(|e| format!("disassembling the fragment kernel: {e:#}"))
            })
            .and_then(|text| lowering(&text)),
    };
    let mut counts: Vec<u32> = vec![1];
    for &c in chains {
        if !counts.contains(&c) {
            counts.push(c);
        }
    }
    let kernels = counts
        .iter()
        .map(|&c| {
            let first = build(v, target, tc, &per_mma, KernelShape::new(c, unroll));
            let merged = first.check.status == CheckStatus::Rejected
                && first
                    .check
                    .found
                    .zip(first.check.expected)
                    .is_some_and(|(f, e)| f < e);
            if !merged {
                return first;
            }
            let mut second = build(v, target, tc, &per_mma, KernelShape::distinct(c, unroll));
            second.rebuilt = Some(format!(
                "with one A/B set per chain ({c} chains × {unroll} steps) the check failed: {}; \
                 rebuilt with distinct A/B for each of the {} mma.sync of the loop body",
                first.check.detail,
                second.shape.body_mmas()
            ));
            second
        })
        .collect();
    Prepared {
        variant: v.clone(),
        target,
        toolchain: tc.cloned(),
        lowering: per_mma,
        kernels,
    }
}

// ---------------------------------------------------------------------------------------------
// Measurement (GPU)
// ---------------------------------------------------------------------------------------------

/// JSON schema id of a bench report.
pub const BENCH_SCHEMA: &str = "fp4probe.bench/1";

/// Most loop iterations one launch runs (the kernel's counter is 32-bit).
pub const MAX_ITERS: u64 = 1 << 30;

/// What to sweep and how to time it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Settings {
    pub warps_per_sm: Vec<u32>,
    pub chains: Vec<u32>,
    /// Dependent mma.sync per chain per loop iteration (before any distinct-operand rebuild).
    pub unroll: u32,
    /// Blocks per SM: the grid is SMs × this, each block warps_per_sm / this warps.
    pub blocks_per_sm: u32,
    /// Untimed launches before the timed ones.
    pub warmup: u32,
    /// Timed launches per point (the figures are their median, min and max).
    pub runs: u32,
    /// Aim for launches of about this many milliseconds (the trip count is calibrated).
    pub target_ms: f64,
    pub seed: u64,
    /// Before the first point, keep the whole GPU busy this long so the clocks have ramped up
    /// (0: no pre-heat; the CLI pre-heats before the first variant only).
    pub preheat_ms: f64,
}

impl Default for Settings {
    fn default() -> Self {
        Settings {
            warps_per_sm: vec![1, 2, 4, 8, 16],
            chains: vec![1, 2, 4, 8],
            unroll: 8,
            blocks_per_sm: 1,
            warmup: 2,
            runs: 5,
            target_ms: 3.0,
            seed: 1,
            preheat_ms: 500.0,
        }
    }
}

/// Median, min, max and count of a set of measurements.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct Stat {
    pub median: f64,
    pub min: f64,
    pub max: f64,
    pub n: usize,
}

impl Stat {
    /// `None` for an empty set. The median of an even count is the mean of the middle two.
    pub fn of(xs: &[f64]) -> Option<Stat> {
        if xs.is_empty() {
            return None;
        }
        let mut s = xs.to_vec();
        s.sort_by(f64::total_cmp);
        let n = s.len();
        let median = if n % 2 == 1 {
            s[n / 2]
        } else {
            (s[n / 2 - 1] + s[n / 2]) / 2.0
        };
        Some(Stat {
            median,
            min: s[0],
            max: s[n - 1],
            n,
        })
    }
}

fn median(xs: &[f64]) -> f64 {
    Stat::of(xs).map_or(f64::NAN, |s| s.median)
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum PointStatus {
    /// Measured, and the SASS guard and the output checks passed: the figures are results.
    Accepted,
    /// Measured, but the figures are not results (see `reason`).
    Rejected,
    /// Not run (see `reason`).
    Skipped,
}

/// Where the warps of a launch ran, from `%smid`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Placement {
    pub sms_used: u32,
    pub min_warps_per_sm: u32,
    pub max_warps_per_sm: u32,
    /// Every SM ran exactly warps_per_sm warps.
    pub as_intended: bool,
}

/// One measured configuration.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct PointResult {
    /// `latency`: one warp, one chain, one block on one SM; `throughput`: the whole GPU.
    pub kind: String,
    pub warps_per_sm: u32,
    pub chains: u32,
    pub grid: u32,
    pub threads_per_block: u32,
    pub unroll: u32,
    pub sets_per_chain: u32,
    pub iters: u64,
    pub mma_per_launch: u64,
    pub registers_per_thread: Option<u32>,
    pub status: PointStatus,
    pub reason: Option<String>,
    /// The kernel's SASS check, as the CSV writes it.
    pub sass_check: String,
    /// Event time of a launch.
    pub time_ms: Option<Stat>,
    pub tflops: Option<Stat>,
    /// flops ÷ (SMs × the longest warp's %clock64 cycles) = TFLOP/s ÷ (SMs × measured clock).
    pub flops_per_sm_per_clock: Option<Stat>,
    /// The longest warp's cycles ÷ the event time.
    pub clock_mhz: Option<Stat>,
    /// Per warp cycles ÷ %globaltimer nanoseconds (median over warps).
    pub clock_globaltimer_mhz: Option<Stat>,
    /// Median warp's cycles ÷ (iterations × unroll): cycles between dependent mma.sync of one
    /// chain. With one warp and one chain, the latency.
    pub cycles_per_mma_per_chain: Option<Stat>,
    pub placement: Option<Placement>,
    /// Every final accumulator of the last launch is finite.
    pub finite: Option<bool>,
    /// Something worth knowing that does not reject the figure (uneven placement).
    pub note: Option<String>,
}

impl PointResult {
    fn skeleton(
        kind: &str,
        warps: u32,
        chains: u32,
        k: &PreparedKernel,
        check: &SassCheck,
    ) -> Self {
        PointResult {
            kind: kind.into(),
            warps_per_sm: warps,
            chains,
            grid: 0,
            threads_per_block: 0,
            unroll: k.shape.unroll,
            sets_per_chain: k.shape.sets_per_chain,
            iters: 0,
            mma_per_launch: 0,
            registers_per_thread: None,
            status: PointStatus::Skipped,
            reason: None,
            sass_check: check.cell(),
            time_ms: None,
            tflops: None,
            flops_per_sm_per_clock: None,
            clock_mhz: None,
            clock_globaltimer_mhz: None,
            cycles_per_mma_per_chain: None,
            placement: None,
            finite: None,
            note: None,
        }
    }
}

/// The device as the bench saw it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct BenchDevice {
    pub name: String,
    pub compute_capability: String,
    pub driver: Option<String>,
    pub sm_count: u32,
    /// `CU_DEVICE_ATTRIBUTE_CLOCK_RATE`: the peak SM clock the driver reports (`None` where
    /// the driver no longer answers it).
    pub clock_rate_attribute_mhz: Option<f64>,
    /// The clock kernels actually ran at: the median clocks of the accepted throughput points.
    pub measured_clock_mhz: Option<Stat>,
}

/// One kernel as it ran.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct KernelRecord {
    pub chains: u32,
    pub unroll: u32,
    pub sets_per_chain: u32,
    /// `cubin` (the inspected SASS ran) or `ptx-jit` (the driver compiled the PTX: unverified).
    pub loaded: String,
    pub registers_per_thread: Option<u32>,
    pub sass_check: SassCheck,
    pub rebuilt: Option<String>,
    pub ptx: String,
}

/// `<variant>.bench.json`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct BenchReport {
    pub schema: String,
    pub variant: String,
    pub instruction: String,
    pub flops_per_mma: u64,
    pub backend: BackendKind,
    /// `ptx` is the latency kernel's (one chain); every kernel's PTX is under `kernels`.
    pub provenance: Provenance,
    pub device: BenchDevice,
    pub target: String,
    pub toolchain: Option<Toolchain>,
    pub settings: Settings,
    pub lowering: Option<Lowering>,
    pub lowering_error: Option<String>,
    pub kernels: Vec<KernelRecord>,
    pub latency: PointResult,
    pub points: Vec<PointResult>,
    pub wall_s: f64,
}

/// Header of `bench.csv`.
pub const CSV_HEADER: [&str; 8] = [
    "variant",
    "warps_per_sm",
    "chains",
    "latency_cycles",
    "tflops",
    "flops_per_sm_per_clock",
    "sass_tensor_per_mma",
    "sass_check",
];

impl BenchReport {
    pub fn file_stem(&self) -> String {
        self.variant.replace("::", "_")
    }

    /// Rows of `bench.csv`: one per throughput point. `latency_cycles` is that point's cycles
    /// per dependent mma.sync of one chain (the dedicated one-warp latency is in the JSON).
    /// Figures are left empty unless the point was accepted; `sass_check` says why.
    pub fn csv_rows(&self) -> Vec<[String; 8]> {
        let per_mma = self
            .lowering
            .as_ref()
            .map(|l| l.tensor_per_mma.to_string())
            .unwrap_or_default();
        self.points
            .iter()
            .map(|p| {
                let ok = p.status == PointStatus::Accepted;
                let fig = |s: &Option<Stat>, digits: usize| match (ok, s) {
                    (true, Some(s)) => format!("{:.*}", digits, s.median),
                    _ => String::new(),
                };
                let mut check = p.sass_check.clone();
                if p.status != PointStatus::Accepted
                    && let Some(r) = &p.reason
                    && !check.contains(r.as_str())
                {
                    let what = if p.status == PointStatus::Skipped {
                        "skipped"
                    } else {
                        "figure rejected"
                    };
                    check += &format!("; {what}: {r}");
                }
                [
                    self.variant.clone(),
                    p.warps_per_sm.to_string(),
                    p.chains.to_string(),
                    fig(&p.cycles_per_mma_per_chain, 2),
                    fig(&p.tflops, 3),
                    fig(&p.flops_per_sm_per_clock, 1),
                    per_mma.clone(),
                    check,
                ]
            })
            .collect()
    }

    /// Write `<dir>/<stem>.bench.json` as `out` allows (a bench runs on hardware only).
    pub fn write_json(&self, dir: &Path, out: &crate::outfile::Outputs) -> Result<PathBuf> {
        out.write_result(
            dir,
            &format!("{}.bench", self.file_stem()),
            &(serde_json::to_string_pretty(self)? + "\n"),
            None,
            false,
        )
    }
}

/// Merge rows into `<dir>/bench.csv`: rows of the variants in `reports` replace any earlier
/// rows of those variants; rows of other variants stay, in their order. A file there with another
/// header is not fp4probe's bench table: it is refused, or replaced when `out` is forced (the
/// returned flag says so).
pub fn merge_csv(
    dir: &Path,
    reports: &[BenchReport],
    out: &crate::outfile::Outputs,
) -> Result<(PathBuf, bool)> {
    let path = dir.join("bench.csv");
    let header = CSV_HEADER.join(",");
    let ours = crate::outfile::Ours::marked(&header);
    out.check(&path, ours)?;
    let fresh: std::collections::BTreeSet<&str> =
        reports.iter().map(|r| r.variant.as_str()).collect();
    let mut rows: Vec<Vec<String>> = Vec::new();
    let mut replaced_foreign = false;
    if path.is_file() {
        let mut rd = csv::Reader::from_path(&path)
            .with_context(|| format!("cannot read {}", path.display()))?;
        let found: Vec<String> = rd.headers()?.iter().map(str::to_string).collect();
        if found == CSV_HEADER {
            for rec in rd.records() {
                let rec = rec.with_context(|| format!("reading {}", path.display()))?;
                if !fresh.contains(rec.get(0).unwrap_or("")) {
                    rows.push(rec.iter().map(str::to_string).collect());
                }
            }
        } else {
            replaced_foreign = true;
        }
    }
    for r in reports {
        rows.extend(r.csv_rows().into_iter().map(|row| row.to_vec()));
    }
    let mut w = csv::Writer::from_writer(Vec::new());
    w.write_record(CSV_HEADER)?;
    for row in rows {
        w.write_record(row)?;
    }
    out.create_dir(dir)?;
    out.write(&path, w.into_inner()?, ours)?;
    Ok((path, replaced_foreign))
}

/// A loaded kernel.
struct Loaded {
    function: cudarc::driver::sys::CUfunction,
    _module: crate::device::cuda::PtxModule,
    how: &'static str,
    check: SassCheck,
    registers: Option<u32>,
}

/// Whether a cubin from `tc` can be loaded by a driver of version `driver`: a newer major
/// cannot; a newer minor of the same major loads under CUDA's minor-version compatibility
/// (and if it does not, loading fails and the bench falls back to the PTX JIT).
pub fn cubin_loadable(tc: &Toolchain, driver: (u32, u32)) -> Result<(), String> {
    match tc.version_pair() {
        Some((maj, _)) if maj > driver.0 => Err(format!(
            "{} is newer than the CUDA driver {}.{} can load",
            tc.describe(),
            driver.0,
            driver.1
        )),
        _ => Ok(()),
    }
}

fn load(backend: &CudaBackend, p: &Prepared, k: &PreparedKernel) -> Result<Loaded> {
    let body = k.shape.body_mmas();
    let jit = |why: String| -> Result<(crate::device::cuda::PtxModule, SassCheck)> {
        let m = backend.load_ptx_module(&k.ptx).with_context(|| {
            format!(
                "loading the bench kernel of {} ({} chains) through the PTX JIT",
                p.variant.id(),
                k.shape.chains
            )
        })?;
        Ok((
            m,
            SassCheck::unverified(
                body,
                format!("{why}; the driver JIT-compiled the PTX, whose SASS was not inspected"),
            ),
        ))
    };
    let loadable = p
        .toolchain
        .as_ref()
        .map(|tc| cubin_loadable(tc, backend.driver_version()));
    let (module, check, how) = match (&k.cubin, loadable) {
        (Some(cubin), Some(Ok(()))) => match backend.load_cubin(cubin) {
            Ok(m) => (m, k.check.clone(), "cubin"),
            Err(e) => {
                let (m, c) = jit(format!("the cubin did not load ({e:#})"))?;
                (m, c, "ptx-jit")
            }
        },
        (_, Some(Err(why))) => {
            let (m, c) = jit(why)?;
            (m, c, "ptx-jit")
        }
        _ => {
            let why = if k.check.status == CheckStatus::Unverified {
                k.check.detail.clone()
            } else {
                "no cubin".to_string()
            };
            let (m, c) = jit(why)?;
            (m, c, "ptx-jit")
        }
    };
    let function = module.function(BENCH_ENTRY)?;
    // SAFETY: `function` belongs to `module`, loaded into the backend's context and alive.
    let registers = unsafe {
        backend.function_attribute(
            function,
            cudarc::driver::sys::CUfunction_attribute::CU_FUNC_ATTRIBUTE_NUM_REGS,
        )
    }
    .ok()
    .map(|n| n as u32);
    Ok(Loaded {
        function,
        _module: module,
        how,
        check,
        registers,
    })
}

struct Buffers {
    input: DeviceBuffer,
    output: DeviceBuffer,
}

/// One launch: event time in ms.
fn launch(
    backend: &CudaBackend,
    l: &Loaded,
    b: &Buffers,
    timing: &DeviceBuffer,
    grid: u32,
    block: u32,
    iters: u64,
) -> Result<f64> {
    let args = [
        KernelArg::Ptr(b.input.ptr()),
        KernelArg::Ptr(b.output.ptr()),
        KernelArg::Ptr(timing.ptr()),
        KernelArg::U32(iters.min(MAX_ITERS) as u32),
    ];
    // SAFETY: the bench kernel's parameters are (u64 p_in, u64 p_out, u64 p_timing, u32
    // p_iters), matched by `args`. The caller sized the buffers for this grid: `input` and
    // `output` hold a record of 32 lanes for every (warp, chain) of the largest grid of this
    // kernel, `timing` TIMING_WORDS u64 for every warp of it, and grid × block never exceeds it.
    let ms = unsafe { backend.launch_timed(l.function, grid, block, &args) }?;
    Ok(ms as f64)
}

/// A trip count that makes one launch take about `target_ms`.
fn calibrate(mut run: impl FnMut(u64) -> Result<f64>, target_ms: f64) -> Result<u64> {
    let mut iters = 16u64;
    loop {
        let ms = run(iters)?;
        if ms >= target_ms / 4.0 || iters >= MAX_ITERS {
            let scaled = (iters as f64 * target_ms / ms.max(1e-6)).round() as u64;
            return Ok(scaled.clamp(1, MAX_ITERS));
        }
        iters = (iters * 8).min(MAX_ITERS);
    }
}

#[allow(clippy::too_many_arguments)]
fn run_point(
    backend: &CudaBackend,
    v: &Variant,
    k: &PreparedKernel,
    l: &Loaded,
    b: &Buffers,
    timing: &DeviceBuffer,
    s: &Settings,
    sms: u32,
    latency: bool,
    warps_per_sm: u32,
) -> Result<PointResult> {
    let chains = k.shape.chains;
    let kind = if latency { "latency" } else { "throughput" };
    let mut r = PointResult::skeleton(kind, warps_per_sm, chains, k, &l.check);
    r.registers_per_thread = l.registers;
    let (grid, block) = if latency {
        (1, 32)
    } else {
        let bps = s.blocks_per_sm.max(1);
        if !warps_per_sm.is_multiple_of(bps) {
            r.reason = Some(format!(
                "{warps_per_sm} warps per SM do not split into {bps} blocks"
            ));
            return Ok(r);
        }
        let block = warps_per_sm / bps * 32;
        if block > 1024 {
            r.reason = Some(format!("{block} threads per block is over 1024"));
            return Ok(r);
        }
        // SAFETY: `l` holds the module `l.function` belongs to, loaded and alive.
        let fit = unsafe { backend.max_active_blocks_per_sm(l.function, block) }?;
        if fit < bps {
            r.reason = Some(format!(
                "does not fit: {} registers/thread allow {fit} block(s) of {block} threads per \
                 SM, {bps} needed",
                l.registers.map_or("?".into(), |n| n.to_string())
            ));
            return Ok(r);
        }
        (sms * bps, block)
    };
    r.grid = grid;
    r.threads_per_block = block;
    let warps_total = (grid * block / 32) as usize;
    let go = |iters| launch(backend, l, b, timing, grid, block, iters);
    let iters = calibrate(go, s.target_ms)?;
    for _ in 0..s.warmup {
        go(iters)?;
    }
    let per_warp_mmas = iters * k.shape.body_mmas() as u64;
    let mmas = per_warp_mmas * warps_total as u64;
    let flops = mmas as f64 * v.flops() as f64;
    let steps = (iters * k.shape.unroll as u64) as f64;
    let (mut time, mut tflops, mut fpc, mut clock, mut gclock, mut cyc) =
        (vec![], vec![], vec![], vec![], vec![], vec![]);
    let mut last_timing = Vec::new();
    for _ in 0..s.runs.max(1) {
        let ms = go(iters)?;
        let t = timing.read_u64(warps_total * TIMING_WORDS)?;
        let cycles: Vec<f64> = t.chunks(TIMING_WORDS).map(|w| w[0] as f64).collect();
        let ns: Vec<f64> = t.chunks(TIMING_WORDS).map(|w| w[1] as f64).collect();
        let longest = cycles.iter().copied().fold(0.0, f64::max);
        time.push(ms);
        cyc.push(median(&cycles) / steps);
        if !latency {
            tflops.push(flops / (ms * 1e9));
            clock.push(longest / (ms * 1e3));
            fpc.push(flops / (sms as f64 * longest.max(1.0)));
        }
        let per_warp: Vec<f64> = cycles
            .iter()
            .zip(&ns)
            .filter(|(_, n)| **n > 0.0)
            .map(|(c, n)| c / n * 1e3)
            .collect();
        if !per_warp.is_empty() {
            gclock.push(median(&per_warp));
        }
        last_timing = t;
    }
    r.iters = iters;
    r.mma_per_launch = mmas;
    r.time_ms = Stat::of(&time);
    r.tflops = Stat::of(&tflops);
    r.flops_per_sm_per_clock = Stat::of(&fpc);
    r.clock_mhz = Stat::of(&clock);
    r.clock_globaltimer_mhz = Stat::of(&gclock);
    r.cycles_per_mma_per_chain = Stat::of(&cyc);

    let mut per_sm: BTreeMap<u64, u32> = BTreeMap::new();
    for w in last_timing.chunks(TIMING_WORDS) {
        *per_sm.entry(w[2]).or_default() += 1;
    }
    let (lo, hi) = (
        per_sm.values().copied().min().unwrap_or(0),
        per_sm.values().copied().max().unwrap_or(0),
    );
    let expect_sms = if latency { 1 } else { sms };
    let placement = Placement {
        sms_used: per_sm.len() as u32,
        min_warps_per_sm: lo,
        max_warps_per_sm: hi,
        as_intended: per_sm.len() as u32 == expect_sms && lo == warps_per_sm && hi == warps_per_sm,
    };
    r.placement = Some(placement);
    if !placement.as_intended {
        r.note = Some(format!(
            "warps did not land as intended: {} SMs used, {lo}..{hi} warps each",
            placement.sms_used
        ));
    }
    let d_words = warps_total * chains as usize * 32 * out_words_per_lane(v);
    let finite = all_finite(v, &b.output.read_u32(d_words)?);
    r.finite = Some(finite);
    (r.status, r.reason) = if l.check.status != CheckStatus::Verified {
        (PointStatus::Rejected, Some(l.check.cell()))
    } else if !finite {
        (
            PointStatus::Rejected,
            Some("non-finite accumulators after the run".into()),
        )
    } else {
        (PointStatus::Accepted, None)
    };
    Ok(r)
}

/// Measure a prepared variant on the device: the latency point, then the sweep.
pub fn measure(backend: &CudaBackend, p: &Prepared, s: &Settings) -> Result<BenchReport> {
    use crate::device::Backend;
    let start = std::time::Instant::now();
    let v = &p.variant;
    backend.check_supported(v)?;
    if s.warps_per_sm.is_empty() || s.chains.is_empty() {
        bail!("nothing to sweep: give at least one warps-per-SM and one chain count");
    }
    let sms = backend.sm_count()?;
    let clock_khz = backend.clock_rate_khz().ok();
    let max_w = *s.warps_per_sm.iter().max().unwrap_or(&1) as usize;
    let max_warps = sms as usize * max_w;
    let timing = DeviceBuffer::zeroed(backend, max_warps * TIMING_WORDS * 8, "timing")?;
    let mut kernels = Vec::new();
    let mut latency = None;
    let mut points = Vec::new();
    let mut preheat = s.preheat_ms;
    for k in &p.kernels.iter().rev().collect::<Vec<_>>() {
        let l = load(backend, p, k)?;
        let c = k.shape.chains;
        let records = max_warps * c as usize;
        let seed = s.seed ^ ((c as u64) << 32);
        let host = bench_inputs(v, k.shape, records, seed);
        let b = Buffers {
            input: DeviceBuffer::from_words(backend, &host, "inputs")?,
            output: DeviceBuffer::zeroed(
                backend,
                records * 32 * out_words_per_lane(v) * 4,
                "accumulators",
            )?,
        };
        drop(host);
        if preheat > 0.0 {
            // The most chains at the most warps per SM: the heaviest load of the sweep.
            let block = 32 * max_w as u32;
            // SAFETY: `l` holds the module `l.function` belongs to, loaded and alive.
            if unsafe { backend.max_active_blocks_per_sm(l.function, block) }? >= 1 {
                let until =
                    std::time::Instant::now() + std::time::Duration::from_secs_f64(preheat / 1e3);
                let go = |iters| launch(backend, &l, &b, &timing, sms, block, iters);
                let iters = calibrate(go, 20.0)?;
                while std::time::Instant::now() < until {
                    go(iters)?;
                }
                preheat = 0.0;
            }
        }
        if c == 1 {
            latency = Some(run_point(backend, v, k, &l, &b, &timing, s, sms, true, 1)?);
        }
        if s.chains.contains(&c) {
            for &w in &s.warps_per_sm {
                points.push(run_point(backend, v, k, &l, &b, &timing, s, sms, false, w)?);
            }
        }
        kernels.push(KernelRecord {
            chains: c,
            unroll: k.shape.unroll,
            sets_per_chain: k.shape.sets_per_chain,
            loaded: l.how.to_string(),
            registers_per_thread: l.registers,
            sass_check: l.check.clone(),
            rebuilt: k.rebuilt.clone(),
            ptx: k.ptx.clone(),
        });
    }
    kernels.sort_by_key(|k| k.chains);
    points.sort_by_key(|p| (p.warps_per_sm, p.chains));
    let clocks: Vec<f64> = points
        .iter()
        .filter(|p| p.status == PointStatus::Accepted)
        .filter_map(|p| p.clock_mhz.map(|c| c.median))
        .collect();
    let info = backend.info();
    let latency_ptx = p.kernel(1).map(|k| k.ptx.clone()).unwrap_or_default();
    Ok(BenchReport {
        schema: BENCH_SCHEMA.into(),
        variant: v.id(),
        instruction: v.opcode(),
        flops_per_mma: v.flops(),
        backend: info.backend,
        provenance: Provenance::new(info, latency_ptx),
        device: BenchDevice {
            name: info.name.clone(),
            compute_capability: info
                .compute_capability
                .map(|(a, b)| format!("{a}.{b}"))
                .unwrap_or_default(),
            driver: info.driver.clone(),
            sm_count: sms,
            clock_rate_attribute_mhz: clock_khz.map(|k| k as f64 / 1e3),
            measured_clock_mhz: Stat::of(&clocks),
        },
        target: p.target.to_string(),
        toolchain: p.toolchain.clone(),
        settings: s.clone(),
        lowering: p.lowering.as_ref().ok().cloned(),
        lowering_error: p.lowering.as_ref().err().cloned(),
        kernels,
        latency: latency.ok_or_else(|| anyhow!("no one-chain kernel was prepared"))?,
        points,
        wall_s: start.elapsed().as_secs_f64(),
    })
}

/// [`prepare`] for many variants on `jobs` threads (ptxas and the disassembler are separate
/// processes, so this scales with cores). Results in the order given.
pub fn prepare_all(
    items: &[(Variant, Target)],
    tc: Option<&Toolchain>,
    chains: &[u32],
    unroll: u32,
    jobs: usize,
) -> Vec<Prepared> {
    use std::sync::Mutex;
    use std::sync::atomic::{AtomicUsize, Ordering};
    let next = AtomicUsize::new(0);
    let done: Mutex<Vec<Option<Prepared>>> = Mutex::new(vec![None; items.len()]);
    std::thread::scope(|s| {
        for _ in 0..jobs.clamp(1, items.len().max(1)) {
            s.spawn(|| {
                loop {
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    let Some((v, t)) = items.get(i) else { break };
                    let p = prepare(v, *t, tc, chains, unroll);
                    done.lock().expect("no panics while holding the lock")[i] = Some(p);
                }
            });
        }
    });
    done.into_inner()
        .expect("no panics while holding the lock")
        .into_iter()
        .map(|p| p.expect("every item prepared"))
        .collect()
}

/// "2 × HMMA.16816.F32 + 4 × FADD": what one mma.sync of the timed loop executes, for every
/// opcode that runs at least once per mma.sync (loop control drops out).
pub fn loop_per_mma(check: &SassCheck) -> String {
    let body = check.body_mmas.max(1);
    let mut parts: Vec<(u32, String)> = check
        .loop_opcodes
        .iter()
        .filter(|(_, n)| **n >= body)
        .map(|(k, n)| (*n, k.clone()))
        .collect();
    // Tensor instructions first, then by count.
    parts.sort_by_key(|(n, k)| (!is_tensor_opcode(k), std::cmp::Reverse(*n), k.clone()));
    let fmt = |n: u32| {
        if n.is_multiple_of(body) {
            (n / body).to_string()
        } else {
            format!("{:.2}", n as f64 / body as f64)
        }
    };
    parts
        .iter()
        .map(|(n, k)| format!("{} × {k}", fmt(*n)))
        .collect::<Vec<_>>()
        .join(" + ")
}

/// Conversions the lowering of one mma.sync has but the timed loop runs fewer of (ptxas
/// hoisted them out of the loop because A and B do not change in it), as a sentence.
pub fn hoisted_note(lowering: &Lowering, check: &SassCheck) -> Option<String> {
    let body = check.body_mmas.max(1);
    if check.loop_opcodes.is_empty() {
        return None;
    }
    let per_mma: u32 = lowering.conversions.values().sum();
    if per_mma == 0 {
        return None;
    }
    let in_loop: u32 = check
        .loop_opcodes
        .iter()
        .filter(|(k, _)| lowering.conversions.contains_key(*k))
        .map(|(_, n)| n)
        .sum();
    (in_loop < per_mma * body).then(|| {
        format!(
            "one mma.sync lowers to {per_mma} conversions, the timed loop runs {:.2} per \
             mma.sync: A and B do not change inside the loop, so ptxas hoisted the rest out of it \
             (the figure is the tensor work plus what stayed in the loop)",
            in_loop as f64 / body as f64
        )
    })
}
