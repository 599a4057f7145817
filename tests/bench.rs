//! `fp4probe bench` without a GPU: everything that can be checked on the CPU.
//!
//! - the bench kernel template fills in for every sm_90 variant and assembles for sm_90 with the
//!   pinned ptxas, and for every sm_120a (FP4/FP6/FP8 kind::) variant for sm_120a;
//! - the SASS guard, on cubins from the pinned ptxas for sm_90, finds the expected tensor
//!   instruction count in the timed loop for bf16 m16n8k16 (1 HMMA per mma.sync) and e4m3
//!   m16n8k32 (2 HMMA + 12 F2FP per mma.sync), and rejects a loop ptxas folded;
//! - SASS parsing, inputs, statistics, the CSV merge, and the no-GPU error;
//! - wgmma (sm_90a): the bf16 m64n256k16 and e4m3 m64n256k32 kernels (ss, rs) pass the guard with
//!   exactly 4 HGMMA/QGMMA and one WARPGROUP.DEPBAR per iteration (8 and 8 in the latency loop);
//!   kernels across N, types and both layouts assemble and verify; the guard rejects ptxas's
//!   serialised loops (C7512, C7517) and wrong counts; bad `--wgmma` inputs are refused with
//!   exit 2 before any device work; the report's JSON and CSV. One GPU test, `#[ignore]`d.
//!
//! The ptxas tests need ptxas (and cuobjdump or nvdisasm): `.ci/install-cuda-tools` puts the
//! pinned ones under `.tools/`. Without them they print "skipped" and pass, except under CI
//! (env `CI` set), where they fail.

use fp4probe::device::{BackendKind, DeviceInfo};
use fp4probe::formats::ElemType;
use fp4probe::isa::{Operand, Target, Variant, find, probed};
use fp4probe::probe::bench::{
    self, BenchReport, CheckStatus, KernelShape, PointResult, PointStatus, Settings, Stat,
    Toolchain, bench_inputs, bench_kernel, bench_target, check_loop, in_words_per_lane, parse_sass,
    prepare, timed_loop,
};
use fp4probe::provenance::Provenance;
use fp4probe::tools;

mod common;
use common::par_map;
use fp4probe::outfile::Outputs;

/// The toolchain the offline tests use; panics under CI when there is none.
fn toolchain(need_disassembler: bool) -> Option<Toolchain> {
    let tc = Toolchain::offline();
    let ok = tc
        .as_ref()
        .is_some_and(|t| !need_disassembler || t.disassembler.is_some());
    if ok {
        let t = tc.expect("checked");
        println!("using {}", t.describe());
        return Some(t);
    }
    if std::env::var_os("CI").is_some_and(|v| !v.is_empty()) {
        panic!(
            "ptxas{} not found under CI: run .ci/install-cuda-tools first. Searched: {:?}",
            if need_disassembler {
                " or cuobjdump/nvdisasm"
            } else {
                ""
            },
            tools::search_dirs()
        );
    }
    println!("skipped: ptxas (or a disassembler) not found (run .ci/install-cuda-tools)");
    None
}

fn assemble_all(tc: &Toolchain, variants: &[Variant], cc: (u32, u32)) -> Vec<String> {
    // One plain shape and one distinct-operand shape, with scale operands where there are any.
    let shapes = [KernelShape::new(2, 2), KernelShape::distinct(2, 4)];
    let jobs: Vec<(Variant, KernelShape)> = variants
        .iter()
        .flat_map(|v| shapes.iter().map(move |s| (v.clone(), *s)))
        .collect();
    let results = par_map(&jobs, |(v, s)| {
        let t = bench_target(v, cc);
        tc.assemble(&bench_kernel(v, t, *s), t)
            .map_err(|e| format!("{} ({t}, {s:?}): {e}", v.id()))
            .and_then(|c| {
                if c.is_empty() {
                    Err(format!("{}: empty cubin", v.id()))
                } else {
                    Ok(())
                }
            })
    });
    results.into_iter().filter_map(Result::err).collect()
}

#[test]
fn every_sm90_variant_bench_kernel_assembles_for_sm_90() {
    let Some(tc) = toolchain(false) else { return };
    let variants: Vec<Variant> = probed()
        .into_iter()
        .filter(|v| v.min_target.runs_on((9, 0)))
        .collect();
    assert_eq!(
        variants.len(),
        64,
        "the catalog has 64 probed variants that run on sm_90"
    );
    let start = std::time::Instant::now();
    let failures = assemble_all(&tc, &variants, (9, 0));
    println!(
        "assembled {} bench kernels in {:.1?}",
        variants.len() * 2,
        start.elapsed()
    );
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}

#[test]
fn every_sm120a_variant_bench_kernel_assembles_for_sm_120a() {
    let Some(tc) = toolchain(false) else { return };
    let variants: Vec<Variant> = probed()
        .into_iter()
        .filter(|v| v.min_target == Target::sm_a(12, 0))
        .collect();
    assert!(
        variants.len() >= 70,
        "FP4/FP6/FP8 kind:: variants: {}",
        variants.len()
    );
    for v in &variants {
        assert_eq!(bench_target(v, (12, 0)), Target::sm_a(12, 0));
    }
    let failures = assemble_all(&tc, &variants, (12, 0));
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}

#[test]
fn sass_guard_finds_the_expected_count_for_bf16_m16n8k16_on_sm_90() {
    let Some(tc) = toolchain(true) else { return };
    let v = find("m16n8k16.f32.bf16.bf16.f32").unwrap();
    let sm90 = Target::sm(9, 0);
    assert_eq!(bench_target(&v, (9, 0)), sm90);
    let p = prepare(&v, sm90, Some(&tc), &[1, 2, 4, 8], 8);
    let l = p.lowering.as_ref().expect("lowering measured");
    println!("lowering: {}", l.summary);
    assert_eq!(l.tensor_per_mma, 1);
    assert_eq!(l.tensor_ops, ["HMMA.16816.F32.BF16"]);
    assert!(!l.c_added_outside && !l.via_call && l.conversions.is_empty());
    assert_eq!(p.kernels.len(), 4);
    for k in &p.kernels {
        let c = &k.check;
        println!("{} chains: {}", k.shape.chains, c.cell());
        assert_eq!(c.status, CheckStatus::Verified, "{}", c.detail);
        assert!(k.rebuilt.is_none(), "bf16 needs no rebuild");
        assert_eq!(k.shape, KernelShape::new(k.shape.chains, 8));
        assert_eq!(c.expected, Some(8 * k.shape.chains));
        assert_eq!(c.found, c.expected);
        assert_eq!(c.loop_opcodes.get("HMMA.16816.F32.BF16"), c.found.as_ref());
        assert!(k.cubin.as_ref().is_some_and(|c| !c.is_empty()));
    }
    assert_eq!(
        bench::loop_per_mma(&p.kernel(1).unwrap().check),
        "1 × HMMA.16816.F32.BF16"
    );
}

#[test]
fn sass_guard_finds_the_expected_count_for_e4m3_m16n8k32_on_sm_90() {
    let Some(tc) = toolchain(true) else { return };
    let v = find("m16n8k32.f32.e4m3.e4m3.f32").unwrap();
    let sm90 = Target::sm(9, 0);
    let p = prepare(&v, sm90, Some(&tc), &[1, 8], 8);
    let l = p.lowering.as_ref().expect("lowering measured");
    println!("lowering: {}", l.summary);
    // sm_90 has no FP8 mma.sync: ptxas converts to f16 and runs two HMMA.16816 onto zero,
    // then adds C with FADD.
    assert_eq!(l.tensor_per_mma, 2);
    assert!(l.tensor_ops.iter().all(|o| o.starts_with("HMMA.16816.F32")));
    assert_eq!(
        l.conversions.values().sum::<u32>(),
        12,
        "{:?}",
        l.conversions
    );
    assert!(l.conversions.keys().all(|k| k.starts_with("F2FP")));
    assert!(l.c_added_outside);
    for k in &p.kernels {
        let c = &k.check;
        println!(
            "{} chains: {}; rebuilt: {:?}",
            k.shape.chains,
            c.cell(),
            k.rebuilt
        );
        assert_eq!(c.status, CheckStatus::Verified, "{}", c.detail);
        assert_eq!(c.found, Some(2 * k.shape.body_mmas()));
        // Identical A·B products are merged by ptxas unless every mma.sync of the body has its
        // own A and B: the guard caught that and the kernel was rebuilt.
        assert!(k.rebuilt.is_some());
        assert_eq!(k.shape, KernelShape::distinct(k.shape.chains, 8));
        assert_eq!(k.shape.body_mmas(), 8);
    }
}

#[test]
fn sass_guard_rejects_a_loop_ptxas_folded() {
    let Some(tc) = toolchain(true) else { return };
    let v = find("m16n8k32.f32.e4m3.e4m3.f32").unwrap();
    let sm90 = Target::sm(9, 0);
    // One A/B set per chain, 2 chains × 8 steps: 16 mma.sync, 32 HMMA expected.
    let shape = KernelShape::new(2, 8);
    let cubin = tc.assemble(&bench_kernel(&v, sm90, shape), sm90).unwrap();
    let check = check_loop(&tc.sass(&cubin).unwrap(), 2, shape.body_mmas());
    println!("{}", check.cell());
    assert_eq!(check.status, CheckStatus::Rejected);
    assert_eq!(check.expected, Some(32));
    assert!(check.found.unwrap() < 32, "{check:?}");
    // A wrong per-mma count is rejected too.
    let v = find("m16n8k16.f32.bf16.bf16.f32").unwrap();
    let shape = KernelShape::new(1, 8);
    let cubin = tc.assemble(&bench_kernel(&v, sm90, shape), sm90).unwrap();
    let sass = tc.sass(&cubin).unwrap();
    assert_eq!(check_loop(&sass, 1, 8).status, CheckStatus::Verified);
    assert_eq!(check_loop(&sass, 2, 8).status, CheckStatus::Rejected);
}

/// A loop that calls an emulation subroutine: the tensor instructions inside count, once per
/// call. Shaped like cuobjdump's listing of m16n8k32 s4 on sm_90.
const CANNED: &str = r#"
        /*0000*/                   LDC R1, c[0x0][0x28] ;                    /* 0x00000a00ff017b82 */
        /*0010*/                   CS2R R24, SR_CLOCKLO ;                    /* 0x0000000000187805 */
        /*0020*/                   UIADD3 UR4, UR4, 0x1, URZ ;               /* 0x0000000104047890 */
        /*0030*/                   MOV R28, 0x50 ;                           /* 0x0000005000 */
        /*0040*/                   CALL.REL.NOINC 0x100 ;                    /* 0x0000000000 */
        /*0050*/                   HMMA.16816.F32.BF16 R12, R4, R20, R12 ;   /* 0x0000001404 */
        /*0060*/              @!UPT UIADD3 URZ, URZ, URZ, URZ ;              /* 0x0000003f3f */
        /*0070*/              @!P0 BRA 0x20 ;                                /* 0xfffffffc00 */
        /*0080*/                   CS2R R4, SR_CLOCKLO ;                     /* 0x0000000000 */
        /*0090*/                   EXIT ;                                    /* 0x000000000000094d */
        /*0100*/                   IMMA.16816.S8.S8 R4, R4.ROW, R6.COL, RZ ; /* 0x0000000000 */
        /*0110*/                   IMMA.16816.S8.S8 R8, R8.ROW, R10.COL, RZ ;/* 0x0000000000 */
        /*0120*/                   IADD3 R13, R13, R4, R8 ;                  /* 0x0000000000 */
        /*0130*/                   RET.REL.NODEC R2 0x0 ;                    /* 0x0000000000 */
        /*0140*/                   BRA 0x140;                                /* 0x0000000000 */
"#;

#[test]
fn timed_loop_follows_calls_and_ignores_padding() {
    let sass = parse_sass(CANNED);
    assert_eq!(sass.instrs.len(), 15);
    let lp = timed_loop(&sass).unwrap();
    assert_eq!((lp.start, lp.end), (0x20, 0x70));
    assert_eq!(lp.counts.tensor, 3, "1 HMMA + 2 IMMA in the called routine");
    assert_eq!(lp.counts.calls, 1);
    assert_eq!(lp.counts.other_branches, 0);
    assert_eq!(
        lp.counts.opcodes.get("UIADD3"),
        Some(&1),
        "@!UPT padding is not counted"
    );
    let check = check_loop(CANNED, 3, 1);
    assert_eq!(check.status, CheckStatus::Verified, "{}", check.detail);
    assert_eq!(check_loop(CANNED, 1, 1).status, CheckStatus::Rejected);
    // Without the clock reads there is no timed loop to find.
    let no_clock = CANNED.replace("SR_CLOCKLO", "SR_TID.X");
    assert_eq!(check_loop(&no_clock, 3, 1).status, CheckStatus::Rejected);
    // nvdisasm spells targets as labels.
    let labelled = r#"
        /*0010*/                   CS2R R24, SR_CLOCKLO ;
.L_x_0:
        /*0020*/                   HMMA.16816.F32 R12, R4, R20, R12 ;
        /*0030*/                   HMMA.16816.F32 R16, R8, R2, R16 ;
        /*0040*/              @!P0 BRA `(.L_x_0) ;
        /*0050*/                   CS2R R4, SR_CLOCKLO ;
        /*0060*/                   EXIT ;
.L_x_1:
        /*0070*/                   BRA `(.L_x_1);
"#;
    let check = check_loop(labelled, 1, 2);
    assert_eq!(check.status, CheckStatus::Verified, "{}", check.detail);
    assert_eq!(check.loop_sass.len(), 3);
}

#[test]
fn lowering_reads_the_fragment_kernels_sass() {
    let frag = r#"
        /*0000*/                   LDG.E R4, desc[UR4][R2.64] ;
        /*0010*/                   F2FP.F16.E4M3.UNPACK_B R6, R4 ;
        /*0020*/                   F2FP.F16.E4M3.UNPACK_B R7, R4.H1 ;
        /*0030*/                   HMMA.16816.F32 R8, R6, R6, RZ ;
        /*0040*/                   HMMA.16816.F32 R8, R6, R6, R8 ;
        /*0050*/                   FADD R9, R8, R9 ;
        /*0060*/                   STG.E desc[UR4][R2.64], R9 ;
        /*0070*/                   EXIT ;
        /*0080*/                   BRA 0x80;
"#;
    let l = bench::lowering(frag).unwrap();
    assert_eq!(l.tensor_per_mma, 2);
    assert!(l.c_added_outside);
    assert_eq!(l.conversions.get("F2FP.F16.E4M3.UNPACK_B"), Some(&2));
    assert!(
        l.summary
            .starts_with("2 × HMMA.16816.F32 + 2 × F2FP.F16.E4M3.UNPACK_B")
    );
    assert!(bench::lowering("nothing here").is_err());
}

fn elements(v: &Variant, op: Operand, words: &[u32]) -> Vec<f64> {
    let f = v.fragment(op);
    let mut out = Vec::new();
    for r in 0..f.regs {
        for e in 0..f.elems_per_reg() {
            out.push(f.elem.decode(f.extract(words, r, e)));
        }
    }
    out
}

#[test]
fn inputs_are_distinct_nonzero_and_exact() {
    for id in [
        "m16n8k16.f32.bf16.bf16.f32",
        "m16n8k32.f16.e4m3.e5m2.f16",
        "m16n8k16.f64.f64.f64.f64",
        "m16n8k64.s32.s4.u4.s32",
        "m16n8k32.kind::mxf8f6f4.block_scale.scale_vec::1X.f32.e2m1.e3m2.f32.ue8m0",
        "m16n8k64.kind::mxf4nvf4.block_scale.scale_vec::4X.f32.e2m1.e2m1.f32.ue4m3",
    ] {
        let v = find(id).unwrap_or_else(|| panic!("{id}"));
        for shape in [KernelShape::new(2, 8), KernelShape::distinct(2, 8)] {
            let records = 6;
            let words = bench_inputs(&v, shape, records, 7);
            let per = in_words_per_lane(&v, shape);
            assert_eq!(words.len(), records * 32 * per);
            let mut seen = std::collections::HashSet::new();
            for rec in words.chunks(32 * per) {
                assert!(seen.insert(rec.to_vec()), "{id}: two records are equal");
                for lane in rec.chunks(per) {
                    let mut at = 0;
                    for _ in 0..shape.sets_per_chain {
                        for op in [Operand::A, Operand::B] {
                            let n = v.fragment(op).words_per_lane() as usize;
                            for x in elements(&v, op, &lane[at..at + n]) {
                                assert!(x != 0.0 && x.is_finite(), "{id}: {op:?} element {x}");
                            }
                            at += n;
                        }
                        if let Some(s) = v.scale {
                            let one = s.stype.one() as u32 * 0x0101_0101;
                            assert_eq!(&lane[at..at + 2], &[one, one], "{id}: scales are 1");
                            at += 2;
                        }
                    }
                    let n = v.fragment(Operand::C).words_per_lane() as usize;
                    for x in elements(&v, Operand::C, &lane[at..at + n]) {
                        assert!(x != 0.0 && x.abs() <= 2.0, "{id}: C element {x}");
                    }
                    assert_eq!(at + n, per);
                }
            }
        }
    }
}

/// The bound the module doc relies on: with f16 accumulation the per-step increment of an
/// accumulator, k × max|a| × max|b|, stays below 16, so rounding absorbs it before the
/// accumulator passes 2^15 (< 65504, the largest finite f16).
#[test]
fn f16_accumulators_cannot_overflow() {
    let max = |t: ElemType| {
        bench::ab_values(t)
            .iter()
            .fold(0.0f64, |m, x| m.max(x.abs()))
    };
    let mut seen = 0;
    for v in probed().iter().filter(|v| v.d == ElemType::F16) {
        let inc = v.shape.k as f64 * max(v.a) * max(v.b);
        assert!(inc < 16.0, "{}: increment up to {inc}", v.id());
        seen += 1;
    }
    assert!(seen > 0);
    // Every value is exact in its type, and none is zero.
    for v in probed() {
        for (t, vals) in [
            (v.a, bench::ab_values(v.a)),
            (v.b, bench::ab_values(v.b)),
            (v.c, bench::c_values(v.c)),
        ] {
            for &x in vals {
                assert!(x != 0.0);
                assert!(t.encode_exact(x).is_some(), "{x} is not exact in {t}");
            }
        }
    }
}

#[test]
fn stats_are_median_min_max() {
    let s = Stat::of(&[3.0, 1.0, 2.0, 10.0, 4.0]).unwrap();
    assert_eq!((s.median, s.min, s.max, s.n), (3.0, 1.0, 10.0, 5));
    assert_eq!(Stat::of(&[1.0, 2.0, 4.0, 8.0]).unwrap().median, 3.0);
    assert!(Stat::of(&[]).is_none());
    let d = Settings::default();
    assert_eq!(d.warps_per_sm, [1, 2, 4, 8, 16]);
    assert_eq!(d.chains, [1, 2, 4, 8]);
    assert!(d.runs >= 5 && d.warmup >= 2);
}

fn point(warps: u32, chains: u32, status: PointStatus, check: &str) -> PointResult {
    let st = |x: f64| Stat::of(&[x]);
    let ok = status == PointStatus::Accepted;
    PointResult {
        kind: "throughput".into(),
        warps_per_sm: warps,
        chains,
        grid: 132,
        threads_per_block: 32 * warps,
        unroll: 8,
        sets_per_chain: 1,
        iters: 1000,
        mma_per_launch: 1_000_000,
        registers_per_thread: Some(32),
        status,
        reason: (!ok).then(|| check.to_string()),
        sass_check: check.into(),
        time_ms: st(3.0),
        tflops: st(1.2345),
        flops_per_sm_per_clock: st(512.0),
        clock_mhz: st(1755.0),
        clock_globaltimer_mhz: st(1755.0),
        cycles_per_mma_per_chain: st(33.0),
        placement: None,
        finite: Some(true),
        note: None,
    }
}

fn sample_report() -> BenchReport {
    let mut skipped = point(16, 8, PointStatus::Skipped, "verified");
    skipped.reason = Some("does not fit: 255 registers/thread".into());
    let v = find("m16n8k16.f32.bf16.bf16.f32").unwrap();
    let info = DeviceInfo {
        backend: BackendKind::Hardware,
        name: "test device".into(),
        compute_capability: Some((9, 0)),
        driver: Some("13.0".into()),
    };
    BenchReport {
        schema: bench::BENCH_SCHEMA.into(),
        variant: v.id(),
        instruction: v.opcode(),
        flops_per_mma: v.flops(),
        backend: BackendKind::Hardware,
        provenance: Provenance::new(&info, String::new()),
        device: bench::BenchDevice {
            name: info.name.clone(),
            compute_capability: "9.0".into(),
            driver: info.driver.clone(),
            sm_count: 132,
            clock_rate_attribute_mhz: Some(1980.0),
            measured_clock_mhz: Stat::of(&[1755.0]),
        },
        target: "sm_90".into(),
        toolchain: None,
        settings: Settings::default(),
        lowering: Some(bench::Lowering {
            tensor_per_mma: 1,
            tensor_ops: vec!["HMMA.16816.F32.BF16".into()],
            conversions: Default::default(),
            c_added_outside: false,
            via_call: false,
            summary: "1 × HMMA.16816.F32.BF16".into(),
        }),
        lowering_error: None,
        kernels: vec![],
        latency: point(1, 1, PointStatus::Accepted, "verified"),
        points: vec![
            point(1, 1, PointStatus::Accepted, "verified"),
            point(
                1,
                8,
                PointStatus::Rejected,
                "rejected: 3 local-memory accesses",
            ),
            skipped,
        ],
        wall_s: 1.0,
    }
}

#[test]
fn csv_rows_and_merge() {
    let mut r = sample_report();
    // The JSON round-trips.
    let back: BenchReport = serde_json::from_str(&serde_json::to_string(&r).unwrap()).unwrap();
    assert_eq!(back, r);
    let rows = r.csv_rows();
    assert_eq!(rows.len(), r.points.len());
    assert_eq!(rows[0][0], "m16n8k16.f32.bf16.bf16.f32");
    assert_eq!(rows[0][3], "33.00");
    assert_eq!(rows[0][4], "1.234");
    assert_eq!(rows[0][6], "1");
    assert_eq!(rows[0][7], "verified");
    // Rejected: no figures, and the reason.
    assert_eq!(rows[1][4], "");
    assert!(rows[1][7].starts_with("rejected: "), "{}", rows[1][7]);
    // Skipped: no figures, and why.
    assert_eq!(rows[2][3], "");
    assert!(
        rows[2][7].starts_with("verified; skipped: "),
        "{}",
        rows[2][7]
    );

    let dir = common::tmpdir("bench", "csv");
    let (path, replaced) =
        bench::merge_csv(&dir, std::slice::from_ref(&r), &Outputs::new(false)).unwrap();
    assert!(!replaced);
    let other = {
        let mut o = r.clone();
        o.variant = "m16n8k8.f32.bf16.bf16.f32".into();
        o
    };
    bench::merge_csv(&dir, std::slice::from_ref(&other), &Outputs::new(false)).unwrap();
    // Re-running the first variant replaces its rows and keeps the other's.
    r.points.truncate(1);
    bench::merge_csv(&dir, std::slice::from_ref(&r), &Outputs::new(false)).unwrap();
    let text = std::fs::read_to_string(&path).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(
        lines[0],
        "variant,warps_per_sm,chains,latency_cycles,tflops,flops_per_sm_per_clock,sass_tensor_per_mma,sass_check"
    );
    assert_eq!(lines.len(), 1 + other.points.len() + 1, "{text}");
    assert!(lines[1].starts_with("m16n8k8."));
    assert!(lines.last().unwrap().starts_with("m16n8k16."));
}

fn has_driver() -> bool {
    // SAFETY: only probes whether libcuda can be loaded.
    unsafe { cudarc::driver::sys::is_culib_present() }
}

#[test]
fn bench_without_a_gpu_is_a_clear_error() {
    if has_driver() {
        println!("skipped: a CUDA driver is present");
        return;
    }
    let o = std::process::Command::new(env!("CARGO_BIN_EXE_fp4probe"))
        .args(["bench", "--variant", "m16n8k16.f32.bf16.bf16.f32"])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(err.contains("needs a CUDA GPU"), "{err}");
    assert!(err.contains("emulator"), "{err}");
    assert!(!err.contains("panicked"), "{err}");
}

#[test]
fn bench_sass_only_works_without_a_gpu() {
    let Some(_) = toolchain(true) else { return };
    let o = std::process::Command::new(env!("CARGO_BIN_EXE_fp4probe"))
        .args([
            "bench",
            "--variant",
            "m16n8k16.f32.bf16.bf16.f32",
            "--sass-only",
            "sm_90",
            "--chains",
            "2",
        ])
        .output()
        .unwrap();
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(
        o.status.success(),
        "{out}{}",
        String::from_utf8_lossy(&o.stderr)
    );
    assert!(out.contains("1 × HMMA.16816.F32.BF16"), "{out}");
    assert!(
        out.contains("kernel 2 chain(s) × 8 step(s), 1 A/B set(s) per chain: verified"),
        "{out}"
    );
}

// ---------------------------------------------------------------------------------------------
// wgmma (sm_90a)
// ---------------------------------------------------------------------------------------------

use fp4probe::probe::bench::wgmma::{
    WG_BENCH_SCHEMA, WG_CSV_HEADER, WgBenchReport, WgPoint, WgSettings, loop_summary, merge_wg_csv,
    sweep_table,
};
use fp4probe::probe::bench::wgmma_prepare::{WgPlan, build_wg_kernel, prepare_wgmma};
use fp4probe::wgmma::bench::{
    Layout, WgShape, bench_variant, check_wg_loop, element_codes, type_set, unfit, wg_bench_kernel,
    wg_inputs, wgmma_advisories,
};

fn sm90a() -> Target {
    Target::sm_a(9, 0)
}

/// The headline kernels: bf16 m64n256k16 and e4m3 m64n256k32, ss and rs. Every kernel that is
/// built passes the guard with exactly the expected HGMMA/QGMMA per iteration and one
/// WARPGROUP.DEPBAR per commit group; the ones that cannot fit the registers are not built.
#[test]
fn wgmma_sass_guard_verifies_the_m64n256_kernels() {
    let Some(tc) = toolchain(true) else { return };
    let ids = [
        "m64n256k16.f32.bf16.bf16.ss",
        "m64n256k16.f32.bf16.bf16.rs",
        "m64n256k32.f32.e4m3.e4m3.ss",
        "m64n256k32.f32.e4m3.e4m3.rs",
    ];
    let vs: Vec<_> = ids.iter().map(|i| bench_variant(i).unwrap()).collect();
    let plan = WgPlan::default();
    let ps = prepare_wgmma(&vs, sm90a(), Some(&tc), &plan, 8);
    for p in &ps {
        let mnemonic = if p.variant.a == ElemType::Bf16 {
            "HGMMA.64x256x16.F32.BF16"
        } else {
            "QGMMA.64x256x32.F32.E4M3.E4M3"
        };
        let lat = &p.latency().check;
        println!("{} latency: {}", p.variant.id(), lat.cell());
        assert_eq!(lat.status, CheckStatus::Verified, "{}", lat.detail);
        assert_eq!(lat.found, Some(8));
        assert_eq!(lat.loop_opcodes.get(mnemonic), Some(&8), "{lat:?}");
        assert_eq!(lat.loop_opcodes.get("WARPGROUP.DEPBAR.LE"), Some(&8));
        let mut built = 0;
        for k in p.throughput() {
            println!("  {:?}: {}", k.shape, k.check.cell());
            if k.shape.chains == 2 || (p.variant.id().ends_with(".rs") && k.shape.warpgroups == 3) {
                // 2 × 128 accumulators, or 128 + 16 A registers in a CTA of 384 threads.
                assert!(k.skipped.is_some(), "{:?} should not fit", k.shape);
                continue;
            }
            built += 1;
            let c = &k.check;
            assert_eq!(c.status, CheckStatus::Verified, "{}", c.detail);
            assert_eq!(c.found, Some(4));
            assert_eq!(c.loop_opcodes.get(mnemonic), Some(&4), "{c:?}");
            assert_eq!(c.loop_opcodes.get("WARPGROUP.DEPBAR.LE"), Some(&1));
            assert!(
                c.loop_sass
                    .iter()
                    .any(|l| l.contains("WARPGROUP.DEPBAR.LE gsb0, 0x1")),
                "{:?}",
                c.loop_sass
            );
            assert!(wgmma_advisories(&k.ptxas_log).is_empty(), "{}", k.ptxas_log);
            assert_eq!(
                loop_summary(c),
                format!("4 × {mnemonic}, 1 × WARPGROUP.ARRIVE, 1 × WARPGROUP.DEPBAR.LE")
            );
        }
        assert!(built >= 2, "{}: {built} throughput kernels", p.variant.id());
        assert!(p.all_verified());
    }
}

/// Kernels for a spread of N, element types, sources and both layouts assemble and pass the
/// guard: 2 warpgroups with groups of 4 and the latency kernel.
#[test]
fn wgmma_kernels_assemble_and_verify_across_n_and_types() {
    let Some(tc) = toolchain(true) else { return };
    let sets = [
        "f32.bf16.bf16.ss",
        "f16.f16.f16.rs",
        "f32.tf32.tf32.ss",
        "f16.e5m2.e4m3.rs",
        "s32.s8.s8.ss",
        "satfinite.s32.u8.s8.rs",
        "s32.b1.b1.and.popc.ss",
    ];
    let mut jobs = Vec::new();
    for set in sets {
        for v in type_set(set).unwrap() {
            if [8, 16, 64, 136, 256].contains(&v.n) {
                for (i, layout) in [Layout::Swizzle128, Layout::Interleave]
                    .into_iter()
                    .enumerate()
                {
                    // Both layouts for the throughput kernel, the default one for latency.
                    jobs.push((v.clone(), WgShape::throughput(2, 1, 4, 1, layout)));
                    if i == 0 {
                        jobs.push((v.clone(), WgShape::latency(4, layout)));
                    }
                }
            }
        }
    }
    assert!(jobs.len() > 80, "{}", jobs.len());
    let failures: Vec<String> = par_map(&jobs, |(v, s)| {
        let k = build_wg_kernel(v, sm90a(), Some(&tc), *s);
        (k.check.status != CheckStatus::Verified)
            .then(|| format!("{} {s:?}: {}", v.id(), k.check.detail))
    })
    .into_iter()
    .flatten()
    .collect();
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// The guard refuses what it must: ptxas serialising wgmma for lack of registers, a wait_group
/// ptxas injected because the loop touches an accumulator, and a count that is not the kernel's.
#[test]
fn wgmma_sass_guard_rejects_serialised_and_miscounted_loops() {
    let Some(tc) = toolchain(true) else { return };
    let v = bench_variant("m64n256k16.f32.bf16.bf16.rs").unwrap();
    // 3 warpgroups leave 168 registers a thread: 128 accumulators + 16 A registers do not fit,
    // so ptxas serialises (C7512) and spills. The plan would not build it; force it here.
    let shape = WgShape::throughput(3, 1, 4, 1, Layout::Swizzle128);
    assert!(unfit(&v, shape).is_some());
    let (cubin, log) = tc
        .assemble_logged(&wg_bench_kernel(&v, sm90a(), shape), sm90a())
        .unwrap();
    let c = check_wg_loop(&tc.sass(&cubin).unwrap(), &log, &v, shape);
    println!("{}", c.cell());
    assert_eq!(c.status, CheckStatus::Rejected);
    assert!(c.detail.contains("serialized"), "{}", c.detail);
    assert!(
        c.detail.contains("WARPGROUP.DEPBAR per loop iteration"),
        "{}",
        c.detail
    );

    // An accumulator read inside the loop: ptxas injects a wait_group (C7517).
    let v = bench_variant("m64n128k16.f32.bf16.bf16.ss").unwrap();
    let shape = WgShape::throughput(2, 1, 4, 1, Layout::Swizzle128);
    let ptx = wg_bench_kernel(&v, sm90a(), shape).replace(
        "    wgmma.commit_group.sync.aligned;\n",
        "    wgmma.commit_group.sync.aligned;\n    add.f32 %d0_0, %d0_0, 0f3F800000;\n",
    );
    let (cubin, log) = tc.assemble_logged(&ptx, sm90a()).unwrap();
    let sass = tc.sass(&cubin).unwrap();
    let c = check_wg_loop(&sass, &log, &v, shape);
    println!("{}", c.cell());
    assert_eq!(c.status, CheckStatus::Rejected);
    assert!(!wgmma_advisories(&log).is_empty(), "{log}");

    // The untouched kernel passes, and the same SASS judged against another shape does not.
    let (cubin, log) = tc
        .assemble_logged(&wg_bench_kernel(&v, sm90a(), shape), sm90a())
        .unwrap();
    let sass = tc.sass(&cubin).unwrap();
    assert_eq!(
        check_wg_loop(&sass, &log, &v, shape).status,
        CheckStatus::Verified
    );
    let eight = WgShape::throughput(2, 1, 8, 1, Layout::Swizzle128);
    let c = check_wg_loop(&sass, &log, &v, eight);
    assert_eq!(c.status, CheckStatus::Rejected);
    assert_eq!((c.found, c.expected), (Some(4), Some(8)));
    let two = WgShape::throughput(2, 1, 4, 2, Layout::Swizzle128);
    assert_eq!(
        check_wg_loop(&sass, &log, &v, two).status,
        CheckStatus::Rejected
    );
    let other = bench_variant("m64n256k16.f32.bf16.bf16.ss").unwrap();
    let c = check_wg_loop(&sass, &log, &other, shape);
    assert_eq!(c.status, CheckStatus::Rejected);
    assert!(
        c.detail.contains("other than HGMMA.64x256x16"),
        "{}",
        c.detail
    );
}

/// The guard on canned listings (no tools): one iteration, a second DEPBAR, a spill.
#[test]
fn wgmma_sass_guard_on_canned_listings() {
    let good = r#"
        /*0800*/                   CS2R R4, SR_CLOCKLO ;
        /*0830*/                   WARPGROUP.ARRIVE ;
        /*0840*/                   UMOV UR8, UR17 ;
        /*0890*/                   HGMMA.64x256x16.F32.BF16 R24, gdesc[UR8], R24 ;
        /*0900*/                   HGMMA.64x256x16.F32.BF16 R24, gdesc[UR8], R24 ;
        /*0950*/                   HGMMA.64x256x16.F32.BF16 R24, gdesc[UR8], R24 ;
        /*09a0*/                   HGMMA.64x256x16.F32.BF16 R24, gdesc[UR8], R24, gsb0 ;
        /*09b0*/                   WARPGROUP.DEPBAR.LE gsb0, 0x1 ;
        /*09c0*/              @!P0 BRA 0x830 ;
        /*09d0*/                   WARPGROUP.DEPBAR.LE gsb0, 0x0 ;
        /*09e0*/                   CS2R R6, SR_CLOCKLO ;
        /*09f0*/                   EXIT ;
"#;
    let v = bench_variant("m64n256k16.f32.bf16.bf16.ss").unwrap();
    let shape = WgShape::throughput(2, 1, 4, 1, Layout::Swizzle128);
    let c = check_wg_loop(good, "", &v, shape);
    assert_eq!(c.status, CheckStatus::Verified, "{}", c.detail);
    assert_eq!(c.loop_sass.len(), 8);
    let serial = good.replace(
        "/*0900*/                   HGMMA.64x256x16.F32.BF16 R24, gdesc[UR8], R24 ;",
        "/*0900*/                   HGMMA.64x256x16.F32.BF16 R24, gdesc[UR8], R24, gsb0 ;\n        /*0910*/                   WARPGROUP.DEPBAR.LE gsb0, 0x0 ;",
    );
    let c = check_wg_loop(&serial, "", &v, shape);
    assert_eq!(c.status, CheckStatus::Rejected);
    assert!(c.detail.contains("2 WARPGROUP.DEPBAR"), "{}", c.detail);
    let spill = good.replace(
        "/*09f0*/                   EXIT ;",
        "/*09f0*/                   STL [R1], R2 ;\n        /*0a00*/                   EXIT ;",
    );
    let c = check_wg_loop(&spill, "", &v, shape);
    assert_eq!(c.status, CheckStatus::Rejected);
    assert!(c.detail.contains("register spills"), "{}", c.detail);
    let log = "ptxas info    : (C7515) Potential Performance Loss: wgmma.mma_async instructions are serialized due to the presence of Extern calls in the function 'k'";
    let c = check_wg_loop(good, log, &v, shape);
    assert_eq!(c.status, CheckStatus::Rejected);
    assert!(c.detail.contains("C7515"), "{}", c.detail);
    assert!(wgmma_advisories("ptxas info    : Used 154 registers").is_empty());
}

#[test]
fn wgmma_inputs_are_nonzero_and_in_range() {
    for id in [
        "m64n256k16.f32.bf16.bf16.ss",
        "m64n64k16.f16.f16.f16.rs",
        "m64n256k8.f32.tf32.tf32.rs",
        "m64n256k32.f32.e4m3.e4m3.ss",
        "m64n128k32.f16.e5m2.e4m3.rs",
        "m64n256k32.s32.u8.s8.ss",
        "m64n256k256.s32.b1.b1.and.popc.rs",
    ] {
        let v = bench_variant(id).unwrap();
        for t in [v.a, v.b] {
            let codes = element_codes(t);
            for &c in &codes {
                let x = t.decode(c);
                assert!(x != 0.0, "{id}: zero code {c:#x}");
                if t.is_float() {
                    assert!((0.125..=0.5).contains(&x.abs()), "{id}: {x}");
                } else {
                    assert!(x.abs() <= 3.0, "{id}: {x}");
                }
            }
            if t != ElemType::B1 {
                assert!(codes.len() >= 3, "{id}: {} codes", codes.len());
            }
            if t.is_float() {
                assert!(codes.iter().any(|&c| t.decode(c) < 0.0), "{id}: both signs");
            }
        }
        let words = wg_inputs(&v, 3, 5);
        let a_regs = fp4probe::wgmma::bench::a_reg_words(&v) as usize * 128;
        let image = fp4probe::wgmma::bench::image_bytes(&v, 3) as usize / 4;
        assert_eq!(words.len(), a_regs + image, "{id}");
        let bits = v.a.value_bits();
        for &w in &words {
            assert!(w != 0, "{id}: a zero word");
            if bits < 32 && v.a == v.b {
                for e in 0..32 / bits {
                    let c = (w as u64 >> (e * bits)) & ((1 << bits) - 1);
                    assert!(
                        bits == 1 || v.a.decode(c) != 0.0,
                        "{id}: zero element in {w:#x}"
                    );
                }
            }
        }
        assert_ne!(words, wg_inputs(&v, 3, 6), "{id}: the seed matters");
    }
}

#[test]
fn wgmma_type_sets_and_refusals() {
    let bf16 = type_set("f32.bf16.bf16.ss").unwrap();
    assert_eq!(bf16.len(), 32);
    assert!(bf16.iter().all(|v| v.k == 16 && !v.sparse));
    assert_eq!(
        type_set("f32.bf16.bf16").unwrap(),
        bf16,
        "ss when no source is named"
    );
    assert_eq!(type_set("s32.s8.s8.rs").unwrap().len(), 18);
    assert_eq!(type_set("satfinite.s32.u8.s8.ss").unwrap().len(), 18);
    assert!(
        type_set("sp.f32.bf16.bf16.ss")
            .unwrap_err()
            .contains("sparse")
    );
    assert!(type_set("f32.bf16.e4m3.ss").is_err());
    let e = bench_variant("sp.m64n256k32.f32.bf16.bf16.ss").unwrap_err();
    assert!(
        e.contains("not benchmarked yet") && e.contains("m64n256k16.f32.bf16.bf16.ss"),
        "{e}"
    );
    assert!(bench_variant("m64n256k16.f32.bf16.bf16.xx").is_err());
    assert!(bench_variant("m64n256k16.f32.bf16.bf16.ss").is_ok());
}

fn fp4probe_cmd(args: &[&str]) -> std::process::Output {
    std::process::Command::new(env!("CARGO_BIN_EXE_fp4probe"))
        .args(args)
        .output()
        .unwrap()
}

#[test]
fn wgmma_cli_refuses_bad_inputs_before_the_device() {
    let cases: &[(&[&str], &str)] = &[
        (
            &["bench", "--wgmma", "m64n256k16.f32.bf16.bf16.zz"],
            "not a wgmma catalog id",
        ),
        (
            &["bench", "--wgmma", "sp.m64n256k64.f32.e4m3.e4m3.ss"],
            "not benchmarked yet",
        ),
        (
            &["bench", "--wgmma-sweep", "f32.bf16.e5m2.ss"],
            "no wgmma type set",
        ),
        (&["bench", "--wgmma-sweep", "sp.f32.bf16.bf16.ss"], "sparse"),
        (
            &["bench", "--wgmma-sweep", "s32.s8.s8.ss", "--wgmma-n", "40"],
            "has no N = 40",
        ),
        (
            &[
                "bench",
                "--wgmma-sweep",
                "f32.bf16.bf16.ss",
                "--wgmma-n",
                "300",
            ],
            "8..=256",
        ),
        (
            &[
                "bench",
                "--wgmma",
                "m64n256k16.f32.bf16.bf16.ss",
                "--wgmma-sweep",
                "f32.bf16.bf16",
            ],
            "cannot be used with",
        ),
        (
            &[
                "bench",
                "--wgmma",
                "m64n256k16.f32.bf16.bf16.ss",
                "--chains",
                "2",
            ],
            "cannot be used",
        ),
        (
            &[
                "bench",
                "--wgmma",
                "m64n256k16.f32.bf16.bf16.ss",
                "--warpgroups",
                "5",
            ],
            "1..=4",
        ),
        (
            &[
                "bench",
                "--variant",
                "m16n8k16.f32.bf16.bf16.f32",
                "--warpgroups",
                "2",
            ],
            "required",
        ),
        (
            &[
                "bench",
                "--wgmma",
                "m64n256k16.f32.bf16.bf16.ss",
                "--sass-only",
                "sm_100a",
            ],
            "sm_90a only",
        ),
    ];
    for (args, want) in cases {
        let o = fp4probe_cmd(args);
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {err}");
        assert!(err.contains(want), "{args:?}: {err}");
        assert!(!err.contains("panicked"), "{args:?}: {err}");
        assert!(
            !err.contains("needs a CUDA GPU"),
            "{args:?} reached the device: {err}"
        );
    }
}

#[test]
fn wgmma_bench_without_a_gpu_is_a_clear_error() {
    if has_driver() {
        println!("skipped: a CUDA driver is present");
        return;
    }
    let o = fp4probe_cmd(&["bench", "--wgmma", "m64n256k16.f32.bf16.bf16.ss"]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(err.contains("needs a CUDA GPU"), "{err}");
    assert!(err.contains("--sass-only sm_90a"), "{err}");
    assert!(!err.contains("panicked"), "{err}");
}

#[test]
fn wgmma_bench_sass_only_works_without_a_gpu() {
    let Some(_) = toolchain(true) else { return };
    let o = fp4probe_cmd(&[
        "bench",
        "--wgmma",
        "m64n256k32.f32.e4m3.e4m3.ss",
        "--sass-only",
        "sm_90",
        "--warpgroups",
        "2",
        "--accumulators",
        "1",
    ]);
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(
        o.status.success(),
        "{out}{}",
        String::from_utf8_lossy(&o.stderr)
    );
    assert!(
        out.contains("m64n256k32.f32.e4m3.e4m3.ss on sm_90a"),
        "{out}"
    );
    assert!(
        out.contains(
            "throughput kernel 2 WG × 1 acc, 1 group(s) of 4 wgmma, wait_group 1, swizzle128: \
             verified"
        ),
        "{out}"
    );
    assert!(
        out.contains(
            "4 × QGMMA.64x256x32.F32.E4M3.E4M3, 1 × WARPGROUP.ARRIVE, 1 × WARPGROUP.DEPBAR.LE"
        ),
        "{out}"
    );
    assert!(out.contains("1 of 1 variants"), "{out}");
}

fn wg_point(kind: &str, w: u32, chains: u32, status: PointStatus, tflops: f64) -> WgPoint {
    let st = |x: f64| Stat::of(&[x]);
    let shape = if kind == "latency" {
        WgShape::latency(8, Layout::Swizzle128)
    } else {
        WgShape::throughput(w, chains, 4, 1, Layout::Swizzle128)
    };
    let ok = status == PointStatus::Accepted;
    WgPoint {
        kind: kind.into(),
        shape,
        ctas_per_sm: 1,
        grid: 132,
        threads_per_block: 128 * w,
        dynamic_smem_bytes: 50176,
        iters: 1000,
        wgmma_per_launch: 1_000_000,
        registers_per_thread: Some(154),
        status,
        reason: (!ok).then(|| "does not fit".to_string()),
        sass_check: "verified".into(),
        time_ms: st(3.0),
        tflops: (kind != "latency").then(|| Stat::of(&[tflops]).unwrap()),
        flops_per_sm_per_clock: st(4000.0),
        clock_mhz: st(1700.0),
        clock_globaltimer_mhz: st(1700.0),
        cycles_per_wgmma: st(130.0),
        placement: None,
        finite: Some(true),
        note: None,
    }
}

fn wg_sample_report(id: &str) -> WgBenchReport {
    let v = bench_variant(id).unwrap();
    let info = DeviceInfo {
        backend: BackendKind::Hardware,
        name: "test device".into(),
        compute_capability: Some((9, 0)),
        driver: Some("13.0".into()),
    };
    WgBenchReport {
        schema: WG_BENCH_SCHEMA.into(),
        variant: v.id(),
        instruction: v.opcode(),
        sass_instruction: fp4probe::wgmma::bench::sass_mnemonic(&v),
        n: v.n,
        flops_per_wgmma: v.flops(),
        unit: "TFLOP/s".into(),
        backend: BackendKind::Hardware,
        provenance: Provenance::new(&info, String::new()),
        device: bench::BenchDevice {
            name: info.name.clone(),
            compute_capability: "9.0".into(),
            driver: info.driver.clone(),
            sm_count: 132,
            clock_rate_attribute_mhz: Some(1980.0),
            measured_clock_mhz: Stat::of(&[1700.0]),
        },
        target: "sm_90a".into(),
        ptx_version: "8.0".into(),
        toolchain: None,
        settings: WgSettings::default(),
        kernels: vec![],
        latency: wg_point("latency", 1, 1, PointStatus::Accepted, 0.0),
        points: vec![
            wg_point("throughput", 1, 1, PointStatus::Accepted, 700.0),
            wg_point("throughput", 2, 1, PointStatus::Accepted, 850.5),
            wg_point("throughput", 3, 2, PointStatus::Skipped, 0.0),
        ],
        wall_s: 1.0,
    }
}

#[test]
fn wgmma_report_json_csv_and_tables() {
    let r = wg_sample_report("m64n256k16.f32.bf16.bf16.ss");
    let back: WgBenchReport = serde_json::from_str(&serde_json::to_string(&r).unwrap()).unwrap();
    assert_eq!(back, r);
    assert_eq!(r.best().unwrap().shape.warpgroups, 2);
    let rows = r.csv_rows();
    assert_eq!(rows.len(), 1 + r.points.len());
    assert_eq!(rows[0][2], "latency");
    assert_eq!(rows[0][7], "130.00");
    assert_eq!(rows[0][8], "", "no rate for the latency point");
    assert_eq!(rows[2][8], "850.50");
    assert_eq!(rows[3][8], "", "skipped: no figures");
    assert!(
        rows[3][12].contains("skipped: does not fit"),
        "{}",
        rows[3][12]
    );
    assert!(
        r.one_line().contains("best 850.5 TFLOP/s"),
        "{}",
        r.one_line()
    );
    assert!(
        r.text()
            .contains("latency: 130.0 cycles per dependent wgmma"),
        "{}",
        r.text()
    );
    let table = sweep_table(&[r.clone(), wg_sample_report("m64n128k16.f32.bf16.bf16.ss")]);
    assert_eq!(table.lines().count(), 3, "{table}");
    assert!(table.contains(" 256 "), "{table}");

    let dir = common::tmpdir("bench", "wgmma-csv");
    let out = Outputs::new(false);
    merge_wg_csv(&dir, std::slice::from_ref(&r), &out).unwrap();
    let other = wg_sample_report("m64n128k16.f32.bf16.bf16.ss");
    merge_wg_csv(&dir, std::slice::from_ref(&other), &out).unwrap();
    let mut again = r.clone();
    again.points.truncate(1);
    let (path, replaced) = merge_wg_csv(&dir, std::slice::from_ref(&again), &out).unwrap();
    assert!(!replaced);
    let text = std::fs::read_to_string(&path).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines[0], WG_CSV_HEADER.join(","));
    assert_eq!(lines.len(), 1 + 4 + 2, "{text}");
    assert!(lines[1].starts_with("m64n128k16."));
    assert!(lines.last().unwrap().starts_with("m64n256k16."));
    // The JSON goes through outfile: a foreign file is refused.
    std::fs::write(dir.join(format!("{}.wgmma-bench.json", r.variant)), "mine").unwrap();
    assert!(r.write_json(&dir, &out).is_err());
}

#[path = "support/gpu.rs"]
mod gpu_support;

#[test]
#[ignore = "needs an NVIDIA GPU: run with `cargo test --release -- --ignored` on an sm_90 machine"]
fn wgmma_bench_runs_on_the_gpu() {
    let backend = gpu_support::gpu("wgmma_bench_runs_on_the_gpu");
    let v = bench_variant("m64n128k16.f32.bf16.bf16.ss").unwrap();
    let plan = WgPlan {
        warpgroups: vec![2],
        chains: vec![1],
        ..WgPlan::default()
    };
    let tc = Toolchain::for_device();
    let p = &prepare_wgmma(&[v], sm90a(), tc.as_ref(), &plan, 4)[0];
    let s = WgSettings {
        plan,
        runs: 3,
        target_ms: 2.0,
        preheat_ms: 0.0,
        ..WgSettings::default()
    };
    let r = fp4probe::probe::bench::wgmma_measure::measure_wgmma(&backend, p, &s).unwrap();
    println!("{}", r.text());
    assert_eq!(
        r.latency.status,
        PointStatus::Accepted,
        "{:?}",
        r.latency.reason
    );
    let best = r.best().expect("an accepted throughput point");
    assert!(best.tflops.unwrap().median > 10.0);
    assert_eq!(best.finite, Some(true));
    assert!(best.placement.unwrap().as_intended);
}

/// The guard on real listings of the pinned ptxas (`tests/sass-fixtures/pinned13.5-wgmma-*`; no
/// tools needed): the bench's own kernel passes, the one ptxas serialised does not, with or
/// without ptxas's log.
#[test]
fn wgmma_sass_guard_on_pinned_fixtures() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/sass-fixtures");
    let read = |f: &str| std::fs::read_to_string(dir.join(f)).unwrap();
    let v = bench_variant("m64n256k16.f32.bf16.bf16.ss").unwrap();
    let shape = WgShape::throughput(2, 1, 4, 1, Layout::Swizzle128);
    let c = check_wg_loop(
        &read("pinned13.5-wgmma-m64n256k16-bf16-ss-2wg.cuobjdump.txt"),
        "",
        &v,
        shape,
    );
    assert_eq!(c.status, CheckStatus::Verified, "{}", c.detail);
    assert_eq!(
        loop_summary(&c),
        "4 × HGMMA.64x256x16.F32.BF16, 1 × WARPGROUP.ARRIVE, 1 × WARPGROUP.DEPBAR.LE"
    );
    let v = bench_variant("m64n256k16.f32.bf16.bf16.rs").unwrap();
    let shape = WgShape::throughput(3, 1, 4, 1, Layout::Swizzle128);
    let sass = read("pinned13.5-wgmma-m64n256k16-bf16-rs-3wg-serialized.cuobjdump.txt");
    let log = read("pinned13.5-wgmma-m64n256k16-bf16-rs-3wg-serialized.ptxas.log");
    let c = check_wg_loop(&sass, &log, &v, shape);
    assert_eq!(c.status, CheckStatus::Rejected);
    assert!(c.detail.contains("C7512"), "{}", c.detail);
    assert!(
        c.detail.contains("4 WARPGROUP.DEPBAR per loop iteration"),
        "{}",
        c.detail
    );
    assert!(c.detail.contains("register spills"), "{}", c.detail);
    assert_eq!(
        check_wg_loop(&sass, "", &v, shape).status,
        CheckStatus::Rejected
    );
}
