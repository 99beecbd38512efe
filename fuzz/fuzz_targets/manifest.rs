//! Fuzz target `manifest`: the body is `yep_host::fuzzing::manifest`, which the stable corpus replay shares.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| yep_host::fuzzing::manifest(data));
