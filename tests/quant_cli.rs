//! `fp4probe quantize` / `dequantize` driven as a user would, on the CPU backend: files in,
//! files out, the independent vectors reproduced through the command line, and clear errors
//! that leave existing outputs alone.

mod common;
use common::{fp4probe, refused, text, tmpdir};

use fp4probe::tensorio::{self, DType, Tensor};
use std::collections::BTreeMap;
use std::path::Path;

/// A scratch folder removed when the test ends, failed or not.
fn scratch(name: &str) -> common::Scratch {
    tmpdir("qcli", name)
}

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

/// A vector case's input, saved as .npy (f32) or .safetensors (bf16/f16), through the CLI, must
/// give the vector's bytes; dequantize must give its values.
#[test]
fn the_command_line_reproduces_independent_vectors() {
    let dir = scratch("vectors");
    let vectors = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/vectors/quant");
    let cases: [(&str, &[&str]); 4] = [
        (
            "mxfp4_rceil_f32_ties",
            &["--format", "mxfp4", "--scale-mode", "rceil"],
        ),
        ("nvfp4_two_level_f32_random", &["--format", "nvfp4"]),
        (
            "nvfp4_one_level_bf16_random_3x5x64",
            &["--format", "nvfp4", "--nvfp4-levels", "1"],
        ),
        (
            "mxfp4_even_f16_random_7x32",
            &["--format", "mxfp4", "--scale-mode", "even"],
        ),
    ];
    for (case, flags) in cases {
        let st = tensorio::read_safetensors(&vectors.join(format!("{case}.safetensors"))).unwrap();
        let x = st.get("x").unwrap();
        let input = if x.dtype == DType::F32 {
            let p = dir.join(format!("{case}.npy"));
            tensorio::write_npy(&p, x).unwrap();
            p
        } else {
            let p = dir.join(format!("{case}.in.safetensors"));
            tensorio::write_safetensors(&p, &[("x", x)], &BTreeMap::new()).unwrap();
            p
        };
        let out = dir.join(format!("{case}.q.safetensors"));
        let mut args = vec![
            "quantize",
            "--backend",
            "cpu",
            "--byte-container",
            "--input",
            s(&input),
            "--output",
            s(&out),
        ];
        args.extend_from_slice(flags);
        let o = fp4probe(&args);
        assert!(o.status.success(), "{case}: {}", text(&o));
        let q = tensorio::read_safetensors(&out).unwrap();
        for name in ["data", "scale", "data_byte"] {
            assert_eq!(
                q.get(name).unwrap().bytes,
                st.get(name).unwrap().bytes,
                "{case}: {name}"
            );
        }
        // Codes are F4 (shape in codes, as safetensors counts them), scales the format's
        // 8-bit float type; the metadata names the PyTorch dtype of each tensor.
        let data = q.get("data").unwrap();
        assert_eq!((data.dtype, &data.shape), (DType::F4, &x.shape), "{case}");
        let scale_dtype = if case.starts_with("mxfp4") {
            DType::F8E8M0
        } else {
            DType::F8E4M3
        };
        assert_eq!(q.get("scale").unwrap().dtype, scale_dtype, "{case}");
        assert_eq!(q.get("data_byte").unwrap().dtype, DType::U8, "{case}");
        for (name, t) in &q.tensors {
            assert_eq!(
                q.metadata
                    .get(&format!("torch_dtype.{name}"))
                    .map(String::as_str),
                Some(t.dtype.torch_name()),
                "{case}: {name}"
            );
        }
        assert_eq!(
            q.get("tensor_scale").map(|t| t.bytes.clone()),
            st.get("tensor_scale").map(|t| t.bytes.clone()),
            "{case}"
        );
        assert_eq!(q.metadata.get("backend").map(String::as_str), Some("cpu"));

        // dequantize reads the F4 / F8 file, and the vector file itself, whose codes and
        // scales are U8.
        let want = st.get("dequant").unwrap().to_f32_vec().unwrap();
        let vector = vectors.join(format!("{case}.safetensors"));
        for (from, input) in [("quantize", &out), ("vector", &vector)] {
            let back = dir.join(format!("{case}.{from}.deq.npy"));
            let o = fp4probe(&["dequantize", "--input", s(input), "--output", s(&back)]);
            assert!(o.status.success(), "{case} {from}: {}", text(&o));
            let got = tensorio::read_npy(&back).unwrap().to_f32_vec().unwrap();
            assert!(
                got.len() == want.len()
                    && got
                        .iter()
                        .zip(&want)
                        .all(|(g, w)| g.to_bits() == w.to_bits() || (g.is_nan() && w.is_nan())),
                "{case} {from}: dequant"
            );
        }
    }
}

#[test]
fn search_reports_its_error_reduction() {
    let dir = scratch("search");
    let x: Vec<f32> = (0..64 * 64)
        .map(|i| ((i * 7919 % 1000) as f32 / 250.0 - 2.0).powi(3))
        .collect();
    let input = dir.join("x.npy");
    tensorio::write_npy(&input, &Tensor::from_f32(vec![64, 64], &x)).unwrap();
    let out = dir.join("q.safetensors");
    let o = fp4probe(&[
        "quantize",
        "--format",
        "nvfp4",
        "--search",
        "--backend",
        "cpu",
        "--input",
        s(&input),
        "--output",
        s(&out),
    ]);
    let t = text(&o);
    assert!(o.status.success(), "{t}");
    assert!(
        t.contains("search: squared error") && t.contains("% lower"),
        "{t}"
    );
    assert_eq!(
        tensorio::read_safetensors(&out)
            .unwrap()
            .metadata
            .get("search")
            .map(String::as_str),
        Some("true")
    );
}

#[test]
fn bad_inputs_get_clear_errors_and_leave_the_output_alone() {
    let dir = scratch("errors");
    let save = |name: &str, t: Tensor| {
        let p = dir.join(name);
        tensorio::write_npy(&p, &t).unwrap();
        p
    };
    let u8_in = save("u8.npy", Tensor::from_u8(vec![2, 32], vec![0; 64]));
    let odd = save("odd.npy", Tensor::from_f32(vec![2, 48], &[1.0; 96]));
    let mut nan = vec![1.0f32; 64];
    nan[40] = f32::NAN;
    let nan_in = save("nan.npy", Tensor::from_f32(vec![2, 32], &nan));
    let ok_in = save("ok.npy", Tensor::from_f32(vec![2, 32], &[1.0; 64]));
    let flat = save("flat.npy", Tensor::from_f32(vec![64], &[1.0; 64]));
    // An earlier result of fp4probe, which a later run may replace: only the errors keep it.
    let out = dir.join("q.safetensors");
    let o = fp4probe(&[
        "quantize",
        "--backend",
        "cpu",
        "--format",
        "nvfp4",
        "--input",
        s(&ok_in),
        "--output",
        s(&out),
    ]);
    assert!(o.status.success(), "{}", text(&o));
    let precious = std::fs::read(&out).unwrap();
    let cases: [(&[&str], &str); 7] = [
        (
            &["--format", "mxfp4", "--input", s(&u8_in)],
            "dtype U8 cannot be quantized",
        ),
        (
            &["--format", "mxfp4", "--input", s(&odd)],
            "not a multiple of the block size 32; pad it to 64",
        ),
        (
            &[
                "--format",
                "nvfp4",
                "--non-finite",
                "error",
                "--input",
                s(&nan_in),
            ],
            "element [1, 8] is NaN",
        ),
        (
            &["--format", "mxfp4", "--input", "/nonexistent/x.npy"],
            "/nonexistent/x.npy",
        ),
        (
            &[
                "--format",
                "mxfp4",
                "--tensor-amax",
                "2",
                "--input",
                s(&ok_in),
            ],
            "--tensor-amax 2 applies to two-level NVFP4 only (--format nvfp4, --nvfp4-levels 2), \
             not to --format mxfp4",
        ),
        (
            &[
                "--format",
                "nvfp4",
                "--tensor-amax",
                "inf",
                "--input",
                s(&ok_in),
            ],
            "the tensor amax must be a finite number >= 0, not inf",
        ),
        (
            &["--format", "nvfp4", "--attention-v", "--input", s(&flat)],
            "V is [64]: --attention-v reads V as [..., Sk, D] (attention: [B, Hkv, Sk, D]), at \
             least two axes",
        ),
    ];
    for (flags, want) in cases {
        let mut args = vec!["quantize", "--backend", "cpu", "--output", s(&out)];
        args.extend_from_slice(flags);
        refused(&args, want);
        assert_eq!(
            std::fs::read(&out).unwrap(),
            precious,
            "{flags:?} touched the output"
        );
    }
    // A file that is not a quantized tensor.
    let not_q = dir.join("plain.safetensors");
    tensorio::write_safetensors(
        &not_q,
        &[("x", &Tensor::from_f32(vec![2], &[1.0, 2.0]))],
        &BTreeMap::new(),
    )
    .unwrap();
    let o = fp4probe(&[
        "dequantize",
        "--input",
        s(&not_q),
        "--output",
        s(&dir.join("y.npy")),
    ]);
    assert!(
        !o.status.success() && text(&o).contains("no tensor 'data'"),
        "{}",
        text(&o)
    );
    // Files whose dtypes do not fit the quantizer's layout: refused, saying which tensor.
    let f4 = |shape: Vec<usize>| {
        let n = shape.iter().product::<usize>() / 2;
        Tensor::new(DType::F4, shape, vec![0x21; n]).unwrap()
    };
    let e8m0 = Tensor::new(DType::F8E8M0, vec![2, 1], vec![127; 2]).unwrap();
    let e4m3 = Tensor::new(DType::F8E4M3, vec![2, 1], vec![0x38; 2]).unwrap();
    let mx = BTreeMap::from([("format".to_string(), "mxfp4".to_string())]);
    let bad: [(&str, Tensor, &Tensor, &str); 3] = [
        (
            "e4m3-scale",
            f4(vec![2, 32]),
            &e4m3,
            "tensor 'scale' of a mxfp4 file: expected a F8_E8M0 or U8 tensor, found F8_E4M3",
        ),
        (
            "f32-data",
            Tensor::from_f32(vec![2, 4], &[0.0; 8]),
            &e8m0,
            "tensor 'data': expected a F4 or U8 tensor, found F32",
        ),
        (
            "odd-rows",
            f4(vec![2, 3]),
            &e8m0,
            "F4 'data' has rows of 3 codes, an odd number: rows must fill whole bytes",
        ),
    ];
    for (name, data, scale, want) in bad {
        let input = dir.join(format!("{name}.safetensors"));
        tensorio::write_safetensors(&input, &[("data", &data), ("scale", scale)], &mx).unwrap();
        let o = fp4probe(&[
            "dequantize",
            "--input",
            s(&input),
            "--output",
            s(&dir.join(format!("{name}.npy"))),
        ]);
        assert_eq!(o.status.code(), Some(2), "{name}: {}", text(&o));
        assert!(text(&o).contains(want), "{name}: {}", text(&o));
    }
    // A V^T file whose recorded V shape does not fit its data.
    let input = dir.join("vt-shape.safetensors");
    let mut meta = mx.clone();
    meta.insert("attention_operand".into(), "v_transposed".into());
    meta.insert("v_shape".into(), "[40, 64]".into());
    let data = f4(vec![64, 32]);
    let scale = Tensor::new(DType::F8E8M0, vec![64, 1], vec![127; 64]).unwrap();
    tensorio::write_safetensors(&input, &[("data", &data), ("scale", &scale)], &meta).unwrap();
    let o = fp4probe(&[
        "dequantize",
        "--input",
        s(&input),
        "--output",
        s(&dir.join("vt-shape.npy")),
    ]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert!(
        text(&o)
            .contains("metadata v_shape [40, 64] stands for V^T [64, 64], but 'data' is [64, 32]"),
        "{}",
        text(&o)
    );
}

/// Without a GPU, `--backend auto` says loudly that it uses the CPU; `--backend cuda` fails.
#[test]
fn auto_falls_back_loudly_and_cuda_refuses_without_a_driver() {
    // SAFETY: only probes whether libcuda can be loaded.
    if unsafe { cudarc::driver::sys::is_culib_present() } {
        return;
    }
    let dir = scratch("auto");
    let input = dir.join("x.npy");
    tensorio::write_npy(&input, &Tensor::from_f32(vec![1, 32], &[0.5; 32])).unwrap();
    let out = dir.join("q.safetensors");
    let o = fp4probe(&[
        "quantize",
        "--format",
        "mxfp4",
        "--input",
        s(&input),
        "--output",
        s(&out),
    ]);
    assert!(
        o.status.success() && text(&o).contains("NO CUDA DEVICE"),
        "{}",
        text(&o)
    );
    let o = fp4probe(&[
        "quantize",
        "--format",
        "mxfp4",
        "--backend",
        "cuda",
        "--input",
        s(&input),
        "--output",
        s(&out),
    ]);
    assert!(
        !o.status.success() && text(&o).contains("libcuda"),
        "{}",
        text(&o)
    );
}

/// `--tensor-amax` skips the measurement: the same bytes as measuring when it is the tensor's
/// amax, a different tensor scale otherwise, and the file says which it was.
#[test]
fn a_given_tensor_amax_is_used_and_recorded() {
    let dir = scratch("tensor-amax");
    let x: Vec<f32> = (0..128).map(|i| (i as f32 - 60.0) * 0.125).collect();
    let input = dir.join("x.npy");
    tensorio::write_npy(&input, &Tensor::from_f32(vec![4, 32], &x)).unwrap();
    let run = |amax: Option<&str>, name: &str| {
        let out = dir.join(name);
        let mut args = vec!["quantize", "--backend", "cpu", "--format", "nvfp4"];
        if let Some(a) = amax {
            args.extend_from_slice(&["--tensor-amax", a]);
        }
        args.extend_from_slice(&["--input", s(&input), "--output", s(&out)]);
        let o = fp4probe(&args);
        assert!(o.status.success(), "{}", text(&o));
        tensorio::read_safetensors(&out).unwrap()
    };
    let measured = run(None, "measured.safetensors");
    let same = run(Some("8.375"), "same.safetensors"); // max |x| = 67 · 0.125
    let other = run(Some("16"), "other.safetensors");
    assert_eq!(measured.metadata["tensor_amax"], "measured");
    assert_eq!(same.metadata["tensor_amax"], "given 8.375e0");
    for name in ["data", "scale", "tensor_scale"] {
        assert_eq!(
            measured.get(name).unwrap().bytes,
            same.get(name).unwrap().bytes,
            "{name}"
        );
    }
    let ts = |f: &tensorio::SafeTensors| f.get("tensor_scale").unwrap().to_f32_vec().unwrap()[0];
    assert_eq!(ts(&other), 16.0 / 2688.0);
}
