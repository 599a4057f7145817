//! Embeds the CUDA sources under `kernels/` in the binary (see `src/kernels.rs`): writes
//! `$OUT_DIR/kernels.rs` with one `include_str!` per file, sorted by path, and a digest of the
//! whole tree that names its copy in the cache folder.

use std::hash::{Hash, Hasher};
use std::path::{Path, PathBuf};

fn files_under(dir: &Path, out: &mut Vec<PathBuf>) {
    let entries = std::fs::read_dir(dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display()));
    for entry in entries {
        let path = entry.expect("reading kernels/").path();
        if path.is_dir() {
            files_under(&path, out);
        } else {
            out.push(path);
        }
    }
}

fn main() {
    // A directory here makes cargo rerun this script when any file below it changes, is added
    // or is removed.
    println!("cargo:rerun-if-changed=kernels");
    let root = PathBuf::from(std::env::var_os("CARGO_MANIFEST_DIR").expect("set by cargo"));
    let kernels = root.join("kernels");
    let mut files = Vec::new();
    files_under(&kernels, &mut files);
    let mut named: Vec<(String, PathBuf)> = files
        .into_iter()
        .map(|p| {
            let rel = p.strip_prefix(&kernels).expect("under kernels/");
            let name = rel
                .components()
                .map(|c| c.as_os_str().to_str().expect("UTF-8 file name"))
                .collect::<Vec<_>>()
                .join("/");
            (name, p)
        })
        .collect();
    named.sort();
    // SipHash with fixed keys: the same tree gives the same digest in every build.
    let mut hasher = std::hash::DefaultHasher::new();
    let mut table = String::from("&[\n");
    for (name, path) in &named {
        let text = std::fs::read_to_string(path)
            .unwrap_or_else(|e| panic!("{}: {e} (kernels/ holds text only)", path.display()));
        (name, &text).hash(&mut hasher);
        table += &format!(
            "    ({name:?}, include_str!({:?})),\n",
            path.display().to_string()
        );
    }
    table += "]\n";
    let out = PathBuf::from(std::env::var_os("OUT_DIR").expect("set by cargo"));
    std::fs::write(out.join("kernel_files.rs"), table).expect("writing kernel_files.rs");
    std::fs::write(
        out.join("kernel_digest.rs"),
        format!("{:?}\n", format!("{:016x}", hasher.finish())),
    )
    .expect("writing kernel_digest.rs");
}
