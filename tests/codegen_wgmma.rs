//! `fp4probe codegen` for wgmma, offline (no GPU):
//!
//! - the generated shared-memory forms (Rust and C++) give every byte of every committed
//!   shared-memory study, and the generated `make_desc` the probe's descriptors;
//! - the generated register tables (Rust and C++) equal every committed wgmma lane map, slot
//!   for slot;
//! - the headers and `kernels/wgmma_roundtrip.cu`, with every case `--verify` runs, compile
//!   with NVRTC for `compute_90a` (the tables' compile-time checks on) and the pinned ptxas
//!   assembles them for sm_90a; without libnvrtc that test prints a note and passes, unless
//!   `CI` is set;
//! - `--verify`'s plan covers what the issue asks for, and names why the rest is not run.
//!
//! Regeneration itself (byte-identical output, stale files named) is tests/codegen.rs's.

use fp4probe::codegen::wgmma::tables::{SmemForm, WgTable};
use fp4probe::codegen::wgmma::verify::{self, BASE_OFFSET, Case, WIDE};
use fp4probe::codegen::wgmma::{Part, cpp::offset_fn};
use fp4probe::codegen::{self, Options, cpp_name, nvrtc};
use fp4probe::generated::wgmma::{A_TABLES, D_TABLES, SMEM_FORMS};
use fp4probe::isa::Target;
use fp4probe::tools;
use fp4probe::wgmma::desc::{Desc, Major, Swizzle};
use fp4probe::wgmma::map::{WgLaneMap, WgSmemMap};
use fp4probe::wgmma::{ASource, find};
use std::fmt::Write;
use std::path::PathBuf;

mod common;

#[path = "support/cxx.rs"]
mod cxx_support;
#[path = "support/nvrtc.rs"]
mod nvrtc_support;
use cxx_support::run_cxx;
use nvrtc_support::nvrtc_or_skip;

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn wgmma_dir() -> PathBuf {
    root().join("reports/sm_90/wgmma")
}

/// Every committed file of `schema`, parsed, with its path relative to the root.
fn committed<T: serde::de::DeserializeOwned>(schema: &str) -> Vec<(String, T)> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(wgmma_dir())
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "json"))
        .collect();
    files.sort();
    files
        .into_iter()
        .filter_map(|p| {
            let text = std::fs::read_to_string(&p).unwrap();
            text.contains(&format!("\"schema\": \"{schema}\""))
                .then(|| {
                    let rel = p.strip_prefix(root()).unwrap().display().to_string();
                    (rel, serde_json::from_str(&text).unwrap())
                })
        })
        .collect()
}

fn studies() -> Vec<(String, WgSmemMap)> {
    committed("fp4probe.wgmma-smem/1")
}

fn lane_maps() -> Vec<(String, WgLaneMap)> {
    committed("fp4probe.wgmma-lanemap/1")
}

fn form_of(m: &WgSmemMap) -> &'static SmemForm {
    SMEM_FORMS
        .iter()
        .find(|f| f.elem_bits == m.elem_bits && f.major == m.major && f.swizzle == m.swizzle)
        .unwrap_or_else(|| panic!("no form for {}", m.stem()))
}

/// One operand of a study: its name, the start of its descriptor, the descriptor, and the
/// map's entries as (mn, k, bit offset).
type Measured = (char, u32, Desc, Vec<(u32, u32, i64)>);

/// Both operands of a study's packed tile.
fn measured(m: &WgSmemMap) -> Vec<Measured> {
    let p = &m.sweep[0];
    let v = find(&m.variant).unwrap();
    let b_off = p.setting.launch(&v).b_off;
    let entries = |rows: &[[i64; 4]], a: bool| -> Vec<(u32, u32, i64)> {
        rows.iter()
            .map(|&[byte, bit, r, c]| {
                let (mn, k) = if a { (r, c) } else { (c, r) };
                (mn as u32, k as u32, byte * 8 + bit)
            })
            .collect()
    };
    vec![
        (
            'A',
            p.setting.a_desc.start,
            p.setting.a_desc,
            entries(&m.a, true),
        ),
        (
            'B',
            b_off + p.setting.b_desc.start,
            p.setting.b_desc,
            entries(&m.b, false),
        ),
    ]
}

#[test]
fn every_committed_study_has_a_form_that_gives_every_byte() {
    let studies = studies();
    assert!(studies.len() >= 15, "{} studies", studies.len());
    assert_eq!(SMEM_FORMS.len(), studies.len());
    let mut checked = 0;
    for (path, m) in &studies {
        let f = form_of(m);
        assert_eq!(f.source, path.as_str());
        for (op, start, d, entries) in measured(m) {
            // A is m64; B is as wide as the study's N, which sets the form's mn extent.
            let mn = if op == 'A' { 64 } else { f.measured_mn };
            // Every swizzled study swept base offsets 1-3, and its form reproduces them with
            // the base offset as the XOR's row phase.
            if f.xor != Swizzle::None {
                assert_eq!(&f.base_offsets[..], &[0, 1, 2, 3], "{path}");
            }
            assert_eq!(entries.len() as u32, mn * f.measured_k, "{path} {op}");
            for (mn, k, want) in entries {
                let got = f.bit_offset(mn, k, d.lbo, d.sbo, start, d.base_offset);
                assert_eq!(got, want, "{path} {op} (mn {mn}, k {k})");
                checked += 1;
            }
        }
    }
    eprintln!("{checked} measured element positions reproduced");
}

#[test]
fn forms_state_lbo_and_sbo_as_the_sweeps_measured_them() {
    let get = |bits, major, sw| {
        SMEM_FORMS
            .iter()
            .find(|f| f.elem_bits == bits && f.major == major && f.swizzle == sw)
            .unwrap()
    };
    let text = |f: &SmemForm| codegen::wgmma::cpp::form_text(f);
    // Each of these was read off the committed H200 studies by the generator.
    assert_eq!(
        text(get(16, Major::K, Swizzle::None)),
        "byte = 16·(mn%8) + SBO·(mn/8) + 2·(k%8) + LBO·(k/8)"
    );
    assert_eq!(
        text(get(16, Major::K, Swizzle::B128)),
        "byte = X128B(start + 128·(mn%8) + SBO·(mn/8) + 2·k) - start"
    );
    assert_eq!(
        text(get(16, Major::MN, Swizzle::B64)),
        "byte = X64B(start + 2·(mn%32) + LBO·(mn/32) + 64·(k%8) + SBO·(k/8)) - start"
    );
    assert_eq!(
        text(get(8, Major::K, Swizzle::None)),
        "byte = 16·(mn%8) + SBO·(mn/8) + (k%16) + LBO·(k/16)"
    );
    // Doubling LBO moved nothing under a K-major swizzle; MN-major without swizzle steps mn
    // by SBO (its SBO×2 point doubles LBO too, so that the tiles stay apart).
    let f = get(16, Major::K, Swizzle::B32);
    assert!(f.terms.iter().all(|t| t.lbo == 0));
    assert!(
        f.check_fields(1, f.terms.iter().map(|t| t.sbo).max().unwrap() as u32)
            .is_ok()
    );
    let f = get(16, Major::MN, Swizzle::None);
    assert_eq!(
        text(f),
        "byte = 2·(mn%8) + SBO·(mn/8) + 16·(k%8) + LBO·(k/8)"
    );
    assert_eq!((f.pinned_lbo, f.pinned_sbo), (None, None));
    assert!(f.check_fields(4096, 256).is_ok());
}

#[test]
fn rust_register_tables_equal_every_lane_map() {
    let maps = lane_maps();
    assert!(maps.len() >= 21);
    let tables: Vec<&WgTable> = D_TABLES.iter().chain(A_TABLES.iter()).collect();
    let mut seen = 0;
    for (path, m) in &maps {
        for reg in m.registers.iter().filter(|r| r.operand != "C") {
            let t = tables
                .iter()
                .find(|t| {
                    t.sources.contains(&path.as_str())
                        && t.key.starts_with(&reg.operand.to_lowercase())
                })
                .unwrap_or_else(|| panic!("{path}: no table holds its {}", reg.operand));
            assert!(t.variants.contains(&m.variant.as_str()));
            assert_eq!(t.lanes, 128);
            let ot = &t.table;
            assert_eq!(ot.slots(), reg.slots.len(), "{path} {}", reg.operand);
            for &[th, r, e, row, col] in &reg.slots {
                assert_eq!(
                    ot.coord(th, r, e),
                    (row, col),
                    "{path} {} slot ({th}, {r}, {e})",
                    reg.operand
                );
                let s = ot.slot_of(row, col);
                assert_eq!((s.lane, s.reg, s.elem), (th, r, e));
            }
            seen += 1;
        }
        // C is read from D's registers: the maps say so slot for slot.
        let d = m.registers.iter().find(|r| r.operand == "D").unwrap();
        let c = m.registers.iter().find(|r| r.operand == "C").unwrap();
        assert_eq!(d.slots, c.slots, "{path}");
    }
    eprintln!("{seen} measured operands equal their generated tables");
}

#[test]
fn families_take_tables_where_measured_and_closed_forms_where_not() {
    let (g, _) = (codegen::generate(&Options::defaults(&root())).unwrap(), ());
    let wg = &g.wgmma;
    assert_eq!(wg.lane_maps.len(), lane_maps().len());
    for f in &wg.families {
        let has_map = !f.maps.is_empty();
        assert_eq!(matches!(f.d, Part::Table(_)), has_map, "{}", f.stem);
        let file = g
            .files
            .iter()
            .find(|o| o.shown == format!("kernels/generated/wgmma/{}", f.header_name()))
            .unwrap();
        assert!(
            file.text
                .starts_with("// GENERATED by `fp4probe codegen` from ")
        );
        assert!(
            !file.text.contains("/tmp/") && !file.text.contains("202"),
            "{}",
            f.stem
        );
        assert!(file.text.contains(&f.ss.opcode()));
    }
    for stem in codegen::wgmma::CLOSED_FORM_FAMILIES {
        let f = wg.families.iter().find(|f| f.stem == stem).unwrap();
        assert!(f.maps.is_empty());
        let Part::ClosedForm { from, data, .. } = &f.d else {
            panic!("{stem}: D should be a closed form")
        };
        assert!(from.iter().all(|k| k.starts_with("d.f32.")));
        // The closed form at N = 256 is a bijection onto the 64 x 256 tile.
        let (r, c) = data.closed_form.as_ref().unwrap();
        let mut seen = std::collections::HashSet::new();
        for lane in 0..128 {
            for reg in 0..128 {
                let rc = (r.eval(lane, reg, 0), c.eval(lane, reg, 0));
                assert!((0..64).contains(&rc.0) && (0..256).contains(&rc.1));
                assert!(seen.insert(rc));
            }
        }
    }
}

/// A descriptor start off the 1024-byte grid (as the studies' base-offset points had).
const BO_START: u32 = 256;

/// The plain C++17 program: every form over every element of its study's packed tiles, the
/// descriptors of those tiles, and every register table's coordinates.
fn cxx_program(studies: &[(String, WgSmemMap)]) -> String {
    let mut s = String::from(
        "#include \"generated/wgmma/fp4probe_wgmma.cuh\"\n#include <cstdio>\nusing namespace fp4probe::wgmma;\n",
    );
    s += "static_assert(make_desc(1024, 128, 256, 0, kSwizzleNone) == ((1024ull >> 4) | (8ull << 16) | (16ull << 32)), \"desc\");\n";
    s += "int main() {\n";
    for (path, m) in studies {
        let f = form_of(m);
        for (op, start, d, entries) in measured(m) {
            let _ = writeln!(
                s,
                "  std::printf(\"{path} {op}\");\n  for (unsigned mn = 0; mn < {mn}; ++mn)\n    for (unsigned k = 0; k < {k}; ++k)\n      std::printf(\" %u\", {}(mn, k, {}, {}, {start}, {}));\n  std::printf(\"\\n\");",
                offset_fn(f),
                d.lbo,
                d.sbo,
                d.base_offset,
                mn = entries.iter().map(|e| e.0).max().unwrap() + 1,
                k = f.measured_k,
            );
            let _ = writeln!(
                s,
                "  std::printf(\"desc %llu\\n\", make_desc({start}, {}, {}, {}, static_cast<SwizzleMode>({})));",
                d.lbo,
                d.sbo,
                d.base_offset,
                d.swizzle.code()
            );
        }
        // The base offsets the form was measured with, at a start off the 1024-byte grid.
        for &bo in f.base_offsets.iter().filter(|&&b| b != 0) {
            let _ = writeln!(
                s,
                "  std::printf(\"{path} base offset {bo}\");\n  for (unsigned mn = 0; mn < 64; ++mn)\n    for (unsigned k = 0; k < {k}; ++k)\n      std::printf(\" %u\", {}(mn, k, {lbo}, {sbo}, {BO_START}, {bo}));\n  std::printf(\"\\n\");",
                offset_fn(f),
                k = f.measured_k,
                lbo = f.pinned_lbo.unwrap_or(8192),
                sbo = f.pinned_sbo.unwrap_or(1024),
            );
        }
    }
    for t in D_TABLES.iter().chain(A_TABLES.iter()) {
        let ns = cpp_name(t.key);
        let l = &t.key[..1];
        let _ = writeln!(
            s,
            "  std::printf(\"{key}\");\n  for (int lane = 0; lane < 128; ++lane)\n    for (int reg = 0; reg < {ns}::k{u}_regs; ++reg)\n      for (int e = 0; e < {ns}::k{u}_elems_per_reg; ++e) {{\n        const fp4probe::Coord c = {ns}::{l}_coord(lane, reg, e);\n        std::printf(\" %d,%d\", c.row, c.col);\n      }}\n  std::printf(\"\\n\");",
            key = t.key,
            u = l.to_uppercase(),
        );
    }
    s += "  return 0;\n}\n";
    s
}

#[test]
fn cxx_forms_descriptors_and_tables_match_the_measurements() {
    // Without __CUDACC__ the headers are host constexpr code (their static_asserts run in the
    // host compiler). Needs a C++17 compiler ($CXX, else c++); skipped without one.
    let test = "cxx_forms_descriptors_and_tables_match_the_measurements";
    let studies = studies();
    let dir = common::tmpdir("codegen_wgmma", "cxx");
    let Some(text) = run_cxx(test, &cxx_program(&studies), &root().join("kernels"), &dir) else {
        return;
    };
    let mut lines = text.lines();
    for (path, m) in &studies {
        let f = form_of(m);
        for (op, start, d, entries) in measured(m) {
            let line = lines.next().unwrap();
            let mut it = line.split(' ');
            assert_eq!(it.next(), Some(path.as_str()));
            assert_eq!(it.next(), Some(op.to_string().as_str()));
            // Byte offsets, or bit offsets for 1-bit elements.
            let unit = if f.elem_bits >= 8 { 8 } else { 1 };
            let got: Vec<i64> = it.map(|x| x.parse::<i64>().unwrap() * unit).collect();
            for (mn, k, want) in entries {
                assert_eq!(
                    got[(mn * f.measured_k + k) as usize],
                    want,
                    "{path} {op} (mn {mn}, k {k})"
                );
            }
            let desc = Desc { start, ..d };
            assert_eq!(
                lines.next().unwrap(),
                format!("desc {}", desc.encode(0)),
                "{path} {op}"
            );
        }
        for &bo in f.base_offsets.iter().filter(|&&b| b != 0) {
            let line = lines.next().unwrap();
            let head = format!("{path} base offset {bo} ");
            let got = line.strip_prefix(&head).unwrap_or_else(|| panic!("{line}"));
            let (lbo, sbo) = (f.pinned_lbo.unwrap_or(8192), f.pinned_sbo.unwrap_or(1024));
            let unit = if f.elem_bits >= 8 { 8 } else { 1 };
            let mut got = got.split(' ').map(|x| x.parse::<i64>().unwrap() * unit);
            for mn in 0..64 {
                for k in 0..f.measured_k {
                    let want = f.bit_offset(mn, k, lbo, sbo, BO_START, bo);
                    let want = if unit == 8 {
                        want.div_euclid(8) * 8
                    } else {
                        want
                    };
                    assert_eq!(
                        got.next(),
                        Some(want),
                        "{path} base offset {bo} ({mn}, {k})"
                    );
                }
            }
        }
    }
    for t in D_TABLES.iter().chain(A_TABLES.iter()) {
        let ot = &t.table;
        let mut want = t.key.to_string();
        for i in 0..ot.slots() {
            let _ = write!(want, " {},{}", ot.row[i], ot.col[i]);
        }
        assert_eq!(lines.next().unwrap(), want, "{}", t.key);
    }
    assert_eq!(lines.next(), None);
}

fn plans() -> (Vec<verify::Plan>, Vec<(Case, String)>) {
    let mut ok = Vec::new();
    let mut not = Vec::new();
    for c in verify::cases() {
        match verify::plan(&c) {
            Ok(p) => ok.push(p),
            Err(why) => not.push((c, why)),
        }
    }
    (ok, not)
}

#[test]
fn verify_covers_every_type_at_n16_and_every_swizzle_of_the_wide_tiles() {
    let (ok, not) = plans();
    for (c, why) in &not {
        eprintln!("not run: {}: {why}", c.id());
    }
    let ran = |id: &str| ok.iter().any(|p| p.case.id() == id);
    // D and A tables of every type at N = 16, b1 included.
    for t in A_TABLES.iter() {
        for v in t.variants {
            let id = format!("{v}.K.none");
            assert!(ran(&id), "{id} not planned");
        }
    }
    for fam in WIDE {
        for sw in Swizzle::ALL {
            assert!(ran(&format!("{fam}.ss.K.{}", sw.name())), "{fam} {sw}");
            if fam.contains("bf16") && (fam.contains("n64") || sw != Swizzle::B128) {
                assert!(ran(&format!("{fam}.ss.MN.{}", sw.name())), "{fam} MN {sw}");
            }
            if sw != Swizzle::None {
                let id = format!("{fam}.ss.K.{}.bo{BASE_OFFSET}", sw.name());
                assert!(ran(&id), "{id}");
            }
        }
        assert!(ran(&format!("{fam}.rs.K.128B")), "{fam} rs");
    }
    assert!(WIDE.iter().any(|f| f.contains("b1")));
    // What stays out is named with the reason the measurements give.
    for (c, why) in &not {
        assert!(why.contains("measured for mn < 64"), "{}: {why}", c.id());
    }
    // Every runnable plan places A and B on distinct bytes inside shared memory.
    for p in &ok {
        assert!(p.bytes <= 227 * 1024 - 1024);
        assert_eq!(p.b_off % 1024, 0);
        assert_eq!(p.case.variant.a_src == ASource::Ss, p.a.is_some());
    }
}

#[test]
fn headers_and_the_wgmma_round_trip_compile_for_sm_90a_and_assemble() {
    let test = "headers_and_the_wgmma_round_trip_compile_for_sm_90a_and_assemble";
    if !nvrtc_or_skip(test) {
        return;
    }
    let (ok, _) = plans();
    let cases: Vec<Case> = ok.iter().map(|p| p.case.clone()).collect();
    let kernels = root().join("kernels");
    let mut src = verify::source(&cases);
    src.insert_str(0, "#include \"generated/wgmma/fp4probe_wgmma.cuh\"\n");
    let mut options = codegen::verify::options(&kernels, "compute_90a");
    options.push("-DFP4PROBE_TABLE_CHECKS=1".into());
    let t0 = std::time::Instant::now();
    let out = nvrtc::compile(&src, "wgmma_cases.cu", &options, nvrtc::Output::Ptx)
        .unwrap_or_else(|e| panic!("{test}: {e:#}"));
    assert!(out.log.is_empty(), "{test}: NVRTC warnings:\n{}", out.log);
    let ptx = out.ptx();
    eprintln!(
        "{test}: NVRTC compute_90a: {:.1} s, {} kB of PTX, {} kernels",
        t0.elapsed().as_secs_f64(),
        ptx.len() / 1024,
        cases.len()
    );
    for c in &cases {
        assert!(
            ptx.contains(&format!(".entry {}(", c.entry())),
            "no kernel {}",
            c.entry()
        );
        assert!(
            ptx.contains(&c.variant.opcode()),
            "{} not in the PTX",
            c.variant.opcode()
        );
    }
    match tools::assemble(&ptx, Target::sm_a(9, 0)) {
        Ok(cubin) => assert!(!cubin.is_empty()),
        Err(tools::AssembleError::NotFound) if std::env::var_os("CI").is_none() => {
            eprintln!("{test}: ptxas not found: NVRTC compile checked, assembly skipped");
        }
        Err(e) => panic!("{test}: {e}"),
    }
}

#[test]
fn verify_without_a_gpu_says_skipped() {
    if fp4probe::device::cuda::CudaBackend::open().is_ok() {
        eprintln!("verify_without_a_gpu_says_skipped: a GPU is here; nothing to check");
        return;
    }
    let o = common::fp4probe(&["codegen", "--verify"]);
    assert_eq!(o.status.code(), Some(2), "{}", common::text(&o));
    let t = common::text(&o);
    assert!(t.contains("codegen --verify: skipped:"), "{t}");
    assert!(!t.contains("panicked"), "{t}");
}
