//! Compiles the long double shim INCRBYFLOAT uses (csrc/long_double.c) and
//! Redis's ways of reading a double (csrc/strtod.c),
//! and, for the `fuzzing` feature, Redis's own glob matcher as the reference
//! the fuzzers compare tally's with (csrc/stringmatch_redis.c).
fn main() {
    println!("cargo:rerun-if-changed=csrc/long_double.c");
    println!("cargo:rerun-if-changed=csrc/strtod.c");
    cc::Build::new()
        .file("csrc/long_double.c")
        .file("csrc/strtod.c")
        .warnings(true)
        .compile("tally_long_double");
    if std::env::var_os("CARGO_FEATURE_FUZZING").is_some() {
        println!("cargo:rerun-if-changed=csrc/stringmatch_redis.c");
        cc::Build::new()
            .file("csrc/stringmatch_redis.c")
            .compile("tally_stringmatch_redis");
    }
}
