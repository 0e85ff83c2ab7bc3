#![no_main]
//! See tally_server::fuzzing::dispatch.
libfuzzer_sys::fuzz_target!(|data: &[u8]| tally_server::fuzzing::dispatch(data));
