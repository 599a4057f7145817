//! Hardware tests of the CUDA backend, ignored unless asked for: on a GPU machine,
//! `cargo test --release --test gpu_backend -- --ignored`.
//!
//! For every catalog variant the device accepts, random exactly-representable inputs go through
//! both the GPU and the emulator, and the D words must be identical. Inputs are filled into
//! every register slot (no layout needed to place them), from each type's `exact_palette`, so
//! every product and sum is exact and both backends must agree bit for bit. With an f16
//! accumulator the palette shrinks to {-1, 0, 1} so that partial sums stay exact in f16 too.

use fp4probe::device::emulator::Emulator;
use fp4probe::device::{Backend, Batch};
use fp4probe::formats::ElemType;
use fp4probe::isa::{Operand, ScaleSelectors, Variant, probed};

#[path = "support/gpu.rs"]
mod gpu_support;
use gpu_support::gpu;

const EXPERIMENTS: usize = 8;

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
    fn pick<'a>(&mut self, xs: &'a [f64]) -> &'a f64 {
        &xs[(self.next() % xs.len() as u64) as usize]
    }
}

fn palette(v: &Variant, t: ElemType) -> Vec<f64> {
    let base = t.exact_palette();
    if v.d == ElemType::F16 {
        base.iter()
            .copied()
            .filter(|x| [-1.0, 0.0, 1.0].contains(x))
            .collect()
    } else {
        base.to_vec()
    }
}

fn random_batch(v: &Variant, rng: &mut Rng) -> Batch {
    let mut batch = Batch::zeroed(v, EXPERIMENTS);
    for op in [Operand::A, Operand::B, Operand::C] {
        let f = v.fragment(op);
        let pal = palette(v, f.elem);
        assert!(!pal.is_empty(), "{}: empty palette for {op:?}", v.id());
        for exp in 0..EXPERIMENTS {
            for lane in 0..32 {
                let words = batch.lane_words_mut(v, op, exp, lane);
                for reg in 0..f.regs {
                    for elem in 0..f.elems_per_reg() {
                        let x = *rng.pick(&pal);
                        let bits = f
                            .elem
                            .encode_exact(x)
                            .unwrap_or_else(|| panic!("{}: {x} not exact in {}", v.id(), f.elem));
                        f.insert(words, reg, elem, bits);
                    }
                }
            }
        }
    }
    batch
}

#[test]
#[ignore = "needs an NVIDIA GPU: run with `cargo test --release -- --ignored` on a GPU machine"]
fn gpu_matches_emulator_on_every_supported_variant() {
    let gpu = gpu("gpu_matches_emulator_on_every_supported_variant");
    let emu = Emulator::new();
    eprintln!("device: {:?}", gpu.info());
    let mut rng = Rng(0x5EED_F4F4);
    let (mut passed, mut skipped, mut failed) = (0, 0, Vec::new());
    for v in probed() {
        if let Err(why) = gpu.check_supported(&v) {
            eprintln!("SKIP {}: {why:#}", v.id());
            skipped += 1;
            continue;
        }
        let batch = random_batch(&v, &mut rng);
        let sel = ScaleSelectors::default();
        let want = emu.run(&v, sel, &batch).expect("emulator run");
        match gpu.run(&v, sel, &batch) {
            Err(e) => {
                eprintln!("FAIL {}: GPU error: {e:#}", v.id());
                failed.push(v.id());
            }
            Ok(got) if got == want => {
                eprintln!("ok   {}", v.id());
                passed += 1;
            }
            Ok(got) => {
                let diffs: Vec<_> = got
                    .iter()
                    .zip(&want)
                    .enumerate()
                    .filter(|(_, (g, w))| g != w)
                    .collect();
                let (i, (g, w)) = diffs[0];
                eprintln!(
                    "FAIL {}: {} of {} D words differ; first at word {i}: gpu {g:#010x}, emulator {w:#010x}",
                    v.id(),
                    diffs.len(),
                    want.len()
                );
                failed.push(v.id());
            }
        }
    }
    eprintln!(
        "{passed} passed, {skipped} skipped (unsupported on this device), {} failed",
        failed.len()
    );
    assert!(passed > 0, "no variant ran on the device");
    assert!(
        failed.is_empty(),
        "variants where GPU and emulator disagree: {failed:#?}"
    );
}

/// An sm_120a variant runs on sm_120 and nowhere else: refused with a message naming sm_120a
/// on any other device, accepted on sm_120.
#[test]
#[ignore = "needs an NVIDIA GPU: run with `cargo test --release -- --ignored` on a GPU machine"]
fn sm120a_variant_is_refused_on_other_devices() {
    let gpu = gpu("sm120a_variant_is_refused_on_other_devices");
    let cc = gpu
        .info()
        .compute_capability
        .expect("hardware reports a compute capability");
    let v = probed()
        .into_iter()
        .find(|v| v.min_target.to_string() == "sm_120a")
        .expect("catalog has sm_120a variants");
    if cc == (12, 0) {
        gpu.check_supported(&v)
            .unwrap_or_else(|e| panic!("{} refused on sm_120: {e:#}", v.id()));
        return;
    }
    let err = gpu
        .check_supported(&v)
        .expect_err("sm_120a variant accepted on a non-sm_120 device");
    let msg = format!("{err:#}");
    eprintln!("refused as expected: {msg}");
    assert!(msg.contains("sm_120a"), "{msg}");
    assert!(
        gpu.run(&v, ScaleSelectors::default(), &Batch::zeroed(&v, 1))
            .is_err()
    );
}
