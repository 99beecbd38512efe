//! A runtime-only embedder (`default-features = false`) gets no HTTP, TLS, tar or progress-bar
//! crates: the store's downloads sit behind the `fetch` feature. Read from `cargo tree`, which
//! resolves from Cargo.lock without building or touching the network.

use std::collections::BTreeSet;
use std::path::Path;

/// The crates the store needs only to download and unpack, and the CLI's progress bars.
const FETCH_ONLY: &[&str] = &["ureq", "rustls", "tar", "flate2", "indicatif"];

/// The distinct crates in yep-host's normal dependency tree.
fn tree(extra: &[&str]) -> BTreeSet<String> {
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| env!("CARGO").into());
    let manifest = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../Cargo.toml");
    #[allow(clippy::disallowed_methods)] // cargo itself, run to completion: not a server
    let out = std::process::Command::new(cargo)
        .args(["tree", "--offline", "--manifest-path"])
        .arg(&manifest)
        .args(["-p", "yep-host", "-e", "normal", "--prefix", "none"])
        .args(extra)
        .output()
        .expect("run cargo tree");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "cargo tree {extra:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    stdout
        .lines()
        .filter_map(|line| line.split_whitespace().next())
        .map(str::to_string)
        .collect()
}

#[test]
fn a_runtime_only_build_has_no_http_tls_tar_or_progress_bars() {
    let lean = tree(&["--no-default-features"]);
    for needed in ["yep-store", "jsonschema", "tokio"] {
        assert!(lean.contains(needed), "{needed} missing from {lean:?}");
    }
    let present: Vec<_> = FETCH_ONLY.iter().filter(|c| lean.contains(**c)).collect();
    assert!(
        present.is_empty(),
        "yep-host --no-default-features depends on {present:?}"
    );
    // The default build has them: the check above reads the tree it means to.
    let full = tree(&[]);
    for fetch in ["ureq", "tar", "flate2"] {
        assert!(full.contains(fetch), "{fetch} missing from {full:?}");
    }
    assert!(full.len() > lean.len());
}
