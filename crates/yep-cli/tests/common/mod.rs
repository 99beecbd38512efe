//! Helpers shared by the CLI's test files.

use std::process::{Command, Stdio};

/// Run `inner` under `sh` on a pseudo-terminal (util-linux `script`); what the terminal showed.
pub fn on_a_pty(inner: &str) -> String {
    #[allow(clippy::disallowed_methods)] // util-linux `script`, to run the CLI on a pty
    let out = Command::new("script")
        .args(["-qec", inner, "/dev/null"])
        .env_remove("NO_COLOR")
        .env_remove("RUST_LOG")
        .stdin(Stdio::null())
        .output()
        .expect("util-linux `script` runs the CLI on a pseudo-terminal");
    String::from_utf8_lossy(&out.stdout).into_owned()
}
