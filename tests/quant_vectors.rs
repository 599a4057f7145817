//! The CPU reference against the independent vectors of `tests/vectors/quant/` (numpy +
//! ml_dtypes, written without looking at the Rust code): every case, byte for byte — packed
//! codes, scales, the tensor scale, the 8-bit container and the dequantized values (NaN
//! compared by position). The files are read with `tensorio`, so this also checks that the
//! reader understands what the `safetensors` package writes.

use fp4probe::quant::{self, NvLevels, ScaleMode, Spec, container_bytes, dequantize};
use fp4probe::tensorio::{self, SafeTensors};
use std::path::{Path, PathBuf};

fn vector_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/vectors/quant")
}

fn cases() -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(vector_dir())
        .expect("tests/vectors/quant")
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "safetensors"))
        .collect();
    v.sort();
    v
}

fn spec_of(st: &SafeTensors, path: &Path) -> Spec {
    let meta = |k: &str| {
        st.metadata
            .get(k)
            .unwrap_or_else(|| panic!("{}: metadata {k}", path.display()))
            .as_str()
    };
    match (meta("format"), meta("scale_mode")) {
        ("mxfp4", "floor") => Spec::mxfp4(ScaleMode::Floor),
        ("mxfp4", "ceil") => Spec::mxfp4(ScaleMode::Ceil),
        ("mxfp4", "even") => Spec::mxfp4(ScaleMode::Even),
        ("mxfp4", "rceil") => Spec::mxfp4(ScaleMode::Rceil),
        ("nvfp4", "two_level") => Spec::nvfp4(NvLevels::TwoLevel),
        ("nvfp4", "one_level") => Spec::nvfp4(NvLevels::OneLevel),
        (f, m) => panic!("{}: unknown case {f}/{m}", path.display()),
    }
}

fn first_diff(a: &[u8], b: &[u8]) -> Option<(usize, u8, u8)> {
    a.iter()
        .zip(b)
        .position(|(x, y)| x != y)
        .map(|i| (i, a[i], b[i]))
}

#[test]
fn cpu_reference_equals_every_independent_vector() {
    let files = cases();
    assert!(
        files.len() >= 40,
        "expected the 47 vector files, found {}",
        files.len()
    );
    let mut checked = 0;
    for path in &files {
        let st = tensorio::read_safetensors(path).unwrap_or_else(|e| panic!("{e:#}"));
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        let spec = spec_of(&st, path);
        let get = |n: &str| st.get(n).unwrap_or_else(|| panic!("{name}: tensor {n}"));
        let x = get("x");
        let xf = x.to_f32_vec().unwrap();
        let (q, _) =
            quant::quantize(&spec, &x.shape, &xf).unwrap_or_else(|e| panic!("{name}: {e:#}"));

        let want_data = get("data").as_u8().unwrap();
        assert_eq!(q.data.len(), want_data.len(), "{name}: data length");
        if let Some((i, got, want)) = first_diff(&q.data, want_data) {
            panic!(
                "{name}: data byte {i}: got {got:#04x}, vectors say {want:#04x} (elements {}, {})",
                xf[2 * i],
                xf[2 * i + 1]
            );
        }
        let want_scale = get("scale").as_u8().unwrap();
        if let Some((i, got, want)) = first_diff(&q.scale, want_scale) {
            panic!("{name}: scale of block {i}: got {got:#04x}, vectors say {want:#04x}");
        }
        match (st.get("tensor_scale"), q.tensor_scale) {
            (Some(t), Some(got)) => {
                let want = t.to_f32_vec().unwrap()[0];
                assert_eq!(
                    got.to_bits(),
                    want.to_bits(),
                    "{name}: tensor scale {got:e} vs {want:e}"
                );
            }
            (None, None) => {}
            (w, g) => panic!(
                "{name}: tensor scale present in vectors {} / here {}",
                w.is_some(),
                g.is_some()
            ),
        }
        let want_byte = get("data_byte").as_u8().unwrap();
        assert!(
            first_diff(&container_bytes(&q.data), want_byte).is_none(),
            "{name}: data_byte"
        );

        let want_deq = get("dequant").to_f32_vec().unwrap();
        let got_deq = dequantize(&q);
        for (i, (g, w)) in got_deq.iter().zip(&want_deq).enumerate() {
            let same = if w.is_nan() {
                g.is_nan()
            } else {
                g.to_bits() == w.to_bits()
            };
            assert!(
                same,
                "{name}: dequant[{i}] got {g:e} ({:#x}), vectors say {w:e} ({:#x})",
                g.to_bits(),
                w.to_bits()
            );
        }
        checked += 1;
    }
    eprintln!("{checked} vector files equal byte for byte");
}

/// The vectors cover what they claim: each MXFP4 mode and both NVFP4 forms, every input
/// type, NaN/Inf, zero blocks, ties.
#[test]
fn vectors_cover_every_mode_input_type_and_special_case() {
    let names: Vec<String> = cases()
        .iter()
        .map(|p| p.file_name().unwrap().to_string_lossy().into_owned())
        .collect();
    for mode in [
        "mxfp4_floor",
        "mxfp4_ceil",
        "mxfp4_even",
        "mxfp4_rceil",
        "nvfp4_two_level",
        "nvfp4_one_level",
    ] {
        for case in [
            "f32_random",
            "f32_ties",
            "f32_zeros",
            "f32_nonfinite",
            "f32_boundaries",
            "bf16_random",
            "f16_random",
        ] {
            assert!(
                names
                    .iter()
                    .any(|n| n.starts_with(&format!("{mode}_{case}"))),
                "no {mode}_{case} vector"
            );
        }
    }
}
