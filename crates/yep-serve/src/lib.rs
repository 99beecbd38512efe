//! yep's host served to agents that did not embed it.
//!
//! - [`agents`]: yep's hooks inside the agents people use (`yep hook <agent>`): each agent's
//!   hook input and answer, and the configuration it reads;
//! - [`bridge`]: the host as one MCP server (`yep mcp serve`), over stdio or streamable HTTP;
//! - [`shared`]: the shared host (`yep host`), one warm host per home that every session of
//!   that user attaches to over a unix socket, and the attach side a session runs;
//! - [`oauth`]: logging in to a remote MCP server (`yep mcp login`); the host keeps the tokens
//!   and uses them (`yep_host::dialect::mcp::credentials`).
//!
//! It sits on `yep-host`'s public API alone: an agent that embeds the runtime compiles none of
//! this (no HTTP server, no MCP server side).

pub mod agents;
pub mod bridge;
pub mod oauth;
pub mod shared;
