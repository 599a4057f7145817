//! The real `fp4probe view` binary in a real terminal: tmux at 80×24, driven by send-keys,
//! its screen read back with capture-pane. Skipped (with a note) where tmux is missing.

use std::process::Command;
use std::thread::sleep;
use std::time::{Duration, Instant};

fn tmux(args: &[&str]) -> String {
    let o = Command::new("tmux").args(args).output().expect("tmux runs");
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn wait_for(session: &str, needle: &str) -> String {
    let start = Instant::now();
    loop {
        let screen = tmux(&["capture-pane", "-p", "-t", session]);
        if screen.contains(needle) || start.elapsed() > Duration::from_secs(10) {
            return screen;
        }
        sleep(Duration::from_millis(100));
    }
}

fn have_tmux() -> bool {
    if Command::new("tmux").arg("-V").output().is_ok() {
        return true;
    }
    eprintln!("skipped: tmux not found");
    false
}

const MAP: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/reports/sm_90/m16n8k16.f32.bf16.bf16.f32.json"
);

/// Start the viewer on MAP in a detached tmux session of 80×24; the shell prints its exit
/// status when it returns.
fn start(session: &str) {
    let cmd = format!(
        "{} view {MAP}; echo VIEWER-EXITED-$?; sleep 30",
        env!("CARGO_BIN_EXE_fp4probe")
    );
    tmux(&[
        "new-session",
        "-d",
        "-s",
        session,
        "-x",
        "80",
        "-y",
        "24",
        &cmd,
    ]);
}

/// Run `check` against a fresh viewer session; the session is killed whatever happens.
fn with_viewer(name: &str, check: impl FnOnce(&str) + std::panic::UnwindSafe) {
    if !have_tmux() {
        return;
    }
    let session = format!("fp4probe-view-{name}-{}", std::process::id());
    start(&session);
    let result = std::panic::catch_unwind(|| check(&session));
    tmux(&["kill-session", "-t", &session]);
    if let Err(e) = result {
        std::panic::resume_unwind(e);
    }
}

// Wait for the last line the first frame draws (the status line), not the title: on a loaded
// machine a capture can land between the two.
const FIRST_FRAME: &str = "A slot lane 0 r0.e0 -> (row 0, col 0)";

#[test]
fn viewer_in_tmux() {
    with_viewer("keys", |session| {
        let screen = wait_for(session, FIRST_FRAME);
        assert!(screen.contains(FIRST_FRAME), "{screen}");
        tmux(&["send-keys", "-t", session, "j", "l", "l", "l"]);
        let screen = wait_for(session, "(row 1, col 3)");
        assert!(
            screen.contains("A slot lane 5 r0.e1 -> (row 1, col 3)"),
            "{screen}"
        );
        tmux(&["send-keys", "-t", session, "2", "1", "Enter"]);
        assert!(wait_for(session, "lane 21 lit").contains("lane 21 lit"));
        tmux(&["send-keys", "-t", session, "D"]);
        assert!(wait_for(session, "D 16x8 f32").contains("D 16x8 f32"));
        tmux(&["send-keys", "-t", session, "d"]);
        assert!(wait_for(session, "diff vs documented: 0 differ").contains("0 differ"));
        tmux(&["send-keys", "-t", session, "q"]);
        let screen = wait_for(session, "VIEWER-EXITED-");
        assert!(
            screen.contains("VIEWER-EXITED-0"),
            "the viewer quits cleanly on q: {screen}"
        );
    });
}

#[test]
fn ctrl_c_and_esc_quit_the_viewer() {
    for (name, key) in [("ctrl-c", "C-c"), ("esc", "Escape")] {
        with_viewer(name, |session| {
            let screen = wait_for(session, FIRST_FRAME);
            assert!(screen.contains(FIRST_FRAME), "{screen}");
            tmux(&["send-keys", "-t", session, key]);
            let screen = wait_for(session, "VIEWER-EXITED-");
            assert!(
                screen.contains("VIEWER-EXITED-0"),
                "the viewer quits cleanly on {key}: {screen}"
            );
        });
    }
}
