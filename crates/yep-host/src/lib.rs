//! The library an agent embeds to run YEP extensions.
//!
//! Layers, bottom up:
//! - [`rpc`]: a multiplexed connection over any `AsyncRead`/`AsyncWrite` pair;
//! - [`process`]: spawning a server in its own process group, its stderr log, graceful stop;
//! - [`dialect`]: the YEP handshake and typed calls over a connection;
//! - [`supervisor`]: one extension's live server: lazy spawn, crash errors, backoff respawn;
//! - [`manifest`]: the `plugin.json` a user approves;
//! - [`tool_args`]: tool arguments checked against the manifest's schemas, compiled once;
//! - [`runtime`]: `ExtensionHost`, the one type an agent embeds;
//! - [`store`]: the home: install, lock, update, enable, remove, list (no async needed).

pub mod dialect;
pub mod doctor;
pub mod error;
#[doc(hidden)]
pub mod fuzzing;
pub mod manifest;
pub mod process;
pub mod rpc;
pub mod runtime;
pub mod scaffold;
pub mod store;
pub mod supervisor;
pub mod text;
pub mod tool_args;

pub use dialect::yep::{Events, NoEvents};
pub use manifest::Manifest;
pub use rpc::{CallError, CallOptions, CloseReason, UpdateSink};
pub use runtime::{
    ExtensionHost, HostError, HostOptions, MAX_HOOK_TIMEOUT_MS, PreDecision, Session,
    ToolDefinition,
};
pub use supervisor::{Extension, ExtensionError, Grants, ServerSpec, SupervisorOptions};
