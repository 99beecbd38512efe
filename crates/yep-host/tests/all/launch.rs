//! `runtime::launch::installed`, the one recipe for spawning an installed extension: its
//! failures are typed, name the extension, and chain their cause instead of repeating it.

use std::error::Error;
use yep_host::SupervisorOptions;
use yep_host::manifest::ManifestError;
use yep_host::runtime::launch::{self, LaunchError};
use yep_host::store::{AlwaysYes, Home, InstallOptions};

fn launch(home: &Home, name: &str) -> Result<launch::Launch, LaunchError> {
    launch::installed(
        home,
        name,
        std::env::temp_dir(),
        "test",
        &SupervisorOptions::default(),
    )
}

#[test]
fn a_name_that_is_not_installed_is_a_typed_error_naming_it() {
    let tmp = tempfile::tempdir().unwrap();
    let home = Home::resolve(Some(tmp.path().join("home")));
    let err = launch(&home, "ghost").err().expect("nothing is installed");
    assert!(
        matches!(&err, LaunchError::NotInstalled { extension } if extension == "ghost"),
        "{err:?}"
    );
    assert_eq!(err.to_string(), "extension `ghost` is not installed");
}

#[test]
fn a_broken_manifest_is_the_source_and_not_repeated_in_the_message() {
    let tmp = tempfile::tempdir().unwrap();
    let pkg = tmp.path().join("pkg");
    std::fs::create_dir_all(&pkg).unwrap();
    std::fs::write(
        pkg.join("plugin.json"),
        r#"{"name": "brittle", "version": "1.0.0", "description": "d", "yolop": {"capabilityServer": {"command": "x"}, "tools": [{"name": "t"}]}}"#,
    )
    .unwrap();
    let home = Home::resolve(Some(tmp.path().join("home")));
    home.install(
        pkg.to_str().unwrap(),
        &InstallOptions {
            link: true,
            ..InstallOptions::default()
        },
        &mut AlwaysYes,
    )
    .unwrap();
    assert!(launch(&home, "brittle").is_ok());
    std::fs::write(pkg.join("plugin.json"), "{ not json").unwrap();
    let err = launch(&home, "brittle")
        .err()
        .expect("the manifest is broken");
    assert!(matches!(&err, LaunchError::Manifest { .. }), "{err:?}");
    assert_eq!(err.extension(), "brittle");
    let source = err.source().expect("the manifest error is chained");
    assert!(source.downcast_ref::<ManifestError>().is_some());
    assert!(
        !err.to_string().contains(&source.to_string()),
        "{err} repeats {source}"
    );
    assert_eq!(
        yep_host::error::report(&err),
        format!("failed to load the manifest of extension `brittle`: {source}")
    );
}
