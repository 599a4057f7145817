//! Helpers shared by the tests that drive the real binary.

// Every test crate that declares `mod common` compiles this file and uses part of it.
#![allow(dead_code)]

use std::ffi::OsStr;
use std::ops::Deref;
use std::path::Path;
use std::process::{Command, Output};

/// Run the fp4probe binary built for these tests.
pub fn fp4probe(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_fp4probe"))
        .args(args)
        .output()
        .expect("binary runs")
}

/// A fresh, empty scratch folder for one test, named `fp4probe-<prefix>-<name>-<random>` in the
/// system's temporary folder. It is removed with everything in it when the returned guard
/// drops: at the end of the test, and also when the test fails (the panic unwinds through the
/// guard), so a test run leaves nothing behind. Keep the guard alive as long as the folder is
/// used; it dereferences to the folder's path.
pub fn tmpdir(prefix: &str, name: &str) -> Scratch {
    Scratch(
        tempfile::Builder::new()
            .prefix(&format!("fp4probe-{prefix}-{name}-"))
            .tempdir()
            .expect("a scratch folder in the temporary folder"),
    )
}

/// A scratch folder that removes itself on drop (see [`tmpdir`]).
pub struct Scratch(tempfile::TempDir);

impl Deref for Scratch {
    type Target = Path;
    fn deref(&self) -> &Path {
        self.0.path()
    }
}

impl AsRef<Path> for Scratch {
    fn as_ref(&self) -> &Path {
        self.0.path()
    }
}

// For `Command::arg(&dir)`.
impl AsRef<OsStr> for Scratch {
    fn as_ref(&self) -> &OsStr {
        self.0.path().as_os_str()
    }
}

/// Standard output and standard error together.
pub fn text(o: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

/// Assert a run succeeded, showing its output when it did not.
pub fn ok(o: &Output) {
    assert!(o.status.success(), "{}", text(o));
}

/// Assert a run was refused: exit status 2 and `error: ...` containing `want` on stderr.
pub fn refused_output(o: &Output, want: &str) {
    let t = text(o);
    assert_eq!(o.status.code(), Some(2), "{t}");
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("error: ") && err.contains(want),
        "want {want:?} in:\n{t}"
    );
}

/// Run fp4probe with `args` and assert it refused them: exit code 2 and `want` in its output.
pub fn refused(args: &[&str], want: &str) {
    let o = fp4probe(args);
    let t = text(&o);
    assert_eq!(o.status.code(), Some(2), "{args:?}: {t}");
    assert!(t.contains(want), "{args:?}: expected {want:?} in: {t}");
}

/// Tags balance (a tiny XML checker: declarations, comments and CDATA skipped, attribute values
/// quoted), and the document is one `<svg>` element.
pub fn check_well_formed(svg: &str) {
    let mut stack: Vec<String> = Vec::new();
    let mut rest = svg;
    let mut roots = 0;
    while let Some(i) = rest.find('<') {
        rest = &rest[i..];
        let skip = [("<?", "?>"), ("<!--", "-->"), ("<![CDATA[", "]]>")]
            .into_iter()
            .find(|(open, _)| rest.starts_with(open));
        if let Some((_, close)) = skip {
            let end = rest.find(close).expect("unterminated declaration") + close.len();
            rest = &rest[end..];
            continue;
        }
        let end = rest.find('>').expect("unterminated tag");
        let tag = &rest[1..end];
        assert_eq!(
            tag.matches('"').count() % 2,
            0,
            "unbalanced quotes in <{tag}>"
        );
        assert!(!tag.contains('<'), "'<' inside <{tag}>");
        if let Some(name) = tag.strip_prefix('/') {
            let open = stack
                .pop()
                .unwrap_or_else(|| panic!("</{name}> closes nothing"));
            assert_eq!(open, name, "</{name}> closes <{open}>");
        } else {
            let name = tag
                .split(|c: char| c.is_whitespace() || c == '/')
                .next()
                .unwrap()
                .to_string();
            if stack.is_empty() {
                roots += 1;
                assert_eq!(name, "svg", "root element");
            }
            if !tag.ends_with('/') {
                stack.push(name);
            }
        }
        rest = &rest[end + 1..];
    }
    assert!(stack.is_empty(), "unclosed: {stack:?}");
    assert_eq!(roots, 1);
    // Text outside tags holds no bare '&' or '>' ('&' only as an entity).
    for (i, _) in svg.match_indices('&') {
        let ent = &svg[i..(i + 6).min(svg.len())];
        assert!(
            ["&amp;", "&lt;", "&gt;", "&quot;"]
                .iter()
                .any(|e| ent.starts_with(e)),
            "bare & at {i}: {ent}"
        );
    }
}

/// `f` over `items` on 2 to 8 threads (each item runs ptxas or the like as a subprocess),
/// results in the items' order.
pub fn par_map<T: Sync, R: Send>(items: &[T], f: impl Fn(&T) -> R + Sync) -> Vec<R> {
    use rayon::prelude::*;
    let threads = std::thread::available_parallelism()
        .map_or(2, |n| n.get())
        .clamp(2, 8);
    rayon::ThreadPoolBuilder::new()
        .num_threads(threads)
        .build()
        .expect("test threads start")
        .install(|| items.par_iter().map(&f).collect())
}

/// Whether ptxas is here; panics under CI when it is not. `quoted` is the ptxas version whose
/// messages `quoted_in` records.
pub fn have_ptxas(quoted: &str, quoted_in: &str) -> bool {
    use fp4probe::tools;
    if let Some(p) = tools::find_tool("ptxas") {
        let version = tools::ptxas_version().unwrap_or_else(|| "unknown version".into());
        println!("ptxas {version}: {}", p.display());
        if version != quoted {
            println!(
                "note: {quoted_in} quotes ptxas {quoted}; this one may word its messages \
                 differently"
            );
        }
        return true;
    }
    if std::env::var_os("CI").is_some_and(|v| !v.is_empty()) {
        panic!(
            "ptxas not found under CI: run .ci/install-cuda-tools before the tests (it installs \
             the pinned nvidia-cuda-nvcc/cuobjdump/nvdisasm wheels into .tools/), or point \
             FP4PROBE_CUDA_BIN at a CUDA bin directory. Searched: {:?}",
            tools::search_dirs()
        );
    }
    println!("skipped: ptxas not found (run .ci/install-cuda-tools)");
    false
}
