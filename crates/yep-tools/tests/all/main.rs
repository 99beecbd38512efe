//! Every integration test of `yep-tools` in one binary: one link instead of one per file. Each
//! module is one area's tests, and `common` their shared helpers.

// The host's test helpers, shared rather than copied.
#[path = "../../../yep-host/tests/all/common/mod.rs"]
mod common;
mod corpus;
mod doctor;
