//! Tensor files in and out: exact float widening, round trips for every dtype and shape, files
//! written by numpy / ml_dtypes / safetensors read bit for bit, Rust-written files read by
//! Python (when `FP4PROBE_PY` names a python with those packages), and every kind of broken
//! file rejected with a message that says where it is broken.

use fp4probe::tensorio::*;
use serde_json::Value;
use std::collections::BTreeMap;
use std::fs;
use std::path::Path;

const FIXTURES: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/tensorio");

mod common;

/// A fresh scratch folder per test, removed when the guard drops, also when the test fails.
fn scratch(name: &str) -> common::Scratch {
    common::tmpdir("tensorio", name)
}

/// The full error chain, as `main` prints it.
fn err_text<T: std::fmt::Debug>(r: anyhow::Result<T>) -> String {
    format!("{:#}", r.expect_err("expected an error"))
}

fn assert_err<T: std::fmt::Debug>(r: anyhow::Result<T>, parts: &[&str]) {
    let msg = err_text(r);
    for p in parts {
        assert!(msg.contains(p), "error {msg:?} should contain {p:?}");
    }
}

/// Deterministic, varied bytes (float tensors get arbitrary bit patterns, NaNs included).
fn pattern(n: usize, seed: u8) -> Vec<u8> {
    (0..n)
        .map(|i| (i as u8).wrapping_mul(131).wrapping_add(seed))
        .collect()
}

const SHAPES: &[&[usize]] = &[
    &[],
    &[0],
    &[5],
    &[3, 4],
    &[2, 0, 3],
    &[2, 3, 4],
    &[1, 1, 1, 1],
    &[0, 0],
];

fn sample(dtype: DType, shape: &[usize], seed: u8) -> Tensor {
    let len = byte_len(dtype, shape).unwrap();
    Tensor::new(dtype, shape.to_vec(), pattern(len, seed)).unwrap()
}

/// The shapes a dtype can take: F4 elements fill bytes in pairs, so an odd count is no tensor.
fn shapes_of(dtype: DType) -> impl Iterator<Item = (usize, &'static [usize])> {
    SHAPES
        .iter()
        .copied()
        .enumerate()
        .filter(move |(_, s)| dtype != DType::F4 || s.iter().product::<usize>() % 2 == 0)
}

/// The 4- and 8-bit float types, which numpy has no dtype for (`.npy` files never hold them).
const NOT_IN_NUMPY: [DType; 3] = [DType::F4, DType::F8E4M3, DType::F8E8M0];

// ---------------------------------------------------------------------------------------------
// Exact widening.

/// binary16 decoded with f64 arithmetic from the definition.
fn f16_reference(h: u16) -> f64 {
    let sign = if h & 0x8000 != 0 { -1.0 } else { 1.0 };
    let exp = i32::from((h >> 10) & 0x1f);
    let frac = f64::from(h & 0x3ff);
    match exp {
        0 => sign * frac * 2f64.powi(-24),
        31 if frac == 0.0 => sign * f64::INFINITY,
        31 => f64::NAN,
        _ => sign * (1024.0 + frac) * 2f64.powi(exp - 25),
    }
}

#[test]
fn every_f16_code_widens_exactly() {
    let codes: Vec<u16> = (0..=u16::MAX).collect();
    let t = Tensor::from_f16_bits(vec![codes.len()], &codes);
    let widened = t.to_f32_vec().unwrap();
    for (&h, &got) in codes.iter().zip(&widened) {
        assert_eq!(got.to_bits(), f16_bits_to_f32(h).to_bits());
        let want = f16_reference(h);
        if want.is_nan() {
            assert!(got.is_nan(), "{h:#06x} -> {got}");
            // Sign and payload kept: the 10 fraction bits move to the top of f32's 23.
            let bits = (u32::from(h & 0x8000) << 16) | 0x7f80_0000 | (u32::from(h & 0x3ff) << 13);
            assert_eq!(got.to_bits(), bits, "{h:#06x}");
        } else {
            // Every f16 value is an f32 value, so this cast is exact; -0.0 keeps its sign bit.
            assert_eq!(got.to_bits(), (want as f32).to_bits(), "{h:#06x}");
            assert_eq!(f64::from(got), want, "{h:#06x}");
        }
    }
    assert_eq!(t.u16_bits().unwrap(), codes);
}

#[test]
fn every_bf16_code_widens_exactly() {
    let codes: Vec<u16> = (0..=u16::MAX).collect();
    let t = Tensor::from_bf16_bits(vec![256, 256], &codes);
    let widened = t.to_f32_vec().unwrap();
    for (&b, &got) in codes.iter().zip(&widened) {
        assert_eq!(got.to_bits(), u32::from(b) << 16, "{b:#06x}");
        let sign = if b & 0x8000 != 0 { -1.0 } else { 1.0 };
        let exp = i32::from((b >> 7) & 0xff);
        let frac = f64::from(b & 0x7f);
        let want = match exp {
            0 => sign * frac * 2f64.powi(-133),
            255 if frac == 0.0 => sign * f64::INFINITY,
            255 => f64::NAN,
            _ => sign * (128.0 + frac) * 2f64.powi(exp - 134),
        };
        if want.is_nan() {
            assert!(got.is_nan());
        } else {
            assert_eq!(f64::from(got), want, "{b:#06x}");
            assert_eq!(got.is_sign_negative(), sign < 0.0);
        }
    }
    assert_eq!(t.u16_bits().unwrap(), codes);
}

#[test]
fn accessors_check_the_dtype() {
    let f = Tensor::from_f32(vec![2], &[1.5, -0.0]);
    assert_eq!(f.to_f32_vec().unwrap()[1].to_bits(), 0x8000_0000);
    assert_err(f.as_u8(), &["expected a U8 tensor, found F32"]);
    assert_err(f.u16_bits(), &["expected an F16 or BF16 tensor, found F32"]);
    let u = Tensor::from_u8(vec![3], vec![1, 2, 3]);
    assert_eq!(u.as_u8().unwrap(), &[1, 2, 3]);
    assert_err(u.to_f32_vec(), &["U8 tensor cannot be read as floats"]);
    let i = Tensor::from_i32(vec![2], &[-7, 9]);
    assert_err(i.to_f32_vec(), &["I32 tensor cannot be read as floats"]);
    assert_eq!(i.to_i32_vec().unwrap(), vec![-7, 9]);
    assert_eq!(Tensor::from_f32(vec![], &[2.0]).numel(), 1);
    assert_eq!(Tensor::from_u8(vec![4, 0], vec![]).numel(), 0);
    // Public fields can be set inconsistently; readers of the bytes notice instead of misreading.
    let bad = Tensor {
        dtype: DType::F32,
        shape: vec![3],
        bytes: vec![0; 8],
    };
    assert_err(
        bad.to_f32_vec(),
        &["F32 [3] needs 12 bytes but the tensor holds 8"],
    );
    assert_err(
        Tensor::new(DType::F16, vec![2, 2], vec![0; 7]),
        &["F16 [2, 2] needs 8 bytes"],
    );
    let names: Vec<_> = ALL_DTYPES
        .iter()
        .map(|d| (d.name(), d.bits(), d.torch_name()))
        .collect();
    assert_eq!(
        names,
        [
            ("F32", 32, "float32"),
            ("F16", 16, "float16"),
            ("BF16", 16, "bfloat16"),
            ("U8", 8, "uint8"),
            ("I32", 32, "int32"),
            ("F64", 64, "float64"),
            ("F4", 4, "float4_e2m1fn_x2"),
            ("F8_E4M3", 8, "float8_e4m3fn"),
            ("F8_E8M0", 8, "float8_e8m0fnu"),
        ]
    );
    for d in ALL_DTYPES {
        assert_eq!(DType::from_name(d.name()), Some(d));
    }
    // F4 holds two elements a byte, the first in the low nibble; an odd count fills no byte.
    let f4 = Tensor::new(DType::F4, vec![2, 4], vec![0x21, 0x43, 0x65, 0x87]).unwrap();
    assert_eq!(
        f4.bytes_of(&[DType::U8, DType::F4]).unwrap(),
        &[0x21, 0x43, 0x65, 0x87]
    );
    assert_err(f4.as_u8(), &["expected a U8 tensor, found F4"]);
    assert_err(
        f4.to_f32_vec(),
        &["F4 tensor cannot be read as floats (need F32, F16 or BF16)"],
    );
    assert_err(
        Tensor::new(DType::F4, vec![3], vec![0; 2]),
        &["F4 [3] holds an odd number of 4-bit elements, which do not fill whole bytes"],
    );
    assert_err(
        Tensor::new(DType::F4, vec![2, 2], vec![0; 4]),
        &["F4 [2, 2] needs 2 bytes but the tensor holds 4"],
    );
    let e8 = Tensor::new(DType::F8E8M0, vec![2], vec![127, 0xff]).unwrap();
    assert_err(
        e8.bytes_of(&[DType::U8, DType::F8E4M3]),
        &["expected a U8 or F8_E4M3 tensor, found F8_E8M0"],
    );
    // F64 is read exactly, and never narrowed to f32 behind the caller's back.
    let d = Tensor::new(
        DType::F64,
        vec![2],
        [0.1f64, -1e300]
            .iter()
            .flat_map(|v| v.to_le_bytes())
            .collect(),
    )
    .unwrap();
    assert_eq!(d.to_f64_vec().unwrap(), [0.1, -1e300]);
    assert_err(
        d.to_f32_vec(),
        &["F64 tensor cannot be read as f32 without rounding"],
    );
    assert_err(f.to_f64_vec(), &["expected an F64 tensor, found F32"]);
}

// ---------------------------------------------------------------------------------------------
// Round trips.

#[test]
fn npy_round_trips_every_dtype_and_shape() {
    let dir = scratch("npy-rt");
    let npy_dtypes = ALL_DTYPES.into_iter().filter(|d| !NOT_IN_NUMPY.contains(d));
    for (i, dtype) in npy_dtypes.enumerate() {
        for (j, shape) in SHAPES.iter().enumerate() {
            let t = sample(dtype, shape, (i * 16 + j) as u8);
            let path = dir.join(format!("{}-{j}.npy", dtype.name()));
            write_npy(&path, &t).unwrap();
            let bytes = fs::read(&path).unwrap();
            let data_start = bytes.len() - t.bytes.len();
            assert_eq!(data_start % 64, 0, "numpy aligns the data to 64 bytes");
            assert_eq!(&bytes[6..8], &[1, 0], "version 1.0");
            assert_eq!(read_npy(&path).unwrap(), t, "{dtype:?} {shape:?}");
            assert_eq!(read_tensor(&path, None).unwrap(), t);
        }
    }
    // The 4- and 8-bit float types have no numpy dtype: refused, nothing written.
    for dtype in NOT_IN_NUMPY {
        let path = dir.join(format!("{}.npy", dtype.name()));
        assert_err(
            write_npy(&path, &sample(dtype, &[2, 4], 1)),
            &[
                &format!("{dtype} has no numpy dtype"),
                "write it to a .safetensors file",
            ],
        );
        assert!(!path.exists());
    }
}

#[test]
fn npy_header_too_long_for_v1_uses_v2() {
    let dir = scratch("npy-v2");
    let path = dir.join("deep.npy");
    let t = Tensor::from_u8(vec![1; 30_000], vec![42]);
    write_npy(&path, &t).unwrap();
    let bytes = fs::read(&path).unwrap();
    assert_eq!(&bytes[6..8], &[2, 0]);
    assert_eq!(read_npy(&path).unwrap(), t);
}

#[test]
fn safetensors_round_trips_every_dtype_and_shape() {
    let dir = scratch("st-rt");
    let mut owned = Vec::new();
    for (i, &dtype) in ALL_DTYPES.iter().enumerate() {
        for (j, shape) in shapes_of(dtype) {
            owned.push((
                format!("{}.{j}", dtype.name()),
                sample(dtype, shape, (i * 16 + j) as u8),
            ));
        }
    }
    // File order is the reference writer's, whatever order the tensors are given in: by dtype,
    // widest first (so each tensor starts aligned to its element size), then by name.
    owned.reverse();
    let tensors: Vec<(&str, &Tensor)> = owned.iter().map(|(n, t)| (n.as_str(), t)).collect();
    let widest_first = [
        DType::F64,
        DType::F32,
        DType::I32,
        DType::BF16,
        DType::F16,
        DType::F8E8M0,
        DType::F8E4M3,
        DType::U8,
        DType::F4,
    ];
    let rank = |d: DType| widest_first.iter().position(|&w| w == d).unwrap();
    let mut in_file_order = owned.clone();
    in_file_order
        .sort_by(|(ln, lt), (rn, rt)| rank(lt.dtype).cmp(&rank(rt.dtype)).then(ln.cmp(rn)));
    let meta = BTreeMap::from([
        ("format".to_string(), "pt".to_string()),
        ("quote\"and\\slash".to_string(), "ünïcode\n".to_string()),
    ]);
    let path = dir.join("all.safetensors");
    write_safetensors(&path, &tensors, &meta).unwrap();
    let bytes = fs::read(&path).unwrap();
    let n = u64::from_le_bytes(bytes[..8].try_into().unwrap());
    assert_eq!(n % 8, 0, "header padded to a multiple of 8");
    let st = read_safetensors(&path).unwrap();
    assert_eq!(st.metadata, meta);
    assert_eq!(st.tensors, in_file_order);
    assert_eq!(
        st.get("U8.3"),
        Some(&owned.iter().find(|(n, _)| n == "U8.3").unwrap().1)
    );
    assert_eq!(st.get("nope"), None);
    assert_eq!(
        read_tensor(&path, Some("BF16.5")).unwrap(),
        *st.get("BF16.5").unwrap()
    );

    // No metadata: the key is left out, as the reference writer does.
    let one = dir.join("one.safetensors");
    write_safetensors(&one, &[("x", &owned[0].1)], &BTreeMap::new()).unwrap();
    assert!(!String::from_utf8_lossy(&fs::read(&one).unwrap()).contains("__metadata__"));
    let st = read_safetensors(&one).unwrap();
    assert!(st.metadata.is_empty());
    assert_eq!(read_tensor(&one, None).unwrap(), owned[0].1);

    // Empty file: no tensors at all is valid.
    let none = dir.join("none.safetensors");
    write_safetensors(&none, &[], &meta).unwrap();
    assert_eq!(read_safetensors(&none).unwrap().tensors, vec![]);
    assert_err(
        read_tensor(&none, None),
        &["none.safetensors: the file holds no tensors"],
    );
}

/// What the writer here produces is what the reference writer (`safetensors::serialize`)
/// produces, byte for byte, whenever the reference's output does not depend on a hash map's
/// order (no metadata, or one key); with more keys the reference reader reads it back intact.
#[test]
fn writer_matches_the_reference_writer_byte_for_byte() {
    use safetensors::tensor::TensorView;
    let reference_dtype = |d: DType| -> safetensors::Dtype {
        serde_json::from_value(Value::String(d.name().to_string())).unwrap()
    };
    let owned: Vec<(String, Tensor)> = ALL_DTYPES
        .iter()
        .enumerate()
        .flat_map(|(i, &d)| {
            shapes_of(d).map(move |(j, s)| (format!("t{}", (i * 7 + j * 3) % 11), i, j, d, s))
        })
        .map(|(name, i, j, d, s)| (format!("{name}.{i}.{j}"), sample(d, s, (i + j) as u8)))
        .collect();
    let ours: Vec<(&str, &Tensor)> = owned.iter().map(|(n, t)| (n.as_str(), t)).collect();
    let views: Vec<(String, TensorView)> = owned
        .iter()
        .map(|(n, t)| {
            let v = TensorView::new(reference_dtype(t.dtype), t.shape.clone(), &t.bytes).unwrap();
            (n.clone(), v)
        })
        .collect();
    for meta in [
        BTreeMap::new(),
        BTreeMap::from([("producer".to_string(), "fp4probe 0".to_string())]),
    ] {
        let reference = safetensors::serialize(
            views.iter().map(|(n, v)| (n.as_str(), v)),
            (!meta.is_empty()).then(|| meta.clone().into_iter().collect()),
        )
        .unwrap();
        assert_eq!(safetensors_to_bytes(&ours, &meta).unwrap(), reference);
    }
    let meta: BTreeMap<String, String> = (0..20)
        .map(|i| (format!("k{i}"), format!("v{i}")))
        .collect();
    let bytes = safetensors_to_bytes(&ours, &meta).unwrap();
    let reference = safetensors::SafeTensors::deserialize(&bytes).unwrap();
    for (name, t) in &owned {
        let v = reference.tensor(name).unwrap();
        assert_eq!(
            (v.dtype(), v.shape(), v.data()),
            (reference_dtype(t.dtype), &t.shape[..], &t.bytes[..])
        );
    }
    let (_, header) = safetensors::SafeTensors::read_metadata(&bytes).unwrap();
    assert_eq!(
        header
            .metadata()
            .clone()
            .unwrap()
            .into_iter()
            .collect::<BTreeMap<_, _>>(),
        meta
    );
    // Run to run, the same bytes: the keys are written sorted, `__metadata__` first.
    assert_eq!(safetensors_to_bytes(&ours, &meta).unwrap(), bytes);
    let text = String::from_utf8_lossy(&bytes[8..200]).into_owned();
    assert!(
        text.starts_with("{\"__metadata__\":{\"k0\":\"v0\",\"k1\":\"v1\",\"k10\""),
        "{text}"
    );
}

#[test]
fn npy_and_safetensors_hold_the_same_bytes() {
    let dir = scratch("cross");
    let t = sample(DType::BF16, &[2, 3, 4], 9);
    write_safetensors(&dir.join("a.safetensors"), &[("w", &t)], &BTreeMap::new()).unwrap();
    let from_st = read_tensor(&dir.join("a.safetensors"), Some("w")).unwrap();
    write_npy(&dir.join("a.npy"), &from_st).unwrap();
    assert_eq!(read_tensor(&dir.join("a.npy"), None).unwrap(), t);
}

// ---------------------------------------------------------------------------------------------
// read_tensor selection.

#[test]
fn read_tensor_selects_by_extension_and_name() {
    let dir = scratch("select");
    let a = Tensor::from_f32(vec![2], &[1.0, 2.0]);
    let b = Tensor::from_u8(vec![1], vec![7]);
    let st = dir.join("two.SafeTensors");
    write_safetensors(&st, &[("a", &a), ("b", &b)], &BTreeMap::new()).unwrap();
    assert_eq!(read_tensor(&st, Some("b")).unwrap(), b);
    assert_err(
        read_tensor(&st, None),
        &["two.SafeTensors: the file holds 2 tensors ('a', 'b'); say which one to read"],
    );
    assert_err(
        read_tensor(&st, Some("c")),
        &["two.SafeTensors: no tensor named 'c' (the file holds: 'a', 'b')"],
    );
    let npy = dir.join("a.npy");
    write_npy(&npy, &a).unwrap();
    assert_err(
        read_tensor(&npy, Some("a")),
        &["a.npy: a .npy file holds one unnamed tensor"],
    );
    assert_err(
        read_tensor(&dir.join("a.bin"), None),
        &["a.bin: unknown tensor file type (expected a .npy or .safetensors extension)"],
    );
    assert_err(
        read_tensor(&dir.join("missing.npy"), None),
        &["reading ", "missing.npy"],
    );
}

// ---------------------------------------------------------------------------------------------
// Interoperability with the reference writers and readers.

fn bits_hex(t: &Tensor) -> Vec<String> {
    t.bytes
        .chunks_exact(t.dtype.size())
        .map(|c| {
            let v = c.iter().rev().fold(0u64, |a, &b| (a << 8) | u64::from(b));
            format!("{v:0w$x}", w = 2 * t.dtype.size())
        })
        .collect()
}

fn describe(t: &Tensor) -> Value {
    serde_json::json!({
        "dtype": t.dtype.name(),
        "shape": t.shape,
        "bits": bits_hex(t),
    })
}

fn expected_fixtures() -> Value {
    let text = fs::read_to_string(Path::new(FIXTURES).join("expected.json")).unwrap();
    serde_json::from_str(&text).unwrap()
}

#[test]
fn reads_numpy_and_ml_dtypes_files_bit_for_bit() {
    let expected = expected_fixtures();
    let npy = expected["npy"].as_object().unwrap();
    assert!(npy.len() >= 11);
    for (name, want) in npy {
        let t = read_npy(&Path::new(FIXTURES).join(name)).unwrap();
        assert_eq!(&describe(&t), want, "{name}");
    }
    // Spot checks that the fixtures cover what they claim to.
    let bf16 = read_npy(&Path::new(FIXTURES).join("bf16_3d.npy")).unwrap();
    assert_eq!(
        (bf16.dtype, bf16.shape.as_slice()),
        (DType::BF16, &[2, 3, 4][..])
    );
    let f16 = read_tensor(&Path::new(FIXTURES).join("f16_1d.npy"), None).unwrap();
    let v = f16.to_f32_vec().unwrap();
    assert_eq!(v[2], 2f32.powi(-24));
    assert!(v[10].is_nan() && v[8] == f32::INFINITY);
    let scalar = read_npy(&Path::new(FIXTURES).join("scalar_f32.npy")).unwrap();
    assert_eq!(
        (scalar.shape.len(), scalar.to_f32_vec().unwrap()),
        (0, vec![0.15625])
    );
    let fortran = read_npy(&Path::new(FIXTURES).join("fortran_f32.npy")).unwrap();
    assert_eq!(
        fortran.to_f32_vec().unwrap(),
        [0.0, 1.0, 2.0, 3.0, 4.0, 5.0]
    );
}

#[test]
fn reads_safetensors_python_files_bit_for_bit() {
    let expected = expected_fixtures();
    for (name, want) in expected["safetensors"].as_object().unwrap() {
        let st = read_safetensors(&Path::new(FIXTURES).join(name)).unwrap();
        let metadata: BTreeMap<String, String> =
            serde_json::from_value(want["metadata"].clone()).unwrap();
        assert_eq!(st.metadata, metadata, "{name}");
        let want_tensors = want["tensors"].as_object().unwrap();
        assert_eq!(st.tensors.len(), want_tensors.len(), "{name}");
        for (tname, t) in &st.tensors {
            assert_eq!(&describe(t), &want_tensors[tname], "{name}: {tname}");
        }
    }
    let single = Path::new(FIXTURES).join("single.safetensors");
    assert_eq!(read_tensor(&single, None).unwrap().shape, [3, 4]);
}

#[test]
fn npy_writer_matches_numpy_byte_for_byte() {
    // numpy's layout for little-endian, C-order builtin dtypes is reproduced exactly.
    let dir = scratch("npy-bytes");
    for name in [
        "f32_2d.npy",
        "f16_1d.npy",
        "u8_2d.npy",
        "i32_1d.npy",
        "scalar_f32.npy",
        "empty_f32.npy",
    ] {
        let numpy = fs::read(Path::new(FIXTURES).join(name)).unwrap();
        let t = npy_from_bytes(&numpy).unwrap();
        let ours = dir.join(name);
        write_npy(&ours, &t).unwrap();
        assert_eq!(fs::read(&ours).unwrap(), numpy, "{name}");
    }
}

/// Writes one file per dtype plus a multi-tensor safetensors file, and the expected bits, for
/// `check_rust_output.py`.
fn write_for_python(dir: &Path) {
    let mut expected = serde_json::json!({"npy": {}, "safetensors": {}});
    // The dtypes the fixture generator makes (check_rust_output.py knows those); F64 is an
    // input type here, its round trips are checked above.
    let tensors: Vec<(String, Tensor)> = ALL_DTYPES
        .iter()
        .filter(|&&d| d != DType::F64)
        .zip([&[3usize, 4][..], &[16], &[2, 3, 4], &[4, 8], &[]])
        .map(|(&d, shape)| (d.name().to_lowercase(), sample(d, shape, d.size() as u8)))
        .chain([("empty".to_string(), sample(DType::F32, &[0, 3], 0))])
        .collect();
    for (name, t) in &tensors {
        let file = format!("{name}.npy");
        write_npy(&dir.join(&file), t).unwrap();
        expected["npy"][&file] = describe(t);
    }
    let refs: Vec<(&str, &Tensor)> = tensors.iter().map(|(n, t)| (n.as_str(), t)).collect();
    let meta = BTreeMap::from([("format".to_string(), "fp4".to_string())]);
    write_safetensors(&dir.join("multi.safetensors"), &refs, &meta).unwrap();
    let described: serde_json::Map<String, Value> = tensors
        .iter()
        .map(|(n, t)| (n.clone(), describe(t)))
        .collect();
    expected["safetensors"]["multi.safetensors"] =
        serde_json::json!({"metadata": meta, "tensors": described});
    fs::write(dir.join("expected.json"), expected.to_string()).unwrap();
}

#[test]
fn python_reads_what_we_write() {
    let Some(python) = std::env::var_os("FP4PROBE_PY") else {
        eprintln!("FP4PROBE_PY not set: skipping the check that numpy/safetensors read our files");
        return;
    };
    let dir = scratch("python");
    write_for_python(&dir);
    let out = std::process::Command::new(python)
        .arg(Path::new(FIXTURES).join("check_rust_output.py"))
        .arg(&*dir)
        .output()
        .unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success(), "python check failed:\n{text}");
    assert!(text.contains("python read 7 files OK"), "{text}");
}

// ---------------------------------------------------------------------------------------------
// Malformed npy files.

/// A version 1.0 npy file with this header dict (padded like numpy) and these data bytes.
fn npy_file(dict: &str, data: &[u8]) -> Vec<u8> {
    let mut header = dict.to_string();
    while !(10 + header.len() + 1).is_multiple_of(64) {
        header.push(' ');
    }
    header.push('\n');
    let mut out = b"\x93NUMPY\x01\x00".to_vec();
    out.extend_from_slice(&(header.len() as u16).to_le_bytes());
    out.extend_from_slice(header.as_bytes());
    out.extend_from_slice(data);
    out
}

fn npy_err(dir: &Path, bytes: &[u8], parts: &[&str]) {
    let path = dir.join("bad.npy");
    fs::write(&path, bytes).unwrap();
    let msg = err_text(read_npy(&path));
    assert!(msg.starts_with(&format!("{}: ", path.display())), "{msg}");
    for p in parts {
        assert!(msg.contains(p), "error {msg:?} should contain {p:?}");
    }
}

#[test]
fn malformed_npy_is_rejected_with_location() {
    let dir = scratch("npy-bad");
    let ok = "{'descr': '<f4', 'fortran_order': False, 'shape': (3, 4), }";
    npy_err(
        &dir,
        b"\x93NUM",
        &["file is 4 bytes, too short for the 8-byte npy preamble"],
    );
    npy_err(
        &dir,
        b"PK\x03\x04\x00\x00\x00\x00",
        &["not an npy file: bytes 0..6"],
    );
    npy_err(
        &dir,
        b"\x93NUMPY\x04\x00\x10\x00",
        &["unsupported npy format version 4.0 (bytes 6..8"],
    );
    npy_err(
        &dir,
        b"\x93NUMPY\x02\x00\x10",
        &["too short for the 4-byte header length at byte 8"],
    );
    npy_err(
        &dir,
        b"\x93NUMPY\x01\x00\xff\x00{'descr'",
        &["header length 255 (bytes 8..10) runs past the end of the file (18 bytes)"],
    );
    // Header lengths and shapes are checked against the file before anything is allocated for
    // them: a 4 GiB header length, a 4 TiB array in a file of 48 data bytes.
    npy_err(
        &dir,
        b"\x93NUMPY\x02\x00\xf0\xff\xff\xff{'descr'",
        &["header length 4294967280 (bytes 8..12) runs past the end of the file (20 bytes)"],
    );
    npy_err(
        &dir,
        &npy_file(
            "{'descr': '<f4', 'fortran_order': True, 'shape': (1099511627776,), }",
            &[0; 48],
        ),
        &["holds 48 bytes but '<f4' (1099511627776,) needs 4398046511104 (file truncated?)"],
    );
    let mut v3 = npy_file(ok, &[0; 48]);
    v3[6] = 3;
    v3.splice(8..10, [0x76, 0, 0, 0]); // 4-byte length field: now 2 bytes of the dict are short
    v3[20] = 0xff;
    npy_err(&dir, &v3, &["header is not valid UTF-8 at byte 20"]);
    npy_err(
        &dir,
        &npy_file(
            "{'descr' '<f4', 'fortran_order': False, 'shape': (3, 4), }",
            &[0; 48],
        ),
        &["header byte 19: expected ':', found '\\''"],
    );
    npy_err(
        &dir,
        &npy_file(
            "{'descr': '<f4', 'fortran_order': False, 'shape': (3, 4 }",
            &[0; 48],
        ),
        &["header byte 66: expected ',' or ')', found '}'"],
    );
    npy_err(
        &dir,
        &npy_file(
            "{'descr': '<f4', 'fortran_order': False, 'shape': (3, 4), } x",
            &[0; 48],
        ),
        &["header byte 70: unexpected text after the header dict"],
    );
    npy_err(
        &dir,
        &npy_file(
            "{'descr': '<f4', 'fortran_order': Maybe, 'shape': (3,), }",
            &[0; 12],
        ),
        &["header byte 44: unexpected word 'Maybe'"],
    );
    npy_err(
        &dir,
        &npy_file("{'descr': '<f4', 'fortran_order': False, }", &[]),
        &["header at byte 10: missing key 'shape'"],
    );
    npy_err(
        &dir,
        &npy_file(
            "{'descr': '<f4', 'fortran_order': False, 'shape': (), 'extra': 1}",
            &[0; 4],
        ),
        &["unexpected key 'extra'"],
    );
    npy_err(
        &dir,
        &npy_file(
            "{'descr': '<f4', 'descr': '<f4', 'fortran_order': False, 'shape': ()}",
            &[0; 4],
        ),
        &["key 'descr' appears twice"],
    );
    npy_err(
        &dir,
        &npy_file(
            "{'descr': '<i8', 'fortran_order': False, 'shape': (2,), }",
            &[0; 16],
        ),
        &["unsupported dtype '<i8' in field 'descr'"],
    );
    npy_err(
        &dir,
        &npy_file(
            "{'descr': '>V2', 'fortran_order': False, 'shape': (2,), }",
            &[0; 4],
        ),
        &["unsupported dtype '>V2'"],
    );
    for descr in ["=f4", "|f2", "i4"] {
        let dict = format!("{{'descr': '{descr}', 'fortran_order': False, 'shape': (2,), }}");
        let want = format!("dtype '{descr}' in field 'descr' does not say its byte order");
        npy_err(&dir, &npy_file(&dict, &[0; 16]), &[&want]);
    }
    npy_err(
        &dir,
        &npy_file(
            "{'descr': [('a', '<f4')], 'fortran_order': False, 'shape': (2,), }",
            &[0; 8],
        ),
        &["header field 'descr': structured (record) dtypes are not supported"],
    );
    npy_err(
        &dir,
        &npy_file(
            "{'descr': '<f4', 'fortran_order': 0, 'shape': (2,), }",
            &[0; 8],
        ),
        &["header field 'fortran_order': expected True or False"],
    );
    npy_err(
        &dir,
        &npy_file(
            "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 'x'), }",
            &[0; 8],
        ),
        &["header field 'shape': dimension 1 is Str(\"x\"), not an integer"],
    );
    npy_err(
        &dir,
        &npy_file(
            "{'descr': '<f4', 'fortran_order': False, 'shape': (99999999999999999999,), }",
            &[],
        ),
        &["integer 99999999999999999999 is too large"],
    );
    npy_err(
        &dir,
        &npy_file(
            "{'descr': '<f4', 'fortran_order': False, 'shape': (4294967296, 4294967296, 4294967296), }",
            &[],
        ),
        &["F32 [4294967296, 4294967296, 4294967296] overflows the address space"],
    );
    npy_err(
        &dir,
        &npy_file(ok, &[0; 40]),
        &["data at byte 128 holds 40 bytes but '<f4' (3, 4) needs 48 (file truncated?)"],
    );
    npy_err(
        &dir,
        &npy_file(ok, &[0; 52]),
        &[
            "data at byte 128 holds 52 bytes but '<f4' (3, 4) needs 48 (trailing bytes after the array)",
        ],
    );
    let deep = format!(
        "{{'descr': '<f4', 'fortran_order': False, 'shape': {}1{}, }}",
        "(".repeat(100),
        ")".repeat(100)
    );
    npy_err(&dir, &npy_file(&deep, &[]), &["header nested too deeply"]);
    // Accepted variants: no trailing comma, double quotes, Python 2 longs, '<u1'.
    let path = dir.join("ok.npy");
    fs::write(
        &path,
        npy_file(
            "{\"descr\": '<u1', \"shape\": (2L,), 'fortran_order': False}",
            &[5, 6],
        ),
    )
    .unwrap();
    assert_eq!(
        read_npy(&path).unwrap(),
        Tensor::from_u8(vec![2], vec![5, 6])
    );
}

// ---------------------------------------------------------------------------------------------
// Malformed safetensors files.

fn st_file(header: &str, data_len: usize) -> Vec<u8> {
    let mut out = (header.len() as u64).to_le_bytes().to_vec();
    out.extend_from_slice(header.as_bytes());
    out.extend(pattern(data_len, 1));
    out
}

fn st_err(dir: &Path, bytes: &[u8], want: &str) {
    let path = dir.join("x.safetensors");
    fs::write(&path, bytes).unwrap();
    let msg = err_text(read_safetensors(&path));
    let full = format!("{}: {want}", path.display());
    assert!(msg.contains(&full), "error {msg:?} should contain {full:?}");
}

#[test]
fn malformed_safetensors_is_rejected_with_location() {
    let dir = scratch("st-bad");
    let t = |name: &str, dtype: &str, shape: &str, b: usize, e: usize| {
        format!("\"{name}\":{{\"dtype\":\"{dtype}\",\"shape\":{shape},\"data_offsets\":[{b},{e}]}}")
    };
    let one = |body: String, len| st_file(&format!("{{{body}}}"), len);

    st_err(
        &dir,
        b"\x10\x00\x00",
        "file is 3 bytes, too short for the 8-byte header length",
    );
    st_err(
        &dir,
        &[0xff; 8],
        "header length 18446744073709551615 (bytes 0..8) exceeds the 100000000-byte limit",
    );
    let mut short = st_file("{}", 0);
    short[0] = 40;
    st_err(
        &dir,
        &short,
        "header length 40 (bytes 0..8) runs past the end of the file (10 bytes)",
    );
    st_err(
        &dir,
        &st_file(" {}", 0),
        "header (bytes 8..11) does not start with '{'",
    );
    st_err(
        &dir,
        &st_file("{\"a\":\u{0}}", 0),
        "header JSON (bytes 8..15) is invalid: under 'a': expected value at line 1 column 6",
    );
    let mut bad_utf8 = st_file("{\"a\":{}}", 0);
    bad_utf8[11] = 0xff;
    st_err(&dir, &bad_utf8, "header is not valid UTF-8 at byte 11");
    st_err(
        &dir,
        &st_file("{\"a\": {\"dtype\": \"F32\",}}", 0),
        "header JSON (bytes 8..32) is invalid",
    );
    st_err(
        &dir,
        &st_file("[1, 2]", 0),
        "header (bytes 8..14) does not start with '{'",
    );
    st_err(
        &dir,
        &st_file("{\"a\": 5}", 0),
        "header JSON (bytes 8..16) is invalid: under 'a': invalid type: integer `5`, expected a JSON object at line 1 column 7",
    );
    st_err(
        &dir,
        &one(t("w", "I64", "[2]", 0, 16), 16),
        "tensor 'w': unsupported dtype 'I64' (supported: F32, F16, BF16, U8, I32, F64, F4, \
         F8_E4M3, F8_E8M0)",
    );
    st_err(
        &dir,
        &one(t("w", "f32", "[2]", 0, 8), 8),
        "tensor 'w': unsupported dtype 'f32'",
    );
    st_err(
        &dir,
        &one(t("scale", "U8", "[4, 8]", 0, 40), 40),
        "tensor 'scale': data_offsets [0, 40] hold 40 bytes but U8 [4, 8] needs 32",
    );
    st_err(
        &dir,
        &one(t("w", "F32", "[4]", 0, 16), 12),
        "tensor 'w': data_offsets [0, 16] run past the end of the 12-byte data buffer",
    );
    st_err(
        &dir,
        &one(t("w", "F32", "[0]", 8, 0), 8),
        "tensor 'w': data_offsets [8, 0] end before they begin",
    );
    st_err(
        &dir,
        &one(t("w", "F32", "[-1]", 0, 4), 4),
        "tensor 'w': shape entry -1 is not a non-negative integer",
    );
    st_err(
        &dir,
        &one(t("w", "F32", "[1.5]", 0, 4), 4),
        "tensor 'w': shape entry 1.5 is not a non-negative integer",
    );
    st_err(
        &dir,
        &one(
            "\"w\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0]}".into(),
            4,
        ),
        "tensor 'w': data_offsets [0] must be exactly [begin, end]",
    );
    st_err(
        &dir,
        &one("\"w\":{\"dtype\":\"F32\",\"shape\":[1]}".into(), 4),
        "tensor 'w': missing field 'data_offsets'",
    );
    st_err(
        &dir,
        &one(
            "\"w\":{\"dtype\":\"F32\",\"shape\":7,\"data_offsets\":[0,4]}".into(),
            4,
        ),
        "tensor 'w': shape 7 is not an array",
    );
    st_err(
        &dir,
        &one(
            "\"w\":{\"dtype\":1,\"shape\":[],\"data_offsets\":[0,4]}".into(),
            4,
        ),
        "tensor 'w': dtype 1 is not a string",
    );
    st_err(
        &dir,
        &one(
            "\"w\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4],\"offset\":0}".into(),
            4,
        ),
        "tensor 'w': unknown field 'offset' (expected 'dtype', 'shape', 'data_offsets')",
    );
    st_err(
        &dir,
        &one(
            "\"w\":{\"dtype\":\"F32\",\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[0,4]}"
                .into(),
            4,
        ),
        "tensor 'w': field 'dtype' appears twice",
    );
    st_err(
        &dir,
        &one(
            format!(
                "{},{}",
                t("w", "F32", "[1]", 0, 4),
                t("w", "F32", "[1]", 4, 8)
            ),
            8,
        ),
        "tensor 'w' appears twice in the header",
    );
    st_err(
        &dir,
        &one("\"__metadata__\":{\"k\":1}".into(), 0),
        "'__metadata__': value of 'k' is 1, not a string",
    );
    st_err(
        &dir,
        &one("\"__metadata__\":{},\"__metadata__\":{}".into(), 0),
        "'__metadata__' appears twice in the header",
    );
    // Tiling: gaps before, between and after tensors, and overlaps.
    st_err(
        &dir,
        &one(t("a", "F32", "[1]", 4, 8), 8),
        "gap: data bytes [0, 4) at the start of the data buffer belong to no tensor (next is tensor 'a')",
    );
    st_err(
        &dir,
        &one(
            format!(
                "{},{}",
                t("b", "U8", "[2]", 6, 8),
                t("a", "F32", "[1]", 0, 4)
            ),
            8,
        ),
        "gap: data bytes [4, 6) after tensor 'a' belong to no tensor (next is tensor 'b')",
    );
    st_err(
        &dir,
        &one(
            format!(
                "{},{}",
                t("a", "F32", "[1]", 0, 4),
                t("b", "U8", "[4]", 2, 6)
            ),
            6,
        ),
        "tensor 'b': data_offsets [2, 6] overlap tensor 'a', which ends at 4",
    );
    st_err(
        &dir,
        &one(t("a", "F32", "[1]", 0, 4), 9),
        "gap: data bytes [4, 9) at the end of the data buffer belong to no tensor",
    );
    st_err(
        &dir,
        &st_file("{}", 3),
        "gap: data bytes [0, 3) at the end of the data buffer belong to no tensor",
    );
    // F4 counts 4-bit elements: an odd count fills no whole byte; sizes are half the count.
    st_err(
        &dir,
        &one(t("w", "F4", "[3]", 0, 2), 2),
        "tensor 'w': F4 [3] holds an odd number of 4-bit elements, which do not fill whole bytes",
    );
    st_err(
        &dir,
        &one(t("w", "F4", "[2, 4]", 0, 8), 8),
        "tensor 'w': data_offsets [0, 8] hold 8 bytes but F4 [2, 4] needs 4",
    );
    st_err(
        &dir,
        &one(t("s", "F8_E8M0", "[4]", 0, 4), 3),
        "tensor 's': data_offsets [0, 4] run past the end of the 3-byte data buffer",
    );
    // A header may claim any size: it is checked against the file before anything is
    // allocated for it (4 TiB here, in a file of 8 data bytes).
    st_err(
        &dir,
        &one(t("w", "F32", "[1099511627776]", 0, 4_398_046_511_104), 8),
        "tensor 'w': data_offsets [0, 4398046511104] run past the end of the 8-byte data buffer",
    );
    st_err(
        &dir,
        &one(
            t("w", "F32", "[4294967296, 4294967296, 4294967296]", 0, 8),
            8,
        ),
        "tensor 'w': F32 [4294967296, 4294967296, 4294967296] overflows the address space",
    );
    // What the reference reader refuses is said with its words too.
    let msg = err_text(safetensors_from_bytes(&one(
        t("w", "F32", "[4]", 0, 16),
        12,
    )));
    assert!(msg.contains("(the safetensors reference reader: "), "{msg}");
    // Zero-size tensors may sit anywhere on a boundary, as the reference writer puts them.
    let path = dir.join("ok.safetensors");
    fs::write(
        &path,
        one(
            format!(
                "{},{},{}",
                t("z", "F32", "[0, 3]", 0, 0),
                t("a", "F32", "[1]", 0, 4),
                t("y", "I32", "[0]", 4, 4)
            ),
            4,
        ),
    )
    .unwrap();
    let st = read_safetensors(&path).unwrap();
    assert_eq!(st.names(), ["z", "a", "y"]);
}

#[test]
fn writers_refuse_bad_input_and_leave_no_trace() {
    let dir = scratch("atomic");
    let good = Tensor::from_f32(vec![2], &[1.0, 2.0]);
    let bad = Tensor {
        dtype: DType::F32,
        shape: vec![3],
        bytes: vec![0; 8],
    };
    let npy = dir.join("out.npy");
    write_npy(&npy, &good).unwrap();
    let before = fs::read(&npy).unwrap();
    assert_err(
        write_npy(&npy, &bad),
        &[
            "out.npy: refusing to write a malformed tensor",
            "needs 12 bytes",
        ],
    );
    assert_eq!(
        fs::read(&npy).unwrap(),
        before,
        "a failed write leaves the old file alone"
    );

    let st = dir.join("out.safetensors");
    let none = BTreeMap::new();
    assert_err(
        write_safetensors(&st, &[("a", &good), ("a", &good)], &none),
        &["out.safetensors: tensor 'a' given twice"],
    );
    assert_err(
        write_safetensors(&st, &[("__metadata__", &good)], &none),
        &["cannot be called '__metadata__'"],
    );
    assert_err(
        write_safetensors(&st, &[("b", &bad)], &none),
        &["tensor 'b': refusing to write a malformed tensor"],
    );
    assert!(!st.exists());

    // A folder is never replaced, and a write into a missing folder leaves no temporary file.
    let blocked = dir.join("blocked.npy");
    fs::create_dir(&blocked).unwrap();
    fs::write(blocked.join("keep"), b"x").unwrap();
    assert_err(
        write_npy(&blocked, &good),
        &["blocked.npy: writing npy file", "is a folder"],
    );
    assert_eq!(fs::read(blocked.join("keep")).unwrap(), b"x");
    assert_err(
        write_npy(&dir.join("no/such/dir/x.npy"), &good),
        &["x.npy: writing npy file", "cannot write"],
    );
    let mut left: Vec<String> = fs::read_dir(&*dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    left.sort();
    assert_eq!(left, ["blocked.npy", "out.npy"]);
}

/// The writers go through `outfile`: links, FIFOs, devices and read-only files are refused, and
/// what they point at is left alone.
#[cfg(unix)]
#[test]
fn writers_refuse_links_and_read_only_files() {
    use std::os::unix::fs::PermissionsExt;
    let dir = scratch("kinds");
    let good = Tensor::from_f32(vec![2], &[1.0, 2.0]);
    let target = dir.join("target.npy");
    fs::write(&target, b"keep").unwrap();
    let link = dir.join("link.npy");
    std::os::unix::fs::symlink(&target, &link).unwrap();
    assert_err(
        write_npy(&link, &good),
        &["link.npy: writing npy file", "symbolic link"],
    );
    assert!(
        fs::symlink_metadata(&link)
            .unwrap()
            .file_type()
            .is_symlink()
    );
    assert_eq!(fs::read(&target).unwrap(), b"keep");

    let ro = dir.join("ro.safetensors");
    fs::write(&ro, b"keep").unwrap();
    fs::set_permissions(&ro, fs::Permissions::from_mode(0o444)).unwrap();
    assert_err(
        write_safetensors(&ro, &[("x", &good)], &BTreeMap::new()),
        &["ro.safetensors: writing safetensors file", "read-only"],
    );
    assert_eq!(fs::read(&ro).unwrap(), b"keep");
}

/// numpy's default float64 reads exactly, in either byte order.
#[test]
fn f64_npy_files_read_exactly() {
    let dir = scratch("f64");
    let values = [0.1f64, -1e300, f64::MIN_POSITIVE, f64::INFINITY];
    let le: Vec<u8> = values.iter().flat_map(|v| v.to_le_bytes()).collect();
    let be: Vec<u8> = values.iter().flat_map(|v| v.to_be_bytes()).collect();
    for (descr, data) in [("<f8", &le), (">f8", &be)] {
        let path = dir.join("x.npy");
        let dict = format!("{{'descr': '{descr}', 'fortran_order': False, 'shape': (2, 2), }}");
        fs::write(&path, npy_file(&dict, data)).unwrap();
        let t = read_tensor(&path, None).unwrap();
        assert_eq!(
            (t.dtype, t.shape.as_slice()),
            (DType::F64, &[2, 2][..]),
            "{descr}"
        );
        assert_eq!(t.to_f64_vec().unwrap(), values, "{descr}");
    }
}

// ---------------------------------------------------------------------------------------------
// Fuzzing: broken files give errors, never panics.

/// xorshift64*: a tiny deterministic generator, so failures reproduce.
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
}

fn fuzz_inputs() -> Vec<(bool, Vec<u8>)> {
    let mut files = Vec::new();
    for entry in fs::read_dir(FIXTURES).unwrap() {
        let path = entry.unwrap().path();
        match path.extension().and_then(|e| e.to_str()) {
            Some("npy") => files.push((true, fs::read(&path).unwrap())),
            Some("safetensors") => files.push((false, fs::read(&path).unwrap())),
            _ => {}
        }
    }
    assert!(files.len() >= 13);
    // The 4- and 8-bit float types of the quantizer's outputs.
    let data = sample(DType::F4, &[4, 32], 3);
    let scale = sample(DType::F8E8M0, &[4, 1], 4);
    let e4m3 = sample(DType::F8E4M3, &[4, 2], 5);
    let meta = BTreeMap::from([("format".to_string(), "mxfp4".to_string())]);
    let quantized = safetensors_to_bytes(
        &[("data", &data), ("scale", &scale), ("e4m3", &e4m3)],
        &meta,
    );
    files.push((false, quantized.unwrap()));
    files
}

fn parse(npy: bool, bytes: &[u8]) -> bool {
    if npy {
        npy_from_bytes(bytes).is_ok()
    } else {
        safetensors_from_bytes(bytes).is_ok()
    }
}

#[test]
fn truncated_files_are_errors() {
    for (npy, bytes) in fuzz_inputs() {
        assert!(parse(npy, &bytes));
        for len in 0..bytes.len() {
            // Every proper prefix is broken: npy's data length and safetensors' tiling are exact.
            assert!(!parse(npy, &bytes[..len]), "prefix of {len} bytes accepted");
        }
    }
}

#[test]
fn random_corruption_never_panics() {
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    let inputs = fuzz_inputs();
    let mut accepted = 0;
    for round in 0..20_000 {
        let (npy, base) = &inputs[round % inputs.len()];
        let mut bytes = base.clone();
        for _ in 0..1 + rng.below(4) {
            let i = rng.below(bytes.len());
            // Mostly touch the header, where the parser lives.
            let i = if rng.below(4) > 0 {
                i % bytes.len().min(160)
            } else {
                i
            };
            bytes[i] = match rng.below(3) {
                0 => rng.next() as u8,
                1 => bytes[i] ^ (1 << rng.below(8)),
                _ => b"{}()[],:'\" 0123456789\n"[rng.below(22)],
            };
        }
        if rng.below(8) == 0 {
            let cut = rng.below(bytes.len());
            bytes.truncate(cut);
        }
        accepted += usize::from(parse(*npy, &bytes));
    }
    // Flips inside data bytes are legitimately accepted; most header damage is not.
    assert!(accepted > 0 && accepted < 20_000, "{accepted}");
    for len in [0usize, 1, 7, 8, 9, 64, 200] {
        let noise: Vec<u8> = (0..len).map(|_| rng.next() as u8).collect();
        assert!(npy_from_bytes(&noise).is_err());
        assert!(safetensors_from_bytes(&noise).is_err());
    }
}
