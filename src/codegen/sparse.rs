//! `fp4probe codegen` for the `mma.sp` metadata: the measured metadata maps of the sparse lane
//! maps (`reports/sm_90/mma-sp`, the `metadata` of `fp4probe.lanemap/1`) as one C++ header,
//! `kernels/generated/sparse/fp4probe_sparse_meta.cuh`.
//!
//! Per variant, namespace `fp4probe::sparse::<id with . as _>`: the metadata geometry, the
//! selectors measured, per selector and field (dense row, chunk, kept element) the lane whose
//! metadata register holds it and the field's lowest bit, and `meta_word`, which packs a
//! lane's metadata register from the chunks' 4-bit nibbles through those tables. Selectors whose
//! probe failed are left out. A pure function of the maps (variants sorted by id).

use super::{Gathered, Options, OutFile, cpp_name, pick, record_files};
use crate::device::BackendKind;
use crate::isa::Variant;
use crate::isa::sparse::SparseGeom;
use crate::layout::LaneMap;
use crate::layout::lanemap::{SCHEMA, Status};
use crate::layout::meta::{SelectorMap, field_bits, fields_per_chunk};
use anyhow::Result;
use std::fmt::Write;
use std::path::Path;

/// Map folders read by default, relative to the repository root.
pub const DEFAULT_SPARSE_DIRS: [&str; 1] = ["reports/sm_90/mma-sp"];
/// The header, under the header folder.
pub const HEADER: &str = "sparse/fp4probe_sparse_meta.cuh";

/// One sparse lane map and its file as the header names it.
#[derive(Clone, Debug)]
pub struct SparseSource {
    pub path: String,
    pub map: LaneMap,
    pub variant: Variant,
}

impl SparseSource {
    /// The selectors whose metadata map was measured.
    pub fn selectors(&self) -> Vec<&SelectorMap> {
        self.map
            .metadata
            .iter()
            .flat_map(|m| &m.selectors)
            .filter(|s| s.failure.is_none() && !s.fields.is_empty())
            .collect()
    }
}

/// The passed sparse lane maps of the folders that hold metadata maps, one per variant
/// (hardware over emulator, then the earlier folder), sorted by id.
pub fn select(opts: &Options, notes: &mut Vec<String>) -> Result<Vec<SparseSource>> {
    let mut chosen = std::collections::BTreeMap::new();
    for (file, shown) in record_files(opts, &opts.sparse_dirs, SCHEMA, "mma.sp maps", notes) {
        let map = match LaneMap::load(&file) {
            Ok(m) => m,
            Err(e) => {
                notes.push(format!("skipped {shown}: {e:#}"));
                continue;
            }
        };
        let Some(variant) = map.variant().ok().filter(|v| v.sparse.is_some()) else {
            continue;
        };
        if map.status != Status::Passed || map.metadata.is_none() {
            notes.push(format!("skipped {shown}: status failed or no metadata map"));
            continue;
        }
        pick(
            &mut chosen,
            map.variant.clone(),
            SparseSource {
                path: shown,
                map,
                variant,
            },
            |s| s.map.backend == BackendKind::Hardware,
        );
    }
    Ok(chosen.into_values().collect())
}

/// `{a, b, ...}` of numbers.
fn list(xs: impl IntoIterator<Item = u32>) -> String {
    let v: Vec<String> = xs.into_iter().map(|x| x.to_string()).collect();
    format!("{{{}}}", v.join(", "))
}

fn variant_block(s: &mut String, src: &SparseSource) {
    let v = &src.variant;
    let Some(g) = SparseGeom::of(v) else { return };
    let per = fields_per_chunk(&g);
    let w = field_bits(&g);
    let sels = src.selectors();
    let rows = v.shape.m;
    let cols = g.chunks * per;
    let ns = cpp_name(&src.map.variant);
    let from = match src.map.backend {
        BackendKind::Hardware => format!("measured on {}", src.map.provenance.device),
        BackendKind::Emulator => "emulator: the documented model, not a measurement".into(),
    };
    let _ = writeln!(
        s,
        "// ---- {} ({}):\n//      the dense A's {rows} rows of {} chunks, {per} field(s) of {w} bits a chunk;\n//      from {} ({from}).\nnamespace {ns} {{\nenum : int {{\n  kRows = {rows},\n  kChunks = {},\n  kFieldsPerChunk = {per},\n  kFieldBits = {w},\n  kDenseKPerChunk = {},\n  kSelectors = {}\n}};\n// The sparsity selectors measured: tables index s is selector kSelector[s].\ntemplate <int = 0>\nFP4PROBE_TABLE unsigned char kSelector[kSelectors] = {};",
        src.map.variant,
        src.map.instruction,
        g.chunks,
        src.path,
        g.chunks,
        4 * g.pos_elems / g.elem_positions,
        sels.len(),
        list(sels.iter().map(|x| x.selector)),
    );
    let table = |f: &dyn Fn(&[u32; 5]) -> u32| -> String {
        let blocks: Vec<String> = sels
            .iter()
            .map(|sel| {
                let mut at = vec![0u32; (rows * cols) as usize];
                for x in &sel.fields {
                    let (row, chunk, index) = (x[2], x[3], x[4]);
                    at[(row * cols + chunk * per + index) as usize] = f(x);
                }
                let lines: Vec<String> = (0..rows)
                    .map(|r| {
                        format!(
                            "     {},  // row {r}",
                            list(at[(r * cols) as usize..((r + 1) * cols) as usize].to_vec())
                        )
                    })
                    .collect();
                format!(
                    "    {{  // selector {}\n{}\n    }}",
                    sel.selector,
                    lines.join("\n")
                )
            })
            .collect();
        blocks.join(",\n")
    };
    let _ = writeln!(
        s,
        "// Field (row, chunk * kFieldsPerChunk + k) under selector index s, k the kept element of the\n// chunk (0: the first, 1: the second; tf32 fields are whole nibbles): the lane whose metadata\n// register holds it, and the field's lowest bit in that register.\ntemplate <int = 0>\nFP4PROBE_TABLE unsigned char kMetaLane[kSelectors][kRows][{cols}] = {{\n{}\n}};\ntemplate <int = 0>\nFP4PROBE_TABLE unsigned char kMetaBit[kSelectors][kRows][{cols}] = {{\n{}\n}};",
        table(&|x| x[0]),
        table(&|x| x[1]),
    );
    let _ = writeln!(
        s,
        "// The metadata register lane `lane` gives mma.sp under selector index `s`: every field it
// holds, from the chunks' 4-bit nibbles (bits 1..0 the first kept position, 3..2 the second).
template <int = 0>
FP4PROBE_HD constexpr unsigned meta_word(const unsigned char (&nibble)[kRows][kChunks], int lane,
                                         int s) {{
  unsigned w = 0;
  for (int r = 0; r < kRows; ++r)
    for (int f = 0; f < kChunks * kFieldsPerChunk; ++f)
      if (kMetaLane<>[s][r][f] == lane) {{
        const unsigned x = nibble[r][f / kFieldsPerChunk] >> (2 * (f % kFieldsPerChunk));
        w |= (x & ((1u << kFieldBits) - 1u)) << kMetaBit<>[s][r][f];
      }}
  return w;
}}
}}  // namespace {ns}
"
    );
}

/// The header, or nothing where no map was read.
pub fn render(sources: &[SparseSource], opts: &Options, out_dir: &Path) -> Result<Vec<OutFile>> {
    let mut blocks = String::new();
    for src in sources {
        variant_block(&mut blocks, src);
    }
    let header = Gathered {
        header: HEADER,
        maps: "mma.sp lane maps",
        paths: sources.iter().map(|s| s.path.as_str()).collect(),
        about: format!(
            "// mma.sp metadata: under each sparsity selector, which lane's metadata register holds, at which\n// bits, the index of which kept element of which chunk of which row of the dense A, as\n// `fp4probe fragment --sparse` measured it ({} variants). A chunk is 4 positions of a dense\n// row (kDenseKPerChunk elements of k); its nibble names the two positions kept.",
            sources.len()
        ),
        include: "../fp4probe_common.cuh",
        ns: "sparse",
    };
    Ok(header.render(opts, out_dir, &blocks))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_header_holds_the_measured_selectors_only() {
        let root = Path::new(env!("CARGO_MANIFEST_DIR"));
        let mut notes = Vec::new();
        let sources = select(&Options::defaults(root), &mut notes).unwrap();
        assert!(sources.len() >= 10, "{}", sources.len());
        let opts = Options::defaults(Path::new("/repo"));
        let a = render(&sources, &opts, Path::new("/repo/kernels/generated")).unwrap();
        assert_eq!(
            a,
            render(&sources, &opts, Path::new("/repo/kernels/generated")).unwrap()
        );
        let h = &a[0].text;
        assert!(
            a[0].shown
                .ends_with("kernels/generated/sparse/fp4probe_sparse_meta.cuh")
        );
        // Selector 2 of m16n8k32 f16 with f32 accumulators traps on the H200: left out.
        let block = h
            .split("namespace sp_m16n8k32_f32_f16_f16_f32 {")
            .nth(1)
            .unwrap();
        assert!(block.contains("  kSelectors = 2\n"), "{block}");
        assert!(block.contains("kSelector[kSelectors] = {0, 1};"));
        // s8 k32 under selector 0: row 8 in the odd lane of the pair, bits 4·c.
        let s8 = h
            .split("namespace sp_m16n8k32_s32_s8_s8_s32 {")
            .nth(1)
            .unwrap();
        assert!(s8.contains("  kDenseKPerChunk = 4,"));
        let lanes = s8.split("kMetaLane").nth(1).unwrap();
        assert!(
            lanes.contains("{1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1},  // row 8"),
            "{lanes}"
        );
        assert!(render(&[], &opts, Path::new("/x")).unwrap().is_empty());
    }
}
