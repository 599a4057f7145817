//! The fused attention kernels compile with NVRTC: the bf16 path for sm_90 and sm_120a (HMMA in
//! its SASS), the block-scale path for sm_120a (QMMA.SF, the block-scaled FP4 instruction, and
//! no HMMA: nothing is decoded), and the block-scale path with its software MMA model for sm_90
//! (no tensor-core instruction at all). Without libnvrtc (and CI unset) the tests print a note
//! and pass.

use fp4probe::attention::kernel::{KernelPath, compile, compile_variant, entry};
use fp4probe::tools;

#[path = "support/nvrtc.rs"]
mod nvrtc_support;
use nvrtc_support::nvrtc_or_skip;

#[test]
fn attention_kernel_compiles_for_sm90_and_sm120a() {
    if !nvrtc_or_skip("attention kernel") {
        return;
    }
    for arch in ["sm_90", "sm_120a"] {
        let Some(listing) = sass_of(KernelPath::Bf16, arch) else {
            continue;
        };
        assert!(
            listing.contains("HMMA.16816.F32.BF16"),
            "{arch}: no bf16 HMMA"
        );
    }
}

#[test]
fn block_scale_kernel_runs_fp4_straight_into_omma_on_sm120a() {
    if !nvrtc_or_skip("block-scale attention kernel") {
        return;
    }
    let Some(listing) = sass_of(KernelPath::BlockScale, "sm_120a") else {
        return;
    };
    // m16n8k64 kind::mxf4nvf4 lowers to OMMA.SF.16864 (ptxas 13.5): MXFP4's 2X ue8m0 and
    // NVFP4's 4X ue4m3 both present, all e2m1 × e2m1, and no bf16 fallback.
    let omma: Vec<&str> = listing
        .lines()
        .filter(|l| l.contains("MMA.SF.16864"))
        .collect();
    assert!(
        !omma.is_empty(),
        "no block-scaled m16n8k64 MMA in the sm_120a SASS"
    );
    assert!(
        omma.iter().all(|l| l.contains(".F32.E2M1.E2M1.")),
        "an MMA that is not e2m1 × e2m1 → f32: {omma:?}"
    );
    assert!(
        omma.iter().any(|l| l.contains(".E8")),
        "no ue8m0 MMA (MXFP4)"
    );
    assert!(
        omma.iter().any(|l| l.contains(".UE4M3.4X")),
        "no ue4m3 4X MMA (NVFP4)"
    );
    assert!(
        !listing.contains("HMMA"),
        "the block-scale kernel decodes to HMMA"
    );
}

#[test]
fn k32_block_scale_kernel_runs_fp4_containers_into_qmma_on_sm120a() {
    if !nvrtc_or_skip("k32 block-scale attention kernel") {
        return;
    }
    let Some(listing) = sass_of(KernelPath::BlockScaleK32, "sm_120a") else {
        return;
    };
    // m16n8k32 kind::mxf8f6f4 scale_vec::1X lowers to QMMA.SF.16832 with E8 scales.
    let qmma: Vec<&str> = listing
        .lines()
        .filter(|l| l.contains("MMA.SF.16832"))
        .collect();
    assert!(
        !qmma.is_empty(),
        "no block-scaled m16n8k32 MMA in the sm_120a SASS"
    );
    assert!(
        qmma.iter()
            .all(|l| l.contains(".F32.E2M1.E2M1.E8") && l.contains("QMMA")),
        "{qmma:?}"
    );
    assert!(!listing.contains("HMMA") && !listing.contains("OMMA"));
    assert!(
        !listing.contains("attn_nvfp4"),
        "the k32 path has no NVFP4 entry"
    );
}

#[test]
fn emulated_block_scale_kernels_compile_for_sm90() {
    if !nvrtc_or_skip("emulated block-scale attention kernels") {
        return;
    }
    for path in [
        KernelPath::BlockScaleEmulated,
        KernelPath::BlockScaleK32Emulated,
    ] {
        let Some(listing) = sass_of(path, "sm_90") else {
            return;
        };
        for mma in ["HMMA", "QMMA", "OMMA", "IMMA"] {
            assert!(
                !listing.contains(mma),
                "{}: the emulated kernel should run no tensor-core instruction, found {mma}",
                path.name()
            );
        }
    }
}

#[test]
fn wgmma_kernel_runs_both_products_on_hgmma_for_sm90a() {
    if !nvrtc_or_skip("wgmma attention kernel") {
        return;
    }
    let listing = sass_of(KernelPath::Wgmma, "sm_90a");
    // Both variants (two and three consumer warpgroups): serialized, the asynchronous MMA
    // would not overlap anything.
    assert_wgmma_not_serialized(KernelPath::Wgmma);
    let Some(listing) = listing else {
        return;
    };
    // S = Q·Kᵀ: m64n64k16 (D = 128, 64-key tiles) and m64n128k16 (D = 64, 128-key tiles),
    // Q and K from shared memory; O += P·V: the other shape, P from registers.
    for shape in ["HGMMA.64x64x16.F32.BF16", "HGMMA.64x128x16.F32.BF16"] {
        assert!(listing.contains(shape), "no {shape}");
    }
    assert!(
        !listing.contains("HMMA"),
        "an mma.sync left in the wgmma kernel"
    );
}

#[test]
fn fp8_wgmma_kernel_runs_both_products_on_e4m3_hgmma_for_sm90a() {
    if !nvrtc_or_skip("FP8 wgmma attention kernel") {
        return;
    }
    let path = KernelPath::WgmmaFp8;
    assert_wgmma_not_serialized(path);
    let Some(listing) = sass_of(path, "sm_90a") else {
        return;
    };
    // S = Q·Kᵀ: m64n128k32 (D = 64: 128-key tiles) and m64n64k32 (D = 128), Q and K from
    // shared memory; O += P·V: m64n128k32 (D = 128) and m64n64k32 (D = 64), and l = P·1:
    // m64n8k32, P from registers. No bf16 product and no mma.sync.
    for shape in [
        "QGMMA.64x128x32.F32.E4M3.E4M3",
        "QGMMA.64x64x32.F32.E4M3.E4M3",
        "QGMMA.64x8x32.F32.E4M3.E4M3",
    ] {
        assert!(listing.contains(shape), "no {shape}");
    }
    for other in ["BF16", "HMMA"] {
        assert!(
            !listing
                .lines()
                .any(|l| l.contains("GMMA") && l.contains(other) || l.contains("HMMA")),
            "a {other} product in the FP8 kernel"
        );
    }
    for format in ["mxfp4", "nvfp4"] {
        for pass in ["factors", "prepass"] {
            assert!(listing.contains(&format!("Function : fp8_{pass}_{format}\n")));
        }
    }
}

#[test]
fn fp8_kernel_groups_k_factors_as_the_reference_does() {
    let source = include_str!("../kernels/attention/attn_fp8_geometry.cuh");
    let line = format!(
        "constexpr int K_FACTOR_KEYS = {};",
        fp4probe::attention::fp8::K_FACTOR_KEYS
    );
    assert!(
        source.contains(&line),
        "the kernel's K factor groups differ from fp8.rs's"
    );
}

#[test]
fn wgmma_kernel_waits_on_mbarriers_and_stages_q_only_for_nvfp4_d128() {
    if !nvrtc_or_skip("wgmma attention kernel") {
        return;
    }
    let Some(listing) = sass_of(KernelPath::Wgmma, "sm_90a") else {
        return;
    };
    // Full stages and Q buffers are mbarriers (the producer arrives, consumers wait on the
    // phase), so the consumer warpgroups never meet at a named barrier per tile; Q is staged a
    // segment ahead with cp.async (LDGSTS) only where that measured faster (q_ahead).
    let path = KernelPath::Wgmma;
    for &format in path.formats() {
        for &d in path.head_dims() {
            let name = entry(format, d);
            let sass = function_sass(&listing, &name);
            for op in ["SYNCS.ARRIVE", "SYNCS.PHASECHK"] {
                assert!(sass.contains(op), "{name}: no {op} (mbarrier)");
            }
            let staged = name == "attn_nvfp4_d128";
            assert_eq!(
                sass.contains("LDGSTS"),
                staged,
                "{name}: Q staged with cp.async should be {staged}"
            );
        }
    }
}

/// Every variant of `path` compiled for sm_90a without ptxas serializing its wgmma (which it
/// says when it cannot keep a register in flight) or waiting for one where the source does not
/// (C7517: it injects a wgmma.wait_group before an instruction that reads a register a wgmma may
/// still write, and the tensor cores then run nothing beside that code).
fn assert_wgmma_not_serialized(path: KernelPath) {
    for variant in path.variants() {
        let cubin =
            compile_variant(variant, "sm_90a").unwrap_or_else(|e| panic!("{variant:?}: {e:#}"));
        assert!(
            !cubin.log.contains("serialized"),
            "{variant:?}: ptxas serialized the wgmma: {}",
            cubin.log
        );
        assert!(
            !cubin.log.contains("wgmma.wait_group is injected"),
            "{variant:?}: ptxas waits for a wgmma the source does not wait for: {}",
            cubin.log
        );
    }
}

/// One function's part of a cuobjdump listing (from its `Function :` line to the next).
fn function_sass<'a>(listing: &'a str, name: &str) -> &'a str {
    let header = format!("Function : {name}\n");
    let start = listing
        .find(&header)
        .unwrap_or_else(|| panic!("{name} not in the listing"));
    let rest = &listing[start + header.len()..];
    &rest[..rest.find("Function : ").unwrap_or(rest.len())]
}

/// The SASS of `path` compiled for `arch`, every entry point checked present; None (with a
/// note) when cuobjdump is not installed.
fn sass_of(path: KernelPath, arch: &str) -> Option<String> {
    let cubin = compile(path, arch).unwrap_or_else(|e| panic!("{} {arch}: {e:#}", path.name()));
    let listing = match tools::sass(&cubin.image) {
        Ok(l) => l,
        Err(e) => {
            eprintln!("no SASS check ({e:#})");
            return None;
        }
    };
    if std::env::var_os("FP4PROBE_DUMP_SASS").is_some() {
        let stem = format!("target/attn-{}-{arch}", path.name());
        std::fs::write(format!("{stem}.sass"), &listing).unwrap();
        std::fs::write(format!("{stem}.cubin"), &cubin.image).unwrap();
    }
    for &format in path.formats() {
        for &d in path.head_dims() {
            let name = entry(format, d);
            assert!(
                listing.contains(&name),
                "{} {arch}: {name} missing",
                path.name()
            );
        }
    }
    Some(listing)
}
