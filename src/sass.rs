//! What a variant lowers to in SASS: the probe kernel of a variant (`probe::ptx::fragment_kernel`
//! with default scale selectors) assembled by ptxas for a target, disassembled, and read.
//!
//! Offline (no GPU, any target, `sm_120a` included) with the pinned ptxas/cuobjdump from
//! `.ci/install-cuda-tools`, or with the machine's own CUDA toolkit ([`ToolchainKind::System`]),
//! for example on the device for the device's target ([`on_device`]).
//!
//! What is read from the listing (and nothing beyond it):
//! - `listing`: every instruction of the kernel in address order, without addresses, encodings
//!   or the trailing `;`; the alignment `NOP`s after the final self-branch are dropped.
//! - `histogram`: over the listing, each opcode (predicate dropped) counted under its base
//!   (`HMMA`) and under its full modifier string (`HMMA.16816.F32`); an opcode without
//!   modifiers is one key.
//! - `tensor_instructions`: every instruction whose base opcode ends in `MMA` (HMMA, IMMA,
//!   QMMA, OMMA, DMMA, BMMA), full text.
//! - `mma_region`: see [`mma_region`] for the rule.
//! - `verdict`: see [`Lowering`].

use crate::formats::ElemType;
use crate::isa::{BitOp, Target, Variant};
use crate::outfile::{JSON_MARKER, Ours, Outputs};
use crate::probe::ptx::fragment_kernel;
use crate::tools::{self, AssembleError};
use anyhow::{Context, Result, bail};
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::process::Command;

/// `schema` of a SASS report file.
pub const SCHEMA: &str = "fp4probe.sass/1";

/// Which ptxas and disassembler to run.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum ToolchainKind {
    /// fp4probe's usual search (`tools::find_tool`): `$FP4PROBE_CUDA_BIN`, then the pinned pip
    /// tools (`.ci/install-cuda-tools`) under the checkout's `.tools/`, then in the cache
    /// folder, then PATH, then /usr/local/cuda/bin.
    Pinned,
    /// The machine's own CUDA toolkit: PATH, then /usr/local/cuda/bin.
    System,
}

impl ToolchainKind {
    pub fn name(self) -> &'static str {
        match self {
            ToolchainKind::Pinned => "pinned",
            ToolchainKind::System => "system",
        }
    }
}

/// Which disassembler produced the text.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Disassembler {
    /// `cuobjdump --dump-sass`.
    Cuobjdump,
    /// `nvdisasm -c` (code sections only), where there is no cuobjdump.
    Nvdisasm,
}

/// A ptxas and a disassembler, with their versions.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Toolchain {
    pub kind: ToolchainKind,
    pub ptxas: PathBuf,
    pub ptxas_version: String,
    pub disassembler: Disassembler,
    pub disassembler_path: PathBuf,
    pub disassembler_version: String,
}

fn executable(p: &Path) -> bool {
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

/// PATH, then /usr/local/cuda/bin.
fn system_dirs() -> Vec<PathBuf> {
    let mut dirs: Vec<PathBuf> = std::env::var_os("PATH")
        .map(|p| {
            std::env::split_paths(&p)
                .filter(|d| !d.as_os_str().is_empty())
                .collect()
        })
        .unwrap_or_default();
    dirs.push(PathBuf::from("/usr/local/cuda/bin"));
    dirs
}

fn find_in(kind: ToolchainKind, name: &str) -> Option<PathBuf> {
    match kind {
        ToolchainKind::Pinned => tools::find_tool(name),
        ToolchainKind::System => {
            let file = format!("{name}{}", std::env::consts::EXE_SUFFIX);
            system_dirs()
                .into_iter()
                .map(|d| d.join(&file))
                .find(|p| executable(p))
        }
    }
}

/// `13.5.37` from the `release ..., V13.5.37` line of `<tool> --version`, or that line as
/// printed when it has no `V` number, or `unknown`.
pub fn tool_version(tool: &Path) -> String {
    let Ok(out) = Command::new(tool).arg("--version").output() else {
        return "unknown".into();
    };
    let text = String::from_utf8_lossy(&out.stdout);
    let Some(line) = text.lines().find(|l| l.contains("release")) else {
        return "unknown".into();
    };
    line.split(|c: char| c == ',' || c.is_whitespace())
        .find_map(|w| w.strip_prefix('V'))
        .filter(|v| v.starts_with(|c: char| c.is_ascii_digit()))
        .unwrap_or(line.trim())
        .to_string()
}

/// `path` relative to the current directory where it lies below it (so reports written in the
/// repository do not carry this machine's absolute paths), else as given.
fn shown_path(path: &Path) -> String {
    std::env::current_dir()
        .ok()
        .and_then(|cwd| path.strip_prefix(cwd).ok().map(Path::to_path_buf))
        .unwrap_or_else(|| path.to_path_buf())
        .display()
        .to_string()
}

impl Toolchain {
    /// Find ptxas and cuobjdump (or nvdisasm) of `kind` and ask them their versions.
    pub fn find(kind: ToolchainKind) -> Result<Self> {
        let where_ = match kind {
            ToolchainKind::Pinned => tools::SEARCH_ORDER.to_string(),
            ToolchainKind::System => "searched PATH and /usr/local/cuda/bin".to_string(),
        };
        let Some(ptxas) = find_in(kind, "ptxas") else {
            bail!(
                "ptxas not found for the {} toolchain ({where_})",
                kind.name()
            );
        };
        let (disassembler, disassembler_path) = if let Some(p) = find_in(kind, "cuobjdump") {
            (Disassembler::Cuobjdump, p)
        } else if let Some(p) = find_in(kind, "nvdisasm") {
            (Disassembler::Nvdisasm, p)
        } else {
            bail!(
                "neither cuobjdump nor nvdisasm found for the {} toolchain ({where_})",
                kind.name()
            );
        };
        Ok(Toolchain {
            kind,
            ptxas_version: tool_version(&ptxas),
            disassembler_version: tool_version(&disassembler_path),
            ptxas,
            disassembler,
            disassembler_path,
        })
    }

    /// One line: `pinned: ptxas 13.5.37 (.tools/...), cuobjdump 13.5.37 (.tools/...)`.
    pub fn describe(&self) -> String {
        format!(
            "{}: ptxas {} ({}), {} {} ({})",
            self.kind.name(),
            self.ptxas_version,
            shown_path(&self.ptxas),
            self.disassembler_name(),
            self.disassembler_version,
            shown_path(&self.disassembler_path)
        )
    }

    pub fn disassembler_name(&self) -> &'static str {
        match self.disassembler {
            Disassembler::Cuobjdump => "cuobjdump",
            Disassembler::Nvdisasm => "nvdisasm",
        }
    }

    /// Assemble with this toolchain's ptxas (see `tools::assemble_with`).
    pub fn assemble(&self, ptx: &str, target: Target) -> Result<Vec<u8>, AssembleError> {
        tools::assemble_with(&self.ptxas, ptx, target)
    }

    /// The SASS text of a cubin, with this toolchain's disassembler.
    pub fn disassemble(&self, cubin: &[u8]) -> Result<String> {
        tools::disassemble_with(&self.disassembler_path, cubin)
    }
}

/// The line of a ptxas log that says why: the first line mentioning `error`, else the first
/// non-empty line.
pub fn first_error_line(log: &str) -> String {
    let lines = || log.lines().map(str::trim).filter(|l| !l.is_empty());
    lines()
        .find(|l| l.contains("error"))
        .or_else(|| lines().next())
        .unwrap_or("(empty log)")
        .to_string()
}

// ---------------------------------------------------------------------------------------------
// Parsing disassembler output.

/// One instruction of a disassembly.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Instr {
    pub addr: u64,
    /// The instruction as printed, predicate included, without `;` and the encoding comment:
    /// `HMMA.16816.F32 R4, R4, R18, RZ`, `@!UPT UIADD3 URZ, URZ, URZ, URZ`.
    pub text: String,
}

impl Instr {
    /// The predicate guard, if any: `@P0`, `@!UPT`.
    pub fn predicate(&self) -> Option<&str> {
        self.text
            .starts_with('@')
            .then(|| self.text.split_whitespace().next().unwrap_or(""))
    }
    /// The full opcode with its modifiers, predicate dropped: `HMMA.16816.F32`.
    pub fn opcode(&self) -> &str {
        let mut words = self.text.split_whitespace();
        let first = words.next().unwrap_or("");
        if first.starts_with('@') {
            words.next().unwrap_or("")
        } else {
            first
        }
    }
    /// The base opcode: `HMMA`.
    pub fn base(&self) -> &str {
        base_of(self.opcode())
    }
    /// Never executes: guarded by the constant-false predicate (`@!PT`, `@!UPT`), which ptxas
    /// uses as a scheduling filler.
    pub fn never_executes(&self) -> bool {
        matches!(self.predicate(), Some("@!PT" | "@!UPT"))
    }
    pub fn is_tensor(&self) -> bool {
        self.base().ends_with("MMA")
    }
    /// A data-type conversion: F2FP, F2F, F2I, F2IP, I2F, I2FP, I2I, I2IP.
    pub fn is_conversion(&self) -> bool {
        is_conversion_base(self.base())
    }
}

fn base_of(opcode: &str) -> &str {
    opcode.split('.').next().unwrap_or(opcode)
}

fn is_conversion_base(base: &str) -> bool {
    base.starts_with("F2") || base.starts_with("I2")
}

/// A parsed disassembly: instructions in address order, and labels (nvdisasm) to addresses.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Disassembly {
    pub instrs: Vec<Instr>,
    pub labels: HashMap<String, u64>,
}

/// Parse `cuobjdump --dump-sass` or `nvdisasm` text. An instruction line is
/// `/*<hex address>*/ <instruction> ;` optionally followed by an encoding comment
/// `/* 0x... */`; cuobjdump's second encoding line, headers, section directives (`.byte` data
/// lines) and blank lines are skipped; `name:` lines (nvdisasm labels) name the next address.
pub fn parse_sass(text: &str) -> Disassembly {
    let mut d = Disassembly::default();
    let mut pending_labels: Vec<String> = Vec::new();
    for raw in text.lines() {
        let line = raw.trim();
        if let Some(rest) = line.strip_prefix("/*") {
            let Some((addr, rest)) = rest.split_once("*/") else {
                continue;
            };
            if addr.is_empty() || !addr.chars().all(|c| c.is_ascii_hexdigit()) {
                continue; // `/* 0x000fe20000000800 */`: an encoding line.
            }
            let Ok(addr) = u64::from_str_radix(addr, 16) else {
                continue;
            };
            let body = match rest.find("/*") {
                Some(i) => &rest[..i],
                None => rest,
            };
            let body = body.trim().trim_end_matches(';').trim();
            if body.is_empty() || body.starts_with('.') {
                continue; // data directives in nvdisasm's non-code sections
            }
            for l in pending_labels.drain(..) {
                d.labels.insert(l, addr);
            }
            d.instrs.push(Instr {
                addr,
                text: body.to_string(),
            });
        } else if let Some(label) = line.strip_suffix(':')
            && !label.is_empty()
            && !label.contains(char::is_whitespace)
            && !label.starts_with("//")
        {
            pending_labels.push(label.to_string());
        }
    }
    d.instrs.sort_by_key(|i| i.addr);
    d.instrs.dedup_by_key(|i| i.addr);
    d
}

impl Disassembly {
    /// The kernel's instructions without the alignment NOPs at the end.
    pub fn trimmed(&self) -> &[Instr] {
        let end = self
            .instrs
            .iter()
            .rposition(|i| i.base() != "NOP")
            .map_or(0, |i| i + 1);
        &self.instrs[..end]
    }

    /// Index of the instruction at `addr`.
    fn index_of(&self, addr: u64) -> Option<usize> {
        self.instrs.binary_search_by_key(&addr, |i| i.addr).ok()
    }

    /// Where a `CALL` goes: `CALL.REL.NOINC 0x1b0` (cuobjdump) or
    /// ``CALL.REL.NOINC `($__internal_0_...)`` (nvdisasm).
    fn call_target(&self, call: &Instr) -> Option<u64> {
        let last = call.text.split_whitespace().last()?;
        if let Some(hex) = last.strip_prefix("0x") {
            return u64::from_str_radix(hex, 16).ok();
        }
        let name = last.trim_start_matches('`').trim_start_matches('(');
        let name = name.trim_end_matches(')');
        self.labels.get(name).copied()
    }

    /// The mma region. Rule: in address order, take the instructions strictly after the last
    /// global load (`LDG`, or generic `LD`) that precedes the first global store (`STG`, or
    /// generic `ST`), up to that store. Every `CALL` inside is followed by the body of the
    /// subroutine it calls (from its target up to and including the first `RET`; nested calls
    /// likewise, at most 4 deep), because ptxas emulates some variants in an internal
    /// subroutine. `NOP`s and never-executed fillers (`@!PT`, `@!UPT`) are left out.
    ///
    /// The probe kernel loads every operand (scales too) with `ld.global` before the single
    /// `mma.sync` and stores D with `st.global` after it, so this is what the `mma.sync` became,
    /// conversions included, plus whatever address arithmetic for the stores ptxas scheduled
    /// there. Work ptxas hoists above the last load would not be in it.
    pub fn mma_region(&self) -> Vec<&Instr> {
        let is_load = |i: &Instr| matches!(i.base(), "LDG" | "LD");
        let is_store = |i: &Instr| matches!(i.base(), "STG" | "ST");
        let instrs = self.trimmed();
        let first_store = instrs.iter().position(is_store).unwrap_or(instrs.len());
        let start = instrs[..first_store]
            .iter()
            .rposition(is_load)
            .map_or(0, |i| i + 1);
        let mut out = Vec::new();
        self.collect(&instrs[start..first_store], 0, &mut out);
        out
    }

    fn collect<'a>(&'a self, span: &'a [Instr], depth: u32, out: &mut Vec<&'a Instr>) {
        for i in span {
            if i.base() == "NOP" || i.never_executes() {
                continue;
            }
            out.push(i);
            if i.base() == "CALL" && depth < 4 {
                let Some(start) = self.call_target(i).and_then(|a| self.index_of(a)) else {
                    continue;
                };
                let end = self.instrs[start..]
                    .iter()
                    .position(|x| x.base() == "RET")
                    .map_or(self.instrs.len(), |p| start + p + 1);
                self.collect(&self.instrs[start..end], depth + 1, out);
            }
        }
    }
}

/// Opcode counts: each under its base and under its full modifier string (one key when they
/// are the same).
pub fn histogram<'a>(instrs: impl IntoIterator<Item = &'a Instr>) -> BTreeMap<String, usize> {
    let mut h = BTreeMap::new();
    for i in instrs {
        let (full, base) = (i.opcode(), i.base());
        *h.entry(base.to_string()).or_insert(0) += 1;
        if full != base {
            *h.entry(full.to_string()).or_insert(0) += 1;
        }
    }
    h
}

// ---------------------------------------------------------------------------------------------
// The verdict.

/// How the `mma.sync` was lowered, from the listing alone.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Lowering {
    /// Exactly one tensor instruction, its type suffix names the A and B types (and a b1
    /// variant's operation), and no conversion instruction in the mma region.
    Native,
    /// Several tensor instructions, each naming the A and B types, no conversion.
    Split,
    /// Tensor instructions that do not name the A/B types (they work on other, wider types),
    /// or conversion instructions in the mma region.
    Emulated,
    /// No tensor instruction at all.
    NoTensor,
}

/// SASS spelling of an element type in a tensor instruction's suffix (`E4M3`, `BF16`, `S8`),
/// where it has one.
fn sass_type(t: ElemType) -> Option<&'static str> {
    Some(match t {
        ElemType::Bf16 => "BF16",
        ElemType::Tf32 => "TF32",
        ElemType::S8 => "S8",
        ElemType::U8 => "U8",
        ElemType::S4 => "S4",
        ElemType::U4 => "U4",
        ElemType::E4m3 => "E4M3",
        ElemType::E5m2 => "E5M2",
        ElemType::E3m2 => "E3M2",
        ElemType::E2m3 => "E2M3",
        ElemType::E2m1 => "E2M1",
        _ => return None,
    })
}

/// Whether a tensor instruction's opcode names the variant's A and B types: the A type and
/// then the B type among its modifiers (`QMMA.16832.F32.E4M3.E2M1`, `IMMA.16832.S8.U8`); HMMA
/// names both with one suffix (`HMMA.16816.F32.BF16`) and f16 inputs with none (no BF16/TF32);
/// f64 is DMMA; b1 is BMMA with the variant's AND/XOR.
pub fn names_input_types(opcode: &str, v: &Variant) -> bool {
    let mut parts = opcode.split('.');
    let base = parts.next().unwrap_or("");
    let mods: Vec<&str> = parts.collect();
    match (v.a, v.b) {
        (ElemType::F16, ElemType::F16) => {
            base == "HMMA" && !mods.iter().any(|m| matches!(*m, "BF16" | "TF32"))
        }
        (ElemType::F64, ElemType::F64) => base == "DMMA",
        (ElemType::B1, ElemType::B1) => {
            let op = match v.bitop {
                Some(BitOp::Xor) => "XOR",
                _ => "AND",
            };
            base == "BMMA" && mods.contains(&op)
        }
        (a, b) => {
            let (Some(ta), Some(tb)) = (sass_type(a), sass_type(b)) else {
                return false;
            };
            if base == "HMMA" {
                // One suffix for both: HMMA.16816.F32.BF16, HMMA.1688.F32.TF32.
                return ta == tb && mods.contains(&ta);
            }
            mods.iter()
                .position(|m| *m == ta)
                .is_some_and(|i| mods[i + 1..].contains(&tb))
        }
    }
}

/// `2 HMMA.16816.F32` style groups, in order of first appearance.
fn counted<'a>(items: impl IntoIterator<Item = &'a str>) -> Vec<(String, usize)> {
    let mut out: Vec<(String, usize)> = Vec::new();
    for s in items {
        match out.iter_mut().find(|(k, _)| k == s) {
            Some((_, n)) => *n += 1,
            None => out.push((s.to_string(), 1)),
        }
    }
    out
}

fn join_counts(groups: &[(String, usize)]) -> String {
    groups
        .iter()
        .map(|(k, n)| format!("{n} {k}"))
        .collect::<Vec<_>>()
        .join(" + ")
}

/// The classification and its one-line statement.
pub fn verdict(v: &Variant, tensor: &[&Instr], region: &[&Instr]) -> (Lowering, String) {
    let wanted = match v.bitop {
        Some(BitOp::Xor) => "XOR".to_string(),
        Some(BitOp::And) => "AND".to_string(),
        None => format!("{}.{}", v.a, v.b),
    };
    verdict_with(tensor, region, |op| names_input_types(op, v), &wanted)
}

/// [`verdict`] for any instruction family: `names` says whether a tensor opcode names the
/// input types, `wanted` spells them for the statement (`bf16.bf16`, `AND`).
pub fn verdict_with(
    tensor: &[&Instr],
    region: &[&Instr],
    names: impl Fn(&str) -> bool,
    wanted: &str,
) -> (Lowering, String) {
    let conversions: Vec<&str> = region
        .iter()
        .filter(|i| i.is_conversion())
        .map(|i| i.base())
        .collect();
    let other = {
        let mut c = counted(
            region
                .iter()
                .filter(|i| !i.is_tensor() && !i.is_conversion())
                .map(|i| i.base()),
        );
        c.sort_by_key(|x| std::cmp::Reverse(x.1));
        c.truncate(4);
        c.iter()
            .map(|(k, n)| format!("{n} {k}"))
            .collect::<Vec<_>>()
            .join(", ")
    };
    let calls = region.iter().any(|i| i.base() == "CALL");
    if tensor.is_empty() {
        return (
            Lowering::NoTensor,
            format!(
                "no tensor instruction: {} instructions in the mma region ({other})",
                region.len()
            ),
        );
    }
    let groups = counted(tensor.iter().map(|i| i.opcode()));
    let all_named = tensor.iter().all(|i| names(i.opcode()));
    if all_named && conversions.is_empty() {
        return if tensor.len() == 1 {
            (
                Lowering::Native,
                format!("native: {}", join_counts(&groups)),
            )
        } else {
            (Lowering::Split, format!("split: {}", join_counts(&groups)))
        };
    }
    let conv = if conversions.is_empty() {
        if all_named {
            "no conversion instruction".to_string()
        } else {
            format!("no conversion instruction; the tensor opcode does not name {wanted}")
        }
    } else {
        let c = counted(conversions.iter().copied());
        format!(
            "{} conversions",
            c.iter()
                .map(|(k, n)| format!("{n} {k}"))
                .collect::<Vec<_>>()
                .join(", ")
        )
    };
    let sep = if conversions.is_empty() { ", " } else { " + " };
    let mut s = format!("emulated: {}{sep}{conv}", join_counts(&groups));
    if !other.is_empty() {
        s += &format!("; also in the mma region: {other}");
    }
    if calls {
        s += " (in a called subroutine)";
    }
    (Lowering::Emulated, s)
}

// ---------------------------------------------------------------------------------------------
// Reports.

/// What one variant lowered to for one target with one toolchain.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SassReport {
    pub schema: String,
    /// Catalog id.
    pub variant: String,
    /// The `mma.sync` instruction of the probe kernel.
    pub instruction: String,
    pub target: Target,
    pub toolchain: ToolchainKind,
    pub ptxas: String,
    pub ptxas_version: String,
    pub disassembler: Disassembler,
    pub disassembler_path: String,
    pub disassembler_version: String,
    /// The GPU whose target was used, where the target came from the device.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub device: Option<String>,
    /// Every instruction of the kernel (see the module doc).
    pub listing: Vec<String>,
    /// See [`Disassembly::mma_region`].
    pub mma_region: Vec<String>,
    /// Over `listing`; see the module doc.
    pub histogram: BTreeMap<String, usize>,
    pub tensor_instructions: Vec<String>,
    /// wgmma only: the mma region's warpgroup instructions in order (`WARPGROUP.ARRIVE`, the
    /// GMMA, `WARPGROUP.DEPBAR`, `WARPSYNC`, ...); see `wgmma::sass::warpgroup_sequence`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub warpgroup_sequence: Option<Vec<String>>,
    pub lowering: Lowering,
    /// One line: `native: 1 QMMA.SF.16832.F32.E2M1.E2M1.E8`,
    /// `emulated: 2 HMMA.16816.F32 + 12 F2FP conversions; ...`.
    pub verdict: String,
    pub tool_version: String,
    /// When it was made (UTC); empty for reports that must regenerate byte for byte (the
    /// offline wgmma listings).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub date: String,
    pub command: String,
}

impl SassReport {
    /// Build the report from disassembler text.
    pub fn from_sass(v: &Variant, target: Target, tc: &Toolchain, sass: &str) -> Result<Self> {
        let instruction = fragment_kernel(v, target, Default::default())
            .lines()
            .map(str::trim)
            .find(|l| l.starts_with("mma."))
            .unwrap_or_default()
            .to_string();
        Self::from_listing(v.id(), instruction, target, tc, sass, |tensor, region| {
            verdict(v, tensor, region)
        })
    }

    /// Build the report of the kernel of `variant` (whose tensor instruction is
    /// `instruction`) from disassembler text, classified by `classify(tensor, region)`.
    pub fn from_listing(
        variant: String,
        instruction: String,
        target: Target,
        tc: &Toolchain,
        sass: &str,
        classify: impl Fn(&[&Instr], &[&Instr]) -> (Lowering, String),
    ) -> Result<Self> {
        let d = parse_sass(sass);
        let listing = d.trimmed();
        if listing.is_empty() {
            bail!(
                "{} printed no instructions for {variant} at {target}",
                tc.disassembler_name(),
            );
        }
        let region = d.mma_region();
        let tensor: Vec<&Instr> = listing.iter().filter(|i| i.is_tensor()).collect();
        let (lowering, verdict) = classify(&tensor, &region);
        Ok(SassReport {
            schema: SCHEMA.into(),
            variant,
            instruction,
            target,
            toolchain: tc.kind,
            ptxas: shown_path(&tc.ptxas),
            ptxas_version: tc.ptxas_version.clone(),
            disassembler: tc.disassembler,
            disassembler_path: shown_path(&tc.disassembler_path),
            disassembler_version: tc.disassembler_version.clone(),
            device: None,
            listing: listing.iter().map(|i| i.text.clone()).collect(),
            mma_region: region.iter().map(|i| i.text.clone()).collect(),
            histogram: histogram(listing),
            tensor_instructions: tensor.iter().map(|i| i.text.clone()).collect(),
            warpgroup_sequence: None,
            lowering,
            verdict,
            tool_version: env!("CARGO_PKG_VERSION").into(),
            date: crate::provenance::utc_now_rfc3339(),
            command: std::env::args().collect::<Vec<_>>().join(" "),
        })
    }

    /// `<stem>.<target>.sass` (add `.txt` or `.json`).
    pub fn file_base(variant_stem: &str, target: Target) -> String {
        format!("{variant_stem}.{target}.sass")
    }

    /// The text file: a `#` header (variant, instruction, target, tools, command, verdict,
    /// histogram), the listing, then the mma region.
    pub fn to_text(&self) -> String {
        let mut s = String::new();
        let mut h = |line: String| {
            s += "# ";
            s += &line;
            s += "\n";
        };
        h(format!(
            "fp4probe sass: {} at {}",
            self.variant, self.target
        ));
        h(format!("instruction: {}", self.instruction));
        h(format!("target: {}", self.target));
        if let Some(d) = &self.device {
            h(format!("device: {d}"));
        }
        h(format!(
            "toolchain: {}: ptxas {} ({}), {} {} ({})",
            self.toolchain.name(),
            self.ptxas_version,
            self.ptxas,
            match self.disassembler {
                Disassembler::Cuobjdump => "cuobjdump --dump-sass",
                Disassembler::Nvdisasm => "nvdisasm -c",
            },
            self.disassembler_version,
            self.disassembler_path
        ));
        if self.date.is_empty() {
            h(format!("fp4probe {}", self.tool_version));
        } else {
            h(format!("fp4probe {} at {}", self.tool_version, self.date));
        }
        h(format!("command: {}", self.command));
        h(format!("verdict: {}", self.verdict));
        h(format!(
            "tensor instructions: {}",
            self.tensor_instructions.len()
        ));
        for t in &self.tensor_instructions {
            h(format!("  {t}"));
        }
        if let Some(seq) = &self.warpgroup_sequence {
            h(format!(
                "warpgroup sequence (the mma region's warpgroup instructions): {}",
                seq.len()
            ));
            for t in seq {
                h(format!("  {t}"));
            }
        }
        h("histogram (whole listing; base opcode, then each full form):".into());
        for line in histogram_lines(&self.histogram) {
            h(format!("  {line}"));
        }
        h(String::new());
        h(format!(
            "listing: {} instructions (addresses, encodings and trailing NOP padding dropped)",
            self.listing.len()
        ));
        for l in &self.listing {
            s += l;
            s += "\n";
        }
        s += "\n";
        s += &format!(
            "# mma region: {} instructions (after the last LDG, up to the first STG; called \
             subroutines inlined; NOPs and @!PT/@!UPT fillers left out)\n",
            self.mma_region.len()
        );
        for l in &self.mma_region {
            s += l;
            s += "\n";
        }
        s
    }

    /// The listing and report paths of this report in `dir`.
    pub fn paths(&self, dir: &Path) -> (PathBuf, PathBuf) {
        let base = Self::file_base(&self.variant.replace("::", "_"), self.target);
        (
            dir.join(format!("{base}.txt")),
            dir.join(format!("{base}.json")),
        )
    }

    /// Write `<dir>/<stem>.<target>.sass.txt` and `.sass.json` as `out` allows; returns the
    /// text file's path.
    pub fn write(&self, dir: &Path, out: &Outputs) -> Result<PathBuf> {
        let (txt, json) = self.paths(dir);
        out.check(&txt, Ours::marked(LISTING_MARKER))?;
        out.check(&json, Ours::marked(JSON_MARKER))?;
        out.create_dir(dir)?;
        out.write(&txt, self.to_text(), Ours::marked(LISTING_MARKER))?;
        let mut j = serde_json::to_string_pretty(self)?;
        j.push('\n');
        out.write(&json, j, Ours::marked(JSON_MARKER))?;
        Ok(txt)
    }
}

/// The histogram as aligned lines: each base opcode, then its full forms indented.
pub fn histogram_lines(h: &BTreeMap<String, usize>) -> Vec<String> {
    let width = h.keys().map(|k| k.len() + 2).max().unwrap_or(0);
    let mut out = Vec::new();
    for (k, n) in h.iter().filter(|(k, _)| !k.contains('.')) {
        out.push(format!("{k:<width$} {n:>4}"));
        let prefix = format!("{k}.");
        for (f, m) in h.iter().filter(|(f, _)| f.starts_with(&prefix)) {
            let f = format!("  {f}");
            out.push(format!("{f:<width$} {m:>4}"));
        }
    }
    out
}

/// Why a variant has no report for a target.
#[derive(Debug, thiserror::Error)]
pub enum SassError {
    /// ptxas refused the module for this target; `log` is all it printed.
    #[error("ptxas {ptxas_version} rejected {variant} for {target}:\n{log}")]
    Rejected {
        variant: String,
        target: Target,
        ptxas_version: String,
        log: String,
    },
    #[error(transparent)]
    Other(#[from] anyhow::Error),
}

impl SassError {
    /// `rejected: <first error line of the log>`, or the error in one line.
    pub fn summary(&self) -> String {
        match self {
            SassError::Rejected { log, .. } => format!("rejected: {}", first_error_line(log)),
            SassError::Other(e) => format!("error: {e:#}").replace('\n', " "),
        }
    }
}

/// The disassembly of `ptx` (the kernel of `variant`) assembled for `target` with `tc`; ptxas's
/// refusal is [`SassError::Rejected`] with its log.
pub fn assemble_and_disassemble(
    tc: &Toolchain,
    ptx: &str,
    variant: String,
    target: Target,
) -> Result<String, SassError> {
    let cubin = match tc.assemble(ptx, target) {
        Ok(c) => c,
        Err(AssembleError::Rejected { log }) => {
            return Err(SassError::Rejected {
                variant,
                target,
                ptxas_version: tc.ptxas_version.clone(),
                log,
            });
        }
        Err(e) => return Err(anyhow::Error::new(e).into()),
    };
    Ok(tc.disassemble(&cubin)?)
}

/// The report of `v`'s probe kernel (default scale selectors) for `target` with `tc`.
pub fn report(v: &Variant, target: Target, tc: &Toolchain) -> Result<SassReport, SassError> {
    let ptx = fragment_kernel(v, target, Default::default());
    let sass = assemble_and_disassemble(tc, &ptx, v.id(), target)?;
    Ok(SassReport::from_sass(v, target, tc, &sass)?)
}

/// Offline, with the pinned toolchain: `v` for `target` (pass `v.min_target` for its own
/// target; any other target works too, and ptxas's log is the error when it refuses).
pub fn offline(v: &Variant, target: Target) -> Result<SassReport> {
    let tc = Toolchain::find(ToolchainKind::Pinned)?;
    Ok(report(v, target, &tc)?)
}

/// This machine's GPU: its name and the target to compile for (`Target::for_device`).
pub fn device_target() -> Result<(String, Target)> {
    let b = crate::device::cuda::CudaBackend::open().context("looking for a CUDA device")?;
    let info = crate::device::Backend::info(&b);
    let cc = info
        .compute_capability
        .context("the CUDA backend reports no compute capability")?;
    Ok((info.name.clone(), Target::for_device(cc)))
}

/// On a machine with a GPU: `v` for the device's own target with the machine's CUDA toolkit
/// (ptxas and cuobjdump from PATH, then /usr/local/cuda/bin).
pub fn on_device(v: &Variant) -> Result<SassReport> {
    let (name, target) = device_target()?;
    let tc = Toolchain::find(ToolchainKind::System)?;
    let mut r = report(v, target, &tc)?;
    r.device = Some(name);
    Ok(r)
}

/// `README.md` of a reports folder: one row per `*.sass.json` in it (variant, target,
/// lowering, verdict), sorted by target, then catalog order.
/// The first line of a SASS index page, by which an existing one is recognised.
pub const INDEX_MARKER: &str = "# SASS of the probe kernels";

/// The first words of a listing `fp4probe sass` writes.
pub const LISTING_MARKER: &str = "# fp4probe sass: ";

pub fn write_index(dir: &Path, out: &Outputs) -> Result<PathBuf> {
    let path = dir.join("README.md");
    out.check(&path, Ours::marked(INDEX_MARKER))?;
    let mut rows: Vec<SassReport> = Vec::new();
    for e in std::fs::read_dir(dir).with_context(|| format!("reading {}", dir.display()))? {
        let p = e?.path();
        if p.to_string_lossy().ends_with(".sass.json") {
            let text =
                std::fs::read_to_string(&p).with_context(|| format!("reading {}", p.display()))?;
            let r: SassReport =
                serde_json::from_str(&text).with_context(|| format!("parsing {}", p.display()))?;
            rows.push(r);
        }
    }
    let order: HashMap<String, usize> = crate::isa::catalog()
        .iter()
        .enumerate()
        .map(|(i, v)| (v.id(), i))
        .collect();
    rows.sort_by_key(|r| {
        (
            r.target,
            order.get(&r.variant).copied().unwrap_or(usize::MAX),
            r.variant.clone(),
        )
    });
    let mut s = format!(
        "{INDEX_MARKER}\n\n\
         What each `mma.sync` variant's probe kernel lowers to, read from the disassembly\n\
         (`fp4probe sass`). Each row links the listing (`.sass.txt`) and the report\n\
         (`.sass.json`). **native**: one tensor instruction whose type suffix names the A and B\n\
         types; **emulated**: tensor instructions on other types, or conversions, in the mma\n\
         region (after the last operand load, before the first store; see `src/sass.rs`).\n\n",
    );
    let mut tools: Vec<String> = rows
        .iter()
        .map(|r| {
            format!(
                "{}: ptxas {}, {} {}",
                r.toolchain.name(),
                r.ptxas_version,
                match r.disassembler {
                    Disassembler::Cuobjdump => "cuobjdump",
                    Disassembler::Nvdisasm => "nvdisasm",
                },
                r.disassembler_version
            )
        })
        .collect();
    tools.sort();
    tools.dedup();
    s += &format!("Tools: {}.\n\n", tools.join("; "));
    let mut commands: Vec<&str> = rows.iter().map(|r| r.command.as_str()).collect();
    commands.sort();
    commands.dedup();
    s += "Generated by:\n\n```sh\n";
    for c in commands {
        s += c;
        s += "\n";
    }
    s += "```\n\n`fp4probe sass --index -o <dir>` rewrites this file from the `.sass.json` files.\n\n";
    let mut counts: BTreeMap<(String, &str), usize> = BTreeMap::new();
    for r in &rows {
        let l = match r.lowering {
            Lowering::Native => "native",
            Lowering::Split => "split",
            Lowering::Emulated => "emulated",
            Lowering::NoTensor => "no tensor instruction",
        };
        *counts.entry((r.target.to_string(), l)).or_insert(0) += 1;
    }
    for ((t, l), n) in &counts {
        s += &format!("- {t}: {n} {l}\n");
    }
    s += "\n| variant | target | verdict |\n| --- | --- | --- |\n";
    for r in &rows {
        let base = SassReport::file_base(&r.variant.replace("::", "_"), r.target);
        s += &format!(
            "| [`{}`]({base}.txt) | {} | {} ([json]({base}.json)) |\n",
            r.variant,
            r.target,
            r.verdict.replace('|', "\\|")
        );
    }
    out.write(&path, s, Ours::marked(INDEX_MARKER))?;
    Ok(path)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `cuobjdump --dump-sass` of `m16n8k32.f32.e4m3.e4m3.f32` for sm_90 (ptxas 13.5.37),
    /// shortened: the loads of A and one of C, then the emulation.
    const CUOBJDUMP_SNIPPET: &str = "
\tcode for sm_90
\t.target\tsm_90

\t\tFunction : fp4probe_fragment
\t.headerflags\t@\"EF_CUDA_SM90 EF_CUDA_VIRTUAL_SM(EF_CUDA_SM90)\"
        /*0000*/                   LDC R1, c[0x0][0x28] ;                   /* 0x00000a00ff017b82 */
                                                                            /* 0x000fe20000000800 */
        /*00a0*/                   LDG.E R14, desc[UR4][R4.64] ;            /* 0x00000004040e7981 */
                                                                            /* 0x000ea8000c1e1900 */
        /*0140*/                   LDG.E R12, desc[UR4][R16.64+0xc] ;       /* 0x00000c04100c7981 */
                                                                            /* 0x000ee2000c1e1900 */
        /*0150*/                   F2FP.F16.E4M3.UNPACK_B R18, R14 ;        /* 0x0000000eff12723e */
                                                                            /* 0x004fc400020006ff */
        /*0160*/                   F2FP.F16.E4M3.UNPACK_B R14, R14.H1 ;     /* 0x0000000eff0e723e */
                                                                            /* 0x000fe400030006ff */
        /*0210*/                   HMMA.16816.F32 R4, R4, R18, RZ ;         /* 0x000000120404723c */
                                                                            /* 0x000ff600000018ff */
        /*0220*/                   @!UPT UIADD3 URZ, URZ, URZ, URZ ;        /* 0x0000003f3f3ff290 */
                                                                            /* 0x000ff6000fffe03f */
        /*0240*/                   HMMA.16816.F32 R4, R8, R14, R4 ;         /* 0x0000000e0804723c */
                                                                            /* 0x000fe20000001804 */
        /*0280*/                   FADD R13, R13, R4 ;                      /* 0x000000040d0d7221 */
                                                                            /* 0x008fe20000000000 */
        /*02d0*/                   STG.E desc[UR4][R8.64], R13 ;            /* 0x0000000d08007986 */
                                                                            /* 0x000fe8000c101904 */
        /*0310*/                   EXIT ;                                   /* 0x000000000000794d */
                                                                            /* 0x000fea0003800000 */
        /*0320*/                   BRA 0x320;                               /* 0xfffffffc00fc7947 */
                                                                            /* 0x000fc0000383ffff */
        /*0330*/                   NOP;                                     /* 0x0000000000007918 */
                                                                            /* 0x000fc00000000000 */
\t\t..........
";

    fn e4m3() -> Variant {
        crate::isa::find("m16n8k32.f32.e4m3.e4m3.f32").unwrap()
    }

    #[test]
    fn parses_cuobjdump_lines() {
        let d = parse_sass(CUOBJDUMP_SNIPPET);
        let texts: Vec<&str> = d.trimmed().iter().map(|i| i.text.as_str()).collect();
        assert_eq!(
            texts,
            [
                "LDC R1, c[0x0][0x28]",
                "LDG.E R14, desc[UR4][R4.64]",
                "LDG.E R12, desc[UR4][R16.64+0xc]",
                "F2FP.F16.E4M3.UNPACK_B R18, R14",
                "F2FP.F16.E4M3.UNPACK_B R14, R14.H1",
                "HMMA.16816.F32 R4, R4, R18, RZ",
                "@!UPT UIADD3 URZ, URZ, URZ, URZ",
                "HMMA.16816.F32 R4, R8, R14, R4",
                "FADD R13, R13, R4",
                "STG.E desc[UR4][R8.64], R13",
                "EXIT",
                "BRA 0x320",
            ]
        );
        assert_eq!(d.instrs.len(), 13, "the NOP is parsed, then trimmed");
        assert_eq!(d.instrs[6].predicate(), Some("@!UPT"));
        assert_eq!(d.instrs[6].opcode(), "UIADD3");
        assert!(d.instrs[6].never_executes());
        assert_eq!(d.instrs[5].base(), "HMMA");

        let region: Vec<&str> = d.mma_region().iter().map(|i| i.text.as_str()).collect();
        assert_eq!(
            region,
            [
                "F2FP.F16.E4M3.UNPACK_B R18, R14",
                "F2FP.F16.E4M3.UNPACK_B R14, R14.H1",
                "HMMA.16816.F32 R4, R4, R18, RZ",
                "HMMA.16816.F32 R4, R8, R14, R4",
                "FADD R13, R13, R4",
            ]
        );
        let h = histogram(d.trimmed());
        assert_eq!(h["HMMA"], 2);
        assert_eq!(h["HMMA.16816.F32"], 2);
        assert_eq!(h["F2FP"], 2);
        assert_eq!(h["F2FP.F16.E4M3.UNPACK_B"], 2);
        assert_eq!(h["LDG"], 2);
        assert_eq!(h["LDG.E"], 2);
        assert_eq!(h["EXIT"], 1);
        assert!(!h.contains_key("NOP"));

        let tensor: Vec<&Instr> = d.trimmed().iter().filter(|i| i.is_tensor()).collect();
        let (l, s) = verdict(&e4m3(), &tensor, &d.mma_region());
        assert_eq!(l, Lowering::Emulated);
        assert!(
            s.starts_with("emulated: 2 HMMA.16816.F32 + 2 F2FP conversions"),
            "{s}"
        );
    }

    /// nvdisasm names subroutines and branch targets by label.
    #[test]
    fn parses_nvdisasm_and_follows_calls() {
        let text = "
        .text.fp4probe_fragment:
        /*0100*/                   LDG.E R6, desc[UR4][R8.64+0x4] ;
        /*0120*/                   MOV R14, 0x140 ;
        /*0130*/                   CALL.REL.NOINC `($__internal_0_$__cuda_sm_9x_mma_sub_byte) ;
        /*0160*/                   STG.E desc[UR4][R2.64], R5 ;
.L_x_1:
        /*01a0*/                   EXIT ;
$__internal_0_$__cuda_sm_9x_mma_sub_byte:
        /*01b0*/                   LOP3.LUT R8, R4.reuse, 0xf00, RZ, 0xc0, !PT ;
        /*01c0*/                   IMMA.16816.S8.U8 R4, R6.ROW, R5.COL, RZ ;
        /*0760*/                   RET.REL.NODEC R14 `(fp4probe_fragment) ;
.L_x_0:
        /*0770*/                   BRA `(.L_x_0);
        /*0780*/                   NOP;
";
        let d = parse_sass(text);
        assert_eq!(d.labels[".L_x_1"], 0x1a0);
        let region: Vec<&str> = d.mma_region().iter().map(|i| i.opcode()).collect();
        assert_eq!(
            region,
            [
                "MOV",
                "CALL.REL.NOINC",
                "LOP3.LUT",
                "IMMA.16816.S8.U8",
                "RET.REL.NODEC"
            ]
        );
        // The same with cuobjdump's numeric call target.
        let d2 = parse_sass(&text.replace("`($__internal_0_$__cuda_sm_9x_mma_sub_byte)", "0x1b0"));
        assert_eq!(d2.mma_region().len(), 5);
    }

    #[test]
    fn input_type_names() {
        let find = |id| crate::isa::find(id).unwrap();
        let mx = find("m16n8k32.kind::mxf8f6f4.block_scale.scale_vec::1X.f32.e4m3.e2m1.f32.ue8m0");
        assert!(names_input_types("QMMA.SF.16832.F32.E4M3.E2M1.E8", &mx));
        assert!(!names_input_types("QMMA.SF.16832.F32.E2M1.E4M3.E8", &mx));
        let f16 = find("m16n8k16.f32.f16.f16.f32");
        assert!(names_input_types("HMMA.16816.F32", &f16));
        assert!(!names_input_types("HMMA.16816.F32.BF16", &f16));
        let bf = find("m16n8k16.f32.bf16.bf16.f32");
        assert!(names_input_types("HMMA.16816.F32.BF16", &bf));
        assert!(!names_input_types("HMMA.16816.F32", &bf));
        let tf = find("m16n8k8.f32.tf32.tf32.f32");
        assert!(names_input_types("HMMA.1688.F32.TF32", &tf));
        let s4 = find("m16n8k64.s32.s4.s4.s32");
        assert!(!names_input_types("IMMA.16832.S8.S8", &s4));
        assert!(names_input_types("IMMA.16864.S4.S4", &s4));
        let xor = find("m16n8k128.s32.b1.b1.s32.xor.popc");
        assert!(!names_input_types("BMMA.168128.AND.POPC", &xor));
        assert!(names_input_types("BMMA.168128.XOR.POPC", &xor));
        assert!(names_input_types(
            "DMMA.16x8x16",
            &find("m16n8k16.f64.f64.f64.f64")
        ));
    }

    #[test]
    fn first_error_line_skips_to_the_error() {
        let log = "ptxas info : something\nptxas probe.ptx, line 31; error   : Feature 'x' requires sm_120a\nptxas fatal   : Ptx assembly aborted\n";
        assert_eq!(
            first_error_line(log),
            "ptxas probe.ptx, line 31; error   : Feature 'x' requires sm_120a"
        );
    }
}
