//! The fused FP4 attention kernels (`kernels/attention/attn_fp4.cu`), loaded and launched over
//! pre-quantized Q, K, V (`QuantizedQkv`), O read back as f32. One source, four kernel bodies
//! behind one interface (same entry points and arguments), chosen by `KernelPath`
//! (`super::paths`: targets, variants, compilation); the wgmma bodies in variants chosen per
//! launch.

pub use super::paths::{KernelPath, SOURCE, Variant, compile, compile_variant, entry, warps};
use super::reference::score_scale_log2;
use super::schedule::StreamK;
use super::{AttnShape, QuantizedQkv};
use crate::device::cuda::{After, CudaBackend, DeviceBuffer, KernelArg, PtxModule};
use crate::quant::Format;
use crate::quant::cuda::{DeviceQuant, InType, QuantKernels};
use crate::quant::{NvLevels, ScaleMode, Spec};
use anyhow::{Context, Result, bail};
use cudarc::driver::sys;
use std::sync::Mutex;

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
    /// The FP8 body's pre-pass per variant and format (`fp8_prepass_*` where the variant
    /// widens once, else `fp8_factors_*`), for that path only: each variant's from its own
    /// module, whose key tiles its widening lays out.
    fp8_passes: Vec<(Variant, Format, sys::CUfunction)>,
    /// The wgmma body's stream-K workspace, allocated by the first launch that needs it.
    /// Launches on this kernel's stream share it (one at a time on the device).
    workspace: Mutex<Option<Workspace>>,
    /// The FP8 body's workspace (`Fp8Workspace`), grown like the stream-K one.
    fp8_workspace: Mutex<Option<Fp8Buffer>>,
}

/// The FP8 body's workspace buffer and what the tensor map of O it holds was made for (its
/// offset in the buffer, the output's address, O's rows and head_dim): encoded and written only
/// when that changes, so a launch on the same output reads the one there.
struct Fp8Buffer {
    buf: DeviceBuffer,
    o_map: Option<OMapKey>,
}
type OMapKey = (usize, sys::CUdeviceptr, usize, usize);

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
        let mut fp8_passes = Vec::new();
        if path.is_fp8() {
            for (variant, m) in &modules {
                let pass = if variant.fp8_widen_once {
                    "prepass"
                } else {
                    "factors"
                };
                for &f in path.formats() {
                    let func = m.function(&format!("fp8_{pass}_{}", f.name()))?;
                    fp8_passes.push((*variant, f, func));
                }
            }
        }
        Ok(AttentionKernel {
            backend,
            path,
            modules,
            sms: backend.sm_count()? as usize,
            pre_passes,
            fp8_passes,
            workspace: Mutex::new(None),
            fp8_workspace: Mutex::new(None),
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

    /// The tensor map through which the FP8 body stores O (attn_wgmma_fp8.cuh,
    /// `store_rows_tma`): `out` as [B·H·Sq rows][D] f32, boxes of 16 rows × 32 columns
    /// (128 bytes, the 128B swizzle's row).
    fn o_tensor_map(&self, s: &AttnShape, out: &DeviceBuffer) -> Result<[u8; 128]> {
        let rows = s.bh() * s.seq_q;
        // The kernel's box coordinates are signed 32-bit.
        if i32::try_from(rows).is_err() {
            bail!("batch × heads × seq_q = {rows} rows of O exceed the tensor map's 2^31 rows");
        }
        self.backend.encode_tensor_map_2d(
            sys::CUtensorMapDataType::CU_TENSOR_MAP_DATA_TYPE_FLOAT32,
            out.ptr(),
            [s.head_dim as u64, rows as u64],
            (s.head_dim * 4) as u64,
            [32, 16],
            sys::CUtensorMapSwizzle::CU_TENSOR_MAP_SWIZZLE_128B,
        )
    }

    /// The FP8 body's pre-pass for `s`'s operands (`ops` as `enqueue_raw` takes them),
    /// enqueued into its workspace (grown as needed), whose device pointer is returned: the row
    /// factors, and for a `variant` that widens once, K and Vᵀ widened to E4M3 in the same
    /// launch (`fp8_prepass_*`); and O's tensor map over `out`.
    fn enqueue_fp8_passes(
        &self,
        s: &AttnShape,
        format: Format,
        variant: Variant,
        ops: &[sys::CUdeviceptr; 6],
        out: &DeviceBuffer,
    ) -> Result<sys::CUdeviceptr> {
        let found = self
            .fp8_passes
            .iter()
            .find(|(v, f, _)| *v == variant && *f == format);
        let pass = match found {
            Some(&(_, _, pass)) => pass,
            None => bail!("no FP8 pre-pass for {} in {variant:?}", format.name()),
        };
        let keys_per_tile = variant.keys_per_tile(s.head_dim);
        let once = variant.fp8_widen_once;
        let ws = Fp8Workspace::of(s, keys_per_tile, once);
        let o_map: OMapKey = (ws.o_map, out.ptr(), s.bh() * s.seq_q, s.head_dim);
        let mut guard = self.fp8_workspace.lock().unwrap_or_else(|e| e.into_inner());
        if guard.as_ref().is_none_or(|b| b.buf.bytes() < ws.total) {
            // The old buffer may still be in use by launches in flight.
            self.backend.synchronize()?;
            let buf = DeviceBuffer::zeroed(self.backend, ws.total, "FP8 workspace")?;
            *guard = Some(Fp8Buffer { buf, o_map: None });
        }
        let ws_buf = guard.as_mut().expect("allocated above");
        if ws_buf.o_map != Some(o_map) {
            // Synchronous, after every launch before it (which may read the map there).
            ws_buf
                .buf
                .write_bytes(ws.o_map, &self.o_tensor_map(s, out)?)?;
            ws_buf.o_map = Some(o_map);
        }
        let out = ws_buf.buf.ptr();
        let bh = s.bh();
        let block = format.block();
        if once {
            let args = [
                KernelArg::Ptr(ops[1]),
                KernelArg::Ptr(ops[2]),
                KernelArg::Ptr(ops[3]),
                KernelArg::Ptr(ops[4]),
                KernelArg::Ptr(ops[5]),
                KernelArg::Ptr(out),
                KernelArg::U32(fit_u32(bh, "batch × heads")?),
                KernelArg::U32(fit_u32(s.seq_q, "seq_q")?),
                KernelArg::U32(fit_u32(s.seq_k, "seq_k")?),
                KernelArg::U32(fit_u32(s.head_dim, "head_dim")?),
                KernelArg::U32(fit_u32(s.seq_k_padded(), "padded seq_k")?),
                KernelArg::U32(fit_u32(s.group(), "K/V head group")?),
                KernelArg::U32(fit_u32(keys_per_tile, "keys per tile")?),
            ];
            let grid = fit_u32(fp8_prepass_ctas(s), "pre-pass CTAs")?;
            // SAFETY: fp8_prepass_{fmt}(Q scales, K codes, K scales, Vᵀ codes, Vᵀ scales,
            // int* workspace, u32 bh_count, Sq, Sk, D, Skp, kv_group, keys_per_tile): the
            // operands of `s` in `format` (QuantizedQkv's layout, K and Vᵀ with kv_heads
            // heads); the workspace of `Fp8Workspace::of`'s size for `variant`. Grid-stride
            // over its tasks: any grid covers them; 256 threads, which it checks.
            unsafe {
                self.backend
                    .launch_3d(pass, (grid, 1, 1), (PREPASS_THREADS, 1), &args)?
            };
        } else {
            let args = [
                KernelArg::Ptr(ops[1]),
                KernelArg::Ptr(ops[3]),
                KernelArg::Ptr(ops[5]),
                KernelArg::Ptr(out),
                KernelArg::U32(fit_u32(bh * s.seq_q, "Q rows")?),
                KernelArg::U32(fit_u32(s.kv_bh() * s.seq_k, "K rows")?),
                KernelArg::U32(fit_u32(s.kv_bh() * s.head_dim, "Vᵀ rows")?),
                KernelArg::U32(fit_u32(s.head_dim / block, "scales per row")?),
                KernelArg::U32(fit_u32(s.seq_k_padded() / block, "scales per Vᵀ row")?),
                KernelArg::U32(fit_u32(s.seq_k, "keys")?),
            ];
            // SAFETY: fp8_factors_{fmt}(3 × const u8* scales, int* out, u32 q_rows, k_rows,
            // v_rows, qk_row_bytes, v_row_bytes, seq_k): the scale tensors of `s` in `format`
            // (QuantizedQkv's layout) hold those rows of those lengths, K's rows seq_k a head;
            // `out` holds one i32 per row (the workspace's first part). Grid-stride loops: any
            // grid covers them.
            unsafe {
                self.backend
                    .launch_3d(pass, (4 * self.sms as u32, 2, 1), (256, 1), &args)?
            };
        }
        Ok(out)
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
        let factors = if self.path.is_fp8() {
            self.enqueue_fp8_passes(s, format, variant, &ops, out)?
        } else {
            0
        };
        let mut args: Vec<KernelArg> = ops.iter().map(|&p| KernelArg::Ptr(p)).collect();
        args.push(KernelArg::Ptr(out.ptr()));
        args.extend([
            KernelArg::U32(fit_u32(s.seq_q, "seq_q")?),
            KernelArg::U32(fit_u32(s.seq_k, "seq_k")?),
            KernelArg::U32(fit_u32(s.seq_k_padded(), "padded seq_k")?),
            KernelArg::U32(s.causal as u32),
            KernelArg::Ptr(ts.ptr()),
            KernelArg::U32(score_scale_log2(s.head_dim).to_bits()),
            KernelArg::U32(fit_u32(bh, "batch × heads")?),
            KernelArg::Ptr(counters),
            KernelArg::Ptr(partials),
            KernelArg::Ptr(factors),
            KernelArg::U32(fit_u32(s.group(), "Q heads per K/V head")?),
        ]);
        let grid = (fit_u32(grid.0, "grid")?, fit_u32(grid.1, "grid")?, 1);
        let (block, smem) = (
            (variant.threads() as u32, 1),
            variant.dynamic_smem(s.head_dim) as u32,
        );
        let after = if self.path.is_fp8() && dependent_launch() {
            After::Trigger
        } else {
            After::Completion
        };
        // SAFETY: attn_{fmt}_dD(6 × const u8*, float*, u32 Sq, u32 Sk, u32 Skp, u32 causal,
        // const float* ts, u32 c0_bits, u32 bh_count, u32* counters, float* partials,
        // const int* factors, u32 kv_group; the factors are the FP8 body's, enqueued before
        // it on the stream): the caller's buffers hold the operands of `s` in `format`
        // (QuantizedQkv's layout, K and Vᵀ with batch·kv_heads heads, kv_group = heads /
        // kv_heads), `out` and `ts` are checked above; the grid covers seq_q and batch·heads
        // (the wgmma bodies' schedule all of them, its workspace sized for it); the dynamic
        // shared memory is the body's (allowed in load_path); the FP8 body's stores through O's
        // tensor map reach only `out`'s B·H·Sq rows (the map's extent). The FP8 body, launched
        // as its pre-pass's dependent, reads nothing the pre-pass writes before
        // griddepcontrol.wait (before it, its producer sets up the schedule and reads the
        // tensor scales, which are not the pre-pass's); everything enqueued before the pre-pass
        // has completed before the pre-pass starts.
        unsafe {
            self.backend
                .launch_on(std::ptr::null_mut(), after, f, grid, block, smem, &args)
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

    /// With a wgmma body's timeline on (`paths::timeline_on`), print the marks of the last
    /// launch of `shape` and `format` to standard output (lines `TL ...`:
    /// attn_wgmma_pipeline.cuh, `tl_print_all`); otherwise nothing.
    pub fn print_timeline(&self, shape: &AttnShape, format: Format) -> Result<()> {
        if !self.path.is_wgmma() || !super::paths::timeline_on() {
            return Ok(());
        }
        let module = self.module_of(self.variant_for(shape, format));
        let f = module.function("attn_timeline_print")?;
        // SAFETY: `f` belongs to `module`, loaded in the backend's context; it takes no
        // arguments and reads only its module's globals.
        unsafe { self.backend.launch(f, 1, 1, &[])? };
        self.backend.synchronize()
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

/// Threads per CTA of `fp8_prepass_*` (its `prepass::THREADS`).
const PREPASS_THREADS: u32 = 256;

/// CTAs of `fp8_prepass_*` for `s`: one per task of its grid-stride loop (attn_fp8_prepasses.cuh,
/// `prepass`: 2048 Q rows, 8 Vᵀ rows, or 2 K groups of `fp8::K_FACTOR_KEYS` keys of a head).
pub fn fp8_prepass_ctas(s: &AttnShape) -> usize {
    let threads = PREPASS_THREADS as usize;
    let q_tasks = (s.bh() * s.seq_q).div_ceil(threads * 8);
    let v_tasks = (s.kv_bh() * s.head_dim).div_ceil(threads / 32);
    let k_tasks = s.kv_bh() * s.seq_k.div_ceil(2 * super::fp8::K_FACTOR_KEYS);
    q_tasks + v_tasks + k_tasks
}

/// Whether the FP8 body is launched as its pre-pass's programmatic dependent
/// (`After::Trigger`), so its launch overlaps the pre-pass's tail.
/// `FP4PROBE_ATTN_PDL=0` launches it plainly, for side-by-side timing.
fn dependent_launch() -> bool {
    std::env::var("FP4PROBE_ATTN_PDL").map_or(true, |v| v != "0")
}

/// `v` as a kernel's u32 argument, or an error naming `what` when it does not fit.
fn fit_u32(v: usize, what: &str) -> Result<u32> {
    u32::try_from(v).with_context(|| format!("{what} {v} does not fit in 32 bits"))
}

/// The FP8 body's workspace (`Factors` in attn_fp8_widen.cuh): i32 row factors of Q, K and Vᵀ,
/// then, for a variant that widens once, each K/V head's E4M3 key tiles, each a stage's image
/// (its K tile, then its Vᵀ tile, `head_dim` bytes per key each), then O's tensor map (128
/// bytes), each part from a 256-byte boundary.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Fp8Workspace {
    /// Where the E4M3 key tiles start (the factors' bytes, rounded up).
    pub e4m3_tiles: usize,
    /// Where O's tensor map lies.
    pub o_map: usize,
    /// The whole workspace.
    pub total: usize,
}

impl Fp8Workspace {
    /// For `s` run with key tiles of `keys_per_tile` keys, widened once (`once`) or per CTA.
    pub fn of(s: &AttnShape, keys_per_tile: usize, once: bool) -> Self {
        let r = |n: usize| n.next_multiple_of(256);
        let e4m3_tiles = r(4 * (s.bh() * s.seq_q + s.kv_bh() * (s.seq_k + s.head_dim)));
        let keys = s.seq_k.next_multiple_of(keys_per_tile);
        let tiles = if once {
            s.kv_bh() * keys * 2 * s.head_dim
        } else {
            0
        };
        let o_map = e4m3_tiles + r(tiles);
        Fp8Workspace {
            e4m3_tiles,
            o_map,
            total: o_map + 128,
        }
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
    fn prepass_ctas_cover_its_tasks() {
        let s = |heads, kv_heads, seq_q, seq_k, head_dim| AttnShape {
            batch: 1,
            heads,
            kv_heads,
            seq_q,
            seq_k,
            head_dim,
            causal: false,
        };
        // 4096 Q rows a head, 2048 a CTA; 32 heads of 128 Vᵀ rows, 8 a CTA; 32 K groups a
        // head, 2 a CTA.
        assert_eq!(
            fp8_prepass_ctas(&s(32, 32, 4096, 4096, 128)),
            64 + 512 + 512
        );
        // 4400 Q rows; 2 K/V heads: 32 CTAs of Vᵀ rows, 9 K groups each (the last of 76 keys).
        assert_eq!(fp8_prepass_ctas(&s(4, 2, 1100, 1100, 128)), 3 + 32 + 10);
    }

    #[test]
    fn the_fp8_workspace_ends_with_o_tensor_map_after_its_parts() {
        let s = AttnShape {
            batch: 1,
            heads: 4,
            kv_heads: 2,
            seq_q: 1100,
            seq_k: 1100,
            head_dim: 128,
            causal: true,
        };
        // Factors: 4 bytes for each of 4 × 1100 Q rows and 2 × (1100 K rows + 128 Vᵀ rows),
        // 27,424 bytes, rounded to 27,648; E4M3 tiles: 2 heads × 1152 keys × 256 bytes.
        let per_cta = Fp8Workspace::of(&s, 64, false);
        assert_eq!((per_cta.e4m3_tiles, per_cta.o_map), (27_648, 27_648));
        let once = Fp8Workspace::of(&s, 128, true);
        assert_eq!(once.o_map, 27_648 + 2 * 1152 * 256);
        for w in [per_cta, once] {
            assert_eq!(w.total, w.o_map + 128);
            assert_eq!(
                w.o_map % 256,
                0,
                "the map 64-byte aligned, as the driver wants it"
            );
        }
    }

    #[test]
    fn prepass_threads_are_the_kernels() {
        let source = include_str!("../../kernels/attention/attn_fp8_prepasses.cuh");
        let line = format!(
            "constexpr u32 THREADS = {PREPASS_THREADS}, QR = 8, Q_ROWS = THREADS * QR, V_ROWS = THREADS / 32, U = 4, K_GROUPS = 2;"
        );
        assert!(
            source.contains(&line),
            "the kernel's tasks differ from fp8_prepass_ctas's"
        );
    }
}
