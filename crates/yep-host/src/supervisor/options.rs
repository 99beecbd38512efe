//! Supervision tuning ([`SupervisorOptions`]) and the [`Transport`] an embedder gives a server
//! that is not a child process.

use super::spec::ServerSpec;
use crate::dialect::{Dialect, Streams};
use std::sync::Arc;
use std::time::Duration;

/// Byte streams to a server that is not a child process (in memory, a socket): for embedders
/// and tests. The supervisor asks it instead of spawning the spec's command.
pub trait Transport: Send + Sync + 'static {
    fn open(&self, spec: &ServerSpec) -> std::io::Result<Streams>;
}

/// The streams of a server that has none (a Claude Code plugin, whose dialect runs short-lived
/// commands instead): nothing to read, nothing to write.
pub(crate) struct NoStreams;

impl Transport for NoStreams {
    fn open(&self, _: &ServerSpec) -> std::io::Result<Streams> {
        Ok(Streams::Other {
            reader: Box::new(tokio::io::empty()),
            writer: Box::new(tokio::io::sink()),
        })
    }
}

/// Supervision tuning.
#[derive(Clone)]
pub struct SupervisorOptions {
    /// The wire the server speaks.
    pub dialect: Arc<dyn Dialect>,
    /// Where the server's streams come from; `None` spawns the spec's command.
    pub transport: Option<Arc<dyn Transport>>,
    /// Per-request timeout (`request_timeout_ms`); tool progress resets it.
    pub request_timeout: Duration,
    /// How long `initialize` may take.
    pub handshake_timeout: Duration,
    /// Longest line accepted from the server.
    pub max_frame_bytes: usize,
    /// How long a stopping server gets to exit before SIGTERM.
    pub grace: Duration,
    /// How long after SIGTERM before SIGKILL.
    pub term_wait: Duration,
    /// First delay after a failed start or crash; doubles per failure up to `backoff_max`.
    pub backoff_base: Duration,
    pub backoff_max: Duration,
    /// How long a lone call busy-polls for its answer before sleeping (`YEP_SPIN_US`).
    pub spin: Duration,
    /// Sees every line on the wire (for `yep doctor`).
    pub tap: Option<crate::rpc::Tap>,
    /// A user is at an interactive UI (panels, questions): tools that wait on one may run.
    pub interactive_ui: bool,
    /// The OS sandbox a spawned server runs in ([`yep_sandbox`]).
    pub sandbox: yep_sandbox::Mode,
    /// Run it outside the sandbox under `strace`, to learn what it needs
    /// ([`yep_sandbox::learn`]; `yep doctor --sandbox-learn`).
    pub learn: Option<Arc<yep_sandbox::learn::Learning>>,
    /// Where what the sandbox and the egress proxy decided is recorded
    /// ([`crate::audit`]); `ExtensionHost::start` fills it from the home's settings.
    pub audit: Option<crate::audit::AuditLog>,
}

impl SupervisorOptions {
    /// The defaults, with the sandbox mode `home` asks for
    /// ([`crate::settings::sandbox_mode_or_required`]).
    pub fn for_home(home: &crate::store::Home) -> SupervisorOptions {
        SupervisorOptions {
            sandbox: crate::settings::sandbox_mode_or_required(home),
            ..SupervisorOptions::default()
        }
    }
}

impl Default for SupervisorOptions {
    fn default() -> Self {
        SupervisorOptions {
            dialect: crate::dialect::default_dialect(),
            transport: None,
            request_timeout: Duration::from_secs(60),
            handshake_timeout: Duration::from_secs(10),
            max_frame_bytes: crate::rpc::DEFAULT_MAX_FRAME_BYTES,
            // Longer than the SDK's own one-second drain at EOF, so a well-behaved server
            // always finishes before it is signalled.
            grace: Duration::from_secs(3),
            term_wait: Duration::from_secs(3),
            backoff_base: Duration::from_millis(250),
            backoff_max: Duration::from_secs(30),
            spin: crate::framing::spin_from_env(),
            tap: None,
            interactive_ui: false,
            sandbox: crate::settings::UNSET_MODE,
            learn: None,
            audit: None,
        }
    }
}
