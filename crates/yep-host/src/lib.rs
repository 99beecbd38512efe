//! The library an agent embeds to run extensions, whatever wire their servers speak.
//!
//! Layers, bottom up:
//! - [`process`]: spawning a server in its own process group, its stderr log, graceful stop;
//! - [`rpc`]: a multiplexed, wire-neutral connection over any `AsyncRead`/`AsyncWrite` pair;
//!   the dialect's [`rpc::Codec`] says what each line is and writes answers and cancels;
//! - [`dialect`]: one module per wire (YEP today, [`dialect::yep`]). A [`dialect::Dialect`]
//!   opens a server's streams and shakes hands; the [`dialect::Peer`] it returns is the live
//!   server in the terms of [`capability`], the host's one capability model. This is the one
//!   seam: nothing above it knows which wire a server speaks;
//! - [`supervisor`]: one extension's server, lifecycle only: lazy spawn (or a
//!   [`supervisor::Transport`]), crash errors with the log path, backoff respawn, graceful stop;
//! - [`tool_args`]: tool arguments checked against the manifest's schemas, compiled once;
//! - [`runtime`]: [`ExtensionHost`], the one type an agent embeds; one registry task owns its
//!   table of extensions.
//!
//! Re-exported from the `yep_store` crate (synchronous, no runtime needed): [`store`] (the
//! home: install, lock, update, enable, remove, list, config), [`manifest`] (the `plugin.json`
//! a user approves, and its [`Grants`]) and [`text`] (escaping what servers and packages say).
//! The checks an author runs against a server (`doctor`, the conformance corpus's replay) are
//! not here: they are the `yep-tools` crate, built on this one's public API.
//!
//! Every process a server runs in is contained by the `yep_sandbox` crate (re-exported as
//! [`sandbox`]): the policy as plain data, its enforcement, the egress proxy and
//! `--sandbox-learn`. The host decides the policy and the mode ([`settings::sandbox_mode`]); the
//! sandbox crate reads no settings.

// Internals are crate-private: a `pub` that the crate root does not reach is an error.
#![deny(unreachable_pub)]

// The unit tests' HOME, TMPDIR and yep home are their own (yep-test-support).
#[cfg(test)]
yep_test_support::seal_this_test_binary!();

pub mod audit;
pub mod capability;
pub mod dialect;
pub mod error;
#[doc(hidden)]
pub mod fuzzing;
pub mod health;
pub mod launcher;
pub mod probe;
pub mod process;
pub mod rpc;
pub mod runtime;
pub mod settings;
pub mod supervisor;
pub mod tool_args;

/// Newline framing under a cap, and the busy-poll setting: shared with the SDK, and nothing of
/// YEP in it, so the wire-neutral layers read lines through this.
pub(crate) use yep_protocol::framing;
pub use yep_sandbox as sandbox;
pub use yep_store as store;
pub use yep_store::{manifest, text};

pub use capability::{
    Answer, CommandResult, ConfigOutcome, Events, HostToolError, NoEvents, Progress, Question,
    Status, StatusLevel, TraceEvent,
};
pub use health::{HealthEvent, HealthStream};
pub use manifest::Grants;
pub use manifest::Manifest;
pub use rpc::{CallError, CallOptions, CloseReason, UpdateSink};
pub use runtime::{
    ActivePanel, AskSink, Call, CallOutcome, CommandInfo, ExtensionHost, HostError, HostOptions,
    MAX_HOOK_TIMEOUT_MS, MessageDecision, PreDecision, ProgressStream, SEARCH_TOOLS, Session,
    StatusSink, ToolDefinition, TurnDecision, UnavailableHook,
};
pub use supervisor::{Extension, ExtensionError, ServerSpec, SupervisorOptions, Transport};
/// Fire it to cancel a call ([`Call::cancel_on`]); re-exported so you need no `tokio-util`.
pub use tokio_util::sync::CancellationToken;

/// Everything an agent that embeds the host touches, in one import:
/// `use yep_host::prelude::*;`.
pub mod prelude {
    pub use crate::capability::{
        Answer, CommandResult, ConfigOutcome, Progress, Question, Status, StatusLevel, TraceEvent,
    };
    pub use crate::health::{HealthEvent, HealthStream};
    pub use crate::runtime::{
        ActivePanel, AskSink, Call, CallOutcome, CommandInfo, ExtensionHost, HostError,
        HostOptions, MessageDecision, PreDecision, ProgressStream, SEARCH_TOOLS, Session,
        StatusSink, ToolDefinition, TurnDecision,
    };
    pub use crate::store::Home;
    pub use tokio_util::sync::CancellationToken;
}
