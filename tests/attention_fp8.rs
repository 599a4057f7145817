//! The FP8 form of the attention scheme (`attention::fp8`, `docs/attention-fp8.md`): its CPU
//! reference against an independent transcription in the form a tiled kernel computes it
//! (online softmax with an integer running maximum, P in the running frame), the widening's
//! exactness on the quantizer's own operands, and its accuracy next to the bf16 form's.
//! Cosines are printed (`--nocapture`); the suite's are printed by the ignored
//! `suite_cosines` (`cargo test --release --test attention_fp8 -- --ignored --nocapture`).

use fp4probe::attention::fp8::{
    ACCUMULATION, Fp8Qkv, K_FACTOR_KEYS, K_STEP, p_e4m3, row_factor_log2,
};
use fp4probe::attention::reference::score_factor;
use fp4probe::attention::*;
use fp4probe::cli::attention::{Inputs, make_inputs, suite_cases};
use fp4probe::quant::Format;
use fp4probe::quant::codes::e4m3_to_f32;

fn shape(b: usize, h: usize, sq: usize, sk: usize, d: usize, causal: bool) -> AttnShape {
    AttnShape::new(b, h, sq, sk, d, causal).unwrap()
}

/// The scheme as a tiled kernel runs it: keys in tiles of `tile` (a multiple of 32), an integer
/// running maximum m, p8 = E4M3(exp2(s2 − m + 8)) under the maximum of the tiles seen so far,
/// O and l (a channel of ones that the tensor cores sum per tile, added in f32) rescaled by
/// 2^(m_old − m_new) when it grows, one row at a time, plain loops.
fn online(qkv: &QuantizedQkv, tile: usize) -> Vec<f32> {
    let s = &qkv.shape;
    let (d, skp) = (s.head_dim, s.seq_k_padded());
    let ops = Fp8Qkv::widen(qkv);
    let (q, k, vt) = (ops.q.values(), ops.k.values(), ops.vt.values());
    let c = score_factor(qkv) as f64;
    let dot = |acc: f32, x: &[f64], y: &[f64]| {
        let group: Vec<(f64, i32)> = x
            .iter()
            .zip(y)
            .map(|(&a, &b)| ACCUMULATION.product(a, b))
            .collect();
        ACCUMULATION.step_f32(acc, &group)
    };
    let mut out = vec![0.0f32; s.q_len()];
    for bh in 0..s.bh() {
        for i in 0..s.seq_q {
            let n = s.visible_keys(i);
            let qi = bh * s.seq_q + i;
            let (mut m, mut l, mut o) = (f64::NEG_INFINITY, 0.0f32, vec![0.0f32; d]);
            for t0 in (0..n).step_by(tile) {
                let keys = t0..(t0 + tile).min(n);
                let s2: Vec<f64> = keys
                    .clone()
                    .map(|j| {
                        let kj = bh * s.seq_k + j;
                        let mut acc = 0.0f32;
                        for g in (0..d).step_by(K_STEP) {
                            let x = &q[qi * d + g..qi * d + g + K_STEP];
                            acc = dot(acc, x, &k[kj * d + g..kj * d + g + K_STEP]);
                        }
                        let f = ops.q.factor_log2[qi] + ops.k.factor_log2[kj];
                        acc as f64 * c * 2f64.powi(f)
                    })
                    .collect();
                let m_new = s2.iter().fold(m, |a, &b| a.max(b.ceil()));
                if m > f64::NEG_INFINITY && m_new > m {
                    let alpha = (m - m_new).exp2();
                    l = (l as f64 * alpha) as f32;
                    o.iter_mut().for_each(|x| *x = (*x as f64 * alpha) as f32);
                }
                m = m_new;
                let p: Vec<f64> = s2
                    .iter()
                    .map(|&x| e4m3_to_f32(p_e4m3(x, m)) as f64)
                    .collect();
                let mut tile_l = 0.0f32;
                for pg in p.chunks(K_STEP) {
                    tile_l = dot(tile_l, pg, &[1.0; K_STEP][..pg.len()]);
                }
                l += tile_l;
                for (ch, o) in o.iter_mut().enumerate() {
                    let row = (bh * d + ch) * skp;
                    for (g, pg) in p.chunks(K_STEP).enumerate() {
                        let at = row + keys.start + g * K_STEP;
                        *o = dot(*o, pg, &vt[at..at + pg.len()]);
                    }
                }
            }
            for (ch, x) in o.iter().enumerate() {
                let row = bh * d + ch;
                let w = (2f64.powi(ops.vt.factor_log2[row]) * qkv.v_tensor_scale as f64) as f32;
                out[qi * d + ch] = (*x as f64 / l as f64) as f32 * w;
            }
        }
    }
    out
}

#[test]
fn the_reference_equals_the_online_form_a_kernel_computes() {
    for format in [Format::Nvfp4, Format::Mxfp4] {
        for causal in [false, true] {
            for (d, sq, sk, tile) in [(64, 70, 77, 128), (128, 40, 133, 64), (256, 9, 65, 64)] {
                let s = shape(1, 2, sq, sk, d, causal);
                for inputs in [Inputs::Gaussian, Inputs::Exact, Inputs::Outliers] {
                    let (q, k, v) = make_inputs(&s, inputs, 7);
                    let qkv = prequantize(&s, &q, &k, &v, false, format).unwrap();
                    let (want, got) = (reference_fp8(&qkv), online(&qkv, tile));
                    assert!(want.iter().all(|x| x.is_finite()), "{s}");
                    assert_eq!(got, want, "{format:?} {s} {inputs:?}, tiles of {tile}");
                }
            }
        }
    }
}

#[test]
fn mxfp4_operands_widen_to_e4m3_exactly() {
    // Gaussian and exactly representable rows: every block within 14 binades of its row's
    // largest, so each element times its row's factor is the FP4 value itself.
    let s = shape(1, 2, 100, 77, 128, false);
    for inputs in [Inputs::Gaussian, Inputs::Exact, Inputs::Outliers] {
        let (q, k, v) = make_inputs(&s, inputs, 3);
        let qkv = prequantize(&s, &q, &k, &v, false, Format::Mxfp4).unwrap();
        let fp8 = Fp8Qkv::widen(&qkv);
        let widen = |x: Vec<f32>| -> Vec<f64> { x.into_iter().map(f64::from).collect() };
        assert_eq!(
            fp8.q.scaled_values(),
            widen(qkv.dequantized_q()),
            "{inputs:?}"
        );
        assert_eq!(
            fp8.k.scaled_values(),
            widen(qkv.dequantized_k()),
            "{inputs:?}"
        );
        assert_eq!(
            fp8.vt.scaled_values(),
            widen(qkv.dequantized_vt()),
            "{inputs:?}"
        );
    }
}

#[test]
fn k_factors_are_one_per_group_of_keys_of_a_head() {
    // Sk = 300: groups of 128, 128 and 44 keys per head; Outliers vary the rows' scales.
    let s = shape(1, 4, 50, 300, 64, false).with_kv_heads(2).unwrap();
    for format in [Format::Nvfp4, Format::Mxfp4] {
        let (q, k, v) = make_inputs(&s, Inputs::Outliers, 9);
        let qkv = prequantize(&s, &q, &k, &v, false, format).unwrap();
        let fk = Fp8Qkv::widen(&qkv).k.factor_log2;
        let per_row = s.head_dim / format.block();
        for (h, head) in fk.chunks(s.seq_k).enumerate() {
            for (g, group) in head.chunks(K_FACTOR_KEYS).enumerate() {
                let first = (h * s.seq_k + g * K_FACTOR_KEYS) * per_row;
                let scales = &qkv.k_scale[first..first + group.len() * per_row];
                let want = row_factor_log2(format, scales);
                assert!(
                    group.iter().all(|&f| f == want),
                    "{format:?} head {h} group {g}"
                );
            }
        }
    }
}

/// (cosine of the FP8 form against f64 attention, the bf16 form's).
fn cosines(s: &AttnShape, inputs: Inputs, smooth: bool, format: Format, seed: u64) -> (f64, f64) {
    let (q, k, v) = make_inputs(s, inputs, seed);
    let qkv = prequantize(s, &q, &k, &v, smooth, format).unwrap();
    let exact = reference_f64(s, &q, &k, &v);
    (
        cosine(&reference_fp8(&qkv), &exact),
        cosine(&reference_quantized(&qkv), &exact),
    )
}

#[test]
fn accuracy_against_f64_next_to_the_bf16_form() {
    for causal in [false, true] {
        let s = shape(1, 2, 256, 256, 128, causal);
        for format in [Format::Nvfp4, Format::Mxfp4] {
            for (inputs, smooth) in [(Inputs::Gaussian, false), (Inputs::Outliers, true)] {
                let (fp8, bf16) = cosines(&s, inputs, smooth, format, 21);
                println!("{s} {format:?} {inputs:?} smooth {smooth}: FP8 {fp8:.5}, bf16 {bf16:.5}");
                assert!(
                    fp8 >= bf16 - 0.005,
                    "{s} {format:?} {inputs:?}: {fp8} vs {bf16}"
                );
                if format == Format::Nvfp4 && inputs == Inputs::Gaussian {
                    assert!(fp8 >= 0.98, "{s}: {fp8}");
                }
            }
        }
    }
}

/// The suite's cases (`fp4probe attention --suite`, seed 100 + index) on the CPU: cosine of the
/// FP8 and bf16 forms against f64 attention, as a Markdown table.
#[test]
#[ignore = "a table for docs/attention-fp8.md; slow"]
fn suite_cosines() {
    println!(
        "| shape | format | inputs | FP8 form | bf16 form | FP8 − bf16 |\n|---|---|---|---:|---:|---:|"
    );
    for (i, c) in suite_cases().unwrap().iter().enumerate() {
        let (fp8, bf16) = cosines(&c.shape, c.inputs, c.smooth_k, c.format, 100 + i as u64);
        println!(
            "| {} | {} | {:?}{} | {fp8:.4} | {bf16:.4} | {:+.4} |",
            c.shape,
            c.format.name(),
            c.inputs,
            if c.smooth_k { " + smooth K" } else { "" },
            fp8 - bf16
        );
    }
}
