//! The shared-memory arrangement a probe runs under: both operands' major-ness and
//! descriptors, the packed tiles the probes start from, and the launch geometry they give.

use super::backend::Launch;
use super::desc::{Desc, Major, Swizzle};
use super::model::tile_end;
use super::{ASource, M, WgVariant};
use anyhow::{Context, Result, bail};
use serde::{Deserialize, Serialize};

/// The shared-memory arrangement one probe runs under.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Setting {
    pub a_major: Major,
    pub b_major: Major,
    pub a_desc: Desc,
    pub b_desc: Desc,
}

/// The descriptor of a densely packed tile of `mn × k` elements under `swizzle` and `major`,
/// starting at `start`: the canonical layout with the smallest strides that keep core
/// matrices apart.
pub fn packed_desc(major: Major, swizzle: Swizzle, bits: u32, mn: u32, k: u32, start: u32) -> Desc {
    let w = swizzle.width();
    let k_bytes = k * bits / 8;
    let (lbo, sbo) = match (major, swizzle) {
        // Core matrices (8 rows × 16 B) along k at 128 B; row groups after all of k.
        (Major::K, Swizzle::None) => (128, (k_bytes / 16).max(1) * 128),
        // Rows of W bytes; 8-row groups at 8·W. LBO steps W-byte chunks of k, of which a
        // single wgmma (32 bytes of k) needs one.
        (Major::K, _) => (8 * w * mn.div_ceil(8), 8 * w),
        // Core matrices (T elements of mn × 8 k) along mn at 128 B; k groups after all of mn.
        (Major::MN, Swizzle::None) => {
            let t = 128 / bits;
            ((mn.div_ceil(t)) * 128, 128)
        }
        // Rows of W bytes along mn, 8 rows of k; mn chunks at 8·W, k groups after all of mn.
        (Major::MN, _) => {
            let per_row = w * 8 / bits;
            (8 * w, mn.div_ceil(per_row) * 8 * w)
        }
    };
    Desc {
        start,
        lbo,
        sbo,
        base_offset: 0,
        swizzle,
    }
}

impl Setting {
    /// Both operands packed under one swizzle and major-ness, A at the aligned base.
    pub fn packed(v: &WgVariant, swizzle: Swizzle, a_major: Major, b_major: Major) -> Self {
        let bits = v.elem_bits();
        Setting {
            a_major,
            b_major,
            a_desc: packed_desc(a_major, swizzle, bits, M, v.a_k(), 0),
            b_desc: packed_desc(b_major, swizzle, bits, v.n, v.k, 0),
        }
    }

    /// The launch geometry: the A region from the aligned base to the end of its tile, the B
    /// region from the next 1024-byte boundary. B's descriptor start is moved there.
    pub fn launch(&self, v: &WgVariant) -> Launch {
        let bits = v.elem_bits();
        let a_bytes = if v.a_src == ASource::Ss {
            tile_end(self.a_major, &self.a_desc, bits, M, v.a_k())
        } else {
            0
        };
        let b_off = a_bytes.next_multiple_of(1024);
        let b_desc = Desc {
            start: b_off + self.b_desc.start,
            ..self.b_desc
        };
        let b_bytes = tile_end(self.b_major, &b_desc, bits, v.n, v.k) - b_off;
        Launch {
            a_desc: self.a_desc,
            a_major: self.a_major,
            b_desc,
            b_major: self.b_major,
            a_bytes,
            b_off,
            b_bytes,
            scale_d: false,
        }
    }

    /// Refuse settings the variant cannot take, naming the field.
    pub fn check(&self, v: &WgVariant) -> Result<()> {
        self.a_desc.check().context("A descriptor")?;
        self.b_desc.check().context("B descriptor")?;
        let mn = |m: Major| m == Major::MN;
        if !v.transposable() && (mn(self.b_major) || (v.a_src == ASource::Ss && mn(self.a_major))) {
            bail!(
                "{} takes K-major operands only (the transpose is for f16 and bf16)",
                v.id()
            );
        }
        let l = self.launch(v);
        if l.smem_bytes() > super::backend::MAX_SMEM {
            bail!(
                "the tiles under this descriptor reach byte {} of shared memory, past the {} a \
                 block has: lower LBO or SBO",
                l.smem_bytes(),
                super::backend::MAX_SMEM
            );
        }
        Ok(())
    }
}
