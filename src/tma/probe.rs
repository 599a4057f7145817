//! The TMA probe: tag experiments whose values name their places, from which the shared byte of
//! every box element is read off; then random experiments predicted through that placement by
//! [`super::model::apply`] and compared byte for byte (the whole shared region with its guard,
//! the whole global tensor).
//!
//! Tags, for `E`-byte elements:
//! - load: global element `g` (row-major in the global tensor) holds `g + 1`, shared memory
//!   holds zeros; a shared slot holding `g + 1` afterwards holds global element `g`;
//! - store: the shared slot at byte `E·k` holds `k + 1`, global memory holds zeros; a global
//!   element holding `k + 1` afterwards came from shared byte `E·k`.
//!
//! An id wider than an element is split into planes: experiment `p` writes bits
//! `[8E·p, 8E·(p+1))` of every id, and the planes are joined again after the copy.

use super::backend::{Experiment, Observed, TmaBackend};
use super::model::{Placement, apply};
use super::{Case, Dir};
use crate::movement::probe::Check;
pub use crate::movement::probe::Validation;
use crate::rng::SplitMix64;
use anyhow::Result;
use std::time::Instant;

/// Number of ids a tag experiment needs: global elements (load) or shared slots (store).
fn id_count(case: &Case) -> u64 {
    match case.dir {
        Dir::Load => {
            let (r, c) = case.global_dims();
            (r * c) as u64
        }
        Dir::Store => (case.region_bytes() / case.elem_bytes) as u64,
    }
}

/// Planes of the tag experiments: enough `8E`-bit slices to hold every id `1..=n`.
pub fn planes(case: &Case) -> u32 {
    let bits = u64::BITS - id_count(case).leading_zeros();
    bits.div_ceil(8 * case.elem_bytes).max(1)
}

/// `id`'s plane `p` as `E` little-endian bytes.
fn plane_bytes(case: &Case, id: u64, p: u32) -> impl Iterator<Item = u8> {
    let v = id >> (8 * case.elem_bytes * p);
    (0..case.elem_bytes).map(move |b| (v >> (8 * b)) as u8)
}

/// Value of the `E`-byte element at `bytes[at..]`, shifted to plane `p`.
fn plane_value(case: &Case, bytes: &[u8], at: usize, p: u32) -> u64 {
    let e = case.elem_bytes as usize;
    let v = bytes[at..at + e]
        .iter()
        .rev()
        .fold(0u64, |acc, &b| acc << 8 | b as u64);
    v << (8 * case.elem_bytes * p)
}

/// The tag experiments of `case`, one per plane.
pub fn tag_experiments(case: &Case) -> Vec<Experiment> {
    let e = case.elem_bytes as u64;
    (0..planes(case))
        .map(|p| {
            let zeros_g = vec![0u8; case.global_bytes()];
            let zeros_s = vec![0u8; case.region_bytes() as usize];
            let ids = |n: usize| -> Vec<u8> {
                (0..n as u64 / e)
                    .flat_map(|k| plane_bytes(case, k + 1, p))
                    .collect()
            };
            match case.dir {
                Dir::Load => Experiment {
                    global: ids(case.global_bytes()),
                    smem: zeros_s,
                },
                Dir::Store => Experiment {
                    global: zeros_g,
                    smem: ids(case.region_bytes() as usize),
                },
            }
        })
        .collect()
}

/// A validation experiment: random global tensor and random shared region.
pub fn random_experiment(case: &Case, rng: &mut SplitMix64) -> Experiment {
    let mut bytes = |n: usize| (0..n).map(|_| rng.next_u64() as u8).collect::<Vec<u8>>();
    Experiment {
        global: bytes(case.global_bytes()),
        smem: bytes(case.region_bytes() as usize),
    }
}

/// Join the planes of the ids at `at` of the destination.
fn joined(case: &Case, got: &[Observed], at: usize) -> u64 {
    got.iter()
        .enumerate()
        .map(|(p, o)| {
            let dst = match case.dir {
                Dir::Load => &o.smem,
                Dir::Store => &o.global,
            };
            plane_value(case, dst, at, p as u32)
        })
        .sum()
}

/// Read the placement off the tag experiments' results.
pub fn placement_from_tags(case: &Case, got: &[Observed]) -> Result<Placement, String> {
    if let Some(p) = got.iter().position(|o| !o.completed) {
        return Err(format!(
            "the copy of tag experiment {p} did not complete (the mbarrier wait gave up)"
        ));
    }
    let e = case.elem_bytes;
    let (gr, gc) = case.global_dims();
    let (r0, c0) = case.origin();
    let mut place: Vec<Option<u32>> = vec![None; case.box_elems()];
    let mut put = |r: u32, c: u32, byte: u32, what: &dyn Fn() -> String| -> Result<(), String> {
        let k = (r * case.box_cols + c) as usize;
        match place[k].replace(byte) {
            Some(first) => Err(format!(
                "box element ({r}, {c}) reached shared bytes {first} and {byte} ({})",
                what()
            )),
            None => Ok(()),
        }
    };
    let inside = |row: u32, col: u32| {
        (r0..r0 + case.box_rows).contains(&row) && (c0..c0 + case.box_cols).contains(&col)
    };
    match case.dir {
        Dir::Load => {
            for s in (0..case.region_bytes()).step_by(e as usize) {
                let id = joined(case, got, s as usize);
                if id == 0 {
                    continue;
                }
                let g = id - 1;
                if g >= (gr * gc) as u64 {
                    return Err(format!("shared byte {s} holds {id:#x}, no global element"));
                }
                let (row, col) = ((g / gc as u64) as u32, (g % gc as u64) as u32);
                if !inside(row, col) {
                    return Err(format!(
                        "shared byte {s} holds global element ({row}, {col}), outside the box"
                    ));
                }
                put(row - r0, col - c0, s, &|| "a load".into())?;
            }
        }
        Dir::Store => {
            let slots = (case.region_bytes() / e) as u64;
            for row in 0..gr {
                for col in 0..gc {
                    let id = joined(case, got, case.global_byte(row, col));
                    if id == 0 {
                        continue;
                    }
                    if !inside(row, col) {
                        return Err(format!(
                            "global element ({row}, {col}), outside the box, was written"
                        ));
                    }
                    if id > slots {
                        return Err(format!(
                            "global element ({row}, {col}) holds {id:#x}, no shared slot"
                        ));
                    }
                    put(row - r0, col - c0, (id - 1) as u32 * e, &|| {
                        "a store".into()
                    })?;
                }
            }
        }
    }
    place
        .into_iter()
        .enumerate()
        .map(|(k, p)| {
            p.ok_or_else(|| {
                let (r, c) = (k as u32 / case.box_cols, k as u32 % case.box_cols);
                format!("box element ({r}, {c}) moved nowhere")
            })
        })
        .collect()
}

/// Compare an experiment's result with the prediction, byte for byte.
pub fn compare(expected: &Observed, got: &Observed) -> Check {
    let mut mismatches = Vec::new();
    let mut count = 0;
    let mut compared = 0;
    for (what, e, g) in [
        ("shared byte", &expected.smem, &got.smem),
        ("global byte", &expected.global, &got.global),
    ] {
        for (i, (&a, &b)) in e.iter().zip(g.iter()).enumerate() {
            compared += 1;
            if a != b {
                count += 1;
                if mismatches.len() < 16 {
                    mismatches.push((format!("{what} {i}"), a as u16, b as u16));
                }
            }
        }
    }
    let sized = expected.smem.len() == got.smem.len() && expected.global.len() == got.global.len();
    Check {
        passed: count == 0 && sized && got.completed,
        compared,
        mismatch_count: count,
        mismatches,
    }
}

/// Everything one probe of one case found.
pub struct Outcome {
    pub placement: Result<Placement, String>,
    pub validation: Option<Validation>,
    /// The tag experiments' results, kept for a failed inference.
    pub raw: Vec<Observed>,
    pub experiments: usize,
    pub wall_s: f64,
}

impl Outcome {
    pub fn passed(&self) -> bool {
        self.placement.is_ok() && self.validation.as_ref().is_some_and(Validation::passed)
    }
}

/// Validation experiments per probe.
pub const RANDOM_EXPERIMENTS: usize = 2;

/// Probe `case` on `backend`: the tag experiments and the validation experiments in one batch.
pub fn probe(backend: &dyn TmaBackend, case: &Case, seed: u64) -> Result<Outcome> {
    let t0 = Instant::now();
    let mut rng = SplitMix64::new(seed);
    let mut xs = tag_experiments(case);
    let tags = xs.len();
    xs.extend((0..RANDOM_EXPERIMENTS).map(|_| random_experiment(case, &mut rng)));
    let got = backend.run(case, &xs)?;
    let placement = placement_from_tags(case, &got[..tags]);
    let validation = placement.as_ref().ok().map(|p| Validation {
        seed,
        random: xs[tags..]
            .iter()
            .zip(&got[tags..])
            .map(|(x, o)| compare(&apply(case, p, x), o))
            .collect(),
    });
    Ok(Outcome {
        placement,
        validation,
        raw: got[..tags].to_vec(),
        experiments: xs.len(),
        wall_s: t0.elapsed().as_secs_f64(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tma::catalog;
    use crate::tma::model::{TmaEmulator, documented};

    #[test]
    fn the_emulator_gives_back_its_placement() {
        for c in catalog() {
            let out = probe(&TmaEmulator::new(), &c, 3).unwrap();
            assert!(out.passed(), "{c}: {:?}", out.placement.err());
            assert_eq!(out.placement.unwrap(), documented(&c), "{c}");
        }
    }

    #[test]
    fn planes_cover_the_ids() {
        let c: Case = "load.u8.128B.16x128".parse().unwrap();
        assert_eq!(planes(&c), 2);
        let c: Case = "load.u32.none.16x4".parse().unwrap();
        assert_eq!(planes(&c), 1);
        let c: Case = "store.u8.none.16x16".parse().unwrap();
        assert_eq!(planes(&c), 2);
    }

    #[test]
    fn a_different_placement_is_inferred_not_assumed() {
        for id in ["load.u16.128B.16x64", "store.u8.64B.16x64"] {
            let c: Case = id.parse().unwrap();
            // The 128B pattern read with its phase one line off, or rows reversed.
            let p: Placement = (0..c.box_rows)
                .flat_map(|r| {
                    (0..c.box_cols).map(move |col| {
                        let a = (c.box_rows - 1 - r) * c.inner_bytes() + col * c.elem_bytes;
                        a ^ ((((a >> 7) + 1) & 7) << 4) & (c.swizzle.width() - 16)
                    })
                })
                .collect();
            let emu = TmaEmulator::new().with_placement(&c, p.clone());
            let out = probe(&emu, &c, 5).unwrap();
            assert!(out.passed(), "{id}");
            assert_eq!(out.placement.unwrap(), p);
        }
    }

    #[test]
    fn rows_padded_to_the_span_are_inferred() {
        // A half-span box whose rows sit a whole span apart stays inside the region.
        let c: Case = "load.u16.128B.16x32".parse().unwrap();
        let p: Placement = (0..c.box_rows)
            .flat_map(|r| {
                (0..c.box_cols)
                    .map(move |col| crate::wgmma::model::swizzle(128 * r + 2 * col, c.swizzle, 0))
            })
            .collect();
        let emu = TmaEmulator::new().with_placement(&c, p.clone());
        let out = probe(&emu, &c, 2).unwrap();
        assert!(out.passed());
        assert_eq!(out.placement.unwrap(), p);
    }

    #[test]
    fn broken_copies_are_named() {
        let c: Case = "load.u16.32B.16x16".parse().unwrap();
        let xs = tag_experiments(&c);
        let mut got: Vec<Observed> = xs.iter().map(|x| apply(&c, &documented(&c), x)).collect();
        got[0].smem[0..2].copy_from_slice(&[0, 0]);
        assert!(
            placement_from_tags(&c, &got)
                .unwrap_err()
                .contains("box element (0, 0) moved nowhere")
        );
        // A value from outside the box.
        got[0].smem[0..2].copy_from_slice(&[1, 0]);
        assert!(
            placement_from_tags(&c, &got)
                .unwrap_err()
                .contains("global element (0, 0), outside the box")
        );
        got[0].completed = false;
        assert!(
            placement_from_tags(&c, &got)
                .unwrap_err()
                .contains("did not complete")
        );
        // A wrong placement fails validation.
        let mut rng = SplitMix64::new(1);
        let x = random_experiment(&c, &mut rng);
        let mut p = documented(&c);
        p.swap(0, 1);
        let chk = compare(&apply(&c, &p, &x), &apply(&c, &documented(&c), &x));
        assert!(!chk.passed);
        assert_eq!(chk.mismatch_count, 4);
    }
}
