//! Where fp4probe's folders are, for a binary that runs from any directory (an installed one
//! included): the checkout the current directory lies in, the per-user cache folder, and the
//! folders of the pinned CUDA tools in either.
//!
//! Nothing here depends on where the binary was built.

use std::path::{Path, PathBuf};

/// The package name in a checkout's `Cargo.toml`.
const PACKAGE: &str = "fp4probe";

/// Whether `manifest` (a `Cargo.toml`'s text) declares the package `fp4probe`: a line
/// `name = "fp4probe"` in its `[package]` table. Cargo writes and reads that line in this one
/// form; the rest of the file does not matter here.
fn declares_fp4probe(manifest: &str) -> bool {
    let mut in_package = false;
    for line in manifest.lines().map(str::trim) {
        if line.starts_with('[') {
            in_package = line == "[package]";
        } else if in_package
            && let Some(rest) = line.strip_prefix("name")
            && let Some(value) = rest.trim_start().strip_prefix('=')
        {
            return value.trim() == format!("\"{PACKAGE}\"");
        }
    }
    false
}

/// `dir` or the nearest folder above it whose `Cargo.toml` declares the package `fp4probe`.
pub fn checkout_containing(dir: &Path) -> Option<PathBuf> {
    dir.ancestors()
        .find(|d| {
            std::fs::read_to_string(d.join("Cargo.toml")).is_ok_and(|t| declares_fp4probe(&t))
        })
        .map(Path::to_path_buf)
}

/// The fp4probe checkout containing the current directory.
pub fn current_checkout() -> Option<PathBuf> {
    checkout_containing(&std::env::current_dir().ok()?)
}

/// The per-user cache folder: `$XDG_CACHE_HOME/fp4probe`, else `~/.cache/fp4probe` (on Linux;
/// the platform's cache folder elsewhere). `None` without a home folder.
pub fn cache_dir() -> Option<PathBuf> {
    dirs::cache_dir().map(|d| d.join(PACKAGE))
}

/// Folders holding the pinned tools in the layout `.ci/install-cuda-tools` makes
/// (`nvidia/<package>/bin`, `nvidia/<package>/lib`), first found first: `.tools` of the
/// checkout containing the current directory (of the current directory when it is in none),
/// then `tools` in the cache folder (`.ci/install-cuda-tools --cache`).
pub fn pinned_roots() -> Vec<PathBuf> {
    let mut roots = Vec::new();
    if let Ok(cwd) = std::env::current_dir() {
        let base = checkout_containing(&cwd).unwrap_or(cwd);
        roots.push(base.join(".tools"));
    }
    if let Some(cache) = cache_dir() {
        roots.push(cache.join("tools"));
    }
    roots
}

/// `<root>/nvidia/*/<sub>` (`sub` = `bin` or `lib`) for each of [`pinned_roots`], newest CUDA
/// major first within a root (`cu13` before `cu12`).
pub fn pinned_dirs(sub: &str) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for root in pinned_roots() {
        let Ok(entries) = std::fs::read_dir(root.join("nvidia")) else {
            continue;
        };
        let mut dirs: Vec<PathBuf> = entries
            .filter_map(|e| e.ok())
            .map(|e| e.path().join(sub))
            .filter(|p| p.is_dir())
            .collect();
        dirs.sort();
        dirs.reverse();
        out.extend(dirs);
    }
    out
}

/// Whether `dir` is one of the pinned tools' folders: below a `.tools` folder, or below the
/// cache folder's `tools`.
pub fn is_pinned(dir: &Path) -> bool {
    dir.components().any(|c| c.as_os_str() == ".tools")
        || cache_dir().is_some_and(|c| dir.starts_with(c.join("tools")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_package_name_is_read_from_the_package_table_only() {
        assert!(declares_fp4probe(
            "[package]\nname = \"fp4probe\"\nversion = \"0.1.0\"\n"
        ));
        assert!(declares_fp4probe("[package]\n  name=\"fp4probe\"\n"));
        assert!(!declares_fp4probe("[package]\nname = \"other\"\n"));
        assert!(!declares_fp4probe(
            "[package]\nname = \"other\"\n[dependencies]\nname = \"fp4probe\"\n"
        ));
        assert!(!declares_fp4probe(
            "[workspace]\nname = \"fp4probe\"\n[package]\nversion = \"1\"\n"
        ));
        assert!(!declares_fp4probe("[package]\nnamespace = \"fp4probe\"\n"));
    }

    #[test]
    fn the_checkout_is_found_from_any_folder_inside_it() {
        let root = Path::new(env!("CARGO_MANIFEST_DIR"));
        assert_eq!(checkout_containing(root).as_deref(), Some(root));
        assert_eq!(
            checkout_containing(&root.join("kernels/attention")).as_deref(),
            Some(root)
        );
        assert_eq!(checkout_containing(Path::new("/")), None);
    }
}
