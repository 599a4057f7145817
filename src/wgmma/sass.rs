//! What a wgmma lowers to in SASS: a kernel built around one wgmma of a dense variant
//! ([`lowering_kernel`]) assembled by ptxas for sm_90a, disassembled and read with
//! `crate::sass`.
//!
//! The kernel is the probe kernel's wgmma without the probe's shared-memory staging: each of the
//! 128 threads loads its C registers (and, for `rs`, its A registers) with vector loads, then
//! `wgmma.fence`, the wgmma (descriptors and `scale-d` from parameters), `commit_group`,
//! `wait_group 0`, and vector stores of D. So the listing is the wgmma and what it needs, short
//! enough to read.
//!
//! Read from the listing, beyond what `crate::sass` reads for every kernel:
//! - the GMMA instruction (`HGMMA.64x256x16.F32.BF16`, `QGMMA`, `IGMMA`, `BGMMA`): the
//!   tensor instructions of the listing;
//! - [`warpgroup_sequence`]: the warpgroup instructions around it, in order;
//! - the verdict: **native** when there is exactly one GMMA, of the expected base and shape, its
//!   suffix names the A and B types, and the mma region has no conversion.
//!
//! [`summary`] groups reports of many variants by PTX type set and states, from the listings,
//! which SASS form each type set takes at which N.

use super::bench::sass_mnemonic;
use super::{ASource, Immediates, WgOperands, WgVariant};
use crate::formats::ElemType;
use crate::isa::Target;
use crate::sass::{
    Instr, Lowering, SassError, SassReport, Toolchain, assemble_and_disassemble, verdict_with,
};
use std::collections::BTreeMap;
use std::fmt::Write;

/// The first line of the wgmma SASS summary page, by which an existing one is recognised.
pub const SUMMARY_MARKER: &str = "# SASS of wgmma";

/// The target every wgmma variant needs.
pub fn target() -> Target {
    Target::sm_a(9, 0)
}

/// SASS spelling of an A/B type in a GMMA suffix.
fn sass_type(t: ElemType) -> &'static str {
    match t {
        ElemType::F16 => "F16",
        ElemType::Bf16 => "BF16",
        ElemType::Tf32 => "TF32",
        ElemType::E4m3 => "E4M3",
        ElemType::E5m2 => "E5M2",
        ElemType::S8 => "S8",
        ElemType::U8 => "U8",
        _ => "",
    }
}

/// Whether a GMMA opcode is the one `v` asks for: the base and shape of
/// [`sass_mnemonic`] (`HGMMA.64x16x16`), then the input types among the modifiers: the A
/// type then the B type for QGMMA and IGMMA (`QGMMA.64x16x32.F32.E4M3.E5M2`), one suffix for
/// HGMMA's bf16 and tf32 and none for f16 (`HGMMA.64x16x16.F32.BF16`, `HGMMA.64x16x16.F16`),
/// `AND.POPC` for BGMMA.
pub fn names_input_types(opcode: &str, v: &WgVariant) -> bool {
    let want = sass_mnemonic(v);
    let Some(rest) = opcode.strip_prefix(&want) else {
        return false;
    };
    let mods: Vec<&str> = rest.split('.').filter(|m| !m.is_empty()).collect();
    match v.a {
        ElemType::B1 => mods.windows(2).any(|w| w == ["AND", "POPC"]),
        ElemType::F16 => !mods.iter().any(|m| matches!(*m, "BF16" | "TF32")),
        ElemType::Bf16 | ElemType::Tf32 => mods.contains(&sass_type(v.a)),
        a => {
            let (ta, tb) = (sass_type(a), sass_type(v.b));
            mods.iter()
                .position(|m| *m == ta)
                .is_some_and(|i| mods[i + 1..].contains(&tb))
        }
    }
}

/// The warpgroup instructions of the mma region in order: `WARPGROUP.*` (ARRIVE, DEPBAR),
/// `WARPSYNC`, and the GMMAs, with their operands (`HGMMA.64x16x16.F32.BF16 R24, gdesc[UR4],
/// RZ, !UPT, gsb0`; `WARPGROUP.DEPBAR.LE gsb0, 0x0`).
pub fn warpgroup_sequence(region: &[String]) -> Vec<String> {
    region
        .iter()
        .filter(|t| {
            let i = Instr {
                addr: 0,
                text: (*t).clone(),
            };
            matches!(i.base(), "WARPGROUP" | "WARPSYNC") || i.is_tensor()
        })
        .cloned()
        .collect()
}

/// Entry point of [`lowering_kernel`].
pub const ENTRY: &str = "fp4probe_wgmma_sass";

/// Vector loads (`load` true) or stores of `regs` of type `ty` at `[%ptr]`: v4 pieces, then v2,
/// then one.
fn vector_moves(s: &mut String, load: bool, ty: &str, regs: &[String]) {
    let mut i = 0;
    while i < regs.len() {
        let w = [4, 2, 1]
            .into_iter()
            .find(|w| i + w <= regs.len())
            .expect("1 fits");
        let list = regs[i..i + w].join(", ");
        let (v, list) = if w == 1 {
            (String::new(), list)
        } else {
            (format!(".v{w}"), format!("{{{list}}}"))
        };
        if load {
            writeln!(s, "    ld.global{v}.{ty} {list}, [%ptr+{}];", 4 * i).unwrap();
        } else {
            writeln!(s, "    st.global{v}.{ty} [%ptr+{}], {list};", 4 * i).unwrap();
        }
        i += w;
    }
}

/// Point `%ptr` at thread `%t`'s `regs` words of the buffer in parameter `param` (a 16-byte
/// aligned stride per thread, so that the vector moves are aligned).
fn thread_pointer(s: &mut String, param: &str, regs: u32) {
    writeln!(
        s,
        "    ld.param.u64 %g, [{param}];
    cvta.to.global.u64 %g, %g;
    mul.wide.u32 %off, %t, {};
    add.u64 %ptr, %g, %off;",
        regs.next_multiple_of(4) * 4
    )
    .unwrap();
}

/// PTX of the kernel whose listing `fp4probe sass --family wgmma` reads (see the module doc).
pub fn lowering_kernel(v: &WgVariant) -> String {
    let names = |p: &str, n: u32| (0..n).map(|i| format!("%{p}{i}")).collect::<Vec<_>>();
    let (fd, fa) = (v.d_frag(), v.a_frag());
    let d = names("d", fd.regs);
    let a = names("a", fa.regs);
    let dty = v.d_reg_type();
    let mut s = String::new();
    writeln!(
        s,
        "// fp4probe wgmma SASS kernel: {}
.version {}
.target sm_90a
.address_size 64

.visible .entry {ENTRY}(
    .param .u64 p_c, .param .u64 p_d, .param .u64 p_areg,
    .param .u64 p_adesc, .param .u64 p_bdesc, .param .u32 p_scale_d)
{{
    .reg .b32 %t, %n;
    .reg .b64 %g, %off, %ptr, %da, %db;
    .reg .pred %p;
    .reg .{dty} {};
    .reg .b32 {};
    mov.u32 %t, %tid.x;
    ld.param.u64 %da, [p_adesc];
    ld.param.u64 %db, [p_bdesc];",
        v.id(),
        v.ptx_version(),
        d.join(", "),
        a.join(", ")
    )
    .unwrap();
    thread_pointer(&mut s, "p_c", fd.regs);
    vector_moves(&mut s, true, dty, &d);
    if v.a_src == ASource::Rs {
        thread_pointer(&mut s, "p_areg", fa.regs);
        vector_moves(&mut s, true, "b32", &a);
    }
    let ops = WgOperands {
        d: d.clone(),
        a,
        a_desc: "%da".into(),
        b_desc: "%db".into(),
        scale_d: "%p".into(),
        ..Default::default()
    };
    writeln!(
        s,
        "    ld.param.u32 %n, [p_scale_d];
    setp.ne.u32 %p, %n, 0;
    wgmma.fence.sync.aligned;
    {}
    wgmma.commit_group.sync.aligned;
    wgmma.wait_group.sync.aligned 0;",
        v.instruction(&ops, Immediates::default())
    )
    .unwrap();
    thread_pointer(&mut s, "p_d", fd.regs);
    vector_moves(&mut s, false, dty, &d);
    s += "    ret;\n}\n";
    s
}

/// The wgmma instruction of a kernel, as written there.
pub fn instruction(ptx: &str) -> String {
    ptx.lines()
        .map(str::trim)
        .find(|l| l.starts_with("wgmma.mma_async"))
        .unwrap_or_default()
        .to_string()
}

/// The report of `v`'s [`lowering_kernel`] for `target` with `tc`. The report
/// carries no date and names the command as `fp4probe ...`, so a listing regenerates byte for
/// byte with the same tools.
pub fn report(v: &WgVariant, target: Target, tc: &Toolchain) -> Result<SassReport, SassError> {
    if v.sparse {
        return Err(anyhow::anyhow!(
            "{}: the sparse forms are catalogued, not built into a kernel",
            v.id()
        )
        .into());
    }
    let ptx = lowering_kernel(v);
    let text = assemble_and_disassemble(tc, &ptx, v.id(), target)?;
    let wanted = if v.and_popc {
        "AND.POPC".to_string()
    } else {
        format!("{}.{}", v.a, v.b)
    };
    let mut r = SassReport::from_listing(
        v.id(),
        instruction(&ptx),
        target,
        tc,
        &text,
        |tensor: &[&Instr], region: &[&Instr]| {
            verdict_with(tensor, region, |op| names_input_types(op, v), &wanted)
        },
    )?;
    r.warpgroup_sequence = Some(warpgroup_sequence(&r.mma_region));
    r.date = String::new();
    r.command = command_line();
    Ok(r)
}

/// This process's command line with the program named `fp4probe` (not the path it ran from).
pub fn command_line() -> String {
    std::iter::once("fp4probe".to_string())
        .chain(std::env::args().skip(1))
        .collect::<Vec<_>>()
        .join(" ")
}

/// The type set of a variant: its id after the shape (`f32.bf16.bf16.ss`).
pub fn type_set(v: &WgVariant) -> String {
    let id = v.id();
    id.split_once('.').map(|x| x.1.to_string()).unwrap_or(id)
}

/// An opcode with the variant's N written `N`: `HGMMA.64xNx16.F32.BF16`.
fn generic(opcode: &str, v: &WgVariant) -> String {
    opcode.replacen(&format!("64x{}x", v.n), "64xNx", 1)
}

/// A warpgroup instruction's opcode (operands dropped), N written `N` for GMMAs.
fn generic_step(text: &str, v: &WgVariant) -> String {
    let i = Instr {
        addr: 0,
        text: text.to_string(),
    };
    let op = i.opcode();
    // DEPBAR's operands say what it waits for; keep them.
    if i.base() == "WARPGROUP" {
        return text.to_string();
    }
    if i.is_tensor() {
        generic(op, v)
    } else {
        op.to_string()
    }
}

/// One variant of the summary and its report (or why it has none).
pub struct Row {
    pub variant: WgVariant,
    pub outcome: std::result::Result<SassReport, String>,
}

/// N values as a short list: runs of four or more equal steps as `a..b step s`, the rest as
/// values, and the count: `8..32 step 8, 48..256 step 16 (18)`.
fn ns_text(ns: &[u32]) -> String {
    let mut parts = Vec::new();
    let mut i = 0;
    while i < ns.len() {
        let mut j = i + 1;
        if j < ns.len() {
            let step = ns[j] - ns[i];
            while j + 1 < ns.len() && ns[j + 1] - ns[j] == step {
                j += 1;
            }
            if j - i >= 3 {
                parts.push(format!("{}..{} step {step}", ns[i], ns[j]));
                i = j + 1;
                continue;
            }
        }
        parts.push(ns[i].to_string());
        i += 1;
    }
    let list = parts.join(", ");
    if ns.len() > 3 {
        format!("{list} ({})", ns.len())
    } else {
        list
    }
}

/// What the summary says of one variant: its GMMA opcodes with N written `N`, its warpgroup
/// sequence with the GMMA written `GMMA`, and its lowering (or why it has none).
fn form(row: &Row) -> (String, String, String) {
    let v = &row.variant;
    let r = match &row.outcome {
        Ok(r) => r,
        Err(e) => return ("-".into(), "-".into(), e.clone()),
    };
    let instr = |t: &String| Instr {
        addr: 0,
        text: t.clone(),
    };
    let gmma: Vec<String> = r
        .tensor_instructions
        .iter()
        .map(|t| generic(instr(t).opcode(), v))
        .collect();
    let seq: Vec<String> = r
        .warpgroup_sequence
        .iter()
        .flatten()
        .map(|t| {
            if instr(t).is_tensor() {
                "GMMA".to_string()
            } else {
                generic_step(t, v)
            }
        })
        .collect();
    let lowering = match r.lowering {
        Lowering::Native => "native",
        Lowering::Split => "split",
        Lowering::Emulated => "emulated",
        Lowering::NoTensor => "no tensor instruction",
    };
    let or_dash = |x: String| if x.is_empty() { "-".to_string() } else { x };
    (
        or_dash(gmma.join(" + ")),
        or_dash(seq.join(" → ")),
        lowering.to_string(),
    )
}

/// The Markdown summary of `rows` (in catalog order): one line per PTX type set and distinct
/// SASS form, with the A sources and N values that take it (ss and rs share a line when they
/// agree at every N). `listed` names the folder's listings (file bases) to link.
pub fn summary(rows: &[Row], tools: &str, command: &str, listed: &[String]) -> String {
    // (type set without the source, form, source) -> N, in first-appearance order.
    type Key = (String, (String, String, String), &'static str);
    let mut by_source: Vec<(Key, Vec<u32>)> = Vec::new();
    let mut counts: BTreeMap<String, usize> = BTreeMap::new();
    for row in rows {
        let v = &row.variant;
        let f = form(row);
        let verdict = if row.outcome.is_ok() {
            f.2.clone()
        } else {
            "not assembled".into()
        };
        *counts.entry(verdict).or_insert(0) += 1;
        let ts = type_set(v);
        let ts = ts
            .strip_suffix(&format!(".{}", v.a_src.name()))
            .unwrap_or(&ts)
            .to_string();
        let key = (ts, f, v.a_src.name());
        match by_source.iter_mut().find(|(k, _)| *k == key) {
            Some((_, ns)) => ns.push(v.n),
            None => by_source.push((key, vec![v.n])),
        }
    }
    // Merge the sources of lines that agree on type set, form and N.
    let mut lines: Vec<(Key, Vec<u32>)> = Vec::new();
    for ((ts, f, src), ns) in by_source {
        match lines
            .iter_mut()
            .find(|((t, g, _), m)| *t == ts && *g == f && *m == ns)
        {
            Some(((_, _, srcs), _)) => {
                *srcs = if *srcs == "ss" && src == "rs" {
                    "ss, rs"
                } else {
                    srcs
                }
            }
            None => lines.push(((ts, f, src), ns)),
        }
    }
    let mut s = format!(
        "{SUMMARY_MARKER}\n\n\
         What each dense `wgmma.mma_async` variant lowers to for sm_90a, read from the \
         disassembly of a kernel around one wgmma (`fp4probe sass --family wgmma`; \
         `src/wgmma/sass.rs`: one warpgroup loads C, and A for `rs`, into registers, then \
         `wgmma.fence`, the wgmma with K-major descriptors, `commit_group`, `wait_group 0`, \
         stores D). One line per PTX type set and SASS form, with the A sources and the N that \
         take it. **GMMA**: the tensor instruction, N written `N`; **sequence**: the warpgroup \
         instructions of the mma region in order (after the last global load, up to the first \
         global store); **native**: one GMMA of the expected base and shape whose suffix names \
         the A and B types, and no conversion.\n\n\
         Tools: {tools}.\n\nGenerated by:\n\n```sh\n{command}\n```\n\n"
    );
    s += &format!(
        "{} variants: {}.\n\n",
        rows.len(),
        counts
            .iter()
            .map(|(k, n)| format!("{n} {k}"))
            .collect::<Vec<_>>()
            .join(", ")
    );
    s += "| PTX type set | A | N | GMMA | sequence | verdict |\n| --- | --- | --- | --- | --- | --- |\n";
    for ((ts, (gmma, seq, verdict), srcs), ns) in &lines {
        s += &format!(
            "| `{ts}` | {srcs} | {} | `{gmma}` | `{seq}` | {} |\n",
            ns_text(ns),
            verdict.replace('|', "\\|")
        );
    }
    if !listed.is_empty() {
        s += "\nListings in this folder (`.sass.txt`, with the `.sass.json` report beside it):\n\n";
        for base in listed {
            s += &format!("- [`{base}`]({base}.txt)\n");
        }
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wgmma::find;

    #[test]
    fn opcodes_name_their_types() {
        let v = |id| find(id).unwrap();
        let bf = v("m64n256k16.f32.bf16.bf16.ss");
        assert!(names_input_types("HGMMA.64x256x16.F32.BF16", &bf));
        assert!(!names_input_types("HGMMA.64x128x16.F32.BF16", &bf));
        assert!(!names_input_types("HGMMA.64x256x16.F32", &bf));
        let f16 = v("m64n16k16.f16.f16.f16.rs");
        assert!(names_input_types("HGMMA.64x16x16.F16", &f16));
        assert!(!names_input_types("HGMMA.64x16x16.F16.BF16", &f16));
        let q = v("m64n8k32.f32.e4m3.e5m2.ss");
        assert!(names_input_types("QGMMA.64x8x32.F32.E4M3.E5M2", &q));
        assert!(!names_input_types("QGMMA.64x8x32.F32.E5M2.E4M3", &q));
        let i = v("m64n16k32.satfinite.s32.u8.s8.ss");
        assert!(names_input_types("IGMMA.64x16x32.U8.S8.SAT", &i));
        assert!(!names_input_types("IGMMA.64x16x32.S8.U8", &i));
        let b = v("m64n16k256.s32.b1.b1.and.popc.ss");
        assert!(names_input_types("BGMMA.64x16x256.AND.POPC", &b));
    }

    #[test]
    fn the_sequence_keeps_the_warpgroup_instructions() {
        let region: Vec<String> = [
            "WARPGROUP.ARRIVE",
            "UMOV UR8, UR17",
            "HGMMA.64x16x16.F32.BF16 R24, gdesc[UR8], R24, gsb0",
            "WARPGROUP.DEPBAR.LE gsb0, 0x0",
            "IMAD.WIDE.U32 R2, R0, 0x20, R2",
        ]
        .map(String::from)
        .to_vec();
        assert_eq!(
            warpgroup_sequence(&region),
            [region[0].as_str(), &region[2], &region[3]]
        );
        let v = find("m64n16k16.f32.bf16.bf16.ss").unwrap();
        assert_eq!(generic_step(&region[2], &v), "HGMMA.64xNx16.F32.BF16");
        assert_eq!(
            generic_step(&region[3], &v),
            "WARPGROUP.DEPBAR.LE gsb0, 0x0"
        );
        assert_eq!(ns_text(&[8, 16, 24, 32]), "8..32 step 8 (4)");
        assert_eq!(ns_text(&[16, 256]), "16, 256");
        assert_eq!(
            ns_text(&crate::wgmma::catalog::int_ns()),
            "8..32 step 8, 48..256 step 16 (18)"
        );
    }
}
