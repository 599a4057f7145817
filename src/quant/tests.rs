//! Unit tests of the CPU reference; the independent vectors are in `tests/quant_vectors.rs`.

use super::*;

/// A small deterministic generator (xorshift) so tests need no crates.
fn gaussian_like(n: usize, seed: u64) -> Vec<f32> {
    let mut s = seed | 1;
    (0..n)
        .map(|_| {
            let mut sum = 0.0f32;
            for _ in 0..4 {
                s ^= s << 13;
                s ^= s >> 7;
                s ^= s << 17;
                sum += (s >> 40) as f32 / (1u64 << 24) as f32 - 0.5;
            }
            sum * 1.7
        })
        .collect()
}

#[test]
fn pack_puts_even_index_in_low_nibble_and_container_shifts_by_two() {
    assert_eq!(pack(&[0x1, 0xF, 0x8, 0x3]), vec![0xF1, 0x38]);
    assert_eq!(unpack(&[0xF1, 0x38]), vec![0x1, 0xF, 0x8, 0x3]);
    assert_eq!(container_bytes(&[0xF1]), vec![0x04, 0x3C]);
}

#[test]
fn mxfp4_floor_of_a_hand_computed_block() {
    // amax 5 → floor(log2 5) - 2 = 0 → scale 1 (byte 127); elements are coded directly.
    let mut x = vec![0.0f32; 32];
    x[0] = 5.0; // tie between 4 and 6 → 4 (code 6)
    x[1] = -0.75; // tie → -1.0 (code 0xA)
    x[2] = 1.3; // → 1.5 (code 3)
    x[3] = -0.2; // → -0 (code 8)
    let (q, _) = quantize(&Spec::mxfp4(ScaleMode::Floor), &[1, 32], &x).unwrap();
    assert_eq!(q.scale, vec![127]);
    assert_eq!(&q.data[..2], &[0xA6, 0x83]);
    let d = dequantize(&q);
    assert_eq!(&d[..4], &[4.0, -1.0, 1.5, -0.0]);
}

#[test]
fn mxfp4_floor_saturates_and_ceil_does_not() {
    // amax 7.5: floor gives scale 1 and 7.5 saturates to 6; ceil gives scale 2, 7.5/2 = 3.75 → 4.
    let mut x = vec![0.0f32; 32];
    x[5] = 7.5;
    let (f, _) = quantize(&Spec::mxfp4(ScaleMode::Floor), &[32], &x).unwrap();
    let (c, _) = quantize(&Spec::mxfp4(ScaleMode::Ceil), &[32], &x).unwrap();
    assert_eq!((f.scale[0], dequantize(&f)[5]), (127, 6.0));
    assert_eq!((c.scale[0], dequantize(&c)[5]), (128, 8.0));
}

#[test]
fn non_finite_blocks_get_nan_scales_and_zero_codes_or_an_error() {
    let mut x = gaussian_like(64, 3);
    x[40] = f32::NAN;
    let (q, _) = quantize(&Spec::mxfp4(ScaleMode::Floor), &[2, 32], &x).unwrap();
    assert_eq!(q.scale[1], 0xFF);
    assert!(q.data[16..].iter().all(|&b| b == 0));
    assert!(dequantize(&q)[32..].iter().all(|v| v.is_nan()));
    assert_ne!(q.scale[0], 0xFF);

    x[40] = f32::NEG_INFINITY;
    let (n, _) = quantize(&Spec::nvfp4(NvLevels::TwoLevel), &[4, 16], &x).unwrap();
    assert_eq!(n.scale[2], 0x7F);
    // The tensor scale comes from the finite elements only.
    let finite: Vec<f32> = x.iter().copied().filter(|v| v.is_finite()).collect();
    assert_eq!(n.tensor_scale, Some(finite_amax(&finite) / 2688.0));

    let mut strict = Spec::nvfp4(NvLevels::OneLevel);
    strict.non_finite = NonFinite::Error;
    let err = quantize(&strict, &[4, 16], &x).unwrap_err().to_string();
    assert!(err.contains("[2, 8]") && err.contains("-inf"), "{err}");
}

#[test]
fn bad_shapes_are_refused_with_the_block_size() {
    let e = quantize(&Spec::mxfp4(ScaleMode::Floor), &[2, 48], &[0.0; 96]).unwrap_err();
    assert!(
        e.to_string().contains("multiple of the block size 32"),
        "{e}"
    );
    let e = quantize(&Spec::nvfp4(NvLevels::OneLevel), &[], &[0.0]).unwrap_err();
    assert!(e.to_string().contains("scalar"), "{e}");
}

#[test]
fn nvfp4_dequantization_is_within_half_a_step_of_the_input() {
    let x = gaussian_like(16 * 64, 11);
    for levels in [NvLevels::TwoLevel, NvLevels::OneLevel] {
        let (q, _) = quantize(&Spec::nvfp4(levels), &[64, 16], &x).unwrap();
        let d = dequantize(&q);
        for (blk, (xs, ds)) in x.chunks(16).zip(d.chunks(16)).enumerate() {
            let amax = xs.iter().fold(0.0f32, |m, v| m.max(v.abs()));
            for (a, b) in xs.iter().zip(ds) {
                // The largest gap between E2M1 values is 2 (4 → 6) in units of amax/6, and the
                // E4M3 scale rounding adds at most 1/16 relative.
                assert!(
                    (a - b).abs() <= amax / 6.0 * 1.07 + 1e-30,
                    "block {blk}: {a} vs {b}"
                );
            }
        }
    }
}

/// The search never does worse than the naive scale, and what it picks is the best of its
/// window measured independently in f64 (up to f32 rounding of the sums).
#[test]
fn search_picks_the_best_candidate_of_its_window() {
    let mut x = gaussian_like(32 * 256, 5);
    // Heavy tails: a few large values per block make the naive scale suboptimal.
    for (i, v) in x.iter_mut().enumerate() {
        if i % 29 == 0 {
            *v *= 4.0;
        }
    }
    for mut spec in [
        Spec::mxfp4(ScaleMode::Floor),
        Spec::nvfp4(NvLevels::TwoLevel),
        Spec::nvfp4(NvLevels::OneLevel),
    ] {
        let shape = [256, 32];
        let (naive, _) = quantize(&spec, &shape, &x).unwrap();
        spec.search = true;
        let (best, stats) = quantize(&spec, &shape, &x).unwrap();
        assert!(stats.sse_chosen <= stats.sse_naive);
        assert!(
            stats.blocks_changed > 0,
            "{}: search changed nothing",
            spec.describe()
        );
        assert!(stats.reduction() > 0.0);
        let block = spec.block();
        let sse64 = |q: &Quantized, b: usize| -> f64 {
            let d = dequantize(q);
            (b * block..(b + 1) * block)
                .map(|i| ((x[i] - d[i]) as f64).powi(2))
                .sum()
        };
        for b in 0..x.len() / block {
            assert!(sse64(&best, b) <= sse64(&naive, b) * (1.0 + 1e-5) + 1e-30);
            for cand in search_candidates(spec.format, naive.scale[b]) {
                let mut alt = best.clone();
                alt.scale[b] = cand;
                let s = BlockScale::nv(cand, best.tensor_scale);
                let s = if spec.format == Format::Mxfp4 {
                    BlockScale::mx(cand)
                } else {
                    s
                };
                let mut codes = vec![0u8; block];
                encode_block(&x[b * block..(b + 1) * block], s, &mut codes);
                let packed = pack(&codes);
                alt.data[b * block / 2..(b + 1) * block / 2].copy_from_slice(&packed);
                assert!(
                    sse64(&best, b) <= sse64(&alt, b) * (1.0 + 1e-5) + 1e-30,
                    "block {b} cand {cand:#x}"
                );
            }
        }
    }
}

#[test]
fn search_window_is_clipped_to_the_scale_range() {
    assert_eq!(search_candidates(Format::Mxfp4, 254), vec![254]);
    assert_eq!(search_candidates(Format::Mxfp4, 0xFF), vec![0xFF]);
    assert_eq!(search_candidates(Format::Mxfp4, 10), vec![10, 11]);
    assert_eq!(
        search_candidates(Format::Nvfp4, 0x08),
        vec![0x08, 0x09, 0x0A, 0x0B, 0x0C, 0x0D]
    );
    assert_eq!(search_candidates(Format::Nvfp4, 0x40).len(), 11);
    assert_eq!(search_candidates(Format::Nvfp4, 0x7E).len(), 6);
}

#[test]
fn index_of_names_every_axis() {
    assert_eq!(index_of(&[4, 32], 81), vec![2, 17]);
    assert_eq!(index_of(&[2, 3, 4], 23), vec![1, 2, 3]);
}

#[test]
fn a_given_tensor_amax_equal_to_the_measured_one_gives_the_same_bytes() {
    let x = gaussian_like(64 * 48, 17);
    let spec = Spec::nvfp4(NvLevels::TwoLevel);
    let (measured, _) = quantize(&spec, &[64, 48], &x).unwrap();
    let (given, _) = quantize_with_amax(&spec, &[64, 48], &x, Some(finite_amax(&x))).unwrap();
    assert_eq!(measured, given);
    // Any other amax changes the tensor scale, hence the block scales.
    let (other, _) = quantize_with_amax(&spec, &[64, 48], &x, Some(2.0 * finite_amax(&x))).unwrap();
    assert_eq!(other.tensor_scale, Some(2.0 * finite_amax(&x) / 2688.0));
    assert_ne!(other.scale, measured.scale);
}

#[test]
fn blocks_beyond_a_given_tensor_amax_saturate() {
    // amax given as 1: tensor scale 1/2688. A block of 16s needs 16/6·2688 = 7168 > 448, so its
    // scale clamps to 448 (E4M3 0x7e) and its elements to the largest code, 6: 6·448/2688 = 1.
    let mut x = vec![0.25f32; 32];
    x[16..].fill(16.0);
    x[17] = -16.0;
    let spec = Spec::nvfp4(NvLevels::TwoLevel);
    let (q, _) = quantize_with_amax(&spec, &[1, 32], &x, Some(1.0)).unwrap();
    assert_eq!(q.tensor_scale, Some(1.0 / 2688.0));
    assert_eq!(q.scale[1], 0x7e);
    let codes = unpack(&q.data);
    assert_eq!(codes[16], 0x7);
    assert_eq!(codes[17], 0xF);
    let d = dequantize(&q);
    assert_eq!((d[16], d[17]), (1.0, -1.0));
    // The first block fits: 0.25/6·2688 = 112, exact in E4M3, and 0.25 is 6 times 112/2688.
    assert_eq!(d[0], 0.25);
}

#[test]
fn a_tensor_amax_is_refused_where_it_means_nothing_or_is_not_a_number() {
    let x = vec![1.0f32; 32];
    for spec in [
        Spec::mxfp4(ScaleMode::Floor),
        Spec::nvfp4(NvLevels::OneLevel),
    ] {
        let e = quantize_with_amax(&spec, &[1, 32], &x, Some(1.0)).unwrap_err();
        assert!(e.to_string().contains("two-level NVFP4 only"), "{e}");
    }
    let two = Spec::nvfp4(NvLevels::TwoLevel);
    for bad in [f32::NAN, f32::INFINITY, -1.0] {
        let e = quantize_with_amax(&two, &[1, 32], &x, Some(bad)).unwrap_err();
        assert!(e.to_string().contains("finite number >= 0"), "{e}");
    }
}

#[test]
fn every_scale_layout_quantizes_to_the_same_blocks_and_dequantizes_the_same() {
    // Rows that do not fill a 128- or 8-row tile, K/block not a multiple of 4, a 3-D tensor.
    for shape in [vec![5usize, 96], vec![130, 32 * 7], vec![3, 7, 160]] {
        let n: usize = shape.iter().product();
        let x = gaussian_like(n, n as u64);
        for base in [
            Spec::mxfp4(ScaleMode::Floor),
            Spec::nvfp4(NvLevels::TwoLevel),
            Spec::nvfp4(NvLevels::OneLevel),
        ] {
            let (linear, _) = quantize(&base, &shape, &x).unwrap();
            for layout in [ScaleLayout::Tiled128x4, ScaleLayout::Tiled8x4] {
                let spec = Spec {
                    scale_layout: layout,
                    ..base
                };
                if layout.check_format(spec.format).is_err() {
                    continue;
                }
                let name = format!("{} {shape:?}", spec.describe());
                let (q, _) = quantize(&spec, &shape, &x).unwrap();
                let grid = q.grid();
                assert_eq!(
                    q.data, linear.data,
                    "{name}: codes do not depend on the layout"
                );
                assert_eq!(q.scale.len(), grid.len(), "{name}");
                assert_eq!(q.scale, grid.arrange(&linear.scale), "{name}");
                assert_eq!(q.linear_scales().as_ref(), &linear.scale[..], "{name}");
                assert_eq!(q.scale_shape(), vec![grid.len()], "{name}");
                let (a, b) = (dequantize(&q), dequantize(&linear));
                assert!(
                    a.iter().zip(&b).all(|(u, v)| u.to_bits() == v.to_bits()),
                    "{name}: dequantized values"
                );
            }
        }
    }
}

#[test]
fn tiled_layouts_that_do_not_apply_are_refused_before_any_work() {
    let mut spec = Spec::mxfp4(ScaleMode::Floor);
    spec.scale_layout = ScaleLayout::Tiled8x4;
    let e = quantize(&spec, &[4, 32], &[0.0; 128])
        .unwrap_err()
        .to_string();
    assert!(e.contains("8x4") && e.contains("NVFP4"), "{e}");
    spec.scale_layout = ScaleLayout::Tiled128x4;
    let e = quantize(&spec, &[64], &[0.0; 64]).unwrap_err().to_string();
    assert!(e.contains("no rows"), "{e}");
}
