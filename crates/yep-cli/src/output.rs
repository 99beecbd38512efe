//! How the CLI reports: results to stdout, everything else to stderr, errors with their cause
//! chain (each cause once) and hints, exit codes by kind (1 user/config, 2 usage, 255
//! internal; clap's own usage errors exit 2 too; a closed stdout pipe ends quietly with 0).
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

/// The command line itself was wrong (beyond what clap checks): exit 2.
#[derive(Debug, thiserror::Error)]
#[error("{message}")]
pub struct Usage {
    pub message: String,
    #[source]
    pub source: Option<Box<dyn std::error::Error + Send + Sync>>,
}

pub fn usage(
    message: impl Into<String>,
    source: impl Into<Box<dyn std::error::Error + Send + Sync>>,
) -> anyhow::Error {
    anyhow::Error::new(Usage {
        message: message.into(),
        source: Some(source.into()),
    })
}

/// yep could not do its job for a reason that is neither the user's input nor their home
/// (a write to stdout failed, the async runtime would not start): exit 255.
#[derive(Debug, thiserror::Error)]
#[error("{message}")]
pub struct Internal {
    pub message: String,
    #[source]
    pub source: Option<Box<dyn std::error::Error + Send + Sync>>,
}

pub fn internal(
    message: impl Into<String>,
    source: impl Into<Box<dyn std::error::Error + Send + Sync>>,
) -> anyhow::Error {
    anyhow::Error::new(Internal {
        message: message.into(),
        source: Some(source.into()),
    })
}

/// What kind of failure an error is, by the exit code it maps to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// 1: the user's input, their home or an extension failed (the default).
    User,
    /// 2: the command line was wrong.
    Usage,
    /// 255: yep itself could not go on.
    Internal,
}

impl Kind {
    pub fn of(err: &anyhow::Error) -> Kind {
        for cause in err.chain() {
            if cause.is::<Usage>() {
                return Kind::Usage;
            }
            if cause.is::<Internal>() {
                return Kind::Internal;
            }
        }
        Kind::User
    }

    pub fn exit_code(self) -> ExitCode {
        ExitCode::from(match self {
            Kind::User => 1,
            Kind::Usage => 2,
            Kind::Internal => 255,
        })
    }
}

/// How a zot extension its manifest turns off is turned on: as `zot ext enable` does it, in
/// the manifest.
fn zot_off(name: &str) -> String {
    format!(
        "set \"enabled\": true in its extension.json (or take the key out), then `yep update {name}` runs it and asks"
    )
}

/// The next steps for an error, by what went wrong: its own hints, then those its kind has.
pub fn hints(err: &anyhow::Error) -> Vec<String> {
    use yep_host::ExtensionError;
    use yep_host::runtime::launch::LaunchError;
    use yep_host::store::StoreError;
    let mut out = Vec::new();
    for cause in err.chain() {
        if let Some(h) = cause.downcast_ref::<Hinted>() {
            out.extend(h.hints.iter().cloned());
        }
        match cause.downcast_ref::<StoreError>() {
            Some(StoreError::NotInstalled(..)) => out.push(NOT_INSTALLED.into()),
            Some(StoreError::ZotDisabled { name }) => out.push(zot_off(name)),
            _ => {}
        }
        if let Some(e) = cause.downcast_ref::<LaunchError>() {
            let name = e.extension();
            match e {
                LaunchError::NotInstalled { .. } => out.push(NOT_INSTALLED.into()),
                LaunchError::Drifted { .. } => out.push(format!(
                    "`yep update {name}` reviews the change; `yep update --locked {name}` restores what was approved"
                )),
                LaunchError::ZotDisabled { .. } => {
                    out.push(zot_off(name));
                    out.push(format!("`yep disable {name}` stops trying to start it"));
                }
                LaunchError::InvalidConfig { .. } => out.push(format!(
                    "`yep config show {name}` shows it; `yep config set {name} <field> <value>` changes a field"
                )),
                _ => {}
            }
        }
        if let Some(e) = cause.downcast_ref::<ExtensionError>() {
            match e {
                ExtensionError::Exited { extension, .. }
                | ExtensionError::EndedEarly { extension, .. }
                | ExtensionError::Handshake { extension, .. } => out.push(format!(
                    "`yep logs {extension}` shows what the server wrote to stderr"
                )),
                ExtensionError::BackingOff {
                    extension,
                    retry_in,
                    ..
                } => out.push(format!(
                    "retry in {} ms; `yep logs {extension}` shows why it failed to start",
                    retry_in.as_millis().max(1)
                )),
                _ => {}
            }
        }
    }
    out.dedup();
    out
}

const NOT_INSTALLED: &str =
    "`yep list` shows what is installed; `yep install <dir | name>` installs a package";

/// Print the error, each of its causes once, and its hints to stderr; exit by its kind
/// (1 user/config, 2 usage, 255 internal).
pub fn fail(err: &anyhow::Error) -> ExitCode {
    let mut stderr = std::io::stderr().lock();
    let mut lines = yep_host::error::causes(err.as_ref()).into_iter();
    if let Some(top) = lines.next() {
        let _ = writeln!(stderr, "error: {}", escape_multiline(&top));
    }
    for cause in lines {
        let _ = writeln!(stderr, "  caused by: {}", escape_multiline(&cause));
    }
    for hint in hints(err) {
        let _ = writeln!(stderr, "hint: {}", escape_multiline(&hint));
    }
    Kind::of(err).exit_code()
}

/// Write a line to stdout; a closed pipe (`yep … | head`) ends quietly. JSON stays JSON: it
/// never holds a raw control character, so escaping leaves it alone.
pub fn stdout_line(line: &str) {
    let mut out = std::io::stdout().lock();
    let written = writeln!(out, "{}", escape_controls(line)).and_then(|()| out.flush());
    drop(out);
    stdout_written(written);
}

/// After a write to stdout: a closed pipe ends quietly (exit 0); any other failure (a full
/// disk) is an internal error (exit 255), never a silent success.
pub fn stdout_written(written: std::io::Result<()>) {
    match written {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => std::process::exit(0),
        Err(e) => {
            let _ = fail(&internal("failed to write to stdout", e));
            std::process::exit(255);
        }
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
    let written = writeln!(out, "{lead}{}", escape_controls(rest)).and_then(|()| out.flush());
    drop(out);
    stdout_written(written);
}
