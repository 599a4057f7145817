//! `fp4probe codegen --verify` for wgmma (and tests/gpu_codegen.rs): compile
//! `kernels/wgmma_roundtrip.cu` with NVRTC for sm_90a, one kernel per case, and run each once
//! on an identity and a random exactly-representable tile. A and B reach shared memory only
//! through the generated offset functions, the descriptors only through the generated
//! `make_desc`, C and A-from-registers only through the generated tables, and D leaves only
//! through the generated D table; D must equal the CPU GEMM (`wgmma::model::gemm`, rounded to
//! the accumulator) bit for bit.
//!
//! Each case is planned on the host from the same forms (`crate::generated::wgmma`): the
//! packed LBO and SBO of its tiles, where each element lands, and the region sizes. A case the
//! measurements do not cover (no study of its element size; a field the study pinned at another
//! value; a base offset no sweep point measured; a form that puts two elements of the tile in
//! one place past the measured extent) is listed as not run, with the reason, and compiles no
//! kernel.

use super::super::cpp_name;
use super::super::nvrtc::{self, Output};
use super::super::verify::{CaseResult, Rng, exact_values, nvrtc_description, words};
use super::tables::{SmemForm, smem_form};
use crate::device::Backend;
use crate::device::cuda::{CudaBackend, DeviceBuffer, KernelArg};
use crate::formats::ElemType;
use crate::wgmma::desc::{Major, Swizzle};
use crate::wgmma::model::{gemm, round_d};
use crate::wgmma::probe::packed_desc;
use crate::wgmma::{ASource, M, THREADS, WgVariant, find};
use anyhow::{Context, Result, bail};
use std::collections::HashSet;
use std::path::Path;

/// The kernel source, relative to the repository root.
pub const KERNEL: &str = "kernels/wgmma_roundtrip.cu";

/// Shared memory a block may have on sm_90, less the 1 KiB the kernel spends aligning.
const MAX_SMEM: u32 = 227 * 1024 - 1024;

/// The wide families `--verify` runs under every swizzle mode (K-major, and MN-major where the
/// type takes the transpose), from shared memory and, once, with A from registers; 1-bit
/// elements too, packed eight to a byte.
pub const WIDE: [&str; 5] = [
    "m64n64k16.f32.bf16.bf16",
    "m64n64k32.f32.e4m3.e4m3",
    "m64n256k16.f32.bf16.bf16",
    "m64n256k32.f32.e4m3.e4m3",
    "m64n16k256.s32.b1.b1.and.popc",
];

/// The descriptor base offset the swizzled K-major cases of the [`WIDE`] families run with
/// once more: with an aligned start, the XOR's row phase moves by it (3: every bit the
/// 128B pattern reads).
pub const BASE_OFFSET: u32 = 3;

/// One round trip: a variant, the major-ness of A (from shared memory) and B, and the swizzle
/// mode and base offset of both descriptors.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Case {
    pub variant: WgVariant,
    pub major_a: Major,
    pub major_b: Major,
    pub swizzle: Swizzle,
    pub base_offset: u32,
}

impl Case {
    /// `m64n64k16.f32.bf16.bf16.ss.K.128B`, or `...rs.K.none` (the major-ness of B for rs),
    /// `...ss.K.128B.bo3` with base offset 3.
    pub fn id(&self) -> String {
        let major = match self.variant.a_src {
            ASource::Ss if self.major_a != self.major_b => {
                format!("{}{}", self.major_a.name(), self.major_b.name())
            }
            _ => self.major_b.name().to_string(),
        };
        let bo = if self.base_offset == 0 {
            String::new()
        } else {
            format!(".bo{}", self.base_offset)
        };
        format!("{}.{major}.{}{bo}", self.variant.id(), self.swizzle.name())
    }

    /// The kernel's name.
    pub fn entry(&self) -> String {
        format!("wgmma_roundtrip_{}", cpp_name(&self.id()))
    }

    /// The line of the NVRTC source that instantiates the case.
    pub fn instance(&self) -> String {
        let fam = cpp_name(&super::family_stem(&self.variant));
        let major = |m: Major| match m {
            Major::K => "kMajorK",
            Major::MN => "kMajorMN",
        };
        let swz = match self.swizzle {
            Swizzle::None => "kSwizzleNone",
            Swizzle::B32 => "kSwizzle32B",
            Swizzle::B64 => "kSwizzle64B",
            Swizzle::B128 => "kSwizzle128B",
        };
        let name = cpp_name(&self.id());
        match self.variant.a_src {
            ASource::Ss => format!(
                "WG_SS({name}, {fam}, {}, {}, {swz})",
                major(self.major_a),
                major(self.major_b)
            ),
            ASource::Rs => format!("WG_RS({name}, {fam}, {}, {swz})", major(self.major_b)),
        }
    }
}

/// Every case `--verify` runs or reports as not run: A from registers with B K-major and no
/// swizzle for every variant whose A table was measured (every type at N = 16), and for each
/// [`WIDE`] family every swizzle mode with A and B K-major (and MN-major for f16/bf16) from
/// shared memory, the swizzled K-major ones again with base offset [`BASE_OFFSET`], plus A
/// from registers with B K-major under 128B.
pub fn cases() -> Vec<Case> {
    let mut out = Vec::new();
    let mut rs: Vec<&str> = crate::generated::wgmma::A_TABLES
        .iter()
        .flat_map(|t| t.variants.iter().copied())
        .collect();
    rs.sort();
    for id in rs {
        if let Some(v) = find(id) {
            out.push(Case {
                variant: v,
                major_a: Major::K,
                major_b: Major::K,
                swizzle: Swizzle::None,
                base_offset: 0,
            });
        }
    }
    for fam in WIDE {
        let Some(ss) = find(&format!("{fam}.ss")) else {
            continue;
        };
        let mut majors = vec![Major::K];
        if ss.transposable() {
            majors.push(Major::MN);
        }
        for m in majors {
            for sw in Swizzle::ALL {
                out.push(Case {
                    variant: ss.clone(),
                    major_a: m,
                    major_b: m,
                    swizzle: sw,
                    base_offset: 0,
                });
            }
        }
        for sw in [Swizzle::B32, Swizzle::B64, Swizzle::B128] {
            out.push(Case {
                variant: ss.clone(),
                major_a: Major::K,
                major_b: Major::K,
                swizzle: sw,
                base_offset: BASE_OFFSET,
            });
        }
        if let Some(rs) = find(&format!("{fam}.rs")) {
            out.push(Case {
                variant: rs,
                major_a: Major::K,
                major_b: Major::K,
                swizzle: Swizzle::B128,
                base_offset: 0,
            });
        }
    }
    out
}

/// One operand's place in shared memory.
#[derive(Clone, Debug)]
pub struct Region {
    pub lbo: u32,
    pub sbo: u32,
    /// Bit offset of element (mn, k), `offsets[mn * k_extent + k]`, from the region's start.
    pub offsets: Vec<u32>,
    /// One past the last byte an element occupies.
    pub end: u32,
}

/// A runnable case: the regions and the launch sizes.
#[derive(Clone, Debug)]
pub struct Plan {
    pub case: Case,
    pub a: Option<Region>,
    pub b: Region,
    /// B's region from the aligned base (a multiple of 1024).
    pub b_off: u32,
    /// Bytes the kernel zeroes and the tiles fill.
    pub bytes: u32,
}

/// Where the form puts every element of an `mn × k` tile, or why the case is not covered.
fn region(
    form: &SmemForm,
    major: Major,
    (mn, k): (u32, u32),
    start: u32,
    base_offset: u32,
) -> Result<Region, String> {
    let bits = form.elem_bits;
    let d = packed_desc(major, form.swizzle, bits, mn, k, 0);
    form.check_fields(d.lbo, d.sbo)?;
    form.check_base_offset(base_offset)?;
    let mut offsets = Vec::with_capacity((mn * k) as usize);
    let mut seen = HashSet::new();
    let mut end = 0u32;
    for i in 0..mn {
        for j in 0..k {
            let o = form.bit_offset(i, j, d.lbo, d.sbo, start, base_offset);
            if o < 0 || !seen.insert(o) {
                return Err(format!(
                    "{}: the measured form puts element (mn {i}, k {j}) of the {mn} x {k} tile \
                     {} (measured for mn < {}, k < {})",
                    form.stem(),
                    if o < 0 {
                        "before the descriptor's start"
                    } else {
                        "where another element is"
                    },
                    form.measured_mn,
                    form.measured_k
                ));
            }
            offsets.push(o as u32);
            end = end.max((o as u32 + bits).div_ceil(8));
        }
    }
    Ok(Region {
        lbo: d.lbo,
        sbo: d.sbo,
        offsets,
        end,
    })
}

/// Plan `c`, or say why it is not run.
pub fn plan(c: &Case) -> Result<Plan, String> {
    let v = &c.variant;
    let bits = v.elem_bits();
    let form = |major: Major| {
        smem_form(bits, major, c.swizzle).ok_or_else(|| {
            format!(
                "no committed shared-memory study of {bits}-bit {}-major {} tiles",
                major.name(),
                c.swizzle.name()
            )
        })
    };
    let a = match v.a_src {
        ASource::Ss => Some(region(
            form(c.major_a)?,
            c.major_a,
            (M, v.a_k()),
            0,
            c.base_offset,
        )?),
        ASource::Rs => None,
    };
    let b_off = a.as_ref().map_or(0, |r| r.end.next_multiple_of(1024));
    let b = region(
        form(c.major_b)?,
        c.major_b,
        (v.n, v.k),
        b_off,
        c.base_offset,
    )?;
    let bytes = (b_off + b.end).next_multiple_of(16);
    if bytes > MAX_SMEM {
        return Err(format!(
            "the tiles need {bytes} bytes of shared memory; a block has {MAX_SMEM}"
        ));
    }
    Ok(Plan {
        case: c.clone(),
        a,
        b,
        b_off,
        bytes,
    })
}

/// The NVRTC source: the kernel file and one instance per case.
pub fn source(cases: &[Case]) -> String {
    let mut s = String::from("#include \"wgmma_roundtrip.cu\"\n");
    for c in cases {
        s += &c.instance();
        s.push('\n');
    }
    s
}

/// NVRTC options for `arch` (`sm_90a`, `compute_90a`), headers from `kernels_dir`.
pub fn compile(
    kernels_dir: &Path,
    cases: &[Case],
    arch: &str,
    out: Output,
) -> Result<nvrtc::Compiled> {
    nvrtc::compile(
        &source(cases),
        "wgmma_roundtrip_cases.cu",
        &super::super::verify::options(kernels_dir, arch),
        out,
    )
}

/// A trial's tiles: values and their bits, row-major.
struct Tiles {
    a: Vec<f64>,
    b: Vec<f64>,
    c: Vec<f64>,
    bits: [Vec<u64>; 3],
}

/// Trial 0: A an identity (A[i][k] = 1 where k = i mod K), random B, C = 0. Trial 1: random A,
/// B and C. Values from each type's exact palette.
fn tiles(v: &WgVariant, seed: u64, trial: usize) -> Tiles {
    let mut rng = Rng(seed.wrapping_add(trial as u64));
    let (n, k) = (v.n as usize, v.k as usize);
    let mut fill = |t: ElemType, len: usize, f: &dyn Fn(usize) -> Option<f64>| -> Vec<f64> {
        let pal = exact_values(v.d, t);
        (0..len)
            .map(|i| f(i).unwrap_or_else(|| rng.pick(&pal)))
            .collect()
    };
    let a = fill(v.a, M as usize * k, &|i| {
        (trial == 0).then(|| f64::from(u8::from(i / k % k == i % k)))
    });
    let b = fill(v.b, k * n, &|_| None);
    let c = fill(v.d, M as usize * n, &|_| (trial == 0).then_some(0.0));
    let enc = |t: ElemType, xs: &[f64]| -> Vec<u64> {
        xs.iter()
            .map(|&x| match t {
                ElemType::F32 => (x as f32).to_bits() as u64,
                ElemType::S32 => x as i32 as u32 as u64,
                _ => t
                    .encode_exact(x)
                    .unwrap_or_else(|| panic!("{x} is not exact in {t}")),
            })
            .collect()
    };
    let bits = [enc(v.a, &a), enc(v.b, &b), enc(v.d, &c)];
    Tiles { a, b, c, bits }
}

/// Everything the wgmma `--verify` found.
#[derive(Clone, Debug)]
pub struct Report {
    pub device: String,
    pub arch: String,
    pub nvrtc: String,
    pub cases: Vec<CaseResult>,
    /// (case, why) of the cases the measurements do not cover.
    pub not_run: Vec<(String, String)>,
}

impl Report {
    /// Every case run passed (and at least one ran).
    pub fn passed(&self) -> bool {
        !self.cases.is_empty() && self.cases.iter().all(|c| c.passed())
    }
}

impl std::fmt::Display for Report {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        writeln!(
            f,
            "wgmma round trip on {} ({}), kernels compiled by {}: A and B written to shared memory \
             through the generated forms, descriptors from make_desc, C, A (rs) and D through the \
             generated tables:",
            self.device, self.arch, self.nvrtc
        )?;
        for c in &self.cases {
            for l in c.lines() {
                writeln!(f, "{l}")?;
            }
        }
        for (id, why) in &self.not_run {
            writeln!(f, "NOT RUN {id}: {why}")?;
        }
        let passed = self.cases.iter().filter(|c| c.passed()).count();
        write!(
            f,
            "{passed} of {} wgmma cases passed, {} not run",
            self.cases.len(),
            self.not_run.len()
        )
    }
}

fn run_plan(
    gpu: &CudaBackend,
    module: &crate::device::cuda::PtxModule,
    p: &Plan,
    seed: u64,
) -> CaseResult {
    let mut res = CaseResult::new(&p.case.id());
    let run = |res: &mut CaseResult| -> Result<()> {
        let v = &p.case.variant;
        let f = module.function(&p.case.entry())?;
        // SAFETY: `f` belongs to `module`, loaded into this backend's context and alive here.
        unsafe { gpu.set_max_dynamic_smem(f, p.bytes + 1024) }?;
        let (m, n) = (M as usize, v.n as usize);
        for trial in 0..2 {
            let t = tiles(v, seed, trial);
            let want: Vec<u64> = gemm(v, &t.a, &t.b, &t.c)
                .iter()
                .map(|&x| round_d(v, x))
                .collect();
            let a = DeviceBuffer::from_words(gpu, &words(&t.bits[0]), "A")?;
            let b = DeviceBuffer::from_words(gpu, &words(&t.bits[1]), "B")?;
            let c = DeviceBuffer::from_words(gpu, &words(&t.bits[2]), "C")?;
            let d = DeviceBuffer::zeroed(gpu, m * n * 8, "D")?;
            let (lbo_a, sbo_a) = p.a.as_ref().map_or((0, 0), |r| (r.lbo, r.sbo));
            let args = [
                KernelArg::Ptr(a.ptr()),
                KernelArg::Ptr(b.ptr()),
                KernelArg::Ptr(c.ptr()),
                KernelArg::Ptr(d.ptr()),
                KernelArg::U32(lbo_a),
                KernelArg::U32(sbo_a),
                KernelArg::U32(p.b.lbo),
                KernelArg::U32(p.b.sbo),
                KernelArg::U32(p.b_off),
                KernelArg::U32(p.bytes),
                KernelArg::U32(p.case.base_offset),
            ];
            // SAFETY: the arguments follow WG_ROUNDTRIP_PARAMS (four pointers, seven u32); A, B
            // and C hold the m×k, k×n and m×n tiles the kernel reads, D m×n words; the kernel
            // touches `bytes` of shared memory past its aligned base, within bytes + 1024.
            unsafe { gpu.launch_3d_smem(f, (1, 1, 1), (THREADS, 1), p.bytes + 1024, &args) }?;
            gpu.synchronize().context("wgmma round trip")?;
            let out = d.read_u32(2 * m * n)?;
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

/// Plan every case, compile the runnable ones for the device (sm_90a only) and run them.
pub fn run_on_gpu(gpu: &CudaBackend, kernels_dir: &Path, seed: u64) -> Result<Report> {
    let cc = gpu.compute_capability();
    if cc != (9, 0) {
        bail!(
            "wgmma needs sm_90a; {} is sm_{}{}",
            gpu.info().name,
            cc.0,
            cc.1
        );
    }
    let mut plans = Vec::new();
    let mut not_run = Vec::new();
    for c in cases() {
        match plan(&c) {
            Ok(p) => plans.push(p),
            Err(why) => not_run.push((c.id(), why)),
        }
    }
    let runnable: Vec<Case> = plans.iter().map(|p| p.case.clone()).collect();
    let arch = "sm_90a".to_string();
    let compiled = compile(kernels_dir, &runnable, &arch, Output::Cubin)?;
    let module = gpu.load_cubin_module(&compiled.image)?;
    let cases = plans
        .iter()
        .map(|p| run_plan(gpu, &module, p, seed))
        .collect();
    Ok(Report {
        device: gpu.info().name.clone(),
        arch,
        nvrtc: nvrtc_description()?,
        cases,
        not_run,
    })
}
