//! Writing output files without destroying anything.
//!
//! Every command that writes goes through [`Outputs`], which refuses, before any work where the
//! caller checks up front ([`Outputs::check`]) and again at the write:
//! - an output that is one of the command's inputs (same file, whatever the spelling);
//! - a path that is not a regular file (a symbolic link, FIFO, device node, folder) or a file
//!   that is read-only, unless `--force`; with `--force` a link, FIFO or device is written
//!   *through* (opened and written, never replaced), a read-only file is replaced;
//! - an existing file fp4probe did not write: each output kind names the text its files carry
//!   ([`Ours::marker`]), and a file without it is left alone unless `--force`;
//! - a hardware-measured result replaced by an emulator one, whatever `--force` says: that
//!   loses a measurement the emulator cannot give back.
//!
//! A regular file is replaced atomically (written beside it, then renamed over it), so an
//! interrupted run leaves either the old file or the new one.

use anyhow::{Context, Result, bail};
use std::io::Write;
use std::path::{Path, PathBuf};

/// What a file fp4probe may replace carries, and where the new content comes from.
#[derive(Debug, Clone, Copy)]
pub struct Ours<'a> {
    /// Text every file of this kind holds (a JSON schema tag, a CSV header, a page marker).
    pub marker: &'a str,
    /// The new content is an emulator result: refuse to replace a hardware one.
    pub emulator: bool,
}

impl<'a> Ours<'a> {
    /// A file kind recognised by `marker`, holding no hardware/emulator distinction.
    pub const fn marked(marker: &'a str) -> Self {
        Ours {
            marker,
            emulator: false,
        }
    }

    /// Any existing regular file may be replaced: for formats with no room for a mark (`.npy`),
    /// where the user named the file and the other rules still apply.
    pub const fn any() -> Self {
        Ours::marked("")
    }

    /// A result file recognised by `marker`, from the emulator when `emulator`.
    pub const fn result(marker: &'a str, emulator: bool) -> Self {
        Ours { marker, emulator }
    }
}

/// The text a JSON result of fp4probe carries, whatever its schema.
pub const JSON_MARKER: &str = "\"schema\": \"fp4probe.";

/// How a hardware result's JSON says so (every result schema has this field).
const HARDWARE_TAG: &str = "\"backend\": \"hardware\"";

/// The output rules of one command run: its inputs and whether `--force` was given.
#[derive(Debug, Clone, Default)]
pub struct Outputs {
    force: bool,
    inputs: Vec<PathBuf>,
}

impl Outputs {
    pub fn new(force: bool) -> Self {
        Outputs {
            force,
            inputs: Vec::new(),
        }
    }

    /// Declare a file the command reads: it is never an output.
    pub fn input(mut self, p: impl AsRef<Path>) -> Self {
        self.inputs.push(p.as_ref().to_path_buf());
        self
    }

    /// Declare several inputs.
    pub fn inputs<P: AsRef<Path>>(mut self, ps: impl IntoIterator<Item = P>) -> Self {
        self.inputs
            .extend(ps.into_iter().map(|p| p.as_ref().to_path_buf()));
        self
    }

    pub fn force(&self) -> bool {
        self.force
    }

    /// Whether writing `path` as `ours` is allowed; the error names the path and the way out.
    pub fn check(&self, path: &Path, ours: Ours) -> Result<()> {
        for input in &self.inputs {
            if same_file(path, input) {
                bail!(
                    "output {} is also an input of this command ({}); name another output",
                    path.display(),
                    input.display()
                );
            }
        }
        let meta = match std::fs::symlink_metadata(path) {
            Ok(m) => m,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
            Err(e) => return Err(e).with_context(|| format!("cannot inspect {}", path.display())),
        };
        let ft = meta.file_type();
        if ft.is_dir() {
            bail!(
                "output {} is a folder; name a file (or another folder for -o)",
                path.display()
            );
        }
        if !ft.is_file() {
            if !self.force {
                bail!(
                    "output {} is {}, not a regular file; refusing to replace it (--force writes \
                     through it)",
                    path.display(),
                    describe(&ft)
                );
            }
            // Written through: what it points at is the user's business once forced.
            return Ok(());
        }
        if meta.permissions().readonly() && !self.force {
            bail!(
                "output {} is read-only; refusing to replace it (--force replaces it)",
                path.display()
            );
        }
        let text = read_prefix(path)?;
        if ours.emulator && text.contains(HARDWARE_TAG) {
            bail!(
                "{} holds a hardware-measured result; refusing to replace it with an emulator \
                 result (--force does not override this). Write the emulator results elsewhere \
                 (-o results/emulator), or move the hardware file first",
                path.display()
            );
        }
        if !text.contains(ours.marker) && !self.force {
            bail!(
                "{} exists and was not written by fp4probe (it lacks `{}`); refusing to \
                 overwrite it (--force overwrites it, or name another output)",
                path.display(),
                ours.marker.trim()
            );
        }
        Ok(())
    }

    /// Check `path` as [`Outputs::check`] does, then write `bytes` to it.
    pub fn write(&self, path: &Path, bytes: impl AsRef<[u8]>, ours: Ours) -> Result<()> {
        self.check(path, ours)?;
        let bytes = bytes.as_ref();
        match std::fs::symlink_metadata(path) {
            Ok(m) if !m.file_type().is_file() => {
                // Forced (check refused otherwise): write through the link, FIFO or device.
                let mut f = std::fs::OpenOptions::new()
                    .write(true)
                    .truncate(true)
                    .open(path)
                    .with_context(|| format!("cannot open {}", path.display()))?;
                f.write_all(bytes)
                    .with_context(|| format!("cannot write {}", path.display()))?;
                Ok(())
            }
            _ => replace_atomically(path, bytes),
        }
    }

    /// Whether the JSON result `<dir>/<base>.json`, and the CSV beside it when `csv_header` is
    /// given, may be written; `emulator` says where the new result comes from.
    pub fn check_result(
        &self,
        dir: &Path,
        base: &str,
        csv_header: Option<&str>,
        emulator: bool,
    ) -> Result<()> {
        let json = dir.join(format!("{base}.json"));
        self.check(&json, Ours::result(JSON_MARKER, emulator))?;
        if let Some(header) = csv_header {
            // The CSV carries no backend: the JSON checked above speaks for both.
            self.check(&dir.join(format!("{base}.csv")), Ours::marked(header))?;
        }
        Ok(())
    }

    /// Write `<dir>/<base>.json` and, given `(header, text)`, `<dir>/<base>.csv`, after checking
    /// both; returns the JSON path.
    pub fn write_result(
        &self,
        dir: &Path,
        base: &str,
        json_text: &str,
        csv: Option<(&str, &str)>,
        emulator: bool,
    ) -> Result<PathBuf> {
        self.check_result(dir, base, csv.map(|c| c.0), emulator)?;
        self.create_dir(dir)?;
        let json = dir.join(format!("{base}.json"));
        self.write(&json, json_text, Ours::result(JSON_MARKER, emulator))?;
        if let Some((header, text)) = csv {
            self.write(&dir.join(format!("{base}.csv")), text, Ours::marked(header))?;
        }
        Ok(json)
    }

    /// Create the output folder `dir` (and its parents) unless it exists as a folder.
    pub fn create_dir(&self, dir: &Path) -> Result<()> {
        if dir.as_os_str().is_empty() || dir.is_dir() {
            return Ok(());
        }
        if std::fs::symlink_metadata(dir).is_ok() {
            bail!("output folder {} exists and is not a folder", dir.display());
        }
        std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))
    }
}

/// Write `bytes` beside `path`, then rename over it (same folder, so the rename is atomic).
fn replace_atomically(path: &Path, bytes: &[u8]) -> Result<()> {
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    let name = path
        .file_name()
        .with_context(|| format!("output {} names no file", path.display()))?;
    // Unique per call as well as per process: threads of one run may write beside each other.
    static COUNTER: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let tmp = dir.join(format!(
        ".{}.fp4probe-{}-{}.tmp",
        name.to_string_lossy(),
        std::process::id(),
        COUNTER.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
    ));
    let result = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(&tmp)
        // Synced before the rename, so a crash cannot leave a renamed but empty file.
        .and_then(|mut f| f.write_all(bytes).and_then(|()| f.sync_all()))
        .with_context(|| format!("cannot write {}", tmp.display()))
        .and_then(|()| {
            std::fs::rename(&tmp, path)
                .with_context(|| format!("cannot move {} to {}", tmp.display(), path.display()))
        });
    if result.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    result
}

/// The first 64 KiB of `path` as text (enough for every marker: they sit near the top).
fn read_prefix(path: &Path) -> Result<String> {
    use std::io::Read;
    let mut buf = Vec::new();
    std::fs::File::open(path)
        .and_then(|f| f.take(64 * 1024).read_to_end(&mut buf))
        .with_context(|| format!("cannot read {}", path.display()))?;
    Ok(String::from_utf8_lossy(&buf).into_owned())
}

fn describe(ft: &std::fs::FileType) -> &'static str {
    #[cfg(unix)]
    {
        use std::os::unix::fs::FileTypeExt;
        if ft.is_fifo() {
            return "a FIFO";
        }
        if ft.is_char_device() || ft.is_block_device() {
            return "a device node";
        }
        if ft.is_socket() {
            return "a socket";
        }
    }
    if ft.is_symlink() {
        "a symbolic link"
    } else {
        "not a regular file"
    }
}

/// Whether `a` and `b` name one existing file (through links, `..` or another spelling).
pub fn same_file(a: &Path, b: &Path) -> bool {
    #[cfg(unix)]
    {
        use std::os::unix::fs::MetadataExt;
        if let (Ok(x), Ok(y)) = (std::fs::metadata(a), std::fs::metadata(b)) {
            return x.dev() == y.dev() && x.ino() == y.ino();
        }
    }
    match (a.canonicalize(), b.canonicalize()) {
        (Ok(x), Ok(y)) => x == y,
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Scratch(PathBuf);
    impl Scratch {
        fn new(tag: &str) -> Self {
            let d =
                std::env::temp_dir().join(format!("fp4probe-outfile-{tag}-{}", std::process::id()));
            let _ = std::fs::remove_dir_all(&d);
            std::fs::create_dir_all(&d).unwrap();
            Scratch(d)
        }
    }
    impl Drop for Scratch {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }

    const MAP: Ours = Ours::result(JSON_MARKER, true);

    #[test]
    fn refuses_an_input_as_output() {
        let s = Scratch::new("input");
        let p = s.0.join("x.json");
        std::fs::write(&p, "{\"schema\": \"fp4probe.lanemap/1\"}").unwrap();
        let spelled = s.0.join(".").join("x.json");
        let e = Outputs::new(true)
            .input(&p)
            .check(&spelled, MAP)
            .unwrap_err();
        assert!(e.to_string().contains("also an input"), "{e}");
    }

    #[test]
    fn refuses_a_hardware_result_even_forced() {
        let s = Scratch::new("hw");
        let p = s.0.join("x.json");
        let hw = "{\n  \"schema\": \"fp4probe.lanemap/1\",\n  \"backend\": \"hardware\"\n}\n";
        std::fs::write(&p, hw).unwrap();
        let e = Outputs::new(true).write(&p, "new", MAP).unwrap_err();
        assert!(e.to_string().contains("hardware-measured"), "{e}");
        assert_eq!(std::fs::read_to_string(&p).unwrap(), hw);
        // A hardware result may replace a hardware result.
        Outputs::new(false)
            .write(
                &p,
                "{\"schema\": \"fp4probe.lanemap/1\"}",
                Ours::result(JSON_MARKER, false),
            )
            .unwrap();
    }

    #[test]
    fn refuses_a_foreign_file_unless_forced() {
        let s = Scratch::new("foreign");
        let p = s.0.join("README.md");
        std::fs::write(&p, "# my project\n").unwrap();
        let ours = Ours::marked("<!-- fp4probe index -->");
        let e = Outputs::new(false).write(&p, "index", ours).unwrap_err();
        assert!(e.to_string().contains("not written by fp4probe"), "{e}");
        assert_eq!(std::fs::read_to_string(&p).unwrap(), "# my project\n");
        Outputs::new(true).write(&p, "index", ours).unwrap();
        assert_eq!(std::fs::read_to_string(&p).unwrap(), "index");
    }

    #[cfg(unix)]
    #[test]
    fn refuses_links_and_read_only_files_unless_forced() {
        use std::os::unix::fs::PermissionsExt;
        let s = Scratch::new("kinds");
        let target = s.0.join("target.json");
        std::fs::write(&target, "keep").unwrap();
        let link = s.0.join("link.json");
        std::os::unix::fs::symlink(&target, &link).unwrap();
        let e = Outputs::new(false).write(&link, "x", MAP).unwrap_err();
        assert!(e.to_string().contains("symbolic link"), "{e}");
        assert!(
            std::fs::symlink_metadata(&link)
                .unwrap()
                .file_type()
                .is_symlink()
        );
        assert_eq!(std::fs::read_to_string(&target).unwrap(), "keep");

        let ro = s.0.join("ro.json");
        std::fs::write(&ro, "{\"schema\": \"fp4probe.lanemap/1\"}").unwrap();
        std::fs::set_permissions(&ro, std::fs::Permissions::from_mode(0o444)).unwrap();
        let e = Outputs::new(false).write(&ro, "x", MAP).unwrap_err();
        assert!(e.to_string().contains("read-only"), "{e}");

        // Forced, a link is written through and stays a link.
        Outputs::new(true).write(&link, "through", MAP).unwrap();
        assert!(
            std::fs::symlink_metadata(&link)
                .unwrap()
                .file_type()
                .is_symlink()
        );
        assert_eq!(std::fs::read_to_string(&target).unwrap(), "through");
    }

    #[test]
    fn writes_new_files_and_leaves_no_temporaries() {
        let s = Scratch::new("new");
        let p = s.0.join("new.json");
        Outputs::new(false).write(&p, "hello", MAP).unwrap();
        assert_eq!(std::fs::read_to_string(&p).unwrap(), "hello");
        let names: Vec<_> = std::fs::read_dir(&s.0).unwrap().collect();
        assert_eq!(names.len(), 1);
    }
}
