//! The bench kernel's operand values: distinct per (warp, chain, lane), non-zero, exact, small.

use super::kernel::{KernelShape, in_words_per_lane};
use crate::formats::ElemType;
use crate::isa::{Operand, Variant};

/// splitmix64: deterministic, no dependency.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
}

/// A and B element values (see the module doc): non-zero, exact, small.
pub fn ab_values(t: ElemType) -> &'static [f64] {
    match t {
        ElemType::E2m1 => &[0.5, -0.5],
        ElemType::S8 | ElemType::S4 => &[1.0, -1.0, 2.0, -2.0],
        ElemType::U8 | ElemType::U4 => &[1.0, 2.0],
        ElemType::B1 => &[1.0],
        _ => &[0.25, -0.25, 0.5, -0.5],
    }
}

/// Initial C element values.
pub fn c_values(t: ElemType) -> &'static [f64] {
    match t {
        ElemType::S32 => &[1.0, -1.0, 2.0, -2.0],
        _ => &[0.5, -0.5, 1.0, -1.0],
    }
}

/// Fill one lane's registers of `op` with values drawn from `values`.
fn fill(v: &Variant, op: Operand, values: &[u64], rng: &mut Rng, out: &mut [u32]) {
    let f = v.fragment(op);
    if f.elem == ElemType::B1 {
        // Random bits, never an all-zero word.
        for w in out.iter_mut() {
            *w = (rng.next() as u32) | 1;
        }
        return;
    }
    for reg in 0..f.regs {
        for elem in 0..f.elems_per_reg() {
            let code = values[(rng.next() % values.len() as u64) as usize];
            f.insert(out, reg, elem, code);
        }
    }
}

/// The bench kernel's input buffer for `records` (warp, chain) records of 32 lanes each, laid
/// out `[record][lane][word]` as [`bench_kernel`] reads it (record = warp × chains + chain):
/// every record draws its own values, so inputs differ between chains and between warps.
pub fn bench_inputs(v: &Variant, shape: KernelShape, records: usize, seed: u64) -> Vec<u32> {
    let codes = |t: ElemType, vals: &[f64]| -> Vec<u64> {
        vals.iter()
            .map(|&x| {
                t.encode_exact(x)
                    .unwrap_or_else(|| panic!("{x} is not exact in {t}"))
            })
            .collect()
    };
    let (fa, fb, fc) = (
        v.fragment(Operand::A),
        v.fragment(Operand::B),
        v.fragment(Operand::C),
    );
    let a_codes = codes(fa.elem, ab_values(fa.elem));
    let b_codes = codes(fb.elem, ab_values(fb.elem));
    let c_codes = codes(fc.elem, c_values(fc.elem));
    let scale_word = v
        .scale
        .map(|s| s.stype.one() as u32 * 0x0101_0101)
        .unwrap_or(0);
    let (wa, wb, wc) = (
        fa.words_per_lane() as usize,
        fb.words_per_lane() as usize,
        fc.words_per_lane() as usize,
    );
    let in_words = in_words_per_lane(v, shape);
    let mut out = vec![0u32; records * 32 * in_words];
    let mut rng = Rng(seed ^ 0x6265_6e63_6800_0000);
    for lane_words in out.chunks_mut(in_words) {
        let mut at = 0;
        for _ in 0..shape.sets_per_chain {
            fill(
                v,
                Operand::A,
                &a_codes,
                &mut rng,
                &mut lane_words[at..at + wa],
            );
            at += wa;
            fill(
                v,
                Operand::B,
                &b_codes,
                &mut rng,
                &mut lane_words[at..at + wb],
            );
            at += wb;
            if v.scale.is_some() {
                lane_words[at] = scale_word;
                lane_words[at + 1] = scale_word;
                at += 2;
            }
        }
        fill(
            v,
            Operand::C,
            &c_codes,
            &mut rng,
            &mut lane_words[at..at + wc],
        );
    }
    out
}

/// Whether every D element in `words` (`[record][lane][word]`) is finite.
pub fn all_finite(v: &Variant, words: &[u32]) -> bool {
    let f = v.fragment(Operand::D);
    if !f.elem.is_float() {
        return true;
    }
    let per_lane = f.words_per_lane() as usize;
    words.chunks(per_lane).all(|lane| {
        (0..f.regs).all(|r| {
            (0..f.elems_per_reg()).all(|e| f.elem.decode(f.extract(lane, r, e)).is_finite())
        })
    })
}
