//! The CPU references of the fused FP4 attention kernel: shapes, the FP4 operand format, the
//! quantized reference against an independent single-threaded transcription of the scheme,
//! and FP4's accuracy against f64 attention. Cosines are printed (`--nocapture`).

use fp4probe::attention::reference::{P_SCALE, score_factor};
use fp4probe::attention::*;
use fp4probe::quant;
use fp4probe::quant::codes::{e2m1_decode, e2m1_encode, e4m3_clamp_round, e4m3_to_f32};
use fp4probe::quant::{Format, ScaleMode, Spec};
use std::time::Instant;

fn shape(b: usize, h: usize, sq: usize, sk: usize, d: usize, causal: bool) -> AttnShape {
    AttnShape::new(b, h, sq, sk, d, causal).unwrap()
}

/// Gaussian Q, K, V for a shape, from one seed.
fn gaussian_qkv(s: &AttnShape, seed: u64) -> (Vec<f32>, Vec<f32>, Vec<f32>) {
    (
        gaussian(s.q_len(), seed),
        gaussian(s.kv_len(), seed + 1),
        gaussian(s.kv_len(), seed + 2),
    )
}

/// Cosine floor of the MXFP4 form of the scheme against f64 attention on i.i.d. Gaussian
/// inputs (D=128, S=256). The 0.98 is met by the NVFP4 form (see
/// `nvfp4_meets_the_accuracy_targets`); MXFP4's power-of-two scales over 32 elements cannot:
/// with Q, K, V in MXFP4 and P exact the cosine is already 0.979, and the full scheme gives
/// about 0.975. Random Gaussian scores make softmax nearly flat, the worst case: most of a
/// row's mass sits in many small p values that FP4 rounds coarsely.
const GAUSSIAN_COSINE_FLOOR: f64 = 0.96;

/// FP4 output and its comparison with f64 attention on the same (unquantized) inputs.
fn fp4_vs_f64(s: &AttnShape, q: &[f32], k: &[f32], v: &[f32], smooth: bool) -> Comparison {
    fp4_vs_f64_as(s, q, k, v, smooth, Format::Mxfp4)
}

fn fp4_vs_f64_as(
    s: &AttnShape,
    q: &[f32],
    k: &[f32],
    v: &[f32],
    smooth: bool,
    format: Format,
) -> Comparison {
    let qkv = prequantize(s, q, k, v, smooth, format).unwrap();
    let out = reference_quantized(&qkv);
    let exact = reference_f64(s, q, k, v);
    assert!(
        out.iter().all(|x| x.is_finite()),
        "non-finite output for {s}"
    );
    Comparison::new(&out, &exact)
}

/// The scheme of `reference_quantized`'s doc, transcribed with plain loops: no threads, one
/// P row quantized at a time, serial sums.
fn naive_scheme(qkv: &QuantizedQkv) -> Vec<f32> {
    let s = &qkv.shape;
    let (d, sk, skp) = (s.head_dim, s.seq_k, s.seq_k_padded());
    let (q, k, v) = (
        qkv.dequantized_q(),
        qkv.dequantized_k(),
        qkv.dequantized_v(),
    );
    let c = score_factor(qkv) as f64;
    let mut out = vec![0.0f32; s.q_len()];
    for bh in 0..s.bh() {
        for i in 0..s.seq_q {
            let mut s2 = vec![f64::NEG_INFINITY; skp];
            for (j, s2j) in s2.iter_mut().enumerate().take(sk) {
                if s.causal && j > i {
                    continue;
                }
                let mut acc = 0.0f64;
                for t in 0..d {
                    let qv = q[(bh * s.seq_q + i) * d + t] as f64;
                    acc += qv * k[(bh * sk + j) * d + t] as f64;
                }
                *s2j = acc * c;
            }
            let m = s2.iter().cloned().fold(f64::NEG_INFINITY, f64::max).ceil();
            let p: Vec<f32> = s2.iter().map(|&x| (x - m).exp2() as f32).collect();
            let scaled: Vec<f32> = p.iter().map(|&x| x * P_SCALE).collect();
            let pd: Vec<f32> = match qkv.format {
                Format::Mxfp4 => {
                    let rceil = Spec::mxfp4(ScaleMode::Rceil);
                    quant::dequantize(&quant::quantize(&rceil, &[1, skp], &scaled).unwrap().0)
                }
                // E4M3 scale amax/6 per 16, elements times RN(1/scale), rounded to E2M1.
                Format::Nvfp4 => scaled
                    .chunks(16)
                    .flat_map(|b| {
                        let amax = b.iter().fold(0.0f32, |m, &x| m.max(x));
                        let value = e4m3_to_f32(e4m3_clamp_round(amax / 6.0));
                        let rcp = 1.0 / value;
                        b.iter()
                            .map(move |&x| e2m1_decode(e2m1_encode(x * rcp)) * value)
                    })
                    .collect(),
            };
            let l: f64 = pd.iter().map(|&x| x as f64).sum();
            for t in 0..d {
                let mut acc = 0.0f64;
                for (j, &pj) in pd.iter().enumerate().take(sk) {
                    acc += pj as f64 * v[(bh * sk + j) * d + t] as f64;
                }
                out[(bh * s.seq_q + i) * d + t] = (acc / l) as f32 * qkv.v_tensor_scale;
            }
        }
    }
    out
}

#[test]
fn shape_validation_and_flops() {
    let e = AttnShape::new(1, 1, 16, 16, 96, false).unwrap_err();
    assert_eq!(
        e.to_string(),
        "head_dim 96 is not supported: the kernel supports 64, 128 and 256"
    );
    assert_eq!(
        AttnShape::new(1, 1, 16, 0, 64, false)
            .unwrap_err()
            .to_string(),
        "seq_k must be at least 1"
    );
    assert!(AttnShape::new(1, 0, 16, 16, 64, false).is_err());
    let big = AttnShape::new(1 << 40, 1 << 20, 1 << 10, 1, 256, false).unwrap_err();
    assert!(matches!(big, ShapeError::Overflow(_)), "{big}");
    for d in [64, 128, 256] {
        shape(1, 1, 1, 1, d, true);
    }
    let s = shape(2, 8, 1000, 1000, 128, false);
    assert_eq!(s.flops(), 4.0 * 16.0 * 1e6 * 128.0);
    assert_eq!(
        AttnShape { causal: true, ..s }.flops(),
        2.0 * 16.0 * 1e6 * 128.0
    );
    assert_eq!(shape(1, 1, 77, 133, 64, false).seq_k_padded(), 160);
}

#[test]
fn exact_inputs_survive_prequantization_unchanged() {
    for (d, sq, sk) in [(64, 40, 77), (128, 33, 64), (256, 5, 31)] {
        let s = shape(2, 2, sq, sk, d, false);
        let (q, k, v) = exact_qkv(&s, 11);
        let qkv = prequantize(&s, &q, &k, &v, false, Format::Mxfp4).unwrap();
        assert_eq!(qkv.dequantized_q(), q, "Q {s}");
        assert_eq!(qkv.dequantized_k(), k, "K {s}");
        assert_eq!(qkv.dequantized_v(), v, "V {s}");
        let (q, k, v) = identity_qkv(&s);
        let qkv = prequantize(&s, &q, &k, &v, false, Format::Mxfp4).unwrap();
        assert_eq!(
            (
                qkv.dequantized_q(),
                qkv.dequantized_k(),
                qkv.dequantized_v()
            ),
            (q, k, v),
            "identity {s}"
        );
    }
}

#[test]
fn v_is_transposed_and_padded_along_the_keys() {
    let s = shape(1, 2, 3, 77, 64, false);
    let (q, k, v) = exact_qkv(&s, 5);
    let qkv = prequantize(&s, &q, &k, &v, false, Format::Mxfp4).unwrap();
    let (bh, d, skp) = (2, 64, 96);
    assert_eq!(qkv.q_data.len(), bh * 3 * d / 2);
    assert_eq!(qkv.q_scale.len(), bh * 3 * d / 32);
    assert_eq!(qkv.k_data.len(), bh * 77 * d / 2);
    assert_eq!(qkv.k_scale.len(), bh * 77 * d / 32);
    assert_eq!(qkv.v_data.len(), bh * d * skp / 2);
    assert_eq!(qkv.v_scale.len(), bh * d * skp / 32);
    let vt = qkv.dequantized_vt();
    for h in 0..bh {
        for c in 0..d {
            let row = &vt[(h * d + c) * skp..(h * d + c + 1) * skp];
            for (j, &x) in row.iter().enumerate() {
                let want = if j < 77 { v[(h * 77 + j) * d + c] } else { 0.0 };
                assert_eq!(x, want, "head {h} channel {c} key {j}");
            }
        }
    }
    // The padding's codes are zero bytes: keys 78..96 are bytes 39..48 of each V^T row.
    for row in qkv.v_data.chunks(skp / 2) {
        assert!(row[39..].iter().all(|&b| b == 0));
    }
}

#[test]
fn quantized_reference_matches_an_independent_transcription() {
    for causal in [false, true] {
        for (d, sq, sk) in [(64, 70, 77), (128, 40, 40), (256, 33, 65)] {
            let s = shape(1, 2, sq, sk, d, causal);
            for (name, (q, k, v)) in [
                ("exact", exact_qkv(&s, 3)),
                ("gaussian", gaussian_qkv(&s, 9)),
            ] {
                let qkv = prequantize(&s, &q, &k, &v, false, Format::Mxfp4).unwrap();
                let fast = reference_quantized(&qkv);
                let slow = naive_scheme(&qkv);
                let c = Comparison::new(&fast, &slow);
                assert!(c.relative_error <= 1e-6, "{name} {s}: {c}");
                assert!(c.max_abs_error <= 1e-5, "{name} {s}: {c}");
            }
        }
    }
}

#[test]
fn identity_inputs_give_the_expected_weights() {
    // Scores are 1/√D where the one-hot columns match (j ≡ i mod D), else 0; with D=64,
    // c = log2(e)/8 ≈ 0.18, so M = 1 and every p is a known power of two or 2^(c−1).
    let s = shape(1, 1, 4, 4, 64, false);
    let (q, k, v) = identity_qkv(&s);
    let qkv = prequantize(&s, &q, &k, &v, false, Format::Mxfp4).unwrap();
    let out = reference_quantized(&qkv);
    let c = Comparison::new(&out, &naive_scheme(&qkv));
    assert!(c.relative_error <= 1e-6, "{c}");
    let exact = reference_f64(&s, &q, &k, &v);
    let cmp = Comparison::new(&out, &exact);
    println!("identity inputs, FP4 vs f64: {cmp}");
    assert!(cmp.cosine >= 0.99, "{cmp}");
}

#[test]
fn gaussian_inputs_are_close_to_f64_attention() {
    let s = shape(1, 2, 256, 256, 128, false);
    let (q, k, v) = gaussian_qkv(&s, 42);
    let c = fp4_vs_f64(&s, &q, &k, &v, false);
    println!("gaussian d=128 S=256: {c}");
    assert!(c.cosine >= GAUSSIAN_COSINE_FLOOR, "{c}");
    let cs = fp4_vs_f64(&s, &q, &k, &v, true);
    println!("gaussian d=128 S=256, smooth_k: {cs}");
    assert!(cs.cosine >= GAUSSIAN_COSINE_FLOOR, "{cs}");
}

#[test]
fn smoothing_k_rescues_outlier_channels() {
    let s = shape(1, 2, 256, 256, 128, false);
    let (q, mut k, v) = gaussian_qkv(&s, 42);
    outlier_k(&mut k, &s, &[3, 17, 50], 8.0);
    let smooth = fp4_vs_f64(&s, &q, &k, &v, true);
    let raw = fp4_vs_f64(&s, &q, &k, &v, false);
    println!("K outliers (channels 3, 17, 50 +8), smooth_k=true:  {smooth}");
    println!("K outliers (channels 3, 17, 50 +8), smooth_k=false: {raw}");
    // The brief's 0.97 is out of reach for the reason GAUSSIAN_COSINE_FLOOR gives; what
    // smoothing must do is bring outlier K back to the outlier-free accuracy.
    assert!(smooth.cosine >= GAUSSIAN_COSINE_FLOOR, "{smooth}");
    assert!(smooth.cosine > raw.cosine + 0.01, "{smooth} vs {raw}");
}

/// NVFP4 Q, K, V (two-level) with P in NVFP4: cosine ≥ 0.98 against f64 on Gaussian inputs
/// at d = 128, and ≥ 0.97 with outlier channels in K and smoothing on; the quantized
/// reference still equals the plain transcription of the scheme.
#[test]
fn nvfp4_meets_the_accuracy_targets() {
    for causal in [false, true] {
        let s = shape(1, 2, 256, 256, 128, causal);
        let (q, mut k, v) = gaussian_qkv(&s, 42);
        let c = fp4_vs_f64_as(&s, &q, &k, &v, false, Format::Nvfp4);
        println!("nvfp4 gaussian d=128 S=256 causal {causal}: {c}");
        assert!(c.cosine >= 0.98, "{c}");
        outlier_k(&mut k, &s, &[3, 17, 50], 8.0);
        let smooth = fp4_vs_f64_as(&s, &q, &k, &v, true, Format::Nvfp4);
        println!("nvfp4 outliers + smooth_k causal {causal}: {smooth}");
        assert!(smooth.cosine >= 0.97, "{smooth}");
    }
    let s = shape(1, 2, 77, 133, 64, true);
    let (q, k, v) = gaussian_qkv(&s, 5);
    let qkv = prequantize(&s, &q, &k, &v, false, Format::Nvfp4).unwrap();
    assert!(qkv.q_tensor_scale != 1.0 && qkv.v_tensor_scale != 1.0);
    let c = Comparison::new(&reference_quantized(&qkv), &naive_scheme(&qkv));
    assert!(c.relative_error <= 1e-6, "{c}");
}

#[test]
fn causal_row_zero_is_value_row_zero() {
    for (sq, sk) in [(64, 64), (77, 133), (133, 77)] {
        let s = shape(2, 2, sq, sk, 128, true);
        let (q, k, v) = gaussian_qkv(&s, 7);
        let qkv = prequantize(&s, &q, &k, &v, false, Format::Mxfp4).unwrap();
        let out = reference_quantized(&qkv);
        let vd = qkv.dequantized_v();
        let d = 128;
        for bh in 0..s.bh() {
            let o = &out[bh * sq * d..][..d];
            assert_eq!(o, &vd[bh * sk * d..][..d], "head {bh} of {s}");
        }
    }
}

#[test]
fn odd_lengths_are_finite_and_accurate() {
    for causal in [false, true] {
        for d in [64, 128, 256] {
            let s = shape(1, 2, 77, 133, d, causal);
            let (q, k, v) = gaussian_qkv(&s, 17);
            let c = fp4_vs_f64(&s, &q, &k, &v, false);
            println!("Sq=77 Sk=133 d={d} causal={causal}: {c}");
            assert!(c.cosine >= GAUSSIAN_COSINE_FLOOR, "{s}: {c}");
        }
    }
}

#[test]
fn seq_q_longer_than_seq_k_causal() {
    // Top-left alignment: rows past seq_k see every key, no row is empty.
    let s = shape(1, 1, 100, 20, 64, true);
    let (q, k, v) = gaussian_qkv(&s, 23);
    let c = fp4_vs_f64(&s, &q, &k, &v, false);
    println!("Sq=100 Sk=20 causal: {c}");
    assert!(c.cosine >= GAUSSIAN_COSINE_FLOOR, "{c}");
    let causal = reference_f64(&s, &q, &k, &v);
    let full = reference_f64(&AttnShape { causal: false, ..s }, &q, &k, &v);
    assert_eq!(causal[19 * 64..], full[19 * 64..]);
    assert_ne!(causal[..64], full[..64]);
}

/// Times the quantized reference; `B=1,H=2,S=1024,D=128` must stay well under a second.
fn time_reference(h: usize) -> f64 {
    let s = shape(1, h, 1024, 1024, 128, false);
    let (q, k, v) = gaussian_qkv(&s, 1);
    let qkv = prequantize(&s, &q, &k, &v, true, Format::Mxfp4).unwrap();
    let t = Instant::now();
    let out = reference_quantized(&qkv);
    let secs = t.elapsed().as_secs_f64();
    assert!(out.iter().all(|x| x.is_finite()));
    println!(
        "reference_quantized {s}: {secs:.3} s on {} threads",
        std::thread::available_parallelism().map_or(1, |n| n.get())
    );
    secs
}

#[test]
fn reference_is_fast_enough() {
    let secs = time_reference(2);
    if !cfg!(debug_assertions) {
        assert!(secs < 1.0, "{secs} s");
    }
}

/// `cargo test --release --test attention_reference -- --ignored --nocapture`
#[test]
#[ignore = "timing of the full-size reference; run explicitly"]
fn reference_timing_h32() {
    time_reference(32);
}

#[test]
fn error_budget_of_the_scheme() {
    // Where FP4's error comes from (printed; see GAUSSIAN_COSINE_FLOOR): f64 attention on
    // partly dequantized operands, then the full scheme with P requantized.
    let s = shape(1, 2, 256, 256, 128, false);
    let (q, k, v) = gaussian_qkv(&s, 42);
    let qkv = prequantize(&s, &q, &k, &v, false, Format::Mxfp4).unwrap();
    let (qd, kd, vd) = (
        qkv.dequantized_q(),
        qkv.dequantized_k(),
        qkv.dequantized_v(),
    );
    let exact = reference_f64(&s, &q, &k, &v);
    let only_v = Comparison::new(&reference_f64(&s, &q, &k, &vd), &exact);
    let only_qk = Comparison::new(&reference_f64(&s, &qd, &kd, &v), &exact);
    let p_exact = Comparison::new(&reference_f64(&s, &qd, &kd, &vd), &exact);
    let full = Comparison::new(&reference_quantized(&qkv), &exact);
    println!("budget, V in FP4 only:        {only_v}");
    println!("budget, Q and K in FP4 only:  {only_qk}");
    println!("budget, Q, K, V in FP4, P f64: {p_exact}");
    println!("budget, full scheme:          {full}");
    assert!(only_v.cosine > p_exact.cosine && only_qk.cosine > p_exact.cosine);
    assert!(p_exact.cosine > full.cosine);
}
