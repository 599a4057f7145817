//! The wgmma probe: which (thread, register, element) of D, and of A from registers, holds
//! which matrix element, and which shared-memory byte feeds which element of A and B, for one
//! variant under one descriptor setting.
//!
//! "Positions" are what the host can set one at a time: every element-aligned offset of the A
//! and B regions in shared memory (bits for b1), or every A register slot. Phases:
//! 1. lit sets: which D slots a position changes when it alone holds 1 and the other operand is
//!    all ones. Positions are tested in groups with a binary code (an "all" experiment and one
//!    per index bit): a D slot that counts exactly 1 in "all" names its position by the bits.
//!    Groups are planned from the documented layout so that their positions should light
//!    different rows (A) or columns (B); a D slot that counts more than 1 shows the plan was
//!    wrong there, and that group is run again one position at a time. The documented layout
//!    only saves experiments: every answer comes from the observations.
//! 2. C → D: C holds distinct values, A = B = 0, scale-d on; each D slot names its C slot.
//! 3. k pairing and labelling: `probe::infer`, as for mma.sync (positions no experiment reads
//!    are left out), with the convention of `layout::convention`.
//! 4. validation: identity and random exactly-representable A, B, C placed through the
//!    inferred maps; D read through the inferred D map must equal the CPU GEMM bit for bit.

use super::backend::{Batch, Launch, WgBackend};
use super::batch::{Exp, Placer, Positions, Which, reg_positions, run, smem_pos, smem_positions};
use super::model::{d_coord, decode_d, gemm, round_d};
pub use super::setting::{Setting, packed_desc};
use super::{ASource, M, WgVariant};
use crate::formats::ElemType;
use crate::layout::convention::Structure;
use crate::layout::{Coord, Layout};
use crate::probe::fragment::{Check, SplitMix, Validation};
use crate::probe::infer::{self, OneHot, PairingPlan};
use anyhow::{Context, Result};
use rayon::prelude::*;
use serde::{Deserialize, Serialize};
use std::time::Instant;

/// Counters of the work a probe did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Work {
    pub experiments: usize,
    pub launches: usize,
}

impl std::ops::Add for Work {
    type Output = Work;
    fn add(self, o: Work) -> Work {
        Work {
            experiments: self.experiments + o.experiments,
            launches: self.launches + o.launches,
        }
    }
}

/// Phase 1 for one operand: the D slots each position lights.
fn lit_sets(
    backend: &dyn WgBackend,
    placer: &Placer,
    pos: &Positions,
    other_len: usize,
    classes: u32,
) -> Result<(Vec<Vec<usize>>, Work)> {
    let mut work = Work::default();
    let v = placer.v;
    let d_slots = v.d_frag().slots();
    let other = match pos.which {
        Which::A => Which::B,
        Which::B => Which::A,
    };
    // Groups of positions the documented layout puts in distinct classes.
    let mut by_class: Vec<Vec<usize>> = vec![Vec::new(); classes as usize];
    let mut unplanned = Vec::new();
    for p in 0..pos.len {
        match pos.predicted[p] {
            Some(c) => by_class[c as usize].push(p),
            None => unplanned.push(p),
        }
    }
    let mut groups: Vec<Vec<usize>> = Vec::new();
    let depth = by_class.iter().map(Vec::len).max().unwrap_or(0);
    for i in 0..depth {
        let g: Vec<usize> = by_class.iter().filter_map(|c| c.get(i).copied()).collect();
        groups.push(g);
    }
    groups.extend(unplanned.chunks(classes as usize).map(<[usize]>::to_vec));
    let mut lit = vec![Vec::new(); pos.len];
    let one = placer.one(pos.which);
    let coded = |groups: &[Vec<usize>]| -> Vec<(usize, usize, usize)> {
        // (group, experiment offset, bits)
        let mut out = Vec::new();
        let mut e = 0;
        for (gi, g) in groups.iter().enumerate() {
            let bits = (usize::BITS - (g.len().max(2) - 1).leading_zeros()) as usize;
            out.push((gi, e, bits));
            e += 1 + bits;
        }
        out
    };
    let plan = coded(&groups);
    let count = plan.last().map_or(0, |&(_, e, b)| e + 1 + b);
    let mut batch = Batch::zeroed(v, placer.l, count);
    for &(gi, e0, bits) in &plan {
        for e in e0..=e0 + bits {
            placer.fill_ones(&mut batch, other, e, other_len);
        }
        for (idx, &p) in groups[gi].iter().enumerate() {
            placer.set(&mut batch, pos.which, e0, p, one);
            for b in 0..bits {
                if idx >> b & 1 == 1 {
                    placer.set(&mut batch, pos.which, e0 + 1 + b, p, one);
                }
            }
        }
    }
    let d = run(backend, v, placer.l, &batch, "lit-set")?;
    work.experiments += count;
    work.launches += 1;
    // Each group decodes on its own (in parallel: b1 tiles make thousands of them): the
    // (position, slot) pairs it names, or None when a slot counted something other than 0 or 1.
    let decoded: Vec<Option<Vec<(usize, usize)>>> = plan
        .par_iter()
        .map(|&(gi, e0, bits)| {
            let g = &groups[gi];
            let mut found: Vec<(usize, usize)> = Vec::new();
            for slot in 0..d_slots {
                let c = d.value(e0, slot);
                if c == 0.0 {
                    continue;
                }
                if c != 1.0 {
                    return None;
                }
                let mut idx = 0;
                for b in 0..bits {
                    let x = d.value(e0 + 1 + b, slot);
                    if x == 1.0 {
                        idx |= 1 << b;
                    } else if x != 0.0 {
                        return None;
                    }
                }
                found.push((*g.get(idx)?, slot));
            }
            Some(found)
        })
        .collect();
    let mut redo = Vec::new();
    for (&(gi, _, _), found) in plan.iter().zip(decoded) {
        match found {
            Some(found) => {
                for (p, slot) in found {
                    lit[p].push(slot);
                }
            }
            None => redo.extend_from_slice(&groups[gi]),
        }
    }
    if !redo.is_empty() {
        let mut batch = Batch::zeroed(v, placer.l, redo.len());
        for (e, &p) in redo.iter().enumerate() {
            placer.fill_ones(&mut batch, other, e, other_len);
            placer.set(&mut batch, pos.which, e, p, one);
        }
        let d = run(backend, v, placer.l, &batch, "one-hot")?;
        work.experiments += redo.len();
        work.launches += 1;
        for (e, &p) in redo.iter().enumerate() {
            lit[p] = (0..d_slots).filter(|&s| d.value(e, s) != 0.0).collect();
        }
    }
    Ok((lit, work))
}

/// Phase 2: each D slot names the C slot whose distinct value it returns.
fn c_to_d(backend: &dyn WgBackend, placer: &Placer) -> Result<(Vec<Vec<usize>>, Work)> {
    let v = placer.v;
    let slots = v.d_frag().slots();
    // Consecutive integers stay exact up to 2^11 in f16 and far beyond in f32 and s32.
    let per = if v.d == ElemType::F16 { 2048 } else { slots };
    let exps = slots.div_ceil(per);
    let mut l = *placer.l;
    l.scale_d = true;
    let placer = Placer::new(v, &l);
    let mut batch = Batch::zeroed(v, &l, exps);
    for u in 0..slots {
        let value = (u % per + 1) as f64;
        let code = encode_d(v.d, value);
        placer.set_c(&mut batch, u / per, u, code);
    }
    let d = run(backend, v, &l, &batch, "C")?;
    let work = Work {
        experiments: exps,
        launches: 1,
    };
    let mut lit = vec![Vec::new(); slots];
    for e in 0..exps {
        for slot in 0..slots {
            let x = d.value(e, slot);
            if x != 0.0 && x.fract() == 0.0 && x >= 1.0 && (x as usize) <= per {
                let u = e * per + x as usize - 1;
                if u < slots {
                    lit[u].push(slot);
                }
            }
        }
    }
    Ok((lit, work))
}

fn encode_d(t: ElemType, x: f64) -> u64 {
    match t {
        ElemType::F32 => (x as f32).to_bits() as u64,
        ElemType::S32 => x as i64 as i32 as u32 as u64,
        other => other.encode_exact(x).expect("small integers are exact"),
    }
}

/// One shared-memory element: where it sits (byte from the descriptor's start, bit within
/// the byte for b1) and which element it is (A: row, k; B: k, n).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SmemEntry {
    pub byte: i64,
    pub bit: u32,
    pub row: u32,
    pub col: u32,
}

/// What a probe measured.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct WgLayout {
    /// (row, col) of every D slot, in (thread, reg, elem) order.
    pub d: Vec<(u32, u32)>,
    /// (row, col) of every C slot.
    pub c: Vec<(u32, u32)>,
    /// (row, k) of every A register slot (`rs`).
    pub a_regs: Option<Vec<(u32, u32)>>,
    /// A's shared-memory elements (`ss`), in byte order.
    pub a_smem: Option<Vec<SmemEntry>>,
    pub b_smem: Vec<SmemEntry>,
}

/// Raw observations, kept when a probe fails.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct WgRaw {
    /// Per position: the D slots it lit (empty: never read).
    pub a_lit: Vec<Vec<usize>>,
    pub b_lit: Vec<Vec<usize>>,
    pub c_lit: Vec<Vec<usize>>,
}

pub struct WgOutcome {
    pub layout: std::result::Result<WgLayout, String>,
    pub validation: Option<Validation>,
    pub raw: WgRaw,
    pub work: Work,
    pub wall_s: f64,
}

/// Run the whole probe of `v` under `setting`.
pub fn probe(
    backend: &dyn WgBackend,
    v: &WgVariant,
    setting: &Setting,
    seed: u64,
) -> Result<WgOutcome> {
    let start = Instant::now();
    setting.check(v)?;
    backend.check_supported(v)?;
    let l = setting.launch(v);
    let placer = Placer::new(v, &l);
    let bits = v.elem_bits();
    let (m, n, k) = (M as usize, v.n as usize, v.k as usize);
    let a_pos = match v.a_src {
        ASource::Ss => smem_positions(
            v,
            Which::A,
            l.a_major,
            &l.a_desc,
            (0, l.a_bytes),
            M,
            v.a_k(),
        ),
        ASource::Rs => reg_positions(v),
    };
    let b_pos = smem_positions(
        v,
        Which::B,
        l.b_major,
        &l.b_desc,
        (l.b_off, l.b_bytes),
        v.n,
        v.k,
    );
    // The three phases need nothing from each other: their uploads, launches, read-backs and
    // decoding overlap. Plain threads: the launches block, and a rayon worker blocked here
    // would hold back the parallel work others wait for.
    let (a_lit, b_lit, c_lit) = std::thread::scope(|s| {
        let b = s.spawn(|| lit_sets(backend, &placer, &b_pos, a_pos.len, v.n));
        let c = s.spawn(|| c_to_d(backend, &placer));
        let a = lit_sets(backend, &placer, &a_pos, b_pos.len, M);
        let join = |h: std::thread::ScopedJoinHandle<'_, _>| {
            h.join().unwrap_or_else(|p| std::panic::resume_unwind(p))
        };
        (a, join(b), join(c))
    });
    let ((a_lit, wa), (b_lit, wb), (c_lit, wc)) = (a_lit?, b_lit?, c_lit?);
    let mut work = wa + wb + wc;
    let raw = WgRaw {
        a_lit: a_lit.clone(),
        b_lit: b_lit.clone(),
        c_lit: c_lit.clone(),
    };
    let fail = |why: String, raw: WgRaw, work: Work| WgOutcome {
        layout: Err(why),
        validation: None,
        raw,
        work,
        wall_s: start.elapsed().as_secs_f64(),
    };
    // Positions no experiment reads are not part of the operand.
    let a_read: Vec<usize> = (0..a_pos.len).filter(|&p| !a_lit[p].is_empty()).collect();
    let b_read: Vec<usize> = (0..b_pos.len).filter(|&p| !b_lit[p].is_empty()).collect();
    let obs = OneHot {
        a: a_read.iter().map(|&p| a_lit[p].clone()).collect(),
        b: b_read.iter().map(|&p| b_lit[p].clone()).collect(),
        c: c_lit,
    };
    let d_slots = v.d_frag().slots();
    let rc = match infer::rows_and_cols(&obs, m, n, k, d_slots) {
        Ok(rc) => rc,
        Err(e) => return Ok(fail(format!("{e:#}"), raw, work)),
    };
    // k pairing: experiment (i, bit) sets the i-th A position of every row and the B positions
    // whose in-column index has `bit` set; D(row, col) = 1 where the B position meeting it has.
    let plan = PairingPlan::new(&rc, m, n, k);
    let count = k * plan.bits;
    let mut batch = Batch::zeroed(v, &l, count);
    let (one_a, one_b) = (v.a.one(), v.b.one());
    // B's region of each bit, built once and copied into each experiment: b1 tiles would
    // otherwise make over a hundred million element writes.
    let b_regions: Vec<Vec<u8>> = (0..plan.bits)
        .into_par_iter()
        .map(|bit| {
            let mut region = vec![0u8; l.b_bytes as usize];
            let mut x = Exp {
                a: &mut [],
                b: &mut region,
                a_regs: &mut [],
            };
            for (t, on) in plan.b_mask(bit).into_iter().enumerate() {
                if on {
                    placer.set_in(&mut x, Which::B, b_read[t], one_b);
                }
            }
            region
        })
        .collect();
    placer
        .experiments(&mut batch)
        .into_par_iter()
        .enumerate()
        .for_each(|(e, mut x)| {
            let (i, bit) = (e / plan.bits, e % plan.bits);
            x.b.copy_from_slice(&b_regions[bit]);
            for row in &plan.a_by_row {
                placer.set_in(&mut x, Which::A, a_read[row[i]], one_a);
            }
        });
    let d = run(backend, v, &l, &batch, "pairing")?;
    work.experiments += count;
    work.launches += 1;
    let met: Vec<Vec<Vec<bool>>> = (0..k)
        .into_par_iter()
        .map(|i| {
            (0..plan.bits)
                .map(|bit| {
                    (0..d_slots)
                        .map(|s| d.value(i * plan.bits + bit, s) > 0.0)
                        .collect()
                })
                .collect()
        })
        .collect();
    let (a_k, b_k) = match infer::k_classes(&rc, &plan, &met, k) {
        Ok(x) => x,
        Err(e) => return Ok(fail(format!("{e:#}"), raw, work)),
    };
    let structure: Structure = infer::structure(rc, a_k, b_k, m, n, k);
    let fd = v.d_frag();
    let documented_d: Vec<Coord> = (0..d_slots)
        .map(|i| {
            let (row, col) = d_coord(&fd, i);
            Coord { row, col }
        })
        .collect();
    let reference = Layout {
        a: Vec::new(),
        b: Vec::new(),
        c: Vec::new(),
        d: documented_d,
    };
    // k labels: row 0's A positions in the documented layout's k order where it places them,
    // else in position order.
    let labelled = structure.label(Some(&reference), |s| {
        let p = a_read[s];
        (0, a_pos.predicted_k[p].unwrap_or(u32::MAX), p as u32)
    });
    let pair = |c: &Coord| (c.row, c.col);
    let smem_entries = |read: &[usize], coords: &[Coord], start: u32| -> Vec<SmemEntry> {
        let mut v: Vec<SmemEntry> = read
            .iter()
            .zip(coords)
            .map(|(&p, c)| {
                let (byte, bit) = smem_pos(bits, p);
                SmemEntry {
                    byte: byte as i64 - start as i64,
                    bit,
                    row: c.row,
                    col: c.col,
                }
            })
            .collect();
        v.sort_by_key(|e| (e.byte, e.bit));
        v
    };
    let layout = WgLayout {
        d: labelled.d.iter().map(pair).collect(),
        c: labelled.c.iter().map(pair).collect(),
        a_regs: (v.a_src == ASource::Rs).then(|| {
            let mut map = vec![(0, 0); a_pos.len];
            for (&p, c) in a_read.iter().zip(&labelled.a) {
                map[p] = pair(c);
            }
            map
        }),
        a_smem: (v.a_src == ASource::Ss)
            .then(|| smem_entries(&a_read, &labelled.a, l.a_desc.start)),
        b_smem: smem_entries(&b_read, &labelled.b, l.b_desc.start - l.b_off),
    };
    // Every A register slot must hold an element.
    if v.a_src == ASource::Rs && a_read.len() != a_pos.len {
        return Ok(fail(
            format!(
                "{} A register slots changed no D slot",
                a_pos.len - a_read.len()
            ),
            raw,
            work,
        ));
    }
    let validation = validate(backend, v, &l, &layout, &a_read, &b_read, &labelled, seed)?;
    work.experiments += 2;
    work.launches += 1;
    Ok(WgOutcome {
        layout: Ok(layout),
        validation: Some(validation),
        raw,
        work,
        wall_s: start.elapsed().as_secs_f64(),
    })
}

/// Values for the random test: exact in the operand type and small enough that every partial
/// sum is exact in the D type (f16 accumulators get {-1, 0, 1}).
fn palette(v: &WgVariant, t: ElemType) -> Vec<f64> {
    if v.d == ElemType::F16 {
        return vec![-1.0, 0.0, 1.0];
    }
    t.exact_palette().to_vec()
}

#[allow(clippy::too_many_arguments)]
fn validate(
    backend: &dyn WgBackend,
    v: &WgVariant,
    l: &Launch,
    layout: &WgLayout,
    a_read: &[usize],
    b_read: &[usize],
    labelled: &Layout,
    seed: u64,
) -> Result<Validation> {
    let (m, n, k) = (M as usize, v.n as usize, v.k as usize);
    let mut rng = SplitMix(seed);
    let identity = |rows: usize, cols: usize| -> Vec<f64> {
        (0..rows * cols)
            .map(|i| f64::from(u8::from(i / cols == i % cols)))
            .collect()
    };
    let mut random = |t: ElemType, len: usize| -> Vec<f64> {
        let p = palette(v, t);
        (0..len).map(|_| rng.pick(&p)).collect()
    };
    let cases = [
        (identity(m, k), identity(k, n), vec![0.0; m * n]),
        (random(v.a, m * k), random(v.b, k * n), random(v.d, m * n)),
    ];
    let mut l = *l;
    l.scale_d = true;
    let placer = Placer::new(v, &l);
    let mut batch = Batch::zeroed(v, &l, cases.len());
    let code = |t: ElemType, x: f64| -> Result<u64> {
        t.encode_exact(x)
            .with_context(|| format!("{x} is not exact in {t}"))
    };
    for (e, (a, b, c)) in cases.iter().enumerate() {
        for (&p, co) in a_read.iter().zip(&labelled.a) {
            let x = a[co.row as usize * k + co.col as usize];
            placer.set(&mut batch, Which::A, e, p, code(v.a, x)?);
        }
        for (&p, co) in b_read.iter().zip(&labelled.b) {
            let x = b[co.row as usize * n + co.col as usize];
            placer.set(&mut batch, Which::B, e, p, code(v.b, x)?);
        }
        for (u, &(row, col)) in layout.c.iter().enumerate() {
            placer.set_c(
                &mut batch,
                e,
                u,
                encode_d(v.d, c[row as usize * n + col as usize]),
            );
        }
    }
    let d = run(backend, v, &l, &batch, "validation")?;
    let checks: Vec<Check> = cases
        .iter()
        .enumerate()
        .map(|(e, (a, b, c))| {
            let want = gemm(v, a, b, c);
            let mut mismatches = Vec::new();
            let mut count = 0;
            for (slot, &(row, col)) in layout.d.iter().enumerate() {
                let x = want[row as usize * n + col as usize];
                let expect = round_d(v, x);
                let got = d.bits(e, slot);
                if got != expect {
                    count += 1;
                    if mismatches.len() < 16 {
                        mismatches.push((row, col, decode_d(v.d, expect), decode_d(v.d, got)));
                    }
                }
            }
            Check {
                passed: count == 0,
                compared: layout.d.len(),
                mismatches,
                mismatch_count: count,
            }
        })
        .collect();
    let [identity, random]: [Check; 2] = checks.try_into().expect("two cases");
    Ok(Validation {
        identity,
        random,
        seed,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wgmma::THREADS;
    use crate::wgmma::desc::{Major, Swizzle};
    use crate::wgmma::emulator::WgEmulator;
    use crate::wgmma::find;
    use crate::wgmma::model::{a_reg_coord, element_bit_addr};

    fn run(id: &str, swizzle: Swizzle, a_major: Major, b_major: Major) -> (WgVariant, WgOutcome) {
        let v = find(id).unwrap();
        let s = Setting::packed(&v, swizzle, a_major, b_major);
        let out = probe(&WgEmulator::new(), &v, &s, 7).unwrap();
        (v, out)
    }

    #[test]
    fn the_emulator_gives_back_the_documented_layouts() {
        let (v, out) = run(
            "m64n16k16.f32.bf16.bf16.rs",
            Swizzle::None,
            Major::K,
            Major::K,
        );
        let l = out.layout.expect("inferred");
        assert!(out.validation.unwrap().passed());
        let fd = v.d_frag();
        for (i, &rc) in l.d.iter().enumerate() {
            assert_eq!(rc, d_coord(&fd, i), "D slot {i}");
        }
        let fa = v.a_frag();
        for (i, &rc) in l.a_regs.as_ref().unwrap().iter().enumerate() {
            assert_eq!(rc, a_reg_coord(&fa, i), "A slot {i}");
        }
        eprintln!("{:?}", out.work);
    }

    #[test]
    fn shared_memory_maps_follow_the_descriptor() {
        for (id, sw, am, bm) in [
            (
                "m64n16k16.f32.bf16.bf16.ss",
                Swizzle::B128,
                Major::K,
                Major::K,
            ),
            (
                "m64n64k16.f32.bf16.bf16.ss",
                Swizzle::B64,
                Major::MN,
                Major::MN,
            ),
            ("m64n8k8.f32.tf32.tf32.ss", Swizzle::B32, Major::K, Major::K),
            (
                "m64n16k32.f32.e4m3.e4m3.ss",
                Swizzle::None,
                Major::K,
                Major::K,
            ),
        ] {
            let (v, out) = run(id, sw, am, bm);
            let l = out.layout.unwrap_or_else(|e| panic!("{id}: {e}"));
            assert!(out.validation.unwrap().passed(), "{id}");
            let s = Setting::packed(&v, sw, am, bm);
            for e in l.a_smem.as_ref().unwrap() {
                let want = element_bit_addr(am, &s.a_desc, sw, v.elem_bits(), e.row, e.col);
                assert_eq!(
                    e.byte * 8 + e.bit as i64,
                    want as i64,
                    "{id} A ({}, {})",
                    e.row,
                    e.col
                );
            }
            assert_eq!(l.b_smem.len() as u32, v.n * v.k);
            eprintln!("{id}: {:?}", out.work);
        }
    }

    /// A D layout and an A register layout the documentation does not have (threads rotated,
    /// registers reversed) and a 128B descriptor that applies the 64B XOR: the probe must find
    /// what the emulator does, not what the documentation says.
    #[test]
    fn the_inference_recovers_what_it_was_not_told() {
        use crate::wgmma::emulator::Overrides;
        let v = find("m64n32k16.f32.f16.f16.rs").unwrap();
        let (fd, fa) = (v.d_frag(), v.a_frag());
        let permute =
            |f: &crate::wgmma::RegFrag, coord: fn(&crate::wgmma::RegFrag, usize) -> (u32, u32)| {
                (0..f.slots())
                    .map(|i| {
                        let (t, r, e) = f.slot(i);
                        coord(f, f.index((t + 37) % THREADS, f.regs - 1 - r, e))
                    })
                    .collect::<Vec<_>>()
            };
        let d = permute(&fd, d_coord);
        let a = permute(&fa, a_reg_coord);
        let emu = WgEmulator::with(Overrides {
            d: Some(d.clone()),
            a_regs: Some(a.clone()),
            pattern: None,
        });
        let s = Setting::packed(&v, Swizzle::None, Major::K, Major::K);
        let out = probe(&emu, &v, &s, 3).unwrap();
        let l = out.layout.expect("inferred");
        assert!(out.validation.unwrap().passed());
        // Row and column labels are pinned only up to the symmetry; with the documented D
        // partition gone, they follow first appearance. The structure must match exactly:
        // D slots that share a row in the emulator share one in the measurement, and so on.
        let same_partition = |x: &[(u32, u32)], y: &[(u32, u32)], part: fn(&(u32, u32)) -> u32| {
            let mut fwd = std::collections::HashMap::new();
            x.iter()
                .zip(y)
                .all(|(p, q)| *fwd.entry(part(p)).or_insert(part(q)) == part(q))
        };
        assert!(same_partition(&l.d, &d, |c| c.0));
        assert!(same_partition(&l.d, &d, |c| c.1));
        assert!(same_partition(l.a_regs.as_ref().unwrap(), &a, |c| c.0));
        assert!(same_partition(l.a_regs.as_ref().unwrap(), &a, |c| c.1));

        // Swizzle: the descriptor says 128B, the emulator XORs the 64B pattern.
        let v = find("m64n64k16.f32.bf16.bf16.ss").unwrap();
        let emu = WgEmulator::with(Overrides {
            pattern: Some(|s| if s == Swizzle::B128 { Swizzle::B64 } else { s }),
            ..Default::default()
        });
        let s = Setting::packed(&v, Swizzle::B128, Major::K, Major::K);
        let out = probe(&emu, &v, &s, 3).unwrap();
        let l = out.layout.expect("inferred");
        assert!(out.validation.unwrap().passed());
        for e in l.a_smem.as_ref().unwrap() {
            let want = element_bit_addr(Major::K, &s.a_desc, Swizzle::B64, 16, e.row, e.col);
            assert_eq!(e.byte * 8, want as i64, "A ({}, {})", e.row, e.col);
        }
        let fit = crate::wgmma::smem::fit(&l.a_smem.unwrap(), s.a_desc.start).expect("fits");
        assert_eq!(fit.xor, Swizzle::B64);
    }
}
