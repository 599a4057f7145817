//! What a data-movement probe kernel lowers to in SASS: the listing of [`probe_kernel`]
//! assembled for a target, and the verdict on the instruction between the kernel's global
//! loads and stores (`LDSM`, `STSM`, `MOVM`).

use super::kernel::probe_kernel;
use crate::isa::Target;
use crate::isa::matrix::{MatrixOp, MatrixVariant};
use crate::sass::{Instr, Lowering, SassError, SassReport, Toolchain, assemble_and_disassemble};

/// The SASS opcode base each instruction is expected to become.
pub fn expected_base(v: &MatrixVariant) -> &'static str {
    match v.op {
        MatrixOp::Ldmatrix => "LDSM",
        MatrixOp::Stmatrix => "STSM",
        MatrixOp::Movmatrix => "MOVM",
    }
}

/// Native when the region holds exactly one instruction of the expected base, otherwise
/// what it holds instead.
fn classify(v: &MatrixVariant, region: &[&Instr]) -> (Lowering, String) {
    let want = expected_base(v);
    let hits: Vec<&str> = region
        .iter()
        .filter(|i| i.base() == want)
        .map(|i| i.opcode())
        .collect();
    match hits.as_slice() {
        [one] => (Lowering::Native, format!("native: 1 {one}")),
        [] => (
            Lowering::NoTensor,
            format!(
                "no {want} between the loads and the stores ({} instructions)",
                region.len()
            ),
        ),
        many => (
            Lowering::Split,
            format!("split: {} {want} ({})", many.len(), many.join(", ")),
        ),
    }
}

/// The report of `v`'s probe kernel for `target` with `tc`, without a date, so a listing
/// regenerates byte for byte with the same tools.
pub fn report(v: &MatrixVariant, target: Target, tc: &Toolchain) -> Result<SassReport, SassError> {
    let ptx = probe_kernel(v);
    let text = assemble_and_disassemble(tc, &ptx, v.id(), target)?;
    let mut r = SassReport::from_listing(
        v.id(),
        v.opcode(),
        target,
        tc,
        &text,
        |_tensor: &[&Instr], region: &[&Instr]| classify(v, region),
    )?;
    r.tensor_instructions = r
        .listing
        .iter()
        .filter(|l| {
            let i = Instr {
                addr: 0,
                text: (*l).clone(),
            };
            i.base() == expected_base(v)
        })
        .cloned()
        .collect();
    r.date = String::new();
    r.command = crate::wgmma::sass::command_line();
    Ok(r)
}
