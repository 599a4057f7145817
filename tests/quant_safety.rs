//! `quantize` and `dequantize` never destroy a file and never lose data silently: every refusal
//! exits with status 2, says what is wrong, and leaves the existing file byte for byte as it
//! was; what a quantization loses is counted on stderr. CPU backend only (no GPU needed), except
//! where a test asks for `--backend cuda` to show that validation comes before the device.
//! Links, FIFOs and device nodes are Unix things.
#![cfg(unix)]

mod common;
use common::{fp4probe, ok, refused_output as refused, text, tmpdir};

use fp4probe::tensorio::{self, DType, Tensor};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Output;

/// A scratch folder removed when the test ends, failed or not.
fn scratch(name: &str) -> common::Scratch {
    tmpdir("qsafe", name)
}

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

/// Values with every block nonzero and no saturation under any mode.
fn ramp(n: usize) -> Vec<f32> {
    (0..n).map(|i| ((i % 13) as f32 - 6.0) * 0.37).collect()
}

fn npy(dir: &Path, name: &str, shape: &[usize], x: &[f32]) -> PathBuf {
    let p = dir.join(name);
    tensorio::write_npy(&p, &Tensor::from_f32(shape.to_vec(), x)).unwrap();
    p
}

fn quantize(args: &[&str]) -> Output {
    let mut all = vec!["quantize", "--backend", "cpu"];
    all.extend_from_slice(args);
    fp4probe(&all)
}

/// A result of `fp4probe quantize` at `out` (one a later run may replace).
fn ours(dir: &Path, out: &Path) -> Vec<u8> {
    let x = npy(dir, "ours-input.npy", &[2, 32], &ramp(64));
    ok(&quantize(&[
        "--format",
        "mxfp4",
        "--input",
        s(&x),
        "--output",
        s(out),
    ]));
    std::fs::read(out).unwrap()
}

#[test]
fn an_output_that_is_an_input_is_refused_even_forced() {
    let dir = scratch("same");
    let x = npy(&dir, "x.npy", &[2, 32], &ramp(64));
    let w = Tensor::from_f32(vec![2, 32], &ramp(64));
    let single = dir.join("single.safetensors");
    tensorio::write_safetensors(&single, &[("w", &w)], &BTreeMap::new()).unwrap();
    let b = Tensor::from_f32(vec![32], &ramp(32));
    let ckpt = dir.join("ckpt.safetensors");
    tensorio::write_safetensors(&ckpt, &[("w", &w), ("b", &b)], &BTreeMap::new()).unwrap();
    // A quantized checkpoint: data and scale beside other tensors, in fp4probe's name.
    let qckpt = dir.join("qckpt.safetensors");
    let meta = BTreeMap::from([
        ("format".to_string(), "mxfp4".to_string()),
        ("producer".to_string(), "fp4probe 0.1.0".to_string()),
    ]);
    tensorio::write_safetensors(
        &qckpt,
        &[
            ("data", &Tensor::from_u8(vec![2, 16], vec![0x21; 32])),
            ("scale", &Tensor::from_u8(vec![2, 1], vec![127; 2])),
            ("b", &b),
        ],
        &meta,
    )
    .unwrap();
    let link_to_ckpt = dir.join("link.safetensors");
    std::os::unix::fs::symlink(&ckpt, &link_to_ckpt).unwrap();
    let respelled = dir.join(".").join("ckpt.safetensors");
    let cases: [(&[&str], &Path); 6] = [
        (&["quantize", "--input", s(&x), "--output", s(&x)], &x),
        (
            &["quantize", "--input", s(&single), "--output", s(&single)],
            &single,
        ),
        (
            &[
                "quantize",
                "--input",
                s(&ckpt),
                "--tensor",
                "w",
                "--output",
                s(&respelled),
            ],
            &ckpt,
        ),
        (
            &[
                "quantize",
                "--input",
                s(&ckpt),
                "--tensor",
                "w",
                "--output",
                s(&link_to_ckpt),
            ],
            &ckpt,
        ),
        (
            &["dequantize", "--input", s(&qckpt), "--output", s(&qckpt)],
            &qckpt,
        ),
        (
            &[
                "dequantize",
                "--input",
                s(&ckpt),
                "--output",
                s(&link_to_ckpt),
            ],
            &ckpt,
        ),
    ];
    for (args, file) in cases {
        let before = std::fs::read(file).unwrap();
        for force in [false, true] {
            let mut all = args.to_vec();
            if args[0] == "quantize" {
                all.extend_from_slice(&["--backend", "cpu", "--format", "mxfp4"]);
            }
            if force {
                all.push("--force");
            }
            refused(&fp4probe(&all), "is also an input of this command");
            assert_eq!(std::fs::read(file).unwrap(), before, "{all:?}");
        }
    }
    assert!(
        std::fs::symlink_metadata(&link_to_ckpt)
            .unwrap()
            .file_type()
            .is_symlink()
    );
}

#[test]
fn a_multi_tensor_input_needs_the_tensor_named() {
    let dir = scratch("multi");
    let w = ramp(64);
    let ckpt = dir.join("ckpt.safetensors");
    tensorio::write_safetensors(
        &ckpt,
        &[
            ("w", &Tensor::from_f32(vec![2, 32], &w)),
            ("b", &Tensor::from_f32(vec![32], &ramp(32))),
            ("ids", &Tensor::from_i32(vec![3], &[1, 2, 3])),
        ],
        &BTreeMap::new(),
    )
    .unwrap();
    let out = dir.join("q.safetensors");
    let o = quantize(&[
        "--format",
        "mxfp4",
        "--input",
        s(&ckpt),
        "--output",
        s(&out),
    ]);
    refused(
        &o,
        "holds 3 tensors: b (F32 [32]), w (F32 [2, 32]), ids (I32 [3]); quantize writes one \
         tensor a run: name it with --input-name NAME (alias --tensor)",
    );
    assert!(!out.exists());
    let o = quantize(&[
        "--format",
        "mxfp4",
        "--input",
        s(&ckpt),
        "--tensor",
        "nope",
        "--output",
        s(&out),
    ]);
    refused(
        &o,
        "no tensor named 'nope' (the file holds: 'b', 'w', 'ids')",
    );

    // The named tensor gives the bytes the same tensor gives on its own.
    ok(&quantize(&[
        "--format",
        "mxfp4",
        "--input",
        s(&ckpt),
        "--tensor",
        "w",
        "--output",
        s(&out),
    ]));
    let alone = npy(&dir, "w.npy", &[2, 32], &w);
    let want = dir.join("alone.safetensors");
    ok(&quantize(&[
        "--format",
        "mxfp4",
        "--input",
        s(&alone),
        "--output",
        s(&want),
    ]));
    let (got, want) = (
        tensorio::read_safetensors(&out).unwrap(),
        tensorio::read_safetensors(&want).unwrap(),
    );
    for name in ["data", "scale"] {
        assert_eq!(got.get(name), want.get(name), "{name}");
    }
}

#[test]
fn links_fifos_and_read_only_outputs_are_refused_unless_forced() {
    use std::os::unix::fs::{FileTypeExt, PermissionsExt};
    let dir = scratch("kinds");
    let x = npy(&dir, "x.npy", &[2, 32], &ramp(64));
    let q = |out: &Path, force: bool| {
        let mut args = vec!["--format", "nvfp4", "--input", s(&x), "--output", s(out)];
        if force {
            args.push("--force");
        }
        quantize(&args)
    };

    // A link to an earlier result: refused, then written through (the link stays a link).
    let target = dir.join("target.safetensors");
    let before = ours(&dir, &target);
    let link = dir.join("link.safetensors");
    std::os::unix::fs::symlink(&target, &link).unwrap();
    refused(
        &q(&link, false),
        "is a symbolic link, not a regular file; refusing to replace it (--force writes through it)",
    );
    assert_eq!(std::fs::read(&target).unwrap(), before);
    ok(&q(&link, true));
    assert!(
        std::fs::symlink_metadata(&link)
            .unwrap()
            .file_type()
            .is_symlink()
    );
    let through = tensorio::read_safetensors(&target).unwrap();
    assert_eq!(through.metadata["format"], "nvfp4");

    // A FIFO (never forced here: writing into one waits for a reader).
    let fifo = dir.join("fifo.safetensors");
    let made = std::process::Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .unwrap();
    assert!(made.success());
    refused(&q(&fifo, false), "is a FIFO, not a regular file");
    refused(
        &fp4probe(&["dequantize", "--input", s(&target), "--output", s(&fifo)]),
        "is a FIFO, not a regular file",
    );
    assert!(
        std::fs::symlink_metadata(&fifo)
            .unwrap()
            .file_type()
            .is_fifo()
    );

    // A read-only result: refused, then replaced.
    let ro = dir.join("ro.safetensors");
    let before = ours(&dir, &ro);
    std::fs::set_permissions(&ro, std::fs::Permissions::from_mode(0o444)).unwrap();
    refused(
        &q(&ro, false),
        "is read-only; refusing to replace it (--force replaces it)",
    );
    assert_eq!(std::fs::read(&ro).unwrap(), before);
    ok(&q(&ro, true));
    assert_eq!(
        tensorio::read_safetensors(&ro).unwrap().metadata["format"],
        "nvfp4"
    );

    // dequantize follows the same rules.
    let npy_target = dir.join("user.npy");
    std::fs::write(&npy_target, b"keep").unwrap();
    let npy_link = dir.join("link.npy");
    std::os::unix::fs::symlink(&npy_target, &npy_link).unwrap();
    refused(
        &fp4probe(&[
            "dequantize",
            "--input",
            s(&target),
            "--output",
            s(&npy_link),
        ]),
        "is a symbolic link",
    );
    assert_eq!(std::fs::read(&npy_target).unwrap(), b"keep");
}

/// A device node is refused. Only /dev/null is used, and each run has an input that fails after
/// the output check, so even a broken check could not reach a write.
#[test]
fn a_device_node_is_refused() {
    use std::os::unix::fs::FileTypeExt;
    let dir = scratch("device");
    let odd = npy(&dir, "odd.npy", &[2, 48], &ramp(96));
    let plain = dir.join("plain.safetensors");
    tensorio::write_safetensors(
        &plain,
        &[("x", &Tensor::from_f32(vec![2], &[1.0, 2.0]))],
        &BTreeMap::new(),
    )
    .unwrap();
    for args in [
        vec![
            "quantize",
            "--backend",
            "cpu",
            "--format",
            "mxfp4",
            "--input",
            s(&odd),
            "--output",
            "/dev/null",
        ],
        vec!["dequantize", "--input", s(&plain), "--output", "/dev/null"],
    ] {
        refused(
            &fp4probe(&args),
            "output /dev/null is a device node, not a regular file; refusing to replace it",
        );
        let meta = std::fs::symlink_metadata("/dev/null").unwrap();
        assert!(meta.file_type().is_char_device(), "{args:?}");
    }
}

#[test]
fn files_fp4probe_did_not_write_are_refused_unless_forced() {
    let dir = scratch("foreign");
    let x = npy(&dir, "x.npy", &[2, 32], &ramp(64));
    let q = dir.join("q.safetensors");
    ours(&dir, &q);

    // A user's own safetensors file.
    let user = dir.join("user.safetensors");
    tensorio::write_safetensors(
        &user,
        &[("w", &Tensor::from_f32(vec![2], &[1.0, 2.0]))],
        &BTreeMap::new(),
    )
    .unwrap();
    let before = std::fs::read(&user).unwrap();
    let q_user = |force: bool| {
        let mut args = vec!["--format", "mxfp4", "--input", s(&x), "--output", s(&user)];
        if force {
            args.push("--force");
        }
        quantize(&args)
    };
    refused(
        &q_user(false),
        "exists and was not written by fp4probe (it lacks `\"producer\":\"fp4probe`); refusing \
         to overwrite it (--force overwrites it, or name another output)",
    );
    refused(
        &fp4probe(&["dequantize", "--input", s(&q), "--output", s(&user)]),
        "exists and was not written by fp4probe",
    );
    assert_eq!(std::fs::read(&user).unwrap(), before);
    ok(&q_user(true));
    // Now it is fp4probe's: a later run replaces it without --force.
    ok(&q_user(false));
    assert!(
        tensorio::read_safetensors(&user)
            .unwrap()
            .get("data")
            .is_some()
    );

    // dequantize's .safetensors carries the mark too, so reruns replace it.
    let back = dir.join("back.safetensors");
    for _ in 0..2 {
        ok(&fp4probe(&[
            "dequantize",
            "--input",
            s(&q),
            "--output",
            s(&back),
        ]));
    }
    let meta = tensorio::read_safetensors(&back).unwrap().metadata;
    assert!(meta["producer"].starts_with("fp4probe "), "{meta:?}");

    // Any existing .npy is refused: a user's, and one dequantize wrote (there is no mark).
    let user_npy = npy(&dir, "user.npy", &[2], &[5.0, 6.0]);
    let own_npy = dir.join("own.npy");
    ok(&fp4probe(&[
        "dequantize",
        "--input",
        s(&q),
        "--output",
        s(&own_npy),
    ]));
    for path in [&user_npy, &own_npy] {
        let before = std::fs::read(path).unwrap();
        refused(
            &fp4probe(&["dequantize", "--input", s(&q), "--output", s(path)]),
            "exists, and a .npy file carries no mark of who wrote it; refusing to overwrite it \
             (--force overwrites it",
        );
        assert_eq!(std::fs::read(path).unwrap(), before);
    }
    ok(&fp4probe(&[
        "dequantize",
        "--input",
        s(&q),
        "--output",
        s(&user_npy),
        "--force",
    ]));
    assert_eq!(tensorio::read_npy(&user_npy).unwrap().shape, [2, 32]);
}

#[test]
fn an_output_must_have_the_extension_its_command_writes() {
    let dir = scratch("ext");
    let x = npy(&dir, "x.npy", &[2, 32], &ramp(64));
    let q = dir.join("q.safetensors");
    ours(&dir, &q);
    let want_q = "quantize writes a safetensors file (tensors data, scale, ...); name the output \
                  with a .safetensors extension";
    let new_npy = dir.join("q.npy");
    refused(
        &quantize(&[
            "--format",
            "mxfp4",
            "--input",
            s(&x),
            "--output",
            s(&new_npy),
        ]),
        want_q,
    );
    assert!(!new_npy.exists());
    // Forced over a user's .npy: still refused, for the name.
    let user = npy(&dir, "user.npy", &[2], &[1.0, 2.0]);
    let before = std::fs::read(&user).unwrap();
    refused(
        &quantize(&[
            "--format",
            "mxfp4",
            "--input",
            s(&x),
            "--output",
            s(&user),
            "--force",
        ]),
        want_q,
    );
    assert_eq!(std::fs::read(&user).unwrap(), before);

    for name in ["x.bin", "x"] {
        let out = dir.join(name);
        refused(
            &fp4probe(&["dequantize", "--input", s(&q), "--output", s(&out)]),
            "dequantize writes .npy or .safetensors, chosen by the extension; name the output \
             with one of those",
        );
        assert!(!out.exists());
    }
    // The extension is read in any case, as the readers read it.
    let upper = dir.join("X.NPY");
    ok(&fp4probe(&[
        "dequantize",
        "--input",
        s(&q),
        "--output",
        s(&upper),
    ]));
    assert_eq!(tensorio::read_npy(&upper).unwrap().shape, [2, 32]);
}

#[test]
fn options_that_do_not_apply_are_refused() {
    let dir = scratch("options");
    let x = npy(&dir, "x.npy", &[2, 32], &ramp(64));
    let out = dir.join("q.safetensors");
    let before = ours(&dir, &out);
    let cases: [(&[&str], &str); 6] = [
        (
            &["--format", "nvfp4", "--scale-mode", "rceil"],
            "--scale-mode rceil chooses MXFP4's E8M0 scale rule; it does not apply to --format \
             nvfp4",
        ),
        (
            &["--format", "mxfp4", "--nvfp4-levels", "1"],
            "--nvfp4-levels 1 applies to --format nvfp4 only, not to --format mxfp4",
        ),
        (
            &["--format", "mxfp4", "--tensor-amax", "2"],
            "--tensor-amax 2 applies to two-level NVFP4 only (--format nvfp4, --nvfp4-levels 2), \
             not to --format mxfp4",
        ),
        (
            &[
                "--format",
                "nvfp4",
                "--nvfp4-levels",
                "1",
                "--tensor-amax",
                "2",
            ],
            "not to --format nvfp4 --nvfp4-levels 1 (one level has no tensor scale)",
        ),
        (
            &["--format", "mxfp4", "--check-cpu"],
            "--check-cpu compares a CUDA run with the CPU reference; it does not apply to \
             --backend cpu",
        ),
        (
            &["--format", "mxfp4", "--input-name", "w"],
            "--input-name w selects a tensor of a .safetensors file",
        ),
    ];
    for (flags, want) in cases {
        let mut args = flags.to_vec();
        args.extend_from_slice(&["--input", s(&x), "--output", s(&out)]);
        refused(&quantize(&args), want);
        assert_eq!(std::fs::read(&out).unwrap(), before, "{flags:?}");
    }
    // Each default, given explicitly, is accepted and changes nothing.
    for (explicit, format) in [
        (&["--scale-mode", "floor"][..], "mxfp4"),
        (&["--nvfp4-levels", "2"][..], "nvfp4"),
    ] {
        let plain = dir.join(format!("{format}-plain.safetensors"));
        let given = dir.join(format!("{format}-given.safetensors"));
        ok(&quantize(&[
            "--format",
            format,
            "--input",
            s(&x),
            "--output",
            s(&plain),
        ]));
        let mut args = vec!["--format", format, "--input", s(&x), "--output", s(&given)];
        args.extend_from_slice(explicit);
        ok(&quantize(&args));
        let (a, b) = (
            tensorio::read_safetensors(&plain).unwrap(),
            tensorio::read_safetensors(&given).unwrap(),
        );
        assert_eq!(a.tensors, b.tensors, "{explicit:?}");
    }
}

/// Every refusal comes before the device is opened: with `--backend cuda` and no driver, the
/// message is the refusal, never the missing driver.
#[test]
fn arguments_are_checked_before_the_device_is_opened() {
    let dir = scratch("order");
    let x = npy(&dir, "x.npy", &[2, 32], &ramp(64));
    let odd = npy(&dir, "odd.npy", &[2, 48], &ramp(96));
    let mut with_nan = ramp(64);
    with_nan[40] = f32::NAN;
    let nan = npy(&dir, "nan.npy", &[2, 32], &with_nan);
    let u8_in = dir.join("u8.npy");
    tensorio::write_npy(&u8_in, &Tensor::from_u8(vec![2, 32], vec![0; 64])).unwrap();
    let ckpt = dir.join("ckpt.safetensors");
    let t = Tensor::from_f32(vec![2, 32], &ramp(64));
    tensorio::write_safetensors(&ckpt, &[("a", &t), ("b", &t)], &BTreeMap::new()).unwrap();
    let txt = dir.join("x.txt");
    std::fs::write(&txt, b"1 2 3").unwrap();
    let user = dir.join("user.safetensors");
    std::fs::write(&user, b"the user's file").unwrap();
    let out = dir.join("q.safetensors");
    let missing = dir.join("no-such-folder/q.safetensors");
    let cases: [(&[&str], &Path, &str); 10] = [
        (
            &["--format", "nvfp4", "--scale-mode", "even"],
            &x,
            "--scale-mode even chooses",
        ),
        (
            &["--format", "nvfp4", "--tensor-amax", "nan"],
            &x,
            "must be a finite number",
        ),
        (
            &["--format", "mxfp4"],
            &txt,
            "quantize reads .npy or .safetensors files",
        ),
        (
            &["--format", "mxfp4", "--output", s(&x)],
            &x,
            "is also an input",
        ),
        (
            &["--format", "mxfp4", "--output", s(&user)],
            &x,
            "was not written by fp4probe",
        ),
        (
            &["--format", "mxfp4", "--output", s(&missing)],
            &x,
            "no-such-folder does not exist",
        ),
        (
            &["--format", "mxfp4"],
            &odd,
            "not a multiple of the block size 32",
        ),
        (
            &["--format", "mxfp4", "--non-finite", "error"],
            &nan,
            "element [1, 8] is NaN",
        ),
        (&["--format", "mxfp4"], &ckpt, "holds 2 tensors"),
        (
            &["--format", "mxfp4"],
            &u8_in,
            "dtype U8 cannot be quantized",
        ),
    ];
    for (flags, input, want) in cases {
        let mut args = vec!["quantize", "--backend", "cuda", "--input", s(input)];
        args.extend_from_slice(flags);
        if !flags.contains(&"--output") {
            args.extend_from_slice(&["--output", s(&out)]);
        }
        let o = fp4probe(&args);
        refused(&o, want);
        assert!(!text(&o).contains("libcuda"), "{flags:?}: {}", text(&o));
        assert!(!out.exists(), "{flags:?}");
    }
    assert_eq!(std::fs::read(&user).unwrap(), b"the user's file");
}

#[test]
fn float64_input_is_rounded_to_float32_with_a_note() {
    let dir = scratch("f64");
    let mut wide: Vec<f64> = (0..64).map(|i| (i % 9) as f64 * 0.5 - 2.0).collect();
    let mut narrow: Vec<f32> = (0..64).map(|i| (i % 9) as f32 * 0.5 - 2.0).collect();
    // Changed by the rounding: 0.1 (inexact), 1e300 (beyond f32), 1e-60 (below f32).
    for (i, w, n) in [
        (1, 0.1f64, 0.1f32),
        (40, 1e300, f32::INFINITY),
        (50, 1e-60, 0.0),
    ] {
        wide[i] = w;
        narrow[i] = n;
    }
    let f64_in = dir.join("x64.npy");
    let bytes = wide.iter().flat_map(|v| v.to_le_bytes()).collect();
    tensorio::write_npy(
        &f64_in,
        &Tensor::new(DType::F64, vec![2, 32], bytes).unwrap(),
    )
    .unwrap();
    let f32_in = npy(&dir, "x32.npy", &[2, 32], &narrow);
    let (q64, q32) = (dir.join("q64.safetensors"), dir.join("q32.safetensors"));
    let o = quantize(&[
        "--format",
        "mxfp4",
        "--input",
        s(&f64_in),
        "--output",
        s(&q64),
    ]);
    ok(&o);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains(&format!(
            "note: {} holds float64; quantizing it rounded to float32 (as numpy's \
             x.astype(numpy.float32)): 3 of 64 values changed in rounding, 1 of them beyond \
             float32's range (|x| > 3.4028235e38) became ±inf, 1 too small for float32 became 0",
            f64_in.display()
        )),
        "{err}"
    );
    assert!(
        err.contains("warning: 1 of 2 blocks hold NaN or Inf inputs (1 elements)"),
        "{err}"
    );
    ok(&quantize(&[
        "--format",
        "mxfp4",
        "--input",
        s(&f32_in),
        "--output",
        s(&q32),
    ]));
    let (a, b) = (
        tensorio::read_safetensors(&q64).unwrap(),
        tensorio::read_safetensors(&q32).unwrap(),
    );
    assert_eq!(a.tensors, b.tensors);
    assert_eq!(a.metadata["input_dtype"], "f64 rounded to f32");
}

#[test]
fn losses_are_counted_on_stderr() {
    let dir = scratch("warn");
    let stderr = |o: &Output| String::from_utf8_lossy(&o.stderr).into_owned();

    // MXFP4: NaN and Inf blocks; one element beyond 7·scale under floor, none under rceil.
    let mut x = vec![0.5f32; 128];
    x[3] = f32::NAN;
    x[70] = f32::INFINITY;
    x[100] = 7.5;
    let input = npy(&dir, "x.npy", &[4, 32], &x);
    let q = dir.join("q.safetensors");
    let o = quantize(&["--format", "mxfp4", "--input", s(&input), "--output", s(&q)]);
    ok(&o);
    let err = stderr(&o);
    assert!(
        err.contains(
            "warning: 2 of 4 blocks hold NaN or Inf inputs (2 elements); each takes the NaN \
             scale, so all 64 of their elements dequantize to NaN (--non-finite error refuses \
             such a tensor)"
        ),
        "{err}"
    );
    assert!(
        err.contains(
            "note: 1 of 128 elements saturate: |x| >= 7·scale, stored as ±6·scale (--scale-mode \
             floor"
        ),
        "{err}"
    );
    let rceil = dir.join("rceil.safetensors");
    let o = quantize(&[
        "--format",
        "mxfp4",
        "--scale-mode",
        "rceil",
        "--input",
        s(&input),
        "--output",
        s(&rceil),
    ]);
    ok(&o);
    assert!(!stderr(&o).contains("saturate"), "{}", stderr(&o));
    let back = dir.join("back.npy");
    let o = fp4probe(&["dequantize", "--input", s(&q), "--output", s(&back)]);
    ok(&o);
    assert!(
        stderr(&o).contains(&format!(
            "note: 2 of 4 blocks have the NaN scale (NaN or Inf where they were quantized): \
             their 64 elements are NaN in {}",
            back.display()
        )),
        "{}",
        stderr(&o)
    );

    // One-level NVFP4: a block below its smallest scale, an element beyond its largest.
    let mut y = vec![1.0f32; 48];
    y[..16].fill(0.001);
    y[40] = 1e5;
    let input = npy(&dir, "y.npy", &[1, 48], &y);
    let o = quantize(&[
        "--format",
        "nvfp4",
        "--nvfp4-levels",
        "1",
        "--input",
        s(&input),
        "--output",
        s(&q),
    ]);
    ok(&o);
    let err = stderr(&o);
    assert!(
        err.contains(
            "warning: 1 of 3 blocks holding nonzero values quantized to all-zero codes: \
             one-level NVFP4's smallest block scale is 2^-6"
        ),
        "{err}"
    );
    assert!(
        err.contains(
            "warning: 1 of 3 blocks holding nonzero values saturate at the largest scale (448): \
             1 elements with |x| >= 7·scale are stored as ±6·scale; one-level NVFP4 block \
             scales stop at 448"
        ),
        "{err}"
    );

    // Nothing lost, nothing said.
    let input = npy(&dir, "clean.npy", &[4, 32], &ramp(128));
    let o = quantize(&["--format", "nvfp4", "--input", s(&input), "--output", s(&q)]);
    ok(&o);
    assert_eq!(stderr(&o), "");
}

#[test]
fn a_tensor_amax_that_loses_everything_is_an_error_unless_forced() {
    let dir = scratch("amax");
    let input = npy(&dir, "x.npy", &[2, 16], &ramp(32));
    let out = dir.join("q.safetensors");
    let before = ours(&dir, &out);
    let run = |amax: &str, force: bool| {
        let mut args = vec![
            "--format",
            "nvfp4",
            "--tensor-amax",
            amax,
            "--input",
            s(&input),
            "--output",
            s(&out),
        ];
        if force {
            args.push("--force");
        }
        quantize(&args)
    };
    let o = run("1e30", false);
    refused(
        &o,
        &format!(
            "every one of the 2 blocks holding nonzero values was lost (2 flushed to zero, 0 \
             saturated at the largest scale, 0 given the NaN scale): the result keeps nothing of \
             the input; {} was not written (--force writes it)",
            out.display()
        ),
    );
    assert!(
        text(&o).contains("warning: 2 of 2 blocks holding nonzero values quantized to all-zero codes: --tensor-amax 1e30 is"),
        "{}",
        text(&o)
    );
    assert_eq!(std::fs::read(&out).unwrap(), before);
    refused(
        &run("1e-3", false),
        "(0 flushed to zero, 2 saturated at the largest scale, 0 given the NaN scale)",
    );
    assert_eq!(std::fs::read(&out).unwrap(), before);

    let o = run("1e30", true);
    ok(&o);
    assert!(
        text(&o).contains("the result keeps nothing of the input; writing it because of --force")
    );
    let q = tensorio::read_safetensors(&out).unwrap();
    assert!(q.get("data").unwrap().bytes.iter().all(|&b| b & 0x77 == 0));

    // An all-zero input has nothing to lose.
    let zeros = npy(&dir, "zeros.npy", &[2, 16], &[0.0; 32]);
    let o = quantize(&[
        "--format",
        "nvfp4",
        "--tensor-amax",
        "1e30",
        "--input",
        s(&zeros),
        "--output",
        s(&out),
    ]);
    ok(&o);
    assert!(!text(&o).contains("warning"), "{}", text(&o));
}
