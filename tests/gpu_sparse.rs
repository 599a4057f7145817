//! Hardware test of the `mma.sp` probe, ignored unless asked for: on an sm_80 (or later) GPU,
//! `cargo test --release --test gpu_sparse -- --ignored`.
//!
//! Every sparse variant the device runs is probed: the lane maps and the metadata map of every
//! sparsity selector must be inferred and validate bit for bit against the CPU sparse GEMM on
//! the identity and on random 2:4 patterns. The test prints how far each metadata map is from
//! the documented model without requiring agreement (that is what the probe measures).

use fp4probe::device::Backend;
use fp4probe::isa::catalog;
use fp4probe::layout::meta::documented_meta;
use fp4probe::probe::sparse::probe;

#[path = "support/gpu.rs"]
mod gpu_support;
use gpu_support::gpu;

#[test]
#[ignore = "needs an NVIDIA GPU: run with `cargo test --release -- --ignored` on a GPU machine"]
fn every_sparse_variant_the_device_runs_validates_on_the_gpu() {
    let dev = gpu("every_sparse_variant_the_device_runs_validates_on_the_gpu");
    let mut ran = 0;
    for v in catalog().into_iter().filter(|v| v.sparse.is_some()) {
        if dev.check_supported(&v).is_err() {
            continue;
        }
        let out = probe(&dev, &v, 11, false).unwrap_or_else(|e| panic!("{}: {e:#}", v.id()));
        assert!(
            out.passed(),
            "{}: {:?}",
            v.id(),
            out.lanes.layout.as_ref().err()
        );
        for s in &out.selectors {
            let fields = s.fields.as_ref().expect("passed");
            let documented = documented_meta(&v, s.selector);
            let differ = fields.iter().filter(|f| !documented.contains(f)).count();
            eprintln!(
                "{} selector {}: passed, {differ} of {} metadata fields placed unlike the \
                 documented model",
                v.id(),
                s.selector,
                fields.len()
            );
        }
        ran += 1;
    }
    assert!(ran > 0, "the device runs none of the sparse variants");
}
