//! The attention problem's shape, its validation, and the causal rule every reference and the
//! kernel share.

use thiserror::Error;

/// Head dimensions the fused kernel is instantiated for (its tile shapes are fixed at compile
/// time per head_dim).
pub const SUPPORTED_HEAD_DIMS: [usize; 3] = [64, 128, 256];

/// The key axis is padded to a multiple of this (the MXFP4 block; NVFP4's 16 divides it):
/// Vᵀ rows and P blocks never straddle the end of the keys.
pub const BLOCK: usize = 32;

/// Why a shape is refused.
#[derive(Clone, Debug, PartialEq, Eq, Error)]
pub enum ShapeError {
    #[error("head_dim {0} is not supported: the kernel supports 64, 128 and 256")]
    HeadDim(usize),
    #[error("{0} must be at least 1")]
    Empty(&'static str),
    #[error("shape {0} is too large: its element count overflows usize")]
    Overflow(String),
    #[error(
        "{heads} query heads do not split into groups over {kv_heads} key/value heads: \
         grouped-query attention needs the K/V heads to divide the Q heads"
    )]
    KvHeads { heads: usize, kv_heads: usize },
    #[error("{name} has {got} elements, expected {expected} for {shape}")]
    Length {
        name: &'static str,
        got: usize,
        expected: usize,
        shape: String,
    },
}

/// Q is [batch, heads, seq_q, head_dim]; K and V are [batch, kv_heads, seq_k, head_dim].
/// With fewer K/V heads than Q heads (grouped-query attention) each K/V head serves
/// `group()` = heads / kv_heads consecutive Q heads: Q head h reads K/V head h / group, as
/// torch SDPA's `enable_gqa` and `repeat_interleave` pair them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AttnShape {
    pub batch: usize,
    pub heads: usize,
    /// Heads of K and V: `heads` (multi-head attention) or a divisor of it.
    pub kv_heads: usize,
    pub seq_q: usize,
    pub seq_k: usize,
    pub head_dim: usize,
    /// Top-left aligned causal mask (torch SDPA `is_causal=True`): query i sees keys j ≤ i.
    pub causal: bool,
}

impl std::fmt::Display for AttnShape {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "B={} H={}", self.batch, self.heads)?;
        if self.kv_heads != self.heads {
            write!(f, " Hkv={}", self.kv_heads)?;
        }
        write!(
            f,
            " Sq={} Sk={} D={}{}",
            self.seq_q,
            self.seq_k,
            self.head_dim,
            if self.causal { " causal" } else { "" }
        )
    }
}

impl AttnShape {
    /// A validated shape with as many K/V heads as Q heads.
    pub fn new(
        batch: usize,
        heads: usize,
        seq_q: usize,
        seq_k: usize,
        head_dim: usize,
        causal: bool,
    ) -> Result<AttnShape, ShapeError> {
        let s = AttnShape {
            batch,
            heads,
            kv_heads: heads,
            seq_q,
            seq_k,
            head_dim,
            causal,
        };
        s.validate()?;
        Ok(s)
    }

    /// The shape with `kv_heads` K/V heads (grouped-query attention when fewer than `heads`),
    /// validated.
    pub fn with_kv_heads(self, kv_heads: usize) -> Result<AttnShape, ShapeError> {
        let s = AttnShape { kv_heads, ..self };
        s.validate()?;
        Ok(s)
    }

    /// Every dimension at least 1, K/V heads dividing the Q heads, a supported head_dim, and
    /// every buffer the references and
    /// the kernel allocate (including V^T padded to 32 keys) countable in usize.
    pub fn validate(&self) -> Result<(), ShapeError> {
        for (name, v) in [
            ("batch", self.batch),
            ("heads", self.heads),
            ("kv_heads", self.kv_heads),
            ("seq_q", self.seq_q),
            ("seq_k", self.seq_k),
        ] {
            if v == 0 {
                return Err(ShapeError::Empty(name));
            }
        }
        if !self.heads.is_multiple_of(self.kv_heads) {
            return Err(ShapeError::KvHeads {
                heads: self.heads,
                kv_heads: self.kv_heads,
            });
        }
        if !SUPPORTED_HEAD_DIMS.contains(&self.head_dim) {
            return Err(ShapeError::HeadDim(self.head_dim));
        }
        let overflow = || ShapeError::Overflow(self.to_string());
        let bh = self.batch.checked_mul(self.heads).ok_or_else(overflow)?;
        let skp = self
            .seq_k
            .checked_next_multiple_of(BLOCK)
            .ok_or_else(overflow)?;
        // K/V have no more heads than Q, so Q's head count bounds theirs.
        for rows in [self.seq_q, skp] {
            bh.checked_mul(rows)
                .and_then(|n| n.checked_mul(self.head_dim))
                .ok_or_else(overflow)?;
        }
        Ok(())
    }

    /// seq_k rounded up to a multiple of 32: the key length of V^T and of each P row.
    pub fn seq_k_padded(&self) -> usize {
        self.seq_k.next_multiple_of(BLOCK)
    }

    /// batch · heads: the number of independent attention problems (one per Q head).
    pub fn bh(&self) -> usize {
        self.batch * self.heads
    }

    /// batch · kv_heads: the heads of K and V.
    pub fn kv_bh(&self) -> usize {
        self.batch * self.kv_heads
    }

    /// Q heads per K/V head: 1 for multi-head attention.
    pub fn group(&self) -> usize {
        self.heads / self.kv_heads
    }

    /// The K/V head (in 0..kv_bh) that problem `bh` (in 0..bh, batch-major) reads: with
    /// H = G·Hkv, b·H + h over G is b·Hkv + h / G.
    pub fn kv_head_of(&self, bh: usize) -> usize {
        bh / self.group()
    }

    /// Elements of Q and O: B·H·Sq·D.
    pub fn q_len(&self) -> usize {
        self.bh() * self.seq_q * self.head_dim
    }

    /// Elements of K and V: B·Hkv·Sk·D.
    pub fn kv_len(&self) -> usize {
        self.kv_bh() * self.seq_k * self.head_dim
    }

    /// Elements of the padded V^T: B·Hkv·D·Skp.
    pub fn vt_len(&self) -> usize {
        self.kv_bh() * self.head_dim * self.seq_k_padded()
    }

    /// How many keys query `i` sees; they are always the prefix 0..n. Causal rows see j ≤ i
    /// (top-left aligned), so with seq_q > seq_k the later rows see every key and no row is
    /// ever empty: row 0 sees key 0.
    pub fn visible_keys(&self, i: usize) -> usize {
        if self.causal {
            (i + 1).min(self.seq_k)
        } else {
            self.seq_k
        }
    }

    /// FLOPs of one forward pass by the FlashAttention convention: two matmuls (Q·Kᵀ and P·V)
    /// of 2·Sq·Sk·D each per (batch, head), i.e. 4·B·H·Sq·Sk·D; causal with Sq == Sk counts
    /// half, the convention's approximation of the triangle (the exact count is Sq(Sq+1)/2
    /// rows·keys). Softmax and quantization are not counted, so throughputs compare with the
    /// published FlashAttention numbers.
    pub fn flops(&self) -> f64 {
        let full = 4.0
            * self.batch as f64
            * self.heads as f64
            * self.seq_q as f64
            * self.seq_k as f64
            * self.head_dim as f64;
        if self.causal && self.seq_q == self.seq_k {
            full / 2.0
        } else {
            full
        }
    }

    /// Refuse a buffer whose length does not match what the shape says.
    pub fn check_len(
        &self,
        name: &'static str,
        got: usize,
        expected: usize,
    ) -> Result<(), ShapeError> {
        if got == expected {
            Ok(())
        } else {
            Err(ShapeError::Length {
                name,
                got,
                expected,
                shape: self.to_string(),
            })
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn head_dim_error_lists_the_supported_ones() {
        let e = AttnShape::new(1, 1, 8, 8, 96, false).unwrap_err();
        assert_eq!(e, ShapeError::HeadDim(96));
        assert_eq!(
            e.to_string(),
            "head_dim 96 is not supported: the kernel supports 64, 128 and 256"
        );
    }

    #[test]
    fn zero_dimensions_are_named() {
        assert_eq!(
            AttnShape::new(1, 1, 0, 8, 64, false).unwrap_err(),
            ShapeError::Empty("seq_q")
        );
        assert_eq!(
            AttnShape::new(0, 1, 1, 8, 64, false).unwrap_err(),
            ShapeError::Empty("batch")
        );
    }

    #[test]
    fn overflow_is_an_error_not_a_panic() {
        let e = AttnShape::new(usize::MAX / 2, 4, 1, 1, 64, false).unwrap_err();
        assert!(matches!(e, ShapeError::Overflow(_)), "{e}");
        let e = AttnShape::new(1, 1, 1, usize::MAX - 3, 64, false).unwrap_err();
        assert!(matches!(e, ShapeError::Overflow(_)), "{e}");
    }

    #[test]
    fn padding_and_visibility() {
        let s = AttnShape::new(1, 1, 40, 77, 64, true).unwrap();
        assert_eq!(s.seq_k_padded(), 96);
        assert_eq!(s.visible_keys(0), 1);
        assert_eq!(s.visible_keys(39), 40);
        let s = AttnShape::new(1, 1, 100, 10, 64, true).unwrap();
        assert_eq!(s.visible_keys(99), 10);
        assert_eq!(AttnShape { seq_k: 64, ..s }.seq_k_padded(), 64);
    }

    #[test]
    fn kv_heads_must_divide_the_query_heads() {
        let s = AttnShape::new(2, 32, 16, 40, 64, false).unwrap();
        let g = s.with_kv_heads(8).unwrap();
        assert_eq!((g.group(), g.kv_bh(), g.bh()), (4, 16, 64));
        assert_eq!(g.kv_len(), 16 * 40 * 64);
        assert_eq!(g.vt_len(), 16 * 64 * 64);
        assert_eq!(g.q_len(), s.q_len());
        // Batch 1, Q head 7 reads K/V head 1 of batch 1: 8 + 7 / 4.
        assert_eq!(g.kv_head_of(32 + 7), 9);
        assert_eq!(g.to_string(), "B=2 H=32 Hkv=8 Sq=16 Sk=40 D=64");
        assert_eq!(s.to_string(), "B=2 H=32 Sq=16 Sk=40 D=64");
        assert_eq!(g.flops(), s.flops());
        let e = s.with_kv_heads(12).unwrap_err();
        assert_eq!(
            e,
            ShapeError::KvHeads {
                heads: 32,
                kv_heads: 12
            }
        );
        assert_eq!(
            e.to_string(),
            "32 query heads do not split into groups over 12 key/value heads: grouped-query \
             attention needs the K/V heads to divide the Q heads"
        );
        assert_eq!(
            s.with_kv_heads(0).unwrap_err(),
            ShapeError::Empty("kv_heads")
        );
        assert_eq!(s.with_kv_heads(32).unwrap(), s);
    }

    #[test]
    fn flops_follow_the_flash_attention_convention() {
        let s = AttnShape::new(2, 3, 128, 256, 64, false).unwrap();
        assert_eq!(s.flops(), 4.0 * 2.0 * 3.0 * 128.0 * 256.0 * 64.0);
        // Causal with Sq != Sk is not halved; with Sq == Sk it is.
        assert_eq!(AttnShape { causal: true, ..s }.flops(), s.flops());
        let sq = AttnShape::new(1, 2, 1024, 1024, 128, true).unwrap();
        assert_eq!(sq.flops(), 2.0 * 2.0 * 1024.0 * 1024.0 * 128.0);
    }
}
