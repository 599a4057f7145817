//! fp4probe: find, by experiment on the GPU, how `mma.sync` tensor-core instructions lay out
//! their operands, and write the answer down as data.
//!
//! Data flows one way: `isa` (catalog) → `probe` (experiments) → `device` (hardware or
//! emulator) → observations → `probe::infer` → `layout::LaneMap` → reports, tables, viewer.

pub mod attention;
pub mod cli;
pub mod codegen;
pub mod device;
pub mod formats;
pub mod gemm;
pub mod quant;
/// The lane tables as Rust statics, written by `fp4probe codegen` (see `codegen::tables`).
#[rustfmt::skip]
pub mod generated;
pub mod isa;
pub mod jsonfmt;
pub mod kernels;
pub mod layout;
pub mod locate;
pub mod movement;
pub mod outfile;
pub mod palette;
pub mod probe;
pub mod provenance;
pub mod report;
pub mod rng;
pub mod sass;
pub mod tempdir;
pub mod tensorio;
pub mod threads;
pub mod tma;
pub mod tools;
pub mod tui;
pub mod wgmma;
