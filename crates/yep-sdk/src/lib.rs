//! Write a YEP capability server in Rust: register handlers on a [`Server`], call `serve()`.
//!
//! No async runtime is needed. The SDK runs a stdin reader thread (the caller's), an ordered
//! notification thread, and a growing pool of request workers, so tool calls run concurrently
//! while notifications arrive in order (calls of a handler that took under 50 µs last time
//! run one after another on the reading thread: waking a worker would cost more). Handlers get
//! a [`Context`] to stream progress, see cancellation, ask the user, push status and log.
//!
//! A [`Server::typed_tool`] takes its arguments as a `Deserialize + JsonSchema` type: the
//! schema goes in the handshake (`yep manifest sync` writes it into `plugin.json`), and bad
//! arguments are answered with an error naming the field. [`Server::tool`] is the raw form.
//!
//! ```no_run
//! use serde_json::json;
//! use yep_sdk::{Server, HookDecision};
//!
//! Server::new("echo")
//!     .tool("echo", |args, _ctx| Ok(json!({ "echoed": args["text"] })))
//!     .on_hook(|fire| if fire.args["forbidden"] == true { HookDecision::block("forbidden") } else { HookDecision::allow() })
//!     .serve()
//!     .unwrap();
//! ```
#![deny(clippy::print_stdout)]

mod context;
mod framing;
mod server;
mod typed;

pub use context::{Context, Notifier};
/// The derive authors put on a typed tool's argument and result types.
pub use schemars::{self, JsonSchema};
pub use server::{Server, ToolError, ToolResult};
/// The wire types, for authors who need the rest.
pub use yep_protocol as protocol;
pub use yep_protocol::{
    CommandExecuteResult, ConfigStatus, ErrorObject, HookDecision, HookFireParams, StatusLevel,
    TraceEventParams, UiAskParams, UiAskResult,
};
