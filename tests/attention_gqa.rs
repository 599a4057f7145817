//! Grouped-query attention in the CPU references: with H_q = G·H_kv, every reference
//! (`reference_quantized`, the bf16 kernels' arithmetic; `reference_fp8`, the FP8 form's;
//! `reference_f64`) gives exactly what it gives for multi-head attention with each K/V head
//! repeated G times (`torch.repeat_interleave(k, G, dim=1)`, what SDPA's `enable_gqa` means).
//! Quantization is per row (and NVFP4's tensor scale is the tensor's amax, which repetition
//! keeps), so the repeated operands quantize to the repeated bytes, and the outputs agree bit
//! for bit.

use fp4probe::attention::prequant::smooth_k;
use fp4probe::attention::*;
use fp4probe::cli::attention::{Inputs, make_inputs};
use fp4probe::quant::Format;

#[path = "support/attention_files.rs"]
mod attention_files;
use attention_files::{gqa, repeat_heads};

/// Grouped shapes: one K/V head for all (multi-query), a group of 4 (H_q = 32, H_kv = 8
/// scaled down), Sq != Sk both ways, causal and not, every head dimension.
fn shapes() -> Vec<AttnShape> {
    vec![
        gqa(2, 4, 1, 37, 70, 64, true),
        gqa(1, 8, 2, 64, 33, 128, false),
        gqa(2, 6, 3, 50, 50, 128, true),
        gqa(1, 4, 2, 20, 45, 256, false),
    ]
}

#[test]
fn grouped_query_attention_is_multi_head_attention_with_kv_heads_repeated() {
    for s in shapes() {
        let mha = AttnShape {
            kv_heads: s.heads,
            ..s
        };
        for inputs in [Inputs::Gaussian, Inputs::Exact, Inputs::Outliers] {
            let (q, k, v) = make_inputs(&s, inputs, 11);
            assert_eq!((k.len(), v.len()), (s.kv_len(), s.kv_len()));
            let (kr, vr) = (repeat_heads(&s, &k), repeat_heads(&s, &v));
            assert_eq!(
                reference_f64(&s, &q, &k, &v),
                reference_f64(&mha, &q, &kr, &vr),
                "f64 {s} {inputs:?}"
            );
            for format in [Format::Nvfp4, Format::Mxfp4] {
                for smooth in [false, true] {
                    let grouped = prequantize(&s, &q, &k, &v, smooth, format).unwrap();
                    let repeated = prequantize(&mha, &q, &kr, &vr, smooth, format).unwrap();
                    let what = format!("{s} {inputs:?} {format:?} smooth {smooth}");
                    assert_eq!(grouped.k_tensor_scale, repeated.k_tensor_scale, "{what}");
                    assert_eq!(
                        reference_quantized(&grouped),
                        reference_quantized(&repeated),
                        "quantized {what}"
                    );
                    assert_eq!(
                        reference_fp8(&grouped),
                        reference_fp8(&repeated),
                        "fp8 {what}"
                    );
                }
            }
        }
    }
}

#[test]
fn grouped_operands_are_the_repeated_operands_bytes_per_head() {
    let s = gqa(1, 8, 2, 16, 40, 64, false);
    let mha = AttnShape { kv_heads: 8, ..s };
    let (q, k, v) = make_inputs(&s, Inputs::Gaussian, 3);
    for format in [Format::Nvfp4, Format::Mxfp4] {
        let g = prequantize(&s, &q, &k, &v, false, format).unwrap();
        let r = prequantize(
            &mha,
            &q,
            &repeat_heads(&s, &k),
            &repeat_heads(&s, &v),
            false,
            format,
        )
        .unwrap();
        assert_eq!((g.q_data.clone(), g.q_scale.clone()), (r.q_data, r.q_scale));
        // K: each grouped head's bytes appear G = 4 times in a row in the repeated ones.
        let per_head = g.k_data.len() / 2;
        for (h, chunk) in r.k_data.chunks(per_head).enumerate() {
            assert_eq!(chunk, &g.k_data[(h / 4) * per_head..(h / 4 + 1) * per_head]);
        }
        let per_head = g.v_data.len() / 2;
        for (h, chunk) in r.v_data.chunks(per_head).enumerate() {
            assert_eq!(chunk, &g.v_data[(h / 4) * per_head..(h / 4 + 1) * per_head]);
        }
    }
    // K smoothing takes the means per K/V head: [B, Hkv, D].
    assert_eq!(smooth_k(&s, &k).1.len(), 2 * 64);
}

#[test]
fn the_kv_head_of_each_query_head_is_its_group() {
    // Query heads of one group see the same keys: with Q identical across a group, so is O.
    let s = gqa(2, 6, 2, 9, 21, 64, true);
    let (q0, k, v) = make_inputs(&s, Inputs::Gaussian, 5);
    let row = s.seq_q * s.head_dim;
    let q: Vec<f32> = q0
        .chunks(row)
        .enumerate()
        .flat_map(|(bh, _)| q0[(bh / 3) * 3 * row..(bh / 3) * 3 * row + row].to_vec())
        .collect();
    let qkv = prequantize(&s, &q, &k, &v, false, Format::Nvfp4).unwrap();
    let o = reference_quantized(&qkv);
    for (bh, head) in o.chunks(row).enumerate() {
        let first = (bh / 3) * 3;
        assert_eq!(head, &o[first * row..(first + 1) * row], "head {bh}");
    }
    // ... and groups differ.
    assert_ne!(&o[..row], &o[3 * row..4 * row]);
}
