//! NVRTC for the compile-only tests: loaded, or the test is skipped with a note; on CI (CI set)
//! a missing NVRTC fails the test instead, since .ci/install-cuda-tools provides it there.

use fp4probe::codegen::nvrtc;

/// True when NVRTC loads (its version is printed); false, with a note, when it does not and
/// CI is unset.
pub fn nvrtc_or_skip(test: &str) -> bool {
    match nvrtc::load() {
        Ok(n) => {
            eprintln!("{test}: NVRTC {}.{} {:?}", n.version.0, n.version.1, n.path);
            true
        }
        Err(e) if std::env::var_os("CI").is_some() => {
            panic!(
                "{test}: CI is set but NVRTC cannot be loaded (run .ci/install-cuda-tools): {e:#}"
            )
        }
        Err(e) => {
            eprintln!("{test}: skipped: {e:#}");
            false
        }
    }
}
