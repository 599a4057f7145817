//! Temporary folders that do not outlive the process: removed when dropped, and, when the
//! process is interrupted (SIGINT, SIGTERM, SIGHUP), removed by a handler that then exits
//! with status 130.
//!
//! Every live folder is in one registry. A folder is created and registered, and removed and
//! unregistered, under the registry's lock, so the handler (which takes the same lock and
//! exits holding it) sees each folder that exists on disk exactly once. The handler is
//! installed with the first folder; a process that never makes one keeps the default
//! signal behaviour.

use std::io;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, MutexGuard, Once};

/// Exit status after an interrupt, as a shell reports a process ended by SIGINT.
pub const INTERRUPTED: i32 = 130;

/// The folders that exist now, in creation order.
static LIVE: Mutex<Vec<PathBuf>> = Mutex::new(Vec::new());

fn live() -> MutexGuard<'static, Vec<PathBuf>> {
    // A panic elsewhere while holding the lock leaves the list itself valid.
    LIVE.lock().unwrap_or_else(|e| e.into_inner())
}

/// Remove `dir`, retrying for up to a second: a child process still working in it (a tool
/// run by fp4probe, when the signal reached fp4probe alone) can add a file between
/// `remove_dir_all`'s listing and its final rmdir. Once the folder is gone, nothing can be
/// created in it.
fn remove_now(dir: &Path) {
    for _ in 0..100 {
        match std::fs::remove_dir_all(dir) {
            Ok(()) => return,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return,
            Err(_) => std::thread::sleep(std::time::Duration::from_millis(10)),
        }
    }
}

fn install_handler() {
    static INSTALL: Once = Once::new();
    INSTALL.call_once(|| {
        // Fails only when another handler is already set; then that one decides.
        let _ = ctrlc::set_handler(|| {
            let dirs = live();
            for d in dirs.iter() {
                remove_now(d);
            }
            // Exits holding the lock: no thread registers a folder after this sweep.
            std::process::exit(INTERRUPTED);
        });
    });
}

/// A fresh folder, removed with everything in it when dropped or when the process is
/// interrupted.
#[derive(Debug)]
pub struct TempDir {
    /// `None` only after `keep`.
    dir: Option<tempfile::TempDir>,
}

impl TempDir {
    /// A new folder `<prefix><random>` in the system temp folder (`$TMPDIR` or `/tmp`).
    pub fn new(prefix: &str) -> io::Result<TempDir> {
        Self::new_in(&std::env::temp_dir(), prefix)
    }

    /// A new folder `<prefix><random>` in `parent`, which must exist.
    pub fn new_in(parent: &Path, prefix: &str) -> io::Result<TempDir> {
        install_handler();
        let mut dirs = live();
        let dir = tempfile::Builder::new().prefix(prefix).tempdir_in(parent)?;
        dirs.push(dir.path().to_path_buf());
        Ok(TempDir { dir: Some(dir) })
    }

    /// The folder itself.
    pub fn root(&self) -> &Path {
        self.dir.as_ref().expect("live until kept").path()
    }

    /// `name` inside the folder.
    pub fn path(&self, name: &str) -> PathBuf {
        self.root().join(name)
    }

    /// Stop managing the folder: neither a drop nor an interrupt removes it any more. For a
    /// folder filled here and then renamed into its final place; returns the path it was
    /// created under.
    pub fn keep(mut self) -> PathBuf {
        let dir = self.dir.take().expect("live until kept");
        let mut dirs = live();
        dirs.retain(|d| d != dir.path());
        dir.keep()
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        if let Some(dir) = self.dir.take() {
            let mut dirs = live();
            let path = dir.path().to_path_buf();
            // A failed removal leaves nothing to do here; the registry entry goes either way.
            let _ = dir.close();
            dirs.retain(|d| *d != path);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn folders_are_unique_registered_and_removed_on_drop() {
        let a = TempDir::new("fp4probe-test-").unwrap();
        let b = TempDir::new("fp4probe-test-").unwrap();
        assert_ne!(a.root(), b.root());
        assert!(a.root().is_dir());
        assert!(
            a.root()
                .file_name()
                .unwrap()
                .to_string_lossy()
                .starts_with("fp4probe-test-")
        );
        std::fs::write(a.path("x.txt"), "x").unwrap();
        let p = a.root().to_path_buf();
        assert!(live().contains(&p));
        drop(a);
        assert!(!p.exists());
        assert!(!live().contains(&p));
        assert!(live().contains(&b.root().to_path_buf()));
    }

    #[test]
    fn a_kept_folder_stays_and_leaves_the_registry() {
        let a = TempDir::new("fp4probe-test-").unwrap();
        let p = a.keep();
        assert!(p.is_dir());
        assert!(!live().contains(&p));
        std::fs::remove_dir_all(&p).unwrap();
    }
}
