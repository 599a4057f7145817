//! What the tests of `fp4probe attention --q --k --v --output` and of grouped-query attention
//! share: grouped shapes, K/V heads repeated, BF16 inputs written as files, the command lines,
//! and Q, K, V quantized by `fp4probe quantize` (V with `--attention-v`; run however the test
//! runs the command).

// Every test crate that includes this file uses part of it.
#![allow(dead_code)]

use fp4probe::attention::AttnShape;
use fp4probe::formats::f32_to_bf16_bits;
use fp4probe::quant::Format;
use fp4probe::tensorio::{self, Tensor};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// A validated shape with `kv` K/V heads.
pub fn gqa(
    b: usize,
    h: usize,
    kv: usize,
    sq: usize,
    sk: usize,
    d: usize,
    causal: bool,
) -> AttnShape {
    AttnShape::new(b, h, sq, sk, d, causal)
        .and_then(|s| s.with_kv_heads(kv))
        .unwrap()
}

/// K or V [B, Hkv, Sk, D] with each head repeated group() times: [B, H, Sk, D]
/// (`torch.repeat_interleave(k, group, dim=1)`).
pub fn repeat_heads(s: &AttnShape, x: &[f32]) -> Vec<f32> {
    x.chunks(s.seq_k * s.head_dim)
        .flat_map(|h| std::iter::repeat_n(h, s.group()).flatten().copied())
        .collect()
}

/// The values rounded to BF16 (so BF16 files hold them exactly).
pub fn bf16_round(x: &[f32]) -> Vec<f32> {
    x.iter()
        .map(|&v| f32::from_bits((f32_to_bf16_bits(v) as u32) << 16))
        .collect()
}

/// The dims of Q [B, H, Sq, D], K and V [B, Hkv, Sk, D], and Vᵀ [B, Hkv, D, Skp].
pub fn dims(s: &AttnShape) -> [Vec<usize>; 4] {
    let (b, d) = (s.batch, s.head_dim);
    [
        vec![b, s.heads, s.seq_q, d],
        vec![b, s.kv_heads, s.seq_k, d],
        vec![b, s.kv_heads, s.seq_k, d],
        vec![b, s.kv_heads, d, s.seq_k_padded()],
    ]
}

/// Q, K, V written to `dir` as `q.<ext>`, `k.<ext>`, `v.<ext>`: F32 `.npy`, or BF16
/// `.safetensors` (one tensor `x`; the values must be BF16 values).
pub fn write_qkv(dir: &Path, s: &AttnShape, qkv: [&[f32]; 3], ext: &str) -> [PathBuf; 3] {
    let d = dims(s);
    [0, 1, 2].map(|i| {
        let p = dir.join(format!("{}.{ext}", ["q", "k", "v"][i]));
        if ext == "npy" {
            tensorio::write_npy(&p, &Tensor::from_f32(d[i].clone(), qkv[i])).unwrap();
        } else {
            let bits: Vec<u16> = qkv[i].iter().map(|&v| f32_to_bf16_bits(v)).collect();
            let t = Tensor::from_bf16_bits(d[i].clone(), &bits);
            tensorio::write_safetensors(&p, &[("x", &t)], &BTreeMap::new()).unwrap();
        }
        p
    })
}

fn path_arg(p: &Path) -> String {
    p.to_str().unwrap().to_string()
}

/// `attention --backend <backend> --q .. --k .. --v .. --output ..` and `extra`.
pub fn attention_args(
    backend: &str,
    files: &[PathBuf; 3],
    output: &Path,
    extra: &[&str],
) -> Vec<String> {
    let mut args: Vec<String> = ["attention", "--backend", backend].map(String::from).into();
    for (option, p) in ["--q", "--k", "--v", "--output"]
        .iter()
        .zip(files.iter().chain([&output.to_path_buf()]))
    {
        args.push(option.to_string());
        args.push(path_arg(p));
    }
    args.extend(extra.iter().map(|a| a.to_string()));
    args
}

/// Q, K and V written as `write_qkv` writes them (F32 `.npy`, or BF16 `.safetensors` for BF16
/// values) and quantized in `format` by `fp4probe quantize --backend <backend>` (V with
/// `--attention-v`), whose command lines `run` runs: the FP4 files `attention` reads.
pub fn quantize_files(
    dir: &Path,
    s: &AttnShape,
    qkv: [&[f32]; 3],
    format: Format,
    backend: &str,
    ext: &str,
    run: impl Fn(&[String]),
) -> [PathBuf; 3] {
    let inputs = write_qkv(dir, s, qkv, ext);
    let names = ["q", "k", "v"];
    [0, 1, 2].map(|i| {
        let output = dir.join(format!("{}.{ext}.{}.safetensors", names[i], format.name()));
        let mut args: Vec<String> = ["quantize", "--backend", backend, "--format", format.name()]
            .map(String::from)
            .into();
        args.extend([
            "--input".into(),
            path_arg(&inputs[i]),
            "--output".into(),
            path_arg(&output),
        ]);
        if i == 2 {
            args.push("--attention-v".into());
        }
        run(&args);
        output
    })
}
