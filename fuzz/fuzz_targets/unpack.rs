//! Fuzz target `unpack`: the body is `yep_host::fuzzing::unpack`, which the stable corpus replay shares.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| yep_host::fuzzing::unpack(data));
