//! Every `mma.sync` and `mma.sp` variant from sm_75 to sm_120a, built from the PTX ISA's
//! grammar.
//!
//! ptxas is the authority: `tests/ptxas_catalog.rs` assembles each entry for its minimum target
//! (and, for the dense variants the probes run, the probe kernel too), checks that the target
//! before it refuses the entry, and that near-miss spellings it rejects (`rejected.rs`) stay
//! rejected.

use super::{BitOp, BlockScale, Kind, Major, Shape, Sparsity, Target, Variant};
use crate::formats::ElemType::{self, *};

const fn shape(m: u32, n: u32, k: u32) -> Shape {
    Shape { m, n, k }
}

fn plain(s: Shape, a: ElemType, b: ElemType, c: ElemType, d: ElemType, min: Target) -> Variant {
    Variant {
        sparse: None,
        shape: s,
        alayout: Major::Row,
        blayout: Major::Col,
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

/// The catalog, in a stable order (the order `fp4probe catalog` prints): the `mma.sync`
/// variants the probes run, the m8n8 shapes they do not, then the sparse `mma.sp` variants.
pub fn catalog() -> Vec<Variant> {
    let mut v = dense();
    v.extend(m8n8());
    v.extend(sparse());
    v
}

/// The variants the lane-map probes (and the emulator, codegen and bench) run: the catalog
/// without what [`Variant::not_probed`] names.
pub fn probed() -> Vec<Variant> {
    catalog()
        .into_iter()
        .filter(|v| v.not_probed().is_none())
        .collect()
}

/// The dense variants the probes run, from sm_75 to sm_120a.
fn dense() -> Vec<Variant> {
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

/// The m8n8 shapes of the integer, b1 and f16 types (m8n8k4 f64 is among the probed ones).
/// Every one dates from sm_75 or before; `.and.popc` from sm_80.
fn m8n8() -> Vec<Variant> {
    let mut v = Vec::new();
    let sm75 = Target::sm(7, 5);
    // m8n8k4 with f16 takes either layout for A and for B, and any D type with an f16 C; ptxas
    // refuses D f16 with C f32 (rejected.rs).
    for alayout in [Major::Row, Major::Col] {
        for blayout in [Major::Row, Major::Col] {
            for (d, c) in [(F16, F16), (F32, F16), (F32, F32)] {
                let mut x = plain(shape(8, 8, 4), F16, F16, c, d, sm75);
                x.alayout = alayout;
                x.blayout = blayout;
                v.push(x);
            }
        }
    }
    for (s, pair) in [(shape(8, 8, 16), [S8, U8]), (shape(8, 8, 32), [S4, U4])] {
        for sat in [false, true] {
            for a in pair {
                for b in pair {
                    let mut x = plain(s, a, b, S32, S32, sm75);
                    x.satfinite = sat;
                    v.push(x);
                }
            }
        }
    }
    for (op, min) in [(BitOp::Xor, sm75), (BitOp::And, Target::sm(8, 0))] {
        let mut x = plain(shape(8, 8, 128), B1, B1, S32, S32, min);
        x.bitop = Some(op);
        v.push(x);
    }
    v
}

/// Every sparse variant, `mma.sp` forms first. A holds the kept half of a 2:4-sparse m×k
/// matrix; the shapes are twice the K of the dense ones.
fn sparse() -> Vec<Variant> {
    let mut v = Vec::new();
    let sp = |mut x: Variant, s: Sparsity| {
        x.sparse = Some(s);
        x
    };
    let sm80 = Target::sm(8, 0);
    for s in [Sparsity::Sp, Sparsity::OrderedMetadata] {
        // f16 with f16 or f32 accumulation (ptxas refuses mixed C and D types), bf16 and tf32.
        for k in [16, 32] {
            for acc in [F16, F32] {
                v.push(sp(plain(shape(16, 8, k), F16, F16, acc, acc, sm80), s));
            }
        }
        for k in [16, 32] {
            v.push(sp(plain(shape(16, 8, k), Bf16, Bf16, F32, F32, sm80), s));
        }
        for k in [8, 16] {
            v.push(sp(plain(shape(16, 8, k), Tf32, Tf32, F32, F32, sm80), s));
        }
        // FP8 without a kind: f32 accumulation on sm_89; f16 accumulation is
        // sp::ordered_metadata only, and on sm_120a only.
        for acc in [F32, F16] {
            if acc == F16 && s == Sparsity::Sp {
                continue;
            }
            let min = if acc == F16 {
                Target::sm_a(12, 0)
            } else {
                Target::sm(8, 9)
            };
            for a in [E4m3, E5m2] {
                for b in [E4m3, E5m2] {
                    v.push(sp(plain(shape(16, 8, 64), a, b, acc, acc, min), s));
                }
            }
        }
        for (ks, pair) in [([32, 64], [S8, U8]), ([64, 128], [S4, U4])] {
            for k in ks {
                for sat in [false, true] {
                    for a in pair {
                        for b in pair {
                            let mut x = plain(shape(16, 8, k), a, b, S32, S32, sm80);
                            x.satfinite = sat;
                            v.push(sp(x, s));
                        }
                    }
                }
            }
        }
    }
    // The sm_120a kinds are sp::ordered_metadata only (ptxas refuses `.sp` with a kind).
    let ordered = |x: Variant| sp(x, Sparsity::OrderedMetadata);
    let sm120a = Target::sm_a(12, 0);
    let f8f6f4 = [E4m3, E5m2, E3m2, E2m3, E2m1];
    for acc in [F32, F16] {
        for a in f8f6f4 {
            for b in f8f6f4 {
                let mut x = plain(shape(16, 8, 64), a, b, acc, acc, sm120a);
                x.kind = Kind::F8f6f4;
                v.push(ordered(x));
            }
        }
    }
    let scaled = |s: Shape, kind: Kind, a: ElemType, b: ElemType, vec: u32, stype: ElemType| {
        let mut x = plain(s, a, b, F32, F32, sm120a);
        x.kind = kind;
        x.scale = Some(BlockScale { vec, stype });
        ordered(x)
    };
    for a in f8f6f4 {
        for b in f8f6f4 {
            v.push(scaled(shape(16, 8, 64), Kind::Mxf8f6f4, a, b, 1, Ue8m0));
        }
    }
    v.push(scaled(shape(16, 8, 128), Kind::Mxf4, E2m1, E2m1, 2, Ue8m0));
    for (vec, st, ptx) in [(2, Ue8m0, (8, 7)), (4, Ue8m0, (9, 1)), (4, Ue4m3, (8, 7))] {
        let mut x = scaled(shape(16, 8, 128), Kind::Mxf4nvf4, E2m1, E2m1, vec, st);
        x.min_ptx = ptx;
        v.push(x);
    }
    v
}
