//! Snapshot tests of the viewer on ratatui's test backend at 80×24, one per tab and for the
//! diff mode, plus key handling. `UPDATE_SNAPSHOTS=1 cargo test --test tui` rewrites them.

use fp4probe::cli::view::{Args, app};
use fp4probe::tui::{App, Tab, draw};
use ratatui::Terminal;
use ratatui::backend::TestBackend;
use ratatui::crossterm::event::KeyCode;
use std::path::PathBuf;

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn open(map: &str, diff: Option<&str>, scale: Option<&str>) -> App {
    app(&Args {
        map: root().join(map),
        diff: diff.map(|d| root().join(d)),
        scale: scale.map(|s| root().join(s)),
    })
    .expect("map loads")
}

fn screen(app: &mut App) -> String {
    let mut t = Terminal::new(TestBackend::new(80, 24)).unwrap();
    t.draw(|f| draw(f, app)).unwrap();
    let buf = t.backend().buffer().clone();
    (0..buf.area.height)
        .map(|y| {
            (0..buf.area.width)
                .map(|x| buf[(x, y)].symbol().to_string())
                .collect::<String>()
                .trim_end()
                .to_string()
        })
        .collect::<Vec<_>>()
        .join("\n")
        + "\n"
}

fn snapshot(name: &str, got: &str) {
    let path = root()
        .join("tests/snapshots")
        .join(format!("tui_{name}.txt"));
    if std::env::var_os("UPDATE_SNAPSHOTS").is_some() {
        std::fs::write(&path, got).unwrap();
    }
    let want = std::fs::read_to_string(&path)
        .unwrap_or_else(|_| panic!("missing {}; run with UPDATE_SNAPSHOTS=1", path.display()));
    assert_eq!(
        got, want,
        "snapshot {name} differs (UPDATE_SNAPSHOTS=1 to accept)"
    );
}

const BF16: &str = "reports/sm_90/m16n8k16.f32.bf16.bf16.f32.json";
const MXF4: &str =
    "reports/emulator/m16n8k64.kind_mxf4nvf4.block_scale.scale_vec_4X.f32.e2m1.e2m1.f32.ue4m3.json";

#[test]
fn tab_a_with_cursor() {
    let mut a = open(BF16, None, None);
    for k in [
        KeyCode::Down,
        KeyCode::Right,
        KeyCode::Right,
        KeyCode::Char('l'),
    ] {
        a.handle_key(k);
    }
    let s = screen(&mut a);
    // bf16 m16n8k16 A (1, 3) is lane 5 (g = 1, t = 1), reg 0, elem 1.
    assert!(s.contains("(1,3) = lane 5 reg 0 elem 1"), "{s}");
    snapshot("a_cursor", &s);
}

#[test]
fn tabs_b_c_d() {
    let mut a = open(BF16, None, None);
    for (key, name) in [
        (KeyCode::Char('b'), "b"),
        (KeyCode::Char('c'), "c"),
        (KeyCode::Char('D'), "d"),
    ] {
        a.handle_key(key);
        snapshot(&format!("tab_{name}"), &screen(&mut a));
    }
    a.handle_key(KeyCode::Tab);
    assert_eq!(
        a.tab,
        Tab::Operand(fp4probe::isa::Operand::A),
        "no scale tab for an unscaled variant"
    );
}

#[test]
fn lane_highlight_and_wide_grid_scrolls() {
    let mut a = open(MXF4, None, None);
    for k in [KeyCode::Char('1'), KeyCode::Char('3'), KeyCode::Enter] {
        a.handle_key(k);
    }
    assert_eq!(a.highlight, Some(13));
    for _ in 0..40 {
        a.handle_key(KeyCode::Right);
    }
    let s = screen(&mut a);
    assert!(
        s.contains("(0,40) = lane") && s.contains("lane 13 lit"),
        "{s}"
    );
    snapshot("highlight_scrolled", &s);
    a.handle_key(KeyCode::Esc);
    assert_eq!(a.highlight, None);
}

#[test]
fn scale_tab() {
    let mut a = open(
        MXF4,
        None,
        Some("tests/snapshots/mxf4nvf4_4x_ue4m3.scale.csv"),
    );
    a.handle_key(KeyCode::Char('s'));
    assert_eq!(a.tab, Tab::Scale);
    snapshot("scale", &screen(&mut a));
    // Without a scale map the tab says how to make one (a copy of the map with no CSV beside it).
    let dir = std::env::temp_dir().join(format!("fp4probe-tui-noscale-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let lone = dir.join(std::path::Path::new(MXF4).file_name().unwrap());
    std::fs::copy(root().join(MXF4), &lone).unwrap();
    let mut b = app(&Args {
        map: lone,
        diff: None,
        scale: None,
    })
    .unwrap();
    b.handle_key(KeyCode::Char('s'));
    assert!(screen(&mut b).contains("fp4probe scale"));
}

#[test]
fn diff_mode_against_documented_and_another_map() {
    let mut a = open(BF16, None, None);
    a.handle_key(KeyCode::Char('d'));
    let s = screen(&mut a);
    assert!(s.contains("diff vs documented: 0 differ"), "{s}");
    snapshot("diff_documented", &s);
    // Against a different map of the same variant: a copy with two A slots swapped.
    let dir = std::env::temp_dir().join(format!("fp4probe-tui-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let mut json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(root().join(BF16)).unwrap()).unwrap();
    let slots = json["operands"][0]["slots"].as_array_mut().unwrap();
    let (r0, c0) = (slots[0][3].clone(), slots[0][4].clone());
    slots[0][3] = slots[1][3].clone();
    slots[0][4] = slots[1][4].clone();
    slots[1][3] = r0;
    slots[1][4] = c0;
    let other = dir.join("swapped.json");
    std::fs::write(&other, serde_json::to_string(&json).unwrap()).unwrap();
    let mut b = app(&Args {
        map: root().join(BF16),
        diff: Some(other),
        scale: None,
    })
    .unwrap();
    b.handle_key(KeyCode::Char('d'));
    let s = screen(&mut b);
    assert!(s.contains("diff vs swapped.json: 2 differ"), "{s}");
}

#[test]
fn help_and_quit() {
    let mut a = open(BF16, None, None);
    a.handle_key(KeyCode::Char('?'));
    assert!(screen(&mut a).contains("fp4probe view: keys"));
    a.handle_key(KeyCode::Char('x'));
    assert!(!a.help);
    a.handle_key(KeyCode::Char('q'));
    assert!(a.quit);
}
