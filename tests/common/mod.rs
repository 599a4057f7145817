//! Helpers shared by the tests that drive the real binary.

// Every test crate that declares `mod common` compiles this file and uses part of it.
#![allow(dead_code)]

use std::ffi::OsStr;
use std::ops::Deref;
use std::path::Path;
use std::process::{Command, Output};

/// Run the fp4probe binary built for these tests.
pub fn fp4probe(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_fp4probe"))
        .args(args)
        .output()
        .expect("binary runs")
}

/// A fresh, empty scratch folder for one test, named `fp4probe-<prefix>-<name>-<random>` in the
/// system's temporary folder. It is removed with everything in it when the returned guard
/// drops: at the end of the test, and also when the test fails (the panic unwinds through the
/// guard), so a test run leaves nothing behind. Keep the guard alive as long as the folder is
/// used; it dereferences to the folder's path.
pub fn tmpdir(prefix: &str, name: &str) -> Scratch {
    Scratch(
        tempfile::Builder::new()
            .prefix(&format!("fp4probe-{prefix}-{name}-"))
            .tempdir()
            .expect("a scratch folder in the temporary folder"),
    )
}

/// A scratch folder that removes itself on drop (see [`tmpdir`]).
pub struct Scratch(tempfile::TempDir);

impl Deref for Scratch {
    type Target = Path;
    fn deref(&self) -> &Path {
        self.0.path()
    }
}

impl AsRef<Path> for Scratch {
    fn as_ref(&self) -> &Path {
        self.0.path()
    }
}

// For `Command::arg(&dir)`.
impl AsRef<OsStr> for Scratch {
    fn as_ref(&self) -> &OsStr {
        self.0.path().as_os_str()
    }
}

/// Standard output and standard error together.
pub fn text(o: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}
