//! The store's errors are typed (they name the file, the extension, the field), and print
//! each cause once.

use std::error::Error;
use yep_store::fetch::FetchError;
use yep_store::source::{SourceError, SourceSpec};
use yep_store::{AlwaysYes, Home, InstallOptions, StoreError, settings};

/// What the CLI prints: the message, then each cause.
fn chain(e: &dyn Error) -> String {
    let mut out = e.to_string();
    let mut next = e.source();
    while let Some(cause) = next {
        out.push_str("\n  caused by: ");
        out.push_str(&cause.to_string());
        next = cause.source();
    }
    out
}

#[test]
fn an_io_failure_prints_its_cause_once() {
    let store = StoreError::Io {
        context: "failed to create /x".into(),
        error: std::io::Error::other("disk on fire"),
    };
    let fetch = FetchError::Io {
        context: "failed to read x.crate".into(),
        error: std::io::Error::other("disk on fire"),
    };
    for shown in [chain(&store), chain(&StoreError::from(fetch))] {
        assert_eq!(shown.matches("disk on fire").count(), 1, "{shown}");
    }
    // A real one: settings.toml is a directory.
    let dir = tempfile::tempdir().unwrap();
    let home = Home {
        root: dir.path().to_path_buf(),
    };
    std::fs::create_dir_all(home.settings_path()).unwrap();
    let err = home.list().unwrap_err();
    let StoreError::Read { path, error } = &err else {
        panic!("{err:?}")
    };
    assert_eq!(path, &home.settings_path());
    let shown = chain(&err);
    assert_eq!(shown.matches(&error.to_string()).count(), 1, "{shown}");
    assert!(shown.starts_with("failed to read "), "{shown}");
}

#[test]
fn settings_failures_name_their_file_and_field() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("settings.toml");
    std::fs::write(&path, "[[capabilities]\n").unwrap();
    match settings::enabled(&path) {
        Err(StoreError::Parse { path: p, .. }) => assert_eq!(p, path),
        other => panic!("{other:?}"),
    }
    std::fs::write(&path, "").unwrap();
    let err =
        settings::set_config(&path, "w", "region", &serde_json::json!([1, null])).unwrap_err();
    assert!(
        matches!(&err, StoreError::NullValue { field } if field == "region"),
        "{err:?}"
    );
}

#[test]
fn a_bad_source_or_name_is_its_own_kind() {
    assert_eq!(
        SourceSpec::parse("--upload-pack=x"),
        Err(SourceError::Option("--upload-pack=x".into()))
    );
    let dir = tempfile::tempdir().unwrap();
    let home = Home {
        root: dir.path().join("home"),
    };
    let err = home
        .install("-x", &InstallOptions::default(), &mut AlwaysYes)
        .unwrap_err();
    assert!(
        matches!(err, StoreError::Source(SourceError::Option(_))),
        "{err:?}"
    );
    let err = home.remove("../up").unwrap_err();
    assert!(
        matches!(&err, StoreError::BadName(n) if n == "../up"),
        "{err:?}"
    );
    let err = home
        .install(
            dir.path().to_str().unwrap(),
            &InstallOptions::default(),
            &mut AlwaysYes,
        )
        .unwrap_err();
    assert!(matches!(err, StoreError::NoManifest { .. }), "{err:?}");
}
