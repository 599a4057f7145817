//! The record a data-movement probe writes: `fp4probe.matrix-map/1`, one per variant
//! (`<id>.json`, and `<id>.csv` with one row per register slot:
//! `lane,reg,elem,matrix,row,col,from_lane,from_elem`).
//!
//! A slot's `from_lane`/`from_elem` is what was measured (its route): for `ldmatrix` and
//! `stmatrix` the lane whose address names the shared row the element comes from or goes to,
//! and the 16-bit element within that row; for `movmatrix` the source register slot's lane and
//! element. `matrix`, `row` and `col` follow from the routes under [`CONVENTION`].

use super::emulator::{documented_address_lane, documented_coord};
use super::probe::{Outcome, Validation};
use super::{ELEMS_PER_REG, LANES, Observed, Route, Slot, route_regs, stacked_rows};
use crate::device::BackendKind;
use crate::isa::Operand;
use crate::isa::matrix::{MatrixOp, MatrixVariant};
use crate::layout::fit::fit_slots;
use crate::layout::{Coord, SlotSpace};
use crate::outfile::Outputs;
use crate::provenance::Provenance;
use anyhow::{Context, Result, bail};
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};

pub const SCHEMA: &str = "fp4probe.matrix-map/1";
pub const CSV_HEADER: &str = "lane,reg,elem,matrix,row,col,from_lane,from_elem";

pub const CONVENTION: &str = "ldmatrix/stmatrix: matrix i is the one register i of every lane \
holds; its rows are numbered in the order of the lanes whose addresses name them; col is the \
16-bit element within the 16-byte row. movmatrix: (row, col) is the source matrix's element, the \
source held as lane l element e = (l/4, 2*(l%4)+e), the fragment ldmatrix.m8n8.x1.b16 loads. \
Closed forms use the stacked row 8*matrix + row.";

pub use crate::layout::lanemap::Status;

/// The rows one lane's address names.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct AddressRow {
    pub lane: u32,
    pub matrix: u32,
    pub row: u32,
}

/// Closed forms of the map, fitted (bit-linear in lane, reg and e) rather than assumed.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Forms {
    /// Stacked row `8·matrix + row` of slot (lane, reg, e); `None`: not bit-linear.
    pub row: Option<String>,
    pub col: Option<String>,
    /// CuTe thread-value layout (lane, 2·reg + e) → stacked row + rows·col.
    pub cute: Option<String>,
    /// Stacked row whose address lane `lane` gives (ldmatrix/stmatrix, over the lanes used).
    pub address_row: Option<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub notes: Vec<String>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Timing {
    pub wall_s: f64,
    pub experiments: usize,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct MatrixMap {
    pub schema: String,
    pub variant: String,
    pub instruction: String,
    pub op: MatrixOp,
    pub num: u32,
    pub trans: bool,
    /// 32-bit registers per lane and 16-bit elements per register.
    pub regs: u32,
    pub elems_per_reg: u32,
    pub backend: BackendKind,
    pub status: Status,
    pub convention: String,
    pub provenance: Provenance,
    /// ldmatrix/stmatrix: each lane whose address is used, and the row it names.
    pub addresses: Vec<AddressRow>,
    /// ldmatrix/stmatrix: lanes whose addresses the instruction does not use.
    pub unused_address_lanes: Vec<u32>,
    /// `[lane, reg, elem, matrix, row, col, from_lane, from_elem]` in slot order.
    pub slots: Vec<[u32; 8]>,
    pub forms: Option<Forms>,
    /// Slots whose (matrix, row, col) differ from the PTX ISA's description, and address lanes
    /// whose row does (0: identical).
    pub documented_mismatches: Option<usize>,
    pub documented_address_mismatches: Option<usize>,
    pub validation: Option<Validation>,
    pub failure: Option<String>,
    /// The tag experiment's result, kept when the probe failed.
    pub raw: Option<Observed>,
    pub timing: Timing,
}

/// Coordinates that follow from measured routes.
#[derive(Debug)]
pub struct Derived {
    /// Per slot: (matrix, row, col).
    pub coords: Vec<(u32, u32, u32)>,
    pub addresses: Vec<AddressRow>,
    pub unused: Vec<u32>,
}

/// Matrix coordinates of `routes` under [`CONVENTION`]; an error when they are not those of a
/// matrix move (a lane's row split over registers, a matrix without its rows, an element
/// reached twice).
pub fn derive(v: &MatrixVariant, routes: &[Route]) -> Result<Derived, String> {
    let regs = route_regs(v);
    let slot = |i: usize| Slot::of(i, regs);
    let mut addresses = Vec::new();
    let mut unused = Vec::new();
    let coords: Vec<(u32, u32, u32)> = if v.op == MatrixOp::Movmatrix {
        routes
            .iter()
            .map(|r| (0, r.lane / 4, 2 * (r.lane % 4) + r.elem))
            .collect()
    } else {
        let mut reg_of: Vec<Option<u32>> = vec![None; LANES as usize];
        for (i, r) in routes.iter().enumerate() {
            let reg = slot(i).reg;
            match reg_of[r.lane as usize] {
                Some(j) if j != reg => {
                    return Err(format!(
                        "the row at lane {}'s address goes to registers {j} and {reg}",
                        r.lane
                    ));
                }
                _ => reg_of[r.lane as usize] = Some(reg),
            }
        }
        let mut row_of = vec![0u32; LANES as usize];
        for m in 0..v.num {
            let lanes: Vec<u32> = (0..LANES)
                .filter(|&l| reg_of[l as usize] == Some(m))
                .collect();
            if lanes.len() != v.shape.rows as usize {
                return Err(format!(
                    "matrix {m} (register {m}) has rows from {} lanes' addresses, not {}",
                    lanes.len(),
                    v.shape.rows
                ));
            }
            for (row, &l) in lanes.iter().enumerate() {
                row_of[l as usize] = row as u32;
            }
        }
        for l in 0..LANES {
            match reg_of[l as usize] {
                Some(m) => addresses.push(AddressRow {
                    lane: l,
                    matrix: m,
                    row: row_of[l as usize],
                }),
                None => unused.push(l),
            }
        }
        routes
            .iter()
            .map(|r| {
                let l = r.lane as usize;
                (reg_of[l].unwrap_or(0), row_of[l], r.elem)
            })
            .collect()
    };
    let mut seen = std::collections::HashSet::new();
    for (i, c) in coords.iter().enumerate() {
        if c.2 >= v.shape.cols || !seen.insert(*c) {
            let s = slot(i);
            return Err(format!(
                "lane {} reg {} elem {} reaches matrix {} ({}, {}), out of range or reached twice",
                s.lane, s.reg, s.elem, c.0, c.1, c.2
            ));
        }
    }
    Ok(Derived {
        coords,
        addresses,
        unused,
    })
}

/// The closed forms of `d`, fitted.
pub fn fit(v: &MatrixVariant, d: &Derived) -> Forms {
    let rows = stacked_rows(v);
    let space = SlotSpace {
        regs: route_regs(v),
        elems_per_reg: ELEMS_PER_REG,
    };
    let map: Vec<Coord> = d
        .coords
        .iter()
        .map(|&(m, r, c)| Coord {
            row: m * v.shape.rows + r,
            col: c,
        })
        .collect();
    let cf = fit_slots(Operand::C, space, LANES, (rows, v.shape.cols), &map);
    let mut notes = cf.notes;
    let mut address_row = None;
    if v.op != MatrixOp::Movmatrix {
        let used = d.addresses.len() as u32;
        let prefix = d
            .addresses
            .iter()
            .enumerate()
            .all(|(i, a)| a.lane == i as u32);
        if prefix {
            let lanes: Vec<Coord> = d
                .addresses
                .iter()
                .map(|a| Coord {
                    row: a.matrix * v.shape.rows + a.row,
                    col: 0,
                })
                .collect();
            let one = SlotSpace {
                regs: 1,
                elems_per_reg: 1,
            };
            let af = fit_slots(Operand::C, one, used, (rows, 1), &lanes);
            address_row = af.row;
            notes.extend(af.notes.into_iter().map(|n| format!("address: {n}")));
        } else {
            notes.push("address: the lanes used are not lanes 0.. in order".into());
        }
    }
    Forms {
        row: cf.row,
        col: cf.col,
        cute: cf.cute,
        address_row,
        notes,
    }
}

impl MatrixMap {
    pub fn new(v: &MatrixVariant, out: &Outcome, provenance: Provenance) -> Self {
        let derived = out
            .routes
            .as_ref()
            .map_err(Clone::clone)
            .and_then(|r| derive(v, r).map(|d| (r, d)));
        let passed = out.passed() && derived.is_ok();
        let regs = route_regs(v);
        let (slots, addresses, unused, forms, mism, addr_mism) = match &derived {
            Ok((routes, d)) => {
                let slots = routes
                    .iter()
                    .zip(&d.coords)
                    .enumerate()
                    .map(|(i, (r, &(m, row, c)))| {
                        let s = Slot::of(i, regs);
                        [s.lane, s.reg, s.elem, m, row, c, r.lane, r.elem]
                    })
                    .collect();
                let mism = d
                    .coords
                    .iter()
                    .enumerate()
                    .filter(|(i, c)| **c != documented_coord(v, Slot::of(*i, regs)))
                    .count();
                let addr_mism = d
                    .addresses
                    .iter()
                    .filter(|a| a.lane != documented_address_lane(a.matrix, a.row))
                    .count();
                let addr = (v.op != MatrixOp::Movmatrix).then_some(addr_mism);
                (
                    slots,
                    d.addresses.clone(),
                    d.unused.clone(),
                    Some(fit(v, d)),
                    Some(mism),
                    addr,
                )
            }
            Err(_) => (Vec::new(), Vec::new(), Vec::new(), None, None, None),
        };
        MatrixMap {
            schema: SCHEMA.into(),
            variant: v.id(),
            instruction: v.opcode(),
            op: v.op,
            num: v.num,
            trans: v.trans,
            regs,
            elems_per_reg: ELEMS_PER_REG,
            backend: provenance.backend,
            status: Status::of(passed),
            convention: CONVENTION.into(),
            provenance,
            addresses,
            unused_address_lanes: unused,
            slots,
            forms,
            documented_mismatches: mism,
            documented_address_mismatches: addr_mism,
            validation: out.validation.clone(),
            failure: derived.err(),
            raw: (!passed).then(|| out.raw.clone()),
            timing: Timing {
                wall_s: out.wall_s,
                experiments: out.experiments,
            },
        }
    }

    pub fn variant(&self) -> Result<MatrixVariant> {
        crate::isa::matrix::find(&self.variant)
            .with_context(|| format!("variant '{}' is not in the catalog", self.variant))
    }

    /// Read a map and check that its slots are those of its variant.
    pub fn load(path: &Path) -> Result<Self> {
        let text = std::fs::read_to_string(path)
            .with_context(|| format!("cannot read {}", path.display()))?;
        let map: MatrixMap = serde_json::from_str(&text)
            .with_context(|| format!("{}: malformed data-movement map", path.display()))?;
        if map.schema != SCHEMA {
            bail!(
                "{}: schema '{}' is not '{SCHEMA}'",
                path.display(),
                map.schema
            );
        }
        let v = map.variant().with_context(|| path.display().to_string())?;
        if map.status == Status::Passed {
            let routes: Vec<Route> = map
                .slots
                .iter()
                .map(|s| Route {
                    lane: s[6],
                    elem: s[7],
                })
                .collect();
            let n = (LANES * route_regs(&v) * ELEMS_PER_REG) as usize;
            let d = (routes.len() == n)
                .then(|| derive(&v, &routes).ok())
                .flatten()
                .with_context(|| format!("{}: slots are not a matrix move", path.display()))?;
            let agree = map.slots.iter().enumerate().all(|(i, s)| {
                let sl = Slot::of(i, route_regs(&v));
                let c = d.coords[i];
                [s[0], s[1], s[2], s[3], s[4], s[5]] == [sl.lane, sl.reg, sl.elem, c.0, c.1, c.2]
            });
            if !agree {
                bail!(
                    "{}: slots disagree with the coordinates their routes give",
                    path.display()
                );
            }
        }
        Ok(map)
    }

    /// The measured routes, one per slot.
    pub fn routes(&self) -> Vec<Route> {
        self.slots
            .iter()
            .map(|s| Route {
                lane: s[6],
                elem: s[7],
            })
            .collect()
    }

    pub fn to_csv(&self) -> Result<String> {
        let mut w = csv::Writer::from_writer(Vec::new());
        w.write_record(CSV_HEADER.split(','))?;
        for s in &self.slots {
            w.write_record(s.iter().map(u32::to_string))?;
        }
        Ok(String::from_utf8(w.into_inner()?)?)
    }

    /// `<dir>/<id>.json` and `.csv`.
    pub fn write(&self, dir: &Path, out: &Outputs) -> Result<PathBuf> {
        let csv = self.to_csv()?;
        out.write_result(
            dir,
            &self.variant,
            &(crate::jsonfmt::to_compact_json(self) + "\n"),
            Some((CSV_HEADER, &csv)),
            self.backend == BackendKind::Emulator,
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::movement::emulator::MoveEmulator;
    use crate::movement::probe::probe;
    use crate::movement::probed_catalog;

    fn emulated(id: &str) -> MatrixMap {
        let v = crate::isa::matrix::find(id).unwrap();
        let emu = MoveEmulator::new();
        let out = probe(&emu, &v, 1).unwrap();
        let prov = Provenance::new(
            crate::movement::backend::MoveBackend::info(&emu),
            "ptx".into(),
        );
        MatrixMap::new(&v, &out, prov)
    }

    #[test]
    fn documented_maps_fit_their_closed_forms() {
        let m = emulated("ldmatrix.m8n8.x4.b16");
        assert_eq!(m.status, Status::Passed);
        let f = m.forms.as_ref().unwrap();
        assert_eq!(f.row.as_deref(), Some("g + 8·reg"));
        assert_eq!(f.col.as_deref(), Some("2·t + e"));
        assert_eq!(f.address_row.as_deref(), Some("lane"));
        assert_eq!(m.documented_mismatches, Some(0));
        assert_eq!(m.documented_address_mismatches, Some(0));
        let t = emulated("stmatrix.m8n8.x2.trans.b16");
        let f = t.forms.as_ref().unwrap();
        assert_eq!(f.row.as_deref(), Some("2·t + e + 8·reg"));
        assert_eq!(f.col.as_deref(), Some("g"));
        assert_eq!(t.unused_address_lanes, (16..32).collect::<Vec<_>>());
        let mv = emulated("movmatrix.m8n8.trans.b16");
        assert_eq!(mv.forms.as_ref().unwrap().row.as_deref(), Some("2·t + e"));
        assert_eq!(mv.documented_address_mismatches, None);
    }

    #[test]
    fn maps_round_trip_through_files() {
        let dir = crate::tempdir::TempDir::new("matrix-map").unwrap();
        for v in probed_catalog() {
            let m = emulated(&v.id());
            assert_eq!(m.status, Status::Passed, "{}", v.id());
            let path = m.write(dir.root(), &Outputs::new(false)).unwrap();
            let back = MatrixMap::load(&path).unwrap();
            assert_eq!(back, m);
            let csv = std::fs::read_to_string(path.with_extension("csv")).unwrap();
            assert_eq!(csv.lines().count(), 1 + m.slots.len());
        }
    }

    #[test]
    fn routes_that_are_no_matrix_move_are_refused() {
        let v = crate::isa::matrix::find("ldmatrix.m8n8.x2.b16").unwrap();
        let mut r = crate::movement::emulator::documented(&v);
        // Lane 0's row also feeds register 1.
        let i = Slot {
            lane: 0,
            reg: 1,
            elem: 0,
        }
        .index(2);
        r[i].lane = 0;
        assert!(derive(&v, &r).unwrap_err().contains("registers 0 and 1"));
    }
}
