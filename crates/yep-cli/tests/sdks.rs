//! The Python and TypeScript SDKs' own suites (drift guards against `schema/yep/v1/meta.json`
//! and behaviour over real pipes), run as part of `cargo test --workspace`.

use std::path::PathBuf;
use std::process::Command;

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

#[allow(clippy::disallowed_methods)] // the SDK suites run under their own runtimes
fn run(program: &str, args: &[&str]) {
    let out = Command::new(program)
        .args(args)
        .current_dir(repo())
        .output()
        .unwrap_or_else(|e| panic!("cannot run {program}: {e}"));
    assert!(
        out.status.success(),
        "{program} {args:?} failed:\n{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn the_python_sdk_suite_passes() {
    run(
        "python3",
        &["-m", "unittest", "discover", "-s", "sdk/python/tests"],
    );
}

#[test]
fn the_typescript_sdk_suite_passes() {
    run("node", &["--test", "sdk/typescript/test/"]);
}

#[test]
fn the_python_sdk_installs_with_pip() {
    // Build from a copy: setuptools writes build/ and *.egg-info next to the sources.
    let tmp = tempfile::tempdir().unwrap();
    let src = tmp.path().join("src");
    std::fs::create_dir_all(&src).unwrap();
    for file in ["pyproject.toml", "README.md", "yep_sdk.py"] {
        std::fs::copy(repo().join("sdk/python").join(file), src.join(file)).unwrap();
    }
    let target = tmp.path().join("site");
    run(
        "python3",
        &[
            "-m",
            "pip",
            "install",
            "--quiet",
            "--no-deps",
            "--no-index",
            "--no-build-isolation",
            "--target",
            target.to_str().unwrap(),
            src.to_str().unwrap(),
        ],
    );
    assert!(target.join("yep_sdk.py").is_file());
}
