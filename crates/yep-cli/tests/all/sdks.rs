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
fn the_python_sdk_installs_with_pip_alone_offline() {
    // A fresh venv has pip and nothing else we may rely on: no wheel, and setuptools removed.
    // The SDK's own standard-library backend builds it with build isolation and no index.
    let tmp = tempfile::tempdir().unwrap();
    let venv = tmp.path().join("venv");
    run("python3", &["-m", "venv", venv.to_str().unwrap()]);
    let python = venv.join("bin/python");
    let python = python.to_str().unwrap();
    run(
        python,
        &["-m", "pip", "uninstall", "--yes", "--quiet", "setuptools"],
    );
    #[allow(clippy::disallowed_methods)] // probing the venv's interpreter
    let probe = Command::new(python)
        .args(["-c", "import setuptools"])
        .output()
        .unwrap();
    assert!(
        !probe.status.success(),
        "the venv should have no setuptools"
    );
    let sdk = repo().join("sdk/python");
    run(
        python,
        &[
            "-m",
            "pip",
            "install",
            "--quiet",
            "--disable-pip-version-check",
            "--no-index",
            sdk.to_str().unwrap(),
        ],
    );
    run(
        python,
        &[
            "-c",
            "import yep_sdk, sys; assert 'site-packages' in yep_sdk.__file__, yep_sdk.__file__",
        ],
    );
    // Nothing is written next to the sources.
    for stray in ["build", "yep_sdk.egg-info"] {
        assert!(!sdk.join(stray).exists(), "{stray} left in sdk/python");
    }
}
