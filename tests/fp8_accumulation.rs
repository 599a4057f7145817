//! The model of FP8 wgmma's accumulation into f32 (`wgmma::arith::Accumulation::FP8_F32`, what
//! the FP8 attention reference runs) against dot products the H200 computed
//! (`tests/vectors/wgmma/fp8_dot_h200.safetensors`, README there): every one bit for bit, the
//! K = 128 ones through four k32 steps with the accumulator carried. The models the numerics
//! probe alone cannot tell apart from it (products aligned at their own leading bit, or the sum
//! not cut to 14 bits) miss most of them.

use fp4probe::formats::ElemType;
use fp4probe::quant::codes::e4m3_to_f32;
use fp4probe::tensorio::read_tensor;
use fp4probe::wgmma::arith::{Accumulation, ProductExponent};
use std::path::Path;

const FIXTURE: &str = "tests/vectors/wgmma/fp8_dot_h200.safetensors";

/// (a [rows, K], b [N, K], d [rows, N]) of one K.
fn dots(k: usize) -> (Vec<u8>, Vec<u8>, Vec<f32>, usize, usize) {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join(FIXTURE);
    let read = |name: &str| read_tensor(&path, Some(&format!("{name}_k{k}"))).unwrap();
    let (a, b, d) = (read("a"), read("b"), read("d"));
    assert_eq!((a.shape[1], b.shape[1]), (k, k));
    let (rows, n) = (d.shape[0], d.shape[1]);
    (
        a.as_u8().unwrap().to_vec(),
        b.as_u8().unwrap().to_vec(),
        d.to_f32_vec().unwrap(),
        rows,
        n,
    )
}

/// How many of the fixture's dot products `model` gives bit for bit.
fn matches(model: &Accumulation, k: usize) -> (usize, usize) {
    let (a, b, d, rows, n) = dots(k);
    let mut hits = 0;
    for i in 0..rows {
        for j in 0..n {
            let factors: Vec<(f64, f64)> = (0..k)
                .map(|t| {
                    let x = e4m3_to_f32(a[i * k + t]) as f64;
                    (x, e4m3_to_f32(b[j * k + t]) as f64)
                })
                .collect();
            let bits = model.dot(ElemType::F32, false, 0.0, &factors) as u32;
            hits += (bits == d[i * n + j].to_bits()) as usize;
        }
    }
    (hits, rows * n)
}

#[test]
fn the_fp8_model_gives_every_h200_dot_product() {
    for k in [32, 128] {
        let (hits, all) = matches(&Accumulation::FP8_F32, k);
        println!("K = {k}: {hits} of {all} bit for bit");
        assert_eq!(hits, all, "K = {k}");
    }
}

#[test]
fn the_models_the_probe_cannot_separate_from_it_miss() {
    let own_bit = Accumulation {
        product_exponent: ProductExponent::Value,
        ..Accumulation::FP8_F32
    };
    let wide_sum = Accumulation {
        sum_fraction_bits: None,
        ..Accumulation::FP8_F32
    };
    for (name, model) in [("own leading bit", own_bit), ("sum not cut", wide_sum)] {
        for k in [32, 128] {
            let (hits, all) = matches(&model, k);
            println!("{name}, K = {k}: {hits} of {all}");
            assert!(hits < all * 9 / 10, "{name}, K = {k}: {hits} of {all}");
        }
    }
}
