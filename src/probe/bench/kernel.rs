//! The bench kernel's PTX: `probes/bench.ptx` filled for one variant and one loop shape.

use crate::isa::{Operand, OperandRegs, ScaleSelectors, Target, Variant};
use serde::{Deserialize, Serialize};
use std::fmt::Write;

const BENCH_TEMPLATE: &str = include_str!("../../../probes/bench.ptx");

/// The kernel entry point's name.
pub const BENCH_ENTRY: &str = "fp4probe_bench";

/// u64 words each warp writes to the timing buffer: cycles, nanoseconds, smid, 0.
pub const TIMING_WORDS: usize = 4;

/// The shape of a bench kernel's loop body.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct KernelShape {
    /// Independent accumulator chains per warp.
    pub chains: u32,
    /// Dependent `mma.sync` per chain per loop iteration.
    pub unroll: u32,
    /// A/B operand sets per chain: 1 (every step of a chain reuses its A and B), or `unroll`
    /// (every `mma.sync` of the loop body has its own A and B; used where ptxas would otherwise
    /// merge identical A·B products, see [`KernelShape::distinct`]).
    pub sets_per_chain: u32,
}

impl KernelShape {
    pub fn new(chains: u32, unroll: u32) -> Self {
        KernelShape {
            chains,
            unroll,
            sets_per_chain: 1,
        }
    }

    /// Every `mma.sync` of the body gets its own A and B, with the body kept at `unroll` (or
    /// `chains`, if more) instructions so the register cost stays that of `unroll` operand sets.
    pub fn distinct(chains: u32, unroll: u32) -> Self {
        let u = (unroll / chains).max(1);
        KernelShape {
            chains,
            unroll: u,
            sets_per_chain: u,
        }
    }

    /// `mma.sync` per loop iteration.
    pub fn body_mmas(&self) -> u32 {
        self.chains * self.unroll
    }
}

/// 32-bit words of one A/B operand set per lane: A, B (f64 registers as two words), then one
/// scale word each for A and B where the variant is block-scaled.
pub fn set_words_per_lane(v: &Variant) -> usize {
    let w = |op| v.fragment(op).words_per_lane() as usize;
    w(Operand::A) + w(Operand::B) + if v.scale.is_some() { 2 } else { 0 }
}

/// 32-bit words per lane of one chain's input record: its A/B operand sets, then C. f64
/// operands are an even number of words, so their registers stay 8-byte aligned.
pub fn in_words_per_lane(v: &Variant, shape: KernelShape) -> usize {
    shape.sets_per_chain as usize * set_words_per_lane(v)
        + v.fragment(Operand::C).words_per_lane() as usize
}

/// 32-bit words per lane of one chain's output (D).
pub fn out_words_per_lane(v: &Variant) -> usize {
    v.fragment(Operand::D).words_per_lane() as usize
}

/// The target to assemble the bench kernel of `v` for on a device of compute capability `cc`:
/// the variant's own arch-specific target where it has one (sm_120a), else the device's plain
/// target (sm_90), so the SASS is the device's own.
pub fn bench_target(v: &Variant, cc: (u32, u32)) -> Target {
    if v.min_target.arch_specific {
        v.min_target
    } else {
        Target::sm(cc.0, cc.1)
    }
}

/// The bench kernel of `v` for `target` with the given loop shape.
pub fn bench_kernel(v: &Variant, target: Target, shape: KernelShape) -> String {
    let KernelShape {
        chains,
        unroll,
        sets_per_chain: sets,
    } = shape;
    assert!(
        chains >= 1 && unroll >= 1 && sets >= 1,
        "chains, unroll and operand sets must be at least 1"
    );
    let n_regs = |op: Operand| v.fragment(op).regs;
    let names = |p: String, n: u32| -> Vec<String> { (0..n).map(|i| format!("{p}_{i}")).collect() };
    // Chain c: accumulators %d<c>_<i> (C and D share registers: the instruction accumulates in
    // place); operand set s of chain c: %a<c>s<s>_<i>, %b<c>s<s>_<i>, %sa<c>s<s>, %sb<c>s<s>.
    let d_regs: Vec<Vec<String>> = (0..chains)
        .map(|c| names(format!("%d{c}"), n_regs(Operand::D)))
        .collect();
    let set_regs = |c: u32, s: u32| -> OperandRegs {
        OperandRegs {
            a: names(format!("%a{c}s{s}"), n_regs(Operand::A)),
            b: names(format!("%b{c}s{s}"), n_regs(Operand::B)),
            c: d_regs[c as usize].clone(),
            d: d_regs[c as usize].clone(),
            scale_a: format!("%sa{c}s{s}"),
            scale_b: format!("%sb{c}s{s}"),
            ..Default::default()
        }
    };
    let all_sets: Vec<(u32, u32, OperandRegs)> = (0..chains)
        .flat_map(|c| (0..sets).map(move |s| (c, s)))
        .map(|(c, s)| (c, s, set_regs(c, s)))
        .collect();

    let mut decls = String::new();
    let join = |it: &mut dyn Iterator<Item = String>| it.collect::<Vec<_>>().join(", ");
    let a: String = join(&mut all_sets.iter().flat_map(|(_, _, r)| r.a.clone()));
    let b: String = join(&mut all_sets.iter().flat_map(|(_, _, r)| r.b.clone()));
    let d: String = join(&mut d_regs.iter().flatten().cloned());
    writeln!(decls, "    .reg .{} {a};", v.reg_type(Operand::A)).unwrap();
    writeln!(decls, "    .reg .{} {b};", v.reg_type(Operand::B)).unwrap();
    writeln!(decls, "    .reg .{} {d};", v.reg_type(Operand::D)).unwrap();
    if v.scale.is_some() {
        let sc = join(
            &mut all_sets
                .iter()
                .flat_map(|(_, _, r)| [r.scale_a.clone(), r.scale_b.clone()]),
        );
        writeln!(decls, "    .reg .b32 {sc};").unwrap();
    }

    let in_words = in_words_per_lane(v, shape) as u32;
    let set_bytes = set_words_per_lane(v) as u32 * 4;
    let mut loads = String::new();
    writeln!(loads, "    ld.param.u64 %ptr, [p_in];").unwrap();
    writeln!(loads, "    cvta.to.global.u64 %ptr, %ptr;").unwrap();
    writeln!(loads, "    mul.lo.u64 %off, %slot, {};", in_words * 4).unwrap();
    writeln!(loads, "    add.u64 %ptr, %ptr, %off;").unwrap();
    let mut load = |ty: &str, reg: &str, byte: u32| {
        writeln!(loads, "    ld.global.{ty} {reg}, [%ptr+{byte}];").unwrap();
    };
    for c in 0..chains {
        // Chain c of this lane starts c × 32 lanes further on.
        let record = c * 32 * in_words * 4;
        for (_, s, r) in all_sets.iter().filter(|(cc, _, _)| *cc == c) {
            let mut byte = record + s * set_bytes;
            for (op, list) in [(Operand::A, &r.a), (Operand::B, &r.b)] {
                for name in list {
                    load(v.reg_type(op), name, byte);
                    byte += v.fragment(op).reg_bits / 8;
                }
            }
            if v.scale.is_some() {
                load("b32", &r.scale_a, byte);
                load("b32", &r.scale_b, byte + 4);
            }
        }
        let mut byte = record + sets * set_bytes;
        for name in &d_regs[c as usize] {
            load(v.reg_type(Operand::C), name, byte);
            byte += v.fragment(Operand::C).reg_bits / 8;
        }
    }

    let mut body = String::new();
    for u in 0..unroll {
        for c in 0..chains {
            let r = &all_sets[(c * sets + u % sets) as usize].2;
            writeln!(body, "    {}", v.instruction(r, ScaleSelectors::default())).unwrap();
        }
    }

    let fd = v.fragment(Operand::D);
    let out_words = out_words_per_lane(v) as u32;
    let mut stores = String::new();
    writeln!(stores, "    ld.param.u64 %ptr, [p_out];").unwrap();
    writeln!(stores, "    cvta.to.global.u64 %ptr, %ptr;").unwrap();
    writeln!(stores, "    mul.lo.u64 %off, %slot, {};", out_words * 4).unwrap();
    writeln!(stores, "    add.u64 %ptr, %ptr, %off;").unwrap();
    for (c, regs) in d_regs.iter().enumerate() {
        let base = c as u32 * 32 * out_words * 4;
        for (i, name) in regs.iter().enumerate() {
            writeln!(
                stores,
                "    st.global.{} [%ptr+{}], {name};",
                v.reg_type(Operand::D),
                base + i as u32 * fd.reg_bits / 8
            )
            .unwrap();
        }
    }

    BENCH_TEMPLATE
        .replace("{{PTX_VERSION}}", &v.ptx_version())
        .replace("{{TARGET}}", &target.to_string())
        .replace("{{CHAINS_X32}}", &(chains * 32).to_string())
        .replace("{{CHAINS}}", &chains.to_string())
        .replace("{{UNROLL}}", &unroll.to_string())
        .replace("{{SETS}}", &sets.to_string())
        .replace("{{DECLS}}", decls.trim_end())
        .replace("{{LOADS}}", loads.trim_end())
        .replace("{{BODY}}", body.trim_end())
        .replace("{{STORES}}", stores.trim_end())
}
