//! The documented `wgmma` layouts as formulas: the emulator runs them, the probes use them to
//! plan experiments (never to decide an answer), and the reports diff measurements against them.
//!
//! Register fragments (PTX ISA, "Register Fragments" of wgmma), for thread `t` of the
//! warpgroup, warp `w = t/32`, `g = (t%32)/4`, `q = t%4`:
//! - D (m64 × N): element `i` of the thread (`i = reg·E + e`, E elements per register):
//!   row = 16w + g + 8·((i/2) mod 2), col = 8·(i/4) + 2q + (i mod 2);
//! - A from registers (m64 × K): register `r`, element `e`, E elements per register:
//!   row = 16w + g + 8·(r mod 2), k = (r/2)·4E + q·E + e.
//!
//! Shared-memory tiles (the canonical layouts; T = 128 / element bits elements per 16 bytes,
//! W the swizzle width in bytes), byte offsets from the descriptor's start before swizzling:
//! - K-major, no swizzle: (mn mod 8)·16 + (mn/8)·SBO + (k/T)·LBO, plus (k mod T) elements;
//! - K-major, swizzle W: (mn mod 8)·W + (mn/8)·SBO + k elements (+ LBO per W bytes of k);
//! - MN-major, no swizzle: (mn mod T) elements + (mn/T)·SBO + (k mod 8)·16 + (k/8)·LBO;
//! - MN-major, swizzle W: (mn mod (W/16)·T) elements + (mn/((W/16)·T))·LBO + (k mod 8)·W
//!   + (k/8)·SBO.
//!
//! The swizzle then XORs address bits [4, 4+s) with bits [7, 7+s) of the absolute shared
//! address, s = log2(W/16), less the descriptor's base offset: the documentation sets the
//! field to start-address bits [7, 10) when the start is off the pattern's repeat, which reads
//! as "count the phase from the start". The study sweeps measure what the hardware does.

use super::desc::{Desc, Major, Swizzle};
use super::{M, RegFrag, WgVariant};
use crate::formats::ElemType;

/// (row, col) of D slot `index` in the documented layout.
pub fn d_coord(f: &RegFrag, index: usize) -> (u32, u32) {
    let (t, reg, e) = f.slot(index);
    let (w, g, q) = (t / 32, (t % 32) / 4, t % 4);
    let i = reg * f.elems_per_reg + e;
    (16 * w + g + 8 * ((i / 2) % 2), 8 * (i / 4) + 2 * q + i % 2)
}

/// (row, k) of A register slot `index` in the documented layout.
pub fn a_reg_coord(f: &RegFrag, index: usize) -> (u32, u32) {
    let (t, reg, e) = f.slot(index);
    let (w, g, q) = (t / 32, (t % 32) / 4, t % 4);
    let per = f.elems_per_reg;
    (
        16 * w + g + 8 * (reg % 2),
        (reg / 2) * 4 * per + q * per + e,
    )
}

/// XOR `pattern`'s swizzle into an absolute shared-memory byte address: address bits
/// [4, 4+s) take the XOR of the row phase, address bits [7, 7+s) less `base_offset`, mod 2^s
/// (s = 0..3 for none, 32B, 64B, 128B). The XOR reads only bits it leaves alone, so applying
/// it twice gives the address back.
pub fn swizzle(addr: u32, pattern: Swizzle, base_offset: u32) -> u32 {
    let mask = pattern.width() / 16 - 1;
    addr ^ (((addr >> 7).wrapping_sub(base_offset) & mask) << 4)
}

/// Where element (mn, k) of a tile of `bits`-bit elements sits: the absolute bit address
/// (from the 1024-aligned base) under the documented layout, with the XOR of `pattern` (the
/// descriptor's own swizzle unless a test tells the emulator otherwise).
pub fn element_bit_addr(
    major: Major,
    desc: &Desc,
    pattern: Swizzle,
    bits: u32,
    mn: u32,
    k: u32,
) -> u64 {
    let t = 128 / bits;
    let w = desc.swizzle.width();
    let (byte, bit) = match (major, desc.swizzle) {
        (Major::K, Swizzle::None) => {
            let within = (k % t) * bits;
            (
                (mn % 8) * 16 + (mn / 8) * desc.sbo + (k / t) * desc.lbo + within / 8,
                within % 8,
            )
        }
        (Major::K, _) => {
            let kb = k * bits;
            let row_bits = w * 8;
            (
                (mn % 8) * w
                    + (mn / 8) * desc.sbo
                    + (kb / row_bits) * desc.lbo
                    + (kb % row_bits) / 8,
                kb % 8,
            )
        }
        (Major::MN, Swizzle::None) => {
            let within = (mn % t) * bits;
            (
                within / 8 + (mn / t) * desc.sbo + (k % 8) * 16 + (k / 8) * desc.lbo,
                within % 8,
            )
        }
        (Major::MN, _) => {
            let per_row = w * 8 / bits;
            let within = (mn % per_row) * bits;
            (
                within / 8 + (mn / per_row) * desc.lbo + (k % 8) * w + (k / 8) * desc.sbo,
                within % 8,
            )
        }
    };
    let addr = swizzle(desc.start + byte, pattern, desc.base_offset);
    addr as u64 * 8 + bit as u64
}

/// The extent of a tile: one past the highest byte any element of an (mn × k) tile touches,
/// from the aligned base, under the documented layout (both swizzle patterns stay inside the
/// 16-byte chunk group they permute, so the unswizzled extent rounded up to 16 bounds both).
pub fn tile_end(major: Major, desc: &Desc, bits: u32, mn: u32, k: u32) -> u32 {
    let mut end = 0u64;
    for i in 0..mn {
        for j in 0..k {
            let a = element_bit_addr(major, desc, Swizzle::None, bits, i, j) + bits as u64;
            end = end.max(a.div_ceil(8));
        }
    }
    let end = (end as u32).next_multiple_of(16);
    // A swizzled row can move a chunk up to the end of its 128-byte group.
    if desc.swizzle == Swizzle::None {
        end
    } else {
        end.next_multiple_of(128)
    }
}

/// D = C + A·B exactly in f64 (b1: popcount of AND), A m64×K, B K×N, C m64×N, row-major.
pub fn gemm(v: &WgVariant, a: &[f64], b: &[f64], c: &[f64]) -> Vec<f64> {
    let (n, k) = (v.n as usize, v.k as usize);
    let mut d = c.to_vec();
    for i in 0..M as usize {
        for kk in 0..k {
            let av = a[i * k + kk];
            if av == 0.0 && v.and_popc {
                continue;
            }
            for j in 0..n {
                let bv = b[kk * n + j];
                d[i * n + j] += if v.and_popc {
                    f64::from(u8::from(av != 0.0 && bv != 0.0))
                } else {
                    av * bv
                };
            }
        }
    }
    d
}

/// Round an exact value to the D type's bits.
pub fn round_d(v: &WgVariant, x: f64) -> u64 {
    crate::gemm::round_to(v.d, x, v.satfinite)
}

/// Decode a D slot's bits to a value.
pub fn decode_d(t: ElemType, bits: u64) -> f64 {
    match t {
        ElemType::F32 => f32::from_bits(bits as u32) as f64,
        ElemType::S32 => bits as u32 as i32 as f64,
        other => other.decode(bits),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wgmma::find;

    fn desc(swizzle: Swizzle, lbo: u32, sbo: u32) -> Desc {
        Desc {
            start: 0,
            lbo,
            sbo,
            base_offset: 0,
            swizzle,
        }
    }

    #[test]
    fn documented_d_and_a_layouts_are_bijections() {
        for id in [
            "m64n256k16.f32.bf16.bf16.rs",
            "m64n8k16.f16.f16.f16.rs",
            "m64n24k8.f32.tf32.tf32.rs",
            "m64n32k32.f16.e4m3.e5m2.rs",
            "m64n48k256.s32.b1.b1.and.popc.rs",
        ] {
            let v = find(id).unwrap();
            for (f, coord) in [
                (v.d_frag(), d_coord as fn(&RegFrag, usize) -> (u32, u32)),
                (v.a_frag(), a_reg_coord),
            ] {
                let mut seen = vec![false; (f.rows * f.cols) as usize];
                for i in 0..f.slots() {
                    let (r, c) = coord(&f, i);
                    assert!(r < f.rows && c < f.cols, "{id}: slot {i} -> ({r}, {c})");
                    assert!(!std::mem::replace(
                        &mut seen[(r * f.cols + c) as usize],
                        true
                    ));
                }
            }
        }
    }

    #[test]
    fn canonical_tiles_pack_densely() {
        // bf16 K-major 64×16, no swizzle: core matrices along k at 128 B, row groups at 256 B.
        let d = desc(Swizzle::None, 128, 256);
        assert_eq!(tile_end(Major::K, &d, 16, 64, 16), 2048);
        assert_eq!(
            element_bit_addr(Major::K, &d, d.swizzle, 16, 9, 10) / 8,
            256 + 16 + 128 + 4
        );
        // 128B swizzle, K-major: row 1's first chunk moves to chunk 1.
        let d = desc(Swizzle::B128, 0, 1024);
        assert_eq!(
            element_bit_addr(Major::K, &d, d.swizzle, 16, 1, 0) / 8,
            128 + 16
        );
        assert_eq!(element_bit_addr(Major::K, &d, d.swizzle, 16, 0, 8) / 8, 16);
        // Every element of a 64×64 bf16 MN-major 128B tile has its own address.
        let d = desc(Swizzle::B128, 8192, 1024);
        let mut seen = std::collections::HashSet::new();
        for mn in 0..64 {
            for k in 0..16 {
                assert!(seen.insert(element_bit_addr(Major::MN, &d, d.swizzle, 16, mn, k)));
            }
        }
    }
}
