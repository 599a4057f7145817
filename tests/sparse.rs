//! `mma.sp` through the command line, without a GPU: `fragment` measures a sparse variant's
//! lane and metadata maps on the emulator and writes them (JSON `metadata`, CSV `E` rows) as a
//! map `show`, `report` and `LaneMap::load` read; bad requests are refused before any work; an
//! emulator run never replaces the committed hardware map.

mod common;
use common::{fp4probe, ok, refused, text, tmpdir};
use fp4probe::layout::lanemap::{LaneMap, Status};

#[test]
fn fragment_writes_the_metadata_maps_of_every_selector() {
    let out = tmpdir("sparse", "maps");
    let dir = out.to_str().unwrap();
    let o = fp4probe(&[
        "fragment",
        "--variant",
        "sp.m16n8k16.f32.bf16.bf16.f32",
        "--backend",
        "emulator",
        "-o",
        dir,
    ]);
    ok(&o);
    let t = text(&o);
    assert!(
        t.contains("metadata, sparsity selector 3: lanes [3, 7, 11"),
        "{t}"
    );
    let path = out.join("sp.m16n8k16.f32.bf16.bf16.f32.json");
    let map = LaneMap::load(&path).unwrap();
    assert_eq!(map.status, Status::Passed);
    let meta = map.metadata.as_ref().unwrap();
    assert_eq!(meta.selectors.len(), 4);
    assert!(
        meta.selectors
            .iter()
            .all(|s| s.documented_differ == Some(0))
    );
    // A holds the compressed 16 x 8; B the dense 16 x 8.
    let a = map
        .operands
        .iter()
        .find(|o| o.operand.name() == "A")
        .unwrap();
    assert_eq!((a.rows, a.cols), (16, 8));
    let csv = std::fs::read_to_string(out.join("sp.m16n8k16.f32.bf16.bf16.f32.csv")).unwrap();
    // 4 selectors x 16 rows x 4 chunks x 2 indices.
    assert_eq!(csv.lines().filter(|l| l.starts_with("E,")).count(), 512);
    let page = tmpdir("sparse", "page");
    ok(&fp4probe(&[
        "report",
        path.to_str().unwrap(),
        "-o",
        page.to_str().unwrap(),
        "--no-index",
    ]));
    let md = std::fs::read_to_string(page.join("sp.m16n8k16.f32.bf16.bf16.f32.md")).unwrap();
    assert!(
        md.contains("## Metadata") && md.contains("| 9 | T5:[19:16] |"),
        "{md}"
    );
}

#[test]
fn sparse_selection_and_undocumented_selectors_are_checked_first() {
    refused(
        &[
            "fragment",
            "--sparse",
            "--all",
            "--undocumented-selectors",
            "--backend",
            "emulator",
        ],
        "--undocumented-selectors probes one sparse variant",
    );
    refused(
        &[
            "fragment",
            "--variant",
            "m16n8k16.f32.bf16.bf16.f32",
            "--undocumented-selectors",
            "--backend",
            "emulator",
        ],
        "one sparse variant",
    );
    refused(
        &["numerics", "--sparse", "--backend", "emulator"],
        "do not model the metadata operand",
    );
    // The emulator has no model for a selector the PTX ISA does not name: recorded, not fatal.
    let out = tmpdir("sparse", "undocumented");
    let o = fp4probe(&[
        "fragment",
        "--variant",
        "sp.m16n8k32.f32.f16.f16.f32",
        "--undocumented-selectors",
        "--backend",
        "emulator",
        "-o",
        out.to_str().unwrap(),
    ]);
    ok(&o);
    assert!(
        text(&o).contains("selector 2 (beyond the PTX ISA's)"),
        "{}",
        text(&o)
    );
}

#[test]
fn an_emulator_run_never_replaces_the_hardware_map() {
    let out = tmpdir("sparse", "hardware");
    let id = "sp.m16n8k16.f32.bf16.bf16.f32";
    let committed = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("reports/sm_90/mma-sp");
    for ext in ["json", "csv"] {
        std::fs::copy(
            committed.join(format!("{id}.{ext}")),
            out.join(format!("{id}.{ext}")),
        )
        .unwrap();
    }
    let map = LaneMap::load(&out.join(format!("{id}.json"))).unwrap();
    assert_eq!(map.provenance.device, "NVIDIA H200");
    refused(
        &[
            "fragment",
            "--variant",
            id,
            "--backend",
            "emulator",
            "--force",
            "-o",
            out.to_str().unwrap(),
        ],
        "hardware",
    );
}

#[test]
fn the_committed_sparse_pages_are_current() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("reports/sm_90/mma-sp");
    let out = tmpdir("sparse", "pages");
    for stem in ["sp.m16n8k32.f32.f16.f16.f32", "sp.m16n8k64.s32.s8.s8.s32"] {
        ok(&fp4probe(&[
            "report",
            dir.join(format!("{stem}.json")).to_str().unwrap(),
            "-o",
            out.to_str().unwrap(),
            "--no-index",
        ]));
        for ext in ["md", "A.svg", "B.svg", "C.svg", "D.svg"] {
            let name = format!("{stem}.{ext}");
            assert_eq!(
                std::fs::read_to_string(out.join(&name)).unwrap(),
                std::fs::read_to_string(dir.join(&name)).unwrap(),
                "{name}: regenerate with `fp4probe report reports/sm_90/mma-sp/{stem}.json --no-index`"
            );
        }
    }
}
