//! The generated TMA and `mma.sp` metadata headers (`kernels/generated/tma/fp4probe_tma.cuh`,
//! `kernels/generated/sparse/fp4probe_sparse_meta.cuh`) against the committed hardware maps
//! they come from, through the host's C++ compiler: every TMA case's `smem_byte` gives the
//! measured shared byte of every box element, and every sparse variant's `meta_word` packs the
//! metadata registers the measured fields place (what the probe's validation ran on the GPU).
//! Without a C++ compiler the tests print a note and pass.

mod common;
#[path = "support/cxx.rs"]
mod cxx_support;

use cxx_support::run_cxx;
use fp4probe::codegen::{Options, cpp_name, sparse, tma};
use fp4probe::isa::sparse::SparseGeom;
use fp4probe::layout::meta::write_nibbles;
use std::fmt::Write;
use std::path::PathBuf;

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn kernels() -> PathBuf {
    root().join("kernels")
}

#[test]
fn tma_forms_give_every_measured_shared_byte() {
    let test = "tma_forms_give_every_measured_shared_byte";
    let mut notes = Vec::new();
    let cases = tma::select(&Options::defaults(&root()), &mut notes).unwrap();
    assert!(cases.len() >= 39, "{notes:?}");
    let mut src = String::from(
        "#include <cstdio>\n#include \"generated/tma/fp4probe_tma.cuh\"\nint main() {\n",
    );
    for c in &cases {
        let ns = format!("fp4probe::tma::{}", cpp_name(&c.map.case));
        let _ = writeln!(
            src,
            "  static_assert({ns}::kBoxRows == {} && {ns}::kBoxCols == {} && {ns}::kBoxOffset == {}, \"{}\");\n  for (unsigned r = 0; r < {ns}::kBoxRows; ++r)\n    for (unsigned c = 0; c < {ns}::kBoxCols; ++c) std::printf(\"%u\\n\", {ns}::smem_byte(r, c));",
            c.map.box_rows, c.map.box_cols, c.map.smem_offset, c.map.case
        );
    }
    src += "  return 0;\n}\n";
    let dir = common::tmpdir("codegen-tma", "cxx");
    let Some(out) = run_cxx(test, &src, &kernels(), &dir) else {
        return;
    };
    let got: Vec<u32> = out.lines().map(|l| l.parse().unwrap()).collect();
    let want: Vec<u32> = cases
        .iter()
        .flat_map(|c| c.map.smem_byte.iter().copied())
        .collect();
    assert_eq!(got.len(), want.len());
    let mut k = 0;
    for c in &cases {
        for (i, &b) in c.map.smem_byte.iter().enumerate() {
            assert_eq!(got[k], b, "{} element {i}", c.map.case);
            k += 1;
        }
    }
}

#[test]
fn sparse_meta_words_are_the_measured_placement() {
    let test = "sparse_meta_words_are_the_measured_placement";
    let mut notes = Vec::new();
    let sources = sparse::select(&Options::defaults(&root()), &mut notes).unwrap();
    assert!(sources.len() >= 10, "{notes:?}");
    let mut src = String::from(
        "#include <cstdio>\n#include \"generated/sparse/fp4probe_sparse_meta.cuh\"\nint main() {\n",
    );
    let mut want = Vec::new();
    for s in &sources {
        let g = SparseGeom::of(&s.variant).unwrap();
        let rows = s.variant.shape.m;
        let ns = format!("fp4probe::sparse::{}", cpp_name(&s.map.variant));
        for (i, sel) in s.selectors().iter().enumerate() {
            // Nibbles hashed from their place and the selector, without a period, so a field
            // read from another chunk, row or half shows.
            let nib: Vec<u32> = (0..rows * g.chunks)
                .map(|k| {
                    let x = (k + 64 * sel.selector + 1).wrapping_mul(0x9E37_79B9);
                    (x ^ (x >> 15)) >> 28
                })
                .collect();
            let mut words = vec![0u32; 32];
            write_nibbles(&s.variant, &sel.meta_fields(), &nib, &mut words);
            want.push((
                format!("{} selector {}", s.map.variant, sel.selector),
                words,
            ));
            let rows_text: Vec<String> = nib
                .chunks(g.chunks as usize)
                .map(|r| {
                    let v: Vec<String> = r.iter().map(u32::to_string).collect();
                    format!("{{{}}}", v.join(", "))
                })
                .collect();
            let _ = writeln!(
                src,
                "  {{\n    const unsigned char nib[{rows}][{}] = {{{}}};\n    for (int lane = 0; lane < 32; ++lane) std::printf(\"%u\\n\", {ns}::meta_word(nib, lane, {i}));\n  }}",
                g.chunks,
                rows_text.join(", ")
            );
        }
    }
    src += "  return 0;\n}\n";
    let dir = common::tmpdir("codegen-sparse", "cxx");
    let Some(out) = run_cxx(test, &src, &kernels(), &dir) else {
        return;
    };
    let got: Vec<u32> = out.lines().map(|l| l.parse().unwrap()).collect();
    assert_eq!(got.len(), 32 * want.len());
    for ((what, words), got) in want.iter().zip(got.chunks(32)) {
        assert_eq!(
            got,
            words.as_slice(),
            "{what}: the metadata words of lanes 0..31"
        );
    }
}
