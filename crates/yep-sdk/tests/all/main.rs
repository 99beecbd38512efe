//! Every integration test of `yep-sdk` in one binary: one link instead of one per file. Each
//! module is one area's tests.

mod serve;
mod typed;
