//! Fuzz target `cargo_manifest`: the body is `yep_host::fuzzing::cargo_manifest`, which the stable corpus replay shares.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| yep_host::fuzzing::cargo_manifest(data));
