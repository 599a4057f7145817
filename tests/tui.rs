//! Snapshot tests of the viewer on ratatui's test backend at 80×24, one per tab and for the
//! diff mode, plus key handling, and the real binary refusing to run without a terminal.
//! `UPDATE_SNAPSHOTS=1 cargo test --test tui` rewrites the snapshots.

mod common;
use common::{fp4probe, text, tmpdir};
use fp4probe::cli::view::{Args, app};
use fp4probe::movement::map::MatrixMap;
use fp4probe::tma::map::TmaMap;
use fp4probe::tui::{App, GridApp, GridModel, MoveApp, Tab, TmaApp, draw, no_terminal};
use ratatui::Terminal;
use ratatui::backend::TestBackend;
use ratatui::crossterm::event::{KeyCode, KeyEvent, KeyModifiers};
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
    render(|f| draw(f, app))
}

/// The 80×24 screen a viewer draws, one line a row, trailing blanks trimmed.
fn render(paint: impl FnOnce(&mut ratatui::Frame)) -> String {
    let mut t = Terminal::new(TestBackend::new(80, 24)).unwrap();
    t.draw(paint).unwrap();
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
    assert!(s.contains("A slot lane 5 r0.e1 -> (row 1, col 3)"), "{s}");
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
        s.contains("-> (row 0, col 40)") && s.contains("lane 13 lit"),
        "{s}"
    );
    snapshot("highlight_scrolled", &s);
    // Enter with no lane typed clears the highlight; Backspace takes back a typed digit.
    a.handle_key(KeyCode::Enter);
    assert_eq!(a.highlight, None);
    for k in [
        KeyCode::Char('4'),
        KeyCode::Backspace,
        KeyCode::Char('7'),
        KeyCode::Enter,
    ] {
        a.handle_key(k);
    }
    assert_eq!(a.highlight, Some(7));
    assert!(!a.quit);
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
    let dir = tmpdir("tui", "noscale");
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
    let dir = tmpdir("tui", "diff");
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
    // The cursor's cell is one of the two: the status line says what the other map has there.
    assert!(
        s.contains("A slot lane 0 r0.e0 -> (row 0, col 0) (swapped.json: lane 0 r0.e1)"),
        "{s}"
    );
}

#[test]
fn help_lists_the_keys() {
    let mut a = open(BF16, None, None);
    a.handle_key(KeyCode::Char('?'));
    let s = screen(&mut a);
    for key in [
        "fp4probe view: keys",
        "arrows / h j k l",
        "A slot lane 5 r0.e1 -> (row 1, col 3)",
        "Tab / Shift-Tab",
        "0-31 then Enter",
        "Backspace",
        " d ",
        "q, Esc, Ctrl-C     quit",
    ] {
        assert!(s.contains(key), "help lacks {key:?}:\n{s}");
    }
    a.handle_key(KeyCode::Char('x'));
    assert!(!a.help && !a.quit);
}

#[test]
fn q_esc_and_ctrl_c_quit() {
    let ctrl_c = KeyEvent::new(KeyCode::Char('c'), KeyModifiers::CONTROL);
    for (name, key) in [
        ("q", KeyEvent::from(KeyCode::Char('q'))),
        ("Esc", KeyEvent::from(KeyCode::Esc)),
        ("Ctrl-C", ctrl_c),
    ] {
        let mut a = open(BF16, None, None);
        a.handle_event(key);
        assert!(a.quit, "{name} does not quit");
        assert_eq!(a.tab, Tab::Operand(fp4probe::isa::Operand::A), "{name}");
        // Also with the help shown: it does not swallow the quit keys.
        let mut a = open(BF16, None, None);
        a.handle_key(KeyCode::Char('?'));
        a.handle_event(key);
        assert!(a.quit, "{name} does not quit from the help");
    }
    // A plain c is still the C tab.
    let mut a = open(BF16, None, None);
    a.handle_event(KeyEvent::from(KeyCode::Char('c')));
    assert!(!a.quit);
    assert_eq!(a.tab, Tab::Operand(fp4probe::isa::Operand::C));
}

#[test]
fn no_terminal_names_the_stream() {
    assert_eq!(no_terminal(true, true), None);
    for (stdin, stdout, says) in [
        (true, false, "standard output is not a terminal"),
        (false, true, "standard input is not a terminal"),
        (false, false, "neither standard input nor standard output"),
    ] {
        let why = no_terminal(stdin, stdout).expect("refused");
        assert!(why.contains(says) && why.contains("fp4probe show"), "{why}");
    }
}

#[test]
fn view_without_a_terminal_is_an_error_not_a_panic() {
    // `output()` pipes standard output and gives the child no standard input.
    let o = fp4probe(&["view", root().join(BF16).to_str().unwrap()]);
    let t = text(&o);
    assert_eq!(o.status.code(), Some(2), "{t}");
    assert!(
        t.contains("error: fp4probe view is interactive and needs a terminal, but neither standard input nor standard output is a terminal"),
        "{t}"
    );
    assert!(!t.contains("panicked"), "{t}");
    // A bad map is reported as such, before the terminal is looked at.
    let o = fp4probe(&["view", "/nonexistent/map.json"]);
    let t = text(&o);
    assert_eq!(o.status.code(), Some(2), "{t}");
    assert!(
        t.contains("/nonexistent/map.json") && !t.contains("terminal"),
        "{t}"
    );
}

const SPARSE: &str = "reports/sm_90/mma-sp/sp.m16n8k32.f32.f16.f16.f32.json";

fn grid_screen<M: GridModel>(app: &mut GridApp<M>) -> String {
    render(|f| app.draw(f))
}

#[test]
fn sparse_maps_have_a_metadata_tab_per_selector() {
    let mut a = open(SPARSE, None, None);
    let tabs: Vec<String> = (0..8)
        .map(|_| {
            a.handle_key(KeyCode::Tab);
            format!("{:?}", a.tab)
        })
        .collect();
    assert!(tabs.contains(&"Meta(0)".to_string()), "{tabs:?}");
    a.handle_key(KeyCode::Char('a'));
    assert_eq!(a.meta_describe(), None);
    a.handle_key(KeyCode::Char('m'));
    assert_eq!(a.tab, Tab::Meta(0));
    // Row 9 (the second half of group 1), chunk 1's second field: lane 4 (group 1), bits 16 +
    // 4 + 2 in the committed H200 map.
    for k in [KeyCode::Down; 9].into_iter().chain([KeyCode::Right; 3]) {
        a.handle_key(k);
    }
    let d = a.meta_describe().unwrap();
    assert_eq!(
        d,
        "M0 (row 9, chunk 1 = k 4..7, field 1 -> A col 3): lane 4 bits 22..23"
    );
    for k in ['4', '\n'] {
        a.handle_key(if k == '\n' {
            KeyCode::Enter
        } else {
            KeyCode::Char(k)
        });
    }
    assert_eq!(a.highlight, Some(4));
    let s = screen(&mut a);
    assert!(s.contains(" M0 ") && s.contains(&d), "{s}");
    assert!(
        s.contains("metadata, selector 0 | 2-bit fields | cell: lane | PASSED"),
        "{s}"
    );
    assert!(
        s.contains("lanes 0 1 4 5 8 9 12 13 16 17 20 21 24 25 28 29 | lane 4 lit"),
        "{s}"
    );
    // The cursor stays inside the grid.
    for _ in 0..40 {
        a.handle_key(KeyCode::End);
        a.handle_key(KeyCode::PageDown);
    }
    assert!(
        a.meta_describe()
            .unwrap()
            .starts_with("M0 (row 15, chunk 7")
    );
}

#[test]
fn data_movement_and_tma_maps_draw_with_their_status_line() {
    let map =
        MatrixMap::load(&root().join("reports/sm_90/ldmatrix/stmatrix.m8n8.x4.trans.b16.json"))
            .unwrap();
    let mut m = MoveApp::new(map);
    m.handle_key(KeyCode::PageDown);
    let s = grid_screen(&mut m);
    assert!(s.contains("stmatrix.m8n8.x4.trans.b16"), "{s}");
    assert!(
        s.contains("x4 8x8 b16 | 4 regs x 2 | cell: lane giving it | PASSED"),
        "{s}"
    );
    assert!(s.contains("matrix 2 (row 0, col 0): lane "), "{s}");
    assert!(s.contains("hardware: NVIDIA H200"), "{s}");
    m.handle_key(KeyCode::Char('?'));
    let s = grid_screen(&mut m);
    assert!(
        s.contains("0-31 then Enter    light up every cell of that lane"),
        "{s}"
    );
    let map = TmaMap::load(&root().join("reports/sm_90/tma/load.u8.64B.16x64.json")).unwrap();
    let mut t = TmaApp::new(map);
    t.handle_key(KeyCode::Down);
    let s = grid_screen(&mut t);
    assert!(
        s.contains("load 16x64 UINT8, swizzle 64B | cell: chunk | PASSED"),
        "{s}"
    );
    assert!(s.contains("(row 1, col 0) = global"), "{s}");
    assert!(s.contains("0-7+Enter chunk"), "{s}");
}

#[test]
fn view_opens_movement_and_tma_maps_and_refuses_diff_on_them() {
    for map in [
        "reports/sm_90/ldmatrix/movmatrix.m8n8.trans.b16.json",
        "reports/sm_90/tma/store.u16.128B.16x64.json",
        SPARSE,
    ] {
        let o = fp4probe(&["view", root().join(map).to_str().unwrap()]);
        let t = text(&o);
        assert_eq!(o.status.code(), Some(2), "{t}");
        assert!(t.contains("needs a terminal"), "{map}: {t}");
    }
    let o = fp4probe(&[
        "view",
        root()
            .join("reports/sm_90/tma/store.u16.128B.16x64.json")
            .to_str()
            .unwrap(),
        "--diff",
        root().join(BF16).to_str().unwrap(),
    ]);
    let t = text(&o);
    assert_eq!(o.status.code(), Some(2), "{t}");
    assert!(t.contains("not to TMA maps"), "{t}");
}
