//! Without its `fetch` feature the store still installs from directories (and git) and manages
//! the home; a source that needs a download fails saying so, and leaves nothing behind.
//! Runs only in that build: `cargo test -p yep-store --no-default-features --test without_fetch`
//! (in `.ci/run`).
#![cfg(not(feature = "fetch"))]

// The HOME, TMPDIR and yep home of this test process are its own (yep-test-support).
yep_test_support::seal_this_test_binary!();

use yep_store::{AlwaysYes, Home, InstallOptions};

fn home(dir: &tempfile::TempDir) -> Home {
    Home {
        root: dir.path().join("home"),
    }
}

#[test]
fn a_crates_io_source_fails_naming_the_missing_fetch_feature() {
    let dir = tempfile::tempdir().unwrap();
    let home = home(&dir);
    for spec in ["crates.io:yep-extension-x@1.0.0", "x"] {
        let err = home
            .install(spec, &InstallOptions::default(), &mut AlwaysYes)
            .unwrap_err()
            .to_string();
        assert!(
            err.starts_with("cannot fetch crate `yep-extension-x`")
                && err.contains("this build of yep-store has no `fetch` feature"),
            "{spec}: {err}"
        );
    }
    assert!(home.list().unwrap().is_empty());
}

#[test]
fn a_directory_installs_and_enables_and_a_prebuilt_binary_is_a_note() {
    let dir = tempfile::tempdir().unwrap();
    let package = dir.path().join("pkg");
    std::fs::create_dir_all(&package).unwrap();
    let manifest = serde_json::json!({
        "name": "local",
        "version": "0.1.0",
        "description": "test package",
        "yolop": {"tools": [{"name": "lookup"}], "capabilityServer": {
            "command": "yep-no-such-server",
            "binaries": "https://example.invalid/{name}-{version}-{target}.tar.gz"
        }}
    });
    std::fs::write(package.join("plugin.json"), manifest.to_string()).unwrap();
    let home = home(&dir);
    let installed = home
        .install(
            &package.display().to_string(),
            &InstallOptions::default(),
            &mut AlwaysYes,
        )
        .unwrap();
    let note = installed.binary.unwrap_or_default();
    assert!(
        note.contains("has no `fetch` feature") && note.contains("yep-no-such-server"),
        "{note}"
    );
    assert!(home.set_enabled("local", true).unwrap());
    let listed = home.list().unwrap();
    assert_eq!(listed.len(), 1);
    assert!(listed[0].enabled);
}
