//! CUDA backend (placeholder until the driver-API implementation lands).
use super::{Backend, Batch, DWords, DeviceInfo};
use crate::isa::{ScaleSelectors, Variant};
use anyhow::{Result, bail};
pub struct CudaBackend {
    info: DeviceInfo,
}
impl CudaBackend {
    pub fn open() -> Result<Self> {
        bail!("CUDA backend not built yet")
    }
}
impl Backend for CudaBackend {
    fn info(&self) -> &DeviceInfo {
        &self.info
    }
    fn check_supported(&self, _v: &Variant) -> Result<()> {
        bail!("unimplemented")
    }
    fn run(&self, _v: &Variant, _s: ScaleSelectors, _b: &Batch) -> Result<DWords> {
        bail!("unimplemented")
    }
}
