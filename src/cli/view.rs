//! `fp4probe view`: the terminal viewer.

use crate::layout::LaneMap;
use crate::movement::map::MatrixMap;
use crate::report::{self, Record};
use crate::tma::map::TmaMap;
use crate::tui::{App, DiffTarget, MoveApp, ScaleTable, TmaApp, WgApp, run};
use anyhow::{Result, bail};
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(clap::Args, Debug)]
#[command(after_help = "Keys (? in the viewer lists them too):
  arrows / h j k l   move the cursor; the status line names the element under it and its slot,
                     e.g. `A slot lane 5 r0.e1 -> (row 1, col 3)`
  Tab / Shift-Tab    next / previous tab; a b c D jump to A B C D, s to the scales
  0-31 then Enter    light up the cells of that lane; Enter alone clears
  d                  diff against --diff (default: the documented layout)
  q, Esc, Ctrl-C     quit

An mma.sp lane map has a metadata tab per sparsity selector (m jumps to it): the dense A's rows
by the metadata fields of a row; the status line names the lane and bits of the field under the
cursor, the k its chunk spans and the A column it selects for.

A wgmma lane map (`fp4probe wgmma probe`) has a tab per register operand and shared-memory tile;
a wgmma shared-memory study (`fp4probe wgmma smem`) a tab per tile. PgUp/PgDn move 16 rows,
0-127 then Enter lights a thread, and the status line names the cursor cell's thread, warp, lane,
register and element, or its byte offset, chunk and swizzle.

An ldmatrix/stmatrix/movmatrix map (reports/sm_90/ldmatrix/*.json) has a fragment tab (the
matrices stacked, a cell the lane whose register holds the element; the status line names the
lane whose address names its row) and an address tab (the row each lane's address names).
A TMA map (reports/sm_90/tma/*.json) has one tab, the box, a cell the 16-byte chunk of its
128-byte shared line; the status line names the global element and its shared byte.

Needs a terminal on standard input and output; `fp4probe show MAP` prints a map as text.")]
pub struct Args {
    /// A lane map JSON file (e.g. reports/sm_90/m16n8k16.f32.bf16.bf16.f32.json, or an mma.sp
    /// map in reports/sm_90/mma-sp/), a wgmma lane map or a wgmma shared-memory study
    /// (reports/sm_90/wgmma/*.json), an ldmatrix/stmatrix/movmatrix map
    /// (reports/sm_90/ldmatrix/*.json) or a TMA map (reports/sm_90/tma/*.json).
    pub map: PathBuf,
    /// Diff against this map instead of the documented layout (press `d` in the viewer).
    #[arg(long)]
    pub diff: Option<PathBuf>,
    /// Scale map CSV (default: `<stem>.scale.csv` next to the map, if present).
    #[arg(long)]
    pub scale: Option<PathBuf>,
}

/// Build the viewer's state from the command line (shared with tests).
pub fn app(args: &Args) -> Result<App> {
    let map = LaneMap::load(&args.map)?;
    let diff = match &args.diff {
        Some(p) => {
            let other = LaneMap::load(p)?;
            anyhow::ensure!(
                other.variant == map.variant,
                "--diff map is {}, not {}",
                other.variant,
                map.variant
            );
            Some(DiffTarget {
                name: p
                    .file_name()
                    .map(|n| n.to_string_lossy().into_owned())
                    .unwrap_or_default(),
                layout: other.layout()?,
            })
        }
        None => None,
    };
    let scale_path = args.scale.clone().or_else(|| {
        let p = args
            .map
            .with_file_name(format!("{}.scale.csv", map.variant.replace("::", "_")));
        p.exists().then_some(p)
    });
    let scale = match scale_path {
        Some(p) => Some(ScaleTable::load(&p)?),
        None => None,
    };
    App::new(map, diff, scale)
}

/// The map files are read (and any error in them reported) before the terminal is checked.
pub fn run_cmd(args: Args) -> Result<ExitCode> {
    let schema = report::parse(&args.map)?
        .get("schema")
        .and_then(|s| s.as_str())
        .map(str::to_string);
    let only_lane_maps = |what: &str| {
        if args.diff.is_some() || args.scale.is_some() {
            bail!(
                "{}: --diff and --scale apply to mma.sync lane maps, not to {what}",
                args.map.display()
            );
        }
        Ok(())
    };
    match schema.as_deref() {
        Some(crate::movement::map::SCHEMA) => {
            only_lane_maps("data-movement maps")?;
            let map = MatrixMap::load(&args.map)?;
            run(MoveApp::new(map))?;
            return Ok(ExitCode::SUCCESS);
        }
        Some(crate::tma::map::SCHEMA) => {
            only_lane_maps("TMA maps")?;
            let map = TmaMap::load(&args.map)?;
            run(TmaApp::new(map))?;
            return Ok(ExitCode::SUCCESS);
        }
        _ => {}
    }
    match report::read(&args.map)? {
        Record::Wgmma(doc) => {
            only_lane_maps("wgmma records")?;
            run(WgApp::new(&doc))?
        }
        Record::LaneMap(_) => run(app(&args)?)?,
        Record::Other(schema) => bail!(
            "{}: a {schema} record, not a map the viewer opens",
            args.map.display()
        ),
    }
    Ok(ExitCode::SUCCESS)
}
