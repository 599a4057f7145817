//! What a TMA probe kernel lowers to in SASS: the listing of [`probe_kernel`] assembled for
//! sm_90a, and the verdict on the copy: one `UTMALDG` (load) or `UTMASTG` (store).

use super::kernel::probe_kernel;
use super::{Case, Dir};
use crate::isa::Target;
use crate::sass::{Instr, Lowering, SassError, SassReport, Toolchain, assemble_and_disassemble};

/// The SASS opcode base each direction is expected to become.
pub fn expected_base(case: &Case) -> &'static str {
    match case.dir {
        Dir::Load => "UTMALDG",
        Dir::Store => "UTMASTG",
    }
}

/// Native when the listing holds exactly one instruction of the expected base.
fn classify(case: &Case, listing: &[String]) -> (Lowering, String, Vec<String>) {
    let want = expected_base(case);
    let hits: Vec<String> = listing
        .iter()
        .filter(|l| {
            Instr {
                addr: 0,
                text: (*l).clone(),
            }
            .base()
                == want
        })
        .cloned()
        .collect();
    let (lowering, verdict) = match hits.len() {
        1 => (
            Lowering::Native,
            format!(
                "native: 1 {}",
                Instr {
                    addr: 0,
                    text: hits[0].clone()
                }
                .opcode()
            ),
        ),
        0 => (
            Lowering::NoTensor,
            format!("no {want} in the kernel ({} instructions)", listing.len()),
        ),
        n => (Lowering::Split, format!("split: {n} {want}")),
    };
    (lowering, verdict, hits)
}

/// The report of `case`'s probe kernel for `target` with `tc`, without a date, so a listing
/// regenerates byte for byte with the same tools.
pub fn report(case: &Case, target: Target, tc: &Toolchain) -> Result<SassReport, SassError> {
    let ptx = probe_kernel(case);
    let text = assemble_and_disassemble(tc, &ptx, case.id(), target)?;
    let mut r = SassReport::from_listing(
        case.id(),
        super::map::instruction(case.dir).into(),
        target,
        tc,
        &text,
        |_: &[&Instr], _: &[&Instr]| (Lowering::NoTensor, String::new()),
    )?;
    let (lowering, verdict, hits) = classify(case, &r.listing);
    r.lowering = lowering;
    r.verdict = verdict;
    r.tensor_instructions = hits;
    r.date = String::new();
    r.command = crate::wgmma::sass::command_line();
    Ok(r)
}
