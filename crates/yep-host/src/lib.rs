//! The library an agent embeds to run YEP extensions.
//!
//! Layers, bottom up:
//! - [`capability`]: the one capability model every wire is adapted to;
//! - [`rpc`]: a multiplexed, wire-neutral connection over any `AsyncRead`/`AsyncWrite` pair;
//! - [`process`]: spawning a server in its own process group, its stderr log, graceful stop;
//! - [`dialect`]: one module per wire (YEP today): handshake and calls as capabilities;
//! - [`supervisor`]: one extension's live server: lazy spawn, crash errors, backoff respawn;
//! - [`manifest`]: the `plugin.json` a user approves (re-exported from `yep_store`);
//! - [`tool_args`]: tool arguments checked against the manifest's schemas, compiled once;
//! - [`runtime`]: `ExtensionHost`, the one type an agent embeds;
//! - [`store`]: the home: install, lock, update, enable, remove, list (no async needed); the
//!   `yep_store` crate, re-exported.

pub mod capability;
pub mod dialect;
pub mod doctor;
pub mod error;
#[doc(hidden)]
pub mod fuzzing;
pub mod process;
pub mod rpc;
pub mod runtime;
pub mod supervisor;
pub mod tool_args;

/// Newline framing under a cap, and the busy-poll setting: shared with the SDK, and nothing of
/// YEP in it, so the wire-neutral layers read lines through this.
pub(crate) use yep_protocol::framing;
pub use yep_store as store;
pub use yep_store::{manifest, text};

pub use capability::{Events, NoEvents};
pub use manifest::Grants;
pub use manifest::Manifest;
pub use rpc::{CallError, CallOptions, CloseReason, UpdateSink};
pub use runtime::{
    ExtensionHost, HostError, HostOptions, MAX_HOOK_TIMEOUT_MS, PreDecision, Session,
    ToolDefinition,
};
pub use supervisor::{Extension, ExtensionError, ServerSpec, SupervisorOptions, Transport};
