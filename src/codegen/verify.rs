//! `fp4probe codegen --verify` (and tests/gpu_codegen.rs): compile `kernels/tile_roundtrip.cu`
//! with NVRTC for the device, run each of its kernels once on random exactly-representable
//! tiles, and compare D with the CPU GEMM (`gemm::mma`, rounded with `gemm::round_to`) bit for
//! bit. The kernel places every element through the generated tables only, so a pass means the
//! generated tables, container widths and value shifts are what the hardware does.

use super::cpp_name;
use super::nvrtc::{self, Output};
use crate::device::Backend;
use crate::device::cuda::CudaBackend;
use crate::formats::ElemType;
use crate::gemm::{self, Operands};
use crate::isa::{Variant, find};
use anyhow::{Context, Result, bail};
use std::path::Path;

/// The kernel source, relative to the repository root.
pub const TILE_KERNEL: &str = "kernels/tile_roundtrip.cu";

/// Variants `tile_roundtrip.cu` instantiates for every target (run on sm_90 and later).
/// The first two are the ones the issue requires.
pub const RUN_CASES: [&str; 8] = [
    "m16n8k32.f32.e4m3.e4m3.f32",
    "m16n8k16.f32.bf16.bf16.f32",
    "m16n8k16.f16.f16.f16.f16",
    "m16n8k8.f32.tf32.tf32.f32",
    "m16n8k32.s32.s8.s8.s32",
    "m16n8k64.s32.s4.s4.s32",
    "m8n8k4.f64.f64.f64.f64",
    "m16n8k256.s32.b1.b1.s32.and.popc",
];

/// Variants `tile_roundtrip.cu` instantiates only for sm_120a (compiled and assembled; run only
/// on an sm_120 device, which this tool has not had).
pub const SM120A_CASES: [&str; 3] = [
    "m16n8k32.kind::f8f6f4.f32.e3m2.e2m1.f32",
    "m16n8k32.kind::mxf8f6f4.block_scale.scale_vec::1X.f32.e2m1.e2m1.f32.ue8m0",
    "m16n8k64.kind::mxf4nvf4.block_scale.scale_vec::4X.f32.e2m1.e2m1.f32.ue4m3",
];

/// The kernel of variant `id` in `tile_roundtrip.cu`.
pub fn entry(id: &str) -> String {
    format!("tile_roundtrip_{}", cpp_name(id))
}

/// NVRTC options for `arch` (`compute_90`, `sm_90`, `compute_120a`, ...), headers from
/// `kernels_dir` (`#include "generated/..."`).
pub fn options(kernels_dir: &Path, arch: &str) -> Vec<String> {
    vec![
        format!("--gpu-architecture={arch}"),
        "-std=c++17".into(),
        format!("--include-path={}", kernels_dir.display()),
    ]
}

/// Compile the tile kernel for `arch`, read from `kernels_dir` (a `kernels/` folder: the
/// embedded one, `crate::kernels::tree`, or a checkout's).
pub fn compile_tile_kernel(kernels_dir: &Path, arch: &str, out: Output) -> Result<nvrtc::Compiled> {
    let path = kernels_dir.join("tile_roundtrip.cu");
    let src = std::fs::read_to_string(&path)
        .with_context(|| format!("cannot read {}", path.display()))?;
    nvrtc::compile(&src, "tile_roundtrip.cu", &options(kernels_dir, arch), out)
}

/// splitmix64: deterministic, no dependency.
pub(crate) struct Rng(pub(crate) u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    pub(crate) fn pick(&mut self, xs: &[f64]) -> f64 {
        xs[(self.next() % xs.len() as u64) as usize]
    }
}

/// Values whose products and sums stay exact: each type's exact palette, and {-1, 0, 1} where
/// D is f16 (so partial sums stay exact in f16 too).
fn palette(v: &Variant, t: ElemType) -> Vec<f64> {
    exact_values(v.d, t)
}

/// The values of `t` a tile with accumulator `d` is drawn from (see [`palette`]).
pub(crate) fn exact_values(d: ElemType, t: ElemType) -> Vec<f64> {
    let base = t.exact_palette();
    if d == ElemType::F16 {
        base.iter()
            .copied()
            .filter(|x| [-1.0, 0.0, 1.0].contains(x))
            .collect()
    } else {
        base.to_vec()
    }
}

/// One trial's tiles: values (for the CPU GEMM) and value bits (for the kernel), row-major.
pub struct Tiles {
    pub a: Vec<f64>,
    pub b: Vec<f64>,
    pub c: Vec<f64>,
    pub a_bits: Vec<u64>,
    pub b_bits: Vec<u64>,
    pub c_bits: Vec<u64>,
}

/// Random exactly-representable A (m×k) and B (k×n); C zero, or random when `random_c`.
pub fn random_tiles(v: &Variant, seed: u64, random_c: bool) -> Tiles {
    let mut rng = Rng(seed);
    let (m, n, k) = (v.shape.m as usize, v.shape.n as usize, v.shape.k as usize);
    let mut fill = |t: ElemType, len: usize, zero: bool| -> (Vec<f64>, Vec<u64>) {
        let pal = palette(v, t);
        let vals: Vec<f64> = (0..len)
            .map(|_| if zero { 0.0 } else { rng.pick(&pal) })
            .collect();
        let bits = vals
            .iter()
            .map(|&x| {
                t.encode_exact(x)
                    .unwrap_or_else(|| panic!("{x} is not exact in {t}"))
            })
            .collect();
        (vals, bits)
    };
    let (a, a_bits) = fill(v.a, m * k, false);
    let (b, b_bits) = fill(v.b, k * n, false);
    let (c, c_bits) = fill(v.c, m * n, !random_c);
    Tiles {
        a,
        b,
        c,
        a_bits,
        b_bits,
        c_bits,
    }
}

/// D's value bits as the CPU GEMM gives them, row-major m×n (block scales all 1).
pub fn expected_d(v: &Variant, t: &Tiles) -> Vec<u64> {
    let blocks = v.scale.map(|s| s.vec as usize).unwrap_or(0);
    let ones_a = vec![1.0; v.shape.m as usize * blocks];
    let ones_b = vec![1.0; blocks * v.shape.n as usize];
    let exact = gemm::mma(
        v,
        &Operands {
            a: &t.a,
            b: &t.b,
            c: &t.c,
            scale_a: &ones_a,
            scale_b: &ones_b,
        },
    );
    exact
        .iter()
        .map(|&x| gemm::round_to(v.d, x, v.satfinite))
        .collect()
}

pub(crate) fn words(bits: &[u64]) -> Vec<u32> {
    bits.iter()
        .flat_map(|&b| [b as u32, (b >> 32) as u32])
        .collect()
}

/// The result of one variant on the device.
#[derive(Clone, Debug)]
pub struct CaseResult {
    pub id: String,
    /// Trials run (C = 0, then random C).
    pub trials: usize,
    /// D elements compared over all trials.
    pub compared: usize,
    /// Up to 8 mismatches: "trial T (row, col): kernel 0x.., CPU 0x..".
    pub mismatches: Vec<String>,
    pub mismatch_count: usize,
    /// Set when the case could not run at all.
    pub error: Option<String>,
}

impl CaseResult {
    pub fn new(id: &str) -> Self {
        CaseResult {
            id: id.to_string(),
            trials: 0,
            compared: 0,
            mismatches: Vec::new(),
            mismatch_count: 0,
            error: None,
        }
    }

    pub fn passed(&self) -> bool {
        self.error.is_none() && self.mismatch_count == 0 && self.compared > 0
    }

    /// Count one trial's D (row-major, `cols` wide) against the CPU's.
    pub fn compare(&mut self, trial: usize, got: &[u64], want: &[u64], cols: usize) {
        self.trials += 1;
        for (i, (g, w)) in got.iter().zip(want).enumerate() {
            self.compared += 1;
            if g != w {
                self.mismatch_count += 1;
                if self.mismatches.len() < 8 {
                    self.mismatches.push(format!(
                        "trial {trial} ({}, {}): kernel {g:#x}, CPU {w:#x}",
                        i / cols,
                        i % cols
                    ));
                }
            }
        }
    }

    /// `PASS id: ...` or `FAIL id: ...` and the mismatches, one line each.
    pub fn lines(&self) -> Vec<String> {
        if let Some(e) = &self.error {
            return vec![format!("FAIL {}: {e}", self.id)];
        }
        if self.passed() {
            return vec![format!(
                "PASS {}: D bit-exact against the CPU GEMM ({} trials, {} elements)",
                self.id, self.trials, self.compared
            )];
        }
        let mut out = vec![format!(
            "FAIL {}: {} of {} D elements differ",
            self.id, self.mismatch_count, self.compared
        )];
        out.extend(self.mismatches.iter().map(|m| format!("       {m}")));
        out
    }
}

/// Everything `--verify` found.
#[derive(Clone, Debug)]
pub struct Report {
    pub device: String,
    pub arch: String,
    pub nvrtc: String,
    pub cases: Vec<CaseResult>,
}

impl Report {
    pub fn passed(&self) -> bool {
        !self.cases.is_empty() && self.cases.iter().all(|c| c.passed())
    }
}

impl std::fmt::Display for Report {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        writeln!(
            f,
            "tile round trip on {} ({}), kernels compiled by {}:",
            self.device, self.arch, self.nvrtc
        )?;
        for c in &self.cases {
            for l in c.lines() {
                writeln!(f, "{l}")?;
            }
        }
        let passed = self.cases.iter().filter(|c| c.passed()).count();
        write!(f, "{passed} of {} variants passed", self.cases.len())
    }
}

fn run_case(
    gpu: &CudaBackend,
    module: &crate::device::cuda::PtxModule,
    id: &str,
    seed: u64,
) -> CaseResult {
    let mut res = CaseResult::new(id);
    let run = |res: &mut CaseResult| -> Result<()> {
        let v = find(id).with_context(|| format!("{id} is not in the catalog"))?;
        gpu.check_supported(&v)?;
        let (m, n) = (v.shape.m as usize, v.shape.n as usize);
        for (trial, random_c) in [false, true].into_iter().enumerate() {
            let tiles = random_tiles(&v, seed.wrapping_add(trial as u64), random_c);
            let want = expected_d(&v, &tiles);
            let scale = vec![0u32; 32];
            let out = gpu.launch_one_warp(
                module,
                &entry(id),
                &[
                    &words(&tiles.a_bits),
                    &words(&tiles.b_bits),
                    &words(&tiles.c_bits),
                    &scale,
                    &scale,
                ],
                2 * m * n,
            )?;
            let got: Vec<u64> = out
                .chunks(2)
                .map(|w| w[0] as u64 | (w[1] as u64) << 32)
                .collect();
            res.compare(trial, &got, &want, n);
        }
        Ok(())
    };
    if let Err(e) = run(&mut res) {
        res.error = Some(format!("{e:#}"));
    }
    res
}

/// `NVRTC 13.0 (/path/libnvrtc.so.13)`: the NVRTC this process loads.
pub fn nvrtc_description() -> Result<String> {
    let lib = nvrtc::load()?;
    Ok(format!(
        "NVRTC {}.{}{}",
        lib.version.0,
        lib.version.1,
        lib.path
            .as_ref()
            .map(|p| format!(" ({})", p.display()))
            .unwrap_or_default()
    ))
}

/// Compile the tile kernel (from `kernels_dir`, as [`compile_tile_kernel`]) for the open device
/// and run every case of [`RUN_CASES`].
pub fn run_on_gpu(gpu: &CudaBackend, kernels_dir: &Path, seed: u64) -> Result<Report> {
    let cc = gpu
        .info()
        .compute_capability
        .context("the device reports no compute capability")?;
    if cc < (8, 9) {
        bail!(
            "{} is sm_{}{}; the tile kernels need sm_89 or later (e4m3)",
            gpu.info().name,
            cc.0,
            cc.1
        );
    }
    let nvrtc_desc = nvrtc_description()?;
    // A cubin for the device's real architecture: loads without a PTX JIT, so an NVRTC newer
    // than the driver (whose PTX the driver could not read) works too.
    let arch = format!("sm_{}{}", cc.0, cc.1);
    let compiled = compile_tile_kernel(kernels_dir, &arch, Output::Cubin)?;
    let module = gpu.load_cubin_module(&compiled.image)?;
    let cases = RUN_CASES
        .iter()
        .map(|id| run_case(gpu, &module, id, seed))
        .collect();
    Ok(Report {
        device: gpu.info().name.clone(),
        arch,
        nvrtc: nvrtc_desc,
        cases,
    })
}
