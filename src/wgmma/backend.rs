//! What runs a batch of wgmma experiments: the GPU (through the probe kernel) or the emulator.
//! Both take the same `Launch` and `Batch` and return D as `[experiment][thread][register]`
//! words, so the probes never know which ran.

use super::desc::{Desc, Major};
use super::kernel::{ENTRY, Transpose, probe_kernel};
use super::{ASource, THREADS, WgVariant};
use crate::device::DeviceInfo;
use crate::device::cuda::{After, CudaBackend, KernelArg, PtxModule};
use crate::probe::bench::Toolchain;
use anyhow::{Context, Result, bail};
use cudarc::driver::{DevicePtr, DevicePtrMut};
use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock, PoisonError};
use std::time::{Duration, Instant};

/// Settings shared by every experiment of a launch.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Launch {
    /// A's descriptor and major-ness (ignored for `rs`).
    pub a_desc: Desc,
    pub a_major: Major,
    pub b_desc: Desc,
    pub b_major: Major,
    /// Bytes of the A region at the aligned base (0 for `rs`) and of the B region at `b_off`.
    pub a_bytes: u32,
    pub b_off: u32,
    pub b_bytes: u32,
    /// Accumulate into C (`scale-d` true) or compute D = A·B.
    pub scale_d: bool,
}

impl Launch {
    pub fn transpose(&self) -> Transpose {
        Transpose {
            a: self.a_major == Major::MN,
            b: self.b_major == Major::MN,
        }
    }

    /// Dynamic shared memory one CTA zeroes and fills.
    pub fn smem_bytes(&self) -> u32 {
        (self.b_off + self.b_bytes)
            .max(self.a_bytes)
            .next_multiple_of(16)
    }
}

/// The inputs of a batch: `[experiment][byte]` regions, `[experiment][thread][word]` registers.
#[derive(Clone, Debug, Default)]
pub struct Batch {
    pub experiments: usize,
    pub a: Vec<u8>,
    pub b: Vec<u8>,
    pub a_regs: Vec<u32>,
    pub c: Vec<u32>,
}

impl Batch {
    pub fn zeroed(v: &WgVariant, l: &Launch, n: usize) -> Self {
        let t = THREADS as usize;
        Batch {
            experiments: n,
            a: vec![0; n * l.a_bytes as usize],
            b: vec![0; n * l.b_bytes as usize],
            a_regs: if v.a_src == ASource::Rs {
                vec![0; n * t * v.a_frag().regs as usize]
            } else {
                Vec::new()
            },
            // The kernel reads C only when the wgmma adds it.
            c: if l.scale_d {
                vec![0; n * t * v.d_frag().regs as usize]
            } else {
                Vec::new()
            },
        }
    }
}

/// Shared by the threads that probe variants side by side.
pub trait WgBackend: Sync {
    fn info(&self) -> &DeviceInfo;
    /// Ok if this backend runs `v`; otherwise an error naming the target it needs.
    fn check_supported(&self, v: &WgVariant) -> Result<()>;
    /// D words of every experiment.
    fn run(&self, v: &WgVariant, l: &Launch, batch: &Batch) -> Result<Vec<u32>>;
}

/// Experiments per launch: keeps a launch's D buffer to at most 256 MiB.
fn chunk_experiments(v: &WgVariant) -> usize {
    let d_bytes = THREADS as usize * v.d_frag().regs as usize * 4;
    ((256usize << 20) / d_bytes).clamp(1, 65_535)
}

/// `x`, or `zero` where `x` is empty: the kernel takes a pointer for every operand.
fn non_empty<'x, T>(x: &'x [T], zero: &'x [T; 1]) -> &'x [T] {
    if x.is_empty() { zero } else { x }
}

/// A loaded probe kernel: the module and its entry.
struct Loaded {
    _module: PtxModule,
    f: cudarc::driver::sys::CUfunction,
}

// SAFETY: `f` belongs to `_module` (Send + Sync) and is valid in any thread that binds the
// context, which every launch does; nothing mutates it.
unsafe impl Send for Loaded {}
// SAFETY: as above.
unsafe impl Sync for Loaded {}

type KernelSlot = Arc<OnceLock<std::result::Result<Loaded, String>>>;

/// The GPU backend: the probe kernel per (variant, transposes), built on first use. Threads
/// that want different kernels build them side by side; a thread that wants a kernel another
/// is building waits for that one.
pub struct WgCuda<'a> {
    pub dev: &'a CudaBackend,
    kernels: Mutex<HashMap<(String, Transpose), KernelSlot>>,
    /// Summed over threads: time spent turning PTX into loaded kernels.
    jit: Mutex<Duration>,
    /// The ptxas that assembles the kernels in processes of their own, side by side; the
    /// driver's JIT (which compiles one kernel at a time per context) where there is none or
    /// its cubin does not load.
    ptxas: Option<Toolchain>,
}

impl<'a> WgCuda<'a> {
    pub fn new(dev: &'a CudaBackend) -> Self {
        WgCuda {
            dev,
            kernels: Mutex::new(HashMap::new()),
            jit: Mutex::new(Duration::ZERO),
            ptxas: Toolchain::for_device(),
        }
    }

    /// What turns the probe PTX into kernels, for the run's summary.
    pub fn assembler(&self) -> String {
        self.ptxas.as_ref().map_or_else(
            || "the driver's JIT".to_string(),
            |t| {
                format!(
                    "{}, the driver's JIT where its cubin does not load",
                    t.describe()
                )
            },
        )
    }

    /// Build the kernels of `items` side by side before any launch: where the driver's JIT
    /// compiles, it holds the context, and compiling while other threads launch stalls them.
    pub fn prefetch(&self, items: &[(WgVariant, Transpose)]) -> Result<()> {
        use rayon::prelude::*;
        items
            .par_iter()
            .try_for_each(|(v, tr)| self.function(v, *tr).map(|_| ()))
    }

    /// Kernels built so far and the time that took (summed over threads).
    pub fn jit_stats(&self) -> (usize, Duration) {
        let n = self
            .kernels
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .len();
        (n, *self.jit.lock().unwrap_or_else(PoisonError::into_inner))
    }

    fn load(&self, v: &WgVariant, tr: Transpose) -> std::result::Result<Loaded, String> {
        let t0 = Instant::now();
        let loaded = (|| -> Result<Loaded> {
            let ptx = probe_kernel(v, tr);
            let cubin = self
                .ptxas
                .as_ref()
                .and_then(|t| t.assemble(&ptx, v.min_target()).ok());
            let module = cubin
                .and_then(|c| self.dev.load_cubin_module(&c).ok())
                .map_or_else(|| self.dev.load_ptx_module(&ptx), Ok)
                .with_context(|| format!("loading the wgmma probe kernel of {}", v.id()))?;
            let f = module.function(ENTRY)?;
            // SAFETY: `f` belongs to `module`, loaded into this backend's context and kept
            // alive in the cache with it. Every launch may take the largest tiles plus the
            // kilobyte the kernel spends aligning its base, so one setting serves them all.
            unsafe { self.dev.set_max_dynamic_smem(f, MAX_SMEM + 1024) }?;
            Ok(Loaded { _module: module, f })
        })()
        .map_err(|e| format!("{e:#}"));
        *self.jit.lock().unwrap_or_else(PoisonError::into_inner) += t0.elapsed();
        loaded
    }

    fn function(&self, v: &WgVariant, tr: Transpose) -> Result<cudarc::driver::sys::CUfunction> {
        let slot = self
            .kernels
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .entry((v.id(), tr))
            .or_default()
            .clone();
        match slot.get_or_init(|| self.load(v, tr)) {
            Ok(k) => Ok(k.f),
            Err(why) => bail!("{why}"),
        }
    }
}

/// Dynamic shared memory a probe may use: the 227 KiB an sm_90 block can have, less the
/// 1 KiB the kernel spends aligning its base.
pub const MAX_SMEM: u32 = 227 * 1024 - 1024;

impl WgBackend for WgCuda<'_> {
    fn info(&self) -> &DeviceInfo {
        crate::device::Backend::info(self.dev)
    }

    fn check_supported(&self, v: &WgVariant) -> Result<()> {
        let cc = self.dev.compute_capability();
        if !v.min_target().runs_on(cc) {
            bail!(
                "{} needs {} (this device is sm_{}{})",
                v.id(),
                v.min_target(),
                cc.0,
                cc.1
            );
        }
        if v.sparse {
            bail!("{}: the sparse forms are catalogued, not probed", v.id());
        }
        Ok(())
    }

    fn run(&self, v: &WgVariant, l: &Launch, batch: &Batch) -> Result<Vec<u32>> {
        self.check_supported(v)?;
        let smem = l.smem_bytes();
        if smem > MAX_SMEM {
            bail!("the tiles need {smem} bytes of shared memory; a block has {MAX_SMEM}");
        }
        let f = self.function(v, l.transpose())?;
        let t = THREADS as usize;
        let (dw, aw) = (v.d_frag().regs as usize, v.a_frag().regs as usize);
        // A stream of this call's own, with stream-ordered allocations: threads probing other
        // variants neither wait for these copies and launches nor stall on a device-wide
        // free.
        let stream = self
            .dev
            .context()
            .new_stream()
            .context("creating a stream")?;
        let mut out = vec![0u32; batch.experiments * t * dw];
        let chunk = chunk_experiments(v);
        let mut e0 = 0;
        while e0 < batch.experiments {
            let n = chunk.min(batch.experiments - e0);
            // Copied from the batch in place; empty inputs (no A region for `rs`, no A
            // registers for `ss`) still get a buffer.
            let part = |per: usize| e0 * per..(e0 + n) * per;
            let a_part = batch.a.get(part(l.a_bytes as usize)).unwrap_or(&[]);
            let b_part = &batch.b[part(l.b_bytes as usize)];
            let ar_part = batch.a_regs.get(part(t * aw)).unwrap_or(&[]);
            let c_part = batch.c.get(part(t * dw)).unwrap_or(&[]);
            let upload = |what: &str| format!("copying {what} to the device");
            let a = stream
                .clone_htod(non_empty(a_part, &[0]))
                .with_context(|| upload("A"))?;
            let b = stream
                .clone_htod(non_empty(b_part, &[0]))
                .with_context(|| upload("B"))?;
            let ar = stream
                .clone_htod(non_empty(ar_part, &[0]))
                .with_context(|| upload("the A registers"))?;
            let c = stream
                .clone_htod(non_empty(c_part, &[0]))
                .with_context(|| upload("C"))?;
            let mut d = stream
                .alloc_zeros::<u32>(n * t * dw)
                .context("allocating D")?;
            {
                let (pa, _ga) = a.device_ptr(&stream);
                let (pb, _gb) = b.device_ptr(&stream);
                let (par, _gar) = ar.device_ptr(&stream);
                let (pc, _gc) = c.device_ptr(&stream);
                let (pd, _gd) = d.device_ptr_mut(&stream);
                let args = [
                    KernelArg::Ptr(pa),
                    KernelArg::Ptr(pb),
                    KernelArg::Ptr(par),
                    KernelArg::Ptr(pc),
                    KernelArg::Ptr(pd),
                    KernelArg::Ptr(l.a_desc.template()),
                    KernelArg::Ptr(l.b_desc.template()),
                    KernelArg::U32(l.a_bytes),
                    KernelArg::U32(l.b_bytes),
                    KernelArg::U32(l.b_off),
                    KernelArg::U32(smem),
                    KernelArg::U32(u32::from(l.scale_d)),
                ];
                // SAFETY: the arguments follow the kernel's parameter list (five .u64
                // pointers, two .u64 descriptors, five .u32); every buffer holds `n`
                // experiments of the sizes the kernel reads (regions of a_bytes / b_bytes, 128
                // threads of registers) and D `n` × 128 × dw words, all written in `stream`'s
                // order before the launch; the kernel's shared memory is `smem` bytes plus its
                // 1 KiB of alignment, within the limit set when it was loaded.
                unsafe {
                    self.dev.launch_on(
                        stream.cu_stream(),
                        After::Completion,
                        f,
                        (n as u32, 1, 1),
                        (THREADS, 1),
                        smem + 1024,
                        &args,
                    )
                }?;
            }
            // Straight into this chunk's part of the result (no second host copy); a copy
            // into pageable memory returns once it is complete.
            stream
                .memcpy_dtoh(&d, &mut out[part(t * dw)])
                .context("wgmma probe launch")?;
            e0 += n;
        }
        Ok(out)
    }
}
