//! Helpers shared by the tests that drive the real binary.

use std::path::PathBuf;
use std::process::{Command, Output};

/// Run the fp4probe binary built for these tests.
pub fn fp4probe(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_fp4probe"))
        .args(args)
        .output()
        .expect("binary runs")
}

/// A fresh, empty folder for one test (`prefix` and `name` keep parallel tests apart).
pub fn tmpdir(prefix: &str, name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("fp4probe-{prefix}-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// Standard output and standard error together.
pub fn text(o: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}
