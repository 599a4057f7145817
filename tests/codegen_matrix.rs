//! The generated data-movement header (`kernels/generated/matrix/fp4probe_matrix.cuh`): every
//! wrapper compiles with NVRTC for compute_90 with the table checks on, and its PTX holds each
//! instruction as the catalog spells it. Without libnvrtc the test prints a note and passes
//! (on CI, where .ci/install-cuda-tools provides it, it fails instead).

use fp4probe::codegen::{cpp_name, nvrtc, verify};
use fp4probe::isa::matrix::MatrixOp;
use fp4probe::movement::probed_catalog;
use std::path::Path;

#[path = "support/nvrtc.rs"]
mod nvrtc_support;
use nvrtc_support::nvrtc_or_skip;

#[test]
fn the_matrix_header_compiles_and_spells_every_instruction() {
    let test = "the_matrix_header_compiles_and_spells_every_instruction";
    if !nvrtc_or_skip(test) {
        return;
    }
    let kernels = Path::new(env!("CARGO_MANIFEST_DIR")).join("kernels");
    let mut src = String::from(
        "#include \"generated/matrix/fp4probe_matrix.cuh\"\n\
         extern \"C\" __global__ void k(unsigned* io) {\n\
         \x20 __shared__ alignas(16) unsigned short tile[512];\n\
         \x20 const unsigned lane = threadIdx.x % 32;\n\
         \x20 const unsigned smem = static_cast<unsigned>(__cvta_generic_to_shared(tile)) + 16 * lane;\n",
    );
    let variants = probed_catalog();
    for v in &variants {
        let ns = format!("fp4probe::matrix::{}", cpp_name(&v.id()));
        let n = v.regs();
        src += &match v.op {
            MatrixOp::Ldmatrix => format!(
                "  {{ unsigned d[{n}]; {ns}::move(d, smem); for (int i = 0; i < {n}; ++i) io[lane * 4 + i] += d[i]; }}\n"
            ),
            MatrixOp::Stmatrix => format!(
                "  {{ unsigned s[{n}]; for (int i = 0; i < {n}; ++i) s[i] = io[lane * 4 + i]; {ns}::move(smem, s); }}\n"
            ),
            MatrixOp::Movmatrix => format!("  io[lane] = {ns}::move(io[lane]);\n"),
        };
    }
    src += "  io[lane + 128] = tile[lane];\n}\n";
    let mut options = verify::options(&kernels, "compute_90");
    options.push("-DFP4PROBE_TABLE_CHECKS=1".into());
    let out = nvrtc::compile(&src, "matrix.cu", &options, nvrtc::Output::Ptx)
        .unwrap_or_else(|e| panic!("{test}: {e:#}\n{src}"));
    assert!(out.log.is_empty(), "{test}: NVRTC warnings:\n{}", out.log);
    let ptx = out.ptx();
    for v in &variants {
        // NVRTC writes `.shared` where the header says `.shared::cta`; both are the CTA's.
        let op = v.opcode().replace(".shared::cta", ".shared");
        assert!(
            ptx.contains(&v.opcode()) || ptx.contains(&op),
            "{test}: {} not in the PTX",
            v.opcode()
        );
    }
}
