//! Bad arguments of the GPU commands (`attention`, `quant-bench`, `bench`, `wgmma`) are refused
//! before any work: exit status 2, a message naming the option, and neither the missing GPU nor
//! a file in the temporary folder (ptxas's scratch) on the way. Checked without a GPU, and the
//! same on a machine with one, since no device is opened for a bad value.

mod common;
use common::{text, tmpdir};
use std::process::Command;

/// Run the binary with the temporary folder pointed at an empty scratch folder, so that any
/// file written there (by ptxas, or anything else the command starts) shows.
fn refused(args: &[&str], says: &[&str]) {
    let scratch = tmpdir("args", "tmp");
    let o = Command::new(env!("CARGO_BIN_EXE_fp4probe"))
        .args(args)
        .env("TMPDIR", &*scratch)
        .output()
        .expect("binary runs");
    let t = text(&o);
    assert_eq!(o.status.code(), Some(2), "{args:?}: {t}");
    for s in says {
        assert!(t.contains(s), "{args:?}: expected {s:?} in:\n{t}");
    }
    for s in ["libcuda", "CUDA device", "CUDA GPU", "panicked"] {
        assert!(!t.contains(s), "{args:?}: {s:?} in:\n{t}");
    }
    let left: Vec<_> = std::fs::read_dir(&*scratch).unwrap().collect();
    assert!(left.is_empty(), "{args:?} wrote {left:?}");
}

#[test]
fn attention_refuses_conflicting_modes() {
    refused(
        &["attention", "--suite", "--bench"],
        &["the argument '--suite' cannot be used with '--bench'"],
    );
    refused(
        &["attention", "--bench", "--seq-q", "77"],
        &["'--bench' cannot be used with '--seq-q <SEQ_Q>'"],
    );
    refused(
        &["attention", "--suite", "--format", "mxfp4"],
        &["'--suite' cannot be used with '--format <FORMAT>'"],
    );
    refused(
        &["attention", "--suite", "--csv", "x.csv"],
        &["'--suite' cannot be used with '--csv <CSV>'"],
    );
    // The sweep options belong to --bench.
    refused(
        &["attention", "--seqs", "1024"],
        &["required arguments were not provided", "--bench"],
    );
}

#[test]
fn attention_refuses_bad_values_naming_the_option() {
    refused(
        &["attention", "--batch", "0"],
        &["invalid value '0' for '--batch <BATCH>': must be at least 1"],
    );
    refused(
        &["attention", "--seq-k", "0"],
        &["invalid value '0' for '--seq-k <SEQ_K>': must be at least 1"],
    );
    refused(
        &["attention", "--head-dim", "96"],
        &["--head-dim 96 is not supported: the kernels are built for head_dim 64, 128 and 256"],
    );
    refused(
        &["attention", "--bench", "--head-dims", "64,100"],
        &["--head-dims 100 is not supported"],
    );
    refused(
        &["attention", "--bench", "--repeats", "0"],
        &["invalid value '0' for '--repeats <REPEATS>': 0 is not in 1..=10000"],
    );
    refused(
        &["attention", "--bench", "--seqs", "0"],
        &["invalid value '0' for '--seqs <SEQS>': must be at least 1"],
    );
    refused(
        &["attention", "--path", "wgmma", "--head-dim", "256"],
        &["--path wgmma runs head_dim [64, 128]; head_dim 256 runs on --path bf16"],
    );
    refused(
        &[
            "attention",
            "--path",
            "block-scale-k32",
            "--format",
            "nvfp4",
        ],
        &["--path block-scale-k32 runs MXFP4 only"],
    );
    refused(
        &["attention", "--bench", "--path", "block-scale-emulated"],
        &["--bench times real kernels; --path block-scale-emulated runs a software model"],
    );
    refused(
        &[
            "attention",
            "--bench",
            "--csv",
            "/nonexistent-fp4probe/fp4.csv",
        ],
        &["--csv /nonexistent-fp4probe/fp4.csv: the folder /nonexistent-fp4probe does not exist"],
    );
}

#[test]
fn attention_bounds_memory() {
    refused(
        &["attention", "--seq-q", "10000000", "--heads", "32"],
        &[
            "the validation run of B=1 H=32 Sq=10000000 Sk=10000000 D=128 would allocate about \
             4.3 TiB (host and device), more than the 64.0 GiB one run may use; reduce --seq-q, \
             --seq-k, --heads, --kv-heads or --batch",
        ],
    );
    // Large enough to overflow usize arithmetic if the product were not bounded first.
    refused(
        &[
            "attention",
            "--batch",
            "18446744073709551615",
            "--heads",
            "18446744073709551615",
        ],
        &[
            "would allocate about",
            "reduce --seq-q, --seq-k, --heads, --kv-heads or --batch",
        ],
    );
    refused(
        &["attention", "--bench", "--seqs", "1024,1000000"],
        &[
            "--bench at --seqs 1000000 --head-dims 64 --bench-heads 32 would allocate about",
            "reduce --seqs or --bench-heads",
        ],
    );
}

#[test]
fn quant_bench_refuses_bad_values_naming_the_option() {
    refused(
        &["quant-bench", "--sizes", "1024x1000"],
        &[
            "--sizes 1024x1000: 1000 columns are not a multiple of 32",
            "use 1024",
        ],
    );
    refused(
        &["quant-bench", "--sizes", "0x32"],
        &["--sizes 0x32: rows and columns must be at least 1"],
    );
    refused(
        &["quant-bench", "--sizes", "4096"],
        &["--sizes 4096: expected ROWSxCOLS"],
    );
    refused(
        &["quant-bench", "--search-size", "64x33"],
        &["--search-size 64x33: 33 columns are not a multiple of 32"],
    );
    refused(
        &["quant-bench", "--dtypes", "f32,f64"],
        &["--dtypes \"f64\": expected f32, bf16 or f16"],
    );
    refused(
        &["quant-bench", "--repeats", "0"],
        &["invalid value '0' for '--repeats <REPEATS>': 0 is not in 1..=10000"],
    );
    refused(
        &["quant-bench", "--csv", "/"],
        &["--csv /: is a folder; name a file"],
    );
    refused(
        &["quant-bench", "--csv", "q.csv", "--search-csv", "q.csv"],
        &["--csv and --search-csv name the same file (q.csv)"],
    );
    refused(
        &["quant-bench", "--sizes", "100000x100000"],
        &[
            "--sizes 100000x100000 with f32 input would allocate about 204.9 GiB (host and \
             device), more than the 64.0 GiB one run may use; reduce --sizes",
        ],
    );
    refused(
        &["quant-bench", "--search-size", "100000x100000"],
        &[
            "--search-size 100000x100000 would allocate about",
            "reduce --search-size",
        ],
    );
}

#[test]
fn bench_bounds_every_size_knob() {
    let variant = ["bench", "--variant", "m16n8k16.f32.bf16.bf16.f32"];
    let with = |extra: &[&'static str]| -> Vec<&'static str> {
        variant.iter().chain(extra).copied().collect()
    };
    for (extra, says) in [
        (
            &["--unroll", "1000000"][..],
            "invalid value '1000000' for '--unroll <UNROLL>': 1000000 is not in 1..=64",
        ),
        // The report's case: nothing may reach ptxas, offline either.
        (
            &["--unroll", "1000000", "--sass-only", "sm_90"][..],
            "'--unroll <UNROLL>': 1000000 is not in 1..=64",
        ),
        (
            &["--unroll", "0"][..],
            "'--unroll <UNROLL>': 0 is not in 1..=64",
        ),
        (
            &["--chains", "2,33"][..],
            "'--chains <CHAINS>': 33 is not in 1..=32",
        ),
        (
            &["--warps", "65"][..],
            "'--warps <WARPS>': 65 is not in 1..=64",
        ),
        (
            &["--warps", "0"][..],
            "'--warps <WARPS>': 0 is not in 1..=64",
        ),
        (
            &["--blocks-per-sm", "33"][..],
            "'--blocks-per-sm <BLOCKS_PER_SM>': 33 is not in 1..=32",
        ),
        (
            &["--runs", "0"][..],
            "'--runs <RUNS>': 0 is not in 1..=1000",
        ),
        (
            &["--warmup", "1001"][..],
            "'--warmup <WARMUP>': 1001 is not in 0..=1000",
        ),
        (
            &["--target-ms", "0"][..],
            "'--target-ms <TARGET_MS>': 0 is not over 0 and at most 1000 (milliseconds)",
        ),
        (
            &["--target-ms", "nan"][..],
            "'--target-ms <TARGET_MS>': NaN is not over 0",
        ),
        (
            &["--preheat-ms", "-1"][..],
            "'--preheat-ms <PREHEAT_MS>': -1 is not in 0..=60000 (milliseconds)",
        ),
        (
            &["--jobs", "0"][..],
            "'--jobs <JOBS>': 0 is not in 1..=1024",
        ),
        // Timing options have nothing to time without the GPU.
        (
            &["--sass-only", "sm_90", "--runs", "3"][..],
            "'--sass-only <TARGET>' cannot be used with '--runs <RUNS>'",
        ),
    ] {
        refused(&with(extra), &[says]);
    }
}

#[test]
fn the_bounds_admit_every_value_real_runs_use_and_the_limits_themselves() {
    use clap::Parser;
    use fp4probe::cli::Cli;
    for args in [
        // reports/sm_90/bench.csv: warps 1..16, chains 1..8, unroll 8.
        &[
            "bench",
            "--all",
            "--warps",
            "1,2,4,8,16",
            "--chains",
            "1,2,4,8",
        ][..],
        &[
            "bench",
            "--all",
            "--warps",
            "64",
            "--chains",
            "32",
            "--unroll",
            "64",
            "--blocks-per-sm",
            "32",
            "--runs",
            "1000",
            "--warmup",
            "1000",
            "--target-ms",
            "1000",
            "--preheat-ms",
            "60000",
            "--jobs",
            "1024",
        ][..],
        &[
            "bench",
            "--all",
            "--sass-only",
            "sm_90",
            "--chains",
            "32",
            "--unroll",
            "64",
        ][..],
        // tests/gpu/run-attention-on-device.sh.
        &[
            "attention",
            "--path",
            "bf16",
            "--format",
            "mxfp4",
            "--heads",
            "1",
            "--seq-q",
            "77",
            "--seq-k",
            "133",
            "--causal",
        ][..],
        &[
            "attention",
            "--bench",
            "--seqs",
            "4096",
            "--head-dims",
            "128",
            "--repeats",
            "2",
            "--warmup",
            "1",
        ][..],
        &["attention", "--suite", "--path", "block-scale-emulated"][..],
        &[
            "quant-bench",
            "--no-check",
            "--search-size",
            "256x256",
            "--sizes",
            "2048x8192,4096x8192,8192x8192,16384x8192",
            "--repeats",
            "10000",
            "--warmup",
            "0",
        ][..],
    ] {
        let argv = std::iter::once("fp4probe").chain(args.iter().copied());
        if let Err(e) = Cli::try_parse_from(argv) {
            panic!("{args:?} refused: {e}");
        }
    }
}

#[test]
fn good_arguments_get_as_far_as_the_device() {
    // Small valid runs: here (no GPU) they stop at the device, with the GPU message and not an
    // argument error; on a GPU machine they run (and must succeed).
    for args in [
        &[
            "attention",
            "--seq-q",
            "64",
            "--heads",
            "1",
            "--head-dim",
            "64",
        ][..],
        &[
            "quant-bench",
            "--sizes",
            "32x64",
            "--search-size",
            "32x64",
            "--dtypes",
            "f32",
            "--repeats",
            "1",
            "--warmup",
            "0",
        ][..],
    ] {
        let o = common::fp4probe(args);
        let t = text(&o);
        assert!(
            o.status.success() || t.contains("CUDA device"),
            "{args:?}: {t}"
        );
        assert!(!t.contains("panicked"), "{args:?}: {t}");
    }
}

#[test]
fn wgmma_refuses_bad_selections_before_opening_a_device() {
    refused(
        &["wgmma", "probe", "--variant", "m64n8k16.bf16"],
        &[
            "'m64n8k16.bf16' is not a wgmma variant",
            "catalog --family wgmma",
        ],
    );
    refused(
        &["wgmma", "probe"],
        &["nothing selected: give --variant ID, --filter TEXT or --all"],
    );
    refused(
        &["wgmma", "probe", "--all", "--jobs", "0"],
        &["invalid value '0' for '--jobs <JOBS>'"],
    );
    refused(
        &[
            "wgmma",
            "probe",
            "--variant",
            "sp.m64n8k32.f32.bf16.bf16.ss",
        ],
        &["the sparse forms are catalogued, not probed"],
    );
    refused(
        &["wgmma", "probe", "--filter", "e4m3", "--major", "MN"],
        &["takes K-major operands only"],
    );
    refused(
        &["wgmma", "smem", "--bits", "8", "--major", "MN"],
        &["8-bit elements are K-major only"],
    );
}
