//! A CPU model of `ldmatrix`, `stmatrix` and `movmatrix`, driven by [`Routes`], so that the
//! probes, the inference and the tests run without a GPU. The same [`apply`] predicts what a
//! measured map says an experiment must give, which is how the probe validates a map.
//!
//! The routes the emulator runs by default are the PTX ISA's description (stated here, because
//! emulator results are never hardware findings): for `ldmatrix`/`stmatrix` without `.trans`,
//! lane `l`'s register `j` element `e` is matrix `j`'s element (`l/4`, `2·(l%4)+e`), and the
//! rows of matrix `j` are at the addresses of lanes `8j..8j+7`; with `.trans`, element
//! (`2·(l%4)+e`, `l/4`). `movmatrix` gives lane `l` element `e` the source matrix's element
//! (`2·(l%4)+e`, `l/4`), the source held as lane `l'` element `e'` = (`l'/4`, `2·(l'%4)+e'`).

use super::backend::MoveBackend;
use super::{
    ELEMS_PER_REG, Experiment, LANES, Observed, ROW_ELEMS, Route, Routes, Slot, dst_regs, half,
    not_probed, pack, route_regs, src_regs,
};
use crate::device::DeviceInfo;
use crate::isa::matrix::{MatrixOp, MatrixVariant};
use anyhow::{Result, bail};
use std::collections::HashMap;

/// Slot (lane, reg, elem) → (matrix, row, col) as the PTX ISA describes it.
pub fn documented_coord(v: &MatrixVariant, s: Slot) -> (u32, u32, u32) {
    let (g, t) = (s.lane / 4, s.lane % 4);
    let trans = v.trans || v.op == MatrixOp::Movmatrix;
    if trans {
        (s.reg, 2 * t + s.elem, g)
    } else {
        (s.reg, g, 2 * t + s.elem)
    }
}

/// The lane whose address names row `row` of matrix `matrix`, as the PTX ISA describes it.
pub fn documented_address_lane(matrix: u32, row: u32) -> u32 {
    8 * matrix + row
}

/// The documented routes of `v`.
pub fn documented(v: &MatrixVariant) -> Routes {
    let regs = route_regs(v);
    (0..(LANES * regs * ELEMS_PER_REG) as usize)
        .map(|i| {
            let (m, r, c) = documented_coord(v, Slot::of(i, regs));
            match v.op {
                // The source slot that holds source element (r, c): lane 4r + c/2, element c%2.
                MatrixOp::Movmatrix => Route {
                    lane: 4 * r + c / 2,
                    elem: c % 2,
                },
                _ => Route {
                    lane: documented_address_lane(m, r),
                    elem: c,
                },
            }
        })
        .collect()
}

/// What `v` moving along `routes` does to experiment `x`.
pub fn apply(v: &MatrixVariant, routes: &[Route], x: &Experiment) -> Observed {
    let regs = route_regs(v);
    let mut tile = x.tile.clone();
    let mut dst = vec![0u32; (LANES * dst_regs(v)) as usize];
    let tile_index = |r: &Route| (x.addr_rows[r.lane as usize] * ROW_ELEMS + r.elem) as usize;
    let src_elem =
        |lane: u32, elem: u32, reg: u32| half(x.src[(lane * src_regs(v) + reg) as usize], elem);
    for (i, r) in routes.iter().enumerate() {
        let s = Slot::of(i, regs);
        match v.op {
            MatrixOp::Ldmatrix => {
                let w = &mut dst[(s.lane * regs + s.reg) as usize];
                *w |= (tile[tile_index(r)] as u32) << (16 * s.elem);
            }
            MatrixOp::Stmatrix => {
                tile[tile_index(r)] = src_elem(s.lane, s.elem, s.reg);
            }
            MatrixOp::Movmatrix => {
                let w = &mut dst[(s.lane * regs + s.reg) as usize];
                *w |= (src_elem(r.lane, r.elem, s.reg) as u32) << (16 * s.elem);
            }
        }
    }
    Observed { dst, tile }
}

/// The emulator backend: [`apply`] with the documented routes, or with routes a test gives.
pub struct MoveEmulator {
    info: DeviceInfo,
    overrides: HashMap<String, Routes>,
}

impl Default for MoveEmulator {
    fn default() -> Self {
        Self::new()
    }
}

impl MoveEmulator {
    pub fn new() -> Self {
        // The same identity as the mma.sync emulator: both model the PTX ISA's description.
        let mma = crate::device::emulator::Emulator::new();
        MoveEmulator {
            info: crate::device::Backend::info(&mma).clone(),
            overrides: HashMap::new(),
        }
    }

    /// Emulate `v` along `routes` instead of the documented ones.
    pub fn with_routes(mut self, v: &MatrixVariant, routes: Routes) -> Self {
        self.info.name = "fp4probe emulator (custom routes)".into();
        self.overrides.insert(v.id(), routes);
        self
    }
}

impl MoveBackend for MoveEmulator {
    fn info(&self) -> &DeviceInfo {
        &self.info
    }

    fn check_supported(&self, v: &MatrixVariant) -> Result<()> {
        if let Some(why) = not_probed(v) {
            bail!("{}: {why}", v.id());
        }
        Ok(())
    }

    fn run(&self, v: &MatrixVariant, xs: &[Experiment]) -> Result<Vec<Observed>> {
        self.check_supported(v)?;
        let routes = self
            .overrides
            .get(&v.id())
            .cloned()
            .unwrap_or_else(|| documented(v));
        Ok(xs.iter().map(|x| apply(v, &routes, x)).collect())
    }
}

/// Register words from per-slot elements, `[lane][reg]`.
pub fn words_of(elems: &[u16]) -> Vec<u32> {
    elems.chunks(2).map(|p| pack(p[0], p[1])).collect()
}
