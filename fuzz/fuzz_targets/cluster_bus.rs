#![no_main]
//! See tally_server::fuzzing::cluster_bus.
libfuzzer_sys::fuzz_target!(|data: &[u8]| tally_server::fuzzing::cluster_bus(data));
