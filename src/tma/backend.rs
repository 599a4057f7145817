//! What runs TMA experiments: the GPU (the probe kernel of [`super::kernel`], one warp per
//! experiment, a tensor map encoded by the driver for each) or the emulator. Both take the
//! same [`Experiment`]s and give the same [`Observed`], so the probe never knows which ran.

use super::kernel::{ENTRY, STATUS_DONE, STSM_ENTRY, out_words, probe_kernel, stsm_kernel};
use super::{Case, Swizzle};
use crate::device::DeviceInfo;
use crate::device::cuda::{CudaBackend, DeviceBuffer, KernelArg};
use anyhow::{Context, Result, bail};
use cudarc::driver::sys;
use serde::{Deserialize, Serialize};

/// The inputs of one experiment.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Experiment {
    /// The global tensor, row-major ([`Case::global_bytes`] bytes).
    pub global: Vec<u8>,
    /// The shared region before the copy ([`Case::region_bytes`] bytes from the box's
    /// address).
    pub smem: Vec<u8>,
}

/// What one experiment left behind.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Observed {
    pub global: Vec<u8>,
    pub smem: Vec<u8>,
    /// Whether the copy completed (a load's mbarrier wait did not give up).
    pub completed: bool,
}

pub trait TmaBackend: Sync {
    fn info(&self) -> &DeviceInfo;
    /// Ok if this backend runs `case`; otherwise an error naming what it needs.
    fn check_supported(&self, case: &Case) -> Result<()>;
    /// Run every experiment, in order.
    fn run(&self, case: &Case, xs: &[Experiment]) -> Result<Vec<Observed>>;
    /// The `stmatrix` + store path of [`super::stsm`] on store case `case`: `addrs` per call
    /// and lane, `src` per call, lane and register; the global tensor afterwards (zeros
    /// before).
    fn run_stsm(&self, case: &Case, addrs: &[u32], src: &[u32]) -> Result<Vec<u8>>;
}

fn data_type(case: &Case) -> sys::CUtensorMapDataType {
    use sys::CUtensorMapDataType as T;
    match case.elem_bytes {
        1 => T::CU_TENSOR_MAP_DATA_TYPE_UINT8,
        2 => T::CU_TENSOR_MAP_DATA_TYPE_UINT16,
        _ => T::CU_TENSOR_MAP_DATA_TYPE_UINT32,
    }
}

fn swizzle(s: Swizzle) -> sys::CUtensorMapSwizzle {
    use sys::CUtensorMapSwizzle as S;
    match s {
        Swizzle::None => S::CU_TENSOR_MAP_SWIZZLE_NONE,
        Swizzle::B32 => S::CU_TENSOR_MAP_SWIZZLE_32B,
        Swizzle::B64 => S::CU_TENSOR_MAP_SWIZZLE_64B,
        Swizzle::B128 => S::CU_TENSOR_MAP_SWIZZLE_128B,
    }
}

/// Refuse an experiment whose buffers do not have the case's sizes.
pub fn check_sizes(case: &Case, x: &Experiment) -> Result<()> {
    if x.global.len() != case.global_bytes() || x.smem.len() != case.region_bytes() as usize {
        bail!(
            "{case}: experiment with {} global and {} shared bytes, expected {} and {}",
            x.global.len(),
            x.smem.len(),
            case.global_bytes(),
            case.region_bytes()
        );
    }
    Ok(())
}

impl CudaBackend {
    /// A device copy of `case`'s global tensor from `bytes` and the tensor map over it.
    fn tensor(&self, case: &Case, bytes: &[u8]) -> Result<(DeviceBuffer, DeviceBuffer)> {
        let (rows, cols) = case.global_dims();
        let global = DeviceBuffer::from_bytes(self, bytes, "global tensor")?;
        let map = self.encode_tensor_map_2d(
            data_type(case),
            global.ptr(),
            [cols as u64, rows as u64],
            (cols * case.elem_bytes) as u64,
            [case.box_cols, case.box_rows],
            swizzle(case.swizzle),
        )?;
        let map = DeviceBuffer::from_bytes(self, &map, "tensor map")?;
        Ok((global, map))
    }

    fn run_tma(
        &self,
        module: &crate::device::cuda::PtxModule,
        case: &Case,
        x: &Experiment,
    ) -> Result<Observed> {
        check_sizes(case, x)?;
        let (global, map) = self.tensor(case, &x.global)?;
        let input = DeviceBuffer::from_bytes(self, &x.smem, "shared region in")?;
        let out = DeviceBuffer::zeroed(self, 4 * out_words(case), "shared region out")?;
        let f = module.function(ENTRY)?;
        // SAFETY: the kernel takes three .u64 pointers (map, region in, region out) and, as one
        // warp, reads the 128-byte map, `region_bytes` from `input` and writes `out_words`
        // words to `out`; the copy touches only the global tensor's box, inside `global`
        // (the map's dimensions are the buffer's).
        unsafe {
            self.launch(
                f,
                1,
                32,
                &[
                    KernelArg::Ptr(map.ptr()),
                    KernelArg::Ptr(input.ptr()),
                    KernelArg::Ptr(out.ptr()),
                ],
            )?;
        }
        self.synchronize()?;
        let words = out.read_u32(out_words(case))?;
        let (status, region) = words.split_last().context("empty output")?;
        Ok(Observed {
            global: global.read_bytes(x.global.len())?,
            smem: region.iter().flat_map(|w| w.to_le_bytes()).collect(),
            completed: *status == STATUS_DONE,
        })
    }
}

impl TmaBackend for CudaBackend {
    fn info(&self) -> &DeviceInfo {
        crate::device::Backend::info(self)
    }

    fn check_supported(&self, case: &Case) -> Result<()> {
        case.check()?;
        let (maj, min) = self.compute_capability();
        if maj < 9 {
            bail!(
                "{case}: bulk tensor copies need sm_90 or later; this device is {} (sm_{maj}{min})",
                crate::device::Backend::info(self).name
            );
        }
        Ok(())
    }

    fn run(&self, case: &Case, xs: &[Experiment]) -> Result<Vec<Observed>> {
        TmaBackend::check_supported(self, case)?;
        let module = self
            .load_ptx_module(&probe_kernel(case))
            .with_context(|| format!("loading the probe kernel of {case}"))?;
        xs.iter()
            .enumerate()
            .map(|(i, x)| {
                self.run_tma(&module, case, x)
                    .with_context(|| format!("running {case} (experiment {i})"))
            })
            .collect()
    }

    fn run_stsm(&self, case: &Case, addrs: &[u32], src: &[u32]) -> Result<Vec<u8>> {
        TmaBackend::check_supported(self, case)?;
        let calls = super::stsm::calls(case) as usize;
        if addrs.len() != 32 * calls || src.len() != 128 * calls {
            bail!(
                "{case}: {} addresses and {} source words, expected {} and {}",
                addrs.len(),
                src.len(),
                32 * calls,
                128 * calls
            );
        }
        if let Some(a) = addrs
            .iter()
            .find(|&&a| a % 16 != 0 || a + 16 > case.box_bytes())
        {
            bail!("{case}: stmatrix address {a} is not a 16-byte row inside the box");
        }
        let v = super::stsm::stsm()?;
        let module = self
            .load_ptx_module(&stsm_kernel(case, &v))
            .with_context(|| format!("loading the stmatrix + store kernel of {case}"))?;
        let (global, map) = self.tensor(case, &vec![0; case.global_bytes()])?;
        let a = DeviceBuffer::from_words(self, addrs, "stmatrix addresses")?;
        let s = DeviceBuffer::from_words(self, src, "stmatrix sources")?;
        let f = module.function(STSM_ENTRY)?;
        // SAFETY: the kernel takes three .u64 pointers (map, addresses, sources) and, as one
        // warp, reads 32 addresses and 128 source words per call (the sizes checked above);
        // every address is a 16-byte row inside the box (checked above), and the store
        // touches only the box inside `global` (the map's dimensions are the buffer's).
        unsafe {
            self.launch(
                f,
                1,
                32,
                &[
                    KernelArg::Ptr(map.ptr()),
                    KernelArg::Ptr(a.ptr()),
                    KernelArg::Ptr(s.ptr()),
                ],
            )?;
        }
        self.synchronize()
            .with_context(|| format!("running the stmatrix + store path of {case}"))?;
        global.read_bytes(case.global_bytes())
    }
}
