//! The viewer of a data-movement map (`fp4probe.matrix-map/1`: `ldmatrix`, `stmatrix`,
//! `movmatrix`).
//!
//! The fragment tab is the stacked matrices (row `8·matrix + row`, 8 columns of 16-bit
//! elements), a cell showing the lane whose register holds the element (receives it for
//! `ldmatrix`, gives it for `stmatrix`); the status line names the matrix, the lane, register
//! and element, and the lane whose address names the element's shared row. The address tab
//! (`ldmatrix`/`stmatrix`) is one row per lane, the cell the stacked row that lane's address
//! names ("." for a lane whose address the instruction does not use). `movmatrix` has one tab,
//! the source matrix, a cell showing the lane that receives the element.

use super::grid::{Cell, GridApp, GridModel};
use crate::device::BackendKind;
use crate::isa::matrix::MatrixOp;
use crate::layout::lanemap::Status;
use crate::movement::map::MatrixMap;
use crate::movement::{LANES, ROW_ELEMS};

/// Rows of one matrix.
const ROWS: u32 = 8;

/// A data-movement map as the grid viewer shows it.
pub struct MoveModel {
    pub map: MatrixMap,
    /// Per stacked (row, col): the index of the slot that holds it.
    at: Vec<Option<usize>>,
    rows: u32,
}

/// The viewer of a data-movement map.
pub type MoveApp = GridApp<MoveModel>;

impl MoveApp {
    pub fn new(map: MatrixMap) -> Self {
        GridApp::of(MoveModel::new(map))
    }
}

impl MoveModel {
    pub fn new(map: MatrixMap) -> Self {
        let rows = ROWS * map.num.max(1);
        let mut at = vec![None; (rows * ROW_ELEMS) as usize];
        for (i, s) in map.slots.iter().enumerate() {
            let (m, r, c) = (s[3], s[4], s[5]);
            let row = ROWS * m + r;
            if row < rows && c < ROW_ELEMS {
                at[(row * ROW_ELEMS + c) as usize] = Some(i);
            }
        }
        MoveModel { map, at, rows }
    }

    fn slot(&self, row: u32, col: u32) -> Option<&[u32; 8]> {
        let i = (*self.at.get((row * ROW_ELEMS + col) as usize)?)?;
        self.map.slots.get(i)
    }

    fn has_addresses(&self) -> bool {
        self.map.op != MatrixOp::Movmatrix
    }
}

impl GridModel for MoveModel {
    fn title(&self) -> String {
        self.map.variant.clone()
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
        if self.has_addresses() {
            vec!["fragment".into(), "addresses".into()]
        } else {
            vec!["source".into()]
        }
    }

    fn shape(&self, tab: usize) -> (u32, u32) {
        match tab {
            0 => (self.rows, ROW_ELEMS),
            _ => (LANES, 1),
        }
    }

    fn axes(&self, tab: usize) -> (String, String) {
        match tab {
            0 => ("row".into(), "col".into()),
            _ => ("ln".into(), "r".into()),
        }
    }

    fn what(&self, tab: usize) -> String {
        let m = &self.map;
        match (tab, m.op) {
            (0, MatrixOp::Movmatrix) => "source 8x8 b16 | cell: lane receiving it".into(),
            (0, op) => format!(
                "x{} 8x8 b16 | {} regs x {} | cell: lane {}",
                m.num,
                m.regs,
                m.elems_per_reg,
                if op == MatrixOp::Ldmatrix {
                    "receiving it"
                } else {
                    "giving it"
                }
            ),
            _ => format!(
                "cell: row its address names | {} lanes used",
                m.addresses.len()
            ),
        }
    }

    fn cell(&self, tab: usize, row: u32, col: u32) -> Option<Cell> {
        match tab {
            0 => self.slot(row, col).map(|s| Cell {
                text: s[0],
                colour: s[0],
                owner: Some(s[0]),
            }),
            _ => self
                .map
                .addresses
                .iter()
                .find(|a| a.lane == row)
                .map(|a| Cell {
                    text: ROWS * a.matrix + a.row,
                    colour: a.lane,
                    owner: Some(a.lane),
                }),
        }
    }

    fn describe(&self, tab: usize, row: u32, col: u32) -> String {
        if tab > 0 {
            return match self.map.addresses.iter().find(|a| a.lane == row) {
                Some(a) => format!(
                    "lane {row}'s address names matrix {} row {} (stacked row {})",
                    a.matrix,
                    a.row,
                    ROWS * a.matrix + a.row
                ),
                None => format!("lane {row}'s address is not used by the instruction"),
            };
        }
        let Some(&[lane, reg, elem, matrix, r, c, from_lane, from_elem]) = self.slot(row, col)
        else {
            return format!("(row {row}, col {col}): no slot holds it");
        };
        match self.map.op {
            MatrixOp::Ldmatrix => format!(
                "matrix {matrix} (row {r}, col {c}): lane {lane} r{reg}.e{elem} receives it, \
                 element {from_elem} of the row at lane {from_lane}'s address"
            ),
            MatrixOp::Stmatrix => format!(
                "matrix {matrix} (row {r}, col {c}): lane {lane} r{reg}.e{elem} gives it, to \
                 element {from_elem} of the row at lane {from_lane}'s address"
            ),
            MatrixOp::Movmatrix => format!(
                "source (row {r}, col {c}), held by lane {from_lane} e{from_elem}: lane {lane} \
                 r{reg}.e{elem} receives it"
            ),
        }
    }

    fn unit(&self) -> (&'static str, u32) {
        ("lane", LANES)
    }

    fn help(&self) -> (&'static str, Vec<&'static str>) {
        (
            "fp4probe view (ldmatrix/stmatrix/movmatrix)",
            vec![
                "fragment: the matrices stacked (row 8*matrix + row), a cell shows the",
                "lane whose register holds the element, in that lane's colour.",
                "addresses: per lane, the stacked row its address names (. unused).",
                "movmatrix (source): the source matrix, a cell shows the lane that",
                "receives the element.",
            ],
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tui::grid::GridModel;
    use ratatui::crossterm::event::KeyCode;

    fn open(id: &str) -> MoveApp {
        let path = crate::tui::committed(&format!("reports/sm_90/ldmatrix/{id}.json"));
        MoveApp::new(MatrixMap::load(&path).unwrap())
    }

    #[test]
    fn ldmatrix_fragment_names_the_lane_and_the_address_lane() {
        let mut a = open("ldmatrix.m8n8.x4.b16");
        assert_eq!(a.model.tab_names(), ["fragment", "addresses"]);
        assert_eq!(a.model.shape(0), (32, 8));
        // Matrix 1 (register 1), row 2, col 5: lane 4·2 + 5/2 = 10 element 1 receives it, from
        // the row that lane 8 + 2's address names.
        for _ in 0..10 {
            a.handle_key(KeyCode::Down);
        }
        for _ in 0..5 {
            a.handle_key(KeyCode::Right);
        }
        assert_eq!(
            a.describe(),
            "matrix 1 (row 2, col 5): lane 10 r1.e1 receives it, element 5 of the row at lane \
             10's address"
        );
        a.handle_key(KeyCode::Tab);
        for _ in 0..13 {
            a.handle_key(KeyCode::Char('j'));
        }
        assert_eq!(
            a.describe(),
            "lane 13's address names matrix 1 row 5 (stacked row 13)"
        );
        assert_eq!(a.model.cell(1, 13, 0).map(|c| c.text), Some(13));
    }

    #[test]
    fn ldmatrix_x1_leaves_lanes_unused_and_stmatrix_gives() {
        let mut a = open("ldmatrix.m8n8.x1.trans.b16");
        a.handle_key(KeyCode::Tab);
        for _ in 0..20 {
            a.handle_key(KeyCode::Down);
        }
        assert_eq!(
            a.describe(),
            "lane 20's address is not used by the instruction"
        );
        assert_eq!(a.model.cell(1, 20, 0), None);
        let s = open("stmatrix.m8n8.x2.b16");
        assert!(
            s.describe()
                .starts_with("matrix 0 (row 0, col 0): lane 0 r0.e0 gives it"),
            "{}",
            s.describe()
        );
    }

    #[test]
    fn movmatrix_shows_the_source_and_the_receiving_lane() {
        let mut a = open("movmatrix.m8n8.trans.b16");
        assert_eq!(a.model.tab_names(), ["source"]);
        // The transpose: source (row 1, col 2), held by lane 4·1 + 1 = 5 e0, goes to row 2,
        // col 1 of the result: lane 4·2 + 0 = 8, element 1.
        a.handle_key(KeyCode::Down);
        a.handle_key(KeyCode::Right);
        a.handle_key(KeyCode::Right);
        assert_eq!(
            a.describe(),
            "source (row 1, col 2), held by lane 5 e0: lane 8 r0.e1 receives it"
        );
        a.handle_key(KeyCode::Char('8'));
        a.handle_key(KeyCode::Enter);
        assert_eq!(a.highlight, Some(8));
    }
}
