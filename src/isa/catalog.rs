//! Every `mma.sync` variant from sm_80 to sm_120a, built from the PTX ISA's grammar.
//!
//! ptxas is the authority: `tests/ptxas_catalog.rs` assembles each entry's probe kernel for its
//! minimum target, and near-miss spellings it rejects live in `rejected.rs`.

use super::{BitOp, BlockScale, Kind, Shape, Target, Variant};
use crate::formats::ElemType::{self, *};

const fn shape(m: u32, n: u32, k: u32) -> Shape {
    Shape { m, n, k }
}

fn plain(s: Shape, a: ElemType, b: ElemType, c: ElemType, d: ElemType, min: Target) -> Variant {
    Variant {
        shape: s,
        kind: Kind::Plain,
        a,
        b,
        c,
        d,
        scale: None,
        bitop: None,
        satfinite: false,
        min_target: min,
        min_ptx: super::DEFAULT_PTX,
    }
}

/// The catalog, in a stable order (the order `fp4probe catalog` prints).
pub fn catalog() -> Vec<Variant> {
    let mut v = Vec::new();
    let sm80 = Target::sm(8, 0);
    // Half precision: f16 or f32 accumulation (ptxas rejects mixed .dtype/.ctype for m16n8;
    // see rejected.rs). m16n8k8 dates from sm_75.
    for (s, min) in [
        (shape(16, 8, 8), Target::sm(7, 5)),
        (shape(16, 8, 16), sm80),
    ] {
        for acc in [F16, F32] {
            v.push(plain(s, F16, F16, acc, acc, min));
        }
    }
    for s in [shape(16, 8, 8), shape(16, 8, 16)] {
        v.push(plain(s, Bf16, Bf16, F32, F32, sm80));
    }
    for s in [shape(16, 8, 4), shape(16, 8, 8)] {
        v.push(plain(s, Tf32, Tf32, F32, F32, sm80));
    }
    v.push(plain(shape(8, 8, 4), F64, F64, F64, F64, sm80));
    for s in [shape(16, 8, 4), shape(16, 8, 8), shape(16, 8, 16)] {
        v.push(plain(s, F64, F64, F64, F64, Target::sm(9, 0)));
    }
    // Integers: .atype and .btype chosen independently, with and without .satfinite.
    for (s, pair) in [
        (shape(16, 8, 16), [S8, U8]),
        (shape(16, 8, 32), [S8, U8]),
        (shape(16, 8, 32), [S4, U4]),
        (shape(16, 8, 64), [S4, U4]),
    ] {
        for sat in [false, true] {
            for a in pair {
                for b in pair {
                    let mut x = plain(s, a, b, S32, S32, sm80);
                    x.satfinite = sat;
                    v.push(x);
                }
            }
        }
    }
    for s in [shape(16, 8, 128), shape(16, 8, 256)] {
        for op in [BitOp::And, BitOp::Xor] {
            let mut x = plain(s, B1, B1, S32, S32, sm80);
            x.bitop = Some(op);
            v.push(x);
        }
    }
    // FP8 without a kind (sm_89): f32 accumulation, and f16 accumulation since PTX 8.7.
    for s in [shape(16, 8, 16), shape(16, 8, 32)] {
        for acc in [F32, F16] {
            for a in [E4m3, E5m2] {
                for b in [E4m3, E5m2] {
                    v.push(plain(s, a, b, acc, acc, Target::sm(8, 9)));
                }
            }
        }
    }
    let f8f6f4 = [E4m3, E5m2, E3m2, E2m3, E2m1];
    let sm120a = Target::sm_a(12, 0);
    for acc in [F32, F16] {
        for a in f8f6f4 {
            for b in f8f6f4 {
                let mut x = plain(shape(16, 8, 32), a, b, acc, acc, sm120a);
                x.kind = Kind::F8f6f4;
                v.push(x);
            }
        }
    }
    let scaled = |s: Shape, kind: Kind, a: ElemType, b: ElemType, vec: u32, stype: ElemType| {
        let mut x = plain(s, a, b, F32, F32, sm120a);
        x.kind = kind;
        x.scale = Some(BlockScale { vec, stype });
        x
    };
    for a in f8f6f4 {
        for b in f8f6f4 {
            v.push(scaled(shape(16, 8, 32), Kind::Mxf8f6f4, a, b, 1, Ue8m0));
        }
    }
    v.push(scaled(shape(16, 8, 64), Kind::Mxf4, E2m1, E2m1, 2, Ue8m0));
    for (vec, st, ptx) in [(2, Ue8m0, (8, 7)), (4, Ue8m0, (9, 1)), (4, Ue4m3, (8, 7))] {
        let mut x = scaled(shape(16, 8, 64), Kind::Mxf4nvf4, E2m1, E2m1, vec, st);
        x.min_ptx = ptx;
        v.push(x);
    }
    v
}
