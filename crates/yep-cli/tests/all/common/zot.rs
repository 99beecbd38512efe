//! zot's own examples (`../shared/interop/zot`, or `$YEP_ZOT_INTEROP`), copied and built as the
//! corpus's README says.

use super::text;
use std::path::{Path, PathBuf};

/// zot's own examples (`../shared/interop/zot`, or `$YEP_ZOT_INTEROP`), copied to `dir` with
/// its files writable and the `go.mod` the corpus's README says a copy needs.
pub fn zot_corpus(dir: &Path) -> PathBuf {
    let from = std::env::var_os("YEP_ZOT_INTEROP")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../shared/interop/zot")
        });
    assert!(
        from.join("examples/extensions").is_dir(),
        "zot's examples are not at {} (set YEP_ZOT_INTEROP to a checkout)",
        from.display()
    );
    let root = dir.join("zot");
    super::copy_tree(&from, &root);
    std::fs::write(
        root.join("go.mod"),
        "module github.com/patriceckhart/zot\n\ngo 1.19\n",
    )
    .unwrap();
    root
}

/// `go` with `args` in `dir`, offline; panics naming the prerequisite when Go is missing.
#[allow(clippy::disallowed_methods)] // building the corpus, not running yep
fn go(dir: &Path, args: &[&str]) {
    let out = std::process::Command::new("go")
        .args(args)
        .current_dir(dir)
        .env("GOFLAGS", "-mod=mod")
        .env("GOPROXY", "off")
        .output()
        .unwrap_or_else(|e| panic!("go {args:?}: {e} (install Go: apt-get install golang-go)"));
    assert!(out.status.success(), "go {args:?}: {}", text(&out.stderr));
}

/// The example `name` of the corpus at `root`, built where its manifest's `exec` expects it.
fn build(root: &Path, name: &str) {
    let out = root.join("examples/extensions").join(name).join(name);
    go(
        root,
        &[
            "build",
            "-o",
            out.to_str().unwrap(),
            &format!("./examples/extensions/{name}"),
        ],
    );
}

/// [`zot_corpus`] with `hello`, `weather` and `guard` built where their manifests' `exec`
/// expects them, and `todo`'s module (which `go run .` builds) pointed at the copy: the one
/// edit the corpus's README says any example needs.
pub fn built_zot_corpus(dir: &Path) -> PathBuf {
    let root = zot_corpus(dir);
    let examples = root.join("examples/extensions");
    for built in ["hello", "weather", "guard"] {
        build(&root, built);
    }
    let replace = format!("github.com/patriceckhart/zot={}", root.display());
    go(
        &examples.join("todo"),
        &["mod", "edit", "-replace", &replace],
    );
    root
}

/// The example `name` alone, built in a [`zot_corpus`] copy in `dir`: its directory, ready to
/// install.
pub fn built_zot_example(dir: &Path, name: &str) -> PathBuf {
    let root = zot_corpus(dir);
    build(&root, name);
    root.join("examples/extensions").join(name)
}
