//! The Lua code each worker's VM runs once as it is set up (`super::vm`):
//! the redis API's Lua side, Redis's error handler, the sandbox's last
//! step that makes the globals read-only, and FUNCTION LOAD's loader. Kept
//! apart from the VM's Rust so each reads as the Lua it is.

/// The Lua side of the redis API, around the Rust command bridge
/// (`super::raw`). The chunk name `=redis_lib` lets the error handler
/// skip these frames and report the user's line, as Redis does.
pub(super) const REDIS_LIB: &str = r#"
local sha1hex, log, call, pcall, setresp, acl_check_cmd, version, version_num = ...
local error, type = error, type
local redis = {}
redis.call = call
redis.pcall = pcall
redis.error_reply = function(msg)
  if type(msg) ~= 'string' then
    return {err='ERR wrong number or type of arguments'}
  end
  if msg:sub(1, 1) ~= '-' then msg = '-' .. msg end
  local space = msg:find(' ', 1, true)
  if space then
    return {err=msg:sub(2, space - 1) .. ' ' .. msg:sub(space + 1):gsub('[\r\n]+$', '')}
  end
  return {err='ERR ' .. msg:sub(2):gsub('[\r\n]+$', '')}
end
redis.status_reply = function(msg)
  if type(msg) ~= 'string' then
    return {err='ERR wrong number or type of arguments'}
  end
  return {ok=msg}
end
redis.sha1hex = sha1hex
redis.acl_check_cmd = acl_check_cmd
redis.log = log
redis.LOG_DEBUG, redis.LOG_VERBOSE, redis.LOG_NOTICE, redis.LOG_WARNING = 0, 1, 2, 3
redis.REDIS_VERSION, redis.REDIS_VERSION_NUM = version, version_num
redis.REPL_NONE, redis.REPL_AOF, redis.REPL_SLAVE, redis.REPL_REPLICA, redis.REPL_ALL = 0, 1, 2, 2, 3
redis.setresp = function(v)
  if v ~= 2 and v ~= 3 then error("RESP version must be 2 or 3.", 0) end
  setresp(v)
end
redis.set_repl = function(v) end
redis.replicate_commands = function() return true end
redis.breakpoint = function() return false end
redis.debug = function() end
return redis
"#;

/// Redis's `__redis__err__handler`, extended to skip the `=redis_lib` frames
/// and to unwrap errors raised by redis.call (which come from Rust); plus a
/// `pcall` that hands scripts such errors as `{err=...}` tables, as Redis does.
pub(super) const ERROR_HANDLER: &str = r#"
local dbg, pcall, select, unpack, counted = ...
local type, tostring, rawget = type, tostring, rawget
-- An error raised from Rust arrives as userdata: redis.call's carries the
-- reply's text; a library's (cjson) reads "runtime error: <message>".
local function unwrap(err)
  local text = tostring(err)
  local cut = text:find('\nstack traceback:', 1, true)
  if cut then text = text:sub(1, cut - 1) end
  if text:sub(1, 15) == 'runtime error: ' then return text:sub(16), true end
  return text, false
end
local function pack(...) return {n=select('#', ...), ...} end
local safe_pcall = function(f, ...)
  local r = pack(pcall(f, ...))
  if not r[1] then
    -- Redis 7.0 hands pcall the error text, whatever raised it.
    if type(r[2]) == 'userdata' then
      r[2] = (unwrap(r[2]))
    elseif type(r[2]) == 'table' and type(rawget(r[2], 'err')) == 'string' then
      r[2] = rawget(r[2], 'err')
    end
  end
  return unpack(r, 1, r.n)
end
return function(err)
  local level = 2
  local i = dbg.getinfo(level, 'nSl')
  while i and (i.what == 'C' or i.source == '=redis_lib') do
    level = level + 1
    i = dbg.getinfo(level, 'nSl')
  end
  if type(err) == 'userdata' and dbg.getmetatable(err) ~= nil then
    local text, library = unwrap(err)
    if library then
      -- As luaL_error reports it from a library function: with the
      -- caller's position.
      local where = i and (i.short_src .. ':' .. i.currentline .. ': ') or ''
      text = 'ERR ' .. where .. text
    end
    local raised = err
    err = {err=text}
    -- As Redis marks redis.call's errors: counted when the command failed.
    if counted(raised) then err['ignore_error_stats_update'] = true end
  elseif type(err) ~= 'table' then
    err = {err='ERR ' .. tostring(err)}
  end
  if i then
    err['source'] = i.source
    err['line'] = i.currentline
  end
  return err
end, safe_pcall
"#;

/// The sandbox's last step, as Redis 7.0's `scriptingInit`: unknown globals
/// are reported, `pcall`-like functions cannot swallow SCRIPT KILL, and then
/// the globals, every table reachable from them, their metatables and the
/// string metatable are made read-only (`luaSetTableProtectionRecursively`).
/// From then on no script can change what another script sees.
pub(super) const PROTECT_GLOBALS: &str = r#"
local globals, set_readonly, is_readonly, recheck = ...
local setmetatable, getmetatable, error, tostring, next, type =
  setmetatable, getmetatable, error, tostring, next, type
setmetatable(globals, {
  __index = function(_, name)
    error("Script attempted to access nonexistent global variable '" .. tostring(name) .. "'", 2)
  end,
})
-- After SCRIPT KILL (or at shutdown) the hook raises an error every 100k
-- instructions; a script that catches it must not carry on, so every
-- function that catches errors raises it again once the run is stopped.
local function rethrow_if_stopped(ok, ...)
  if not ok then recheck() end
  return ok, ...
end
local pcall, xpcall, resume = globals.pcall, globals.xpcall, globals.coroutine.resume
globals.pcall = function(...) return rethrow_if_stopped(pcall(...)) end
globals.xpcall = function(...) return rethrow_if_stopped(xpcall(...)) end
globals.coroutine.resume = function(...) return rethrow_if_stopped(resume(...)) end
local function protect(t)
  if is_readonly(t) then return end
  set_readonly(t, true)
  for _, value in next, t do
    if type(value) == 'table' then protect(value) end
  end
  local meta = getmetatable(t)
  if type(meta) == 'table' then protect(meta) end
end
protect(getmetatable(''))
protect(globals)
"#;

/// FUNCTION LOAD's run of a library's code, as Redis's luaEngineCreate:
/// the code sees only `redis.register_function`, `redis.log` and the
/// version (every other global is "nonexistent"), may not set globals,
/// and registers its functions. Each library gets a globals table of its
/// own, empty and read-only, whose lookups go to that API while it loads
/// and to the server's globals once it has (where KEYS and ARGV, an EVAL's,
/// are not a function's to see). Returns `(true, registered)` with each
/// function as `{name, callback, description or false, flags}`, or
/// `(false, error)`.
pub(super) const LIBRARY_LOADER: &str = r#"
local setfenv, pcall, set_readonly, globals, log, version, version_num = ...
local setmetatable, getmetatable, pairs, next, select, type, tostring, error =
  setmetatable, getmetatable, pairs, next, select, type, tostring, error
local FLAGS = {['no-writes']=true, ['allow-oom']=true, ['allow-stale']=true,
  ['no-cluster']=true, ['allow-cross-slot-keys']=true}
local function fail(message) error({err='ERR ' .. message}) end
local function missing(_, name)
  error("Script attempted to access nonexistent global variable '" .. tostring(name) .. "'", 2)
end
local function is_string(v) return type(v) == 'string' or type(v) == 'number' end
-- What a function sees as globals once loaded: a copy of the server's
-- (final once the VM is set up, and read-only), without an EVAL's KEYS and
-- ARGV, under the same metatable reporting unknown names. A table, not a
-- function, behind __index, so a function's global lookups cost what a
-- script's do.
local runtime_globals
local function function_globals()
  if not runtime_globals then
    runtime_globals = {}
    for name, value in next, globals do
      if name ~= 'KEYS' and name ~= 'ARGV' then runtime_globals[name] = value end
    end
    setmetatable(runtime_globals, getmetatable(globals))
    set_readonly(runtime_globals, true)
  end
  return runtime_globals
end
local function read_flags(given)
  local flags = {}
  for _, flag in pairs(given) do
    if not is_string(flag) then return nil end
    flag = tostring(flag):lower()
    if not FLAGS[flag] then return nil end
    flags[#flags + 1] = flag
  end
  return flags
end
return function(chunk)
  local registered, names, loading = {}, {}, true
  local function register(...)
    if not loading then
      fail('redis.register_function can only be called on FUNCTION LOAD command')
    end
    local count = select('#', ...)
    if count < 1 or count > 2 then fail('wrong number of arguments to redis.register_function') end
    local name, callback, description, flags
    if count == 1 then
      local named = ...
      if type(named) ~= 'table' then
        fail('calling redis.register_function with a single argument is only applicable to Lua table (representing named arguments).')
      end
      for key, value in pairs(named) do
        if not is_string(key) then fail('named argument key given to redis.register_function is not a string') end
        key = tostring(key):lower()
        if key == 'function_name' then
          if not is_string(value) then fail('function_name argument given to redis.register_function must be a string') end
          name = tostring(value)
        elseif key == 'description' then
          if not is_string(value) then fail('description argument given to redis.register_function must be a string') end
          description = tostring(value)
        elseif key == 'callback' then
          if type(value) ~= 'function' then fail('callback argument given to redis.register_function must be a function') end
          callback = value
        elseif key == 'flags' then
          if type(value) ~= 'table' then fail('flags argument to redis.register_function must be a table representing function flags') end
          flags = read_flags(value)
          if not flags then fail('unknown flag given') end
        else
          fail('unknown argument given to redis.register_function')
        end
      end
      if not name then fail('redis.register_function must get a function name argument') end
      if not callback then fail('redis.register_function must get a callback argument') end
    else
      local first, second = ...
      if not is_string(first) then fail('first argument to redis.register_function must be a string') end
      if type(second) ~= 'function' then fail('second argument to redis.register_function must be a function') end
      name, callback = tostring(first), second
    end
    if name == '' or name:find('[^%w_]') then
      fail('Library names can only contain letters, numbers, or underscores(_) and must be at least one character long')
    end
    if names[name:lower()] then fail('Function already exists in the library') end
    names[name:lower()] = true
    registered[#registered + 1] = {name, callback, description or false, flags or {}}
  end
  local api_redis = setmetatable({
    register_function = register, log = log,
    LOG_DEBUG = 0, LOG_VERBOSE = 1, LOG_NOTICE = 2, LOG_WARNING = 3,
    REDIS_VERSION = version, REDIS_VERSION_NUM = version_num,
  }, {__index = missing})
  -- `server` as well, Valkey's name for the same table (libraries written
  -- for Valkey, rate-limiter-flexible's among them, register with it).
  local api = setmetatable({redis = api_redis, server = api_redis}, {__index = missing})
  for _, t in pairs({api_redis, api}) do
    set_readonly(t, true)
    set_readonly(getmetatable(t), true)
  end
  local meta = {__index = api}
  local env = setmetatable({}, meta)
  set_readonly(env, true)
  set_readonly(meta, true)
  setfenv(chunk, env)
  local ok, err = pcall(chunk)
  loading = false
  set_readonly(meta, false)
  meta.__index = function_globals()
  set_readonly(meta, true)
  if not ok then return false, err end
  return true, registered
end
"#;
