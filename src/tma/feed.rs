//! Which TMA swizzle mode feeds which wgmma descriptor swizzle: a tile filled by bulk tensor
//! loads (the measured TMA placement) against the element order the wgmma probes measured
//! for each descriptor swizzle (`fp4probe.wgmma-smem/1`, the packed setting).
//!
//! The tile, in TMA terms, has the operand's contiguous dimension as its columns (k for a
//! K-major operand, m or n for an MN-major one) and the other as its rows. It is filled by
//! boxes of 8 rows (the swizzle pattern's repeat) and the TMA mode's span of bytes, placed
//! one after another in shared memory, columns of boxes first, then rows of boxes: the
//! canonical layout the wgmma probes' packed descriptors describe (a box of all the tile's
//! rows lands the same where the tile has one column of boxes, as every swizzled K-major
//! tile of those probes does). Each box element's byte is the measured TMA map's (its first
//! eight rows; the box repeats every 8 rows, which the fitted form shows). A wgmma element
//! whose byte differs is one the wgmma reads from the wrong place. Sub-byte (b1) tiles are
//! compared by the byte that holds an element: TMA moves bytes, so the bit order within a
//! byte is the packing's, not the copy's.

use super::Dir;
use super::map::TmaMap;
use crate::layout::lanemap::Status;
use crate::wgmma::desc::{Major, Swizzle};
use crate::wgmma::map::WgSmemMap;
use serde::{Deserialize, Serialize};

/// One wgmma operand tile read after TMA filled it under one swizzle mode.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Pairing {
    /// The wgmma study's stem (`smem.16bit.K.128B`) and operand (`A` or `B`).
    pub wgmma: String,
    pub operand: String,
    pub elem_bits: u32,
    pub major: Major,
    pub descriptor_swizzle: Swizzle,
    /// The TMA map's case and swizzle mode.
    pub tma: String,
    pub tma_swizzle: Swizzle,
    /// Elements of the wgmma tile, and those at another byte than the wgmma reads.
    pub elements: usize,
    pub mismatches: usize,
}

/// The TMA maps a pairing uses: passed loads of the catalog's box height at a 1024-aligned
/// address whose box row is the span of their mode.
pub fn feeding_maps(tmas: &[TmaMap]) -> Vec<&TmaMap> {
    tmas.iter()
        .filter(|m| {
            m.status == Status::Passed
                && m.direction == Dir::Load
                && m.smem_offset == 0
                && m.box_rows == super::BOX_ROWS
                && m.box_cols * m.elem_bytes == super::span_bytes(m.swizzle)
        })
        .collect()
}

/// (strided, contiguous) coordinates of a wgmma map entry: A's (row, col) is (m, k), B's is
/// (k, n); K-major tiles are contiguous in k, MN-major ones in m or n.
fn tma_coords(operand: &str, major: Major, row: u32, col: u32) -> (u32, u32) {
    match (operand, major) {
        ("A", Major::K) | ("B", Major::MN) => (row, col),
        _ => (col, row),
    }
}

/// The shared byte TMA boxes of `tma` put the tile's byte (strided row `r`, contiguous byte
/// `cb`) at, the tile `tile_bytes` wide.
pub fn tile_byte(tma: &TmaMap, r: u32, cb: u32, tile_bytes: u32) -> u32 {
    let inner = tma.box_cols * tma.elem_bytes;
    let cols = tile_bytes.div_ceil(inner);
    let (i, j, w) = (r / 8, cb / inner, cb % inner);
    let k = ((r % 8) * tma.box_cols + w / tma.elem_bytes) as usize;
    (i * cols + j) * 8 * inner + tma.smem_byte[k] + w % tma.elem_bytes
}

/// One operand of one wgmma study against one TMA map.
pub fn pair(w: &WgSmemMap, operand: &str, tma: &TmaMap) -> Pairing {
    let entries = if operand == "A" { &w.a } else { &w.b };
    let bits = w.elem_bits;
    let contig: Vec<(u32, u32)> = entries
        .iter()
        .map(|e| tma_coords(operand, w.major, e[2] as u32, e[3] as u32))
        .collect();
    let tile_bytes = contig
        .iter()
        .map(|&(_, c)| (c + 1) * bits)
        .max()
        .unwrap_or(0)
        .div_ceil(8);
    let mismatches = entries
        .iter()
        .zip(&contig)
        .filter(|(e, (r, c))| tile_byte(tma, *r, c * bits / 8, tile_bytes) as i64 != e[0])
        .count();
    Pairing {
        wgmma: w.stem(),
        operand: operand.into(),
        elem_bits: bits,
        major: w.major,
        descriptor_swizzle: w.swizzle,
        tma: tma.case.clone(),
        tma_swizzle: tma.swizzle,
        elements: entries.len(),
        mismatches,
    }
}

/// Every operand of every passed wgmma study against every TMA map of its element size
/// (b1 tiles against the 1-byte maps), in the studies' order, then operand, then TMA swizzle.
pub fn pairings(tmas: &[TmaMap], wgmmas: &[WgSmemMap]) -> Vec<Pairing> {
    let feeding = feeding_maps(tmas);
    let mut out = Vec::new();
    for w in wgmmas.iter().filter(|w| w.status == Status::Passed) {
        let e = (w.elem_bits / 8).max(1);
        let mut mine: Vec<&&TmaMap> = feeding.iter().filter(|t| t.elem_bytes == e).collect();
        mine.sort_by_key(|t| t.swizzle);
        for operand in ["A", "B"] {
            for t in &mine {
                out.push(pair(w, operand, t));
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tma::map::TmaMap;
    use crate::wgmma::desc::Desc;
    use crate::wgmma::model::element_bit_addr;

    /// A wgmma study's maps as the documented layout gives them, at the wgmma probes' packed
    /// settings (SBO 8 rows of the span; LBO 128 for K-major none; MN-major LBO and SBO as
    /// the probes set them).
    fn documented_study(bits: u32, major: Major, swizzle: Swizzle) -> WgSmemMap {
        let (m, n) = (64u32, 64u32);
        let k = match bits {
            1 => 256,
            8 => 32,
            16 => 16,
            _ => 8,
        };
        let span = swizzle.width();
        let t = 128 / bits;
        let desc = |mn: u32| match (major, swizzle) {
            (Major::K, Swizzle::None) => (128, 256),
            (Major::K, _) => (8 * span, 8 * span),
            (Major::MN, Swizzle::None) => ((mn / t) * 128, 128),
            (Major::MN, _) => (8 * span, (mn * bits / 8).div_ceil(span) * 8 * span),
        };
        let entries = |mn: u32, operand: &str| -> Vec<[i64; 4]> {
            let (lbo, sbo) = desc(mn);
            let d = Desc {
                start: 0,
                lbo,
                sbo,
                base_offset: 0,
                swizzle,
            };
            let mut v = Vec::new();
            for i in 0..mn {
                for kk in 0..k {
                    let a = element_bit_addr(major, &d, swizzle, bits, i, kk);
                    let (row, col) = if operand == "A" { (i, kk) } else { (kk, i) };
                    v.push([(a / 8) as i64, (a % 8) as i64, row as i64, col as i64]);
                }
            }
            v
        };
        let prov = crate::provenance::Provenance::new(
            crate::device::Backend::info(&crate::device::emulator::Emulator::new()),
            String::new(),
        );
        WgSmemMap {
            schema: crate::wgmma::map::SMEM_SCHEMA.into(),
            variant: "test".into(),
            elem_bits: bits,
            swizzle,
            major,
            backend: crate::device::BackendKind::Emulator,
            status: Status::Passed,
            provenance: prov,
            a: entries(m, "A"),
            b: entries(n, "B"),
            a_fit: None,
            b_fit: None,
            sweep: Vec::new(),
            timing: crate::wgmma::map::Timing {
                wall_s: 0.0,
                work: crate::wgmma::probe::Work {
                    experiments: 0,
                    launches: 0,
                },
            },
        }
    }

    fn tma_maps() -> Vec<TmaMap> {
        crate::tma::catalog()
            .iter()
            .map(|c| crate::tma::map::tests::emulated(&c.id()))
            .collect()
    }

    #[test]
    fn the_matching_swizzle_feeds_the_documented_layouts_and_the_others_do_not() {
        let tmas = tma_maps();
        for (bits, major) in [
            (16, Major::K),
            (16, Major::MN),
            (8, Major::K),
            (32, Major::K),
            (1, Major::K),
        ] {
            for y in Swizzle::ALL {
                let w = documented_study(bits, major, y);
                for p in pairings(&tmas, std::slice::from_ref(&w)) {
                    let ok = p.mismatches == 0;
                    assert_eq!(
                        ok,
                        p.tma_swizzle == y,
                        "{bits}-bit {major} {y} {} against {}: {} of {}",
                        p.operand,
                        p.tma,
                        p.mismatches,
                        p.elements
                    );
                }
            }
        }
    }
}
