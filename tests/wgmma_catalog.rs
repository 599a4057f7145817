//! `fp4probe catalog --family wgmma|mma|all`, driven as a user would; no GPU needed
//! (tests/catalog.rs covers the other families).

mod common;
use common::{fp4probe, text};
use fp4probe::wgmma;

fn has_driver() -> bool {
    // SAFETY: only probes whether libcuda can be loaded.
    unsafe { cudarc::driver::sys::is_culib_present() }
}

fn json(args: &[&str]) -> serde_json::Value {
    let o = fp4probe(args);
    assert!(o.status.success(), "{args:?}: {}", text(&o));
    serde_json::from_slice(&o.stdout).unwrap_or_else(|e| panic!("{args:?}: {e}\n{}", text(&o)))
}

#[test]
fn the_table_lists_every_wgmma_variant() {
    let o = fp4probe(&["catalog", "--family", "wgmma"]);
    assert!(o.status.success(), "{}", text(&o));
    let out = String::from_utf8_lossy(&o.stdout);
    let n = wgmma::catalog().len();
    let rows: Vec<&str> = out
        .lines()
        .filter(|l| l.starts_with("m64n") || l.starts_with("sp.m64n"))
        .collect();
    assert_eq!(rows.len(), n, "{out}");
    assert!(out.contains(&format!("{n} wgmma variants.")), "{out}");
    let row = rows
        .iter()
        .find(|l| l.starts_with("m64n256k16.f32.bf16.bf16.rs "))
        .expect("m64n256k16.f32.bf16.bf16.rs listed");
    let cells: Vec<&str> = row.split_whitespace().collect();
    // id, opcode, A source, K, D regs, A regs, trans, min, PTX, here.
    assert_eq!(
        &cells[..9],
        [
            "m64n256k16.f32.bf16.bf16.rs",
            "wgmma.mma_async.sync.aligned.m64n256k16.f32.bf16.bf16",
            "rs",
            "16",
            "128",
            "4",
            "B",
            "sm_90a",
            "8.0"
        ],
        "{row}"
    );
    if !has_driver() {
        assert!(out.starts_with("device: no CUDA device"), "{out}");
        assert_eq!(cells[9], "?", "{row}");
    }
}

#[test]
fn json_carries_the_register_geometry() {
    let j = json(&["catalog", "--family", "wgmma", "--json"]);
    assert_eq!(j["family"], "wgmma");
    let vs = j["variants"].as_array().unwrap();
    assert_eq!(vs.len(), wgmma::catalog().len());
    let by_id = |id: &str| {
        vs.iter()
            .find(|v| v["id"] == id)
            .unwrap_or_else(|| panic!("{id} missing"))
    };
    let v = by_id("m64n256k16.f32.bf16.bf16.rs");
    assert_eq!(v["a_source"], "rs");
    assert_eq!(v["d_regs"], 128);
    assert_eq!(v["a_regs"], 4);
    assert_eq!(v["transposable"], true);
    assert_eq!(v["min_target"], "sm_90a");
    let v = by_id("sp.m64n64k64.s32.u8.s8.ss");
    assert_eq!(
        v["ptx"],
        "wgmma.mma_async.sp.sync.aligned.m64n64k64.s32.u8.s8"
    );
    assert_eq!(v["a_regs"], serde_json::Value::Null);
    assert_eq!(v["transposable"], false);
    assert_eq!(v["ptx_isa"], "8.4");
    if !has_driver() {
        assert!(vs.iter().all(|v| v["runs_here"].is_null()));
    }
    assert!(j["rejected"].is_null());
}

#[test]
fn filter_narrows_the_wgmma_list() {
    let j = json(&[
        "catalog",
        "--family",
        "wgmma",
        "--json",
        "--filter",
        "sp.m64n64k",
    ]);
    let ids: Vec<&str> = j["variants"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v["id"].as_str().unwrap())
        .collect();
    let want = wgmma::catalog()
        .iter()
        .filter(|v| v.id().contains("sp.m64n64k"))
        .count();
    assert_eq!(ids.len(), want);
    assert!(0 < want && want < wgmma::catalog().len());
    assert!(ids.iter().all(|id| id.starts_with("sp.m64n64k")), "{ids:?}");
}

#[test]
fn rejected_lists_the_wgmma_near_misses() {
    let n = wgmma::rejected::rejected_spellings().len();
    let j = json(&["catalog", "--family", "wgmma", "--json", "--rejected"]);
    let r = j["rejected"].as_array().unwrap();
    assert_eq!(r.len(), n);
    assert!(
        r.iter()
            .all(|r| r["ptx"].as_str().unwrap().starts_with("wgmma."))
    );
    let o = fp4probe(&["catalog", "--family", "wgmma", "--rejected"]);
    let t = text(&o);
    assert!(o.status.success(), "{t}");
    assert!(t.contains("Rejected by ptxas (wgmma near misses):"), "{t}");
    assert!(t.contains("Illegal matrix shape '.m64n40k32'"), "{t}");
    assert!(!t.contains("mma.sync.aligned"), "{t}");
}

/// `--family mma` is the default and lists `mma.sync` and `mma.sp` only; `all` lists every
/// family.
#[test]
fn families_mma_and_all() {
    let plain = fp4probe(&["catalog"]);
    let mma = fp4probe(&["catalog", "--family", "mma"]);
    assert!(plain.status.success() && mma.status.success());
    assert_eq!(plain.stdout, mma.stdout);
    let t = String::from_utf8_lossy(&plain.stdout);
    assert!(!t.contains("wgmma variant (catalog id)"), "{t}");
    assert!(!t.contains("ldmatrix variant (catalog id)"), "{t}");

    let j = json(&["catalog", "--family", "all", "--json"]);
    assert_eq!(j["family"], "all");
    assert_eq!(
        j["mma"]["variants"].as_array().unwrap().len(),
        fp4probe::isa::catalog().len()
    );
    assert_eq!(
        j["wgmma"]["variants"].as_array().unwrap().len(),
        wgmma::catalog().len()
    );
    let moves = fp4probe::isa::matrix::catalog();
    for op in ["ldmatrix", "stmatrix", "movmatrix"] {
        assert_eq!(
            j[op]["variants"].as_array().unwrap().len(),
            moves.iter().filter(|v| v.op.name() == op).count(),
            "{op}"
        );
    }
    let t = text(&fp4probe(&["catalog", "--family", "all"]));
    let count = |family| {
        fp4probe::isa::catalog()
            .iter()
            .filter(|v| v.family() == family)
            .count()
    };
    for want in [
        format!("{} mma.sync variants", count("mma.sync")),
        format!("{} mma.sp variants", count("mma.sp")),
        format!("{} wgmma variants.", wgmma::catalog().len()),
        "18 ldmatrix variants".to_string(),
        "9 stmatrix variants".to_string(),
        "1 movmatrix variants".to_string(),
    ] {
        assert!(t.contains(&want), "{want}:\n{t}");
    }
}

#[test]
fn an_unknown_family_is_a_usage_error() {
    let o = fp4probe(&["catalog", "--family", "foo"]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    let t = text(&o);
    assert!(
        t.contains("invalid value 'foo' for '--family <FAMILY>'")
            && t.contains("[possible values: mma, ldmatrix, stmatrix, movmatrix, wgmma, all]"),
        "{t}"
    );
}
