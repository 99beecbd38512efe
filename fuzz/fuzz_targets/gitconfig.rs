//! Fuzz target `gitconfig`: the body is `yep_host::fuzzing::gitconfig`, which the stable corpus replay shares.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| yep_host::fuzzing::gitconfig(data));
