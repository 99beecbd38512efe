//! Fuzz target `zot_manifest`: the body is `yep_host::fuzzing::zot_manifest`, which the stable corpus replay shares.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| yep_host::fuzzing::zot_manifest(data));
