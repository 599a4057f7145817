//! What runs a batch of wgmma experiments: the GPU (through the probe kernel) or the emulator.
//! Both take the same `Launch` and `Batch` and return D as `[experiment][thread][register]`
//! words, so the probes never know which ran.

use super::desc::{Desc, Major};
use super::kernel::{ENTRY, Transpose, probe_kernel};
use super::{ASource, THREADS, WgVariant};
use crate::device::DeviceInfo;
use crate::device::cuda::{CudaBackend, DeviceBuffer, KernelArg, PtxModule};
use anyhow::{Context, Result, bail};
use std::cell::RefCell;
use std::collections::HashMap;

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
            c: vec![0; n * t * v.d_frag().regs as usize],
        }
    }
}

pub trait WgBackend {
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

/// The GPU backend: the probe kernel per (variant, transposes), loaded on first use.
pub struct WgCuda<'a> {
    pub dev: &'a CudaBackend,
    kernels: RefCell<HashMap<(String, Transpose), (PtxModule, cudarc::driver::sys::CUfunction)>>,
}

impl<'a> WgCuda<'a> {
    pub fn new(dev: &'a CudaBackend) -> Self {
        WgCuda {
            dev,
            kernels: RefCell::new(HashMap::new()),
        }
    }

    fn function(
        &self,
        v: &WgVariant,
        tr: Transpose,
        smem: u32,
    ) -> Result<cudarc::driver::sys::CUfunction> {
        let key = (v.id(), tr);
        if let Some((_, f)) = self.kernels.borrow().get(&key) {
            return Ok(*f);
        }
        let module = self
            .dev
            .load_ptx_module(&probe_kernel(v, tr))
            .with_context(|| format!("loading the wgmma probe kernel of {}", v.id()))?;
        let f = module.function(ENTRY)?;
        // SAFETY: `f` belongs to `module`, loaded into this backend's context and kept alive
        // in the cache with it.
        unsafe { self.dev.set_max_dynamic_smem(f, smem.max(MAX_SMEM)) }?;
        self.kernels.borrow_mut().insert(key, (module, f));
        Ok(f)
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
        let f = self.function(v, l.transpose(), smem)?;
        let t = THREADS as usize;
        let (dw, aw) = (v.d_frag().regs as usize, v.a_frag().regs as usize);
        let mut out = Vec::with_capacity(batch.experiments * t * dw);
        let chunk = chunk_experiments(v);
        let mut e0 = 0;
        while e0 < batch.experiments {
            let n = chunk.min(batch.experiments - e0);
            let slice = |buf: &[u8], per: usize| buf[e0 * per..(e0 + n) * per].to_vec();
            let words = |buf: &[u32], per: usize| {
                if buf.is_empty() {
                    vec![0u32]
                } else {
                    buf[e0 * per..(e0 + n) * per].to_vec()
                }
            };
            let pad = |mut b: Vec<u8>| {
                if b.is_empty() {
                    b.push(0);
                }
                b
            };
            let a =
                DeviceBuffer::from_bytes(self.dev, &pad(slice(&batch.a, l.a_bytes as usize)), "A")?;
            let b =
                DeviceBuffer::from_bytes(self.dev, &pad(slice(&batch.b, l.b_bytes as usize)), "B")?;
            let ar =
                DeviceBuffer::from_words(self.dev, &words(&batch.a_regs, t * aw), "A registers")?;
            let c = DeviceBuffer::from_words(self.dev, &words(&batch.c, t * dw), "C")?;
            let d = DeviceBuffer::zeroed(self.dev, n * t * dw * 4, "D")?;
            let args = [
                KernelArg::Ptr(a.ptr()),
                KernelArg::Ptr(b.ptr()),
                KernelArg::Ptr(ar.ptr()),
                KernelArg::Ptr(c.ptr()),
                KernelArg::Ptr(d.ptr()),
                KernelArg::Ptr(l.a_desc.template()),
                KernelArg::Ptr(l.b_desc.template()),
                KernelArg::U32(l.a_bytes),
                KernelArg::U32(l.b_bytes),
                KernelArg::U32(l.b_off),
                KernelArg::U32(smem),
                KernelArg::U32(u32::from(l.scale_d)),
            ];
            // SAFETY: the arguments follow the kernel's parameter list (five .u64 pointers, two
            // .u64 descriptors, five .u32); every buffer holds `n` experiments of the sizes the
            // kernel reads (regions of a_bytes / b_bytes, 128 threads of registers) and D
            // `n` × 128 × dw words; the kernel's shared memory is `smem` bytes plus its 1 KiB of
            // alignment, within the limit set when it was loaded.
            unsafe {
                self.dev
                    .launch_3d_smem(f, (n as u32, 1, 1), (THREADS, 1), smem + 1024, &args)
            }?;
            self.dev.synchronize().context("wgmma probe launch")?;
            out.extend(d.read_u32(n * t * dw)?);
            e0 += n;
        }
        Ok(out)
    }
}
