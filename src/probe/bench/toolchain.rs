//! Which ptxas assembles bench kernels, and which disassembler reads them back.

use crate::isa::Target;
use crate::tempdir::TempDir;
use crate::tools::{self, AssembleError};
use anyhow::{Result, anyhow};
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};
use std::process::Command;

/// Where the ptxas in use was found.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ToolSource {
    /// The directory named by `FP4PROBE_CUDA_BIN`.
    Env,
    /// `PATH` or `/usr/local/cuda/bin`: the CUDA installation of this machine.
    System,
    /// The pinned pip wheels (`.ci/install-cuda-tools`): under `.tools/`, or in the cache
    /// folder (`crate::locate::pinned_roots`).
    Pinned,
}

/// The ptxas that assembles bench kernels and the disassembler that reads them back.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Toolchain {
    pub ptxas: PathBuf,
    /// cuobjdump (preferred) or nvdisasm; `None` where neither exists.
    pub disassembler: Option<PathBuf>,
    /// `13.0.88`, as `ptxas --version` prints it.
    pub version: Option<String>,
    pub source: ToolSource,
}

fn executable_in(dir: &Path, name: &str) -> Option<PathBuf> {
    let p = dir.join(format!("{name}{}", std::env::consts::EXE_SUFFIX));
    let meta = std::fs::metadata(&p).ok()?;
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        (meta.is_file() && meta.permissions().mode() & 0o111 != 0).then_some(p)
    }
    #[cfg(not(unix))]
    {
        meta.is_file().then_some(p)
    }
}

fn ptxas_version_of(ptxas: &Path) -> Option<String> {
    let out = Command::new(ptxas).arg("--version").output().ok()?;
    let text = String::from_utf8_lossy(&out.stdout);
    let line = text.lines().find(|l| l.contains("release"))?;
    line.split(|c: char| c == ',' || c.is_whitespace())
        .find_map(|w| w.strip_prefix('V'))
        .filter(|v| v.starts_with(|c: char| c.is_ascii_digit()))
        .map(str::to_string)
        .or_else(|| Some(line.trim().to_string()))
}

impl Toolchain {
    /// The toolchain around a given ptxas: cuobjdump from the same directory if there is one,
    /// else wherever `tools::find_tool` finds cuobjdump, else nvdisasm.
    pub fn at(ptxas: PathBuf, source: ToolSource) -> Self {
        let dir = ptxas.parent().map(Path::to_path_buf).unwrap_or_default();
        let disassembler = executable_in(&dir, "cuobjdump")
            .or_else(|| tools::find_tool("cuobjdump"))
            .or_else(|| executable_in(&dir, "nvdisasm"))
            .or_else(|| tools::find_tool("nvdisasm"));
        let version = ptxas_version_of(&ptxas);
        Toolchain {
            ptxas,
            disassembler,
            version,
            source,
        }
    }

    /// For a run on the device: the system's ptxas first (the one installed with, and so
    /// matching, the driver): `FP4PROBE_CUDA_BIN`, then `PATH`, then `/usr/local/cuda/bin`;
    /// the pinned one under `.tools/` only where there is no other.
    pub fn for_device() -> Option<Self> {
        let env = std::env::var_os(tools::CUDA_BIN_ENV)
            .filter(|d| !d.is_empty())
            .map(PathBuf::from);
        if let Some(p) = env.as_deref().and_then(|d| executable_in(d, "ptxas")) {
            return Some(Self::at(p, ToolSource::Env));
        }
        let dirs = tools::search_dirs();
        let system = dirs
            .iter()
            .filter(|d| Some(d.as_path()) != env.as_deref() && !crate::locate::is_pinned(d))
            .find_map(|d| executable_in(d, "ptxas"));
        if let Some(p) = system {
            return Some(Self::at(p, ToolSource::System));
        }
        dirs.iter()
            .filter(|d| crate::locate::is_pinned(d))
            .find_map(|d| executable_in(d, "ptxas"))
            .map(|p| Self::at(p, ToolSource::Pinned))
    }

    /// Offline (tests, CI, `--sass-only`): the order of `tools::find_tool`, pinned first.
    pub fn offline() -> Option<Self> {
        let p = tools::find_tool("ptxas")?;
        let source = if std::env::var_os(tools::CUDA_BIN_ENV)
            .is_some_and(|d| !d.is_empty() && p.starts_with(&d))
        {
            ToolSource::Env
        } else if p.parent().is_some_and(crate::locate::is_pinned) {
            ToolSource::Pinned
        } else {
            ToolSource::System
        };
        Some(Self::at(p, source))
    }

    /// (major, minor) of the ptxas version.
    pub fn version_pair(&self) -> Option<(u32, u32)> {
        let v = self.version.as_deref()?;
        let mut it = v.split('.');
        Some((it.next()?.parse().ok()?, it.next()?.parse().ok()?))
    }

    /// `ptxas -arch=<target>`: the cubin, or everything ptxas printed.
    pub fn assemble(&self, ptx: &str, target: Target) -> Result<Vec<u8>, AssembleError> {
        tools::assemble_with(&self.ptxas, ptx, target)
    }

    /// `ptxas -arch=<target>` as [`Toolchain::assemble`], also returning what ptxas printed on
    /// success: its advisories (e.g. C7515, wgmma serialised) are part of what the guard checks.
    pub fn assemble_logged(
        &self,
        ptx: &str,
        target: Target,
    ) -> Result<(Vec<u8>, String), AssembleError> {
        let dir = TempDir::new("fp4probe-")?;
        std::fs::write(dir.path("bench.ptx"), ptx)?;
        let out = Command::new(&self.ptxas)
            .current_dir(dir.root())
            // ptxas's own scratch files (tmpxft_*) go into the folder too, and with it.
            .env("TMPDIR", dir.root())
            .arg(format!("-arch={target}"))
            .args(["bench.ptx", "-o", "bench.cubin"])
            .output()?;
        let mut log = String::from_utf8_lossy(&out.stdout).into_owned();
        log += &String::from_utf8_lossy(&out.stderr);
        if !out.status.success() {
            return Err(AssembleError::Rejected { log });
        }
        Ok((std::fs::read(dir.path("bench.cubin"))?, log))
    }

    /// The SASS of a cubin (`cuobjdump --dump-sass`, or `nvdisasm`).
    pub fn sass(&self, cubin: &[u8]) -> Result<String> {
        let tool = self.disassembler.as_ref().ok_or_else(|| {
            anyhow!(
                "neither cuobjdump nor nvdisasm found ({})",
                tools::SEARCH_ORDER
            )
        })?;
        tools::disassemble_with(tool, cubin)
    }

    /// "ptxas 13.0.88 (system: /usr/local/cuda/bin/ptxas)".
    pub fn describe(&self) -> String {
        format!(
            "ptxas {} ({}: {})",
            self.version.as_deref().unwrap_or("of unknown version"),
            self.source.name(),
            self.ptxas.display()
        )
    }
}

impl ToolSource {
    pub fn name(self) -> &'static str {
        match self {
            ToolSource::Env => tools::CUDA_BIN_ENV,
            ToolSource::System => "system",
            ToolSource::Pinned => "pinned",
        }
    }
}
