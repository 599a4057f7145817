//! What a quantization lost beyond ordinary rounding, counted from the input and the bytes it
//! produced. The CUDA kernels and the CPU reference produce the same bytes, so the counts do not
//! depend on where the quantization ran; they take one pass over the input, on the CPU.
//!
//! Per block, the first that applies:
//! - **non-finite**: a NaN or ±Inf input (the block takes the NaN scale under `propagate`);
//! - **zero**: every input is ±0 (nothing to lose);
//! - **NaN scale**: finite inputs, but the scale rule gave the NaN scale (MXFP4 `even` rounds a
//!   maximum near `f32::MAX` up to infinity);
//! - **flushed**: a nonzero input, yet every code is ±0 (the block's values lie below half the
//!   smallest code at the smallest scale the format allows, or a given tensor amax pushed the
//!   block scale down to that smallest scale);
//! - otherwise its elements are counted as **saturated** when |x|/scale ≥ 7: an E2M1 grid one
//!   binade wider would hold 8, so from 7 up the stored ±6 is off by more than rounding. A block
//!   whose scale byte is the format's largest (E8M0 2^127, E4M3 448) and still saturates has a
//!   **saturated scale**: no scale the format has could hold it.

use super::codes::{E4M3_NAN, E8M0_NAN};
use super::{BlockScale, Format, Quantized};

/// The largest finite E8M0 scale byte (2^127).
const E8M0_MAX_BYTE: u8 = 0xFE;
/// The largest finite E4M3 byte (448).
const E4M3_MAX_BYTE: u8 = 0x7E;
/// Scaled magnitudes from here up are stored as 6 although rounding alone would not give 6.
const SATURATED_FROM: f32 = 7.0;

/// Counts of what a quantized tensor lost; see the module docs for the categories.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Health {
    pub blocks: usize,
    pub elements: usize,
    pub non_finite_blocks: usize,
    pub non_finite_elements: usize,
    pub zero_blocks: usize,
    pub nan_scale_blocks: usize,
    pub flushed_blocks: usize,
    /// Saturated elements in blocks whose scale could have been larger.
    pub saturated_elements: usize,
    /// Blocks at the format's largest scale that saturate, and their saturated elements.
    pub max_scale_blocks: usize,
    pub max_scale_elements: usize,
    /// Largest finite |x| of the input.
    pub finite_amax: f32,
}

impl Health {
    /// Blocks holding a nonzero finite value: the ones a result can lose.
    pub fn live_blocks(&self) -> usize {
        self.blocks - self.non_finite_blocks - self.zero_blocks
    }

    /// Live blocks lost whole: flushed to zero, given the NaN scale, or saturated at the
    /// largest scale.
    pub fn lost_blocks(&self) -> usize {
        self.flushed_blocks + self.nan_scale_blocks + self.max_scale_blocks
    }

    /// There was something to keep and every block of it was lost.
    pub fn nothing_kept(&self) -> bool {
        self.live_blocks() > 0 && self.lost_blocks() == self.live_blocks()
    }

    fn add(&mut self, o: &Health) {
        self.blocks += o.blocks;
        self.elements += o.elements;
        self.non_finite_blocks += o.non_finite_blocks;
        self.non_finite_elements += o.non_finite_elements;
        self.zero_blocks += o.zero_blocks;
        self.nan_scale_blocks += o.nan_scale_blocks;
        self.flushed_blocks += o.flushed_blocks;
        self.saturated_elements += o.saturated_elements;
        self.max_scale_blocks += o.max_scale_blocks;
        self.max_scale_elements += o.max_scale_elements;
        self.finite_amax = self.finite_amax.max(o.finite_amax);
    }
}

/// Count what `q` lost of `x` (the f32 values it was quantized from, row-major).
///
/// # Panics
/// If `x`, `q.data` and `q.scale` do not describe the same tensor (a caller bug).
pub fn health(x: &[f32], q: &Quantized) -> Health {
    let block = q.spec.block();
    let scales = q.linear_scales();
    assert!(
        x.len() == q.data.len() * 2 && x.len() == scales.len() * block,
        "{} elements, {} code bytes and {} scales do not describe one tensor",
        x.len(),
        q.data.len(),
        scales.len()
    );
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
    let blocks_per_thread = scales.len().div_ceil(threads).max(1);
    let per = blocks_per_thread * block;
    let mut total = Health::default();
    std::thread::scope(|s| {
        let handles: Vec<_> = x
            .chunks(per)
            .zip(q.data.chunks(per / 2))
            .zip(scales.chunks(blocks_per_thread))
            .map(|((xs, ds), ss)| {
                s.spawn(move || {
                    let mut h = Health::default();
                    for ((xb, db), &sb) in xs.chunks(block).zip(ds.chunks(block / 2)).zip(ss) {
                        block_health(q, xb, db, sb, &mut h);
                    }
                    h
                })
            })
            .collect();
        for h in handles {
            total.add(&h.join().expect("health worker panicked"));
        }
    });
    total
}

fn block_health(q: &Quantized, x: &[f32], data: &[u8], byte: u8, h: &mut Health) {
    h.blocks += 1;
    h.elements += x.len();
    let non_finite = x.iter().filter(|v| !v.is_finite()).count();
    if non_finite > 0 {
        h.non_finite_blocks += 1;
        h.non_finite_elements += non_finite;
        return;
    }
    let amax = x.iter().fold(0.0f32, |m, v| m.max(v.abs()));
    h.finite_amax = h.finite_amax.max(amax);
    if amax == 0.0 {
        h.zero_blocks += 1;
        return;
    }
    let (nan, max, scale) = match q.spec.format {
        Format::Mxfp4 => (E8M0_NAN, E8M0_MAX_BYTE, BlockScale::mx(byte)),
        Format::Nvfp4 => (
            E4M3_NAN,
            E4M3_MAX_BYTE,
            BlockScale::nv(byte, q.tensor_scale),
        ),
    };
    if byte == nan {
        h.nan_scale_blocks += 1;
        return;
    }
    // Bit 3 of each nibble is the sign: magnitude bits all clear means every code is ±0.
    if data.iter().all(|&b| b & 0x77 == 0) {
        h.flushed_blocks += 1;
        return;
    }
    let saturated = x
        .iter()
        .filter(|&&v| scale.scaled(v).abs() >= SATURATED_FROM)
        .count();
    if saturated > 0 && byte == max {
        h.max_scale_blocks += 1;
        h.max_scale_elements += saturated;
    } else {
        h.saturated_elements += saturated;
    }
}

#[cfg(test)]
mod tests {
    use super::super::{NvLevels, ScaleMode, Spec, quantize, quantize_with_amax};
    use super::*;

    fn run(spec: Spec, x: &[f32], amax: Option<f32>) -> Health {
        let shape = [x.len() / spec.block(), spec.block()];
        let (q, _) = quantize_with_amax(&spec, &shape, x, amax).unwrap();
        health(x, &q)
    }

    #[test]
    fn counts_non_finite_zero_and_live_blocks() {
        let mut x = vec![1.0f32; 32 * 4];
        x[3] = f32::NAN;
        x[5] = f32::INFINITY;
        x[40] = f32::NEG_INFINITY;
        x[64..96].fill(0.0);
        let h = run(Spec::mxfp4(ScaleMode::Floor), &x, None);
        assert_eq!((h.blocks, h.elements), (4, 128));
        assert_eq!((h.non_finite_blocks, h.non_finite_elements), (2, 3));
        assert_eq!(h.zero_blocks, 1);
        assert_eq!(h.live_blocks(), 1);
        assert_eq!(h.lost_blocks(), 0);
        assert!(!h.nothing_kept());
        assert_eq!(h.finite_amax, 1.0);
    }

    #[test]
    fn floor_saturates_block_maxima_from_seven_and_rceil_does_not() {
        // amax 7.5: floor gives scale 1 (7.5 ≥ 7 saturates to 6); 6.9 rounds to 6 by itself.
        let mut x = vec![0.5f32; 32];
        x[0] = 7.5;
        x[1] = 6.9;
        let h = run(Spec::mxfp4(ScaleMode::Floor), &x, None);
        assert_eq!((h.saturated_elements, h.max_scale_blocks), (1, 0));
        let h = run(Spec::mxfp4(ScaleMode::Rceil), &x, None);
        assert_eq!(h.saturated_elements, 0);
    }

    #[test]
    fn a_small_tensor_amax_saturates_every_block_at_the_largest_scale() {
        let x: Vec<f32> = (0..64).map(|i| 1.0 + i as f32 / 8.0).collect();
        let h = run(Spec::nvfp4(NvLevels::TwoLevel), &x, None);
        assert_eq!(h.lost_blocks(), 0, "{h:?}");
        assert_eq!(h.saturated_elements, 0, "measured amax: {h:?}");
        let h = run(Spec::nvfp4(NvLevels::TwoLevel), &x, Some(0.01));
        assert_eq!((h.max_scale_blocks, h.live_blocks()), (4, 4), "{h:?}");
        assert_eq!(h.max_scale_elements, 64);
        assert!(h.nothing_kept());
    }

    #[test]
    fn a_large_tensor_amax_flushes_every_block() {
        let x = vec![0.25f32; 32];
        let h = run(Spec::nvfp4(NvLevels::TwoLevel), &x, Some(1e30));
        assert_eq!((h.flushed_blocks, h.live_blocks()), (2, 2), "{h:?}");
        assert!(h.nothing_kept());
    }

    #[test]
    fn one_level_nvfp4_flushes_blocks_below_its_smallest_scale() {
        // The smallest block scale is 2^-6; |x| ≤ 2^-8 is at most a quarter of it: code 0.
        let mut x = vec![0.001f32; 32];
        x[16..].fill(1.0);
        let h = run(Spec::nvfp4(NvLevels::OneLevel), &x, None);
        assert_eq!((h.flushed_blocks, h.live_blocks()), (1, 2), "{h:?}");
        assert!(!h.nothing_kept());
    }

    #[test]
    fn even_gives_the_nan_scale_to_a_finite_maximum_near_f32_max() {
        let x = vec![f32::MAX; 32];
        let (q, _) = quantize(&Spec::mxfp4(ScaleMode::Even), &[1, 32], &x).unwrap();
        let h = health(&x, &q);
        assert_eq!((h.nan_scale_blocks, h.non_finite_blocks), (1, 0));
        assert!(h.nothing_kept());
    }

    #[test]
    fn counts_do_not_depend_on_how_blocks_are_split_across_threads() {
        // Every 50th block tiny (flushed by one-level's smallest scale), a few huge elements
        // (beyond its largest), the rest ordinary.
        let x: Vec<f32> = (0..16 * 1000)
            .map(|i| {
                let v = ((i * 7919 % 1000) as f32 - 500.0) * 1e-2;
                match (i / 16) % 50 {
                    0 => v * 1e-4,
                    _ if i % 97 == 0 => v * 1e5,
                    _ => v,
                }
            })
            .collect();
        let spec = Spec::nvfp4(NvLevels::OneLevel);
        let (q, _) = quantize(&spec, &[1000, 16], &x).unwrap();
        let whole = health(&x, &q);
        let mut one = Health::default();
        for b in 0..1000 {
            block_health(
                &q,
                &x[b * 16..(b + 1) * 16],
                &q.data[b * 8..(b + 1) * 8],
                q.scale[b],
                &mut one,
            );
        }
        assert_eq!(whole, one);
        assert!(
            whole.max_scale_blocks > 0 && whole.flushed_blocks > 0,
            "{whole:?}"
        );
    }
}
