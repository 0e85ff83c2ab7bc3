//! Redis 7 functions: libraries of Lua functions loaded with FUNCTION LOAD
//! and called by name with FCALL.
//!
//! The registry here is the server's one truth about which libraries exist;
//! every worker thread's VM compiles a library from its code the first time
//! one of its functions is called there (see `Vm::library_function`), as it
//! compiles an EVAL script. A function runs through the same path as EVAL
//! (`scripting::eval`), as a [`Script`] whose body is its library's: the
//! same shard locks, undo log, busy handling and effects replication.
//!
//! Loading checks a library in the loading thread's VM first (Redis's
//! errors, the functions it registers, their flags), so a library in the
//! registry is one every VM can load.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

use hashbrown::HashMap;
use parking_lot::RwLock;

use super::{vm, Script, ScriptFlags};

/// The only engine Redis 7.0 has.
pub const ENGINE: &str = "LUA";

/// A library: its code as loaded and the functions it registered.
#[derive(Debug)]
pub struct Library {
    /// The name from the code's `#!lua name=<name>` line.
    pub name: String,
    /// The code as FUNCTION LOAD received it, shebang line included (what
    /// FUNCTION LIST WITHCODE, FUNCTION DUMP and snapshots give back).
    pub code: Vec<u8>,
    /// The functions, in the order the code registered them.
    pub functions: Vec<Arc<Function>>,
    /// Tells this load of the library from an earlier one of the same name
    /// (a worker VM holding an older one compiles it again).
    pub load_id: u64,
}

/// The code a VM compiles: from the shebang line's newline on, so line
/// numbers stay the code's, as Redis hands its engine the code.
fn body_of(code: &[u8]) -> &[u8] {
    let newline = code.iter().position(|&b| b == b'\n').unwrap_or(0);
    &code[newline..]
}

/// A function a library registered.
#[derive(Debug)]
pub struct Function {
    /// Its name, unique across libraries.
    pub name: String,
    /// `description`, if given.
    pub description: Option<Vec<u8>>,
    /// Its flags, in Redis's order (FUNCTION LIST).
    pub flag_names: Vec<&'static str>,
    /// How it runs: a script whose `function` names it.
    pub script: Arc<Script>,
}

/// What a function call runs: which library's load, which function.
#[derive(Debug, Clone)]
pub struct FunctionTarget {
    /// The library's name.
    pub library: String,
    /// The library's load (see [`Library::load_id`]).
    pub load_id: u64,
    /// The library's code.
    pub body: Arc<[u8]>,
    /// The function's name.
    pub function: Arc<str>,
}

/// One function as the library's code registered it, before it is checked
/// against the other libraries.
#[derive(Debug)]
pub struct Registered {
    /// The function's name.
    pub name: String,
    /// `description`, if given.
    pub description: Option<Vec<u8>>,
    /// Flag names as given (checked: each is one of [`FLAGS`]).
    pub flags: Vec<String>,
}

/// Redis's function flags, in the order FUNCTION LIST shows them.
pub const FLAGS: [&str; 5] = [
    "no-writes",
    "allow-oom",
    "allow-stale",
    "no-cluster",
    "allow-cross-slot-keys",
];

/// The libraries and the functions they registered.
#[derive(Default)]
pub struct Functions {
    registry: RwLock<Registry>,
    /// Bumped by every change: a VM drops the libraries it compiled when it
    /// sees a new generation, and compiles again those still called.
    generation: AtomicU64,
    next_load_id: AtomicU64,
}

/// Libraries and functions by name; names compare without case, as
/// Redis's dictionaries of them do (the keys here are lower-cased).
#[derive(Default)]
struct Registry {
    libraries: BTreeMap<String, Arc<Library>>,
    functions: HashMap<String, Arc<Function>>,
}

/// A name as the registry keys it.
fn folded(name: &str) -> String {
    name.to_ascii_lowercase()
}

/// Functions a thread remembers by the name it was called with, at most.
const FOUND_HERE_MAX: usize = 1024;

/// A thread's index of the functions it called: the registry's generation
/// it holds, and the functions by the name as sent.
type FoundHere = (u64, HashMap<Vec<u8>, Arc<Function>>);

thread_local! {
    static FOUND_HERE: std::cell::RefCell<FoundHere> =
        std::cell::RefCell::new((u64::MAX, HashMap::new()));
}

/// How FUNCTION RESTORE treats libraries that exist already.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RestorePolicy {
    /// Remove every library first.
    Flush,
    /// Add, failing on a name that exists (the default).
    Append,
    /// Replace libraries of the same name.
    Replace,
}

/// The library name of a code's `#!<engine> name=<name>` line, checked as
/// Redis's functionExtractLibMetaData and functionsCreateWithLibraryCtx
/// check it (their error texts, without the `ERR `).
pub fn library_name(code: &[u8]) -> Result<String, String> {
    if !code.starts_with(b"#!") {
        return Err("Missing library metadata".into());
    }
    let Some(end) = code.iter().position(|&b| b == b'\n') else {
        return Err("Invalid library metadata".into());
    };
    let parts = match crate::resp::parse::split_args(&code[..end]) {
        Some(parts) if !parts.is_empty() => parts,
        _ => return Err("Invalid library metadata".into()),
    };
    let engine = String::from_utf8_lossy(&parts[0][2..]).into_owned();
    let mut name = None;
    for part in &parts[1..] {
        if part.len() >= 5 && part[..5].eq_ignore_ascii_case(b"name=") {
            if name.is_some() {
                return Err(
                    "Invalid metadata value, name argument was given multiple times".into(),
                );
            }
            name = Some(String::from_utf8_lossy(&part[5..]).into_owned());
            continue;
        }
        return Err(format!(
            "Invalid metadata value given: {}",
            String::from_utf8_lossy(part)
        ));
    }
    let Some(name) = name else {
        return Err("Library name was not given".into());
    };
    if !valid_name(&name) {
        return Err(INVALID_NAME.into());
    }
    if !engine.eq_ignore_ascii_case(ENGINE) {
        return Err(format!("Engine '{engine}' not found"));
    }
    Ok(name)
}

/// Redis's text for a library or function name that is not a word.
pub const INVALID_NAME: &str = "Library names can only contain letters, numbers, or underscores(_) and must be at least one character long";

/// Letters, digits and underscores, at least one (functionsVerifyName).
pub fn valid_name(name: &str) -> bool {
    !name.is_empty() && name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_')
}

impl Functions {
    /// The generation VMs compare with theirs.
    pub fn generation(&self) -> u64 {
        self.generation.load(Ordering::SeqCst)
    }

    fn changed(&self) {
        self.generation.fetch_add(1, Ordering::SeqCst);
    }

    /// A function by name (without case, as Redis's dictionary), from
    /// this thread's own index when it found it before in this generation:
    /// FCALL's hot path takes no lock and copies no name.
    pub fn get(&self, name: &[u8]) -> Option<Arc<Function>> {
        let generation = self.generation();
        let found_here = FOUND_HERE.with_borrow_mut(|found| {
            if found.0 != generation {
                found.0 = generation;
                found.1.clear();
            }
            found.1.get(name).cloned()
        });
        if found_here.is_some() {
            return found_here;
        }
        let text = std::str::from_utf8(name).ok()?;
        let function = self.registry.read().functions.get(&folded(text)).cloned()?;
        // The generation read first: a change since makes the next call
        // look again.
        FOUND_HERE.with_borrow_mut(|found| {
            if found.0 == generation && found.1.len() < FOUND_HERE_MAX {
                found.1.insert(name.to_vec(), function.clone());
            }
        });
        Some(function)
    }

    /// FUNCTION LOAD: checks `code` in this thread's VM and adds its
    /// library, replacing one of the same name when `replace`. Returns the
    /// library's name, or Redis's error text (with its `ERR `).
    /// `timeout_ms` bounds the run of the library's code (0: none).
    pub fn load(&self, code: &[u8], replace: bool, timeout_ms: u64) -> Result<String, String> {
        // As Redis: a name taken is refused before the code runs.
        let name = library_name(code).map_err(|e| format!("ERR {e}"))?;
        if !replace && self.registry.read().libraries.contains_key(&folded(&name)) {
            return Err(format!("ERR Library '{name}' already exists"));
        }
        let library = self.compile(name.clone(), code, timeout_ms)?;
        let mut registry = self.registry.write();
        if !replace && registry.libraries.contains_key(&folded(&name)) {
            return Err(format!("ERR Library '{name}' already exists"));
        }
        let old = registry.libraries.get(&folded(&name)).cloned();
        for function in &library.functions {
            let taken = registry
                .functions
                .get(&folded(&function.name))
                .is_some_and(|f| old.as_ref().is_none_or(|old| !owns(old, f)));
            if taken {
                return Err(format!("ERR Function {} already exists", function.name));
            }
        }
        if let Some(old) = old {
            unlink(&mut registry, &old);
        }
        link(&mut registry, library);
        drop(registry);
        self.changed();
        Ok(name)
    }

    /// Runs a library's code in this thread's VM and builds the library.
    /// `name` is the one [`library_name`] read from `code`.
    fn compile(&self, name: String, code: &[u8], timeout_ms: u64) -> Result<Arc<Library>, String> {
        let load_id = self.next_load_id.fetch_add(1, Ordering::Relaxed);
        let body: Arc<[u8]> = body_of(code).into();
        let registered = vm::with_vm(|vm| vm.register_library(&body, timeout_ms))?;
        if registered.is_empty() {
            return Err("ERR No functions registered".into());
        }
        let functions = registered
            .into_iter()
            .map(|r| {
                let flag_names: Vec<&'static str> = FLAGS
                    .iter()
                    .copied()
                    .filter(|flag| r.flags.iter().any(|f| f.eq_ignore_ascii_case(flag)))
                    .collect();
                let has = |flag: &str| flag_names.contains(&flag);
                let flags = ScriptFlags {
                    shebang: true,
                    no_writes: has("no-writes"),
                    allow_oom: has("allow-oom"),
                    allow_stale: has("allow-stale"),
                    no_cluster: has("no-cluster"),
                };
                let script = Arc::new(Script {
                    sha: r.name.clone(),
                    source: Vec::new(),
                    body: Vec::new(),
                    flags,
                    native: known_function(&body, &r.name),
                    needs_everything: AtomicBool::new(false),
                    function: Some(FunctionTarget {
                        library: name.clone(),
                        load_id,
                        body: body.clone(),
                        function: r.name.as_str().into(),
                    }),
                });
                Arc::new(Function {
                    name: r.name,
                    description: r.description,
                    flag_names,
                    script,
                })
            })
            .collect();
        Ok(Arc::new(Library {
            name,
            code: code.to_vec(),
            functions,
            load_id,
        }))
    }

    /// FUNCTION DELETE: false when there is no such library.
    pub fn delete(&self, name: &[u8]) -> bool {
        let mut registry = self.registry.write();
        let Some(library) = std::str::from_utf8(name)
            .ok()
            .and_then(|name| registry.libraries.get(&folded(name)).cloned())
        else {
            return false;
        };
        unlink(&mut registry, &library);
        drop(registry);
        self.changed();
        true
    }

    /// FUNCTION FLUSH.
    pub fn flush(&self) {
        *self.registry.write() = Registry::default();
        self.changed();
    }

    /// Every library, by name.
    pub fn libraries(&self) -> Vec<Arc<Library>> {
        self.registry.read().libraries.values().cloned().collect()
    }

    /// Bytes the libraries hold, their code and names (INFO
    /// used_memory_functions).
    pub fn memory(&self) -> usize {
        let registry = self.registry.read();
        registry
            .libraries
            .values()
            .map(|library| {
                library.code.len()
                    + library.name.len()
                    + library
                        .functions
                        .iter()
                        .map(|f| f.name.len() + f.description.as_ref().map_or(0, Vec::len))
                        .sum::<usize>()
            })
            .sum()
    }

    /// Libraries and functions (FUNCTION STATS).
    pub fn counts(&self) -> (usize, usize) {
        let registry = self.registry.read();
        (registry.libraries.len(), registry.functions.len())
    }

    /// A snapshot's library: one of the same name is replaced, as Redis's
    /// load with RDBFLAGS_ALLOW_DUP does.
    pub fn load_from_snapshot(&self, code: Vec<u8>) -> Result<(), String> {
        self.restore(&[code], RestorePolicy::Replace)
    }

    /// FUNCTION RESTORE, and a snapshot's libraries: loads every code of
    /// `codes` under `policy`, all or none.
    pub fn restore(&self, codes: &[Vec<u8>], policy: RestorePolicy) -> Result<(), String> {
        let mut libraries = Vec::with_capacity(codes.len());
        for code in codes {
            let name = library_name(code).map_err(|e| format!("ERR {e}"))?;
            libraries.push(self.compile(name, code, 0)?);
        }
        let mut registry = self.registry.write();
        let mut next = match policy {
            RestorePolicy::Flush => Registry::default(),
            _ => Registry {
                libraries: registry.libraries.clone(),
                functions: registry.functions.clone(),
            },
        };
        for library in &libraries {
            if let Some(old) = next.libraries.get(&folded(&library.name)).cloned() {
                if policy != RestorePolicy::Replace {
                    return Err(format!("ERR Library {} already exists", library.name));
                }
                unlink(&mut next, &old);
            }
        }
        for library in libraries {
            if let Some(f) = library
                .functions
                .iter()
                .find(|f| next.functions.contains_key(&folded(&f.name)))
            {
                return Err(format!("ERR Function {} already exists", f.name));
            }
            link(&mut next, library);
        }
        *registry = next;
        drop(registry);
        self.changed();
        Ok(())
    }
}

/// The libraries limiter packages load around a known limiter script, by
/// the script's name in `tally_lua::SCRIPTS`, the function's name, and the
/// library's code after its shebang line with the script's text at `{}`.
const KNOWN_LIBRARIES: &[(&str, &str, &str)] = &[(
    // rate-limiter-flexible 11.4.0's RateLimiterValkeyGlide (_loadScripts),
    // under any library name.
    "rate_limiter_flexible_valkey_glide",
    "consume",
    "\n        local function consume(KEYS, ARGV)\n          {}\n        end\n        server.register_function('consume', consume)",
)];

/// The known script a function runs natively, as EVALSHA of that script
/// does: when its library is, byte for byte, one a limiter package loads.
fn known_function(body: &[u8], function: &str) -> Option<usize> {
    KNOWN_LIBRARIES
        .iter()
        .filter(|(_, name, _)| *name == function)
        .find_map(|(script, _, shape)| {
            let index = tally_lua::SCRIPTS.iter().position(|s| s.name == *script)?;
            let expected = shape.replacen("{}", tally_lua::SCRIPTS[index].source.trim(), 1);
            (expected.as_bytes() == body).then_some(index)
        })
}

fn owns(library: &Library, function: &Function) -> bool {
    library
        .functions
        .iter()
        .any(|f| Arc::ptr_eq(&f.script, &function.script))
}

fn link(registry: &mut Registry, library: Arc<Library>) {
    for function in &library.functions {
        registry
            .functions
            .insert(folded(&function.name), function.clone());
    }
    registry.libraries.insert(folded(&library.name), library);
}

fn unlink(registry: &mut Registry, library: &Library) {
    for function in &library.functions {
        registry.functions.remove(&folded(&function.name));
    }
    registry.libraries.remove(&folded(&library.name));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn library_metadata_is_read_and_refused_as_redis_does() {
        assert_eq!(library_name(b"#!lua name=lib1\nx").unwrap(), "lib1");
        assert_eq!(library_name(b"#!LUA NAME=a_1\n").unwrap(), "a_1");
        let refused = |code: &[u8]| library_name(code).unwrap_err();
        assert_eq!(refused(b"return 1"), "Missing library metadata");
        assert_eq!(refused(b"#!lua name=x"), "Invalid library metadata");
        assert_eq!(refused(b"#!lua\n"), "Library name was not given");
        assert_eq!(
            refused(b"#!lua name=a name=b\n"),
            "Invalid metadata value, name argument was given multiple times"
        );
        assert_eq!(
            refused(b"#!lua foo=bar\n"),
            "Invalid metadata value given: foo=bar"
        );
        assert_eq!(refused(b"#!lua name=a-b\n"), INVALID_NAME);
        assert_eq!(
            refused(b"#!bad_engine name=x\n"),
            "Engine 'bad_engine' not found"
        );
    }
}
