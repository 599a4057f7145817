//! The fragment probe of `mma.sp`: the lane maps of the compressed A, of B, C and D, and under
//! every sparsity selector the metadata map, all by experiment; then validation against the CPU
//! sparse GEMM on random 2:4 patterns.
//!
//! Launches (each one batch, one CTA per experiment):
//! 1. one-hot, as the dense probe's, with every lane's metadata keeping positions 0 and 1 of
//!    each chunk ("lo"): A one-hot with B = 1 gives A's rows; B one-hot with A = 1, once under lo
//!    and once under positions 2 and 3 ("hi"), gives B's columns and which half of each chunk a
//!    B slot sits in (it lights D under exactly one of the two); C one-hot gives C → D.
//! 2. pairing (the dense probe's `pair`), under lo with the lo B slots and under hi with the hi
//!    ones: which compressed A element meets which B slot. Compressed columns are labelled by
//!    the dense convention; a B slot met by compressed column j under lo or hi takes the dense k
//!    that j lands on under that nibble ([`SparseGeom::dense_k`]).
//! 3. metadata, one launch per sparsity selector: A = 1, and B non-zero only at the first and
//!    the last position of each chunk, its row there holding 1 in column 0 and the chunk number
//!    in binary in columns 1..7. Each experiment moves one 2-bit field of one lane (a 4-bit
//!    nibble for tf32) from a uniform baseline: an even field from 2 (hi) to 0, an odd field
//!    from 1 (lo) to 3, a tf32 nibble from lo to hi. Every change stays a valid nibble. The D row
//!    that changes, and the chunk its columns spell, name the (row, chunk, index) the field
//!    holds; a field that changes nothing is not read under that selector.
//! 4. validation per selector: the identity (a 2:4 matrix) and random 2:4 patterns with random
//!    values, placed through the measured lane and metadata maps, against the CPU GEMM of the
//!    dense A, bit for bit.

use super::fragment::{
    FragmentOutcome, RawObservations, SplitMix, Validation, check_pair, d_bits, fill, lit_after,
    pair, palette, place, set_one_hot, slot_counts,
};
use super::infer::{self, OneHot};
use crate::device::{Backend, Batch};
use crate::isa::sparse::{HI, LO, SparseGeom, nibble, splat};
use crate::isa::{Operand, ScaleSelectors, Variant};
use crate::layout::convention::Structure;
use crate::layout::documented::documented;
use crate::layout::meta::{MetaField, check_complete, densify, field_bits, write_nibbles};
use crate::layout::{Coord, Layout, SlotSpace};
use anyhow::{Context, Result, bail};
use std::time::Instant;

/// The metadata map of one sparsity selector, or why there is none.
pub struct SelectorOutcome {
    pub selector: u32,
    /// Whether the PTX ISA names this selector (ptxas takes more for m16n8k32 f16 with f32
    /// accumulators).
    pub documented: bool,
    pub fields: std::result::Result<Vec<MetaField>, String>,
    pub validation: Option<Validation>,
}

pub struct SparseOutcome {
    /// The lane maps (A compressed), validation under selector 0 and the raw observations.
    pub lanes: FragmentOutcome,
    /// One entry per sparsity selector, once the lane maps are known.
    pub selectors: Vec<SelectorOutcome>,
}

impl SparseOutcome {
    pub fn passed(&self) -> bool {
        self.lanes.layout.is_ok()
            && self.lanes.validation.as_ref().is_some_and(|v| v.passed())
            && !self.selectors.is_empty()
            && self
                .selectors
                .iter()
                .filter(|s| s.documented)
                .all(|s| s.fields.is_ok() && s.validation.as_ref().is_some_and(|v| v.passed()))
    }
}

/// One half of the chunks (lo or hi) after pairing: its B slots, the phase-1 classes restricted
/// to them, and the k class of every A slot and of each of its B slots.
struct Half {
    slots: Vec<usize>,
    rc: infer::RowsCols,
    a_k: Vec<usize>,
    b_k: Vec<usize>,
}

/// A copy of `v` without its sparsity: the dense product the CPU reference computes.
fn dense_twin(v: &Variant) -> Variant {
    Variant {
        sparse: None,
        ..v.clone()
    }
}

/// Set every experiment's metadata words of `batch` to `word`.
fn set_meta(batch: &mut Batch, word: u32) {
    batch.meta.iter_mut().for_each(|w| *w = word);
}

/// Run the whole sparse probe for `v` on `backend`: every sparsity selector the PTX ISA names
/// and, with `undocumented`, the further ones ptxas takes. A launch of those that fails is
/// recorded as their outcome and ends the probe (on a GPU a trap leaves the context unusable,
/// so ask for them in a process of their own, last).
pub fn probe(
    backend: &dyn Backend,
    v: &Variant,
    seed: u64,
    undocumented: bool,
) -> Result<SparseOutcome> {
    let start = Instant::now();
    let g = SparseGeom::of(v).context("not a sparse variant")?;
    let (m, n, k) = (v.shape.m as usize, v.shape.n as usize, v.shape.k as usize);
    let half = k / 2;
    let [na, nb, nc, nd] = slot_counts(v);
    let one = |op: Operand| v.fragment(op).elem.one();

    // Phase 1: baselines and one-hot experiments; the B block twice, under lo and under hi.
    let base_a = 0;
    let base_lo = 1 + na;
    let base_hi = base_lo + 1 + nb;
    let base_c = base_hi + 1 + nb;
    let total = base_c + 1 + nc;
    let mut batch = Batch::zeroed(v, total);
    for e in base_a..base_lo {
        fill(v, &mut batch, Operand::B, e, one(Operand::B));
    }
    for e in base_lo..base_c {
        fill(v, &mut batch, Operand::A, e, one(Operand::A));
    }
    batch.meta[base_hi * 32..base_c * 32].fill(splat(HI));
    set_one_hot(v, &mut batch, Operand::A, base_a);
    set_one_hot(v, &mut batch, Operand::B, base_lo);
    set_one_hot(v, &mut batch, Operand::B, base_hi);
    set_one_hot(v, &mut batch, Operand::C, base_c);
    let d = d_bits(
        v,
        &backend
            .run(v, ScaleSelectors::default(), &batch)
            .context("one-hot launch")?,
        total,
    );
    let lit = |base: usize, count: usize| lit_after(&d, base, count);
    let (b_lo, b_hi) = (lit(base_lo, nb), lit(base_hi, nb));
    let mut raw = RawObservations {
        a_lit: lit(base_a, na),
        b_lit: Vec::with_capacity(nb),
        c_lit: lit(base_c, nc),
        pairing: Vec::new(),
    };
    // Which half each B slot sits in: it lights D under exactly one of the two nibbles.
    let mut in_hi = Vec::with_capacity(nb);
    let mut bad_half = None;
    for t in 0..nb {
        let (lo, hi) = (&b_lo[t], &b_hi[t]);
        match (lo.is_empty(), hi.is_empty()) {
            (false, true) => in_hi.push(false),
            (true, false) => in_hi.push(true),
            _ => {
                bad_half.get_or_insert(format!(
                    "B slot {t} lights {} D slots under lo and {} under hi; expected one of \
                     the two to be none",
                    lo.len(),
                    hi.len()
                ));
                in_hi.push(false);
            }
        }
        raw.b_lit
            .push(if in_hi[t] { hi.clone() } else { lo.clone() });
    }
    let mut experiments = total;
    let mut launches = 1;
    let fail = |why: String, raw: RawObservations, experiments, launches| SparseOutcome {
        lanes: FragmentOutcome::failed(why, raw, experiments, launches, start),
        selectors: Vec::new(),
    };
    if let Some(why) = bad_half {
        return Ok(fail(why, raw, experiments, launches));
    }
    let obs = OneHot {
        a: raw.a_lit.clone(),
        b: raw.b_lit.clone(),
        c: raw.c_lit.clone(),
    };
    let rc = match infer::rows_and_cols_of(&obs, m, n, [half, k], nd) {
        Ok(rc) => rc,
        Err(e) => return Ok(fail(format!("{e:#}"), raw, experiments, launches)),
    };

    // Phase 2: pairing within each half, under its nibble.
    let mut halves = Vec::new();
    for (hi, nib) in [(false, LO), (true, HI)] {
        let slots: Vec<usize> = (0..nb).filter(|&t| in_hi[t] == hi).collect();
        if slots.len() != half * n {
            let why = format!(
                "{} B slots sit in the {} half of the chunks; expected {}",
                slots.len(),
                if hi { "hi" } else { "lo" },
                half * n
            );
            return Ok(fail(why, raw, experiments, launches));
        }
        let mut sub = rc.clone();
        sub.b_col = slots.iter().map(|&t| rc.b_col[t]).collect();
        let p = pair(backend, v, &sub, half, &slots, &|b| set_meta(b, splat(nib)))?;
        experiments += p.experiments;
        launches += 1;
        raw.pairing.extend(p.met);
        match p.classes {
            Ok((a_k, b_k)) => halves.push(Half {
                slots,
                rc: sub,
                a_k,
                b_k,
            }),
            Err(e) => return Ok(fail(e, raw, experiments, launches)),
        }
    }
    let layout = match label(v, &g, &rc, &halves) {
        Ok(l) => l,
        Err(e) => return Ok(fail(format!("{e:#}"), raw, experiments, launches)),
    };

    // Phases 3 and 4, per sparsity selector.
    let named = g.documented_selectors(v.shape.m);
    let last = if undocumented {
        v.sparsity_selectors()
    } else {
        named.min(v.sparsity_selectors())
    };
    let mut selectors = Vec::new();
    for sel in 0..last {
        let documented = sel < named;
        let measured = metadata(backend, v, &g, &layout, sel).and_then(|(fields, count)| {
            experiments += count;
            launches += 1;
            let validation = match &fields {
                Ok(f) => {
                    launches += 1;
                    experiments += 2;
                    Some(validate(backend, v, &g, &layout, f, sel, seed)?)
                }
                Err(_) => None,
            };
            Ok((fields, validation))
        });
        match measured {
            Ok((fields, validation)) => selectors.push(SelectorOutcome {
                selector: sel,
                documented,
                fields,
                validation,
            }),
            Err(e) if !documented => {
                selectors.push(SelectorOutcome {
                    selector: sel,
                    documented,
                    fields: Err(format!("the launch failed: {e:#}")),
                    validation: None,
                });
                break;
            }
            Err(e) => return Err(e),
        }
    }
    let validation = selectors.first().and_then(|s| s.validation.clone());
    let structure = Structure::of(&layout, m, n, k);
    Ok(SparseOutcome {
        lanes: FragmentOutcome {
            layout: Ok(layout),
            structure: Some(structure),
            validation,
            raw,
            experiments,
            launches,
            wall_s: start.elapsed().as_secs_f64(),
        },
        selectors,
    })
}

/// Label the observed classes: A, C and D by the dense convention on the lo product (depth
/// k/2), B by the dense k each compressed column lands on under lo and under hi.
fn label(v: &Variant, g: &SparseGeom, rc: &infer::RowsCols, halves: &[Half]) -> Result<Layout> {
    let (m, n, k) = (v.shape.m as usize, v.shape.n as usize, v.shape.k as usize);
    let [lo_half, hi_half] = halves else {
        bail!("two halves expected");
    };
    let (a_lo, b_lo, a_hi, b_hi) = (&lo_half.a_k, &lo_half.b_k, &hi_half.a_k, &hi_half.b_k);
    let lo = infer::structure(lo_half.rc.clone(), a_lo.clone(), b_lo.clone(), m, n, k / 2);
    let a_space = SlotSpace::of(&v.fragment(Operand::A));
    let labelled = lo.label(Some(&documented(v)), |s| {
        let slot = a_space.slot(s);
        (slot.lane, slot.reg, slot.elem)
    });
    // Compressed column of each k class, under lo and under hi (the same A slots must share a
    // class under both, or the halves pair differently).
    let mut col_of = [vec![u32::MAX; k / 2], vec![u32::MAX; k / 2]];
    for (s, c) in labelled.a.iter().enumerate() {
        for (h, classes) in [a_lo, a_hi].into_iter().enumerate() {
            let slot = &mut col_of[h][classes[s]];
            if *slot != u32::MAX && *slot != c.col {
                bail!(
                    "A slot {s}: compressed column {} shares a k class with column {} under {}",
                    c.col,
                    slot,
                    ["lo", "hi"][h]
                );
            }
            *slot = c.col;
        }
    }
    let mut col_label = vec![u32::MAX; n];
    for (i, c) in labelled.d.iter().enumerate() {
        col_label[rc.d_col[i]] = c.col;
    }
    let mut b = vec![Coord { row: 0, col: 0 }; rc.b_col.len()];
    for (h, (slots, classes, nib)) in [(&lo_half.slots, b_lo, LO), (&hi_half.slots, b_hi, HI)]
        .into_iter()
        .enumerate()
    {
        for (i, &t) in slots.iter().enumerate() {
            let j = col_of[h][classes[i]];
            b[t] = Coord {
                row: g.dense_k(j, nib),
                col: col_label[rc.b_col[t]],
            };
        }
    }
    let layout = Layout {
        a: labelled.a,
        b,
        c: labelled.c,
        d: labelled.d,
    };
    layout
        .check_bijective(v)
        .map_err(|e| anyhow::anyhow!("the labelled maps are not bijections: {e}"))?;
    Ok(layout)
}

/// Dense k → (chunk, position within the chunk) under `g`.
fn chunk_position(g: &SparseGeom, kk: u32) -> (u32, u32) {
    let chunk_k = 4 * g.pos_elems / g.elem_positions;
    let within = kk % chunk_k;
    let pos = if g.elem_positions == 2 {
        within * 2
    } else {
        within / g.pos_elems
    };
    (kk / chunk_k, pos)
}

/// Phase 3 under selector `sel`: the metadata fields, or why they are inconsistent, and the
/// number of experiments.
fn metadata(
    backend: &dyn Backend,
    v: &Variant,
    g: &SparseGeom,
    layout: &Layout,
    sel: u32,
) -> Result<(std::result::Result<Vec<MetaField>, String>, usize)> {
    let (m, n, k) = (v.shape.m as usize, v.shape.n as usize, v.shape.k as usize);
    let w = field_bits(g);
    let tf32 = g.elem_positions == 2;
    let per_lane = (32 / w) as usize;
    // B: rows at the positions the experiments move elements to (the first and the last of a
    // chunk; for tf32 the second element) hold 1 in column 0 and the chunk in binary after it.
    let mut bmat = vec![0.0; k * n];
    for kk in 0..k {
        let (chunk, pos) = chunk_position(g, kk as u32);
        let target = if tf32 { pos == 2 } else { pos == 0 || pos == 3 };
        if target {
            bmat[kk * n] = 1.0;
            for bit in 0..n - 1 {
                if chunk >> bit & 1 == 1 {
                    bmat[kk * n + 1 + bit] = 1.0;
                }
            }
        }
    }
    // Baselines: 0 under hi (for even fields), 1 under lo (odd fields and tf32 nibbles).
    let count = 2 + 32 * per_lane;
    let mut batch = Batch::zeroed(v, count);
    batch.sparsity_selector = sel;
    for e in 0..count {
        fill(
            v,
            &mut batch,
            Operand::A,
            e,
            v.fragment(Operand::A).elem.one(),
        );
        place(v, &mut batch, e, Operand::B, &layout.b, &bmat, n)?;
    }
    let baseline_of = |q: usize| if !tf32 && q.is_multiple_of(2) { 0 } else { 1 };
    batch.meta[..32].fill(splat(HI));
    for lane in 0..32 {
        for q in 0..per_lane {
            let e = 2 + lane * per_lane + q;
            let (from, to) = match (tf32, q % 2) {
                (true, _) => (LO, HI),
                (false, 0) => (HI, nibble(0, 3)),
                _ => (LO, nibble(0, 3)),
            };
            let words = &mut batch.meta[e * 32..(e + 1) * 32];
            words.fill(splat(from));
            let shift = (q as u32 / (4 / w)) * 4;
            words[lane] = (words[lane] & !(0xf << shift)) | (to << shift);
        }
    }
    let words = backend
        .run(v, ScaleSelectors::default(), &batch)
        .with_context(|| format!("metadata launch, selector {sel}"))?;
    let d = d_bits(v, &words, count);
    let fd = v.fragment(Operand::D);
    let mut fields = Vec::new();
    for lane in 0..32u32 {
        for q in 0..per_lane {
            let e = 2 + lane as usize * per_lane + q;
            let base = &d[baseline_of(q)];
            let mut rows: Vec<u32> = Vec::new();
            let mut delta = vec![false; m * n];
            for (slot, c) in layout.d.iter().enumerate() {
                let moved = fd.elem.decode(d[e][slot]) != fd.elem.decode(base[slot]);
                if moved {
                    delta[c.row as usize * n + c.col as usize] = true;
                    if !rows.contains(&c.row) {
                        rows.push(c.row);
                    }
                }
            }
            let field = format!(
                "lane {lane} bits {}..{}",
                q as u32 * w,
                (q as u32 + 1) * w - 1
            );
            match rows.as_slice() {
                [] => continue,
                [row] => {
                    let at = *row as usize * n;
                    if !delta[at] {
                        return Ok((
                            Err(format!(
                                "selector {sel}: {field} changed row {row} but not its column 0"
                            )),
                            count,
                        ));
                    }
                    let chunk = (0..n - 1)
                        .filter(|&b| delta[at + 1 + b])
                        .fold(0u32, |acc, b| acc | 1 << b);
                    fields.push(MetaField {
                        lane,
                        bit: q as u32 * w,
                        row: *row,
                        chunk,
                        index: if tf32 { 0 } else { q as u32 % 2 },
                    });
                }
                many => {
                    return Ok((
                        Err(format!("selector {sel}: {field} changed rows {many:?}")),
                        count,
                    ));
                }
            }
        }
    }
    fields.sort();
    Ok((
        check_complete(v, &fields)
            .map(|()| fields)
            .map_err(|e| format!("selector {sel}: {e:#}")),
        count,
    ))
}

/// The nibble of a chunk whose non-zero positions are `nonzero` (at most two; for tf32 at most
/// one element): those positions, completed with the lowest others.
fn nibble_covering(g: &SparseGeom, nonzero: &[u32]) -> u32 {
    if g.elem_positions == 2 {
        return if nonzero.contains(&2) { HI } else { LO };
    }
    let mut keep: Vec<u32> = nonzero.to_vec();
    for p in 0..4 {
        if keep.len() < 2 && !keep.contains(&p) {
            keep.push(p);
        }
    }
    keep.sort_unstable();
    nibble(keep[0], keep[1])
}

/// Phase 4 under selector `sel`: identity and random 2:4 matrices through the measured maps.
fn validate(
    backend: &dyn Backend,
    v: &Variant,
    g: &SparseGeom,
    layout: &Layout,
    fields: &[MetaField],
    sel: u32,
    seed: u64,
) -> Result<Validation> {
    let (m, n, k) = (v.shape.m as usize, v.shape.n as usize, v.shape.k as usize);
    let half = k / 2;
    let chunks = g.chunks as usize;
    let mut rng = SplitMix(seed ^ (u64::from(sel) << 32));
    // Identity: one non-zero per chunk at most; its nibble keeps that position.
    let ident = |rows: usize, cols: usize| -> Vec<f64> {
        (0..rows * cols)
            .map(|i| f64::from(u8::from(i / cols == i % cols)))
            .collect()
    };
    let a_id = ident(m, k);
    let mut nib_id = vec![0u32; m * chunks];
    for (r, row_nibs) in nib_id.chunks_mut(chunks).enumerate() {
        for (c, nib) in row_nibs.iter_mut().enumerate() {
            let nonzero: Vec<u32> = (0..k as u32)
                .filter(|&kk| a_id[r * k + kk as usize] != 0.0)
                .map(|kk| chunk_position(g, kk))
                .filter(|&(ch, _)| ch as usize == c)
                .map(|(_, p)| p)
                .collect();
            *nib = nibble_covering(g, &nonzero);
        }
    }
    let compress = |dense: &[f64], nibs: &[u32]| -> Vec<f64> {
        let mut out = vec![0.0; m * half];
        for r in 0..m {
            for j in 0..half as u32 {
                let nib = nibs[r * chunks + g.chunk_of(j) as usize];
                out[r * half + j as usize] = dense[r * k + g.dense_k(j, nib) as usize];
            }
        }
        out
    };
    let a_id_c = compress(&a_id, &nib_id);
    let valid = g.valid_nibbles();
    let nib_rand: Vec<u32> = (0..m * chunks).map(|_| rng.pick(&valid)).collect();
    let pick = |rng: &mut SplitMix, op: Operand, len: usize| -> Vec<f64> {
        let p = palette(v, op);
        (0..len).map(|_| rng.pick(&p)).collect()
    };
    let a_rand_c = pick(&mut rng, Operand::A, m * half);
    let cases = [
        (a_id_c, nib_id, ident(k, n), vec![0.0; m * n]),
        (
            a_rand_c,
            nib_rand,
            pick(&mut rng, Operand::B, k * n),
            pick(&mut rng, Operand::C, m * n),
        ),
    ];
    let mut batch = Batch::zeroed(v, cases.len());
    batch.sparsity_selector = sel;
    for (e, (a, nibs, b, c)) in cases.iter().enumerate() {
        for (op, mat, cols) in [
            (Operand::A, a, half),
            (Operand::B, b, n),
            (Operand::C, c, n),
        ] {
            place(v, &mut batch, e, op, layout.operand(op), mat, cols)?;
        }
        write_nibbles(v, fields, nibs, &mut batch.meta[e * 32..(e + 1) * 32]);
    }
    let words = backend
        .run(v, ScaleSelectors::default(), &batch)
        .with_context(|| format!("validation launch, selector {sel}"))?;
    let got = d_bits(v, &words, cases.len());
    let dense_a: Vec<Vec<f64>> = cases
        .iter()
        .map(|(a, nibs, _, _)| densify(v, a, nibs))
        .collect();
    let dense: Vec<[&[f64]; 3]> = cases
        .iter()
        .zip(&dense_a)
        .map(|((_, _, b, c), a)| [&a[..], b, c])
        .collect();
    Ok(check_pair(v, &dense_twin(v), &layout.d, &got, &dense, seed))
}

#[cfg(test)]
mod tests;
