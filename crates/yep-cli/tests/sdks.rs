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
    let target = tempfile::tempdir().unwrap();
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
            target.path().to_str().unwrap(),
            "sdk/python",
        ],
    );
    assert!(target.path().join("yep_sdk.py").is_file());
}
