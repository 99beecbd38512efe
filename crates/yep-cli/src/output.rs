//! How the CLI reports: results to stdout, everything else to stderr, errors with their cause
//! chain and hints, exit codes by kind (1 user/config, 2 usage, 255 internal).

use std::io::Write;
use std::process::ExitCode;

/// A user-facing failure with extra `hint:` lines.
#[derive(Debug)]
pub struct Hinted {
    pub message: String,
    pub hints: Vec<String>,
}

impl std::fmt::Display for Hinted {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for Hinted {}

pub fn hinted(message: impl Into<String>, hints: &[&str]) -> anyhow::Error {
    anyhow::Error::new(Hinted {
        message: message.into(),
        hints: hints.iter().map(|h| h.to_string()).collect(),
    })
}

/// Print the error and its causes to stderr; exit 1.
pub fn fail(err: &anyhow::Error) -> ExitCode {
    let mut stderr = std::io::stderr().lock();
    let _ = writeln!(stderr, "error: {err}");
    for cause in err.chain().skip(1) {
        let _ = writeln!(stderr, "  caused by: {cause}");
    }
    if let Some(h) = err.downcast_ref::<Hinted>() {
        for hint in &h.hints {
            let _ = writeln!(stderr, "hint: {hint}");
        }
    }
    ExitCode::from(1)
}

/// Write a line to stdout; a closed pipe (`yep … | head`) ends quietly.
pub fn stdout_line(line: &str) {
    let mut out = std::io::stdout().lock();
    if writeln!(out, "{line}").and_then(|()| out.flush()).is_err() {
        std::process::exit(0);
    }
}
