//! Markdown pieces every page shares, whatever map it shows: the status line, provenance,
//! validation and PTX sections, and cell/code escaping.

use super::sm_name;
use crate::device::BackendKind;
use crate::layout::lanemap::Status;
use crate::probe::fragment::{Check, Validation};
use crate::provenance::Provenance;
use std::fmt::Write;

/// Escape a table cell.
pub(crate) fn cell(s: &str) -> String {
    s.replace('|', "\\|").replace('\n', " ")
}

/// `code` in backticks, with a longer fence where the text holds a backtick.
pub(crate) fn code(s: &str) -> String {
    if s.contains('`') {
        format!("`` {s} ``")
    } else {
        format!("`{s}`")
    }
}

pub(crate) fn plural(n: impl Into<u64>, one: &str, many: &str) -> String {
    let n = n.into();
    format!("{n} {}", if n == 1 { one } else { many })
}

/// The line under a page's heading that links its data and the index: `Data: [JSON](s.json),
/// [CSV](s.csv) · [index](target)`, without the CSV where the map has none.
pub(crate) fn data_links(s: &mut String, stem: &str, csv: bool, index: &str, target: &str) {
    let csv = if csv {
        format!(", [CSV]({stem}.csv)")
    } else {
        String::new()
    };
    let _ = writeln!(s, "Data: [JSON]({stem}.json){csv} · [{index}]({target})\n");
}

/// The status line: PASSED on hardware, EMULATED, or FAILED.
pub(crate) fn badge(status: Status, backend: BackendKind) -> &'static str {
    match (status, backend) {
        (Status::Passed, BackendKind::Hardware) => "PASSED on hardware",
        (Status::Passed, BackendKind::Emulator) => "EMULATED (not a hardware finding)",
        (Status::Failed, BackendKind::Hardware) => "FAILED (on hardware)",
        (Status::Failed, BackendKind::Emulator) => "FAILED (on the emulator)",
    }
}

/// The device as a sentence fragment: `NVIDIA H100 80GB HBM3 (compute capability 9.0, sm_90)`.
pub(crate) fn device(p: &Provenance) -> String {
    match p.compute_capability.as_deref() {
        Some(cc) => format!(
            "{} (compute capability {cc}{})",
            p.device,
            sm_name(cc).map(|s| format!(", {s}")).unwrap_or_default()
        ),
        None => p.device.clone(),
    }
}

/// Each run that produced `ps`, `` `command` on device ``, a run repeated in a row named once.
pub(crate) fn runs<'a>(ps: impl Iterator<Item = &'a Provenance>) -> Vec<String> {
    let mut runs: Vec<String> = ps
        .map(|p| format!("{} on {}", code(&p.command), device(p)))
        .collect();
    runs.dedup();
    runs
}

/// The status paragraph under a page's title: the badge and what it means.
pub(crate) fn status_section(
    s: &mut String,
    status: Status,
    p: &Provenance,
    failure: Option<&str>,
) {
    let _ = write!(s, "**Status: {}**", badge(status, p.backend));
    match (status, p.backend) {
        (Status::Passed, BackendKind::Hardware) => {
            let _ = writeln!(
                s,
                " — measured on {}; the layout was inferred from one-hot experiments on the GPU and both validations (identity and random inputs) matched the CPU reference bit for bit.\n",
                device(p)
            );
        }
        (Status::Passed, BackendKind::Emulator) => {
            let _ = writeln!(
                s,
                "\n\n> **This is not a measurement.** This map is the PTX ISA's documented layout run through fp4probe's CPU model (the emulator): no GPU ran these experiments. It shows that the probe's experiments, inference and labelling recover the documented layout; it says nothing about what the hardware does.\n"
            );
        }
        (Status::Failed, _) => {
            let _ = writeln!(
                s,
                "\n\n> **Failure:** {}\n",
                failure.unwrap_or("no reason recorded (status failed)")
            );
        }
    }
}

/// The provenance table's `probe` row: `259 experiments in 5 launches{more}, 0.007 s wall ...`.
pub(crate) fn work_line(experiments: usize, launches: usize, more: &str, wall_s: f64) -> String {
    format!(
        "{} in {}{more}, {wall_s:.3} s wall (module load and JIT included)",
        plural(experiments as u64, "experiment", "experiments"),
        plural(launches as u64, "launch", "launches"),
    )
}

/// The provenance table; `probe` is the last row (what the probe did, in words).
pub(crate) fn provenance_section(s: &mut String, p: &Provenance, probe: String) {
    s.push_str("## Provenance\n\n| | |\n| --- | --- |\n");
    let backend = match p.backend {
        BackendKind::Hardware => "hardware",
        BackendKind::Emulator => "emulator (CPU model of the documented layouts)",
    };
    let rows: [(&str, String); 8] = [
        ("backend", backend.to_string()),
        ("device", p.device.clone()),
        (
            "compute capability",
            match p.compute_capability.as_deref() {
                Some(cc) => format!(
                    "{cc}{}",
                    sm_name(cc).map(|s| format!(" ({s})")).unwrap_or_default()
                ),
                None => "— (no GPU)".into(),
            },
        ),
        (
            "driver",
            p.driver
                .as_deref()
                .map(|d| format!("CUDA {d}"))
                .unwrap_or_else(|| "— (no GPU)".into()),
        ),
        ("tool version", format!("fp4probe {}", p.tool_version)),
        ("date (UTC)", p.date.clone()),
        ("command", code(&p.command)),
        ("probe", probe),
    ];
    for (k, v) in rows {
        let _ = writeln!(s, "| {k} | {} |", cell(&v));
    }
}

pub(crate) fn check(c: &Check) -> String {
    if c.passed {
        format!("pass: {} elements bit-exact", c.compared)
    } else {
        format!(
            "FAIL: {} of {} elements differ",
            c.mismatch_count, c.compared
        )
    }
}

/// `## Validation`: both checks, and the first mismatches of a failed one.
pub(crate) fn validation_section(s: &mut String, v: Option<&Validation>) {
    s.push_str("## Validation\n\n");
    let Some(v) = v else {
        s.push_str("Not run: there was no inferred layout to validate.\n\n");
        return;
    };
    let _ = writeln!(
        s,
        "| check | result |\n| --- | --- |\n| identity (A = B = I, through the inferred maps) | {} |\n| random exactly-representable A, B, C (seed {}) | {} |\n",
        check(&v.identity),
        v.seed,
        check(&v.random)
    );
    for (name, c) in [("identity", &v.identity), ("random", &v.random)] {
        if !c.passed && !c.mismatches.is_empty() {
            let _ = writeln!(
                s,
                "First mismatches of the {name} check (D row, col, expected, got):\n\n| row | col | expected | got |\n| ---: | ---: | ---: | ---: |"
            );
            for (r, c, e, g) in &c.mismatches {
                let _ = writeln!(s, "| {r} | {c} | {e} | {g} |");
            }
            s.push('\n');
        }
    }
}

/// `## PTX module`: the module that ran, folded.
pub(crate) fn ptx_section(s: &mut String, p: &Provenance) {
    let fence = if p.ptx.contains("```") { "~~~~" } else { "```" };
    let _ = writeln!(
        s,
        "## PTX module\n\n{}, {} lines.\n\n<details>\n<summary>PTX</summary>\n\n{fence}ptx\n{}\n{fence}\n\n</details>",
        match p.backend {
            BackendKind::Hardware => "The module that ran on the device",
            BackendKind::Emulator =>
                "The module that would run on a device (the emulator ran a CPU model instead)",
        },
        p.ptx.lines().count(),
        p.ptx.trim_end()
    );
}

/// `a–b` for a range of integers, `a` when it holds one.
pub(crate) fn span<T: std::fmt::Display + PartialEq>(a: T, b: T) -> String {
    if a == b {
        a.to_string()
    } else {
        format!("{a}–{b}")
    }
}

/// Sorted integers as ranges: `0–15, 32–47`.
pub(crate) fn ranges(xs: &[u32]) -> String {
    let mut out: Vec<String> = Vec::new();
    let mut i = 0;
    while i < xs.len() {
        let mut j = i;
        while j + 1 < xs.len() && xs[j + 1] == xs[j] + 1 {
            j += 1;
        }
        out.push(span(xs[i], xs[j]));
        i = j + 1;
    }
    out.join(", ")
}
