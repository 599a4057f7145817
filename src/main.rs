use clap::Parser;

fn main() -> std::process::ExitCode {
    let cli = fp4probe::cli::Cli::parse();
    match fp4probe::cli::run(cli) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("error: {e:#}");
            std::process::ExitCode::from(2)
        }
    }
}
