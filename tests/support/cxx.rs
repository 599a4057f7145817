//! Host C++ programs over the generated headers: compile one with the host's C++17 compiler
//! ($CXX, else c++; warnings are errors), run it, and return what it printed. Without a
//! compiler the test is skipped with a note.

use std::path::Path;

/// Compile `src` (including from `include`) in `dir`, run it, and return its standard
/// output; `None` (after a note naming `test`) when no compiler can be run.
pub fn run_cxx(test: &str, src: &str, include: &Path, dir: &Path) -> Option<String> {
    let cxx = std::env::var("CXX").unwrap_or_else(|_| "c++".into());
    let main = dir.join("main.cpp");
    std::fs::write(&main, src).unwrap();
    let exe = dir.join("main");
    let out = std::process::Command::new(&cxx)
        .args(["-std=c++17", "-O1", "-Wall", "-Wextra", "-Werror", "-I"])
        .arg(include)
        .arg(&main)
        .arg("-o")
        .arg(&exe)
        .output();
    let out = match out {
        Ok(o) => o,
        Err(e) => {
            eprintln!("{test}: skipped: cannot run {cxx}: {e}");
            return None;
        }
    };
    assert!(
        out.status.success(),
        "{test}: {cxx} rejected the headers:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let run = std::process::Command::new(&exe).output().unwrap();
    assert!(run.status.success(), "{test}: the program failed");
    Some(String::from_utf8(run.stdout).unwrap())
}
