//! Tests leave nothing in the temporary folder: every scratch folder comes from
//! `common::tmpdir`, whose guard removes it when the test ends, passing or failing.

mod common;
use std::path::{Path, PathBuf};

#[test]
fn the_guard_removes_its_folder_on_drop_and_on_panic() {
    let dir = common::tmpdir("scratch", "drop");
    let path: PathBuf = dir.to_path_buf();
    std::fs::create_dir_all(dir.join("a/b")).unwrap();
    std::fs::write(dir.join("a/b/file"), b"x").unwrap();
    assert!(
        path.file_name()
            .unwrap()
            .to_str()
            .unwrap()
            .starts_with("fp4probe-scratch-drop-")
    );
    drop(dir);
    assert!(!path.exists(), "{} left behind", path.display());

    let left = std::panic::catch_unwind(|| {
        let dir = common::tmpdir("scratch", "panic");
        std::fs::write(dir.join("file"), b"x").unwrap();
        let path = dir.to_path_buf();
        std::panic::panic_any(path);
    })
    .expect_err("the closure panics")
    .downcast::<PathBuf>()
    .expect("the panic carries the folder");
    assert!(
        !left.exists(),
        "{} left behind by a failing test",
        left.display()
    );
}

/// Every `.rs` file under `dir`.
fn sources(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let p = entry.unwrap().path();
        if p.is_dir() {
            sources(&p, out);
        } else if p.extension().is_some_and(|e| e == "rs") {
            out.push(p);
        }
    }
}

#[test]
fn no_test_names_its_own_folder_in_the_temporary_folder() {
    // A folder named by hand under the temporary folder survives a failing test (and, where a
    // test forgets the removal, every run); `common::tmpdir` makes one that cannot.
    let tests = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests");
    let mut files = Vec::new();
    sources(&tests, &mut files);
    assert!(files.len() > 10, "found only {files:?}");
    let needle = ["temp", "_dir()"].concat();
    let offenders: Vec<String> = files
        .iter()
        .filter(|p| std::fs::read_to_string(p).unwrap().contains(&needle))
        .map(|p| p.strip_prefix(&tests).unwrap().display().to_string())
        .collect();
    assert!(
        offenders.is_empty(),
        "these tests make scratch folders under {needle} by hand; use common::tmpdir: {offenders:?}"
    );
}
