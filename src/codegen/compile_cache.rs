//! The on-disk cache of NVRTC's output (`nvrtc::compile`): a second run loads the cubin or PTX
//! a first run compiled (the attention kernels take 20–30 s to compile) instead of compiling
//! again.
//!
//! An entry is keyed by a SHA-256 over everything that decides NVRTC's output: the program
//! name and source, every option, the contents of every folder an `--include-path=` option
//! names (in place of the folder's name, so the same headers at another path hit the same
//! entry), the output kind, NVRTC's version and library file, and the installed CUDA driver's
//! version. The device enters through `--gpu-architecture` (the compute capability the code is
//! built for). Entries live in `$FP4PROBE_COMPILE_CACHE` when it names a folder, else in
//! `nvrtc/` of the per-user cache folder (`$XDG_CACHE_HOME/fp4probe/nvrtc`, else
//! `~/.cache/fp4probe/nvrtc`); `FP4PROBE_COMPILE_CACHE=off` (or `0`) turns the cache off.
//!
//! An entry is written to a temporary file beside it and renamed into place, so a reader sees
//! a whole entry or none, also with several processes at once. A read checks the file's
//! header, key, lengths and digest: a damaged entry is reported in one line, compiled again
//! and replaced, never trusted. A folder that cannot be written means no cache, silently. The
//! folder may be deleted at any time; nothing removes old entries (a few MB each).
//! The file format is in `docs/file-formats.md`.

use super::nvrtc::{Compiled, Output};
use sha2::{Digest, Sha256};
use std::io::Write;
use std::path::{Path, PathBuf};

/// Environment variable: a folder for the cache, or `off` / `0` to turn it off.
pub const CACHE_ENV: &str = "FP4PROBE_COMPILE_CACHE";

/// The first bytes of every entry.
const MAGIC: &[u8; 16] = b"fp4probe-nvrtc\n\0";

/// The entry layout's version (bumped when the layout or the key's make-up changes).
const VERSION: u32 = 1;

/// Bytes before the log: magic, version, key, output kind, log and image lengths, digest.
const HEADER: usize = 16 + 4 + 32 + 4 + 8 + 8 + 32;

/// Entries larger than this are not read (no cubin fp4probe builds comes near it).
const MAX_ENTRY: u64 = 1 << 30;

/// What a compile's result depends on, hashed into its key.
pub struct KeyParts<'a> {
    /// NVRTC's version and library (`nvrtc::Nvrtc::identity`).
    pub nvrtc: &'a str,
    /// `cuDriverGetVersion` of the installed driver, `None` without one.
    pub driver: Option<i32>,
    pub output: Output,
    pub name: &'a str,
    pub src: &'a str,
    pub options: &'a [String],
}

/// The SHA-256 naming one entry.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Key([u8; 32]);

impl Key {
    /// The key of a compile; `None` when a folder named by `--include-path=` cannot be read
    /// (what it holds cannot be hashed, so the result is not cached).
    pub fn new(parts: &KeyParts) -> Option<Key> {
        let mut h = Sha256::new();
        let mut field = |tag: &str, bytes: &[u8]| {
            h.update(tag.as_bytes());
            h.update((bytes.len() as u64).to_le_bytes());
            h.update(bytes);
        };
        field("version", &VERSION.to_le_bytes());
        field("nvrtc", parts.nvrtc.as_bytes());
        let driver = parts.driver.map_or("none".to_string(), |v| v.to_string());
        field("driver", driver.as_bytes());
        field("output", output_name(parts.output).as_bytes());
        field("name", parts.name.as_bytes());
        field("source", parts.src.as_bytes());
        for o in parts.options {
            match o.strip_prefix("--include-path=") {
                Some(dir) => field("include-path", &folder_digest(Path::new(dir))?),
                None => field("option", o.as_bytes()),
            }
        }
        Some(Key(h.finalize().into()))
    }

    pub fn hex(&self) -> String {
        self.0.iter().map(|b| format!("{b:02x}")).collect()
    }
}

fn output_name(o: Output) -> &'static str {
    match o {
        Output::Ptx => "ptx",
        Output::Cubin => "cubin",
    }
}

/// The output kind's number in an entry's header.
fn output_code(o: Output) -> u32 {
    match o {
        Output::Ptx => 0,
        Output::Cubin => 1,
    }
}

/// A SHA-256 over every file below `dir`: relative paths (`/`-separated) and contents, in
/// path order. `None` when something below it cannot be read.
fn folder_digest(dir: &Path) -> Option<[u8; 32]> {
    fn walk(dir: &Path, rel: &str, out: &mut Vec<(String, PathBuf)>) -> Option<()> {
        for entry in std::fs::read_dir(dir).ok()? {
            let entry = entry.ok()?;
            let name = entry.file_name().into_string().ok()?;
            let rel = if rel.is_empty() {
                name
            } else {
                format!("{rel}/{name}")
            };
            let path = entry.path();
            if std::fs::metadata(&path).ok()?.is_dir() {
                walk(&path, &rel, out)?;
            } else {
                out.push((rel, path));
            }
        }
        Some(())
    }
    let mut files = Vec::new();
    walk(dir, "", &mut files)?;
    files.sort();
    let mut h = Sha256::new();
    for (rel, path) in files {
        let bytes = std::fs::read(path).ok()?;
        h.update((rel.len() as u64).to_le_bytes());
        h.update(rel.as_bytes());
        h.update((bytes.len() as u64).to_le_bytes());
        h.update(&bytes);
    }
    Some(h.finalize().into())
}

/// What a lookup found.
#[derive(Debug)]
pub enum Lookup {
    Hit(Compiled),
    Miss,
    /// An entry that is not a valid one for its key, and why.
    Invalid(String),
}

/// A cache folder.
#[derive(Clone, Debug)]
pub struct Cache {
    dir: PathBuf,
}

impl Cache {
    /// The cache `$FP4PROBE_COMPILE_CACHE` asks for (see the module doc); `None` when it is
    /// off or there is no per-user cache folder.
    pub fn from_env() -> Option<Cache> {
        match std::env::var_os(CACHE_ENV) {
            Some(v) if v == "off" || v == "0" => None,
            Some(v) if !v.is_empty() => Some(Cache::at(PathBuf::from(v))),
            _ => crate::locate::cache_dir().map(|d| Cache::at(d.join("nvrtc"))),
        }
    }

    pub fn at(dir: PathBuf) -> Cache {
        Cache { dir }
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Where `key`'s entry lives.
    pub fn path(&self, key: &Key, output: Output) -> PathBuf {
        self.dir
            .join(format!("{}.{}", key.hex(), output_name(output)))
    }

    /// The entry of `key`, checked; `Miss` when there is none (or it cannot be read: a
    /// folder without read permission is no cache).
    pub fn load(&self, key: &Key, output: Output) -> Lookup {
        let path = self.path(key, output);
        let meta = match std::fs::metadata(&path) {
            Ok(m) => m,
            Err(_) => return Lookup::Miss,
        };
        if !meta.is_file() {
            return Lookup::Invalid("not a regular file".into());
        }
        if meta.len() > MAX_ENTRY {
            return Lookup::Invalid(format!("{} bytes, more than an entry can hold", meta.len()));
        }
        match std::fs::read(&path) {
            Ok(bytes) => match decode(&bytes, key, output) {
                Ok((image, log)) => Lookup::Hit(Compiled {
                    image,
                    log,
                    cached_at: Some(path),
                }),
                Err(why) => Lookup::Invalid(why),
            },
            Err(_) => Lookup::Miss,
        }
    }

    /// Write `compiled` as `key`'s entry (temporary file, then rename); the entry's path, or
    /// `None` when the folder cannot be written.
    pub fn store(&self, key: &Key, output: Output, compiled: &Compiled) -> Option<PathBuf> {
        std::fs::create_dir_all(&self.dir).ok()?;
        let mut tmp = tempfile::Builder::new()
            .prefix(".partial-")
            .tempfile_in(&self.dir)
            .ok()?;
        tmp.write_all(&encode(key, output, &compiled.image, &compiled.log))
            .ok()?;
        tmp.as_file().sync_all().ok()?;
        let path = self.path(key, output);
        tmp.persist(&path).ok()?;
        Some(path)
    }
}

fn digest(log: &[u8], image: &[u8]) -> [u8; 32] {
    let mut h = Sha256::new();
    h.update(log);
    h.update(image);
    h.finalize().into()
}

/// An entry's bytes (layout: `docs/file-formats.md`).
fn encode(key: &Key, output: Output, image: &[u8], log: &str) -> Vec<u8> {
    let mut out = Vec::with_capacity(HEADER + log.len() + image.len());
    out.extend_from_slice(MAGIC);
    out.extend_from_slice(&VERSION.to_le_bytes());
    out.extend_from_slice(&key.0);
    out.extend_from_slice(&output_code(output).to_le_bytes());
    out.extend_from_slice(&(log.len() as u64).to_le_bytes());
    out.extend_from_slice(&(image.len() as u64).to_le_bytes());
    out.extend_from_slice(&digest(log.as_bytes(), image));
    out.extend_from_slice(log.as_bytes());
    out.extend_from_slice(image);
    out
}

/// The image and log of an entry, or why it is not a valid entry for `key`.
fn decode(bytes: &[u8], key: &Key, output: Output) -> Result<(Vec<u8>, String), String> {
    if bytes.len() < HEADER {
        return Err(format!("{} bytes, shorter than the header", bytes.len()));
    }
    let (header, body) = bytes.split_at(HEADER);
    let u32_at = |at: usize| u32::from_le_bytes(header[at..at + 4].try_into().expect("4 bytes"));
    let u64_at = |at: usize| u64::from_le_bytes(header[at..at + 8].try_into().expect("8 bytes"));
    if &header[..16] != MAGIC {
        return Err("not an fp4probe compile cache entry".into());
    }
    if u32_at(16) != VERSION {
        return Err(format!("entry version {}, expected {VERSION}", u32_at(16)));
    }
    if header[20..52] != key.0 {
        return Err("its key differs from its name".into());
    }
    if u32_at(52) != output_code(output) {
        return Err("holds another output kind".into());
    }
    let (log_len, image_len) = (u64_at(56), u64_at(64));
    if log_len.checked_add(image_len) != Some(body.len() as u64) {
        return Err(format!(
            "{} bytes after the header, the header says {log_len} + {image_len} (truncated?)",
            body.len()
        ));
    }
    if image_len == 0 {
        return Err("empty image".into());
    }
    let (log, image) = body.split_at(log_len as usize);
    if digest(log, image) != header[72..104] {
        return Err("contents do not match their digest".into());
    }
    let log = String::from_utf8(log.to_vec()).map_err(|_| "log is not UTF-8".to_string())?;
    Ok((image.to_vec(), log))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parts<'a>(src: &'a str, options: &'a [String]) -> KeyParts<'a> {
        KeyParts {
            nvrtc: "NVRTC 13.0 (/lib/libnvrtc.so.13, 1 bytes, 0)",
            driver: Some(13000),
            output: Output::Cubin,
            name: "k.cu",
            src,
            options,
        }
    }

    fn compiled(image: &[u8]) -> Compiled {
        Compiled {
            image: image.to_vec(),
            log: "warning: something".into(),
            cached_at: None,
        }
    }

    #[test]
    fn the_key_changes_with_every_part() {
        let opts = vec!["--gpu-architecture=sm_90a".to_string()];
        let base = Key::new(&parts("src", &opts)).unwrap();
        assert_eq!(base, Key::new(&parts("src", &opts)).unwrap());
        assert_eq!(base.hex().len(), 64);
        let other_arch = vec!["--gpu-architecture=sm_120a".to_string()];
        let mut variants = vec![
            Key::new(&parts("src ", &opts)).unwrap(),
            Key::new(&parts("src", &other_arch)).unwrap(),
            Key::new(&parts("src", &[])).unwrap(),
        ];
        let mut p = parts("src", &opts);
        p.driver = Some(12080);
        variants.push(Key::new(&p).unwrap());
        p.driver = None;
        variants.push(Key::new(&p).unwrap());
        let mut p = parts("src", &opts);
        p.nvrtc = "NVRTC 12.9";
        variants.push(Key::new(&p).unwrap());
        let mut p = parts("src", &opts);
        p.output = Output::Ptx;
        variants.push(Key::new(&p).unwrap());
        let mut p = parts("src", &opts);
        p.name = "j.cu";
        variants.push(Key::new(&p).unwrap());
        // Two options are not one joined option.
        let split = vec!["-DA".to_string(), "-DB".to_string()];
        let joined = vec!["-DA-DB".to_string()];
        variants.push(Key::new(&parts("src", &split)).unwrap());
        variants.push(Key::new(&parts("src", &joined)).unwrap());
        for (i, k) in variants.iter().enumerate() {
            assert_ne!(*k, base, "variant {i}");
            for (j, o) in variants.iter().enumerate().skip(i + 1) {
                assert_ne!(k, o, "variants {i} and {j}");
            }
        }
    }

    #[test]
    fn include_folders_count_by_contents_not_by_name() {
        let (a, b) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
        for d in [a.path(), b.path()] {
            std::fs::create_dir_all(d.join("sub")).unwrap();
            std::fs::write(d.join("sub/h.cuh"), "int x;").unwrap();
        }
        let opt = |d: &Path| vec![format!("--include-path={}", d.display())];
        let (oa, ob) = (opt(a.path()), opt(b.path()));
        let ka = Key::new(&parts("src", &oa)).unwrap();
        assert_eq!(ka, Key::new(&parts("src", &ob)).unwrap());
        std::fs::write(b.path().join("sub/h.cuh"), "int y;").unwrap();
        assert_ne!(ka, Key::new(&parts("src", &ob)).unwrap());
        std::fs::write(b.path().join("sub/h.cuh"), "int x;").unwrap();
        std::fs::write(b.path().join("extra.cuh"), "").unwrap();
        assert_ne!(ka, Key::new(&parts("src", &ob)).unwrap());
        // A folder that cannot be read: no key, so no caching.
        let gone = opt(&a.path().join("missing"));
        assert!(Key::new(&parts("src", &gone)).is_none());
    }

    #[test]
    fn an_entry_round_trips() {
        let dir = tempfile::tempdir().unwrap();
        let cache = Cache::at(dir.path().join("nvrtc"));
        let key = Key::new(&parts("src", &[])).unwrap();
        assert!(matches!(cache.load(&key, Output::Cubin), Lookup::Miss));
        let path = cache
            .store(&key, Output::Cubin, &compiled(b"\x7fELF..."))
            .unwrap();
        assert_eq!(path, cache.path(&key, Output::Cubin));
        match cache.load(&key, Output::Cubin) {
            Lookup::Hit(c) => {
                assert_eq!(c.image, b"\x7fELF...");
                assert_eq!(c.log, "warning: something");
                assert_eq!(c.cached_at, Some(path));
            }
            other => panic!("{other:?}"),
        }
        // Nothing but the entry is left in the folder (the temporary file was renamed).
        assert_eq!(std::fs::read_dir(cache.dir()).unwrap().count(), 1);
    }

    #[test]
    fn damaged_entries_are_invalid_never_a_panic() {
        let dir = tempfile::tempdir().unwrap();
        let cache = Cache::at(dir.path().to_path_buf());
        let key = Key::new(&parts("src", &[])).unwrap();
        let path = cache
            .store(&key, Output::Cubin, &compiled(b"cubin bytes"))
            .unwrap();
        let good = std::fs::read(&path).unwrap();
        let mut damaged: Vec<(&str, Vec<u8>)> = vec![
            ("empty", Vec::new()),
            ("half a header", good[..HEADER / 2].to_vec()),
            ("truncated", good[..good.len() - 3].to_vec()),
            ("grown", [good.as_slice(), b"x"].concat()),
        ];
        for (what, at) in [("magic", 0), ("version", 16), ("key", 30), ("kind", 52)] {
            let mut b = good.clone();
            b[at] ^= 1;
            damaged.push((what, b));
        }
        let mut flipped = good.clone();
        *flipped.last_mut().unwrap() ^= 0x40;
        damaged.push(("a flipped image bit", flipped));
        let mut long = good.clone();
        long[56..64].copy_from_slice(&u64::MAX.to_le_bytes());
        damaged.push(("an absurd log length", long));
        for (what, bytes) in damaged {
            std::fs::write(&path, &bytes).unwrap();
            match cache.load(&key, Output::Cubin) {
                Lookup::Invalid(why) => assert!(!why.is_empty(), "{what}"),
                other => panic!("{what}: {other:?}"),
            }
        }
        // Another key's valid entry under this key's name is refused too.
        let other = Key::new(&parts("other src", &[])).unwrap();
        std::fs::write(&path, encode(&other, Output::Cubin, b"cubin", "")).unwrap();
        assert!(matches!(
            cache.load(&key, Output::Cubin),
            Lookup::Invalid(_)
        ));
        // A folder where the entry should be is not read.
        std::fs::remove_file(&path).unwrap();
        std::fs::create_dir(&path).unwrap();
        assert!(matches!(
            cache.load(&key, Output::Cubin),
            Lookup::Invalid(_)
        ));
        assert!(cache.store(&key, Output::Cubin, &compiled(b"x")).is_none());
    }

    #[test]
    fn a_folder_that_cannot_be_written_is_no_cache() {
        let dir = tempfile::tempdir().unwrap();
        // A regular file where the cache folder should be: nothing can be created below it
        // (unlike a read-only folder, this holds also for root).
        let blocker = dir.path().join("file");
        std::fs::write(&blocker, "").unwrap();
        let cache = Cache::at(blocker.join("nvrtc"));
        let key = Key::new(&parts("src", &[])).unwrap();
        assert!(cache.store(&key, Output::Cubin, &compiled(b"x")).is_none());
        assert!(matches!(cache.load(&key, Output::Cubin), Lookup::Miss));
        assert_eq!(std::fs::read(&blocker).unwrap(), b"");
    }
}
