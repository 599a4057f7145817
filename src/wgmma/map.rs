//! The records wgmma probes write: register lane maps (`fp4probe.wgmma-lanemap/1`, one per
//! variant, CSV `operand,lane,reg,elem,row,col` with `lane` the thread 0..127 of the
//! warpgroup) and shared-memory layouts (`fp4probe.wgmma-smem/1`, one per element size,
//! major-ness and swizzle, CSV `operand,swizzle,major,byte,row,col`; b1 adds `bit` after
//! `byte`).

use super::WgVariant;
use super::probe::{Setting, WgLayout, WgOutcome, WgRaw, Work};
use super::smem::{SmemFit, SweepPoint};
use crate::device::BackendKind;
use crate::outfile::Outputs;
use crate::probe::fragment::Validation;
use crate::provenance::Provenance;
use anyhow::Result;
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};

pub const LANEMAP_SCHEMA: &str = "fp4probe.wgmma-lanemap/1";
pub const SMEM_SCHEMA: &str = "fp4probe.wgmma-smem/1";
pub const LANEMAP_CSV_HEADER: &str = "operand,lane,reg,elem,row,col";
pub const SMEM_CSV_HEADER: &str = "operand,swizzle,major,byte,row,col";
pub const SMEM_B1_CSV_HEADER: &str = "operand,swizzle,major,byte,bit,row,col";

pub const CONVENTION: &str = "D rows/columns pinned to the documented wgmma accumulator layout \
where the observed partition agrees (first appearance otherwise); A rows and B columns follow \
from D; k numbered in the documented order of row 0's A elements where the documentation places \
them, else in position order. Shared-memory bytes are offsets from the descriptor's start \
address.";

/// Passed (inferred and validated) or failed, as in the mma.sync lane maps.
pub use crate::layout::lanemap::Status;

/// A register operand's slots: `[thread, reg, elem, row, col]` in slot order.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RegMap {
    pub operand: String,
    pub regs: u32,
    pub elems_per_reg: u32,
    pub slots: Vec<[u32; 5]>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Timing {
    pub wall_s: f64,
    pub work: Work,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct WgLaneMap {
    pub schema: String,
    pub variant: String,
    pub instruction: String,
    pub backend: BackendKind,
    pub status: Status,
    pub convention: String,
    pub provenance: Provenance,
    /// The shared-memory arrangement of A (for `ss`) and B during the probe.
    pub setting: Setting,
    /// D, C, and A for `rs`.
    pub registers: Vec<RegMap>,
    /// Which byte fed which element under `setting`: A (for `ss`) and B, `[byte, bit, row, col]`.
    pub smem_a: Option<Vec<[i64; 4]>>,
    pub smem_b: Vec<[i64; 4]>,
    /// The documented layouts' slots that the measurement places elsewhere (0: identical).
    pub documented_mismatches: Option<usize>,
    pub validation: Option<Validation>,
    pub failure: Option<String>,
    pub raw: Option<WgRaw>,
    pub timing: Timing,
}

fn reg_map(op: &str, f: &super::RegFrag, coords: &[(u32, u32)]) -> RegMap {
    RegMap {
        operand: op.into(),
        regs: f.regs,
        elems_per_reg: f.elems_per_reg,
        slots: coords
            .iter()
            .enumerate()
            .map(|(i, &(r, c))| {
                let (t, reg, e) = f.slot(i);
                [t, reg, e, r, c]
            })
            .collect(),
    }
}

fn smem_rows(e: &[super::probe::SmemEntry]) -> Vec<[i64; 4]> {
    e.iter()
        .map(|x| [x.byte, x.bit as i64, x.row as i64, x.col as i64])
        .collect()
}

impl WgLaneMap {
    pub fn new(v: &WgVariant, setting: &Setting, out: &WgOutcome, provenance: Provenance) -> Self {
        let passed = out.layout.is_ok() && out.validation.as_ref().is_some_and(|x| x.passed());
        let (registers, smem_a, smem_b, mismatches) = match &out.layout {
            Ok(l) => (
                Self::registers(v, l),
                l.a_smem.as_deref().map(smem_rows),
                smem_rows(&l.b_smem),
                Some(documented_mismatches(v, l)),
            ),
            Err(_) => (Vec::new(), None, Vec::new(), None),
        };
        WgLaneMap {
            schema: LANEMAP_SCHEMA.into(),
            variant: v.id(),
            instruction: v.opcode(),
            backend: provenance.backend,
            status: Status::of(passed),
            convention: CONVENTION.into(),
            provenance,
            setting: *setting,
            registers,
            smem_a,
            smem_b,
            documented_mismatches: mismatches,
            validation: out.validation.clone(),
            failure: out.layout.as_ref().err().cloned(),
            raw: (!passed).then(|| out.raw.clone()),
            timing: Timing {
                wall_s: out.wall_s,
                work: out.work,
            },
        }
    }

    fn registers(v: &WgVariant, l: &WgLayout) -> Vec<RegMap> {
        let mut out = vec![
            reg_map("D", &v.d_frag(), &l.d),
            reg_map("C", &v.d_frag(), &l.c),
        ];
        if let Some(a) = &l.a_regs {
            out.insert(0, reg_map("A", &v.a_frag(), a));
        }
        out
    }

    pub fn to_csv(&self) -> Result<String> {
        let mut w = csv::Writer::from_writer(Vec::new());
        w.write_record(LANEMAP_CSV_HEADER.split(','))?;
        for m in &self.registers {
            for s in &m.slots {
                let mut rec = vec![m.operand.clone()];
                rec.extend(s.iter().map(u32::to_string));
                w.write_record(&rec)?;
            }
        }
        Ok(String::from_utf8(w.into_inner()?)?)
    }

    /// `<dir>/<id>.json` and `.csv`.
    pub fn write(&self, dir: &Path, out: &Outputs) -> Result<PathBuf> {
        let csv = (!self.registers.is_empty())
            .then(|| self.to_csv())
            .transpose()?;
        out.write_result(
            dir,
            &self.variant,
            &(crate::jsonfmt::to_compact_json(self) + "\n"),
            csv.as_deref().map(|t| (LANEMAP_CSV_HEADER, t)),
            self.backend == BackendKind::Emulator,
        )
    }
}

/// Slots whose measured coordinates differ from the documented layout's.
fn documented_mismatches(v: &WgVariant, l: &WgLayout) -> usize {
    let fd = v.d_frag();
    let mut n = (0..fd.slots())
        .filter(|&i| l.d[i] != super::model::d_coord(&fd, i))
        .count();
    if let Some(a) = &l.a_regs {
        let fa = v.a_frag();
        n += (0..fa.slots())
            .filter(|&i| a[i] != super::model::a_reg_coord(&fa, i))
            .count();
    }
    n
}

/// One shared-memory study: an element size, a major-ness and a swizzle mode, measured under
/// the packed setting and the sweep points.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct WgSmemMap {
    pub schema: String,
    /// The variant whose A and B tiles were read.
    pub variant: String,
    pub elem_bits: u32,
    pub swizzle: super::desc::Swizzle,
    pub major: super::desc::Major,
    pub backend: BackendKind,
    pub status: Status,
    pub provenance: Provenance,
    /// The packed setting's maps: `[byte, bit, row, col]` from the descriptor's start; A's
    /// (row, col) is (m, k), B's is (k, n).
    pub a: Vec<[i64; 4]>,
    pub b: Vec<[i64; 4]>,
    pub a_fit: Option<SmemFit>,
    pub b_fit: Option<SmemFit>,
    /// Every setting of the sweep, the packed one first.
    pub sweep: Vec<SweepPoint>,
    pub timing: Timing,
}

/// File stem of the study of `bits`-bit elements under `major` and `swizzle`.
pub fn smem_stem(bits: u32, major: super::desc::Major, swizzle: super::desc::Swizzle) -> String {
    format!("smem.{bits}bit.{}.{}", major.name(), swizzle.name())
}

/// CSV header of a study of `bits`-bit elements (b1 adds the bit within the byte).
pub fn smem_csv_header(bits: u32) -> &'static str {
    if bits < 8 {
        SMEM_B1_CSV_HEADER
    } else {
        SMEM_CSV_HEADER
    }
}

impl WgSmemMap {
    pub fn stem(&self) -> String {
        smem_stem(self.elem_bits, self.major, self.swizzle)
    }

    pub fn to_csv(&self) -> Result<String> {
        let b1 = self.elem_bits < 8;
        let mut w = csv::Writer::from_writer(Vec::new());
        let header = if b1 {
            SMEM_B1_CSV_HEADER
        } else {
            SMEM_CSV_HEADER
        };
        w.write_record(header.split(','))?;
        for (op, rows) in [("A", &self.a), ("B", &self.b)] {
            for &[byte, bit, row, col] in rows {
                let mut rec = vec![
                    op.to_string(),
                    self.swizzle.name().to_string(),
                    self.major.name().to_string(),
                    byte.to_string(),
                ];
                if b1 {
                    rec.push(bit.to_string());
                }
                rec.extend([row.to_string(), col.to_string()]);
                w.write_record(&rec)?;
            }
        }
        Ok(String::from_utf8(w.into_inner()?)?)
    }

    pub fn write(&self, dir: &Path, out: &Outputs) -> Result<PathBuf> {
        let header = smem_csv_header(self.elem_bits);
        let csv = self.to_csv()?;
        out.write_result(
            dir,
            &self.stem(),
            &(crate::jsonfmt::to_compact_json(self) + "\n"),
            Some((header, &csv)),
            self.backend == BackendKind::Emulator,
        )
    }

    /// Build from the sweep's points, the packed one (first) giving the maps.
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        v: &WgVariant,
        swizzle: super::desc::Swizzle,
        major: super::desc::Major,
        packed: &WgOutcome,
        sweep: Vec<SweepPoint>,
        provenance: Provenance,
        wall_s: f64,
        work: Work,
    ) -> Self {
        let (a, b) = match &packed.layout {
            Ok(l) => (
                l.a_smem.as_deref().map(smem_rows).unwrap_or_default(),
                smem_rows(&l.b_smem),
            ),
            Err(_) => (Vec::new(), Vec::new()),
        };
        let passed = sweep.first().is_some_and(|p| p.passed);
        WgSmemMap {
            schema: SMEM_SCHEMA.into(),
            variant: v.id(),
            elem_bits: v.elem_bits(),
            swizzle,
            major,
            backend: provenance.backend,
            status: Status::of(passed),
            provenance,
            a,
            b,
            a_fit: sweep.first().and_then(|p| p.a_fit.clone()),
            b_fit: sweep.first().and_then(|p| p.b_fit.clone()),
            sweep,
            timing: Timing { wall_s, work },
        }
    }
}
