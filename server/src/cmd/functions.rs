//! Function commands: FUNCTION LOAD DELETE FLUSH LIST STATS KILL DUMP
//! RESTORE HELP, FCALL and FCALL_RO (Redis 7.0's functions.c).

use super::args::{int_arg, is};
use super::Ctx;
use crate::resp::Reply;
use crate::scripting::functions::{Function, RestorePolicy};
use crate::scripting::{self, functions};

/// How long a library's code may run at FUNCTION LOAD (Redis's
/// LOAD_TIMEOUT_MS); none for the master's stream or the append-only file.
const LOAD_TIMEOUT_MS: u64 = 500;

/// FUNCTION LOAD [REPLACE] function-code
pub fn function_load(ctx: &mut Ctx<'_>, argv: &[&[u8]]) -> Reply {
    let mut replace = false;
    let mut at = 2;
    while at < argv.len() - 1 {
        if is(argv[at], "replace") {
            replace = true;
            at += 1;
            continue;
        }
        return Reply::error_bytes([b"ERR Unknown option given: ".as_slice(), argv[at]].concat());
    }
    if at >= argv.len() {
        return Reply::error("ERR Function code is missing");
    }
    let timeout = if ctx.must_obey() { 0 } else { LOAD_TIMEOUT_MS };
    match ctx
        .shared
        .scripts
        .functions
        .load(argv[at], replace, timeout)
    {
        Ok(name) => Reply::Bulk(name.into_bytes()),
        Err(text) => Reply::error(text),
    }
}

/// FUNCTION DELETE library-name
pub fn function_delete(ctx: &mut Ctx<'_>, argv: &[&[u8]]) -> Reply {
    if ctx.shared.scripts.functions.delete(argv[2]) {
        Reply::Ok
    } else {
        Reply::error("ERR Library not found")
    }
}

/// FUNCTION FLUSH [ASYNC|SYNC]
pub fn function_flush(ctx: &mut Ctx<'_>, argv: &[&[u8]]) -> Reply {
    match argv.len() {
        2 => {}
        3 if is(argv[2], "async") || is(argv[2], "sync") => {}
        3 => return Reply::error("ERR FUNCTION FLUSH only supports SYNC|ASYNC option"),
        _ => return Reply::error_bytes(super::error::subcommand_syntax("FUNCTION", argv[1])),
    }
    ctx.shared.scripts.functions.flush();
    Reply::Ok
}

/// FUNCTION LIST [LIBRARYNAME pattern] [WITHCODE]
pub fn function_list(ctx: &mut Ctx<'_>, argv: &[&[u8]]) -> Reply {
    let mut with_code = false;
    let mut pattern: Option<&[u8]> = None;
    let mut at = 2;
    while at < argv.len() {
        if !with_code && is(argv[at], "withcode") {
            with_code = true;
        } else if pattern.is_none() && is(argv[at], "libraryname") {
            if at >= argv.len() - 1 {
                return Reply::error("ERR library name argument was not given");
            }
            at += 1;
            pattern = Some(argv[at]);
        } else {
            return Reply::error_bytes([b"ERR Unknown argument ".as_slice(), argv[at]].concat());
        }
        at += 1;
    }
    let libraries = ctx.shared.scripts.functions.libraries();
    let listed = libraries
        .iter()
        .filter(|library| {
            pattern.is_none_or(|p| crate::glob::glob_match(p, library.name.as_bytes(), true))
        })
        .map(|library| {
            let mut fields = vec![
                (
                    Reply::bulk(b"library_name"),
                    Reply::bulk(library.name.as_bytes()),
                ),
                (
                    Reply::bulk(b"engine"),
                    Reply::bulk(functions::ENGINE.as_bytes()),
                ),
                (
                    Reply::bulk(b"functions"),
                    Reply::Array(
                        library
                            .functions
                            .iter()
                            .map(|f| listed_function(f))
                            .collect(),
                    ),
                ),
            ];
            if with_code {
                fields.push((Reply::bulk(b"library_code"), Reply::bulk(&library.code)));
            }
            Reply::Map(fields)
        })
        .collect();
    Reply::Array(listed)
}

fn listed_function(function: &Function) -> Reply {
    Reply::Map(vec![
        (Reply::bulk(b"name"), Reply::bulk(function.name.as_bytes())),
        (
            Reply::bulk(b"description"),
            function
                .description
                .as_deref()
                .map_or(Reply::Nil, Reply::bulk),
        ),
        (
            Reply::bulk(b"flags"),
            Reply::Set(
                function
                    .flag_names
                    .iter()
                    .map(|flag| Reply::status(flag))
                    .collect(),
            ),
        ),
    ])
}

/// FUNCTION STATS
pub fn function_stats(ctx: &mut Ctx<'_>, _argv: &[&[u8]]) -> Reply {
    let scripts = &ctx.shared.scripts;
    if scripts.busy_eval() {
        return Reply::error(scripting::BUSY);
    }
    let (libraries, functions) = scripts.functions.counts();
    Reply::Map(vec![
        (Reply::bulk(b"running_script"), scripts.running_function()),
        (
            Reply::bulk(b"engines"),
            Reply::Map(vec![(
                Reply::bulk(functions::ENGINE.as_bytes()),
                Reply::Map(vec![
                    (
                        Reply::bulk(b"libraries_count"),
                        Reply::Int(libraries as i64),
                    ),
                    (
                        Reply::bulk(b"functions_count"),
                        Reply::Int(functions as i64),
                    ),
                ]),
            )]),
        ),
    ])
}

/// FUNCTION KILL
pub fn function_kill(ctx: &mut Ctx<'_>, _argv: &[&[u8]]) -> Reply {
    ctx.shared.scripts.kill_function()
}

/// FUNCTION DUMP
pub fn function_dump(ctx: &mut Ctx<'_>, _argv: &[&[u8]]) -> Reply {
    let libraries = ctx.shared.scripts.functions.libraries();
    let compress = ctx.shared.config.read().rdbcompression;
    Reply::Bulk(tally_rdb::dump_functions(
        libraries.iter().map(|l| l.code.as_slice()),
        compress,
    ))
}

/// FUNCTION RESTORE serialized-value [FLUSH|APPEND|REPLACE]
pub fn function_restore(ctx: &mut Ctx<'_>, argv: &[&[u8]]) -> Reply {
    if argv.len() > 4 {
        return Reply::error_bytes(super::error::subcommand_syntax("FUNCTION", argv[1]));
    }
    let policy =
        match argv.get(3) {
            None => RestorePolicy::Append,
            Some(p) if is(p, "flush") => RestorePolicy::Flush,
            Some(p) if is(p, "append") => RestorePolicy::Append,
            Some(p) if is(p, "replace") => RestorePolicy::Replace,
            Some(_) => return Reply::error(
                "ERR Wrong restore policy given, value should be either FLUSH, APPEND or REPLACE.",
            ),
        };
    let codes = match tally_rdb::restore_functions(argv[2]) {
        Ok(codes) => codes,
        Err(tally_rdb::FunctionsPayloadError::Footer) => {
            return Reply::error("ERR DUMP payload version or checksum are wrong")
        }
        Err(tally_rdb::FunctionsPayloadError::NotAFunction) => {
            return Reply::error("ERR given type is not a function")
        }
        Err(tally_rdb::FunctionsPayloadError::Unreadable) => {
            return Reply::error("ERR failed loading the given functions payload")
        }
    };
    match ctx.shared.scripts.functions.restore(&codes, policy) {
        Ok(()) => Reply::Ok,
        Err(text) => Reply::error(text),
    }
}

/// FUNCTION HELP
pub fn function_help(_ctx: &mut Ctx<'_>, _argv: &[&[u8]]) -> Reply {
    super::server::help_reply(
        "FUNCTION",
        &[
            "LOAD [REPLACE] <FUNCTION CODE>",
            "    Create a new library with the given library name and code.",
            "DELETE <LIBRARY NAME>",
            "    Delete the given library.",
            "LIST [LIBRARYNAME PATTERN] [WITHCODE]",
            "    Return general information on all the libraries:",
            "    * Library name",
            "    * The engine used to run the Library",
            "    * Library description",
            "    * Functions list",
            "    * Library code (if WITHCODE is given)",
            "    It also possible to get only function that matches a pattern using LIBRARYNAME argument.",
            "STATS",
            "    Return information about the current function running:",
            "    * Function name",
            "    * Command used to run the function",
            "    * Duration in MS that the function is running",
            "    If no function is running, return nil",
            "    In addition, returns a list of available engines.",
            "KILL",
            "    Kill the current running function.",
            "FLUSH [ASYNC|SYNC]",
            "    Delete all the libraries.",
            "    When called without the optional mode argument, the behavior is determined by the",
            "    lazyfree-lazy-user-flush configuration directive. Valid modes are:",
            "    * ASYNC: Asynchronously flush the libraries.",
            "    * SYNC: Synchronously flush the libraries.",
            "DUMP",
            "    Return a serialized payload representing the current libraries, can be restored using FUNCTION RESTORE command",
            "RESTORE <PAYLOAD> [FLUSH|APPEND|REPLACE]",
            "    Restore the libraries represented by the given payload, it is possible to give a restore policy to",
            "    control how to handle existing libraries (default APPEND):",
            "    * FLUSH: delete all existing libraries.",
            "    * APPEND: appends the restored libraries to the existing libraries. On collision, abort.",
            "    * REPLACE: appends the restored libraries to the existing libraries, On collision, replace the old",
            "      libraries with the new libraries (notice that even on this option there is a chance of failure",
            "      in case of functions name collision with another library).",
        ],
    )
}

fn fcall_generic(ctx: &mut Ctx<'_>, argv: &[&[u8]], read_only: bool) -> Reply {
    // Shown before it runs, so that the function's commands follow it.
    if ctx.shared.monitors.any() {
        super::feed_monitors(ctx, argv);
    }
    let Some(function) = ctx.shared.scripts.functions.get(argv[1]) else {
        return Reply::error("ERR Function not found");
    };
    let Ok(numkeys) = int_arg(argv[2]) else {
        return Reply::error("ERR Bad number of keys provided");
    };
    if numkeys > (argv.len() - 3) as i64 {
        return Reply::error("ERR Number of keys can't be greater than number of args");
    }
    if numkeys < 0 {
        return Reply::error("ERR Number of keys can't be negative");
    }
    if read_only && !function.script.flags.no_writes {
        return Reply::error("ERR Can not execute a script with write flag using *_ro command.");
    }
    let split = 3 + numkeys as usize;
    scripting::call_function(
        ctx,
        &function.script,
        argv,
        &argv[3..split],
        &argv[split..],
        read_only,
    )
}

/// FCALL function numkeys [key ...] [arg ...]
pub fn fcall(ctx: &mut Ctx<'_>, argv: &[&[u8]]) -> Reply {
    fcall_generic(ctx, argv, false)
}

/// FCALL_RO function numkeys [key ...] [arg ...]
pub fn fcall_ro(ctx: &mut Ctx<'_>, argv: &[&[u8]]) -> Reply {
    fcall_generic(ctx, argv, true)
}
