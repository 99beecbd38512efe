//! The zot extension protocol v1 (its wire summed up in `docs/zot.md`) as a dialect: a zot
//! extension's frames ([`frames`]) adapted to the host's capability model.
//!
//! The handshake is the extension's: its `hello` is its first line (no deadline in zot; here
//! at least `HELLO_WAIT`, and `SLOW_START_HELLO_WAIT` for a launcher that builds or
//! fetches first), the host's `hello_ack` is the host's first frame, registrations
//! are taken whenever they come (before the ack, after it, after `ready`), and an extension
//! that never says `ready` is ready after `AUTO_READY_IDLE` without a frame, at most
//! `READY_WAIT` after its hello. Its registered tools and commands are the offer.

pub(crate) mod capture;
pub use capture::Capture;
pub mod frames;

mod codec;
mod handshake;
mod outbox;
mod peer;
mod router;

use super::{Dialect, HandshakeError, Hello, Peer, PeerFuture, Streams};
use crate::capability::Events;
use crate::rpc::ConnectionOptions;
use crate::store::zot::ZotPin;
pub(crate) use handshake::open;
pub use peer::Registrations;
use std::sync::Arc;
use std::time::Duration;

/// The least time an extension gets to say `hello` (zot waits for ever; a start that hangs
/// must end somewhere). `$YEP_ZOT_HELLO_WAIT_MS` sets it instead ([`HELLO_WAIT_ENV`]).
pub(crate) const HELLO_WAIT: Duration = Duration::from_secs(60);
/// The time an extension started by a launcher that builds or fetches first
/// ([`crate::launcher::slow_start`]: `go run .`, `npx -y tsx`) gets to say `hello`: a cold
/// build cache or a slow network takes minutes, and zot waits for ever.
pub(crate) const SLOW_START_HELLO_WAIT: Duration = crate::launcher::SLOW_START_WAIT;
/// How long such an extension is waited for before the user is told why (at most the
/// ordinary wait): a `yep_host::progress` info line.
pub(crate) const SLOW_START_NOTICE: Duration = crate::launcher::SLOW_START_NOTICE;
/// The variable that sets the ordinary hello wait, in milliseconds (the tests shorten it).
pub(crate) const HELLO_WAIT_ENV: &str = "YEP_ZOT_HELLO_WAIT_MS";
/// The `tracing` target of what the host says while a start takes long; the CLI shows it.
pub(crate) const PROGRESS_TARGET: &str = crate::launcher::PROGRESS_TARGET;
/// An extension that never says `ready` is ready once this passes without a frame.
pub(crate) const AUTO_READY_IDLE: Duration = Duration::from_millis(250);
/// The longest the host waits for `ready` after `hello`.
pub(crate) const READY_WAIT: Duration = Duration::from_secs(3);
/// The most tools, and the most commands, one extension may register; later ones are refused
/// with a diagnostic.
pub(crate) const MAX_REGISTRATIONS: usize = 256;
/// The longest a command may take to answer.
pub(crate) const COMMAND_DEADLINE: Duration = Duration::from_secs(30);
/// The longest a `call_tool` from an extension may run.
pub(crate) const CALL_TOOL_DEADLINE: Duration = Duration::from_secs(60);
/// The most tools in one `call_tool` chain, counting the original call.
pub(crate) const MAX_CHAIN: usize = 4;
/// The most `call_tool` requests one extension may have in flight.
pub(crate) const MAX_NESTED_CALLS: usize = 16;
/// The most frames queued for one extension, beyond the one being written.
pub(crate) const OUTBOX_FRAMES: usize = 256;
/// The most bytes queued for one extension.
pub(crate) const OUTBOX_BYTES: usize = 16 * 1024 * 1024;
/// The longest one write to an extension may block before it is disconnected.
pub(crate) const WRITE_BOUND: Duration = Duration::from_secs(5);
/// What the host says it is in `hello_ack.zot_version`.
pub(crate) const HOST_VERSION: &str = concat!("yep-", env!("CARGO_PKG_VERSION"));

/// The zot wire, for one extension: what it was approved to register beyond tools and
/// commands, when it was pinned at install (an author's work in progress is not).
#[derive(Default)]
pub struct Zot {
    pub(super) pin: Option<ZotPin>,
}

impl Zot {
    /// The wire for an extension pinned to `pin` (`None`: nothing pinned).
    pub fn pinned(pin: Option<ZotPin>) -> Zot {
        Zot { pin }
    }
}

impl Dialect for Zot {
    fn name(&self) -> &'static str {
        "zot"
    }

    fn command_key(&self) -> &'static str {
        "exec"
    }

    fn sandbox_learnable(&self) -> bool {
        false
    }

    fn workspace_files(&self) -> Option<&'static str> {
        Some(yep_sandbox::ZOT_FILES)
    }

    fn lossless_traces(&self) -> bool {
        self.pin.is_some()
    }

    fn intercepts(&self, point: &str) -> bool {
        self.pin.as_ref().is_some_and(|pin| pin.intercepts(point))
    }

    fn open(
        &self,
        streams: Streams,
        hello: Hello,
        events: Arc<dyn Events>,
        opts: ConnectionOptions,
    ) -> PeerFuture<'static, Result<Arc<dyn Peer>, HandshakeError>> {
        let pin = self.pin.clone();
        Box::pin(async move {
            let peer = open(streams, hello, pin, events, opts).await?;
            Ok(peer as Arc<dyn Peer>)
        })
    }
}
