#![no_main]
//! See tally_server::fuzzing::lua_values.
libfuzzer_sys::fuzz_target!(|data: &[u8]| tally_server::fuzzing::lua_values(data));
