//! The numerics probe measures, it does not assume: a model tensor core with known alignment
//! width, group size and rounding is run through the probe, which must recover them.

use fp4probe::device::emulator::Emulator;
use fp4probe::device::{Backend, Batch, DeviceInfo};
use fp4probe::isa::{Operand, ScaleSelectors, Variant, find};
use fp4probe::layout::SlotSpace;
use fp4probe::layout::documented::documented;
use fp4probe::probe::numerics::measure;

/// A tensor core model: products exact; within each group of `group` consecutive k, every
/// product is aligned to the group's largest exponent and truncated to `frac` fraction bits,
/// summed exactly, then added to the running f32 accumulator (C first) with `round`.
struct ModelCore {
    emu: Emulator,
    frac: i32,
    group: usize,
    round_to_zero: bool,
}

fn f32_round(x: f64, rtz: bool) -> f64 {
    let r = x as f32 as f64;
    if rtz && r.abs() > x.abs() {
        f32::from_bits((r as f32).to_bits() - 1) as f64
    } else {
        r
    }
}

impl Backend for ModelCore {
    fn info(&self) -> &DeviceInfo {
        self.emu.info()
    }
    fn check_supported(&self, _v: &Variant) -> anyhow::Result<()> {
        Ok(())
    }
    fn run(&self, v: &Variant, _s: ScaleSelectors, batch: &Batch) -> anyhow::Result<Vec<u32>> {
        let doc = documented(v);
        let (m, n, k) = (v.shape.m as usize, v.shape.n as usize, v.shape.k as usize);
        let read = |op: Operand, words: &[u32]| -> Vec<f64> {
            let f = v.fragment(op);
            let space = SlotSpace::of(&f);
            let wpl = f.words_per_lane() as usize;
            let mut mat = vec![0.0; (f.rows * f.cols) as usize];
            for (i, c) in doc.operand(op).iter().enumerate() {
                let s = space.slot(i);
                let w = &words[s.lane as usize * wpl..(s.lane as usize + 1) * wpl];
                mat[(c.row * f.cols + c.col) as usize] = f.elem.decode(f.extract(w, s.reg, s.elem));
            }
            mat
        };
        let fd = v.fragment(Operand::D);
        let dspace = SlotSpace::of(&fd);
        let per = |op: Operand| v.fragment(op).words_per_lane() as usize * 32;
        let mut out = vec![0u32; batch.experiments * per(Operand::D)];
        for e in 0..batch.experiments {
            let a = read(
                Operand::A,
                &batch.a[e * per(Operand::A)..(e + 1) * per(Operand::A)],
            );
            let b = read(
                Operand::B,
                &batch.b[e * per(Operand::B)..(e + 1) * per(Operand::B)],
            );
            let c = read(
                Operand::C,
                &batch.c[e * per(Operand::C)..(e + 1) * per(Operand::C)],
            );
            let mut d = vec![0.0; m * n];
            for i in 0..m {
                for j in 0..n {
                    let mut acc = c[i * n + j];
                    for g in (0..k).step_by(self.group) {
                        let p: Vec<f64> = (g..g + self.group)
                            .map(|kk| a[i * k + kk] * b[kk * n + j])
                            .collect();
                        let emax = p
                            .iter()
                            .filter(|x| **x != 0.0)
                            .map(|x| x.abs().log2().floor() as i32)
                            .max();
                        let Some(emax) = emax else { continue };
                        let q = 2f64.powi(emax - self.frac);
                        let sum: f64 = p.iter().map(|x| (x / q).trunc() * q).sum();
                        acc = f32_round(acc + sum, self.round_to_zero);
                    }
                    d[i * n + j] = acc;
                }
            }
            let wpl = fd.words_per_lane() as usize;
            let dw = &mut out[e * per(Operand::D)..(e + 1) * per(Operand::D)];
            for (idx, coord) in doc.d.iter().enumerate() {
                let s = dspace.slot(idx);
                let bits = (d[coord.row as usize * n + coord.col as usize] as f32).to_bits() as u64;
                fd.insert(
                    &mut dw[s.lane as usize * wpl..(s.lane as usize + 1) * wpl],
                    s.reg,
                    s.elem,
                    bits,
                );
            }
        }
        Ok(out)
    }
}

#[test]
fn recovers_a_wide_truncating_core() {
    let v = find("m16n8k16.f32.bf16.bf16.f32").unwrap();
    let core = ModelCore {
        emu: Emulator::new(),
        frac: 26,
        group: 4,
        round_to_zero: true,
    };
    let n = measure(&core, &v, &documented(&v)).unwrap();
    assert_eq!(n.products_exact, Some(true));
    assert_eq!(
        n.fraction_bits_after_alignment,
        Some(26),
        "{:#?}",
        n.findings
    );
    assert!(!n.fraction_bits_is_lower_bound);
    assert_eq!(
        n.accumulation_rounding.as_deref(),
        Some("rtz"),
        "{:#?}",
        n.findings
    );
    assert_eq!(n.terms_per_rounding, Some(4), "{:#?}", n.findings);
    assert_eq!(n.rounding_group, Some(vec![0, 1, 2, 3]));
}

#[test]
fn recovers_a_narrow_core_with_larger_groups() {
    let v = find("m16n8k16.f32.f16.f16.f32").unwrap();
    let core = ModelCore {
        emu: Emulator::new(),
        frac: 20,
        group: 8,
        round_to_zero: false,
    };
    let n = measure(&core, &v, &documented(&v)).unwrap();
    assert_eq!(
        n.fraction_bits_after_alignment,
        Some(20),
        "{:#?}",
        n.findings
    );
    // Alignment truncation is the rounding that decides at 20 bits: toward zero.
    assert_eq!(
        n.accumulation_rounding.as_deref(),
        Some("rtz"),
        "{:#?}",
        n.findings
    );
    assert_eq!(n.terms_per_rounding, Some(8), "{:#?}", n.findings);
}

#[test]
fn the_emulator_reports_its_own_model() {
    let v = find("m16n8k8.f32.tf32.tf32.f32").unwrap();
    let n = measure(&Emulator::new(), &v, &documented(&v)).unwrap();
    // Products exact, summed in f64 (52 bits), rounded once to f32 to nearest even.
    assert_eq!(n.products_exact, Some(true));
    assert_eq!(n.fraction_bits_after_alignment, Some(52));
    assert_eq!(n.accumulation_rounding.as_deref(), Some("rne"));
    assert_eq!(n.subnormal_inputs.as_deref(), Some("kept"));
    assert_eq!(n.nan_output_bits.as_deref(), Some("0x7fc00000"));
    let s8 = find("m16n8k32.satfinite.s32.s8.s8.s32").unwrap();
    assert_eq!(
        measure(&Emulator::new(), &s8, &documented(&s8))
            .unwrap()
            .integer_overflow
            .as_deref(),
        Some("saturates")
    );
    let x = find("m16n8k128.s32.b1.b1.s32.xor.popc").unwrap();
    assert_eq!(
        measure(&Emulator::new(), &x, &documented(&x))
            .unwrap()
            .integer_overflow
            .as_deref(),
        Some("wraps")
    );
}
