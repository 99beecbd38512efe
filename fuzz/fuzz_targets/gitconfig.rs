//! Fuzz target `gitconfig`: the body is `gitconfig` in `yep_host::fuzzing`, which the stable corpus replay shares.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| yep_host::fuzzing::run("gitconfig", data));
