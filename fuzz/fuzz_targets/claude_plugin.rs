//! Fuzz target `claude_plugin`: the body is `claude_plugin` in `yep_host::fuzzing`, which the stable corpus replay shares.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| yep_host::fuzzing::run("claude_plugin", data));
