//! CPU references: the exact FP4 scheme the fused kernel implements (`reference_quantized`)
//! and plain f64 attention on the unquantized inputs (`reference_f64`), to measure what FP4
//! costs.

use super::prequant::QuantizedQkv;
use super::shape::AttnShape;
use crate::quant::codes::{e2m1_decode, e2m1_encode, e4m3_to_f32};
use crate::quant::scale::nv_scale;
use crate::quant::{self, Format, ScaleMode, Spec};
use std::sync::Mutex;

/// Query rows one work unit handles: enough that the P quantizer's per-call thread start-up
/// is amortised, few enough that B=1,H=2 still spreads over every core.
const ROWS_PER_UNIT: usize = 64;

/// log2(e)/√D, computed in f32: the constant the kernel multiplies Q·Kᵀ by so that softmax's
/// exponential becomes `exp2`. The reference widens this same f32 so both use one constant.
pub fn score_scale_log2(head_dim: usize) -> f32 {
    std::f32::consts::LOG2_E / (head_dim as f32).sqrt()
}

/// P requantized: codes (one a value), block scale bytes and the dequantized values.
#[derive(Clone, Debug, PartialEq)]
pub struct PBlocks {
    pub codes: Vec<u8>,
    pub scales: Vec<u8>,
    pub values: Vec<f32>,
}

/// P (already times `P_SCALE`, rows of a multiple of 32 keys, non-negative) requantized for
/// inputs in `format`, in blocks along the keys. P's block scales have the type of V's,
/// because one block-scaled `mma.sync` (sm_120a) takes one scale type for both operands:
/// - NVFP4: blocks of 16, E4M3 scale amax/6 correctly rounded (NVFP4 one-level's scale, so
///   nothing saturates by more than the E4M3 rounding); each p is multiplied by RN(1/scale)
///   and rounded to E2M1. Not divided, as the quantizers do: the kernels' multiplication is
///   one instruction where a correctly rounded quotient takes three, and it differs from the
///   quotient by at most an ulp, which moves a code only at an exact E2M1 tie;
/// - MXFP4: MXFP4 RCEIL (E8M0 per 32 keys, amax/6 rounded up to a power of two, the cuBLAS
///   rule, so nothing saturates; FLOOR would clip the largest p of a block), elements
///   multiplied by the exact reciprocal (`quant::quantize`).
pub fn p_requantize(format: Format, p: &[f32]) -> PBlocks {
    match format {
        Format::Mxfp4 => {
            let (q, _) = quant::quantize(&Spec::mxfp4(ScaleMode::Rceil), &[1, p.len()], p)
                .expect("P rows are finite and a multiple of 32 long");
            PBlocks {
                codes: quant::unpack(&q.data),
                values: quant::dequantize(&q),
                scales: q.scale,
            }
        }
        Format::Nvfp4 => {
            let mut out = PBlocks {
                codes: Vec::with_capacity(p.len()),
                scales: Vec::with_capacity(p.len() / 16),
                values: Vec::with_capacity(p.len()),
            };
            for block in p.chunks(16) {
                let amax = block.iter().fold(0.0f32, |m, &x| m.max(x));
                let byte = nv_scale(amax.to_bits(), None);
                let value = e4m3_to_f32(byte);
                let rcp = 1.0 / value;
                out.scales.push(byte);
                for &x in block {
                    let code = e2m1_encode(x * rcp);
                    out.codes.push(code);
                    out.values.push(e2m1_decode(code) * value);
                }
            }
            out
        }
    }
}

/// P is multiplied by 448·6 before requantization: a row's largest p (in (1/2, 1]) lands near
/// the top of the E4M3 scale range, so block scales stay normal for every block within 2^-15
/// of the row maximum. The factor cancels in O = Σ P·V / Σ P. (The wgmma kernel adds
/// log2(2688) to the exponent instead of multiplying: equal to a few f32 ulps.)
pub const P_SCALE: f32 = 2688.0;

/// The factor Q·Kᵀ (of the operands as the kernel holds them) is multiplied by: log2(e)/√D
/// times the NVFP4 tensor scales of Q and K, in f32 as the kernel receives it.
pub fn score_factor(qkv: &QuantizedQkv) -> f32 {
    (qkv.q_tensor_scale * qkv.k_tensor_scale) * score_scale_log2(qkv.shape.head_dim)
}

/// FP4 attention exactly as the fused kernel computes it, O as [B,H,Sq,D] f32. This doc
/// comment is the normative statement of the scheme.
///
/// Inputs are the operands of `qkv` as the kernel's registers hold them (Qd, Kd, Vd: E2M1
/// code × block scale, without NVFP4's tensor scales). Q head h reads K/V head h / group
/// (`AttnShape::kv_head_of`; the same head when there are as many). For each (b, h) and query
/// row i, with keys j < n(i) visible (`AttnShape::visible_keys`: j < seq_k, and j ≤ i when
/// causal):
/// 1. S[j] = Σ_d Qd[i,d]·Kd[j,d]. Each product is exact; the kernel's tensor cores
///    accumulate in f32, the reference in f64.
/// 2. s2[j] = S[j]·c with c = `score_factor` (log2(e)/√D times the tensor scales of Q and K,
///    in f32); masked keys (j ≥ n(i), including the padding up to Skp) are −∞.
/// 3. M = ceil(max_j s2[j]): the row maximum is kept as an integer.
/// 4. p[j] = exp2(s2[j] − M) rounded to f32 (the reference evaluates exp2 in f64); masked
///    keys give 0. Every p is in (0, 1] and the largest is > 1/2.
/// 5. P is requantized: p·`P_SCALE` (f32) goes through `p_requantize` for the input format,
///    giving pd[j] (still scaled by P_SCALE): blocks of 16 keys with an E4M3 scale amax/6
///    (NVFP4) or of 32 keys with an E8M0 scale amax/6 rounded up to a power of two (MXFP4
///    RCEIL); elements multiplied by RN(1/scale) and rounded to E2M1.
/// 6. l = Σ_j pd[j] (the sum of the dequantized P, not of p), and
///    O[i,:] = ((Σ_j pd[j]·Vd[j,:]) / l) rounded to f32, times V's tensor scale (f32).
///
/// Why the tiled kernel equals this two-pass computation. The kernel walks the keys in tiles
/// (a multiple of 16 keys, aligned), keeps an integer running maximum m_t =
/// max(m_{t−1}, ceil(tile max)), and ends with m = M because ceil(max(a, b)) =
/// max(ceil a, ceil b). A tile's p is exp2(s2 − m_t) = 2^(M − m_t)·exp2(s2 − M): the final
/// values times a power of two. Scaling a block by 2^k scales its amax/6 by 2^k, and E4M3
/// (or E8M0) rounding commutes with that while the scale stays inside [2^-6, 448] (or E8M0's
/// range), and so does the reciprocal, so every element times its reciprocal scale is
/// unchanged: the codes are identical and the dequantized block is
/// exactly 2^(M − m_t) times the one this reference gets. When m grows the kernel multiplies
/// its O and l accumulators by 2^(m_old − m_new), also exact, so the tiled result is the
/// two-pass result up to f32 accumulation order. The same holds where the wgmma kernel cuts a
/// row's keys between CTAs (its stream-K schedule): each piece runs from its own running
/// maximum, and the pieces' O and l are added times 2^(m_piece − M). A fractional running
/// maximum would break this: the rescale would be an arbitrary factor, change the codes, and
/// make the output depend on the tiling. (Limits: blocks whose scale hits the 2^-6 clamp,
/// those more than 2^15 below the row maximum, can quantize differently, a negligible
/// difference; the kernel's f32 subtraction s2 − m_t and its exp2 differ from the reference by f32 ulps, and
/// so does the wgmma kernel's exp2(s2 − m_t + log2 P_SCALE) from exp2(s2 − m_t)·P_SCALE:
/// a code that sits on a rounding tie can move.)
pub fn reference_quantized(qkv: &QuantizedQkv) -> Vec<f32> {
    let shape = &qkv.shape;
    let widen = |x: Vec<f32>| -> Vec<f64> { x.into_iter().map(f64::from).collect() };
    let ops = Operands {
        shape,
        q: widen(qkv.dequantized_q()),
        k: widen(qkv.dequantized_k()),
        v: widen(qkv.dequantized_v()),
    };
    let c = score_factor(qkv) as f64;
    let v_ts = qkv.v_tensor_scale;
    let format = qkv.format;
    let mut out = vec![0.0f32; shape.q_len()];
    par_rows(&mut out, shape, |bh, row0, o| {
        quantized_rows(&ops, format, c, v_ts, bh, row0, o)
    });
    out
}

/// softmax(Q·Kᵀ/√D)·V in f64 on the unquantized inputs, [B,H,Sq,D], with the same causal
/// rule and K/V head of each Q head (and the row maximum subtracted before exp). The yardstick
/// for FP4's accuracy.
///
/// Panics if a buffer's length does not match the shape.
pub fn reference_f64(shape: &AttnShape, q: &[f32], k: &[f32], v: &[f32]) -> Vec<f64> {
    assert_eq!(q.len(), shape.q_len(), "q does not match {shape}");
    assert_eq!(k.len(), shape.kv_len(), "k does not match {shape}");
    assert_eq!(v.len(), shape.kv_len(), "v does not match {shape}");
    let widen = |x: &[f32]| -> Vec<f64> { x.iter().map(|&v| v as f64).collect() };
    let ops = Operands {
        shape,
        q: widen(q),
        k: widen(k),
        v: widen(v),
    };
    let scale = 1.0 / (shape.head_dim as f64).sqrt();
    let mut out = vec![0.0f64; shape.q_len()];
    par_rows(&mut out, shape, |bh, row0, o| {
        f64_rows(&ops, scale, bh, row0, o)
    });
    out
}

/// Q, K, V widened to f64 in the natural layouts (Q [B,H,Sq,D], K and V [B,Hkv,Sk,D]).
struct Operands<'a> {
    shape: &'a AttnShape,
    q: Vec<f64>,
    k: Vec<f64>,
    v: Vec<f64>,
}

impl Operands<'_> {
    fn q_row(&self, bh: usize, i: usize) -> &[f64] {
        let d = self.shape.head_dim;
        let at = (bh * self.shape.seq_q + i) * d;
        &self.q[at..at + d]
    }
    /// Keys (or values) 0..seq_k of the K/V head problem bh reads.
    fn head<'b>(&self, x: &'b [f64], bh: usize) -> &'b [f64] {
        let n = self.shape.seq_k * self.shape.head_dim;
        let kv = self.shape.kv_head_of(bh);
        &x[kv * n..(kv + 1) * n]
    }
}

/// Rows row0.. of head bh of the FP4 scheme: p for every row, one requantization call for the
/// whole unit (blocks are independent, so [rows, Skp] gives the same bytes as one call per
/// row), then P·V.
fn quantized_rows(
    ops: &Operands,
    format: Format,
    c: f64,
    v_ts: f32,
    bh: usize,
    row0: usize,
    out: &mut [f32],
) {
    let shape = ops.shape;
    let (d, skp) = (shape.head_dim, shape.seq_k_padded());
    let rows = out.len() / d;
    let (k, v) = (ops.head(&ops.k, bh), ops.head(&ops.v, bh));
    let mut p = vec![0.0f32; rows * skp];
    let mut s2 = Vec::with_capacity(shape.seq_k);
    for (r, p_row) in p.chunks_mut(skp).enumerate() {
        scores(
            ops.q_row(bh, row0 + r),
            k,
            shape.visible_keys(row0 + r),
            c,
            &mut s2,
        );
        exp2_rows(&s2, p_row);
    }
    let scaled: Vec<f32> = p.iter().map(|&x| x * P_SCALE).collect();
    let pd = p_requantize(format, &scaled).values;
    let mut acc = vec![0.0f64; d];
    for (r, (pd_row, o)) in pd.chunks(skp).zip(out.chunks_mut(d)).enumerate() {
        let n = shape.visible_keys(row0 + r);
        let l = weighted_sum(pd_row[..n].iter().map(|&x| x as f64), v, &mut acc);
        for (o, a) in o.iter_mut().zip(&acc) {
            *o = (a / l) as f32 * v_ts;
        }
    }
}

/// p[j] = exp2(s2[j] − M) as f32 with M = ceil(max s2): the integer row maximum.
fn exp2_rows(s2: &[f64], p: &mut [f32]) {
    let m = s2.iter().copied().fold(f64::NEG_INFINITY, f64::max).ceil();
    for (p, &s) in p.iter_mut().zip(s2) {
        *p = (s - m).exp2() as f32;
    }
}

/// Rows row0.. of head bh of exact softmax attention.
fn f64_rows(ops: &Operands, scale: f64, bh: usize, row0: usize, out: &mut [f64]) {
    let shape = ops.shape;
    let d = shape.head_dim;
    let (k, v) = (ops.head(&ops.k, bh), ops.head(&ops.v, bh));
    let mut s = Vec::with_capacity(shape.seq_k);
    let mut acc = vec![0.0f64; d];
    for (r, o) in out.chunks_mut(d).enumerate() {
        scores(
            ops.q_row(bh, row0 + r),
            k,
            shape.visible_keys(row0 + r),
            scale,
            &mut s,
        );
        let m = s.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        let l = weighted_sum(s.iter().map(|&x| (x - m).exp()), v, &mut acc);
        for (o, a) in o.iter_mut().zip(&acc) {
            *o = a / l;
        }
    }
}

/// out[j] = (q · k_j)·scale for the first n keys.
fn scores(q: &[f64], k: &[f64], n: usize, scale: f64, out: &mut Vec<f64>) {
    out.clear();
    out.extend(k.chunks(q.len()).take(n).map(|kj| dot(q, kj) * scale));
}

/// acc = Σ_j w_j·v_j over the weights given (keys 0..), returning Σ_j w_j. Zero weights
/// (underflowed or quantized to zero) are skipped.
fn weighted_sum(weights: impl Iterator<Item = f64>, v: &[f64], acc: &mut [f64]) -> f64 {
    acc.fill(0.0);
    let mut l = 0.0;
    for (w, vj) in weights.zip(v.chunks(acc.len())) {
        if w != 0.0 {
            l += w;
            for (a, &x) in acc.iter_mut().zip(vj) {
                *a += w * x;
            }
        }
    }
    l
}

/// f64 dot product with eight independent partial sums, so the loop vectorises (one serial
/// f64 sum cannot be reordered by the compiler). Head dims are multiples of 8.
fn dot(a: &[f64], b: &[f64]) -> f64 {
    let mut acc = [0.0f64; 8];
    for (x, y) in a.chunks_exact(8).zip(b.chunks_exact(8)) {
        for t in 0..8 {
            acc[t] += x[t] * y[t];
        }
    }
    ((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7]))
}

/// Run `f(bh, first_row, rows_out)` over units of up to `ROWS_PER_UNIT` query rows of each
/// (b, h), on one scoped thread per core pulling units from a shared queue (causal units near
/// the top are cheap, so a static split would leave threads idle).
pub(super) fn par_rows<T: Send>(
    out: &mut [T],
    shape: &AttnShape,
    f: impl Fn(usize, usize, &mut [T]) + Sync,
) {
    let d = shape.head_dim;
    let units: Vec<(usize, usize, &mut [T])> = out
        .chunks_mut(shape.seq_q * d)
        .enumerate()
        .flat_map(|(bh, head)| {
            head.chunks_mut(ROWS_PER_UNIT * d)
                .enumerate()
                .map(move |(u, o)| (bh, u * ROWS_PER_UNIT, o))
        })
        .collect();
    let threads = std::thread::available_parallelism()
        .map_or(1, |n| n.get())
        .min(units.len());
    let queue = Mutex::new(units.into_iter());
    std::thread::scope(|s| {
        for _ in 0..threads {
            s.spawn(|| {
                loop {
                    let next = queue.lock().expect("work queue poisoned").next();
                    let Some((bh, row0, o)) = next else { break };
                    f(bh, row0, o);
                }
            });
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn integer_row_max_keeps_the_largest_p_above_a_half() {
        let mut p = [0.0f32; 3];
        exp2_rows(&[0.3, -1.2, 0.0], &mut p);
        assert_eq!(p[2], 0.5);
        assert!(p[0] > 0.5 && p[0] <= 1.0);
        exp2_rows(&[2.0, 1.0], &mut p[..2]);
        assert_eq!(&p[..2], &[1.0, 0.5]);
    }

    #[test]
    fn rescaling_a_p_block_by_a_power_of_two_keeps_its_codes() {
        // The property the online kernel relies on (see reference_quantized's doc).
        // P as the kernel quantizes it (times P_SCALE), and the same block 8 times smaller:
        // identical codes, every E4M3 scale three binades (3 << 3 in the byte) lower.
        let p: Vec<f32> = (0..32)
            .map(|j| (-(j as f32) * 0.37).exp2() * P_SCALE)
            .collect();
        let scaled: Vec<f32> = p.iter().map(|&x| x * 0.125).collect();
        let (a, b) = (
            p_requantize(Format::Nvfp4, &p),
            p_requantize(Format::Nvfp4, &scaled),
        );
        assert_eq!(a.codes, b.codes);
        for (sa, sb) in a.scales.iter().zip(&b.scales) {
            assert_eq!(*sa, sb + (3 << 3));
        }
        // MXFP4 RCEIL: the same codes, every E8M0 scale 3 lower.
        let (a, b) = (
            p_requantize(Format::Mxfp4, &p),
            p_requantize(Format::Mxfp4, &scaled),
        );
        assert_eq!(a.codes, b.codes);
        for (sa, sb) in a.scales.iter().zip(&b.scales) {
            assert_eq!(*sa, sb + 3);
        }
    }

    #[test]
    fn nvfp4_p_is_multiplied_by_the_rounded_reciprocal_not_divided() {
        // Scale 240 (amax 1440 = 6·240, E4M3 0x77). 1200 / 240 = 5 is an E2M1 tie (4 | 6)
        // and a correctly rounded division would send it to the even code, 4; RN(1/240) is a
        // little above 1/240, so 1200 times it is an ulp above 5 and rounds to 6.
        let mut p = vec![0.0f32; 16];
        p[0] = 1440.0;
        p[1] = 1200.0;
        let q = p_requantize(Format::Nvfp4, &p);
        assert_eq!(q.scales, vec![0x77]);
        let scale = e4m3_to_f32(0x77);
        assert_eq!(scale, 240.0);
        assert!(p[1] * (1.0 / scale) > 5.0);
        assert_eq!(q.values[..2], [1440.0, 1440.0]);
        assert_eq!(q.codes[..3], [7, 7, 0]);
    }

    #[test]
    fn dot_matches_a_serial_sum_on_exact_values() {
        let a: Vec<f64> = (0..128).map(|i| (i % 7) as f64 - 3.0).collect();
        let b: Vec<f64> = (0..128).map(|i| (i % 5) as f64 * 0.5).collect();
        let serial: f64 = a.iter().zip(&b).map(|(x, y)| x * y).sum();
        assert_eq!(dot(&a, &b), serial);
    }

    #[test]
    fn score_constant_is_the_f32_one() {
        assert_eq!(score_scale_log2(64), std::f32::consts::LOG2_E / 8.0);
        assert_eq!(
            score_scale_log2(128),
            std::f32::consts::LOG2_E / 128f32.sqrt()
        );
    }
}
