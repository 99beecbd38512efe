//! Wire types of the YEP 1.0 extension protocol: envelopes, methods, payloads and errors.
//!
//! Serde only: no I/O, no processes, no async. The host (`yep-host`), the Rust server SDK
//! (`yep-sdk`) and the schema generator all build on these types, so a payload change here is a
//! wire change everywhere (and the drift test over `schema/yep/v1/` says so). [`framing`] splits
//! the bytes either end reads into capped lines, the same way for both.
//!
//! Every payload is a field-for-field superset of `yolop-yep` 0.5.0: same names, same defaults,
//! same omissions. Unknown fields are ignored and missing fields defaulted on every type.

mod error;
pub mod framing;
pub mod json;
mod message;
pub mod meta;
pub mod methods;
#[cfg(feature = "schema")]
pub mod schema;
mod types;
mod version;

pub use error::{ErrorCode, ErrorObject};
pub use message::{
    Message, Notification, ParseError, RawMessage, Request, Response, error_line, non_null,
    notification_line, request_line, result_line, tool_call_line, value_result_line,
};
pub use methods::{HostNotification, HostRequest, ServerNotification, ServerRequest};
pub use types::*;
pub use version::{PROTOCOL_VERSION, major, version_compatible};
