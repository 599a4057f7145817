//! `fp4probe codegen` for `ldmatrix`, `stmatrix` and `movmatrix`: the measured data-movement
//! maps (`reports/sm_90/ldmatrix`, `fp4probe.matrix-map/1`) as one C++ header,
//! `kernels/generated/matrix/fp4probe_matrix.cuh`.
//!
//! Per variant, namespace `fp4probe::matrix::<id with . as _>`: the slot → (stacked row, col)
//! tables, the stacked row each lane's address must name (ldmatrix/stmatrix), the fitted closed
//! forms as `constexpr` functions checked against the tables by `static_assert`, and an
//! inline-PTX wrapper spelled as the catalog spells the instruction. Only passed maps are read;
//! a pure function of the maps (variants sorted by id).

use super::cpp::formula_function;
use super::formula::Formula;
use super::{Gathered, Options, OutFile, cpp_name, pick, record_files};
use crate::device::BackendKind;
use crate::isa::matrix::MatrixOp;
use crate::movement::map::{MatrixMap, SCHEMA, Status};
use anyhow::{Context, Result};
use std::fmt::Write;
use std::path::Path;

/// Map folders read by default, relative to the repository root.
pub const DEFAULT_MATRIX_DIRS: [&str; 1] = ["reports/sm_90/ldmatrix"];
/// The header, under the header folder.
pub const HEADER: &str = "matrix/fp4probe_matrix.cuh";

/// One map and its file as the header names it.
#[derive(Clone, Debug)]
pub struct MoveSource {
    pub path: String,
    pub map: MatrixMap,
}

/// The passed maps of the folders, one per variant (hardware over emulator, then the earlier
/// folder), sorted by id. A folder that does not exist adds a note and nothing else.
pub fn select(opts: &Options, notes: &mut Vec<String>) -> Result<Vec<MoveSource>> {
    let mut chosen = std::collections::BTreeMap::new();
    for (f, shown) in record_files(opts, &opts.matrix_dirs, SCHEMA, "data-movement maps", notes) {
        let map = match MatrixMap::load(&f) {
            Ok(m) => m,
            Err(e) => {
                notes.push(format!("skipped {shown}: {e:#}"));
                continue;
            }
        };
        if map.status != Status::Passed || map.forms.is_none() {
            notes.push(format!("skipped {shown}: status failed"));
            continue;
        }
        pick(
            &mut chosen,
            map.variant.clone(),
            MoveSource { path: shown, map },
            |s| s.map.backend == BackendKind::Hardware,
        );
    }
    Ok(chosen.into_values().collect())
}

/// `{a, b, ...}` of numbers.
fn list(xs: impl IntoIterator<Item = i64>) -> String {
    let v: Vec<String> = xs.into_iter().map(|x| x.to_string()).collect();
    format!("{{{}}}", v.join(", "))
}

/// One variant's namespace.
fn variant_block(s: &mut String, src: &MoveSource) -> Result<()> {
    let m = &src.map;
    let v = m.variant()?;
    let rows = if m.op == MatrixOp::Movmatrix {
        8
    } else {
        8 * m.num
    };
    let _ = writeln!(
        s,
        "// ---- {} ({}): {}, {} register(s) per lane, 2 elements per register;\n//      from {} ({}).\nnamespace {} {{\nenum : int {{\n  kMatrices = {},\n  kRegs = {},\n  kElemsPerReg = 2,\n  kRows = {rows},\n  kCols = 8,\n  kTrans = {},\n}};",
        m.variant,
        m.instruction,
        match m.op {
            MatrixOp::Ldmatrix => "shared memory to registers",
            MatrixOp::Stmatrix => "registers to shared memory",
            MatrixOp::Movmatrix => "a transpose from registers to registers",
        },
        m.regs,
        src.path,
        match m.backend {
            BackendKind::Hardware => format!("measured on {}", m.provenance.device),
            BackendKind::Emulator => "emulator: the documented behaviour, not a measurement".into(),
        },
        cpp_name(&m.variant),
        m.num,
        m.regs,
        i32::from(m.trans),
    );
    let what = if m.op == MatrixOp::Movmatrix {
        "(row, col) of the source matrix"
    } else {
        "stacked row (8 * matrix + row) and col"
    };
    let table = |f: &dyn Fn(&[u32; 8]) -> u32| -> String {
        let lanes: Vec<String> = (0..32)
            .map(|lane| {
                let regs: Vec<String> = (0..m.regs)
                    .map(|reg| {
                        list(
                            m.slots
                                .iter()
                                .filter(|x| x[0] == lane && x[1] == reg)
                                .map(|x| f(x) as i64),
                        )
                    })
                    .collect();
                format!("    {{{}}},  // lane {lane}", regs.join(", "))
            })
            .collect();
        lanes.join("\n")
    };
    let stacked = |x: &[u32; 8]| 8 * x[3] + x[4];
    let _ = writeln!(
        s,
        "// Slot (lane, reg, elem) -> {what}.\ntemplate <int = 0>\nFP4PROBE_TABLE unsigned char kRow[32][{r}][2] = {{\n{}\n}};\ntemplate <int = 0>\nFP4PROBE_TABLE unsigned char kCol[32][{r}][2] = {{\n{}\n}};",
        table(&stacked),
        table(&|x| x[5]),
        r = m.regs
    );
    if m.op != MatrixOp::Movmatrix {
        let addr: Vec<i64> = (0..32)
            .map(|l| {
                m.addresses
                    .iter()
                    .find(|a| a.lane == l)
                    .map_or(-1, |a| (8 * a.matrix + a.row) as i64)
            })
            .collect();
        let _ = writeln!(
            s,
            "// The stacked row lane `lane`'s address must name (-1: its address is not used).\ntemplate <int = 0>\nFP4PROBE_TABLE signed char kAddressRow[32] = {};",
            list(addr)
        );
    }
    let forms = m.forms.as_ref().context("a passed map has closed forms")?;
    let parse = |x: &Option<String>| {
        x.as_deref()
            .map(Formula::parse)
            .transpose()
            .with_context(|| src.path.clone())
    };
    if let (Some(r), Some(c)) = (parse(&forms.row)?, parse(&forms.col)?) {
        let _ = writeln!(
            s,
            "// Closed form (fitted by fp4probe; g = lane / 4, t = lane % 4, e = elem):\n//   row = {}\n//   col = {}",
            r.cpp(),
            c.cpp()
        );
        s.push_str(&formula_function("row_formula", &r));
        s.push_str(&formula_function("col_formula", &c));
        let _ = writeln!(
            s,
            "namespace detail {{\ntemplate <int = 0>\nFP4PROBE_HD constexpr bool tables_agree() {{\n  for (int lane = 0; lane < 32; ++lane)\n    for (int reg = 0; reg < kRegs; ++reg)\n      for (int e = 0; e < 2; ++e) {{\n        const int r = kRow<>[lane][reg][e], c = kCol<>[lane][reg][e];\n        if (r != row_formula(lane, reg, e) || c != col_formula(lane, reg, e)) return false;\n      }}\n  return true;\n}}\n}}  // namespace detail\n#if FP4PROBE_TABLE_CHECKS\nstatic_assert(detail::tables_agree<>(), \"{}: the slot tables and the closed form disagree\");\n#endif",
            m.variant
        );
    }
    let n = m.regs as usize;
    let ops = |from: usize| -> Vec<String> { (from..from + n).map(|i| format!("%{i}")).collect() };
    let wrapper = match m.op {
        MatrixOp::Ldmatrix => format!(
            "// The instruction (needs {}); `smem` is a shared-window address (__cvta_generic_to_shared).\n__device__ __forceinline__ void move(unsigned (&d)[{n}], unsigned smem) {{\n  asm volatile(\"{} {{{}}}, [%{n}];\\n\"\n               : {}\n               : \"r\"(smem));\n}}",
            v.min_target,
            m.instruction,
            ops(0).join(", "),
            (0..n)
                .map(|i| format!("\"=r\"(d[{i}])"))
                .collect::<Vec<_>>()
                .join(", ")
        ),
        MatrixOp::Stmatrix => format!(
            "// The instruction (needs {}); `smem` is a shared-window address (__cvta_generic_to_shared).\n__device__ __forceinline__ void move(unsigned smem, const unsigned (&s)[{n}]) {{\n  asm volatile(\"{} [%0], {{{}}};\\n\"\n               :\n               : \"r\"(smem), {}\n               : \"memory\");\n}}",
            v.min_target,
            m.instruction,
            ops(1).join(", "),
            (0..n)
                .map(|i| format!("\"r\"(s[{i}])"))
                .collect::<Vec<_>>()
                .join(", ")
        ),
        MatrixOp::Movmatrix => format!(
            "// The instruction (needs {}).\n__device__ __forceinline__ unsigned move(unsigned s) {{\n  unsigned d;\n  asm volatile(\"{} %0, %1;\\n\" : \"=r\"(d) : \"r\"(s));\n  return d;\n}}",
            v.min_target, m.instruction
        ),
    };
    let _ = writeln!(
        s,
        "#if defined(__CUDACC__)\n{wrapper}\n#endif  // __CUDACC__\n}}  // namespace {}\n",
        cpp_name(&m.variant)
    );
    Ok(())
}

/// The header, or nothing where no map was read.
pub fn render(sources: &[MoveSource], opts: &Options, out_dir: &Path) -> Result<Vec<OutFile>> {
    let mut blocks = String::new();
    for src in sources {
        variant_block(&mut blocks, src)?;
    }
    let header = Gathered {
        header: HEADER,
        maps: "data-movement maps",
        paths: sources.iter().map(|s| s.path.as_str()).collect(),
        about: format!(
            "// ldmatrix, stmatrix and movmatrix: which register slot (lane, reg, elem) holds which element\n// of the matrices moved and which row each lane's address names, as `fp4probe matrix probe`\n// measured them ({} variants). Matrices are stacked: matrix i's row r is row 8 * i + r.",
            sources.len()
        ),
        include: "../fp4probe_common.cuh",
        ns: "matrix",
    };
    Ok(header.render(opts, out_dir, &blocks))
}

/// The folders of `paths`, each once.
pub(crate) fn common_dirs(paths: &[&str]) -> String {
    let mut dirs: Vec<&str> = paths
        .iter()
        .map(|p| p.rsplit_once('/').map_or(".", |(d, _)| d))
        .collect();
    dirs.dedup();
    dirs.join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::movement::emulator::MoveEmulator;
    use crate::movement::probe::probe;
    use crate::movement::probed_catalog;
    use crate::provenance::Provenance;

    #[test]
    fn the_header_is_a_pure_function_of_the_maps() {
        let emu = MoveEmulator::new();
        let info = crate::movement::backend::MoveBackend::info(&emu).clone();
        let sources: Vec<MoveSource> = probed_catalog()
            .iter()
            .map(|v| {
                let out = probe(&emu, v, 1).unwrap();
                let mut prov = Provenance::new(&info, String::new());
                prov.date = "fixed".into();
                MoveSource {
                    path: format!("maps/{}.json", v.id()),
                    map: MatrixMap::new(v, &out, prov),
                }
            })
            .collect();
        let opts = Options::defaults(Path::new("/repo"));
        let a = render(&sources, &opts, Path::new("/repo/kernels/generated")).unwrap();
        let b = render(&sources, &opts, Path::new("/repo/kernels/generated")).unwrap();
        assert_eq!(a, b);
        let h = &a[0].text;
        assert!(
            a[0].shown
                .ends_with("kernels/generated/matrix/fp4probe_matrix.cuh")
        );
        assert!(h.contains("namespace ldmatrix_m8n8_x4_trans_b16 {"));
        assert!(h.contains(
            "asm volatile(\"ldmatrix.sync.aligned.m8n8.x4.trans.shared::cta.b16 {%0, %1, %2, %3}, [%4];\\n\""
        ));
        assert!(h.contains("stmatrix.sync.aligned.m8n8.x2.shared::cta.b16 [%0], {%1, %2};"));
        assert!(
            h.contains("FP4PROBE_HD constexpr int row_formula(int lane, int reg, int /*e*/) {")
        );
        assert!(
            h.contains("FP4PROBE_TABLE signed char kAddressRow[32] = {0, 1, 2, 3, 4, 5, 6, 7, -1,")
        );
        assert!(render(&[], &opts, Path::new("/x")).unwrap().is_empty());
    }
}
