//! The CPU side of the fused FP4 attention kernels: the problem shape, the FP4 operands the
//! kernel reads (`prequantize`), the exact arithmetic it performs (`reference_quantized`),
//! plain f64 attention to measure FP4's error against (`reference_f64`), metrics and
//! deterministic inputs.
//!
//! The scheme in one paragraph: Q and K are FP4 along the head dimension — MXFP4 (floor
//! scales, blocks of 32) or NVFP4 (two-level, blocks of 16) — K optionally smoothed by its
//! per-channel mean first; V is stored transposed (V^T, keys padded to a multiple of 32) and
//! blocked along the key axis. Scores are scaled by log2(e)/√D so softmax uses exp2; each row
//! keeps an integer maximum, and the probabilities P are requantized (after scaling by 448·6)
//! in V's block format before P·V: E4M3 scales per 16 keys (NVFP4), or MXFP4 RCEIL per 32,
//! elements multiplied by the reciprocal scale. The integer maximum makes the kernel's online
//! softmax equal to the two-pass reference: see `reference::reference_quantized` for the
//! normative statement and the argument. `fp8` is the form for Hopper's E4M3 tensor cores
//! (`docs/attention-fp8.md`).

pub mod files;
pub mod fp8;
pub mod inputs;
pub mod kernel;
pub mod metrics;
pub mod paths;
pub mod prequant;
pub mod reference;
pub mod schedule;
pub mod shape;

pub use files::qkv_from_quantized;
pub use fp8::{Fp8Qkv, reference_fp8};
pub use inputs::{exact_qkv, gaussian, identity_qkv, outlier_k};
pub use metrics::{Comparison, cosine, max_abs_error, relative_error};
pub use prequant::{QuantizedQkv, prequantize};
pub use reference::{reference_f64, reference_quantized};
pub use shape::{AttnShape, ShapeError};
