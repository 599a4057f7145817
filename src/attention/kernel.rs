//! The fused FP4 attention kernels (`kernels/attention/attn_fp4.cu`): compiled with NVRTC for
//! the device, launched over pre-quantized Q, K, V (`QuantizedQkv`), O read back as f32. One
//! source, three kernel bodies behind one interface (same entry points, arguments and
//! arithmetic), chosen by `KernelPath`; the wgmma body in two variants (`Variant`), chosen per
//! launch.

use super::reference::score_scale_log2;
use super::schedule::StreamK;
use super::{AttnShape, QuantizedQkv};
use crate::codegen::nvrtc::{self, Output};
use crate::device::cuda::{CudaBackend, DeviceBuffer, KernelArg, PtxModule};
use crate::quant::Format;
use crate::quant::cuda::{DeviceQuant, InType, QuantKernels};
use crate::quant::{NvLevels, ScaleMode, Spec};
use anyhow::{Context, Result, bail};
use clap::ValueEnum;
use cudarc::driver::sys;
use std::sync::Mutex;

/// Which kernel runs the products.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum KernelPath {
    /// `attn_bf16.cuh`: FP4 decoded to bf16 in registers, `mma.sync` m16n8k16 bf16 (sm_90
    /// and later).
    Bf16,
    /// `attn_wgmma.cuh`: the bf16 path's arithmetic on Hopper's asynchronous warpgroup MMA
    /// (`wgmma.mma_async` m64nNk16 bf16, a producer warpgroup decoding K and V into shared
    /// memory, two or three consumer warpgroups); sm_90a, head_dim 64 and 128.
    Wgmma,
    /// `attn_block_scale.cuh`: FP4 straight into `mma.sync` m16n8k64 `kind::mxf4nvf4`
    /// `block_scale` (sm_120a).
    BlockScale,
    /// The block-scale kernel with the instruction replaced by a software model written from
    /// the PTX ISA (`mma_block_scale_emulated.cuh`): validates the sm_120a kernel's data flow
    /// on a GPU without the instruction. Slow; for validation only.
    BlockScaleEmulated,
    /// The block-scale kernel with `mma.sync` m16n8k32 `kind::mxf8f6f4` `scale_vec::1X`
    /// (FP4 in 8-bit containers; the article's instruction): MXFP4 only (sm_120a).
    BlockScaleK32,
    /// `block-scale-k32` with the software model of its instruction.
    BlockScaleK32Emulated,
}

impl KernelPath {
    /// The kernel body the source includes for this path, relative to `kernels/`.
    pub fn body(self) -> &'static str {
        match self {
            KernelPath::Bf16 => "attention/attn_bf16.cuh",
            KernelPath::Wgmma => "attention/attn_wgmma.cuh",
            _ => "attention/attn_block_scale.cuh",
        }
    }

    /// The macros that select this path's body and instruction in `SOURCE`.
    pub fn defines(self) -> &'static [&'static str] {
        match self {
            KernelPath::Bf16 => &[],
            KernelPath::Wgmma => &["ATTN_WGMMA"],
            KernelPath::BlockScale => &["ATTN_BLOCK_SCALE"],
            KernelPath::BlockScaleEmulated => &["ATTN_BLOCK_SCALE", "ATTN_EMULATE_BLOCK_SCALE"],
            KernelPath::BlockScaleK32 => &["ATTN_BLOCK_SCALE", "ATTN_MXF8F6F4"],
            KernelPath::BlockScaleK32Emulated => &[
                "ATTN_BLOCK_SCALE",
                "ATTN_MXF8F6F4",
                "ATTN_EMULATE_BLOCK_SCALE",
            ],
        }
    }

    /// The input formats the path has entry points for: the m16n8k32 instruction takes only
    /// E8M0 scales, so no NVFP4.
    pub fn formats(self) -> &'static [Format] {
        match self {
            KernelPath::BlockScaleK32 | KernelPath::BlockScaleK32Emulated => &[Format::Mxfp4],
            _ => &[Format::Nvfp4, Format::Mxfp4],
        }
    }

    /// Runs the software model instead of the instruction.
    pub fn emulated(self) -> bool {
        matches!(
            self,
            KernelPath::BlockScaleEmulated | KernelPath::BlockScaleK32Emulated
        )
    }

    /// An error naming what runs `format` when this path cannot.
    pub fn check_format(self, format: Format) -> Result<()> {
        if !self.formats().contains(&format) {
            bail!(
                "--path {} runs MXFP4 only: m16n8k32 kind::mxf8f6f4 has no E4M3 block scales; \
                 NVFP4 runs on --path block-scale (m16n8k64 kind::mxf4nvf4 scale_vec::4X)",
                self.name()
            );
        }
        Ok(())
    }

    /// The head dimensions the path has entry points for: the wgmma body keeps S and O
    /// accumulators in registers, which D = 256 would overflow.
    pub fn head_dims(self) -> &'static [usize] {
        match self {
            KernelPath::Wgmma => &[64, 128],
            _ => &[64, 128, 256],
        }
    }

    /// An error naming what runs `head_dim` when this path cannot.
    pub fn check_head_dim(self, head_dim: usize) -> Result<()> {
        if !self.head_dims().contains(&head_dim) {
            bail!(
                "--path {} runs head_dim {:?}; head_dim {head_dim} runs on --path bf16",
                self.name(),
                self.head_dims()
            );
        }
        Ok(())
    }

    /// The forms `load_path` compiles: the wgmma body with two consumer warpgroups (128 query
    /// rows a CTA) and with three (192 rows, fewer decodes per score but coarser waves of
    /// CTAs; `Variant::pick` chooses per launch), unless an experiment fixes the count
    /// (`ATTN_WG_CONSUMERS`); every other path has one form.
    pub fn variants(self) -> Vec<Variant> {
        let one = |consumers| Variant {
            path: self,
            consumers,
        };
        match (self, experiment_define("ATTN_WG_CONSUMERS")) {
            (KernelPath::Wgmma, Some(c)) => vec![one(c)],
            (KernelPath::Wgmma, None) => vec![one(2), one(3)],
            _ => vec![one(0)],
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            KernelPath::Bf16 => "bf16",
            KernelPath::Wgmma => "wgmma",
            KernelPath::BlockScale => "block-scale",
            KernelPath::BlockScaleEmulated => "block-scale-emulated",
            KernelPath::BlockScaleK32 => "block-scale-k32",
            KernelPath::BlockScaleK32Emulated => "block-scale-k32-emulated",
        }
    }

    /// The fastest path a device of compute capability `major.minor` runs for `head_dim`:
    /// the block-scaled instruction on sm_120 (consumer Blackwell), wgmma on sm_90 (Hopper) up
    /// to head_dim 128, bf16 elsewhere.
    pub fn for_device(major: u32, head_dim: usize) -> KernelPath {
        match major {
            12 => KernelPath::BlockScale,
            9 if KernelPath::Wgmma.head_dims().contains(&head_dim) => KernelPath::Wgmma,
            _ => KernelPath::Bf16,
        }
    }

    /// NVRTC's target for this path on a device of compute capability `major.minor`, or why
    /// the path cannot run there.
    pub fn arch(self, major: u32, minor: u32) -> Result<String> {
        if major < 9 {
            bail!(
                "the FP4 attention kernels need sm_90 or later; this device is sm_{major}{minor}"
            );
        }
        if matches!(self, KernelPath::BlockScale | KernelPath::BlockScaleK32) && major != 12 {
            bail!(
                "the {} attention kernel needs sm_120a (mma.sync block_scale); this device is \
                 sm_{major}{minor}. Use --path bf16, or --path {}-emulated to validate its data \
                 flow with a software MMA",
                self.name(),
                self.name()
            );
        }
        if self == KernelPath::Wgmma && major != 9 {
            bail!(
                "the wgmma attention kernel needs sm_90a (wgmma.mma_async exists on Hopper only); \
                 this device is sm_{major}{minor}. Use --path bf16"
            );
        }
        let suffix = if major >= 10 || self == KernelPath::Wgmma {
            "a"
        } else {
            ""
        };
        Ok(format!("sm_{major}{minor}{suffix}"))
    }
}

/// Warps per CTA (16 query rows each): `ATTN_WARPS` in the kernels. 8 measured faster than 4
/// on the H100 (each thread decodes half as much of a key tile; 131 against 119 TFLOP/s at
/// S = 4096, d = 128). `FP4PROBE_ATTN_WARPS` (4 or 8) overrides it, for tuning.
pub fn warps() -> usize {
    std::env::var("FP4PROBE_ATTN_WARPS")
        .ok()
        .and_then(|v| v.parse().ok())
        .filter(|&w| w == 4 || w == 8)
        .unwrap_or(8)
}

/// One compiled form of a path: for the wgmma body, its number of consumer warpgroups (64
/// query rows each; 0 for the other bodies).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Variant {
    pub path: KernelPath,
    pub consumers: usize,
}

/// Three consumer warpgroups against two, per CTA-row of work (each K/V tile is decoded once
/// for 192 rows instead of 128), measured A/B in one run on the H100 at B=1, H=32, S = 4096
/// and 16384 and divided by the ratio of the wave efficiencies
/// (reports/sm_90/attention/experiments/consumers-overlap, re-measured after P's
/// requantization got shorter: experiments/consumers-after-p-requant): NVFP4 d = 128 1.18
/// (re-measured 1.11–1.19), MXFP4 d = 128 1.15 (re-measured 1.09–1.16, 1.09–1.11 before);
/// at d = 64 NVFP4 1.06 (1.00–1.09), MXFP4 1.09 (1.05–1.12).
fn three_consumer_gain(format: Format, head_dim: usize) -> f64 {
    match (format, head_dim) {
        (Format::Nvfp4, 128) => 1.18,
        (Format::Nvfp4, _) => 1.06,
        (Format::Mxfp4, 128) => 1.15,
        (Format::Mxfp4, _) => 1.09,
    }
}

impl Variant {
    /// Threads per CTA: 16 query rows a warp, or for wgmma one producer and the consumer
    /// warpgroups.
    pub fn threads(self) -> usize {
        match self.path {
            KernelPath::Wgmma => 128 * (self.consumers + 1),
            _ => 32 * warps(),
        }
    }

    /// Query rows per CTA (`BR` in attn_common.cuh, from `ATTN_WARPS`).
    pub fn rows_per_cta(self) -> usize {
        16 * self.warps_macro()
    }

    /// The `ATTN_WARPS` the source is compiled with.
    fn warps_macro(self) -> usize {
        match self.path {
            KernelPath::Wgmma => 4 * self.consumers,
            _ => warps(),
        }
    }

    /// Dynamic shared memory per CTA: the wgmma body's two decoded Q tiles (one per row block
    /// in flight) and its ring of `ATTN_STAGES` decoded K and Vᵀ tiles (`Geo<D>::SMEM` in attn_wgmma.cuh, which traps if
    /// given less); the other bodies use static shared memory only.
    pub fn dynamic_smem(self, head_dim: usize) -> usize {
        match self.path {
            KernelPath::Wgmma => {
                let q = self.rows_per_cta() * head_dim * 2;
                let stage = 2 * wgmma_keys_per_tile(head_dim) * head_dim * 2;
                2 * q + wgmma_stages() * stage
            }
            _ => 0,
        }
    }

    /// The macros beyond the path's: the launch geometry.
    fn defines(self) -> Vec<String> {
        let mut d = vec![format!("ATTN_WARPS={}", self.warps_macro())];
        if self.path == KernelPath::Wgmma {
            d.push(format!("ATTN_WG_CONSUMERS={}", self.consumers));
        }
        d
    }

    /// The wgmma body's schedule of `shape` on `sms` multiprocessors, persistent or one CTA per
    /// row block, whichever `StreamK::efficiency` expects faster (None for the other bodies,
    /// which run a grid of one CTA per row block).
    pub fn schedule(self, shape: &AttnShape, sms: usize) -> Option<StreamK> {
        (self.path == KernelPath::Wgmma).then(|| {
            StreamK::best(
                shape,
                self.rows_per_cta(),
                wgmma_keys_per_tile(shape.head_dim),
                sms,
            )
        })
    }

    /// The share of the CTAs' time that is work for `shape` on `sms` multiprocessors: rows of
    /// the last row block of a head past seq_q are idle; with a grid of one CTA per row block
    /// (one CTA a multiprocessor at a time) so is the rest of the last wave; the wgmma body's
    /// schedule says its own (`StreamK::efficiency`, segment costs included).
    fn wave_efficiency(self, shape: &AttnShape, sms: usize) -> f64 {
        let (rows, bh, sms) = (shape.seq_q, shape.batch * shape.heads, sms.max(1));
        let row_blocks = rows.div_ceil(self.rows_per_cta());
        let rows_used = rows as f64 / (row_blocks * self.rows_per_cta()) as f64;
        match self.schedule(shape, sms) {
            Some(s) => rows_used * s.efficiency(sms),
            None => {
                rows_used * (row_blocks * bh) as f64
                    / ((row_blocks * bh).div_ceil(sms) * sms) as f64
            }
        }
    }

    /// Of `variants`, the one expected fastest for `shape` in `format`: the wave efficiency,
    /// times `three_consumer_gain` for three consumer warpgroups.
    pub fn pick(variants: &[Variant], shape: &AttnShape, sms: usize, format: Format) -> Variant {
        let score = |v: &Variant| {
            let gain = if v.consumers == 3 {
                three_consumer_gain(format, shape.head_dim)
            } else {
                1.0
            };
            v.wave_efficiency(shape, sms) * gain
        };
        *variants
            .iter()
            .max_by(|a, b| score(a).total_cmp(&score(b)))
            .expect("a path has at least one variant")
    }
}

/// A numeric macro an experiment sets through `FP4PROBE_ATTN_DEFINES` (NAME=N), if any: the
/// host must agree with the kernel on the ones that shape the launch.
fn experiment_define(name: &str) -> Option<usize> {
    let defs = std::env::var("FP4PROBE_ATTN_DEFINES").ok()?;
    defs.split_whitespace()
        .find_map(|d| d.strip_prefix(name)?.strip_prefix('=')?.parse().ok())
}

/// The wgmma body's ring of key tiles (`ATTN_STAGES` in attn_wgmma.cuh, default 3).
fn wgmma_stages() -> usize {
    experiment_define("ATTN_STAGES").unwrap_or(3)
}

/// Keys per tile of the wgmma body (`Geo<D>::BC`): its S accumulator and O's share the
/// consumers' registers.
fn wgmma_keys_per_tile(head_dim: usize) -> usize {
    if head_dim == 64 { 128 } else { 64 }
}

/// `attn_nvfp4_d128`: the entry point for an input format and head dimension.
pub fn entry(format: Format, head_dim: usize) -> String {
    format!("attn_{}_d{head_dim}", format.name())
}

/// The kernel source, relative to `kernels/`: every path's body, selected by macros.
pub const SOURCE: &str = "attention/attn_fp4.cu";

/// Compile `path`'s kernel for `arch` (`sm_90`, `sm_120a`, ...), headers from `kernels/` (the
/// sources embedded in the binary, or `$FP4PROBE_KERNELS`: `crate::kernels::tree`): its first
/// variant.
pub fn compile(path: KernelPath, arch: &str) -> Result<nvrtc::Compiled> {
    compile_variant(path.variants()[0], arch)
}

/// Compile one variant of a path's kernel for `arch`.
pub fn compile_variant(variant: Variant, arch: &str) -> Result<nvrtc::Compiled> {
    let path = variant.path;
    let tree = crate::kernels::tree()?;
    let src = tree.read(SOURCE)?;
    let mut options = vec![
        format!("--gpu-architecture={arch}"),
        "-std=c++17".to_string(),
        format!("--include-path={}", tree.path().display()),
    ];
    options.extend(variant.defines().iter().map(|d| format!("-D{d}")));
    options.extend(path.defines().iter().map(|d| format!("-D{d}")));
    // Tuning experiments: extra macros for the kernel source, space-separated (NAME or
    // NAME=VALUE), e.g. FP4PROBE_ATTN_DEFINES=ATTN_DECODE_LUT.
    if let Ok(defs) = std::env::var("FP4PROBE_ATTN_DEFINES") {
        options.extend(
            defs.split_whitespace()
                .filter(|d| !d.starts_with("ATTN_WG_CONSUMERS=")) // already in variant.defines()
                .map(|d| format!("-D{d}")),
        );
    }
    nvrtc::compile(&src, SOURCE, &options, Output::Cubin)
}

/// The on-the-fly path's kernels in the attention module.
const PRE_PASSES: [&str; 5] = [
    "transpose_pad_16bit",
    "transpose_pad_32bit",
    "smooth_k_f32",
    "smooth_k_bf16",
    "smooth_k_f16",
];

/// The loaded kernel.
pub struct AttentionKernel<'a> {
    backend: &'a CudaBackend,
    path: KernelPath,
    /// Each variant of the path with its module (`KernelPath::variants`).
    modules: Vec<(Variant, PtxModule)>,
    /// Multiprocessors, for `Variant::pick`.
    sms: usize,
    /// The on-the-fly path's pre-passes, by name (`transpose_pad_16bit`, `smooth_k_bf16`, ...).
    pre_passes: Vec<(&'static str, sys::CUfunction)>,
    /// The wgmma body's stream-K workspace, allocated by the first launch that needs it.
    /// Launches on this kernel's stream share it (one at a time on the device).
    workspace: Mutex<Option<Workspace>>,
}

/// Where the wgmma body's cut row blocks finish (`StreamK::counter_bytes`, `partial_bytes`).
struct Workspace {
    counters: DeviceBuffer,
    partials: DeviceBuffer,
}

/// Q, K, V on the device and the output buffer, for repeated launches.
pub struct DeviceQkv {
    pub shape: AttnShape,
    pub format: Format,
    /// Codes and scales of Q, K, Vᵀ.
    pub bufs: [DeviceBuffer; 6],
    /// The tensor scales of Q, K, V (three f32; 1 for MXFP4).
    pub tensor_scales: DeviceBuffer,
    pub out: DeviceBuffer,
}

impl DeviceQkv {
    pub fn upload(backend: &CudaBackend, qkv: &QuantizedQkv) -> Result<Self> {
        let s = qkv.shape;
        let up = |b: &[u8], what: &str| DeviceBuffer::from_bytes(backend, b, what);
        let bufs = [
            up(&qkv.q_data, "q codes")?,
            up(&qkv.q_scale, "q scales")?,
            up(&qkv.k_data, "k codes")?,
            up(&qkv.k_scale, "k scales")?,
            up(&qkv.v_data, "v codes")?,
            up(&qkv.v_scale, "v scales")?,
        ];
        let out = DeviceBuffer::zeroed(
            backend,
            s.batch * s.heads * s.seq_q * s.head_dim * 4,
            "attention output",
        )?;
        let ts = [qkv.q_tensor_scale, qkv.k_tensor_scale, qkv.v_tensor_scale].map(f32::to_bits);
        Ok(DeviceQkv {
            shape: s,
            format: qkv.format,
            bufs,
            tensor_scales: DeviceBuffer::from_words(backend, &ts, "tensor scales")?,
            out,
        })
    }
}

impl<'a> AttentionKernel<'a> {
    /// Compile the fastest path for this device and `head_dim` (`KernelPath::for_device`)
    /// and load it.
    pub fn load(backend: &'a CudaBackend, head_dim: usize) -> Result<Self> {
        Self::load_path(
            backend,
            KernelPath::for_device(backend.compute_capability().0, head_dim),
        )
    }

    /// Compile `path` for this device and load it.
    pub fn load_path(backend: &'a CudaBackend, path: KernelPath) -> Result<Self> {
        let (major, minor) = backend.compute_capability();
        let arch = path.arch(major, minor)?;
        let mut modules = Vec::new();
        for variant in path.variants() {
            let image = compile_variant(variant, &arch).with_context(|| {
                format!(
                    "compiling kernels/{SOURCE} ({}, {variant:?}) for {arch}",
                    path.body()
                )
            })?;
            let module = backend.load_cubin(&image.image)?;
            for &format in path.formats() {
                for &d in path.head_dims() {
                    let smem = variant.dynamic_smem(d);
                    if smem > 0 {
                        let f = module.function(&entry(format, d))?;
                        // SAFETY: `f` belongs to `module`, just loaded into the backend's context.
                        unsafe { backend.set_max_dynamic_smem(f, smem as u32)? };
                    }
                }
            }
            modules.push((variant, module));
        }
        let pre_passes = PRE_PASSES
            .iter()
            .map(|&name| Ok((name, modules[0].1.function(name)?)))
            .collect::<Result<_>>()?;
        Ok(AttentionKernel {
            backend,
            path,
            modules,
            sms: backend.sm_count()? as usize,
            pre_passes,
            workspace: Mutex::new(None),
        })
    }

    pub fn path(&self) -> KernelPath {
        self.path
    }

    /// The variant a launch of `shape` in `format` runs.
    pub fn variant_for(&self, shape: &AttnShape, format: Format) -> Variant {
        let variants: Vec<Variant> = self.modules.iter().map(|(v, _)| *v).collect();
        Variant::pick(&variants, shape, self.sms, format)
    }

    /// The device pointers of a workspace for `schedule` run by `consumers` consumer
    /// warpgroups at `head_dim`: the per-row-block counters (zeroed when allocated; the kernel
    /// leaves them at 0) and the partial results. Grown when a launch needs more.
    fn workspace(
        &self,
        schedule: &StreamK,
        consumers: usize,
        head_dim: usize,
    ) -> Result<(sys::CUdeviceptr, sys::CUdeviceptr)> {
        let counters = schedule.counter_bytes(consumers);
        let partials = schedule.partial_bytes(consumers, head_dim);
        let mut ws = self.workspace.lock().unwrap_or_else(|e| e.into_inner());
        let fits = ws
            .as_ref()
            .is_some_and(|w| w.counters.bytes() >= counters && w.partials.bytes() >= partials);
        if !fits {
            // The old buffers may still be in use by launches in flight.
            self.backend.synchronize()?;
            let old = ws.take();
            let (c0, p0) = old.map_or((0, 0), |w| (w.counters.bytes(), w.partials.bytes()));
            *ws = Some(Workspace {
                counters: DeviceBuffer::zeroed(
                    self.backend,
                    counters.max(c0),
                    "stream-K counters",
                )?,
                partials: DeviceBuffer::zeroed(
                    self.backend,
                    partials.max(p0),
                    "stream-K partial results",
                )?,
            });
        }
        let w = ws.as_ref().expect("allocated above");
        Ok((w.counters.ptr(), w.partials.ptr()))
    }

    /// The variants this kernel holds.
    pub fn variants(&self) -> impl Iterator<Item = Variant> + '_ {
        self.modules.iter().map(|(v, _)| *v)
    }

    fn module_of(&self, variant: Variant) -> &PtxModule {
        &self
            .modules
            .iter()
            .find(|(v, _)| *v == variant)
            .expect("variant_for picks one of the loaded variants")
            .1
    }

    fn pre_pass(&self, name: &str) -> Result<sys::CUfunction> {
        match self.pre_passes.iter().find(|(n, _)| *n == name) {
            Some(&(_, f)) => Ok(f),
            None => bail!("{name} is not one of the attention module's pre-passes"),
        }
    }

    /// Enqueue one forward pass (no wait).
    pub fn enqueue(&self, dev: &DeviceQkv) -> Result<()> {
        let ptrs = dev.bufs.each_ref().map(|b| b.ptr());
        self.enqueue_raw(&dev.shape, dev.format, ptrs, &dev.tensor_scales, &dev.out)
    }

    /// Enqueue one forward pass over operands anywhere on the device: `ops` are the codes and
    /// scales of Q, K, Vᵀ (in that order, laid out as `QuantizedQkv` describes: K and Vᵀ with
    /// `s.kv_heads` heads), `ts` three f32 tensor scales, `out` [B,H,Sq,D] f32.
    pub fn enqueue_raw(
        &self,
        s: &AttnShape,
        format: Format,
        ops: [sys::CUdeviceptr; 6],
        ts: &DeviceBuffer,
        out: &DeviceBuffer,
    ) -> Result<()> {
        self.path.check_format(format)?;
        self.path.check_head_dim(s.head_dim)?;
        let bh = s.batch * s.heads;
        let variant = self.variant_for(s, format);
        let f = self
            .module_of(variant)
            .function(&entry(format, s.head_dim))?;
        // The wgmma body: a persistent grid walking its stream-K schedule; the others: one
        // CTA per row block and head.
        let (grid, counters, partials) = match variant.schedule(s, self.sms) {
            Some(schedule) => {
                let (c, p) = self.workspace(&schedule, variant.consumers, s.head_dim)?;
                ((schedule.ctas, 1), c, p)
            }
            None => {
                if bh > 65535 {
                    bail!("batch × heads = {bh} exceeds the grid's y limit 65535");
                }
                ((s.seq_q.div_ceil(variant.rows_per_cta()), bh), 0, 0)
            }
        };
        if out.bytes() < s.q_len() * 4 || ts.bytes() < 12 {
            bail!("output or tensor-scale buffer too small for {s}");
        }
        let u = |v: usize, what: &str| {
            u32::try_from(v).with_context(|| format!("{what} {v} does not fit in 32 bits"))
        };
        let mut args: Vec<KernelArg> = ops.iter().map(|&p| KernelArg::Ptr(p)).collect();
        args.push(KernelArg::Ptr(out.ptr()));
        args.extend([
            KernelArg::U32(u(s.seq_q, "seq_q")?),
            KernelArg::U32(u(s.seq_k, "seq_k")?),
            KernelArg::U32(u(s.seq_k_padded(), "padded seq_k")?),
            KernelArg::U32(s.causal as u32),
            KernelArg::Ptr(ts.ptr()),
            KernelArg::U32(score_scale_log2(s.head_dim).to_bits()),
            KernelArg::U32(u(bh, "batch × heads")?),
            KernelArg::Ptr(counters),
            KernelArg::Ptr(partials),
            KernelArg::U32(u(s.group(), "Q heads per K/V head")?),
        ]);
        // SAFETY: attn_{fmt}_dD(6 × const u8*, float*, u32 Sq, u32 Sk, u32 Skp, u32 causal,
        // const float* ts, u32 c0_bits, u32 bh_count, u32* counters, float* partials,
        // u32 kv_group): the caller's buffers hold the operands of `s` in `format`
        // (QuantizedQkv's layout, K and Vᵀ with batch·kv_heads heads, kv_group = heads /
        // kv_heads), `out` and `ts` are checked above; the grid covers seq_q and batch·heads
        // (the wgmma body's schedule all of them, its workspace sized for it); the dynamic
        // shared memory is the body's (allowed in load_path).
        unsafe {
            self.backend.launch_3d_smem(
                f,
                (u(grid.0, "grid")?, u(grid.1, "grid")?, 1),
                (variant.threads() as u32, 1),
                variant.dynamic_smem(s.head_dim) as u32,
                &args,
            )
        }
    }

    /// Run once and read O back ([B, H, Sq, D] f32).
    pub fn run(&self, qkv: &QuantizedQkv) -> Result<Vec<f32>> {
        let dev = DeviceQkv::upload(self.backend, qkv)?;
        self.enqueue(&dev)?;
        self.backend.synchronize()?;
        let n = dev.out.bytes() / 4;
        let words = dev.out.read_u32(n)?;
        Ok(words.into_iter().map(f32::from_bits).collect())
    }

    pub fn backend(&self) -> &CudaBackend {
        self.backend
    }

    /// Registers, spill (local) bytes and shared memory of `variant`'s entry for `head_dim`.
    pub fn resources(
        &self,
        variant: Variant,
        format: Format,
        head_dim: usize,
    ) -> Result<Resources> {
        use cudarc::driver::sys::CUfunction_attribute as A;
        let f = self.module_of(variant).function(&entry(format, head_dim))?;
        // SAFETY: `f` belongs to this module, which is loaded in the backend's context.
        let get = |a| unsafe { self.backend.function_attribute(f, a) };
        Ok(Resources {
            registers: get(A::CU_FUNC_ATTRIBUTE_NUM_REGS)?,
            local_bytes: get(A::CU_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES)?,
            shared_bytes: get(A::CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES)?,
            dynamic_shared_bytes: variant.dynamic_smem(head_dim),
            threads: variant.threads(),
        })
    }
}

/// What one CTA of the kernel holds.
#[derive(Clone, Copy, Debug)]
pub struct Resources {
    pub registers: i32,
    pub local_bytes: i32,
    pub shared_bytes: i32,
    pub dynamic_shared_bytes: usize,
    pub threads: usize,
}

impl std::fmt::Display for Resources {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} registers/thread, {} bytes local (spill) memory/thread, {} bytes shared memory/CTA, {} threads/CTA",
            self.registers,
            self.local_bytes,
            self.shared_bytes as usize + self.dynamic_shared_bytes,
            self.threads
        )
    }
}

/// The on-the-fly path: bf16, f16 or f32 Q [B,H,Sq,D], K and V [B,Hkv,Sk,D] on the device,
/// quantized there by the quantizer's kernels (Q, K along D; V transposed and padded by
/// `transpose_pad_16bit` or `_32bit`, then along the keys), then the attention kernel. With
/// `smooth_k`, K's channel means are subtracted first on the GPU (`smooth_k_*`, into an f32 K'
/// that is quantized instead). Same bytes as `prequantize` of the widened inputs, so the same
/// O.
pub struct OnTheFly {
    pub shape: AttnShape,
    pub format: Format,
    in_type: InType,
    q: DeviceQuant,
    /// K as uploaded, when it is smoothed before quantization (else K is `k.input`).
    k_raw: Option<DeviceBuffer>,
    k: DeviceQuant,
    v: DeviceBuffer,
    vt: DeviceQuant,
    ts: DeviceBuffer,
    pub out: DeviceBuffer,
}

impl OnTheFly {
    /// Upload Q, K, V (little-endian elements of `in_type`) and allocate everything.
    #[allow(clippy::too_many_arguments)]
    pub fn upload(
        backend: &CudaBackend,
        shape: &AttnShape,
        format: Format,
        in_type: InType,
        smooth_k: bool,
        q: &[u8],
        k: &[u8],
        v: &[u8],
    ) -> Result<Self> {
        let block = format.block();
        let vt_elems = shape.vt_len();
        let vt_in = DeviceBuffer::zeroed(backend, vt_elems * in_type.size(), "Vᵀ")?;
        let (k_raw, k) = if smooth_k {
            let k_elems = k.len() / in_type.size();
            let smoothed = DeviceBuffer::zeroed(backend, k_elems * 4, "smoothed K")?;
            (
                Some(DeviceBuffer::from_bytes(backend, k, "K")?),
                DeviceQuant::on_device(backend, InType::F32, smoothed, k_elems, block)?,
            )
        } else {
            (None, DeviceQuant::upload(backend, in_type, k, block)?)
        };
        Ok(OnTheFly {
            shape: *shape,
            format,
            in_type,
            q: DeviceQuant::upload(backend, in_type, q, block)?,
            k_raw,
            k,
            v: DeviceBuffer::from_bytes(backend, v, "V")?,
            vt: DeviceQuant::on_device(backend, in_type, vt_in, vt_elems, block)?,
            ts: DeviceBuffer::from_words(backend, &[1.0f32.to_bits(); 3], "tensor scales")?,
            out: DeviceBuffer::zeroed(backend, shape.q_len() * 4, "attention output")?,
        })
    }

    fn spec(&self) -> Spec {
        match self.format {
            Format::Mxfp4 => Spec::mxfp4(ScaleMode::Floor),
            Format::Nvfp4 => Spec::nvfp4(NvLevels::TwoLevel),
        }
    }

    /// Enqueue K smoothing (if asked), quantization of Q, K, Vᵀ and the attention kernel (no
    /// wait).
    pub fn enqueue(&self, quant: &QuantKernels, attn: &AttentionKernel) -> Result<()> {
        let s = &self.shape;
        let spec = self.spec();
        let u = |v: usize| u32::try_from(v).context("size does not fit in 32 bits");
        quant.enqueue(&spec, &self.q)?;
        if let Some(k_raw) = &self.k_raw {
            let f = attn.pre_pass(&format!("smooth_k_{}", self.in_type.name()))?;
            let args = [
                KernelArg::Ptr(k_raw.ptr()),
                KernelArg::Ptr(self.k.input.ptr()),
                KernelArg::U32(u(s.seq_k)?),
                KernelArg::U32(u(s.head_dim)?),
            ];
            // SAFETY: smooth_k_*(const void* k, float* out, u32 Sk, u32 D): k holds
            // [kv_bh][Sk][D] elements of in_type, out as many f32 (allocated from the same
            // shape); one CTA per K head, one thread per channel (D <= 256).
            unsafe {
                attn.backend
                    .launch(f, u(s.kv_bh())?, u(s.head_dim)?, &args)?
            };
        }
        quant.enqueue(&spec, &self.k)?;
        let transpose = attn.pre_pass(if self.in_type == InType::F32 {
            "transpose_pad_32bit"
        } else {
            "transpose_pad_16bit"
        })?;
        let args = [
            KernelArg::Ptr(self.v.ptr()),
            KernelArg::Ptr(self.vt.input.ptr()),
            KernelArg::U32(u(s.seq_k)?),
            KernelArg::U32(u(s.seq_k_padded())?),
            KernelArg::U32(u(s.head_dim)?),
        ];
        let grid = (
            u(s.seq_k_padded() / 32)?,
            u(s.head_dim / 32)?,
            u(s.kv_bh())?,
        );
        // SAFETY: transpose_pad_{16,32}bit(const T* v, T* vt, u32 Sk, u32 Skp, u32 D): v holds
        // [kv_bh][Sk][D] and vt [kv_bh][D][Skp] elements of in_type (allocated from the same
        // shape); the grid covers Skp/32 × D/32 × kv_bh tiles of 32 × 32.
        unsafe { attn.backend.launch_3d(transpose, grid, (32, 8), &args)? };
        quant.enqueue(&spec, &self.vt)?;
        if spec.two_level() {
            for (i, t) in [&self.q, &self.k, &self.vt].into_iter().enumerate() {
                self.ts.copy_range_from_async(4 * i, &t.tensor_scale, 4)?;
            }
        }
        let ops = [
            &self.q.data,
            &self.q.scale,
            &self.k.data,
            &self.k.scale,
            &self.vt.data,
            &self.vt.scale,
        ]
        .map(|b| b.ptr());
        attn.enqueue_raw(s, self.format, ops, &self.ts, &self.out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_pick_their_targets_and_refuse_the_wrong_device() {
        assert_eq!(KernelPath::for_device(9, 128), KernelPath::Wgmma);
        assert_eq!(KernelPath::for_device(9, 64), KernelPath::Wgmma);
        assert_eq!(KernelPath::for_device(9, 256), KernelPath::Bf16);
        assert_eq!(KernelPath::for_device(10, 128), KernelPath::Bf16);
        assert_eq!(KernelPath::for_device(12, 128), KernelPath::BlockScale);
        assert_eq!(KernelPath::Wgmma.arch(9, 0).unwrap(), "sm_90a");
        let e = KernelPath::Wgmma.arch(12, 0).unwrap_err().to_string();
        assert!(e.contains("needs sm_90a") && e.contains("sm_120"), "{e}");
        let e = KernelPath::Wgmma
            .check_head_dim(256)
            .unwrap_err()
            .to_string();
        assert!(e.contains("--path bf16") && e.contains("256"), "{e}");
        assert!(KernelPath::Bf16.check_head_dim(256).is_ok());
        let [two, three] = KernelPath::Wgmma.variants()[..] else {
            panic!("wgmma has two variants")
        };
        assert_eq!((two.rows_per_cta(), two.threads()), (128, 384));
        assert_eq!((three.rows_per_cta(), three.threads()), (192, 512));
        assert_eq!(two.dynamic_smem(128), 2 * 32768 + 3 * 32768);
        assert_eq!(three.dynamic_smem(64), 2 * 24576 + 3 * 32768);
        assert_eq!(KernelPath::Bf16.variants().len(), 1);
        assert_eq!(KernelPath::Bf16.arch(9, 0).unwrap(), "sm_90");
        assert_eq!(KernelPath::BlockScale.arch(12, 0).unwrap(), "sm_120a");
        assert_eq!(KernelPath::BlockScaleEmulated.arch(9, 0).unwrap(), "sm_90");
        let e = KernelPath::BlockScale.arch(9, 0).unwrap_err().to_string();
        assert!(e.contains("needs sm_120a") && e.contains("sm_90"), "{e}");
        let e = KernelPath::BlockScaleK32
            .arch(9, 0)
            .unwrap_err()
            .to_string();
        assert!(e.contains("block-scale-k32-emulated"), "{e}");
        assert!(
            KernelPath::BlockScaleK32
                .check_format(Format::Mxfp4)
                .is_ok()
        );
        let e = KernelPath::BlockScaleK32
            .check_format(Format::Nvfp4)
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("MXFP4 only") && e.contains("--path block-scale"),
            "{e}"
        );
        let e = KernelPath::Bf16.arch(8, 6).unwrap_err().to_string();
        assert!(e.contains("sm_90 or later") && e.contains("sm_86"), "{e}");
    }

    #[test]
    fn three_consumer_warpgroups_unless_their_row_blocks_run_past_the_rows() {
        let v = KernelPath::Wgmma.variants();
        let shape = |seq, heads, d| AttnShape::new(1, heads, seq, seq, d, false).unwrap();
        let pick =
            |seq, heads, d, format| Variant::pick(&v, &shape(seq, heads, d), 132, format).consumers;
        // The persistent schedule balances the CTAs' tiles whatever the grid (S = 4096: 341 or
        // 342 of 64 keys each), so the 192-row blocks' per-row gain decides, less the rows a
        // head's last block runs past seq_q: 4096 = 21⅓ blocks of 192.
        for format in [Format::Mxfp4, Format::Nvfp4] {
            for d in [64, 128] {
                assert_eq!(pick(4096, 32, d, format), 3, "{format:?} d={d}");
                assert_eq!(pick(16384, 32, d, format), 3, "{format:?} d={d}");
            }
        }
        // S = 1024: 256 row blocks of 128 fill two waves with one CTA each (the grid beats the
        // persistent schedule's segment costs), 5⅓ blocks of 192 a head do not; two win.
        for format in [Format::Mxfp4, Format::Nvfp4] {
            for d in [64, 128] {
                let s = AttnShape::new(1, 32, 1024, 1024, d, false).unwrap();
                let v = Variant::pick(&v, &s, 132, format);
                assert_eq!(v.consumers, 2, "{format:?} d={d}");
                assert_eq!(v.schedule(&s, 132).unwrap().ctas, 256, "{format:?} d={d}");
            }
        }
        let three = Variant {
            path: KernelPath::Wgmma,
            consumers: 3,
        };
        let e = three.wave_efficiency(&shape(4096, 32, 128), 132);
        let s = three.schedule(&shape(4096, 32, 128), 132).unwrap();
        assert!(
            (e - 4096.0 / (22.0 * 192.0) * s.efficiency(132)).abs() < 1e-12,
            "{e}"
        );
        // The grid of one CTA per row block (bf16 body): 704 CTAs, 6 waves of 132.
        let bf16 = KernelPath::Bf16.variants()[0];
        let e = bf16.wave_efficiency(&shape(4096, 32, 128), 132);
        let ctas = 4096usize.div_ceil(bf16.rows_per_cta()) * 32;
        assert!(
            (e - ctas as f64 / (ctas.div_ceil(132) * 132) as f64).abs() < 1e-12,
            "{e}"
        );
    }

    #[test]
    fn one_source_includes_both_bodies_and_declares_every_entry_point() {
        let src = crate::kernels::embedded(SOURCE).unwrap();
        for path in [KernelPath::Bf16, KernelPath::Wgmma, KernelPath::BlockScale] {
            assert!(
                crate::kernels::embedded(path.body()).is_some(),
                "{}",
                path.body()
            );
            assert!(src.contains(&format!("#include \"{}\"", path.body())));
            for &format in path.formats() {
                for &d in path.head_dims() {
                    let e = entry(format, d);
                    assert!(
                        src.contains(&format!("ATTN_ENTRY({e},")),
                        "{SOURCE} lacks {e}"
                    );
                }
            }
        }
        assert!(src.contains("attn_prepasses.cuh"));
        for path in [
            KernelPath::BlockScaleEmulated,
            KernelPath::BlockScaleK32,
            KernelPath::BlockScaleK32Emulated,
        ] {
            assert!(path.defines().contains(&"ATTN_BLOCK_SCALE"));
            assert_eq!(
                path.emulated(),
                path.defines().contains(&"ATTN_EMULATE_BLOCK_SCALE")
            );
        }
    }
}
