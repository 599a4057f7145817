//! The device of the GPU tests. Every test that needs a GPU carries
//! `#[ignore = "needs an NVIDIA GPU: ..."]`, so a run without one lists it as ignored, with the
//! reason, instead of reporting a pass for a test that did nothing; on a GPU machine
//! `cargo test --release -- --ignored` runs them. Run that way without a usable GPU, the test
//! fails here, saying why.

use fp4probe::device::cuda::CudaBackend;

/// The CUDA device, or a panic that names the test and what is missing.
pub fn gpu(test: &str) -> CudaBackend {
    CudaBackend::open().unwrap_or_else(|e| {
        panic!(
            "{test} needs an NVIDIA GPU with its driver, and none could be opened: {e:#}. It is \
             #[ignore]d for that reason; run it with `cargo test --release -- --ignored` on a \
             GPU machine"
        )
    })
}
