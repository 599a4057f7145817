//! The `fp4probe` command line: one module per subcommand.

pub mod attention;
mod attention_files;
#[cfg(test)]
mod attention_inputs_tests;
mod bench;
mod catalog;
mod codegen;
mod container;
mod dequantize;
mod fragment;
mod limits;
mod lookup;
mod matrix;
mod numerics;
mod quant_bench;
mod quant_input;
mod quantize;
mod report;
mod sass;
mod scale;
mod select;
mod show;
mod tma;
pub mod view;
mod wgmma;

use clap::{Parser, Subcommand};
use std::process::ExitCode;

/// fp4probe: find out, by experiment on the GPU, how NVIDIA `mma.sync` tensor-core
/// instructions lay out their operands across the 32 lanes of a warp.
///
/// Start with `fp4probe catalog` to see every variant and whether it runs here, then
/// `fp4probe fragment --variant <id>` (or `--all`) to measure lane maps. Without a GPU the
/// emulator runs instead, and says so loudly; its results are labelled "emulator".
#[derive(Parser, Debug)]
#[command(name = "fp4probe", version, about, long_about, after_help = after_help())]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

const EXAMPLES: &str = "Examples:
  fp4probe catalog                                  every mma.sync/mma.sp variant, what runs here
  fp4probe catalog --family all                     every family (ldmatrix, wgmma, ...), counted
  fp4probe catalog --rejected                       spellings ptxas rejects, with its message
  fp4probe fragment --variant m16n8k16.f32.bf16.bf16.f32
  fp4probe fragment --shape m16n8k32 --kind mxf8f6f4 --a e2m1 --b e2m1 --backend emulator
  fp4probe fragment --shape m16n8k32                every m16n8k32 variant this backend runs, and a summary
  fp4probe fragment --variant 'mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32'
  fp4probe fragment --all                           every variant this device runs (into results/)
  fp4probe container --a e4m3 --kind plain          decode every e4m3 code through the unit
  fp4probe container --all                          every input type this device runs
  fp4probe sass --variant m16n8k32.f32.e4m3.e4m3.f32 --target sm_90
                                                    what it lowers to in SASS (offline)
  fp4probe scale --all --backend emulator           scale lane maps of the 29 block-scaled variants
  fp4probe numerics --all                           numeric behaviour of every variant
  fp4probe numerics --family wgmma --all            the same for every wgmma type set (sm_90a)
  fp4probe sass --variant m64n256k32.f32.e4m3.e4m3.ss   the GMMA a wgmma lowers to (offline)
  fp4probe matrix probe --all                       ldmatrix/stmatrix/movmatrix address and slot maps
  fp4probe matrix sass --all                        the LDSM/STSM/MOVM they lower to (offline)
  fp4probe tma probe --all                          TMA box placement under every swizzle mode
  fp4probe tma sass --all                           the UTMALDG/UTMASTG they lower to (offline)
  fp4probe report reports/*/*.json --skip-measured  pages and SVGs next to the maps, and the index
  fp4probe codegen --check                          are kernels/generated and src/generated current?
  fp4probe bench --variant m16n8k16.f32.bf16.bf16.f32   latency and throughput (GPU only)
  fp4probe view reports/sm_90/m16n8k16.f32.bf16.bf16.f32.json
  fp4probe show reports/sm_90/m16n8k32.f32.e4m3.e4m3.f32.json
  fp4probe lookup m16n8k16.f32.bf16.bf16.f32 --operand A --lane 5 --reg 1 --elem 0
  fp4probe lookup reports/sm_90/m16n8k16.f32.bf16.bf16.f32.json --operand D --row 9 --col 2
  fp4probe quantize --format mxfp4 --input w.npy --output w.mxfp4.safetensors
  fp4probe dequantize --input w.mxfp4.safetensors --output w.npy
  fp4probe quant-bench --csv reports/sm_90/quant-bench-fp4probe.csv   (GPU only)
  fp4probe attention --suite                         fused FP4 attention against the CPU references (GPU only)
  fp4probe attention --q q.safetensors --k k.safetensors --v v.safetensors --output o.safetensors";

/// Where the binary finds what it needs outside itself: it runs from any directory.
const ENVIRONMENT: &str = "Environment:
  FP4PROBE_CUDA_BIN=DIR   ptxas, cuobjdump, nvdisasm; else .tools/nvidia/*/bin of the checkout
                          containing the current directory, then
                          $XDG_CACHE_HOME/fp4probe/tools/nvidia/*/bin (~/.cache/fp4probe/tools),
                          then PATH, then /usr/local/cuda/bin
  FP4PROBE_NVRTC=FILE|DIR libnvrtc; else .tools/nvidia/*/lib, the cache folder's
                          tools/nvidia/*/lib, the loader's path, CUDA_PATH, /usr/local/cuda
  FP4PROBE_KERNELS=DIR    compile the CUDA kernels from DIR (a checkout's kernels/) instead of
                          the copy built into this binary
  FP4PROBE_COMPILE_CACHE=DIR|off  where NVRTC's results are kept for later runs (default
                          $XDG_CACHE_HOME/fp4probe/nvrtc or ~/.cache/fp4probe/nvrtc), or off
  .ci/install-cuda-tools installs the pinned tools into .tools/; with --cache into
  $XDG_CACHE_HOME/fp4probe/tools, found from any directory.";

fn after_help() -> String {
    format!("{EXAMPLES}\n\n{ENVIRONMENT}")
}

#[derive(Subcommand, Debug)]
pub enum Command {
    /// List every mma.sync and mma.sp variant from sm_75 to sm_120a (with --family, the
    /// ldmatrix, stmatrix, movmatrix or sm_90a wgmma.mma_async variants): registers,
    /// containers, targets, and each family's count.
    Catalog(catalog::Args),
    /// Measure slot → (row, col) maps of A, B, C and D by one-hot experiments, then validate.
    Fragment(fragment::Args),
    /// Sweep every container code of an input type through A (B = 1): decode table, bit roles.
    ///
    /// Qualifiers pick one representative variant per input type; --all sweeps one per distinct
    /// (kind, A type, A container width), preferring f32/s32 D and the smallest k.
    Container(container::Args),
    /// Measure numeric behaviour: product exactness, alignment, rounding, grouping, subnormals, NaN.
    Numerics(numerics::Args),
    /// Markdown pages with lane-coloured SVG pictures from lane map files, and the index.
    Report(report::Args),
    /// What a variant lowers to in SASS: instruction listing and histogram of the probe kernel,
    /// offline (pinned ptxas + cuobjdump, any target) or with the device's own toolchain.
    Sass(sass::Args),
    /// Measure which lane and byte of the scale registers scale which row/column and k-block,
    /// for every {byte-id, thread-id} selector ptxas accepts (block-scaled variants).
    Scale(scale::Args),
    /// Latency and throughput per variant (CUDA only), swept over warps per SM and independent
    /// accumulators; the timed loop's SASS is checked, or the figure is rejected.
    Bench(bench::Args),
    /// Write lane tables as CUDA headers (kernels/generated) and a Rust module; --check, --verify.
    Codegen(codegen::Args),
    /// Browse a lane map in the terminal: operand grids coloured by lane, cursor, lane highlight,
    /// scale tab, diff against another map or the documented layout.
    View(view::Args),
    /// Quantize a tensor (.npy / .safetensors; f32, f16, bf16) to MXFP4 or NVFP4, on the GPU or
    /// the CPU reference (identical bytes).
    Quantize(quantize::QuantizeArgs),
    /// Read a quantized file back to f32 (.npy or .safetensors).
    Dequantize(dequantize::DequantizeArgs),
    /// Throughput of the quantization kernels against the device copy bandwidth (GPU only),
    /// each output checked against the CPU reference; and the optimal-scale search's gain.
    QuantBench(quant_bench::Args),
    /// Fused FP4 attention (NVFP4 or MXFP4 Q, K, V; P requantized): on your tensor files
    /// (--q --k --v --output; grouped-query too), validate against the CPU references (--suite)
    /// or benchmark (--bench, GPU only).
    Attention(attention::Args),
    /// Print a lane map file: provenance, validation, closed forms, the map as a table.
    Show(show::Args),
    /// Which (row, col) a slot (lane, register, element) holds, or which slot holds (row, col),
    /// from a lane map file or the built-in tables of a variant.
    Lookup(lookup::Args),
    /// wgmma (sm_90a): register lane maps of the warpgroup, and shared-memory layouts under
    /// every swizzle mode with LBO/SBO/start/base-offset sweeps.
    Wgmma(wgmma::Args),
    /// ldmatrix, stmatrix, movmatrix: which lane's address names which shared row and which
    /// register slot holds which element, measured (`probe`); their SASS (`sass`).
    Matrix(matrix::Args),
    /// Bulk tensor copies (cp.async.bulk.tensor, TMA): which global element lands at which
    /// shared byte under each swizzle mode (`probe`), their UTMALDG/UTMASTG (`sass`), and
    /// which TMA swizzle feeds which wgmma descriptor swizzle (`report`).
    Tma(tma::Args),
}

pub fn run(cli: Cli) -> anyhow::Result<ExitCode> {
    match cli.command {
        Command::Catalog(a) => catalog::run(a),
        Command::Fragment(a) => fragment::run(a),
        Command::Bench(a) => bench::run(a),
        Command::Codegen(a) => codegen::run(a),
        Command::Container(a) => container::run(a),
        Command::Numerics(a) => numerics::run(a),
        Command::Report(a) => report::run(a),
        Command::Sass(a) => sass::run(a),
        Command::Scale(a) => scale::run(a),
        Command::Show(a) => show::run(a),
        Command::Lookup(a) => lookup::run(a),
        Command::Wgmma(a) => wgmma::run(a),
        Command::Matrix(a) => matrix::run(a),
        Command::Tma(a) => tma::run(a),
        Command::Attention(a) => attention::run(a),
        Command::Quantize(a) => quantize::run_quantize(a),
        Command::Dequantize(a) => dequantize::run_dequantize(a),
        Command::QuantBench(a) => quant_bench::run(a),
        Command::View(a) => view::run_cmd(a),
    }
}
