//! Why an extension call failed ([`ExtensionError`]), each error naming the extension, and how
//! a process's end is told in one.

use crate::capability::RemoteError;
use crate::dialect::HandshakeError;
use crate::rpc::CloseReason;
use std::path::PathBuf;
use std::time::Duration;

/// Why an extension call failed. Every variant names the extension.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ExtensionError {
    #[error(
        "extension `{extension}`: cannot spawn `{}`: {error} ({}); log: {}",
        crate::text::escape(command),
        fix.as_deref().unwrap_or("install it, or fix the manifest's command"),
        log_path.display()
    )]
    Spawn {
        extension: String,
        command: String,
        /// Printed in the message, so not chained as a source (a cause is told once).
        error: std::io::Error,
        /// How to write the command when it is a whole command line (`go run .`) that names
        /// no program (escaped).
        fix: Option<String>,
        log_path: PathBuf,
    },
    #[error(
        "extension `{extension}`: handshake failed: {error} (ran {ran}){}",
        report(Some(status), stderr_tail, log_path)
    )]
    Handshake {
        extension: String,
        /// Printed in the message, so not chained as a source (a cause is told once).
        error: HandshakeError,
        /// What ran, where, and in which language when the package says.
        ran: String,
        status: String,
        stderr_tail: Vec<String>,
        log_path: PathBuf,
    },
    #[error(
        "extension `{extension}` server stopped during `{method}`: {reason} ({status}){}",
        report(None, stderr_tail, log_path)
    )]
    Exited {
        extension: String,
        method: String,
        reason: CloseReason,
        status: String,
        stderr_tail: Vec<String>,
        log_path: PathBuf,
    },
    /// It ended on its own while the host expected it to run until shut down (doctor, a zot
    /// extension's registration run).
    #[error(
        "extension `{extension}` ended before the host shut it down: {reason} ({status}){}",
        report(None, stderr_tail, log_path)
    )]
    EndedEarly {
        extension: String,
        reason: CloseReason,
        status: String,
        stderr_tail: Vec<String>,
        log_path: PathBuf,
    },
    #[error("extension `{extension}`: `{method}` failed: {}", crate::text::escape(&error.message))]
    Remote {
        extension: String,
        method: String,
        error: RemoteError,
    },
    #[error("extension `{extension}`: `{method}` timed out after {} ms", after.as_millis())]
    Timeout {
        extension: String,
        method: String,
        after: Duration,
    },
    #[error("extension `{extension}`: `{method}` cancelled")]
    Cancelled { extension: String, method: String },
    #[error("extension `{extension}`: not restarting yet after {failures} failed starts; retry in {} ms", retry_in.as_millis())]
    BackingOff {
        extension: String,
        failures: u32,
        retry_in: Duration,
    },
    #[error(
        "extension `{extension}`: `{method}` answered a malformed result ({}): {}",
        crate::text::escape(message),
        crate::text::escape(preview)
    )]
    Malformed {
        extension: String,
        method: String,
        message: String,
        preview: String,
    },
    #[error("extension `{extension}`: invalid arguments for tool `{tool}`: {}", problems.join("; "))]
    InvalidArguments {
        extension: String,
        tool: String,
        /// One per problem, each naming the field and the rule (already escaped).
        problems: Vec<String>,
    },
    #[error(
        "extension `{extension}`: refusing tool `{tool}`: its argument schema in plugin.json is not valid JSON Schema: {message}"
    )]
    InvalidSchema {
        extension: String,
        tool: String,
        message: String,
    },
    #[error("extension `{extension}`: failed to write `{method}`: {message}")]
    Write {
        extension: String,
        method: String,
        message: String,
    },
    #[error("extension `{extension}`: the host shut this extension down")]
    ShutDown { extension: String },
}

impl ExtensionError {
    /// Whether this is the cancelled outcome of a call the caller cancelled.
    pub fn is_cancelled(&self) -> bool {
        matches!(self, ExtensionError::Cancelled { .. })
            || matches!(self, ExtensionError::Remote { error, .. } if error.is_cancelled())
    }

    /// The extension it is about.
    pub(crate) fn extension(&self) -> &str {
        match self {
            ExtensionError::Spawn { extension, .. }
            | ExtensionError::Handshake { extension, .. }
            | ExtensionError::Exited { extension, .. }
            | ExtensionError::EndedEarly { extension, .. }
            | ExtensionError::Remote { extension, .. }
            | ExtensionError::Timeout { extension, .. }
            | ExtensionError::Cancelled { extension, .. }
            | ExtensionError::BackingOff { extension, .. }
            | ExtensionError::Malformed { extension, .. }
            | ExtensionError::InvalidArguments { extension, .. }
            | ExtensionError::InvalidSchema { extension, .. }
            | ExtensionError::Write { extension, .. }
            | ExtensionError::ShutDown { extension } => extension,
        }
    }

    /// The server's stderr log, when the error is about a process that ran.
    pub(crate) fn log_path(&self) -> Option<&std::path::Path> {
        match self {
            ExtensionError::Handshake { log_path, .. }
            | ExtensionError::Exited { log_path, .. }
            | ExtensionError::EndedEarly { log_path, .. }
            | ExtensionError::Spawn { log_path, .. } => Some(log_path),
            _ => None,
        }
    }

    /// The server's own error, when it answered with one.
    pub fn remote(&self) -> Option<&RemoteError> {
        match self {
            ExtensionError::Remote { error, .. } => Some(error),
            _ => None,
        }
    }
}

pub(super) fn report(
    status: Option<&String>,
    tail: &[String],
    log_path: &std::path::Path,
) -> String {
    use std::fmt::Write;
    let mut out = String::new();
    if let Some(status) = status {
        let _ = write!(out, " ({status})");
    }
    let _ = write!(out, "; log: {}", log_path.display());
    if !tail.is_empty() {
        out.push_str("\nlast stderr lines:");
        for line in tail {
            let _ = write!(out, "\n  {}", crate::text::escape(line));
        }
    }
    out
}
