//! The real binary, driven as a user would, on a machine without a GPU.

mod common;
use common::{fp4probe, text, tmpdir};

fn has_driver() -> bool {
    // SAFETY: only probes whether libcuda can be loaded.
    unsafe { cudarc::driver::sys::is_culib_present() }
}

#[test]
fn fragment_on_the_emulator_writes_json_and_csv() {
    let dir = tmpdir("cli", "frag");
    let o = fp4probe(&[
        "fragment",
        "--shape",
        "m16n8k32",
        "--kind",
        "mxf8f6f4",
        "--a",
        "e2m1",
        "--b",
        "e2m1",
        "--backend",
        "emulator",
        "-o",
        dir.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", text(&o));
    let stem = "m16n8k32.kind_mxf8f6f4.block_scale.scale_vec_1X.f32.e2m1.e2m1.f32.ue8m0";
    let json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join(format!("{stem}.json"))).unwrap())
            .unwrap();
    assert_eq!(json["backend"], "emulator");
    assert_eq!(json["status"], "passed");
    assert_eq!(
        json["variant"],
        "m16n8k32.kind::mxf8f6f4.block_scale.scale_vec::1X.f32.e2m1.e2m1.f32.ue8m0"
    );
    assert_eq!(json["provenance"]["backend"], "emulator");
    assert!(
        json["provenance"]["ptx"]
            .as_str()
            .unwrap()
            .contains(".target sm_120a")
    );
    let csv = std::fs::read_to_string(dir.join(format!("{stem}.csv"))).unwrap();
    let mut lines = csv.lines();
    assert_eq!(lines.next(), Some("operand,lane,reg,elem,row,col"));
    // 512 A + 256 B + 128 C + 128 D slots.
    assert_eq!(lines.count(), 512 + 256 + 128 + 128);
    // `show` reads it back.
    let o = fp4probe(&["show", dir.join(format!("{stem}.json")).to_str().unwrap()]);
    assert!(
        o.status.success() && text(&o).contains("PASSED"),
        "{}",
        text(&o)
    );
}

#[test]
fn auto_backend_without_a_gpu_falls_back_loudly() {
    if has_driver() {
        eprintln!("skipped: a CUDA driver is present");
        return;
    }
    let dir = tmpdir("cli", "auto");
    let o = fp4probe(&[
        "fragment",
        "--variant",
        "m16n8k8.f32.tf32.tf32.f32",
        "-o",
        dir.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", text(&o));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("NO CUDA DEVICE") && err.contains("EMULATOR"),
        "{err}"
    );
    // Asking for CUDA explicitly is an error, not a panic.
    let o = fp4probe(&[
        "fragment",
        "--variant",
        "m16n8k8.f32.tf32.tf32.f32",
        "--backend",
        "cuda",
        "-o",
        dir.to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert!(text(&o).contains("libcuda"), "{}", text(&o));
}

#[test]
fn malformed_map_file_says_where() {
    let dir = tmpdir("cli", "bad");
    let bad = dir.join("bad.json");
    std::fs::write(
        &bad,
        "{\n  \"schema\": \"fp4probe.lanemap/1\",\n  \"variant\": 12\n}\n",
    )
    .unwrap();
    let o = fp4probe(&["show", bad.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(2));
    let t = text(&o);
    assert!(t.contains("bad.json:3:"), "{t}");

    // A structurally valid file whose slots are not a layout: which operand and entry.
    let dir2 = tmpdir("cli", "bad2");
    let ok = fp4probe(&[
        "fragment",
        "--variant",
        "m16n8k8.f32.bf16.bf16.f32",
        "--backend",
        "emulator",
        "-o",
        dir2.to_str().unwrap(),
    ]);
    assert!(ok.status.success());
    let path = dir2.join("m16n8k8.f32.bf16.bf16.f32.json");
    let mut json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    json["operands"][1]["slots"][3] = serde_json::json!([0, 0, 0, 0, 0]);
    std::fs::write(&path, serde_json::to_string(&json).unwrap()).unwrap();
    let t = text(&fp4probe(&["show", path.to_str().unwrap()]));
    assert!(
        t.contains("operand B slot entry 3") && t.contains("appears twice"),
        "{t}"
    );
}

#[test]
fn selection_errors_are_clear() {
    let t = text(&fp4probe(&["fragment", "--backend", "emulator"]));
    assert!(t.contains("name a variant") && t.contains("--all"), "{t}");
    let t = text(&fp4probe(&[
        "fragment",
        "--variant",
        "m16n8k32.kind::mxf8f6f4.block_scale.scale_vec::2X.f32.e2m1.e2m1.f32.ue8m0",
    ]));
    assert!(
        t.contains("not in the catalog") && t.contains("--rejected"),
        "{t}"
    );
}

#[test]
fn catalog_lists_every_variant() {
    let o = fp4probe(&["catalog", "--json"]);
    assert!(o.status.success(), "{}", text(&o));
    let json: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(
        json["variants"].as_array().unwrap().len(),
        fp4probe::isa::catalog().len()
    );
}
