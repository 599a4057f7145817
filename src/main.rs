use clap::Parser;

fn main() -> std::process::ExitCode {
    restore_sigpipe();
    let cli = fp4probe::cli::Cli::parse();
    match fp4probe::cli::run(cli) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("error: {e:#}");
            std::process::ExitCode::from(2)
        }
    }
}

/// Rust starts programs with SIGPIPE ignored, so `fp4probe catalog | head` would panic on the
/// first write after `head` exits. A command-line tool should end quietly there, as `cat` does.
fn restore_sigpipe() {
    #[cfg(unix)]
    // SAFETY: called first thing in main, before any thread exists; SIG_DFL is a valid handler.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
    }
}
