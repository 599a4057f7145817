//! `fp4probe attention --q --k --v --output` on the CPU backend (no GPU needed): O is the CPU
//! reference of the quantized arithmetic on the files' values, for dense inputs (quantized
//! as `prequantize` does) and for FP4 files of `fp4probe quantize`, with grouped-query
//! attention and Sq != Sk; O is written as F32 or BF16 in `.npy` or `.safetensors`; and every
//! bad input is refused with exit status 2 and a message naming the problem, before any device
//! is opened (`--backend cuda` on a machine without a GPU shows the order).
#![cfg(unix)]

mod common;
use common::{fp4probe, text, tmpdir};

use fp4probe::attention::prequant::transpose_pad_v;
use fp4probe::attention::{AttnShape, gaussian, prequantize, reference_quantized};
use fp4probe::formats::f32_to_bf16_bits;
use fp4probe::quant::Format;
use fp4probe::tensorio::{self, DType, Tensor};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Output;

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

fn ok(o: &Output) {
    assert!(o.status.success(), "{}", text(o));
}

/// Exit status 2 and `error: ...` containing `want`.
fn refused(o: &Output, want: &str) {
    let t = text(o);
    assert_eq!(o.status.code(), Some(2), "{t}");
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("error: ") && err.contains(want),
        "want {want:?} in:\n{t}"
    );
}

/// The grouped-query shape of most tests: 4 query heads over 2 K/V heads, Sq != Sk, causal.
fn gqa_shape() -> AttnShape {
    AttnShape::new(2, 4, 33, 50, 64, true)
        .and_then(|s| s.with_kv_heads(2))
        .unwrap()
}

/// Gaussian Q, K, V of `shape`, rounded to BF16 values (so BF16 files hold them exactly).
fn bf16_qkv(shape: &AttnShape, seed: u64) -> [Vec<f32>; 3] {
    let round = |x: Vec<f32>| -> Vec<f32> {
        x.into_iter()
            .map(|v| f32::from_bits((f32_to_bf16_bits(v) as u32) << 16))
            .collect()
    };
    [
        round(gaussian(shape.q_len(), seed)),
        round(gaussian(shape.kv_len(), seed + 1)),
        round(gaussian(shape.kv_len(), seed + 2)),
    ]
}

fn dims(shape: &AttnShape) -> [Vec<usize>; 3] {
    let (b, d) = (shape.batch, shape.head_dim);
    [
        vec![b, shape.heads, shape.seq_q, d],
        vec![b, shape.kv_heads, shape.seq_k, d],
        vec![b, shape.kv_heads, shape.seq_k, d],
    ]
}

fn bf16_tensor(shape: Vec<usize>, x: &[f32]) -> Tensor {
    let bits: Vec<u16> = x.iter().map(|&v| f32_to_bf16_bits(v)).collect();
    Tensor::from_bf16_bits(shape, &bits)
}

/// Q, K, V written to `dir` as `<name>.npy` (F32) or `<name>.safetensors` (BF16, tensor `x`).
fn write_qkv(dir: &Path, shape: &AttnShape, qkv: &[Vec<f32>; 3], ext: &str) -> [PathBuf; 3] {
    let d = dims(shape);
    let mut paths = Vec::new();
    for (i, name) in ["q", "k", "v"].iter().enumerate() {
        let p = dir.join(format!("{name}.{ext}"));
        match ext {
            "npy" => tensorio::write_npy(&p, &Tensor::from_f32(d[i].clone(), &qkv[i])).unwrap(),
            _ => tensorio::write_safetensors(
                &p,
                &[("x", &bf16_tensor(d[i].clone(), &qkv[i]))],
                &BTreeMap::new(),
            )
            .unwrap(),
        }
        paths.push(p);
    }
    paths.try_into().unwrap()
}

fn attention(files: &[PathBuf; 3], output: &Path, extra: &[&str]) -> Output {
    let mut args = vec![
        "attention",
        "--backend",
        "cpu",
        "--q",
        s(&files[0]),
        "--k",
        s(&files[1]),
        "--v",
        s(&files[2]),
        "--output",
        s(output),
    ];
    args.extend_from_slice(extra);
    fp4probe(&args)
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
fn dense_gqa_inputs_give_the_quantized_reference() {
    let dir = tmpdir("attn-cli", "dense");
    let shape = gqa_shape();
    let qkv = bf16_qkv(&shape, 3);
    for format in [Format::Nvfp4, Format::Mxfp4] {
        let want = reference_quantized(
            &prequantize(&shape, &qkv[0], &qkv[1], &qkv[2], false, format).unwrap(),
        );
        // F32 .npy in, F32 .npy out (the default for an F32 Q): the reference, bit for bit.
        let files = write_qkv(&dir, &shape, &qkv, "npy");
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
        let files = write_qkv(&dir, &shape, &qkv, "safetensors");
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
    let files = write_qkv(&dir, &shape, &qkv, "npy");
    let out = dir.join("o.npy");
    ok(&attention(&files, &out, &["--smooth-k"]));
    let want = reference_quantized(
        &prequantize(&shape, &qkv[0], &qkv[1], &qkv[2], true, Format::Nvfp4).unwrap(),
    );
    assert_eq!(read_o(&out).0.to_f32_vec().unwrap(), want);
}

/// `fp4probe quantize` of Q, K and Vᵀ, as `attention` reads them.
fn quantize_files(
    dir: &Path,
    shape: &AttnShape,
    qkv: &[Vec<f32>; 3],
    format: Format,
) -> [PathBuf; 3] {
    let d = dims(shape);
    let vt = transpose_pad_v(shape, &qkv[2]);
    let vt_dims = vec![
        shape.batch,
        shape.kv_heads,
        shape.head_dim,
        shape.seq_k_padded(),
    ];
    let inputs = [
        ("q", d[0].clone(), &qkv[0]),
        ("k", d[1].clone(), &qkv[1]),
        ("vt", vt_dims, &vt),
    ];
    let mut out = Vec::new();
    for (name, dims, x) in inputs {
        let input = dir.join(format!("{name}.f32.npy"));
        tensorio::write_npy(&input, &Tensor::from_f32(dims, x)).unwrap();
        let output = dir.join(format!("{name}.{}.safetensors", format.name()));
        ok(&fp4probe(&[
            "quantize",
            "--backend",
            "cpu",
            "--format",
            format.name(),
            "--input",
            s(&input),
            "--output",
            s(&output),
        ]));
        out.push(output);
    }
    out.try_into().unwrap()
}

#[test]
fn fp4_files_give_what_the_dense_inputs_give() {
    let dir = tmpdir("attn-cli", "fp4");
    let shape = gqa_shape();
    let qkv = bf16_qkv(&shape, 5);
    for format in [Format::Nvfp4, Format::Mxfp4] {
        let files = quantize_files(&dir, &shape, &qkv, format);
        let out = dir.join(format!("o.{}.safetensors", format.name()));
        ok(&attention(&files, &out, &["--causal"]));
        let (t, meta) = read_o(&out);
        assert_eq!(t.dtype, DType::F32);
        assert_eq!(meta["format"], format.name());
        let want = reference_quantized(
            &prequantize(&shape, &qkv[0], &qkv[1], &qkv[2], false, format).unwrap(),
        );
        assert_eq!(t.to_f32_vec().unwrap(), want, "{format:?}");
    }
}

#[test]
fn bad_inputs_are_refused_before_any_device_is_opened() {
    let dir = tmpdir("attn-cli", "refused");
    let shape = gqa_shape();
    let qkv = bf16_qkv(&shape, 7);
    let files = write_qkv(&dir, &shape, &qkv, "npy");
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
    let cuda = |f: &[PathBuf; 3], extra: &[&str]| {
        let mut args = vec!["--backend", "cuda"];
        args.extend_from_slice(extra);
        let mut all = vec![
            "attention",
            "--q",
            s(&f[0]),
            "--k",
            s(&f[1]),
            "--v",
            s(&f[2]),
            "--output",
            s(&out),
        ];
        all.extend_from_slice(&args);
        fp4probe(&all)
    };

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
    let nv = quantize_files(&dir, &shape, &qkv, Format::Nvfp4);
    let mx = quantize_files(&dir, &shape, &qkv, Format::Mxfp4);
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
    // V given untransposed as an FP4 file.
    let mut plain_v = nv.clone();
    plain_v[2] = nv[1].clone();
    refused(&cuda(&plain_v, &[]), "V must be stored transposed");

    // Outputs: an input, an existing .npy (no mark of fp4probe), a foreign .safetensors.
    let o = fp4probe(&[
        "attention",
        "--q",
        s(&files[0]),
        "--k",
        s(&files[1]),
        "--v",
        s(&files[2]),
        "--output",
        s(&files[1]),
    ]);
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
        &attention(&files, &dir.join("p.npy"), &["--path", "bf16"]),
        "--path bf16 picks a GPU kernel; --backend cpu runs the CPU reference",
    );
    refused(
        &attention(&files, &dir.join("p.npy"), &["--kv-heads", "2"]),
        "cannot be used with",
    );
    refused(
        &fp4probe(&["attention", "--q", s(&files[0]), "--output", "x.npy"]),
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
