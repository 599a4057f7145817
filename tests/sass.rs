//! `fp4probe sass`: what variants lower to, read from the pinned ptxas + cuobjdump output.
//!
//! Needs ptxas and cuobjdump (or nvdisasm): `.ci/install-cuda-tools` puts the pinned ones under
//! `.tools/`. Without them the tests print "skipped: ..." and pass, except under CI (env `CI`
//! set), where they fail. The parser's own unit tests (CPU only, a captured snippet) live in
//! `src/sass.rs`.

use fp4probe::isa::{Target, find};
use fp4probe::sass::{self, Lowering, SassError, SassReport, Toolchain, ToolchainKind};
use std::process::Command;

mod common;
use common::par_map;

/// Whether the pinned toolchain is here; panics under CI when it is not.
fn have_tools() -> bool {
    match Toolchain::find(ToolchainKind::Pinned) {
        Ok(tc) => {
            println!("toolchain {}", tc.describe());
            true
        }
        Err(e) => {
            if std::env::var_os("CI").is_some_and(|v| !v.is_empty()) {
                panic!(
                    "{e:#} under CI: run .ci/install-cuda-tools before the tests (it installs the \
                     pinned nvidia-cuda-nvcc/cuobjdump/nvdisasm wheels into .tools/)"
                );
            }
            println!("skipped: {e:#} (run .ci/install-cuda-tools)");
            false
        }
    }
}

fn offline(id: &str, target: Option<Target>) -> SassReport {
    let v = find(id).unwrap_or_else(|| panic!("{id} is not in the catalog"));
    let target = target.unwrap_or(v.min_target);
    sass::offline(&v, target).unwrap_or_else(|e| panic!("{id} at {target}: {e:#}"))
}

fn show(r: &SassReport) -> String {
    format!(
        "{} at {}: {}\ntensor: {:?}\nregion:\n  {}",
        r.variant,
        r.target,
        r.verdict,
        r.tensor_instructions,
        r.mma_region.join("\n  ")
    )
}

#[test]
fn key_variants_lower_as_expected() {
    if !have_tools() {
        return;
    }
    let sm90 = Some(Target::sm(9, 0));
    let cases: [(&str, Option<Target>); 6] = [
        (
            "m16n8k32.kind::mxf8f6f4.block_scale.scale_vec::1X.f32.e2m1.e2m1.f32.ue8m0",
            None,
        ),
        (
            "m16n8k64.kind::mxf4nvf4.block_scale.scale_vec::4X.f32.e2m1.e2m1.f32.ue4m3",
            None,
        ),
        ("m16n8k32.f32.e4m3.e4m3.f32", sm90),
        ("m16n8k32.f32.e4m3.e4m3.f32", None),
        ("m16n8k16.f32.bf16.bf16.f32", sm90),
        ("m16n8k128.s32.b1.b1.s32.xor.popc", sm90),
    ];
    let reports = par_map(&cases, |(id, t)| offline(id, *t));
    for r in &reports {
        println!("{} at {}: {}", r.variant, r.target, r.verdict);
        assert!(
            !r.listing.is_empty() && !r.mma_region.is_empty(),
            "{}",
            show(r)
        );
        assert!(
            r.listing
                .iter()
                .all(|l| !l.contains("/*") && !l.ends_with(';')),
            "listing not cleaned: {:?}",
            r.listing
        );
    }

    // Block-scaled FP4 under kind::mxf8f6f4: one native QMMA with E8 (ue8m0) scales.
    let r = &reports[0];
    assert_eq!(r.target, Target::sm_a(12, 0));
    assert_eq!(r.lowering, Lowering::Native, "{}", show(r));
    assert_eq!(
        r.verdict,
        "native: 1 QMMA.SF.16832.F32.E2M1.E2M1.E8",
        "{}",
        show(r)
    );
    assert_eq!(r.histogram.get("QMMA"), Some(&1));
    assert_eq!(r.histogram.get("QMMA.SF.16832.F32.E2M1.E2M1.E8"), Some(&1));

    // Packed FP4 with 4X ue4m3 scales: one native OMMA at k64.
    let r = &reports[1];
    assert_eq!(r.lowering, Lowering::Native, "{}", show(r));
    assert!(
        r.verdict.starts_with("native: 1 OMMA.SF.16864"),
        "{}",
        show(r)
    );
    assert!(r.tensor_instructions[0].contains("UE4M3"), "{}", show(r));

    // FP8 on sm_90 has no FP8 MMA: F2FP unpacks to f16 and HMMA multiplies.
    let r = &reports[2];
    assert_eq!(r.lowering, Lowering::Emulated, "{}", show(r));
    assert!(
        r.histogram.get("HMMA").is_some_and(|&n| n >= 1),
        "{}",
        show(r)
    );
    assert!(!r.histogram.contains_key("QMMA"), "{}", show(r));
    let conversions = r
        .mma_region
        .iter()
        .filter(|l| l.starts_with("F2FP") || l.starts_with("F2F") || l.starts_with("I2F"))
        .count();
    assert!(conversions > 0, "no conversion in the region: {}", show(r));
    assert!(r.verdict.starts_with("emulated: "), "{}", show(r));
    assert!(r.verdict.contains("F2FP conversions"), "{}", show(r));

    // ... while sm_89 has it natively.
    let r = &reports[3];
    assert_eq!(r.target, Target::sm(8, 9));
    assert_eq!(r.lowering, Lowering::Native, "{}", show(r));
    assert_eq!(
        r.verdict,
        "native: 1 QMMA.16832.F32.E4M3.E4M3",
        "{}",
        show(r)
    );
    assert!(!r.histogram.contains_key("HMMA"), "{}", show(r));

    // bf16 is one HMMA with a BF16 suffix.
    let r = &reports[4];
    assert_eq!(r.lowering, Lowering::Native, "{}", show(r));
    assert_eq!(r.verdict, "native: 1 HMMA.16816.F32.BF16", "{}", show(r));
    assert_eq!(r.tensor_instructions.len(), 1);

    // b1 XOR on sm_90 is two AND.POPC BMMAs in a subroutine (ptxas 13.5).
    let r = &reports[5];
    assert_eq!(r.lowering, Lowering::Emulated, "{}", show(r));
    assert!(
        r.tensor_instructions
            .iter()
            .all(|t| t.starts_with("BMMA.168128.AND.POPC")),
        "{}",
        show(r)
    );
    assert!(
        r.mma_region.iter().any(|l| l.starts_with("CALL")),
        "{}",
        show(r)
    );
    assert!(
        r.mma_region.iter().any(|l| l.starts_with("BMMA")),
        "the called subroutine is not in the region: {}",
        show(r)
    );
}

#[test]
fn a_refused_target_reports_ptxas_log() {
    if !have_tools() {
        return;
    }
    let v =
        find("m16n8k32.kind::mxf8f6f4.block_scale.scale_vec::1X.f32.e2m1.e2m1.f32.ue8m0").unwrap();
    let tc = Toolchain::find(ToolchainKind::Pinned).unwrap();
    match sass::report(&v, Target::sm(9, 0), &tc) {
        Err(e @ SassError::Rejected { .. }) => {
            let text = e.to_string();
            assert!(
                text.contains("not supported on .target 'sm_90'"),
                "log lacks the reason:\n{text}"
            );
            assert!(
                e.summary().starts_with("rejected: ptxas probe.ptx"),
                "{}",
                e.summary()
            );
        }
        Err(e) => panic!("expected a rejection, got {e:#}"),
        Ok(r) => panic!("sm_90 accepted a block-scaled mma: {}", r.verdict),
    }
}

#[test]
fn cli_writes_listing_json_and_index() {
    if !have_tools() {
        return;
    }
    let dir = common::tmpdir("sass", "cli");
    let out = Command::new(env!("CARGO_BIN_EXE_fp4probe"))
        .args([
            "sass", "--all", "--shape", "m16n8k16", "--a", "bf16", "--target", "sm_90", "-o",
        ])
        .arg(&dir)
        .output()
        .expect("binary runs");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success(), "{text}");
    assert!(text.contains("native: 1 HMMA.16816.F32.BF16"), "{text}");
    let base = dir.join("m16n8k16.f32.bf16.bf16.f32.sm_90.sass");
    let listing = std::fs::read_to_string(base.with_extension("sass.txt")).unwrap();
    assert!(listing.starts_with("# fp4probe sass: m16n8k16.f32.bf16.bf16.f32 at sm_90"));
    assert!(listing.contains("# toolchain: pinned: ptxas "), "{listing}");
    assert!(listing.contains("\nHMMA.16816.F32.BF16 "), "{listing}");
    let json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(base.with_extension("sass.json")).unwrap())
            .unwrap();
    assert_eq!(json["schema"], "fp4probe.sass/1");
    assert_eq!(json["target"], "sm_90");
    assert_eq!(json["lowering"], "native");
    assert_eq!(json["histogram"]["HMMA.16816.F32.BF16"], 1);
    let index = std::fs::read_to_string(dir.join("README.md")).unwrap();
    assert!(
        index.contains("| [`m16n8k16.f32.bf16.bf16.f32`](m16n8k16.f32.bf16.bf16.f32.sm_90.sass.txt) | sm_90 | native: 1 HMMA.16816.F32.BF16"),
        "{index}"
    );
}

/// Output of the device image's CUDA 13.0 cuobjdump and nvdisasm (see `tests/sass-fixtures/`):
/// both parse to the same instructions, mma region and verdict. Needs no tools.
#[test]
fn cuda_13_0_disassembly_parses_the_same_with_either_tool() {
    let fixtures = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/sass-fixtures");
    let read = |name: &str| std::fs::read_to_string(fixtures.join(name)).unwrap();
    let cuobjdump = sass::parse_sass(&read("cuda13.0-e4m3-sm_90a.cuobjdump.txt"));
    let nvdisasm = sass::parse_sass(&read("cuda13.0-e4m3-sm_90a.nvdisasm.txt"));
    // The same instructions; only branch targets are spelt differently (`BRA 0x1c0` against
    // ``BRA `(.L_x_0)``).
    let ops = |d: &sass::Disassembly| -> Vec<(u64, String)> {
        d.instrs
            .iter()
            .map(|i| (i.addr, i.opcode().to_string()))
            .collect()
    };
    assert_eq!(ops(&cuobjdump), ops(&nvdisasm));
    assert_eq!(cuobjdump.mma_region().len(), nvdisasm.mma_region().len());
    let listing = cuobjdump.trimmed();
    assert_eq!(listing.first().unwrap().text, "LDC R1, c[0x0][0x28]");
    assert_eq!(listing.last().unwrap().opcode(), "BRA");
    let region: Vec<&str> = cuobjdump.mma_region().iter().map(|i| i.opcode()).collect();
    assert_eq!(region.iter().filter(|o| **o == "HMMA.16816.F32").count(), 2);
    assert_eq!(
        region
            .iter()
            .filter(|o| **o == "F2FP.F16.E4M3.UNPACK_B")
            .count(),
        12,
        "{region:?}"
    );
    assert!(
        !region
            .iter()
            .any(|o| o.starts_with("LDG") || o.starts_with("STG"))
    );
    let v = find("m16n8k32.f32.e4m3.e4m3.f32").unwrap();
    let tensor: Vec<&sass::Instr> = listing.iter().filter(|i| i.is_tensor()).collect();
    let (lowering, verdict) = sass::verdict(&v, &tensor, &cuobjdump.mma_region());
    assert_eq!(lowering, Lowering::Emulated);
    assert!(
        verdict.starts_with("emulated: 2 HMMA.16816.F32 + 12 F2FP conversions"),
        "{verdict}"
    );
    let h = sass::histogram(listing);
    assert_eq!(h["LDG"], 3);
    assert_eq!(h["LDG.E.128"], 2);
    assert_eq!(h["STG.E.128"], 1);
}

/// wgmma: what a few variants lower to, read from the pinned tools' listings: one GMMA of the
/// variant's own base, shape and types between WARPGROUP.ARRIVE and WARPGROUP.DEPBAR.
#[test]
fn wgmma_variants_lower_to_one_gmma() {
    if !have_tools() {
        return;
    }
    let tc = Toolchain::find(ToolchainKind::Pinned).unwrap();
    let cases = [
        ("m64n256k16.f32.bf16.bf16.ss", "HGMMA.64x256x16.F32.BF16"),
        ("m64n16k16.f16.f16.f16.rs", "HGMMA.64x16x16.F16"),
        ("m64n24k8.f32.tf32.tf32.ss", "HGMMA.64x24x8.F32.TF32"),
        ("m64n16k32.f32.e4m3.e5m2.rs", "QGMMA.64x16x32.F32.E4M3.E5M2"),
        (
            "m64n256k32.f16.e5m2.e4m3.ss",
            "QGMMA.64x256x32.F16.E5M2.E4M3",
        ),
        (
            "m64n16k32.satfinite.s32.u8.s8.ss",
            "IGMMA.64x16x32.U8.S8.SAT",
        ),
        (
            "m64n16k256.s32.b1.b1.and.popc.rs",
            "BGMMA.64x16x256.AND.POPC",
        ),
    ];
    let reports = par_map(&cases, |(id, _)| {
        let v = fp4probe::wgmma::find(id).unwrap();
        fp4probe::wgmma::sass::report(&v, fp4probe::wgmma::sass::target(), &tc)
            .unwrap_or_else(|e| panic!("{id}: {e:#}"))
    });
    for ((id, opcode), r) in cases.iter().zip(&reports) {
        assert_eq!(r.lowering, Lowering::Native, "{}", show(r));
        assert_eq!(r.verdict, format!("native: 1 {opcode}"), "{id}");
        let seq: Vec<&str> = r
            .warpgroup_sequence
            .as_ref()
            .unwrap()
            .iter()
            .map(|s| s.split_whitespace().next().unwrap())
            .collect();
        assert_eq!(
            seq,
            ["WARPGROUP.ARRIVE", opcode, "WARPGROUP.DEPBAR.LE"],
            "{}",
            show(r)
        );
        assert!(
            r.date.is_empty(),
            "{id}: offline wgmma listings carry no date"
        );
    }
    // A from registers: the GMMA reads a register where the ss form reads a descriptor.
    let rs = &reports[1].tensor_instructions[0];
    assert!(rs.contains(", R") && rs.contains("gdesc["), "{rs}");
}

#[test]
fn cli_writes_wgmma_listings_and_summary() {
    if !have_tools() {
        return;
    }
    let dir = common::tmpdir("sass", "wgmma");
    let args = [
        "sass",
        "--family",
        "wgmma",
        "--filter",
        "n16k32.f32.e4m3.e4m3",
        "--listing-n",
        "16",
        "-o",
        dir.to_str().unwrap(),
    ];
    let out = common::fp4probe(&args);
    let text = common::text(&out);
    assert!(out.status.success(), "{text}");
    let summary = std::fs::read_to_string(dir.join("README.md")).unwrap();
    assert!(summary.starts_with("# SASS of wgmma"), "{summary}");
    assert!(summary.contains("2 variants: 2 native."), "{summary}");
    // ss and rs lower alike, so they share a line.
    assert!(
        summary.contains(
            "| `f32.e4m3.e4m3` | ss, rs | 16 | `QGMMA.64xNx32.F32.E4M3.E4M3` | \
             `WARPGROUP.ARRIVE → GMMA → WARPGROUP.DEPBAR.LE gsb0, 0x0` | native |"
        ),
        "{summary}"
    );
    let files: Vec<String> = std::fs::read_dir(&*dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(
        files.len(),
        5,
        "{files:?}: two listings, their reports, the summary"
    );
    let listing =
        std::fs::read_to_string(dir.join("m64n16k32.f32.e4m3.e4m3.ss.sm_90a.sass.txt")).unwrap();
    assert!(
        listing.contains("# command: fp4probe sass --family wgmma"),
        "{listing}"
    );
    assert!(
        listing.contains("\nQGMMA.64x16x32.F32.E4M3.E4M3 "),
        "{listing}"
    );
    // The same command again writes the same bytes.
    let again = common::fp4probe(&args);
    assert!(again.status.success());
    assert_eq!(
        std::fs::read_to_string(dir.join("README.md")).unwrap(),
        summary
    );
}

/// Bad wgmma selections are refused before anything is assembled, with exit code 2 (no tools
/// needed).
#[test]
fn wgmma_sass_refuses_bad_arguments() {
    for (args, why) in [
        (
            &["sass", "--variant", "m64n40k32.s32.s8.s8.ss"][..],
            "not in the catalog",
        ),
        (
            &[
                "sass",
                "--family",
                "wgmma",
                "--variant",
                "m64n40k32.s32.s8.s8.ss",
            ],
            "not a wgmma variant",
        ),
        (
            &["sass", "--variant", "sp.m64n64k32.f32.bf16.bf16.ss"],
            "sparse",
        ),
        (
            &["sass", "--family", "wgmma", "--filter", "nothing-like-this"],
            "no dense wgmma variant",
        ),
        (
            &[
                "sass",
                "--family",
                "wgmma",
                "--all",
                "--min-target",
                "sm_90",
            ],
            "--min-target",
        ),
        (
            &[
                "sass",
                "--family",
                "wgmma",
                "--all",
                "--listing-n",
                "12",
                "-o",
                "x",
            ],
            "N = 12",
        ),
        (
            &["sass", "--family", "wgmma", "--shape", "m16n8k16"],
            "mma.sync",
        ),
        (
            &["sass", "--family", "wgmma", "--index", "-o", "x"],
            "--index",
        ),
        (&["sass", "--filter", "bf16"], "--family wgmma"),
        (&["sass", "--all", "--listing-n", "16"], "--family wgmma"),
    ] {
        let out = common::fp4probe(args);
        let text = common::text(&out);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {text}");
        assert!(text.contains(why), "{args:?}: {text}");
    }
}
