//! `fp4probe quantize` output is the attention kernel's input: Q, K and V (`--attention-v`)
//! quantized through the command line, read as `attention --q --k --v` reads them, give the
//! bytes `prequantize` gives.

use super::attention_files::{quantized_qkv, read_operand};
use super::{Cli, run};
use crate::attention::{AttnShape, gaussian, prequantize};
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
    let inputs = [
        ("q", vec![1, 2, 8, 64], &q),
        ("k", vec![1, 2, 40, 64], &k),
        ("v", vec![1, 2, 40, 64], &v),
    ];
    for format in [Format::Mxfp4, Format::Nvfp4] {
        let mut files = Vec::new();
        for (name, shape, x) in &inputs {
            let input = dir.path().join(format!("{name}.npy"));
            write_npy(&input, &Tensor::from_f32(shape.clone(), x)).unwrap();
            let output = dir
                .path()
                .join(format!("{name}.{}.safetensors", format.name()));
            let mut args = vec![
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
            ];
            if *name == "v" {
                args.push("--attention-v");
            }
            run(Cli::parse_from(args)).unwrap();
            files.push(read_operand(name, &output).unwrap());
        }
        let files: [_; 3] = files.try_into().unwrap_or_else(|_| unreachable!());
        let got = quantized_qkv(files, false, None, false).unwrap();
        let want = prequantize(&s, &q, &k, &v, false, format).unwrap();
        assert_eq!(got, want, "{format:?}");
    }
}
