//! The fused FP4 attention kernel (`kernels/attention/attn_fp4_sm90.cu`): compiled with NVRTC
//! for the device, launched over pre-quantized Q, K, V (`QuantizedQkv`), O read back as f32.

use super::reference::score_factor;
use super::{AttnShape, QuantizedQkv};
use crate::codegen::nvrtc::{self, Output};
use crate::codegen::verify::kernels_dir;
use crate::device::cuda::{CudaBackend, DeviceBuffer, KernelArg, PtxModule};
use crate::quant::Format;
use anyhow::{Context, Result, bail};

/// The kernel source, relative to `kernels/`.
pub const SOURCE: &str = "attention/attn_fp4_sm90.cu";

/// Threads per CTA and query rows per CTA, as the kernel is written.
const THREADS: u32 = 128;
const ROWS_PER_CTA: usize = 64;

/// `attn_nvfp4_d128`: the entry point for an input format and head dimension.
pub fn entry(format: Format, head_dim: usize) -> String {
    format!("attn_{}_d{head_dim}", format.name())
}

/// Compile the kernel for `arch` (`sm_90`, `sm_120a`, ...), headers from `kernels/`.
pub fn compile(arch: &str) -> Result<nvrtc::Compiled> {
    let dir = kernels_dir();
    let path = dir.join(SOURCE);
    let src = std::fs::read_to_string(&path)
        .with_context(|| format!("cannot read {}", path.display()))?;
    let options = vec![
        format!("--gpu-architecture={arch}"),
        "-std=c++17".to_string(),
        format!("--include-path={}", dir.display()),
    ];
    nvrtc::compile(&src, SOURCE, &options, Output::Cubin)
}

/// The loaded kernel.
pub struct AttentionKernel<'a> {
    backend: &'a CudaBackend,
    module: PtxModule,
}

/// Q, K, V on the device and the output buffer, for repeated launches.
pub struct DeviceQkv {
    pub shape: AttnShape,
    pub format: Format,
    /// The kernel's score factor (`score_factor`) and V's tensor scale.
    c: f32,
    v_ts: f32,
    bufs: [DeviceBuffer; 6],
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
        Ok(DeviceQkv {
            shape: s,
            format: qkv.format,
            c: score_factor(qkv),
            v_ts: qkv.v_tensor_scale,
            bufs,
            out,
        })
    }

    /// Bytes of the FP4 inputs (codes and scales) on the device.
    pub fn input_bytes(&self) -> usize {
        self.bufs.iter().map(|b| b.bytes()).sum()
    }
}

impl<'a> AttentionKernel<'a> {
    /// Compile for this device and load. The kernel uses `mul.rn.bf16x2` (sm_90 and later).
    pub fn load(backend: &'a CudaBackend) -> Result<Self> {
        let (major, minor) = backend.compute_capability();
        if major < 9 {
            bail!(
                "the FP4 attention kernel needs sm_90 or later; this device is sm_{major}{minor}"
            );
        }
        let suffix = if major >= 10 { "a" } else { "" };
        let arch = format!("sm_{major}{minor}{suffix}");
        let image =
            compile(&arch).with_context(|| format!("compiling kernels/{SOURCE} for {arch}"))?;
        let module = backend.load_cubin(&image.image)?;
        Ok(AttentionKernel { backend, module })
    }

    /// Enqueue one forward pass (no wait).
    pub fn enqueue(&self, dev: &DeviceQkv) -> Result<()> {
        let s = dev.shape;
        let f = self.module.function(&entry(dev.format, s.head_dim))?;
        let grid_x = s.seq_q.div_ceil(ROWS_PER_CTA);
        let bh = s.batch * s.heads;
        if bh > 65535 {
            bail!("batch × heads = {bh} exceeds the grid's y limit 65535");
        }
        let u = |v: usize, what: &str| {
            u32::try_from(v).with_context(|| format!("{what} {v} does not fit in 32 bits"))
        };
        let mut args: Vec<KernelArg> = dev.bufs.iter().map(|b| KernelArg::Ptr(b.ptr())).collect();
        args.push(KernelArg::Ptr(dev.out.ptr()));
        args.extend([
            KernelArg::U32(u(s.seq_q, "seq_q")?),
            KernelArg::U32(u(s.seq_k, "seq_k")?),
            KernelArg::U32(u(s.seq_k_padded(), "padded seq_k")?),
            KernelArg::U32(s.causal as u32),
            KernelArg::U32(dev.c.to_bits()),
            KernelArg::U32(dev.v_ts.to_bits()),
        ]);
        // SAFETY: attn_{fmt}_dD(6 × const u8*, float*, u32 Sq, u32 Sk, u32 Skp, u32 causal,
        // u32 c_bits, u32 v_ts_bits): the buffers were sized from the same shape by `QuantizedQkv` and
        // `DeviceQkv::upload`; the grid covers seq_q and batch·heads.
        unsafe {
            self.backend
                .launch_2d(f, (u(grid_x, "grid")?, bh as u32), THREADS, &args)
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

    /// Registers, spill (local) bytes and static shared memory of the entry for `head_dim`.
    pub fn resources(&self, format: Format, head_dim: usize) -> Result<Resources> {
        use cudarc::driver::sys::CUfunction_attribute as A;
        let f = self.module.function(&entry(format, head_dim))?;
        // SAFETY: `f` belongs to this module, which is loaded in the backend's context.
        let get = |a| unsafe { self.backend.function_attribute(f, a) };
        Ok(Resources {
            registers: get(A::CU_FUNC_ATTRIBUTE_NUM_REGS)?,
            local_bytes: get(A::CU_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES)?,
            shared_bytes: get(A::CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES)?,
        })
    }
}

/// What one CTA of the kernel holds.
#[derive(Clone, Copy, Debug)]
pub struct Resources {
    pub registers: i32,
    pub local_bytes: i32,
    pub shared_bytes: i32,
}

impl std::fmt::Display for Resources {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} registers/thread, {} bytes local (spill) memory/thread, {} bytes shared memory/CTA, {} threads/CTA",
            self.registers, self.local_bytes, self.shared_bytes, THREADS
        )
    }
}
