//! `fp4probe view`: a terminal viewer of a lane map. Tabs per operand, the matrix grid coloured
//! by lane, a cursor that names the slot under it, lane highlight, a scale tab for block-scaled
//! variants, a metadata tab per sparsity selector for `mma.sp` ([`MetaGrid`]), and a diff mode
//! against another map or the documented layout. The other records are tabs of numbered grids
//! ([`GridApp`] over a [`GridModel`]): wgmma lane maps and shared-memory studies ([`WgApp`]),
//! `ldmatrix`/`stmatrix`/`movmatrix` maps ([`MoveApp`]) and TMA maps ([`TmaApp`]).
//!
//! `App` holds the state and handles keys; `draw` renders it. Both are pure so that tests drive
//! them through ratatui's `TestBackend`; `run` connects them to the real terminal, and refuses
//! (an error, not a panic) when there is no terminal to connect to.

pub mod grid;
mod meta;
mod movement;
mod scale;
mod tma;
mod wgmma;

use crate::isa::{Operand, Variant};
use crate::layout::documented::documented;
use crate::layout::{Coord, LaneMap, Layout, SlotSpace};
pub use grid::{Cell, GridApp, GridModel};
pub use meta::MetaGrid;
pub use movement::{MoveApp, MoveModel};
use ratatui::Frame;
use ratatui::crossterm::event::{self, Event, KeyCode, KeyEvent, KeyEventKind, KeyModifiers};
use ratatui::layout::{Constraint, Layout as Split, Rect};
use ratatui::style::{Color, Modifier, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Paragraph, Tabs};
pub use scale::ScaleTable;
pub use tma::{TmaApp, TmaModel};
pub use wgmma::{WgApp, WgModel, WgTab};

/// Which tab is shown.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Tab {
    Operand(Operand),
    Scale,
    /// The metadata map of an `mma.sp` variant under its i-th selector.
    Meta(usize),
}

/// What the diff compares against.
pub struct DiffTarget {
    pub name: String,
    pub layout: Layout,
}

pub struct App {
    pub map: LaneMap,
    pub variant: Variant,
    layout: Layout,
    pub tab: Tab,
    /// Cursor (row, col) per operand tab.
    cursor: [(u32, u32); 4],
    /// First visible (row, col) of the grid.
    scroll: [(u32, u32); 4],
    pub highlight: Option<u32>,
    typing: Typed,
    pub diff_on: bool,
    diff: DiffTarget,
    scale: Option<ScaleTable>,
    scale_selector: usize,
    /// `mma.sp`: one metadata grid per selector, sharing one cursor and window.
    meta: Vec<MetaGrid>,
    meta_cursor: (u32, u32),
    meta_scroll: (u32, u32),
    pub quit: bool,
    pub help: bool,
}

/// A lane's colour (the same palette as the SVG pictures).
pub fn lane_color(lane: u32) -> Color {
    let (r, g, b) = crate::palette::lane_rgb(lane);
    Color::Rgb(r, g, b)
}

const OPS: [Operand; 4] = [Operand::A, Operand::B, Operand::C, Operand::D];

impl App {
    /// `diff`: another map's layout, or `None` for the documented layout of the variant.
    pub fn new(
        map: LaneMap,
        diff: Option<DiffTarget>,
        scale: Option<ScaleTable>,
    ) -> anyhow::Result<Self> {
        let variant = map.variant()?;
        let layout = map.layout()?;
        let meta = map
            .metadata
            .as_ref()
            .map(|m| MetaGrid::all(&variant, m))
            .unwrap_or_default();
        let diff = diff.unwrap_or_else(|| DiffTarget {
            name: "documented".into(),
            layout: documented(&variant),
        });
        Ok(App {
            map,
            variant,
            layout,
            tab: Tab::Operand(Operand::A),
            cursor: [(0, 0); 4],
            scroll: [(0, 0); 4],
            highlight: None,
            typing: Typed::default(),
            diff_on: false,
            diff,
            scale,
            scale_selector: 0,
            meta,
            meta_cursor: (0, 0),
            meta_scroll: (0, 0),
            quit: false,
            help: false,
        })
    }

    fn op_index(&self) -> Option<usize> {
        match self.tab {
            Tab::Operand(op) => OPS.iter().position(|&o| o == op),
            Tab::Scale | Tab::Meta(_) => None,
        }
    }

    fn tabs(&self) -> Vec<Tab> {
        let mut t: Vec<Tab> = OPS.iter().map(|&o| Tab::Operand(o)).collect();
        if self.variant.scale.is_some() {
            t.push(Tab::Scale);
        }
        t.extend((0..self.meta.len()).map(Tab::Meta));
        t
    }

    /// The slot holding (row, col) of an operand, under a layout.
    fn slot_at(&self, layout: &Layout, op: Operand, row: u32, col: u32) -> Option<(u32, u32, u32)> {
        let space = SlotSpace::of(&self.variant.fragment(op));
        layout
            .operand(op)
            .iter()
            .position(|c| *c == Coord { row, col })
            .map(|i| {
                let s = space.slot(i);
                (s.lane, s.reg, s.elem)
            })
    }

    /// On a metadata tab, what the status line says about the field under the cursor.
    pub fn meta_describe(&self) -> Option<String> {
        let Tab::Meta(i) = self.tab else { return None };
        let (r, c) = self.meta_cursor;
        self.meta.get(i).map(|g| g.describe(r, c))
    }

    /// A key press from the terminal: Ctrl-C quits (in raw mode it arrives as a key, not as a
    /// signal, and would otherwise read as `c`, the C tab); everything else goes to
    /// [`App::handle_key`].
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
        let tabs = self.tabs();
        let pos = tabs.iter().position(|t| *t == self.tab).unwrap_or(0);
        match key {
            KeyCode::Char('?') => self.help = true,
            KeyCode::Tab => self.tab = tabs[(pos + 1) % tabs.len()],
            KeyCode::BackTab => self.tab = tabs[(pos + tabs.len() - 1) % tabs.len()],
            KeyCode::Char('m') if !self.meta.is_empty() => self.tab = Tab::Meta(0),
            KeyCode::Char(c @ ('a' | 'b' | 'c' | 'D' | 's')) => {
                self.tab = match c {
                    'a' => Tab::Operand(Operand::A),
                    'b' => Tab::Operand(Operand::B),
                    'c' => Tab::Operand(Operand::C),
                    'D' => Tab::Operand(Operand::D),
                    _ if self.variant.scale.is_some() => Tab::Scale,
                    _ => self.tab,
                }
            }
            KeyCode::Char('d') => self.diff_on = !self.diff_on,
            _ if self.typing.key(key, 32, &mut self.highlight) => {}
            _ => {
                if let Some((dr, dc)) = movement(key) {
                    self.step(dr, dc);
                }
            }
        }
    }

    fn step(&mut self, dr: i64, dc: i64) {
        match self.op_index() {
            Some(i) => {
                let f = self.variant.fragment(OPS[i]);
                let (r, c) = self.cursor[i];
                self.cursor[i] = (
                    (r as i64 + dr).clamp(0, f.rows as i64 - 1) as u32,
                    (c as i64 + dc).clamp(0, f.cols as i64 - 1) as u32,
                );
            }
            None if matches!(self.tab, Tab::Meta(_)) => {
                let Some(g) = self.meta.first() else { return };
                let (r, c) = self.meta_cursor;
                self.meta_cursor = (
                    (r as i64 + dr).clamp(0, g.rows.max(1) as i64 - 1) as u32,
                    (c as i64 + dc).clamp(0, g.cols.max(1) as i64 - 1) as u32,
                );
            }
            None => {
                if let Some(t) = &self.scale {
                    let n = t.selectors().len().max(1);
                    self.scale_selector =
                        (self.scale_selector as i64 + dc + dr).rem_euclid(n as i64) as usize;
                }
            }
        }
    }
}

/// The number being typed to light a lane (or thread) up: digits, Backspace, then Enter.
#[derive(Clone, Debug, Default)]
pub(crate) struct Typed(pub String);

impl Typed {
    /// Take a digit, Backspace or Enter (whether the key was one). Enter sets `lit` to the
    /// number typed if it is below `limit`, and clears it otherwise (Enter alone clears).
    pub(crate) fn key(&mut self, key: KeyCode, limit: u32, lit: &mut Option<u32>) -> bool {
        match key {
            KeyCode::Char(c) if c.is_ascii_digit() => {
                if self.0.len() < (limit - 1).to_string().len() {
                    self.0.push(c);
                }
            }
            KeyCode::Backspace => {
                self.0.pop();
            }
            KeyCode::Enter => {
                *lit = self.0.parse().ok().filter(|&l: &u32| l < limit);
                self.0.clear();
            }
            _ => return false,
        }
        true
    }
}

/// Ctrl-C as the terminal delivers it in raw mode: a key, not a signal (it would otherwise
/// read as `c`).
pub(crate) fn is_ctrl_c(key: &KeyEvent) -> bool {
    key.modifiers.contains(KeyModifiers::CONTROL) && key.code == KeyCode::Char('c')
}

/// The keys every viewer reads alike before its own: q and Esc quit (the help overlay open or
/// not), and any other key closes an open help overlay. Whether the key was used.
pub(crate) fn common_key(key: KeyCode, quit: &mut bool, help: &mut bool) -> bool {
    if matches!(key, KeyCode::Char('q') | KeyCode::Esc) {
        *quit = true;
        return true;
    }
    std::mem::take(help)
}

/// The cursor step (rows, cols) of a movement key: arrows and h j k l one cell, PgUp/PgDn 16
/// rows, Home/End to the first/last column (a step past the edge, which the grid clamps).
pub(crate) fn movement(key: KeyCode) -> Option<(i64, i64)> {
    Some(match key {
        KeyCode::Left | KeyCode::Char('h') => (0, -1),
        KeyCode::Right | KeyCode::Char('l') => (0, 1),
        KeyCode::Up | KeyCode::Char('k') => (-1, 0),
        KeyCode::Down | KeyCode::Char('j') => (1, 0),
        KeyCode::PageUp => (-16, 0),
        KeyCode::PageDown => (16, 0),
        KeyCode::Home => (0, -(1 << 20)),
        KeyCode::End => (0, 1 << 20),
        _ => return None,
    })
}

const CELL: u16 = 3;
const ROW_LABEL: u16 = 4;

pub fn draw(f: &mut Frame, app: &mut App) {
    let area = f.area();
    let [top, info, body, status, help] = Split::vertical([
        Constraint::Length(1),
        Constraint::Length(1),
        Constraint::Min(3),
        // The cursor's slot, then the lane highlight and diff summary: one line of 80 columns
        // holds either, not both.
        Constraint::Length(2),
        Constraint::Length(1),
    ])
    .areas(area);
    let titles: Vec<Line> = app
        .tabs()
        .iter()
        .map(|t| match t {
            Tab::Operand(o) => Line::from(format!(" {} ", o.name())),
            Tab::Scale => Line::from(" Scale "),
            Tab::Meta(i) => Line::from(format!(" {} ", app.meta[*i].name())),
        })
        .collect();
    let sel = app.tabs().iter().position(|t| *t == app.tab).unwrap_or(0);
    let [tabs_area, id_area] =
        Split::horizontal([Constraint::Length(38), Constraint::Min(10)]).areas(top);
    f.render_widget(
        Tabs::new(titles)
            .select(sel)
            .highlight_style(Style::new().add_modifier(Modifier::REVERSED))
            .divider("|"),
        tabs_area,
    );
    f.render_widget(
        Paragraph::new(Span::styled(
            app.map.variant.clone(),
            Style::new().add_modifier(Modifier::BOLD),
        )),
        id_area,
    );
    let backend = match app.map.backend {
        crate::device::BackendKind::Hardware => format!("hardware: {}", app.map.provenance.device),
        crate::device::BackendKind::Emulator => {
            "EMULATOR (documented layout, not a hardware finding)".to_string()
        }
    };
    let status_word = format!("{:?}", app.map.status).to_uppercase();
    match app.op_index() {
        Some(i) => {
            let op = OPS[i];
            let fr = app.variant.fragment(op);
            f.render_widget(
                Paragraph::new(format!(
                    "{} {}x{} {} | {} regs x {} | {} | {}",
                    op.name(),
                    fr.rows,
                    fr.cols,
                    fr.elem,
                    fr.regs,
                    fr.elems_per_reg(),
                    status_word,
                    backend
                )),
                info,
            );
            draw_grid(f, app, i, body);
            let (r, c) = app.cursor[i];
            let here = app.slot_at(&app.layout, op, r, c);
            let mut cursor = match here {
                Some(slot) => format!(
                    "{} slot {} -> (row {r}, col {c})",
                    op.name(),
                    slot_name(slot)
                ),
                None => format!("{} (row {r}, col {c}): no slot", op.name()),
            };
            let mut state = Vec::new();
            if let Some(l) = app.highlight {
                state.push(format!("lane {l} lit"));
            }
            if !app.typing.0.is_empty() {
                state.push(format!("lane? {}_", app.typing.0));
            }
            if app.diff_on {
                let n = diff_count(app, op);
                state.push(format!("diff vs {}: {n} differ", app.diff.name));
                if let Some(other) = app
                    .slot_at(&app.diff.layout, op, r, c)
                    .filter(|o| Some(*o) != here)
                {
                    cursor += &format!(" ({}: {})", app.diff.name, slot_name(other));
                }
            }
            f.render_widget(
                Paragraph::new(vec![Line::from(cursor), Line::from(state.join(" | "))]),
                status,
            );
        }
        None if matches!(app.tab, Tab::Meta(_)) => {
            let Tab::Meta(i) = app.tab else { return };
            let g = &app.meta[i];
            f.render_widget(
                Paragraph::new(format!("{} | {status_word} | {backend}", g.what())),
                info,
            );
            app.meta_scroll = g.draw(f, body, app.meta_cursor, app.meta_scroll, app.highlight);
            let mut state = vec![g.lanes()];
            if let Some(l) = app.highlight {
                state.push(format!("lane {l} lit"));
            }
            if !app.typing.0.is_empty() {
                state.push(format!("lane? {}_", app.typing.0));
            }
            f.render_widget(
                // A field placed elsewhere than the documented model says where the model puts
                // it: a line too long for 80 columns, wrapped over the lanes line.
                Paragraph::new(vec![
                    Line::from(app.meta_describe().unwrap_or_default()),
                    Line::from(state.join(" | ")),
                ])
                .wrap(ratatui::widgets::Wrap { trim: false }),
                status,
            );
        }
        None => {
            f.render_widget(
                Paragraph::new(format!("block scales | {status_word} | {backend}")),
                info,
            );
            scale::draw(f, app.scale.as_ref(), app.scale_selector, body);
            f.render_widget(Paragraph::new("←/→ selector"), status);
        }
    }
    f.render_widget(
        Paragraph::new(
            "arrows/hjkl move  Tab a b c D s tab  0-31+Enter lane  d diff  ? help  q/Esc quit",
        )
        .style(Style::new().fg(Color::DarkGray)),
        help,
    );
    if app.help {
        draw_help(f, area);
    }
}

/// A slot as the status line names it: `lane 5 r0.e1` is element 1 of register 0 of lane 5.
fn slot_name((lane, reg, elem): (u32, u32, u32)) -> String {
    format!("lane {lane} r{reg}.e{elem}")
}

fn diff_count(app: &App, op: Operand) -> usize {
    app.layout
        .operand(op)
        .iter()
        .zip(app.diff.layout.operand(op))
        .filter(|(a, b)| a != b)
        .count()
}

fn draw_grid(f: &mut Frame, app: &mut App, i: usize, area: Rect) {
    let op = OPS[i];
    let fr = app.variant.fragment(op);
    let vis_cols = ((area.width.saturating_sub(ROW_LABEL)) / CELL).max(1) as u32;
    let vis_rows = area.height.saturating_sub(1).max(1) as u32;
    let (cr, cc) = app.cursor[i];
    let (sr, sc) = follow(app.cursor[i], app.scroll[i], (vis_rows, vis_cols));
    app.scroll[i] = (sr, sc);
    // Cell → slot lookup once per frame.
    let space = SlotSpace::of(&fr);
    let mut owner = vec![(0u32, 0u32, 0u32); (fr.rows * fr.cols) as usize];
    for (idx, c) in app.layout.operand(op).iter().enumerate() {
        let s = space.slot(idx);
        owner[(c.row * fr.cols + c.col) as usize] = (s.lane, s.reg, s.elem);
    }
    let differs: Vec<bool> = if app.diff_on {
        let mut d = vec![false; owner.len()];
        for (a, b) in app
            .layout
            .operand(op)
            .iter()
            .zip(app.diff.layout.operand(op))
        {
            if a != b {
                d[(a.row * fr.cols + a.col) as usize] = true;
            }
        }
        d
    } else {
        vec![]
    };
    let (rname, cname) = match op {
        Operand::A => ("m", "k"),
        Operand::B => ("k", "n"),
        _ => ("m", "n"),
    };
    let mut lines = Vec::new();
    let mut head = vec![Span::raw(format!("{:<4}", format!("{rname}\\{cname}")))];
    for c in sc..(sc + vis_cols).min(fr.cols) {
        head.push(Span::styled(
            format!("{:>3}", c % 1000),
            Style::new().fg(Color::DarkGray),
        ));
    }
    lines.push(Line::from(head));
    for r in sr..(sr + vis_rows).min(fr.rows) {
        let mut spans = vec![Span::styled(
            format!("{r:>3} "),
            Style::new().fg(Color::DarkGray),
        )];
        for c in sc..(sc + vis_cols).min(fr.cols) {
            let cell = (r * fr.cols + c) as usize;
            let (lane, _, _) = owner[cell];
            let mut style = Style::new().fg(Color::Black).bg(lane_color(lane));
            if let Some(h) = app.highlight {
                style = if h == lane {
                    Style::new()
                        .fg(Color::Black)
                        .bg(lane_color(lane))
                        .add_modifier(Modifier::BOLD)
                } else {
                    Style::new().fg(Color::DarkGray)
                };
            }
            if app.diff_on {
                style = if differs[cell] {
                    Style::new().fg(Color::White).bg(Color::Red)
                } else {
                    Style::new().fg(Color::DarkGray)
                };
            }
            if (r, c) == (cr, cc) {
                style = style.add_modifier(Modifier::REVERSED | Modifier::BOLD);
            }
            spans.push(Span::styled(format!("{lane:>2} "), style));
        }
        lines.push(Line::from(spans));
    }
    f.render_widget(Paragraph::new(lines), area);
}

/// The first visible (row, col) of a grid that keeps `cursor` in view: `scroll` moved as
/// little as it must for a window of `visible` (rows, cols).
pub fn follow(cursor: (u32, u32), scroll: (u32, u32), visible: (u32, u32)) -> (u32, u32) {
    let axis = |c: u32, s: u32, v: u32| {
        let v = v.max(1);
        if c < s {
            c
        } else if c >= s + v {
            c + 1 - v
        } else {
            s
        }
    };
    (
        axis(cursor.0, scroll.0, visible.0),
        axis(cursor.1, scroll.1, visible.1),
    )
}

/// A framed box of `text` in the middle of `area`, over what is drawn there.
fn help_box(f: &mut Frame, area: Rect, text: Vec<Line>) {
    let w = 76.min(area.width);
    let h = (text.len() as u16 + 2).min(area.height);
    let r = Rect {
        x: area.x + (area.width - w) / 2,
        y: area.y + (area.height - h) / 2,
        width: w,
        height: h,
    };
    f.render_widget(ratatui::widgets::Clear, r);
    f.render_widget(
        Paragraph::new(text).block(ratatui::widgets::Block::bordered().title(" help ")),
        r,
    );
}

fn draw_help(f: &mut Frame, area: Rect) {
    let text = vec![
        Line::from(" fp4probe view: keys "),
        Line::from(""),
        Line::from(" arrows / h j k l   move the cursor; the status line names the element"),
        Line::from("                    under it: A slot lane 5 r0.e1 -> (row 1, col 3) is"),
        Line::from("                    element 1 of register 0 of lane 5, at row 1, col 3"),
        Line::from(" Tab / Shift-Tab    next / previous tab; a b c D jump to A B C D, s scales,"),
        Line::from("                    m the metadata of mma.sp (a tab M0, M1.. per selector)"),
        Line::from(" 0-31 then Enter    light up every cell held by that lane"),
        Line::from(" Enter              (no digits typed) clear the highlight"),
        Line::from(" Backspace          delete a typed digit"),
        Line::from(" d                  diff mode: cells whose slot differs from the other map"),
        Line::from(" ?                  this help"),
        Line::from(" q, Esc, Ctrl-C     quit"),
        Line::from(""),
        Line::from(" Cells show the lane that holds the element, coloured by lane; on a"),
        Line::from(" metadata tab the lane whose metadata register holds the field."),
        Line::from(" any other key closes this help"),
    ];
    help_box(f, area, text);
}

/// Why the viewer cannot run here: it draws on standard output and reads keys from standard
/// input, so both must be a terminal. `None` when both are.
pub fn no_terminal(stdin_is_tty: bool, stdout_is_tty: bool) -> Option<String> {
    let which = match (stdin_is_tty, stdout_is_tty) {
        (true, true) => return None,
        (true, false) => "standard output is not a terminal",
        (false, true) => "standard input is not a terminal",
        (false, false) => "neither standard input nor standard output is a terminal",
    };
    Some(format!(
        "fp4probe view is interactive and needs a terminal, but {which} (redirected, piped or \
         run without one); `fp4probe show MAP` prints the map as text"
    ))
}

/// A committed record of the repository, for the tests of the viewers.
#[cfg(test)]
pub(crate) fn committed(path: &str) -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join(path)
}

/// What the terminal loop drives: a state that draws itself and takes keys.
pub trait Screen {
    fn draw(&mut self, f: &mut Frame);
    fn key(&mut self, key: KeyEvent);
    fn done(&self) -> bool;
}

impl Screen for App {
    fn draw(&mut self, f: &mut Frame) {
        draw(f, self);
    }
    fn key(&mut self, key: KeyEvent) {
        self.handle_event(key);
    }
    fn done(&self) -> bool {
        self.quit
    }
}

/// Run a viewer on the real terminal until a quit key (q, Esc, Ctrl-C).
pub fn run(mut app: impl Screen) -> anyhow::Result<()> {
    use std::io::IsTerminal;
    if let Some(why) = no_terminal(
        std::io::stdin().is_terminal(),
        std::io::stdout().is_terminal(),
    ) {
        anyhow::bail!(why);
    }
    let mut terminal = match ratatui::try_init() {
        Ok(t) => t,
        Err(e) => {
            // Raw mode may be on already when entering the alternate screen failed.
            let _ = ratatui::try_restore();
            anyhow::bail!("fp4probe view cannot initialise the terminal: {e}");
        }
    };
    let result = (|| -> anyhow::Result<()> {
        while !app.done() {
            terminal.draw(|f| app.draw(f))?;
            if let Event::Key(k) = event::read()?
                && k.kind == KeyEventKind::Press
            {
                app.key(k);
            }
        }
        Ok(())
    })();
    ratatui::restore();
    result
}
