//! The binary as `cargo install` leaves it: a copy outside the checkout, run from a folder
//! that is not in one, with an environment that names the pinned tools the documented way
//! (`FP4PROBE_CUDA_BIN`) and holds no other `FP4PROBE_*` variable. Every command works there
//! (the kernel sources are built in; `codegen` takes `--root`), a missing tool is a clean
//! exit 2 that names `FP4PROBE_CUDA_BIN`, and an interrupt leaves no temporary folder behind.
//! CPU only. Without the pinned tools (`.ci/install-cuda-tools`) the tool-dependent parts print
//! a note and pass, except on CI (CI set), where they fail.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::sync::Mutex;
use std::time::{Duration, Instant};

#[path = "support/nvrtc.rs"]
mod nvrtc_support;
use nvrtc_support::nvrtc_or_skip;

const VARIANT: &str = "m16n8k16.f32.bf16.bf16.f32";

fn checkout() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// A fresh folder in the system temp folder, removed with its contents when dropped.
fn scratch(name: &str) -> tempfile::TempDir {
    let dir = tempfile::Builder::new()
        .prefix(&format!("fp4probe-install-{name}-"))
        .tempdir()
        .unwrap();
    assert!(
        fp4probe::locate::checkout_containing(dir.path()).is_none(),
        "{} is inside a fp4probe checkout: the test needs a folder outside one",
        dir.path().display()
    );
    dir
}

/// The checkout's pinned tool folder (`.tools/nvidia/*/bin` holding ptxas), or `None` with a
/// note (a failure on CI).
fn pinned_bin(test: &str) -> Option<PathBuf> {
    let found = fp4probe::locate::pinned_dirs("bin")
        .into_iter()
        .filter(|d| d.starts_with(checkout()))
        .find(|d| d.join("ptxas").is_file());
    if found.is_none() {
        assert!(
            std::env::var_os("CI").is_none(),
            "{test}: CI is set but the checkout has no .tools/nvidia/*/bin/ptxas (run \
             .ci/install-cuda-tools)"
        );
        eprintln!("{test}: no pinned tools in .tools/: their parts skipped");
    }
    found
}

/// `PATH` without the folders that hold ptxas, cuobjdump or nvdisasm.
fn path_without_cuda_tools() -> std::ffi::OsString {
    let path = std::env::var_os("PATH").unwrap_or_default();
    let kept: Vec<PathBuf> = std::env::split_paths(&path)
        .filter(|d| {
            !["ptxas", "cuobjdump", "nvdisasm"]
                .iter()
                .any(|t| d.join(t).exists())
        })
        .collect();
    std::env::join_paths(kept).unwrap()
}

/// Held while a binary is copied and while a child process is spawned. A child forked while
/// another test has the copy open for writing holds that file open until it execs, and an
/// exec of the copy meanwhile fails with "Text file busy"; spawning returns only after the
/// child's exec.
static FORK: Mutex<()> = Mutex::new(());

fn spawn(cmd: &mut Command) -> Child {
    let _guard = FORK.lock().unwrap_or_else(|e| e.into_inner());
    cmd.spawn().expect("binary runs")
}

/// The installed binary: a copy of the one cargo built, in its own folder.
struct Installed {
    /// Holds the copy; also the working directory of every run.
    dir: tempfile::TempDir,
    /// A cache folder of its own (`XDG_CACHE_HOME`), so that the user's does not count.
    cache: tempfile::TempDir,
}

impl Installed {
    fn new(name: &str) -> Installed {
        let dir = scratch(name);
        {
            let _guard = FORK.lock().unwrap_or_else(|e| e.into_inner());
            std::fs::copy(env!("CARGO_BIN_EXE_fp4probe"), dir.path().join("fp4probe")).unwrap();
        }
        Installed {
            dir,
            cache: scratch(&format!("{name}-cache")),
        }
    }

    fn cwd(&self) -> &Path {
        self.dir.path()
    }

    /// The copy, run in its folder with no `FP4PROBE_*` variable, `PATH` without CUDA tools,
    /// and `FP4PROBE_CUDA_BIN` = `cuda_bin` when given.
    fn command(&self, args: &[&str], cuda_bin: Option<&Path>) -> Command {
        let mut cmd = Command::new(self.cwd().join("fp4probe"));
        cmd.args(args)
            .current_dir(self.cwd())
            .env("PATH", path_without_cuda_tools())
            .env("XDG_CACHE_HOME", self.cache.path());
        for (k, _) in std::env::vars_os() {
            if k.to_string_lossy().starts_with("FP4PROBE_") {
                cmd.env_remove(k);
            }
        }
        if let Some(bin) = cuda_bin {
            cmd.env("FP4PROBE_CUDA_BIN", bin);
        }
        cmd
    }

    fn run(&self, args: &[&str], cuda_bin: Option<&Path>) -> Output {
        let mut cmd = self.command(args, cuda_bin);
        cmd.stdout(Stdio::piped()).stderr(Stdio::piped());
        spawn(&mut cmd).wait_with_output().unwrap()
    }
}

fn text(o: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

#[test]
fn an_installed_binary_runs_every_command_from_outside_the_checkout() {
    let test = "an_installed_binary_runs_every_command_from_outside_the_checkout";
    let bin = Installed::new("run");
    let out = bin.cwd().join("out");
    let o = bin.run(
        &[
            "fragment",
            "--variant",
            VARIANT,
            "--backend",
            "emulator",
            "-o",
            out.to_str().unwrap(),
        ],
        None,
    );
    assert!(o.status.success(), "fragment: {}", text(&o));
    assert!(out.join(format!("{VARIANT}.json")).is_file());

    let root = checkout();
    let o = bin.run(
        &["codegen", "--check", "--root", root.to_str().unwrap()],
        None,
    );
    assert!(o.status.success(), "codegen --check --root: {}", text(&o));
    assert!(text(&o).contains("up to date"), "{}", text(&o));

    // Without --root, outside any checkout: exit 2, saying what to do.
    let o = bin.run(&["codegen", "--check"], None);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert!(text(&o).contains("--root DIR"), "{}", text(&o));

    let o = bin.run(&["attention", "--help"], None);
    assert!(o.status.success(), "attention --help: {}", text(&o));
    assert!(
        text(&o).contains("Usage: fp4probe attention"),
        "{}",
        text(&o)
    );

    let o = bin.run(&["--help"], None);
    for var in ["FP4PROBE_CUDA_BIN", "FP4PROBE_NVRTC", "FP4PROBE_KERNELS"] {
        assert!(text(&o).contains(var), "--help does not name {var}");
    }

    let Some(cuda_bin) = pinned_bin(test) else {
        return;
    };
    let sass = bin.cwd().join("sass");
    let o = bin.run(
        &[
            "sass",
            "--variant",
            VARIANT,
            "--target",
            "sm_90",
            "-o",
            sass.to_str().unwrap(),
        ],
        Some(&cuda_bin),
    );
    assert!(o.status.success(), "sass: {}", text(&o));
    assert!(text(&o).contains("HMMA"), "{}", text(&o));
    assert!(sass.join(format!("{VARIANT}.sm_90.sass.json")).is_file());
}

#[test]
fn without_reachable_tools_sass_exits_2_naming_fp4probe_cuda_bin() {
    let test = "without_reachable_tools_sass_exits_2_naming_fp4probe_cuda_bin";
    if Path::new("/usr/local/cuda/bin/ptxas").exists() {
        eprintln!("{test}: skipped: /usr/local/cuda/bin/ptxas is always searched");
        return;
    }
    let bin = Installed::new("notools");
    let o = bin.run(&["sass", "--variant", VARIANT, "--target", "sm_90"], None);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("ptxas not found"), "{err}");
    assert!(err.contains("FP4PROBE_CUDA_BIN"), "{err}");
}

#[test]
fn the_cache_folder_is_searched_for_the_tools() {
    // `.ci/install-cuda-tools --cache` puts the tools at $XDG_CACHE_HOME/fp4probe/tools in
    // the .tools layout (nvidia/<package>/bin); a link to the checkout's stands in for them.
    let test = "the_cache_folder_is_searched_for_the_tools";
    let Some(cuda_bin) = pinned_bin(test) else {
        return;
    };
    let bin = Installed::new("cache");
    let package = bin.cache.path().join("fp4probe/tools/nvidia/cu13");
    std::fs::create_dir_all(&package).unwrap();
    std::os::unix::fs::symlink(&cuda_bin, package.join("bin")).unwrap();
    let o = bin.run(&["sass", "--variant", VARIANT, "--target", "sm_90"], None);
    assert!(o.status.success(), "{}", text(&o));
    assert!(
        text(&o).contains(&package.join("bin/ptxas").display().to_string()),
        "{}",
        text(&o)
    );
}

/// Entries of `dir` named `fp4probe-*`.
fn fp4probe_folders(dir: &Path) -> Vec<String> {
    std::fs::read_dir(dir)
        .unwrap()
        .filter_map(|e| e.ok())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with("fp4probe-"))
        .collect()
}

#[test]
fn an_interrupt_removes_the_temporary_folders_and_exits_130() {
    let test = "an_interrupt_removes_the_temporary_folders_and_exits_130";
    let Some(cuda_bin) = pinned_bin(test) else {
        return;
    };
    let bin = Installed::new("sigint");
    // The run's own temp folder, so that only its folders are counted.
    let tmp = scratch("sigint-tmp");
    let mut child = spawn(
        bin.command(&["sass", "--all", "--target", "sm_90"], Some(&cuda_bin))
            .env("TMPDIR", tmp.path())
            .stdout(Stdio::null())
            .stderr(Stdio::null()),
    );
    // Interrupt while a tool runs in one of them.
    let started = Instant::now();
    while fp4probe_folders(tmp.path()).is_empty() {
        assert!(
            started.elapsed() < Duration::from_secs(60),
            "{test}: no temporary folder appeared"
        );
        if let Some(status) = child.try_wait().unwrap() {
            panic!("{test}: sass --all ended ({status}) before a folder was seen");
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    let kill = spawn(Command::new("kill").args(["-INT", &child.id().to_string()]))
        .wait()
        .unwrap();
    assert!(kill.success());
    let status = child.wait().unwrap();
    assert_eq!(status.code(), Some(130), "{test}: {status}");
    assert_eq!(fp4probe_folders(tmp.path()), Vec::<String>::new());
}

#[test]
fn the_built_in_kernel_sources_compile_to_the_same_cubin_as_the_checkouts() {
    // `kernels::tree` (the sources built into the binary, written to the cache folder)
    // against the checkout's kernels/: same text, same options but the include folder.
    let test = "the_built_in_kernel_sources_compile_to_the_same_cubin_as_the_checkouts";
    if !nvrtc_or_skip(test) {
        return;
    }
    use fp4probe::codegen::{nvrtc::Output, verify::compile_tile_kernel};
    let tree = fp4probe::kernels::tree().unwrap();
    assert_ne!(tree.path(), checkout().join("kernels"));
    let built_in = compile_tile_kernel(tree.path(), "sm_90", Output::Cubin).unwrap();
    let on_disk = compile_tile_kernel(&checkout().join("kernels"), "sm_90", Output::Cubin).unwrap();
    assert!(built_in.image.starts_with(b"\x7fELF"));
    assert!(
        built_in.image == on_disk.image,
        "{test}: the cubins differ ({} and {} bytes)",
        built_in.image.len(),
        on_disk.image.len()
    );
}
