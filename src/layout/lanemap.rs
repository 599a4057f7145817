//! The `LaneMap` record: a probed layout with provenance, validation and closed forms, as
//! versioned JSON, plus the one-row-per-slot CSV that any script can read.

use super::diff::DiffSummary;
use super::fit::{ClosedForm, fit};
use super::{Coord, Layout, SlotSpace};
use crate::device::BackendKind;
use crate::formats::ElemType;
use crate::isa::{BlockScale, Operand, Shape, Target, Variant};
use crate::probe::fragment::{RawObservations, Validation};
use crate::provenance::Provenance;
use anyhow::{Context, Result, bail};
use serde::{Deserialize, Serialize};
use std::path::Path;

pub const SCHEMA: &str = "fp4probe.lanemap/1";
pub const CSV_HEADER: &str = "operand,lane,reg,elem,row,col";

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Status {
    /// Inferred and both validations passed.
    Passed,
    /// Inference or validation failed; `failure` says why and `raw` keeps the observations.
    Failed,
}

impl Status {
    /// `Passed` where the probe's inference and validations passed, else `Failed`.
    pub fn of(passed: bool) -> Self {
        if passed {
            Status::Passed
        } else {
            Status::Failed
        }
    }
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Types {
    pub a: ElemType,
    pub b: ElemType,
    pub c: ElemType,
    pub d: ElemType,
    pub scale: Option<BlockScale>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct OperandMap {
    pub operand: Operand,
    pub elem: ElemType,
    pub rows: u32,
    pub cols: u32,
    pub regs: u32,
    pub elems_per_reg: u32,
    pub container_bits: u32,
    pub closed_form: ClosedForm,
    /// One entry per slot in (lane, reg, elem) order: [lane, reg, elem, row, col].
    pub slots: Vec<[u32; 5]>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Timing {
    /// Wall time of the whole probe, module load and JIT included.
    pub wall_s: f64,
    pub experiments: usize,
    pub launches: usize,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct LaneMap {
    pub schema: String,
    /// The catalog id, e.g. `m16n8k32.f32.e4m3.e4m3.f32`.
    pub variant: String,
    pub instruction: String,
    pub backend: BackendKind,
    pub status: Status,
    pub shape: Shape,
    pub types: Types,
    pub min_target: Target,
    pub convention: String,
    pub provenance: Provenance,
    pub operands: Vec<OperandMap>,
    pub validation: Option<Validation>,
    /// Against the PTX ISA's documented layout, under the same convention.
    pub documented_diff: Option<DiffSummary>,
    pub failure: Option<String>,
    /// Kept when the probe failed, so the observations can be inspected.
    pub raw: Option<RawObservations>,
    pub timing: Timing,
    /// `mma.sp`: the metadata map of every sparsity selector.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Option<super::meta::MetaRecord>,
}

impl LaneMap {
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        v: &Variant,
        layout: Option<&Layout>,
        provenance: Provenance,
        validation: Option<Validation>,
        documented_diff: Option<DiffSummary>,
        failure: Option<String>,
        raw: Option<RawObservations>,
        timing: Timing,
    ) -> Self {
        let passed = layout.is_some()
            && failure.is_none()
            && validation.as_ref().is_some_and(|x| x.passed());
        let operands = layout
            .map(|l| {
                Operand::ALL
                    .iter()
                    .map(|&op| {
                        let f = v.fragment(op);
                        let space = SlotSpace::of(&f);
                        let map = l.operand(op);
                        OperandMap {
                            operand: op,
                            elem: f.elem,
                            rows: f.rows,
                            cols: f.cols,
                            regs: f.regs,
                            elems_per_reg: f.elems_per_reg(),
                            container_bits: f.container_bits,
                            closed_form: fit(v, op, map),
                            slots: map
                                .iter()
                                .enumerate()
                                .map(|(i, c)| {
                                    let s = space.slot(i);
                                    [s.lane, s.reg, s.elem, c.row, c.col]
                                })
                                .collect(),
                        }
                    })
                    .collect()
            })
            .unwrap_or_default();
        LaneMap {
            schema: SCHEMA.into(),
            variant: v.id(),
            instruction: v.opcode(),
            backend: provenance.backend,
            status: Status::of(passed),
            shape: v.shape,
            types: Types {
                a: v.a,
                b: v.b,
                c: v.c,
                d: v.d,
                scale: v.scale,
            },
            min_target: v.min_target,
            convention: super::convention::CONVENTION.into(),
            provenance,
            operands,
            validation,
            documented_diff,
            failure,
            raw,
            timing,
            metadata: None,
        }
    }

    /// Attach a sparse variant's metadata maps; a selector the PTX ISA names that failed
    /// fails the map (the others ptxas takes are recorded as they came out).
    pub fn with_metadata(mut self, record: super::meta::MetaRecord) -> Self {
        if record.selectors.iter().any(|s| s.documented && !s.passed()) {
            self.status = Status::Failed;
            if self.failure.is_none() {
                self.failure = Some("a metadata map failed (see metadata.selectors)".into());
            }
        }
        self.metadata = Some(record);
        self
    }

    /// Read a map file; a malformed file is reported with its path, line and column, and a map
    /// that does not describe a valid layout says which operand and slot is wrong.
    pub fn load(path: &Path) -> Result<Self> {
        let text = std::fs::read_to_string(path)
            .with_context(|| format!("cannot read {}", path.display()))?;
        let map: LaneMap = serde_json::from_str(&text).map_err(|e| {
            anyhow::anyhow!(
                "{}:{}:{}: malformed lane map: {e}",
                path.display(),
                e.line(),
                e.column()
            )
        })?;
        if map.schema != SCHEMA {
            bail!(
                "{}: schema '{}' is not '{SCHEMA}'",
                path.display(),
                map.schema
            );
        }
        map.layout()
            .with_context(|| format!("{}: invalid lane map", path.display()))?;
        if let Some(meta) = &map.metadata {
            meta.check(&map.variant()?)
                .with_context(|| format!("{}: invalid metadata map", path.display()))?;
        }
        Ok(map)
    }

    pub fn variant(&self) -> Result<Variant> {
        crate::isa::find(&self.variant)
            .with_context(|| format!("variant '{}' is not in the catalog", self.variant))
    }

    /// The layout this map records, checked against the variant's register geometry.
    pub fn layout(&self) -> Result<Layout> {
        let v = self.variant()?;
        if self.operands.is_empty() {
            bail!(
                "map has no operands (status {:?}: {})",
                self.status,
                self.failure.as_deref().unwrap_or("no layout")
            );
        }
        let mut maps: Vec<Vec<Coord>> = Vec::new();
        for op in Operand::ALL {
            let om = self
                .operands
                .iter()
                .find(|o| o.operand == op)
                .with_context(|| format!("operand {} missing", op.name()))?;
            let space = SlotSpace::of(&v.fragment(op));
            if om.slots.len() != space.len() {
                bail!(
                    "operand {}: {} slots, expected {}",
                    op.name(),
                    om.slots.len(),
                    space.len()
                );
            }
            let mut coords = vec![Coord { row: 0, col: 0 }; space.len()];
            let mut seen = vec![false; space.len()];
            for (i, &[lane, reg, elem, row, col]) in om.slots.iter().enumerate() {
                if lane >= 32 || reg >= space.regs || elem >= space.elems_per_reg {
                    bail!(
                        "operand {} slot entry {i}: (lane {lane}, reg {reg}, elem {elem}) is outside the fragment",
                        op.name()
                    );
                }
                let idx = space.index(super::Slot { lane, reg, elem });
                if std::mem::replace(&mut seen[idx], true) {
                    bail!(
                        "operand {} slot entry {i}: (lane {lane}, reg {reg}, elem {elem}) appears twice",
                        op.name()
                    );
                }
                coords[idx] = Coord { row, col };
            }
            maps.push(coords);
        }
        let d = maps.pop().expect("D");
        let c = maps.pop().expect("C");
        let b = maps.pop().expect("B");
        let a = maps.pop().expect("A");
        let layout = Layout { a, b, c, d };
        layout.check_bijective(&v).map_err(anyhow::Error::msg)?;
        Ok(layout)
    }

    /// Pretty JSON with scalar arrays on one line (a slot is one line, not seven).
    pub fn to_json(&self) -> String {
        crate::jsonfmt::to_compact_json(self)
    }

    /// One row per slot: `operand,lane,reg,elem,row,col`; for `mma.sp` one row per metadata
    /// field after them: `E,lane,selector,bit,row,chunk·fields_per_chunk + index`.
    pub fn to_csv(&self) -> Result<String> {
        let mut w = csv::Writer::from_writer(Vec::new());
        w.write_record(CSV_HEADER.split(','))?;
        for om in &self.operands {
            for s in &om.slots {
                let mut rec = vec![om.operand.name().to_string()];
                rec.extend(s.iter().map(|x| x.to_string()));
                w.write_record(&rec)?;
            }
        }
        if let Some(meta) = &self.metadata {
            let per = 4 / meta.field_bits;
            for sel in &meta.selectors {
                for &[lane, bit, row, chunk, index] in &sel.fields {
                    let rec = [lane, sel.selector, bit, row, chunk * per + index];
                    let mut out = vec!["E".to_string()];
                    out.extend(rec.iter().map(|x| x.to_string()));
                    w.write_record(&out)?;
                }
            }
        }
        Ok(String::from_utf8(w.into_inner()?)?)
    }

    /// The file stem of `variant`'s map (`::` written `_`).
    pub fn stem_of(variant: &str) -> String {
        variant.replace("::", "_")
    }

    /// Write `<dir>/<stem>.json` and `<dir>/<stem>.csv` as `out` allows; returns the JSON path.
    pub fn write(&self, dir: &Path, out: &crate::outfile::Outputs) -> Result<std::path::PathBuf> {
        let csv = if self.operands.is_empty() {
            None
        } else {
            Some(self.to_csv()?)
        };
        out.write_result(
            dir,
            &Self::stem_of(&self.variant),
            &(self.to_json() + "\n"),
            csv.as_deref().map(|t| (CSV_HEADER, t)),
            self.backend == BackendKind::Emulator,
        )
    }
}
