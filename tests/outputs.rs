//! Outputs never destroy anything: each case a user met, driven through the real binary, checks
//! the exit code, the message and that every file it pointed at is unchanged.

mod common;
use common::text;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// A scratch folder (from `common::tmpdir`, removed when the test ends, pass or fail) and its
/// path.
// The guard is held only for its Drop.
struct Scratch(PathBuf, #[allow(dead_code)] common::Scratch);

impl Scratch {
    fn new(name: &str) -> Self {
        let guard = common::tmpdir("outputs", name);
        Scratch(guard.to_path_buf(), guard)
    }
    fn join(&self, p: impl AsRef<Path>) -> PathBuf {
        self.0.join(p)
    }
}

fn fp4probe(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_fp4probe"))
        .args(args)
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .expect("binary runs")
}

/// Exit code 2 and a message that contains `want`.
fn refused(o: &Output, want: &str) {
    assert_eq!(o.status.code(), Some(2), "{}", text(o));
    assert!(text(o).contains(want), "expected '{want}' in:\n{}", text(o));
}

/// Every file under `dir` with its bytes (links as their target text).
fn snapshot(dir: &Path) -> Vec<(PathBuf, Vec<u8>)> {
    let mut out = Vec::new();
    let mut entries: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    entries.sort();
    for p in entries {
        let meta = std::fs::symlink_metadata(&p).unwrap();
        let bytes = if meta.file_type().is_symlink() {
            std::fs::read_link(&p)
                .unwrap()
                .to_string_lossy()
                .into_owned()
                .into_bytes()
        } else if meta.is_file() {
            std::fs::read(&p).unwrap()
        } else {
            b"<special>".to_vec()
        };
        out.push((p, bytes));
    }
    out
}

const BF16: &str = "m16n8k16.f32.bf16.bf16.f32";

fn hardware_map() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join(format!("reports/sm_90/{BF16}.json"))
}

#[test]
fn an_emulator_run_never_replaces_a_hardware_map() {
    let s = Scratch::new("hw");
    let dir = s.join("sm_90");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::copy(hardware_map(), dir.join(format!("{BF16}.json"))).unwrap();
    let csv = hardware_map().with_extension("csv");
    std::fs::copy(&csv, dir.join(format!("{BF16}.csv"))).unwrap();
    let before = snapshot(&dir);
    // One variant, then the README's whole-catalog spelling, each also with --force.
    for extra in [&["--variant", BF16][..], &["--all"][..]] {
        for force in [false, true] {
            let mut args = vec![
                "fragment",
                "--backend",
                "emulator",
                "-o",
                dir.to_str().unwrap(),
            ];
            args.extend_from_slice(extra);
            if force {
                args.push("--force");
            }
            let o = fp4probe(&args);
            refused(&o, "hardware-measured");
            refused(&o, "-o results/emulator");
            assert_eq!(snapshot(&dir), before, "{args:?} changed the folder");
        }
    }
}

#[test]
fn a_foreign_file_in_the_way_is_left_alone() {
    let s = Scratch::new("foreign");
    let json = s.join(format!("{BF16}.json"));
    std::fs::write(&json, "{\"mine\": true}\n").unwrap();
    let before = snapshot(&s.0);
    let o = fp4probe(&[
        "fragment",
        "--variant",
        BF16,
        "--backend",
        "emulator",
        "-o",
        s.0.to_str().unwrap(),
    ]);
    refused(&o, "was not written by fp4probe");
    assert_eq!(snapshot(&s.0), before);
}

#[cfg(unix)]
#[test]
fn links_fifos_and_read_only_files_are_not_replaced() {
    use std::os::unix::fs::PermissionsExt;
    let s = Scratch::new("kinds");
    let victim = s.join("victim.txt");
    std::fs::write(&victim, "precious\n").unwrap();
    let args = |dir: &Path| {
        vec![
            "fragment".to_string(),
            "--variant".into(),
            BF16.into(),
            "--backend".into(),
            "emulator".into(),
            "-o".into(),
            dir.to_str().unwrap().to_string(),
        ]
    };
    let run = |dir: &Path| {
        let a = args(dir);
        fp4probe(&a.iter().map(String::as_str).collect::<Vec<_>>())
    };

    let link_dir = s.join("link");
    std::fs::create_dir_all(&link_dir).unwrap();
    std::os::unix::fs::symlink(&victim, link_dir.join(format!("{BF16}.json"))).unwrap();
    refused(&run(&link_dir), "symbolic link");
    assert_eq!(std::fs::read_to_string(&victim).unwrap(), "precious\n");

    let fifo_dir = s.join("fifo");
    std::fs::create_dir_all(&fifo_dir).unwrap();
    let fifo = fifo_dir.join(format!("{BF16}.csv"));
    let made = Command::new("mkfifo").arg(&fifo).status().unwrap();
    assert!(made.success(), "mkfifo");
    refused(&run(&fifo_dir), "FIFO");
    assert!(
        !std::fs::symlink_metadata(&fifo)
            .unwrap()
            .file_type()
            .is_file()
    );
    assert!(!fifo_dir.join(format!("{BF16}.json")).exists());

    let ro_dir = s.join("ro");
    std::fs::create_dir_all(&ro_dir).unwrap();
    // A map fp4probe wrote, made read-only by its owner.
    assert!(run(&ro_dir).status.success());
    let ro = ro_dir.join(format!("{BF16}.json"));
    let kept = std::fs::read(&ro).unwrap();
    std::fs::set_permissions(&ro, std::fs::Permissions::from_mode(0o444)).unwrap();
    refused(&run(&ro_dir), "read-only");
    assert_eq!(std::fs::read(&ro).unwrap(), kept);
}

#[test]
fn report_index_never_replaces_a_readme_it_did_not_write() {
    let s = Scratch::new("index");
    let readme = s.join("README.md");
    std::fs::write(&readme, "# My project\n\nHand-written.\n").unwrap();
    let sub = s.join("emu");
    let o = fp4probe(&[
        "fragment",
        "--variant",
        BF16,
        "--backend",
        "emulator",
        "-o",
        sub.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", text(&o));
    let before = snapshot(&s.0);
    refused(
        &fp4probe(&["report", "--index", s.0.to_str().unwrap()]),
        "was not written by fp4probe",
    );
    // Pages next to the map ask for the index above them too: refused before any page.
    let map = sub.join(format!("{BF16}.json"));
    let o = fp4probe(&[
        "report",
        map.to_str().unwrap(),
        "--index",
        s.0.to_str().unwrap(),
    ]);
    refused(&o, "was not written by fp4probe");
    assert_eq!(snapshot(&s.0), before);
    assert!(!sub.join(format!("{BF16}.md")).exists());
    // An index fp4probe wrote is rewritten freely.
    std::fs::remove_file(&readme).unwrap();
    let o = fp4probe(&["report", "--index", s.0.to_str().unwrap()]);
    assert!(o.status.success(), "{}", text(&o));
    let o = fp4probe(&["report", "--index", s.0.to_str().unwrap()]);
    assert!(o.status.success(), "{}", text(&o));
}

#[test]
fn sass_index_never_replaces_a_readme_it_did_not_write() {
    let s = Scratch::new("sass");
    let readme = s.join("README.md");
    std::fs::write(&readme, "# Notes\n").unwrap();
    let o = fp4probe(&["sass", "--index", "-o", s.0.to_str().unwrap()]);
    refused(&o, "was not written by fp4probe");
    assert_eq!(std::fs::read_to_string(&readme).unwrap(), "# Notes\n");
}

#[test]
fn report_pages_never_overwrite_their_own_map() {
    let s = Scratch::new("pages");
    let o = fp4probe(&[
        "fragment",
        "--variant",
        BF16,
        "--backend",
        "emulator",
        "-o",
        s.0.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", text(&o));
    // A page whose name is taken by a file the user wrote is refused, whole.
    std::fs::write(s.join(format!("{BF16}.A.svg")), "<svg>mine</svg>").unwrap();
    let before = snapshot(&s.0);
    let map = s.join(format!("{BF16}.json"));
    refused(
        &fp4probe(&["report", map.to_str().unwrap()]),
        "was not written by fp4probe",
    );
    assert_eq!(snapshot(&s.0), before);
}

#[test]
fn codegen_never_writes_over_a_map_it_reads() {
    let s = Scratch::new("codegen");
    let map = hardware_map();
    let kept = std::fs::read(&map).unwrap();
    for force in [false, true] {
        let mut args = vec![
            "codegen",
            "--rust",
            map.to_str().unwrap(),
            "-o",
            s.0.to_str().unwrap(),
        ];
        if force {
            args.push("--force");
        }
        let o = fp4probe(&args);
        refused(&o, "also an input");
        assert_eq!(std::fs::read(&map).unwrap(), kept);
        // Checked before anything was written: no header either.
        assert_eq!(std::fs::read_dir(&s.0).unwrap().count(), 0);
    }
}

#[test]
fn benchmark_csvs_never_replace_a_file_they_did_not_write() {
    let s = Scratch::new("csv");
    let mine = s.join("mine.csv");
    std::fs::write(&mine, "my,own,table\n").unwrap();
    let p = mine.to_str().unwrap();
    for args in [
        &["attention", "--bench", "--csv", p][..],
        &["quant-bench", "--csv", p][..],
        &["quant-bench", "--search-csv", p][..],
    ] {
        // Refused before any device is opened: the message is the file's, not the GPU's.
        refused(&fp4probe(args), "was not written by fp4probe");
        assert_eq!(std::fs::read_to_string(&mine).unwrap(), "my,own,table\n");
    }
}
