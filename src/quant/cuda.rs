//! The CUDA quantization kernels (`kernels/quant/quant.cu`): compiled with NVRTC for the
//! device at run time, launched here, results byte-identical to the CPU reference.

use super::{
    Format, Quantized, ScaleGrid, ScaleLayout, Spec, check_non_finite, check_shape,
    check_tensor_amax, layout::BandWalk,
};
use crate::codegen::nvrtc::{self, Output};
use crate::device::cuda::{CudaBackend, DeviceBuffer, KernelArg, PtxModule};
use anyhow::{Context, Result, bail};
use cudarc::driver::sys;
use std::cell::OnceCell;

/// The kernel source, built into the binary so it runs from any folder: the shared codecs,
/// then the kernels.
pub const SOURCE: &str = concat!(
    include_str!("../../kernels/quant/fp4_codecs.cuh"),
    include_str!("../../kernels/quant/scale_tiling.cuh"),
    include_str!("../../kernels/quant/quant.cu")
);

/// Threads per CUDA block, as the kernel is written (QUANT_THREADS there).
const THREADS: u32 = 256;

/// 8-element chunks a thread loads at once from 16-bit inputs (`UNROLL_16BIT_MX` and `_NV` in
/// the kernel, which quantizes them in groups of 16; f32 always uses 4). Measured on the H100
/// (bf16, 4096×8192 and 8192×8192, two interleaved runs): MXFP4 was 3-5% faster with 2 than
/// with 4, NVFP4 (more registers, more work per group) 8% slower. `FP4PROBE_QUANT_UNROLL16`
/// (2, 4 or 8) overrides both, for tuning on new GPUs.
pub fn unroll_16bit(format: Format) -> u64 {
    std::env::var("FP4PROBE_QUANT_UNROLL16")
        .ok()
        .and_then(|v| v.parse().ok())
        .filter(|&n| [2, 4, 8].contains(&n))
        .unwrap_or(match format {
            Format::Mxfp4 => 2,
            Format::Nvfp4 => 4,
        })
}

/// CTAs per SM that two-level NVFP4 of bf16 (one pass, no search) is launched with, each
/// looping over about three tiles of an 8192×8192 tensor, where one CTA a tile repeats the
/// kernel's prologue (the tensor scale, the geometry: 71 of about 510 instructions a tile).
/// Measured on the H200 (reports/sm_90/quant/experiments/grid-fma-and-loop, band-walk,
/// band-rows): 90-91% of the copy against 85-87% (linear), 86-88% against 80-82% (128x4 and
/// 8x4, where the grid is rounded down to whole tile rows: layout.rs, BandWalk); 3 to 16, 32
/// and 40 are slower, 19 to 28 within a point; the other kernels run as fast or faster one CTA
/// a tile, so they keep that.
const LOOPING_CTAS_PER_SM: u64 = 20;

/// At most how many CTAs an SM the quantization grid has, each looping over tiles (None: one
/// CTA per tile): `FP4PROBE_QUANT_CTAS_PER_SM=K` (0: one CTA per tile) for tuning, else
/// LOOPING_CTAS_PER_SM for two-level NVFP4 of bf16.
fn ctas_per_sm(spec: &Spec, input: InType) -> Option<u64> {
    match std::env::var("FP4PROBE_QUANT_CTAS_PER_SM")
        .ok()
        .and_then(|v| v.parse::<u64>().ok())
    {
        Some(k) => (k > 0).then_some(k),
        None => (spec.format == Format::Nvfp4
            && spec.two_level()
            && !spec.search
            && input == InType::Bf16)
            .then_some(LOOPING_CTAS_PER_SM),
    }
}

/// Element types the kernels read.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum InType {
    F32,
    Bf16,
    F16,
}

impl InType {
    pub fn size(self) -> usize {
        match self {
            InType::F32 => 4,
            _ => 2,
        }
    }
    /// 8-element chunks one thread handles (`Unroll<In, FMT>::groups · In::CHUNKS` in the
    /// kernel; the tensor-amax pass of two-level NVFP4 uses the NVFP4 value).
    pub fn unroll(self, format: Format) -> u64 {
        match self {
            InType::F32 => 4,
            _ => unroll_16bit(format),
        }
    }
    pub fn name(self) -> &'static str {
        match self {
            InType::F32 => "f32",
            InType::Bf16 => "bf16",
            InType::F16 => "f16",
        }
    }
}

/// `x` stored as `in_type` (bf16 and f16 rounded to nearest even), and the values those bytes
/// hold widened back to f32: what the kernels read and what the CPU reference must be given.
pub fn encode_input(x: &[f32], in_type: InType) -> (Vec<u8>, Vec<f32>) {
    let halves = |bits: Vec<u16>, widen: fn(u16) -> f32| -> (Vec<u8>, Vec<f32>) {
        (
            bits.iter().flat_map(|b| b.to_le_bytes()).collect(),
            bits.into_iter().map(widen).collect(),
        )
    };
    match in_type {
        InType::F32 => (x.iter().flat_map(|v| v.to_le_bytes()).collect(), x.to_vec()),
        InType::Bf16 => halves(
            x.iter()
                .map(|&v| crate::formats::f32_to_bf16_bits(v))
                .collect(),
            crate::tensorio::bf16_bits_to_f32,
        ),
        InType::F16 => halves(
            x.iter()
                .map(|&v| crate::formats::f64_to_f16_bits(v as f64))
                .collect(),
            crate::tensorio::f16_bits_to_f32,
        ),
    }
}

/// The kernels' `SCALE_LAYOUT` of a layout.
fn layout_define(layout: ScaleLayout) -> u32 {
    match layout {
        ScaleLayout::Linear => 0,
        ScaleLayout::Tiled128x4 => 1,
        ScaleLayout::Tiled8x4 => 2,
    }
}

/// Compile the kernels for `arch` (`sm_90`, `sm_120a`, ...), writing scales in `layout`.
pub fn compile(arch: &str, layout: ScaleLayout) -> Result<nvrtc::Compiled> {
    let mut options = vec![
        format!("--gpu-architecture={arch}"),
        "-std=c++17".to_string(),
        format!("-DUNROLL_16BIT_MX={}", unroll_16bit(Format::Mxfp4)),
        format!("-DUNROLL_16BIT_NV={}", unroll_16bit(Format::Nvfp4)),
        format!("-DSCALE_LAYOUT={}", layout_define(layout)),
    ];
    // Experiments: FP4PROBE_QUANT_DEFINES="NAME=VALUE ..." (e.g. QUANT_MIN_BLOCKS=6).
    if let Ok(defs) = std::env::var("FP4PROBE_QUANT_DEFINES") {
        options.extend(defs.split_whitespace().map(|d| format!("-D{d}")));
    }
    nvrtc::compile(SOURCE, "quant.cu", &options, Output::Cubin)
}

/// Kernel names: `quant_mxfp4_floor_bf16`, `search_nvfp4_two_level_f32`, ...: one entry per
/// format, scale mode (or NVFP4 level count), input type and search.
pub fn quant_entry(spec: &Spec, input: InType) -> String {
    let op = if spec.search { "search" } else { "quant" };
    let mode = match spec.format {
        Format::Mxfp4 => spec.scale_mode.name(),
        Format::Nvfp4 if spec.two_level() => "two_level",
        Format::Nvfp4 => "one_level",
    };
    format!("{op}_{}_{mode}_{}", spec.format.name(), input.name())
}

/// The loaded modules, one per scale layout (compiled when first asked for: each is a few
/// seconds of NVRTC), and the device they run on.
pub struct QuantKernels<'a> {
    backend: &'a CudaBackend,
    modules: [OnceCell<PtxModule>; 3],
}

/// Device buffers of one quantization: input, packed codes, scales, tensor amax and scale.
pub struct DeviceQuant {
    pub input: DeviceBuffer,
    pub data: DeviceBuffer,
    pub scale: DeviceBuffer,
    pub amax: DeviceBuffer,
    pub tensor_scale: DeviceBuffer,
    pub elements: usize,
    pub in_type: InType,
    /// How `scale` is laid out (linear, one row, unless `with_scale_grid` said otherwise).
    pub grid: ScaleGrid,
}

impl DeviceQuant {
    /// Upload `bytes` (little-endian elements of `in_type`) and allocate the outputs.
    pub fn upload(
        backend: &CudaBackend,
        in_type: InType,
        bytes: &[u8],
        block: usize,
    ) -> Result<Self> {
        let input = DeviceBuffer::from_bytes(backend, bytes, "quantizer input")?;
        Self::on_device(backend, in_type, input, bytes.len() / in_type.size(), block)
    }

    /// Quantize `elements` elements already on the device (`input`), e.g. a tensor another
    /// kernel produced; allocates the outputs.
    pub fn on_device(
        backend: &CudaBackend,
        in_type: InType,
        input: DeviceBuffer,
        elements: usize,
        block: usize,
    ) -> Result<Self> {
        if input.bytes() < elements * in_type.size() {
            bail!(
                "{elements} {} elements need more than the {} bytes given",
                in_type.name(),
                input.bytes()
            );
        }
        Ok(DeviceQuant {
            input,
            data: DeviceBuffer::zeroed(backend, elements / 2, "packed codes")?,
            scale: DeviceBuffer::zeroed(backend, elements / block, "scales")?,
            amax: DeviceBuffer::zeroed(backend, 4, "tensor amax")?,
            tensor_scale: DeviceBuffer::zeroed(backend, 4, "tensor scale")?,
            elements,
            in_type,
            grid: ScaleGrid::new(ScaleLayout::Linear, &[elements], block),
        })
    }

    /// Lay the scales out as `grid` (a grid of the same blocks): a new scale buffer, zeroed,
    /// which the kernels leave zero in the padding.
    pub fn with_scale_grid(mut self, backend: &CudaBackend, grid: ScaleGrid) -> Result<Self> {
        if grid.blocks() != self.grid.blocks() {
            bail!(
                "a scale grid of {} × {} blocks does not fit {} elements in blocks of {}",
                grid.rows,
                grid.cols,
                self.elements,
                self.elements / self.grid.blocks().max(1)
            );
        }
        self.scale = DeviceBuffer::zeroed(backend, grid.len(), "scales")?;
        self.grid = grid;
        Ok(self)
    }
    /// Bytes a quantization reads and writes (input once, codes, scales, tensor scale).
    pub fn bytes_moved(&self, spec: &Spec) -> usize {
        self.elements * self.in_type.size()
            + self.elements / 2
            + self.elements / spec.block()
            + if spec.two_level() { 4 } else { 0 }
    }
}

impl<'a> QuantKernels<'a> {
    /// Compile for this device (`sm_XY`, with `a` on 9.0 and 12.x so every feature is on) and load.
    /// (The linear-scale kernels; other layouts are compiled when first used.)
    pub fn load(backend: &'a CudaBackend) -> Result<Self> {
        Self::load_layout(backend, ScaleLayout::Linear)
    }

    /// Compile and load the kernels that write `layout` (other layouts: when first used).
    pub fn load_layout(backend: &'a CudaBackend, layout: ScaleLayout) -> Result<Self> {
        let k = QuantKernels {
            backend,
            modules: Default::default(),
        };
        k.module(layout)?;
        Ok(k)
    }

    /// The module writing `layout`, compiled and loaded on first use (before timing anything,
    /// call it once: a compile between a timer's events would be timed).
    pub fn module(&self, layout: ScaleLayout) -> Result<&PtxModule> {
        let cell = &self.modules[layout_define(layout) as usize];
        if let Some(m) = cell.get() {
            return Ok(m);
        }
        let (major, minor) = self.backend.compute_capability();
        let arch = format!("sm_{major}{minor}");
        let image = compile(&arch, layout).with_context(|| {
            format!(
                "compiling kernels/quant/quant.cu for {arch} ({} scales)",
                layout.name()
            )
        })?;
        let module = self.backend.load_cubin(&image.image)?;
        Ok(cell.get_or_init(|| module))
    }

    fn function(&self, layout: ScaleLayout, name: &str) -> Result<sys::CUfunction> {
        self.module(layout)?.function(name)
    }

    /// Enqueue one quantization of `buf` (no wait): for two-level NVFP4 the amax pass first.
    pub fn enqueue(&self, spec: &Spec, buf: &DeviceQuant) -> Result<()> {
        if spec.two_level() {
            self.enqueue_amax(buf)?;
        }
        self.enqueue_quant(spec, buf)
    }

    fn chunks(buf: &DeviceQuant) -> Result<u32> {
        u32::try_from(buf.elements / super::CHUNK).with_context(|| {
            format!(
                "{} elements is more than this kernel indexes (2^35)",
                buf.elements
            )
        })
    }

    /// The two-level NVFP4 tensor amax pass: zero the word, then reduce into it.
    pub fn enqueue_amax(&self, buf: &DeviceQuant) -> Result<()> {
        let chunks = Self::chunks(buf)?;
        buf.amax.clear_async()?;
        let f = self.function(
            buf.grid.layout,
            &format!("finite_amax_{}", buf.in_type.name()),
        )?;
        let sms = self.backend.sm_count()? as u64;
        let per_block = THREADS as u64 * buf.in_type.unroll(Format::Nvfp4);
        let grid = (chunks as u64).div_ceil(per_block).clamp(1, sms * 8) as u32;
        let args = [
            KernelArg::Ptr(buf.input.ptr()),
            KernelArg::U32(chunks),
            KernelArg::Ptr(buf.amax.ptr()),
        ];
        // SAFETY: finite_amax(const void*, u32, u32*): the input holds `chunks` chunks of 8
        // elements, amax one word; the kernel bounds-checks every group.
        unsafe { self.backend.launch(f, grid, THREADS, &args) }
    }

    /// The quantization pass alone (two-level NVFP4 reads the amax already in `buf.amax`).
    pub fn enqueue_quant(&self, spec: &Spec, buf: &DeviceQuant) -> Result<()> {
        let chunks = Self::chunks(buf)?;
        if spec.scale_layout != buf.grid.layout {
            bail!(
                "{} scales asked for, but the buffers are laid out {}",
                spec.scale_layout.name(),
                buf.grid.layout.name()
            );
        }
        let geom = buf.grid.kernel_geometry()?;
        let f = self.function(spec.scale_layout, &quant_entry(spec, buf.in_type))?;
        let max_ctas = match ctas_per_sm(spec, buf.in_type) {
            Some(k) => Some(self.backend.sm_count()? as u64 * k),
            None => None,
        };
        // NVFP4 in a tiled layout: bands of 8 rows over 64 blocks, walked by whole tile rows, a
        // grid of the walk's stride (quant.cu: Tiling; layout.rs: BandWalk); otherwise tiles in
        // row order, a CTA taking tiles b, b + grid, ... (the walk's arguments zero)
        let (grid, walk) = if spec.format == Format::Nvfp4 && buf.grid.layout != ScaleLayout::Linear
        {
            let walk = BandWalk::new(&buf.grid, &geom, max_ctas, spec.two_level())?;
            (walk.stride as u64, walk)
        } else {
            let tiles = (chunks as u64)
                .div_ceil(THREADS as u64 * buf.in_type.unroll(spec.format))
                .max(1);
            (
                max_ctas.map_or(tiles, |m| tiles.min(m)),
                BandWalk::default(),
            )
        };
        let Ok(grid) = u32::try_from(grid) else {
            bail!("grid of {grid} blocks is too large")
        };
        let args = [
            KernelArg::Ptr(buf.input.ptr()),
            KernelArg::U32(chunks),
            KernelArg::Ptr(buf.data.ptr()),
            KernelArg::Ptr(buf.scale.ptr()),
            KernelArg::Ptr(buf.amax.ptr()),
            KernelArg::Ptr(buf.tensor_scale.ptr()),
            KernelArg::U32(geom.cols),
            KernelArg::U32(geom.magic),
            KernelArg::U32(geom.shift),
            KernelArg::U32(geom.row_tile_bytes),
            KernelArg::U32(geom.hcount),
            KernelArg::U32(geom.hmagic),
            KernelArg::U32(geom.hshift),
            KernelArg::U32(walk.tiles),
            KernelArg::U32(walk.stride),
            KernelArg::U32(walk.step_g),
            KernelArg::U32(walk.step_scale),
            KernelArg::U32(walk.scale_bytes),
        ];
        // SAFETY: quantize(const void*, u32, u32*, u8*, const u32*, float*, u32 x12): data
        // holds `chunks` words, scale the grid's bytes (every block's offset lies inside it:
        // layout.rs tests), amax and tensor_scale one word each; the grid (bands: with its
        // walk, layout.rs tests) covers `chunks`, and the kernel bounds-checks the tail.
        unsafe { self.backend.launch(f, grid, THREADS, &args) }
    }

    /// Read the results of the last `enqueue` back (waits).
    pub fn read_back(&self, spec: &Spec, shape: &[usize], buf: &DeviceQuant) -> Result<Quantized> {
        self.backend.synchronize()?;
        let tensor_scale = if spec.two_level() {
            let w = buf.tensor_scale.read_u32(1)?;
            Some(f32::from_bits(w[0]))
        } else {
            None
        };
        Ok(Quantized {
            spec: *spec,
            shape: shape.to_vec(),
            data: buf.data.read_bytes(buf.elements / 2)?,
            scale: buf.scale.read_bytes(buf.grid.len())?,
            tensor_scale,
        })
    }

    /// Quantize a host tensor on the GPU. `x_f32` is the same tensor widened to f32, used only
    /// for the shape and non-finite checks that the CPU path also makes.
    pub fn quantize(
        &self,
        spec: &Spec,
        shape: &[usize],
        in_type: InType,
        bytes: &[u8],
        x_f32: &[f32],
    ) -> Result<Quantized> {
        self.quantize_with_amax(spec, shape, in_type, bytes, x_f32, None)
    }

    /// `quantize` with two-level NVFP4's tensor amax given (`quant::quantize_with_amax`): the
    /// amax pass is skipped and the input read once.
    pub fn quantize_with_amax(
        &self,
        spec: &Spec,
        shape: &[usize],
        in_type: InType,
        bytes: &[u8],
        x_f32: &[f32],
        tensor_amax: Option<f32>,
    ) -> Result<Quantized> {
        check_shape(shape, spec.block())?;
        spec.scale_layout.check(spec.format, shape)?;
        check_non_finite(spec, shape, x_f32)?;
        check_tensor_amax(spec, tensor_amax)?;
        if bytes.len() != x_f32.len() * in_type.size() {
            bail!(
                "input holds {} bytes, expected {} {} elements",
                bytes.len(),
                x_f32.len(),
                in_type.name()
            );
        }
        let mut buf = DeviceQuant::upload(self.backend, in_type, bytes, spec.block())?
            .with_scale_grid(self.backend, spec.grid(shape))?;
        match tensor_amax {
            Some(a) => {
                buf.amax = DeviceBuffer::from_bytes(
                    self.backend,
                    &a.to_bits().to_le_bytes(),
                    "tensor amax",
                )?;
                self.enqueue_quant(spec, &buf)?;
            }
            None => self.enqueue(spec, &buf)?,
        }
        self.read_back(spec, shape, &buf)
    }

    pub fn backend(&self) -> &CudaBackend {
        self.backend
    }
}
