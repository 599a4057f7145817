//! `fp4probe report`: markdown snapshots, SVG structure, the index, failed maps, the scale hook.
//!
//! Snapshots live in `tests/snapshots/`; `UPDATE_SNAPSHOTS=1 cargo test --release --test report`
//! rewrites them from the current output.

use fp4probe::isa::Operand;
use fp4probe::report::{self, IndexEntry, PageOptions};
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::Command;

const BF16: &str = "m16n8k16.f32.bf16.bf16.f32";
const NVF4: &str = "m16n8k64.kind_mxf4nvf4.block_scale.scale_vec_4X.f32.e2m1.e2m1.f32.ue4m3";

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn map_path(folder: &str, stem: &str) -> PathBuf {
    root()
        .join("reports")
        .join(folder)
        .join(format!("{stem}.json"))
}

mod common;
use common::check_well_formed;

fn tmpdir(name: &str) -> common::Scratch {
    common::tmpdir("report", name)
}

/// Compare with `tests/snapshots/<name>`, or rewrite it when `UPDATE_SNAPSHOTS=1`.
fn snapshot(name: &str, actual: &str) {
    let path = root().join("tests/snapshots").join(name);
    if std::env::var_os("UPDATE_SNAPSHOTS").is_some_and(|v| v == "1") {
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, actual).unwrap();
        return;
    }
    let expected = std::fs::read_to_string(&path).unwrap_or_else(|e| {
        panic!(
            "{}: {e} (run with UPDATE_SNAPSHOTS=1 to create it)",
            path.display()
        )
    });
    if expected != actual {
        let line = expected
            .lines()
            .zip(actual.lines())
            .position(|(a, b)| a != b)
            .unwrap_or(expected.lines().count().min(actual.lines().count()));
        panic!(
            "{} differs from the rendered page at line {} (UPDATE_SNAPSHOTS=1 rewrites it):\n  expected: {:?}\n  actual:   {:?}",
            path.display(),
            line + 1,
            expected.lines().nth(line),
            actual.lines().nth(line)
        );
    }
}

#[test]
fn hardware_page_matches_its_snapshot() {
    let src = report::load(&map_path("sm_90", BF16)).unwrap();
    let page = report::render_page(&src.map);
    assert!(page.contains("**Status: PASSED on hardware**"));
    assert!(page.contains("![A](m16n8k16.f32.bf16.bf16.f32.A.svg)"));
    snapshot("sm_90.m16n8k16.f32.bf16.bf16.f32.md", &page);
}

#[test]
fn emulator_page_matches_its_snapshot() {
    let src = report::load(&map_path("emulator", NVF4)).unwrap();
    let page = report::render_page(&src.map);
    assert!(page.contains("**Status: EMULATED (not a hardware finding)**"));
    assert!(page.contains("documented layout run through fp4probe's CPU model"));
    assert!(page.contains("On an sm_120 machine the same command measures it"));
    assert!(page.contains("## Scale factors") && page.contains("fp4probe scale"));
    snapshot("emulator.m16n8k64.mxf4nvf4.4X.ue4m3.md", &page);
}

/// The grid's cells, row by row: (lane, register label), read from the row lines
/// `<g transform="translate(0,Y)"><use xlink:href="#L5" x=".."/><text x="..">r2.e1</text>...`.
fn cells(svg: &str) -> Vec<Vec<(u32, String)>> {
    svg.lines()
        .filter(|l| l.starts_with("<g transform=\"translate(0,"))
        .map(|l| {
            let mut row = Vec::new();
            let mut last_x = -1i64;
            for part in l.split("<use xlink:href=\"#L").skip(1) {
                let (lane, rest) = part.split_once('"').unwrap();
                let x: i64 = rest
                    .trim_start_matches(" x=\"")
                    .split('"')
                    .next()
                    .unwrap()
                    .parse()
                    .unwrap();
                assert!(x > last_x, "cells of a row in column order");
                last_x = x;
                let label = rest.split("\">").nth(1).unwrap().split('<').next().unwrap();
                row.push((lane.parse().unwrap(), label.to_string()));
            }
            row
        })
        .collect()
}

#[test]
fn svg_is_well_formed_with_one_labelled_cell_per_element() {
    let bf = report::load(&map_path("sm_90", BF16)).unwrap().map;
    let a = report::svg(&bf, Operand::A);
    check_well_formed(&a);
    let g = cells(&a);
    assert_eq!(g.len(), 16);
    assert!(g.iter().all(|r| r.len() == 16), "16×16 cells");
    // PTX ISA figure for m16n8k16 .bf16 A: (row 1, col 11) is a2 element 1 of lane 5.
    assert_eq!(g[1][11], (5, "r2.e1".to_string()));
    assert_eq!(g[0][0], (0, "r0.e0".to_string()));
    assert_eq!(g[9][2], (5, "r1.e0".to_string()));
    assert!(
        a.contains("<text x=\"19\" y=\"-11\">T5</text>"),
        "lane label of T5"
    );
    assert!(!a.contains("<script") && !a.contains("@font-face") && !a.contains("url("));

    let nv = report::load(&map_path("emulator", NVF4)).unwrap().map;
    let a = report::svg(&nv, Operand::A);
    check_well_formed(&a);
    let g = cells(&a);
    assert_eq!(g.len(), 16);
    assert!(g.iter().all(|r| r.len() == 64), "16×64 cells");
    // row = g + 8·(reg%2), k = 8·t + e + 32·(reg/2): (9, 45) is lane 5 (g 1, t 1), reg 3, e 5.
    assert_eq!(g[9][45], (5, "r3.e5".to_string()));
    assert!(a.contains("emulator"));
    let b = report::svg(&nv, Operand::B);
    check_well_formed(&b);
    let g = cells(&b);
    assert_eq!((g.len(), g[0].len()), (64, 8), "B is k×n");
    let d = report::svg(&nv, Operand::D);
    check_well_formed(&d);
    let g = cells(&d);
    assert_eq!((g.len(), g[0].len()), (16, 8));
    // D: lane 6 (g 1, t 2), d3 is (row 9, col 5); one element per register: `r3`, no `.e`.
    assert_eq!(g[9][5], (6, "r3".to_string()));
    // Every lane appears 4 times in D (16·8 / 32), and rendering is deterministic.
    let mut per_lane = [0; 32];
    g.iter()
        .flatten()
        .for_each(|(l, _)| per_lane[*l as usize] += 1);
    assert!(per_lane.iter().all(|&n| n == 4));
    assert_eq!(d, report::svg(&nv, Operand::D));
}

#[test]
fn lane_colours_are_distinct() {
    let c: Vec<String> = (0..32).map(report::lane_colour).collect();
    let set: std::collections::BTreeSet<_> = c.iter().collect();
    assert_eq!(set.len(), 32, "{c:?}");
    assert!(c.iter().all(|x| x.len() == 7 && x.starts_with('#')));
}

#[test]
fn index_lists_every_map() {
    let reports = root().join("reports");
    let text = report::index(&reports).unwrap();
    let mut maps = 0;
    for dir in std::fs::read_dir(&reports).unwrap() {
        let dir = dir.unwrap().path();
        if !dir.is_dir() {
            continue;
        }
        let folder = dir.file_name().unwrap().to_string_lossy().into_owned();
        for f in std::fs::read_dir(&dir).unwrap() {
            let f = f.unwrap().path();
            if f.extension().is_some_and(|x| x == "json") && report::is_lane_map(&f) {
                maps += 1;
                let stem = f.file_stem().unwrap().to_string_lossy().into_owned();
                let page = format!("]({folder}/{stem}.md)");
                let json = format!("]({folder}/{stem}.json)");
                assert!(
                    text.contains(&page) || text.contains(&json),
                    "{folder}/{stem} missing from the index"
                );
            }
        }
    }
    assert!(maps >= 64 + 143, "{maps} maps");
    assert_eq!(report::scan(&reports).unwrap().len(), maps);
    let sm90 = text
        .lines()
        .find(|l| l.starts_with("| [sm_90](sm_90/)"))
        .expect("sm_90 row");
    assert!(
        sm90.contains("| NVIDIA H100 80GB HBM3 | 64 | 64 | 0 | 0 |"),
        "{sm90}"
    );
    // One row per variant: the catalog has 143 and every one has at least an emulator map.
    let (mma, wgmma) = text.split_once("## wgmma").expect("the wgmma section");
    let rows = mma.lines().filter(|l| l.starts_with("| `m")).count();
    assert_eq!(rows, 143);
    // The wgmma section: the H200's lane maps and studies, with their pages.
    assert!(wgmma.contains(
        "| `m64n16k16.f32.bf16.bf16.rs` | registers | sm_90 | [hardware-measured](sm_90/wgmma/m64n16k16.f32.bf16.bf16.rs.md) | NVIDIA H200 | identical | A, B tile, D |"
    ));
    assert!(wgmma.contains(
        "| 16 | MN | 128B | sm_90 | [hardware-measured](sm_90/wgmma/smem.16bit.MN.128B.md) | NVIDIA H200 |"
    ));
    // The subfolders' records: data movement, TMA, mma.sp.
    let (_, more) = wgmma
        .split_once("## Data movement, bulk tensor copies and sparse mma")
        .expect("the data-movement section");
    for row in [
        "| [sm_90/tma](sm_90/tma/README.md) | 39 | 39 | 0 | 0 | 39 |",
        "| [sm_90/ldmatrix](sm_90/ldmatrix/README.md) | 13 | 13 | 0 | 0 | 13 |",
        "| `sp.m16n8k32.f32.f16.f16.f32` | mma.sp | sm_90/mma-sp | [hardware-measured](sm_90/mma-sp/sp.m16n8k32.f32.f16.f16.f32.md) | NVIDIA H200 |",
        "| `store.u8.none.16x16` | TMA store | sm_90/tma | [hardware-measured](sm_90/tma/store.u8.none.16x16.md) | NVIDIA H200 |",
    ] {
        assert!(more.contains(row), "{row} missing:\n{more}");
    }
    // The committed index is what `fp4probe report --index reports` writes now.
    assert_eq!(
        std::fs::read_to_string(reports.join("README.md")).unwrap(),
        text,
        "reports/README.md is stale: run `fp4probe report --index reports`"
    );
}

#[test]
fn index_marks_failed_maps_and_maps_without_pages() {
    let e = |folder: &str, variant: &str, hw: bool, failed: bool, page: bool| IndexEntry {
        folder: folder.into(),
        stem: variant.into(),
        variant: variant.into(),
        min_target: "sm_80".into(),
        backend: if hw {
            fp4probe::device::BackendKind::Hardware
        } else {
            fp4probe::device::BackendKind::Emulator
        },
        status: if failed {
            fp4probe::layout::lanemap::Status::Failed
        } else {
            fp4probe::layout::lanemap::Status::Passed
        },
        device: "dev".into(),
        has_page: page,
    };
    let entries = [
        e("sm_90", BF16, true, false, true),
        e("emulator", BF16, false, false, false),
        e("sm_90", "m16n8k8.f32.bf16.bf16.f32", true, true, true),
    ];
    let text = report::render_index(&entries, &BTreeMap::new());
    assert!(text.contains(&format!(
        "| `{BF16}` | sm_80 | [hardware-measured](sm_90/{BF16}.md) | emulated ([JSON](emulator/{BF16}.json)) |"
    )));
    assert!(text.contains(
        "| `m16n8k8.f32.bf16.bf16.f32` | sm_80 | [**failed**](sm_90/m16n8k8.f32.bf16.bf16.f32.md) | — |"
    ));
    // Hardware folders come first.
    let header = text.lines().find(|l| l.starts_with("| variant")).unwrap();
    assert_eq!(header, "| variant | min target | sm_90 | emulator |");
}

/// A copy of a real map, edited as JSON, in a scratch folder (removed when the guard drops).
fn edited(
    name: &str,
    folder: &str,
    stem: &str,
    edit: impl FnOnce(&mut serde_json::Value),
) -> (common::Scratch, PathBuf) {
    let text = std::fs::read_to_string(map_path(folder, stem)).unwrap();
    let mut v: serde_json::Value = serde_json::from_str(&text).unwrap();
    edit(&mut v);
    let scratch = tmpdir(name);
    let dir = scratch.join(folder);
    std::fs::create_dir_all(&dir).unwrap();
    let p = dir.join(format!("{stem}.json"));
    std::fs::write(&p, serde_json::to_string_pretty(&v).unwrap()).unwrap();
    (scratch, p)
}

#[test]
fn failed_map_renders_a_failed_page_with_its_reason() {
    let reason = "inference failed: A slot 17 lit no D slot";
    let (_scratch, p) = edited("failed", "sm_90", BF16, |v| {
        v["status"] = "failed".into();
        v["failure"] = reason.into();
        v["operands"] = serde_json::json!([]);
        v["validation"] = serde_json::Value::Null;
        v["documented_diff"] = serde_json::Value::Null;
        v["raw"] =
            serde_json::json!({"a_lit": [[1], []], "b_lit": [[0]], "c_lit": [], "pairing": []});
    });
    let src = report::load(&p).unwrap();
    let page = report::render_page(&src.map);
    assert!(page.contains("**Status: FAILED (on hardware)**"), "{page}");
    assert!(page.contains(&format!("> **Failure:** {reason}")));
    assert!(page.contains("Not run: there was no inferred layout to validate."));
    assert!(page.contains("No layout to compare."));
    assert!(page.contains("raw observations"));
    assert!(!page.contains("![A]") && !page.contains("[CSV]"));
    check_well_formed(&report::svg(&src.map, Operand::A));

    // Through the binary: the page is written next to the map, no SVG, no index outside reports/.
    let o = Command::new(env!("CARGO_BIN_EXE_fp4probe"))
        .args(["report", p.to_str().unwrap()])
        .output()
        .unwrap();
    assert!(o.status.success(), "{o:?}");
    let md = std::fs::read_to_string(p.with_extension("md")).unwrap();
    assert_eq!(md, page);
    assert!(!p.parent().unwrap().join(format!("{BF16}.A.svg")).exists());
    // The folder above is not `reports/`: no index is written there.
    assert!(
        !p.parent()
            .unwrap()
            .parent()
            .unwrap()
            .join("README.md")
            .exists()
    );
}

#[test]
fn failed_validation_still_shows_the_layout_and_the_mismatches() {
    let (_scratch, p) = edited("invalid", "sm_90", BF16, |v| {
        v["status"] = "failed".into();
        v["failure"] = "validation through the inferred maps failed".into();
        v["validation"]["random"] = serde_json::json!({
            "passed": false, "compared": 128, "mismatches": [[3, 4, 2.0, 1.5]], "mismatch_count": 1
        });
    });
    let src = report::load(&p).unwrap();
    let page = report::render_page(&src.map);
    assert!(page.contains("**Status: FAILED (on hardware)**"));
    assert!(page.contains("FAIL: 1 of 128 elements differ"));
    assert!(page.contains("| 3 | 4 | 2 | 1.5 |"));
    assert!(page.contains("![A]("));
}

#[test]
fn scale_hook_renders_a_scale_field() {
    let (_scratch, p) = edited("scale", "emulator", NVF4, |v| {
        v["scale"] = serde_json::json!([{
            "operand": "scale_a", "rows": 16, "cols": 4, "regs": 1, "elems_per_reg": 4,
            "slots": (0..32).flat_map(|l| (0..2).map(move |e| [l, 0, e, l % 16, e + 2 * (l / 16)])).collect::<Vec<_>>()
        }]);
    });
    let src = report::load(&p).unwrap();
    assert!(src.scale.is_some());
    let opts = PageOptions {
        scale: src.scale.as_ref(),
        ..PageOptions::default()
    };
    let page = report::render_page_with(&src.map, &opts);
    assert!(page.contains("### scale_a — 16×4"), "{page}");
    assert!(page.contains("| lane | r0.e0 | r0.e1 | r0.e2 | r0.e3 |"));
    assert!(page.contains("| 17 | 1,2 | 1,3 |  |  |"));
    assert!(!page.contains("Not measured yet"));
    // Any other form is shown as recorded.
    let other = serde_json::json!({"a": {"byte": 0}});
    let page = report::render_page_with(
        &src.map,
        &PageOptions {
            scale: Some(&other),
            ..PageOptions::default()
        },
    );
    assert!(page.contains("```json\n{\n  \"a\": {"));
}

#[test]
fn cli_fills_each_folder_and_rebuilds_the_index() {
    let tmp = tmpdir("cli");
    let reports = tmp.join("reports");
    for (folder, stem) in [("sm_90", BF16), ("emulator", BF16), ("emulator", NVF4)] {
        let d = reports.join(folder);
        std::fs::create_dir_all(&d).unwrap();
        std::fs::copy(map_path(folder, stem), d.join(format!("{stem}.json"))).unwrap();
    }
    // Another fp4probe record sharing the folder is skipped, not an error.
    std::fs::write(
        reports.join("sm_90/x.numerics.json"),
        "{\"schema\": \"fp4probe.numerics/1\"}",
    )
    .unwrap();
    let paths: Vec<String> = ["sm_90", "emulator"]
        .iter()
        .flat_map(|f| std::fs::read_dir(reports.join(f)).unwrap())
        .map(|e| e.unwrap().path().to_string_lossy().into_owned())
        .collect();
    let o = Command::new(env!("CARGO_BIN_EXE_fp4probe"))
        .arg("report")
        .args(&paths)
        .arg("--skip-measured")
        .output()
        .unwrap();
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(o.status.success(), "{o:?}");
    assert!(
        out.contains("not a lane map or study (fp4probe.numerics/1)"),
        "{out}"
    );
    let has = |p: &str| reports.join(p).is_file();
    assert!(has(&format!("sm_90/{BF16}.md")) && has(&format!("sm_90/{BF16}.A.svg")));
    assert!(has(&format!("sm_90/{BF16}.D.svg")));
    assert!(!has(&format!("emulator/{BF16}.md")), "measured: skipped");
    assert!(has(&format!("emulator/{NVF4}.md")) && has(&format!("emulator/{NVF4}.B.svg")));
    let index = std::fs::read_to_string(reports.join("README.md")).unwrap();
    assert!(index.starts_with(report::GENERATED));
    assert!(index.contains(&format!("[hardware-measured](sm_90/{BF16}.md)")));
    assert!(index.contains(&format!("emulated ([JSON](emulator/{BF16}.json))")));
    assert!(index.contains(&format!("[emulated](emulator/{NVF4}.md)")));

    // --index alone rebuilds the same index; -o puts pages elsewhere and leaves the index alone.
    std::fs::remove_file(reports.join("README.md")).unwrap();
    let o = Command::new(env!("CARGO_BIN_EXE_fp4probe"))
        .args(["report", "--index", reports.to_str().unwrap()])
        .output()
        .unwrap();
    assert!(o.status.success(), "{o:?}");
    assert_eq!(
        std::fs::read_to_string(reports.join("README.md")).unwrap(),
        index
    );
    let out_dir = tmp.join("out");
    let o = Command::new(env!("CARGO_BIN_EXE_fp4probe"))
        .args([
            "report",
            map_path("sm_90", BF16).to_str().unwrap(),
            "-o",
            out_dir.to_str().unwrap(),
        ])
        .output()
        .unwrap();
    assert!(o.status.success(), "{o:?}");
    assert!(out_dir.join(format!("{BF16}.md")).is_file());
    assert!(out_dir.join(format!("{BF16}.C.svg")).is_file());
    assert!(!out_dir.join("README.md").exists());
}
