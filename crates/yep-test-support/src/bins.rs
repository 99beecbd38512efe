//! The binaries cargo built for the tests (the workspace's examples, fixtures and benches'
//! servers), found beside the running test binary.

use std::path::PathBuf;

/// `target/<profile>`, found from the running test binary (`target/<profile>/deps/<test>`).
pub fn target_dir() -> PathBuf {
    let exe = std::env::current_exe().expect("the test binary's path");
    exe.parent()
        .and_then(|deps| deps.parent())
        .expect("a test binary lives in target/<profile>/deps")
        .to_path_buf()
}

/// `path`, which must exist: else the test says how to build it.
pub fn built(path: PathBuf, how: &str) -> String {
    assert!(
        path.is_file(),
        "{} is missing; build it first: {how} (or run `cargo test --workspace`)",
        path.display()
    );
    path.to_string_lossy().into_owned()
}

/// The workspace binary `name` (`yep-example-echo`, `yep-fixture`, …), built.
pub fn bin(name: &str) -> String {
    built(
        target_dir().join(name),
        &format!("cargo build --workspace --bins ({name})"),
    )
}
