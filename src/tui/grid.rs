//! The viewer of records drawn as tabs of numbered grids: wgmma lane maps and shared-memory
//! studies, `ldmatrix`/`stmatrix`/`movmatrix` maps and TMA maps. A [`GridModel`] says what the
//! record's tabs are, what each cell shows and what the status line says about a cell;
//! [`GridApp`] holds what the keys change (tab, cursor, scroll, the lane or thread lit) and
//! draws. Both are pure, so tests build the state and read the status line without a terminal.

use super::{Screen, Typed, common_key, follow, help_box, is_ctrl_c, lane_color, movement};
use crate::device::BackendKind;
use crate::layout::lanemap::Status;
use ratatui::Frame;
use ratatui::crossterm::event::{KeyCode, KeyEvent};
use ratatui::layout::{Constraint, Layout as Split, Rect};
use ratatui::style::{Color, Modifier, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Paragraph, Tabs, Wrap};

/// What one cell shows: a number, on the colour of lane `colour`; `owner` is the lane or thread
/// a typed number lights (cells without one keep their colour when something is lit).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Cell {
    pub text: u32,
    pub colour: u32,
    pub owner: Option<u32>,
}

/// A record as the grid viewer shows it.
pub trait GridModel {
    /// The variant or case, shown next to the tabs.
    fn title(&self) -> String;
    fn status(&self) -> Status;
    fn backend(&self) -> BackendKind;
    fn device(&self) -> String;
    fn tab_names(&self) -> Vec<String>;
    /// (rows, cols) of a tab's grid.
    fn shape(&self, tab: usize) -> (u32, u32);
    /// The names of a tab's row and column axes.
    fn axes(&self, tab: usize) -> (String, String);
    /// The info line's description of a tab (what it is, what a cell shows).
    fn what(&self, tab: usize) -> String;
    /// The cell at (row, col) of a tab; `None` where nothing lies.
    fn cell(&self, tab: usize, row: u32, col: u32) -> Option<Cell>;
    /// The background of a row's number (e.g. the warp that holds the row).
    fn row_colour(&self, _tab: usize, _row: u32) -> Option<Color> {
        None
    }
    /// What the status line says about (row, col) of a tab.
    fn describe(&self, tab: usize, row: u32, col: u32) -> String;
    /// What a typed number lights and how many there are: ("lane", 32), ("thread", 128).
    fn unit(&self) -> (&'static str, u32);
    /// The help overlay's title and its lines on what the tabs show.
    fn help(&self) -> (&'static str, Vec<&'static str>);
}

pub struct GridApp<M> {
    pub model: M,
    /// Index into the model's tabs.
    pub tab: usize,
    cursor: Vec<(u32, u32)>,
    scroll: Vec<(u32, u32)>,
    /// The lane or thread whose cells are lit.
    pub highlight: Option<u32>,
    typing: Typed,
    pub quit: bool,
    pub help: bool,
}

impl<M: GridModel> GridApp<M> {
    pub fn of(model: M) -> Self {
        let n = model.tab_names().len();
        GridApp {
            model,
            tab: 0,
            cursor: vec![(0, 0); n],
            scroll: vec![(0, 0); n],
            highlight: None,
            typing: Typed::default(),
            quit: false,
            help: false,
        }
    }

    fn tabs(&self) -> usize {
        self.cursor.len()
    }

    /// The current tab's name.
    pub fn tab_name(&self) -> String {
        self.model
            .tab_names()
            .get(self.tab)
            .cloned()
            .unwrap_or_default()
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
        if self.tab >= self.tabs() {
            return "no layout: the record has nothing to show".into();
        }
        let (r, c) = self.cursor();
        self.model.describe(self.tab, r, c)
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
        let n = self.tabs().max(1);
        match key {
            KeyCode::Char('?') => self.help = true,
            KeyCode::Tab => self.tab = (self.tab + 1) % n,
            KeyCode::BackTab => self.tab = (self.tab + n - 1) % n,
            _ if self
                .typing
                .key(key, self.model.unit().1, &mut self.highlight) => {}
            _ => {
                if let Some((dr, dc)) = movement(key) {
                    self.step(dr, dc);
                }
            }
        }
    }

    fn step(&mut self, dr: i64, dc: i64) {
        if self.tab >= self.tabs() {
            return;
        }
        let (rows, cols) = self.model.shape(self.tab);
        let (r, c) = self.cursor[self.tab];
        self.cursor[self.tab] = (
            (r as i64 + dr).clamp(0, rows.max(1) as i64 - 1) as u32,
            (c as i64 + dc).clamp(0, cols.max(1) as i64 - 1) as u32,
        );
    }

    /// Keep the cursor in a window of `visible` (rows, cols) cells; returns the window's first
    /// (row, col).
    pub fn scroll_to(&mut self, visible: (u32, u32)) -> (u32, u32) {
        if self.tab >= self.tabs() {
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
            // The cursor cell's description (wrapped: it may take two lines), then what is lit.
            Constraint::Length(3),
            Constraint::Length(1),
        ])
        .areas(area);
        let titles: Vec<Line> = self
            .model
            .tab_names()
            .into_iter()
            .map(|t| Line::from(format!(" {t} ")))
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
                self.model.title(),
                Style::new().add_modifier(Modifier::BOLD),
            )),
            id_area,
        );
        let backend = match self.model.backend() {
            BackendKind::Hardware => format!("hardware: {}", self.model.device()),
            BackendKind::Emulator => "EMULATOR (documented layout, not a hardware finding)".into(),
        };
        let word = format!("{:?}", self.model.status()).to_uppercase();
        let what = if self.tab < self.tabs() {
            self.model.what(self.tab)
        } else {
            "nothing to show".into()
        };
        f.render_widget(Paragraph::new(format!("{what} | {word} | {backend}")), info);
        self.draw_grid(f, body);
        let (unit, count) = self.model.unit();
        let mut state = Vec::new();
        if let Some(t) = self.highlight {
            state.push(format!("{unit} {t} lit"));
        }
        if !self.typing.0.is_empty() {
            state.push(format!("{unit}? {}_", self.typing.0));
        }
        f.render_widget(
            Paragraph::new(vec![
                Line::from(self.describe()),
                Line::from(state.join(" | ")),
            ])
            .wrap(Wrap { trim: false }),
            status,
        );
        f.render_widget(
            Paragraph::new(format!(
                "arrows/hjkl PgUp/PgDn move  Tab tab  0-{}+Enter {unit}  ? help  q quit",
                count - 1
            ))
            .style(Style::new().fg(Color::DarkGray)),
            help,
        );
        if self.help {
            let (title, notes) = self.model.help();
            let mut text = vec![
                Line::from(format!(" {title}: keys ")),
                Line::from(""),
                Line::from(" arrows / h j k l   move the cursor; the status line names the cell"),
                Line::from(
                    " PgUp / PgDn        16 rows up / down; Home / End: first / last column",
                ),
                Line::from(" Tab / Shift-Tab    next / previous tab"),
                Line::from(format!(
                    "{:<20}light up every cell of that {unit}; Enter clears",
                    format!(" 0-{} then Enter", count - 1)
                )),
                Line::from(" ?                  this help"),
                Line::from(" q, Esc, Ctrl-C     quit"),
                Line::from(""),
            ];
            text.extend(notes.into_iter().map(|n| Line::from(format!(" {n}"))));
            text.push(Line::from(" any other key closes this help"));
            help_box(f, area, text);
        }
    }

    fn draw_grid(&mut self, f: &mut Frame, area: Rect) {
        if self.tab >= self.tabs() {
            return;
        }
        let t = self.tab;
        let model = &self.model;
        let grid = Grid {
            shape: model.shape(t),
            axes: model.axes(t),
            cursor: self.cursor[t],
            highlight: self.highlight,
        };
        self.scroll[t] = grid.draw(
            f,
            area,
            self.scroll[t],
            |r, c| model.cell(t, r, c),
            |r| model.row_colour(t, r),
        );
    }
}

/// One grid to draw: its shape, axis names, cursor and the lane or thread lit.
pub(crate) struct Grid {
    pub shape: (u32, u32),
    pub axes: (String, String),
    pub cursor: (u32, u32),
    pub highlight: Option<u32>,
}

impl Grid {
    /// Draw the cells in view (the window moved from `scroll` as little as keeps the cursor in
    /// it); returns the window's first (row, col).
    pub(crate) fn draw(
        &self,
        f: &mut Frame,
        area: Rect,
        scroll: (u32, u32),
        cell: impl Fn(u32, u32) -> Option<Cell>,
        row_colour: impl Fn(u32) -> Option<Color>,
    ) -> (u32, u32) {
        const CELL: u16 = 4;
        const LABEL: u16 = 4;
        let vis = (
            area.height.saturating_sub(1).max(1) as u32,
            (area.width.saturating_sub(LABEL) / CELL).max(1) as u32,
        );
        let (sr, sc) = follow(self.cursor, scroll, vis);
        let (cr, cc) = self.cursor;
        let (rows, cols) = self.shape;
        let (rn, cn) = &self.axes;
        let grey = Style::new().fg(Color::DarkGray);
        let mut head = vec![Span::raw(format!("{:<4}", format!("{rn}\\{cn}")))];
        for c in sc..(sc + vis.1).min(cols) {
            head.push(Span::styled(format!("{:>4}", c % 10000), grey));
        }
        let mut lines = vec![Line::from(head)];
        for r in sr..(sr + vis.0).min(rows) {
            let label = match row_colour(r) {
                Some(bg) => Style::new().fg(Color::White).bg(bg),
                None => grey,
            };
            let mut spans = vec![Span::styled(format!("{r:>3} "), label)];
            for c in sc..(sc + vis.1).min(cols) {
                let (text, mut style) = match cell(r, c) {
                    Some(cell) => {
                        let mut st = Style::new().fg(Color::Black).bg(lane_color(cell.colour));
                        if let (Some(h), Some(o)) = (self.highlight, cell.owner) {
                            st = if h == o {
                                st.add_modifier(Modifier::BOLD)
                            } else {
                                grey
                            };
                        }
                        (format!("{:>3} ", cell.text % 1000), st)
                    }
                    None => ("  . ".into(), grey),
                };
                if (r, c) == (cr, cc) {
                    style = style.add_modifier(Modifier::REVERSED | Modifier::BOLD);
                }
                spans.push(Span::styled(text, style));
            }
            lines.push(Line::from(spans));
        }
        f.render_widget(Paragraph::new(lines), area);
        (sr, sc)
    }
}

impl<M: GridModel> Screen for GridApp<M> {
    fn draw(&mut self, f: &mut Frame) {
        GridApp::draw(self, f);
    }
    fn key(&mut self, key: KeyEvent) {
        self.handle_event(key);
    }
    fn done(&self) -> bool {
        self.quit
    }
}
