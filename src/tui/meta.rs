//! The metadata tabs of an `mma.sp` lane map, one per sparsity selector: the grid is the dense
//! A's rows × the metadata fields of a row (chunk by chunk, each chunk's kept elements in
//! order), a cell showing the lane whose metadata register holds the field, in its colour. The
//! status line names the field's lane and bits, the dense k the chunk spans, the compressed A
//! column(s) the field selects for, and where the PTX ISA's figures place it when they differ.

use super::grid::{Cell, Grid};
use crate::isa::Variant;
use crate::isa::sparse::SparseGeom;
use crate::layout::meta::{MetaField, MetaRecord, documented_meta, field_bits, fields_per_chunk};
use ratatui::Frame;
use ratatui::layout::Rect;

/// One selector's map, laid out as the grid shows it.
#[derive(Clone, Debug)]
pub struct MetaGrid {
    pub selector: u32,
    /// Whether the PTX ISA names the selector.
    pub documented: bool,
    pub lanes: Vec<u32>,
    pub rows: u32,
    pub cols: u32,
    geom: SparseGeom,
    /// Per (row, chunk · fields per chunk + index): the measured field, and the documented one.
    at: Vec<Option<MetaField>>,
    doc: Vec<Option<MetaField>>,
    failure: Option<String>,
}

impl MetaGrid {
    /// One grid per selector of a sparse variant's metadata record.
    pub fn all(v: &Variant, rec: &MetaRecord) -> Vec<MetaGrid> {
        let Some(geom) = SparseGeom::of(v) else {
            return Vec::new();
        };
        let per = fields_per_chunk(&geom);
        let (rows, cols) = (v.shape.m, geom.chunks * per);
        let place = |fields: &[MetaField]| {
            let mut at = vec![None; (rows * cols) as usize];
            for f in fields {
                if f.row < rows && f.chunk < geom.chunks && f.index < per {
                    at[(f.row * cols + f.chunk * per + f.index) as usize] = Some(*f);
                }
            }
            at
        };
        rec.selectors
            .iter()
            .map(|s| MetaGrid {
                selector: s.selector,
                documented: s.documented,
                lanes: s.lanes.clone(),
                rows,
                cols,
                geom,
                at: place(&s.meta_fields()),
                doc: if s.documented {
                    place(&documented_meta(v, s.selector))
                } else {
                    vec![None; (rows * cols) as usize]
                },
                failure: s.failure.clone(),
            })
            .collect()
    }

    pub fn name(&self) -> String {
        format!("M{}", self.selector)
    }

    fn field(&self, v: &[Option<MetaField>], row: u32, col: u32) -> Option<MetaField> {
        (row < self.rows && col < self.cols)
            .then(|| v[(row * self.cols + col) as usize])
            .flatten()
    }

    pub fn cell(&self, row: u32, col: u32) -> Option<Cell> {
        self.field(&self.at, row, col).map(|f| Cell {
            text: f.lane,
            colour: f.lane,
            owner: Some(f.lane),
        })
    }

    /// What the status line says about (row, col).
    pub fn describe(&self, row: u32, col: u32) -> String {
        let g = &self.geom;
        let per = fields_per_chunk(g);
        let w = field_bits(g);
        let (chunk, index) = (col / per, col % per);
        // Dense k of the chunk, and the compressed A columns this field chooses for.
        let k = 4 * g.pos_elems / g.elem_positions;
        let dense = format!("k {}..{}", chunk * k, chunk * k + k - 1);
        let step = g.kept / per;
        let first = chunk * g.kept + index * step;
        let cols = if step == 1 {
            format!("A col {first}")
        } else {
            format!("A cols {first}..{}", first + step - 1)
        };
        let head = format!(
            "{} (row {row}, chunk {chunk} = {dense}, field {index} -> {cols})",
            self.name()
        );
        let Some(f) = self.field(&self.at, row, col) else {
            return match &self.failure {
                Some(e) => format!("{head}: not measured: {e}"),
                None => format!("{head}: no field holds it"),
            };
        };
        let bits = |f: &MetaField| format!("lane {} bits {}..{}", f.lane, f.bit, f.bit + w - 1);
        let mut s = format!("{head}: {}", bits(&f));
        match self.field(&self.doc, row, col) {
            Some(d) if d != f => s += &format!(" (documented model: {})", bits(&d)),
            _ if !self.documented => s += " (a selector the PTX ISA does not name)",
            _ => {}
        }
        s
    }

    /// The info line.
    pub fn what(&self) -> String {
        format!(
            "metadata, selector {} | {}-bit fields | cell: lane",
            self.selector,
            field_bits(&self.geom)
        )
    }

    /// The lanes whose metadata register the selector reads.
    pub fn lanes(&self) -> String {
        let lanes: Vec<String> = self.lanes.iter().map(u32::to_string).collect();
        format!("lanes {}", lanes.join(" "))
    }

    /// Draw the grid; returns the window's first (row, col).
    pub fn draw(
        &self,
        f: &mut Frame,
        area: Rect,
        cursor: (u32, u32),
        scroll: (u32, u32),
        highlight: Option<u32>,
    ) -> (u32, u32) {
        Grid {
            shape: (self.rows, self.cols),
            axes: ("m".into(), "f".into()),
            cursor,
            highlight,
        }
        .draw(f, area, scroll, |r, c| self.cell(r, c), |_| None)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::layout::LaneMap;

    fn grids(stem: &str) -> Vec<MetaGrid> {
        let path = crate::tui::committed(&format!("reports/sm_90/mma-sp/{stem}.json"));
        let map = LaneMap::load(&path).unwrap();
        MetaGrid::all(&map.variant().unwrap(), map.metadata.as_ref().unwrap())
    }

    #[test]
    fn f16_selector_0_names_lane_bits_and_k() {
        let g = grids("sp.m16n8k32.f32.f16.f16.f32");
        assert!(g.len() >= 2);
        assert_eq!((g[0].rows, g[0].cols), (16, 16));
        // The committed map: row 0 chunk 0's two fields in lane 0 bits 0..1 and 2..3.
        assert_eq!(
            g[0].describe(0, 1),
            "M0 (row 0, chunk 0 = k 0..3, field 1 -> A col 1): lane 0 bits 2..3"
        );
        // Row 8 (the second half) lies in the upper 16 bits.
        assert!(
            g[0].describe(8, 0).contains("bits 16..17"),
            "{}",
            g[0].describe(8, 0)
        );
        assert_eq!(g[0].cell(0, 1).map(|c| c.text), Some(0));
        assert!(g[0].lanes().starts_with("lanes 0 1 4 5 8"));
    }

    #[test]
    fn s8_fields_name_where_the_documented_model_differs() {
        let g = grids("sp.m16n8k32.s32.s8.s8.s32");
        // Row 8 has a register of its own in the odd lane of the pair; the model puts it in
        // the upper half of the even lane's.
        assert_eq!(
            g[0].describe(8, 0),
            "M0 (row 8, chunk 0 = k 0..3, field 0 -> A col 0): lane 1 bits 0..1 (documented \
             model: lane 0 bits 16..17)"
        );
        assert!(!g[0].describe(0, 0).contains("documented"));
    }

    #[test]
    fn tf32_fields_are_whole_nibbles() {
        let g = grids("sp.m16n8k8.f32.tf32.tf32.f32");
        // k 8 is four chunks of two tf32 elements, one kept: one 4-bit field a chunk.
        assert_eq!(g[0].cols, 4);
        let d = g[0].describe(0, 1);
        assert!(
            d.starts_with("M0 (row 0, chunk 1 = k 2..3, field 0 -> A col 1)"),
            "{d}"
        );
        assert!(d.contains("bits 4..7"), "{d}");
    }
}
