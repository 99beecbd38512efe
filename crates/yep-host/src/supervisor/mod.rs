//! One extension's server, lifecycle only: spawned through [`crate::process`] on first use,
//! opened by its dialect, respawned after a crash with exponential backoff between failed
//! starts, stopped gracefully, and stopped when unused for a while if its host says so
//! ([`HostOptions::idle_stop`](crate::HostOptions::idle_stop)). What goes over the wire is the
//! dialect's ([`crate::dialect`]).
//!
//! Every error names the extension; process failures add the exit status, the last stderr
//! lines and the log file's path.

mod calls;
mod denied;
mod error;
mod extension;
mod options;
mod spec;
mod start;

pub use denied::DeniedCall;
pub use error::ExtensionError;
pub use extension::Extension;
pub(crate) use options::NoStreams;
pub use options::{SupervisorOptions, Transport};
pub use spec::ServerSpec;
