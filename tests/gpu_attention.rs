//! Hardware tests of grouped-query attention and of `attention --q --k --v --output`, ignored
//! unless asked for: on a GPU machine (with libnvrtc),
//! `cargo test --release --test gpu_attention -- --ignored --nocapture`.
//! - every kernel path this device runs natively (its default, bf16, and on sm_90 wgmma-fp8)
//!   gives, for grouped shapes (one K/V head for all, groups of 2 to 4, Sq != Sk, causal and
//!   not), its CPU reference (`reference_quantized`, or `reference_fp8` for the FP8 body, held
//!   to 1e-3 as the suite holds it), and exactly what it gives for multi-head attention with
//!   the K/V heads repeated (the same bytes reach each Q head's CTAs);
//! - the command on files (in process, `--backend cuda`): dense BF16 inputs and FP4 files of
//!   the same values give the same O, close to the CPU reference; on sm_90 `--path wgmma-fp8`
//!   too.

use fp4probe::attention::kernel::{AttentionKernel, KernelPath};
use fp4probe::attention::{
    AttnShape, Comparison, QuantizedQkv, prequantize, reference_fp8, reference_quantized,
};
use fp4probe::cli::attention::{Inputs, make_inputs};
use fp4probe::cli::{Cli, run};
use fp4probe::quant::Format;
use fp4probe::tensorio;

#[path = "support/gpu.rs"]
mod gpu_support;
use gpu_support::gpu;

#[path = "support/attention_files.rs"]
mod attention_files;
use attention_files::{attention_args, bf16_round, gqa, quantize_files, repeat_heads, write_qkv};

/// The paths a device of compute capability `major` runs natively: its default, on sm_90 the
/// FP8 body, and bf16.
fn native_paths(major: u32) -> Vec<KernelPath> {
    let mut paths = vec![KernelPath::for_device(major, 128)];
    if major == 9 {
        paths.push(KernelPath::WgmmaFp8);
    }
    if !paths.contains(&KernelPath::Bf16) {
        paths.push(KernelPath::Bf16);
    }
    paths
}

/// The CPU reference of the arithmetic `path` computes.
fn reference_of(path: KernelPath, qkv: &QuantizedQkv) -> Vec<f32> {
    if path.is_fp8() {
        reference_fp8(qkv)
    } else {
        reference_quantized(qkv)
    }
}

#[test]
#[ignore = "needs an NVIDIA GPU: run with `cargo test --release -- --ignored` on a GPU machine"]
fn grouped_query_attention_on_every_native_path() {
    let backend = gpu("grouped_query_attention_on_every_native_path");
    let paths = native_paths(backend.compute_capability().0);
    let shapes = [
        gqa(2, 8, 2, 77, 133, 128, false),
        gqa(2, 8, 2, 77, 133, 128, true),
        gqa(1, 32, 8, 300, 200, 64, true),
        gqa(1, 4, 1, 129, 1000, 128, false),
        gqa(1, 6, 3, 200, 64, 64, true),
        gqa(1, 4, 2, 100, 70, 256, true),
    ];
    let mut n = 0;
    for path in paths {
        let kernel = AttentionKernel::load_path(&backend, path).unwrap_or_else(|e| panic!("{e:#}"));
        for s in shapes {
            if path.check_head_dim(s.head_dim).is_err() {
                continue;
            }
            let mha = AttnShape {
                kv_heads: s.heads,
                ..s
            };
            for &format in path.formats() {
                for inputs in [Inputs::Exact, Inputs::Gaussian] {
                    let (q, k, v) = make_inputs(&s, inputs, 21);
                    let grouped = prequantize(&s, &q, &k, &v, false, format).unwrap();
                    let what = format!("{} {s} {} {inputs:?}", path.name(), format.name());
                    let out = kernel
                        .run(&grouped)
                        .unwrap_or_else(|e| panic!("{what}: {e:#}"));
                    let c = Comparison::new(&out, &reference_of(path, &grouped));
                    let (min_cos, max_rel) = match inputs {
                        Inputs::Exact if !path.is_fp8() => (0.99999, 1e-5),
                        _ => (0.9999, 1e-3),
                    };
                    eprintln!("{what}: vs the CPU reference {c}");
                    assert!(
                        c.cosine >= min_cos && c.relative_error <= max_rel,
                        "{what}: {c}"
                    );
                    let (kr, vr) = (repeat_heads(&s, &k), repeat_heads(&s, &v));
                    let repeated = prequantize(&mha, &q, &kr, &vr, false, format).unwrap();
                    let out_mha = kernel.run(&repeated).unwrap();
                    if kernel.variant_for(&s, format) == kernel.variant_for(&mha, format) {
                        assert!(
                            out.iter()
                                .zip(&out_mha)
                                .all(|(a, b)| a.to_bits() == b.to_bits()),
                            "{what}: differs from multi-head attention with K/V repeated"
                        );
                    } else {
                        // The FP8 body widens K/V once from 8 row blocks per K/V head
                        // (paths::fp8_widen_once), with other key tiles at d = 128, so the
                        // repeated heads run another variant: each equals its own reference,
                        // and the two agree to the same tolerance.
                        let c_mha = Comparison::new(&out_mha, &reference_of(path, &repeated));
                        let c_both = Comparison::new(&out, &out_mha);
                        eprintln!(
                            "{what}: repeated K/V run another variant: vs its reference {c_mha}, \
                             vs the grouped run {c_both}"
                        );
                        for c in [c_mha, c_both] {
                            assert!(
                                c.cosine >= min_cos && c.relative_error <= max_rel,
                                "{what}, repeated K/V: {c}"
                            );
                        }
                    }
                    n += 1;
                }
            }
        }
    }
    eprintln!("{n} grouped cases: the CPU reference, and multi-head attention with K/V repeated");
}

/// An fp4probe command line, run in this process.
fn fp4probe(args: &[String]) {
    let all = std::iter::once("fp4probe").chain(args.iter().map(String::as_str));
    let cli = <Cli as clap::Parser>::parse_from(all);
    run(cli).unwrap_or_else(|e| panic!("{args:?}: {e:#}"));
}

#[test]
#[ignore = "needs an NVIDIA GPU: run with `cargo test --release -- --ignored` on a GPU machine"]
fn attention_on_files_runs_the_kernel() {
    let backend = gpu("attention_on_files_runs_the_kernel");
    let dir = tempfile::tempdir().unwrap();
    let shape = gqa(1, 32, 8, 300, 451, 128, true);
    let (q, k, v) = make_inputs(&shape, Inputs::Gaussian, 4);
    let (q, k, v) = (bf16_round(&q), bf16_round(&k), bf16_round(&v));
    let qkv: [&[f32]; 3] = [&q, &k, &v];
    let dense = write_qkv(dir.path(), &shape, qkv, "safetensors");
    for format in [Format::Nvfp4, Format::Mxfp4] {
        let out = dir.path().join(format!("o.{}.safetensors", format.name()));
        let extra = ["--causal", "--format", format.name(), "--out-dtype", "f32"];
        fp4probe(&attention_args("cuda", &dense, &out, &extra));
        let st = tensorio::read_safetensors(&out).unwrap();
        assert!(st.metadata["backend"].starts_with("cuda, kernel path "));
        let o = st.get("o").unwrap().to_f32_vec().unwrap();
        let want = reference_quantized(&prequantize(&shape, &q, &k, &v, false, format).unwrap());
        let c = Comparison::new(&o, &want);
        eprintln!("files, {} {shape}: vs the CPU reference {c}", format.name());
        assert!(c.cosine >= 0.9999 && c.relative_error <= 1e-3, "{c}");

        // The same BF16 values as FP4 files of `fp4probe quantize` on the GPU (V with
        // --attention-v): the same O.
        let fp4 = quantize_files(
            dir.path(),
            &shape,
            qkv,
            format,
            "cuda",
            "safetensors",
            fp4probe,
        );
        let out4 = dir.path().join(format!("o4.{}.npy", format.name()));
        fp4probe(&attention_args("cuda", &fp4, &out4, &["--causal"]));
        let o4 = tensorio::read_npy(&out4).unwrap().to_f32_vec().unwrap();
        assert!(
            o4.iter().zip(&o).all(|(a, b)| a.to_bits() == b.to_bits()),
            "{format:?}: FP4 files and dense inputs give different O"
        );

        // The FP8 body on the same files, against its own reference.
        if backend.compute_capability().0 == 9 {
            let out8 = dir.path().join(format!("o8.{}.npy", format.name()));
            let extra = ["--causal", "--path", "wgmma-fp8"];
            fp4probe(&attention_args("cuda", &fp4, &out8, &extra));
            let o8 = tensorio::read_npy(&out8).unwrap().to_f32_vec().unwrap();
            let want8 = reference_fp8(&prequantize(&shape, &q, &k, &v, false, format).unwrap());
            let c = Comparison::new(&o8, &want8);
            eprintln!(
                "files, wgmma-fp8 {} {shape}: vs reference_fp8 {c}",
                format.name()
            );
            assert!(c.cosine >= 0.9999 && c.relative_error <= 1e-3, "{c}");
        }
    }
}
