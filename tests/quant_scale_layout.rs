//! `fp4probe quantize --scale-layout` as a user drives it, on the CPU backend: the tiled
//! layouts hold the linear file's scales at the documented offsets with zero padding, say so in
//! their metadata, dequantize to the same values, and layouts or files that do not fit are
//! refused with exit code 2 before anything is written.

mod common;
use common::{fp4probe, refused, text, tmpdir};

use fp4probe::quant::{ScaleGrid, ScaleLayout};
use fp4probe::tensorio::{self, Tensor};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

/// Rows 3 × 45 = 135 (past one 128-row tile, not a multiple of 8), K = 160: 5 MXFP4 and 10
/// NVFP4 blocks a row, neither a multiple of 4.
const SHAPE: [usize; 3] = [3, 45, 160];

fn input(dir: &Path) -> PathBuf {
    let n: usize = SHAPE.iter().product();
    let x: Vec<f32> = (0..n)
        .map(|i| ((i * 7919 % 1009) as f32 - 504.0) * 2f32.powi((i / 160 % 9) as i32 - 4))
        .collect();
    let p = dir.join("x.npy");
    tensorio::write_npy(&p, &Tensor::from_f32(SHAPE.to_vec(), &x)).unwrap();
    p
}

fn quantize(input: &Path, out: &Path, format: &str, layout: &str) -> tensorio::SafeTensors {
    let o = fp4probe(&[
        "quantize",
        "--backend",
        "cpu",
        "--format",
        format,
        "--scale-layout",
        layout,
        "--input",
        s(input),
        "--output",
        s(out),
    ]);
    assert!(o.status.success(), "{format} {layout}: {}", text(&o));
    tensorio::read_safetensors(out).unwrap()
}

fn dequantize(q: &Path, out: &Path) -> Vec<u32> {
    let o = fp4probe(&["dequantize", "--input", s(q), "--output", s(out)]);
    assert!(o.status.success(), "{}", text(&o));
    let x = tensorio::read_npy(out).unwrap().to_f32_vec().unwrap();
    x.into_iter().map(f32::to_bits).collect()
}

#[test]
fn tiled_scales_are_the_linear_scales_at_the_documented_offsets() {
    let dir = tmpdir("qlayout", "tiled");
    let x = input(&dir);
    for (format, block, layouts) in [
        ("mxfp4", 32, &["128x4"][..]),
        ("nvfp4", 16, &["128x4", "8x4"][..]),
    ] {
        let lin_path = dir.join(format!("{format}.linear.safetensors"));
        let lin = quantize(&x, &lin_path, format, "linear");
        assert_eq!(lin.metadata["scale_layout"], "linear");
        let lin_scale = &lin.get("scale").unwrap().bytes;
        let back_linear = dequantize(&lin_path, &dir.join(format!("{format}.linear.npy")));
        for &layout in layouts {
            let name = format!("{format} {layout}");
            let path = dir.join(format!("{format}.{layout}.safetensors"));
            let q = quantize(&x, &path, format, layout);
            let l = <ScaleLayout as clap::ValueEnum>::from_str(layout, false).unwrap();
            let g = ScaleGrid::new(l, &SHAPE, block);
            let tile = if layout == "8x4" { 8 } else { 128 };
            assert_eq!((g.rows, g.cols), (135, 160 / block), "{name}");
            assert_eq!(g.padded_rows(), 135usize.next_multiple_of(tile), "{name}");
            assert_eq!(g.padded_cols(), (160 / block).next_multiple_of(4), "{name}");
            let scale = q.get("scale").unwrap();
            assert_eq!(
                scale.shape,
                vec![g.len()],
                "{name}: one axis of PR·PC bytes"
            );
            let mut expected = vec![0u8; g.len()];
            for r in 0..g.rows {
                for c in 0..g.cols {
                    expected[g.offset(r, c)] = lin_scale[r * g.cols + c];
                }
            }
            assert_eq!(
                scale.bytes, expected,
                "{name}: scales at their offsets, padding 0"
            );
            assert_eq!(
                q.get("data").unwrap().bytes,
                lin.get("data").unwrap().bytes,
                "{name}: codes"
            );
            assert_eq!(q.metadata["scale_layout"], layout, "{name}");
            assert!(q.metadata["scale_index"].contains("offset(r, c)"), "{name}");
            assert!(
                q.metadata["scale_padding"].contains(&format!("PR = {}", g.padded_rows())),
                "{name}"
            );
            let back = dequantize(&path, &dir.join(format!("{format}.{layout}.npy")));
            assert_eq!(back, back_linear, "{name}: dequantized");
        }
    }
}

#[test]
fn layouts_that_do_not_apply_are_refused_before_anything_is_written() {
    let dir = tmpdir("qlayout", "refused");
    let x = input(&dir);
    let flat = dir.join("flat.npy");
    tensorio::write_npy(&flat, &Tensor::from_f32(vec![64], &[1.0; 64])).unwrap();
    let out = dir.join("q.safetensors");
    let cases: [(&[&str], &str); 3] = [
        (
            &[
                "--format",
                "mxfp4",
                "--scale-layout",
                "8x4",
                "--input",
                s(&x),
            ],
            "--scale-layout 8x4 is FlashInfer's layout for NVFP4 scales",
        ),
        (
            &[
                "--format",
                "nvfp4",
                "--scale-layout",
                "128x4",
                "--input",
                s(&flat),
            ],
            "a tensor of shape [64] has no rows",
        ),
        (
            &[
                "--format",
                "nvfp4",
                "--scale-layout",
                "16x4",
                "--input",
                s(&x),
            ],
            "invalid value '16x4'",
        ),
    ];
    for (flags, want) in cases {
        let mut args = vec!["quantize", "--backend", "cpu", "--output", s(&out)];
        args.extend_from_slice(flags);
        refused(&args, want);
        assert!(!out.exists(), "{flags:?} wrote the output");
    }
}

#[test]
fn dequantize_says_where_a_files_scales_and_metadata_disagree() {
    let dir = tmpdir("qlayout", "disagree");
    let write = |name: &str, scale_shape: Vec<usize>, meta: &[(&str, &str)]| {
        let p = dir.join(name);
        let n: usize = scale_shape.iter().product();
        let data = Tensor::from_u8(vec![20, 32], vec![0x21; 640]);
        let scale = Tensor::from_u8(scale_shape, vec![0x38; n]);
        let m: BTreeMap<String, String> = meta
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        tensorio::write_safetensors(&p, &[("data", &data), ("scale", &scale)], &m).unwrap();
        p
    };
    // data [20, 32]: 20 rows of K = 64, 4 NVFP4 blocks; 8x4 needs 24 × 4 = 96 bytes.
    let good = write(
        "good.safetensors",
        vec![96],
        &[("format", "nvfp4"), ("scale_layout", "8x4")],
    );
    let o = fp4probe(&[
        "dequantize",
        "--input",
        s(&good),
        "--output",
        s(&dir.join("g.npy")),
    ]);
    assert!(o.status.success(), "{}", text(&o));
    let cases = [
        (
            write(
                "rows.safetensors",
                vec![20, 4],
                &[("format", "nvfp4"), ("scale_layout", "8x4")],
            ),
            "'scale' has shape [20, 4], but metadata scale_layout 8x4 for 'data' [20, 32] (20 rows × 4 nvfp4 blocks) needs [96]",
        ),
        (
            write(
                "short.safetensors",
                vec![80],
                &[("format", "nvfp4"), ("scale_layout", "128x4")],
            ),
            "needs [512]: 20 rows padded to 128",
        ),
        (
            write("noformat.safetensors", vec![96], &[("scale_layout", "8x4")]),
            "no format",
        ),
        (
            write(
                "unknown.safetensors",
                vec![96],
                &[("format", "nvfp4"), ("scale_layout", "32x4")],
            ),
            "metadata scale_layout \"32x4\" is not linear, 128x4 or 8x4",
        ),
        (
            write(
                "mx8x4.safetensors",
                vec![24 * 4],
                &[("format", "mxfp4"), ("scale_layout", "8x4")],
            ),
            "8x4 is FlashInfer's layout for NVFP4 scales",
        ),
    ];
    for (path, want) in cases {
        let out = dir.join("y.npy");
        let args = ["dequantize", "--input", s(&path), "--output", s(&out)];
        refused(&args, want);
        refused(&args, s(&path));
        assert!(!out.exists());
    }
}
