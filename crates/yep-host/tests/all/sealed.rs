//! The test process itself runs sealed: what a host in this process reads of `HOME`,
//! `TMPDIR` and the yep home is the test run's own, never the machine's.

use yep_test_support::Sealed;

#[test]
fn this_test_process_has_a_home_temp_dir_and_yep_home_of_its_own() {
    let sealed = Sealed::get();
    assert_eq!(
        std::env::var_os("HOME")
            .map(std::path::PathBuf::from)
            .as_deref(),
        Some(sealed.home())
    );
    assert!(std::env::temp_dir().starts_with(sealed.tmp()));
    let yep_home = yep_host::store::Home::resolve(None).root;
    assert!(
        yep_home.starts_with(sealed.home()),
        "{}",
        yep_home.display()
    );
    assert!(std::env::var_os("RUST_LOG").is_none());
    // Toolchains still run from a sealed home: where cargo keeps itself is the machine's.
    let cargo_home = std::env::var_os("CARGO_HOME").map(std::path::PathBuf::from);
    assert!(cargo_home.is_some_and(|d| d.is_dir()));
}
