//! Argument checks shared by the GPU commands, made before any device is opened: a bad value
//! is reported as such, naming its option, and not as the missing GPU (or a failed
//! allocation) it would otherwise meet first.

use crate::outfile::{Ours, Outputs};
use anyhow::{Context, Result, bail};
use std::path::Path;

/// The most memory (host and device together) one run of `attention` or `quant-bench` may
/// ask for. A fixed bound, not the machine's: arguments are checked before a device is opened,
/// and a run this large is a typo (an extra zero), not a measurement.
pub const MAX_RUN_BYTES: u128 = 64 << 30;

/// Bytes in MiB, GiB or TiB, for messages.
pub fn human_bytes(bytes: u128) -> String {
    let b = bytes as f64;
    let unit = |shift: u32| (1u64 << shift) as f64;
    if b >= unit(40) {
        format!("{:.1} TiB", b / unit(40))
    } else if b >= unit(30) {
        format!("{:.1} GiB", b / unit(30))
    } else {
        format!("{:.1} MiB", b / unit(20))
    }
}

/// Refuse `bytes` over [`MAX_RUN_BYTES`]: `what` says which run, `reduce` which options to lower.
pub fn check_run_bytes(what: &str, bytes: u128, reduce: &str) -> Result<()> {
    if bytes > MAX_RUN_BYTES {
        bail!(
            "{what} would allocate about {} (host and device), more than the {} one run may \
             use; reduce {reduce}",
            human_bytes(bytes),
            human_bytes(MAX_RUN_BYTES)
        );
    }
    Ok(())
}

/// An output file given to `option` can be written once the run is over: it is not a folder, its
/// folder exists, and `out` allows replacing what is there (a CSV of this kind, recognised by
/// its `header`). Checked up front so a long GPU run does not end in a refused write.
pub fn check_output_file(option: &str, path: &Path, out: &Outputs, header: &str) -> Result<()> {
    if path.as_os_str().is_empty() {
        bail!("{option}: the path is empty; name a file");
    }
    if path.is_dir() {
        bail!("{option} {}: is a folder; name a file", path.display());
    }
    let folder = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    if !folder.is_dir() {
        bail!(
            "{option} {}: the folder {} does not exist",
            path.display(),
            folder.display()
        );
    }
    out.check(path, Ours::marked(header))
        .with_context(|| format!("{option} {}", path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn run_bytes_bound() {
        assert!(check_run_bytes("x", MAX_RUN_BYTES, "--y").is_ok());
        assert!(check_run_bytes("x", MAX_RUN_BYTES + 1, "--y").is_err());
        let e = check_run_bytes("the run", 100 << 30, "--y or --z").unwrap_err();
        assert_eq!(
            e.to_string(),
            "the run would allocate about 100.0 GiB (host and device), more than the 64.0 GiB \
             one run may use; reduce --y or --z"
        );
        assert_eq!(human_bytes(3 << 20), "3.0 MiB");
        assert_eq!(human_bytes(5 << 40), "5.0 TiB");
    }

    #[test]
    fn output_files() {
        assert!(
            check_output_file("--csv", Path::new("out.csv"), &Outputs::new(false), "a,b").is_ok()
        );
        let e = check_output_file(
            "--csv",
            Path::new("/nonexistent-fp4probe/x.csv"),
            &Outputs::new(false),
            "a,b",
        )
        .unwrap_err();
        assert_eq!(
            e.to_string(),
            "--csv /nonexistent-fp4probe/x.csv: the folder /nonexistent-fp4probe does not exist"
        );
        let e =
            check_output_file("--csv", Path::new("/"), &Outputs::new(false), "a,b").unwrap_err();
        assert!(e.to_string().contains("is a folder"), "{e}");
        assert!(check_output_file("--csv", Path::new(""), &Outputs::new(false), "a,b").is_err());
    }
}
