//! Every integration test of `yep-store` in one binary: one link instead of one per file. Each
//! module is one area's tests. Apart, in a binary of its own: without_fetch, built only without the `fetch` feature (CI runs it so).

// The HOME, TMPDIR and yep home of this test process are its own (yep-test-support).
yep_test_support::seal_this_test_binary!();

mod approval;
mod claude_corpus;
mod errors;
mod planted_fifo;
#[cfg(feature = "fetch")]
mod progress;
