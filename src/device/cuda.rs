//! CUDA backend: runs the fragment-probe kernel on a real GPU through the driver API.
//!
//! The driver library is loaded at run time (cudarc's `dynamic-loading`), so the binary starts
//! on machines without one: `CudaBackend::open` checks for `libcuda` before touching any driver
//! entry point (cudarc panics when a symbol is called and the library is missing).
//!
//! Every kernel is assembled for its variant's *minimum* target (`v.min_target`) and the driver
//! JITs it to the device; a JIT failure returns ptxas's log.

use super::{Backend, BackendKind, Batch, DWords, DeviceInfo};
use crate::isa::{Operand, ScaleSelectors, Variant};
use crate::probe::ptx::{FRAGMENT_ENTRY, sparse_fragment_kernel};
use anyhow::{Context, Result, anyhow, bail};
use cudarc::driver::CudaContext;
use cudarc::driver::result::{self, DriverError};
use cudarc::driver::sys;
use std::collections::HashMap;
use std::ffi::{CString, c_void};
use std::sync::Arc;
use std::sync::Mutex;

/// Environment variable naming the device ordinal to open (default 0).
pub const DEVICE_ENV: &str = "FP4PROBE_DEVICE";

/// Most experiments launched at once; larger batches run in chunks of this many.
pub const MAX_CHUNK_EXPERIMENTS: usize = 1 << 20;

/// Bytes of each JIT log buffer (info and error).
const JIT_LOG_BYTES: usize = 64 * 1024;

/// D is filled with this word before every launch, so output the kernel failed to write is
/// visible (note that it is also a legitimate value, e.g. s32 -1, so it is not checked for).
const D_POISON: u32 = 0xFFFF_FFFF;

/// "CUDA_ERROR_INVALID_PTX (a PTX JIT compilation failed)".
fn describe(e: DriverError) -> String {
    let name = e.error_name().map(|s| s.to_string_lossy().into_owned());
    let text = e.error_string().map(|s| s.to_string_lossy().into_owned());
    match (name, text) {
        (Ok(n), Ok(t)) => format!("{n} ({t})"),
        (Ok(n), Err(_)) => n,
        _ => format!("{:?}", e.0),
    }
}

fn check(r: sys::CUresult, what: &str) -> Result<()> {
    r.result().map_err(|e| anyhow!("{what}: {}", describe(e)))
}

fn drv<T>(r: std::result::Result<T, DriverError>, what: &str) -> Result<T> {
    r.map_err(|e| anyhow!("{what}: {}", describe(e)))
}

/// "13.0" from the driver's 13000.
pub fn driver_version_string(v: i32) -> String {
    format!("{}.{}", v / 1000, (v % 1000) / 10)
}

/// The newest PTX ISA version a driver of version `(major, minor)` can JIT.
pub fn max_ptx_for_driver(driver: (u32, u32)) -> (u32, u32) {
    match driver {
        // CUDA 11.x reads PTX 7.x.
        (11, m) => (7, m),
        // 12.0 .. 12.5 read 8.0 .. 8.5; 12.6 still 8.5; 12.8 reads 8.7, 12.9 8.8.
        (12, m) if m <= 5 => (8, m),
        (12, 6) | (12, 7) => (8, 5),
        (12, m) => (8, m - 1),
        // 13.0 reads 9.0, 13.1 9.1, ...; later majors assumed to follow the same +4 step.
        (maj, m) if maj >= 13 => (maj - 4, m),
        // Anything older than 11 reads nothing this tool emits.
        _ => (0, 0),
    }
}

/// `cuDriverGetVersion` of the installed driver (13000 for 13.0), without opening a device;
/// `None` when there is no driver library.
pub fn installed_driver_version() -> Option<i32> {
    // SAFETY: only tries to dlopen the library names cudarc knows; calls no entry point.
    if !unsafe { sys::is_culib_present() } {
        return None;
    }
    let mut version: i32 = 0;
    // SAFETY: the library is present; `version` is a valid out-pointer. cuDriverGetVersion
    // may be called before cuInit.
    unsafe { sys::cuDriverGetVersion(&mut version) }
        .result()
        .ok()?;
    Some(version)
}

fn parse_version(s: &str) -> Option<(u32, u32)> {
    let (a, b) = s.split_once('.')?;
    Some((a.parse().ok()?, b.parse().ok()?))
}

/// A device allocation of `u32` words, freed on drop. The owning context must be current on
/// this thread when it drops (the backend only creates these inside `run`, after binding).
struct DeviceWords {
    ptr: sys::CUdeviceptr,
}

impl DeviceWords {
    /// Allocate room for `words` words (at least one, so empty operands get a valid pointer).
    fn alloc(words: usize, what: &str) -> Result<Self> {
        let bytes = words.max(1) * 4;
        // SAFETY: the backend's context is bound to this thread (checked by the caller); the
        // size is non-zero; the pointer is owned by the returned value and freed exactly once.
        let ptr = drv(
            unsafe { result::malloc_sync(bytes) },
            &format!("cuMemAlloc({what}, {bytes} bytes)"),
        )?;
        Ok(DeviceWords { ptr })
    }

    /// Allocate and copy `host` in.
    fn from_host(host: &[u32], what: &str) -> Result<Self> {
        let d = Self::alloc(host.len(), what)?;
        if !host.is_empty() {
            // SAFETY: `d.ptr` was allocated with at least `host.len() * 4` bytes above; the
            // copy is synchronous, so `host` outlives it.
            drv(
                unsafe { result::memcpy_htod_sync(d.ptr, host) },
                &format!("cuMemcpyHtoD({what})"),
            )?;
        }
        Ok(d)
    }
}

impl Drop for DeviceWords {
    fn drop(&mut self) {
        // SAFETY: `ptr` came from cuMemAlloc and is freed only here. A failure (e.g. after a
        // sticky launch error) can only leak, so it is ignored.
        let _ = unsafe { result::free_sync(self.ptr) };
    }
}

/// A PTX module loaded into the backend's context, unloaded on drop. Holds the context alive.
pub struct PtxModule {
    ctx: Arc<CudaContext>,
    module: sys::CUmodule,
    /// ptxas's informational log (register counts and the like) from the JIT.
    pub info_log: String,
}

impl PtxModule {
    /// The raw module handle (owned by this value: do not unload it).
    pub fn raw(&self) -> sys::CUmodule {
        self.module
    }

    /// The kernel called `name`.
    pub fn function(&self, name: &str) -> Result<sys::CUfunction> {
        let cname = CString::new(name).context("kernel name contains a NUL byte")?;
        drv(self.ctx.bind_to_thread(), "binding the CUDA context")?;
        let mut f: sys::CUfunction = std::ptr::null_mut();
        // SAFETY: `self.module` is a live module of the bound context; `cname` is a valid
        // NUL-terminated string that outlives the call; `f` is a valid out-pointer.
        check(
            unsafe { sys::cuModuleGetFunction(&mut f, self.module, cname.as_ptr()) },
            &format!("cuModuleGetFunction({name})"),
        )?;
        Ok(f)
    }
}

// SAFETY: a CUmodule is a handle into its context, not into the thread that loaded it; every
// use binds `ctx` first, and the driver API is thread-safe. Unloading happens once, in Drop.
unsafe impl Send for PtxModule {}
// SAFETY: as above; `&PtxModule` only reads the handle and the log.
unsafe impl Sync for PtxModule {}

impl Drop for PtxModule {
    fn drop(&mut self) {
        if self.ctx.bind_to_thread().is_ok() {
            // SAFETY: the module was loaded by cuModuleLoadDataEx into `ctx`, which is bound
            // and kept alive by the Arc; it is unloaded only here.
            let _ = unsafe { sys::cuModuleUnload(self.module) };
        }
    }
}

fn log_text(buf: &[u8], written: usize) -> String {
    let bytes = &buf[..written.min(buf.len())];
    let end = bytes.iter().position(|&b| b == 0).unwrap_or(bytes.len());
    String::from_utf8_lossy(&bytes[..end])
        .trim_end()
        .to_string()
}

/// A loaded fragment kernel for one (variant, selectors).
struct FragmentKernel {
    function: sys::CUfunction,
    /// Owns the module `function` belongs to; the handle is valid while this lives.
    _module: PtxModule,
}

// SAFETY: the function handle belongs to `_module` (Send) and is valid in any thread that binds
// the context, which every launch does.
unsafe impl Send for FragmentKernel {}

/// Variant id, scale selectors and sparsity selector.
type KernelKey = (String, [u32; 4], u32);

pub struct CudaBackend {
    // Dropped before `ctx` (fields drop in declaration order); PtxModule binds the context
    // itself when unloading.
    kernels: Mutex<HashMap<KernelKey, FragmentKernel>>,
    ctx: Arc<CudaContext>,
    info: DeviceInfo,
    cc: (u32, u32),
    driver: (u32, u32),
}

impl CudaBackend {
    /// Open device `$FP4PROBE_DEVICE` (default 0). Fails cleanly, never panics, when there is no
    /// driver library, no device, or the ordinal is out of range.
    pub fn open() -> Result<Self> {
        // SAFETY: only tries to dlopen the library names cudarc knows and drops the handle; it
        // calls no driver entry point.
        if !unsafe { sys::is_culib_present() } {
            bail!("libcuda.so not found: no NVIDIA driver on this machine");
        }
        let ordinal = match std::env::var(DEVICE_ENV) {
            Ok(s) => s
                .trim()
                .parse::<usize>()
                .with_context(|| format!("{DEVICE_ENV}={s:?} is not a device ordinal"))?,
            Err(_) => 0,
        };
        match result::init() {
            Err(DriverError(sys::CUresult::CUDA_ERROR_NO_DEVICE)) => {
                bail!("no CUDA device (cuInit: the driver is installed but finds no device)")
            }
            r => drv(r, "cuInit")?,
        }
        let count = drv(result::device::get_count(), "cuDeviceGetCount")?;
        if count <= 0 {
            bail!("no CUDA device (the driver is installed but reports 0 devices)");
        }
        if ordinal >= count as usize {
            bail!("{DEVICE_ENV}={ordinal}, but the driver reports only {count} CUDA device(s)");
        }
        let mut version: i32 = 0;
        // SAFETY: `version` is a valid out-pointer; the library is present and initialised.
        check(
            unsafe { sys::cuDriverGetVersion(&mut version) },
            "cuDriverGetVersion",
        )?;
        let driver_str = driver_version_string(version);
        let driver = (version as u32 / 1000, (version as u32 % 1000) / 10);

        let ctx = drv(
            CudaContext::new(ordinal),
            &format!("creating a context on CUDA device {ordinal}"),
        )?;
        let name = drv(ctx.name(), "cuDeviceGetName")?;
        let (major, minor) = drv(ctx.compute_capability(), "reading the compute capability")?;
        let cc = (major as u32, minor as u32);
        Ok(CudaBackend {
            kernels: Mutex::new(HashMap::new()),
            ctx,
            info: DeviceInfo {
                backend: BackendKind::Hardware,
                name,
                compute_capability: Some(cc),
                driver: Some(driver_str),
            },
            cc,
            driver,
        })
    }

    /// The context this backend runs in.
    pub fn context(&self) -> &Arc<CudaContext> {
        &self.ctx
    }

    /// Load a PTX module with `cuModuleLoadDataEx`, collecting ptxas's logs. A JIT failure
    /// returns an error that contains the error log (and the info log where there is one).
    pub fn load_ptx_module(&self, ptx: &str) -> Result<PtxModule> {
        let image = CString::new(ptx).context("PTX text contains a NUL byte")?;
        drv(self.ctx.bind_to_thread(), "binding the CUDA context")?;
        let mut info = vec![0u8; JIT_LOG_BYTES];
        let mut error = vec![0u8; JIT_LOG_BYTES];
        let mut options = [
            sys::CUjit_option::CU_JIT_INFO_LOG_BUFFER,
            sys::CUjit_option::CU_JIT_INFO_LOG_BUFFER_SIZE_BYTES,
            sys::CUjit_option::CU_JIT_ERROR_LOG_BUFFER,
            sys::CUjit_option::CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES,
            sys::CUjit_option::CU_JIT_LOG_VERBOSE,
        ];
        // Sizes and flags travel as integers in the pointer slots (the driver API's convention);
        // on return the size slots hold the bytes written.
        let mut values: [*mut c_void; 5] = [
            info.as_mut_ptr().cast(),
            std::ptr::without_provenance_mut(JIT_LOG_BYTES),
            error.as_mut_ptr().cast(),
            std::ptr::without_provenance_mut(JIT_LOG_BYTES),
            std::ptr::without_provenance_mut(1),
        ];
        let mut module: sys::CUmodule = std::ptr::null_mut();
        // SAFETY: the context is bound; `image` is NUL-terminated PTX that outlives the call;
        // `options` and `values` have the same length (passed as the count) and the log buffers
        // are JIT_LOG_BYTES long, as declared, and outlive the call; `module` is a valid
        // out-pointer.
        let r = unsafe {
            sys::cuModuleLoadDataEx(
                &mut module,
                image.as_ptr().cast(),
                options.len() as u32,
                options.as_mut_ptr(),
                values.as_mut_ptr(),
            )
        };
        let info_log = log_text(&info, values[1].addr());
        let error_log = log_text(&error, values[3].addr());
        if let Err(e) = r.result() {
            let mut msg = format!("PTX JIT failed: {}", describe(e));
            if !error_log.is_empty() {
                msg += &format!("\nptxas error log:\n{error_log}");
            }
            if !info_log.is_empty() {
                msg += &format!("\nptxas info log:\n{info_log}");
            }
            bail!(msg);
        }
        Ok(PtxModule {
            ctx: self.ctx.clone(),
            module,
            info_log,
        })
    }

    /// The fragment kernel for (v, selectors, sparsity selector), loaded on first use. Scale
    /// selectors are ignored (and not part of the cache key) for variants without block
    /// scaling, the sparsity selector for dense ones.
    fn fragment_function(
        &self,
        v: &Variant,
        sel: ScaleSelectors,
        sparsity: u32,
    ) -> Result<sys::CUfunction> {
        let sel = if v.scale.is_some() {
            sel
        } else {
            ScaleSelectors::default()
        };
        let sparsity = if v.sparse.is_some() { sparsity } else { 0 };
        let key = (
            v.id(),
            [sel.byte_a, sel.thread_a, sel.byte_b, sel.thread_b],
            sparsity,
        );
        if let Some(k) = self
            .kernels
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .get(&key)
        {
            return Ok(k.function);
        }
        let ptx = sparse_fragment_kernel(v, v.min_target, sel, sparsity);
        let module = self.load_ptx_module(&ptx).with_context(|| {
            format!(
                "loading the fragment kernel of {} for {}",
                v.id(),
                v.min_target
            )
        })?;
        let function = module.function(FRAGMENT_ENTRY)?;
        self.kernels
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .insert(
                key,
                FragmentKernel {
                    function,
                    _module: module,
                },
            );
        Ok(function)
    }

    /// Launch one chunk of `n` experiments; the slices are that chunk's part of each buffer.
    fn run_chunk(
        &self,
        f: sys::CUfunction,
        n: usize,
        inputs: &[&[u32]],
        d_words: usize,
    ) -> Result<Vec<u32>> {
        // SAFETY: the fragment kernel takes the input pointers (five, six with the metadata of
        // mma.sp) and D as .u64 parameters;
        // every buffer is sized for `n` experiments of 32 lanes, which is exactly what grid
        // (n,1,1) × block (32,1,1) reads and writes. n <= MAX_CHUNK_EXPERIMENTS < 2^31 - 1.
        unsafe {
            launch_warps(
                f,
                n,
                inputs,
                &["A", "B", "C", "scale_a", "scale_b", "meta"],
                d_words,
                "D",
            )
        }
    }
}

/// Copy `inputs` to the device, fill an output of `out_words` words with 0xFFFFFFFF (so that
/// anything the kernel fails to write shows), launch `f` as `grid` CTAs of 32 threads with one
/// u64 pointer parameter per input followed by the output pointer, and read the output back.
///
/// # Safety
/// The context owning `f` must be bound to this thread, `f` must take exactly those
/// parameters, and it must read and write only within the buffers' sizes for this grid.
unsafe fn launch_warps(
    f: sys::CUfunction,
    grid: usize,
    inputs: &[&[u32]],
    names: &[&str],
    out_words: usize,
    out_name: &str,
) -> Result<Vec<u32>> {
    let bufs = inputs
        .iter()
        .enumerate()
        .map(|(i, h)| {
            let name = names
                .get(i)
                .map_or_else(|| format!("input {i}"), |n| n.to_string());
            DeviceWords::from_host(h, &name)
        })
        .collect::<Result<Vec<_>>>()?;
    let out = DeviceWords::alloc(out_words, out_name)?;
    // SAFETY: `out.ptr` holds at least `out_words` words (allocated above, max(1)).
    check(
        unsafe { sys::cuMemsetD32_v2(out.ptr, D_POISON, out_words) },
        &format!("cuMemsetD32({out_name})"),
    )?;
    let mut ptrs: Vec<sys::CUdeviceptr> = bufs.iter().map(|b| b.ptr).collect();
    ptrs.push(out.ptr);
    let mut params: Vec<*mut c_void> = ptrs
        .iter_mut()
        .map(|p| (p as *mut sys::CUdeviceptr).cast())
        .collect();
    // SAFETY: the caller guarantees `f`'s parameters and bounds; each entry of `params` points
    // at a CUdeviceptr in `ptrs`, which outlives the call (the driver copies parameter values
    // at launch).
    check(
        unsafe {
            sys::cuLaunchKernel(
                f,
                grid as u32,
                1,
                1,
                32,
                1,
                1,
                0,
                std::ptr::null_mut(),
                params.as_mut_ptr(),
                std::ptr::null_mut(),
            )
        },
        &format!("cuLaunchKernel(grid {grid}, block 32)"),
    )?;
    drv(
        result::ctx::synchronize(),
        "running the kernel (cuCtxSynchronize)",
    )?;
    let mut host = vec![0u32; out_words];
    // SAFETY: `out.ptr` holds `out_words` words and the kernel has finished (synchronised).
    drv(
        unsafe { result::memcpy_dtoh_sync(&mut host, out.ptr) },
        &format!("cuMemcpyDtoH({out_name})"),
    )?;
    Ok(host)
}

/// Loading and launching kernels compiled elsewhere (NVRTC cubins from `codegen::verify`).
impl CudaBackend {
    /// Load a cubin (e.g. from NVRTC for `sm_90`) into the backend's context. A cubin needs no
    /// PTX JIT, so it loads whatever PTX ISA version the driver reads.
    pub fn load_cubin_module(&self, cubin: &[u8]) -> Result<PtxModule> {
        if cubin.is_empty() {
            bail!("empty cubin");
        }
        drv(self.ctx.bind_to_thread(), "binding the CUDA context")?;
        let mut module: sys::CUmodule = std::ptr::null_mut();
        // SAFETY: the context is bound; `cubin` is a complete image that outlives the call (the
        // driver copies what it keeps); `module` is a valid out-pointer.
        check(
            unsafe { sys::cuModuleLoadData(&mut module, cubin.as_ptr().cast()) },
            "cuModuleLoadData(cubin)",
        )?;
        Ok(PtxModule {
            ctx: self.ctx.clone(),
            module,
            info_log: String::new(),
        })
    }

    /// Launch kernel `entry` of `module` as one CTA of 32 threads. Its parameters must be
    /// exactly one `u64` pointer per entry of `inputs` (each copied to the device) followed by
    /// one output pointer to `out_words` words (filled with 0xFFFFFFFF first); returns the
    /// output words.
    pub fn launch_one_warp(
        &self,
        module: &PtxModule,
        entry: &str,
        inputs: &[&[u32]],
        out_words: usize,
    ) -> Result<Vec<u32>> {
        if !Arc::ptr_eq(&module.ctx, &self.ctx) {
            bail!("module of another context");
        }
        let f = module.function(entry)?;
        drv(self.ctx.bind_to_thread(), "binding the CUDA context")?;
        // SAFETY: the context is bound; `f` belongs to `module` of this context, borrowed for
        // the whole call; its parameters are one u64 pointer per input and the output (the
        // caller's contract, documented above), for one CTA of 32 threads.
        unsafe { launch_warps(f, 1, inputs, &[], out_words, "output") }
    }
}

impl Drop for CudaBackend {
    fn drop(&mut self) {
        // Unload modules while the context is certainly alive (PtxModule binds it itself).
        if let Ok(k) = self.kernels.get_mut() {
            k.clear();
        }
    }
}

impl Backend for CudaBackend {
    fn info(&self) -> &DeviceInfo {
        &self.info
    }

    fn check_supported(&self, v: &Variant) -> Result<()> {
        let (maj, min) = self.cc;
        if !v.min_target.runs_on(self.cc) {
            bail!(
                "{} requires {}; this device is {} (sm_{maj}{min})",
                v.id(),
                v.min_target,
                self.info.name
            );
        }
        let ptx = v.ptx_version();
        let need =
            parse_version(&ptx).ok_or_else(|| anyhow!("bad PTX version {ptx:?} for {}", v.id()))?;
        let have = max_ptx_for_driver(self.driver);
        if need > have {
            bail!(
                "{} needs PTX ISA {ptx}, but the CUDA driver {} is too old for PTX ISA {ptx} (it JITs up to PTX ISA {}.{})",
                v.id(),
                self.info.driver.as_deref().unwrap_or("?"),
                have.0,
                have.1
            );
        }
        Ok(())
    }

    fn run(&self, v: &Variant, selectors: ScaleSelectors, batch: &Batch) -> Result<DWords> {
        self.check_supported(v)?;
        let wpl = |op: Operand| v.fragment(op).words_per_lane() as usize * 32;
        let (wa, wb, wc, wd) = (
            wpl(Operand::A),
            wpl(Operand::B),
            wpl(Operand::C),
            wpl(Operand::D),
        );
        let ws = if v.scale.is_some() { 32 } else { 0 };
        let wm = if v.sparse.is_some() { 32 } else { 0 };
        let n = batch.experiments;
        for (name, len, per) in [
            ("A", batch.a.len(), wa),
            ("B", batch.b.len(), wb),
            ("C", batch.c.len(), wc),
            ("scale_a", batch.scale_a.len(), ws),
            ("scale_b", batch.scale_b.len(), ws),
            ("meta", batch.meta.len(), wm),
        ] {
            if len != n * per {
                bail!(
                    "batch for {}: {name} has {len} words, expected {} ({n} experiments × {per})",
                    v.id(),
                    n * per
                );
            }
        }
        if n == 0 {
            return Ok(Vec::new());
        }
        batch.check_sparsity_selector(v)?;
        let f = self.fragment_function(v, selectors, batch.sparsity_selector)?;
        drv(self.ctx.bind_to_thread(), "binding the CUDA context")?;
        let mut out = Vec::with_capacity(n * wd);
        let mut start = 0;
        while start < n {
            let m = (n - start).min(MAX_CHUNK_EXPERIMENTS);
            let range = |per: usize| start * per..(start + m) * per;
            let mut inputs = vec![
                &batch.a[range(wa)],
                &batch.b[range(wb)],
                &batch.c[range(wc)],
                &batch.scale_a[range(ws)],
                &batch.scale_b[range(ws)],
            ];
            if v.sparse.is_some() {
                inputs.push(&batch.meta[range(wm)]);
            }
            let d = self.run_chunk(f, m, &inputs, m * wd).with_context(|| {
                format!("running {} (experiments {start}..{})", v.id(), start + m)
            })?;
            out.extend_from_slice(&d);
            start += m;
        }
        Ok(out)
    }
}

// ---------------------------------------------------------------------------------------------
// Benchmark support (`fp4probe bench`): cubin loading, device and function attributes,
// occupancy, device buffers, and launches timed with CUDA events. Separate from the fragment
// probe's path above; nothing above uses it.
// ---------------------------------------------------------------------------------------------

/// A device allocation of `bytes` bytes, freed on drop (binding its context first).
pub struct DeviceBuffer {
    ctx: Arc<CudaContext>,
    ptr: sys::CUdeviceptr,
    bytes: usize,
}

impl DeviceBuffer {
    /// `bytes` bytes (at least 4), set to zero.
    pub fn zeroed(backend: &CudaBackend, bytes: usize, what: &str) -> Result<Self> {
        let bytes = bytes.max(4).next_multiple_of(4);
        drv(backend.ctx.bind_to_thread(), "binding the CUDA context")?;
        // SAFETY: the context is bound; the size is non-zero; the pointer is owned by the
        // returned value and freed exactly once, in Drop.
        let ptr = drv(
            unsafe { result::malloc_sync(bytes) },
            &format!("cuMemAlloc({what}, {bytes} bytes)"),
        )?;
        let buf = DeviceBuffer {
            ctx: backend.ctx.clone(),
            ptr,
            bytes,
        };
        // SAFETY: `ptr` holds `bytes` bytes, a multiple of 4.
        check(
            unsafe { sys::cuMemsetD32_v2(ptr, 0, bytes / 4) },
            &format!("cuMemsetD32({what})"),
        )?;
        Ok(buf)
    }

    /// A buffer holding a copy of `host`.
    pub fn from_words(backend: &CudaBackend, host: &[u32], what: &str) -> Result<Self> {
        let bytes: Vec<u8> = host.iter().flat_map(|w| w.to_le_bytes()).collect();
        Self::from_bytes(backend, &bytes, what)
    }

    pub fn ptr(&self) -> sys::CUdeviceptr {
        self.ptr
    }

    pub fn bytes(&self) -> usize {
        self.bytes
    }

    /// Copy the first `n` u32 words back (synchronous: waits for the work before it).
    pub fn read_u32(&self, n: usize) -> Result<Vec<u32>> {
        let bytes = self.read_bytes(n * 4)?;
        Ok(bytes
            .chunks_exact(4)
            .map(|w| u32::from_le_bytes([w[0], w[1], w[2], w[3]]))
            .collect())
    }

    /// A buffer holding a copy of `host` (padded with zeros to a multiple of 4 bytes).
    pub fn from_bytes(backend: &CudaBackend, host: &[u8], what: &str) -> Result<Self> {
        let buf = Self::zeroed(backend, host.len(), what)?;
        buf.write_bytes(0, host)
            .with_context(|| format!("copying {what} to the device"))?;
        Ok(buf)
    }

    /// Copy `host` to byte `offset` of the buffer (synchronous: after the work before it).
    pub fn write_bytes(&self, offset: usize, host: &[u8]) -> Result<()> {
        if offset
            .checked_add(host.len())
            .is_none_or(|end| end > self.bytes)
        {
            bail!(
                "writing {} bytes at offset {offset} of a buffer of {} bytes",
                host.len(),
                self.bytes
            );
        }
        if host.is_empty() {
            return Ok(());
        }
        drv(self.ctx.bind_to_thread(), "binding the CUDA context")?;
        // SAFETY: the range lies inside the allocation (checked above); the copy is synchronous.
        drv(
            unsafe { result::memcpy_htod_sync(self.ptr + offset as u64, host) },
            "cuMemcpyHtoD",
        )
    }

    /// Copy the first `n` bytes back (synchronous: waits for the work before it).
    pub fn read_bytes(&self, n: usize) -> Result<Vec<u8>> {
        if n > self.bytes {
            bail!("reading {n} bytes from a buffer of {} bytes", self.bytes);
        }
        drv(self.ctx.bind_to_thread(), "binding the CUDA context")?;
        let mut out = vec![0u8; n];
        // SAFETY: the buffer holds at least `n` bytes (checked above).
        drv(
            unsafe { result::memcpy_dtoh_sync(&mut out, self.ptr) },
            "cuMemcpyDtoH",
        )?;
        Ok(out)
    }

    /// Set every byte to zero, in stream order on the null stream (no wait).
    pub fn clear_async(&self) -> Result<()> {
        // SAFETY: `ptr` holds `bytes` bytes, a multiple of 4; the null stream orders it.
        check(
            unsafe { sys::cuMemsetD32Async(self.ptr, 0, self.bytes / 4, std::ptr::null_mut()) },
            "cuMemsetD32Async",
        )
    }

    /// Copy all of `src` (at most this buffer's size) device to device, on the null stream.
    pub fn copy_from_async(&self, src: &DeviceBuffer) -> Result<()> {
        if src.bytes > self.bytes {
            bail!(
                "copying {} bytes into a buffer of {}",
                src.bytes,
                self.bytes
            );
        }
        // SAFETY: both allocations are live and hold at least `src.bytes` bytes.
        check(
            unsafe {
                sys::cuMemcpyDtoDAsync_v2(self.ptr, src.ptr, src.bytes, std::ptr::null_mut())
            },
            "cuMemcpyDtoDAsync",
        )
    }

    /// Copy `bytes` bytes from the start of `src` to byte `offset` of this buffer, on the
    /// null stream.
    pub fn copy_range_from_async(
        &self,
        offset: usize,
        src: &DeviceBuffer,
        bytes: usize,
    ) -> Result<()> {
        if offset + bytes > self.bytes || bytes > src.bytes {
            bail!(
                "copy of {bytes} bytes to offset {offset} exceeds a buffer ({} / {} bytes)",
                self.bytes,
                src.bytes
            );
        }
        // SAFETY: both ranges lie inside live allocations (checked above).
        check(
            unsafe {
                sys::cuMemcpyDtoDAsync_v2(
                    self.ptr + offset as u64,
                    src.ptr,
                    bytes,
                    std::ptr::null_mut(),
                )
            },
            "cuMemcpyDtoDAsync",
        )
    }

    /// Copy the first `n` u64 words back.
    pub fn read_u64(&self, n: usize) -> Result<Vec<u64>> {
        if n * 8 > self.bytes {
            bail!(
                "reading {n} u64 words from a buffer of {} bytes",
                self.bytes
            );
        }
        drv(self.ctx.bind_to_thread(), "binding the CUDA context")?;
        let mut out = vec![0u64; n];
        // SAFETY: the buffer holds at least `n * 8` bytes (checked above).
        drv(
            unsafe { result::memcpy_dtoh_sync(&mut out, self.ptr) },
            "cuMemcpyDtoH",
        )?;
        Ok(out)
    }
}

impl Drop for DeviceBuffer {
    fn drop(&mut self) {
        if self.ctx.bind_to_thread().is_ok() {
            // SAFETY: `ptr` came from cuMemAlloc in this context and is freed only here; a
            // failure can only leak.
            let _ = unsafe { result::free_sync(self.ptr) };
        }
    }
}

/// Repeated timings of one piece of GPU work, in milliseconds.
#[derive(Clone, Copy, Debug)]
pub struct Timing {
    pub median: f64,
    pub min: f64,
    pub max: f64,
}

/// How `median_ms_with` times its runs: queued back to back, each between its own events
/// (the GPU's time alone), or one at a time with a wait after each (adds the host's launch
/// latency to every run; kept to show the difference).
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Timed {
    Queued,
    Synced,
}

/// One kernel parameter, as the kernel declares it.
#[derive(Clone, Copy, Debug)]
pub enum KernelArg {
    /// `.param .u64` holding a device pointer.
    Ptr(sys::CUdeviceptr),
    /// `.param .u32`.
    U32(u32),
}

/// When a launch may start after the kernel enqueued before it on its stream.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum After {
    /// Once it has completed (a plain launch).
    Completion,
    /// Programmatic dependent launch (sm_90 and later): once every CTA of that kernel has
    /// executed `griddepcontrol.launch_dependents` (or exited), so the launch's latency hides
    /// behind that kernel's tail; the kernel launched waits for the one before with
    /// `griddepcontrol.wait`, which returns once it has completed and its writes are visible.
    /// Everything enqueued before that kernel is complete by then. (The CUDA documentation
    /// names no restriction to created streams; on the H200 the legacy null stream takes it
    /// and the launches overlap.)
    Trigger,
}

/// A launch's parameter pointers (`kernelParams`): each value in its own slot of the right
/// width, the slots sized up front, so the pointers into them stay valid while this lives.
struct Params {
    _wide: Vec<u64>,
    _narrow: Vec<u32>,
    ptrs: Vec<*mut c_void>,
}

impl Params {
    fn new(args: &[KernelArg]) -> Self {
        let mut wide: Vec<u64> = Vec::with_capacity(args.len());
        let mut narrow: Vec<u32> = Vec::with_capacity(args.len());
        for a in args {
            match *a {
                KernelArg::Ptr(p) => wide.push(p),
                KernelArg::U32(x) => narrow.push(x),
            }
        }
        let (wp, np) = (wide.as_mut_ptr(), narrow.as_mut_ptr());
        let (mut wi, mut ni) = (0, 0);
        let mut ptrs: Vec<*mut c_void> = Vec::with_capacity(args.len());
        for a in args {
            match a {
                KernelArg::Ptr(_) => {
                    ptrs.push(wp.wrapping_add(wi).cast());
                    wi += 1;
                }
                KernelArg::U32(_) => {
                    ptrs.push(np.wrapping_add(ni).cast());
                    ni += 1;
                }
            }
        }
        Params {
            _wide: wide,
            _narrow: narrow,
            ptrs,
        }
    }
}

/// A CUDA event, destroyed on drop.
struct Event(sys::CUevent);

impl Event {
    fn new() -> Result<Self> {
        drv(
            result::event::create(sys::CUevent_flags::CU_EVENT_DEFAULT),
            "cuEventCreate",
        )
        .map(Event)
    }
}

impl Drop for Event {
    fn drop(&mut self) {
        // SAFETY: created by cuEventCreate, destroyed only here.
        let _ = unsafe { result::event::destroy(self.0) };
    }
}

impl CudaBackend {
    /// Compute capability (major, minor).
    pub fn compute_capability(&self) -> (u32, u32) {
        self.cc
    }

    /// Driver version (major, minor), e.g. (13, 0).
    pub fn driver_version(&self) -> (u32, u32) {
        self.driver
    }

    /// A device attribute (`cuDeviceGetAttribute`).
    pub fn device_attribute(&self, attr: sys::CUdevice_attribute) -> Result<i32> {
        drv(
            self.ctx.attribute(attr),
            &format!("cuDeviceGetAttribute({attr:?})"),
        )
    }

    /// Number of streaming multiprocessors.
    pub fn sm_count(&self) -> Result<u32> {
        self.device_attribute(sys::CUdevice_attribute::CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT)
            .map(|n| n as u32)
    }

    /// The SM clock the driver reports (`CU_DEVICE_ATTRIBUTE_CLOCK_RATE`), in kHz: the peak
    /// clock, not the clock a kernel actually runs at (clocks are not locked).
    pub fn clock_rate_khz(&self) -> Result<u32> {
        self.device_attribute(sys::CUdevice_attribute::CU_DEVICE_ATTRIBUTE_CLOCK_RATE)
            .map(|n| n as u32)
    }

    /// Load a cubin (SASS for this device) with `cuModuleLoadData`: no JIT, so what runs is
    /// exactly the machine code in `cubin`.
    pub fn load_cubin(&self, cubin: &[u8]) -> Result<PtxModule> {
        if cubin.is_empty() {
            bail!("empty cubin");
        }
        // The driver reads the ELF image in place: give it 8-byte alignment.
        let mut image = vec![0u64; cubin.len().div_ceil(8)];
        // SAFETY: `image` has at least `cubin.len()` bytes; u64 has no invalid bit patterns.
        unsafe {
            std::ptr::copy_nonoverlapping(
                cubin.as_ptr(),
                image.as_mut_ptr().cast::<u8>(),
                cubin.len(),
            );
        }
        drv(self.ctx.bind_to_thread(), "binding the CUDA context")?;
        let mut module: sys::CUmodule = std::ptr::null_mut();
        // SAFETY: the context is bound; `image` is a complete cubin that outlives the call;
        // `module` is a valid out-pointer.
        check(
            unsafe { sys::cuModuleLoadData(&mut module, image.as_ptr().cast()) },
            "cuModuleLoadData(cubin)",
        )?;
        Ok(PtxModule {
            ctx: self.ctx.clone(),
            module,
            info_log: String::new(),
        })
    }

    /// A function attribute (`cuFuncGetAttribute`), e.g. `CU_FUNC_ATTRIBUTE_NUM_REGS`.
    ///
    /// # Safety
    /// `f` must be a function of a module loaded into this backend's context and still loaded.
    pub unsafe fn function_attribute(
        &self,
        f: sys::CUfunction,
        attr: sys::CUfunction_attribute,
    ) -> Result<i32> {
        drv(self.ctx.bind_to_thread(), "binding the CUDA context")?;
        // SAFETY: the caller guarantees `f` is a live function of the bound context.
        drv(
            unsafe { result::function::get_function_attribute(f, attr) },
            &format!("cuFuncGetAttribute({attr:?})"),
        )
    }

    /// How many blocks of `threads` threads (no dynamic shared memory) fit on one SM at once
    /// (`cuOccupancyMaxActiveBlocksPerMultiprocessor`).
    ///
    /// # Safety
    /// `f` must be a function of a module loaded into this backend's context and still loaded.
    pub unsafe fn max_active_blocks_per_sm(&self, f: sys::CUfunction, threads: u32) -> Result<u32> {
        drv(self.ctx.bind_to_thread(), "binding the CUDA context")?;
        let mut n: i32 = 0;
        // SAFETY: the caller guarantees `f` is a live function of the bound context; `n` is a
        // valid out-pointer.
        check(
            unsafe {
                sys::cuOccupancyMaxActiveBlocksPerMultiprocessor(&mut n, f, threads as i32, 0)
            },
            "cuOccupancyMaxActiveBlocksPerMultiprocessor",
        )?;
        Ok(n.max(0) as u32)
    }

    /// Launch `f` on grid (`grid`,1,1) × block (`block`,1,1) on the null stream, without
    /// waiting (errors of the kernel itself surface at the next synchronisation).
    ///
    /// # Safety
    /// `args` must match the kernel's parameter list exactly (count, order and types: `Ptr`
    /// for `.u64`, `U32` for `.u32`), and every pointer must reference a live allocation large
    /// enough for everything this grid reads and writes.
    pub unsafe fn launch(
        &self,
        f: sys::CUfunction,
        grid: u32,
        block: u32,
        args: &[KernelArg],
    ) -> Result<()> {
        // SAFETY: forwarded from the caller.
        unsafe { self.launch_2d(f, (grid, 1), block, args) }
    }

    /// `launch` on a two-dimensional grid (`grid.0`, `grid.1`, 1).
    ///
    /// # Safety
    /// As for `launch`.
    pub unsafe fn launch_2d(
        &self,
        f: sys::CUfunction,
        grid: (u32, u32),
        block: u32,
        args: &[KernelArg],
    ) -> Result<()> {
        // SAFETY: forwarded from the caller.
        unsafe { self.launch_3d(f, (grid.0, grid.1, 1), (block, 1), args) }
    }

    /// `launch` on a three-dimensional grid and a two-dimensional block.
    ///
    /// # Safety
    /// As for `launch`.
    pub unsafe fn launch_3d(
        &self,
        f: sys::CUfunction,
        grid: (u32, u32, u32),
        block: (u32, u32),
        args: &[KernelArg],
    ) -> Result<()> {
        // SAFETY: forwarded from the caller.
        unsafe { self.launch_3d_smem(f, grid, block, 0, args) }
    }

    /// Let `f` take up to `bytes` of dynamic shared memory per block (above the default 48 KiB
    /// a launch of more needs `CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES`).
    ///
    /// # Safety
    /// `f` must be a function of a module loaded into this backend's context and still loaded.
    pub unsafe fn set_max_dynamic_smem(&self, f: sys::CUfunction, bytes: u32) -> Result<()> {
        drv(self.ctx.bind_to_thread(), "binding the CUDA context")?;
        // SAFETY: the caller guarantees `f` is a live function of the bound context.
        check(
            unsafe {
                sys::cuFuncSetAttribute(
                    f,
                    sys::CUfunction_attribute::CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                    bytes as i32,
                )
            },
            &format!("cuFuncSetAttribute(max dynamic shared memory {bytes} bytes)"),
        )
    }

    /// `launch_3d` with `smem_bytes` of dynamic shared memory per block.
    ///
    /// # Safety
    /// As for `launch`; more than 48 KiB needs `set_max_dynamic_smem` first.
    pub unsafe fn launch_3d_smem(
        &self,
        f: sys::CUfunction,
        grid: (u32, u32, u32),
        block: (u32, u32),
        smem_bytes: u32,
        args: &[KernelArg],
    ) -> Result<()> {
        // SAFETY: forwarded from the caller; the null stream is always valid.
        unsafe {
            self.launch_on(
                std::ptr::null_mut(),
                After::Completion,
                f,
                grid,
                block,
                smem_bytes,
                args,
            )
        }
    }

    /// `launch_3d_smem` on `stream` (null: the legacy default stream), after the work before
    /// it there as `after` says.
    ///
    /// # Safety
    /// As for `launch_3d_smem`; `stream` must be null or a live stream of this context, and
    /// the buffers `args` point to must be ready in its order; with `After::Trigger`, `f` must
    /// execute `griddepcontrol.wait` before it reads or writes anything the kernel before it
    /// reads or writes.
    #[allow(clippy::too_many_arguments)]
    pub unsafe fn launch_on(
        &self,
        stream: sys::CUstream,
        after: After,
        f: sys::CUfunction,
        grid: (u32, u32, u32),
        block: (u32, u32),
        smem_bytes: u32,
        args: &[KernelArg],
    ) -> Result<()> {
        drv(self.ctx.bind_to_thread(), "binding the CUDA context")?;
        let mut params = Params::new(args);
        // One call for both: cuLaunchKernelEx with no attribute is cuLaunchKernel; a
        // programmatic dependent adds the one that lets it start before the kernel ahead ends.
        // The value's bytes zeroed, then the field the attribute's id names.
        let mut value = sys::CUlaunchAttributeValue { pad: [0; 64] };
        value.programmaticStreamSerializationAllowed = 1;
        let mut attr = sys::CUlaunchAttribute {
            id: sys::CUlaunchAttributeID::CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION,
            pad: [0; 4],
            value,
        };
        let (call, num_attrs) = match after {
            After::Completion => ("cuLaunchKernelEx", 0),
            After::Trigger => ("cuLaunchKernelEx(programmatic dependent)", 1),
        };
        let config = sys::CUlaunchConfig {
            gridDimX: grid.0,
            gridDimY: grid.1,
            gridDimZ: grid.2,
            blockDimX: block.0,
            blockDimY: block.1,
            blockDimZ: 1,
            sharedMemBytes: smem_bytes,
            hStream: stream,
            attrs: &mut attr,
            numAttrs: num_attrs,
        };
        let what = format!(
            "{call}(grid {grid:?}, block {block:?}, {smem_bytes} bytes dynamic shared memory)"
        );
        // SAFETY: the caller guarantees `args` matches the kernel and, with After::Trigger,
        // that it waits on the kernel before it (griddepcontrol.wait); `config` and the
        // attribute it points to live through the call; `params` points into its own slots,
        // which outlive the call (the driver copies parameters at launch).
        check(
            unsafe {
                sys::cuLaunchKernelEx(&config, f, params.ptrs.as_mut_ptr(), std::ptr::null_mut())
            },
            &what,
        )
    }

    /// Run `work` (which enqueues on the null stream) between two CUDA events, wait for it,
    /// and return the events' elapsed time in milliseconds.
    pub fn time_ms(&self, work: impl FnOnce() -> Result<()>) -> Result<f32> {
        drv(self.ctx.bind_to_thread(), "binding the CUDA context")?;
        let (start, end) = Self::between_events(work)?;
        drv(
            result::ctx::synchronize(),
            "running the kernel (cuCtxSynchronize)",
        )?;
        Self::elapsed_ms(&start, &end)
    }

    /// Record an event on the null stream of the bound context, enqueue `work`, record another.
    fn between_events(work: impl FnOnce() -> Result<()>) -> Result<(Event, Event)> {
        let (start, end) = (Event::new()?, Event::new()?);
        let null: sys::CUstream = std::ptr::null_mut();
        // SAFETY: the events are live; recording on the null stream of the bound context.
        drv(
            unsafe { result::event::record(start.0, null) },
            "cuEventRecord",
        )?;
        work()?;
        // SAFETY: as above.
        drv(
            unsafe { result::event::record(end.0, null) },
            "cuEventRecord",
        )?;
        Ok((start, end))
    }

    /// Milliseconds between two events recorded by `between_events`, once both completed.
    fn elapsed_ms(start: &Event, end: &Event) -> Result<f32> {
        // SAFETY: both events were recorded, and the caller waited for them.
        drv(
            unsafe { result::event::elapsed(start.0, end.0) },
            "cuEventElapsedTime",
        )
    }

    /// Median, minimum and maximum of `repeats` CUDA-event timings of `work` (which enqueues
    /// on the null stream), after `warmup` untimed runs, in milliseconds.
    ///
    /// The runs are queued back to back, each between its own pair of events, and waited for
    /// once at the end (what `torch.cuda.Event` timing loops do). Why: waiting after every run
    /// leaves the GPU idle when the next start event is recorded, so each interval would also
    /// hold the host's launch latency (measured 2–4 µs on the H100: 5–10% of a 35 µs kernel);
    /// queued, the next launch is already waiting when the GPU reaches it, and the interval
    /// is the GPU's time for the work alone. `Timed::Synced` keeps the old method for A/B.
    pub fn median_ms(
        &self,
        warmup: usize,
        repeats: usize,
        work: impl FnMut() -> Result<()>,
    ) -> Result<Timing> {
        self.median_ms_with(Timed::Queued, warmup, repeats, work)
    }

    /// `median_ms` with a choice of how the runs are timed.
    pub fn median_ms_with(
        &self,
        how: Timed,
        warmup: usize,
        repeats: usize,
        mut work: impl FnMut() -> Result<()>,
    ) -> Result<Timing> {
        for _ in 0..warmup {
            work()?;
        }
        let mut ms = Vec::with_capacity(repeats.max(1));
        match how {
            Timed::Synced => {
                self.synchronize()?;
                for _ in 0..repeats.max(1) {
                    ms.push(self.time_ms(&mut work)? as f64);
                }
            }
            Timed::Queued => {
                drv(self.ctx.bind_to_thread(), "binding the CUDA context")?;
                let pairs = (0..repeats.max(1))
                    .map(|_| Self::between_events(&mut work))
                    .collect::<Result<Vec<_>>>()?;
                self.synchronize()?;
                for (start, end) in &pairs {
                    ms.push(Self::elapsed_ms(start, end)? as f64);
                }
            }
        }
        ms.sort_by(f64::total_cmp);
        Ok(Timing {
            median: ms[ms.len() / 2],
            min: ms[0],
            max: ms[ms.len() - 1],
        })
    }

    /// `launch` timed with `time_ms`.
    ///
    /// # Safety
    /// As for `launch`.
    pub unsafe fn launch_timed(
        &self,
        f: sys::CUfunction,
        grid: u32,
        block: u32,
        args: &[KernelArg],
    ) -> Result<f32> {
        // SAFETY: forwarded from the caller.
        self.time_ms(|| unsafe { self.launch(f, grid, block, args) })
    }

    /// Wait for everything enqueued so far; a kernel fault shows up here.
    pub fn synchronize(&self) -> Result<()> {
        drv(self.ctx.bind_to_thread(), "binding the CUDA context")?;
        drv(
            result::ctx::synchronize(),
            "running the kernel (cuCtxSynchronize)",
        )
    }

    /// A 2D tiled tensor map (`cuTensorMapEncodeTiled`) over `global`: `dims` = (inner, outer)
    /// elements, `row_bytes` the outer stride, `box_dims` = (inner, outer) elements, element
    /// strides 1, no interleave, no L2 promotion, out-of-bound elements as zeros. The driver
    /// checks every field; its refusal is the error. The 128 bytes go to the kernel as they are.
    pub fn encode_tensor_map_2d(
        &self,
        data_type: sys::CUtensorMapDataType,
        global: sys::CUdeviceptr,
        dims: [u64; 2],
        row_bytes: u64,
        box_dims: [u32; 2],
        swizzle: sys::CUtensorMapSwizzle,
    ) -> Result<[u8; 128]> {
        drv(self.ctx.bind_to_thread(), "binding the CUDA context")?;
        let mut map = sys::CUtensorMap { opaque: [0; 16] };
        let strides = [row_bytes];
        let element_strides = [1u32, 1];
        // SAFETY: every pointer references a live local array of the length rank 2 asks for
        // (dims, box and element strides: 2; global strides: rank − 1 = 1); `map` is a valid
        // out-pointer; the driver only reads `global` as a number.
        check(
            unsafe {
                sys::cuTensorMapEncodeTiled(
                    &mut map,
                    data_type,
                    2,
                    global as *mut c_void,
                    dims.as_ptr(),
                    strides.as_ptr(),
                    box_dims.as_ptr(),
                    element_strides.as_ptr(),
                    sys::CUtensorMapInterleave::CU_TENSOR_MAP_INTERLEAVE_NONE,
                    swizzle,
                    sys::CUtensorMapL2promotion::CU_TENSOR_MAP_L2_PROMOTION_NONE,
                    sys::CUtensorMapFloatOOBfill::CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE,
                )
            },
            "cuTensorMapEncodeTiled",
        )?;
        let mut out = [0u8; 128];
        for (chunk, w) in out.chunks_exact_mut(8).zip(map.opaque) {
            chunk.copy_from_slice(&w.to_le_bytes());
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn open_without_driver_is_an_error_not_a_panic() {
        // SAFETY: only probes for the library file.
        let present = unsafe { sys::is_culib_present() };
        let r = std::panic::catch_unwind(CudaBackend::open);
        let r = r.expect("CudaBackend::open panicked");
        if !present {
            let e = r.err().expect("open succeeded without libcuda");
            assert!(format!("{e:#}").contains("libcuda.so not found"), "{e:#}");
        }
    }

    #[test]
    fn driver_versions() {
        assert_eq!(driver_version_string(13000), "13.0");
        assert_eq!(driver_version_string(12080), "12.8");
        assert_eq!(driver_version_string(12090), "12.9");
        assert_eq!(max_ptx_for_driver((12, 8)), (8, 7));
        assert_eq!(max_ptx_for_driver((12, 9)), (8, 8));
        assert_eq!(max_ptx_for_driver((13, 0)), (9, 0));
        assert_eq!(max_ptx_for_driver((13, 1)), (9, 1));
        assert_eq!(max_ptx_for_driver((13, 2)), (9, 2));
        assert_eq!(max_ptx_for_driver((12, 4)), (8, 4));
        assert_eq!(max_ptx_for_driver((12, 6)), (8, 5));
    }
}
