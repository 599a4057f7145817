//! The FP8 form of the scheme, for Hopper's FP8 tensor cores (`wgmma .e4m3`, accumulating in
//! f32): FP4 Q, K, V widened to E4M3 with one power-of-two factor per row, P rounded to E4M3,
//! and its CPU reference (`reference_fp8`). `docs/attention-fp8.md` states the arithmetic and
//! why it is exact where it says so; `reference_fp8`'s doc is the normative statement.

use super::paths;
use super::prequant::QuantizedQkv;
use super::reference::{par_rows, score_factor};
use crate::quant::codes::{E4M3_NAN, E8M0_NAN, e2m1_decode, e4m3_round, e4m3_to_f32};
use crate::quant::{self, Format};
use crate::wgmma::arith::Accumulation;

/// P is formed as exp2(s2 − M + 8), 2^8 times p: a row's largest value lands in (128, 256], the
/// largest power of two whose p = 1 stays below E4M3's 448, so E4M3's normal range covers p
/// down to 2^-14 (subnormals to 2^-17) instead of 2^-6. A power of two,
/// because it folds into the integer row maximum exactly and E4M3 rounding commutes with it.
pub const P_SCALE_LOG2: i32 = 8;

/// Keys (or head-dimension elements) one FP8 wgmma adds: its k.
pub const K_STEP: usize = 32;

/// The tensor-core accumulation the reference models for both products.
pub const ACCUMULATION: Accumulation = Accumulation::FP8_F32;

/// Keys that share K's factor: each group of this many keys of a head (from key 0; the last
/// group ends at Sk) takes the factor of its largest block scale. A kernel's key tile (64 or
/// 128 keys) lies in one group, so the factor multiplies the tile's scores as one number, with
/// the row's c·2^fq, instead of a multiply per score; a key whose blocks are within 14
/// binades of its group's largest loses nothing to it (`docs/attention-fp8.md`).
pub const K_FACTOR_KEYS: usize = 128;

/// The largest finite block scale of a row, as an exponent and a 3-bit mantissa field
/// (E8M0: the power of two, mantissa 0); `None` when every block scale is NaN.
fn largest_scale(format: Format, scales: &[u8]) -> Option<(i32, u8)> {
    match format {
        // E8M0 bytes order as their values; 0xFF is NaN.
        Format::Mxfp4 => scales
            .iter()
            .filter(|&&b| b != E8M0_NAN)
            .max()
            .map(|&b| (b as i32 - 127, 0)),
        // Positive E4M3 bytes order as their values; 0x7F is NaN. The quantizer clamps block
        // scales to [2^-6, 448]; a subnormal or zero scale (a foreign file) is taken as 2^-6
        // with its mantissa field: a factor larger than needed, which only costs range.
        Format::Nvfp4 => scales
            .iter()
            .map(|b| b & 0x7F)
            .filter(|&b| b != E4M3_NAN)
            .max()
            .map(|b| (((b >> 3) as i32).max(1) - 7, b & 7)),
    }
}

/// log2 of a row's factor F: the smallest integer f with 6·s_max·2^-f ≤ 448, s_max the row's
/// largest finite block scale, so that no element code × scale / F exceeds E4M3's largest
/// value. For s_max = (1 + m/8)·2^e: f = e − 6 when m ≤ 1 (6·s_max·2^-f ≤ 6·1.125·64 = 432)
/// and e − 5 otherwise (6·1.25·64 = 480 would pass 448); MXFP4 scales have m = 0, so f = e − 6
/// and the row's largest block tops out at 6·2^6 = 384. A row of NaN scales gets f = 0.
pub fn row_factor_log2(format: Format, scales: &[u8]) -> i32 {
    match largest_scale(format, scales) {
        Some((e, m)) => e - 6 + (m >= 2) as i32,
        None => 0,
    }
}

/// The E4M3 byte of one FP4 element: code × block scale × 2^-f (exact in f32: a 2-bit
/// significand times a 4-bit one), rounded to nearest even (`e4m3_round`). For MXFP4 it is
/// exact when code·2^(s − f) is a multiple of 2^-9 (always when the block's scale is within
/// 14 binades of the row's largest); for NVFP4 see `docs/attention-fp8.md`.
pub fn element_e4m3(format: Format, code: u8, scale_byte: u8, factor_log2: i32) -> u8 {
    let scale = match format {
        Format::Mxfp4 => {
            if scale_byte == E8M0_NAN {
                f64::NAN
            } else {
                2f64.powi(scale_byte as i32 - 127)
            }
        }
        Format::Nvfp4 => e4m3_to_f32(scale_byte) as f64,
    };
    // In f64 the product and the factor are exact for every scale; the kernel's f32 form
    // equals it wherever the result is not far below E4M3's subnormals (those round to 0
    // either way).
    let x = e2m1_decode(code) as f64 * scale * 2f64.powi(-factor_log2);
    e4m3_round(x as f32)
}

/// An FP4 operand widened to E4M3: rows of `row_len` bytes, each with its factor 2^f
/// (value = E4M3 value × 2^f, times NVFP4's tensor scale, which stays outside).
#[derive(Clone, Debug, PartialEq)]
pub struct E4m3Rows {
    pub row_len: usize,
    pub bytes: Vec<u8>,
    pub factor_log2: Vec<i32>,
}

impl E4m3Rows {
    /// Widen `rows` rows of `row_len` FP4 elements (packed codes `data`, one scale byte per
    /// block of `format` along the row), each row with the factor of its own block scales.
    pub fn widen(format: Format, data: &[u8], scale: &[u8], rows: usize, row_len: usize) -> Self {
        Self::widen_grouped(format, data, scale, rows, row_len, rows, 1)
    }

    /// As `widen`, with one factor per group of `group` rows: the rows come in runs of
    /// `rows_per_head` (a head), cut into groups from each run's first row (the last group of
    /// a run shorter), and a group's factor is that of all of its block scales.
    pub fn widen_grouped(
        format: Format,
        data: &[u8],
        scale: &[u8],
        rows: usize,
        row_len: usize,
        rows_per_head: usize,
        group: usize,
    ) -> Self {
        let blk = format.block();
        let per_row = row_len / blk;
        let codes = quant::unpack(data);
        assert_eq!(codes.len(), rows * row_len, "codes do not match the rows");
        assert_eq!(scale.len(), rows * per_row, "scales do not match the rows");
        assert!(
            group >= 1 && rows_per_head >= 1,
            "groups of at least one row"
        );
        let mut factor_log2 = Vec::with_capacity(rows);
        for head in scale.chunks(rows_per_head * per_row) {
            for g in head.chunks(group * per_row) {
                let f = row_factor_log2(format, g);
                factor_log2.extend(std::iter::repeat_n(f, g.len() / per_row));
            }
        }
        let mut bytes = Vec::with_capacity(rows * row_len);
        for ((row, scales), &f) in codes
            .chunks(row_len)
            .zip(scale.chunks(per_row))
            .zip(&factor_log2)
        {
            for (block, &s) in row.chunks(blk).zip(scales) {
                bytes.extend(block.iter().map(|&c| element_e4m3(format, c, s, f)));
            }
        }
        E4m3Rows {
            row_len,
            bytes,
            factor_log2,
        }
    }

    /// The E4M3 values (without the factors), widened to f64.
    pub fn values(&self) -> Vec<f64> {
        self.bytes.iter().map(|&b| e4m3_to_f32(b) as f64).collect()
    }

    /// The values times their rows' factors: what the operand stands for (NVFP4: before the
    /// tensor scale).
    pub fn scaled_values(&self) -> Vec<f64> {
        self.bytes
            .chunks(self.row_len)
            .zip(&self.factor_log2)
            .flat_map(|(row, &f)| {
                row.iter()
                    .map(move |&b| e4m3_to_f32(b) as f64 * 2f64.powi(f))
            })
            .collect()
    }
}

/// Q, K and Vᵀ of a `QuantizedQkv` in E4M3, laid out as its FP4 operands: Q [B,H,Sq,D] with a
/// factor per row (per query), K [B,Hkv,Sk,D] with a factor per `K_FACTOR_KEYS` keys of a head
/// (kept per row, repeated), Vᵀ [B,Hkv,D,Skp] with a factor per row of Vᵀ, that is per column
/// (channel) of V, over all of that channel's keys.
#[derive(Clone, Debug, PartialEq)]
pub struct Fp8Qkv {
    pub q: E4m3Rows,
    pub k: E4m3Rows,
    pub vt: E4m3Rows,
}

impl Fp8Qkv {
    pub fn widen(qkv: &QuantizedQkv) -> Self {
        let s = &qkv.shape;
        let (d, f) = (s.head_dim, qkv.format);
        Fp8Qkv {
            q: E4m3Rows::widen(f, &qkv.q_data, &qkv.q_scale, s.bh() * s.seq_q, d),
            k: E4m3Rows::widen_grouped(
                f,
                &qkv.k_data,
                &qkv.k_scale,
                s.kv_bh() * s.seq_k,
                d,
                s.seq_k,
                K_FACTOR_KEYS,
            ),
            vt: E4m3Rows::widen(
                f,
                &qkv.v_data,
                &qkv.v_scale,
                s.kv_bh() * d,
                s.seq_k_padded(),
            ),
        }
    }
}

/// P's E4M3 byte for a score s2 (S scaled to log2 units) under the integer row maximum `m`:
/// exp2(s2 − m + 8) rounded to f32 (the reference evaluates exp2 in f64, the kernel's ex2 is
/// within 2^-22 of it), then to E4M3, nearest even. In (0, 256] for s2 ≤ m: never saturates.
pub fn p_e4m3(s2: f64, m: f64) -> u8 {
    e4m3_round((s2 - m + P_SCALE_LOG2 as f64).exp2() as f32)
}

/// FP4 attention on FP8 tensor cores exactly as `docs/attention-fp8.md` states it, O as
/// [B,H,Sq,D] f32. This doc comment is the normative statement.
///
/// Operands are `Fp8Qkv::widen(qkv)`: E4M3 values q8, k8, v8 with factors 2^fq_i per query,
/// 2^fk_j per `K_FACTOR_KEYS` keys and 2^fv_d per channel (`row_factor_log2`). Q head h reads K/V head
/// h / group (`AttnShape::kv_head_of`). For each (b, h) and query row i, with the first
/// n = n(i) keys visible:
/// 1. S[j] = the f32 that FP8 wgmma gives for Σ_d q8[i,d]·k8[j,d], the products added 32 at
///    a time (one k32 instruction each) in increasing d, from 0: `ACCUMULATION`, per
///    instruction C and the 32 products aligned at the largest of C's exponent and the
///    products' factor-exponent sums, each cut toward zero 13 fraction bits below it, summed,
///    and the sum cut toward zero to 14 significant bits.
/// 2. s2[j] = S[j]·c·2^(fq_i + fk_j), c = `score_factor` (log2(e)/√D times NVFP4's tensor
///    scales of Q and K, f32); the product is taken in f64.
/// 3. M = ceil(max_j s2[j]), the integer row maximum of the bf16 scheme.
/// 4. p8[j] = `p_e4m3`(s2[j], M): E4M3 of exp2(s2[j] − M + 8) (through f32); 0 for masked keys.
/// 5. acc[d] = the same accumulation of Σ_j p8[j]·v8[j,d] over the groups of 32 keys that
///    hold a visible key, in key order, from 0. l = the f32 sum, in key order, of the same
///    accumulation of Σ_j p8[j]·1 over each key tile (T keys from key 0, T =
///    `paths::fp8_keys_per_tile`: a channel of V that is all ones, which the kernel
///    runs beside O and adds up per tile: accumulated over a whole row, the 14-bit sum would
///    drop the small p8 once l is large, a quarter of l at 16384 Gaussian keys).
///    O[i,d] = RN_f32(acc[d] / l) · RN_f32(2^fv_d · v_ts) rounded to f32 (v_ts: V's NVFP4
///    tensor scale, 1 for MXFP4).
///
/// A kernel with online softmax (integer running maximum m_t ≤ M, key tiles of a multiple of
/// 32) forms p8 2^(M − m_t) times these and rescales acc and l by exact powers of two: the same result
/// while those p8 are normal E4M3 values (`tests/attention_fp8.rs` runs that form against this
/// one). At head_dim 64 the FP8 kernel's m_t trails the tiles' maxima by up to one and its p8 are
/// 2^(M − m_t − 1) times these, with the same result. Where a kernel cannot match bit for bit,
/// and why the relative error stays far below 1e-3, is in `docs/attention-fp8.md`: its f32 s2
/// and ex2, an E4M3-subnormal p8 in a running frame, k32 groups it runs with every key masked,
/// stream-K pieces.
pub fn reference_fp8(qkv: &QuantizedQkv) -> Vec<f32> {
    let shape = &qkv.shape;
    let ops = Fp8Qkv::widen(qkv);
    let (q, k, vt) = (ops.q.values(), ops.k.values(), ops.vt.values());
    let w: Vec<f32> = ops
        .vt
        .factor_log2
        .iter()
        .map(|&f| (2f64.powi(f) * qkv.v_tensor_scale as f64) as f32)
        .collect();
    let rows = RowsFp8 {
        d: shape.head_dim,
        seq_q: shape.seq_q,
        seq_k: shape.seq_k,
        skp: shape.seq_k_padded(),
        group: shape.group(),
        l_tile: paths::fp8_keys_per_tile(shape),
        c: score_factor(qkv) as f64,
        q: &q,
        k: &k,
        vt: &vt,
        fq: &ops.q.factor_log2,
        fk: &ops.k.factor_log2,
        w: &w,
    };
    let mut out = vec![0.0f32; shape.q_len()];
    par_rows(&mut out, shape, |bh, row0, o| {
        for (r, o) in o.chunks_mut(shape.head_dim).enumerate() {
            let i = row0 + r;
            rows.row(bh, i, shape.visible_keys(i), o);
        }
    });
    out
}

/// What `reference_fp8` reads, widened once.
struct RowsFp8<'a> {
    d: usize,
    seq_q: usize,
    seq_k: usize,
    skp: usize,
    /// Q heads per K/V head: problem bh reads K/V head bh / group.
    group: usize,
    /// Keys per tile over which l is accumulated before the tiles' f32 sum.
    l_tile: usize,
    c: f64,
    q: &'a [f64],
    k: &'a [f64],
    vt: &'a [f64],
    fq: &'a [i32],
    fk: &'a [i32],
    /// Per channel of V (all K/V heads): 2^fv_d · v_ts in f32.
    w: &'a [f32],
}

impl RowsFp8<'_> {
    /// Row i of head bh (n keys visible) into `o`.
    fn row(&self, bh: usize, i: usize, n: usize, o: &mut [f32]) {
        let (d, kv) = (self.d, bh / self.group);
        let qi = bh * self.seq_q + i;
        let q_row = &self.q[qi * d..(qi + 1) * d];
        let mut products = [(0.0f64, 0i32); K_STEP];
        let s2: Vec<f64> = (0..n)
            .map(|j| {
                let kj = kv * self.seq_k + j;
                let k_row = &self.k[kj * d..(kj + 1) * d];
                let mut acc = 0.0f32;
                for (qg, kg) in q_row.chunks(K_STEP).zip(k_row.chunks(K_STEP)) {
                    for ((p, &x), &y) in products.iter_mut().zip(qg).zip(kg) {
                        *p = ACCUMULATION.product(x, y);
                    }
                    acc = ACCUMULATION.step_f32(acc, &products[..qg.len()]);
                }
                acc as f64 * self.c * 2f64.powi(self.fq[qi] + self.fk[kj])
            })
            .collect();
        let m = s2.iter().copied().fold(f64::NEG_INFINITY, f64::max).ceil();
        let p: Vec<f64> = s2
            .iter()
            .map(|&s| e4m3_to_f32(p_e4m3(s, m)) as f64)
            .collect();
        let l = p
            .chunks(self.l_tile)
            .fold(0.0f32, |l, t| l + accumulate(t, |_| 1.0, &mut products)) as f64;
        for (c, o) in o.iter_mut().enumerate() {
            let ch = kv * d + c;
            let v_row = &self.vt[ch * self.skp..ch * self.skp + n];
            let acc = accumulate(&p, |j| v_row[j], &mut products);
            *o = (acc as f64 / l) as f32 * self.w[ch];
        }
    }
}

/// Σ_j p[j]·v(j) as FP8 wgmma adds it: k32 groups of keys in order, from 0 (`products` is
/// scratch).
fn accumulate(p: &[f64], v: impl Fn(usize) -> f64, products: &mut [(f64, i32); K_STEP]) -> f32 {
    let mut acc = 0.0f32;
    for (g, pg) in p.chunks(K_STEP).enumerate() {
        for (i, (prod, &x)) in products.iter_mut().zip(pg).enumerate() {
            *prod = ACCUMULATION.product(x, v(g * K_STEP + i));
        }
        acc = ACCUMULATION.step_f32(acc, &products[..pg.len()]);
    }
    acc
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Why l is summed per key tile: the tensor cores' 14-bit accumulation over a whole long
    /// row drops the small p8 once l is large; per tile of 64 it stays at the exact sum.
    #[test]
    fn l_summed_per_tile_stays_at_the_exact_sum_where_a_whole_row_does_not() {
        let mut rng = crate::rng::SplitMix64::new(11);
        let s2: Vec<f64> = (0..16384).map(|_| 1.5 * rng.normal()).collect();
        let m = s2.iter().copied().fold(f64::NEG_INFINITY, f64::max).ceil();
        let p: Vec<f64> = s2
            .iter()
            .map(|&s| e4m3_to_f32(p_e4m3(s, m)) as f64)
            .collect();
        let exact: f64 = p.iter().sum();
        let mut scratch = [(0.0, 0); K_STEP];
        let per_tile =
            p.chunks(64)
                .fold(0.0f32, |l, t| l + accumulate(t, |_| 1.0, &mut scratch)) as f64;
        let whole = accumulate(&p, |_| 1.0, &mut scratch) as f64;
        assert!(
            (per_tile / exact - 1.0).abs() < 1e-4,
            "per tile {per_tile} vs {exact}"
        );
        assert!(whole / exact < 0.9, "a whole row {whole} vs {exact}");
    }

    /// A scale byte's value in f64 (NaN bytes excluded by the callers).
    fn scale_value(format: Format, byte: u8) -> f64 {
        match format {
            Format::Mxfp4 => 2f64.powi(byte as i32 - 127),
            Format::Nvfp4 => e4m3_to_f32(byte) as f64,
        }
    }

    #[test]
    fn the_factor_is_the_smallest_that_keeps_every_element_within_448() {
        let bytes: Vec<(Format, u8)> = (0u8..0xFF)
            .map(|b| (Format::Mxfp4, b))
            .chain((0x08u8..=0x7E).map(|b| (Format::Nvfp4, b)))
            .collect();
        for (format, byte) in bytes {
            let f = row_factor_log2(format, &[byte]);
            let top = 6.0 * scale_value(format, byte);
            assert!(top * 2f64.powi(-f) <= 448.0, "{format:?} {byte:#x}");
            assert!(top * 2f64.powi(1 - f) > 448.0, "{format:?} {byte:#x}");
        }
        // The largest finite scale of a row sets it; NaN scales are passed over.
        assert_eq!(row_factor_log2(Format::Mxfp4, &[120, 127, 0xFF, 3]), -6);
        assert_eq!(row_factor_log2(Format::Nvfp4, &[0x30, 0x7F, 0x38]), -6);
        assert_eq!(row_factor_log2(Format::Nvfp4, &[0x3A]), -5); // 1.25: 6·1.25·64 > 448
        assert_eq!(row_factor_log2(Format::Mxfp4, &[0xFF]), 0);
    }

    #[test]
    fn mxfp4_elements_are_exact_within_14_binades_of_the_row_maximum() {
        let (top, f) = (140u8, row_factor_log2(Format::Mxfp4, &[140]));
        for k in 0..=22u8 {
            let byte = top - k;
            for code in 0..16u8 {
                let want = e2m1_decode(code) as f64 * scale_value(Format::Mxfp4, byte);
                let got = e4m3_to_f32(element_e4m3(Format::Mxfp4, code, byte, f)) as f64;
                let exact = got * 2f64.powi(f) == want;
                // Exact iff code·2^(15−k) is an integer (a multiple of the smallest subnormal).
                let on_grid = (e2m1_decode(code) as f64 * 2f64.powi(15 - k as i32)).fract() == 0.0;
                assert_eq!(exact, on_grid, "k = {k}, code {code:#x}");
                if k <= 14 {
                    assert!(exact, "k = {k}, code {code:#x}");
                }
                if k >= 19 {
                    assert_eq!(got, 0.0, "k = {k}, code {code:#x}");
                }
            }
        }
    }

    #[test]
    fn nvfp4_elements_are_exact_when_code_times_scale_has_four_significant_bits() {
        for byte in 0x08u8..=0x7E {
            // The block is its row's largest, so every nonzero element lands in E4M3's normal
            // range (at least 0.5/6 of 240).
            let f = row_factor_log2(Format::Nvfp4, &[byte]);
            for code in 0..16u8 {
                let c = e2m1_decode(code).abs();
                let want = e2m1_decode(code) as f64 * scale_value(Format::Nvfp4, byte);
                let got = e4m3_to_f32(element_e4m3(Format::Nvfp4, code, byte, f)) as f64;
                let exact = got * 2f64.powi(f) == want;
                let predicted =
                    [0.0, 0.5, 1.0, 2.0, 4.0].contains(&c) || [0, 2, 4].contains(&(byte & 7));
                assert_eq!(exact, predicted, "scale {byte:#x}, code {code:#x}");
                // Otherwise one rounding: within half an E4M3 step (2^-4 of the value).
                assert!((got * 2f64.powi(f) - want).abs() <= want.abs() / 16.0);
            }
        }
    }

    #[test]
    fn p_is_rounded_to_e4m3_with_a_factor_of_256() {
        let m = 3.0;
        assert_eq!(p_e4m3(m, m), 0x78); // 256
        assert_eq!(e4m3_to_f32(0x78), 256.0);
        assert_eq!(p_e4m3(m - 1.0, m), 0x70); // 128
        assert_eq!(p_e4m3(m - 14.0, m), 0x08); // 2^-6, the smallest normal
        assert_eq!(p_e4m3(m - 17.0, m), 0x01); // 2^-9, the smallest subnormal
        assert_eq!(p_e4m3(m - 17.9, m), 0x01);
        assert_eq!(p_e4m3(m - 18.0, m), 0x00); // 2^-10: the tie with zero goes to zero
        assert_eq!(p_e4m3(f64::NEG_INFINITY, m), 0x00); // a masked key
        // exp2(-0.1)·256 = 238.86: between 224 and 240, nearer 240.
        assert_eq!(p_e4m3(m - 0.1, m), 0x77);
        // Every score at or below the maximum, down to 18 binades below it, stays within
        // (0, 256]: no saturation.
        for t in 0..3600 {
            let s2 = m - t as f64 * 0.005;
            let v = e4m3_to_f32(p_e4m3(s2, m));
            assert!(v > 0.0 && v <= 256.0, "{s2}");
        }
    }

    #[test]
    fn p_bytes_shift_by_whole_binades_with_the_maximum_while_normal() {
        // What the online form relies on: a key seen under a running maximum k below the
        // final one (so its score is at most that running maximum) gets the same p times 2^k,
        // the byte k binades (k << 3) higher, while both are normal.
        for t in 0..600 {
            for k in 0..=6 {
                let s2 = -(k as f64) - t as f64 * 0.013;
                let (final_max, running) = (p_e4m3(s2, 0.0), p_e4m3(s2, -(k as f64)));
                if final_max >= 0x08 {
                    assert_eq!(running, final_max + ((k as u8) << 3), "{s2} {k}");
                }
            }
        }
    }

    #[test]
    fn rows_are_widened_with_their_own_factors() {
        // Two MXFP4 rows of 64: scales (2^0, 2^-2) and (2^-10, 2^-10); codes 6 then 1.
        let codes: Vec<u8> = [7u8; 32]
            .iter()
            .chain(&[2u8; 32])
            .chain(&[7u8; 32])
            .chain(&[2u8; 32])
            .copied()
            .collect();
        let data = quant::pack(&codes);
        let rows = E4m3Rows::widen(Format::Mxfp4, &data, &[127, 125, 117, 117], 2, 64);
        assert_eq!(rows.factor_log2, vec![-6, -16]);
        let v = rows.values();
        assert_eq!((v[0], v[32]), (384.0, 16.0)); // 6·2^6, 1·2^-2·2^6
        assert_eq!((v[64], v[96]), (384.0, 64.0));
        let scaled = rows.scaled_values();
        assert_eq!((scaled[0], scaled[32]), (6.0, 0.25));
        assert_eq!((scaled[64], scaled[96]), (6.0 / 1024.0, 1.0 / 1024.0));
    }
}
