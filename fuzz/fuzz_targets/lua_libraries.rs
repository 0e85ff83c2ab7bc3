#![no_main]
//! See tally_server::fuzzing::lua_libraries.
libfuzzer_sys::fuzz_target!(|data: &[u8]| tally_server::fuzzing::lua_libraries(data));
