//! Locating and running the offline CUDA tools (ptxas, cuobjdump, nvdisasm).
//!
//! Where a tool is looked for, first hit wins (the same order as [`SEARCH_ORDER`] states):
//! 1. the folder named by `FP4PROBE_CUDA_BIN`;
//! 2. `.tools/nvidia/*/bin` of the fp4probe checkout containing the current directory (of the
//!    current directory when it is in none), where `.ci/install-cuda-tools` puts the pinned
//!    `nvidia-cuda-*` wheels;
//! 3. `nvidia/*/bin` under the per-user cache folder's `tools` (`$XDG_CACHE_HOME/fp4probe/tools`
//!    or `~/.cache/fp4probe/tools`), where `.ci/install-cuda-tools --cache` puts them;
//! 4. every folder on `PATH`;
//! 5. `/usr/local/cuda/bin`.
//!
//! None of this depends on where the binary was built, so an installed binary finds the same
//! tools from any directory. None of it needs a GPU or a driver: ptxas turns PTX into a cubin,
//! cuobjdump or nvdisasm turns a cubin into SASS text. Their files go to a temporary folder
//! (`crate::tempdir`) that is removed on every way out, an interrupt included.

use crate::isa::Target;
use crate::tempdir::TempDir;
use anyhow::{Context, bail};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// Environment variable naming a directory that holds ptxas, cuobjdump and nvdisasm.
pub const CUDA_BIN_ENV: &str = "FP4PROBE_CUDA_BIN";

/// Where the tools are looked for, for messages: the module doc's order, in one line.
pub const SEARCH_ORDER: &str = "searched $FP4PROBE_CUDA_BIN, .tools/nvidia/*/bin of the \
     fp4probe checkout containing the current directory, $XDG_CACHE_HOME/fp4probe/tools (or \
     ~/.cache/fp4probe/tools), PATH, /usr/local/cuda/bin; install them with \
     .ci/install-cuda-tools [--cache] or set FP4PROBE_CUDA_BIN to their folder";

/// Why [`assemble`] produced no cubin.
#[derive(Debug, thiserror::Error)]
pub enum AssembleError {
    /// No ptxas in any of the places [`find_tool`] looks.
    #[error("ptxas not found ({SEARCH_ORDER})")]
    NotFound,
    /// ptxas ran and refused the module; `log` is everything it printed.
    #[error("ptxas rejected the module:\n{log}")]
    Rejected { log: String },
    /// The temporary files could not be written or read, or ptxas could not be started.
    #[error("running ptxas: {0}")]
    Io(#[from] std::io::Error),
}

/// Every directory [`find_tool`] searches, in order (for messages and diagnostics).
pub fn search_dirs() -> Vec<PathBuf> {
    let mut dirs = Vec::new();
    if let Some(d) = std::env::var_os(CUDA_BIN_ENV).filter(|d| !d.is_empty()) {
        dirs.push(PathBuf::from(d));
    }
    dirs.extend(crate::locate::pinned_dirs("bin"));
    if let Some(path) = std::env::var_os("PATH") {
        dirs.extend(std::env::split_paths(&path).filter(|p| !p.as_os_str().is_empty()));
    }
    dirs.push(PathBuf::from("/usr/local/cuda/bin"));
    let mut seen = std::collections::HashSet::new();
    dirs.retain(|d| seen.insert(d.clone()));
    dirs
}

fn is_executable(p: &Path) -> bool {
    let Ok(meta) = std::fs::metadata(p) else {
        return false;
    };
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        meta.is_file() && meta.permissions().mode() & 0o111 != 0
    }
    #[cfg(not(unix))]
    {
        meta.is_file()
    }
}

/// The path of tool `name` (`ptxas`, `cuobjdump`, `nvdisasm`), searched as the module doc says.
pub fn find_tool(name: &str) -> Option<PathBuf> {
    let file = format!("{name}{}", std::env::consts::EXE_SUFFIX);
    search_dirs()
        .into_iter()
        .map(|d| d.join(&file))
        .find(|p| is_executable(p))
}

/// The version of the ptxas [`find_tool`] finds, e.g. `13.5.37` (from `V13.5.37` in
/// `ptxas --version`), or the `release` line as printed when there is no `V` number.
pub fn ptxas_version() -> Option<String> {
    let out = Command::new(find_tool("ptxas")?)
        .arg("--version")
        .output()
        .ok()?;
    let text = String::from_utf8_lossy(&out.stdout);
    let line = text.lines().find(|l| l.contains("release"))?;
    let full = line
        .split(|c: char| c == ',' || c.is_whitespace())
        .find_map(|w| w.strip_prefix('V'))
        .filter(|v| v.starts_with(|c: char| c.is_ascii_digit()));
    Some(full.unwrap_or(line.trim()).to_string())
}

/// Names of the temporary folders the tools run in: `/tmp/fp4probe-<random>`.
const TEMP_PREFIX: &str = "fp4probe-";

fn log_of(out: &Output) -> String {
    let mut log = String::from_utf8_lossy(&out.stderr).into_owned();
    let stdout = String::from_utf8_lossy(&out.stdout);
    if !stdout.trim().is_empty() {
        if !log.is_empty() && !log.ends_with('\n') {
            log.push('\n');
        }
        log += &stdout;
    }
    if log.trim().is_empty() {
        log = format!("(no output; {})", out.status);
    }
    log
}

/// Assemble a PTX module for `target` with the pinned (or otherwise found) ptxas.
pub fn assemble(ptx: &str, target: Target) -> Result<Vec<u8>, AssembleError> {
    let ptxas = find_tool("ptxas").ok_or(AssembleError::NotFound)?;
    assemble_with(&ptxas, ptx, target)
}

/// `ptxas -arch=<target> probe.ptx -o probe.cubin` with a given ptxas, run inside a temporary
/// directory so that its messages name `probe.ptx`. On refusal the error carries everything
/// ptxas printed.
pub fn assemble_with(ptxas: &Path, ptx: &str, target: Target) -> Result<Vec<u8>, AssembleError> {
    let dir = TempDir::new(TEMP_PREFIX)?;
    std::fs::write(dir.path("probe.ptx"), ptx)?;
    let out = Command::new(ptxas)
        .current_dir(dir.root())
        // ptxas's own scratch files (tmpxft_*) go into the folder too, and with it.
        .env("TMPDIR", dir.root())
        .arg(format!("-arch={target}"))
        .args(["probe.ptx", "-o", "probe.cubin"])
        .output()?;
    if !out.status.success() {
        return Err(AssembleError::Rejected { log: log_of(&out) });
    }
    Ok(std::fs::read(dir.path("probe.cubin"))?)
}

/// SASS of a cubin: `cuobjdump --dump-sass`, or `nvdisasm` where there is no cuobjdump.
pub fn sass(cubin: &[u8]) -> anyhow::Result<String> {
    let Some(tool) = find_tool("cuobjdump").or_else(|| find_tool("nvdisasm")) else {
        bail!("neither cuobjdump nor nvdisasm found ({SEARCH_ORDER})");
    };
    disassemble_with(&tool, cubin)
}

/// Disassemble a cubin with a given tool: `cuobjdump --dump-sass`, or `nvdisasm -c` when the
/// tool's name is not cuobjdump.
pub fn disassemble_with(tool: &Path, cubin: &[u8]) -> anyhow::Result<String> {
    let is_cuobjdump = tool
        .file_stem()
        .is_some_and(|s| s.to_string_lossy().starts_with("cuobjdump"));
    let dir = TempDir::new(TEMP_PREFIX).context("creating a temporary directory")?;
    let input = dir.path("probe.cubin");
    std::fs::write(&input, cubin).with_context(|| format!("writing {}", input.display()))?;
    let out = Command::new(tool)
        .env("TMPDIR", dir.root())
        .arg(if is_cuobjdump { "--dump-sass" } else { "-c" })
        .arg(&input)
        .output()
        .with_context(|| format!("running {}", tool.display()))?;
    if !out.status.success() {
        bail!("{} failed:\n{}", tool.display(), log_of(&out));
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn missing_tool_is_none() {
        assert_eq!(find_tool("fp4probe-no-such-tool"), None);
    }
}
