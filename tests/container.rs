//! CPU tests of the container sweep: the emulator's decode of every code of every input type is
//! recognised as the type's standard format, padding bits show up as ignored, the bit-role
//! inference handles synthetic tables, and placement faults are reported rather than hidden.

use fp4probe::device::emulator::Emulator;
use fp4probe::isa::{Variant, find, probed};
use fp4probe::layout::documented::documented;
use fp4probe::probe::container::{
    ContainerReport, Coverage, FloatFormat, Specials, Summary, Sweep, Table, analyse,
    representatives, standard_formats, sweep,
};
use std::process::Command;

fn variant(id: &str) -> Variant {
    find(id).unwrap_or_else(|| panic!("{id} not in the catalog"))
}

fn run(id: &str) -> (Sweep, Summary) {
    let v = variant(id);
    let sw = sweep(&Emulator::new(), &v, &documented(&v), Coverage::auto(&v)).expect("sweep");
    let s = analyse(&sw.table);
    (sw, s)
}

fn codes(set: &fp4probe::probe::container::CodeSet) -> Vec<u64> {
    set.expand()
}

fn assert_clean(sw: &Sweep) {
    assert!(
        sw.checks.columns_agree,
        "{:?}",
        sw.checks.column_disagreements
    );
    assert!(
        sw.checks.consistent_across_slots,
        "{:?}",
        sw.checks.slot_mismatches
    );
    assert!(sw.checks.zero_filler_ok);
}

#[test]
fn e4m3_is_e4m3fn() {
    let (sw, s) = run("m16n8k16.f32.e4m3.e4m3.f32");
    assert_clean(&sw);
    // Every code in every one of the 16 x 16 A slots, 16 codes per experiment, plus one
    // negative-zero experiment.
    assert_eq!(sw.checks.coverage, Coverage::Full);
    assert_eq!(sw.checks.placements, 256 * 16 * 16);
    assert_eq!((sw.experiments, sw.launches), (256 * 16 + 1, 2));
    assert_eq!(s.format.exact.as_deref(), Some("e4m3fn"));
    assert_eq!(s.roles, "seeeemmm");
    assert!(s.ignored_bits.is_empty());
    assert_eq!(s.sign_bit, Some(7));
    assert_eq!(s.exponent_bits, vec![6, 5, 4, 3]);
    assert_eq!(s.mantissa_bits, vec![2, 1, 0]);
    assert_eq!(codes(&s.nan_codes), vec![0x7f, 0xff]);
    assert_eq!(s.inf_codes.count, 0);
    assert!(!s.saturation.has_inf);
    assert!(s.negative_zero_observable);
    assert_eq!(codes(&s.negative_zero_codes), vec![0x80]);
    let max = s.max_finite.as_ref().unwrap();
    assert_eq!((max.value.0, codes(&max.codes)), (448.0, vec![0x7e]));
    assert_eq!(
        s.min_positive_subnormal.as_ref().unwrap().value.0,
        2f64.powi(-9)
    );
    assert_eq!(
        s.min_positive_normal.as_ref().unwrap().value.0,
        2f64.powi(-6)
    );
    assert!(s.saturation.note.contains("448"), "{}", s.saturation.note);
    assert_eq!(sw.table.values[0x38], 1.0);
    assert_eq!(sw.table.d_bits[0x38], 0x3f80_0000);
}

#[test]
fn e5m2_has_inf_and_nans() {
    let (sw, s) = run("m16n8k16.f32.e5m2.e5m2.f32");
    assert_clean(&sw);
    assert_eq!(s.format.exact.as_deref(), Some("e5m2"));
    assert_eq!(codes(&s.inf_codes), vec![0x7c, 0xfc]);
    assert_eq!(sw.table.values[0xfc], f64::NEG_INFINITY);
    assert_eq!(s.nan_codes.ranges, "0x7d-0x7f, 0xfd-0xff");
    assert_eq!(codes(&s.negative_zero_codes), vec![0x80]);
    assert_eq!(s.max_finite.as_ref().unwrap().value.0, 57344.0);
    assert!(s.saturation.has_inf);
}

#[test]
fn f16_full_sweep_identifies_f16() {
    let start = std::time::Instant::now();
    let (sw, s) = run("m16n8k8.f32.f16.f16.f32");
    assert_clean(&sw);
    assert_eq!(sw.table.values.len(), 65536);
    assert_eq!(sw.checks.coverage, Coverage::EveryK);
    // 4096 blocks of 16 codes at each of the 8 k positions.
    assert_eq!(sw.checks.placements, 65536 * 8);
    assert_eq!(s.format.exact.as_deref(), Some("f16"));
    assert_eq!(s.roles, "seeeeemmmmmmmmmm");
    assert_eq!(s.nan_codes.count, 2046);
    assert_eq!(s.nan_codes.ranges, "0x7c01-0x7fff, 0xfc01-0xffff");
    assert_eq!(codes(&s.inf_codes), vec![0x7c00, 0xfc00]);
    assert_eq!(codes(&s.negative_zero_codes), vec![0x8000]);
    assert_eq!(s.max_finite.as_ref().unwrap().value.0, 65504.0);
    assert_eq!(
        s.min_positive_subnormal.as_ref().unwrap().value.0,
        2f64.powi(-24)
    );
    assert_eq!(
        s.min_positive_normal.as_ref().unwrap().value.0,
        2f64.powi(-14)
    );
    // The release test build does this in about a second; a debug build is far slower.
    eprintln!(
        "f16 sweep + analysis: {:.2} s",
        start.elapsed().as_secs_f64()
    );
}

#[test]
fn bf16_identifies_bf16() {
    let (sw, s) = run("m16n8k8.f32.bf16.bf16.f32");
    assert_clean(&sw);
    assert_eq!(s.format.exact.as_deref(), Some("bf16"));
    assert_eq!(s.exponent_bits, (7..15).rev().collect::<Vec<u32>>());
    assert_eq!(s.nan_codes.count, 254);
    assert_eq!(codes(&s.inf_codes), vec![0x7f80, 0xff80]);
}

#[test]
fn integers_signed_and_unsigned() {
    let (sw, s) = run("m16n8k32.s32.s4.s4.s32");
    assert_clean(&sw);
    assert_eq!(sw.table.values.len(), 16);
    assert_eq!(s.format.exact.as_deref(), Some("s4"));
    assert_eq!(s.roles, "svvv");
    assert_eq!(s.sign_bit, Some(3));
    assert_eq!(s.min_finite.as_ref().unwrap().value.0, -8.0);
    assert_eq!(s.max_finite.as_ref().unwrap().value.0, 7.0);
    assert_eq!(sw.table.values[0xf], -1.0);
    assert_eq!(sw.launches, 1, "no negative-zero launch for integers");

    let (_, s) = run("m16n8k32.s32.u4.u4.s32");
    assert_eq!(s.format.exact.as_deref(), Some("u4"));
    assert_eq!((s.roles.as_str(), s.sign_bit), ("vvvv", None));
    assert_eq!(s.max_finite.as_ref().unwrap().value.0, 15.0);

    let (_, s) = run("m16n8k16.s32.s8.s8.s32");
    assert_eq!(s.format.exact.as_deref(), Some("s8"));
    assert_eq!(s.min_finite.as_ref().unwrap().value.0, -128.0);
}

#[test]
fn e2m1_in_byte_containers_ignores_the_padding_on_the_emulator() {
    let (sw, s) = run("m16n8k32.kind::mxf8f6f4.block_scale.scale_vec::1X.f32.e2m1.e2m1.f32.ue8m0");
    assert_clean(&sw);
    assert_eq!(sw.table.values.len(), 256);
    assert_eq!(s.ignored_bits, vec![7, 6, 1, 0]);
    assert_eq!(s.value_bits, vec![5, 4, 3, 2]);
    assert_eq!(s.documented_padding_bits, vec![7, 6, 1, 0]);
    assert!(s.padding_ignored);
    assert_eq!(s.roles, "xxseemxx");
    assert_eq!(s.format.exact.as_deref(), Some("e2m1"));
    assert_eq!(
        (s.sign_bit, s.exponent_bits.clone(), s.mantissa_bits.clone()),
        (Some(5), vec![4, 3], vec![2])
    );
    // -0 is the sign bit with any padding.
    assert_eq!(s.negative_zero_codes.count, 16);
    assert!(
        codes(&s.negative_zero_codes)
            .iter()
            .all(|c| c & 0x3c == 0x20)
    );
    assert_eq!(s.max_finite.as_ref().unwrap().value.0, 6.0);
    assert_eq!(s.nan_codes.count + s.inf_codes.count, 0);
}

#[test]
fn packed_e2m1_sweeps_sixteen_nibbles() {
    let (sw, s) = run("m16n8k64.kind::mxf4.block_scale.scale_vec::2X.f32.e2m1.e2m1.f32.ue8m0");
    assert_clean(&sw);
    assert_eq!(sw.table.values.len(), 16);
    assert_eq!(sw.checks.placements, 16 * 16 * 64);
    assert_eq!(s.format.exact.as_deref(), Some("e2m1"));
    assert_eq!(s.roles, "seem");
    assert_eq!(codes(&s.negative_zero_codes), vec![0x8]);
    let want = [0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0];
    for (c, w) in want.iter().enumerate() {
        assert_eq!(sw.table.values[c], *w);
        assert_eq!(sw.table.values[c | 8], -*w);
    }
}

/// A table built from a format placed at chosen container bits (others ignored).
fn synthetic(width: u32, value_pos: &[u32], f: impl Fn(u64) -> f64, integer: bool) -> Table {
    let values: Vec<f64> = (0..1u64 << width)
        .map(|c| {
            let x = value_pos
                .iter()
                .enumerate()
                .map(|(i, &p)| ((c >> p) & 1) << i)
                .sum();
            f(x)
        })
        .collect();
    let d_bits = values
        .iter()
        .map(|&x| (x as f32).to_bits() as u64)
        .collect();
    Table {
        container_bits: width,
        integer,
        values,
        d_bits,
        d_width: 32,
        negative_zero_observable: true,
        documented_value_bits: (0..width).collect(),
    }
}

#[test]
fn synthetic_table_with_ignored_bits() {
    let e2m1 = standard_formats()
        .into_iter()
        .find(|f| f.name == "e2m1")
        .unwrap();
    // e2m1's four bits at container bits 4, 3, 1, 0 of a 6-bit container: bits 5 and 2 ignored.
    let t = synthetic(6, &[0, 1, 3, 4], |x| e2m1.decode(x), false);
    let s = analyse(&t);
    assert_eq!(s.ignored_bits, vec![5, 2]);
    assert_eq!(s.value_bits, vec![4, 3, 1, 0]);
    assert_eq!(s.roles, "xsexem");
    assert_eq!(s.format.exact.as_deref(), Some("e2m1"));
    assert_eq!(s.exponent_bits, vec![3, 1]);
    // The table says the whole container holds the value: both ignored bits are findings.
    assert_eq!(s.documented_value_bits_ignored, vec![5, 2]);
    assert_eq!(s.negative_zero_codes.count, 4);

    // A two's-complement 3-bit integer under an ignored top bit.
    let t = synthetic(
        4,
        &[0, 1, 2],
        |x| x as f64 - if x >= 4 { 8.0 } else { 0.0 },
        true,
    );
    let s = analyse(&t);
    assert_eq!(s.ignored_bits, vec![3]);
    assert_eq!(s.format.exact.as_deref(), Some("s3"));
    assert_eq!(s.roles, "xsvv");
}

#[test]
fn non_standard_tables_are_not_forced_into_a_standard_format() {
    // e4m3 without specials (0x7f = 480): no standard format, but the generic search names it.
    let f = FloatFormat {
        name: "x".into(),
        exp_bits: 4,
        man_bits: 3,
        bias: 7,
        specials: Specials::None,
    };
    let s = analyse(&synthetic(
        8,
        &(0..8).collect::<Vec<_>>(),
        |x| f.decode(x),
        false,
    ));
    let exact = s.format.exact.clone().unwrap();
    assert!(exact.contains("e4m3 bias 7"), "{exact}");
    assert!(s.format.description.contains("not a standard format"));
    assert_eq!(s.roles, "seeeemmm");
    // A scrambled table matches nothing; the closest standard format is reported.
    let s = analyse(&synthetic(
        8,
        &(0..8).collect::<Vec<_>>(),
        |x| ((x * 37) % 256) as f64 - 100.0,
        false,
    ));
    assert!(s.format.exact.is_none());
    assert!(
        s.format
            .description
            .starts_with("no standard format matches")
    );
    assert!(s.format.closest.as_ref().unwrap().mismatches > 0);
}

#[test]
fn misplaced_elements_are_reported_not_hidden() {
    let v = variant("m16n8k16.f32.e4m3.e4m3.f32");
    let doc = documented(&v);
    // "Hardware" that holds A(0, 0) and A(1, 0) the other way round from the documented layout.
    let mut hw = doc.clone();
    let i = hw.a.iter().position(|c| (c.row, c.col) == (0, 0)).unwrap();
    let j = hw.a.iter().position(|c| (c.row, c.col) == (1, 0)).unwrap();
    hw.a.swap(i, j);
    let emu = Emulator::new().with_layout(&v, hw.clone());
    let sw = sweep(&emu, &v, &doc, Coverage::Full).unwrap();
    assert!(!sw.checks.consistent_across_slots);
    assert!(sw.checks.slot_mismatch_count > 0);
    // Placed through the "measured" layout, the same unit is consistent again.
    let sw = sweep(&emu, &v, &hw, Coverage::Full).unwrap();
    assert_clean(&sw);

    // D(0, 0) and D(1, 0) swapped: the columns of rows 0 and 1 disagree.
    let mut hw = doc.clone();
    let i = hw.d.iter().position(|c| (c.row, c.col) == (0, 0)).unwrap();
    let j = hw.d.iter().position(|c| (c.row, c.col) == (1, 0)).unwrap();
    hw.d.swap(i, j);
    let emu = Emulator::new().with_layout(&v, hw);
    let sw = sweep(&emu, &v, &doc, Coverage::EveryK).unwrap();
    assert!(!sw.checks.columns_agree);
    assert!(!sw.checks.column_disagreements.is_empty());
}

#[test]
fn one_representative_per_input_type() {
    let reps = representatives(&probed());
    let ids: Vec<String> = reps.iter().map(|v| v.id()).collect();
    // f16, bf16, tf32, s8, u8, s4, u4, b1, e4m3, e5m2, 5 x f8f6f4, 5 x mxf8f6f4, mxf4, mxf4nvf4.
    assert_eq!(reps.len(), 22, "{ids:#?}");
    for want in [
        "m16n8k8.f32.f16.f16.f32",
        "m16n8k8.f32.bf16.bf16.f32",
        "m16n8k16.s32.s8.s8.s32",
        "m16n8k32.s32.u4.u4.s32",
        "m16n8k128.s32.b1.b1.s32.and.popc",
        "m16n8k16.f32.e4m3.e4m3.f32",
        "m16n8k32.kind::f8f6f4.f32.e2m1.e2m1.f32",
        "m16n8k64.kind::mxf4.block_scale.scale_vec::2X.f32.e2m1.e2m1.f32.ue8m0",
    ] {
        assert!(
            ids.iter().any(|i| i == want),
            "{want} missing from {ids:#?}"
        );
    }
}

mod common;

fn tmpdir(name: &str) -> common::Scratch {
    common::tmpdir("container", name)
}

#[test]
fn cli_writes_json_and_csv() {
    let dir = tmpdir("cli");
    let o = Command::new(env!("CARGO_BIN_EXE_fp4probe"))
        .args([
            "container",
            "--a",
            "e4m3",
            "--kind",
            "plain",
            "--backend",
            "emulator",
            "-o",
            dir.to_str().unwrap(),
        ])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&o.stdout).to_string() + &String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{text}");
    assert!(text.contains("format: e4m3fn (exact"), "{text}");
    assert!(text.contains("NOTE: emulator result"), "{text}");
    let stem = "m16n8k16.f32.e4m3.e4m3.f32";
    let json = dir.join(format!("{stem}.container.json"));
    let r = ContainerReport::load(&json).expect("report reads back");
    assert_eq!(r.schema, "fp4probe.container/1");
    assert_eq!(r.backend, fp4probe::device::BackendKind::Emulator);
    assert_eq!(r.table.len(), 256);
    assert!(r.table[0x7f].2.0.is_nan());
    assert!(r.provenance.ptx.contains(".target sm_89"));
    let raw: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    assert_eq!(raw["backend"], "emulator");
    assert_eq!(raw["checks"]["consistent_across_slots"], true);
    // The table is stored once, in the CSV beside the JSON, and read back from there.
    assert_eq!(raw["table_file"], format!("{stem}.container.csv"));
    assert!(raw.get("table").is_none());
    assert_eq!(r.table[0x7e].2.0, 448.0);
    let csv = std::fs::read_to_string(dir.join(format!("{stem}.container.csv"))).unwrap();
    let lines: Vec<&str> = csv.lines().collect();
    assert_eq!(lines[0], "code,bits,value,d_bits");
    assert_eq!(lines.len(), 257);
    assert_eq!(lines[1 + 0x38], "56,0x38,1,0x3f800000");
    assert_eq!(lines[1 + 0x80], "128,0x80,-0,0x00000000");

    // Ambiguous qualifiers name the candidates; tf32 containers are refused with a reason.
    let o = Command::new(env!("CARGO_BIN_EXE_fp4probe"))
        .args(["container", "--a", "e4m3", "--backend", "emulator"])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        !o.status.success() && err.contains("3 input types match"),
        "{err}"
    );
    let o = Command::new(env!("CARGO_BIN_EXE_fp4probe"))
        .args(["container", "--a", "tf32", "--backend", "emulator"])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        !o.status.success() && err.contains("32-bit containers"),
        "{err}"
    );
}

#[test]
fn committed_hardware_sweeps_read_back() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("reports/sm_90");
    let r = ContainerReport::load(&dir.join("m16n8k8.f32.f16.f16.f32.container.json"))
        .expect("f16 sweep");
    assert_eq!(r.backend, fp4probe::device::BackendKind::Hardware);
    assert_eq!(r.table.len(), 65536);
    assert_eq!(r.table[0x3c00].2.0, 1.0);
    assert!(r.table[0x7e00].2.0.is_nan());
    assert_eq!(r.summary.format.exact.as_deref(), Some("f16"));
}
