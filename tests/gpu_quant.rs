//! Hardware tests of the quantization kernels, ignored unless asked for: on a GPU machine (with
//! libnvrtc), `cargo test --release --test gpu_quant -- --ignored`. The CUDA kernels must
//! equal, byte for byte:
//! - the independent vectors of `tests/vectors/quant/` (every case, each in its own input type);
//! - the CPU reference on random tensors of awkward sizes (tails that leave warps and thread
//!   blocks partly empty), every MXFP4 mode and both NVFP4 forms, with and without the search,
//!   from f32, bf16 and f16 inputs, including NaN/Inf blocks and tiny and huge magnitudes;
//!   two-level NVFP4 also with a given tensor amax (half the tensor's: saturating blocks);
//! - the CPU reference in the tiled scale layouts (128x4, 8x4), padding bytes included, on
//!   shapes whose rows do not fill a tile and whose K/block is not a multiple of 4;
//! - the CPU reference on bf16 two-level NVFP4 blocks whose elements sit on and beside the
//!   E2M1 midpoints of their quotients, under tensor scales for which the kernel divides those
//!   blocks and for which it encodes them without a division (`e2m1_mag22_nv2`).

use fp4probe::quant::cuda::{InType, QuantKernels, encode_input};
use fp4probe::quant::{self, NvLevels, Quantized, ScaleLayout, ScaleMode, Spec};
use fp4probe::tensorio::{self, DType};
use std::path::Path;

#[path = "support/gpu.rs"]
mod gpu_support;
use gpu_support::gpu;

fn same(name: &str, gpu: &Quantized, cpu: &Quantized) {
    assert_eq!(gpu.scale, cpu.scale, "{name}: scales");
    if let Some(i) = gpu.data.iter().zip(&cpu.data).position(|(a, b)| a != b) {
        panic!(
            "{name}: data byte {i}: GPU {:#04x}, CPU {:#04x}",
            gpu.data[i], cpu.data[i]
        );
    }
    assert_eq!(
        gpu.tensor_scale.map(f32::to_bits),
        cpu.tensor_scale.map(f32::to_bits),
        "{name}: tensor scale"
    );
}

#[test]
#[ignore = "needs an NVIDIA GPU: run with `cargo test --release -- --ignored` on a GPU machine"]
fn kernels_equal_the_independent_vectors() {
    let backend = gpu("kernels_equal_the_independent_vectors");
    let k = QuantKernels::load(&backend).unwrap_or_else(|e| panic!("{e:#}"));
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/vectors/quant");
    let mut n = 0;
    for entry in std::fs::read_dir(&dir).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_none_or(|e| e != "safetensors") {
            continue;
        }
        let st = tensorio::read_safetensors(&path).unwrap();
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        let spec = match (
            st.metadata["format"].as_str(),
            st.metadata["scale_mode"].as_str(),
        ) {
            ("nvfp4", "two_level") => Spec::nvfp4(NvLevels::TwoLevel),
            ("nvfp4", _) => Spec::nvfp4(NvLevels::OneLevel),
            (_, m) => Spec::mxfp4(<ScaleMode as clap::ValueEnum>::from_str(m, true).unwrap()),
        };
        let x = st.get("x").unwrap();
        let in_type = match x.dtype {
            DType::F32 => InType::F32,
            DType::BF16 => InType::Bf16,
            DType::F16 => InType::F16,
            d => panic!("{name}: input {d:?}"),
        };
        let xf = x.to_f32_vec().unwrap();
        let q = k
            .quantize(&spec, &x.shape, in_type, &x.bytes, &xf)
            .unwrap_or_else(|e| panic!("{name}: {e:#}"));
        let want = Quantized {
            spec,
            shape: x.shape.clone(),
            data: st.get("data").unwrap().as_u8().unwrap().to_vec(),
            scale: st.get("scale").unwrap().as_u8().unwrap().to_vec(),
            tensor_scale: st.get("tensor_scale").map(|t| t.to_f32_vec().unwrap()[0]),
        };
        same(&name, &q, &want);
        n += 1;
    }
    eprintln!("{n} vector files: GPU equals the vectors byte for byte");
    assert!(n >= 40);
}

/// xorshift values spanning many binades, with NaN/Inf sprinkled into some blocks.
fn awkward(n: usize, seed: u64, non_finite: bool) -> Vec<f32> {
    let mut s = seed | 1;
    let mut next = move || {
        s ^= s << 13;
        s ^= s >> 7;
        s ^= s << 17;
        s
    };
    (0..n)
        .map(|i| {
            let r = next();
            let mant = 1.0 + (r >> 40) as f32 / (1u64 << 24) as f32;
            // Row-wise exponent, so blocks see both tiny (subnormal) and huge magnitudes.
            let e = ((i / 64) as u64 * 37 % 60) as i32 - 30;
            let sign = if r & 1 == 1 { -1.0 } else { 1.0 };
            let v = sign * mant * 2f32.powi(e * 4) * if r % 7 == 0 { 0.1 } else { 1.0 };
            match (non_finite, r % 997) {
                (true, 0) => f32::NAN,
                (true, 1) => f32::INFINITY,
                _ => v,
            }
        })
        .collect()
}

#[test]
#[ignore = "needs an NVIDIA GPU: run with `cargo test --release -- --ignored` on a GPU machine"]
fn kernels_equal_the_cpu_reference_on_awkward_tensors() {
    let backend = gpu("kernels_equal_the_cpu_reference_on_awkward_tensors");
    let k = QuantKernels::load(&backend).unwrap_or_else(|e| panic!("{e:#}"));
    let mut specs = vec![
        Spec::mxfp4(ScaleMode::Floor),
        Spec::mxfp4(ScaleMode::Ceil),
        Spec::mxfp4(ScaleMode::Even),
        Spec::mxfp4(ScaleMode::Rceil),
        Spec::nvfp4(NvLevels::TwoLevel),
        Spec::nvfp4(NvLevels::OneLevel),
    ];
    for i in 0..specs.len() {
        let mut s = specs[i];
        s.search = true;
        specs.push(s);
    }
    // Rows × cols: one block; a warp and a bit; not a multiple of the 256-thread CUDA block;
    // a large one (several waves).
    let shapes = [[1usize, 32], [3, 96], [37, 160], [1000, 1056], [2048, 4096]];
    let mut cases = 0;
    for (si, shape) in shapes.iter().enumerate() {
        for in_type in [InType::F32, InType::Bf16, InType::F16] {
            for non_finite in [false, true] {
                let x = awkward(shape[0] * shape[1], 7 + si as u64 * 13, non_finite);
                let (bytes, xf) = encode_input(&x, in_type);
                for spec in &specs {
                    let name = format!(
                        "{} {} {:?} non-finite {non_finite}",
                        spec.describe(),
                        in_type.name(),
                        shape
                    );
                    let gpu = k
                        .quantize(spec, shape, in_type, &bytes, &xf)
                        .unwrap_or_else(|e| panic!("{name}: {e:#}"));
                    let (cpu, _) = quant::quantize(spec, shape, &xf).unwrap();
                    same(&name, &gpu, &cpu);
                    cases += 1;
                    if spec.two_level() {
                        // The amax given (half the tensor's, so the largest blocks saturate)
                        // and its pass skipped.
                        let given = Some(0.5 * quant::finite_amax(&xf));
                        let gpu = k
                            .quantize_with_amax(spec, shape, in_type, &bytes, &xf, given)
                            .unwrap_or_else(|e| panic!("{name} given amax: {e:#}"));
                        let (cpu, _) = quant::quantize_with_amax(spec, shape, &xf, given).unwrap();
                        same(&format!("{name} given amax"), &gpu, &cpu);
                        cases += 1;
                    }
                }
            }
        }
    }
    eprintln!("{cases} cases: GPU equals the CPU reference byte for byte");
}

#[test]
#[ignore = "needs an NVIDIA GPU: run with `cargo test --release -- --ignored` on a GPU machine"]
fn tiled_scale_layouts_equal_the_cpu_reference() {
    let backend = gpu("tiled_scale_layouts_equal_the_cpu_reference");
    let k = QuantKernels::load_layout(&backend, ScaleLayout::Tiled128x4)
        .unwrap_or_else(|e| panic!("{e:#}"));
    // Rows 1, 37, 200, 3·45; K/block 1..13; one big one (several waves, 64 row tiles).
    let shapes: [&[usize]; 6] = [
        &[1, 32],
        &[37, 160],
        &[200, 96],
        &[3, 45, 416],
        &[130, 32 * 13],
        &[8192, 1024],
    ];
    let mut cases = 0;
    for (si, shape) in shapes.iter().enumerate() {
        let n: usize = shape.iter().product();
        let x = awkward(n, 101 + si as u64, si % 2 == 1);
        for in_type in [InType::F32, InType::Bf16] {
            let (bytes, xf) = encode_input(&x, in_type);
            for base in [
                Spec::mxfp4(ScaleMode::Floor),
                Spec::nvfp4(NvLevels::TwoLevel),
                Spec::nvfp4(NvLevels::OneLevel),
            ] {
                for layout in [ScaleLayout::Tiled128x4, ScaleLayout::Tiled8x4] {
                    for search in [false, true] {
                        let spec = Spec {
                            scale_layout: layout,
                            search,
                            ..base
                        };
                        if layout.check_format(spec.format).is_err() || (search && n > 1 << 20) {
                            continue;
                        }
                        let name = format!("{} {} {shape:?}", spec.describe(), in_type.name());
                        let gpu = k
                            .quantize(&spec, shape, in_type, &bytes, &xf)
                            .unwrap_or_else(|e| panic!("{name}: {e:#}"));
                        let (cpu, _) = quant::quantize(&spec, shape, &xf).unwrap();
                        assert_eq!(gpu.scale.len(), spec.grid(shape).len(), "{name}");
                        same(&name, &gpu, &cpu);
                        cases += 1;
                    }
                }
            }
        }
    }
    eprintln!("{cases} cases: GPU tiled scales equal the CPU reference byte for byte");
}

/// The bf16 values next to `v` (f32 bits with the low 16 cleared, and one bf16 step up).
fn bf16_around(v: f32) -> [f32; 2] {
    let below = v.to_bits() & 0xFFFF_0000;
    [f32::from_bits(below), f32::from_bits(below + 0x1_0000)]
}

#[test]
#[ignore = "needs an NVIDIA GPU: run with `cargo test --release -- --ignored` on a GPU machine"]
fn two_level_bf16_midpoints_equal_the_cpu_reference() {
    let backend = gpu("two_level_bf16_midpoints_equal_the_cpu_reference");
    let k = QuantKernels::load(&backend).unwrap_or_else(|e| panic!("{e:#}"));
    let spec = Spec::nvfp4(NvLevels::TwoLevel);
    const MIDPOINTS: [f32; 7] = [0.25, 0.75, 1.25, 1.75, 2.5, 3.5, 5.0];
    let mut cases = 0;
    // Tensor scale 1 makes every midpoint times an E4M3 block scale a bf16 value (the blocks
    // the kernel divides); the others put most of them between bf16 values.
    for given in [2688.0f32, 2688.0 * 3.0, 1234.567, 0.037_19, 7.3e6, 2.2e-5] {
        let t = given / 2688.0;
        let mut x = Vec::new();
        for byte in 0x08u8..0x7E {
            let d = t * quant::codes::e4m3_to_f32(byte);
            // The block's largest element sets its scale byte; the others straddle midpoints.
            let mut block = vec![bf16_around(6.0 * d)[0]];
            for (i, m) in MIDPOINTS.iter().enumerate() {
                let [lo, hi] = bf16_around(m * d);
                block.extend([lo, if i % 2 == 0 { -hi } else { hi }]);
            }
            block.push(0.0);
            x.extend(block);
        }
        let shape = [x.len() / 16, 16];
        let (bytes, xf) = encode_input(&x, InType::Bf16);
        let name = format!("bf16 two-level NVFP4, tensor amax {given:e}");
        let gpu = k
            .quantize_with_amax(&spec, &shape, InType::Bf16, &bytes, &xf, Some(given))
            .unwrap_or_else(|e| panic!("{name}: {e:#}"));
        let (cpu, _) = quant::quantize_with_amax(&spec, &shape, &xf, Some(given)).unwrap();
        same(&name, &gpu, &cpu);
        cases += 1;
    }
    eprintln!("{cases} midpoint cases: GPU equals the CPU reference byte for byte");
}
