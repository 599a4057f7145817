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
//!
//! On an sm_90 GPU the wgmma test does the same for `kernels/wgmma_roundtrip.cu`: A and B into
//! shared memory through the generated offset functions, the descriptors from the generated
//! `make_desc`, one wgmma per case, C, A (from registers) and D through the generated tables;
//! bf16 and e4m3 at N = 64 and 256 under every swizzle mode (K-major, and MN-major for bf16),
//! and every type at N = 16 with A from registers.

use fp4probe::codegen::verify::{self, RUN_CASES};
use fp4probe::codegen::wgmma::verify as wg_verify;
use fp4probe::wgmma::desc::Swizzle;

#[path = "support/gpu.rs"]
mod gpu_support;
use gpu_support::gpu;

#[test]
#[ignore = "needs an NVIDIA GPU: run with `cargo test --release -- --ignored` on a GPU machine"]
fn tiles_through_the_generated_tables_match_the_cpu_gemm_on_the_gpu() {
    // Opened here only so that a missing GPU fails with the message that says so.
    let dev = gpu("tiles_through_the_generated_tables_match_the_cpu_gemm_on_the_gpu");
    // The sources built into the binary, as `fp4probe codegen --verify` compiles them.
    let tree = fp4probe::kernels::tree().unwrap_or_else(|e| panic!("{e:#}"));
    let report = verify::run_on_gpu(&dev, tree.path(), 1)
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

#[test]
#[ignore = "needs an NVIDIA GPU: run with `cargo test --release -- --ignored` on a GPU machine"]
fn wgmma_tiles_through_the_generated_forms_and_tables_match_the_cpu_gemm_on_the_gpu() {
    let test = "wgmma_tiles_through_the_generated_forms_and_tables_match_the_cpu_gemm_on_the_gpu";
    let dev = gpu(test);
    let cc = dev.compute_capability();
    assert_eq!(
        cc,
        (9, 0),
        "{test} needs an sm_90 GPU (wgmma), this one is sm_{}{}",
        cc.0,
        cc.1
    );
    let tree = fp4probe::kernels::tree().unwrap_or_else(|e| panic!("{e:#}"));
    let report = wg_verify::run_on_gpu(&dev, tree.path(), 1)
        .unwrap_or_else(|e| panic!("the wgmma round trip could not run: {e:#}"));
    eprintln!("{report}");
    let ran = |id: &str| {
        let c = report
            .cases
            .iter()
            .find(|c| c.id == id)
            .unwrap_or_else(|| panic!("{id} not run"));
        assert!(c.passed(), "{id}: {c:?}");
        assert_eq!(c.trials, 2);
    };
    for fam in wg_verify::WIDE {
        for sw in Swizzle::ALL {
            ran(&format!("{fam}.ss.K.{}", sw.name()));
            if sw != Swizzle::None {
                ran(&format!(
                    "{fam}.ss.K.{}.bo{}",
                    sw.name(),
                    wg_verify::BASE_OFFSET
                ));
            }
        }
        ran(&format!("{fam}.rs.K.128B"));
    }
    ran("m64n16k256.s32.b1.b1.and.popc.rs.K.none");
    for sw in Swizzle::ALL {
        ran(&format!("m64n64k16.f32.bf16.bf16.ss.MN.{}", sw.name()));
    }
    ran("m64n16k32.f32.e4m3.e4m3.rs.K.none");
    ran("m64n16k8.f32.tf32.tf32.rs.K.none");
    ran("m64n16k32.s32.u8.s8.rs.K.none");
    assert!(report.passed(), "{report}");
}
