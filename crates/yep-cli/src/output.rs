//! How the CLI reports: results to stdout, everything else to stderr, errors with their cause
//! chain and hints, exit codes by kind (1 user/config, 2 usage, 255 internal).
//!
//! Every line leaves through here with its control characters escaped
//! ([`yep_host::text`]): a package or a server cannot move the cursor, clear the screen or
//! retitle the terminal through anything yep prints. Where a server's words are one field
//! of a line (progress, a question), the caller escapes newlines too with `text::escape`.

use std::io::Write;
use std::process::ExitCode;
use yep_host::text::{escape_controls, escape_multiline};

/// `eprintln!` with the control characters of the whole line escaped.
macro_rules! eline {
    ($($arg:tt)*) => {
        $crate::output::stderr_line(&format!($($arg)*))
    };
}
pub(crate) use eline;

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
    let _ = writeln!(stderr, "error: {}", escape_multiline(&err.to_string()));
    for cause in err.chain().skip(1) {
        let _ = writeln!(
            stderr,
            "  caused by: {}",
            escape_multiline(&cause.to_string())
        );
    }
    if let Some(h) = err.downcast_ref::<Hinted>() {
        for hint in &h.hints {
            let _ = writeln!(stderr, "hint: {}", escape_multiline(hint));
        }
    }
    ExitCode::from(1)
}

/// Write a line to stdout; a closed pipe (`yep … | head`) ends quietly. JSON stays JSON: it
/// never holds a raw control character, so escaping leaves it alone.
pub fn stdout_line(line: &str) {
    let mut out = std::io::stdout().lock();
    if writeln!(out, "{}", escape_controls(line))
        .and_then(|()| out.flush())
        .is_err()
    {
        std::process::exit(0);
    }
}

/// Write a line to stderr, control characters escaped.
pub fn stderr_line(line: &str) {
    let _ = writeln!(std::io::stderr().lock(), "{}", escape_controls(line));
}

/// The tracing writer: stderr, with control characters in every event escaped (a server's
/// log line is an event), so `-v` output is as safe as the rest.
pub struct EscapingStderr;

impl Write for EscapingStderr {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let text = String::from_utf8_lossy(buf);
        std::io::stderr()
            .lock()
            .write_all(escape_controls(&text).as_bytes())?;
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        std::io::stderr().flush()
    }
}
