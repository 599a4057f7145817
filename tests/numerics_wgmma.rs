//! `fp4probe numerics --family wgmma` on the emulator: the pipeline end to end (selection,
//! files, table, labels) and its refusals. That the experiments recover a configured
//! accumulation is tested in `src/wgmma/numerics.rs`.

mod common;

/// `fp4probe numerics <args> --backend emulator -o <dir>`, which must succeed; its output.
fn emulate(args: &[&str], dir: &std::path::Path) -> String {
    let mut all = vec!["numerics"];
    all.extend_from_slice(args);
    all.extend(["--backend", "emulator", "-o", dir.to_str().unwrap()]);
    let out = common::fp4probe(&all);
    let text = common::text(&out);
    assert!(out.status.success(), "{text}");
    text
}

#[test]
fn one_variant_writes_its_labelled_findings() {
    let dir = common::tmpdir("numerics", "wgmma-one");
    let text = emulate(&["--variant", "m64n8k32.f32.e4m3.e4m3.rs"], &dir);
    assert!(text.contains("c_alone_bits: ≥ 23"), "{text}");
    let json: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(dir.join("m64n8k32.f32.e4m3.e4m3.rs.numerics.json")).unwrap(),
    )
    .unwrap();
    assert_eq!(json["schema"], "fp4probe.wgmma-numerics/1");
    assert_eq!(json["backend"], "emulator");
    assert!(json["model"].as_str().unwrap().starts_with("emulator:"));
    assert_eq!(json["products_exact"], true);
    assert_eq!(json["product_bits_below_c"]["bits"], 23);
    assert_eq!(json["product_bits_below_c"]["is_lower_bound"], true);
    let names: Vec<&str> = json["findings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["name"].as_str().unwrap())
        .collect();
    for n in ["fraction_bits_after_alignment", "c_alone_bits", "nan_inf"] {
        assert!(names.contains(&n), "{names:?}");
    }
    assert!(
        json["provenance"]["ptx"]
            .as_str()
            .unwrap()
            .contains("wgmma.mma_async")
    );
}

#[test]
fn all_measures_every_type_set_at_one_n() {
    let dir = common::tmpdir("numerics", "wgmma-all");
    emulate(&["--family", "wgmma", "--all"], &dir);
    let table = std::fs::read_to_string(dir.join("numerics.md")).unwrap();
    assert!(
        table.starts_with("# Numeric behaviour of wgmma on "),
        "{table}"
    );
    // 21 type sets, A from shared memory and from registers, N = 8.
    let rows = table.lines().filter(|l| l.starts_with("| `m64n8k")).count();
    assert_eq!(rows, 42, "{table}");
    assert!(
        table.contains("| `m64n8k32.satfinite.s32.s8.u8.ss` |"),
        "{table}"
    );
    assert!(table.contains("saturates / saturates |"), "{table}");
    let jsons = std::fs::read_dir(&*dir)
        .unwrap()
        .filter(|e| {
            e.as_ref()
                .unwrap()
                .file_name()
                .to_string_lossy()
                .ends_with(".numerics.json")
        })
        .count();
    assert_eq!(jsons, 42);
}

#[test]
fn bad_arguments_exit_2() {
    for (args, why) in [
        (
            &[
                "numerics",
                "--family",
                "wgmma",
                "--variant",
                "m64n12k16.f32.bf16.bf16.ss",
            ][..],
            "not a wgmma variant",
        ),
        (
            &["numerics", "--variant", "sp.m64n64k32.f32.bf16.bf16.ss"],
            "sparse",
        ),
        (
            &["numerics", "--family", "wgmma", "--all", "--n", "12"],
            "N in [12]",
        ),
        (
            &["numerics", "--family", "wgmma", "--filter", "no-such-type"],
            "no dense wgmma variant",
        ),
        (
            &["numerics", "--family", "wgmma", "--a", "e4m3"],
            "mma.sync",
        ),
        (
            &["numerics", "--family", "wgmma", "--all", "--map", "x.json"],
            "--map",
        ),
        (&["numerics", "--family", "wgmma"], "nothing selected"),
        (&["numerics", "--all", "--n", "8"], "--family wgmma"),
        (&["numerics", "--filter", "bf16"], "--family wgmma"),
        (
            &[
                "numerics",
                "--family",
                "wgmma",
                "--all",
                "--backend",
                "quantum",
            ],
            "quantum",
        ),
    ] {
        let out = common::fp4probe(args);
        let text = common::text(&out);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {text}");
        assert!(text.contains(why), "{args:?}: {text}");
    }
}
