//! Compiles the long double shim INCRBYFLOAT uses (see csrc/long_double.c).
fn main() {
    println!("cargo:rerun-if-changed=csrc/long_double.c");
    cc::Build::new()
        .file("csrc/long_double.c")
        .warnings(true)
        .compile("tally_long_double");
}
