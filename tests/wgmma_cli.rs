//! `fp4probe wgmma probe` on the emulator: variants probed side by side write the same maps as
//! one at a time, and a variant named twice is probed once.

mod common;
use common::{fp4probe, text, tmpdir};

/// The map without what depends on the run (its date, command and timing).
fn stable(path: &std::path::Path) -> serde_json::Value {
    let mut v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    let o = v.as_object_mut().unwrap();
    o.remove("timing");
    let p = o["provenance"].as_object_mut().unwrap();
    p.remove("date");
    p.remove("command");
    v
}

#[test]
fn side_by_side_probes_write_what_one_at_a_time_writes() {
    let dir = tmpdir("wgmma-cli", "jobs");
    let run = |jobs: &str, out: &str| {
        let o = fp4probe(&[
            "wgmma",
            "probe",
            "--backend",
            "emulator",
            "--filter",
            "m64n24k",
            "--jobs",
            jobs,
            "-o",
            dir.join(out).to_str().unwrap(),
        ]);
        let t = text(&o);
        assert_eq!(o.status.code(), Some(0), "{t}");
        assert!(t.contains("42 passed, 0 failed"), "{t}");
    };
    run("1", "one");
    run("4", "four");
    let mut compared = 0;
    for e in std::fs::read_dir(dir.join("one")).unwrap() {
        let p = e.unwrap().path();
        let name = p.file_name().unwrap().to_owned();
        let q = dir.join("four").join(&name);
        if p.extension().is_some_and(|x| x == "json") {
            assert_eq!(stable(&p), stable(&q), "{name:?}");
        } else {
            assert_eq!(
                std::fs::read(&p).unwrap(),
                std::fs::read(&q).unwrap(),
                "{name:?}"
            );
        }
        compared += 1;
    }
    assert_eq!(compared, 84);
}

#[test]
fn a_variant_named_twice_is_probed_once() {
    let dir = tmpdir("wgmma-cli", "twice");
    let o = fp4probe(&[
        "wgmma",
        "probe",
        "--backend",
        "emulator",
        "--variant",
        "m64n8k16.f32.bf16.bf16.rs",
        "--variant",
        "m64n8k16.f32.bf16.bf16.rs",
        "-o",
        dir.to_str().unwrap(),
    ]);
    let t = text(&o);
    assert_eq!(o.status.code(), Some(0), "{t}");
    assert!(t.contains("1 passed, 0 failed"), "{t}");
}
