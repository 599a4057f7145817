//! Every `wgmma.mma_async` variant of sm_90a, dense and sparse, A from shared memory or from
//! registers.
//!
//! ptxas is the authority (`tests/ptxas_wgmma.rs` assembles every entry for sm_90a). The N it
//! accepts: every multiple of 8 up to 256 for the floating-point types; 8, 16, 24 and the
//! multiples of 16 from 32 to 256 for the integer and b1 types (the PTX ISA's list for the
//! integer types stops at 224, ptxas 13.5 takes 240 and 256 too).

use super::{ASource, WgVariant};
use crate::formats::ElemType::{self, *};

/// N values ptxas accepts for the floating-point variants.
pub fn float_ns() -> Vec<u32> {
    (1..=32).map(|i| 8 * i).collect()
}

/// N values ptxas accepts for the integer and b1 variants.
pub fn int_ns() -> Vec<u32> {
    let mut v = vec![8, 16, 24];
    v.extend((2..=16).map(|i| 16 * i));
    v
}

/// K of the dense instruction for an A/B type.
pub fn dense_k(t: ElemType) -> u32 {
    256 / t.value_bits()
}

/// The catalog in a stable order: dense before sparse, `ss` before `rs`, then by type and N.
pub fn catalog() -> Vec<WgVariant> {
    let mut types: Vec<(ElemType, ElemType, ElemType, bool, bool)> = Vec::new();
    for d in [F16, F32] {
        types.push((F16, F16, d, false, false));
    }
    types.push((Bf16, Bf16, F32, false, false));
    types.push((Tf32, Tf32, F32, false, false));
    for d in [F16, F32] {
        for a in [E4m3, E5m2] {
            for b in [E4m3, E5m2] {
                types.push((a, b, d, false, false));
            }
        }
    }
    for sat in [false, true] {
        for a in [S8, U8] {
            for b in [S8, U8] {
                types.push((a, b, S32, sat, false));
            }
        }
    }
    types.push((B1, B1, S32, false, true));
    let mut out = Vec::new();
    for sparse in [false, true] {
        for a_src in [ASource::Ss, ASource::Rs] {
            for &(a, b, d, satfinite, and_popc) in &types {
                // b1 has no sparse form.
                if sparse && a == B1 {
                    continue;
                }
                let ns = if a.is_float() { float_ns() } else { int_ns() };
                let k = dense_k(a) * if sparse { 2 } else { 1 };
                for n in ns {
                    out.push(WgVariant {
                        n,
                        k,
                        a,
                        b,
                        d,
                        a_src,
                        sparse,
                        satfinite,
                        and_popc,
                    });
                }
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_catalog_has_every_family() {
        let cat = catalog();
        let dense = cat.iter().filter(|v| !v.sparse).count();
        let sparse = cat.len() - dense;
        // Per A source: 12 float type sets × 32 N, 8 integer sets × 18 N, b1 × 18 N.
        assert_eq!(dense, 2 * (12 * 32 + 8 * 18 + 18));
        assert_eq!(sparse, 2 * (12 * 32 + 8 * 18));
        let ids: std::collections::HashSet<String> = cat.iter().map(|v| v.id()).collect();
        assert_eq!(ids.len(), cat.len(), "ids are unique");
        for id in [
            "m64n256k16.f32.bf16.bf16.ss",
            "m64n8k8.f32.tf32.tf32.rs",
            "m64n256k32.f16.e5m2.e4m3.ss",
            "m64n240k32.satfinite.s32.u8.s8.rs",
            "m64n256k256.s32.b1.b1.and.popc.ss",
            "sp.m64n128k64.f32.e4m3.e4m3.ss",
        ] {
            assert!(ids.contains(id), "{id}");
        }
    }
}
