//! Fuzz target `claude_plugin`: the body is `yep_host::fuzzing::claude_plugin`, which the stable corpus replay shares.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| yep_host::fuzzing::claude_plugin(data));
