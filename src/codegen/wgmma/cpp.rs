//! The wgmma C++ headers under `kernels/generated/wgmma/`: the shared-memory forms and the
//! descriptor builder, one header per register table, one per (type set, N) family, and the
//! umbrella. Plain C++17 as well as CUDA, like the mma.sync headers (whose common header they
//! include): without `__CUDACC__` the wrappers are left out.

use super::super::cpp::{
    closed_form_functions, lower, operand_head, operand_section, regenerate_line, wrap,
};
use super::super::{COMMON_HEADER, MARKER, OperandData};
use super::form::{Derived, field_meaning};
use super::tables::{SmemForm, SmemTerm};
use super::{Family, Part, SMEM_HEADER, Sources, Table};
use crate::isa::Operand;
use crate::wgmma::desc::{self, Major, Swizzle};
use crate::wgmma::{ASource, WgOperands, WgVariant};
use anyhow::{Context, Result};
use std::fmt::Write;

fn head(s: &mut String, from: &str, command: &str) {
    *s += &wrap(&format!("{MARKER} from {from}. Do not edit."), "// ", 100);
    *s += &regenerate_line(command);
}

const INCLUDE_COMMON: &str = "#include \"../fp4probe_common.cuh\"";

/// The C++ name of a swizzle mode's enumerator.
fn swizzle_enum(s: Swizzle) -> &'static str {
    match s {
        Swizzle::None => "kSwizzleNone",
        Swizzle::B32 => "kSwizzle32B",
        Swizzle::B64 => "kSwizzle64B",
        Swizzle::B128 => "kSwizzle128B",
    }
}

fn major_enum(m: Major) -> &'static str {
    match m {
        Major::K => "kMajorK",
        Major::MN => "kMajorMN",
    }
}

/// `s` of the XOR pattern: address bits [4, 4+s) ^= bits [7, 7+s).
fn xor_bits(x: Swizzle) -> u32 {
    (x.width() / 16).trailing_zeros()
}

/// The coordinate bits a term reads: `mn`, `(mn % 8u)`, `(mn / 8u)`, `(mn / 16u % 2u)`, in
/// C++ (`cpp`) or as the reports write it.
fn coord_text(t: &SmemTerm, cpp: bool) -> String {
    let x = t.axis.name();
    let u = if cpp { "u" } else { "" };
    let (sp, md, dv) = if cpp { (" ", "%", "/") } else { ("", "%", "/") };
    match (t.lo, t.len) {
        (0, 0) => x.to_string(),
        (0, l) => format!("({x}{sp}{md}{sp}{}{u})", 1u64 << l),
        (lo, 0) => format!("({x}{sp}{dv}{sp}{}{u})", 1u64 << lo),
        (lo, l) => format!(
            "({x}{sp}{dv}{sp}{}{u}{sp}{md}{sp}{}{u})",
            1u64 << lo,
            1u64 << l
        ),
    }
}

/// A term's coefficient in `unit` bits: `128u`, `sbo`, `(16u + 2u * lbo)`; `None` when it is
/// not a whole number of units. As the reports write it with `cpp` false: `128`, `SBO`.
fn coef_text(t: &SmemTerm, unit: i64, cpp: bool) -> Option<String> {
    let mut parts = Vec::new();
    let (u, mul, l, s) = if cpp {
        ("u", " * ", "lbo", "sbo")
    } else {
        ("", "·", "LBO", "SBO")
    };
    for (v, name) in [(t.c, ""), (t.lbo, l), (t.sbo, s)] {
        if v == 0 {
            continue;
        }
        if v % unit != 0 {
            return None;
        }
        let n = v / unit;
        parts.push(match (name, n) {
            ("", n) => format!("{n}{u}"),
            (name, 1) => name.to_string(),
            (name, n) => format!("{n}{u}{mul}{name}"),
        });
    }
    Some(match parts.len() {
        0 => format!("0{u}"),
        1 => parts.remove(0),
        _ => format!("({})", parts.join(" + ")),
    })
}

/// The sum of the terms in `unit` bits (C++ or report text).
fn sum_text(f: &SmemForm, unit: i64, cpp: bool) -> Option<String> {
    let mul = if cpp { " * " } else { "·" };
    let mut out = String::new();
    for t in f.terms.iter() {
        let c = coef_text(t, unit, cpp)?;
        let (neg, c) = match c.strip_prefix('-') {
            Some(rest) => (true, rest.to_string()),
            None => (false, c),
        };
        if out.is_empty() {
            if neg {
                out += "0u - ";
            }
        } else {
            out += if neg { " - " } else { " + " };
        }
        if !cpp && c == "1" {
            out += &coord_text(t, cpp);
        } else {
            let _ = write!(out, "{c}{mul}{}", coord_text(t, cpp));
        }
    }
    Some(if out.is_empty() {
        if cpp { "0u".into() } else { "0".into() }
    } else {
        out
    })
}

/// `smem_offset_16bit_K_128B` (bytes), or `smem_bit_offset_1bit_K_none` for sub-byte elements.
pub fn offset_fn(f: &SmemForm) -> String {
    let which = if f.elem_bits >= 8 {
        "offset"
    } else {
        "bit_offset"
    };
    format!(
        "smem_{which}_{}bit_{}_{}",
        f.elem_bits,
        f.major.name(),
        f.swizzle.name()
    )
}

/// The form as the reports write it: `byte = X128B(start + 128·(mn%8) + SBO·(mn/8) + 2·k) - start`.
pub fn form_text(f: &SmemForm) -> String {
    let (what, unit) = if f.elem_bits >= 8 {
        ("byte", 8)
    } else {
        ("bit", 1)
    };
    let body = sum_text(f, unit, false).unwrap_or_else(|| "?".into());
    match f.xor {
        Swizzle::None => format!("{what} = {body}"),
        x => format!("{what} = X{}(start + {body}) - start", x.name()),
    }
}

const SMEM_NOTE: &str = "//
// For each element size, major-ness and swizzle mode a study measured (`fp4probe wgmma smem`):
// smem_offset_<bits>bit_<major>_<swizzle>(mn, k, lbo, sbo, start, base_offset), the byte offset
// (smem_bit_offset_...: bit offset, for 1-bit elements) from a descriptor's start address of
// element (mn, k) of a tile, mn the row of A (m) or the column of B (n), with LBO and SBO the
// descriptor's fields in bytes, `start` its start as a shared-memory address (the XOR reads
// absolute address bits; any value with the same bits 4..9 gives the same offsets) and
// `base_offset` its base-offset field. The form is the study's fit, X(start + sum of terms) -
// start, X the XOR pattern of address bits [4, 4+s) with (bits [7, 7+s) less the base offset)
// mod 2^s: per coordinate bit, a constant or a multiple of LBO or SBO, as the sweep of those
// fields measured. The base offsets each form was measured with are listed above it (a sweep
// point the form does not reproduce is quoted as not used). It was measured for mn < kMeasuredMN and k < kMeasuredK; past them the highest run of bits of a
// coordinate is read on as the fit writes it (`fp4probe codegen --verify` checks the wide tiles
// it runs on the GPU). Where no sweep point changed LBO (SBO), kPinnedLBO (kPinnedSBO) is the
// only value the form is known for (0: none pinned).
//
// Smem<Bits, Major, Swizzle> gathers each form's function and constants for templated kernels;
// make_desc builds the 64-bit descriptor with the field layout the probes used.
";

/// `fp4probe_wgmma_smem.cuh`.
pub fn smem_header(studies: &[Derived], command: &str) -> String {
    let mut s = String::new();
    let sources: Vec<&str> = studies.iter().map(|d| d.form.source.as_ref()).collect();
    head(
        &mut s,
        if sources.is_empty() {
            "no shared-memory study"
        } else {
            "the wgmma shared-memory studies each form names"
        },
        command,
    );
    s += SMEM_NOTE;
    let _ = writeln!(s, "\n#pragma once\n\n{INCLUDE_COMMON}\n");
    s += "namespace fp4probe {\nnamespace wgmma {\n\n";
    let code = |x: Swizzle| x.code();
    let _ = writeln!(
        s,
        "// The descriptor's swizzle codes (bits 63..62) and the operands' major-ness.\nenum SwizzleMode : int {{\n  kSwizzleNone = {},\n  kSwizzle128B = {},\n  kSwizzle64B = {},\n  kSwizzle32B = {}\n}};\nenum MajorMode : int {{ kMajorK = 0, kMajorMN = 1 }};\n",
        code(Swizzle::None),
        code(Swizzle::B128),
        code(Swizzle::B64),
        code(Swizzle::B32)
    );
    let _ = writeln!(
        s,
        "// The matrix descriptor: start address (bits 13..0), LBO (29..16) and SBO (45..32), each a byte
// value's bits 17..4; base offset (51..49); swizzle mode (63..62).
enum : int {{
  kDescStartShift = {},
  kDescLboShift = {},
  kDescSboShift = {},
  kDescBaseOffsetShift = {},
  kDescSwizzleShift = {}
}};
// A byte value as an address field: bits 17..4.
FP4PROBE_HD constexpr unsigned long long desc_field(unsigned bytes) {{
  return (static_cast<unsigned long long>(bytes) & {:#x}ull) >> 4;
}}
// The descriptor of a tile whose first byte is at shared-memory address `start`.
FP4PROBE_HD constexpr unsigned long long make_desc(unsigned start, unsigned lbo, unsigned sbo,
                                                   unsigned base_offset, SwizzleMode swizzle) {{
  return desc_field(start) << kDescStartShift | desc_field(lbo) << kDescLboShift |
         desc_field(sbo) << kDescSboShift |
         (static_cast<unsigned long long>(base_offset) & 7ull) << kDescBaseOffsetShift |
         static_cast<unsigned long long>(swizzle) << kDescSwizzleShift;
}}

// The XOR pattern the studies fit: address bits [4, 4+S) ^= (bits [7, 7+S) - base_offset)
// mod 2^S.
template <int S>
FP4PROBE_HD constexpr unsigned xor_pattern(unsigned addr, unsigned base_offset) {{
  return addr ^ ((((addr >> 7) - base_offset) & ((1u << S) - 1u)) << 4);
}}

// Smem<Bits, Major, Swizzle>: one measured form (specialised below for each study).
template <int Bits, int Major, int Swizzle>
struct Smem;
",
        desc::START_SHIFT,
        desc::LBO_SHIFT,
        desc::SBO_SHIFT,
        desc::BASE_OFFSET_SHIFT,
        desc::SWIZZLE_SHIFT,
        desc::ADDR_MASK
    );
    for d in studies {
        smem_form(&mut s, d);
    }
    s += "}  // namespace wgmma\n}  // namespace fp4probe\n";
    s
}

fn smem_form(s: &mut String, d: &Derived) {
    let f = &d.form;
    let name = offset_fn(f);
    let _ = writeln!(
        s,
        "// ---- {}-bit elements, {}-major, swizzle {} ({}, measured on {})",
        f.elem_bits,
        f.major.name(),
        f.swizzle.name(),
        f.source,
        d.device
    );
    let mut lines = vec![format!("Measured form: {}.", form_text(f))];
    lines.push(if d.also_fits.is_empty() {
        format!("XOR pattern: {}.", f.xor.name())
    } else {
        format!(
            "XOR pattern: {} (the points used fit under {} too; the fit takes the form with the fewest weight bits).",
            f.xor.name(),
            d.also_fits
                .iter()
                .map(|x| x.name())
                .collect::<Vec<_>>()
                .join(", ")
        )
    });
    lines.push(format!("{}.", field_meaning(f, true)));
    lines.push(format!("{}.", field_meaning(f, false)));
    lines.push(format!(
        "Packed tile: LBO {} bytes, SBO {} bytes; sweep points used: {}.",
        d.packed.0.lbo,
        d.packed.0.sbo,
        d.points.join("; ")
    ));
    if f.xor != Swizzle::None {
        lines.push(format!(
            "Base offsets measured: {} (the XOR's row phase less the base offset).",
            f.base_offsets
                .iter()
                .map(u32::to_string)
                .collect::<Vec<_>>()
                .join(", ")
        ));
    }
    for p in &d.base_offset_points {
        lines.push(format!("Not used: {p}."));
    }
    for l in lines {
        *s += &wrap(&l, "//   ", 100);
    }
    let unit = if f.elem_bits >= 8 { 8 } else { 1 };
    let Some(body) = sum_text(f, unit, true) else {
        let _ = writeln!(
            s,
            "// Not emitted: a weight is not a whole number of units.\n"
        );
        return;
    };
    let mut voids = String::new();
    for (p, used) in [
        ("lbo", f.terms.iter().any(|t| t.lbo != 0)),
        ("sbo", f.terms.iter().any(|t| t.sbo != 0)),
        ("start", f.xor != Swizzle::None),
        ("base_offset", f.xor != Swizzle::None),
    ] {
        if !used {
            let _ = writeln!(voids, "  (void){p};");
        }
    }
    let ret = match (f.xor, unit) {
        (Swizzle::None, _) => "lin".to_string(),
        (x, 8) => format!(
            "xor_pattern<{}>(start + lin, base_offset) - start",
            xor_bits(x)
        ),
        (x, _) => format!(
            "(xor_pattern<{}>(start + lin / 8u, base_offset) - start) * 8u + lin % 8u",
            xor_bits(x)
        ),
    };
    let _ = writeln!(
        s,
        "FP4PROBE_HD constexpr unsigned {name}(unsigned mn, unsigned k, unsigned lbo, unsigned sbo,\n{pad}unsigned start, unsigned base_offset = 0) {{\n{voids}  const unsigned lin = {body};\n  return {ret};\n}}",
        pad = " ".repeat(32 + name.len()),
    );
    let _ = writeln!(
        s,
        "template <>\nstruct Smem<{bits}, {major}, {swz}> {{\n  enum : int {{\n    kElemBits = {bits},\n    kMajor = {major},\n    kSwizzle = {swz},\n    kXor = {xor},\n    kMeasuredMN = {mmn},\n    kMeasuredK = {mk},\n    kPinnedLBO = {plbo},\n    kPinnedSBO = {psbo}\n  }};\n  FP4PROBE_HD static constexpr unsigned offset(unsigned mn, unsigned k, unsigned lbo, unsigned sbo,\n                                               unsigned start, unsigned base_offset = 0) {{\n    return {name}(mn, k, lbo, sbo, start, base_offset);\n  }}\n}};\n",
        bits = f.elem_bits,
        major = major_enum(f.major),
        swz = swizzle_enum(f.swizzle),
        xor = swizzle_enum(f.xor),
        mmn = f.measured_mn,
        mk = f.measured_k,
        plbo = f.pinned_lbo.unwrap_or(0),
        psbo = f.pinned_sbo.unwrap_or(0),
    );
}

/// `<key>.cuh`: one register table.
pub fn table_header(t: &Table, command: &str) -> String {
    let mut s = String::new();
    head(&mut s, &t.sources.join(", "), command);
    let od = &t.data;
    let what = match od.op {
        Operand::D => format!(
            "D (the accumulator; C is read from the same registers) of {} wgmma, N = {}",
            od.frag.elem, od.frag.cols
        ),
        _ => format!(
            "A from registers of {} wgmma, K = {}",
            od.frag.elem, od.frag.cols
        ),
    };
    s += "//\n";
    s += &wrap(
        &format!(
            "The wgmma {what}: which thread (lane = thread 0..127 of the warpgroup), register and element holds which element of the tile, measured on hardware ({}) by the lane maps above, of {}; they agree slot for slot.",
            t.measured_on,
            t.variants.join(", ")
        ),
        "// ",
        100,
    );
    let _ = writeln!(
        s,
        "\n#pragma once\n\n{INCLUDE_COMMON}\n\nnamespace fp4probe {{\nnamespace wgmma {{\nnamespace {} {{\n",
        t.namespace()
    );
    operand_section(&mut s, od);
    let _ = writeln!(
        s,
        "}}  // namespace {}\n}}  // namespace wgmma\n}}  // namespace fp4probe",
        t.namespace()
    );
    s
}

/// The names a table header defines for operand `l` (`d`, `a`) that a family brings in.
fn table_names(od: &OperandData) -> Vec<String> {
    let n = od.name();
    let l = lower(od.op);
    let mut v: Vec<String> = [
        "rows",
        "cols",
        "regs",
        "reg_bits",
        "elems_per_reg",
        "container_bits",
        "value_bits",
        "value_shift",
        "slots",
    ]
    .iter()
    .map(|c| format!("k{n}_{c}"))
    .collect();
    v.extend([
        format!("{l}_type"),
        format!("k{n}_row"),
        format!("k{n}_col"),
        format!("k{n}_slot"),
        format!("{l}_coord"),
        format!("{l}_slot"),
    ]);
    if od.closed_form.is_ok() {
        v.extend([
            format!("{l}_row_formula"),
            format!("{l}_col_formula"),
            format!("{l}_coord_formula"),
        ]);
    }
    v
}

/// The register operand of a family: a using-declaration of its table's names, or its closed
/// form written out.
fn family_part(s: &mut String, part: &Part, tables: &[Table], what: &str) -> Result<()> {
    match part {
        Part::Table(key) => {
            let t = tables
                .iter()
                .find(|t| &t.key == key)
                .with_context(|| format!("no table {key}"))?;
            *s += &wrap(
                &format!(
                    "{what}: the table of {}, measured by {}.",
                    t.header_name(),
                    t.variants.join(", ")
                ),
                "// ",
                100,
            );
            for n in table_names(&t.data) {
                let _ = writeln!(s, "using ::fp4probe::wgmma::{}::{n};", t.namespace());
            }
        }
        Part::ClosedForm { from, data, .. } => {
            *s += &wrap(
                &format!(
                    "{what}: no lane map of this family is committed, so no table; the closed form below is the one the measured tables {} share (`fp4probe codegen --verify` runs this family on the GPU).",
                    from.join(", ")
                ),
                "// ",
                100,
            );
            operand_head(s, data);
            closed_form_functions(s, data.op, &data.closed_form);
            let l = lower(data.op);
            let _ = writeln!(
                s,
                "template <int = 0>\nFP4PROBE_HD constexpr Coord {l}_coord(int lane, int reg, int elem) {{\n  return {l}_coord_formula(lane, reg, elem);\n}}"
            );
        }
    }
    s.push('\n');
    Ok(())
}

/// The registers of D in an inline-asm operand list: `%0, %1, ...`.
fn reg_list(from: usize, n: usize) -> Vec<String> {
    (from..from + n).map(|i| format!("%{i}")).collect()
}

/// The inline-PTX wrapper of one form of the family: fence, the instruction, commit and wait,
/// in one asm statement, so the registers hold D when it returns.
fn wrapper(s: &mut String, v: &WgVariant) {
    let d_regs = v.d_frag().regs as usize;
    let mut ops = WgOperands {
        d: reg_list(0, d_regs),
        scale_d: "p".into(),
        ..Default::default()
    };
    let mut ins = Vec::new();
    let mut next = d_regs;
    let (name, params) = match v.a_src {
        ASource::Ss => {
            ops.a_desc = format!("%{next}");
            ops.b_desc = format!("%{}", next + 1);
            ins.push("\"l\"(a_desc)".to_string());
            ins.push("\"l\"(b_desc)".to_string());
            next += 2;
            (
                "mma_ss",
                "unsigned long long a_desc, unsigned long long b_desc".to_string(),
            )
        }
        ASource::Rs => {
            let a_regs = v.a_frag().regs as usize;
            ops.a = reg_list(next, a_regs);
            ins.extend((0..a_regs).map(|i| format!("\"r\"(a[{i}])")));
            next += a_regs;
            ops.b_desc = format!("%{next}");
            ins.push("\"l\"(b_desc)".to_string());
            next += 1;
            (
                "mma_rs",
                format!("const unsigned (&a)[{a_regs}], unsigned long long b_desc"),
            )
        }
    };
    let scale_d = next;
    ins.push("\"r\"(scale_d)".to_string());
    next += 1;
    // The transpose immediates: both for ss, B's alone for rs (A from registers is K-major).
    let trans = match (v.transposable(), v.a_src) {
        (false, _) => [String::new(), String::new()],
        (true, ASource::Ss) => {
            ins.push("\"n\"(TransA)".to_string());
            ins.push("\"n\"(TransB)".to_string());
            [format!("%{next}"), format!("%{}", next + 1)]
        }
        (true, ASource::Rs) => {
            ins.push("\"n\"(TransB)".to_string());
            [String::new(), format!("%{next}")]
        }
    };
    let text = v.instruction_text(&ops, ["1", "1"], [&trans[0], &trans[1]]);
    wrapper_text(s, v, name, &params, d_regs, scale_d, &text, &ins);
}

#[allow(clippy::too_many_arguments)]
fn wrapper_text(
    s: &mut String,
    v: &WgVariant,
    name: &str,
    params: &str,
    d_regs: usize,
    scale_d: usize,
    text: &str,
    ins: &[String],
) {
    let outs: Vec<String> = (0..d_regs).map(|i| format!("\"+r\"(d[{i}])")).collect();
    let trans = match (v.transposable(), v.a_src) {
        (false, _) => "",
        (true, ASource::Ss) => {
            " TransA and TransB are the transpose immediates (1: the operand is MN-major)."
        }
        (true, ASource::Rs) => " TransB is B's transpose immediate (1: MN-major).",
    };
    *s += &wrap(
        &format!(
            "{}: `{}` with {}: D = A * B + D (scale_d 1) or A * B (scale_d 0), registers as raw bits; fenced, committed and waited for here, so d holds D on return.{trans}",
            v.a_src.name(),
            v.opcode(),
            match v.a_src {
                ASource::Ss => "A and B from shared memory (descriptors)",
                ASource::Rs => "A from registers and B from shared memory",
            }
        ),
        "// ",
        100,
    );
    let check = match (v.transposable(), v.a_src) {
        (false, _) => {
            "  static_assert(TransA == 0 && TransB == 0, \"only f16 and bf16 take the transpose\");\n"
        }
        (true, ASource::Ss) => "",
        (true, ASource::Rs) => "  static_assert(TransA == 0, \"A from registers is K-major\");\n",
    };
    let _ = writeln!(
        s,
        "template <int TransA = 0, int TransB = 0>\n__device__ __forceinline__ void {name}(unsigned (&d)[{d_regs}], {params},\n    int scale_d = 1) {{\n{check}  asm volatile(\n      \"{{\\n\"\n      \".reg .pred p;\\n\"\n      \"setp.ne.b32 p, %{scale_d}, 0;\\n\"\n      \"wgmma.fence.sync.aligned;\\n\"\n{}      \"wgmma.commit_group.sync.aligned;\\n\"\n      \"wgmma.wait_group.sync.aligned 0;\\n\"\n      \"}}\\n\"\n      : {}\n      : {}\n      : \"memory\");\n}}",
        literal_lines(&format!("{text}\\n"), "      ", 96),
        lines(&outs, 8, "        "),
        lines(ins, 8, "        ")
    );
}

/// `text` as adjacent C string literals, broken after `, ` so no line passes `width`.
fn literal_lines(text: &str, indent: &str, width: usize) -> String {
    let mut out = String::new();
    let mut line = String::new();
    for (i, piece) in text.split_inclusive(", ").enumerate() {
        if i > 0 && indent.len() + line.len() + piece.len() + 2 > width {
            let _ = writeln!(out, "{indent}\"{line}\"");
            line.clear();
        }
        line += piece;
    }
    let _ = writeln!(out, "{indent}\"{line}\"");
    out
}

/// `items` joined by `, `, `per` to a line, continuation lines indented by `indent`.
fn lines(items: &[String], per: usize, indent: &str) -> String {
    items
        .chunks(per)
        .map(|c| c.join(", "))
        .collect::<Vec<_>>()
        .join(&format!(",\n{indent}"))
}

/// `<family>.cuh`.
pub fn family_header(f: &Family, s: &Sources, command: &str) -> Result<String> {
    let mut out = String::new();
    let from = if f.maps.is_empty() {
        "the measured tables named below".to_string()
    } else {
        f.maps.join(", ")
    };
    head(&mut out, &from, command);
    let v = &f.ss;
    out += "//\n";
    let _ = writeln!(
        out,
        "// Family:      {} (A from shared memory: ss{})",
        f.stem,
        if f.rs.is_some() {
            "; from registers: rs"
        } else {
            ""
        }
    );
    let _ = writeln!(out, "// Instruction: {}", v.opcode());
    let _ = writeln!(
        out,
        "// Target:      {} (PTX ISA {})",
        v.min_target(),
        v.ptx_version()
    );
    let _ = writeln!(
        out,
        "// Lane maps:   {}",
        if f.maps.is_empty() {
            "none committed".to_string()
        } else {
            f.maps.join(", ")
        }
    );
    out += "//\n// Per thread (lane = thread 0..127 of the warpgroup): d_coord(lane, reg, elem) is the (m, n) of D\n// it holds, a_coord(lane, reg, elem) the (m, k) of A from registers. The shared-memory tiles go\n// through fp4probe_wgmma_smem.cuh; Traits gathers everything for templated kernels.\n";
    let _ = writeln!(
        out,
        "\n#pragma once\n\n{INCLUDE_COMMON}\n#include \"{SMEM_HEADER}\""
    );
    for part in std::iter::once(&f.d).chain(f.a.iter()) {
        if let Part::Table(key) = part {
            let _ = writeln!(out, "#include \"{key}.cuh\"");
        }
    }
    let ns = f.namespace();
    let _ = writeln!(
        out,
        "\nnamespace fp4probe {{\nnamespace wgmma {{\nnamespace {ns} {{\n"
    );
    let _ = writeln!(
        out,
        "FP4PROBE_HD constexpr const char* family() {{ return \"{}\"; }}",
        f.stem
    );
    let _ = writeln!(
        out,
        "FP4PROBE_HD constexpr const char* opcode() {{ return \"{}\"; }}",
        v.opcode()
    );
    let _ = writeln!(
        out,
        "enum : int {{ kM = {}, kN = {}, kK = {}, kElemBits = {} }};",
        crate::wgmma::M,
        v.n,
        v.k,
        v.elem_bits()
    );
    let _ = writeln!(
        out,
        "enum : bool {{ kTransposable = {}, kHasRs = {}, kDMeasured = {}, kAMeasured = {} }};\n",
        v.transposable(),
        f.rs.is_some(),
        matches!(f.d, Part::Table(_)),
        matches!(f.a, Some(Part::Table(_)))
    );
    family_part(&mut out, &f.d, &s.d_tables, "D")?;
    if let Some(a) = &f.a {
        family_part(&mut out, a, &s.a_tables, "A (from registers)")?;
    }
    out += "#if defined(__CUDACC__)\n";
    wrapper(&mut out, v);
    if let Some(rs) = &f.rs {
        wrapper(&mut out, rs);
    }
    out += "#endif  // __CUDACC__\n\n";
    traits(&mut out, f);
    let _ = writeln!(
        out,
        "\n}}  // namespace {ns}\n}}  // namespace wgmma\n}}  // namespace fp4probe"
    );
    Ok(out)
}

fn traits(s: &mut String, f: &Family) {
    let v = &f.ss;
    *s += "// Everything above as one type, for kernels templated over the family (see\n// kernels/wgmma_roundtrip.cu).\nstruct Traits {\n";
    let _ = writeln!(
        s,
        "  enum : int {{ m = kM, n = kN, k = kK, elem_bits = kElemBits }};\n  enum : bool {{ transposable = kTransposable, has_rs = kHasRs, has_a = {} }};",
        f.a.is_some()
    );
    let ops: Vec<(&str, &str)> = std::iter::once(("D", "d"))
        .chain(f.a.iter().map(|_| ("A", "a")))
        .collect();
    for (n, l) in ops {
        let _ = writeln!(
            s,
            "  struct {n} {{
    enum : int {{
      rows = k{n}_rows, cols = k{n}_cols, regs = k{n}_regs, reg_bits = k{n}_reg_bits,
      elems_per_reg = k{n}_elems_per_reg, container_bits = k{n}_container_bits,
      value_bits = k{n}_value_bits, value_shift = k{n}_value_shift
    }};
    using reg_t = unsigned;
    template <int = 0>
    FP4PROBE_HD static constexpr Coord coord(int lane, int reg, int elem) {{ return {l}_coord(lane, reg, elem); }}
  }};"
        );
    }
    let d_regs = v.d_frag().regs;
    let _ = writeln!(
        s,
        "#if defined(__CUDACC__)\n  template <int TransA = 0, int TransB = 0>\n  __device__ __forceinline__ static void mma_ss(unsigned (&d)[{d_regs}], unsigned long long a_desc,\n                                                unsigned long long b_desc, int scale_d = 1) {{\n    ::fp4probe::wgmma::{ns}::mma_ss<TransA, TransB>(d, a_desc, b_desc, scale_d);\n  }}",
        ns = f.namespace()
    );
    if let Some(rs) = &f.rs {
        let _ = writeln!(
            s,
            "  template <int TransA = 0, int TransB = 0>\n  __device__ __forceinline__ static void mma_rs(unsigned (&d)[{d_regs}], const unsigned (&a)[{}],\n                                                unsigned long long b_desc, int scale_d = 1) {{\n    ::fp4probe::wgmma::{ns}::mma_rs<TransA, TransB>(d, a, b_desc, scale_d);\n  }}",
            rs.a_frag().regs,
            ns = f.namespace()
        );
    }
    *s += "#endif  // __CUDACC__\n};\n";
}

/// The name of the handoff header from D table `d` to A table `a`.
pub fn handoff_name(d: &Table, a: &Table) -> String {
    format!("handoff.{}.{}.cuh", d.key, a.key)
}

/// `handoff.<d>.<a>.cuh`: the accumulator of one wgmma as the register A of the next.
pub fn handoff_header(d: &Table, a: &Table, h: &super::handoff::Handoff, command: &str) -> String {
    let mut s = String::new();
    head(
        &mut s,
        &format!("the tables {} and {}", d.key, a.key),
        command,
    );
    s += "//
";
    s += &wrap(
        &format!(
            "The {} accumulator of a wgmma with N = {} (D, {}) as A from registers of a following {} wgmma (K = {} per instruction, {}), as attention's P = softmax(Q·Kᵀ) feeds P·V: no element leaves its thread. Step j covers D columns j·{k} .. j·{k} + {k}; A register r, element e takes D slot kSrc[j][r·kAElems + e] (= reg·kDElems + elem) of the same thread, in every thread. A's k of step j is D's column kPerm[j·{k} + k] — the row of V the second wgmma's B must hold at k (P·V is the same sum under any order of k). Derived by `codegen::wgmma::handoff` from the measured tables; `--verify` does not run it yet.",
            d.data.frag.elem,
            d.data.frag.cols,
            d.key,
            a.data.frag.elem,
            a.data.frag.cols,
            a.key,
            k = h.k
        ),
        "// ",
        100,
    );
    let ns = crate::codegen::cpp_name(&format!("handoff.{}.{}", d.key, a.key));
    let _ = writeln!(
        s,
        "\n#pragma once\n\nnamespace fp4probe {{\nnamespace wgmma {{\nnamespace {ns} {{\n"
    );
    let a_slots = a.data.frag.regs * a.data.elems_per_reg;
    let _ = writeln!(
        s,
        "constexpr int kSteps = {};\nconstexpr int kK = {};\nconstexpr int kAElems = {};\nconstexpr int kDElems = {};\nconstexpr int kASlots = {a_slots};\n",
        h.steps, h.k, a.data.elems_per_reg, d.data.elems_per_reg
    );
    let rows: Vec<String> = h
        .src
        .iter()
        .map(|r| {
            let v: Vec<String> = r.iter().map(u32::to_string).collect();
            format!("    {{{}}}", v.join(", "))
        })
        .collect();
    let _ = writeln!(
        s,
        "constexpr int kSrc[kSteps][kASlots] = {{\n{}\n}};",
        rows.join(",\n")
    );
    let perm: Vec<String> = h.perm.iter().map(u32::to_string).collect();
    s += &wrap(
        &format!(
            "constexpr int kPerm[kSteps * kK] = {{{}}};",
            perm.join(", ")
        ),
        "",
        100,
    );
    let _ = writeln!(
        s,
        "\n}}  // namespace {ns}\n}}  // namespace wgmma\n}}  // namespace fp4probe"
    );
    s
}

/// `fp4probe_wgmma.cuh`: every wgmma header.
pub fn umbrella_header(s: &Sources, command: &str) -> String {
    let mut out = format!("// {MARKER}. Do not edit.\n");
    out += &regenerate_line(command);
    let _ = writeln!(
        out,
        "//\n// Every generated wgmma header: the shared-memory forms and descriptor builder, {} D and {} A\n// tables, and {} (type set, N) families (namespace fp4probe::wgmma::<family>).\n#pragma once\n",
        s.d_tables.len(),
        s.a_tables.len(),
        s.families.len()
    );
    let _ = writeln!(
        out,
        "#include \"../{COMMON_HEADER}\"\n#include \"{SMEM_HEADER}\""
    );
    for t in s.d_tables.iter().chain(&s.a_tables) {
        let _ = writeln!(out, "#include \"{}\"", t.header_name());
    }
    for f in &s.families {
        let _ = writeln!(out, "#include \"{}\"", f.header_name());
    }
    for (d, a, _) in super::handoffs(s) {
        let _ = writeln!(out, "#include \"{}\"", handoff_name(d, a));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::codegen::wgmma::tables::Axis;
    use std::borrow::Cow;

    #[test]
    fn terms_read_as_the_reports_write_them() {
        let t = |axis, lo, len, c, lbo, sbo| SmemTerm {
            axis,
            lo,
            len,
            c,
            lbo,
            sbo,
        };
        let f = SmemForm {
            elem_bits: 16,
            major: Major::K,
            swizzle: Swizzle::B128,
            xor: Swizzle::B128,
            terms: Cow::Owned(vec![
                t(Axis::Mn, 0, 3, 1024, 0, 0),
                t(Axis::Mn, 3, 0, 0, 0, 8),
                t(Axis::K, 0, 0, 16, 0, 0),
            ]),
            measured_mn: 64,
            measured_k: 16,
            pinned_lbo: None,
            pinned_sbo: None,
            base_offsets: Cow::Borrowed(&[0]),
            source: Cow::Borrowed("x"),
        };
        assert_eq!(
            form_text(&f),
            "byte = X128B(start + 128·(mn%8) + SBO·(mn/8) + 2·k) - start"
        );
        assert_eq!(
            sum_text(&f, 8, true).unwrap(),
            "128u * (mn % 8u) + sbo * (mn / 8u) + 2u * k"
        );
        assert_eq!(offset_fn(&f), "smem_offset_16bit_K_128B");
        let mixed = t(Axis::K, 4, 2, 128, 16, 0);
        assert_eq!(coef_text(&mixed, 8, true).unwrap(), "(16u + 2u * lbo)");
        assert_eq!(coord_text(&mixed, true), "(k / 16u % 4u)");
    }
}
