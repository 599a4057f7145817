//! The quantization kernels compile with NVRTC for sm_90 and sm_120a (and, writing the tiled
//! scale layouts, for sm_90), and their SASS has the shape the design promises: 16-byte loads,
//! no per-element division, nothing in local memory. Without libnvrtc (and without CI set) the
//! tests print a note and pass; on CI NVRTC is required.

use fp4probe::quant::cuda::{InType, compile, quant_entry, unroll_16bit};
use fp4probe::quant::{NvLevels, ScaleLayout, ScaleMode, Spec};
use fp4probe::tools;

#[path = "support/nvrtc.rs"]
mod nvrtc_support;
use nvrtc_support::nvrtc_or_skip;

/// The SASS of one function of a cuobjdump listing: the lines after its `Function :` header.
fn function_sass<'a>(listing: &'a str, name: &str) -> Vec<&'a str> {
    let mut lines = listing
        .lines()
        .skip_while(|l| !(l.contains("Function : ") && l.trim_end().ends_with(name)));
    let _header = lines.next();
    lines
        .take_while(|l| !l.contains("Function : "))
        .filter(|l| l.contains("/*") && l.contains(';'))
        .collect()
}

fn count(lines: &[&str], opcode: &str) -> usize {
    lines
        .iter()
        .filter(|l| l.split_whitespace().any(|w| w.starts_with(opcode)))
        .count()
}

#[test]
fn kernels_compile_for_sm90_and_sm120a_with_wide_loads_and_no_per_element_division() {
    if !nvrtc_or_skip("quant kernels") {
        return;
    }
    for (arch, layout) in [
        ("sm_90", ScaleLayout::Linear),
        ("sm_120a", ScaleLayout::Linear),
        ("sm_90", ScaleLayout::Tiled128x4),
        ("sm_90", ScaleLayout::Tiled8x4),
    ] {
        let cubin = compile(arch, layout).unwrap_or_else(|e| panic!("{arch}: {e:#}"));
        let Ok(listing) = tools::sass(&cubin.image) else {
            eprintln!("{arch}: cuobjdump not found; compiled only");
            continue;
        };
        if std::env::var_os("FP4PROBE_DUMP_SASS").is_some() {
            // The cubin beside its listing: `cuobjdump --dump-resource-usage` gives registers.
            let stem = format!("target/quant-{arch}-{}", layout.name());
            std::fs::write(format!("{stem}.sass"), &listing).unwrap();
            std::fs::write(format!("{stem}.cubin"), &cubin.image).unwrap();
        }
        let specs = [
            Spec::mxfp4(ScaleMode::Floor),
            Spec::mxfp4(ScaleMode::Rceil),
            Spec::nvfp4(NvLevels::OneLevel),
            Spec::nvfp4(NvLevels::TwoLevel),
        ];
        for spec in specs {
            for input in [InType::F32, InType::Bf16, InType::F16] {
                let name = quant_entry(&spec, input);
                let f = function_sass(&listing, &name);
                assert!(!f.is_empty(), "{arch}: {name} missing from the cubin");
                // 2 groups of f32 a thread (four 16-byte loads each); unroll_16bit(format) for
                // 16-bit. Two-level NVFP4 of bf16 loads at three sites: the first tile, and the
                // tile loops for nice and for other tensor scales (quant.cu: NV2_BF16_NICE).
                let wide = f
                    .iter()
                    .filter(|l| l.contains("LDG.") && l.contains(".128"))
                    .count();
                let sites = if input == InType::Bf16 && spec.two_level() {
                    3
                } else {
                    1
                };
                let want = sites
                    * if input == InType::F32 {
                        8
                    } else {
                        unroll_16bit(spec.format) as usize
                    };
                assert_eq!(wide, want, "{arch} {name}: 16-byte loads\n{}", f.join("\n"));
                // 32 or 64 elements per thread: an inlined per-element division would show at
                // least 32 reciprocals; what is allowed is the per-block reciprocal (one a
                // group) and the out-of-line IEEE fallbacks' bodies.
                let rcp = count(&f, "MUFU.RCP");
                let elements = 128 / input.size();
                assert!(
                    rcp < elements,
                    "{arch} {name}: {rcp} MUFU.RCP for {elements} elements"
                );
                // Nothing spills to local memory (a pointer to the loaded values would).
                let local = f
                    .iter()
                    .filter(|l| l.contains("STL") || l.contains("LDL"))
                    .count();
                assert_eq!(local, 0, "{arch} {name}: local memory traffic");
                eprintln!(
                    "{arch} {} {name}: {} instructions, {wide} LDG.128, {rcp} MUFU.RCP",
                    layout.name(),
                    f.len()
                );
            }
        }
    }
}
