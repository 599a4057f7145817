//! CPU tests of the fragment probe: the emulator reproduces the documented layout of every
//! catalog variant and inference recovers it exactly; a randomly permuted layout is recovered up
//! to the permutation symmetry, and exactly once the labelling convention is applied.

use fp4probe::device::emulator::Emulator;
use fp4probe::isa::{Operand, Variant, find, probed};
use fp4probe::layout::convention::Structure;
use fp4probe::layout::documented::documented;
use fp4probe::layout::{Coord, Layout, SlotSpace};
use fp4probe::probe::fragment::{SplitMix, probe};

#[test]
fn inference_recovers_every_documented_layout_exactly() {
    let emu = Emulator::new();
    let mut failures = Vec::new();
    for v in probed() {
        let out = probe(&emu, &v, 7).expect("probe runs");
        match &out.layout {
            Ok(l)
                if *l == documented(&v) && out.validation.as_ref().is_some_and(|x| x.passed()) => {}
            Ok(_) => failures.push(format!(
                "{}: recovered layout differs or validation failed",
                v.id()
            )),
            Err(e) => failures.push(format!("{}: {e}", v.id())),
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// A random bijection of each operand's slots onto its matrix: an arbitrary "hardware".
fn permuted(v: &Variant, rng: &mut SplitMix) -> Layout {
    let doc = documented(v);
    let shuffle = |op: Operand, rng: &mut SplitMix| -> Vec<Coord> {
        let mut cells: Vec<Coord> = doc.operand(op).to_vec();
        for i in (1..cells.len()).rev() {
            let j = (rng.next_u64() % (i as u64 + 1)) as usize;
            cells.swap(i, j);
        }
        cells
    };
    Layout {
        a: shuffle(Operand::A, rng),
        b: shuffle(Operand::B, rng),
        c: shuffle(Operand::C, rng),
        d: shuffle(Operand::D, rng),
    }
}

#[test]
fn inference_recovers_random_permuted_layouts() {
    let ids = [
        "m16n8k16.f32.f16.f16.f32",
        "m16n8k16.f16.f16.f16.f16",
        "m8n8k4.f64.f64.f64.f64",
        "m16n8k128.s32.b1.b1.s32.xor.popc",
        "m16n8k32.kind::mxf8f6f4.block_scale.scale_vec::1X.f32.e2m1.e2m1.f32.ue8m0",
        "m16n8k64.kind::mxf4nvf4.block_scale.scale_vec::4X.f32.e2m1.e2m1.f32.ue4m3",
    ];
    let mut rng = SplitMix(2026);
    for id in ids {
        let v = find(id).unwrap();
        for trial in 0..3 {
            let truth = permuted(&v, &mut rng);
            let emu = Emulator::new().with_layout(&v, truth.clone());
            let out = probe(&emu, &v, trial).unwrap();
            let got = out
                .layout
                .unwrap_or_else(|e| panic!("{id} trial {trial}: {e}"));
            let (m, n, k) = (v.shape.m as usize, v.shape.n as usize, v.shape.k as usize);
            let truth_structure = Structure::of(&truth, m, n, k);
            // Up to the symmetry: same partitions into rows, columns and k, same C → D.
            assert!(
                out.structure
                    .as_ref()
                    .unwrap()
                    .same_up_to_relabelling(&truth_structure),
                "{id} trial {trial}"
            );
            // Exactly, once the convention labels both.
            let a_space = SlotSpace::of(&v.fragment(Operand::A));
            let canonical = truth_structure.label(Some(&documented(&v)), |s| {
                let slot = a_space.slot(s);
                (slot.lane, slot.reg, slot.elem)
            });
            assert_eq!(got, canonical, "{id} trial {trial}");
            assert!(
                out.validation.unwrap().passed(),
                "{id} trial {trial}: validation through inferred maps"
            );
            // The permuted layout itself generally differs from the recovered labels: the
            // symmetry is real, and the test would be vacuous if it did not.
            if trial == 0 {
                assert_ne!(got, truth, "{id}: a random layout happened to be canonical");
            }
        }
    }
}

#[test]
fn a_layout_that_breaks_the_mma_is_reported_as_failure() {
    // Hardware with a stuck output (lane 5's first D register never updates) must be
    // reported as a failure, with the raw observations kept.
    struct Broken(Emulator);
    impl fp4probe::device::Backend for Broken {
        fn info(&self) -> &fp4probe::device::DeviceInfo {
            self.0.info()
        }
        fn check_supported(&self, v: &Variant) -> anyhow::Result<()> {
            self.0.check_supported(v)
        }
        fn run(
            &self,
            v: &Variant,
            s: fp4probe::isa::ScaleSelectors,
            b: &fp4probe::device::Batch,
        ) -> anyhow::Result<Vec<u32>> {
            let mut d = self.0.run(v, s, b)?;
            let w = v.fragment(Operand::D).words_per_lane() as usize;
            for e in 0..b.experiments {
                d[(e * 32 + 5) * w] = 0;
            }
            Ok(d)
        }
    }
    let v = find("m16n8k16.f32.bf16.bf16.f32").unwrap();
    let out = probe(&Broken(Emulator::new()), &v, 1).unwrap();
    let why = out
        .layout
        .expect_err("a stuck output cannot give a valid map");
    assert!(
        why.contains("row") || why.contains("column") || why.contains("D slot"),
        "{why}"
    );
    assert!(!out.raw.a_lit.is_empty(), "raw observations are kept");
}
