//! What a bench run asked for and what it measured: settings, statistics, points, the JSON
//! report and the merged CSV.

use super::prepare::PreparedKernel;
use super::sass::{Lowering, SassCheck};
use super::toolchain::Toolchain;
use crate::device::BackendKind;
use crate::provenance::Provenance;
use anyhow::{Context, Result};
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};

/// JSON schema id of a bench report.
pub const BENCH_SCHEMA: &str = "fp4probe.bench/1";

/// Most loop iterations one launch runs (the kernel's counter is 32-bit).
pub const MAX_ITERS: u64 = 1 << 30;

/// What to sweep and how to time it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Settings {
    pub warps_per_sm: Vec<u32>,
    pub chains: Vec<u32>,
    /// Dependent mma.sync per chain per loop iteration (before any distinct-operand rebuild).
    pub unroll: u32,
    /// Blocks per SM: the grid is SMs × this, each block warps_per_sm / this warps.
    pub blocks_per_sm: u32,
    /// Untimed launches before the timed ones.
    pub warmup: u32,
    /// Timed launches per point (the figures are their median, min and max).
    pub runs: u32,
    /// Aim for launches of about this many milliseconds (the trip count is calibrated).
    pub target_ms: f64,
    pub seed: u64,
    /// Before the first point, keep the whole GPU busy this long so the clocks have ramped up
    /// (0: no pre-heat; the CLI pre-heats before the first variant only).
    pub preheat_ms: f64,
}

impl Default for Settings {
    fn default() -> Self {
        Settings {
            warps_per_sm: vec![1, 2, 4, 8, 16],
            chains: vec![1, 2, 4, 8],
            unroll: 8,
            blocks_per_sm: 1,
            warmup: 2,
            runs: 5,
            target_ms: 3.0,
            seed: 1,
            preheat_ms: 500.0,
        }
    }
}

/// Median, min, max and count of a set of measurements.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct Stat {
    pub median: f64,
    pub min: f64,
    pub max: f64,
    pub n: usize,
}

impl Stat {
    /// `None` for an empty set. The median of an even count is the mean of the middle two.
    pub fn of(xs: &[f64]) -> Option<Stat> {
        if xs.is_empty() {
            return None;
        }
        let mut s = xs.to_vec();
        s.sort_by(f64::total_cmp);
        let n = s.len();
        let median = if n % 2 == 1 {
            s[n / 2]
        } else {
            (s[n / 2 - 1] + s[n / 2]) / 2.0
        };
        Some(Stat {
            median,
            min: s[0],
            max: s[n - 1],
            n,
        })
    }
}

pub(crate) fn median(xs: &[f64]) -> f64 {
    Stat::of(xs).map_or(f64::NAN, |s| s.median)
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum PointStatus {
    /// Measured, and the SASS guard and the output checks passed: the figures are results.
    Accepted,
    /// Measured, but the figures are not results (see `reason`).
    Rejected,
    /// Not run (see `reason`).
    Skipped,
}

/// Where the warps of a launch ran, from `%smid`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Placement {
    pub sms_used: u32,
    pub min_warps_per_sm: u32,
    pub max_warps_per_sm: u32,
    /// Every SM ran exactly warps_per_sm warps.
    pub as_intended: bool,
}

/// One measured configuration.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct PointResult {
    /// `latency`: one warp, one chain, one block on one SM; `throughput`: the whole GPU.
    pub kind: String,
    pub warps_per_sm: u32,
    pub chains: u32,
    pub grid: u32,
    pub threads_per_block: u32,
    pub unroll: u32,
    pub sets_per_chain: u32,
    pub iters: u64,
    pub mma_per_launch: u64,
    pub registers_per_thread: Option<u32>,
    pub status: PointStatus,
    pub reason: Option<String>,
    /// The kernel's SASS check, as the CSV writes it.
    pub sass_check: String,
    /// Event time of a launch.
    pub time_ms: Option<Stat>,
    pub tflops: Option<Stat>,
    /// flops ÷ (SMs × the longest warp's %clock64 cycles) = TFLOP/s ÷ (SMs × measured clock).
    pub flops_per_sm_per_clock: Option<Stat>,
    /// The longest warp's cycles ÷ the event time.
    pub clock_mhz: Option<Stat>,
    /// Per warp cycles ÷ %globaltimer nanoseconds (median over warps).
    pub clock_globaltimer_mhz: Option<Stat>,
    /// Median warp's cycles ÷ (iterations × unroll): cycles between dependent mma.sync of one
    /// chain. With one warp and one chain, the latency.
    pub cycles_per_mma_per_chain: Option<Stat>,
    pub placement: Option<Placement>,
    /// Every final accumulator of the last launch is finite.
    pub finite: Option<bool>,
    /// Something worth knowing that does not reject the figure (uneven placement).
    pub note: Option<String>,
}

impl PointResult {
    pub(super) fn skeleton(
        kind: &str,
        warps: u32,
        chains: u32,
        k: &PreparedKernel,
        check: &SassCheck,
    ) -> Self {
        PointResult {
            kind: kind.into(),
            warps_per_sm: warps,
            chains,
            grid: 0,
            threads_per_block: 0,
            unroll: k.shape.unroll,
            sets_per_chain: k.shape.sets_per_chain,
            iters: 0,
            mma_per_launch: 0,
            registers_per_thread: None,
            status: PointStatus::Skipped,
            reason: None,
            sass_check: check.cell(),
            time_ms: None,
            tflops: None,
            flops_per_sm_per_clock: None,
            clock_mhz: None,
            clock_globaltimer_mhz: None,
            cycles_per_mma_per_chain: None,
            placement: None,
            finite: None,
            note: None,
        }
    }
}

/// The device as the bench saw it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct BenchDevice {
    pub name: String,
    pub compute_capability: String,
    pub driver: Option<String>,
    pub sm_count: u32,
    /// `CU_DEVICE_ATTRIBUTE_CLOCK_RATE`: the peak SM clock the driver reports (`None` where
    /// the driver no longer answers it).
    pub clock_rate_attribute_mhz: Option<f64>,
    /// The clock kernels actually ran at: the median clocks of the accepted throughput points.
    pub measured_clock_mhz: Option<Stat>,
}

/// One kernel as it ran.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct KernelRecord {
    pub chains: u32,
    pub unroll: u32,
    pub sets_per_chain: u32,
    /// `cubin` (the inspected SASS ran) or `ptx-jit` (the driver compiled the PTX: unverified).
    pub loaded: String,
    pub registers_per_thread: Option<u32>,
    pub sass_check: SassCheck,
    pub rebuilt: Option<String>,
    pub ptx: String,
}

/// `<variant>.bench.json`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct BenchReport {
    pub schema: String,
    pub variant: String,
    pub instruction: String,
    pub flops_per_mma: u64,
    pub backend: BackendKind,
    /// `ptx` is the latency kernel's (one chain); every kernel's PTX is under `kernels`.
    pub provenance: Provenance,
    pub device: BenchDevice,
    pub target: String,
    pub toolchain: Option<Toolchain>,
    pub settings: Settings,
    pub lowering: Option<Lowering>,
    pub lowering_error: Option<String>,
    pub kernels: Vec<KernelRecord>,
    pub latency: PointResult,
    pub points: Vec<PointResult>,
    pub wall_s: f64,
}

/// Header of `bench.csv`.
pub const CSV_HEADER: [&str; 8] = [
    "variant",
    "warps_per_sm",
    "chains",
    "latency_cycles",
    "tflops",
    "flops_per_sm_per_clock",
    "sass_tensor_per_mma",
    "sass_check",
];

impl BenchReport {
    pub fn file_stem(&self) -> String {
        self.variant.replace("::", "_")
    }

    /// Rows of `bench.csv`: one per throughput point. `latency_cycles` is that point's cycles
    /// per dependent mma.sync of one chain (the dedicated one-warp latency is in the JSON).
    /// Figures are left empty unless the point was accepted; `sass_check` says why.
    pub fn csv_rows(&self) -> Vec<[String; 8]> {
        let per_mma = self
            .lowering
            .as_ref()
            .map(|l| l.tensor_per_mma.to_string())
            .unwrap_or_default();
        self.points
            .iter()
            .map(|p| {
                let ok = p.status == PointStatus::Accepted;
                let fig = |s: &Option<Stat>, digits: usize| match (ok, s) {
                    (true, Some(s)) => format!("{:.*}", digits, s.median),
                    _ => String::new(),
                };
                let mut check = p.sass_check.clone();
                if p.status != PointStatus::Accepted
                    && let Some(r) = &p.reason
                    && !check.contains(r.as_str())
                {
                    let what = if p.status == PointStatus::Skipped {
                        "skipped"
                    } else {
                        "figure rejected"
                    };
                    check += &format!("; {what}: {r}");
                }
                [
                    self.variant.clone(),
                    p.warps_per_sm.to_string(),
                    p.chains.to_string(),
                    fig(&p.cycles_per_mma_per_chain, 2),
                    fig(&p.tflops, 3),
                    fig(&p.flops_per_sm_per_clock, 1),
                    per_mma.clone(),
                    check,
                ]
            })
            .collect()
    }

    /// Write `<dir>/<stem>.bench.json` as `out` allows (a bench runs on hardware only).
    pub fn write_json(&self, dir: &Path, out: &crate::outfile::Outputs) -> Result<PathBuf> {
        out.write_result(
            dir,
            &format!("{}.bench", self.file_stem()),
            &(serde_json::to_string_pretty(self)? + "\n"),
            None,
            false,
        )
    }
}

/// Merge rows into `<dir>/bench.csv`: rows of the variants in `reports` replace any earlier
/// rows of those variants; rows of other variants stay, in their order. A file there with another
/// header is not fp4probe's bench table: it is refused, or replaced when `out` is forced (the
/// returned flag says so).
pub fn merge_csv(
    dir: &Path,
    reports: &[BenchReport],
    out: &crate::outfile::Outputs,
) -> Result<(PathBuf, bool)> {
    let fresh: Vec<&str> = reports.iter().map(|r| r.variant.as_str()).collect();
    let rows = reports
        .iter()
        .flat_map(|r| r.csv_rows().into_iter().map(|row| row.to_vec()))
        .collect();
    merge_rows(&dir.join("bench.csv"), &CSV_HEADER, &fresh, rows, out)
}

/// Merge `rows` into the CSV at `path` whose first column is the variant: earlier rows of the
/// variants in `fresh` go, rows of other variants stay, in their order, and `rows` follow. A
/// file there with another header is not this table: it is refused, or replaced when `out` is
/// forced (the returned flag says so).
pub fn merge_rows(
    path: &Path,
    header: &[&str],
    fresh: &[&str],
    new_rows: Vec<Vec<String>>,
    out: &crate::outfile::Outputs,
) -> Result<(PathBuf, bool)> {
    let joined = header.join(",");
    let ours = crate::outfile::Ours::marked(&joined);
    out.check(path, ours)?;
    let fresh: std::collections::BTreeSet<&str> = fresh.iter().copied().collect();
    let mut rows: Vec<Vec<String>> = Vec::new();
    let mut replaced_foreign = false;
    if path.is_file() {
        let mut rd = csv::Reader::from_path(path)
            .with_context(|| format!("cannot read {}", path.display()))?;
        let found: Vec<String> = rd.headers()?.iter().map(str::to_string).collect();
        if found == header {
            for rec in rd.records() {
                let rec = rec.with_context(|| format!("reading {}", path.display()))?;
                if !fresh.contains(rec.get(0).unwrap_or("")) {
                    rows.push(rec.iter().map(str::to_string).collect());
                }
            }
        } else {
            replaced_foreign = true;
        }
    }
    rows.extend(new_rows);
    let mut w = csv::Writer::from_writer(Vec::new());
    w.write_record(header)?;
    for row in rows {
        w.write_record(row)?;
    }
    if let Some(dir) = path.parent() {
        out.create_dir(dir)?;
    }
    out.write(path, w.into_inner()?, ours)?;
    Ok((path.to_path_buf(), replaced_foreign))
}
