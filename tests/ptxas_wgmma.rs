//! ptxas is the authority on what `wgmma.mma_async` spellings exist:
//! - every catalog entry assembles for sm_90a, its text written by `WgVariant::instruction`,
//!   with every value of each immediate it takes and, for the sparse forms, both selectors;
//! - the same entries are rejected for sm_90 (wgmma needs the arch-specific target);
//! - every near-miss spelling in `wgmma::rejected::rejected_spellings()` is rejected, with the
//!   message recorded.
//!
//! Needs ptxas: `.ci/install-cuda-tools` puts the pinned one under `.tools/`. Without ptxas the
//! tests print "skipped: ptxas not found" and pass, except under CI (env `CI` set), where they
//! fail.

mod common;
use common::{have_ptxas, par_map};
use fp4probe::isa::Target;
use fp4probe::tools::{self, AssembleError};
use fp4probe::wgmma::rejected::{Rejected, rejected_spellings};
use fp4probe::wgmma::{ASource, Immediates, WgOperands, WgVariant, catalog};

const SM90A: Target = Target::sm_a(9, 0);

/// Instructions per module: ptxas starts once per module and spends a few milliseconds per
/// wgmma; modules of similar size keep both threads busy to the end.
const PER_MODULE: usize = 400;

/// The immediate combinations assembled for a variant, with the sparsity selector: every
/// argument at its default, then every argument at its other value. The arguments: transpose
/// of A (`ss` only) and of B for f16/bf16, the ±1 scales of A and B for the floating-point
/// types, sp-sel for the sparse forms (0 or 1 for f16/bf16/tf32; ptxas takes only 0 for the
/// 8-bit types, see rejected.rs). ptxas checks each argument against its own range, so these
/// two rows assemble every value of every argument; more combinations only cost time.
fn combinations(v: &WgVariant) -> Vec<(Immediates, u32)> {
    let flip = |other: bool| {
        let imm = Immediates {
            trans_a: other && v.transposable() && v.a_src == ASource::Ss,
            trans_b: other && v.transposable(),
            scale_a: if other && v.has_imm_scale() { -1 } else { 1 },
            scale_b: if other && v.has_imm_scale() { -1 } else { 1 },
        };
        (imm, u32::from(other && v.sparse && v.elem_bits() >= 16))
    };
    let (default, other) = (flip(false), flip(true));
    if other == default {
        vec![default]
    } else {
        vec![default, other]
    }
}

/// One `.entry` for a variant: wgmma.fence, the instruction once per immediate combination,
/// commit_group and wait_group 0; then D's first register goes to global memory, so nothing is
/// dead. Descriptors, the scale-d predicate, the metadata and A's registers come from the
/// kernel's parameter, so ptxas cannot fold them.
fn entry(v: &WgVariant, name: &str) -> String {
    let d = v.d_frag().regs;
    let ty = v.d_reg_type();
    let mut s = format!(".visible .entry {name}(.param .u64 out)\n{{\n");
    s += &format!("    .reg .{ty} %d<{d}>;\n");
    s += "    .reg .b64 %o, %ad, %bd;\n    .reg .pred %p;\n    .reg .b32 %m;\n";
    let a_regs = if v.a_src == ASource::Rs {
        v.a_frag().regs
    } else {
        0
    };
    if a_regs > 0 {
        s += &format!("    .reg .b32 %a<{a_regs}>;\n");
    }
    s += "    ld.param.u64 %o, [out];\n    mov.b64 %ad, %o;\n    add.u64 %bd, %o, 4096;\n";
    s += "    setp.ne.u64 %p, %o, 0;\n    cvt.u32.u64 %m, %o;\n";
    for i in 0..a_regs {
        s += &format!("    add.u32 %a{i}, %m, {i};\n");
    }
    let mut ops = WgOperands {
        d: (0..d).map(|i| format!("%d{i}")).collect(),
        a: (0..a_regs).map(|i| format!("%a{i}")).collect(),
        a_desc: "%ad".into(),
        b_desc: "%bd".into(),
        scale_d: "%p".into(),
        sp_meta: "%m".into(),
        sp_sel: 0,
    };
    s += "    wgmma.fence.sync.aligned;\n";
    for (imm, sel) in combinations(v) {
        ops.sp_sel = sel;
        s += &format!("    {}\n", v.instruction(&ops, imm));
    }
    s += "    wgmma.commit_group.sync.aligned;\n    wgmma.wait_group.sync.aligned 0;\n";
    s += &format!("    st.global.{ty} [%o], %d0;\n    ret;\n}}\n");
    s
}

/// A module of entries for `target`, at the PTX ISA version they share.
fn module(variants: &[WgVariant], version: &str, target: Target) -> String {
    let mut s = format!(".version {version}\n.target {target}\n.address_size 64\n");
    for (i, v) in variants.iter().enumerate() {
        s += "\n";
        s += &entry(v, &format!("wg{i}"));
    }
    s
}

/// The `.version` and `.target` lines of a module.
fn header(ptx: &str) -> (&str, &str) {
    let field = |key: &str| {
        ptx.lines()
            .find_map(|l| l.strip_prefix(key))
            .map(str::trim)
            .unwrap_or_else(|| panic!("no {key} line in the module"))
    };
    (field(".version "), field(".target "))
}

/// The catalog in modules of about [`PER_MODULE`] instructions, each module's entries sharing
/// their `ptx_version()`.
fn modules(target: Target) -> Vec<(Vec<WgVariant>, String)> {
    let mut by_version: Vec<(&str, Vec<WgVariant>)> = Vec::new();
    for v in catalog() {
        let ver = v.ptx_version();
        match by_version.iter_mut().find(|(x, _)| *x == ver) {
            Some((_, list)) => list.push(v),
            None => by_version.push((ver, vec![v])),
        }
    }
    let mut out = Vec::new();
    for (ver, list) in by_version {
        let mut part: Vec<WgVariant> = Vec::new();
        let mut size = 0;
        for v in list {
            size += combinations(&v).len();
            part.push(v);
            if size >= PER_MODULE {
                out.push((std::mem::take(&mut part), String::new()));
                size = 0;
            }
        }
        if !part.is_empty() {
            out.push((part, String::new()));
        }
        for (vs, ptx) in out.iter_mut().filter(|(_, p)| p.is_empty()) {
            *ptx = module(vs, ver, target);
        }
    }
    out
}

fn message(e: &AssembleError) -> String {
    match e {
        AssembleError::Rejected { log } => log.trim().to_string(),
        e => e.to_string(),
    }
}

#[test]
fn every_catalog_entry_assembles_for_sm_90a() {
    if !have_ptxas(Rejected::PTXAS_VERSION, "wgmma/rejected.rs") {
        return;
    }
    let start = std::time::Instant::now();
    let mods = modules(SM90A);
    for (vs, ptx) in &mods {
        let (version, target) = header(ptx);
        assert_eq!(target, "sm_90a");
        for v in vs {
            assert_eq!(v.min_target(), SM90A, "{}", v.id());
            assert_eq!(version, v.ptx_version(), "{}", v.id());
        }
    }
    let results = par_map(&mods, |(_, ptx)| tools::assemble(ptx, SM90A));
    let mut failures = Vec::new();
    let mut instructions = 0;
    for ((vs, _), r) in mods.iter().zip(&results) {
        instructions += vs.iter().map(|v| combinations(v).len()).sum::<usize>();
        match r {
            Ok(cubin) if !cubin.is_empty() => continue,
            Ok(_) => failures.push(format!("a module of {} entries: empty cubin", vs.len())),
            Err(AssembleError::Rejected { .. }) => {}
            Err(e) => panic!("{e}"),
        }
        // Which entries ptxas refuses: each on its own, with its own message.
        let alone = par_map(vs, |v| {
            tools::assemble(
                &module(std::slice::from_ref(v), v.ptx_version(), SM90A),
                SM90A,
            )
        });
        for (v, r) in vs.iter().zip(alone) {
            if let Err(e) = r {
                failures.push(format!("{}: {}", v.id(), message(&e)));
            }
        }
    }
    let total: usize = mods.iter().map(|(vs, _)| vs.len()).sum();
    assert_eq!(total, catalog().len());
    println!(
        "assembled {total} wgmma entries ({instructions} instructions, {} modules) in {:.1?}",
        mods.len(),
        start.elapsed()
    );
    assert!(
        failures.is_empty(),
        "{} wgmma catalog entries do not assemble for sm_90a:\n\n{}",
        failures.len(),
        failures.join("\n\n")
    );
}

/// wgmma needs the arch-specific target: for plain sm_90 ptxas refuses every catalog entry's
/// instruction, each on its own line ("... not supported on .target 'sm_90'").
#[test]
fn sm_90_without_a_is_rejected() {
    if !have_ptxas(Rejected::PTXAS_VERSION, "wgmma/rejected.rs") {
        return;
    }
    let sm90 = Target::sm(9, 0);
    let mods = modules(sm90);
    let results = par_map(&mods, |(_, ptx)| tools::assemble(ptx, sm90));
    let mut failures = Vec::new();
    let mut checked = 0;
    for ((vs, ptx), r) in mods.iter().zip(results) {
        let log = match r {
            Ok(_) => {
                failures.push(format!(
                    "a module of {} entries assembled for sm_90",
                    vs.len()
                ));
                continue;
            }
            Err(AssembleError::Rejected { log }) => log,
            Err(e) => panic!("{e}"),
        };
        let refused: std::collections::HashSet<usize> = log
            .lines()
            .filter(|l| l.contains("not supported on .target 'sm_90'"))
            .filter_map(|l| l.split("line ").nth(1)?.split(';').next()?.parse().ok())
            .collect();
        let mut entry = None;
        for (n, line) in ptx.lines().enumerate() {
            if let Some(rest) = line.strip_prefix(".visible .entry wg") {
                entry = rest.split('(').next().and_then(|i| i.parse::<usize>().ok());
            }
            if line.trim_start().starts_with("wgmma.mma_async") {
                checked += 1;
                if !refused.contains(&(n + 1)) {
                    let id = entry.map_or("?".into(), |i| vs[i].id());
                    failures.push(format!("{id}: line {} not refused for sm_90", n + 1));
                }
            }
        }
    }
    assert!(checked >= catalog().len(), "{checked}");
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn rejected_spellings_are_rejected_with_the_recorded_message() {
    if !have_ptxas(Rejected::PTXAS_VERSION, "wgmma/rejected.rs") {
        return;
    }
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
    assert!(
        failures.is_empty(),
        "{} of {} rejected wgmma spellings are off:\n\n{}",
        failures.len(),
        spellings.len(),
        failures.join("\n\n")
    );
}

/// The module `Rejected::module` builds is sound: a catalog instruction over its registers
/// assembles in it, so a rejection is about the instruction, not the declarations.
#[test]
fn rejected_module_accepts_catalog_instructions() {
    if !have_ptxas(Rejected::PTXAS_VERSION, "wgmma/rejected.rs") {
        return;
    }
    for id in [
        "m64n256k16.f32.bf16.bf16.ss",
        "m64n64k16.f16.f16.f16.rs",
        "m64n256k32.s32.s8.s8.ss",
        "sp.m64n64k32.f32.bf16.bf16.ss",
        "m64n64k256.s32.b1.b1.and.popc.rs",
    ] {
        let v = fp4probe::wgmma::find(id).unwrap_or_else(|| panic!("{id} not in the catalog"));
        let r = Rejected::of(&v, Immediates::default(), "sm_90a", "", "");
        if let Err(e) = tools::assemble(&r.module(), SM90A) {
            panic!("control instruction does not assemble: {}\n{e}", r.ptx);
        }
    }
}
