//! `fp4probe codegen` for the bulk tensor copies: the measured TMA maps (`reports/sm_90/tma`,
//! `fp4probe.tma-map/1`) as one C++ header, `kernels/generated/tma/fp4probe_tma.cuh`.
//!
//! Per case, namespace `fp4probe::tma::<case with . as _>`: the tensor map's element size,
//! swizzle and box, where the box sits past the 1024-byte-aligned base, and the fitted closed
//! form as a `constexpr` function `smem_byte(row, col)`: the shared byte of box element
//! (row, col) from the box's start. The XOR pattern is the one the wgmma shared-memory header
//! defines (`fp4probe::wgmma::xor_pattern`), so a kernel sees one swizzle for both. Only passed
//! maps with a fit whose weights are whole bytes are read; a pure function of the maps (cases
//! sorted by id). The forms are checked against every measured element by the tests (in Rust
//! and by compiling the header), not by tables in the header, which would be large.

use super::{Gathered, Options, OutFile, cpp_name, pick, record_files};
use crate::device::BackendKind;
use crate::layout::lanemap::Status;
use crate::tma::map::{SCHEMA, TmaMap};
use crate::wgmma::desc::Swizzle;
use crate::wgmma::smem::SmemFit;
use anyhow::Result;
use std::fmt::Write;
use std::path::Path;

/// Map folders read by default, relative to the repository root.
pub const DEFAULT_TMA_DIRS: [&str; 1] = ["reports/sm_90/tma"];
/// The header, under the header folder.
pub const HEADER: &str = "tma/fp4probe_tma.cuh";

/// One map and its file as the header names it.
#[derive(Clone, Debug)]
pub struct TmaSource {
    pub path: String,
    pub map: TmaMap,
    pub form: Form,
}

/// A fit as integer arithmetic: `byte = xor(start + origin + Σ row terms + Σ col terms) - start`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Form {
    pub xor: Swizzle,
    pub phase_offset: u32,
    pub origin: u32,
    /// Per coordinate: `Ok(bytes per step)` where the weights of its bits are those of one
    /// multiple, else the bytes of each bit.
    pub row: Result<u32, Vec<(u32, u32)>>,
    pub col: Result<u32, Vec<(u32, u32)>>,
}

impl Form {
    /// The fit in whole bytes, or why not.
    pub fn of(fit: &SmemFit) -> Result<Form, String> {
        let whole = |x: f64| (x >= 0.0 && x.fract() == 0.0).then_some(x as u32);
        let coord = |name: &str| -> Result<Result<u32, Vec<(u32, u32)>>, String> {
            let mut bits = Vec::new();
            for w in fit.weights.iter().filter(|w| w.coord == name) {
                let b = whole(w.bytes)
                    .ok_or_else(|| format!("{name} bit {} weighs {} bytes", w.bit, w.bytes))?;
                bits.push((w.bit, b));
            }
            let unit = bits.first().map_or(0, |&(bit, b)| b >> bit);
            let linear = bits.iter().all(|&(bit, b)| unit << bit == b);
            Ok(if linear { Ok(unit) } else { Err(bits) })
        };
        Ok(Form {
            xor: fit.xor,
            phase_offset: fit.phase_offset,
            origin: whole(fit.origin).ok_or_else(|| format!("origin {}", fit.origin))?,
            row: coord("row")?,
            col: coord("col")?,
        })
    }

    /// Address bits the XOR pattern takes (0: none).
    fn xor_bits(&self) -> u32 {
        match self.xor {
            Swizzle::None => 0,
            s => (s.width() / 16).trailing_zeros(),
        }
    }

    /// The shared byte of (row, col) from the box's start, the box `start` bytes past the base;
    /// what the header's `smem_byte` computes.
    pub fn eval(&self, start: u32, row: u32, col: u32) -> u32 {
        let term = |c: &Result<u32, Vec<(u32, u32)>>, x: u32| match c {
            Ok(unit) => unit * x,
            Err(bits) => bits
                .iter()
                .map(|&(bit, b)| if x >> bit & 1 == 1 { b } else { 0 })
                .sum(),
        };
        let lin = self.origin + term(&self.row, row) + term(&self.col, col);
        let s = self.xor_bits();
        if s == 0 {
            return lin;
        }
        let addr = start + lin;
        let phase = ((addr >> 7).wrapping_sub(self.phase_offset)) & ((1 << s) - 1);
        (addr ^ (phase << 4)) - start
    }

    /// The linear part as C++ over `unsigned row, col`.
    fn cpp_linear(&self) -> String {
        let term = |c: &Result<u32, Vec<(u32, u32)>>, x: &str| -> Vec<String> {
            match c {
                Ok(0) => vec![],
                Ok(unit) => vec![format!("{unit}u * {x}")],
                Err(bits) => bits
                    .iter()
                    .map(|(bit, b)| format!("(({x} >> {bit}) & 1u) * {b}u"))
                    .collect(),
            }
        };
        let mut t = Vec::new();
        if self.origin != 0 {
            t.push(format!("{}u", self.origin));
        }
        t.extend(term(&self.row, "row"));
        t.extend(term(&self.col, "col"));
        if t.is_empty() {
            "0u".into()
        } else {
            t.join(" + ")
        }
    }
}

/// The passed maps of the folders, one per case (hardware over emulator, then the earlier
/// folder), sorted by case.
pub fn select(opts: &Options, notes: &mut Vec<String>) -> Result<Vec<TmaSource>> {
    let mut chosen = std::collections::BTreeMap::new();
    for (file, shown) in record_files(opts, &opts.tma_dirs, SCHEMA, "TMA maps", notes) {
        let map = match TmaMap::load(&file) {
            Ok(m) => m,
            Err(e) => {
                notes.push(format!("skipped {shown}: {e:#}"));
                continue;
            }
        };
        let form = match (&map.status, &map.fit) {
            (Status::Passed, Some(fit)) => Form::of(fit),
            _ => Err("status failed".into()),
        };
        match form {
            Ok(form) => pick(
                &mut chosen,
                map.case.clone(),
                TmaSource {
                    path: shown,
                    map,
                    form,
                },
                |s| s.map.backend == BackendKind::Hardware,
            ),
            Err(e) => notes.push(format!("skipped {shown}: {e}")),
        }
    }
    Ok(chosen.into_values().collect())
}

fn case_block(s: &mut String, src: &TmaSource) {
    let m = &src.map;
    let f = &src.form;
    let ns = cpp_name(&m.case);
    let from = match m.backend {
        BackendKind::Hardware => format!("measured on {}", m.provenance.device),
        BackendKind::Emulator => "emulator: the documented behaviour, not a measurement".into(),
    };
    let _ = writeln!(
        s,
        "// ---- {} ({}):\n//      {}, {}, swizzle {}, a box of {} x {} elements {} bytes past a 1024-byte-aligned base;\n//      from {} ({from}).\nnamespace {ns} {{\nenum : int {{\n  kElemBytes = {},\n  kBoxRows = {},\n  kBoxCols = {},\n  kBoxOffset = {},\n  kSwizzleBytes = {},\n  kLoad = {}\n}};",
        m.case,
        m.instruction,
        match m.direction {
            crate::tma::Dir::Load => "global to shared",
            crate::tma::Dir::Store => "shared to global",
        },
        m.data_type,
        m.swizzle,
        m.box_rows,
        m.box_cols,
        m.smem_offset,
        src.path,
        m.elem_bytes,
        m.box_rows,
        m.box_cols,
        m.smem_offset,
        if m.swizzle == Swizzle::None {
            0
        } else {
            m.swizzle.width()
        },
        i32::from(m.direction == crate::tma::Dir::Load),
    );
    let formula = m.fit.as_ref().map_or("", |x| x.formula.as_str());
    let body = match f.xor_bits() {
        0 => format!("return {};", f.cpp_linear()),
        bits => format!(
            "return wgmma::xor_pattern<{bits}>(kBoxOffset + {}, {}u) - kBoxOffset;",
            f.cpp_linear(),
            f.phase_offset
        ),
    };
    let _ = writeln!(
        s,
        "// Shared byte of box element (row, col) from the box's start, the fitted closed form\n// ({formula}, start = kBoxOffset).\nFP4PROBE_HD constexpr unsigned smem_byte(unsigned row, unsigned col) {{\n  {body}\n}}\n}}  // namespace {ns}\n"
    );
}

/// The header, or nothing where no map was read.
pub fn render(sources: &[TmaSource], opts: &Options, out_dir: &Path) -> Result<Vec<OutFile>> {
    let mut blocks = String::new();
    for src in sources {
        case_block(&mut blocks, src);
    }
    let header = Gathered {
        header: HEADER,
        maps: "TMA maps",
        paths: sources.iter().map(|s| s.path.as_str()).collect(),
        about: format!(
            "// cp.async.bulk.tensor (2D tiles): at which shared byte each element of the box lies, as\n// `fp4probe tma probe` measured it ({} cases), per element size, swizzle mode and box. The\n// swizzle is wgmma::xor_pattern of fp4probe_wgmma_smem.cuh, applied to the address from the\n// 1024-byte-aligned base: a box that starts past the base starts inside the pattern.",
            sources.len()
        ),
        include: "../wgmma/fp4probe_wgmma_smem.cuh",
        ns: "tma",
    };
    Ok(header.render(opts, out_dir, &blocks))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn committed() -> Vec<TmaSource> {
        let root = Path::new(env!("CARGO_MANIFEST_DIR"));
        let mut notes = Vec::new();
        select(&Options::defaults(root), &mut notes).unwrap()
    }

    #[test]
    fn every_form_gives_every_measured_byte() {
        let sources = committed();
        assert!(sources.len() >= 39, "{}", sources.len());
        for s in &sources {
            let m = &s.map;
            for (k, &b) in m.smem_byte.iter().enumerate() {
                let (r, c) = (k as u32 / m.box_cols, k as u32 % m.box_cols);
                assert_eq!(s.form.eval(m.smem_offset, r, c), b, "{} ({r}, {c})", m.case);
            }
        }
    }

    #[test]
    fn the_header_spells_the_forms() {
        let sources = committed();
        let opts = Options::defaults(Path::new("/repo"));
        let a = render(&sources, &opts, Path::new("/repo/kernels/generated")).unwrap();
        assert_eq!(
            a,
            render(&sources, &opts, Path::new("/repo/kernels/generated")).unwrap()
        );
        let h = &a[0].text;
        assert!(
            a[0].shown
                .ends_with("kernels/generated/tma/fp4probe_tma.cuh")
        );
        assert!(h.contains("namespace load_u16_128B_16x64_at256 {"), "{h}");
        assert!(h.contains(
            "  return wgmma::xor_pattern<3>(kBoxOffset + 128u * row + 2u * col, 0u) - kBoxOffset;"
        ));
        assert!(h.contains("  kBoxOffset = 256,"));
        assert!(h.contains("  return 16u * row + 4u * col;"));
        assert!(!h.contains("/work/") && !h.contains("wall_s"));
        assert!(render(&[], &opts, Path::new("/x")).unwrap().is_empty());
    }

    #[test]
    fn a_weight_off_the_multiple_is_spelled_bit_by_bit() {
        let f = Form {
            xor: Swizzle::None,
            phase_offset: 0,
            origin: 0,
            row: Err(vec![(0, 64), (1, 256)]),
            col: Ok(2),
        };
        assert_eq!(
            f.cpp_linear(),
            "((row >> 0) & 1u) * 64u + ((row >> 1) & 1u) * 256u + 2u * col"
        );
        assert_eq!(f.eval(0, 3, 1), 64 + 256 + 2);
    }
}
