//! `fp4probe attention --q --k --v --output` on the CPU backend (no GPU needed): O is the CPU
//! reference of the quantized arithmetic on the files' values, for dense inputs (quantized
//! as `prequantize` does) and for FP4 files of `fp4probe quantize`, with grouped-query
//! attention and Sq != Sk; O is written as F32 or BF16 in `.npy` or `.safetensors`; and every
//! bad input is refused with exit status 2 and a message naming the problem, before any device
//! is opened (`--backend cuda` on a machine without a GPU shows the order).
#![cfg(unix)]

mod common;
use common::{fp4probe, ok, refused_output as refused, text, tmpdir};

#[path = "support/attention_files.rs"]
mod attention_files;
use attention_files::{attention_args, bf16_round, dims, gqa, quantize_files, write_qkv};

use fp4probe::attention::prequant::{qkv_spec, untranspose_keys};
use fp4probe::attention::{AttnShape, gaussian, prequantize, reference_fp8, reference_quantized};
use fp4probe::formats::f32_to_bf16_bits;
use fp4probe::quant::{self, Format, Quantized};
use fp4probe::tensorio::{self, DType, Tensor};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Output;

/// The grouped-query shape of most tests: 4 query heads over 2 K/V heads, Sq != Sk, causal.
fn gqa_shape() -> AttnShape {
    gqa(2, 4, 2, 33, 50, 64, true)
}

/// Gaussian Q, K, V of `shape`, rounded to BF16 values (so BF16 files hold them exactly).
fn bf16_qkv(shape: &AttnShape, seed: u64) -> [Vec<f32>; 3] {
    [
        bf16_round(&gaussian(shape.q_len(), seed)),
        bf16_round(&gaussian(shape.kv_len(), seed + 1)),
        bf16_round(&gaussian(shape.kv_len(), seed + 2)),
    ]
}

fn refs(qkv: &[Vec<f32>; 3]) -> [&[f32]; 3] {
    [&qkv[0], &qkv[1], &qkv[2]]
}

/// Run a command line given as strings.
fn run(args: &[String]) -> Output {
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    fp4probe(&args)
}

/// `attention --backend cpu` on `files`.
fn attention(files: &[PathBuf; 3], output: &Path, extra: &[&str]) -> Output {
    run(&attention_args("cpu", files, output, extra))
}

/// FP4 files of Q, K, Vᵀ from `fp4probe quantize --backend cpu`.
fn fp4_files(dir: &Path, shape: &AttnShape, qkv: &[Vec<f32>; 3], format: Format) -> [PathBuf; 3] {
    fp4_files_from(dir, shape, qkv, format, "npy")
}

/// FP4 files quantized from F32 `.npy` or BF16 `.safetensors` (`ext`) inputs.
fn fp4_files_from(
    dir: &Path,
    shape: &AttnShape,
    qkv: &[Vec<f32>; 3],
    format: Format,
    ext: &str,
) -> [PathBuf; 3] {
    quantize_files(dir, shape, refs(qkv), format, "cpu", ext, |args| {
        ok(&run(args))
    })
}

/// The one tensor of an O file and, for safetensors, its metadata.
fn read_o(path: &Path) -> (Tensor, BTreeMap<String, String>) {
    if path.extension().unwrap() == "npy" {
        return (tensorio::read_npy(path).unwrap(), BTreeMap::new());
    }
    let st = tensorio::read_safetensors(path).unwrap();
    assert_eq!(st.tensors.len(), 1);
    (st.get("o").unwrap().clone(), st.metadata)
}

#[test]
fn path_wgmma_fp8_on_the_cpu_gives_the_fp8_reference() {
    let dir = tmpdir("attn-cli", "fp8");
    let shape = gqa_shape();
    let qkv = bf16_qkv(&shape, 5);
    let quantized = prequantize(&shape, &qkv[0], &qkv[1], &qkv[2], false, Format::Nvfp4).unwrap();
    let files = write_qkv(&dir, &shape, refs(&qkv), "npy");
    for (path, want) in [
        ("wgmma-fp8", reference_fp8(&quantized)),
        ("wgmma", reference_quantized(&quantized)),
    ] {
        let out = dir.join(format!("o.{path}.npy"));
        let o = attention(&files, &out, &["--causal", "--path", path]);
        ok(&o);
        let (t, _) = read_o(&out);
        assert_eq!(t.to_f32_vec().unwrap(), want, "--path {path}");
    }
    // The two arithmetics differ (P in E4M3 against P requantized to FP4).
    assert_ne!(reference_fp8(&quantized), reference_quantized(&quantized));
}

#[test]
fn dense_gqa_inputs_give_the_quantized_reference() {
    let dir = tmpdir("attn-cli", "dense");
    let shape = gqa_shape();
    let qkv = bf16_qkv(&shape, 3);
    for format in [Format::Nvfp4, Format::Mxfp4] {
        let want = reference_quantized(
            &prequantize(&shape, &qkv[0], &qkv[1], &qkv[2], false, format).unwrap(),
        );
        // F32 .npy in, F32 .npy out (the default for an F32 Q): the reference, bit for bit.
        let files = write_qkv(&dir, &shape, refs(&qkv), "npy");
        let out = dir.join(format!("o.{}.npy", format.name()));
        let o = attention(&files, &out, &["--causal", "--format", format.name()]);
        ok(&o);
        assert!(
            text(&o).contains("B=2 H=4 Hkv=2 Sq=33 Sk=50 D=64 causal"),
            "{}",
            text(&o)
        );
        let (t, _) = read_o(&out);
        assert_eq!((t.dtype, &t.shape[..]), (DType::F32, &[2, 4, 33, 64][..]));
        assert_eq!(t.to_f32_vec().unwrap(), want, "{format:?}");

        // The same values as BF16 safetensors: O defaults to BF16, the reference rounded.
        let files = write_qkv(&dir, &shape, refs(&qkv), "safetensors");
        let out = dir.join(format!("o.{}.safetensors", format.name()));
        ok(&attention(
            &files,
            &out,
            &["--causal", "--format", format.name()],
        ));
        let (t, meta) = read_o(&out);
        assert_eq!(t.dtype, DType::BF16);
        let rounded: Vec<u16> = want.iter().map(|&x| f32_to_bf16_bits(x)).collect();
        assert_eq!(t.u16_bits().unwrap(), rounded);
        assert_eq!(meta["format"], format.name());
        assert_eq!(meta["causal"], "true");
        assert_eq!(meta["kv_heads"], "2");
        assert_eq!(meta["backend"], "cpu reference");
        assert_eq!(meta["torch_dtype.o"], "bfloat16");
        assert!(meta["producer"].starts_with("fp4probe "));
        // A second run replaces its own file; --out-dtype f32 overrides the default.
        ok(&attention(
            &files,
            &out,
            &["--causal", "--format", format.name(), "--out-dtype", "f32"],
        ));
        assert_eq!(read_o(&out).0.to_f32_vec().unwrap(), want);
    }
}

#[test]
fn smoothing_k_is_applied_to_dense_inputs() {
    let dir = tmpdir("attn-cli", "smooth");
    let shape = AttnShape::new(1, 2, 20, 40, 128, false).unwrap();
    let qkv = bf16_qkv(&shape, 9);
    let files = write_qkv(&dir, &shape, refs(&qkv), "npy");
    let out = dir.join("o.npy");
    ok(&attention(&files, &out, &["--smooth-k"]));
    let want = reference_quantized(
        &prequantize(&shape, &qkv[0], &qkv[1], &qkv[2], true, Format::Nvfp4).unwrap(),
    );
    assert_eq!(read_o(&out).0.to_f32_vec().unwrap(), want);
}

#[test]
fn fp4_files_give_what_the_dense_inputs_give() {
    let dir = tmpdir("attn-cli", "fp4");
    let shape = gqa_shape();
    let qkv = bf16_qkv(&shape, 5);
    for (format, ext) in [
        (Format::Nvfp4, "npy"),
        (Format::Mxfp4, "npy"),
        (Format::Nvfp4, "safetensors"),
    ] {
        // Q, K and V (--attention-v) through `quantize`, from F32 and from BF16 files.
        let files = fp4_files_from(&dir, &shape, &qkv, format, ext);
        let out = dir.join(format!("o.{ext}.{}.safetensors", format.name()));
        ok(&attention(&files, &out, &["--causal"]));
        let (t, meta) = read_o(&out);
        assert_eq!(t.dtype, DType::F32);
        assert_eq!(meta["format"], format.name());
        let want = reference_quantized(
            &prequantize(&shape, &qkv[0], &qkv[1], &qkv[2], false, format).unwrap(),
        );
        assert_eq!(t.to_f32_vec().unwrap(), want, "{format:?} from {ext}");
    }
    // dequantize gives V back in its own layout, as quantized.
    let v = fp4_files(&dir, &shape, &qkv, Format::Nvfp4)[2].clone();
    let back = dir.join("v.back.npy");
    ok(&fp4probe(&[
        "dequantize",
        "--input",
        v.to_str().unwrap(),
        "--output",
        back.to_str().unwrap(),
    ]));
    let q = prequantize(&shape, &qkv[0], &qkv[1], &qkv[2], false, Format::Nvfp4).unwrap();
    let t = tensorio::read_npy(&back).unwrap();
    assert_eq!(t.shape, dims(&shape)[2]);
    let vt = Quantized {
        spec: qkv_spec(Format::Nvfp4),
        shape: dims(&shape)[3].clone(),
        data: q.v_data,
        scale: q.v_scale,
        tensor_scale: Some(q.v_tensor_scale),
    };
    let want = untranspose_keys(&quant::dequantize(&vt), shape.seq_k, shape.head_dim);
    assert_eq!(t.to_f32_vec().unwrap(), want);
}

#[test]
fn bad_inputs_are_refused_before_any_device_is_opened() {
    let dir = tmpdir("attn-cli", "refused");
    let shape = gqa_shape();
    let qkv = bf16_qkv(&shape, 7);
    let files = write_qkv(&dir, &shape, refs(&qkv), "npy");
    let out = dir.join("o.npy");
    let npy = |name: &str, dims: &[usize]| {
        let p = dir.join(name);
        let n = dims.iter().product();
        tensorio::write_npy(&p, &Tensor::from_f32(dims.to_vec(), &gaussian(n, 1))).unwrap();
        p
    };
    let with = |i: usize, p: &PathBuf| {
        let mut f = files.clone();
        f[i] = p.clone();
        f
    };
    // --backend cuda: each refusal below comes before the device would be opened.
    let cuda = |f: &[PathBuf; 3], extra: &[&str]| run(&attention_args("cuda", f, &out, extra));

    // Heads not a multiple: 4 query heads over 3 K/V heads.
    let k3 = npy("k3.npy", &[2, 3, 50, 64]);
    refused(
        &cuda(&with(1, &k3), &[]),
        "4 query heads do not split into groups over 3 key/value heads",
    );
    // K's batch or head_dim differs from Q's.
    let kb = npy("kb.npy", &[1, 2, 50, 64]);
    refused(
        &cuda(&with(1, &kb), &[]),
        "K is [1, 2, 50, 64], Q is [2, 4, 33, 64]: K must be [B, Hkv, Sk, D] with Q's B and D",
    );
    // V's shape differs from K's.
    let v49 = npy("v49.npy", &[2, 2, 49, 64]);
    refused(
        &cuda(&with(2, &v49), &[]),
        "V is [2, 2, 49, 64], K is [2, 2, 50, 64]: V must have K's shape [B, Hkv, Sk, D]",
    );
    // Unsupported head_dim, and a tensor without four axes.
    let q96 = npy("q96.npy", &[2, 4, 33, 96]);
    let k96 = npy("k96.npy", &[2, 2, 50, 96]);
    refused(
        &cuda(&[q96, k96.clone(), k96], &[]),
        "head_dim 96 is not supported: the kernel supports 64, 128 and 256",
    );
    let q3 = npy("q3.npy", &[8, 33, 64]);
    refused(
        &cuda(&with(0, &q3), &[]),
        "Q is [8, 33, 64]: attention reads [B, H, Sq, D], 3 axes given",
    );
    // A dtype attention does not read.
    let qi = dir.join("qi.npy");
    tensorio::write_npy(
        &qi,
        &Tensor::from_i32(vec![2, 4, 33, 64], &vec![1; 2 * 4 * 33 * 64]),
    )
    .unwrap();
    refused(
        &cuda(&with(0, &qi), &[]),
        "dtype I32 is not supported: attention reads BF16, F16 or F32 tensors",
    );
    // A missing file, a file of another kind.
    let missing = dir.join("missing.npy");
    refused(&cuda(&with(2, &missing), &[]), "--v ");
    refused(&cuda(&with(2, &missing), &[]), "missing.npy");
    let txt = dir.join("v.txt");
    std::fs::write(&txt, "not a tensor").unwrap();
    refused(
        &cuda(&with(2, &txt), &[]),
        "attention reads .npy or .safetensors files",
    );
    // A value that is not finite.
    let mut nan_q = qkv[0].clone();
    nan_q[70] = f32::NAN;
    let qn = dir.join("qn.npy");
    tensorio::write_npy(&qn, &Tensor::from_f32(dims(&shape)[0].clone(), &nan_q)).unwrap();
    refused(
        &cuda(&with(0, &qn), &[]),
        "q[70] is NaN: attention inputs must be finite",
    );

    // FP4 files: mixed with dense ones, of two formats, with --smooth-k or another --format.
    let nv = fp4_files(&dir, &shape, &qkv, Format::Nvfp4);
    let mx = fp4_files(&dir, &shape, &qkv, Format::Mxfp4);
    refused(
        &cuda(&with(1, &nv[1]), &[]),
        "--q is a dense F32 tensor, --k an FP4 file (nvfp4), --v a dense F32 tensor: Q, K and \
         V must all be dense tensors",
    );
    refused(
        &cuda(&[nv[0].clone(), mx[1].clone(), nv[2].clone()], &[]),
        "K is mxfp4, Q is nvfp4: Q, K and V must share one format",
    );
    refused(
        &cuda(&nv, &["--smooth-k"]),
        "FP4 files are quantized already",
    );
    refused(
        &cuda(&nv, &["--format", "mxfp4"]),
        "--format mxfp4 but the FP4 files are nvfp4",
    );
    // V quantized without --attention-v; a V^T file as Q or K; V^T of another shape than K.
    let mut plain_v = nv.clone();
    plain_v[2] = nv[1].clone();
    refused(&cuda(&plain_v, &[]), "V must be stored transposed");
    refused(&cuda(&plain_v, &[]), "`fp4probe quantize --attention-v`");
    refused(
        &cuda(&[nv[0].clone(), nv[2].clone(), nv[2].clone()], &[]),
        "--k is a V^T file (quantize --attention-v of [2, 2, 50, 64])",
    );
    let v49 = npy("v49-dense.npy", &[2, 2, 49, 64]);
    let v49q = dir.join("v49.nvfp4.safetensors");
    ok(&fp4probe(&[
        "quantize",
        "--backend",
        "cpu",
        "--format",
        "nvfp4",
        "--attention-v",
        "--input",
        v49.to_str().unwrap(),
        "--output",
        v49q.to_str().unwrap(),
    ]));
    refused(
        &cuda(&[nv[0].clone(), nv[1].clone(), v49q], &[]),
        "--v holds V [2, 2, 49, 64] (quantize --attention-v), K is [2, 2, 50, 64]",
    );

    // Outputs: an input, an existing .npy (no mark of fp4probe), a foreign .safetensors.
    let o = run(&attention_args("auto", &files, &files[1], &[]));
    refused(&o, "is also an input of this command");
    std::fs::write(&out, b"precious").unwrap();
    refused(
        &cuda(&files, &[]),
        "a .npy file carries no mark of who wrote it",
    );
    assert_eq!(std::fs::read(&out).unwrap(), b"precious");
    let foreign = dir.join("foreign.safetensors");
    tensorio::write_safetensors(
        &foreign,
        &[("x", &Tensor::from_f32(vec![1], &[1.0]))],
        &BTreeMap::new(),
    )
    .unwrap();
    let before = std::fs::read(&foreign).unwrap();
    refused(
        &attention(&files, &foreign, &[]),
        "exists and was not written by fp4probe",
    );
    assert_eq!(std::fs::read(&foreign).unwrap(), before);
    refused(
        &attention(&files, &dir.join("o.csv"), &[]),
        "attention writes .npy or .safetensors",
    );

    // Options that do not go together.
    refused(
        &attention(&files, &dir.join("p.npy"), &["--kv-heads", "2"]),
        "cannot be used with",
    );
    refused(
        &fp4probe(&[
            "attention",
            "--q",
            files[0].to_str().unwrap(),
            "--output",
            "x.npy",
        ]),
        "required arguments were not provided",
    );
    refused(
        &fp4probe(&["attention", "--out-dtype", "f32"]),
        "required arguments were not provided",
    );
}

#[test]
fn kv_heads_must_divide_heads_in_the_validation_and_bench_options() {
    refused(
        &fp4probe(&["attention", "--heads", "32", "--kv-heads", "12"]),
        "--heads and --kv-heads: 32 query heads do not split into groups over 12 key/value heads",
    );
    refused(
        &fp4probe(&[
            "attention",
            "--bench",
            "--bench-heads",
            "32",
            "--kv-heads",
            "5",
        ]),
        "--bench-heads and --kv-heads: 32 query heads do not split into groups over 5",
    );
    refused(
        &fp4probe(&["attention", "--suite", "--kv-heads", "2"]),
        "cannot be used with",
    );
}
