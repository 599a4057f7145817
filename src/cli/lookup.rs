//! `fp4probe lookup`: the everyday question about a lane map. Which (row, col) does lane L,
//! register R, element E hold? And which slot holds (row, col)?

use crate::codegen::tables;
use crate::isa::{Operand, Variant};
use crate::layout::{Coord, LaneMap, Slot, SlotSpace};
use anyhow::{Context, Result, bail};
use std::path::Path;
use std::process::ExitCode;

#[derive(clap::Args, Debug)]
#[command(group(clap::ArgGroup::new("query").required(true).multiple(true).args(["lane", "row"])))]
pub struct Args {
    /// A lane map JSON file (`fp4probe fragment` wrote it), or a variant: catalog id or PTX
    /// instruction text. A variant is answered from the tables built into fp4probe (the
    /// committed maps: hardware-measured where one exists, else the emulator's).
    pub map: String,
    /// The operand: A, B, C or D.
    #[arg(long, value_parser = parse_operand)]
    pub operand: Operand,
    /// Slot → element: the lane (0..31).
    #[arg(long, requires_all = ["reg", "elem"], conflicts_with_all = ["row", "col"])]
    pub lane: Option<u32>,
    /// Slot → element: the register of the lane's fragment.
    #[arg(long, requires = "lane")]
    pub reg: Option<u32>,
    /// Slot → element: the element inside the register (0 where a register holds one).
    #[arg(long, requires = "lane")]
    pub elem: Option<u32>,
    /// Element → slot: the row (m for A, C, D; k for B).
    #[arg(long, requires = "col")]
    pub row: Option<u32>,
    /// Element → slot: the column (k for A; n for B, C, D).
    #[arg(long, requires = "row")]
    pub col: Option<u32>,
}

fn parse_operand(s: &str) -> Result<Operand, String> {
    match s {
        "A" | "a" => Ok(Operand::A),
        "B" | "b" => Ok(Operand::B),
        "C" | "c" => Ok(Operand::C),
        "D" | "d" => Ok(Operand::D),
        _ => Err(format!("unknown operand '{s}' (A, B, C or D)")),
    }
}

/// One operand's map, from a file or from the built-in tables.
struct OperandView {
    variant: Variant,
    /// Where the map comes from, for the answer's first line.
    source: String,
    space: SlotSpace,
    rows: u32,
    cols: u32,
    /// Per flat slot index: the element it holds.
    coords: Vec<Coord>,
}

impl OperandView {
    fn load(what: &str, op: Operand) -> Result<Self> {
        let as_file = Path::new(what);
        if as_file.is_file() || what.ends_with(".json") {
            let map = LaneMap::load(as_file)?;
            let variant = map.variant()?;
            let layout = map
                .layout()
                .with_context(|| format!("{what} holds no layout to look up"))?;
            let f = variant.fragment(op);
            return Ok(OperandView {
                source: format!("{what} ({:?} map, {:?})", map.backend, map.status),
                space: SlotSpace::of(&f),
                rows: f.rows,
                cols: f.cols,
                coords: layout.operand(op).to_vec(),
                variant,
            });
        }
        let variant = crate::isa::find(what).with_context(|| {
            format!(
                "'{what}' is neither a lane map file nor a catalog variant (id or PTX \
                 instruction); `fp4probe catalog` lists the variants"
            )
        })?;
        if let Some(why) = variant.not_probed() {
            bail!(
                "no built-in tables for {}: it is not probed: {why}",
                variant.id()
            );
        }
        let t = tables::lookup(&variant.id())
            .with_context(|| format!("no built-in tables for {}", variant.id()))?;
        let ot = t.operand(op);
        Ok(OperandView {
            source: format!(
                "built-in tables from {} ({})",
                t.source,
                if t.hardware {
                    "hardware-measured"
                } else {
                    "emulator: the documented layout, not hardware-measured"
                }
            ),
            space: SlotSpace {
                regs: ot.regs,
                elems_per_reg: ot.elems_per_reg,
            },
            rows: ot.rows,
            cols: ot.cols,
            coords: ot
                .row
                .iter()
                .zip(ot.col)
                .map(|(&row, &col)| Coord {
                    row: row.into(),
                    col: col.into(),
                })
                .collect(),
            variant,
        })
    }
}

/// The answer's lines: slot → element, or element → slot.
fn answer(view: &OperandView, op: Operand, a: &Args) -> Result<String> {
    let (rn, cn) = match op {
        Operand::A => ("m", "k"),
        Operand::B => ("k", "n"),
        Operand::C | Operand::D => ("m", "n"),
    };
    if let (Some(lane), Some(reg), Some(elem)) = (a.lane, a.reg, a.elem) {
        let sp = &view.space;
        if lane >= 32 {
            bail!("--lane {lane} is out of range: a warp has lanes 0..31");
        }
        if reg >= sp.regs {
            bail!(
                "--reg {reg} is out of range: {} has {} register(s) per lane (0..{})",
                op.name(),
                sp.regs,
                sp.regs - 1
            );
        }
        if elem >= sp.elems_per_reg {
            bail!(
                "--elem {elem} is out of range: {} holds {} element(s) per register (0..{})",
                op.name(),
                sp.elems_per_reg,
                sp.elems_per_reg - 1
            );
        }
        let c = view.coords[sp.index(Slot { lane, reg, elem })];
        return Ok(format!(
            "{} lane {lane}, reg {reg}, elem {elem} -> (row {}, col {}) = ({rn} {}, {cn} {})",
            op.name(),
            c.row,
            c.col,
            c.row,
            c.col
        ));
    }
    let (row, col) = (a.row.unwrap_or(0), a.col.unwrap_or(0));
    if row >= view.rows || col >= view.cols {
        bail!(
            "({row}, {col}) is outside {}: it is {} x {} ({rn} x {cn}), rows 0..{} and columns 0..{}",
            op.name(),
            view.rows,
            view.cols,
            view.rows - 1,
            view.cols - 1
        );
    }
    let idx = view
        .coords
        .iter()
        .position(|c| c.row == row && c.col == col)
        .with_context(|| format!("no slot of {} holds ({row}, {col})", op.name()))?;
    let s = view.space.slot(idx);
    Ok(format!(
        "{} (row {row}, col {col}) -> lane {}, reg {}, elem {}",
        op.name(),
        s.lane,
        s.reg,
        s.elem
    ))
}

pub fn run(a: Args) -> Result<ExitCode> {
    let view = OperandView::load(&a.map, a.operand)?;
    let line = answer(&view, a.operand, &a)?;
    println!("{}: {}", view.variant.id(), view.source);
    println!("{line}");
    Ok(ExitCode::SUCCESS)
}
