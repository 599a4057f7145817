//! Metadata maps of `mma.sp`: under one sparsity selector, which lane's metadata register, at
//! which bits, holds the index of which kept element (row, chunk, first or second) of A.
//!
//! The documented model is fp4probe's reading of the PTX ISA's metadata figures ("Matrix
//! fragments for multiply-accumulate operation with sparse matrix A"): selector s reads lanes
//! 4g + s·T .. 4g + s·T + T - 1 of group g (T lanes a selector); lane 4g + s·T + j holds the
//! nibbles of chunks 4j .. 4j + 3 (16 bits) of row g in bits 15..0 and of row g + 8 in bits
//! 31..16. ptxas takes more selectors than the PTX ISA names for m16n8k32 f16 with f32
//! accumulators (four, not two); the model has no answer for the others, and the probe runs
//! them only when asked. The probe measures the hardware's map; the report shows the two side
//! by side.

use crate::isa::Variant;
use crate::isa::sparse::SparseGeom;
use crate::probe::fragment::Validation;
use anyhow::{Result, bail};
use serde::{Deserialize, Serialize};

/// One metadata field: `width` bits at `bit` of `lane`'s register hold index `index` (0: the
/// first kept position, 1: the second) of chunk `chunk` of dense row `row`. tf32 fields are the
/// whole 4-bit nibble (index 0).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct MetaField {
    pub lane: u32,
    pub bit: u32,
    pub row: u32,
    pub chunk: u32,
    pub index: u32,
}

/// The metadata part of a sparse variant's lane map: the geometry it is read in and one map per
/// sparsity selector.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct MetaRecord {
    /// Chunks in a row of the dense A, compressed elements per chunk, dense elements per
    /// position, positions per element (see `isa::sparse`).
    pub chunks: u32,
    pub kept: u32,
    pub pos_elems: u32,
    pub elem_positions: u32,
    /// Bits of one field: 2 (one index), or 4 for tf32 (a whole nibble).
    pub field_bits: u32,
    pub selectors: Vec<SelectorMap>,
}

/// The metadata map under one sparsity selector.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SelectorMap {
    pub selector: u32,
    /// Whether the PTX ISA names this selector; only those decide whether the map passed.
    #[serde(default = "yes")]
    pub documented: bool,
    /// Lanes whose metadata register this selector reads.
    pub lanes: Vec<u32>,
    /// One entry per field: [lane, bit, row, chunk, index].
    pub fields: Vec<[u32; 5]>,
    /// Validation of the lane maps and this map on identity and random 2:4 matrices.
    pub validation: Option<Validation>,
    /// Fields placed elsewhere than the documented model places them.
    pub documented_differ: Option<usize>,
    pub failure: Option<String>,
}

fn yes() -> bool {
    true
}

impl SelectorMap {
    pub fn new(
        v: &Variant,
        selector: u32,
        documented_selector: bool,
        fields: std::result::Result<&[MetaField], &str>,
        validation: Option<Validation>,
    ) -> Self {
        let (list, failure) = match fields {
            Ok(f) => (f.to_vec(), None),
            Err(e) => (Vec::new(), Some(e.to_string())),
        };
        let mut lanes: Vec<u32> = list.iter().map(|f| f.lane).collect();
        lanes.sort_unstable();
        lanes.dedup();
        let documented = if documented_selector {
            documented_meta(v, selector)
        } else {
            Vec::new()
        };
        SelectorMap {
            selector,
            documented: documented_selector,
            lanes,
            fields: list
                .iter()
                .map(|f| [f.lane, f.bit, f.row, f.chunk, f.index])
                .collect(),
            validation,
            documented_differ: (failure.is_none() && documented_selector)
                .then(|| list.iter().filter(|f| !documented.contains(f)).count()),
            failure,
        }
    }

    pub fn passed(&self) -> bool {
        self.failure.is_none() && self.validation.as_ref().is_some_and(|v| v.passed())
    }

    /// The fields as [`MetaField`]s.
    pub fn meta_fields(&self) -> Vec<MetaField> {
        self.fields
            .iter()
            .map(|&[lane, bit, row, chunk, index]| MetaField {
                lane,
                bit,
                row,
                chunk,
                index,
            })
            .collect()
    }
}

impl MetaRecord {
    pub fn new(v: &Variant, selectors: Vec<SelectorMap>) -> Self {
        let g = SparseGeom::of(v).expect("a sparse variant");
        MetaRecord {
            chunks: g.chunks,
            kept: g.kept,
            pos_elems: g.pos_elems,
            elem_positions: g.elem_positions,
            field_bits: field_bits(&g),
            selectors,
        }
    }

    /// Every selector's map is complete for `v` (a map that failed holds no fields).
    pub fn check(&self, v: &Variant) -> Result<()> {
        let g = SparseGeom::of(v).ok_or_else(|| anyhow::anyhow!("{} is not sparse", v.id()))?;
        if (self.chunks, self.kept, self.field_bits) != (g.chunks, g.kept, field_bits(&g)) {
            bail!("metadata geometry does not match {}", v.id());
        }
        for s in self.selectors.iter().filter(|s| s.failure.is_none()) {
            check_complete(v, &s.meta_fields())
                .map_err(|e| anyhow::anyhow!("selector {}: {e:#}", s.selector))?;
        }
        Ok(())
    }
}

/// Width of each field: 4 for tf32 (a field names a whole element), else 2.
pub fn field_bits(g: &SparseGeom) -> u32 {
    if g.elem_positions == 2 { 4 } else { 2 }
}

/// Fields per chunk: one for tf32, else two.
pub fn fields_per_chunk(g: &SparseGeom) -> u32 {
    4 / field_bits(g)
}

/// The documented model's map under `selector` (one the PTX ISA names).
pub fn documented_meta(v: &Variant, selector: u32) -> Vec<MetaField> {
    let g = SparseGeom::of(v).expect("a sparse variant");
    let m = v.shape.m;
    let threads = g.threads_per_selector(m);
    let w = field_bits(&g);
    let per = fields_per_chunk(&g);
    // Chunks one lane holds of each of its two rows: 16 bits of nibbles.
    let chunks_per_lane = 4;
    let mut out = Vec::new();
    for row in 0..m {
        let (group, half) = (row % 8, row / 8);
        for chunk in 0..g.chunks {
            for index in 0..per {
                let j = chunk / chunks_per_lane;
                out.push(MetaField {
                    lane: 4 * group + (selector * threads + j) % 4,
                    bit: 16 * half + 4 * (chunk % chunks_per_lane) + w * index,
                    row,
                    chunk,
                    index,
                });
            }
        }
    }
    out.sort();
    out
}

/// The map the emulator runs under `selector`. For 8- and 4-bit A without `.kind` (s8/u8,
/// e4m3/e5m2, s4/u4), the map the H200 (sm_90) gives them, which differs from the documented
/// model (reports/sm_90/mma-sp/README.md): each row has a register of its own, row g in lane
/// 4g + s·T + 2·(chunk / 8) and row g + 8 in the lane after it, chunk c at bits 4·(c mod 8).
/// For the others (16-bit and tf32 A, which the H200 shows as documented, and the sm_120a
/// kinds, which no device here has run) the documented model.
pub fn emulated_meta(v: &Variant, selector: u32) -> Vec<MetaField> {
    let g = SparseGeom::of(v).expect("a sparse variant");
    let bits = v.fragment(crate::isa::Operand::A).container_bits;
    if v.kind != crate::isa::Kind::Plain || g.elem_positions != 1 || bits > 8 {
        return documented_meta(v, selector);
    }
    let threads = g.threads_per_selector(v.shape.m);
    let w = field_bits(&g);
    let mut out = Vec::new();
    for row in 0..v.shape.m {
        for chunk in 0..g.chunks {
            for index in 0..fields_per_chunk(&g) {
                out.push(MetaField {
                    lane: 4 * (row % 8) + selector * threads + 2 * (chunk / 8) + row / 8,
                    bit: 4 * (chunk % 8) + w * index,
                    row,
                    chunk,
                    index,
                });
            }
        }
    }
    out.sort();
    out
}

/// Check that `fields` name every (row, chunk, index) of `v` exactly once, inside 32-bit
/// registers, without overlapping bits.
pub fn check_complete(v: &Variant, fields: &[MetaField]) -> Result<()> {
    let g = SparseGeom::of(v).expect("a sparse variant");
    let w = field_bits(&g);
    let per = fields_per_chunk(&g);
    let mut seen = vec![false; (v.shape.m * g.chunks * per) as usize];
    let mut bits = [0u32; 32];
    for f in fields {
        if f.lane >= 32 || f.bit + w > 32 || f.row >= v.shape.m || f.chunk >= g.chunks {
            bail!("metadata field {f:?} lies outside the warp or the matrix");
        }
        if f.index >= per {
            bail!("metadata field {f:?}: index {} of {per}", f.index);
        }
        let mask = ((1u64 << w) - 1) as u32;
        if bits[f.lane as usize] & (mask << f.bit) != 0 {
            bail!("metadata field {f:?} overlaps another field");
        }
        bits[f.lane as usize] |= mask << f.bit;
        let i = ((f.row * g.chunks + f.chunk) * per + f.index) as usize;
        if std::mem::replace(&mut seen[i], true) {
            bail!(
                "row {} chunk {} index {} is held by two fields",
                f.row,
                f.chunk,
                f.index
            );
        }
    }
    if let Some(i) = seen.iter().position(|s| !s) {
        let i = i as u32;
        bail!(
            "row {} chunk {} index {} is held by no field",
            i / per / g.chunks,
            i / per % g.chunks,
            i % per
        );
    }
    Ok(())
}

/// The nibble of every (row, chunk) that `words` (one per lane) hold through `fields`.
pub fn read_nibbles(v: &Variant, fields: &[MetaField], words: &[u32]) -> Vec<u32> {
    let g = SparseGeom::of(v).expect("a sparse variant");
    let w = field_bits(&g);
    let mut nib = vec![0u32; (v.shape.m * g.chunks) as usize];
    for f in fields {
        let x = (words[f.lane as usize] >> f.bit) & ((1 << w) - 1);
        nib[(f.row * g.chunks + f.chunk) as usize] |= x << (2 * f.index);
    }
    nib
}

/// Write every (row, chunk)'s nibble into the metadata words through `fields`.
pub fn write_nibbles(v: &Variant, fields: &[MetaField], nibbles: &[u32], words: &mut [u32]) {
    let g = SparseGeom::of(v).expect("a sparse variant");
    let w = field_bits(&g);
    let mask = (1u32 << w) - 1;
    for f in fields {
        let x = (nibbles[(f.row * g.chunks + f.chunk) as usize] >> (2 * f.index)) & mask;
        let word = &mut words[f.lane as usize];
        *word = (*word & !(mask << f.bit)) | (x << f.bit);
    }
}

/// The dense m×k A of a compressed m×(k/2) A (row-major values) under per-(row, chunk) nibbles.
pub fn densify(v: &Variant, compressed: &[f64], nibbles: &[u32]) -> Vec<f64> {
    let g = SparseGeom::of(v).expect("a sparse variant");
    let (m, k) = (v.shape.m, v.shape.k);
    let half = k / 2;
    let mut a = vec![0.0; (m * k) as usize];
    for r in 0..m {
        for j in 0..half {
            let nib = nibbles[(r * g.chunks + g.chunk_of(j)) as usize];
            let kk = g.dense_k(j, nib);
            a[(r * k + kk) as usize] += compressed[(r * half + j) as usize];
        }
    }
    a
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::isa::catalog;

    #[test]
    fn documented_maps_are_complete_under_every_selector() {
        for v in catalog().into_iter().filter(|v| v.sparse.is_some()) {
            let g = SparseGeom::of(&v).unwrap();
            for s in 0..g.documented_selectors(v.shape.m) {
                check_complete(&v, &documented_meta(&v, s))
                    .unwrap_or_else(|e| panic!("{} selector {s}: {e}", v.id()));
            }
        }
    }

    #[test]
    fn the_emulated_maps_are_the_committed_hardware_maps() {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("reports/sm_90/mma-sp");
        let mut files: Vec<_> = std::fs::read_dir(&dir)
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|p| p.extension().is_some_and(|x| x == "json"))
            .collect();
        files.sort();
        let (mut compared, mut differ_from_model) = (0, 0);
        for f in files {
            let map = crate::layout::LaneMap::load(&f).unwrap();
            let v = map.variant().unwrap();
            let Some(meta) = &map.metadata else { continue };
            for s in meta.selectors.iter().filter(|s| s.failure.is_none()) {
                let mut measured = s.meta_fields();
                measured.sort();
                assert_eq!(
                    emulated_meta(&v, s.selector),
                    measured,
                    "{} selector {}",
                    v.id(),
                    s.selector
                );
                compared += 1;
                differ_from_model += usize::from(documented_meta(&v, s.selector) != measured);
            }
        }
        // f16, bf16, tf32 (k8, k16) and s8 (k32, k64): 27 selector maps, the s8 ones (3) not
        // the documented model's.
        assert_eq!((compared, differ_from_model), (27, 3));
    }

    #[test]
    fn emulated_maps_are_complete_under_every_selector() {
        for v in catalog().into_iter().filter(|v| v.sparse.is_some()) {
            let g = SparseGeom::of(&v).unwrap();
            for s in 0..g.documented_selectors(v.shape.m) {
                check_complete(&v, &emulated_meta(&v, s))
                    .unwrap_or_else(|e| panic!("{} selector {s}: {e}", v.id()));
            }
        }
    }

    #[test]
    fn nibbles_round_trip_and_densify_places_kept_elements() {
        let v = crate::isa::find("sp.m16n8k16.f32.f16.f16.f32").unwrap();
        let fields = documented_meta(&v, 1);
        let nibbles: Vec<u32> = (0..64).map(|i| [0x4, 0x9, 0xE][i % 3]).collect();
        let mut words = [0u32; 32];
        write_nibbles(&v, &fields, &nibbles, &mut words);
        assert_eq!(read_nibbles(&v, &fields, &words), nibbles);
        // Selector 1 reads lane 1 of each group; the others stay zero.
        assert!(
            words
                .iter()
                .enumerate()
                .all(|(l, &w)| (l % 4 == 1) == (w != 0))
        );
        let compressed: Vec<f64> = (0..16 * 8).map(|i| i as f64).collect();
        let a = densify(&v, &compressed, &nibbles);
        // Row 0 chunk 1 has nibble 0x9: positions 1 and 2, compressed 2 and 3.
        assert_eq!(&a[4..8], &[0.0, 2.0, 3.0, 0.0]);
    }
}
