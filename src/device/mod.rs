//! Backends that execute batches of single-warp `mma.sync` experiments: `cuda` (the real GPU,
//! through the driver API) and `emulator` (a CPU model driven by a layout). Both take the same
//! `Batch` and return D registers in the same word order, so probes never know which ran.

pub mod cuda;
pub mod emulator;

use crate::isa::{Operand, ScaleSelectors, Variant};
use anyhow::Result;
use serde::{Deserialize, Serialize};

/// Hardware or emulator, as written into every result's provenance.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum BackendKind {
    Hardware,
    Emulator,
}

/// What ran the experiments.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct DeviceInfo {
    pub backend: BackendKind,
    /// "NVIDIA H100 80GB HBM3", or "fp4probe emulator (documented layouts)".
    pub name: String,
    /// Compute capability of the device (for the emulator: of the target it models).
    pub compute_capability: Option<(u32, u32)>,
    /// CUDA driver version as the driver reports it, e.g. "13.0".
    pub driver: Option<String>,
}

impl DeviceInfo {
    /// Where results go unless the user says otherwise: `results/sm_XY` for hardware,
    /// `results/emulator` for the emulator. `results/` is git-ignored: a probe run never
    /// changes the committed reference results under `reports/` unless told to with `-o`.
    pub fn results_dir(&self) -> std::path::PathBuf {
        match (self.backend, self.compute_capability) {
            (BackendKind::Hardware, Some((a, b))) => format!("results/sm_{a}{b}").into(),
            _ => "results/emulator".into(),
        }
    }
}

/// A batch of experiments. Each experiment is one warp: for every lane, the words of its A, B
/// and C registers (f64 registers as two words, low first), one scale word per scale operand and,
/// for `mma.sp`, one metadata word. Layout of each buffer: `[experiment][lane][word]`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Batch {
    pub experiments: usize,
    pub a: Vec<u32>,
    pub b: Vec<u32>,
    pub c: Vec<u32>,
    pub scale_a: Vec<u32>,
    pub scale_b: Vec<u32>,
    /// `mma.sp`: each lane's metadata register (empty for dense variants).
    pub meta: Vec<u32>,
    /// `mma.sp`: the sparsity selector the kernel is built with (an immediate of the
    /// instruction, so one value for the whole batch).
    pub sparsity_selector: u32,
}

impl Batch {
    /// An all-zero batch of `n` experiments sized for `v` (scale words set to `scale_one`).
    pub fn zeroed(v: &Variant, n: usize) -> Self {
        let words = |op: Operand| n * 32 * v.fragment(op).words_per_lane() as usize;
        let one = v
            .scale
            .map(|s| s.stype.one() as u32 * 0x0101_0101)
            .unwrap_or(0);
        let scale_words = if v.scale.is_some() { n * 32 } else { 0 };
        // Zero metadata is invalid (the PTX ISA calls it undefined); every lane starts with
        // positions 0 and 1 of each chunk kept, valid for every sparse type.
        let meta = if v.sparse.is_some() {
            vec![crate::isa::sparse::splat(crate::isa::sparse::LO); n * 32]
        } else {
            Vec::new()
        };
        Batch {
            experiments: n,
            a: vec![0; words(Operand::A)],
            b: vec![0; words(Operand::B)],
            c: vec![0; words(Operand::C)],
            scale_a: vec![one; scale_words],
            scale_b: vec![one; scale_words],
            meta,
            sparsity_selector: 0,
        }
    }

    /// An `mma.sp` batch's sparsity selector is one ptxas takes for `v`.
    pub fn check_sparsity_selector(&self, v: &Variant) -> Result<()> {
        if v.sparse.is_some() && self.sparsity_selector >= v.sparsity_selectors() {
            anyhow::bail!(
                "{}: sparsity selector {} is out of range (ptxas takes 0..{})",
                v.id(),
                self.sparsity_selector,
                v.sparsity_selectors()
            );
        }
        Ok(())
    }

    /// The words of one lane of one experiment for an operand (`A`, `B` or `C`).
    pub fn lane_words_mut(
        &mut self,
        v: &Variant,
        op: Operand,
        exp: usize,
        lane: u32,
    ) -> &mut [u32] {
        let w = v.fragment(op).words_per_lane() as usize;
        let start = (exp * 32 + lane as usize) * w;
        let buf = match op {
            Operand::A => &mut self.a,
            Operand::B => &mut self.b,
            Operand::C => &mut self.c,
            Operand::D => panic!("D is an output"),
        };
        &mut buf[start..start + w]
    }
}

/// Results of a batch: D words, `[experiment][lane][word]`.
pub type DWords = Vec<u32>;

pub trait Backend {
    fn info(&self) -> &DeviceInfo;

    /// Ok if this backend can execute `v`; otherwise an error that names the target it needs.
    fn check_supported(&self, v: &Variant) -> Result<()>;

    /// Run every experiment of the batch with the given scale selectors (ignored for variants
    /// without block scaling).
    fn run(&self, v: &Variant, selectors: ScaleSelectors, batch: &Batch) -> Result<DWords>;
}

/// Which backend the user asked for.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum BackendChoice {
    /// CUDA when a driver and a device exist, otherwise the emulator (with a loud notice).
    Auto,
    Cuda,
    Emulator,
}

/// Open the backend the user asked for. `auto` falls back to the emulator and says so on
/// stderr, loudly, because emulator results are not hardware findings.
pub fn open(choice: BackendChoice) -> Result<Box<dyn Backend>> {
    match choice {
        BackendChoice::Emulator => Ok(Box::new(emulator::Emulator::new())),
        BackendChoice::Cuda => Ok(Box::new(cuda::CudaBackend::open()?)),
        BackendChoice::Auto => match cuda::CudaBackend::open() {
            Ok(b) => Ok(Box::new(b)),
            Err(why) => {
                eprintln!("{}", fallback_notice(&why));
                Ok(Box::new(emulator::Emulator::new()))
            }
        },
    }
}

pub fn fallback_notice(why: &anyhow::Error) -> String {
    let bar = "!".repeat(78);
    format!(
        "{bar}\n!! NO CUDA DEVICE: {why:#}\n!! Falling back to the EMULATOR backend. Results are the documented layouts run\n!! through a CPU model, labelled \"backend\": \"emulator\" -- NOT hardware findings.\n{bar}"
    )
}
