//! The data-movement probe: one experiment whose values name their places, from which the
//! routes (which lane's address, which element) of every register slot are read off and turned
//! into matrix coordinates; then two validation experiments (random values, random addresses)
//! predicted through the inferred routes by [`super::emulator::apply`] and compared bit for bit.
//!
//! The tag experiment, for each instruction:
//! - `ldmatrix`: tile element `x` holds `x + 1`; a destination element holding `x + 1` came
//!   from row `x / 8`, element `x % 8`, and the row names the lane whose address points there;
//! - `stmatrix`: source slot `s` holds `s + 1`, the tile holds `0xffff`; a tile element holding
//!   `s + 1` afterwards was written from slot `s`;
//! - `movmatrix`: source slot `s` holds `s + 1`.

use super::backend::MoveBackend;
use super::emulator::apply;
use super::{
    ELEMS_PER_REG, Experiment, LANES, Observed, ROW_ELEMS, Route, Routes, Slot, TILE_ELEMS,
    TILE_ROWS, dst_regs, half, route_regs, src_regs,
};
use crate::isa::matrix::{MatrixOp, MatrixVariant};
use crate::rng::SplitMix64;
use anyhow::Result;
use serde::{Deserialize, Serialize};
use std::time::Instant;

/// What the tile holds where `stmatrix` writes nothing, in the tag experiment.
pub const UNTOUCHED: u16 = 0xffff;

/// Each lane's row in the tag experiment: `(37·lane + 11) mod 64`, scattered and distinct.
pub fn tag_rows() -> [u32; LANES as usize] {
    std::array::from_fn(|l| (37 * l as u32 + 11) % TILE_ROWS)
}

/// 32 distinct rows of the tile in a random order.
pub fn random_rows(rng: &mut SplitMix64) -> [u32; LANES as usize] {
    let mut rows: Vec<u32> = (0..TILE_ROWS).collect();
    for i in (1..rows.len()).rev() {
        rows.swap(i, rng.below(i + 1));
    }
    std::array::from_fn(|l| rows[l])
}

/// The tag experiment of `v`.
pub fn tag_experiment(v: &MatrixVariant) -> Experiment {
    let n_src = (LANES * src_regs(v)) as usize;
    let src_tag = |w: usize| super::pack(2 * w as u16 + 1, 2 * w as u16 + 2);
    Experiment {
        addr_rows: tag_rows(),
        tile: match v.op {
            MatrixOp::Stmatrix => vec![UNTOUCHED; TILE_ELEMS],
            _ => (1..=TILE_ELEMS as u16).collect(),
        },
        src: (0..n_src).map(src_tag).collect(),
    }
}

/// A validation experiment: random rows, tile and sources.
pub fn random_experiment(v: &MatrixVariant, rng: &mut SplitMix64) -> Experiment {
    let addr_rows = random_rows(rng);
    let tile = (0..TILE_ELEMS).map(|_| rng.next_u64() as u16).collect();
    let src = (0..LANES * src_regs(v))
        .map(|_| rng.next_u64() as u32)
        .collect();
    Experiment {
        addr_rows,
        tile,
        src,
    }
}

/// The lane whose tag-experiment address names tile row `row`.
fn lane_of_row(row: u32) -> Option<u32> {
    tag_rows().iter().position(|&r| r == row).map(|l| l as u32)
}

/// Read the routes off the tag experiment's result.
pub fn routes_from_tags(v: &MatrixVariant, x: &Experiment, o: &Observed) -> Result<Routes, String> {
    let regs = route_regs(v);
    let slots = (LANES * regs * ELEMS_PER_REG) as usize;
    let mut routes: Vec<Option<Route>> = vec![None; slots];
    // Tile element `x` → the route through the lane whose address names its row.
    let tile_route = |x: usize| -> Result<Route, String> {
        let row = x as u32 / ROW_ELEMS;
        let lane = lane_of_row(row)
            .ok_or_else(|| format!("tile row {row} was used, but no lane's address names it"))?;
        Ok(Route {
            lane,
            elem: x as u32 % ROW_ELEMS,
        })
    };
    match v.op {
        MatrixOp::Ldmatrix | MatrixOp::Movmatrix => {
            for (i, route) in routes.iter_mut().enumerate() {
                let s = Slot::of(i, regs);
                let tag = half(o.dst[(s.lane * dst_regs(v) + s.reg) as usize], s.elem) as usize;
                let what = format!("lane {} reg {} elem {}", s.lane, s.reg, s.elem);
                *route = Some(match v.op {
                    MatrixOp::Ldmatrix => {
                        if tag == 0 || tag > TILE_ELEMS {
                            return Err(format!("{what} holds {tag:#06x}, no element of the tile"));
                        }
                        tile_route(tag - 1)?
                    }
                    _ => {
                        let n = (LANES * src_regs(v) * ELEMS_PER_REG) as usize;
                        if tag == 0 || tag > n {
                            return Err(format!("{what} holds {tag:#06x}, no source element"));
                        }
                        let from = Slot::of(tag - 1, src_regs(v));
                        if from.reg != s.reg {
                            return Err(format!(
                                "{what} holds source register {}'s element",
                                from.reg
                            ));
                        }
                        Route {
                            lane: from.lane,
                            elem: from.elem,
                        }
                    }
                });
            }
            if o.tile != x.tile {
                return Err(format!("{} changed the shared tile", v.id()));
            }
        }
        MatrixOp::Stmatrix => {
            for (xi, &tag) in o.tile.iter().enumerate() {
                if tag == UNTOUCHED {
                    continue;
                }
                let t = tag as usize;
                if t == 0 || t > slots {
                    return Err(format!(
                        "tile element {xi} holds {tag:#06x}, no source element"
                    ));
                }
                if routes[t - 1].is_some() {
                    let s = Slot::of(t - 1, regs);
                    return Err(format!(
                        "lane {} reg {} elem {} was written twice",
                        s.lane, s.reg, s.elem
                    ));
                }
                routes[t - 1] = Some(tile_route(xi)?);
            }
        }
    }
    routes
        .into_iter()
        .enumerate()
        .map(|(i, r)| {
            r.ok_or_else(|| {
                let s = Slot::of(i, regs);
                format!(
                    "lane {} reg {} elem {} moved nowhere",
                    s.lane, s.reg, s.elem
                )
            })
        })
        .collect()
}

/// One validation experiment's outcome.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Check {
    pub passed: bool,
    /// 16-bit elements compared (destination registers and the whole tile).
    pub compared: usize,
    pub mismatch_count: usize,
    /// Up to 16: (where, expected, got).
    pub mismatches: Vec<(String, u16, u16)>,
}

/// Compare what `o` holds with what the routes predict.
pub fn compare(expected: &Observed, got: &Observed) -> Check {
    let mut mismatches = Vec::new();
    let mut count = 0;
    let mut compared = 0;
    let mut look = |what: &dyn Fn() -> String, e: u16, g: u16| {
        compared += 1;
        if e != g {
            count += 1;
            if mismatches.len() < 16 {
                mismatches.push((what(), e, g));
            }
        }
    };
    for (w, (&e, &g)) in expected.dst.iter().zip(&got.dst).enumerate() {
        for h in 0..2 {
            look(
                &|| format!("register word {w} elem {h}"),
                half(e, h),
                half(g, h),
            );
        }
    }
    for (i, (&e, &g)) in expected.tile.iter().zip(&got.tile).enumerate() {
        look(&|| format!("tile element {i}"), e, g);
    }
    let sized = expected.dst.len() == got.dst.len() && expected.tile.len() == got.tile.len();
    Check {
        passed: count == 0 && sized,
        compared,
        mismatch_count: count,
        mismatches,
    }
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Validation {
    pub seed: u64,
    /// Random tiles, sources and addresses, predicted through the inferred routes.
    pub random: Vec<Check>,
}

impl Validation {
    pub fn passed(&self) -> bool {
        self.random.iter().all(|c| c.passed)
    }
}

/// Everything one probe of one variant found.
pub struct Outcome {
    pub routes: Result<Routes, String>,
    pub validation: Option<Validation>,
    /// The tag experiment's result, kept for a failed inference.
    pub raw: Observed,
    pub experiments: usize,
    pub wall_s: f64,
}

impl Outcome {
    pub fn passed(&self) -> bool {
        self.routes.is_ok() && self.validation.as_ref().is_some_and(Validation::passed)
    }
}

/// Validation experiments per probe.
pub const RANDOM_EXPERIMENTS: usize = 2;

/// Probe `v` on `backend`: the tag experiment and the validation experiments in one batch.
pub fn probe(backend: &dyn MoveBackend, v: &MatrixVariant, seed: u64) -> Result<Outcome> {
    let t0 = Instant::now();
    let mut rng = SplitMix64::new(seed);
    let mut xs = vec![tag_experiment(v)];
    xs.extend((0..RANDOM_EXPERIMENTS).map(|_| random_experiment(v, &mut rng)));
    let got = backend.run(v, &xs)?;
    let routes = routes_from_tags(v, &xs[0], &got[0]);
    let validation = routes.as_ref().ok().map(|r| Validation {
        seed,
        random: xs[1..]
            .iter()
            .zip(&got[1..])
            .map(|(x, o)| compare(&apply(v, r, x), o))
            .collect(),
    });
    Ok(Outcome {
        routes,
        validation,
        raw: got[0].clone(),
        experiments: xs.len(),
        wall_s: t0.elapsed().as_secs_f64(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::movement::emulator::{MoveEmulator, documented};
    use crate::movement::probed_catalog;

    #[test]
    fn the_emulator_gives_back_its_routes() {
        for v in probed_catalog() {
            let out = probe(&MoveEmulator::new(), &v, 3).unwrap();
            assert!(out.passed(), "{}", v.id());
            assert_eq!(out.routes.unwrap(), documented(&v), "{}", v.id());
        }
    }

    #[test]
    fn permuted_routes_are_inferred_not_assumed() {
        for v in probed_catalog() {
            // Rotate which lane's address each slot reads from (ld/st) or which source slot it
            // takes (mov): a different, still bijective movement.
            let routes: Routes = documented(&v)
                .into_iter()
                .map(|r| Route {
                    lane: match v.op {
                        MatrixOp::Movmatrix => (r.lane + 5) % LANES,
                        _ => (r.lane / 8) * 8 + (r.lane % 8 + 3) % 8,
                    },
                    elem: (r.elem + 1) % if v.op == MatrixOp::Movmatrix { 2 } else { 8 },
                })
                .collect();
            let emu = MoveEmulator::new().with_routes(&v, routes.clone());
            let out = probe(&emu, &v, 9).unwrap();
            assert!(out.passed(), "{}", v.id());
            assert_eq!(out.routes.unwrap(), routes);
        }
    }

    #[test]
    fn a_wrong_map_fails_validation() {
        let v = crate::isa::matrix::find("ldmatrix.m8n8.x2.b16").unwrap();
        let mut routes = documented(&v);
        let tag = tag_experiment(&v);
        let o = apply(&v, &routes, &tag);
        assert_eq!(routes_from_tags(&v, &tag, &o).unwrap(), routes);
        routes.swap(0, 1);
        let mut rng = SplitMix64::new(1);
        let x = random_experiment(&v, &mut rng);
        let c = compare(&apply(&v, &routes, &x), &apply(&v, &documented(&v), &x));
        assert!(!c.passed);
        assert_eq!(c.mismatch_count, 2);
    }

    #[test]
    fn broken_results_are_named() {
        let v = crate::isa::matrix::find("ldmatrix.m8n8.x1.b16").unwrap();
        let tag = tag_experiment(&v);
        let mut o = apply(&v, &documented(&v), &tag);
        o.dst[5] = 0;
        let e = routes_from_tags(&v, &tag, &o).unwrap_err();
        assert!(e.contains("lane 5 reg 0 elem 0 holds 0x0000"), "{e}");
        let st = crate::isa::matrix::find("stmatrix.m8n8.x1.b16").unwrap();
        let tag = tag_experiment(&st);
        let mut o = apply(&st, &documented(&st), &tag);
        // An element of a row no lane's address names.
        let free = (0..TILE_ROWS).find(|r| lane_of_row(*r).is_none()).unwrap();
        o.tile[(free * ROW_ELEMS) as usize] = 1;
        assert!(routes_from_tags(&st, &tag, &o).is_err());
    }
}
