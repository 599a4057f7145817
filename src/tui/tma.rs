//! The viewer of a TMA map (`fp4probe.tma-map/1`): one tab, the box's rows × columns of
//! elements, a cell showing the 16-byte chunk (0–7) of its 128-byte shared line the element lies
//! in, counted from the 1024-byte-aligned base (so a swizzle shows as its XOR pattern down the
//! rows). The status line names the element's global (row, col), its shared byte from the box's
//! start and from the base, its chunk and line, and the tensor map's swizzle. A typed chunk
//! number lights the elements in that chunk.

use super::grid::{Cell, GridApp, GridModel};
use crate::device::BackendKind;
use crate::layout::lanemap::Status;
use crate::tma::Dir;
use crate::tma::map::TmaMap;

/// A TMA map as the grid viewer shows it.
pub struct TmaModel {
    pub map: TmaMap,
}

/// The viewer of a TMA map.
pub type TmaApp = GridApp<TmaModel>;

impl TmaApp {
    pub fn new(map: TmaMap) -> Self {
        GridApp::of(TmaModel { map })
    }
}

impl TmaModel {
    /// The byte of box element (row, col) from the 1024-byte-aligned base.
    fn base_byte(&self, row: u32, col: u32) -> Option<u32> {
        let m = &self.map;
        let k = (row * m.box_cols + col) as usize;
        (col < m.box_cols)
            .then(|| m.smem_byte.get(k))
            .flatten()
            .map(|b| b + m.smem_offset)
    }
}

impl GridModel for TmaModel {
    fn title(&self) -> String {
        self.map.case.clone()
    }
    fn status(&self) -> Status {
        self.map.status
    }
    fn backend(&self) -> BackendKind {
        self.map.backend
    }
    fn device(&self) -> String {
        self.map.provenance.device.clone()
    }
    fn tab_names(&self) -> Vec<String> {
        vec!["smem".into()]
    }
    fn shape(&self, _tab: usize) -> (u32, u32) {
        (self.map.box_rows, self.map.box_cols)
    }
    fn axes(&self, _tab: usize) -> (String, String) {
        ("row".into(), "col".into())
    }

    fn what(&self, _tab: usize) -> String {
        let m = &self.map;
        format!(
            "{} {}x{} {}, swizzle {} | cell: chunk",
            m.direction.name(),
            m.box_rows,
            m.box_cols,
            m.data_type,
            m.swizzle
        )
    }

    fn cell(&self, _tab: usize, row: u32, col: u32) -> Option<Cell> {
        self.base_byte(row, col).map(|b| {
            let chunk = b % 128 / 16;
            Cell {
                text: chunk,
                colour: chunk * 4,
                owner: Some(chunk),
            }
        })
    }

    fn describe(&self, _tab: usize, row: u32, col: u32) -> String {
        let m = &self.map;
        let (gr, gc) = (m.box_origin[0] + row, m.box_origin[1] + col);
        let Some(b) = self.base_byte(row, col) else {
            return format!(
                "(row {row}, col {col}) = global ({gr}, {gc}): not in the map | swizzle {}",
                m.swizzle
            );
        };
        let verb = match m.direction {
            Dir::Load => "lands at",
            Dir::Store => "comes from",
        };
        format!(
            "(row {row}, col {col}) = global ({gr}, {gc}) {verb} shared byte {} of the box, \
             base + {b}: chunk {} of line {} | swizzle {}",
            b - m.smem_offset,
            b % 128 / 16,
            b / 128,
            m.swizzle
        )
    }

    fn unit(&self) -> (&'static str, u32) {
        ("chunk", 8)
    }

    fn help(&self) -> (&'static str, Vec<&'static str>) {
        (
            "fp4probe view (TMA)",
            vec![
                "A cell shows the 16-byte chunk (0-7) of its 128-byte shared line the",
                "element lies in, counted from the 1024-byte-aligned base: a swizzle",
                "shows as its XOR pattern down the rows.",
            ],
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ratatui::crossterm::event::KeyCode;

    fn open(case: &str) -> TmaApp {
        let path = crate::tui::committed(&format!("reports/sm_90/tma/{case}.json"));
        TmaApp::new(TmaMap::load(&path).unwrap())
    }

    #[test]
    fn a_128b_box_shows_the_xor_of_row_and_chunk() {
        let mut a = open("load.u16.128B.16x64");
        assert_eq!(a.model.shape(0), (16, 64));
        // Row 3, col 9: line 3, chunk 1 before the swizzle, 1 XOR 3 = 2 after.
        for _ in 0..3 {
            a.handle_key(KeyCode::Down);
        }
        for _ in 0..9 {
            a.handle_key(KeyCode::Right);
        }
        let o = a.model.map.box_origin;
        assert_eq!(
            a.describe(),
            format!(
                "(row 3, col 9) = global ({}, {}) lands at shared byte 418 of the box, base + \
                 418: chunk 2 of line 3 | swizzle 128B",
                o[0] + 3,
                o[1] + 9
            )
        );
        assert_eq!(a.model.cell(0, 3, 9).map(|c| c.text), Some(2));
        // Every row holds each chunk once per 64 columns: the chunks of a row are a permutation.
        for r in 0..8 {
            let mut chunks: Vec<u32> = (0..8)
                .map(|c| a.model.cell(0, r, 8 * c).unwrap().text)
                .collect();
            chunks.sort_unstable();
            assert_eq!(chunks, (0..8).collect::<Vec<_>>());
        }
        a.handle_key(KeyCode::Char('5'));
        a.handle_key(KeyCode::Enter);
        assert_eq!(a.highlight, Some(5));
        a.handle_key(KeyCode::Char('9'));
        a.handle_key(KeyCode::Enter);
        assert_eq!(a.highlight, None);
    }

    #[test]
    fn an_offset_box_counts_chunks_from_the_base_and_a_store_says_so() {
        // The box starts 128 bytes past the base: the swizzle follows the address bits, so the
        // box's first element lies in chunk 1 of line 1, 16 bytes into the box.
        let a = open("load.u16.32B.16x16.at128");
        assert!(
            a.describe()
                .contains("shared byte 16 of the box, base + 144: chunk 1 of line 1"),
            "{}",
            a.describe()
        );
        let s = open("store.u32.none.16x4");
        assert!(
            s.describe().contains("comes from shared byte 0"),
            "{}",
            s.describe()
        );
    }
}
