//! Every fuzz target's checks, on stable, in every test run: the committed
//! corpus (fuzz/corpus/<target>/, grown by cargo-fuzz and kept minimal with
//! `cargo fuzz cmin`), then inputs generated from it by a fixed-seed
//! mutator, so that CI exercises each target even where no nightly
//! toolchain is installed. A crash found by the fuzzers is added to the
//! corpus and stays a test from then on.
#![cfg(feature = "fuzzing")]

use std::path::PathBuf;

use tally_server::fuzzing;

/// Generated inputs per target, on top of the corpus.
const GENERATED: usize = 1500;

fn corpus(target: &str) -> Vec<Vec<u8>> {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../fuzz/corpus")
        .join(target);
    let mut inputs: Vec<(String, Vec<u8>)> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|entry| {
            let path = entry.unwrap().path();
            (path.display().to_string(), std::fs::read(&path).unwrap())
        })
        .collect();
    inputs.sort();
    assert!(!inputs.is_empty(), "no corpus for {target}");
    inputs.into_iter().map(|(_, data)| data).collect()
}

/// xorshift64*: the same inputs on every run and machine.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }
}

/// A corpus input with a few byte flips, insertions, deletions and splices.
fn mutate(rng: &mut Rng, inputs: &[Vec<u8>]) -> Vec<u8> {
    let mut data = inputs[rng.below(inputs.len())].clone();
    for _ in 0..1 + rng.below(6) {
        match rng.below(5) {
            0 if !data.is_empty() => {
                let at = rng.below(data.len());
                data[at] = rng.next() as u8;
            }
            1 => {
                let at = rng.below(data.len() + 1);
                let byte = b"*$\r\n 0123456789-[]^\\?\"'\x00{}"[rng.below(24)];
                data.insert(at, byte);
            }
            2 if !data.is_empty() => {
                let at = rng.below(data.len());
                data.remove(at);
            }
            3 => {
                let other = &inputs[rng.below(inputs.len())];
                let from = rng.below(other.len() + 1);
                let at = rng.below(data.len() + 1);
                let piece: Vec<u8> = other[from..].iter().take(32).copied().collect();
                data.splice(at..at, piece);
            }
            _ => data.push(rng.next() as u8),
        }
    }
    data.truncate(4096);
    data
}

fn replay(target: &str, check: fn(&[u8])) {
    let inputs = corpus(target);
    for input in &inputs {
        check(input);
    }
    let mut rng = Rng(0x7a11_7a11 ^ target.len() as u64);
    for _ in 0..GENERATED {
        check(&mutate(&mut rng, &inputs));
    }
}

#[test]
fn frame() {
    replay("frame", fuzzing::frame);
}

#[test]
fn glob() {
    replay("glob", fuzzing::glob);
}

#[test]
fn dispatch() {
    replay("dispatch", fuzzing::dispatch);
}

#[test]
fn config() {
    replay("config", fuzzing::config);
}

#[test]
fn lua_values() {
    replay("lua_values", fuzzing::lua_values);
}

#[test]
fn rdb() {
    replay("rdb", fuzzing::rdb);
}

#[test]
fn cluster_bus() {
    replay("cluster_bus", fuzzing::cluster_bus);
}

#[test]
fn lua_libraries() {
    replay("lua_libraries", fuzzing::lua_libraries);
}

/// The lua_libraries corpus keeps the crashes Redis fixed in its Lua as
/// regressions; the tables that decode an input may grow, so check that
/// each still describes the call it is named for.
#[test]
fn lua_libraries_regressions_still_make_their_calls() {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../fuzz/corpus/lua_libraries");
    for (file, call) in [
        (
            "regression-cve-2024-31449-bit-tohex",
            "(bit.tohex)(...)} return #r end, 65535, -2147483648)",
        ),
        (
            "regression-cve-2025-46817-unpack",
            "(unpack)(...)} return #r end, T, -2, 2147483647)",
        ),
        (
            "regression-cve-2025-46817-unpack-from-0",
            "(unpack)(...)} return #r end, T, 0, 2147483647)",
        ),
    ] {
        let data = std::fs::read(dir.join(file)).unwrap();
        let script = fuzzing::lua_libraries_script(&data);
        assert!(script.contains(call), "{file}: {script}");
    }
}
