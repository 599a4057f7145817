//! `fp4probe quantize` output is the attention kernel's input: Q, K and V^T quantized through
//! the command line, read back as `dequantize` reads them, give the bytes `prequantize` gives.

use super::dequantize::read_quantized;
use super::{Cli, run};
use crate::attention::prequant::transpose_pad_v;
use crate::attention::{AttnShape, gaussian, prequantize, qkv_from_quantized};
use crate::quant::Format;
use crate::tensorio::{Tensor, write_npy};
use clap::Parser;

#[test]
fn quantize_output_feeds_the_attention_kernel() {
    let dir = tempfile::tempdir().unwrap();
    let s = AttnShape::new(1, 2, 8, 40, 64, false).unwrap();
    let (q, k, v) = (
        gaussian(s.q_len(), 11),
        gaussian(s.kv_len(), 12),
        gaussian(s.kv_len(), 13),
    );
    let vt = transpose_pad_v(&s, &v);
    let inputs = [
        ("q", vec![1, 2, 8, 64], &q),
        ("k", vec![1, 2, 40, 64], &k),
        ("vt", vec![1, 2, 64, 64], &vt),
    ];
    for format in [Format::Mxfp4, Format::Nvfp4] {
        let mut files = Vec::new();
        for (name, shape, x) in &inputs {
            let input = dir.path().join(format!("{name}.npy"));
            write_npy(&input, &Tensor::from_f32(shape.clone(), x)).unwrap();
            let output = dir
                .path()
                .join(format!("{name}.{}.safetensors", format.name()));
            let cli = Cli::parse_from([
                "fp4probe",
                "quantize",
                "--backend",
                "cpu",
                "--format",
                format.name(),
                "--input",
                input.to_str().unwrap(),
                "--output",
                output.to_str().unwrap(),
            ]);
            run(cli).unwrap();
            files.push(read_quantized(&output).unwrap());
        }
        let got = qkv_from_quantized(&files[0], &files[1], &files[2], false).unwrap();
        let want = prequantize(&s, &q, &k, &v, false, format).unwrap();
        assert_eq!(got, want, "{format:?}");
    }
}
