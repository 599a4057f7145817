use fp4probe::attention::*;
use fp4probe::quant::{self, NvLevels, ScaleMode, Spec};

fn fq(spec: &Spec, rows: usize, cols: usize, x: &[f32]) -> Vec<f32> {
    let (q, _) = quant::quantize(spec, &[rows, cols], x).unwrap();
    quant::dequantize(&q)
}

fn run(name: &str, qkv_spec: Spec, p_mode: &str, outl: bool, smooth: bool) {
    let shape = AttnShape::new(1, 4, 512, 512, 128, false).unwrap();
    let (d, s) = (128usize, 512usize);
    let q = gaussian(shape.q_len(), 1);
    let mut k = gaussian(shape.kv_len(), 2);
    if outl {
        outlier_k(&mut k, &shape, &[3, 17, 50], 8.0);
    }
    let kq = if smooth {
        fp4probe::attention::prequant::smooth_k(&shape, &k).0
    } else {
        k.clone()
    };
    let v = gaussian(shape.kv_len(), 3);
    let want = reference_f64(&shape, &q, &k, &v);
    let qd = fq(&qkv_spec, 4 * s, d, &q);
    let kd = fq(&qkv_spec, 4 * s, d, &kq);
    // V along keys
    let mut vt = vec![0f32; 4 * d * s];
    for h in 0..4 {
        for j in 0..s {
            for c in 0..d {
                vt[(h * d + c) * s + j] = v[(h * s + j) * d + c];
            }
        }
    }
    let vtd = fq(&qkv_spec, 4 * d, s, &vt);
    let c = (std::f32::consts::LOG2_E / (d as f32).sqrt()) as f64;
    let mut out = vec![0f64; 4 * s * d];
    for h in 0..4 {
        for i in 0..s {
            let s2: Vec<f64> = (0..s)
                .map(|j| {
                    (0..d)
                        .map(|t| qd[(h * s + i) * d + t] as f64 * kd[(h * s + j) * d + t] as f64)
                        .sum::<f64>()
                        * c
                })
                .collect();
            let m = s2.iter().cloned().fold(f64::MIN, f64::max).ceil();
            let p: Vec<f32> = s2.iter().map(|x| (x - m).exp2() as f32).collect();
            let pd: Vec<f32> = match p_mode {
                "exact" => p.clone(),
                "mx-rceil" => fq(&Spec::mxfp4(ScaleMode::Rceil), 1, s, &p),
                "nv1-2688" => {
                    let ps: Vec<f32> = p.iter().map(|x| x * 2688.0).collect();
                    fq(&Spec::nvfp4(NvLevels::OneLevel), 1, s, &ps)
                }
                _ => panic!(),
            };
            let l: f64 = pd.iter().map(|&x| x as f64).sum();
            for t in 0..d {
                out[(h * s + i) * d + t] = (0..s)
                    .map(|j| pd[j] as f64 * vtd[(h * d + t) * s + j] as f64)
                    .sum::<f64>()
                    / l;
            }
        }
    }
    eprintln!(
        "{name:20} outl {outl} smooth {smooth} P {p_mode:10} cos {:.5}",
        cosine(&out, &want)
    );
}

#[test]
#[ignore]
fn schemes() {
    for (name, spec) in [
        ("mxfp4 floor", Spec::mxfp4(ScaleMode::Floor)),
        ("mxfp4 rceil", Spec::mxfp4(ScaleMode::Rceil)),
        ("nvfp4 two-level", Spec::nvfp4(NvLevels::TwoLevel)),
        ("nvfp4 one-level", Spec::nvfp4(NvLevels::OneLevel)),
    ] {
        for (o, sm) in [(true, true), (true, false)] {
            run(name, spec, "nv1-2688", o, sm);
            run(name, spec, "mx-rceil", o, sm);
        }
    }
}
