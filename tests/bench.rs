//! `fp4probe bench` without a GPU: everything that can be checked on the CPU.
//!
//! - the bench kernel template fills in for every sm_90 variant and assembles for sm_90 with the
//!   pinned ptxas, and for every sm_120a (FP4/FP6/FP8 kind::) variant for sm_120a;
//! - the SASS guard, on cubins from the pinned ptxas for sm_90, finds the expected tensor
//!   instruction count in the timed loop for bf16 m16n8k16 (1 HMMA per mma.sync) and e4m3
//!   m16n8k32 (2 HMMA + 12 F2FP per mma.sync), and rejects a loop ptxas folded;
//! - SASS parsing, inputs, statistics, the CSV merge, and the no-GPU error.
//!
//! The ptxas tests need ptxas (and cuobjdump or nvdisasm): `.ci/install-cuda-tools` puts the
//! pinned ones under `.tools/`. Without them they print "skipped" and pass, except under CI
//! (env `CI` set), where they fail.

use fp4probe::device::{BackendKind, DeviceInfo};
use fp4probe::formats::ElemType;
use fp4probe::isa::{Operand, Target, Variant, catalog, find};
use fp4probe::probe::bench::{
    self, BenchReport, CheckStatus, KernelShape, PointResult, PointStatus, Settings, Stat,
    Toolchain, bench_inputs, bench_kernel, bench_target, check_loop, in_words_per_lane, parse_sass,
    prepare, timed_loop,
};
use fp4probe::provenance::Provenance;
use fp4probe::tools;

mod common;
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

/// `f` over `items` on a few threads, results in order.
fn par_map<T: Sync, R: Send>(items: &[T], f: impl Fn(&T) -> R + Sync) -> Vec<R> {
    let threads = std::thread::available_parallelism()
        .map_or(2, |n| n.get())
        .clamp(2, 8);
    let chunk = items.len().div_ceil(threads).max(1);
    std::thread::scope(|s| {
        let handles: Vec<_> = items
            .chunks(chunk)
            .map(|part| s.spawn(|| part.iter().map(&f).collect::<Vec<R>>()))
            .collect();
        handles
            .into_iter()
            .flat_map(|h| h.join().expect("worker panicked"))
            .collect()
    })
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
    let variants: Vec<Variant> = catalog()
        .into_iter()
        .filter(|v| v.min_target.runs_on((9, 0)))
        .collect();
    assert_eq!(
        variants.len(),
        64,
        "the catalog has 64 variants that run on sm_90"
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
    let variants: Vec<Variant> = catalog()
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
    for v in catalog().iter().filter(|v| v.d == ElemType::F16) {
        let inc = v.shape.k as f64 * max(v.a) * max(v.b);
        assert!(inc < 16.0, "{}: increment up to {inc}", v.id());
        seen += 1;
    }
    assert!(seen > 0);
    // Every value is exact in its type, and none is zero.
    for v in catalog() {
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
