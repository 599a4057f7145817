//! The CUDA sources NVRTC compiles (`kernels/`: the attention kernels, the tile round trip,
//! the generated lane-table headers, the quantization codecs), embedded in the binary by
//! `build.rs`, so that a binary run outside a checkout (an installed one) compiles the same
//! text as one run inside it.
//!
//! NVRTC gets them as files, not as its in-memory headers: those are matched by the literal
//! text of an `#include`, while the generated headers include `"fp4probe_common.cuh"` relative
//! to their own folder and the kernels include it as `"generated/fp4probe_common.cuh"`, one
//! file under two names. So [`tree`] writes the embedded tree out once per content digest,
//! to `<cache>/kernels/<digest>` (see `locate::cache_dir`), and the compile takes
//! `--include-path` there: the same source text and the same options as a compile from the
//! checkout (the include folder's name does not reach the PTX or the cubin), and a folder
//! name that stays the same from run to run, as NVRTC's compile cache needs. Without a
//! writable cache folder the tree goes to a temporary folder per compile.
//!
//! `FP4PROBE_KERNELS=DIR` compiles from `DIR` (a checkout's `kernels/`) instead: for kernel
//! work, without rebuilding the binary.

use crate::tempdir::TempDir;
use anyhow::{Context, Result};
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

/// Environment variable naming a `kernels/` folder to compile from instead of the embedded one.
pub const KERNELS_ENV: &str = "FP4PROBE_KERNELS";

/// Every file under `kernels/` at build time: (path relative to `kernels/`, `/`-separated;
/// text), sorted by path.
pub static EMBEDDED: &[(&str, &str)] = include!(concat!(env!("OUT_DIR"), "/kernel_files.rs"));

/// A digest of [`EMBEDDED`] (names and texts): the name of its copy in the cache folder.
pub const DIGEST: &str = include!(concat!(env!("OUT_DIR"), "/kernel_digest.rs"));

/// The embedded text of `name` (relative to `kernels/`, e.g. `attention/attn_fp4.cu`).
pub fn embedded(name: &str) -> Option<&'static str> {
    EMBEDDED
        .binary_search_by(|(n, _)| (*n).cmp(name))
        .ok()
        .map(|i| EMBEDDED[i].1)
}

/// A `kernels/` folder on disk to compile from; a temporary one is removed when this is
/// dropped.
#[derive(Debug)]
pub struct Tree {
    path: PathBuf,
    _temp: Option<TempDir>,
}

impl Tree {
    /// The folder: what `--include-path` names.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The text of `name` (relative to the folder).
    pub fn read(&self, name: &str) -> Result<String> {
        let file = self.path.join(name);
        std::fs::read_to_string(&file).with_context(|| format!("cannot read {}", file.display()))
    }
}

/// Write every embedded file under `dir`.
fn write_embedded(dir: &Path) -> std::io::Result<()> {
    for (name, text) in EMBEDDED {
        let file = dir.join(name);
        if let Some(parent) = file.parent() {
            std::fs::create_dir_all(parent)?;
        }
        std::fs::write(file, text)?;
    }
    Ok(())
}

/// Whether `dir` holds every embedded file with its embedded text.
fn holds_embedded(dir: &Path) -> bool {
    EMBEDDED
        .iter()
        .all(|(name, text)| std::fs::read(dir.join(name)).is_ok_and(|b| b == text.as_bytes()))
}

/// `<cache>/kernels/<digest>`, written when missing: into a temporary folder beside it, then
/// renamed into place, so that a folder under that name is always complete, also with
/// several processes at once. `None` when there is no cache folder, it cannot be written, or
/// what is there differs from the embedded files.
fn cached_copy() -> Option<PathBuf> {
    let parent = crate::locate::cache_dir()?.join("kernels");
    let dir = parent.join(DIGEST);
    if !dir.is_dir() {
        std::fs::create_dir_all(&parent).ok()?;
        let partial = TempDir::new_in(&parent, &format!(".{DIGEST}-")).ok()?;
        write_embedded(partial.root()).ok()?;
        // Losing the race to another process leaves its complete copy in place; ours is
        // removed with `partial`.
        if std::fs::rename(partial.root(), &dir).is_ok() {
            partial.keep();
        }
    }
    holds_embedded(&dir).then_some(dir)
}

/// The folder to compile from: `$FP4PROBE_KERNELS` when set, else the embedded files
/// written out (see the module doc).
pub fn tree() -> Result<Tree> {
    if let Some(dir) = std::env::var_os(KERNELS_ENV).filter(|d| !d.is_empty()) {
        return Ok(Tree {
            path: PathBuf::from(dir),
            _temp: None,
        });
    }
    static CACHED: OnceLock<Option<PathBuf>> = OnceLock::new();
    if let Some(dir) = CACHED.get_or_init(cached_copy) {
        return Ok(Tree {
            path: dir.clone(),
            _temp: None,
        });
    }
    let temp = TempDir::new("fp4probe-kernels-")
        .context("creating a temporary folder for the kernel sources")?;
    write_embedded(temp.root())
        .with_context(|| format!("writing the kernel sources to {}", temp.root().display()))?;
    Ok(Tree {
        path: temp.root().to_path_buf(),
        _temp: Some(temp),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every file under `dir`, relative and `/`-separated.
    fn files_on_disk(dir: &Path, base: &Path, out: &mut Vec<String>) {
        for e in std::fs::read_dir(dir).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                files_on_disk(&p, base, out);
            } else {
                let rel = p.strip_prefix(base).unwrap();
                out.push(
                    rel.components()
                        .map(|c| c.as_os_str().to_string_lossy().into_owned())
                        .collect::<Vec<_>>()
                        .join("/"),
                );
            }
        }
    }

    #[test]
    fn the_embedded_table_is_the_kernels_folder_byte_for_byte() {
        let kernels = Path::new(env!("CARGO_MANIFEST_DIR")).join("kernels");
        let mut names = Vec::new();
        files_on_disk(&kernels, &kernels, &mut names);
        names.sort();
        let names_embedded: Vec<&str> = EMBEDDED.iter().map(|(n, _)| *n).collect();
        assert_eq!(names_embedded, names);
        for (name, text) in EMBEDDED {
            let disk = std::fs::read(kernels.join(name)).unwrap();
            assert!(
                disk == text.as_bytes(),
                "{name} differs from the embedded copy"
            );
        }
        for name in [
            "attention/attn_fp4.cu",
            "tile_roundtrip.cu",
            "generated/fp4probe_common.cuh",
            "quant/fp4_codecs.cuh",
        ] {
            assert!(embedded(name).is_some(), "{name} not embedded");
        }
        assert_eq!(embedded("no/such.cuh"), None);
    }

    #[test]
    fn a_written_tree_holds_the_embedded_files_and_a_changed_one_is_noticed() {
        let dir = TempDir::new("fp4probe-test-kernels-").unwrap();
        write_embedded(dir.root()).unwrap();
        assert!(holds_embedded(dir.root()));
        let (name, text) = EMBEDDED[0];
        std::fs::write(dir.path(name), format!("{text}//")).unwrap();
        assert!(!holds_embedded(dir.root()));
    }
}
