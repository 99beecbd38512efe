//! The zot extension protocol v1 (`../shared/reference/zot-protocol-v1.md`): its frames
//! ([`frames`]). The dialect that adapts them to the capability model is being built on these
//! (issue 14).

pub mod frames;
