//! `fp4probe view`: the terminal viewer.

use crate::layout::LaneMap;
use crate::report::{self, Record};
use crate::tui::{App, DiffTarget, ScaleTable, WgApp, run};
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

A wgmma lane map (`fp4probe wgmma probe`) has a tab per register operand and shared-memory tile;
a wgmma shared-memory study (`fp4probe wgmma smem`) a tab per tile. PgUp/PgDn move 16 rows,
0-127 then Enter lights a thread, and the status line names the cursor cell's thread, warp, lane,
register and element, or its byte offset, chunk and swizzle.

Needs a terminal on standard input and output; `fp4probe show MAP` prints a map as text.")]
pub struct Args {
    /// A lane map JSON file (e.g. reports/sm_90/m16n8k16.f32.bf16.bf16.f32.json), a wgmma lane
    /// map or a wgmma shared-memory study (reports/sm_90/wgmma/*.json).
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
    match report::read(&args.map)? {
        Record::Wgmma(doc) => {
            if args.diff.is_some() || args.scale.is_some() {
                bail!(
                    "{}: --diff and --scale apply to mma.sync lane maps, not to wgmma records",
                    args.map.display()
                );
            }
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
