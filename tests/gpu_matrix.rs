//! Hardware test of the data-movement probes, ignored unless asked for: on an sm_90 (or later)
//! GPU, `cargo test --release --test gpu_matrix -- --ignored`.
//!
//! Every `ldmatrix`/`stmatrix`/`movmatrix` form the device runs is probed on the GPU: the
//! routes read off the tag experiment must be a matrix move (`derive`), and both random
//! experiments must match the prediction through them bit for bit. The emulator's routes are
//! the PTX ISA's description; the test prints how many slots differ from them, as the report
//! does, without requiring agreement (that is what the probe is there to find out).

use fp4probe::movement::backend::MoveBackend;
use fp4probe::movement::emulator::documented;
use fp4probe::movement::map::derive;
use fp4probe::movement::probe::probe;
use fp4probe::movement::probed_catalog;

#[path = "support/gpu.rs"]
mod gpu_support;
use gpu_support::gpu;

#[test]
#[ignore = "needs an NVIDIA GPU: run with `cargo test --release -- --ignored` on a GPU machine"]
fn every_data_movement_form_the_device_runs_validates_on_the_gpu() {
    let dev = gpu("every_data_movement_form_the_device_runs_validates_on_the_gpu");
    let mut ran = 0;
    for v in probed_catalog() {
        if MoveBackend::check_supported(&dev, &v).is_err() {
            eprintln!("{}: not run on this device", v.id());
            continue;
        }
        let out = probe(&dev, &v, 7).unwrap_or_else(|e| panic!("{}: {e:#}", v.id()));
        let routes = out
            .routes
            .as_ref()
            .unwrap_or_else(|e| panic!("{}: no routes: {e}", v.id()));
        derive(&v, routes).unwrap_or_else(|e| panic!("{}: {e}", v.id()));
        assert!(out.passed(), "{}: validation failed", v.id());
        let differ = routes
            .iter()
            .zip(documented(&v))
            .filter(|(a, b)| **a != *b)
            .count();
        eprintln!(
            "{}: passed, {differ} slots differ from the PTX ISA's description",
            v.id()
        );
        ran += 1;
    }
    assert!(ran > 0, "the device runs none of the data-movement forms");
}
