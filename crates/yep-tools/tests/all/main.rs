//! Every integration test of `yep-tools` in one binary: one link instead of one per file. Each
//! module is one area's tests, and `common` their shared helpers.

mod common;
mod corpus;
mod doctor;
