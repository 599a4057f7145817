//! Which attention kernel runs (`KernelPath`: the bodies of `kernels/attention/attn_fp4.cu`)
//! and in which compiled form (`Variant`: the wgmma bodies' consumer warpgroups): their
//! targets, head dimensions, launch geometry and shared memory, the choice per device and
//! launch, and their compilation with NVRTC.

use super::AttnShape;
use super::schedule::StreamK;
use crate::codegen::nvrtc::{self, Output};
use crate::quant::Format;
use anyhow::{Result, bail};
use clap::ValueEnum;

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
    /// `attn_wgmma_fp8.cuh`: FP4 widened to E4M3 in shared memory (one power-of-two factor
    /// per row), both products on FP8 `wgmma` m64nNk32 `.e4m3`, P in E4M3: the arithmetic of
    /// `docs/attention-fp8.md` (`fp8::reference_fp8`, not the bf16 paths'); sm_90a, head_dim
    /// 64 and 128.
    WgmmaFp8,
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
            KernelPath::WgmmaFp8 => "attention/attn_wgmma_fp8.cuh",
            _ => "attention/attn_block_scale.cuh",
        }
    }

    /// The macros that select this path's body and instruction in `SOURCE`.
    pub fn defines(self) -> &'static [&'static str] {
        match self {
            KernelPath::Bf16 => &[],
            KernelPath::Wgmma => &["ATTN_WGMMA"],
            KernelPath::WgmmaFp8 => &["ATTN_WGMMA_FP8"],
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
            KernelPath::Wgmma | KernelPath::WgmmaFp8 => &[64, 128],
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
            fp8_widen_once: false,
        };
        let fp8 = |once| Variant {
            fp8_widen_once: once,
            ..one(2)
        };
        match (self, experiment_define("ATTN_WG_CONSUMERS")) {
            (KernelPath::Wgmma, Some(c)) => vec![one(c)],
            (KernelPath::Wgmma, None) => vec![one(2), one(3)],
            (KernelPath::WgmmaFp8, _) => match experiment_define("ATTN_FP8_WIDEN_ONCE") {
                Some(v) => vec![fp8(v != 0)],
                None => vec![fp8(false), fp8(true)],
            },
            _ => vec![one(0)],
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            KernelPath::Bf16 => "bf16",
            KernelPath::Wgmma => "wgmma",
            KernelPath::WgmmaFp8 => "wgmma-fp8",
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

    /// The bodies on Hopper's warpgroup MMA: sm_90a only, persistent and stream-K, a producer
    /// warpgroup and consumer warpgroups.
    pub fn is_wgmma(self) -> bool {
        matches!(self, KernelPath::Wgmma | KernelPath::WgmmaFp8)
    }

    /// Computes `fp8::reference_fp8`'s arithmetic (E4M3 operands and P) instead of
    /// `reference_quantized`'s.
    pub fn is_fp8(self) -> bool {
        self == KernelPath::WgmmaFp8
    }

    /// Keys per tile of the wgmma bodies (`Geo<D>::BC`, `Geo8<D>::BC`): their S accumulator
    /// (BC/2 registers) and O's (D/2) share the consumers' registers.
    pub fn keys_per_tile(self, head_dim: usize) -> usize {
        if head_dim == 64 { 128 } else { 64 }
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
        if self.is_wgmma() && major != 9 {
            bail!(
                "the wgmma attention kernel needs sm_90a (wgmma.mma_async exists on Hopper only); \
                 this device is sm_{major}{minor}. Use --path bf16"
            );
        }
        let suffix = if major >= 10 || self.is_wgmma() {
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

/// One compiled form of a path: for the wgmma bodies, their number of consumer warpgroups (64
/// query rows each; 0 for the other bodies), and for the FP8 body where K and Vᵀ are widened
/// (`fp8_widen_once`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Variant {
    pub path: KernelPath,
    pub consumers: usize,
    /// `ATTN_FP8_WIDEN_ONCE`: K and Vᵀ widened once per launch into a workspace, not per CTA.
    pub fp8_widen_once: bool,
}

/// Three consumer warpgroups against two, per CTA-row of work (each K/V tile is decoded once
/// for 192 rows instead of 128), measured A/B in one run on the H100 at B=1, H=32, S = 4096
/// and 16384 and divided by the ratio of the wave efficiencies
/// (reports/sm_90/attention/experiments/consumers-overlap; with the shorter requantization of
/// P: experiments/consumers-after-p-requant): NVFP4 d = 128 1.18 (1.11–1.19 with the shorter
/// requantization), MXFP4 d = 128 1.15 (1.09–1.16); at d = 64 NVFP4 1.06 (1.00–1.09), MXFP4
/// 1.09 (1.05–1.12).
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
            KernelPath::Wgmma | KernelPath::WgmmaFp8 => 128 * (self.consumers + 1),
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
            KernelPath::Wgmma | KernelPath::WgmmaFp8 => 4 * self.consumers,
            _ => warps(),
        }
    }

    /// Dynamic shared memory per CTA: the wgmma bodies' two decoded Q tiles (one per row
    /// block in flight) and their ring of `ATTN_STAGES` decoded K and Vᵀ tiles (`Geo<D>::SMEM`
    /// in attn_wgmma.cuh, `Geo8<D>::SMEM` in attn_fp8_geometry.cuh, which trap if given less; the
    /// FP8 body's stages start on 1024-byte boundaries; at head_dim 128 they are followed by
    /// the atom of ones rows, 8 keys wide, and each consumer warp's O staging, 16 rows of f32,
    /// at 64 each stage ends with its own ones atom); the other bodies use static shared memory
    /// only.
    pub fn dynamic_smem(self, head_dim: usize) -> usize {
        let keys = self.keys_per_tile(head_dim);
        let rows = self.rows_per_cta();
        let q = rows * head_dim;
        match self.path {
            KernelPath::Wgmma => 2 * (2 * q) + self.stages() * (2 * keys * head_dim * 2),
            KernelPath::WgmmaFp8 if head_dim == FP8_O_TMA_HEAD_DIM => {
                2 * q
                    + self.stages() * (2 * keys * head_dim).next_multiple_of(1024)
                    + (8 * keys).next_multiple_of(1024)
                    + rows * head_dim * 4
            }
            KernelPath::WgmmaFp8 => {
                2 * q + self.stages() * (2 * keys * head_dim + 8 * keys).next_multiple_of(1024)
            }
            _ => 0,
        }
    }

    /// The macros beyond the path's: the launch geometry.
    fn defines(self) -> Vec<String> {
        let mut d = vec![format!("ATTN_WARPS={}", self.warps_macro())];
        if self.path.is_wgmma() {
            d.push(format!("ATTN_WG_CONSUMERS={}", self.consumers));
        }
        if self.fp8_widen_once {
            d.push("ATTN_FP8_WIDEN_ONCE=1".into());
        }
        if self.path.is_fp8() && experiment_define("ATTN_STAGES").is_none() {
            d.push(format!("ATTN_STAGES={}", self.stages()));
        }
        if self.path.is_fp8() {
            d.push(format!("ATTN_FP8_O_TMA_D={FP8_O_TMA_HEAD_DIM}"));
        }
        if self.path.is_fp8() && experiment_define("ATTN_FP8_BC_D128").is_none() {
            d.push(format!("ATTN_FP8_BC_D128={}", self.keys_per_tile(128)));
        }
        d
    }

    /// The wgmma bodies' ring of key tiles (`ATTN_STAGES` in attn_wgmma_pipeline.cuh, which an
    /// experiment may set): 3 for the bf16 body; for the FP8 one `FP8_STAGES`, or where it
    /// widens once (tiles of twice the bytes at head_dim 128) `FP8_ONCE_STAGES`.
    pub fn stages(self) -> usize {
        let fp8 = if self.fp8_widen_once {
            FP8_ONCE_STAGES
        } else {
            FP8_STAGES
        };
        experiment_define("ATTN_STAGES").unwrap_or(if self.path.is_fp8() { fp8 } else { 3 })
    }

    /// Keys per tile (`Geo<D>::BC`, `Geo8<D>::BC`): the path's, except where the FP8 body
    /// widens once at head_dim 128 (`ATTN_FP8_BC_D128`, which an experiment may set).
    pub fn keys_per_tile(self, head_dim: usize) -> usize {
        if self.path.is_fp8() && self.fp8_widen_once && head_dim == 128 {
            experiment_define("ATTN_FP8_BC_D128").unwrap_or(FP8_ONCE_KEYS_D128)
        } else {
            self.path.keys_per_tile(head_dim)
        }
    }

    /// The wgmma body's schedule of `shape` on `sms` multiprocessors, persistent or one CTA per
    /// row block, whichever `StreamK::efficiency` expects faster (None for the other bodies,
    /// which run a grid of one CTA per row block).
    pub fn schedule(self, shape: &AttnShape, sms: usize) -> Option<StreamK> {
        self.path.is_wgmma().then(|| {
            StreamK::best(
                shape,
                self.rows_per_cta(),
                self.keys_per_tile(shape.head_dim),
                sms,
            )
            .with_pair_waves(self.causal_pair_waves(shape))
            .with_dynamic(self.causal_dynamic())
        })
    }

    /// Whether a causal schedule may draw its row blocks whole at run time
    /// (`StreamK::with_dynamic`, which says where it does): the FP8 body's
    /// (attn_wgmma_fp8.cuh: `ATTN_CAUSAL_DYNAMIC`, on unless an experiment sets it to 0); the
    /// bf16 body's schedule cuts them.
    pub fn causal_dynamic(self) -> bool {
        self.path.is_fp8() && experiment_define("ATTN_CAUSAL_DYNAMIC").is_none_or(|v| v > 0)
    }

    /// Whether the schedule of `shape` deals causal pairs of row blocks out whole in waves,
    /// head-major (`StreamK::with_pair_waves`): the FP8 body's, where its E4M3 K and V exceed
    /// `PAIR_WAVES_MIN_KV_BYTES` (attn_wgmma_fp8.cuh: `ATTN_CAUSAL_PAIR_WAVES`, on unless an
    /// experiment sets it to 0); the bf16 body's schedule cuts them all.
    pub fn causal_pair_waves(self, shape: &AttnShape) -> bool {
        let kv_bytes = shape.kv_bh() * shape.seq_k * shape.head_dim * 2;
        self.path.is_fp8()
            && kv_bytes > PAIR_WAVES_MIN_KV_BYTES
            && experiment_define("ATTN_CAUSAL_PAIR_WAVES").is_none_or(|v| v > 0)
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

    /// " (2 consumer warpgroups, ...)" for a log line; empty for the bodies without variants.
    pub fn describe(self) -> String {
        match (self.consumers, self.path.is_fp8()) {
            (0, _) => String::new(),
            (c, false) => format!(" ({c} consumer warpgroups)"),
            (c, true) => format!(
                " ({c} consumer warpgroups, K/V widened {})",
                if self.fp8_widen_once {
                    "once per launch"
                } else {
                    "per CTA"
                }
            ),
        }
    }

    /// Of `variants`, those `fp8_widen_once` names for `shape` (every non-FP8 one), or all of
    /// them where none is named (an experiment fixed the other).
    fn fitting(variants: &[Variant], shape: &AttnShape) -> Vec<Variant> {
        let once = fp8_widen_once(shape);
        let fitting: Vec<Variant> = variants
            .iter()
            .filter(|v| !v.path.is_fp8() || v.fp8_widen_once == once)
            .copied()
            .collect();
        if fitting.is_empty() {
            variants.to_vec()
        } else {
            fitting
        }
    }

    /// Of `variants`, the one expected fastest for `shape` in `format`: for the FP8 body the
    /// one `fp8_widen_once` names where both are there; then the wave efficiency, times
    /// `three_consumer_gain` for three consumer warpgroups.
    pub fn pick(variants: &[Variant], shape: &AttnShape, sms: usize, format: Format) -> Variant {
        let variants = Self::fitting(variants, shape);
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

/// Whether the experiment's defines ask for the wgmma bodies' timeline (`ATTN_TIMELINE=1`:
/// attn_wgmma_pipeline.cuh; `AttentionKernel::print_timeline` prints it).
pub fn timeline_on() -> bool {
    experiment_define("ATTN_TIMELINE").is_some_and(|v| v > 0)
}

/// The FP8 body's ring of key tiles where the producer widens them per CTA (16 KiB tiles): at
/// d = 64 on the H200, 3, 4 and 6 stages ran within 2% of each other (B = 1, H = 32, one run of
/// `fp4probe attention --bench --path wgmma-fp8` per stage count).
const FP8_STAGES: usize = 6;

/// ... and where it widens once (tiles of 128 keys, 32 KiB at d = 128): 4 and 5 stages ran
/// within 1% of each other on the H200 (d = 128, S = 4096 and 16384, causal and not; one run,
/// reports/sm_90/attention/h200/fp8-once-geometry-side-by-side.csv).
const FP8_ONCE_STAGES: usize = 4;

/// Keys per tile of the FP8 body at head_dim 128 where it widens once. The producer only
/// issues one bulk copy a tile, so the consumers' 192 registers hold S of 128 keys (64) beside
/// O (64) without spilling, and each tile's fixed costs (barriers, turns, descriptors, l's
/// chain) spread over twice the scores. Side by side on the H200 (B = 1, H = 32, NVFP4–MXFP4,
/// TFLOP/s; fp8-once-geometry-side-by-side.csv), 64 keys in 6 stages against 128 in 4:
/// S = 4096 649–653 against 780–789 without the mask, 516–521 against 532–540 with it;
/// S = 16384 757–760 against 987–993, 707–723 against 771–819. With the producer at 56
/// registers (the consumers at 224), 128 keys ran 735–745 and 892–906 without the mask.
const FP8_ONCE_KEYS_D128: usize = 128;

/// `PAIR_WAVES_MIN_KV_BYTES` of attn_wgmma_fp8.cuh (which says why), for the host's copy of
/// the schedule.
pub const PAIR_WAVES_MIN_KV_BYTES: usize = 48 << 20;

/// The head_dim whose O the FP8 body stores through per-warp shared-memory slabs and bulk
/// tensor stores (`Geo8::O_TMA` in attn_fp8_geometry.cuh, given as `ATTN_FP8_O_TMA_D`), which
/// `dynamic_smem` sizes the slabs and the ring's ones atom for: 128; at 64 stores from registers
/// ran faster (reports/sm_90/attention/experiments/fp8-o-tma).
const FP8_O_TMA_HEAD_DIM: usize = 128;

/// Keys per tile of the FP8 body's variant for `s` (the one `Variant::pick` takes from
/// `KernelPath::WgmmaFp8.variants()`): its reference sums l per tile of that many keys.
pub fn fp8_keys_per_tile(s: &AttnShape) -> usize {
    Variant::fitting(&KernelPath::WgmmaFp8.variants(), s)[0].keys_per_tile(s.head_dim)
}

/// Whether the FP8 body should widen `s`'s K and Vᵀ once per launch, by the pre-pass into an
/// E4M3 workspace of key-tile images that the producer brings in with one bulk copy a tile,
/// rather than per CTA by its producer into shared memory (the variant with
/// `ATTN_FP8_WIDEN_ONCE`). Per CTA, every row block of a K/V head widens each K/V tile again
/// (2·D/128 widened elements per score element) and nothing but FP4 is stored; once costs a
/// pass over K and V and a workspace of twice their FP4 bytes. Side by side on the H200
/// (B = 1, H = 32, one run, per CTA against once with 64-key tiles at d = 128, TFLOP/s,
/// NVFP4–MXFP4; reports/sm_90/attention/h200/fp8-widening-side-by-side.csv): d = 64,
/// S = 1024 (8 row blocks of 128 queries per K/V head): 228–231 against 224–230 without the
/// mask, 110–114 against 109–110 with it; S = 2048: 321–336 against 356–357; S = 4096:
/// 391–401 against 496–499; S = 16384: 422–437 against 604–605. d = 128, S = 1024: 278–313
/// against 328–335. So once from 8 row blocks per K/V head (at d = 64 and 8 row blocks, per
/// CTA ran up to 3% faster); fewer were not measured, and there per CTA stores nothing but
/// FP4 and runs no pre-pass.
pub fn fp8_widen_once(s: &AttnShape) -> bool {
    s.seq_q.div_ceil(128) * s.group() >= 8
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn causal_pairs_go_in_waves_where_k_and_v_exceed_the_kernels_bound() {
        let source = include_str!("../../kernels/attention/attn_wgmma_fp8.cuh");
        assert!(
            source.contains("constexpr u64 PAIR_WAVES_MIN_KV_BYTES = 48ull << 20;")
                && PAIR_WAVES_MIN_KV_BYTES == 48 << 20,
            "the host's bound differs from the kernel's"
        );
        if experiment_define("ATTN_CAUSAL_PAIR_WAVES").is_some() {
            return;
        }
        let fp8 = KernelPath::WgmmaFp8.variants()[0];
        let bf16 = KernelPath::Wgmma.variants()[0];
        let causal = |seq, kv, d| {
            AttnShape::new(1, 32, seq, seq, d, true)
                .unwrap()
                .with_kv_heads(kv)
                .unwrap()
        };
        // E4M3 K and V: 128 MiB at S = 16384 (32 heads, d = 128), 32 MiB at S = 4096, 32 MiB
        // at S = 16384 with 8 K/V heads.
        assert!(fp8.causal_pair_waves(&causal(16384, 32, 128)));
        assert!(fp8.causal_pair_waves(&causal(16384, 32, 64)));
        assert!(!fp8.causal_pair_waves(&causal(4096, 32, 128)));
        assert!(!fp8.causal_pair_waves(&causal(16384, 8, 128)));
        assert!(!bf16.causal_pair_waves(&causal(16384, 32, 128)));
        let s = causal(16384, 32, 128);
        let sched = fp8.schedule(&s, 132).unwrap();
        assert!(sched.pair_waves, "{sched:?}");
    }

    #[test]
    fn the_fp8_body_draws_causal_row_blocks_where_they_do_not_go_in_waves() {
        if experiment_define("ATTN_CAUSAL_DYNAMIC").is_some()
            || experiment_define("ATTN_CAUSAL_PAIR_WAVES").is_some()
        {
            return;
        }
        let schedule = |path: KernelPath, seq, kv| {
            let s = AttnShape::new(1, 32, seq, seq, 128, true)
                .unwrap()
                .with_kv_heads(kv)
                .unwrap();
            let v = Variant::pick(&path.variants(), &s, 132, Format::Nvfp4);
            v.schedule(&s, 132).unwrap()
        };
        // Causal S = 4096 (32 or 8 K/V heads) draws; S = 16384 goes in waves; S = 1024 runs a
        // grid; the bf16 body cuts.
        assert!(schedule(KernelPath::WgmmaFp8, 4096, 32).dynamic);
        assert!(schedule(KernelPath::WgmmaFp8, 4096, 8).dynamic);
        let waves = schedule(KernelPath::WgmmaFp8, 16384, 32);
        assert!(waves.pair_waves && !waves.dynamic);
        assert!(!schedule(KernelPath::WgmmaFp8, 1024, 32).dynamic);
        assert!(!schedule(KernelPath::Wgmma, 4096, 32).dynamic);
    }

    #[test]
    fn the_fp8_body_widens_once_from_eight_row_blocks_per_kv_head() {
        if experiment_define("ATTN_FP8_WIDEN_ONCE").is_some() {
            return;
        }
        let variants = KernelPath::WgmmaFp8.variants();
        assert_eq!(variants.len(), 2);
        for (sq, heads, kv, once) in [
            (512, 32, 32, false),
            (1024, 32, 32, true),
            (16384, 32, 32, true),
            (256, 32, 16, false),
            (256, 32, 8, true),
            (1, 32, 32, false),
        ] {
            for d in [64, 128] {
                let s = AttnShape::new(1, heads, sq, 4096, d, false)
                    .unwrap()
                    .with_kv_heads(kv)
                    .unwrap();
                let v = Variant::pick(&variants, &s, 132, Format::Nvfp4);
                assert_eq!(v.fp8_widen_once, once, "Sq {sq}, {heads}/{kv} heads, d {d}");
                assert!(v.defines().contains(&"ATTN_FP8_WIDEN_ONCE=1".to_string()) == once);
                // The reference sums l over the tiles of the variant the kernel runs.
                assert_eq!(fp8_keys_per_tile(&s), v.keys_per_tile(d));
                if experiment_define("ATTN_FP8_BC_D128").is_none() {
                    assert_eq!(v.keys_per_tile(d), if d == 128 && !once { 64 } else { 128 });
                }
            }
        }
    }

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
        // FP8, widening once at head_dim 128: Q 2 × 16 KiB, four stages of 32 KiB, the ones
        // atom, O's staging 128 rows × 512 bytes; within the 227 KiB a CTA may take, with 2 KiB
        // left for the static shared memory (the kernel's, 1 KiB of it O's column weights,
        // rounded up to the dynamic part's 1024-byte alignment).
        for v in KernelPath::WgmmaFp8.variants() {
            for d in [64, 128] {
                assert!(v.dynamic_smem(d) + 2048 <= 232_448, "{v:?} d = {d}");
            }
            if v.fp8_widen_once && experiment_define("ATTN_STAGES").is_none() {
                assert_eq!(v.dynamic_smem(128), 2 * 16384 + 4 * 32768 + 1024 + 65536);
            }
        }
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
            fp8_widen_once: false,
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
