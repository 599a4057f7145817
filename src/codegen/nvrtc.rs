//! NVRTC: compile CUDA C++ (the generated headers, `kernels/tile_roundtrip.cu`) to PTX or to a
//! cubin, without nvcc.
//!
//! cudarc loads libnvrtc at run time by bare library names (`libnvrtc.so`, ...,
//! `libnvrtc.so.13`), that is from the loader's search path, and panics on the first call when
//! none loads. So [`load`] first `dlopen`s a libnvrtc (and the builtins library beside it) by
//! absolute path where it finds one (the loader then answers cudarc's `libnvrtc.so.13` with that
//! library, by its soname), checks
//! `is_culib_present`, and only then lets anything call into NVRTC. Looked for, first hit wins:
//!
//! 1. `$FP4PROBE_NVRTC`: the library file, or a folder holding `libnvrtc.so.*`;
//! 2. `.tools/nvidia/*/lib/libnvrtc.so.*` of the fp4probe checkout containing the current
//!    folder (of the current folder when it is in none; `.ci/install-cuda-tools` installs the
//!    pinned `nvidia-cuda-nvrtc` wheel there), then `nvidia/*/lib` under the per-user cache
//!    folder's `tools` (`$XDG_CACHE_HOME/fp4probe/tools` or `~/.cache/fp4probe/tools`;
//!    `.ci/install-cuda-tools --cache`), see `crate::locate::pinned_dirs`;
//! 3. the loader's own search (`LD_LIBRARY_PATH`, the ld.so cache), as cudarc does;
//! 4. `$CUDA_PATH/lib64`, `$CUDA_HOME/lib64`, `/usr/local/cuda/lib64`,
//!    `/usr/local/cuda/targets/x86_64-linux/lib`.
//!
//! None of these depends on where the binary was built.

use super::compile_cache::{CACHE_ENV, Cache, Key, KeyParts, Lookup};
use anyhow::{Context, Result, bail};
use cudarc::nvrtc::{result, sys};
use std::ffi::CString;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

/// Environment variable naming libnvrtc (the file, or its folder).
pub const NVRTC_ENV: &str = "FP4PROBE_NVRTC";

/// The NVRTC this process uses.
#[derive(Clone, Debug)]
pub struct Nvrtc {
    /// (major, minor) as `nvrtcVersion` reports it.
    pub version: (i32, i32),
    /// The file loaded by absolute path before cudarc looked, if one was.
    pub path: Option<PathBuf>,
}

/// `libnvrtc.so.<major>` files (not the builtins library) in `dir`, newest name first.
fn libs_in(dir: &Path) -> Vec<PathBuf> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut libs: Vec<PathBuf> = entries
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| {
            p.file_name()
                .and_then(|n| n.to_str())
                .and_then(|n| n.strip_prefix("libnvrtc.so."))
                .is_some_and(|rest| !rest.is_empty() && rest.chars().all(|c| c.is_ascii_digit()))
        })
        .collect();
    libs.sort();
    libs.reverse();
    libs
}

/// Candidates to load by absolute path before the loader's own search (steps 1 and 2).
fn preferred() -> Vec<PathBuf> {
    let mut out = Vec::new();
    if let Some(p) = std::env::var_os(NVRTC_ENV).filter(|p| !p.is_empty()) {
        let p = PathBuf::from(p);
        if p.is_dir() {
            out.extend(libs_in(&p));
        } else {
            out.push(p);
        }
    }
    for d in crate::locate::pinned_dirs("lib") {
        out.extend(libs_in(&d));
    }
    out
}

/// Candidates after the loader's own search (step 4).
fn fallback() -> Vec<PathBuf> {
    let mut dirs = Vec::new();
    for var in ["CUDA_PATH", "CUDA_HOME"] {
        if let Some(p) = std::env::var_os(var).filter(|p| !p.is_empty()) {
            dirs.push(PathBuf::from(p).join("lib64"));
        }
    }
    dirs.push(PathBuf::from("/usr/local/cuda/lib64"));
    dirs.push(PathBuf::from("/usr/local/cuda/targets/x86_64-linux/lib"));
    dirs.iter().flat_map(|d| libs_in(d)).collect()
}

#[cfg(target_os = "linux")]
fn dlopen_global(path: &Path) -> bool {
    use std::os::unix::ffi::OsStrExt;
    unsafe extern "C" {
        fn dlopen(
            filename: *const std::ffi::c_char,
            flag: std::ffi::c_int,
        ) -> *mut std::ffi::c_void;
    }
    const RTLD_NOW: std::ffi::c_int = 2;
    let Ok(c) = CString::new(path.as_os_str().as_bytes()) else {
        return false;
    };
    // SAFETY: `c` is a NUL-terminated path that outlives the call. The handle is deliberately
    // never closed: the library stays loaded for the life of the process, which is what lets
    // cudarc's later dlopen by soname find it. Loading runs the library's initialisers only.
    !unsafe { dlopen(c.as_ptr(), RTLD_NOW) }.is_null()
}

#[cfg(not(target_os = "linux"))]
fn dlopen_global(_path: &Path) -> bool {
    false
}

fn present() -> bool {
    // SAFETY: only tries to load the library names cudarc knows; calls no NVRTC function.
    unsafe { sys::is_culib_present() }
}

/// Load `lib` by absolute path, after the `libnvrtc-builtins.so.*` beside it: libnvrtc opens
/// its builtins library by bare name when it compiles, and not every libnvrtc carries an
/// `$ORIGIN` run path to find it (the 13.0 wheel does not); loaded first, it is found by soname.
fn preload(lib: &Path) -> bool {
    if let Some(dir) = lib.parent()
        && let Ok(entries) = std::fs::read_dir(dir)
    {
        let mut builtins: Vec<PathBuf> = entries
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| {
                p.file_name()
                    .and_then(|n| n.to_str())
                    .is_some_and(|n| n.starts_with("libnvrtc-builtins.so."))
            })
            .collect();
        builtins.sort();
        for b in builtins {
            dlopen_global(&b);
        }
    }
    dlopen_global(lib)
}

fn find_and_load() -> Result<Nvrtc, String> {
    let mut tried = Vec::new();
    let mut path = None;
    for p in preferred() {
        if preload(&p) && present() {
            path = Some(p);
            break;
        }
        tried.push(p.display().to_string());
    }
    if path.is_none() && !present() {
        for p in fallback() {
            if preload(&p) && present() {
                path = Some(p);
                break;
            }
            tried.push(p.display().to_string());
        }
    }
    if !present() {
        return Err(format!(
            "libnvrtc not found (searched ${NVRTC_ENV}, .tools/nvidia/*/lib of the fp4probe \
             checkout containing the current directory, $XDG_CACHE_HOME/fp4probe/tools (or \
             ~/.cache/fp4probe/tools), the loader's path, CUDA_PATH, CUDA_HOME, \
             /usr/local/cuda; install it with .ci/install-cuda-tools [--cache] or set \
             {NVRTC_ENV} to the library or its folder){}",
            if tried.is_empty() {
                String::new()
            } else {
                format!("; tried {}", tried.join(", "))
            }
        ));
    }
    let (mut major, mut minor) = (0, 0);
    // SAFETY: the library is loaded (checked above); both are valid out-pointers.
    unsafe { sys::nvrtcVersion(&mut major, &mut minor) }
        .result()
        .map_err(|e| format!("nvrtcVersion: {e:?}"))?;
    Ok(Nvrtc {
        version: (major, minor),
        path,
    })
}

/// Load libnvrtc once per process; an error (not a panic) when there is none.
pub fn load() -> Result<&'static Nvrtc> {
    static LOADED: OnceLock<Result<Nvrtc, String>> = OnceLock::new();
    LOADED
        .get_or_init(find_and_load)
        .as_ref()
        .map_err(|e| anyhow::anyhow!("{e}"))
}

/// What to take from a compiled program.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Output {
    /// PTX (compile for a virtual architecture, `compute_90`).
    Ptx,
    /// A cubin (compile for a real architecture, `sm_90`).
    Cubin,
}

/// A successful compilation.
#[derive(Clone, Debug)]
pub struct Compiled {
    /// PTX text, or the cubin's bytes.
    pub image: Vec<u8>,
    /// NVRTC's log (warnings), possibly empty.
    pub log: String,
    /// The compile cache's entry holding this result (read from it, or written to it);
    /// `None` when the cache is off or could not be written.
    pub cached_at: Option<PathBuf>,
}

impl Compiled {
    pub fn ptx(&self) -> String {
        String::from_utf8_lossy(&self.image).into_owned()
    }
}

fn c_text(v: Vec<std::ffi::c_char>) -> String {
    let bytes: Vec<u8> = v
        .into_iter()
        .map(|c| c as u8)
        .take_while(|&b| b != 0)
        .collect();
    String::from_utf8_lossy(&bytes).trim_end().to_string()
}

impl Nvrtc {
    /// `NVRTC 13.0 (/path/libnvrtc.so.13, <bytes>, <mtime>)`: the version, and the library
    /// file when it was loaded by path (a patch release keeps the version and changes the
    /// file), for the compile cache's key.
    pub fn identity(&self) -> String {
        let (major, minor) = self.version;
        let file = self.path.as_ref().map(|p| {
            let meta = std::fs::metadata(p).ok();
            let len = meta.as_ref().map_or(0, |m| m.len());
            let mtime = meta
                .and_then(|m| m.modified().ok())
                .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
                .map_or(0, |d| d.as_nanos());
            format!(" ({}, {len}, {mtime})", p.display())
        });
        format!("NVRTC {major}.{minor}{}", file.unwrap_or_default())
    }
}

/// Compile `src` (named `name` in messages) with NVRTC and the given options, e.g.
/// `--gpu-architecture=compute_90`, `--include-path=kernels`, `-std=c++17`, or load the
/// result of an earlier identical compile from the compile cache (`compile_cache`, off with
/// `FP4PROBE_COMPILE_CACHE=off`). A compile error returns NVRTC's log.
pub fn compile(src: &str, name: &str, options: &[String], output: Output) -> Result<Compiled> {
    let lib = load()?;
    let cached = Cache::from_env().and_then(|cache| {
        let key = Key::new(&KeyParts {
            nvrtc: &lib.identity(),
            driver: crate::device::cuda::installed_driver_version(),
            output,
            name,
            src,
            options,
        })?;
        Some((cache, key))
    });
    if let Some((cache, key)) = &cached {
        match cache.load(key, output) {
            Lookup::Hit(c) => return Ok(c),
            Lookup::Miss => {}
            Lookup::Invalid(why) => eprintln!(
                "fp4probe: ignoring compile cache entry {} ({why}); compiling {name} again",
                cache.path(key, output).display()
            ),
        }
    }
    let started = std::time::Instant::now();
    let mut compiled = compile_uncached(src, name, options, output)?;
    if let Some((cache, key)) = &cached {
        compiled.cached_at = cache.store(key, output, &compiled);
    }
    report_slow_compile(name, options, &compiled, started.elapsed());
    Ok(compiled)
}

/// Compiles slower than this are reported on stderr.
const SLOW_COMPILE: std::time::Duration = std::time::Duration::from_secs(2);

/// Say on stderr that a compile took long (the attention kernels' first compile takes 20–30
/// s), so that it is not taken for a hang, and whether later runs load it from the cache.
fn report_slow_compile(name: &str, options: &[String], c: &Compiled, took: std::time::Duration) {
    if took < SLOW_COMPILE {
        return;
    }
    let what: Vec<&str> = options
        .iter()
        .filter_map(|o| {
            o.strip_prefix("--gpu-architecture=")
                .or(o.strip_prefix("-D"))
        })
        .collect();
    let later = match &c.cached_at {
        Some(p) => format!("later runs load it from {}", p.display()),
        None => format!("not kept: the compile cache is off (${CACHE_ENV}) or cannot be written"),
    };
    eprintln!(
        "fp4probe: NVRTC took {:.1} s to compile {name} ({}); {later}",
        took.as_secs_f64(),
        what.join(" ")
    );
}

/// `compile` without the cache: always runs NVRTC.
pub fn compile_uncached(
    src: &str,
    name: &str,
    options: &[String],
    output: Output,
) -> Result<Compiled> {
    load()?;
    let csrc = CString::new(src).context("CUDA source contains a NUL byte")?;
    let cname = CString::new(name).context("program name contains a NUL byte")?;
    let prog = result::create_program(&csrc, Some(&cname))
        .map_err(|e| anyhow::anyhow!("nvrtcCreateProgram({name}): {e:?}"))?;
    struct Guard(sys::nvrtcProgram);
    impl Drop for Guard {
        fn drop(&mut self) {
            // SAFETY: created by create_program above and destroyed only here.
            let _ = unsafe { result::destroy_program(self.0) };
        }
    }
    let guard = Guard(prog);
    if options.iter().any(|o| o.contains('\0')) {
        bail!("an NVRTC option contains a NUL byte");
    }
    // SAFETY: `prog` is live (owned by `guard`); the options hold no NUL byte (checked).
    let r = unsafe { result::compile_program(guard.0, options) };
    // SAFETY: as above.
    let log = unsafe { result::get_program_log(guard.0) }
        .map(c_text)
        .unwrap_or_default();
    if let Err(e) = r {
        bail!("NVRTC could not compile {name} ({e:?}):\n{log}");
    }
    let image = match output {
        // SAFETY: `prog` is live and compiled.
        Output::Ptx => unsafe { result::get_ptx(guard.0) }
            .map(|v| c_text(v).into_bytes())
            .map_err(|e| anyhow::anyhow!("nvrtcGetPTX({name}): {e:?}"))?,
        Output::Cubin => {
            let mut size = 0usize;
            // SAFETY: `prog` is live and compiled; `size` is a valid out-pointer.
            unsafe { sys::nvrtcGetCUBINSize(guard.0, &mut size) }
                .result()
                .map_err(|e| {
                    anyhow::anyhow!("nvrtcGetCUBINSize({name}): {e:?} (compile for sm_XX)")
                })?;
            let mut buf = vec![0u8; size];
            // SAFETY: `buf` holds `size` bytes, as nvrtcGetCUBINSize asked for.
            unsafe { sys::nvrtcGetCUBIN(guard.0, buf.as_mut_ptr().cast()) }
                .result()
                .map_err(|e| anyhow::anyhow!("nvrtcGetCUBIN({name}): {e:?}"))?;
            buf
        }
    };
    Ok(Compiled {
        image,
        log,
        cached_at: None,
    })
}
