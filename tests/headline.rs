//! A newcomer's first commands: the README's main job, the headline probe of a shape, an
//! instruction pasted as written, and the slot ↔ element look-up.

mod common;
use common::text;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

const ROOT: &str = env!("CARGO_MANIFEST_DIR");

fn fp4probe_in(dir: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_fp4probe"))
        .args(args)
        .current_dir(dir)
        .output()
        .expect("binary runs")
}

fn fp4probe(args: &[&str]) -> Output {
    fp4probe_in(Path::new(ROOT), args)
}

fn git(args: &[&str]) -> String {
    let o = Command::new("git")
        .args(args)
        .current_dir(ROOT)
        .output()
        .expect("git runs (the tests run in a git checkout)");
    assert!(o.status.success(), "git {args:?}: {}", text(&o));
    String::from_utf8(o.stdout).unwrap()
}

/// Tracked files that differ from the index and files git would add: what `git status` shows.
fn visible_changes() -> String {
    git(&["status", "--porcelain=v1", "--untracked-files=all"])
}

/// The README's main job, exactly as written there and run twice, changes no tracked file and
/// adds no file git would pick up; its maps land in the ignored `results/` folder, and the
/// generated tables stay current.
#[test]
fn the_main_job_leaves_the_checkout_as_it_was() {
    let before = visible_changes();
    for _ in 0..2 {
        let o = fp4probe(&["fragment", "--all", "--backend", "emulator", "-q"]);
        assert!(o.status.success(), "{}", text(&o));
        assert!(
            text(&o).contains("maps in results/emulator"),
            "{}",
            text(&o)
        );
    }
    assert_eq!(
        visible_changes(),
        before,
        "the main job changed the checkout"
    );
    let map = format!("{ROOT}/results/emulator/m16n8k16.f32.bf16.bf16.f32.json");
    assert!(Path::new(&map).is_file());
    git(&["check-ignore", "-q", &map]);
    let o = fp4probe(&["codegen", "--check"]);
    assert!(o.status.success(), "{}", text(&o));
}

#[test]
fn a_shape_alone_probes_every_match_and_summarises() {
    let out = Scratch::new("shape");
    let o = fp4probe(&[
        "fragment",
        "--shape",
        "m16n8k32",
        "--backend",
        "emulator",
        "-q",
        "-o",
        out.0.to_str().unwrap(),
    ]);
    let t = text(&o);
    assert!(o.status.success(), "{t}");
    // Every variant of the shape `fragment` measures: the mma.sync ones and the mma.sp ones.
    let n = fp4probe::isa::catalog()
        .iter()
        .filter(|v| v.shape.to_string() == "m16n8k32" && v.not_lane_mapped().is_none())
        .count();
    assert!(t.contains(&format!("{n} passed, 0 failed")), "{t}");
    // One summary row per variant, with its closed forms.
    let row = t
        .lines()
        .find(|l| l.starts_with("m16n8k32.f32.e4m3.e4m3.f32 "))
        .unwrap_or_else(|| panic!("no summary row:\n{t}"));
    assert!(row.contains("emulator") && row.contains("passed"), "{row}");
    assert!(row.contains("((4,8),(4,2,2)):((64,1),(16,8,256))"), "{row}");
    assert!(
        t.contains("narrow the selection with:") && t.contains("--kind"),
        "{t}"
    );
    assert_eq!(std::fs::read_dir(&out.0).unwrap().count(), 2 * n);
}

#[test]
fn a_pasted_instruction_names_its_variant() {
    let out = Scratch::new("ptx");
    let o = fp4probe(&[
        "fragment",
        "--variant",
        "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%10,%11,%12,%13};",
        "--backend",
        "emulator",
        "-o",
        out.0.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", text(&o));
    assert!(out.0.join("m16n8k16.f32.bf16.bf16.f32.json").is_file());
    let o = fp4probe(&[
        "fragment",
        "--variant",
        "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f16",
        "--backend",
        "emulator",
    ]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert!(text(&o).contains("not in the catalog"), "{}", text(&o));
}

#[test]
fn lookup_answers_both_ways_and_agrees_with_the_map() {
    let map = format!("{ROOT}/reports/sm_90/m16n8k16.f32.bf16.bf16.f32.json");
    let json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&map).unwrap()).unwrap();
    // Every A slot of the measured map, through both the file and the built-in tables.
    let a = &json["operands"][0];
    assert_eq!(a["operand"], "A");
    for slot in a["slots"].as_array().unwrap().iter().step_by(13) {
        let s: Vec<u64> = slot
            .as_array()
            .unwrap()
            .iter()
            .map(|x| x.as_u64().unwrap())
            .collect();
        let (lane, reg, elem) = (s[0].to_string(), s[1].to_string(), s[2].to_string());
        let want = format!("-> (row {}, col {})", s[3], s[4]);
        for source in [map.as_str(), "m16n8k16.f32.bf16.bf16.f32"] {
            let o = fp4probe(&[
                "lookup",
                source,
                "--operand",
                "A",
                "--lane",
                &lane,
                "--reg",
                &reg,
                "--elem",
                &elem,
            ]);
            assert!(
                o.status.success() && text(&o).contains(&want),
                "{}",
                text(&o)
            );
        }
        let (row, col) = (s[3].to_string(), s[4].to_string());
        let o = fp4probe(&[
            "lookup",
            &map,
            "--operand",
            "a",
            "--row",
            &row,
            "--col",
            &col,
        ]);
        let want = format!("-> lane {}, reg {}, elem {}", s[0], s[1], s[2]);
        assert!(
            o.status.success() && text(&o).contains(&want),
            "{}",
            text(&o)
        );
    }
    let o = fp4probe(&[
        "lookup",
        "m16n8k16.f32.bf16.bf16.f32",
        "--operand",
        "B",
        "--lane",
        "3",
        "--reg",
        "2",
        "--elem",
        "0",
    ]);
    assert_eq!(o.status.code(), Some(2));
    assert!(text(&o).contains("--reg 2 is out of range"), "{}", text(&o));
    let o = fp4probe(&[
        "lookup",
        "m16n8k16.f32.bf16.bf16.f32",
        "--operand",
        "D",
        "--row",
        "16",
        "--col",
        "0",
    ]);
    assert_eq!(o.status.code(), Some(2));
    assert!(text(&o).contains("outside D"), "{}", text(&o));
}

/// A scratch folder (from `common::tmpdir`, removed when the test ends, pass or fail) and its
/// path.
// The guard is held only for its Drop.
struct Scratch(PathBuf, #[allow(dead_code)] common::Scratch);

impl Scratch {
    fn new(name: &str) -> Self {
        let guard = common::tmpdir("headline", name);
        Scratch(guard.to_path_buf(), guard)
    }
}

/// A reader that stops early (`| head`) ends the output quietly, with no panic.
#[cfg(unix)]
#[test]
fn output_into_a_closed_pipe_ends_quietly() {
    use std::io::Read;
    use std::process::Stdio;
    let mut child = Command::new(env!("CARGO_BIN_EXE_fp4probe"))
        .args([
            "show",
            "reports/sm_90/m16n8k256.s32.b1.b1.s32.and.popc.json",
            "--slots",
        ])
        .current_dir(ROOT)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut first = [0u8; 64];
    child.stdout.take().unwrap().read_exact(&mut first).unwrap();
    // The pipe's read end is closed here, with over 100 KB still to come.
    let o = child.wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(!err.contains("panicked"), "{err}");
    assert_ne!(o.status.code(), Some(101), "{err}");
}
