//! The wgmma bench's settings and report: `<variant>.wgmma-bench.json` ([`WgBenchReport`],
//! schema `fp4probe.wgmma-bench/1`) and `<dir>/wgmma-bench.csv` ([`merge_wg_csv`]: one row per
//! point, the latency point first; re-running a variant replaces its rows). The kernels and the
//! SASS guard are `crate::wgmma::bench`, their preparation [`super::wgmma_prepare`], the timing
//! [`super::wgmma_measure`].
//!
//! Latency: one CTA of one warpgroup; cycles per dependent wgmma (`%clock64` over the loop ÷
//! wgmma run). Throughput: SMs × `ctas_per_sm` CTAs of W warpgroups, the whole GPU; TFLOP/s
//! (TOPS for the integer types) from CUDA-event time and [`WgVariant::flops`], flops per SM per
//! clock from the longest warpgroup's `%clock64` cycles, cycles between a warpgroup's wgmma
//! from the median warpgroup. Each figure is the median of `runs` timed launches after
//! `warmup` untimed ones, the trip count calibrated to launches of about `target_ms`; before
//! the first throughput point the GPU is kept busy `preheat_ms` so clocks have ramped up. A
//! figure is a result only if its kernel passed the SASS guard, ran from the inspected cubin,
//! and left finite accumulators.

use super::report::{BenchDevice, PointStatus, Stat, merge_rows};
use super::sass::SassCheck;
use super::toolchain::Toolchain;
use super::wgmma_prepare::{WgKernel, WgPlan};
use crate::device::BackendKind;
use crate::provenance::Provenance;
use crate::wgmma::WgVariant;
use crate::wgmma::bench::WgShape;
use anyhow::Result;
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};

/// JSON schema id of a wgmma bench report.
pub const WG_BENCH_SCHEMA: &str = "fp4probe.wgmma-bench/1";

/// Most loop iterations one launch runs (the kernel's counter is 32-bit).
pub const WG_MAX_ITERS: u64 = 1 << 30;

/// What to build and how to time it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct WgSettings {
    pub plan: WgPlan,
    /// CTAs per SM of the throughput grid (the grid is SMs × this).
    pub ctas_per_sm: u32,
    pub warmup: u32,
    pub runs: u32,
    pub target_ms: f64,
    pub seed: u64,
    pub preheat_ms: f64,
}

impl Default for WgSettings {
    fn default() -> Self {
        WgSettings {
            plan: WgPlan::default(),
            ctas_per_sm: 1,
            warmup: 2,
            runs: 5,
            target_ms: 3.0,
            seed: 1,
            preheat_ms: 500.0,
        }
    }
}

/// Where the warpgroups of a launch ran, from `%smid`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct WgPlacement {
    pub sms_used: u32,
    pub min_warpgroups_per_sm: u32,
    pub max_warpgroups_per_sm: u32,
    /// Every SM ran exactly W × CTAs-per-SM warpgroups.
    pub as_intended: bool,
}

/// One measured kernel.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct WgPoint {
    /// `latency` (one warpgroup on one SM) or `throughput` (the whole GPU).
    pub kind: String,
    pub shape: WgShape,
    pub ctas_per_sm: u32,
    pub grid: u32,
    pub threads_per_block: u32,
    pub dynamic_smem_bytes: u32,
    pub iters: u64,
    pub wgmma_per_launch: u64,
    pub registers_per_thread: Option<u32>,
    pub status: PointStatus,
    pub reason: Option<String>,
    /// The kernel's SASS check, as the CSV writes it.
    pub sass_check: String,
    pub time_ms: Option<Stat>,
    /// TFLOP/s, or TOPS for the integer types.
    pub tflops: Option<Stat>,
    /// flops ÷ (SMs × the longest warpgroup's cycles).
    pub flops_per_sm_per_clock: Option<Stat>,
    /// The longest warpgroup's cycles ÷ the event time.
    pub clock_mhz: Option<Stat>,
    /// Per warpgroup cycles ÷ %globaltimer nanoseconds (median over warpgroups).
    pub clock_globaltimer_mhz: Option<Stat>,
    /// The median warpgroup's cycles ÷ its wgmma: for the latency kernel the latency of one
    /// dependent wgmma, for a throughput kernel the interval between one warpgroup's wgmma.
    pub cycles_per_wgmma: Option<Stat>,
    pub placement: Option<WgPlacement>,
    pub finite: Option<bool>,
    pub note: Option<String>,
}

impl WgPoint {
    pub(super) fn skeleton(k: &WgKernel, check: &SassCheck, ctas_per_sm: u32) -> Self {
        WgPoint {
            kind: if k.shape.is_latency() {
                "latency"
            } else {
                "throughput"
            }
            .into(),
            shape: k.shape,
            ctas_per_sm: if k.shape.is_latency() { 1 } else { ctas_per_sm },
            grid: 0,
            threads_per_block: k.shape.threads(),
            dynamic_smem_bytes: 0,
            iters: 0,
            wgmma_per_launch: 0,
            registers_per_thread: None,
            status: PointStatus::Skipped,
            reason: k.skipped.clone(),
            sass_check: if k.skipped.is_some() {
                "not built".into()
            } else {
                check.cell()
            },
            time_ms: None,
            tflops: None,
            flops_per_sm_per_clock: None,
            clock_mhz: None,
            clock_globaltimer_mhz: None,
            cycles_per_wgmma: None,
            placement: None,
            finite: None,
            note: None,
        }
    }

    pub fn accepted(&self) -> bool {
        self.status == PointStatus::Accepted
    }
}

/// One kernel as it ran.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct WgKernelRecord {
    pub shape: WgShape,
    /// `cubin` (the inspected SASS ran), `ptx-jit` (unverified) or `not-built`.
    pub loaded: String,
    pub registers_per_thread: Option<u32>,
    pub sass_check: SassCheck,
    pub ptxas_log: String,
    pub skipped: Option<String>,
    pub ptx: String,
}

/// `<variant>.wgmma-bench.json`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct WgBenchReport {
    pub schema: String,
    pub variant: String,
    pub instruction: String,
    /// The SASS instruction the guard expects (`HGMMA.64x256x16`).
    pub sass_instruction: String,
    pub n: u32,
    pub flops_per_wgmma: u64,
    /// `TFLOP/s`, or `TOPS` for the integer types.
    pub unit: String,
    pub backend: BackendKind,
    /// `ptx` is the latency kernel's; every kernel's PTX is under `kernels`.
    pub provenance: Provenance,
    pub device: BenchDevice,
    pub target: String,
    pub ptx_version: String,
    pub toolchain: Option<Toolchain>,
    pub settings: WgSettings,
    pub kernels: Vec<WgKernelRecord>,
    pub latency: WgPoint,
    pub points: Vec<WgPoint>,
    pub wall_s: f64,
}

/// `TFLOP/s` for floating-point variants, `TOPS` for the integer and b1 ones.
pub fn unit(v: &WgVariant) -> &'static str {
    if v.a.is_float() { "TFLOP/s" } else { "TOPS" }
}

/// Header of `wgmma-bench.csv`: one row per point, the latency point first.
pub const WG_CSV_HEADER: [&str; 13] = [
    "variant",
    "n",
    "point",
    "warpgroups_per_cta",
    "accumulators",
    "wgmma_per_group",
    "groups_in_flight",
    "cycles_per_wgmma",
    "tflops",
    "unit",
    "flops_per_sm_per_clock",
    "clock_mhz",
    "sass_check",
];

impl WgBenchReport {
    /// The accepted throughput point with the highest median rate.
    pub fn best(&self) -> Option<&WgPoint> {
        self.points
            .iter()
            .filter(|p| p.accepted())
            .filter(|p| p.tflops.is_some())
            .max_by(|a, b| {
                let t = |p: &WgPoint| p.tflops.map_or(0.0, |s| s.median);
                t(a).total_cmp(&t(b))
            })
    }

    /// Rows of `wgmma-bench.csv`; figures only where the point was accepted, `sass_check` says
    /// why otherwise.
    pub fn csv_rows(&self) -> Vec<Vec<String>> {
        std::iter::once(&self.latency)
            .chain(&self.points)
            .map(|p| {
                let ok = p.accepted();
                let fig = |s: &Option<Stat>, digits: usize| match (ok, s) {
                    (true, Some(s)) => format!("{:.*}", digits, s.median),
                    _ => String::new(),
                };
                let mut check = p.sass_check.clone();
                if !ok
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
                vec![
                    self.variant.clone(),
                    self.n.to_string(),
                    p.kind.clone(),
                    p.shape.warpgroups.to_string(),
                    p.shape.chains.to_string(),
                    p.shape.per_group.to_string(),
                    p.shape.in_flight.to_string(),
                    fig(&p.cycles_per_wgmma, 2),
                    fig(&p.tflops, 2),
                    self.unit.clone(),
                    fig(&p.flops_per_sm_per_clock, 1),
                    fig(&p.clock_mhz, 0),
                    check,
                ]
            })
            .collect()
    }

    /// Write `<dir>/<variant>.wgmma-bench.json` as `out` allows.
    pub fn write_json(&self, dir: &Path, out: &crate::outfile::Outputs) -> Result<PathBuf> {
        out.write_result(
            dir,
            &format!("{}.wgmma-bench", self.variant),
            &(serde_json::to_string_pretty(self)? + "\n"),
            None,
            false,
        )
    }
}

/// Merge the rows of `reports` into `<dir>/wgmma-bench.csv` (rows of re-run variants are
/// replaced; a file with another header is refused unless forced, the flag says so).
pub fn merge_wg_csv(
    dir: &Path,
    reports: &[WgBenchReport],
    out: &crate::outfile::Outputs,
) -> Result<(PathBuf, bool)> {
    let fresh: Vec<&str> = reports.iter().map(|r| r.variant.as_str()).collect();
    let rows = reports.iter().flat_map(|r| r.csv_rows()).collect();
    merge_rows(
        &dir.join("wgmma-bench.csv"),
        &WG_CSV_HEADER,
        &fresh,
        rows,
        out,
    )
}

/// "4 × HGMMA.64x256x16.F32.BF16, 1 × WARPGROUP.ARRIVE, 1 × WARPGROUP.DEPBAR.LE": the tensor
/// and warpgroup-synchronisation instructions of one iteration of the timed loop.
pub fn loop_summary(check: &SassCheck) -> String {
    let parts: Vec<String> = check
        .loop_opcodes
        .iter()
        .filter(|(k, _)| super::sass::is_tensor_opcode(k) || k.starts_with("WARPGROUP"))
        .map(|(k, n)| (std::cmp::Reverse(super::sass::is_tensor_opcode(k)), k, n))
        .collect::<std::collections::BTreeSet<_>>()
        .into_iter()
        .map(|(_, k, n)| format!("{n} × {k}"))
        .collect();
    if parts.is_empty() {
        "-".into()
    } else {
        parts.join(", ")
    }
}

/// How a kernel's shape reads in tables: "2 WG × 1 acc, 1 group of 4 wgmma, wait_group 1".
pub fn describe_shape(s: &WgShape) -> String {
    format!(
        "{} WG × {} acc, {} group(s) of {} wgmma, wait_group {}, {}",
        s.warpgroups,
        s.chains,
        s.groups,
        s.per_group,
        s.in_flight,
        s.layout.name()
    )
}

// ---------------------------------------------------------------------------------------------
// Text
// ---------------------------------------------------------------------------------------------

fn stat(s: &Option<Stat>, digits: usize) -> String {
    s.map_or("-".into(), |s| format!("{:.*}", digits, s.median))
}

/// The kernels of a prepared variant and their guard verdicts, one or two lines each.
pub fn prepared_text(p: &super::wgmma_prepare::WgPrepared) -> String {
    let mut out = format!("{} on {}\n", p.variant.id(), p.target);
    for k in &p.kernels {
        let what = if k.shape.is_latency() {
            "latency"
        } else {
            "throughput"
        };
        let verdict = match &k.skipped {
            Some(why) => format!("not built: {why}"),
            None => k.check.cell(),
        };
        out += &format!("  {what} kernel {}: {verdict}\n", describe_shape(&k.shape));
        if !k.check.loop_opcodes.is_empty() {
            out += &format!("    timed loop per iteration: {}\n", loop_summary(&k.check));
        }
    }
    out
}

fn point_line(p: &WgPoint) -> String {
    let ok = p.accepted();
    let f = |s: &Option<Stat>, d: usize| if ok { stat(s, d) } else { "-".into() };
    let verdict = match p.status {
        PointStatus::Accepted => "ok".to_string(),
        PointStatus::Rejected if p.reason.as_deref() == Some(p.sass_check.as_str()) => {
            "REJECTED: the SASS check of this kernel (above)".to_string()
        }
        PointStatus::Rejected => format!("REJECTED: {}", p.reason.as_deref().unwrap_or("?")),
        PointStatus::Skipped => format!("skipped: {}", p.reason.as_deref().unwrap_or("?")),
    };
    let note = p
        .note
        .as_deref()
        .map(|n| format!(" ({n})"))
        .unwrap_or_default();
    format!(
        "  {:>3} {:>4} {:>10} {:>12} {:>9} {:>11} {:>5}  {verdict}{note}",
        p.shape.warpgroups,
        p.shape.chains,
        f(&p.tflops, 1),
        f(&p.flops_per_sm_per_clock, 1),
        f(&p.clock_mhz, 0),
        f(&p.cycles_per_wgmma, 1),
        p.registers_per_thread.map_or("-".into(), |r| r.to_string()),
    )
}

impl WgBenchReport {
    /// The report as a table: device, kernels and their guard verdicts, latency, every point.
    pub fn text(&self) -> String {
        let d = &self.device;
        let mut out = format!(
            "{} on {} ({} SMs, clock attribute {} MHz, driver {}), target {}, PTX {}\n",
            self.variant,
            d.name,
            d.sm_count,
            d.clock_rate_attribute_mhz
                .map_or("?".into(), |c| format!("{c:.0}")),
            d.driver.as_deref().unwrap_or("?"),
            self.target,
            self.ptx_version
        );
        match &self.toolchain {
            Some(tc) => out += &format!("  assembled by {}\n", tc.describe()),
            None => out += "  no ptxas: every kernel went through the PTX JIT\n",
        }
        for k in &self.kernels {
            let verdict = match &k.skipped {
                Some(why) => format!("not built: {why}"),
                None => k.sass_check.cell(),
            };
            out += &format!(
                "  kernel {} ({}): {verdict}\n",
                describe_shape(&k.shape),
                k.loaded
            );
            if !k.sass_check.loop_opcodes.is_empty() {
                out += &format!(
                    "    timed loop per iteration: {}\n",
                    loop_summary(&k.sass_check)
                );
            }
        }
        let l = &self.latency;
        out += &match (l.accepted(), l.cycles_per_wgmma) {
            (true, Some(s)) => format!(
                "  latency: {:.1} cycles per dependent wgmma (1 warpgroup, {} iterations × {}; \
                 median of {}, {:.1}..{:.1})\n",
                s.median,
                l.iters,
                l.shape.wgmma_per_iter(),
                s.n,
                s.min,
                s.max
            ),
            _ => format!(
                "  latency: {} ({})\n",
                if l.status == PointStatus::Skipped {
                    "skipped"
                } else {
                    "REJECTED"
                },
                l.reason.as_deref().unwrap_or("?")
            ),
        };
        out += &format!(
            "  {:>3} {:>4} {:>10} {:>12} {:>9} {:>11} {:>5}  SASS\n",
            "WG", "acc", self.unit, "flop/SM/clk", "clock MHz", "cyc/wgmma", "regs"
        );
        for p in &self.points {
            out += &point_line(p);
            out += "\n";
        }
        if let Some(c) = d.measured_clock_mhz {
            out += &format!(
                "  measured SM clock: {:.0} MHz (median over accepted points; {:.0}..{:.0})\n",
                c.median, c.min, c.max
            );
        }
        out
    }

    /// One line: latency and the best throughput point.
    pub fn one_line(&self) -> String {
        let lat = match self.latency.accepted() {
            true => format!("{} cycles", stat(&self.latency.cycles_per_wgmma, 1)),
            false => "rejected".into(),
        };
        let accepted = self.points.iter().filter(|p| p.accepted()).count();
        match self.best() {
            Some(p) => format!(
                "{}: latency {lat}; best {} {} ({} flop/SM/clk, {} MHz) at {} warpgroup(s) × {} \
                 accumulator set(s); {accepted}/{} points accepted ({:.1} s)",
                self.variant,
                stat(&p.tflops, 1),
                self.unit,
                stat(&p.flops_per_sm_per_clock, 0),
                stat(&p.clock_mhz, 0),
                p.shape.warpgroups,
                p.shape.chains,
                self.points.len(),
                self.wall_s
            ),
            None => format!(
                "{}: latency {lat}; no accepted throughput point ({:.1} s)",
                self.variant, self.wall_s
            ),
        }
    }
}

/// Latency and best throughput per N, one row each (the sweep's summary).
pub fn sweep_table(reports: &[WgBenchReport]) -> String {
    let unit = reports.first().map_or("TFLOP/s", |r| r.unit.as_str());
    let mut out = format!(
        "  {:>4} {:>14} {:>10} {:>12} {:>10}  variant\n",
        "N", "latency cycles", unit, "flop/SM/clk", "at WG×acc"
    );
    for r in reports {
        let lat = if r.latency.accepted() {
            stat(&r.latency.cycles_per_wgmma, 1)
        } else {
            "rejected".into()
        };
        let (t, fpc, at) = match r.best() {
            Some(p) => (
                stat(&p.tflops, 1),
                stat(&p.flops_per_sm_per_clock, 0),
                format!("{}×{}", p.shape.warpgroups, p.shape.chains),
            ),
            None => ("-".into(), "-".into(), "-".into()),
        };
        out += &format!(
            "  {:>4} {lat:>14} {t:>10} {fpc:>12} {at:>10}  {}\n",
            r.n, r.variant
        );
    }
    out
}
