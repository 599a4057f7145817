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

#[test]
fn viewer_in_tmux() {
    if Command::new("tmux").arg("-V").output().is_err() {
        eprintln!("skipped: tmux not found");
        return;
    }
    let session = format!("fp4probe-view-{}", std::process::id());
    let map = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/reports/sm_90/m16n8k16.f32.bf16.bf16.f32.json"
    );
    let cmd = format!(
        "{} view {map}; echo VIEWER-EXITED-$?; sleep 30",
        env!("CARGO_BIN_EXE_fp4probe")
    );
    tmux(&[
        "new-session",
        "-d",
        "-s",
        &session,
        "-x",
        "80",
        "-y",
        "24",
        &cmd,
    ]);
    // Wait for the last line the first frame draws (the status line), not the title: on a
    // loaded machine a capture can land between the two.
    let screen = wait_for(&session, "(0,0) = lane 0 reg 0 elem 0");
    let result = std::panic::catch_unwind(|| {
        assert!(screen.contains("(0,0) = lane 0 reg 0 elem 0"), "{screen}");
        tmux(&["send-keys", "-t", &session, "j", "l", "l", "l"]);
        let screen = wait_for(&session, "(1,3) = lane 5");
        assert!(screen.contains("(1,3) = lane 5 reg 0 elem 1"), "{screen}");
        tmux(&["send-keys", "-t", &session, "2", "1", "Enter"]);
        assert!(wait_for(&session, "lane 21 lit").contains("lane 21 lit"));
        tmux(&["send-keys", "-t", &session, "D"]);
        assert!(wait_for(&session, "D 16x8 f32").contains("D 16x8 f32"));
        tmux(&["send-keys", "-t", &session, "d"]);
        assert!(wait_for(&session, "diff vs documented: 0 differ").contains("0 differ"));
        tmux(&["send-keys", "-t", &session, "q"]);
        let screen = wait_for(&session, "VIEWER-EXITED-");
        assert!(
            screen.contains("VIEWER-EXITED-0"),
            "the viewer quits cleanly on q: {screen}"
        );
    });
    tmux(&["kill-session", "-t", &session]);
    if let Err(e) = result {
        std::panic::resume_unwind(e);
    }
}
