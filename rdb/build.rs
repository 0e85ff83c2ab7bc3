//! Compiles Redis's own LZF (vendor/lzf, liblzf 3.6 as Redis 7.0.15 ships
//! it): the same compressor as Redis's makes DUMP payloads and snapshot
//! strings byte-identical to Redis's, which a Rust port does not.
fn main() {
    println!("cargo:rerun-if-changed=vendor/lzf");
    let mut build = cc::Build::new();
    // The fuzz build (`-Zsanitizer=address`) checks the C as well as the Rust.
    if std::env::var("CARGO_CFG_SANITIZE").is_ok_and(|s| s.split(',').any(|s| s == "address")) {
        build
            .flag("-fsanitize=address")
            .flag("-fno-omit-frame-pointer");
    }
    build
        .file("vendor/lzf/lzf_c.c")
        .file("vendor/lzf/lzf_d.c")
        .include("vendor/lzf")
        .warnings(false)
        .compile("redis_lzf");
}
