//! The Lua the server compiles is exactly Redis 7.0.15's `deps/lua/src`
//! plus the patch series in vendor/lua-src/patches (Redis's security fixes,
//! then tally's own): no hand edit of the compiled tree, no patch that has
//! stopped applying. vendor/lua-src/PATCHES.md explains the layout.

use std::path::Path;
use std::process::Command;

#[test]
fn the_compiled_lua_is_upstream_plus_the_patch_series() {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../vendor/lua-src/update.sh");
    let output = Command::new("bash")
        .arg(&script)
        .arg("--check")
        .output()
        .expect("bash runs vendor/lua-src/update.sh");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        output.status.success(),
        "update.sh --check failed:\n{stdout}\n{stderr}"
    );
    assert!(stdout.contains("lua-5.1.5/ is upstream/ + "), "{stdout}");
}

/// Every security patch in the series names its CVE, and every CVE the
/// series names has a test of the same name in tests/tests/cves.rs.
#[test]
fn every_security_patch_has_its_regression_test() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let series = std::fs::read_to_string(root.join("vendor/lua-src/patches/series")).unwrap();
    let tests = std::fs::read_to_string(root.join("tests/tests/cves.rs")).unwrap();
    let mut checked = 0;
    for name in series.lines().filter(|l| l.contains("-CVE-")) {
        let cve = name
            .split('-')
            .skip(1)
            .take(3)
            .collect::<Vec<_>>()
            .join("_")
            .to_lowercase();
        assert!(
            tests.contains(&format!("fn {cve}_")),
            "{name}: no test named {cve}_... in tests/tests/cves.rs"
        );
        checked += 1;
    }
    assert_eq!(checked, 4, "the series holds four security patches today");
}
