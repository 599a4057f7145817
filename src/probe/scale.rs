//! The block-scale probe: which lane and which byte of `scale_a` / `scale_b` scale which row of
//! A (column of B) and which k-block, for every `{byte-id, thread-id}` selector pair that ptxas
//! accepts.
//!
//! Method (one launch per selector combination):
//! - A's k-blocks get distinct exactly-representable weights w_j = base·2^j, where block j is
//!   the layout's k labels in [j·K/vec, (j+1)·K/vec); B = 1; C = 0; every scale byte is 1.0
//!   (ue8m0 127, ue4m3 0x38). The baseline D is (K/vec)·Σ_j w_j everywhere.
//! - One experiment per (lane, byte of the scale register): that byte alone set to 2.0 (ue8m0
//!   128, ue4m3 0x40). A byte that scales k-block j of row r (scale_a) raises D(r, *) by
//!   (K/vec)·w_j; of column c (scale_b), D(*, c). The increment names the block.
//! - Anything else (several rows or columns changing, an increment that is no single block's,
//!   an increment that differs along the row or column) is recorded as observed, with the word
//!   "unexplained", and never forced into that model.
//!
//! The A-side sweep runs every accepted (byte-id-a, thread-id-a) with scale_b's selectors at
//! {0, 0}; the B-side sweep every accepted (byte-id-b, thread-id-b) with scale_a's at {0, 0}.
//! Which selector values exist is ptxas's word: every candidate in 0..4 × 0..4 is assembled for
//! the variant's target. Without ptxas, the ranges ptxas 13.5.37 reported are swept, and the
//! output says which source it used.
//!
//! k-blocks are defined on the layout's k labels. With the documented layout those are the
//! ISA's k; with a measured map they are the fragment probe's convention (k is observable only
//! up to a relabelling shared by A and B). Block scaling breaks that symmetry, and this probe is
//! what measures it: an increment that matches no single block says the labels and the
//! hardware's blocks disagree.

use super::fragment::{d_bits, fill, set_slot};
use super::ptx::fragment_kernel;
use crate::device::{Backend, BackendKind, Batch};
use crate::isa::{BlockScale, Operand, ScaleSelectors, Shape, Target, Variant};
use crate::layout::Layout;
use crate::layout::lanemap::Timing;
use crate::provenance::Provenance;
use crate::tools::{self, AssembleError};
use anyhow::{Context, Result, bail};
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::{Path, PathBuf};
use std::sync::{Mutex, OnceLock};
use std::time::Instant;

pub const SCHEMA: &str = "fp4probe.scalemap/1";
pub const CSV_HEADER: &str = "operand,byte_id,thread_id,lane,byte,row_or_col,kblock";
/// Selector candidates asked of ptxas: byte-id and thread-id each in 0..4.
pub const SELECTOR_CANDIDATES: u32 = 4;
/// The ptxas whose answers [`AcceptedSelectors::recorded`] holds.
pub const RECORDED_PTXAS_VERSION: &str = "13.5.37";

/// What an emulator-made scale map says about itself.
pub const EMULATOR_NOTE: &str = "EMULATOR result, not a hardware finding: the PTX ISA's documented scale \
model (A row r from lane 4·(r%8) + 2·thread-id-a + r/8, B column c from lane 4·c + thread-id-b, byte = \
byte-id + k-block) run through a CPU model and read back by the probe. The open questions (the byte \
order inside a 2X/4X scale register, which lanes each thread-id selects) must be answered by running \
this probe on hardware that has the instruction (sm_120a).";

/// Which scale operand.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub enum ScaleOperand {
    A,
    B,
}

impl ScaleOperand {
    pub const BOTH: [ScaleOperand; 2] = [ScaleOperand::A, ScaleOperand::B];

    pub fn name(self) -> &'static str {
        match self {
            ScaleOperand::A => "A",
            ScaleOperand::B => "B",
        }
    }

    /// `scale_a` or `scale_b`.
    pub fn register(self) -> &'static str {
        match self {
            ScaleOperand::A => "scale_a",
            ScaleOperand::B => "scale_b",
        }
    }

    /// What one scale byte scales: a row of A (and D) or a column of B (and D).
    pub fn axis(self) -> &'static str {
        match self {
            ScaleOperand::A => "row",
            ScaleOperand::B => "col",
        }
    }

    fn var(self) -> &'static str {
        match self {
            ScaleOperand::A => "r",
            ScaleOperand::B => "c",
        }
    }

    /// Selectors with this operand's at (byte_id, thread_id) and the other's at {0, 0}.
    pub fn selectors(self, byte_id: u32, thread_id: u32) -> ScaleSelectors {
        match self {
            ScaleOperand::A => ScaleSelectors {
                byte_a: byte_id,
                thread_a: thread_id,
                ..Default::default()
            },
            ScaleOperand::B => ScaleSelectors {
                byte_b: byte_id,
                thread_b: thread_id,
                ..Default::default()
            },
        }
    }

    /// Rows of A (m) or columns of B (n).
    pub fn extent(self, v: &Variant) -> u32 {
        match self {
            ScaleOperand::A => v.shape.m,
            ScaleOperand::B => v.shape.n,
        }
    }
}

// --- which selector values exist ----------------------------------------------------------

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum SelectorSource {
    /// ptxas was asked here and now.
    Ptxas,
    /// The ranges ptxas [`RECORDED_PTXAS_VERSION`] reported, used where no ptxas answered.
    Recorded,
}

/// Candidates ptxas refused with one message: `[byte-id, thread-id]` pairs of one operand.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct RejectedSelector {
    pub operand: ScaleOperand,
    pub selectors: Vec<[u32; 2]>,
    pub ptxas_says: String,
}

/// The `{byte-id, thread-id}` pairs swept per scale operand, and where they come from.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct AcceptedSelectors {
    pub source: SelectorSource,
    pub detail: String,
    /// `[byte-id, thread-id]` pairs for scale_a (with scale_b at {0, 0}).
    pub a: Vec<[u32; 2]>,
    /// `[byte-id, thread-id]` pairs for scale_b (with scale_a at {0, 0}).
    pub b: Vec<[u32; 2]>,
    /// What ptxas said about each candidate it refused (source `ptxas` only).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub rejected: Vec<RejectedSelector>,
}

fn accepted_cache() -> &'static Mutex<HashMap<String, AcceptedSelectors>> {
    static CACHE: OnceLock<Mutex<HashMap<String, AcceptedSelectors>>> = OnceLock::new();
    CACHE.get_or_init(Default::default)
}

/// `f` over `items` on a few threads (ptxas runs as one subprocess per item), results in order.
fn par_map<T: Sync, R: Send>(items: &[T], f: impl Fn(&T) -> R + Sync) -> Vec<R> {
    let threads = std::thread::available_parallelism()
        .map_or(2, |n| n.get())
        .clamp(2, 8);
    let chunk = items.len().div_ceil(threads).max(1);
    std::thread::scope(|s| {
        let handles: Vec<_> = items
            .chunks(chunk)
            .map(|part| s.spawn(|| part.iter().map(&f).collect::<Vec<R>>()))
            .collect();
        handles
            .into_iter()
            .flat_map(|h| h.join().expect("ptxas worker panicked"))
            .collect()
    })
}

/// The essential part of ptxas's first error line.
fn ptxas_error(log: &str) -> String {
    log.lines()
        .find(|l| l.contains("error"))
        .map(|l| {
            let after = &l[l.find("error").expect("found") + "error".len()..];
            after
                .trim_start()
                .trim_start_matches(':')
                .trim()
                .to_string()
        })
        .unwrap_or_else(|| log.lines().next().unwrap_or("").trim().to_string())
}

fn fmt_set(xs: impl IntoIterator<Item = u32>) -> String {
    let set: BTreeSet<u32> = xs.into_iter().collect();
    let items: Vec<String> = set.iter().map(u32::to_string).collect();
    format!("{{{}}}", items.join(", "))
}

impl AcceptedSelectors {
    pub fn of(&self, op: ScaleOperand) -> &[[u32; 2]] {
        match op {
            ScaleOperand::A => &self.a,
            ScaleOperand::B => &self.b,
        }
    }

    /// The ranges ptxas 13.5.37 reported (byte-id 0..3 for 1X, 0 or 2 for 2X, 0 for 4X;
    /// thread-id-a 0..1, thread-id-b 0..3), for when no ptxas answers; `why` says why not.
    pub fn recorded(v: &Variant, why: &str) -> Self {
        let vec = v.scale.map_or(1, |s| s.vec);
        let bytes: &[u32] = match vec {
            1 => &[0, 1, 2, 3],
            2 => &[0, 2],
            _ => &[0],
        };
        let pairs = |threads: u32| -> Vec<[u32; 2]> {
            bytes
                .iter()
                .flat_map(|&b| (0..threads).map(move |t| [b, t]))
                .collect()
        };
        AcceptedSelectors {
            source: SelectorSource::Recorded,
            detail: format!(
                "not asked of ptxas ({why}); the ranges ptxas {RECORDED_PTXAS_VERSION} reported for \
                 scale_vec::{vec}X: byte-id {}, thread-id-a {{0, 1}}, thread-id-b {{0, 1, 2, 3}}",
                fmt_set(bytes.iter().copied())
            ),
            a: pairs(2),
            b: pairs(4),
            rejected: Vec::new(),
        }
    }

    /// Ask ptxas: assemble the probe kernel for every candidate in 0..4 × 0..4 per operand (the
    /// other operand at {0, 0}). Err says why ptxas gave no usable answer.
    pub fn from_ptxas(v: &Variant) -> std::result::Result<Self, String> {
        let path = tools::find_tool("ptxas").ok_or_else(|| "ptxas not found".to_string())?;
        let version = tools::ptxas_version().unwrap_or_else(|| "(unknown version)".into());
        let n = SELECTOR_CANDIDATES;
        let candidates: Vec<(ScaleOperand, u32, u32)> = ScaleOperand::BOTH
            .iter()
            .flat_map(|&op| (0..n).flat_map(move |b| (0..n).map(move |t| (op, b, t))))
            .collect();
        let results = par_map(&candidates, |&(op, b, t)| {
            tools::assemble(
                &fragment_kernel(v, v.min_target, op.selectors(b, t)),
                v.min_target,
            )
        });
        let mut acc = AcceptedSelectors {
            source: SelectorSource::Ptxas,
            detail: format!(
                "ptxas {version} ({}) assembled the probe kernel for {} with each candidate \
                 {{byte-id, thread-id}} in 0..{} × 0..{} (the other scale operand at {{0, 0}})",
                path.display(),
                v.min_target,
                n - 1,
                n - 1
            ),
            a: Vec::new(),
            b: Vec::new(),
            rejected: Vec::new(),
        };
        for (&(op, b, t), r) in candidates.iter().zip(results) {
            match r {
                Ok(_) => match op {
                    ScaleOperand::A => acc.a.push([b, t]),
                    ScaleOperand::B => acc.b.push([b, t]),
                },
                Err(AssembleError::Rejected { log }) => {
                    let says = ptxas_error(&log);
                    match acc
                        .rejected
                        .iter_mut()
                        .find(|r| r.operand == op && r.ptxas_says == says)
                    {
                        Some(r) => r.selectors.push([b, t]),
                        None => acc.rejected.push(RejectedSelector {
                            operand: op,
                            selectors: vec![[b, t]],
                            ptxas_says: says,
                        }),
                    }
                }
                Err(e) => return Err(format!("ptxas could not be run: {e}")),
            }
        }
        if !acc.a.contains(&[0, 0]) || !acc.b.contains(&[0, 0]) {
            let said = acc
                .rejected
                .iter()
                .find(|r| r.selectors.contains(&[0, 0]))
                .map(|r| r.ptxas_says.clone())
                .unwrap_or_default();
            return Err(format!(
                "ptxas {version} rejects even the selectors {{0, 0}}: {said}"
            ));
        }
        Ok(acc)
    }

    /// ptxas's answer for `v` (once per variant and process), or the recorded ranges where
    /// `ask_ptxas` is false or ptxas gives no answer.
    pub fn for_variant(v: &Variant, ask_ptxas: bool) -> Self {
        if !ask_ptxas {
            return Self::recorded(v, "--no-ptxas");
        }
        if let Some(hit) = accepted_cache().lock().expect("cache").get(&v.id()) {
            return hit.clone();
        }
        let got = Self::from_ptxas(v).unwrap_or_else(|why| Self::recorded(v, &why));
        accepted_cache()
            .lock()
            .expect("cache")
            .insert(v.id(), got.clone());
        got
    }

    /// `byte-id {0, 1, 2, 3} × thread-id {0, 1}` where the pairs form a product, else the list.
    pub fn describe(&self, op: ScaleOperand) -> String {
        let pairs = self.of(op);
        let bytes: BTreeSet<u32> = pairs.iter().map(|p| p[0]).collect();
        let threads: BTreeSet<u32> = pairs.iter().map(|p| p[1]).collect();
        if bytes.len() * threads.len() == pairs.len() {
            format!(
                "byte-id {} × thread-id {}",
                fmt_set(bytes.iter().copied()),
                fmt_set(threads.iter().copied())
            )
        } else {
            let list: Vec<String> = pairs
                .iter()
                .map(|p| format!("{{{}, {}}}", p[0], p[1]))
                .collect();
            list.join(" ")
        }
    }
}

// --- method ------------------------------------------------------------------------------

/// The experiment's inputs, recorded so that every increment can be checked by hand.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Method {
    /// How k-blocks are defined.
    pub kblocks: String,
    /// K / vec: k per block.
    pub k_per_block: u32,
    /// The value of every A element of k-block j.
    pub a_kblock_values: Vec<f64>,
    /// The value of every B element.
    pub b_value: f64,
    /// D everywhere with every scale byte at 1.0.
    pub baseline: f64,
    /// The D increment that names k-block j when one of its scale bytes doubles: (K/vec)·w_j.
    pub kblock_increments: Vec<f64>,
    /// Scale byte codes of 1.0 and of 2.0.
    pub scale_one: u32,
    pub scale_two: u32,
}

/// Weights and scale codes for `v` (block-scaled variants only).
pub fn method(v: &Variant) -> Result<Method> {
    let Some(BlockScale { vec, stype }) = v.scale else {
        bail!("{} has no block scaling", v.id());
    };
    let per = v.shape.k / vec;
    // w_j = 2^(e + j): the largest base e ≤ 0 for which every weight is exact in A's type.
    let a_kblock_values = (0..=4)
        .map(|e| {
            (0..vec)
                .map(|j| 2f64.powi(j as i32 - e))
                .collect::<Vec<_>>()
        })
        .find(|ws| ws.iter().all(|&w| v.a.encode_exact(w).is_some()))
        .with_context(|| format!("no power-of-two weights exact in {}", v.a))?;
    let scale_one = stype.encode_exact(1.0).context("scale 1.0")? as u32;
    let scale_two = stype.encode_exact(2.0).context("scale 2.0")? as u32;
    let kblock_increments: Vec<f64> = a_kblock_values.iter().map(|w| per as f64 * w).collect();
    Ok(Method {
        kblocks: format!(
            "k-block j = the layout's k labels in [j·{per}, (j+1)·{per}) (K = {}, scale_vec::{vec}X). \
             k labels are the layout's: the ISA's k for the documented layout, the fragment \
             probe's convention for a measured map; block scaling breaks the k symmetry, and \
             this probe measures which labels each scale byte scales.",
            v.shape.k
        ),
        k_per_block: per,
        baseline: kblock_increments.iter().sum(),
        a_kblock_values,
        b_value: 1.0,
        kblock_increments,
        scale_one,
        scale_two,
    })
}

// --- observations ------------------------------------------------------------------------

/// One (row or column, k-block) a scale byte scales.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub struct Effect {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub row: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub col: Option<u32>,
    pub kblock: u32,
}

impl Effect {
    /// The row (scale_a) or column (scale_b).
    pub fn index(&self) -> u32 {
        self.row.or(self.col).expect("row or col")
    }
}

/// A (lane, byte) of a scale register whose doubling changed D, under one selector pair.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Entry {
    pub operand: ScaleOperand,
    pub byte_id: u32,
    pub thread_id: u32,
    pub lane: u32,
    pub byte: u32,
    /// Every row (column) whose increment is exactly one k-block's.
    pub effect: Vec<Effect>,
    /// What else was seen, as observed: several rows/columns, increments that are no single
    /// block's or that differ along the row/column.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unexplained: Option<String>,
}

/// A closed form of one sweep: lane = lane_per_mod8·(x%8) + lane_per_div8·(x/8) + lane_offset,
/// byte = byte_base + byte_per_kblock·j, for x the row (scale_a) or column (scale_b).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Fit {
    pub lane_per_mod8: i64,
    pub lane_per_div8: i64,
    pub lane_offset: i64,
    pub byte_base: i64,
    pub byte_per_kblock: i64,
}

/// One selector combination's results.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Sweep {
    pub operand: ScaleOperand,
    pub byte_id: u32,
    pub thread_id: u32,
    /// The instruction that ran.
    pub mma: String,
    pub experiments: usize,
    /// D of the baseline (every scale 1.0) equals `method.baseline` everywhere.
    pub baseline_ok: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub baseline_note: Option<String>,
    /// Lanes and bytes whose doubling changed D.
    pub lanes_read: Vec<u32>,
    pub bytes_read: Vec<u32>,
    /// Entries of this sweep with something unexplained.
    pub unexplained: usize,
    /// Where every (row or column, k-block) has exactly one (lane, byte) and a formula fits.
    pub fit: Option<Fit>,
    /// One line, or a line and a table where no formula fits.
    pub summary: String,
}

/// Linear combination as text: `4·(r%8) + r/8 + 2`, `3 - j`, `0`.
fn linear(terms: &[(i64, &str)], constant: i64) -> String {
    let mut s = String::new();
    for &(coef, name) in terms.iter().filter(|t| t.0 != 0) {
        let mag = coef.unsigned_abs();
        let body = if mag == 1 {
            name.to_string()
        } else {
            format!("{mag}·{name}")
        };
        s += &match (s.is_empty(), coef < 0) {
            (true, false) => body,
            (true, true) => format!("-{body}"),
            (false, false) => format!(" + {body}"),
            (false, true) => format!(" - {body}"),
        };
    }
    if s.is_empty() {
        return constant.to_string();
    }
    match constant.cmp(&0) {
        std::cmp::Ordering::Greater => s + &format!(" + {constant}"),
        std::cmp::Ordering::Less => s + &format!(" - {}", constant.unsigned_abs()),
        std::cmp::Ordering::Equal => s,
    }
}

fn lane_vars(op: ScaleOperand, extent: u32) -> (String, String) {
    let x = op.var();
    let modv = if extent > 8 {
        format!("({x}%8)")
    } else {
        x.to_string()
    };
    (modv, format!("{x}/8"))
}

impl Fit {
    /// `lane 4·(r%8) + r/8, byte 0 → row r` (and `, k-block j` for 2X/4X).
    pub fn describe(&self, op: ScaleOperand, extent: u32, vec: u32) -> String {
        let (modv, divv) = lane_vars(op, extent);
        let lane = linear(
            &[(self.lane_per_mod8, &modv), (self.lane_per_div8, &divv)],
            self.lane_offset,
        );
        let byte = match (vec, self.byte_base, self.byte_per_kblock) {
            (1, b, _) | (_, b, 0) => b.to_string(),
            (_, 0, s) => linear(&[(s, "j")], 0),
            (_, b, s) => format!(
                "{b} {} {}",
                if s < 0 { "-" } else { "+" },
                linear(&[(s.abs(), "j")], 0)
            ),
        };
        let x = op.var();
        let target = if vec == 1 {
            format!("{} {x}", op.axis())
        } else {
            format!("{} {x}, k-block j", op.axis())
        };
        format!("lane {lane}, byte {byte} → {target}")
    }
}

fn sel_text(op: ScaleOperand, byte_id: u32, thread_id: u32) -> String {
    format!(
        "{} {{byte-id {byte_id}, thread-id {thread_id}}}",
        op.register()
    )
}

/// Subsets of k-blocks whose increments add up to `x` (a hint for unexplained increments).
fn block_subset(incs: &[f64], x: f64) -> Option<Vec<usize>> {
    (1u32..(1 << incs.len()))
        .find(|mask| {
            let sum: f64 = (0..incs.len())
                .filter(|j| mask >> j & 1 == 1)
                .map(|j| incs[j])
                .sum();
            sum == x
        })
        .map(|mask| (0..incs.len()).filter(|j| mask >> j & 1 == 1).collect())
}

fn fmt_f(x: f64) -> String {
    format!("{x}")
}

/// Classify one experiment's D increments (m×n, row-major).
fn classify(
    delta: &[f64],
    n: usize,
    op: ScaleOperand,
    extent: usize,
    along: usize,
    m: &Method,
) -> (Vec<Effect>, Option<String>) {
    let at = |line: usize, i: usize| match op {
        ScaleOperand::A => delta[line * n + i],
        ScaleOperand::B => delta[i * n + line],
    };
    let axis = op.axis();
    let incs: Vec<String> = m.kblock_increments.iter().map(|&x| fmt_f(x)).collect();
    let mut effects = Vec::new();
    let mut notes = Vec::new();
    let mut changed = 0;
    for line in 0..extent {
        let vals: Vec<f64> = (0..along).map(|i| at(line, i)).collect();
        if vals.iter().all(|&x| x == 0.0) {
            continue;
        }
        changed += 1;
        let first = vals[0];
        if vals.iter().any(|&x| x != first || x.is_nan()) {
            let shown: Vec<String> = vals.iter().map(|&x| fmt_f(x)).collect();
            notes.push(format!(
                "{axis} {line}: increments differ along the {axis}: [{}]",
                shown.join(", ")
            ));
        } else if let Some(j) = m.kblock_increments.iter().position(|&inc| inc == first) {
            effects.push(match op {
                ScaleOperand::A => Effect {
                    row: Some(line as u32),
                    col: None,
                    kblock: j as u32,
                },
                ScaleOperand::B => Effect {
                    row: None,
                    col: Some(line as u32),
                    kblock: j as u32,
                },
            });
        } else {
            let hint = block_subset(&m.kblock_increments, first)
                .map(|js| {
                    let list: Vec<String> = js.iter().map(usize::to_string).collect();
                    format!(
                        " (= the increments of k-blocks {{{}}} together)",
                        list.join(", ")
                    )
                })
                .unwrap_or_default();
            notes.push(format!(
                "{axis} {line}: +{} along the whole {axis}, which is no single k-block's increment \
                 [{}]{hint}",
                fmt_f(first),
                incs.join(", ")
            ));
        }
    }
    if changed > 1 {
        notes.insert(0, format!("{changed} {axis}s changed"));
    }
    let unexplained = (!notes.is_empty()).then(|| notes.join("; "));
    (effects, unexplained)
}

/// Fit a clean sweep: every (x, j) scaled by exactly one (lane, byte), each (lane, byte) scaling
/// one (x, j). Err says what is not clean, as lines of a table.
fn fit_sweep(entries: &[Entry], extent: u32, vec: u32) -> std::result::Result<Fit, String> {
    let mut sources: BTreeMap<(u32, u32), Vec<(u32, u32)>> = BTreeMap::new();
    for e in entries {
        for f in &e.effect {
            sources
                .entry((f.index(), f.kblock))
                .or_default()
                .push((e.lane, e.byte));
        }
    }
    let clean = entries
        .iter()
        .all(|e| e.unexplained.is_none() && e.effect.len() == 1)
        && (0..extent)
            .all(|x| (0..vec).all(|j| sources.get(&(x, j)).is_some_and(|s| s.len() == 1)));
    let table = || {
        let mut lines = Vec::new();
        for x in 0..extent {
            for j in 0..vec {
                let src = sources
                    .get(&(x, j))
                    .map(|s| {
                        s.iter()
                            .map(|(l, b)| format!("lane {l} byte {b}"))
                            .collect::<Vec<_>>()
                            .join(", ")
                    })
                    .unwrap_or_else(|| "nothing".into());
                lines.push(format!("{x:>2}, k-block {j} ← {src}"));
            }
        }
        for e in entries.iter().filter(|e| e.unexplained.is_some()) {
            lines.push(format!(
                "lane {} byte {}: unexplained: {}",
                e.lane,
                e.byte,
                e.unexplained.as_deref().unwrap_or("")
            ));
        }
        lines.join("\n")
    };
    if !clean {
        return Err(table());
    }
    let src = |x: u32, j: u32| -> (i64, i64) {
        let (l, b) = sources[&(x, j)][0];
        (l as i64, b as i64)
    };
    let (c, b0) = src(0, 0);
    let p = if extent > 1 { src(1, 0).0 - c } else { 0 };
    let q = if extent > 8 { src(8, 0).0 - c } else { 0 };
    let s = if vec > 1 { src(0, 1).1 - b0 } else { 0 };
    let fit = Fit {
        lane_per_mod8: p,
        lane_per_div8: q,
        lane_offset: c,
        byte_base: b0,
        byte_per_kblock: s,
    };
    let fits = (0..extent).all(|x| {
        (0..vec).all(|j| {
            let (l, b) = src(x, j);
            l == p * (x % 8) as i64 + q * (x / 8) as i64 + c && b == b0 + s * j as i64
        })
    });
    if fits { Ok(fit) } else { Err(table()) }
}

/// Run one selector combination: a baseline and 32 lanes × 4 bytes, in one batch.
pub fn sweep(
    backend: &dyn Backend,
    v: &Variant,
    layout: &Layout,
    m: &Method,
    op: ScaleOperand,
    byte_id: u32,
    thread_id: u32,
) -> Result<(Sweep, Vec<Entry>)> {
    let sc = v
        .scale
        .context("the scale probe needs a block-scaled variant")?;
    let sel = op.selectors(byte_id, thread_id);
    let count = 1 + 32 * 4;
    let mut batch = Batch::zeroed(v, 1);
    // Experiment 0: A by k-block weights through the layout, B = 1, C = 0, scales 1.0.
    let a_bits: Vec<u64> = m
        .a_kblock_values
        .iter()
        .map(|&w| v.a.encode_exact(w).context("weight not exact"))
        .collect::<Result<_>>()?;
    for (i, c) in layout.a.iter().enumerate() {
        set_slot(
            v,
            &mut batch,
            Operand::A,
            0,
            i,
            a_bits[(c.col / m.k_per_block) as usize],
        );
    }
    fill(
        v,
        &mut batch,
        Operand::B,
        0,
        v.b.encode_exact(m.b_value).context("B value")?,
    );
    let one_word = m.scale_one * 0x0101_0101;
    let repeat = |x: &[u32]| x.repeat(count);
    let mut batch = Batch {
        experiments: count,
        a: repeat(&batch.a),
        b: repeat(&batch.b),
        c: repeat(&batch.c),
        scale_a: vec![one_word; count * 32],
        scale_b: vec![one_word; count * 32],
        ..Batch::default()
    };
    let words = match op {
        ScaleOperand::A => &mut batch.scale_a,
        ScaleOperand::B => &mut batch.scale_b,
    };
    for lane in 0..32usize {
        for byte in 0..4usize {
            let w = &mut words[(1 + lane * 4 + byte) * 32 + lane];
            *w = (*w & !(0xff << (8 * byte))) | (m.scale_two << (8 * byte));
        }
    }
    let out = backend.run(v, sel, &batch).with_context(|| {
        format!(
            "scale probe launch for {}",
            sel_text(op, byte_id, thread_id)
        )
    })?;
    let d = d_bits(v, &out, count);
    let fd = v.fragment(Operand::D);
    let (rows, cols) = (v.shape.m as usize, v.shape.n as usize);
    let dense = |bits: &[u64]| -> Vec<f64> {
        let mut x = vec![f64::NAN; rows * cols];
        for (slot, c) in layout.d.iter().enumerate() {
            x[c.row as usize * cols + c.col as usize] = fd.elem.decode(bits[slot]);
        }
        x
    };
    let base = dense(&d[0]);
    let bad = base.iter().position(|&x| x != m.baseline);
    let baseline_note = bad.map(|i| {
        format!(
            "baseline D({}, {}) = {}, not {} = (K/vec)·Σw; increments are taken against the \
             measured baseline",
            i / cols,
            i % cols,
            fmt_f(base[i]),
            fmt_f(m.baseline)
        )
    });
    let extent = op.extent(v) as usize;
    let along = match op {
        ScaleOperand::A => cols,
        ScaleOperand::B => rows,
    };
    let mut entries = Vec::new();
    for lane in 0..32u32 {
        for byte in 0..4u32 {
            let e = 1 + (lane * 4 + byte) as usize;
            let got = dense(&d[e]);
            let delta: Vec<f64> = got.iter().zip(&base).map(|(g, b)| g - b).collect();
            let (effect, unexplained) = classify(&delta, cols, op, extent, along, m);
            if !effect.is_empty() || unexplained.is_some() {
                entries.push(Entry {
                    operand: op,
                    byte_id,
                    thread_id,
                    lane,
                    byte,
                    effect,
                    unexplained,
                });
            }
        }
    }
    let fit = fit_sweep(&entries, op.extent(v), sc.vec);
    let head = sel_text(op, byte_id, thread_id);
    let summary = match &fit {
        Ok(f) => format!("{head}: {}", f.describe(op, op.extent(v), sc.vec)),
        Err(table) if entries.is_empty() => {
            format!("{head}: no (lane, byte) changed D\n{table}")
        }
        Err(table) => format!(
            "{head}: not one (lane, byte) per ({}, k-block) with a formula \
             p·(x%8) + q·(x/8) + c; as measured:\n{table}",
            op.axis()
        ),
    };
    let kernel = fragment_kernel(v, v.min_target, sel);
    let mma = kernel
        .lines()
        .find(|l| l.trim_start().starts_with("mma."))
        .unwrap_or("")
        .trim()
        .to_string();
    let sweep = Sweep {
        operand: op,
        byte_id,
        thread_id,
        mma,
        experiments: count,
        baseline_ok: baseline_note.is_none(),
        baseline_note,
        lanes_read: entries
            .iter()
            .map(|e| e.lane)
            .collect::<BTreeSet<_>>()
            .into_iter()
            .collect(),
        bytes_read: entries
            .iter()
            .map(|e| e.byte)
            .collect::<BTreeSet<_>>()
            .into_iter()
            .collect(),
        unexplained: entries.iter().filter(|e| e.unexplained.is_some()).count(),
        fit: fit.ok(),
        summary,
    };
    Ok((sweep, entries))
}

/// One line per scale operand: a formula in the selectors where every sweep fits
/// lane = … + α·thread-id and byte = byte-id + β + s·j; otherwise says so.
fn overall(v: &Variant, op: ScaleOperand, sweeps: &[Sweep]) -> String {
    let vec = v.scale.map_or(1, |s| s.vec);
    let extent = op.extent(v);
    let mine: Vec<&Sweep> = sweeps.iter().filter(|s| s.operand == op).collect();
    let n = mine.len();
    let head = format!(
        "{}, all {n} selector pair{} swept",
        op.register(),
        if n == 1 { "" } else { "s" }
    );
    let fits: Option<Vec<(&Sweep, Fit)>> = mine.iter().map(|s| s.fit.map(|f| (*s, f))).collect();
    let Some(fits) = fits.filter(|f| !f.is_empty()) else {
        return format!("{head}: not every selector pair has a formula; see each sweep");
    };
    let Some(&(r, rf)) = fits
        .iter()
        .filter(|(s, _)| s.thread_id == 0)
        .min_by_key(|(s, _)| s.byte_id)
    else {
        return format!("{head}: no thread-id 0 sweep to anchor a formula; see each sweep");
    };
    let c0 = rf.lane_offset;
    let beta = rf.byte_base - r.byte_id as i64;
    let alpha = fits
        .iter()
        .find(|(s, _)| s.thread_id != 0)
        .map(|(s, f)| (f.lane_offset - c0) / s.thread_id as i64)
        .unwrap_or(0);
    let consistent = fits.iter().all(|(s, f)| {
        f.lane_per_mod8 == rf.lane_per_mod8
            && f.lane_per_div8 == rf.lane_per_div8
            && f.byte_per_kblock == rf.byte_per_kblock
            && f.lane_offset == c0 + alpha * s.thread_id as i64
            && f.byte_base == s.byte_id as i64 + beta
    });
    if !consistent {
        return format!("{head}: the selectors do not follow one formula; see each sweep");
    }
    let (modv, divv) = lane_vars(op, extent);
    let lane = linear(
        &[
            (rf.lane_per_mod8, &modv),
            (rf.lane_per_div8, &divv),
            (alpha, "thread-id"),
        ],
        c0,
    );
    let byte = linear(
        &[
            (1, "byte-id"),
            (rf.byte_per_kblock * i64::from(vec > 1), "j"),
        ],
        beta,
    );
    let x = op.var();
    let target = if vec == 1 {
        format!("{} {x}", op.axis())
    } else {
        format!("{} {x}, k-block j", op.axis())
    };
    format!("{head}: lane {lane}, byte {byte} → {target}")
}

/// Everything one probe run found for one variant.
pub struct ScaleOutcome {
    pub method: Method,
    pub sweeps: Vec<Sweep>,
    pub entries: Vec<Entry>,
    pub overall: Vec<String>,
    pub timing: Timing,
}

impl ScaleOutcome {
    pub fn sweep(&self, op: ScaleOperand, byte_id: u32, thread_id: u32) -> Option<&Sweep> {
        self.sweeps
            .iter()
            .find(|s| s.operand == op && s.byte_id == byte_id && s.thread_id == thread_id)
    }

    /// (lane, byte) → effects of one selector combination (entries that changed D only).
    pub fn effects(
        &self,
        op: ScaleOperand,
        byte_id: u32,
        thread_id: u32,
    ) -> BTreeMap<(u32, u32), Vec<Effect>> {
        effects_of(&self.entries, op, byte_id, thread_id)
    }
}

fn effects_of(
    entries: &[Entry],
    op: ScaleOperand,
    byte_id: u32,
    thread_id: u32,
) -> BTreeMap<(u32, u32), Vec<Effect>> {
    entries
        .iter()
        .filter(|e| e.operand == op && e.byte_id == byte_id && e.thread_id == thread_id)
        .map(|e| ((e.lane, e.byte), e.effect.clone()))
        .collect()
}

/// Run every accepted selector combination of both scale operands.
pub fn probe(
    backend: &dyn Backend,
    v: &Variant,
    layout: &Layout,
    selectors: &AcceptedSelectors,
) -> Result<ScaleOutcome> {
    let start = Instant::now();
    layout
        .check_bijective(v)
        .map_err(anyhow::Error::msg)
        .context("the layout that places A, B and D")?;
    let m = method(v)?;
    let mut sweeps = Vec::new();
    let mut entries = Vec::new();
    for op in ScaleOperand::BOTH {
        for &[b, t] in selectors.of(op) {
            let (s, e) = sweep(backend, v, layout, &m, op, b, t)?;
            sweeps.push(s);
            entries.extend(e);
        }
    }
    let overall = ScaleOperand::BOTH
        .iter()
        .map(|&op| overall(v, op, &sweeps))
        .collect();
    let experiments = sweeps.iter().map(|s| s.experiments).sum();
    let launches = sweeps.len();
    Ok(ScaleOutcome {
        method: m,
        sweeps,
        entries,
        overall,
        timing: Timing {
            wall_s: start.elapsed().as_secs_f64(),
            experiments,
            launches,
        },
    })
}

// --- the record ----------------------------------------------------------------------------

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ScaleStatus {
    /// Every baseline as expected and every change one (row or column, k-block).
    Explained,
    /// Something was seen that the model does not explain; the entries say what.
    Unexplained,
}

/// Which fragment layout placed A, B and D.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct LayoutSource {
    /// `documented` or `measured`.
    pub source: String,
    pub detail: String,
}

impl LayoutSource {
    pub fn documented() -> Self {
        LayoutSource {
            source: "documented".into(),
            detail: "the PTX ISA's documented fragment layout (src/layout/documented.rs)".into(),
        }
    }

    pub fn measured(path: &Path, map: &crate::layout::LaneMap) -> Self {
        LayoutSource {
            source: "measured".into(),
            detail: format!(
                "{} ({:?} lane map, status {:?}, {} at {})",
                path.display(),
                map.backend,
                map.status,
                map.provenance.device,
                map.provenance.date
            ),
        }
    }
}

/// The scale lane map of one variant: `fp4probe.scalemap/1`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ScaleMap {
    pub schema: String,
    pub variant: String,
    pub instruction: String,
    pub backend: BackendKind,
    /// For the emulator, that this is the documented model and not a hardware finding.
    pub note: String,
    pub status: ScaleStatus,
    pub shape: Shape,
    pub scale: BlockScale,
    pub min_target: Target,
    pub layout: LayoutSource,
    pub method: Method,
    pub selectors: AcceptedSelectors,
    /// The PTX module is the one for selectors {0, 0}; each sweep names its instruction.
    pub provenance: Provenance,
    /// Per scale operand: one formula over all selectors, where one fits.
    pub overall: Vec<String>,
    pub sweeps: Vec<Sweep>,
    /// Every (lane, byte) whose doubling changed D, per selector pair; a (lane, byte) not
    /// listed for a selector pair changed nothing.
    pub entries: Vec<Entry>,
    pub timing: Timing,
}

impl ScaleMap {
    pub fn new(
        v: &Variant,
        outcome: ScaleOutcome,
        provenance: Provenance,
        layout: LayoutSource,
        selectors: AcceptedSelectors,
    ) -> Self {
        let explained = outcome
            .sweeps
            .iter()
            .all(|s| s.baseline_ok && s.unexplained == 0);
        let note = match provenance.backend {
            BackendKind::Emulator => EMULATOR_NOTE.to_string(),
            BackendKind::Hardware => format!(
                "hardware: measured on {} (cc {}); every entry is what the instruction did.",
                provenance.device,
                provenance.compute_capability.as_deref().unwrap_or("?")
            ),
        };
        ScaleMap {
            schema: SCHEMA.into(),
            variant: v.id(),
            instruction: v.opcode(),
            backend: provenance.backend,
            note,
            status: if explained {
                ScaleStatus::Explained
            } else {
                ScaleStatus::Unexplained
            },
            shape: v.shape,
            scale: v.scale.expect("block-scaled"),
            min_target: v.min_target,
            layout,
            method: outcome.method,
            selectors,
            provenance,
            overall: outcome.overall,
            sweeps: outcome.sweeps,
            entries: outcome.entries,
            timing: outcome.timing,
        }
    }

    /// (lane, byte) → effects of one selector combination.
    pub fn effects(
        &self,
        op: ScaleOperand,
        byte_id: u32,
        thread_id: u32,
    ) -> BTreeMap<(u32, u32), Vec<Effect>> {
        effects_of(&self.entries, op, byte_id, thread_id)
    }

    /// Pretty JSON, one line per entry.
    pub fn to_json(&self) -> String {
        let head = ScaleMap {
            entries: Vec::new(),
            ..self.clone()
        };
        let pretty = crate::jsonfmt::to_compact_json(&head);
        let body = if self.entries.is_empty() {
            "[]".to_string()
        } else {
            let lines: Vec<String> = self
                .entries
                .iter()
                .map(|e| format!("    {}", serde_json::to_string(e).expect("serialises")))
                .collect();
            format!("[\n{}\n  ]", lines.join(",\n"))
        };
        pretty.replacen("\"entries\": []", &format!("\"entries\": {body}"), 1)
    }

    /// One row per (entry, effect): `operand,byte_id,thread_id,lane,byte,row_or_col,kblock`.
    /// An entry with no clean effect (only unexplained changes) is one row with the last two
    /// fields empty; the JSON says what was seen.
    pub fn to_csv(&self) -> Result<String> {
        let mut w = csv::Writer::from_writer(Vec::new());
        w.write_record(CSV_HEADER.split(','))?;
        for e in &self.entries {
            let head = [
                e.operand.name().to_string(),
                e.byte_id.to_string(),
                e.thread_id.to_string(),
                e.lane.to_string(),
                e.byte.to_string(),
            ];
            if e.effect.is_empty() {
                let mut rec = head.to_vec();
                rec.extend([String::new(), String::new()]);
                w.write_record(&rec)?;
            }
            for f in &e.effect {
                let mut rec = head.to_vec();
                rec.extend([f.index().to_string(), f.kblock.to_string()]);
                w.write_record(&rec)?;
            }
        }
        Ok(String::from_utf8(w.into_inner()?)?)
    }

    /// Write `<dir>/<stem>.scale.json` and `<dir>/<stem>.scale.csv` as `out` allows; returns
    /// the JSON path.
    pub fn write(&self, dir: &Path, out: &crate::outfile::Outputs) -> Result<PathBuf> {
        out.write_result(
            dir,
            &format!("{}.scale", self.variant.replace("::", "_")),
            &(self.to_json() + "\n"),
            Some((CSV_HEADER, &self.to_csv()?)),
            self.backend == BackendKind::Emulator,
        )
    }

    /// Read a scale map file back.
    pub fn load(path: &Path) -> Result<Self> {
        let text = std::fs::read_to_string(path)
            .with_context(|| format!("cannot read {}", path.display()))?;
        let map: ScaleMap = serde_json::from_str(&text).map_err(|e| {
            anyhow::anyhow!(
                "{}:{}:{}: malformed scale map: {e}",
                path.display(),
                e.line(),
                e.column()
            )
        })?;
        if map.schema != SCHEMA {
            bail!(
                "{}: schema '{}' is not '{SCHEMA}'",
                path.display(),
                map.schema
            );
        }
        Ok(map)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn linear_text() {
        assert_eq!(linear(&[(4, "(r%8)"), (1, "r/8")], 0), "4·(r%8) + r/8");
        assert_eq!(linear(&[(4, "c")], 3), "4·c + 3");
        assert_eq!(linear(&[(-1, "j")], 3), "-j + 3");
        assert_eq!(linear(&[(0, "j")], 2), "2");
        assert_eq!(linear(&[(1, "byte-id"), (1, "j")], 0), "byte-id + j");
        assert_eq!(linear(&[(2, "x")], -1), "2·x - 1");
    }

    #[test]
    fn ptxas_error_lines() {
        let log = "ptxas /tmp/x/in.ptx, line 31; error   : Argument 5 of instruction 'mma': \
                   unexpected value '1', expected to be 0\nptxas fatal   : Ptx assembly aborted";
        assert_eq!(
            ptxas_error(log),
            "Argument 5 of instruction 'mma': unexpected value '1', expected to be 0"
        );
    }

    #[test]
    fn weights_name_blocks() {
        let v = crate::isa::find(
            "m16n8k64.kind::mxf4nvf4.block_scale.scale_vec::4X.f32.e2m1.e2m1.f32.ue4m3",
        )
        .unwrap();
        let m = method(&v).unwrap();
        assert_eq!(m.a_kblock_values, vec![0.5, 1.0, 2.0, 4.0]);
        assert_eq!(m.kblock_increments, vec![8.0, 16.0, 32.0, 64.0]);
        assert_eq!((m.scale_one, m.scale_two), (0x38, 0x40));
        let v = crate::isa::find(
            "m16n8k32.kind::mxf8f6f4.block_scale.scale_vec::1X.f32.e5m2.e2m1.f32.ue8m0",
        )
        .unwrap();
        let m = method(&v).unwrap();
        assert_eq!((m.scale_one, m.scale_two), (127, 128));
        assert_eq!(m.baseline, 32.0);
    }
}
