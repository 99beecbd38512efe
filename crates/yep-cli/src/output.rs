//! How the CLI reports: results to stdout, everything else to stderr, errors with their cause
//! chain and hints, exit codes by kind (1 user/config, 2 usage, 255 internal).
//!
//! Every line leaves through here with its control characters escaped
//! ([`yep_store::text`]): a package or a server cannot move the cursor, clear the screen or
//! retitle the terminal through anything yep prints. Where a server's words are one field
//! of a line (progress, a question), the caller escapes newlines too with `text::escape`.

use std::io::Write;
use std::process::ExitCode;
use yep_store::text::{escape_controls, escape_multiline};

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

/// Whether a stream gets colour: only a terminal, and only while `NO_COLOR` is unset or empty
/// (<https://no-color.org>).
pub fn colour(is_terminal: bool) -> bool {
    is_terminal && std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty())
}

/// The colours yep paints its own words in.
#[derive(Clone, Copy)]
pub enum Colour {
    Green,
    Yellow,
    Red,
}

/// Write `lead` and `rest` as one line to stdout, `lead` in `colour` when stdout is a terminal
/// and `NO_COLOR` allows. Both are escaped first, so the only colour codes are ours.
pub fn stdout_line_painted(lead: &str, colour: Colour, rest: &str) {
    use std::io::IsTerminal;
    let lead = escape_controls(lead);
    let lead = if self::colour(std::io::stdout().is_terminal()) {
        let code = match colour {
            Colour::Green => "32",
            Colour::Yellow => "33",
            Colour::Red => "31",
        };
        format!("\x1b[{code}m{lead}\x1b[0m")
    } else {
        lead.into_owned()
    };
    let mut out = std::io::stdout().lock();
    if writeln!(out, "{lead}{}", escape_controls(rest))
        .and_then(|()| out.flush())
        .is_err()
    {
        std::process::exit(0);
    }
}
