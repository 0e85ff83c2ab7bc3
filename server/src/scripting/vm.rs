//! The Lua 5.1 virtual machine a worker thread runs scripts in.
//!
//! One VM per worker thread (a `mlua::Lua` is not `Send`), set up once the way
//! Redis 7.0 sets up its own: the base, table, string and math libraries plus
//! `bit`; no `print`, `loadfile`, `dofile`, `os`, `io`, `require`; the
//! `redis` API (with `server` as an alias); a global table that refuses new
//! globals ("Attempt to modify a readonly table") and reports unknown ones
//! ("Script attempted to access nonexistent global variable 'x'"); and Redis's
//! error handler, which records where an error was raised so the reply can
//! say `script: <sha>, on @user_script:<line>.`
//!
//! Scripts are compiled once per thread and kept by SHA1.

use std::cell::RefCell;

use hashbrown::HashMap;
use mlua::{Function, Lua, LuaOptions, RegistryKey, StdLib, Table, Value};

use super::lua_prelude::{ERROR_HANDLER, LIBRARY_LOADER, PROTECT_GLOBALS, REDIS_LIB};

/// Redis's version as `redis.REDIS_VERSION_NUM` gives it: 0x00MMmmpp.
fn version_num() -> i64 {
    let mut parts = crate::catalog::reported_version()
        .split('.')
        .map(|p| p.parse::<i64>().unwrap_or(0));
    let mut next = || parts.next().unwrap_or(0);
    (next() << 16) | (next() << 8) | next()
}

/// The libraries Redis 7.0 compiles into its Lua (deps/lua/src), compiled
/// from the same sources in vendor/lua-src: cjson, struct, cmsgpack, bit.
mod redis_libs {
    use std::ffi::c_int;

    use mlua::ffi::lua_State;

    extern "C-unwind" {
        pub fn luaopen_cjson(state: *mut lua_State) -> c_int;
        pub fn luaopen_struct(state: *mut lua_State) -> c_int;
        pub fn luaopen_cmsgpack(state: *mut lua_State) -> c_int;
        pub fn luaopen_bit(state: *mut lua_State) -> c_int;
    }
}

/// Redis's read-only tables, from the patched Lua in vendor/lua-src.
pub(super) mod readonly {
    use std::ffi::c_int;

    use mlua::ffi::{self, lua_State};

    extern "C-unwind" {
        fn lua_enablereadonlytable(state: *mut lua_State, index: c_int, enabled: c_int);
        fn lua_isreadonlytable(state: *mut lua_State, index: c_int) -> c_int;
    }

    /// Makes the table at `index` read-only to scripts, or writable.
    ///
    /// # Safety
    /// `index` must be a valid index of a table on `state`.
    pub(in crate::scripting) unsafe fn enable(state: *mut lua_State, index: c_int, enabled: bool) {
        // SAFETY: as the function's contract.
        unsafe { lua_enablereadonlytable(state, index, c_int::from(enabled)) }
    }

    /// `set_readonly(table, flag)`.
    ///
    /// # Safety
    /// Called by Lua only, as a C function registered on the VM.
    pub unsafe extern "C-unwind" fn set(state: *mut lua_State) -> c_int {
        // SAFETY: called by Lua with its own state; the arguments are checked
        // before the flag is touched.
        unsafe {
            ffi::luaL_checktype(state, 1, ffi::LUA_TTABLE);
            let enabled = ffi::lua_toboolean(state, 2);
            lua_enablereadonlytable(state, 1, enabled);
        }
        0
    }

    /// `is_readonly(table) -> boolean`.
    ///
    /// # Safety
    /// Called by Lua only, as a C function registered on the VM.
    pub unsafe extern "C-unwind" fn get(state: *mut lua_State) -> c_int {
        // SAFETY: as above.
        unsafe {
            ffi::luaL_checktype(state, 1, ffi::LUA_TTABLE);
            let readonly = lua_isreadonlytable(state, 1);
            ffi::lua_pushboolean(state, readonly);
        }
        1
    }
}

/// Memory a VM may hold after a run before it is collected at once.
const GARBAGE_MAX: usize = 16 * 1024 * 1024;

/// The error a stopped script raises.
const KILLED: &str = "Script killed by user with SCRIPT KILL...";

/// The error a library's code raises when it loads for too long.
const LOAD_TIMEOUT: &str = "FUNCTION LOAD timeout";

/// A worker thread's VM and what it keeps between runs.
pub struct Vm {
    /// The interpreter.
    pub lua: Lua,
    /// Compiled scripts by SHA1 (lower-case hex).
    functions: HashMap<String, RegistryKey>,
    /// Redis's error handler, which a run hands `lua_pcall` by its
    /// registry index, as Redis's luaCallFunction does.
    error_handler: RegistryKey,
    /// FUNCTION LOAD's run of a library's code ([`LIBRARY_LOADER`]).
    loader: RegistryKey,
    /// Libraries compiled here, by name: which load, and their callbacks.
    libraries: HashMap<String, LoadedLibrary>,
    /// The functions generation `libraries` belong to.
    library_generation: u64,
    /// The SCRIPT FLUSH generation the compiled functions belong to.
    generation: u64,
    /// What this VM last added to the server's `vm_memory`.
    accounted: i64,
}

/// A library as compiled in one VM.
struct LoadedLibrary {
    load_id: u64,
    callbacks: HashMap<String, RegistryKey>,
}

thread_local! {
    /// While a library's code runs for FUNCTION LOAD: when it must stop.
    static LOAD_DEADLINE: std::cell::Cell<Option<std::time::Instant>> =
        const { std::cell::Cell::new(None) };
}

/// An error reply raised by redis.call; its text is exactly the reply's.
#[derive(Debug)]
struct CallError {
    message: String,
    /// INFO errorstats counted it already (see `convert::COUNTED_FIELD`).
    counted: bool,
}

impl std::fmt::Display for CallError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}

/// True when `err` is a redis.call error that INFO errorstats counted.
fn counted_call_error(err: &Value) -> bool {
    let Value::Error(err) = err else {
        return false;
    };
    err.chain()
        .filter_map(|e| e.downcast_ref::<CallError>())
        .any(|e| e.counted)
}

impl std::error::Error for CallError {}

fn sha1_hex(bytes: &[u8]) -> String {
    let hex = tally_lua::sha1_hex_bytes(bytes);
    // Hex digits are ASCII.
    String::from_utf8_lossy(&hex).into_owned()
}

impl Vm {
    fn new() -> mlua::Result<Vm> {
        // SAFETY: `debug` is the only unsafe library loaded; like Redis, we use
        // it for the error handler alone and remove it from the globals below,
        // so scripts cannot reach it.
        let lua = unsafe {
            Lua::unsafe_new_with(
                StdLib::TABLE | StdLib::STRING | StdLib::MATH | StdLib::DEBUG,
                LuaOptions::default(),
            )
        };
        // mlua keeps one preallocated error value per Rust function call in
        // flight, made on first use: the first call on a fresh VM puts it
        // on the Lua stack under the arguments, one slot more than Redis's
        // C function needs, so a first `redis.call` with ~8,000 arguments
        // (Redis's regression test for CVE-2021-32626) failed with "stack
        // overflow" where Redis answers. One call here makes it ahead of
        // any script.
        lua.create_function(|_, ()| Ok(()))?.call::<()>(())?;
        let globals = lua.globals();
        for name in [
            "print", "loadfile", "dofile", "module", "require", "package",
        ] {
            globals.raw_set(name, Value::Nil)?;
        }
        // Redis's own C libraries, in Redis's order (luaLoadLibraries).
        for open in [
            redis_libs::luaopen_cjson,
            redis_libs::luaopen_struct,
            redis_libs::luaopen_cmsgpack,
            redis_libs::luaopen_bit,
        ] {
            // SAFETY: Lua library openers, called as Lua functions.
            unsafe { lua.create_c_function(open)? }.call::<()>(())?;
        }
        // Redis's luaRedisSha1hexCommand: one argument, taken as
        // lua_tolstring takes it (strings and numbers; anything else
        // hashes as the empty string).
        let sha1hex = lua.create_function(|lua, args: mlua::MultiValue| {
            if args.len() != 1 {
                return Err(mlua::Error::external(CallError {
                    message: "ERR wrong number of arguments".to_string(),
                    counted: false,
                }));
            }
            let text = match &args[0] {
                Value::String(_) | Value::Integer(_) | Value::Number(_) => {
                    lua.coerce_string(args[0].clone())?
                }
                _ => None,
            };
            Ok(sha1_hex(
                &text.map(|t| t.as_bytes().to_vec()).unwrap_or_default(),
            ))
        })?;
        let acl_check_cmd = lua.create_function(|_, args: mlua::MultiValue| {
            match super::bridge::acl_check(args) {
                Ok(allowed) => Ok(allowed),
                Err(message) => Err(mlua::Error::external(CallError {
                    message,
                    counted: false,
                })),
            }
        })?;
        let log =
            lua.create_function(|_, (level, args): (i64, mlua::Variadic<mlua::String>)| {
                let text: Vec<String> = args
                    .iter()
                    .map(|s| String::from_utf8_lossy(&s.as_bytes()).into_owned())
                    .collect();
                let text = text.join(" ");
                match level {
                    0 => tracing::debug!(target: "script", "{text}"),
                    1 | 2 => tracing::info!(target: "script", "{text}"),
                    _ => tracing::warn!(target: "script", "{text}"),
                }
                Ok(())
            })?;
        // redis.call is a C function, as in Redis, so that a script's
        // `return redis.call(...)` keeps the script's frame and the error
        // handler can report the script's line. It raises an error reply
        // as its `{err=...}` table, as Redis's does.
        // SAFETY: C functions that follow Lua's calling convention (raw.rs).
        let (call, pcall) = unsafe {
            (
                lua.create_c_function(super::raw::call)?,
                lua.create_c_function(super::raw::pcall)?,
            )
        };
        let setresp = lua.create_function(|_, version: i64| {
            super::set_resp(version);
            Ok(())
        })?;
        let log_function = log.clone();
        let redis: Table = lua.load(REDIS_LIB).set_name("=redis_lib").call((
            sha1hex,
            log,
            call,
            pcall,
            setresp,
            acl_check_cmd,
            crate::catalog::reported_version(),
            version_num(),
        ))?;
        globals.raw_set("redis", redis.clone())?;
        globals.raw_set("server", redis)?;
        // The library loader needs Lua's own pcall, which hands it the
        // `{err=...}` table a failed registration raises.
        let raw_pcall: Function = globals.get("pcall")?;
        let debug: Table = globals.get("debug")?;
        let (handler, safe_pcall): (Function, Function) =
            lua.load(ERROR_HANDLER).set_name("=redis_lib").call((
                debug,
                globals.get::<Function>("pcall")?,
                globals.get::<Function>("select")?,
                globals.get::<Function>("unpack")?,
                lua.create_function(|_, err: Value| Ok(counted_call_error(&err)))?,
            ))?;
        globals.raw_set("pcall", safe_pcall)?;
        // Like Redis, `debug` is only kept for the error handler.
        globals.raw_set("debug", Value::Nil)?;
        let setfenv: Function = globals.get("setfenv")?;
        // Removed as the Redis 7.0 of Debian removes them: an environment
        // switch or a userdata with a writable metatable would reopen what
        // the read-only tables close.
        for name in ["getfenv", "setfenv", "newproxy"] {
            globals.raw_set(name, Value::Nil)?;
        }
        let recheck = lua.create_function(|_, ()| match super::check_current_run() {
            Ok(()) => Ok(()),
            Err(super::Killed) => Err(mlua::Error::runtime(KILLED)),
        })?;
        // SAFETY: C functions over the patched Lua's read-only flag; each
        // checks its arguments with luaL_checktype.
        let (set_readonly, is_readonly) = unsafe {
            (
                lua.create_c_function(readonly::set)?,
                lua.create_c_function(readonly::get)?,
            )
        };
        let loader: Function = lua.load(LIBRARY_LOADER).set_name("=redis_lib").call((
            setfenv,
            raw_pcall,
            set_readonly.clone(),
            globals.clone(),
            log_function,
            crate::catalog::reported_version(),
            version_num(),
        ))?;
        lua.load(PROTECT_GLOBALS)
            .set_name("=redis_lib")
            .call::<()>((globals.clone(), set_readonly, is_readonly, recheck))?;
        // Every 100k instructions: busy-script accounting and SCRIPT KILL.
        // A global hook, so that coroutines, which copy their creator's
        // hook, are covered too (mlua's per-thread hook is removed from any
        // thread it was not set on).
        lua.set_global_hook(
            mlua::HookTriggers::new().every_nth_instruction(100_000),
            |_, _| {
                if let Some(deadline) = LOAD_DEADLINE.get() {
                    if std::time::Instant::now() > deadline {
                        return Err(mlua::Error::runtime(LOAD_TIMEOUT));
                    }
                    return Ok(mlua::VmState::Continue);
                }
                match super::check_current_run() {
                    Ok(()) => Ok(mlua::VmState::Continue),
                    Err(super::Killed) => Err(mlua::Error::runtime(KILLED)),
                }
            },
        )?;
        let error_handler = lua.create_registry_value(handler)?;
        let loader = lua.create_registry_value(loader)?;
        Ok(Vm {
            lua,
            functions: HashMap::new(),
            error_handler,
            loader,
            libraries: HashMap::new(),
            library_generation: 0,
            generation: 0,
            accounted: 0,
        })
    }

    /// The compiled function for `sha`, compiling `source` on first use,
    /// as its index in the Lua registry, which a run pushes directly (no
    /// handle of mlua's made and dropped per run). A compile error is
    /// returned as Redis words it.
    pub fn function_id(&mut self, sha: &str, source: &[u8]) -> Result<std::ffi::c_int, String> {
        if let Some(key) = self.functions.get(sha) {
            return Ok(key.id());
        }
        let function = self.compile(
            source,
            "@user_script",
            "ERR Error compiling script (new function)",
        )?;
        let key = self
            .lua
            .create_registry_value(function)
            .map_err(|e| format!("ERR {e}"))?;
        let id = key.id();
        self.functions.insert(sha.to_string(), key);
        Ok(id)
    }

    /// Compiles `source` as the chunk `name`; a syntax error is `context`
    /// and Lua's message, as Redis words it.
    fn compile(&self, source: &[u8], name: &str, context: &str) -> Result<Function, String> {
        self.lua
            .load(source)
            .set_name(name)
            .into_function()
            .map_err(|e| {
                let message = match &e {
                    mlua::Error::SyntaxError { message, .. } => message.clone(),
                    other => other.to_string(),
                };
                format!("{context}: {message}")
            })
    }

    /// Runs a library's code (from its shebang line's newline on) to
    /// collect the functions it registers, as FUNCTION LOAD does, with
    /// Redis's errors. `timeout_ms` bounds the run (0: none).
    pub fn register_library(
        &mut self,
        body: &[u8],
        timeout_ms: u64,
    ) -> Result<Vec<super::functions::Registered>, String> {
        self.run_library(body, timeout_ms).map(|functions| {
            functions
                .into_iter()
                .map(|(registered, callback)| {
                    let _ = self.lua.remove_registry_value(callback);
                    registered
                })
                .collect()
        })
    }

    fn run_library(
        &mut self,
        body: &[u8],
        timeout_ms: u64,
    ) -> Result<Vec<(super::functions::Registered, RegistryKey)>, String> {
        let chunk = self.compile(body, "@user_function", "ERR Error compiling function")?;
        let loader: Function = self
            .lua
            .registry_value(&self.loader)
            .map_err(|e| format!("ERR {e}"))?;
        let deadline = (timeout_ms > 0)
            .then(|| std::time::Instant::now() + std::time::Duration::from_millis(timeout_ms));
        LOAD_DEADLINE.set(deadline.or(Some(std::time::Instant::now() + FOREVER)));
        let ran = loader.call::<(bool, Value)>(chunk);
        LOAD_DEADLINE.set(None);
        let (ok, value) = ran.map_err(|e| format!("ERR {e}"))?;
        if !ok {
            return Err(format!(
                "ERR Error registering functions: {}",
                load_error_text(&value)
            ));
        }
        let Value::Table(list) = value else {
            return Ok(Vec::new());
        };
        let mut registered = Vec::new();
        for entry in list.sequence_values::<Table>() {
            let entry = entry.map_err(|e| format!("ERR {e}"))?;
            let name: String = entry.raw_get(1).map_err(|e| format!("ERR {e}"))?;
            let callback: Function = entry.raw_get(2).map_err(|e| format!("ERR {e}"))?;
            let description = match entry.raw_get::<Value>(3) {
                Ok(Value::String(s)) => Some(s.as_bytes().to_vec()),
                _ => None,
            };
            let flags: Vec<String> = entry
                .raw_get::<Table>(4)
                .map_err(|e| format!("ERR {e}"))?
                .sequence_values::<String>()
                .collect::<mlua::Result<_>>()
                .map_err(|e| format!("ERR {e}"))?;
            let key = self
                .lua
                .create_registry_value(callback)
                .map_err(|e| format!("ERR {e}"))?;
            registered.push((
                super::functions::Registered {
                    name,
                    description,
                    flags,
                },
                key,
            ));
        }
        Ok(registered)
    }

    /// Drops the libraries compiled here when the registry changed since.
    pub fn sync_library_generation(&mut self, generation: u64) {
        if self.library_generation != generation {
            for (_, library) in self.libraries.drain() {
                for (_, key) in library.callbacks {
                    let _ = self.lua.remove_registry_value(key);
                }
            }
            self.library_generation = generation;
        }
    }

    /// The callback of a function, compiling its library here on first use,
    /// as its index in the Lua registry.
    pub fn library_function(
        &mut self,
        target: &super::functions::FunctionTarget,
    ) -> Result<std::ffi::c_int, String> {
        let current = self
            .libraries
            .get(&target.library)
            .is_some_and(|l| l.load_id == target.load_id);
        if !current {
            let functions = self.run_library(&target.body, 0)?;
            let callbacks = functions
                .into_iter()
                .map(|(registered, key)| (registered.name, key))
                .collect();
            let loaded = LoadedLibrary {
                load_id: target.load_id,
                callbacks,
            };
            if let Some(old) = self.libraries.insert(target.library.clone(), loaded) {
                for (_, key) in old.callbacks {
                    let _ = self.lua.remove_registry_value(key);
                }
            }
        }
        self.libraries
            .get(&target.library)
            .and_then(|l| l.callbacks.get(&*target.function))
            .map(|key| key.id())
            .ok_or_else(|| "ERR Function not found".to_string())
    }

    /// The error handler's index in the Lua registry (see
    /// [`Vm::function_id`]).
    pub fn error_handler_id(&self) -> std::ffi::c_int {
        self.error_handler.id()
    }

    /// After a run: collects the VM if the run left much garbage, and
    /// brings the server's total of VM memory up to date with this VM's.
    ///
    /// A script that built something large leaves it as garbage, which Lua
    /// collects only as later runs allocate: a worker that ran one such
    /// script would keep it for good. Past [`GARBAGE_MAX`] the VM is
    /// collected at once (a full collection of a VM holding little live data
    /// is cheap; limiter scripts never come near). The VM's memory is read
    /// once for both (each read takes the VM's lock).
    pub fn settle_after_run(&mut self, total: &crate::striped::StripedCount) {
        let mut now = self.lua.used_memory();
        if now > GARBAGE_MAX {
            let _ = self.lua.gc_collect();
            now = self.lua.used_memory();
        }
        let now = now as i64;
        if now != self.accounted {
            total.add(now - self.accounted);
            self.accounted = now;
        }
    }

    /// Lua 5.1 has no emergency collection: after a run that came near
    /// `limit` (one that failed on it, typically), collect before the next.
    /// Judged by the memory the last run left, as [`Vm::settle_after_run`]
    /// counted it, so a run does not read the VM's memory twice more.
    pub fn collect_if_near(&mut self, limit: usize) {
        if self.accounted as usize > limit / 2 {
            let _ = self.lua.gc_collect();
        }
    }

    /// Drops compiled functions from before the latest SCRIPT FLUSH.
    pub fn sync_generation(&mut self, generation: u64) {
        if self.generation != generation {
            self.forget_all();
            self.generation = generation;
        }
    }

    /// Forgets every compiled script (SCRIPT FLUSH).
    pub fn forget_all(&mut self) {
        for (_, key) in self.functions.drain() {
            let _ = self.lua.remove_registry_value(key);
        }
        let _ = self.lua.gc_collect();
    }
}

/// A load without a timeout (from the master, the append-only file or a
/// snapshot) still marks the thread as loading, so the hook does not take
/// it for a script run.
const FOREVER: std::time::Duration = std::time::Duration::from_secs(100 * 365 * 24 * 3600);

/// What FUNCTION LOAD reports of an error the library's code raised, as
/// Redis's luaExtractErrorInformation reads it: an `{err=...}` table's
/// text, or `ERR ` and the message.
fn load_error_text(value: &Value) -> String {
    match value {
        Value::Table(table) => match table.raw_get::<Value>("err") {
            Ok(Value::String(s)) => String::from_utf8_lossy(&s.as_bytes()).into_owned(),
            _ => "ERR unknown error".to_string(),
        },
        Value::String(s) => format!("ERR {}", String::from_utf8_lossy(&s.as_bytes())),
        Value::Error(e) => {
            let text = e.to_string();
            let text = text.split("\nstack traceback:").next().unwrap_or("");
            let text = text.strip_prefix("runtime error: ").unwrap_or(text);
            format!("ERR {text}")
        }
        other => format!("ERR {other:?}"),
    }
}

thread_local! {
    static VM: RefCell<Option<Vm>> = const { RefCell::new(None) };
}

/// Runs `f` with this thread's VM, creating it on first use. A VM that
/// cannot be created (out of memory) is an error reply, tried again next time.
pub fn with_vm<R>(f: impl FnOnce(&mut Vm) -> Result<R, String>) -> Result<R, String> {
    VM.with(|cell| {
        let mut slot = cell.borrow_mut();
        let vm = match &mut *slot {
            Some(vm) => vm,
            empty => {
                empty.insert(Vm::new().map_err(|e| format!("ERR the Lua VM could not start: {e}"))?)
            }
        };
        f(vm)
    })
}

/// SHA1 of a script body in lower-case hex, as SCRIPT LOAD returns it.
pub fn sha1(source: &[u8]) -> String {
    sha1_hex(source)
}
