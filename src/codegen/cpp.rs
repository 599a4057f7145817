//! The CUDA C++ headers: `fp4probe_common.cuh`, one `<stem>.cuh` per variant, and the umbrella
//! `fp4probe_layouts.cuh`. Plain C++17 as well as CUDA: without `__CUDACC__` the tables and
//! functions are ordinary `constexpr` host code and the `mma` wrappers are left out.

use super::formula::Formula;
use super::{COMMON_HEADER, MARKER, OperandData, Source, operand_data};
use crate::device::BackendKind;
use crate::isa::Operand;
use crate::probe::scale::ScaleOperand;
use anyhow::Result;
use std::fmt::Write;

pub(super) fn regenerate_line(command: &str) -> String {
    format!(
        "// Regenerate with `{command}`; `fp4probe codegen --check` fails while this file is stale.\n"
    )
}

/// `fp4probe_common.cuh`: what every variant header shares.
pub fn common_header(command: &str) -> String {
    let mut s = format!("// {MARKER}. Do not edit.\n");
    s += &regenerate_line(command);
    s += COMMON_BODY;
    s
}

const COMMON_BODY: &str = r#"//
// What every kernels/generated/<variant>.cuh shares: slot and coordinate types, the qualifiers
// of tables and functions, and the bit helpers that put an element's value bits into its
// register container and take them out again.
#pragma once

#if defined(__CUDACC__)
#define FP4PROBE_HD __host__ __device__
#else
#define FP4PROBE_HD
#endif

// A table is constexpr everywhere; in device code it also lives in device memory (nvcc compiles
// host and device code in separate passes, NVRTC only device code), so kernels can index it
// with a run-time lane. Tables are variable templates (write kA_row<>[lane][reg][elem]) and
// the functions that read them function templates (called as usual: a_coord(lane, reg, elem)),
// so that only the tables a kernel indexes at run time end up in its PTX; scalar constants are
// enumerators and strings come from functions for the same reason (NVRTC emits every
// namespace-scope variable).
//
// Every variant header checks its tables at compile time with static_assert (the inverse table
// inverts the slot tables; the closed form gives the same elements) where FP4PROBE_TABLE_CHECKS
// is 1: by default in host compilation (any C++17 compiler, nvcc's host pass), not in device
// compilation, where evaluating the checks would put every table into the PTX. Define it to 1
// or 0 to choose.
#if defined(__CUDA_ARCH__)
#define FP4PROBE_TABLE __device__ constexpr
#else
#define FP4PROBE_TABLE constexpr
#endif

#if !defined(FP4PROBE_TABLE_CHECKS)
#if defined(__CUDA_ARCH__)
#define FP4PROBE_TABLE_CHECKS 0
#else
#define FP4PROBE_TABLE_CHECKS 1
#endif
#endif

namespace fp4probe {

// A register slot: element `elem` of register `reg` of lane `lane`.
struct Slot {
  int lane;
  int reg;
  int elem;
};

// A matrix coordinate: A is (m, k), B is (k, n), C and D are (m, n).
struct Coord {
  int row;
  int col;
};

// The flat index of a slot: (lane * regs + reg) * elems_per_reg + elem.
FP4PROBE_HD constexpr int slot_index(int lane, int reg, int elem, int regs, int elems_per_reg) {
  return (lane * regs + reg) * elems_per_reg + elem;
}

// The slot of a flat index.
FP4PROBE_HD constexpr Slot slot_of_index(int index, int regs, int elems_per_reg) {
  return Slot{index / (regs * elems_per_reg), (index / elems_per_reg) % regs,
              index % elems_per_reg};
}

// The register type of a register width: 32-bit registers as unsigned, 64-bit (f64) registers
// as unsigned long long; both hold raw bits.
template <int Bits>
struct reg_type {
  using type = unsigned;
};
template <>
struct reg_type<64> {
  using type = unsigned long long;
};

// All ones in the low `bits` bits.
FP4PROBE_HD constexpr unsigned long long low_mask(int bits) {
  return bits >= 64 ? ~0ull : (1ull << bits) - 1;
}

// Put the value bits `v` of element `elem` into register `r`: elements are container_bits wide,
// the value sits value_shift bits up inside its container (an e2m1 under kind::f8f6f4 or
// kind::mxf8f6f4 in bits 5..2 of its byte) and is value_bits wide. Other bits of `r` are kept.
template <class R>
FP4PROBE_HD constexpr void insert_bits(R& r, int elem, int container_bits, int value_shift,
                                       int value_bits, unsigned long long v) {
  const int shift = elem * container_bits + value_shift;
  const unsigned long long m = low_mask(value_bits) << shift;
  r = static_cast<R>((static_cast<unsigned long long>(r) & ~m) | ((v << shift) & m));
}

// The value bits of element `elem` of register `r` (the inverse of insert_bits).
template <class R>
FP4PROBE_HD constexpr unsigned long long extract_bits(R r, int elem, int container_bits,
                                                      int value_shift, int value_bits) {
  return (static_cast<unsigned long long>(r) >> (elem * container_bits + value_shift)) &
         low_mask(value_bits);
}

}  // namespace fp4probe
"#;

/// `fp4probe_layouts.cuh`: every variant header.
pub fn umbrella_header(sources: &[Source], command: &str) -> String {
    let mut s = format!("// {MARKER}. Do not edit.\n");
    s += &regenerate_line(command);
    s += "//\n// Every generated variant header, one per mma.sync variant (namespace fp4probe::<variant>).\n";
    let hw = sources.iter().filter(|x| x.hardware()).count();
    let _ = writeln!(
        s,
        "// {} variants: {hw} from hardware-measured maps, {} from emulator maps (documented layout,\n// not hardware-measured).",
        sources.len(),
        sources.len() - hw
    );
    s += "#pragma once\n\n";
    let _ = writeln!(s, "#include \"{COMMON_HEADER}\"");
    for src in sources {
        let _ = writeln!(s, "#include \"{}\"", src.header_name());
    }
    s
}

/// Wrap `text` after words to lines of at most `width` characters, each starting with `prefix`.
pub(super) fn wrap(text: &str, prefix: &str, width: usize) -> String {
    let mut out = String::new();
    let mut line = String::from(prefix);
    for w in text.split_whitespace() {
        if line.len() > prefix.len() && line.len() + 1 + w.len() > width {
            out += line.trim_end();
            out.push('\n');
            line = String::from(prefix);
        }
        if line.len() > prefix.len() {
            line.push(' ');
        }
        line += w;
    }
    if line.len() > prefix.len() {
        out += &line;
        out.push('\n');
    }
    out
}

fn backend_words(src: &Source) -> &'static str {
    match src.map.backend {
        BackendKind::Hardware => "hardware",
        BackendKind::Emulator => "emulator (documented layout), not hardware-measured",
    }
}

/// Smallest unsigned type holding every value.
pub(super) fn int_type(values: &[u32]) -> &'static str {
    match values.iter().copied().max().unwrap_or(0) {
        0..=255 => "unsigned char",
        256..=65535 => "unsigned short",
        _ => "unsigned int",
    }
}

pub(super) fn join(xs: impl IntoIterator<Item = u32>) -> String {
    xs.into_iter()
        .map(|x| x.to_string())
        .collect::<Vec<_>>()
        .join(", ")
}

pub(super) fn lower(op: Operand) -> String {
    op.name().to_ascii_lowercase()
}

fn reg_ctype(reg_bits: u32) -> &'static str {
    if reg_bits == 64 {
        "unsigned long long"
    } else {
        "unsigned"
    }
}

fn constraint(reg_bits: u32) -> &'static str {
    if reg_bits == 64 { "l" } else { "r" }
}

/// Names of an operand's (row, col): A is (m, k), B (k, n), C and D (m, n).
pub(super) fn coord_names(op: Operand) -> (&'static str, &'static str) {
    match op {
        Operand::A => ("m", "k"),
        Operand::B => ("k", "n"),
        _ => ("m", "n"),
    }
}

/// One operand's constants, tables, functions and compile-time checks.
pub(super) fn operand_section(s: &mut String, od: &OperandData) {
    operand_head(s, od);
    operand_tables(s, od);
    closed_form_functions(s, od.op, &od.closed_form);
    operand_checks(s, od);
}

/// An operand's description, constants, element type and CuTe layout.
pub(super) fn operand_head(s: &mut String, od: &OperandData) {
    let n = od.name();
    let l = lower(od.op);
    let f = &od.frag;
    let (rn, cn) = coord_names(od.op);
    let _ = writeln!(
        s,
        "// ---- {n}: {rows} x {cols} ({rn} x {cn}), {elem} in {cb}-bit containers (value bits {vs}..{hi}),\n//      {regs} register(s) of {rb} bits per lane, {epr} element(s) per register",
        rows = f.rows,
        cols = f.cols,
        elem = f.elem,
        cb = f.container_bits,
        vs = od.value_shift,
        hi = od.value_shift + od.value_bits - 1,
        regs = f.regs,
        rb = f.reg_bits,
        epr = od.elems_per_reg,
    );
    let consts = [
        ("rows", f.rows),
        ("cols", f.cols),
        ("regs", f.regs),
        ("reg_bits", f.reg_bits),
        ("elems_per_reg", od.elems_per_reg),
        ("container_bits", f.container_bits),
        ("value_bits", od.value_bits),
        ("value_shift", od.value_shift),
        ("slots", od.lanes * f.regs * od.elems_per_reg),
    ];
    let items: Vec<String> = consts
        .iter()
        .map(|(name, v)| format!("  k{n}_{name} = {v},"))
        .collect();
    let _ = writeln!(s, "enum : int {{\n{}\n}};", items.join("\n"));
    let _ = writeln!(
        s,
        "FP4PROBE_HD constexpr const char* {l}_type() {{ return \"{}\"; }}",
        f.elem.ptx()
    );
    if let Some(c) = &od.cute {
        let _ = writeln!(
            s,
            "// CuTe thread-value layout (lane, reg * {epr} + elem) -> {idx}: {c}",
            epr = od.elems_per_reg,
            idx = match od.op {
                Operand::B => format!("n + {}*k", f.cols),
                _ => format!("{rn} + {}*{cn}", f.rows),
            }
        );
    }
}

/// An operand's slot tables, their inverse, and the lookup functions.
fn operand_tables(s: &mut String, od: &OperandData) {
    let n = od.name();
    let l = lower(od.op);
    let f = &od.frag;
    let (rn, cn) = coord_names(od.op);
    let lanes = od.lanes;
    // Forward tables, one line per lane.
    let (regs, epr) = (f.regs as usize, od.elems_per_reg as usize);
    for (what, vals) in [("row", &od.row), ("col", &od.col)] {
        let coord = if what == "row" { rn } else { cn };
        let _ = writeln!(
            s,
            "// Slot (lane, reg, elem) -> {what} ({coord}).\ntemplate <int = 0>\nFP4PROBE_TABLE {} k{n}_{what}[{lanes}][{regs}][{epr}] = {{",
            int_type(vals)
        );
        for lane in 0..lanes as usize {
            let regs_text: Vec<String> = (0..regs)
                .map(|r| {
                    let base = (lane * regs + r) * epr;
                    format!("{{{}}}", join(vals[base..base + epr].iter().copied()))
                })
                .collect();
            let _ = writeln!(s, "    {{{}}},  // lane {lane}", regs_text.join(", "));
        }
        s.push_str("};\n");
    }
    // Inverse table, one line per row.
    let _ = writeln!(
        s,
        "// ({rn}, {cn}) -> flat slot index (lane * k{n}_regs + reg) * k{n}_elems_per_reg + elem.\ntemplate <int = 0>\nFP4PROBE_TABLE {} k{n}_slot[{}][{}] = {{",
        int_type(&od.slot),
        f.rows,
        f.cols
    );
    for r in 0..f.rows as usize {
        let c = f.cols as usize;
        let _ = writeln!(
            s,
            "    {{{}}},  // {rn} = {r}",
            join(od.slot[r * c..(r + 1) * c].iter().copied())
        );
    }
    s.push_str("};\n");
    let _ = writeln!(
        s,
        "// The {rn} x {cn} element that slot (lane, reg, elem) holds.\ntemplate <int = 0>\nFP4PROBE_HD constexpr Coord {l}_coord(int lane, int reg, int elem) {{\n  const int row = k{n}_row<>[lane][reg][elem], col = k{n}_col<>[lane][reg][elem];\n  return Coord{{row, col}};\n}}"
    );
    let _ = writeln!(
        s,
        "// The slot that holds element ({rn}, {cn}).\ntemplate <int = 0>\nFP4PROBE_HD constexpr Slot {l}_slot(int {rn}, int {cn}) {{\n  const int index = k{n}_slot<>[{rn}][{cn}];\n  return slot_of_index(index, k{n}_regs, k{n}_elems_per_reg);\n}}"
    );
}

/// The closed form as `constexpr` functions `x_row_formula`, `x_col_formula` and
/// `x_coord_formula`, or a comment saying why there is none.
pub(super) fn closed_form_functions(
    s: &mut String,
    op: Operand,
    closed_form: &std::result::Result<(Formula, Formula), String>,
) {
    let l = lower(op);
    let (rn, cn) = coord_names(op);
    match closed_form {
        Ok((row, col)) => {
            let _ = writeln!(
                s,
                "// Closed form (fitted by fp4probe; g = lane / 4, t = lane % 4, e = elem):\n//   {rn} = {}\n//   {cn} = {}",
                row.cpp(),
                col.cpp()
            );
            for (what, fm) in [("row", row), ("col", col)] {
                s.push_str(&formula_function(&format!("{l}_{what}_formula"), fm));
            }
            let _ = writeln!(
                s,
                "FP4PROBE_HD constexpr Coord {l}_coord_formula(int lane, int reg, int elem) {{\n  return Coord{{{l}_row_formula(lane, reg, elem), {l}_col_formula(lane, reg, elem)}};\n}}"
            );
        }
        Err(why) => {
            let _ = writeln!(s, "// No closed form: {why}.");
        }
    }
}

/// `FP4PROBE_HD constexpr int name(int lane, int reg, int e)` returning `fm`, with `g` and `t`
/// as locals where it names them and unused parameters left unnamed (no -Wunused-parameter).
pub(crate) fn formula_function(name: &str, fm: &Formula) -> String {
    use super::formula::Var;
    let mut locals = String::new();
    if fm.uses(Var::G) {
        locals += "  const int g = lane / 4;\n";
    }
    if fm.uses(Var::T) {
        locals += "  const int t = lane % 4;\n";
    }
    let param = |name: &str, used: bool| {
        if used {
            format!("int {name}")
        } else {
            format!("int /*{name}*/")
        }
    };
    let params = [
        param(
            "lane",
            fm.uses(Var::Lane) || fm.uses(Var::G) || fm.uses(Var::T),
        ),
        param("reg", fm.uses(Var::Reg)),
        param("e", fm.uses(Var::E)),
    ]
    .join(", ");
    format!(
        "FP4PROBE_HD constexpr int {name}({params}) {{\n{locals}  return {};\n}}\n",
        fm.cpp()
    )
}

/// The compile-time check that the tables invert each other and agree with the closed form.
fn operand_checks(s: &mut String, od: &OperandData) {
    let n = od.name();
    let l = lower(od.op);
    let lanes = od.lanes;
    // Compile-time checks.
    let formula_check = if od.closed_form.is_ok() {
        format!(
            "\n        if (r != {l}_row_formula(lane, reg, elem) || c != {l}_col_formula(lane, reg, elem)) return false;"
        )
    } else {
        String::new()
    };
    let _ = writeln!(
        s,
        "namespace detail {{
// Every slot's element maps back to the slot{also}.
// (Table reads initialise locals: NVRTC's constant evaluator reads __device__ variable
// templates only there.)
template <int = 0>
FP4PROBE_HD constexpr bool {l}_tables_agree() {{
  for (int lane = 0; lane < {lanes}; ++lane)
    for (int reg = 0; reg < k{n}_regs; ++reg)
      for (int elem = 0; elem < k{n}_elems_per_reg; ++elem) {{
        const int r = k{n}_row<>[lane][reg][elem], c = k{n}_col<>[lane][reg][elem];
        if (r < 0 || r >= k{n}_rows || c < 0 || c >= k{n}_cols) return false;
        const int s = k{n}_slot<>[r][c];
        if (s != slot_index(lane, reg, elem, k{n}_regs, k{n}_elems_per_reg)) return false;{formula_check}
      }}
  return true;
}}
}}  // namespace detail
#if FP4PROBE_TABLE_CHECKS
static_assert(detail::{l}_tables_agree<>(), \"{n}: the slot tables, the inverse table{also2} disagree\");
#endif
",
        also = if od.closed_form.is_ok() {
            ", and the closed form gives the table's element"
        } else {
            ""
        },
        also2 = if od.closed_form.is_ok() {
            " and the closed form"
        } else {
            ""
        },
    );
}

/// The inline-PTX wrapper of the instruction, registers as raw bits.
fn mma_wrapper(s: &mut String, src: &Source, ods: &[OperandData]) {
    let v = &src.variant;
    let mut params = Vec::new();
    let mut outs = Vec::new();
    let mut ins = Vec::new();
    let mut lists: Vec<String> = Vec::new();
    let mut next = 0usize;
    for op in [Operand::D, Operand::A, Operand::B, Operand::C] {
        let od = &ods[op as usize];
        let l = lower(op);
        let regs = od.frag.regs as usize;
        let ty = reg_ctype(od.frag.reg_bits);
        let con = constraint(od.frag.reg_bits);
        params.push(if op == Operand::D {
            format!("{ty} (&{l})[{regs}]")
        } else {
            format!("const {ty} (&{l})[{regs}]")
        });
        let nums: Vec<String> = (next..next + regs).map(|i| format!("%{i}")).collect();
        lists.push(format!("{{{}}}", nums.join(", ")));
        next += regs;
        for i in 0..regs {
            if op == Operand::D {
                outs.push(format!("\"={con}\"({l}[{i}])"));
            } else {
                ins.push(format!("\"{con}\"({l}[{i}])"));
            }
        }
    }
    let mut operands = lists.join(", ");
    let mut template = String::new();
    if v.scale.is_some() {
        params.push("unsigned scale_a".into());
        params.push("unsigned scale_b".into());
        let _ = write!(
            operands,
            ", %{}, {{%{}, %{}}}, %{}, {{%{}, %{}}}",
            next,
            next + 1,
            next + 2,
            next + 3,
            next + 4,
            next + 5
        );
        ins.extend(
            [
                "\"r\"(scale_a)",
                "\"n\"(ByteA)",
                "\"n\"(ThreadA)",
                "\"r\"(scale_b)",
                "\"n\"(ByteB)",
                "\"n\"(ThreadB)",
            ]
            .map(String::from),
        );
        template =
            "template <int ByteA = 0, int ThreadA = 0, int ByteB = 0, int ThreadB = 0>\n".into();
    }
    let _ = writeln!(
        s,
        "#if defined(__CUDACC__)\n// D = A * B + C by exactly this instruction (needs {target}); registers as raw bits. Not\n// volatile: a pure function of its registers, which the compiler may schedule freely.{scaled}",
        scaled = if v.scale.is_some() {
            "\n// Block scales: scale_a and scale_b are this lane's scale words; ByteA/ThreadA and\n// ByteB/ThreadB the {byte-id, thread-id} selectors (immediates)."
        } else {
            ""
        },
        target = v.min_target,
    );
    let _ = writeln!(
        s,
        "{template}__device__ __forceinline__ void mma({}) {{\n  asm(\n      \"{} {operands};\\n\"\n      : {}\n      : {});\n}}\n#endif  // __CUDACC__",
        params.join(", "),
        v.opcode(),
        outs.join(", "),
        ins.join(", ")
    );
}

fn traits(s: &mut String, src: &Source, ods: &[OperandData]) {
    let ns = src.cpp_name();
    let v = &src.variant;
    s.push_str(
        "// Everything above as one type, for kernels templated over the variant (see\n// kernels/tile_roundtrip.cu).\nstruct Traits {\n",
    );
    let _ = writeln!(
        s,
        "  enum : int {{ m = kM, n = kN, k = kK }};\n  enum : bool {{ block_scaled = kBlockScaled, hardware_measured = kHardwareMeasured }};"
    );
    for od in ods {
        let n = od.name();
        let l = lower(od.op);
        let (rn, cn) = match od.op {
            Operand::A => ("m", "k"),
            Operand::B => ("k", "n"),
            _ => ("m", "n"),
        };
        let _ = writeln!(
            s,
            "  struct {n} {{
    enum : int {{
      rows = k{n}_rows, cols = k{n}_cols, regs = k{n}_regs, reg_bits = k{n}_reg_bits,
      elems_per_reg = k{n}_elems_per_reg, container_bits = k{n}_container_bits,
      value_bits = k{n}_value_bits, value_shift = k{n}_value_shift
    }};
    using reg_t = reg_type<k{n}_reg_bits>::type;
    template <int = 0>
    FP4PROBE_HD static constexpr Coord coord(int lane, int reg, int elem) {{ return {l}_coord(lane, reg, elem); }}
    template <int = 0>
    FP4PROBE_HD static constexpr Slot slot(int {rn}, int {cn}) {{ return {l}_slot({rn}, {cn}); }}
  }};"
        );
    }
    let regs = |op: Operand| ods[op as usize].frag.regs;
    let sig = format!(
        "D::reg_t (&d)[{}], const A::reg_t (&a)[{}], const B::reg_t (&b)[{}], const C::reg_t (&c)[{}]",
        regs(Operand::D),
        regs(Operand::A),
        regs(Operand::B),
        regs(Operand::C)
    );
    if v.scale.is_some() {
        let _ = writeln!(
            s,
            "#if defined(__CUDACC__)\n  template <int ByteA = 0, int ThreadA = 0, int ByteB = 0, int ThreadB = 0>\n  __device__ __forceinline__ static void mma({sig}, unsigned scale_a, unsigned scale_b) {{\n    ::fp4probe::{ns}::mma<ByteA, ThreadA, ByteB, ThreadB>(d, a, b, c, scale_a, scale_b);\n  }}\n#endif"
        );
    } else {
        let _ = writeln!(
            s,
            "#if defined(__CUDACC__)\n  __device__ __forceinline__ static void mma({sig}) {{ ::fp4probe::{ns}::mma(d, a, b, c); }}\n#endif"
        );
    }
    s.push_str("};\n");
}

/// `<stem>.cuh` for one variant.
pub fn variant_header(src: &Source, command: &str) -> Result<String> {
    let ods = operand_data(src)?;
    let v = &src.variant;
    let map = &src.map;
    let p = &map.provenance;
    let mut s = String::new();
    let mut details = vec![format!("backend {}", backend_words(src))];
    details.push(format!("device {}", p.device));
    if let Some(cc) = &p.compute_capability {
        details.push(format!("compute capability {cc}"));
    }
    if let Some(d) = &p.driver {
        details.push(format!("driver {d}"));
    }
    // No date: a header changes only when its table or its source map's device does, so
    // `codegen --check` never goes stale because a map was measured again on the same device.
    details.push(format!("fp4probe {}", p.tool_version));
    let _ = writeln!(s, "// {MARKER} from {}", src.path);
    s += &wrap(
        &format!("({}). Do not edit.", details.join(", ")),
        "// ",
        100,
    );
    s += &regenerate_line(command);
    s += "//\n";
    let _ = writeln!(s, "// Variant:     {}", v.id());
    let _ = writeln!(s, "// Instruction: {}", v.opcode());
    let _ = writeln!(
        s,
        "// Target:      {} (PTX ISA {})",
        v.min_target,
        v.ptx_version()
    );
    let _ = writeln!(
        s,
        "// Backend:     {}",
        match map.backend {
            BackendKind::Hardware => format!("hardware, measured on {}", p.device),
            BackendKind::Emulator => backend_words(src).to_string(),
        }
    );
    let mut status = String::from("passed");
    if let Some(val) = &map.validation {
        let _ = write!(
            status,
            "; validation identity {} and random (seed {}) {}, bit-exact against the CPU GEMM",
            if val.identity.passed { "pass" } else { "FAIL" },
            val.seed,
            if val.random.passed { "pass" } else { "FAIL" }
        );
    }
    if let Some(d) = &map.documented_diff {
        status += if d.identical() {
            "; equal to the PTX ISA's documented layout"
        } else {
            "; DIFFERS from the PTX ISA's documented layout"
        };
    }
    s += &wrap(&format!("Map status:  {status}."), "// ", 100);
    s += &wrap(&format!("Convention:  {}", map.convention), "// ", 100);
    s += "//\n";
    s += COORDS_NOTE;
    if let Some(sc) = &src.scale {
        let _ = writeln!(
            s,
            "//\n// Scale factors: tables from {} (see the Scales section).",
            sc.path
        );
    } else if v.scale.is_some() {
        s += "//\n// Scale factors: no scale lane map next to the lane map, so no scale tables.\n";
    }
    s += "\n#pragma once\n\n";
    let _ = writeln!(s, "#include \"{COMMON_HEADER}\"");
    if let Some(Ok(t)) = scale_tables(src) {
        let _ = writeln!(s, "#include \"{}\"", t.header_name());
    }
    s.push('\n');
    let ns = src.cpp_name();
    let _ = writeln!(s, "namespace fp4probe {{\nnamespace {ns} {{\n");
    let _ = writeln!(
        s,
        "FP4PROBE_HD constexpr const char* variant_id() {{ return \"{}\"; }}",
        v.id()
    );
    let _ = writeln!(
        s,
        "FP4PROBE_HD constexpr const char* opcode() {{ return \"{}\"; }}",
        v.opcode()
    );
    let _ = writeln!(
        s,
        "FP4PROBE_HD constexpr const char* source_map() {{ return \"{}\"; }}",
        src.path
    );
    let _ = writeln!(
        s,
        "FP4PROBE_HD constexpr const char* min_target() {{ return \"{}\"; }}",
        v.min_target
    );
    let _ = writeln!(
        s,
        "enum : int {{ kM = {}, kN = {}, kK = {} }};",
        v.shape.m, v.shape.n, v.shape.k
    );
    let _ = writeln!(
        s,
        "enum : bool {{ kHardwareMeasured = {}, kBlockScaled = {} }};",
        src.hardware(),
        v.scale.is_some()
    );
    if let Some(sc) = v.scale {
        let _ = writeln!(
            s,
            "enum : int {{ kScaleVec = {} }};\nFP4PROBE_HD constexpr const char* scale_type() {{ return \"{}\"; }}",
            sc.vec, sc.stype
        );
    }
    s.push('\n');
    for od in &ods {
        operand_section(&mut s, od);
    }
    // Scale tables, from the scale lane map next to the lane map (block-scaled variants).
    if let Some(section) = scale_section(src) {
        s += &section;
    }
    mma_wrapper(&mut s, src, &ods);
    s.push('\n');
    traits(&mut s, src, &ods);
    let _ = writeln!(s, "\n}}  // namespace {ns}\n}}  // namespace fp4probe");
    Ok(s)
}

const COORDS_NOTE: &str =
    "// Coordinates: A is m x k (row m, col k), B is k x n (row k, col n), C and D are m x n.
// A slot (lane, reg, elem) is element `elem` of register `reg` of lane `lane`; its flat index
// is (lane * regs + reg) * elems_per_reg + elem. An element's value bits sit at bit
// elem * container_bits + value_shift of its register (see insert_bits in fp4probe_common.cuh).
// Per operand X in {A, B, C, D}: kX_row<>/kX_col<>[lane][reg][elem] (slot -> element),
// kX_slot<>[row][col] (element -> flat slot), x_coord(lane, reg, elem), x_slot(row, col), and
// x_coord_formula (the closed form, checked against the tables by static_assert).
";

/// A variant's scale-factor placement as C++ tables (`scale_tables`). Variants with the same
/// placement share one header, `fp4probe_scales_<key>.cuh`, whose namespace
/// `fp4probe::scales::<key>` holds the tables and accessors; the variant header brings them in
/// by using-declarations.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ScaleTables {
    /// `m16n8_vec4`: shape and scale_vec, which (with the selectors ptxas accepts) fix the
    /// placement; `generate` refuses two different tables under one key.
    pub key: String,
    /// The tables and accessors, without namespace.
    pub body: String,
}

impl ScaleTables {
    pub fn header_name(&self) -> String {
        format!("fp4probe_scales_{}.cuh", self.key)
    }
}

/// The names a shared scale header defines, which the variant headers use.
const SCALE_NAMES: [&str; 8] = [
    "kScaleA_lane",
    "kScaleA_byte",
    "kScaleB_lane",
    "kScaleB_byte",
    "scale_a_lane",
    "scale_a_byte",
    "scale_b_lane",
    "scale_b_byte",
];

/// Scale-factor tables from the scale lane map (`fp4probe scale`) next to the lane map: per
/// operand (scale_a: rows of A, scale_b: columns of B) and per {byte-id, thread-id} selector
/// ptxas accepts, the lane whose scale register holds the factor of each row (column) and
/// k-block, and the byte of that register. None for a variant without block scaling; Err (a
/// comment saying why) when there is no map, it is not explained, or for some accepted
/// selector a (row, k-block) has no (lane, byte) or several.
pub fn scale_tables(src: &Source) -> Option<std::result::Result<ScaleTables, String>> {
    src.variant.scale?;
    let Some(sc) = &src.scale else {
        return Some(Err(
            "no scale lane map next to the lane map (run `fp4probe scale`)".into(),
        ));
    };
    let m = &sc.map;
    if m.status != crate::probe::scale::ScaleStatus::Explained {
        return Some(Err("the scale map has unexplained entries".into()));
    }
    let kblocks = m.scale.vec;
    let mut s = String::new();
    for (op, name, extent, accepted) in [
        (ScaleOperand::A, "A", src.variant.shape.m, &m.selectors.a),
        (ScaleOperand::B, "B", src.variant.shape.n, &m.selectors.b),
    ] {
        let l = name.to_lowercase();
        // [byte-id][thread-id][row or column][k-block] -> (lane, byte), -1 if not accepted.
        let mut lane = vec![vec![vec![vec![-1i32; kblocks as usize]; extent as usize]; 4]; 4];
        let mut byte = lane.clone();
        for &[b, t] in accepted {
            let mut seen = vec![vec![0u32; kblocks as usize]; extent as usize];
            for ((ln, by), effects) in m.effects(op, b, t) {
                for e in effects {
                    let (i, j) = (e.index() as usize, e.kblock as usize);
                    if i >= extent as usize || j >= kblocks as usize {
                        return Some(Err(format!("a scale_{l} entry lies outside the tile")));
                    }
                    seen[i][j] += 1;
                    lane[b as usize][t as usize][i][j] = ln as i32;
                    byte[b as usize][t as usize][i][j] = by as i32;
                }
            }
            if seen.iter().flatten().any(|&c| c != 1) {
                return Some(Err(format!(
                    "with selector {{{b}, {t}}} some scale_{l} factor is held by no lane or by several"
                )));
            }
        }
        let axis = if op == ScaleOperand::A { "row" } else { "col" };
        for (what, t) in [("lane", &lane), ("byte", &byte)] {
            let _ = writeln!(
                s,
                "// [byte-id][thread-id][{axis}][k-block] -> {what}.\ntemplate <int = 0>\nFP4PROBE_TABLE signed char kScale{name}_{what}[4][4][{extent}][{kblocks}] = {{"
            );
            for (bi, per_t) in t.iter().enumerate() {
                let rows: Vec<String> = per_t
                    .iter()
                    .map(|per_i| {
                        let items: Vec<String> = per_i
                            .iter()
                            .map(|per_j| {
                                format!(
                                    "{{{}}}",
                                    per_j
                                        .iter()
                                        .map(|v| v.to_string())
                                        .collect::<Vec<_>>()
                                        .join(", ")
                                )
                            })
                            .collect();
                        format!("{{{}}}", items.join(", "))
                    })
                    .collect();
                let _ = writeln!(s, "    {{{}}},  // byte-id {bi}", rows.join(", "));
            }
            s += "};\n";
        }
        let _ = writeln!(
            s,
            "// The lane and byte of scale_{l} that hold the factor of {axis} i, k-block j (-1: selector rejected).\ntemplate <int = 0>\nFP4PROBE_HD constexpr int scale_{l}_lane(int byte_id, int thread_id, int i, int j) {{\n  const int v = kScale{name}_lane<>[byte_id][thread_id][i][j];\n  return v;\n}}\ntemplate <int = 0>\nFP4PROBE_HD constexpr int scale_{l}_byte(int byte_id, int thread_id, int i, int j) {{\n  const int v = kScale{name}_byte<>[byte_id][thread_id][i][j];\n  return v;\n}}"
        );
    }
    let shape = src.variant.shape;
    Some(Ok(ScaleTables {
        key: format!("m{}n{}_vec{kblocks}", shape.m, shape.n),
        body: s,
    }))
}

/// `fp4probe_scales_<key>.cuh`: one scale placement and the variants (and scale maps) it is
/// read from.
pub fn scale_header(tables: &ScaleTables, users: &[&Source], command: &str) -> String {
    let mut s = format!("// {MARKER}. Do not edit.\n");
    s += &regenerate_line(command);
    s += "//\n// Scale-factor placement shared by these variants (each header says which scale map it\n// comes from, and how):\n";
    for u in users {
        let _ = writeln!(s, "//   {}", u.variant.id());
    }
    s += "\n#pragma once\n\n";
    let _ = writeln!(s, "#include \"{COMMON_HEADER}\"\n");
    let _ = writeln!(
        s,
        "namespace fp4probe {{\nnamespace scales {{\nnamespace {} {{\n",
        tables.key
    );
    s += &tables.body;
    let _ = writeln!(
        s,
        "\n}}  // namespace {}\n}}  // namespace scales\n}}  // namespace fp4probe",
        tables.key
    );
    s
}

/// A variant header's Scales section: where the placement comes from, its closed forms, and
/// the shared tables brought into the variant's namespace (or why there are none).
fn scale_section(src: &Source) -> Option<String> {
    let tables = scale_tables(src)?;
    let mut s = String::new();
    if let Some(sc) = &src.scale {
        let m = &sc.map;
        let head = format!(
            "---- Scales, from {} ({}). For scale_a (rows of A) and scale_b (columns of B), per {{byte-id, thread-id}} selector: the lane whose scale register holds the factor of row (column) i, k-block j (k-blocks of {} k), and the byte of that register; -1 where ptxas rejects the selector pair. The closed forms, as the scale probe states them:",
            sc.path,
            match m.backend {
                BackendKind::Hardware => "measured on hardware",
                BackendKind::Emulator =>
                    "emulator backend: the documented model, not a hardware measurement",
            },
            m.method.k_per_block
        );
        s += &wrap(&head, "// ", 100);
        for f in &m.overall {
            s += &wrap(f, "//        ", 100);
        }
    }
    match tables {
        Err(why) => {
            s += &wrap(&format!("---- Scales: no tables: {why}."), "// ", 100);
            s.push('\n');
        }
        Ok(t) => {
            let k_per_block = src.scale.as_ref().map_or(0, |sc| sc.map.method.k_per_block);
            let _ = writeln!(
                s,
                "// The tables: {} (namespace fp4probe::scales::{}).",
                t.header_name(),
                t.key
            );
            let kblocks = src.variant.scale.map_or(0, |sc| sc.vec);
            let _ = writeln!(
                s,
                "enum : int {{ kScale_kblocks = {kblocks}, kScale_k_per_block = {k_per_block} }};"
            );
            for n in SCALE_NAMES {
                let _ = writeln!(s, "using ::fp4probe::scales::{}::{n};", t.key);
            }
            s.push('\n');
        }
    }
    Some(s)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wrapping_keeps_words() {
        let w = wrap("a bb ccc dddd", "// ", 9);
        assert_eq!(w, "// a bb\n// ccc\n// dddd\n");
    }

    #[test]
    fn smallest_types() {
        assert_eq!(int_type(&[0, 255]), "unsigned char");
        assert_eq!(int_type(&[256]), "unsigned short");
        assert_eq!(int_type(&[70000]), "unsigned int");
    }
}
