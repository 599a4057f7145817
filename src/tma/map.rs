//! The record a TMA probe writes: `fp4probe.tma-map/1`, one per case (`<id>.json`, and
//! `<id>.csv` with one row per box element: `row,col,smem_byte`).
//!
//! `row` and `col` count from the box's first element (the global tensor's element
//! ([`super::ORIGIN`] row, chunk) is the box's (0, 0)); `smem_byte` is the element's first
//! shared byte from the box's shared address, which sits `smem_offset` bytes past a
//! 1024-byte-aligned base. The closed form is fitted ([`crate::wgmma::smem::fit`]: an
//! integer-linear function of the row and column bits under one of the XOR patterns), not
//! assumed.

use super::model::{Placement, documented};
use super::probe::{Outcome, Validation};
use super::{Case, Dir, Swizzle};
use crate::device::BackendKind;
use crate::layout::lanemap::Status;
use crate::outfile::Outputs;
use crate::provenance::Provenance;
use crate::wgmma::probe::SmemEntry;
use crate::wgmma::smem::{SmemFit, fit};
use anyhow::{Context, Result, bail};
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};

pub const SCHEMA: &str = "fp4probe.tma-map/1";
pub const CSV_HEADER: &str = "row,col,smem_byte";

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Timing {
    pub wall_s: f64,
    pub experiments: usize,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TmaMap {
    pub schema: String,
    pub case: String,
    pub instruction: String,
    pub direction: Dir,
    pub elem_bytes: u32,
    /// The tensor map's data type (`CU_TENSOR_MAP_DATA_TYPE_<this>`).
    pub data_type: String,
    pub swizzle: Swizzle,
    pub box_rows: u32,
    pub box_cols: u32,
    pub smem_offset: u32,
    /// Global tensor (rows, cols) and the box's first element in it.
    pub global_dims: [u32; 2],
    pub box_origin: [u32; 2],
    pub backend: BackendKind,
    pub status: Status,
    pub provenance: Provenance,
    /// Shared byte of each box element, row-major (empty when the probe failed).
    pub smem_byte: Vec<u32>,
    pub fit: Option<SmemFit>,
    /// Box elements whose byte differs from the documented swizzle's (0: identical).
    pub documented_mismatches: Option<usize>,
    pub validation: Option<Validation>,
    pub failure: Option<String>,
    /// The tag experiments' results (per plane), kept when the probe failed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub raw: Option<Vec<super::backend::Observed>>,
    pub timing: Timing,
}

/// The instruction a direction runs.
pub fn instruction(d: Dir) -> &'static str {
    match d {
        Dir::Load => "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes",
        Dir::Store => "cp.async.bulk.tensor.2d.global.shared::cta.bulk_group",
    }
}

/// The fitted closed form of `placement`.
pub fn fit_placement(case: &Case, placement: &[u32]) -> Option<SmemFit> {
    let entries: Vec<SmemEntry> = placement
        .iter()
        .enumerate()
        .map(|(k, &b)| SmemEntry {
            byte: b as i64,
            bit: 0,
            row: k as u32 / case.box_cols,
            col: k as u32 % case.box_cols,
        })
        .collect();
    fit(&entries, case.smem_offset)
}

impl TmaMap {
    pub fn new(case: &Case, out: &Outcome, provenance: Provenance) -> Self {
        let passed = out.passed();
        let (smem_byte, fitted, mism) = match &out.placement {
            Ok(p) => {
                let doc = documented(case);
                let mism = p.iter().zip(&doc).filter(|(a, b)| a != b).count();
                (p.clone(), fit_placement(case, p), Some(mism))
            }
            Err(_) => (Vec::new(), None, None),
        };
        let (gr, gc) = case.global_dims();
        let (r0, c0) = case.origin();
        TmaMap {
            schema: SCHEMA.into(),
            case: case.id(),
            instruction: instruction(case.dir).into(),
            direction: case.dir,
            elem_bytes: case.elem_bytes,
            data_type: case.data_type().into(),
            swizzle: case.swizzle,
            box_rows: case.box_rows,
            box_cols: case.box_cols,
            smem_offset: case.smem_offset,
            global_dims: [gr, gc],
            box_origin: [r0, c0],
            backend: provenance.backend,
            status: Status::of(passed),
            provenance,
            smem_byte,
            fit: fitted,
            documented_mismatches: mism,
            validation: out.validation.clone(),
            failure: out
                .placement
                .as_ref()
                .err()
                .cloned()
                .or_else(|| (!passed).then(|| "validation failed: see the checks".to_string())),
            raw: (!passed).then(|| out.raw.clone()),
            timing: Timing {
                wall_s: out.wall_s,
                experiments: out.experiments,
            },
        }
    }

    /// The case the map was measured for.
    pub fn case(&self) -> Result<Case> {
        self.case.parse()
    }

    pub fn placement(&self) -> &Placement {
        &self.smem_byte
    }

    /// Read a map and check that it is one of its case: every box element placed once, inside
    /// the box's bytes.
    pub fn load(path: &Path) -> Result<Self> {
        let text = std::fs::read_to_string(path)
            .with_context(|| format!("cannot read {}", path.display()))?;
        let map: TmaMap = serde_json::from_str(&text)
            .with_context(|| format!("{}: malformed TMA map", path.display()))?;
        if map.schema != SCHEMA {
            bail!(
                "{}: schema '{}' is not '{SCHEMA}'",
                path.display(),
                map.schema
            );
        }
        let case = map.case().with_context(|| path.display().to_string())?;
        if map.status == Status::Passed {
            let mut seen = std::collections::HashSet::new();
            let ok = map.smem_byte.len() == case.box_elems()
                && map.smem_byte.iter().all(|&b| {
                    b % case.elem_bytes == 0
                        && b + case.elem_bytes <= case.region_bytes()
                        && seen.insert(b)
                });
            if !ok {
                bail!(
                    "{}: smem_byte is not a placement of the {} box elements",
                    path.display(),
                    case.box_elems()
                );
            }
        }
        Ok(map)
    }

    pub fn to_csv(&self) -> Result<String> {
        let mut w = csv::Writer::from_writer(Vec::new());
        w.write_record(CSV_HEADER.split(','))?;
        for (k, b) in self.smem_byte.iter().enumerate() {
            let k = k as u32;
            w.write_record([
                (k / self.box_cols).to_string(),
                (k % self.box_cols).to_string(),
                b.to_string(),
            ])?;
        }
        Ok(String::from_utf8(w.into_inner()?)?)
    }

    /// `<dir>/<case>.json` and `.csv`.
    pub fn write(&self, dir: &Path, out: &Outputs) -> Result<PathBuf> {
        let csv = self.to_csv()?;
        out.write_result(
            dir,
            &self.case,
            &(crate::jsonfmt::to_compact_json(self) + "\n"),
            Some((CSV_HEADER, &csv)),
            self.backend == BackendKind::Emulator,
        )
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::tma::model::TmaEmulator;
    use crate::tma::probe::probe;

    pub(crate) fn emulated(id: &str) -> TmaMap {
        let c: Case = id.parse().unwrap();
        let emu = TmaEmulator::new();
        let out = probe(&emu, &c, 1).unwrap();
        let prov = Provenance::new(crate::tma::backend::TmaBackend::info(&emu), "ptx".into());
        TmaMap::new(&c, &out, prov)
    }

    #[test]
    fn documented_maps_fit_their_swizzle() {
        let m = emulated("load.u16.128B.16x64");
        assert_eq!(m.status, Status::Passed);
        assert_eq!(m.documented_mismatches, Some(0));
        let f = m.fit.as_ref().unwrap();
        assert_eq!(f.xor, Swizzle::B128);
        assert_eq!(f.formula, "byte = xor128B(start + 128·row + 2·col) - start");
        let m = emulated("store.u32.none.16x4");
        assert_eq!(m.fit.as_ref().unwrap().formula, "byte = 16·row + 4·col");
        let m = emulated("load.u8.128B.16x64");
        assert_eq!(
            m.fit.as_ref().unwrap().formula,
            "byte = xor128B(start + 64·row + 1·col) - start"
        );
    }

    #[test]
    fn maps_round_trip_through_files() {
        let dir = crate::tempdir::TempDir::new("tma-map").unwrap();
        for c in crate::tma::catalog().iter().take(6) {
            let m = emulated(&c.id());
            let path = m.write(dir.root(), &Outputs::new(false)).unwrap();
            let back = TmaMap::load(&path).unwrap();
            assert_eq!(back, m);
            let csv = std::fs::read_to_string(path.with_extension("csv")).unwrap();
            assert_eq!(csv.lines().count(), 1 + c.box_elems());
        }
    }
}
