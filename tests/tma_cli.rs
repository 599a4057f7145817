//! `fp4probe tma`, driven as a user would, on a machine without a GPU: refusals of bad cases
//! before any work, the emulator's maps and pages, the hardware maps kept from an emulator run,
//! and the committed H200 pages regenerating byte for byte.

mod common;
use common::{fp4probe, text, tmpdir};
use std::path::Path;

const REPORTS: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/reports/sm_90");

#[test]
fn bad_cases_exit_2_before_any_work() {
    let dir = tmpdir("tma", "bad");
    for (case, says) in [
        ("load.u16.256B.16x64", "unknown swizzle '256B'"),
        ("load.u16.64B.16x64", "wider than the 64B swizzle span"),
        ("load.u16.none.16x4", "multiple of 16 bytes"),
        ("load.u16.128B.16x64.at100", "multiple of 128"),
        ("copy.u16.none.16x8", "not a TMA case id"),
    ] {
        let o = fp4probe(&[
            "tma",
            "probe",
            "--case",
            case,
            "--backend",
            "emulator",
            "-o",
            dir.to_str().unwrap(),
        ]);
        assert_eq!(o.status.code(), Some(2), "{case}: {}", text(&o));
        assert!(text(&o).contains(says), "{case}: {}", text(&o));
    }
    let o = fp4probe(&[
        "tma",
        "probe",
        "--all",
        "--swizzle",
        "16B",
        "--backend",
        "emulator",
    ]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert!(text(&o).contains("unknown swizzle '16B'"), "{}", text(&o));
    assert_eq!(std::fs::read_dir(&*dir).unwrap().count(), 0);
}

#[test]
fn the_emulator_writes_maps_pages_and_the_stmatrix_path() {
    let dir = tmpdir("tma", "emu");
    let d = dir.to_str().unwrap();
    let o = fp4probe(&[
        "tma",
        "probe",
        "--case",
        "load.u16.128B.16x64",
        "--case",
        "store.u8.32B.16x32",
        "--backend",
        "emulator",
        "-o",
        d,
    ]);
    assert!(o.status.success(), "{}", text(&o));
    assert!(
        text(&o).contains("xor128B(start + 128·row + 2·col)"),
        "{}",
        text(&o)
    );
    for f in [
        "load.u16.128B.16x64.json",
        "load.u16.128B.16x64.csv",
        "store.u8.32B.16x32.md",
    ] {
        assert!(dir.join(f).is_file(), "{f}");
    }
    let json: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(dir.join("load.u16.128B.16x64.json")).unwrap(),
    )
    .unwrap();
    assert_eq!(json["schema"], "fp4probe.tma-map/1");
    assert_eq!(json["backend"], "emulator");
    assert_eq!(json["documented_mismatches"], 0);
    let o = fp4probe(&["tma", "stmatrix", "--backend", "emulator", "-o", d]);
    assert!(o.status.success(), "{}", text(&o));
    let readme = std::fs::read_to_string(dir.join("README.md")).unwrap();
    assert!(readme.contains("## stmatrix + swizzled store"), "{readme}");
}

#[test]
fn an_emulator_run_does_not_replace_a_hardware_map() {
    let dir = tmpdir("tma", "keep");
    let case = "load.u16.128B.16x64";
    let hw = Path::new(REPORTS).join("tma").join(format!("{case}.json"));
    std::fs::copy(&hw, dir.join(format!("{case}.json"))).unwrap();
    let o = fp4probe(&[
        "tma",
        "probe",
        "--case",
        case,
        "--backend",
        "emulator",
        "-o",
        dir.to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert_eq!(
        std::fs::read(dir.join(format!("{case}.json"))).unwrap(),
        std::fs::read(&hw).unwrap()
    );
}

#[test]
fn the_committed_pages_regenerate_byte_for_byte() {
    let dir = tmpdir("tma", "pages");
    let src = Path::new(REPORTS).join("tma");
    for e in std::fs::read_dir(&src).unwrap() {
        let p = e.unwrap().path();
        if p.extension().is_some_and(|x| x == "json" || x == "csv") {
            std::fs::copy(&p, dir.join(p.file_name().unwrap())).unwrap();
        }
    }
    let o = fp4probe(&[
        "tma",
        "report",
        dir.to_str().unwrap(),
        "--wgmma",
        Path::new(REPORTS).join("wgmma").to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", text(&o));
    for f in [
        "README.md",
        "wgmma-feed.csv",
        "load.u16.128B.16x32.md",
        "load.u16.128B.16x32.svg",
    ] {
        assert_eq!(
            std::fs::read_to_string(dir.join(f)).unwrap(),
            std::fs::read_to_string(src.join(f)).unwrap(),
            "{f}"
        );
    }
}
