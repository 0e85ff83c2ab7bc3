#![no_main]
//! See tally_server::fuzzing::rdb.
libfuzzer_sys::fuzz_target!(|data: &[u8]| tally_server::fuzzing::rdb(data));
