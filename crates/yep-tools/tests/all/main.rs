//! Every integration test of `yep-tools` in one binary: one link instead of one per file. Each
//! module is one area's tests, and `common` their shared helpers.

// The HOME, TMPDIR and yep home of this test process are its own (yep-test-support).
yep_test_support::seal_this_test_binary!();

// The host's test helpers, shared rather than copied.
#[path = "../../../yep-host/tests/all/common/mod.rs"]
mod common;
mod corpus;
mod doctor;
