//! The scale probe on the emulator: it reads back the documented scale model, and it reports a
//! different model differently (it measures; it does not assume).

mod common;
use common::{fp4probe, text, tmpdir};

use anyhow::Result;
use fp4probe::device::emulator::Emulator;
use fp4probe::device::{Backend, Batch, DWords, DeviceInfo};
use fp4probe::isa::{ScaleSelectors, Variant, find};
use fp4probe::layout::documented::documented;
use fp4probe::probe::scale::{
    AcceptedSelectors, Effect, ScaleMap, ScaleOperand, ScaleOutcome, ScaleStatus, SelectorSource,
    probe,
};
use fp4probe::tools;
use std::collections::BTreeMap;

const MX_E2M1: &str = "m16n8k32.kind::mxf8f6f4.block_scale.scale_vec::1X.f32.e2m1.e2m1.f32.ue8m0";
const MXF4_2X: &str = "m16n8k64.kind::mxf4.block_scale.scale_vec::2X.f32.e2m1.e2m1.f32.ue8m0";
const NVF4_4X: &str = "m16n8k64.kind::mxf4nvf4.block_scale.scale_vec::4X.f32.e2m1.e2m1.f32.ue4m3";

fn variant(id: &str) -> Variant {
    find(id).unwrap_or_else(|| panic!("{id} not in the catalog"))
}

fn run_on(backend: &dyn Backend, v: &Variant) -> ScaleOutcome {
    let sels = AcceptedSelectors::recorded(v, "test");
    probe(backend, v, &documented(v), &sels).expect("probe runs")
}

fn row(r: u32, kblock: u32) -> Vec<Effect> {
    vec![Effect {
        row: Some(r),
        col: None,
        kblock,
    }]
}

fn col(c: u32, kblock: u32) -> Vec<Effect> {
    vec![Effect {
        row: None,
        col: Some(c),
        kblock,
    }]
}

#[test]
fn mxf8f6f4_e2m1_1x_matches_the_seed_measurement() {
    let v = variant(MX_E2M1);
    let out = run_on(&Emulator::new(), &v);
    // Selectors {0, 0}: A lane L%4 == 0 → row L/4, L%4 == 1 → row L/4 + 8, byte 0 only; B lane
    // L%4 == 0 → column L/4. Every other (lane, byte) changes nothing. This is what the seed
    // article measured on an RTX 5070 Ti (sm_120).
    let mut want_a = BTreeMap::new();
    let mut want_b = BTreeMap::new();
    for lane in 0..32 {
        match lane % 4 {
            0 => {
                want_a.insert((lane, 0), row(lane / 4, 0));
                want_b.insert((lane, 0), col(lane / 4, 0));
            }
            1 => {
                want_a.insert((lane, 0), row(lane / 4 + 8, 0));
            }
            _ => {}
        }
    }
    assert_eq!(out.effects(ScaleOperand::A, 0, 0), want_a);
    assert_eq!(out.effects(ScaleOperand::B, 0, 0), want_b);
    let a = out.sweep(ScaleOperand::A, 0, 0).unwrap();
    assert!(a.baseline_ok && a.unexplained == 0);
    assert_eq!(
        a.summary,
        "scale_a {byte-id 0, thread-id 0}: lane 4·(r%8) + r/8, byte 0 → row r"
    );
    assert_eq!(
        out.sweep(ScaleOperand::B, 0, 0).unwrap().summary,
        "scale_b {byte-id 0, thread-id 0}: lane 4·c, byte 0 → col c"
    );
    assert_eq!(
        out.overall,
        vec![
            "scale_a, all 8 selector pairs swept: lane 4·(r%8) + r/8 + 2·thread-id, byte byte-id → row r",
            "scale_b, all 16 selector pairs swept: lane 4·c + thread-id, byte byte-id → col c",
        ]
    );
}

#[test]
fn thread_id_a_1_moves_a_to_lanes_2_and_3_of_each_quad() {
    let v = variant(MX_E2M1);
    let out = run_on(&Emulator::new(), &v);
    let got = out.effects(ScaleOperand::A, 0, 1);
    assert_eq!(got.len(), 16);
    for ((lane, byte), eff) in got {
        assert_eq!(byte, 0);
        match lane % 4 {
            2 => assert_eq!(eff, row(lane / 4, 0)),
            3 => assert_eq!(eff, row(lane / 4 + 8, 0)),
            _ => panic!("lane {lane} should not be read with thread-id-a 1"),
        }
    }
    // byte-id selects the byte, thread-id-b the lane within the quad.
    let b = out.effects(ScaleOperand::B, 3, 2);
    assert_eq!(b.len(), 8);
    for c in 0..8 {
        assert_eq!(b[&(4 * c + 2, 3)], col(c, 0));
    }
}

#[test]
fn nvf4_4x_bytes_name_k_blocks() {
    let v = variant(NVF4_4X);
    let out = run_on(&Emulator::new(), &v);
    let a = out.effects(ScaleOperand::A, 0, 0);
    assert_eq!(a.len(), 16 * 4);
    for byte in 0..4 {
        assert_eq!(a[&(0, byte)], row(0, byte));
        assert_eq!(a[&(1, byte)], row(8, byte));
        assert_eq!(a[&(4 * 7 + 1, byte)], row(15, byte));
    }
    let b = out.effects(ScaleOperand::B, 0, 0);
    for byte in 0..4 {
        assert_eq!(b[&(4 * 5, byte)], col(5, byte));
    }
    assert_eq!(
        out.sweep(ScaleOperand::A, 0, 0).unwrap().summary,
        "scale_a {byte-id 0, thread-id 0}: lane 4·(r%8) + r/8, byte j → row r, k-block j"
    );
    assert_eq!(out.method.kblock_increments, vec![8.0, 16.0, 32.0, 64.0]);
    assert_eq!((out.method.scale_one, out.method.scale_two), (0x38, 0x40));
}

#[test]
fn byte_id_2_with_2x_reads_bytes_2_and_3() {
    let v = variant(MXF4_2X);
    let out = run_on(&Emulator::new(), &v);
    for op in ScaleOperand::BOTH {
        let s = out.sweep(op, 2, 0).unwrap();
        assert_eq!(s.bytes_read, vec![2, 3], "{}", s.summary);
        let e = out.effects(op, 2, 0);
        let want = |j| match op {
            ScaleOperand::A => row(0, j),
            ScaleOperand::B => col(0, j),
        };
        assert_eq!(e[&(0, 2)], want(0));
        assert_eq!(e[&(0, 3)], want(1));
        assert!(!e.contains_key(&(0, 0)) && !e.contains_key(&(0, 1)));
    }
    assert_eq!(
        out.sweep(ScaleOperand::B, 2, 1).unwrap().summary,
        "scale_b {byte-id 2, thread-id 1}: lane 4·c + 1, byte 2 + j → col c, k-block j"
    );
}

/// The emulator behind a different scale model: scale_a's bytes reversed inside the word,
/// scale_b's word taken from the neighbouring lane (lane ^ 1); or, with `broadcast_b`, every
/// lane's scale_b replaced by lane 0's.
struct Rewired {
    inner: Emulator,
    broadcast_b: bool,
}

impl Backend for Rewired {
    fn info(&self) -> &DeviceInfo {
        self.inner.info()
    }
    fn check_supported(&self, v: &Variant) -> Result<()> {
        self.inner.check_supported(v)
    }
    fn run(&self, v: &Variant, sel: ScaleSelectors, batch: &Batch) -> Result<DWords> {
        let mut b = batch.clone();
        for w in &mut b.scale_a {
            *w = w.swap_bytes();
        }
        for (e, chunk) in batch.scale_b.chunks(32).enumerate() {
            for lane in 0..32 {
                b.scale_b[e * 32 + lane] = if self.broadcast_b {
                    chunk[0]
                } else {
                    chunk[lane ^ 1]
                };
            }
        }
        self.inner.run(v, sel, &b)
    }
}

#[test]
fn a_different_scale_model_is_reported_differently() {
    let v = variant(NVF4_4X);
    let rewired = Rewired {
        inner: Emulator::new(),
        broadcast_b: false,
    };
    let out = run_on(&rewired, &v);
    let a = out.effects(ScaleOperand::A, 0, 0);
    for j in 0..4 {
        assert_eq!(a[&(0, 3 - j)], row(0, j), "byte 3 - j scales k-block j");
    }
    let b = out.effects(ScaleOperand::B, 0, 0);
    assert_eq!(b[&(1, 0)], col(0, 0), "lane 4c + 1 now scales column c");
    assert!(!b.contains_key(&(0, 0)));
    assert_eq!(
        out.sweep(ScaleOperand::A, 0, 0).unwrap().summary,
        "scale_a {byte-id 0, thread-id 0}: lane 4·(r%8) + r/8, byte 3 - j → row r, k-block j"
    );
    assert_eq!(
        out.sweep(ScaleOperand::B, 0, 1).unwrap().summary,
        "scale_b {byte-id 0, thread-id 1}: lane 4·c, byte j → col c, k-block j"
    );
    let doc = run_on(&Emulator::new(), &v);
    assert_ne!(out.overall, doc.overall);
    assert_ne!(out.entries, doc.entries);

    // A model the probe cannot explain as one (column, k-block) per byte is recorded as seen.
    let v = variant(MX_E2M1);
    let broadcast = Rewired {
        inner: Emulator::new(),
        broadcast_b: true,
    };
    let out = run_on(&broadcast, &v);
    let s = out.sweep(ScaleOperand::B, 0, 0).unwrap();
    assert_eq!(s.fit, None);
    assert_eq!(s.unexplained, 1);
    assert_eq!(s.lanes_read, vec![0]);
    let e = out
        .entries
        .iter()
        .find(|e| e.operand == ScaleOperand::B && e.byte_id == 0 && e.thread_id == 0)
        .unwrap();
    assert_eq!(e.effect.len(), 8);
    assert!(
        e.unexplained.as_deref().unwrap().contains("8 cols changed"),
        "{e:?}"
    );
    assert!(s.summary.contains("as measured"), "{}", s.summary);
}

#[test]
fn scale_map_round_trips_and_says_emulator() {
    let v = variant(MXF4_2X);
    let sels = AcceptedSelectors::recorded(&v, "test");
    let backend = Emulator::new();
    let out = probe(&backend, &v, &documented(&v), &sels).unwrap();
    let prov = fp4probe::provenance::Provenance::new(
        backend.info(),
        fp4probe::probe::ptx::fragment_kernel(&v, v.min_target, Default::default()),
    );
    let map = ScaleMap::new(
        &v,
        out,
        prov,
        fp4probe::probe::scale::LayoutSource::documented(),
        sels,
    );
    assert_eq!(map.status, ScaleStatus::Explained);
    assert!(map.note.contains("not a hardware finding"));
    let dir = tmpdir("scale", "roundtrip");
    let path = map
        .write(&dir, &fp4probe::outfile::Outputs::new(false))
        .unwrap();
    assert!(path.to_str().unwrap().ends_with(".scale.json"));
    let back = ScaleMap::load(&path).unwrap();
    assert_eq!(back, map);
    let csv = std::fs::read_to_string(path.with_extension("csv")).unwrap();
    let mut lines = csv.lines();
    assert_eq!(
        lines.next(),
        Some("operand,byte_id,thread_id,lane,byte,row_or_col,kblock")
    );
    // 4 A selector pairs × 16 rows × 2 blocks + 8 B pairs × 8 columns × 2 blocks.
    assert_eq!(lines.count(), 4 * 16 * 2 + 8 * 8 * 2);
}

// --- ptxas -------------------------------------------------------------------------------------

#[test]
fn ptxas_selector_ranges_match_the_recorded_ones() {
    if tools::find_tool("ptxas").is_none() {
        if std::env::var_os("CI").is_some_and(|v| !v.is_empty()) {
            panic!("ptxas not found under CI: run .ci/install-cuda-tools");
        }
        println!("skipped: ptxas not found (run .ci/install-cuda-tools)");
        return;
    }
    for id in [
        MX_E2M1,
        MXF4_2X,
        NVF4_4X,
        "m16n8k64.kind::mxf4nvf4.block_scale.scale_vec::4X.f32.e2m1.e2m1.f32.ue8m0",
    ] {
        let v = variant(id);
        let asked = AcceptedSelectors::from_ptxas(&v).unwrap();
        let recorded = AcceptedSelectors::recorded(&v, "test");
        assert_eq!(asked.source, SelectorSource::Ptxas);
        assert_eq!((&asked.a, &asked.b), (&recorded.a, &recorded.b), "{id}");
        assert!(!asked.rejected.is_empty());
    }
}

// --- the binary ---------------------------------------------------------------------------------

#[test]
fn cli_writes_scale_maps_labelled_emulator() {
    let dir = tmpdir("scale", "cli");
    let o = fp4probe(&[
        "scale",
        "--variant",
        NVF4_4X,
        "--backend",
        "emulator",
        "--no-ptxas",
        "-o",
        dir.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", text(&o));
    let t = text(&o);
    assert!(
        t.contains("EXPLAINED") && t.contains("not a hardware finding"),
        "{t}"
    );
    assert!(
        t.contains(
            "scale_a {byte-id 0, thread-id 1}: lane 4·(r%8) + r/8 + 2, byte j → row r, k-block j"
        ),
        "{t}"
    );
    let stem = "m16n8k64.kind_mxf4nvf4.block_scale.scale_vec_4X.f32.e2m1.e2m1.f32.ue4m3";
    let json: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(dir.join(format!("{stem}.scale.json"))).unwrap(),
    )
    .unwrap();
    assert_eq!(json["schema"], "fp4probe.scalemap/1");
    assert_eq!(json["backend"], "emulator");
    assert_eq!(json["provenance"]["backend"], "emulator");
    assert_eq!(json["selectors"]["source"], "recorded");
    assert_eq!(json["layout"]["source"], "documented");
    assert!(json["note"].as_str().unwrap().contains("hardware"));
    assert!(dir.join(format!("{stem}.scale.csv")).exists());
}

#[test]
fn cli_all_on_the_emulator_runs_the_29_block_scaled_variants() {
    let dir = tmpdir("scale", "all");
    let o = fp4probe(&[
        "scale",
        "--all",
        "--backend",
        "emulator",
        "--no-ptxas",
        "-q",
        "-o",
        dir.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", text(&o));
    assert!(
        text(&o).contains("29 explained, 0 with unexplained"),
        "{}",
        text(&o)
    );
    let n = std::fs::read_dir(&dir)
        .unwrap()
        .filter(|e| {
            e.as_ref()
                .unwrap()
                .file_name()
                .to_string_lossy()
                .ends_with(".scale.json")
        })
        .count();
    assert_eq!(n, 29);
}

#[test]
fn cli_measured_map_places_elements() {
    let dir = tmpdir("scale", "map");
    let o = fp4probe(&[
        "fragment",
        "--variant",
        MXF4_2X,
        "--backend",
        "emulator",
        "-o",
        dir.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", text(&o));
    let map = dir.join("m16n8k64.kind_mxf4.block_scale.scale_vec_2X.f32.e2m1.e2m1.f32.ue8m0.json");
    let o = fp4probe(&[
        "scale",
        "--map",
        map.to_str().unwrap(),
        "--backend",
        "emulator",
        "--no-ptxas",
        "-o",
        dir.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", text(&o));
    let got = ScaleMap::load(
        &dir.join("m16n8k64.kind_mxf4.block_scale.scale_vec_2X.f32.e2m1.e2m1.f32.ue8m0.scale.json"),
    )
    .unwrap();
    assert_eq!(got.layout.source, "measured");
    let v = variant(MXF4_2X);
    let doc = run_on(&Emulator::new(), &v);
    assert_eq!(got.entries, doc.entries);
    // A map of another variant is refused.
    let o = fp4probe(&[
        "scale",
        "--variant",
        NVF4_4X,
        "--map",
        map.to_str().unwrap(),
        "--backend",
        "emulator",
    ]);
    assert_eq!(o.status.code(), Some(2));
    assert!(text(&o).contains("is a lane map of"), "{}", text(&o));
}

#[test]
fn cli_refuses_unscaled_variants() {
    let o = fp4probe(&[
        "scale",
        "--variant",
        "m16n8k16.f32.f16.f16.f32",
        "--backend",
        "emulator",
    ]);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        text(&o).contains("has no block scaling") && text(&o).contains("29 block-scaled"),
        "{}",
        text(&o)
    );
}
