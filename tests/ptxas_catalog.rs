//! ptxas is the authority on what `mma.sync` spellings exist:
//! - every catalog variant's probe kernel assembles for the variant's minimum target;
//! - every near-miss spelling in `rejected_spellings()` is rejected, with the message recorded;
//! - the SASS shows which tensor-core instruction a few variants become.
//!
//! Needs ptxas (and cuobjdump or nvdisasm for the SASS part): `.ci/install-cuda-tools` puts the
//! pinned ones under `.tools/`. Without ptxas the tests print "skipped: ptxas not found" and
//! pass, except under CI (env `CI` set), where they fail.

mod common;
use common::{have_ptxas, par_map};
use fp4probe::isa::{Rejected, Target, Variant, catalog, find, rejected_spellings};
use fp4probe::probe::ptx::fragment_kernel;
use fp4probe::tools::{self, AssembleError};

fn assemble_variant(v: &Variant) -> Result<Vec<u8>, AssembleError> {
    tools::assemble(
        &fragment_kernel(v, v.min_target, Default::default()),
        v.min_target,
    )
}

#[test]
fn every_catalog_variant_assembles_for_its_min_target() {
    if !have_ptxas(Rejected::PTXAS_VERSION, "rejected.rs") {
        return;
    }
    let start = std::time::Instant::now();
    let variants = catalog();
    let results = par_map(&variants, assemble_variant);
    let failures: Vec<String> = variants
        .iter()
        .zip(&results)
        .filter_map(|(v, r)| match r {
            Ok(cubin) if !cubin.is_empty() => None,
            Ok(_) => Some(format!("{} ({}): empty cubin", v.id(), v.min_target)),
            Err(e) => Some(format!("{} ({}): {e}", v.id(), v.min_target)),
        })
        .collect();
    println!(
        "assembled {} variants in {:.1?}",
        variants.len(),
        start.elapsed()
    );
    assert!(
        failures.is_empty(),
        "{} of {} catalog variants do not assemble:\n\n{}",
        failures.len(),
        variants.len(),
        failures.join("\n\n")
    );
}

#[test]
fn rejected_spellings_are_rejected_with_the_recorded_message() {
    if !have_ptxas(Rejected::PTXAS_VERSION, "rejected.rs") {
        return;
    }
    let start = std::time::Instant::now();
    let spellings = rejected_spellings();
    assert!(!spellings.is_empty());
    let results = par_map(&spellings, |r| {
        let target: Target = r.target.parse().expect("rejected.rs target parses");
        tools::assemble(&r.module(), target)
    });
    let mut failures = Vec::new();
    for (r, res) in spellings.iter().zip(results) {
        match res {
            Ok(_) => failures.push(format!("{} ({}): ptxas accepted it", r.ptx, r.target)),
            Err(AssembleError::Rejected { log }) if log.contains(r.ptxas_says) => {}
            Err(AssembleError::Rejected { log }) => failures.push(format!(
                "{} ({}): rejected, but the log lacks \"{}\":\n{log}",
                r.ptx, r.target, r.ptxas_says
            )),
            Err(e) => failures.push(format!("{} ({}): {e}", r.ptx, r.target)),
        }
    }
    println!(
        "checked {} rejected spellings in {:.1?}",
        spellings.len(),
        start.elapsed()
    );
    assert!(
        failures.is_empty(),
        "{} of {} rejected spellings are off:\n\n{}",
        failures.len(),
        spellings.len(),
        failures.join("\n\n")
    );
}

/// The module `Rejected::module` builds is sound: the corrected spellings assemble in it, so a
/// rejection is about the instruction, not the declarations.
#[test]
fn rejected_module_accepts_the_corrected_spellings() {
    if !have_ptxas(Rejected::PTXAS_VERSION, "rejected.rs") {
        return;
    }
    let fixed = [
        (
            "mma.sync.aligned.m16n8k32.row.col.kind::mxf8f6f4.block_scale.scale_vec::1X.f32.e2m1.e2m1.f32.ue8m0 \
             {%d0, %d1, %d2, %d3}, {%a0, %a1, %a2, %a3}, {%b0, %b1}, {%c0, %c1, %c2, %c3}, %sa, {0, 1}, %sb, {3, 0};",
            "sm_120a",
        ),
        (
            "mma.sync.aligned.m16n8k64.row.col.kind::mxf4nvf4.block_scale.scale_vec::2X.f32.e2m1.e2m1.f32.ue8m0 \
             {%d0, %d1, %d2, %d3}, {%a0, %a1, %a2, %a3}, {%b0, %b1}, {%c0, %c1, %c2, %c3}, %sa, {2, 0}, %sb, {0, 0};",
            "sm_120a",
        ),
        (
            "mma.sync.aligned.m16n8k16.row.col.f16.f16.f16.f16 \
             {%hd0, %hd1}, {%a0, %a1, %a2, %a3}, {%b0, %b1}, {%hc0, %hc1};",
            "sm_80",
        ),
        (
            "mma.sync.aligned.m16n8k32.row.col.f32.e4m3.e4m3.f32 \
             {%d0, %d1, %d2, %d3}, {%a0, %a1, %a2, %a3}, {%b0, %b1}, {%c0, %c1, %c2, %c3};",
            "sm_89",
        ),
    ];
    for (ptx, target) in fixed {
        let r = Rejected {
            ptx,
            target,
            ptx_version: "8.7",
            ptxas_says: "",
            instead: "",
        };
        if let Err(e) = tools::assemble(&r.module(), target.parse().unwrap()) {
            panic!("control spelling does not assemble for {target}: {ptx}\n{e}");
        }
    }
}

/// One SASS expectation: the variant, the target (its minimum when `None`), substrings the
/// SASS must contain and substrings it must not.
struct SassCase {
    id: &'static str,
    target: Option<Target>,
    want: &'static [&'static str],
    not: &'static [&'static str],
}

/// Which tensor-core instruction a variant becomes: block-scaled FP8/FP6/FP4 at k32 is
/// `QMMA.SF.16832`, packed FP4 at k64 is `OMMA.SF.16864`; FP8 is a native QMMA on sm_89 but
/// emulated with HMMA on sm_90.
#[test]
fn sass_shows_the_tensor_core_instruction() {
    if !have_ptxas(Rejected::PTXAS_VERSION, "rejected.rs") {
        return;
    }
    if tools::find_tool("cuobjdump").is_none() && tools::find_tool("nvdisasm").is_none() {
        println!(
            "skipped the SASS checks: neither cuobjdump nor nvdisasm found (CI installs them)"
        );
        return;
    }
    let sm90 = Target::sm(9, 0);
    let case = |id, target, want, not| SassCase {
        id,
        target,
        want,
        not,
    };
    let cases = [
        case(
            "m16n8k32.kind::mxf8f6f4.block_scale.scale_vec::1X.f32.e2m1.e2m1.f32.ue8m0",
            None,
            &["QMMA.SF.16832.F32.E2M1.E2M1.E8"],
            &[],
        ),
        case(
            "m16n8k32.kind::mxf8f6f4.block_scale.scale_vec::1X.f32.e4m3.e2m1.f32.ue8m0",
            None,
            &["QMMA.SF.16832.F32.E4M3.E2M1"],
            &[],
        ),
        case(
            "m16n8k64.kind::mxf4.block_scale.scale_vec::2X.f32.e2m1.e2m1.f32.ue8m0",
            None,
            &["OMMA.SF.16864"],
            &[],
        ),
        case(
            "m16n8k64.kind::mxf4nvf4.block_scale.scale_vec::4X.f32.e2m1.e2m1.f32.ue4m3",
            None,
            &["OMMA.SF.16864", "UE4M3"],
            &[],
        ),
        case(
            "m16n8k64.kind::mxf4nvf4.block_scale.scale_vec::4X.f32.e2m1.e2m1.f32.ue8m0",
            None,
            &["OMMA.SF.16864"],
            &[],
        ),
        case(
            "m16n8k32.f32.e4m3.e4m3.f32",
            None,
            &["QMMA.16832.F32.E4M3.E4M3"],
            &[],
        ),
        case(
            "m16n8k32.f32.e4m3.e4m3.f32",
            Some(sm90),
            &["HMMA"],
            &["QMMA"],
        ),
    ];
    let results = par_map(&cases, |c| {
        let id = c.id;
        let v = find(id).unwrap_or_else(|| panic!("{id} is not in the catalog"));
        let target = c.target.unwrap_or(v.min_target);
        let cubin = tools::assemble(&fragment_kernel(&v, target, Default::default()), target)
            .unwrap_or_else(|e| panic!("{id} for {target}: {e}"));
        (
            target,
            tools::sass(&cubin).unwrap_or_else(|e| panic!("{id}: {e:#}")),
        )
    });
    let mut failures = Vec::new();
    for (c, (target, sass)) in cases.iter().zip(results) {
        let (id, want, not) = (c.id, c.want, c.not);
        let mma: Vec<&str> = sass
            .lines()
            .filter(|l| l.contains("MMA"))
            .map(str::trim)
            .collect();
        let missing: Vec<_> = want.iter().filter(|w| !sass.contains(**w)).collect();
        let present: Vec<_> = not.iter().filter(|n| sass.contains(**n)).collect();
        if !missing.is_empty() || !present.is_empty() {
            failures.push(format!(
                "{id} for {target}: missing {missing:?}, unexpected {present:?}; MMA lines:\n  {}",
                mma.join("\n  ")
            ));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}
