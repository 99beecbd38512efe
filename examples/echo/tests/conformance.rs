//! The Rust SDK's echo server passes every YEP server-side transcript of the conformance corpus
//! (`conformance/yep/server/`), replayed by the corpus's own runner, `conformance/run.py`.

use std::path::PathBuf;
use std::process::Command;

#[test]
fn the_echo_server_passes_the_yep_server_corpus() {
    let repo = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..");
    #[allow(clippy::disallowed_methods)] // the corpus's runner, which spawns the binary under test
    let out = Command::new("python3")
        .arg(repo.join("conformance/run.py"))
        .arg("server")
        .arg(repo.join("conformance/yep/server"))
        .arg("--")
        .arg(env!("CARGO_BIN_EXE_yep-example-echo"))
        .output()
        .expect("python3 runs conformance/run.py");
    let report = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{report}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(report.contains("14 passed, 0 failed"), "{report}");
}
