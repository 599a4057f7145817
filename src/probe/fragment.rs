//! The fragment probe: one-hot experiments for A, B and C, a bit-sliced pairing phase for k,
//! inference of the full slot → (row, col) maps, and validation through the inferred maps.
//!
//! Launches (each one batch, one CTA per experiment):
//! 1. one-hot: A one-hot with B = 1; B one-hot with A = 1; C one-hot with A = B = 0; each
//!    against its all-zero baseline. Which D slots change gives rows, columns and C → D.
//! 2. pairing: for each i < k and each bit of ⌈log2 k⌉, A slot i of every row set and the B slots
//!    whose in-column index has that bit set; against baselines with A = 0. That pins which B
//!    slot meets which A slot on a common k in ~k·log2(k) experiments instead of |A|·|B|.
//! 3. validation: identity (A = B = I, C = 0) and random exactly-representable A, B, C placed
//!    through the inferred maps; D read back through the inferred D map must equal the CPU GEMM
//!    bit for bit.

use super::infer::{self, OneHot, PairingPlan};
use crate::device::{Backend, Batch};
use crate::gemm;
use crate::isa::{BitOp, Operand, ScaleSelectors, Variant};
use crate::layout::convention::Structure;
use crate::layout::documented::documented;
use crate::layout::{Coord, Layout, SlotSpace};
use anyhow::{Context, Result};
use serde::{Deserialize, Serialize};
use std::time::Instant;

/// Raw observations, kept so that a failed inference can be inspected.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct RawObservations {
    /// For each A/B/C slot (slot index order), the D slot indices that changed.
    pub a_lit: Vec<Vec<usize>>,
    pub b_lit: Vec<Vec<usize>>,
    pub c_lit: Vec<Vec<usize>>,
    /// Pairing phase: `pairing[i][bit]` = D slots that reported a match.
    pub pairing: Vec<Vec<Vec<usize>>>,
}

/// One validation test's outcome.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Check {
    pub passed: bool,
    /// Elements compared.
    pub compared: usize,
    /// Up to 16 mismatches: (row, col, expected, got).
    pub mismatches: Vec<(u32, u32, f64, f64)>,
    pub mismatch_count: usize,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Validation {
    pub identity: Check,
    pub random: Check,
    pub seed: u64,
}

impl Validation {
    pub fn passed(&self) -> bool {
        self.identity.passed && self.random.passed
    }
}

pub struct FragmentOutcome {
    /// The labelled layout, or the reason inference failed.
    pub layout: std::result::Result<Layout, String>,
    pub structure: Option<Structure>,
    pub validation: Option<Validation>,
    pub raw: RawObservations,
    pub experiments: usize,
    pub launches: usize,
    pub wall_s: f64,
}

impl FragmentOutcome {
    /// No layout, for `why`, with the observations so far.
    pub(crate) fn failed(
        why: String,
        raw: RawObservations,
        experiments: usize,
        launches: usize,
        start: Instant,
    ) -> Self {
        FragmentOutcome {
            layout: Err(why),
            structure: None,
            validation: None,
            raw,
            experiments,
            launches,
            wall_s: start.elapsed().as_secs_f64(),
        }
    }
}

/// Slots of A, B, C and D.
pub(crate) fn slot_counts(v: &Variant) -> [usize; 4] {
    Operand::ALL.map(|op| SlotSpace::of(&v.fragment(op)).len())
}

/// Decoded D of every experiment: `[experiment][d slot]` as raw value bits.
pub(crate) fn d_bits(v: &Variant, words: &[u32], experiments: usize) -> Vec<Vec<u64>> {
    let fd = v.fragment(Operand::D);
    let space = SlotSpace::of(&fd);
    let wpl = fd.words_per_lane() as usize;
    (0..experiments)
        .map(|e| {
            (0..space.len())
                .map(|i| {
                    let s = space.slot(i);
                    let base = (e * 32 + s.lane as usize) * wpl;
                    fd.extract(&words[base..base + wpl], s.reg, s.elem)
                })
                .collect()
        })
        .collect()
}

pub(crate) fn changed(x: &[u64], base: &[u64]) -> Vec<usize> {
    (0..x.len()).filter(|&i| x[i] != base[i]).collect()
}

/// Set slot `index` of operand `op` in experiment `exp` to the value bits `bits`.
pub(crate) fn set_slot(
    v: &Variant,
    batch: &mut Batch,
    op: Operand,
    exp: usize,
    index: usize,
    bits: u64,
) {
    let f = v.fragment(op);
    let s = SlotSpace::of(&f).slot(index);
    f.insert(
        batch.lane_words_mut(v, op, exp, s.lane),
        s.reg,
        s.elem,
        bits,
    );
}

/// One experiment per slot of `op` after the baseline experiment `base`: experiment
/// `base + 1 + s` has slot `s` set to one (on top of whatever the batch holds there).
pub(crate) fn set_one_hot(v: &Variant, batch: &mut Batch, op: Operand, base: usize) {
    let one = v.fragment(op).elem.one();
    for s in 0..SlotSpace::of(&v.fragment(op)).len() {
        set_slot(v, batch, op, base + 1 + s, s, one);
    }
}

/// For each of the `count` experiments after baseline `base`, the D slots that changed.
pub(crate) fn lit_after(d: &[Vec<u64>], base: usize, count: usize) -> Vec<Vec<usize>> {
    (0..count)
        .map(|s| changed(&d[base + 1 + s], &d[base]))
        .collect()
}

/// Place row-major `mat` (of `cols` columns) into operand `op` of experiment `exp` through
/// `map`; every value must be exact in the operand's type.
pub(crate) fn place(
    v: &Variant,
    batch: &mut Batch,
    exp: usize,
    op: Operand,
    map: &[Coord],
    mat: &[f64],
    cols: usize,
) -> Result<()> {
    let elem = v.fragment(op).elem;
    for (i, coord) in map.iter().enumerate() {
        let x = mat[coord.row as usize * cols + coord.col as usize];
        let bits = elem
            .encode_exact(x)
            .with_context(|| format!("{x} is not exact in {elem}"))?;
        set_slot(v, batch, op, exp, i, bits);
    }
    Ok(())
}

pub(crate) fn fill(v: &Variant, batch: &mut Batch, op: Operand, exp: usize, bits: u64) {
    for i in 0..SlotSpace::of(&v.fragment(op)).len() {
        set_slot(v, batch, op, exp, i, bits);
    }
}

/// Run the whole probe for one variant on `backend`.
pub fn probe(backend: &dyn Backend, v: &Variant, seed: u64) -> Result<FragmentOutcome> {
    let start = Instant::now();
    let sel = ScaleSelectors::default();
    let (m, n, k) = (v.shape.m as usize, v.shape.n as usize, v.shape.k as usize);
    let [na, nb, nc, nd] = slot_counts(v);
    let ones = Operand::ALL.map(|op| v.fragment(op).elem.one());
    let one = |op: Operand| ones[op as usize];

    // Phase 1: three baselines and one experiment per A, B and C slot.
    let total = 3 + na + nb + nc;
    let mut batch = Batch::zeroed(v, total);
    let (base_a, base_b, base_c) = (0, 1 + na, 2 + na + nb);
    for e in base_a..=na {
        fill(v, &mut batch, Operand::B, e, one(Operand::B));
    }
    for e in base_b..base_c {
        fill(v, &mut batch, Operand::A, e, one(Operand::A));
    }
    set_one_hot(v, &mut batch, Operand::A, base_a);
    set_one_hot(v, &mut batch, Operand::B, base_b);
    set_one_hot(v, &mut batch, Operand::C, base_c);
    let d = d_bits(
        v,
        &backend.run(v, sel, &batch).context("one-hot launch")?,
        total,
    );
    let mut raw = RawObservations {
        a_lit: lit_after(&d, base_a, na),
        b_lit: lit_after(&d, base_b, nb),
        c_lit: lit_after(&d, base_c, nc),
        pairing: Vec::new(),
    };
    let mut experiments = total;
    let mut launches = 1;
    let obs = OneHot {
        a: raw.a_lit.clone(),
        b: raw.b_lit.clone(),
        c: raw.c_lit.clone(),
    };
    let fail = |why: String, raw: RawObservations, experiments, launches| {
        FragmentOutcome::failed(why, raw, experiments, launches, start)
    };
    let rc = match infer::rows_and_cols(&obs, m, n, k, nd) {
        Ok(rc) => rc,
        Err(e) => return Ok(fail(format!("{e:#}"), raw, experiments, launches)),
    };

    // Phase 2: pairing.
    let all_b: Vec<usize> = (0..nb).collect();
    let pairing = pair(backend, v, &rc, k, &all_b, &|_| {})?;
    experiments += pairing.experiments;
    launches += 1;
    raw.pairing = pairing.met;
    let (a_k, b_k) = match pairing.classes {
        Ok(x) => x,
        Err(e) => return Ok(fail(e, raw, experiments, launches)),
    };
    let structure = infer::structure(rc, a_k, b_k, m, n, k);
    let a_space = SlotSpace::of(&v.fragment(Operand::A));
    let layout = structure.label(Some(&documented(v)), |s| {
        let slot = a_space.slot(s);
        (slot.lane, slot.reg, slot.elem)
    });

    // Phase 3: validation through the inferred maps.
    let validation = validate(backend, v, &layout, seed)?;
    experiments += 2;
    launches += 1;
    Ok(FragmentOutcome {
        layout: Ok(layout),
        structure: Some(structure),
        validation: Some(validation),
        raw,
        experiments,
        launches,
        wall_s: start.elapsed().as_secs_f64(),
    })
}

/// What the pairing phase of one product found.
pub(crate) struct Pairing {
    /// `met[i][bit]` = D slots that reported a match (kept as raw observations).
    pub met: Vec<Vec<Vec<usize>>>,
    /// The k class of every A slot and of every B slot of `b_slots`, or why there is none.
    pub classes: std::result::Result<(Vec<usize>, Vec<usize>), String>,
    pub experiments: usize,
}

/// Phase 2 of one product of depth `k`: which B slot meets which A slot on a common k. For
/// experiment (i, bit), A slot i of every row is set together with the B slots of `b_slots`
/// (indexed as `rc.b_col` is) whose in-column index has that bit set, against a baseline with
/// A = 0. `prepare` sets up what else every experiment of the batch needs (the metadata of
/// `mma.sp`). Experiment index = (i * bits + bit) * 2 + {0: baseline, 1: probe}.
pub(crate) fn pair(
    backend: &dyn Backend,
    v: &Variant,
    rc: &infer::RowsCols,
    k: usize,
    b_slots: &[usize],
    prepare: &dyn Fn(&mut Batch),
) -> Result<Pairing> {
    let (m, n) = (v.shape.m as usize, v.shape.n as usize);
    let one_a = v.fragment(Operand::A).elem.one();
    let one_b = v.fragment(Operand::B).elem.one();
    let plan = PairingPlan::new(rc, m, n, k);
    let count = k * plan.bits * 2;
    let mut batch = Batch::zeroed(v, count);
    prepare(&mut batch);
    for bit in 0..plan.bits {
        let mask = plan.b_mask(bit);
        for i in 0..k {
            for pair in 0..2 {
                let e = (i * plan.bits + bit) * 2 + pair;
                for (t, &on) in mask.iter().enumerate() {
                    if on {
                        set_slot(v, &mut batch, Operand::B, e, b_slots[t], one_b);
                    }
                }
                if pair == 1 {
                    for row in &plan.a_by_row {
                        set_slot(v, &mut batch, Operand::A, e, row[i], one_a);
                    }
                }
            }
        }
    }
    let words = backend
        .run(v, ScaleSelectors::default(), &batch)
        .context("pairing launch")?;
    let fd = v.fragment(Operand::D);
    let nd = SlotSpace::of(&fd).len();
    let values = d_bits(v, &words, count);
    // A match adds a·b = 1 to D (AND, products); under XOR it removes one set bit.
    let match_sign = if v.bitop == Some(BitOp::Xor) {
        -1.0
    } else {
        1.0
    };
    let met: Vec<Vec<Vec<bool>>> = (0..k)
        .map(|i| {
            (0..plan.bits)
                .map(|bit| {
                    let e = (i * plan.bits + bit) * 2;
                    (0..nd)
                        .map(|dslot| {
                            let delta = fd.elem.decode(values[e + 1][dslot])
                                - fd.elem.decode(values[e][dslot]);
                            delta * match_sign > 0.0
                        })
                        .collect()
                })
                .collect()
        })
        .collect();
    Ok(Pairing {
        met: met
            .iter()
            .map(|bits| {
                bits.iter()
                    .map(|ds| (0..nd).filter(|&d| ds[d]).collect())
                    .collect()
            })
            .collect(),
        classes: infer::k_classes(rc, &plan, &met, k).map_err(|e| format!("{e:#}")),
        experiments: count,
    })
}

/// A small deterministic generator (splitmix64): validation inputs are reproducible from the
/// seed recorded in the map.
pub struct SplitMix(pub u64);

impl SplitMix {
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
    pub fn pick<T: Copy>(&mut self, from: &[T]) -> T {
        from[(self.next_u64() % from.len() as u64) as usize]
    }
}

/// Values used for the random test: exact in the operand type, and small enough that every
/// partial sum is exact in the D type (f16 accumulators get {-1, 0, 1}).
pub(crate) fn palette(v: &Variant, op: Operand) -> Vec<f64> {
    let t = v.fragment(op).elem;
    if v.d == crate::formats::ElemType::F16 {
        return vec![-1.0, 0.0, 1.0];
    }
    t.exact_palette().to_vec()
}

/// Place dense matrices through `layout`, run one experiment each, and compare D bit for bit.
pub fn validate(
    backend: &dyn Backend,
    v: &Variant,
    layout: &Layout,
    seed: u64,
) -> Result<Validation> {
    let (m, n, k) = (v.shape.m as usize, v.shape.n as usize, v.shape.k as usize);
    let mut rng = SplitMix(seed);
    let identity = |rows: usize, cols: usize| -> Vec<f64> {
        (0..rows * cols)
            .map(|i| f64::from(u8::from(i / cols == i % cols)))
            .collect()
    };
    let random = |rng: &mut SplitMix, op: Operand, len: usize| -> Vec<f64> {
        let p = palette(v, op);
        (0..len).map(|_| rng.pick(&p)).collect()
    };
    let cases = [
        (identity(m, k), identity(k, n), vec![0.0; m * n]),
        (
            random(&mut rng, Operand::A, m * k),
            random(&mut rng, Operand::B, k * n),
            random(&mut rng, Operand::C, m * n),
        ),
    ];
    let mut batch = Batch::zeroed(v, cases.len());
    for (e, (a, b, c)) in cases.iter().enumerate() {
        for (op, mat, cols) in [(Operand::A, a, k), (Operand::B, b, n), (Operand::C, c, n)] {
            place(v, &mut batch, e, op, layout.operand(op), mat, cols)?;
        }
    }
    let words = backend
        .run(v, ScaleSelectors::default(), &batch)
        .context("validation launch")?;
    let got = d_bits(v, &words, cases.len());
    let dense: Vec<[&[f64]; 3]> = cases.iter().map(|(a, b, c)| [&a[..], b, c]).collect();
    Ok(check_pair(v, v, &layout.d, &got, &dense, seed))
}

/// The identity and random checks of a validation launch: D of each of the two cases (`got`,
/// by D slot) against the CPU GEMM of `product` (the dense product `v` computes) on that case's
/// dense A, B and C, with unit block scales.
pub(crate) fn check_pair(
    v: &Variant,
    product: &Variant,
    d_map: &[Coord],
    got: &[Vec<u64>],
    cases: &[[&[f64]; 3]],
    seed: u64,
) -> Validation {
    let (m, n) = (v.shape.m as usize, v.shape.n as usize);
    let fd = v.fragment(Operand::D);
    let blocks = v.scale.map(|s| s.vec as usize).unwrap_or(0);
    let (sa, sb) = (vec![1.0; m * blocks], vec![1.0; blocks * n]);
    let checks: Vec<Check> = cases
        .iter()
        .enumerate()
        .map(|(e, [a, b, c])| {
            let want = gemm::mma(
                product,
                &gemm::Operands {
                    a,
                    b,
                    c,
                    scale_a: &sa,
                    scale_b: &sb,
                },
            );
            compare(v, d_map, &got[e], &want, fd.elem)
        })
        .collect();
    let [identity, random]: [Check; 2] = checks.try_into().expect("two cases");
    Validation {
        identity,
        random,
        seed,
    }
}

pub(crate) fn compare(
    v: &Variant,
    d_map: &[Coord],
    got: &[u64],
    want: &[f64],
    t: crate::formats::ElemType,
) -> Check {
    let n = v.shape.n as usize;
    let mut mismatches = Vec::new();
    let mut count = 0;
    for (slot, coord) in d_map.iter().enumerate() {
        let expect = want[coord.row as usize * n + coord.col as usize];
        let expect_bits = gemm::round_to(t, expect, v.satfinite);
        if got[slot] != expect_bits {
            count += 1;
            if mismatches.len() < 16 {
                mismatches.push((
                    coord.row,
                    coord.col,
                    t.decode(expect_bits),
                    t.decode(got[slot]),
                ));
            }
        }
    }
    Check {
        passed: count == 0,
        compared: d_map.len(),
        mismatches,
        mismatch_count: count,
    }
}
