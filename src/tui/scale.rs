//! The scale tab: which lane and byte feed which row (scale A) or column (scale B), read from
//! the `<stem>.scale.csv` that `fp4probe scale` writes next to the lane map.

use ratatui::Frame;
use ratatui::layout::Rect;
use ratatui::style::{Color, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::Paragraph;
use std::path::Path;

/// One row of a scale map CSV: `operand,byte_id,thread_id,lane,byte,row_or_col,kblock`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ScaleEntry {
    pub operand: String,
    pub byte_id: u32,
    pub thread_id: u32,
    pub lane: u32,
    pub byte: u32,
    pub row_or_col: String,
    pub kblock: String,
}

#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ScaleTable {
    pub entries: Vec<ScaleEntry>,
    pub source: String,
}

impl ScaleTable {
    /// Read a scale CSV; errors name the file and line.
    pub fn load(path: &Path) -> anyhow::Result<Self> {
        let mut rdr =
            csv::Reader::from_path(path).map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))?;
        let mut entries = Vec::new();
        for (i, rec) in rdr.records().enumerate() {
            let rec = rec.map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))?;
            let field = |j: usize| rec.get(j).unwrap_or("").to_string();
            let num = |j: usize| -> anyhow::Result<u32> {
                field(j).parse().map_err(|_| {
                    anyhow::anyhow!(
                        "{}:{}: field {} is not a number: '{}'",
                        path.display(),
                        i + 2,
                        j + 1,
                        field(j)
                    )
                })
            };
            entries.push(ScaleEntry {
                operand: field(0),
                byte_id: num(1)?,
                thread_id: num(2)?,
                lane: num(3)?,
                byte: num(4)?,
                row_or_col: field(5),
                kblock: field(6),
            });
        }
        Ok(ScaleTable {
            entries,
            source: path.display().to_string(),
        })
    }

    /// Distinct (operand, byte-id, thread-id) selector settings, in file order.
    pub fn selectors(&self) -> Vec<(String, u32, u32)> {
        let mut out: Vec<(String, u32, u32)> = Vec::new();
        for e in &self.entries {
            let k = (e.operand.clone(), e.byte_id, e.thread_id);
            if !out.contains(&k) {
                out.push(k);
            }
        }
        out
    }
}

pub fn draw(f: &mut Frame, table: Option<&ScaleTable>, selector: usize, area: Rect) {
    let Some(t) = table.filter(|t| !t.entries.is_empty()) else {
        f.render_widget(
            Paragraph::new(vec![
                Line::from("No scale map next to this lane map."),
                Line::from("Run `fp4probe scale --variant <id>` to measure which lane and byte"),
                Line::from(
                    "feed each row of A and column of B (sm_120a hardware, or the emulator).",
                ),
            ]),
            area,
        );
        return;
    };
    let sels = t.selectors();
    let (op, byte_id, thread_id) = sels[selector.min(sels.len() - 1)].clone();
    let what = if op == "A" { "row" } else { "col" };
    let mut lines = vec![Line::from(format!(
        "scale_{} {{byte-id {byte_id}, thread-id {thread_id}}} ({}/{}): lane x byte -> {what}/k-block",
        op.to_lowercase(),
        selector.min(sels.len() - 1) + 1,
        sels.len()
    ))];
    let cell = |lane: u32, byte: u32| -> (String, Style) {
        let hit = t.entries.iter().find(|e| {
            e.operand == op
                && e.byte_id == byte_id
                && e.thread_id == thread_id
                && e.lane == lane
                && e.byte == byte
        });
        match hit {
            Some(e) if !e.row_or_col.is_empty() && e.row_or_col != "-" => (
                format!("{}{}/{}", &what[..1], e.row_or_col, e.kblock),
                Style::new().fg(Color::Black).bg(super::lane_color(lane)),
            ),
            _ => ("  .".to_string(), Style::new().fg(Color::DarkGray)),
        }
    };
    let rows = area.height.saturating_sub(2).min(16) as u32;
    for l in 0..rows {
        let mut spans = Vec::new();
        for half in [0, 16] {
            let lane = l + half;
            spans.push(Span::styled(
                format!("{lane:>3} "),
                Style::new().fg(Color::DarkGray),
            ));
            for byte in 0..4 {
                let (s, st) = cell(lane, byte);
                spans.push(Span::styled(format!("{s:<8}"), st));
            }
            spans.push(Span::raw("  "));
        }
        lines.push(Line::from(spans));
    }
    f.render_widget(Paragraph::new(lines), area);
}
