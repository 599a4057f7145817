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
//! [`WgApp`] is the model (tabs, cursor, scroll, what the status line says) and is tested as
//! such; [`WgApp::draw`] only renders it.

use super::{Screen, Typed, common_key, follow, help_box, is_ctrl_c, lane_color, movement};
use crate::device::BackendKind;
use crate::layout::lanemap::Status;
use crate::report::wgmma::WgDoc;
use crate::wgmma::desc::{Major, Swizzle};
use crate::wgmma::grid::{RegGrid, TileGrid, axis_names};
use ratatui::Frame;
use ratatui::crossterm::event::{KeyCode, KeyEvent};
use ratatui::layout::{Constraint, Layout as Split, Rect};
use ratatui::style::{Color, Modifier, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Paragraph, Tabs};

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
}

pub struct WgApp {
    /// The variant (lane maps) or the study's stem.
    pub title: String,
    pub status: Status,
    pub backend: BackendKind,
    pub device: String,
    pub tabs: Vec<WgTab>,
    /// Index into `tabs`.
    pub tab: usize,
    cursor: Vec<(u32, u32)>,
    scroll: Vec<(u32, u32)>,
    /// A thread (0–127) whose cells are lit.
    pub highlight: Option<u32>,
    typing: Typed,
    pub quit: bool,
    pub help: bool,
}

impl WgApp {
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
        let n = tabs.len();
        WgApp {
            title,
            status: doc.status(),
            backend: doc.backend(),
            device: doc.provenance().device.clone(),
            tabs,
            tab: 0,
            cursor: vec![(0, 0); n],
            scroll: vec![(0, 0); n],
            highlight: None,
            typing: Typed::default(),
            quit: false,
            help: false,
        }
    }

    /// The cursor's (row, col) on the current tab.
    pub fn cursor(&self) -> (u32, u32) {
        self.cursor.get(self.tab).copied().unwrap_or((0, 0))
    }

    /// The first visible (row, col) on the current tab, as last drawn.
    pub fn scroll(&self) -> (u32, u32) {
        self.scroll.get(self.tab).copied().unwrap_or((0, 0))
    }

    /// What the status line says about the cell under the cursor.
    pub fn describe(&self) -> String {
        let Some(t) = self.tabs.get(self.tab) else {
            return "no layout: the map has no operands".into();
        };
        let (r, c) = self.cursor();
        match t {
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

    pub fn handle_event(&mut self, key: KeyEvent) {
        if is_ctrl_c(&key) {
            self.quit = true;
        } else {
            self.handle_key(key.code);
        }
    }

    pub fn handle_key(&mut self, key: KeyCode) {
        if common_key(key, &mut self.quit, &mut self.help) {
            return;
        }
        let n = self.tabs.len().max(1);
        match key {
            KeyCode::Char('?') => self.help = true,
            KeyCode::Tab => self.tab = (self.tab + 1) % n,
            KeyCode::BackTab => self.tab = (self.tab + n - 1) % n,
            _ if self.typing.key(key, 128, &mut self.highlight) => {}
            _ => {
                if let Some((dr, dc)) = movement(key) {
                    self.step(dr, dc);
                }
            }
        }
    }

    fn step(&mut self, dr: i64, dc: i64) {
        let Some(t) = self.tabs.get(self.tab) else {
            return;
        };
        let (rows, cols) = t.shape();
        let (r, c) = self.cursor[self.tab];
        self.cursor[self.tab] = (
            (r as i64 + dr).clamp(0, rows.max(1) as i64 - 1) as u32,
            (c as i64 + dc).clamp(0, cols.max(1) as i64 - 1) as u32,
        );
    }

    /// Keep the cursor in a window of `visible` (rows, cols) cells; returns the window's first
    /// (row, col).
    pub fn scroll_to(&mut self, visible: (u32, u32)) -> (u32, u32) {
        if self.tabs.is_empty() {
            return (0, 0);
        }
        let s = follow(self.cursor(), self.scroll(), visible);
        self.scroll[self.tab] = s;
        s
    }

    pub fn draw(&mut self, f: &mut Frame) {
        let area = f.area();
        let [top, info, body, status, help] = Split::vertical([
            Constraint::Length(1),
            Constraint::Length(1),
            Constraint::Min(3),
            Constraint::Length(2),
            Constraint::Length(1),
        ])
        .areas(area);
        let titles: Vec<Line> = self
            .tabs
            .iter()
            .map(|t| Line::from(format!(" {} ", t.name())))
            .collect();
        let [tabs_area, id_area] =
            Split::horizontal([Constraint::Length(34), Constraint::Min(10)]).areas(top);
        f.render_widget(
            Tabs::new(titles)
                .select(self.tab)
                .highlight_style(Style::new().add_modifier(Modifier::REVERSED))
                .divider("|"),
            tabs_area,
        );
        f.render_widget(
            Paragraph::new(Span::styled(
                self.title.clone(),
                Style::new().add_modifier(Modifier::BOLD),
            )),
            id_area,
        );
        let backend = match self.backend {
            BackendKind::Hardware => format!("hardware: {}", self.device),
            BackendKind::Emulator => "EMULATOR (documented layout, not a hardware finding)".into(),
        };
        let word = format!("{:?}", self.status).to_uppercase();
        let what = match self.tabs.get(self.tab) {
            Some(WgTab::Reg { grid, elem }) => format!(
                "{} {}x{} {elem} | {} regs x {} per thread | cell: thread",
                grid.operand, grid.rows, grid.cols, grid.regs, grid.elems_per_reg
            ),
            Some(WgTab::Tile { grid, elem, .. }) => format!(
                "{} tile {}x{} {elem} | cell: 16-byte chunk of its line",
                grid.operand, grid.rows, grid.cols
            ),
            None => "no operands".into(),
        };
        f.render_widget(Paragraph::new(format!("{what} | {word} | {backend}")), info);
        self.draw_grid(f, body);
        let mut state = Vec::new();
        if let Some(t) = self.highlight {
            state.push(format!("thread {t} lit"));
        }
        if !self.typing.0.is_empty() {
            state.push(format!("thread? {}_", self.typing.0));
        }
        f.render_widget(
            Paragraph::new(vec![
                Line::from(self.describe()),
                Line::from(state.join(" | ")),
            ]),
            status,
        );
        f.render_widget(
            Paragraph::new(
                "arrows/hjkl PgUp/PgDn move  Tab tab  0-127+Enter thread  ? help  q quit",
            )
            .style(Style::new().fg(Color::DarkGray)),
            help,
        );
        if self.help {
            help_box(
                f,
                area,
                vec![
                    Line::from(" fp4probe view (wgmma): keys "),
                    Line::from(""),
                    Line::from(
                        " arrows / h j k l   move the cursor; the status line names the cell",
                    ),
                    Line::from(
                        " PgUp / PgDn        16 rows up / down; Home / End: first / last column",
                    ),
                    Line::from(" Tab / Shift-Tab    next / previous operand or tile"),
                    Line::from(
                        " 0-127 then Enter   light up every cell of that thread; Enter clears",
                    ),
                    Line::from(" ?                  this help"),
                    Line::from(" q, Esc, Ctrl-C     quit"),
                    Line::from(""),
                    Line::from(" Register tabs: a cell shows its thread in its lane's colour; the"),
                    Line::from(" row numbers sit on the colour of the warp holding the row."),
                    Line::from(" Tile tabs: a cell shows the 16-byte chunk (0-7) of its 128-byte"),
                    Line::from(" line the element lies in: a swizzle shows as its XOR pattern."),
                    Line::from(" any other key closes this help"),
                ],
            );
        }
    }

    fn draw_grid(&mut self, f: &mut Frame, area: Rect) {
        const CELL: u16 = 4;
        const LABEL: u16 = 4;
        let vis = (
            area.height.saturating_sub(1).max(1) as u32,
            (area.width.saturating_sub(LABEL) / CELL).max(1) as u32,
        );
        let (sr, sc) = self.scroll_to(vis);
        let (cr, cc) = self.cursor();
        let Some(tab) = self.tabs.get(self.tab) else {
            return;
        };
        let (rows, cols) = tab.shape();
        let (rn, cn) = match tab {
            WgTab::Reg { grid, .. } => axis_names(&grid.operand),
            WgTab::Tile { grid, .. } => axis_names(&grid.operand),
        };
        let grey = Style::new().fg(Color::DarkGray);
        let mut head = vec![Span::raw(format!("{:<4}", format!("{rn}\\{cn}")))];
        for c in sc..(sc + vis.1).min(cols) {
            head.push(Span::styled(format!("{:>4}", c % 10000), grey));
        }
        let mut lines = vec![Line::from(head)];
        for r in sr..(sr + vis.0).min(rows) {
            let label = match tab {
                WgTab::Reg { grid, .. } => match grid.row_warp(r) {
                    Some(w) => {
                        let (x, y, z) = crate::palette::warp_rgb(w);
                        Style::new().fg(Color::White).bg(Color::Rgb(x, y, z))
                    }
                    None => grey,
                },
                WgTab::Tile { .. } => grey,
            };
            let mut spans = vec![Span::styled(format!("{r:>3} "), label)];
            for c in sc..(sc + vis.1).min(cols) {
                let (text, mut style) = match tab {
                    WgTab::Reg { grid, .. } => match grid.at(r, c) {
                        Some(o) => {
                            let mut st = Style::new().fg(Color::Black).bg(lane_color(o.lane()));
                            if let Some(h) = self.highlight {
                                st = if h == o.thread {
                                    st.add_modifier(Modifier::BOLD)
                                } else {
                                    grey
                                };
                            }
                            (format!("{:>3} ", o.thread), st)
                        }
                        None => ("  . ".into(), grey),
                    },
                    WgTab::Tile { grid, .. } => match grid.at(r, c) {
                        Some(p) => {
                            let chunk = (p.byte.rem_euclid(128) / 16) as u32;
                            (
                                format!("{chunk:>3} "),
                                Style::new().fg(Color::Black).bg(lane_color(chunk * 4)),
                            )
                        }
                        None => ("  . ".into(), grey),
                    },
                };
                if (r, c) == (cr, cc) {
                    style = style.add_modifier(Modifier::REVERSED | Modifier::BOLD);
                }
                spans.push(Span::styled(text, style));
            }
            lines.push(Line::from(spans));
        }
        f.render_widget(Paragraph::new(lines), area);
    }
}

impl Screen for WgApp {
    fn draw(&mut self, f: &mut Frame) {
        WgApp::draw(self, f);
    }
    fn key(&mut self, key: KeyEvent) {
        self.handle_event(key);
    }
    fn done(&self) -> bool {
        self.quit
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wgmma::testing;
    use ratatui::crossterm::event::KeyModifiers;

    fn lanes(id: &str) -> WgApp {
        let map = testing::lane_map(id);
        let v = crate::wgmma::find(id).unwrap();
        WgApp::new(&WgDoc::Lanes { map, v })
    }

    #[test]
    fn register_tabs_name_the_warp_lane_register_and_element() {
        let mut a = lanes("m64n256k16.f32.bf16.bf16.rs");
        let names: Vec<String> = a.tabs.iter().map(WgTab::name).collect();
        assert_eq!(names, ["A", "D", "C", "B smem"]);
        assert_eq!(a.tabs[1].shape(), (64, 256));
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
        assert_eq!(a.tabs[a.tab].name(), "A");
    }

    #[test]
    fn tile_tabs_name_the_byte_and_the_swizzle() {
        let map = testing::study(16, Major::K, Swizzle::B128);
        let v = crate::wgmma::find(&map.variant).unwrap();
        let mut a = WgApp::new(&WgDoc::Study { map, v });
        assert_eq!(a.title, "smem.16bit.K.128B");
        assert_eq!(
            a.tabs.iter().map(WgTab::name).collect::<Vec<_>>(),
            ["A smem", "B smem"]
        );
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
