//! Hardware test of the generated tables, ignored unless asked for: on a GPU machine (sm_89 or
//! later, with libnvrtc; see `codegen::nvrtc` for where it is looked for),
//! `cargo test --release --test gpu_codegen -- --ignored`.
//!
//! `kernels/tile_roundtrip.cu` is compiled with NVRTC for the device; each of its kernels moves
//! random exactly-representable A and B tiles (C = 0, then random C) into registers through the
//! generated tables only, runs one `mma.sync`, and writes D back through the generated D table.
//! D must equal the CPU GEMM (`gemm::mma` rounded by `gemm::round_to`) bit for bit: e4m3
//! m16n8k32 and bf16 m16n8k16 (the two), and f16, tf32, s8, s4, f64 and b1 variants.
//! `fp4probe codegen --verify` runs the same check and prints the same report.

use fp4probe::codegen::verify::{self, RUN_CASES};

#[path = "support/gpu.rs"]
mod gpu_support;
use gpu_support::gpu;

#[test]
#[ignore = "needs an NVIDIA GPU: run with `cargo test --release -- --ignored` on a GPU machine"]
fn tiles_through_the_generated_tables_match_the_cpu_gemm_on_the_gpu() {
    // Opened here only so that a missing GPU fails with the message that says so.
    drop(gpu(
        "tiles_through_the_generated_tables_match_the_cpu_gemm_on_the_gpu",
    ));
    // The sources built into the binary, as `fp4probe codegen --verify` compiles them.
    let tree = fp4probe::kernels::tree().unwrap_or_else(|e| panic!("{e:#}"));
    let report = verify::run_on_gpu(tree.path(), 1)
        .unwrap_or_else(|e| panic!("the tile round trip could not run: {e:#}"));
    eprintln!("{report}");
    assert_eq!(report.cases.len(), RUN_CASES.len());
    for required in ["m16n8k32.f32.e4m3.e4m3.f32", "m16n8k16.f32.bf16.bf16.f32"] {
        let c = report
            .cases
            .iter()
            .find(|c| c.id == required)
            .unwrap_or_else(|| panic!("{required} not run"));
        assert!(c.passed(), "{required}: {c:?}");
        assert_eq!(c.trials, 2);
    }
    assert!(report.passed(), "{report}");
}
