//! Helpers shared by the CLI's test files (each file uses some of them).
#![allow(dead_code)]

use std::path::Path;
use std::process::{Command, Output, Stdio};

/// Run the CLI in home `home` with `stdin` as its whole input.
#[allow(clippy::disallowed_methods)] // running the CLI under test
pub fn yep_with_stdin(home: &Path, args: &[&str], stdin: &str) -> Output {
    use std::io::Write;
    let mut child = Command::new(env!("CARGO_BIN_EXE_yep"))
        .args(args)
        .env("YEP_HOME", home)
        .env_remove("RUST_LOG")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(stdin.as_bytes())
        .unwrap();
    child.wait_with_output().unwrap()
}

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
