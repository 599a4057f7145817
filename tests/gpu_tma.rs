//! Hardware test of the TMA probes, ignored unless asked for: on an sm_90 (or later) GPU,
//! `cargo test --release --test gpu_tma -- --ignored`.
//!
//! Every case of the catalog is probed on the GPU: the placement read off the tag experiments
//! must place every box element once, and both random experiments must match the prediction
//! through it byte for byte. The emulator's placement is the documented swizzle; the test
//! prints how many elements differ from it, as the report does, without requiring agreement
//! (that is what the probe is there to find out).

use fp4probe::tma::backend::TmaBackend;
use fp4probe::tma::catalog;
use fp4probe::tma::model::documented;
use fp4probe::tma::probe::probe;

#[path = "support/gpu.rs"]
mod gpu_support;
use gpu_support::gpu;

#[test]
#[ignore = "needs an NVIDIA GPU: run with `cargo test --release -- --ignored` on a GPU machine"]
fn every_tma_case_validates_on_the_gpu() {
    let dev = gpu("every_tma_case_validates_on_the_gpu");
    let mut ran = 0;
    for c in catalog() {
        if let Err(e) = TmaBackend::check_supported(&dev, &c) {
            eprintln!("{c}: not run on this device: {e:#}");
            continue;
        }
        let out = probe(&dev, &c, 7).unwrap_or_else(|e| panic!("{c}: {e:#}"));
        let p = out
            .placement
            .as_ref()
            .unwrap_or_else(|e| panic!("{c}: no placement: {e}"));
        assert!(out.passed(), "{c}: validation failed");
        let differ = p
            .iter()
            .zip(documented(&c))
            .filter(|(a, b)| **a != *b)
            .count();
        eprintln!("{c}: passed, {differ} elements differ from the documented swizzle");
        ran += 1;
    }
    assert!(ran > 0, "the device runs none of the TMA cases");
}
