//! ptxas is the authority on what `mma.sync`, `mma.sp`, `ldmatrix`, `stmatrix` and
//! `movmatrix` spellings exist:
//! - every catalog entry assembles for its minimum target (the probed `mma` variants as their
//!   probe kernel too, the block-scaled ones with `.u16` register selectors too, the
//!   `ldmatrix`/`stmatrix`/`movmatrix` ones for every target they list), and the target before
//!   the minimum refuses it;
//! - a sparse variant takes exactly the sparsity selectors the catalog says;
//! - every near-miss spelling in `rejected_spellings()` is rejected, with the message recorded;
//! - the SASS shows which tensor-core (or data movement) instruction a few entries become.
//!
//! Needs ptxas (and cuobjdump or nvdisasm for the SASS part): `.ci/install-cuda-tools` puts the
//! pinned ones under `.tools/`. Without ptxas the tests print "skipped: ptxas not found" and
//! pass, except under CI (env `CI` set), where they fail.

mod common;
use common::{have_ptxas, par_map};
use fp4probe::isa::matrix::{self, MatrixVariant};
use fp4probe::isa::module::{MmaOptions, SelectorForm, matrix_module, mma_module};
use fp4probe::isa::{Rejected, Target, Variant, catalog, find, rejected_spellings};
use fp4probe::probe::ptx::{fragment_kernel, sparse_fragment_kernel};
use fp4probe::tools::{self, AssembleError};

/// The targets ptxas 13.5 knows, oldest first, as far as [`Target`] spells them: the one before
/// an entry's minimum target must refuse it.
const TARGETS: [&str; 12] = [
    "sm_75", "sm_80", "sm_86", "sm_89", "sm_90", "sm_90a", "sm_100", "sm_100a", "sm_103a",
    "sm_110a", "sm_120", "sm_120a",
];

/// The newest target older than `t`, if ptxas knows one.
fn target_before(t: Target) -> Option<Target> {
    TARGETS
        .iter()
        .map(|s| s.parse::<Target>().unwrap())
        .rfind(|x| *x < t)
}

/// One assembly a test asks of ptxas: the module, its target, whether it must be accepted, and
/// what to call it in a failure.
struct Job {
    what: String,
    ptx: String,
    target: Target,
    accept: bool,
}

/// Run the jobs in parallel; the failures, one line each.
fn run_jobs(jobs: &[Job]) -> Vec<String> {
    let results = par_map(jobs, |j| tools::assemble(&j.ptx, j.target));
    jobs.iter()
        .zip(results)
        .filter_map(|(j, r)| match (r, j.accept) {
            (Ok(cubin), true) if !cubin.is_empty() => None,
            (Ok(_), true) => Some(format!("{} for {}: empty cubin", j.what, j.target)),
            (Err(e), true) => Some(format!("{} for {}: {e}", j.what, j.target)),
            (Ok(_), false) => Some(format!("{} for {}: ptxas accepted it", j.what, j.target)),
            (Err(AssembleError::Rejected { .. }), false) => None,
            (Err(e), false) => Some(format!("{} for {}: {e}", j.what, j.target)),
        })
        .collect()
}

fn mma_jobs(v: &Variant) -> Vec<Job> {
    let module = |target, options| mma_module(v, target, options);
    let mut jobs = vec![Job {
        what: v.id(),
        ptx: module(v.min_target, MmaOptions::default()),
        target: v.min_target,
        accept: true,
    }];
    if let Some(before) = target_before(v.min_target) {
        jobs.push(Job {
            what: v.id(),
            ptx: module(before, MmaOptions::default()),
            target: before,
            accept: false,
        });
    }
    if v.not_lane_mapped().is_none() {
        jobs.push(Job {
            what: format!("{} (probe kernel)", v.id()),
            ptx: fragment_kernel(v, v.min_target, Default::default()),
            target: v.min_target,
            accept: true,
        });
    }
    // The sparse probe builds one kernel per sparsity selector (0 is the one above).
    for sel in 1..v.sparsity_selectors() {
        jobs.push(Job {
            what: format!("{} (probe kernel, sparsity selector {sel})", v.id()),
            ptx: sparse_fragment_kernel(v, v.min_target, Default::default(), sel),
            target: v.min_target,
            accept: true,
        });
    }
    if v.scale.is_some() {
        let options = MmaOptions {
            selectors: SelectorForm::U16Registers,
            ..Default::default()
        };
        jobs.push(Job {
            what: format!("{} (.u16 selectors)", v.id()),
            ptx: module(v.min_target, options),
            target: v.min_target,
            accept: true,
        });
    }
    jobs
}

#[test]
fn every_catalog_variant_assembles_for_its_min_target_and_not_before() {
    if !have_ptxas(Rejected::PTXAS_VERSION, "rejected.rs") {
        return;
    }
    let start = std::time::Instant::now();
    let variants = catalog();
    let jobs: Vec<Job> = variants.iter().flat_map(mma_jobs).collect();
    let failures = run_jobs(&jobs);
    println!(
        "{} assemblies of {} variants in {:.1?}",
        jobs.len(),
        variants.len(),
        start.elapsed()
    );
    assert!(
        failures.is_empty(),
        "{} of {} assemblies are off:\n\n{}",
        failures.len(),
        jobs.len(),
        failures.join("\n\n")
    );
}

/// The catalog's sparsity selectors are exactly those ptxas takes: the last one assembles, the
/// one after it does not.
#[test]
fn sparse_variants_take_their_sparsity_selectors() {
    if !have_ptxas(Rejected::PTXAS_VERSION, "rejected.rs") {
        return;
    }
    let mut jobs = Vec::new();
    for v in catalog().into_iter().filter(|v| v.sparse.is_some()) {
        let n = v.sparsity_selectors();
        assert!(n >= 1, "{}", v.id());
        for (f, accept) in [(n - 1, true), (n, false)] {
            let options = MmaOptions {
                sparsity_selector: f,
                ..Default::default()
            };
            jobs.push(Job {
                what: format!("{} with sparsity selector {f}", v.id()),
                ptx: mma_module(&v, v.min_target, options),
                target: v.min_target,
                accept,
            });
        }
    }
    let failures = run_jobs(&jobs);
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}

fn matrix_jobs(v: &MatrixVariant) -> Vec<Job> {
    let mut jobs: Vec<Job> = v
        .targets()
        .into_iter()
        .map(|t| Job {
            what: v.id(),
            // sm_103a and sm_121a need PTX 8.8, sm_110a PTX 9.0.
            ptx: matrix_module(v, t).replace(".version 8.7", ".version 9.0"),
            target: t,
            accept: true,
        })
        .collect();
    // The catalog's own module (PTX 8.7) for the minimum target, and the target before it.
    jobs.push(Job {
        what: v.id(),
        ptx: matrix_module(v, v.min_target),
        target: v.min_target,
        accept: true,
    });
    if let Some(before) = target_before(v.min_target) {
        jobs.push(Job {
            what: v.id(),
            ptx: matrix_module(v, before),
            target: before,
            accept: false,
        });
    }
    jobs
}

#[test]
fn every_matrix_variant_assembles_for_its_targets_and_not_before() {
    if !have_ptxas(Rejected::PTXAS_VERSION, "rejected.rs") {
        return;
    }
    let jobs: Vec<Job> = matrix::catalog().iter().flat_map(matrix_jobs).collect();
    let failures = run_jobs(&jobs);
    assert!(
        failures.is_empty(),
        "{} of {} assemblies are off:\n\n{}",
        failures.len(),
        jobs.len(),
        failures.join("\n\n")
    );
}

#[test]
fn rejected_spellings_are_rejected_with_the_recorded_message() {
    if !have_ptxas(Rejected::PTXAS_VERSION, "rejected.rs") {
        return;
    }
    let start = std::time::Instant::now();
    let mut spellings = rejected_spellings();
    spellings.extend(matrix::rejected_spellings());
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
        // The selectors as .u16 registers, alone and beside an immediate.
        (
            "mma.sync.aligned.m16n8k32.row.col.kind::mxf8f6f4.block_scale.scale_vec::1X.f32.e2m1.e2m1.f32.ue8m0 \
             {%d0, %d1, %d2, %d3}, {%a0, %a1, %a2, %a3}, {%b0, %b1}, {%c0, %c1, %c2, %c3}, %sa, {%ba, %ta}, %sb, {0, %ta};",
            "sm_120a",
        ),
        (
            "mma.sp::ordered_metadata.sync.aligned.m16n8k128.row.col.kind::mxf4nvf4.block_scale.scale_vec::4X.f32.e2m1.e2m1.f32.ue4m3 \
             {%d0, %d1, %d2, %d3}, {%a0, %a1, %a2, %a3}, {%b0, %b1, %b2, %b3}, {%c0, %c1, %c2, %c3}, %e, 0, %sa, {%ba, %ta}, %sb, {%ba, %ta};",
            "sm_120a",
        ),
        (
            "mma.sp::ordered_metadata.sync.aligned.m16n8k32.row.col.f16.f16.f16.f16 \
             {%hd0, %hd1}, {%a0, %a1, %a2, %a3}, {%b0, %b1, %b2, %b3}, {%hc0, %hc1}, %e, 1;",
            "sm_80",
        ),
        (
            "mma.sync.aligned.m8n8k4.row.col.f32.f16.f16.f32 \
             {%d0, %d1, %d2, %d3, %d4, %d5, %d6, %d7}, {%a0, %a1}, {%b0, %b1}, {%c0, %c1, %c2, %c3, %c4, %c5, %c6, %c7};",
            "sm_80",
        ),
        (
            "mma.sync.aligned.m8n8k128.row.col.s32.b1.b1.s32.xor.popc {%id0, %id1}, {%a0}, {%b0}, {%ic0, %ic1};",
            "sm_75",
        ),
        (
            "ldmatrix.sync.aligned.m16n16.x2.trans.shared::cta.b8 {%r0, %r1, %r2, %r3}, [%p];",
            "sm_100a",
        ),
        (
            "stmatrix.sync.aligned.m8n8.x1.shared::cta.b16 [%p], {%r0};",
            "sm_90",
        ),
        ("movmatrix.sync.aligned.m8n8.trans.b16 %r0, %r1;", "sm_90"),
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
        // Sparse: HMMA.SP, IMMA.SP, QMMA.SP (FP8 native on sm_89, emulated on sm_90), and the
        // block-scaled sparse forms of sm_120a.
        case(
            "sp::ordered_metadata.m16n8k32.f32.f16.f16.f32",
            Some(sm90),
            &["HMMA.SP.16832.F32"],
            &[],
        ),
        case(
            "sp::ordered_metadata.m16n8k64.s32.s8.s8.s32",
            Some(sm90),
            &["IMMA.SP.16864.S8.S8"],
            &[],
        ),
        case(
            "sp.m16n8k64.f32.e4m3.e4m3.f32",
            None,
            &["QMMA.SP.16864.F32.E4M3.E4M3"],
            &[],
        ),
        case(
            "sp.m16n8k64.f32.e4m3.e4m3.f32",
            Some(sm90),
            &["HMMA.SP"],
            &["QMMA"],
        ),
        case(
            "sp::ordered_metadata.m16n8k64.kind::f8f6f4.f32.e2m1.e3m2.f32",
            None,
            &["QMMA.SP.16864.F32.E2M1.E3M2"],
            &[],
        ),
        case(
            "sp::ordered_metadata.m16n8k64.kind::mxf8f6f4.block_scale.scale_vec::1X.f32.e2m1.e3m2.f32.ue8m0",
            None,
            &["QMMA.SF.SP.16864.F32.E2M1.E3M2.E8"],
            &[],
        ),
        case(
            "sp::ordered_metadata.m16n8k128.kind::mxf4nvf4.block_scale.scale_vec::4X.f32.e2m1.e2m1.f32.ue4m3",
            None,
            &["OMMA.SF.SP.168128.F32.E2M1.E2M1.UE4M3.4X"],
            &[],
        ),
        // The m8n8 shapes: HMMA.884 on sm_75 (on sm_90, m8n8k4 f16 becomes FFMA), IMMA.8816,
        // BMMA.88128 (on sm_90 .xor.popc is built from .and.popc).
        case(
            "m8n8k4.row.col.f32.f16.f16.f32",
            None,
            &["HMMA.884.F32.F32"],
            &[],
        ),
        case(
            "m8n8k4.row.col.f32.f16.f16.f32",
            Some(sm90),
            &["FFMA"],
            &["HMMA"],
        ),
        case(
            "m8n8k16.s32.s8.s8.s32",
            Some(sm90),
            &["IMMA.8816.S8.S8"],
            &[],
        ),
        case(
            "m8n8k128.s32.b1.b1.s32.xor.popc",
            Some(sm90),
            &["BMMA.88128.AND.POPC"],
            &[],
        ),
    ];
    let results = par_map(&cases, |c| {
        let id = c.id;
        let v = find(id).unwrap_or_else(|| panic!("{id} is not in the catalog"));
        let target = c.target.unwrap_or(v.min_target);
        let ptx = match v.not_probed() {
            None => fragment_kernel(&v, target, Default::default()),
            Some(_) => mma_module(&v, target, MmaOptions::default()),
        };
        let cubin =
            tools::assemble(&ptx, target).unwrap_or_else(|e| panic!("{id} for {target}: {e}"));
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

/// SASS of one module for one target: the lines naming `keys`, trimmed.
fn sass_lines(ptx: &str, target: Target, keys: &[&str]) -> Vec<String> {
    let cubin = tools::assemble(ptx, target).unwrap_or_else(|e| panic!("{target}: {e}"));
    tools::sass(&cubin)
        .unwrap_or_else(|e| panic!("{e:#}"))
        .lines()
        .filter(|l| keys.iter().any(|k| l.contains(k)))
        .map(|l| l.trim().to_string())
        .collect()
}

/// `ldmatrix`, `stmatrix` and `movmatrix` become LDSM, STSM and MOVM; the sm_100a forms name
/// their unpacking and shape.
#[test]
fn sass_shows_the_data_movement_instruction() {
    if !have_ptxas(Rejected::PTXAS_VERSION, "rejected.rs")
        || tools::find_tool("cuobjdump").is_none() && tools::find_tool("nvdisasm").is_none()
    {
        return;
    }
    let cases = [
        ("ldmatrix.m8n8.x4.trans.b16", "sm_90", "LDSM.16.MT88.4"),
        ("ldmatrix.m8n8.x1.b16", "sm_90", "LDSM.16.M88"),
        ("stmatrix.m8n8.x4.trans.b16", "sm_90", "STSM.16.MT88.4"),
        ("movmatrix.m8n8.trans.b16", "sm_90", "MOVM.16.MT88"),
        (
            "ldmatrix.m16n16.x2.trans.b8x16.b4x16_p64",
            "sm_100a",
            "LDSM.U4x16P64TO8.MT1616.2",
        ),
        (
            "ldmatrix.m8n16.x4.b8x16.b6x16_p32",
            "sm_120a",
            "LDSM.U6x16P32TO8.M816.4",
        ),
        ("stmatrix.m16n8.x4.trans.b8", "sm_100a", "STSM.8.MT168.4"),
    ];
    let results = par_map(&cases, |(id, target, _)| {
        let v = matrix::find(id).unwrap_or_else(|| panic!("{id} is not in the catalog"));
        let target: Target = target.parse().unwrap();
        sass_lines(
            &matrix_module(&v, target),
            target,
            &["LDSM", "STSM", "MOVM"],
        )
    });
    let failures: Vec<String> = cases
        .iter()
        .zip(results)
        .filter(|((_, _, want), lines)| !lines.iter().any(|l| l.contains(want)))
        .map(|((id, target, want), lines)| format!("{id} for {target}: no {want} in {lines:?}"))
        .collect();
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// ptxas accepts `mma.sync.aligned.m8n8k4.row.col.f32.bf16.bf16.f32`, a spelling the PTX ISA
/// does not list, and emits no MMA and no arithmetic for it: D is whatever the registers held.
/// The catalog leaves it out and `rejected.rs` warns of it; this keeps the warning true.
#[test]
fn m8n8k4_bf16_is_accepted_but_computes_nothing() {
    if !have_ptxas(Rejected::PTXAS_VERSION, "rejected.rs")
        || tools::find_tool("cuobjdump").is_none() && tools::find_tool("nvdisasm").is_none()
    {
        return;
    }
    // The f16 variant's module with bf16 types: the same registers, as ptxas wants them.
    let f16 = find("m8n8k4.row.col.f32.f16.f16.f32").unwrap();
    let module = |target| mma_module(&f16, target, MmaOptions::default());
    let sm80 = Target::sm(8, 0);
    // Arithmetic: tensor-core HMMA, or the FFMA the f16 form becomes on sm_80 and later
    // (HFMA2.MMA with zero operands is how SASS moves a constant).
    let arithmetic = ["HMMA", "FFMA", "FMUL", "FADD"];
    let f16_lines = sass_lines(&module(sm80), sm80, &arithmetic);
    assert!(!f16_lines.is_empty(), "the f16 form computes");
    for target in [sm80, Target::sm(9, 0), Target::sm_a(12, 0)] {
        let bf16 = module(target).replace(".f32.f16.f16.f32 ", ".f32.bf16.bf16.f32 ");
        assert!(bf16.contains("m8n8k4.row.col.f32.bf16.bf16.f32"));
        let lines = sass_lines(&bf16, target, &arithmetic);
        assert!(lines.is_empty(), "{target}: {lines:?}");
    }
}
