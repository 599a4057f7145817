//! The viewer of wgmma records: a wgmma lane map (`fp4probe wgmma probe`) shows a tab per
//! register operand (A from registers, D, C) and per shared-memory tile the probe read; a
//! shared-memory study (`fp4probe wgmma smem`) a tab per tile (A, B).
//!
//! A register tab is the 64×N (or 64×K) grid, a cell showing the thread 0–127 that holds it in
//! its lane's colour, the row numbers on the colour of the warp that holds the row; the status
//! line names the cursor cell's thread, warp, lane, register and element. A tile tab is the
//! rows × cols grid of the tile's elements, a cell showing which of the eight 16-byte chunks of
//! its 128-byte line the element lies in (so a swizzle shows as its XOR pattern down the rows);
//! the status line names the element's byte offset from the descriptor's start, its chunk and
//! line, and the swizzle mode and major-ness.
//!
//! [`WgModel`] says what the tabs and cells are; [`WgApp`] is the grid viewer over it, tested
//! through its state and status line.

use super::grid::{Cell, GridApp, GridModel};
use crate::device::BackendKind;
use crate::layout::lanemap::Status;
use crate::report::wgmma::WgDoc;
use crate::wgmma::desc::{Major, Swizzle};
use crate::wgmma::grid::{RegGrid, TileGrid, axis_names};
use ratatui::style::Color;

/// One tab's grid.
#[derive(Clone, Debug)]
pub enum WgTab {
    /// A register operand and its element type.
    Reg { grid: RegGrid, elem: String },
    /// A shared-memory tile and the descriptor it was read through.
    Tile {
        grid: TileGrid,
        elem: String,
        swizzle: Swizzle,
        major: Major,
    },
}

impl WgTab {
    pub fn name(&self) -> String {
        match self {
            WgTab::Reg { grid, .. } => grid.operand.clone(),
            WgTab::Tile { grid, .. } => format!("{} smem", grid.operand),
        }
    }

    /// (rows, cols) of the grid.
    pub fn shape(&self) -> (u32, u32) {
        match self {
            WgTab::Reg { grid, .. } => (grid.rows, grid.cols),
            WgTab::Tile { grid, .. } => (grid.rows, grid.cols),
        }
    }

    fn operand(&self) -> &str {
        match self {
            WgTab::Reg { grid, .. } => &grid.operand,
            WgTab::Tile { grid, .. } => &grid.operand,
        }
    }
}

/// A wgmma record as the grid viewer shows it.
pub struct WgModel {
    /// The variant (lane maps) or the study's stem.
    pub title: String,
    pub status: Status,
    pub backend: BackendKind,
    pub device: String,
    pub tabs: Vec<WgTab>,
}

/// The viewer of a wgmma record.
pub type WgApp = GridApp<WgModel>;

impl WgApp {
    pub fn new(doc: &WgDoc) -> Self {
        GridApp::of(WgModel::new(doc))
    }
}

impl WgModel {
    pub fn new(doc: &WgDoc) -> Self {
        let (title, tabs) = match doc {
            WgDoc::Lanes { map, v } => {
                let mut tabs: Vec<WgTab> = RegGrid::all(map, v)
                    .into_iter()
                    .map(|grid| {
                        let elem = if grid.operand == "A" { v.a } else { v.d };
                        WgTab::Reg {
                            grid,
                            elem: elem.to_string(),
                        }
                    })
                    .collect();
                for grid in TileGrid::of_lane_map(map, v) {
                    let (major, desc) = if grid.operand == "A" {
                        (map.setting.a_major, map.setting.a_desc)
                    } else {
                        (map.setting.b_major, map.setting.b_desc)
                    };
                    tabs.push(WgTab::Tile {
                        grid,
                        elem: v.a.to_string(),
                        swizzle: desc.swizzle,
                        major,
                    });
                }
                (map.variant.clone(), tabs)
            }
            WgDoc::Study { map, v } => (
                map.stem(),
                TileGrid::of_study(map, v)
                    .into_iter()
                    .map(|grid| WgTab::Tile {
                        grid,
                        elem: v.a.to_string(),
                        swizzle: map.swizzle,
                        major: map.major,
                    })
                    .collect(),
            ),
        };
        WgModel {
            title,
            status: doc.status(),
            backend: doc.backend(),
            device: doc.provenance().device.clone(),
            tabs,
        }
    }
}

impl GridModel for WgModel {
    fn title(&self) -> String {
        self.title.clone()
    }
    fn status(&self) -> Status {
        self.status
    }
    fn backend(&self) -> BackendKind {
        self.backend
    }
    fn device(&self) -> String {
        self.device.clone()
    }
    fn tab_names(&self) -> Vec<String> {
        self.tabs.iter().map(WgTab::name).collect()
    }
    fn shape(&self, tab: usize) -> (u32, u32) {
        self.tabs[tab].shape()
    }
    fn axes(&self, tab: usize) -> (String, String) {
        let (r, c) = axis_names(self.tabs[tab].operand());
        (r.to_string(), c.to_string())
    }

    fn what(&self, tab: usize) -> String {
        match &self.tabs[tab] {
            WgTab::Reg { grid, elem } => format!(
                "{} {}x{} {elem} | {} regs x {} per thread | cell: thread",
                grid.operand, grid.rows, grid.cols, grid.regs, grid.elems_per_reg
            ),
            WgTab::Tile { grid, elem, .. } => format!(
                "{} tile {}x{} {elem} | cell: 16-byte chunk of its line",
                grid.operand, grid.rows, grid.cols
            ),
        }
    }

    fn cell(&self, tab: usize, r: u32, c: u32) -> Option<Cell> {
        match &self.tabs[tab] {
            WgTab::Reg { grid, .. } => grid.at(r, c).map(|o| Cell {
                text: o.thread,
                colour: o.lane(),
                owner: Some(o.thread),
            }),
            WgTab::Tile { grid, .. } => grid.at(r, c).map(|p| {
                let chunk = (p.byte.rem_euclid(128) / 16) as u32;
                Cell {
                    text: chunk,
                    colour: chunk * 4,
                    owner: None,
                }
            }),
        }
    }

    fn row_colour(&self, tab: usize, row: u32) -> Option<Color> {
        match &self.tabs[tab] {
            WgTab::Reg { grid, .. } => grid.row_warp(row).map(|w| {
                let (x, y, z) = crate::palette::warp_rgb(w);
                Color::Rgb(x, y, z)
            }),
            WgTab::Tile { .. } => None,
        }
    }

    fn describe(&self, tab: usize, r: u32, c: u32) -> String {
        match &self.tabs[tab] {
            WgTab::Reg { grid, .. } => {
                let (rn, cn) = axis_names(&grid.operand);
                match grid.at(r, c) {
                    Some(o) => format!(
                        "{} ({rn} {r}, {cn} {c}): thread {} = warp {} lane {}, r{}.e{}",
                        grid.operand,
                        o.thread,
                        o.warp(),
                        o.lane(),
                        o.reg,
                        o.elem
                    ),
                    None => format!("{} ({rn} {r}, {cn} {c}): no slot holds it", grid.operand),
                }
            }
            WgTab::Tile {
                grid,
                swizzle,
                major,
                ..
            } => {
                let (rn, cn) = axis_names(&grid.operand);
                match grid.at(r, c) {
                    Some(p) => {
                        let bit = if grid.elem_bits < 8 {
                            format!(" bit {}", p.bit)
                        } else {
                            String::new()
                        };
                        format!(
                            "{} ({rn} {r}, {cn} {c}): byte {}{bit} from start, chunk {} of line {} | swizzle {swizzle}, {major}-major",
                            grid.operand,
                            p.byte,
                            p.byte.rem_euclid(128) / 16,
                            p.byte.div_euclid(128)
                        )
                    }
                    None => format!(
                        "{} ({rn} {r}, {cn} {c}): not in the map | swizzle {swizzle}, {major}-major",
                        grid.operand
                    ),
                }
            }
        }
    }

    fn unit(&self) -> (&'static str, u32) {
        ("thread", 128)
    }

    fn help(&self) -> (&'static str, Vec<&'static str>) {
        (
            "fp4probe view (wgmma)",
            vec![
                "Register tabs: a cell shows its thread in its lane's colour; the",
                "row numbers sit on the colour of the warp holding the row.",
                "Tile tabs: a cell shows the 16-byte chunk (0-7) of its 128-byte",
                "line the element lies in: a swizzle shows as its XOR pattern.",
            ],
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tui::grid::GridModel;
    use crate::wgmma::testing;
    use ratatui::crossterm::event::{KeyCode, KeyEvent, KeyModifiers};

    fn lanes(id: &str) -> WgApp {
        let map = testing::lane_map(id);
        let v = crate::wgmma::find(id).unwrap();
        WgApp::new(&WgDoc::Lanes { map, v })
    }

    #[test]
    fn register_tabs_name_the_warp_lane_register_and_element() {
        let mut a = lanes("m64n256k16.f32.bf16.bf16.rs");
        let names: Vec<String> = a.model.tab_names();
        assert_eq!(names, ["A", "D", "C", "B smem"]);
        assert_eq!(a.model.tabs[1].shape(), (64, 256));
        a.handle_key(KeyCode::Tab);
        // D (row 9, col 5): warp 0, g = 1, q = 2, i = 3 (row g + 8, col 2q + 1) → thread 6, r3.
        for _ in 0..9 {
            a.handle_key(KeyCode::Down);
        }
        for _ in 0..5 {
            a.handle_key(KeyCode::Char('l'));
        }
        assert_eq!(a.cursor(), (9, 5));
        assert_eq!(
            a.describe(),
            "D (m 9, n 5): thread 6 = warp 0 lane 6, r3.e0"
        );
        // Row 40 is warp 2's: thread 64 + 4·0 + ..., col 255 the last register pair.
        a.handle_key(KeyCode::PageDown);
        a.handle_key(KeyCode::PageDown);
        a.handle_key(KeyCode::End);
        assert_eq!(a.cursor(), (41, 255));
        assert!(
            a.describe().contains("warp 2 lane 7, r127.e0"),
            "{}",
            a.describe()
        );
        // The window follows the cursor across the 256 columns.
        let s = a.scroll_to((20, 18));
        assert_eq!(s, (22, 238));
        a.handle_key(KeyCode::Home);
        assert_eq!(a.scroll_to((20, 18)), (22, 0));
        // Clamped at the edges.
        for _ in 0..5 {
            a.handle_key(KeyCode::PageDown);
        }
        assert_eq!(a.cursor().0, 63);
        // A thread to light, and a number past the warpgroup that lights nothing.
        for k in ['3', '7'] {
            a.handle_key(KeyCode::Char(k));
        }
        a.handle_key(KeyCode::Enter);
        assert_eq!(a.highlight, Some(37));
        for k in ['2', '0', '0'] {
            a.handle_key(KeyCode::Char(k));
        }
        a.handle_key(KeyCode::Enter);
        assert_eq!(a.highlight, None);
        a.handle_key(KeyCode::BackTab);
        assert_eq!(a.tab_name(), "A");
    }

    #[test]
    fn tile_tabs_name_the_byte_and_the_swizzle() {
        let map = testing::study(16, Major::K, Swizzle::B128);
        let v = crate::wgmma::find(&map.variant).unwrap();
        let mut a = WgApp::new(&WgDoc::Study { map, v });
        assert_eq!(a.model.title, "smem.16bit.K.128B");
        assert_eq!(a.model.tab_names(), ["A smem", "B smem"]);
        // A (m 1, k 0) of a K-major 128B tile: row 1's 128 bytes, its first chunk XORed to 1.
        a.handle_key(KeyCode::Down);
        assert_eq!(
            a.describe(),
            "A (m 1, k 0): byte 144 from start, chunk 1 of line 1 | swizzle 128B, K-major"
        );
        a.handle_key(KeyCode::Tab);
        assert!(a.describe().starts_with("B (k 0, n 0): byte 0 from start"));
        a.handle_key(KeyCode::Char('?'));
        assert!(a.help);
        a.handle_key(KeyCode::Char('x'));
        assert!(!a.help);
        a.handle_event(KeyEvent::new(KeyCode::Char('c'), KeyModifiers::CONTROL));
        assert!(a.quit);
    }
}
