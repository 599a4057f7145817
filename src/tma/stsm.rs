//! The epilogue path: `stmatrix` writes a warp's 16-bit fragments into shared memory at
//! swizzled addresses, then one bulk tensor store writes the box to global memory under a
//! swizzle mode. The question is whether the documented XOR, used for the `stmatrix`
//! addresses, and the tensor map's swizzle agree: then the global box holds the fragments'
//! elements in row-major order. Every pairing of address swizzle and store swizzle is run, so
//! a mismatched pair shows how much of the tile lands elsewhere.
//!
//! One experiment per pairing: the box is 16 rows × one span (128 bytes without swizzle) of
//! u16; `stmatrix.m8n8.x4` runs once per 32 bytes of the row, lane `l` naming row
//! `8·((l/8)%2) + l%8` and 16-byte chunk `2·j + l/16` of call `j`, at the byte the address
//! swizzle's XOR gives that row and chunk; register `q` element `e` of lane `l` in call `j`
//! holds tag `1 + 2·(4·(32·j + l) + q) + e`. The global box read back says which slot each
//! element came from; the expected slot is the PTX ISA's `stmatrix` fragment (lane `l`,
//! register `q`, element `e` ↔ matrix `q`'s (l/4, 2·(l%4)+e)), which the ldmatrix/stmatrix
//! probes measured to hold on the H200.

use super::backend::{Experiment, TmaBackend};
use super::model::apply;
use super::{Case, Dir, Swizzle};
use crate::device::BackendKind;
use crate::isa::matrix::MatrixVariant;
use crate::movement::Slot;
use crate::movement::emulator::{documented_address_lane, documented_coord};
use crate::provenance::Provenance;
use crate::wgmma::model::swizzle;
use anyhow::{Context, Result};
use serde::{Deserialize, Serialize};

pub const SCHEMA: &str = "fp4probe.tma-stmatrix/1";
/// The file the record is written to, in the maps' folder.
pub const STEM: &str = "stmatrix-store";
/// The `stmatrix` form the path runs.
pub const STSM: &str = "stmatrix.m8n8.x4.b16";

/// The stmatrix variant of the path.
pub fn stsm() -> Result<MatrixVariant> {
    crate::isa::matrix::find(STSM).with_context(|| format!("{STSM} is not in the catalog"))
}

/// The store case of tensor-map swizzle `x`: u16, 16 rows, one span wide (128 bytes without
/// swizzle, four `stmatrix` calls as under 128B).
pub fn store_case(x: Swizzle) -> Case {
    let inner = if x == Swizzle::None { 128 } else { x.width() };
    Case {
        dir: Dir::Store,
        elem_bytes: 2,
        swizzle: x,
        box_rows: 16,
        box_cols: inner / 2,
        smem_offset: 0,
    }
}

/// `stmatrix.x4` calls per box: one per 32 bytes of the row.
pub fn calls(case: &Case) -> u32 {
    case.inner_bytes() / 32
}

/// Byte from the box's address that lane `lane` names in call `j`, under address swizzle `y`.
pub fn lane_addr(case: &Case, y: Swizzle, j: u32, lane: u32) -> u32 {
    let q = lane / 8;
    let row = 8 * (q % 2) + lane % 8;
    let chunk = 2 * j + q / 2;
    swizzle(row * case.inner_bytes() + 16 * chunk, y, 0)
}

/// Every lane's address of every call, `[j][lane]`.
pub fn addresses(case: &Case, y: Swizzle) -> Vec<u32> {
    (0..calls(case))
        .flat_map(|j| (0..32).map(move |l| lane_addr(case, y, j, l)))
        .collect()
}

fn tag(j: u32, lane: u32, q: u32, e: u32) -> u16 {
    (1 + 2 * (4 * (32 * j + lane) + q) + e) as u16
}

/// Source registers, `[j][lane][q]`, each the two elements' tags.
pub fn sources(case: &Case) -> Vec<u32> {
    let mut out = Vec::new();
    for j in 0..calls(case) {
        for l in 0..32 {
            for q in 0..4 {
                out.push(tag(j, l, q, 0) as u32 | (tag(j, l, q, 1) as u32) << 16);
            }
        }
    }
    out
}

/// Box element (row, col) a slot's element belongs to under the documented fragment.
fn box_coord(v: &MatrixVariant, j: u32, lane: u32, q: u32, e: u32) -> (u32, u32) {
    let (m, r, c) = documented_coord(
        v,
        Slot {
            lane,
            reg: q,
            elem: e,
        },
    );
    (8 * (m % 2) + r, 8 * (2 * j + m / 2) + c)
}

/// The tag each box element holds when the path writes a row-major tile.
pub fn expected(case: &Case, v: &MatrixVariant) -> Vec<u16> {
    let mut out = vec![0u16; case.box_elems()];
    for j in 0..calls(case) {
        for l in 0..32 {
            for q in 0..4 {
                for e in 0..2 {
                    let (r, c) = box_coord(v, j, l, q, e);
                    out[(r * case.box_cols + c) as usize] = tag(j, l, q, e);
                }
            }
        }
    }
    out
}

/// The shared region (box and guard) the documented `stmatrix` leaves, from `addrs` and the
/// source registers `src`.
pub fn documented_smem(case: &Case, v: &MatrixVariant, addrs: &[u32], src: &[u32]) -> Vec<u8> {
    let mut smem = vec![0u8; case.region_bytes() as usize];
    for j in 0..calls(case) {
        for l in 0..32 {
            for q in 0..4 {
                for e in 0..2 {
                    let (m, r, c) = documented_coord(
                        v,
                        Slot {
                            lane: l,
                            reg: q,
                            elem: e,
                        },
                    );
                    let at = addrs[(32 * j + documented_address_lane(m, r)) as usize] + 2 * c;
                    let at = at as usize;
                    let word = src
                        .get((4 * (32 * j + l) + q) as usize)
                        .copied()
                        .unwrap_or(0);
                    let value = crate::movement::half(word, e);
                    if at + 2 <= smem.len() {
                        smem[at..at + 2].copy_from_slice(&value.to_le_bytes());
                    }
                }
            }
        }
    }
    smem
}

/// The global tensor the documented `stmatrix` and the documented store leave.
pub fn emulate(case: &Case, v: &MatrixVariant, addrs: &[u32], src: &[u32]) -> Vec<u8> {
    let x = Experiment {
        global: vec![0; case.global_bytes()],
        smem: documented_smem(case, v, addrs, src),
    };
    apply(case, &super::model::documented(case), &x).global
}

/// The tags of the box read out of a global tensor.
pub fn box_tags(case: &Case, global: &[u8]) -> Vec<u16> {
    (0..case.box_rows)
        .flat_map(|r| (0..case.box_cols).map(move |c| (r, c)))
        .map(|(r, c)| {
            let g = case.box_global_byte(r, c);
            global
                .get(g..g + 2)
                .map_or(0, |b| u16::from_le_bytes([b[0], b[1]]))
        })
        .collect()
}

/// One pairing of tensor-map swizzle and address swizzle.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PathResult {
    pub tma_swizzle: Swizzle,
    pub address_swizzle: Swizzle,
    /// The store case (box) the pairing ran.
    pub case: String,
    pub elements: usize,
    /// Box elements holding another slot's element than the row-major tile's.
    pub mismatches: usize,
    /// Up to 8: (row, col, expected tag, got tag).
    pub first: Vec<(u32, u32, u16, u16)>,
}

/// `stmatrix-store.json`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct StsmRecord {
    pub schema: String,
    pub stmatrix: String,
    pub store: String,
    pub backend: BackendKind,
    pub provenance: Provenance,
    pub results: Vec<PathResult>,
    pub wall_s: f64,
}

/// Compare a box's tags with the row-major tile's.
pub fn compare(case: &Case, x: Swizzle, y: Swizzle, want: &[u16], got: &[u16]) -> PathResult {
    let mut first = Vec::new();
    let mut n = 0;
    for (k, (&w, &g)) in want.iter().zip(got).enumerate() {
        if w != g {
            n += 1;
            if first.len() < 8 {
                let k = k as u32;
                first.push((k / case.box_cols, k % case.box_cols, w, g));
            }
        }
    }
    PathResult {
        tma_swizzle: x,
        address_swizzle: y,
        case: case.id(),
        elements: want.len(),
        mismatches: n,
        first,
    }
}

/// Run every pairing on `backend`.
pub fn run(backend: &dyn TmaBackend) -> Result<StsmRecord> {
    let t0 = std::time::Instant::now();
    let v = stsm()?;
    let mut results = Vec::new();
    for x in Swizzle::ALL {
        let case = store_case(x);
        backend.check_supported(&case)?;
        let want = expected(&case, &v);
        for y in Swizzle::ALL {
            let addrs = addresses(&case, y);
            let global = backend.run_stsm(&case, &addrs, &sources(&case))?;
            results.push(compare(&case, x, y, &want, &box_tags(&case, &global)));
        }
    }
    let info = backend.info().clone();
    Ok(StsmRecord {
        schema: SCHEMA.into(),
        stmatrix: v.opcode(),
        store: super::map::instruction(Dir::Store).into(),
        backend: info.backend,
        provenance: Provenance::new(
            &info,
            super::kernel::stsm_kernel(&store_case(Swizzle::B128), &v),
        ),
        results,
        wall_s: t0.elapsed().as_secs_f64(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tma::model::{TmaEmulator, documented_byte};

    #[test]
    fn the_matching_address_swizzle_gives_a_row_major_tile() {
        let rec = run(&TmaEmulator::new()).unwrap();
        assert_eq!(rec.results.len(), 16);
        for r in &rec.results {
            assert_eq!(
                r.mismatches == 0,
                r.tma_swizzle == r.address_swizzle,
                "TMA {} address {}: {} of {}",
                r.tma_swizzle,
                r.address_swizzle,
                r.mismatches,
                r.elements
            );
        }
    }

    #[test]
    fn lanes_name_rows_and_chunks() {
        let c = store_case(Swizzle::B128);
        assert_eq!(calls(&c), 4);
        // Lane 9: matrix 1 (rows 8..15), row 9, chunk 2j; under 128B row 9 moves chunk 0 to 1.
        assert_eq!(lane_addr(&c, Swizzle::None, 0, 9), 9 * 128);
        assert_eq!(lane_addr(&c, Swizzle::B128, 0, 9), 9 * 128 + 16);
        assert_eq!(lane_addr(&c, Swizzle::B128, 1, 17), 128 + (3 ^ 1) * 16);
        assert_eq!(documented_byte(&c, 9, 0), 9 * 128 + 16);
        assert_eq!(calls(&store_case(Swizzle::B32)), 1);
    }
}
