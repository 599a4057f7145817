//! `fp4probe report` and `fp4probe view` on wgmma records: pages and pictures of emulator maps
//! made by the binary, the index's wgmma section, the committed H200 pages being what the
//! generator writes now, and bad input refused with exit code 2 before anything is written.

mod common;
use common::{check_well_formed, fp4probe, text, tmpdir};
use std::path::{Path, PathBuf};

const LANES: &str = "m64n8k16.f32.bf16.bf16.rs";
const STUDY: &str = "smem.16bit.K.64B";

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// Every file of `dir` with its bytes, in name order.
fn contents(dir: &Path) -> Vec<(String, Vec<u8>)> {
    let mut out: Vec<(String, Vec<u8>)> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.is_file())
        .map(|p| {
            (
                p.file_name().unwrap().to_string_lossy().into_owned(),
                std::fs::read(&p).unwrap(),
            )
        })
        .collect();
    out.sort();
    out
}

/// `reports/emulator/wgmma/` in a scratch folder, holding the emulator's map of one variant
/// and one shared-memory study, as the binary writes them.
fn emulator_records(scratch: &Path) -> PathBuf {
    let dir = scratch.join("reports/emulator/wgmma");
    let d = dir.to_str().unwrap();
    let o = fp4probe(&[
        "wgmma",
        "probe",
        "--backend",
        "emulator",
        "--variant",
        LANES,
        "-o",
        d,
    ]);
    assert!(o.status.success(), "{}", text(&o));
    let o = fp4probe(&[
        "wgmma",
        "smem",
        "--backend",
        "emulator",
        "--bits",
        "16",
        "--major",
        "K",
        "--swizzle",
        "64B",
        "-o",
        d,
    ]);
    assert!(o.status.success(), "{}", text(&o));
    dir
}

#[test]
fn pages_of_wgmma_records_are_written_next_to_them_and_indexed() {
    let s = tmpdir("report-wgmma", "cli");
    let dir = emulator_records(&s);
    let inputs = contents(&dir);
    let maps: Vec<String> = [LANES, STUDY]
        .iter()
        .map(|m| dir.join(format!("{m}.json")).to_string_lossy().into_owned())
        .collect();
    let mut args = vec!["report"];
    args.extend(maps.iter().map(String::as_str));
    let o = fp4probe(&args);
    assert!(o.status.success(), "{}", text(&o));
    assert!(
        text(&o).contains("wrote 2 pages and 5 SVGs"),
        "{}",
        text(&o)
    );
    for f in [
        format!("{LANES}.md"),
        format!("{LANES}.A.svg"),
        format!("{LANES}.D.svg"),
        format!("{LANES}.B.smem.svg"),
        format!("{STUDY}.md"),
        format!("{STUDY}.A.svg"),
        format!("{STUDY}.B.svg"),
    ] {
        let p = dir.join(&f);
        assert!(p.is_file(), "{f} missing");
        if f.ends_with(".svg") {
            check_well_formed(&std::fs::read_to_string(&p).unwrap());
        }
    }
    // The page of a lane map names the warpgroup's four warps, and its picture bands them.
    let page = std::fs::read_to_string(dir.join(format!("{LANES}.md"))).unwrap();
    assert!(page.contains("## Warps"));
    for (w, rows) in ["0–15", "16–31", "32–47", "48–63"].iter().enumerate() {
        assert!(
            page.contains(&format!("| {w} | {}–{} | {rows} |", 32 * w, 32 * w + 31)),
            "warp {w}:\n{page}"
        );
    }
    let d = std::fs::read_to_string(dir.join(format!("{LANES}.D.svg"))).unwrap();
    for w in 0..4 {
        assert!(d.contains(&format!(">warp {w}</text>")));
    }
    // The index of `reports/` gains the wgmma section, linking both pages.
    let index = std::fs::read_to_string(s.join("reports/README.md")).unwrap();
    assert!(
        index.contains("## wgmma (warpgroup MMA, sm_90a)"),
        "{index}"
    );
    assert!(index.contains(&format!(
        "| `{LANES}` | registers | emulator | [emulated](emulator/wgmma/{LANES}.md) |"
    )));
    assert!(index.contains(&format!(
        "| 16 | K | 64B | emulator | [emulated](emulator/wgmma/{STUDY}.md) |"
    )));
    assert!(index.contains("| A, B tile, D |"), "pictures column");

    // The inputs are untouched; a second run writes the same bytes.
    let after: Vec<(String, Vec<u8>)> = contents(&dir)
        .into_iter()
        .filter(|(n, _)| n.ends_with(".json") || n.ends_with(".csv"))
        .collect();
    assert_eq!(after, inputs);
    let first = contents(&dir);
    let o = fp4probe(&args);
    assert!(o.status.success(), "{}", text(&o));
    assert_eq!(contents(&dir), first);
}

#[test]
fn bad_input_exits_2_naming_the_problem_before_any_page() {
    let s = tmpdir("report-wgmma", "bad");
    let dir = emulator_records(&s);
    let good = dir.join(format!("{LANES}.json"));
    let text_of = |p: &Path| std::fs::read_to_string(p).unwrap();
    let unknown = s.join("mystery.json");
    std::fs::write(&unknown, "{\"schema\": \"fp4probe.mystery/9\"}\n").unwrap();
    let truncated = s.join("truncated.json");
    let full = text_of(&good);
    std::fs::write(&truncated, &full[..full.len() / 2]).unwrap();
    let schemaless = s.join("schemaless.json");
    std::fs::write(&schemaless, "[1, 2]\n").unwrap();
    // A slot past the 64×8 D: the record breaks its own geometry.
    let outside = s.join("outside.json");
    let mut v: serde_json::Value = serde_json::from_str(&full).unwrap();
    let d = v["registers"]
        .as_array_mut()
        .unwrap()
        .iter_mut()
        .find(|r| r["operand"] == "D")
        .unwrap();
    d["slots"][0][4] = 99.into();
    std::fs::write(&outside, v.to_string()).unwrap();
    for (bad, says) in [
        (&unknown, "unknown schema 'fp4probe.mystery/9'".to_string()),
        (&truncated, format!("{}:", truncated.display())),
        (&truncated, "malformed JSON".into()),
        (&schemaless, "no \"schema\" field".into()),
        (&outside, "invalid wgmma lane map".into()),
        (&outside, "outside the 64×8 operand".into()),
    ] {
        let o = fp4probe(&["report", good.to_str().unwrap(), bad.to_str().unwrap()]);
        assert_eq!(o.status.code(), Some(2), "{}", text(&o));
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(err.contains(&says), "{says}: {err}");
        assert!(err.contains(bad.file_name().unwrap().to_str().unwrap()));
        assert!(!o.stderr.is_empty() && !err.contains("panicked"));
        // Checked before the good map's page was written.
        assert!(!dir.join(format!("{LANES}.md")).exists());
    }
    // The viewer reads the same way, before it looks for a terminal.
    let o = fp4probe(&["view", unknown.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("unknown schema"));
    let o = fp4probe(&["view", good.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("needs a terminal"),
        "{}",
        text(&o)
    );
    let o = fp4probe(&[
        "view",
        good.to_str().unwrap(),
        "--diff",
        good.to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("--diff and --scale"));
}

/// The committed H200 pages are what the generator writes from the committed records (rerun
/// `fp4probe report reports/sm_90/wgmma/*.json` after changing it).
#[test]
fn committed_h200_pages_are_current() {
    let dir = root().join("reports/sm_90/wgmma");
    let mut records = 0;
    for e in std::fs::read_dir(&dir).unwrap() {
        let p = e.unwrap().path();
        if p.extension().is_none_or(|x| x != "json") {
            continue;
        }
        // Numerics records share the folder and have no page.
        let fp4probe::report::Record::Wgmma(doc) = fp4probe::report::read(&p).unwrap() else {
            continue;
        };
        records += 1;
        for (name, content, _) in doc.files() {
            let committed = std::fs::read_to_string(dir.join(&name))
                .unwrap_or_else(|e| panic!("{name}: {e} (regenerate the pages)"));
            assert!(
                committed == content,
                "{name} differs from what `fp4probe report` writes now"
            );
            if name.ends_with(".md") {
                assert!(content.contains("NVIDIA H200"), "{name} names the device");
            }
        }
    }
    assert!(records >= 39, "{records} records");
}
