//! Fuzz target `wire`: the body is `yep_host::fuzzing::wire`, which the stable corpus replay shares.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| yep_host::fuzzing::wire(data));
