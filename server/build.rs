//! Compiles the long double shim INCRBYFLOAT uses (csrc/long_double.c) and
//! Redis's ways of reading a double (csrc/strtod.c),
//! and, for the `fuzzing` feature, Redis's own glob matcher as the reference
//! the fuzzers compare tally's with (csrc/stringmatch_redis.c).
fn main() {
    println!("cargo:rerun-if-changed=csrc/long_double.c");
    println!("cargo:rerun-if-changed=csrc/strtod.c");
    c_build()
        .file("csrc/long_double.c")
        .file("csrc/strtod.c")
        .warnings(true)
        .compile("tally_long_double");
    if std::env::var_os("CARGO_FEATURE_FUZZING").is_some() {
        println!("cargo:rerun-if-changed=csrc/stringmatch_redis.c");
        c_build()
            .file("csrc/stringmatch_redis.c")
            .compile("tally_stringmatch_redis");
    }
}

/// A C build that, in the fuzz build (`-Zsanitizer=address`), is checked by
/// AddressSanitizer like the Rust around it.
fn c_build() -> cc::Build {
    let mut build = cc::Build::new();
    if std::env::var("CARGO_CFG_SANITIZE").is_ok_and(|s| s.split(',').any(|s| s == "address")) {
        build
            .flag("-fsanitize=address")
            .flag("-fno-omit-frame-pointer");
    }
    build
}
