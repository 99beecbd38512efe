//! Every integration test of `yep-host` in one binary: one link instead of one per file. Each
//! module is one area's tests, and `common` their shared helpers. Apart, each in a binary of its own since it measures the test process itself: chaos, hot_path, process.

// The HOME, TMPDIR and yep home of this test process are its own (yep-test-support).
yep_test_support::seal_this_test_binary!();

mod common;
mod dialect;
mod echo_server;
mod errors;
mod flood;
mod fuzz_corpus;
mod idle;
mod interop;
mod launch;
mod layers;
mod mcp;
mod mcp_env;
mod mcp_host;
mod runtime;
mod sealed;
mod weight;
mod zot;
