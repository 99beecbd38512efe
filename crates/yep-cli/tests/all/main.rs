//! Every integration test of `yep-cli` in one binary: one link instead of one per file. Each
//! module is one area's tests, and `common` their shared helpers.

// The HOME, TMPDIR and yep home of this test process are its own (yep-test-support).
yep_test_support::seal_this_test_binary!();

mod agents;
mod audit;
mod authoring;
mod broker;
mod claude;
mod cli;
mod common;
mod components;
mod conformance;
mod corpora;
mod docs;
mod doctor_conformance;
mod fresh_clone;
mod hooks;
mod hostile;
mod installs;
mod interop;
mod manifest_sync;
mod marketplace;
mod mcp;
mod mcp_http;
mod mcp_soak;
mod oauth;
mod registry;
mod sandbox;
mod screens;
mod sdks;
mod shared_host;
mod skills;
mod store;
mod yolop;
mod zot;
