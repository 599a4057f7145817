//! `fp4probe catalog` as a user drives it: every family with its count, the sparse and m8n8
//! `mma` variants, `ldmatrix`/`stmatrix`/`movmatrix`, their near misses; and the commands that
//! run variants leaving out, with a note, what is catalogued but not probed. No GPU needed.

mod common;
use common::{fp4probe, text, tmpdir};

fn json(args: &[&str]) -> serde_json::Value {
    let o = fp4probe(args);
    assert!(o.status.success(), "{args:?}: {}", text(&o));
    serde_json::from_slice(&o.stdout).unwrap_or_else(|e| panic!("{args:?}: {e}\n{}", text(&o)))
}

#[test]
fn every_listing_ends_with_each_family_and_its_count() {
    let want = [
        ("mma.sync", 173, 143),
        ("mma.sp", 171, 171),
        ("ldmatrix", 18, 6),
        ("stmatrix", 9, 6),
        ("movmatrix", 1, 1),
        ("wgmma.mma_async", 2148, 1092),
    ];
    for family in ["mma", "ldmatrix", "movmatrix"] {
        let j = json(&["catalog", "--family", family, "--json"]);
        let got: Vec<(String, u64, u64)> = j["families"]
            .as_array()
            .unwrap()
            .iter()
            .map(|f| {
                (
                    f["family"].as_str().unwrap().to_string(),
                    f["variants"].as_u64().unwrap(),
                    f["probed"].as_u64().unwrap(),
                )
            })
            .collect();
        let want: Vec<(String, u64, u64)> = want
            .iter()
            .map(|(f, n, p)| (f.to_string(), *n, *p))
            .collect();
        assert_eq!(got, want, "--family {family}");
    }
    let t = text(&fp4probe(&["catalog", "--family", "stmatrix"]));
    assert!(t.contains("families ("), "{t}");
    for line in [
        "  mma.sync           173  (143 probed, the rest catalogued and assembled)",
        "  mma.sp             171  (all probed)",
        "  ldmatrix            18  (6 probed, the rest catalogued and assembled)",
        "  movmatrix            1  (all probed)",
        "  wgmma.mma_async   2148  (1092 probed, the rest catalogued and assembled)",
    ] {
        assert!(t.contains(line), "{line}\n{t}");
    }
}

#[test]
fn sparse_and_m8n8_rows() {
    let j = json(&["catalog", "--json"]);
    let vs = j["variants"].as_array().unwrap();
    assert_eq!(vs.len(), fp4probe::isa::catalog().len());
    let by_id = |id: &str| {
        vs.iter()
            .find(|v| v["id"] == id)
            .unwrap_or_else(|| panic!("{id} missing"))
    };
    let v = by_id(
        "sp::ordered_metadata.m16n8k128.kind::mxf4nvf4.block_scale.scale_vec::4X.f32.e2m1.e2m1.f32.ue4m3",
    );
    assert_eq!(v["family"], "mma.sp");
    assert_eq!(v["regs"], serde_json::json!([4, 4, 4, 4]));
    assert_eq!(v["min_target"], "sm_120a");
    // `fragment` measures the sparse forms (lane and metadata maps); the other probes do not.
    assert_eq!(v["probed"], true);
    assert_eq!(v["not_probed"], serde_json::Value::Null);
    assert_eq!(v["sparsity_selectors"], 1);
    assert!(v["note"].as_str().unwrap().contains("metadata operand"));
    let v = by_id("sp.m16n8k16.f32.f16.f16.f32");
    assert_eq!(
        v["ptx"],
        "mma.sp.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32"
    );
    assert_eq!(v["sparsity_selectors"], 4);
    assert_eq!(v["min_target"], "sm_80");
    let v = by_id("m8n8k4.col.row.f32.f16.f16.f32");
    assert_eq!(v["family"], "mma.sync");
    assert_eq!(v["ptx"], "mma.sync.aligned.m8n8k4.col.row.f32.f16.f16.f32");
    assert_eq!(v["regs"], serde_json::json!([2, 2, 8, 8]));
    assert_eq!(v["probed"], false);
    assert_eq!(v["sparsity_selectors"], serde_json::Value::Null);
    let v = by_id("m16n8k16.f32.bf16.bf16.f32");
    assert_eq!(v["probed"], true);
    assert_eq!(v["not_probed"], serde_json::Value::Null);
    // The text table: one block per family, the sparse one with its selectors.
    let t = text(&fp4probe(&[
        "catalog",
        "--filter",
        "m16n8k16.f32.bf16.bf16.f32",
    ]));
    let row = |start: &str| {
        t.lines()
            .find(|l| l.starts_with(start))
            .unwrap_or_else(|| panic!("no {start} row:\n{t}"))
            .split_whitespace()
            .collect::<Vec<_>>()
    };
    assert_eq!(
        row("sp.m16n8k16.f32.bf16.bf16.f32 ")[..7],
        [
            "sp.m16n8k16.f32.bf16.bf16.f32",
            "2/2/4/4",
            "16/16",
            "sm_80",
            "8.7",
            "yes",
            "0-3"
        ]
    );
    assert_eq!(
        row("m16n8k16.f32.bf16.bf16.f32 ")[..6],
        [
            "m16n8k16.f32.bf16.bf16.f32",
            "4/2/4/4",
            "16/16",
            "sm_80",
            "8.7",
            "yes"
        ]
    );
    assert!(t.contains("1 mma.sync variants (1 probed)"), "{t}");
    assert!(t.contains("2 mma.sp variants (2 probed)"), "{t}");
}

#[test]
fn matrix_families_list_shape_count_trans_and_targets() {
    let j = json(&["catalog", "--family", "ldmatrix", "--json"]);
    assert_eq!(j["family"], "ldmatrix");
    let vs = j["variants"].as_array().unwrap();
    assert_eq!(vs.len(), 18);
    let v = vs
        .iter()
        .find(|v| v["id"] == "ldmatrix.m16n16.x2.trans.b8x16.b4x16_p64")
        .unwrap();
    assert_eq!(
        v["ptx"],
        "ldmatrix.sync.aligned.m16n16.x2.trans.shared::cta.b8x16.b4x16_p64"
    );
    assert_eq!(v["regs"], 4);
    assert_eq!(v["num"], 2);
    assert_eq!(v["trans"], true);
    assert_eq!(v["elem"], "b8x16.b4x16_p64");
    assert_eq!(v["min_target"], "sm_100a");
    assert_eq!(
        v["also"],
        serde_json::json!(["sm_103a", "sm_110a", "sm_120a", "sm_121a"])
    );
    let j = json(&["catalog", "--family", "stmatrix", "--json", "--rejected"]);
    let mins: std::collections::BTreeSet<&str> = j["variants"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v["min_target"].as_str().unwrap())
        .collect();
    assert_eq!(mins, ["sm_100a", "sm_90"].into());
    let rejected = j["rejected"].as_array().unwrap();
    assert!(!rejected.is_empty());
    assert!(
        rejected
            .iter()
            .all(|r| r["ptx"].as_str().unwrap().starts_with("stmatrix."))
    );
    let t = text(&fp4probe(&[
        "catalog",
        "--family",
        "movmatrix",
        "--rejected",
    ]));
    assert!(t.contains("movmatrix.m8n8.trans.b16"), "{t}");
    assert!(
        t.contains(".trans modifier required for instruction 'movmatrix'"),
        "{t}"
    );
    assert!(!t.contains("ldmatrix.m8n8"), "{t}");
}

#[test]
fn rejected_lists_the_selector_and_sparse_near_misses() {
    let t = text(&fp4probe(&[
        "catalog",
        "--rejected",
        "--filter",
        "nothing-matches",
    ]));
    assert!(t.contains("no mma variant's id contains the filter"), "{t}");
    for want in [
        "of immediates or of .u16 registers",
        "the selectors are 16-bit",
        "Illegal modifier '.sp' for instruction 'mma'",
        "expected to be in range [0..1]",
    ] {
        assert!(t.contains(want), "{want}:\n{t}");
    }
}

#[test]
fn naming_a_catalogued_variant_the_probes_do_not_run_is_refused_with_the_reason() {
    let every: &[&[&str]] = &[
        &["fragment", "--backend", "emulator"][..],
        &["numerics", "--backend", "emulator"],
        &["container", "--backend", "emulator"],
        &["bench"],
        &["sass"],
    ];
    // `fragment` and `sass` take the sparse forms; the other probes refuse them.
    let not_fragment: &[&[&str]] = &every[1..4];
    for (id, why, commands) in [
        (
            "sp.m16n8k16.f32.f16.f16.f32",
            "do not model the metadata operand",
            not_fragment,
        ),
        ("m8n8k16.s32.s8.s8.s32", "m8n8 shapes only for f64", every),
        ("m8n8k4.col.col.f16.f16.f16.f16", "one per quad pair", every),
    ] {
        for cmd in commands {
            let mut args = cmd.to_vec();
            args.extend(["--variant", id]);
            let o = fp4probe(&args);
            let t = text(&o);
            assert_eq!(o.status.code(), Some(2), "{cmd:?} {id}: {t}");
            assert!(
                t.contains(&format!(
                    "{id} is catalogued (ptxas assembles it) but not probed"
                )) && t.contains(why),
                "{cmd:?} {id}: {t}"
            );
        }
    }
    let o = fp4probe(&[
        "lookup",
        "sp.m16n8k16.f32.f16.f16.f32",
        "--operand",
        "A",
        "--lane",
        "0",
        "--reg",
        "0",
        "--elem",
        "0",
    ]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert!(text(&o).contains("it is not probed"), "{}", text(&o));
}

#[test]
fn a_selection_leaves_out_what_is_not_probed_with_a_note() {
    let out = tmpdir("catalog", "shape");
    let o = fp4probe(&[
        "fragment",
        "--shape",
        "m16n8k16",
        "--backend",
        "emulator",
        "-q",
        "-o",
        out.to_str().unwrap(),
    ]);
    let t = text(&o);
    assert!(o.status.success(), "{t}");
    let probed = fp4probe::isa::probed()
        .iter()
        .filter(|v| v.shape.to_string() == "m16n8k16")
        .count();
    let sparse = fp4probe::isa::catalog()
        .iter()
        .filter(|v| v.shape.to_string() == "m16n8k16" && v.sparse.is_some())
        .count();
    assert!(sparse > 0);
    // `fragment` measures the sparse forms of the shape too.
    assert!(
        t.contains(&format!("{} passed, 0 failed", probed + sparse)),
        "{t}"
    );
    assert!(!t.contains("note: left out"), "{t}");
    // A probe without a metadata model leaves them out, with the reason.
    let o = fp4probe(&["container", "--shape", "m16n8k16", "--backend", "emulator"]);
    let t = text(&o);
    assert!(
        t.contains(&format!(
            "note: left out {sparse} variants that are catalogued (ptxas assembles them) but \
             not probed:"
        )) && t.contains("do not model the metadata operand"),
        "{t}"
    );
    // Only what is not probed: an error naming why.
    let o = fp4probe(&["fragment", "--shape", "m8n8k16", "--backend", "emulator"]);
    let t = text(&o);
    assert_eq!(o.status.code(), Some(2), "{t}");
    assert!(
        t.contains("no selected variant is probed") && t.contains("8 x the lane-map probes"),
        "{t}"
    );
}
