//! A CPU model of the bulk tensor copies, so the probes, the inference and the tests run without
//! a GPU; the same [`apply`] predicts what a measured placement says an experiment must give,
//! which is how the probe validates a map.
//!
//! The placement the emulator runs by default is the documented one (CUDA driver API,
//! `CUtensorMapSwizzle`; PTX ISA, "Tensor copy swizzling modes"), stated here because emulator
//! results are never hardware findings: box element (r, c) of `E`-byte elements goes to shared
//! byte `X(a) − a0` with `a = a0 + r·inner + c·E`, `a0` the box's shared address, `inner` the
//! box row's bytes, and X the swizzle as an XOR of address bits: bits [4, 4+s) (the 16-byte
//! chunk within a span) take the XOR of bits [7, 7+s) (the 128-byte line within the pattern's
//! repeat), s = 0, 1, 2, 3 for none, 32B, 64B, 128B — the pattern the wgmma descriptor's
//! swizzle modes are documented with ([`crate::wgmma::model::swizzle`]). The documentation
//! gives no row pitch for a box row narrower than the swizzle span; the model packs such rows
//! at the box row's bytes, and the probe's narrow cases measure what the hardware does instead
//! (a map records how many elements differ from this model).

use super::backend::{Experiment, Observed, TmaBackend};
use super::{Case, Dir};
use crate::device::DeviceInfo;
use crate::wgmma::model::swizzle;
use anyhow::Result;
use std::collections::HashMap;

/// Shared byte offset (from the box's address) of each box element, row-major.
pub type Placement = Vec<u32>;

/// The documented shared byte offset of box element (r, c).
pub fn documented_byte(case: &Case, r: u32, c: u32) -> u32 {
    let a0 = case.smem_offset;
    swizzle(
        a0 + r * case.inner_bytes() + c * case.elem_bytes,
        case.swizzle,
        0,
    ) - a0
}

/// The documented placement of `case`.
pub fn documented(case: &Case) -> Placement {
    (0..case.box_rows)
        .flat_map(|r| (0..case.box_cols).map(move |c| documented_byte(case, r, c)))
        .collect()
}

/// What `case` copying along `placement` does to experiment `x`. Elements a placement puts
/// past the region are dropped (a test's placement may be wrong; the model must not fail).
pub fn apply(case: &Case, placement: &[u32], x: &Experiment) -> Observed {
    let mut o = Observed {
        global: x.global.clone(),
        smem: x.smem.clone(),
        completed: true,
    };
    let e = case.elem_bytes as usize;
    for (k, &p) in placement.iter().enumerate() {
        let (r, c) = (k as u32 / case.box_cols, k as u32 % case.box_cols);
        let g = case.box_global_byte(r, c);
        let s = p as usize;
        if s + e > o.smem.len() || g + e > o.global.len() {
            continue;
        }
        match case.dir {
            Dir::Load => o.smem[s..s + e].copy_from_slice(&x.global[g..g + e]),
            Dir::Store => o.global[g..g + e].copy_from_slice(&x.smem[s..s + e]),
        }
    }
    o
}

/// The emulator backend: [`apply`] with the documented placement, or with one a test gives.
pub struct TmaEmulator {
    info: DeviceInfo,
    overrides: HashMap<String, Placement>,
}

impl Default for TmaEmulator {
    fn default() -> Self {
        Self::new()
    }
}

impl TmaEmulator {
    pub fn new() -> Self {
        // The same identity as the other emulators: each models the documentation.
        let mma = crate::device::emulator::Emulator::new();
        TmaEmulator {
            info: crate::device::Backend::info(&mma).clone(),
            overrides: HashMap::new(),
        }
    }

    /// Emulate `case` along `placement` instead of the documented one.
    pub fn with_placement(mut self, case: &Case, placement: Placement) -> Self {
        self.info.name = "fp4probe emulator (custom placement)".into();
        self.overrides.insert(case.id(), placement);
        self
    }
}

impl TmaBackend for TmaEmulator {
    fn info(&self) -> &DeviceInfo {
        &self.info
    }

    fn check_supported(&self, case: &Case) -> Result<()> {
        case.check()
    }

    fn run(&self, case: &Case, xs: &[Experiment]) -> Result<Vec<Observed>> {
        case.check()?;
        let p = self
            .overrides
            .get(&case.id())
            .cloned()
            .unwrap_or_else(|| documented(case));
        Ok(xs.iter().map(|x| apply(case, &p, x)).collect())
    }

    fn run_stsm(&self, case: &Case, addrs: &[u32], src: &[u32]) -> Result<Vec<u8>> {
        case.check()?;
        Ok(super::stsm::emulate(
            case,
            &super::stsm::stsm()?,
            addrs,
            src,
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tma::Swizzle;

    fn case(swizzle: Swizzle, elem_bytes: u32, inner: u32, smem_offset: u32) -> Case {
        Case {
            dir: Dir::Load,
            elem_bytes,
            swizzle,
            box_rows: 16,
            box_cols: inner / elem_bytes,
            smem_offset,
        }
    }

    #[test]
    fn the_documented_swizzle_moves_16_byte_chunks_by_the_line() {
        let c = case(Swizzle::B128, 2, 128, 0);
        // Row 1's first chunk goes to chunk 1, row 7's to chunk 7; bytes within a chunk stay.
        assert_eq!(documented_byte(&c, 1, 0), 128 + 16);
        assert_eq!(documented_byte(&c, 7, 3), 7 * 128 + 7 * 16 + 6);
        assert_eq!(documented_byte(&c, 8, 0), 1024);
        let c = case(Swizzle::B32, 1, 32, 0);
        // 32B: bit 4 takes bit 7, so rows 4..7 swap their two chunks.
        assert_eq!(documented_byte(&c, 3, 0), 96);
        assert_eq!(documented_byte(&c, 4, 0), 128 + 16);
        // Off the 1024-byte repeat the phase follows the absolute address.
        let c = case(Swizzle::B128, 2, 128, 256);
        assert_eq!(documented_byte(&c, 0, 0), 32);
        assert_eq!(
            documented_byte(&case(Swizzle::None, 4, 16, 0), 5, 2),
            5 * 16 + 8
        );
    }

    #[test]
    fn every_documented_placement_is_a_bijection_inside_the_box() {
        for c in crate::tma::catalog() {
            let p = documented(&c);
            let mut seen = std::collections::HashSet::new();
            for &b in &p {
                assert!(b + c.elem_bytes <= c.box_bytes(), "{c}: {b}");
                assert_eq!(b % c.elem_bytes, 0);
                assert!(seen.insert(b), "{c}: {b} twice");
            }
        }
    }
}
