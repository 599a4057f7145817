//! `fp4probe show`: read a lane map file back and print it.

use crate::isa::Operand;
use crate::layout::LaneMap;
use anyhow::Result;
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(clap::Args, Debug)]
pub struct Args {
    /// A lane map JSON file written by `fp4probe fragment`.
    pub map: PathBuf,
    /// Also print every slot of every operand.
    #[arg(long)]
    pub slots: bool,
}

pub fn run(args: Args) -> Result<ExitCode> {
    let map = LaneMap::load(&args.map)?;
    super::fragment::print_summary(&map);
    if args.slots {
        for om in &map.operands {
            println!("\n{} (lane, reg, elem) -> (row, col):", om.operand.name());
            for s in &om.slots {
                println!(
                    "  {:>2} {:>2} {:>2} -> ({:>3}, {:>3})",
                    s[0], s[1], s[2], s[3], s[4]
                );
            }
        }
    } else if map.operands.iter().any(|o| o.operand == Operand::A) {
        println!("\n(--slots prints every slot)");
    }
    Ok(ExitCode::SUCCESS)
}
