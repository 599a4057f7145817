//! Q, K and V for the kernel from files `fp4probe quantize` wrote: the on-disk form of the
//! kernel's FP4 operands (docs/file-formats.md, "Attention inputs").
//!
//! Q [B,H,Sq,D] and K [B,Hkv,Sk,D] (Hkv a divisor of H: grouped-query attention when smaller)
//! are quantized as they are, blocks along D. V is quantized transposed, V^T [B,Hkv,D,Skp]
//! with the keys zero-padded to Skp = Sk rounded up to 32, because the kernel's P·V reduces
//! over the keys and its V blocks must run along them: `quantize --attention-v` writes that
//! from V [B,Hkv,Sk,D] and records V's shape in the metadata ([`vt_metadata`]). The bytes are
//! exactly what [`prequantize`](super::prequantize) builds from f32 inputs whenever the
//! quantizer's settings agree (MXFP4 floor, two-level NVFP4). Any MXFP4 scale rule and
//! one-level NVFP4 also load: the kernel reads scale bytes and does not care how they were
//! chosen.

use super::prequant::QuantizedQkv;
use super::shape::{AttnShape, BLOCK};
use crate::quant::{Format, Quantized};
use anyhow::{Context, Result, bail, ensure};
use std::collections::BTreeMap;

/// Metadata key and value that mark a file of `quantize --attention-v` (V^T).
pub const ATTENTION_OPERAND: &str = "attention_operand";
pub const V_TRANSPOSED: &str = "v_transposed";
/// Metadata key of V's shape [..., Sk, D] before the transpose, a JSON list.
pub const V_SHAPE: &str = "v_shape";

/// The shape V^T is stored in, [..., D, Skp], for V of `v_shape` [..., Sk, D].
pub fn vt_shape(v_shape: &[usize]) -> Result<Vec<usize>> {
    let [lead @ .., sk, d] = v_shape else {
        bail!(
            "V is {v_shape:?}: --attention-v reads V as [..., Sk, D] (attention: [B, Hkv, Sk, \
             D]), at least two axes"
        );
    };
    ensure!(
        *sk > 0 && *d > 0,
        "V is {v_shape:?}: --attention-v needs at least one key and one channel"
    );
    Ok([lead, &[*d, sk.next_multiple_of(BLOCK)]].concat())
}

/// The metadata of a V^T file: what it holds and V's shape.
pub fn vt_metadata(v_shape: &[usize]) -> [(String, String); 2] {
    [
        (ATTENTION_OPERAND.into(), V_TRANSPOSED.into()),
        (V_SHAPE.into(), format!("{v_shape:?}")),
    ]
}

/// V's shape, for a file whose metadata marks it V^T (None for any other file), checked
/// against the shape the file stores ([..., D, Skp], as [`vt_shape`] gives it).
pub fn v_shape_of(
    metadata: &BTreeMap<String, String>,
    stored: &[usize],
) -> Result<Option<Vec<usize>>> {
    match metadata.get(ATTENTION_OPERAND).map(String::as_str) {
        None => return Ok(None),
        Some(V_TRANSPOSED) => {}
        Some(other) => bail!(
            "metadata {ATTENTION_OPERAND} is {other:?}: the one operand fp4probe stores \
             transformed is {V_TRANSPOSED:?}"
        ),
    }
    let text = metadata.get(V_SHAPE).with_context(|| {
        format!("metadata {ATTENTION_OPERAND} is {V_TRANSPOSED:?} but {V_SHAPE} is missing")
    })?;
    let v: Vec<usize> = serde_json::from_str(text)
        .ok()
        .with_context(|| format!("metadata {V_SHAPE} is {text:?}, not a list of sizes"))?;
    let want = vt_shape(&v).with_context(|| format!("metadata {V_SHAPE}"))?;
    ensure!(
        want == stored,
        "metadata {V_SHAPE} {v:?} stands for V^T {want:?}, but 'data' is {stored:?}"
    );
    Ok(Some(v))
}

/// The kernel's operands from the quantized Q, K and V^T (as `dequantize::quantized_of` reads them, in
/// any scale layout: the kernel takes row-major scales),
/// checked against each other: one format, the shapes above, a supported head_dim, zero codes in
/// V^T's padding keys and no NaN block scale (attention inputs must be finite).
pub fn qkv_from_quantized(
    q: &Quantized,
    k: &Quantized,
    vt: &Quantized,
    causal: bool,
) -> Result<QuantizedQkv> {
    let format = q.spec.format;
    for (name, t) in [("Q", q), ("K", k), ("V", vt)] {
        let numel = t.shape.iter().product::<usize>();
        ensure!(
            t.data.len() * 2 == numel && t.linear_scales().len() * t.spec.block() == numel,
            "{name}: {} code bytes and {} scales do not fit shape {:?}",
            t.data.len(),
            t.linear_scales().len(),
            t.shape
        );
    }
    for (name, t) in [("K", k), ("V", vt)] {
        ensure!(
            t.spec.format == format,
            "{name} is {}, Q is {}: Q, K and V must share one format",
            t.spec.format.name(),
            format.name()
        );
    }
    let shape = shape_of(&q.shape, &k.shape, causal)?;
    let (b, h, d, sk, skp) = (
        shape.batch,
        shape.kv_heads,
        shape.head_dim,
        shape.seq_k,
        shape.seq_k_padded(),
    );
    ensure!(
        vt.shape == [b, h, d, skp],
        "V is {:?}: V must be stored transposed, [B, Hkv, D, Skp] = [{b}, {h}, {d}, {skp}] (Skp \
         = Sk = {sk} rounded up to 32, the padding keys zero): quantize V [B, Hkv, Sk, D] with \
         `fp4probe quantize --attention-v`",
        vt.shape
    );
    check_padding_zero(vt, sk, skp)?;
    for (name, t) in [("Q", q), ("K", k), ("V", vt)] {
        check_no_nan_scale(name, t)?;
    }
    let ts = |t: &Quantized| t.tensor_scale.unwrap_or(1.0);
    Ok(QuantizedQkv {
        shape,
        format,
        q_tensor_scale: ts(q),
        k_tensor_scale: ts(k),
        v_tensor_scale: ts(vt),
        q_data: q.data.clone(),
        q_scale: q.linear_scales().into_owned(),
        k_data: k.data.clone(),
        k_scale: k.linear_scales().into_owned(),
        v_data: vt.data.clone(),
        v_scale: vt.linear_scales().into_owned(),
    })
}

/// The attention shape of Q [B, H, Sq, D] and K [B, Hkv, Sk, D]: four axes each, one batch and
/// head_dim, Hkv dividing H (grouped-query attention when smaller), a supported head_dim.
pub fn shape_of(q: &[usize], k: &[usize], causal: bool) -> Result<AttnShape> {
    let [b, h, sq, d] = axes("Q", "[B, H, Sq, D]", q)?;
    let [kb, kh, sk, kd] = axes("K", "[B, Hkv, Sk, D]", k)?;
    ensure!(
        [kb, kd] == [b, d],
        "K is {k:?}, Q is {q:?}: K must be [B, Hkv, Sk, D] with Q's B and D"
    );
    AttnShape::new(b, h, sq, sk, d, causal)
        .and_then(|s| s.with_kv_heads(kh))
        .with_context(|| format!("Q {q:?} and K {k:?}"))
}

/// The four axes of a tensor that must have four.
fn axes(name: &str, what: &str, shape: &[usize]) -> Result<[usize; 4]> {
    shape.try_into().map_err(|_| {
        anyhow::anyhow!(
            "{name} is {shape:?}: attention reads {what}, {} axes given",
            shape.len()
        )
    })
}

/// V^T's keys Sk..Skp are padding: the kernel runs them through P·V with P = 0, so their codes
/// must be zero (±0) for the result not to depend on them.
fn check_padding_zero(vt: &Quantized, sk: usize, skp: usize) -> Result<()> {
    if sk == skp {
        return Ok(());
    }
    for (row, bytes) in vt.data.chunks(skp / 2).enumerate() {
        for key in sk..skp {
            let code = (bytes[key / 2] >> (4 * (key % 2))) & 0x7;
            if code != 0 {
                bail!(
                    "V: row {row} of V^T holds a nonzero code at padding key {key} (Sk = {sk}, \
                     padded to {skp}): pad V^T with zeros"
                );
            }
        }
    }
    Ok(())
}

/// A NaN block scale (E8M0 0xFF, E4M3 0x7F/0xFF) marks a block that held NaN or Inf.
fn check_no_nan_scale(name: &str, t: &Quantized) -> Result<()> {
    let is_nan = |s: u8| match t.spec.format {
        Format::Mxfp4 => s == 0xff,
        Format::Nvfp4 => s & 0x7f == 0x7f,
    };
    if let Some(i) = t.linear_scales().iter().position(|&s| is_nan(s)) {
        bail!(
            "{name}: block {i} has the NaN scale (its input held NaN or Inf): attention \
             inputs must be finite"
        );
    }
    if let Some(s) = t.tensor_scale.filter(|s| !s.is_finite() || *s <= 0.0) {
        bail!("{name}: tensor scale {s} is not a positive finite number");
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::attention::prequant::{prequantize, qkv_spec, transpose_pad_v};

    #[test]
    fn vt_shapes_and_metadata_agree() {
        assert_eq!(vt_shape(&[2, 3, 40, 64]).unwrap(), [2, 3, 64, 64]);
        assert_eq!(vt_shape(&[33, 8]).unwrap(), [8, 64]);
        assert!(vt_shape(&[64]).is_err());
        assert!(vt_shape(&[2, 0, 64]).is_err());
        let meta: BTreeMap<String, String> = vt_metadata(&[2, 3, 40, 64]).into_iter().collect();
        assert_eq!(
            v_shape_of(&meta, &[2, 3, 64, 64]).unwrap(),
            Some(vec![2, 3, 40, 64])
        );
        assert_eq!(v_shape_of(&BTreeMap::new(), &[2, 3, 64, 64]).unwrap(), None);
        let err = v_shape_of(&meta, &[2, 3, 64, 96]).unwrap_err().to_string();
        assert_eq!(
            err,
            "metadata v_shape [2, 3, 40, 64] stands for V^T [2, 3, 64, 64], but 'data' is \
             [2, 3, 64, 96]"
        );
        let mut bad = meta.clone();
        bad.insert(V_SHAPE.into(), "[2, x]".into());
        assert!(format!("{:#}", v_shape_of(&bad, &[1]).unwrap_err()).contains("not a list"));
        bad.remove(V_SHAPE);
        assert!(
            v_shape_of(&bad, &[1])
                .unwrap_err()
                .to_string()
                .contains("missing")
        );
    }
    use crate::attention::{exact_qkv, gaussian};
    use crate::quant::{self, NvLevels, ScaleMode, Spec};

    fn quantized(spec: &Spec, shape: &[usize], x: &[f32]) -> Quantized {
        quant::quantize(spec, shape, x).unwrap().0
    }

    /// What `fp4probe quantize` makes of Q, K and V^T is what `prequantize` makes of Q, K, V.
    #[test]
    fn quantized_files_give_prequantize_bytes() {
        for format in [Format::Mxfp4, Format::Nvfp4] {
            let s = AttnShape::new(2, 3, 17, 45, 64, true).unwrap();
            let (q, k, v) = (
                gaussian(s.q_len(), 1),
                gaussian(s.kv_len(), 2),
                gaussian(s.kv_len(), 3),
            );
            let want = prequantize(&s, &q, &k, &v, false, format).unwrap();
            let spec = qkv_spec(format);
            let got = qkv_from_quantized(
                &quantized(&spec, &[2, 3, 17, 64], &q),
                &quantized(&spec, &[2, 3, 45, 64], &k),
                &quantized(&spec, &[2, 3, 64, 64], &transpose_pad_v(&s, &v)),
                true,
            )
            .unwrap();
            assert_eq!(got, want, "{format:?}");
        }
    }

    #[test]
    fn mismatches_are_refused_naming_the_operand() {
        let s = AttnShape::new(1, 2, 8, 40, 64, false).unwrap();
        let (q, k, v) = exact_qkv(&s, 5);
        let mx = Spec::mxfp4(ScaleMode::Floor);
        let nv = Spec::nvfp4(NvLevels::TwoLevel);
        let qq = quantized(&mx, &[1, 2, 8, 64], &q);
        let kk = quantized(&mx, &[1, 2, 40, 64], &k);
        let vt = transpose_pad_v(&s, &v);
        let vv = quantized(&mx, &[1, 2, 64, 64], &vt);
        assert!(qkv_from_quantized(&qq, &kk, &vv, false).is_ok());
        let err = |q: &Quantized, k: &Quantized, v: &Quantized| {
            format!("{:#}", qkv_from_quantized(q, k, v, false).unwrap_err())
        };
        let nv_k = quantized(&nv, &[1, 2, 40, 64], &k);
        assert_eq!(
            err(&qq, &nv_k, &vv),
            "K is nvfp4, Q is mxfp4: Q, K and V must share one format"
        );
        let k3 = quantized(&mx, &[2, 40, 64], &k);
        assert_eq!(
            err(&qq, &k3, &vv),
            "K is [2, 40, 64]: attention reads [B, Hkv, Sk, D], 3 axes given"
        );
        let k_heads = quantized(&mx, &[1, 4, 20, 64], &k);
        assert_eq!(
            err(&qq, &k_heads, &vv),
            "Q [1, 2, 8, 64] and K [1, 4, 20, 64]: 2 query heads do not split into groups over 4 \
             key/value heads: grouped-query attention needs the K/V heads to divide the Q heads"
        );
        let k_batch = quantized(&mx, &[2, 1, 40, 64], &k);
        assert!(err(&qq, &k_batch, &vv).starts_with("K is [2, 1, 40, 64], Q is [1, 2, 8, 64]"));
        let v_plain = quantized(&mx, &[1, 2, 40, 64], &v);
        assert!(err(&qq, &kk, &v_plain).starts_with(
            "V is [1, 2, 40, 64]: V must be stored transposed, [B, Hkv, D, Skp] = [1, 2, 64, 64]"
        ));
        let mut dirty = vt.clone();
        dirty[64 * 3 + 50] = 1.0; // head 0, channel 3, padding key 50
        let v_dirty = quantized(&mx, &[1, 2, 64, 64], &dirty);
        assert_eq!(
            err(&qq, &kk, &v_dirty),
            "V: row 3 of V^T holds a nonzero code at padding key 50 (Sk = 40, padded to 64): \
             pad V^T with zeros"
        );
        let mut nan_q = q.clone();
        nan_q[70] = f32::NAN;
        let q_nan = quantized(&mx, &[1, 2, 8, 64], &nan_q);
        assert_eq!(
            err(&q_nan, &kk, &vv),
            "Q: block 2 has the NaN scale (its input held NaN or Inf): attention inputs must \
             be finite"
        );
        let q_d = quantized(&mx, &[1, 2, 4, 128], &q);
        assert!(err(&q_d, &kk, &vv).starts_with("K is [1, 2, 40, 64], Q is [1, 2, 4, 128]"));
        let q_96 = quantized(&mx, &[1, 2, 6, 96], &vec![0.5; 2 * 6 * 96]);
        let k_96 = quantized(&mx, &[1, 2, 6, 96], &vec![0.5; 2 * 6 * 96]);
        assert!(
            err(&q_96, &k_96, &vv)
                .ends_with("head_dim 96 is not supported: the kernel supports 64, 128 and 256")
        );
    }

    /// Grouped-query operands: K and V^T with fewer heads than Q, as `prequantize` builds them.
    #[test]
    fn grouped_query_files_give_prequantize_bytes() {
        let s = AttnShape::new(1, 4, 9, 33, 64, false)
            .and_then(|s| s.with_kv_heads(2))
            .unwrap();
        let (q, k, v) = exact_qkv(&s, 8);
        let want = prequantize(&s, &q, &k, &v, false, Format::Nvfp4).unwrap();
        let spec = qkv_spec(Format::Nvfp4);
        let got = qkv_from_quantized(
            &quantized(&spec, &[1, 4, 9, 64], &q),
            &quantized(&spec, &[1, 2, 33, 64], &k),
            &quantized(&spec, &[1, 2, 64, 64], &transpose_pad_v(&s, &v)),
            false,
        )
        .unwrap();
        assert_eq!(got, want);
        assert_eq!(got.shape.group(), 2);
    }
}
