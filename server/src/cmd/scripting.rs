//! Scripting commands: EVAL EVALSHA EVAL_RO EVALSHA_RO and SCRIPT.

use super::args::{int_arg, is};
use super::Ctx;
use crate::resp::Reply;
use crate::scripting::{self, Named};

/// Arguments of a command, borrowed.
type Args<'a> = &'a [&'a [u8]];

/// Splits `script numkeys key... arg...` after validating numkeys as Redis does.
fn keys_and_args<'a>(argv: Args<'a>) -> Result<(Args<'a>, Args<'a>), Reply> {
    let numkeys = int_arg(argv[2])?;
    if numkeys < 0 {
        return Err(Reply::error("ERR Number of keys can't be negative"));
    }
    if numkeys as usize > argv.len() - 3 {
        return Err(Reply::error(
            "ERR Number of keys can't be greater than number of args",
        ));
    }
    let split = 3 + numkeys as usize;
    Ok((&argv[3..split], &argv[split..]))
}

fn eval_generic(ctx: &mut Ctx<'_>, argv: &[&[u8]], by_sha: bool, read_only: bool) -> Reply {
    // Shown before it runs, so that the script's commands follow it.
    if ctx.shared.monitors.any() {
        super::feed_monitors(ctx, argv);
    }
    let (keys, args) = match keys_and_args(argv) {
        Ok(split) => split,
        Err(reply) => return reply,
    };
    let shared = ctx.shared;
    let scripts = &shared.scripts;
    let named = if by_sha {
        Named::Sha(argv[1])
    } else {
        Named::Body(argv[1])
    };
    // The hot path of every gateway: a script this worker ran before, lent
    // from its own index (no lock, no SHA1).
    let ran_here = scripts.with_found_here(named, |found| {
        found.map(|script| scripting::eval(ctx, script, keys, args, read_only))
    });
    if let Some(reply) = ran_here {
        return reply;
    }
    let generation = scripts.generation();
    if by_sha {
        // A known limiter script is always loaded, SCRIPT FLUSH or not.
        if let Some(known) = scripts.known(argv[1]) {
            scripts.remember_here(generation, named, known);
            return scripting::eval(ctx, known, keys, args, read_only);
        }
    }
    let (script, new) = if by_sha {
        match scripts.cached(argv[1]) {
            Some(script) => (script, false),
            None => return Reply::error("NOSCRIPT No matching script. Please use EVAL."),
        }
    } else {
        match scripts.load_telling(argv[1]) {
            Ok(loaded) => loaded,
            Err(message) => return Reply::error(message),
        }
    };
    let reply = scripting::eval(ctx, &script, keys, args, read_only);
    // A new body that compiles is kept (the run compiled it already: this
    // finds it in the worker's VM); one that does not leaves the cache, as
    // in Redis (SCRIPT EXISTS then says 0). Only a body that compiles is
    // remembered here: one that does not may be leaving the cache.
    let compiled =
        scripting::vm::with_vm(|vm| vm.function_id(&script.sha, &script.body).map(|_| ())).is_ok();
    if new {
        if compiled {
            super::propagate::script_loaded(ctx, &script);
        } else {
            scripts.forget(&script.sha);
        }
    }
    if compiled {
        scripts.remember_here(generation, named, &script);
    }
    reply
}

/// EVAL script numkeys [key ...] [arg ...]
pub fn eval(ctx: &mut Ctx<'_>, argv: &[&[u8]]) -> Reply {
    eval_generic(ctx, argv, false, false)
}

/// EVALSHA sha1 numkeys [key ...] [arg ...]
pub fn evalsha(ctx: &mut Ctx<'_>, argv: &[&[u8]]) -> Reply {
    eval_generic(ctx, argv, true, false)
}

/// EVAL_RO script numkeys [key ...] [arg ...]
pub fn eval_ro(ctx: &mut Ctx<'_>, argv: &[&[u8]]) -> Reply {
    eval_generic(ctx, argv, false, true)
}

/// EVALSHA_RO sha1 numkeys [key ...] [arg ...]
pub fn evalsha_ro(ctx: &mut Ctx<'_>, argv: &[&[u8]]) -> Reply {
    eval_generic(ctx, argv, true, true)
}

/// SCRIPT LOAD script
pub fn script_load(ctx: &mut Ctx<'_>, argv: &[&[u8]]) -> Reply {
    let (script, new) = match ctx.shared.scripts.load_telling(argv[2]) {
        Ok(loaded) => loaded,
        Err(message) => return Reply::error(message),
    };
    // Compile now so a syntax error is reported by LOAD, as in Redis.
    let compiled =
        scripting::vm::with_vm(|vm| vm.function_id(&script.sha, &script.body).map(|_| ()));
    match compiled {
        Ok(()) => {
            if new {
                super::propagate::script_loaded(ctx, &script);
            }
            Reply::Bulk(script.sha.clone().into_bytes())
        }
        Err(message) => {
            ctx.shared.scripts.forget(&script.sha);
            Reply::error(message)
        }
    }
}

/// SCRIPT EXISTS sha1 [sha1 ...]
pub fn script_exists(ctx: &mut Ctx<'_>, argv: &[&[u8]]) -> Reply {
    Reply::Array(
        argv[2..]
            .iter()
            .map(|sha| Reply::Int(ctx.shared.scripts.get(sha).is_some() as i64))
            .collect(),
    )
}

/// SCRIPT FLUSH [ASYNC | SYNC]
pub fn script_flush(ctx: &mut Ctx<'_>, argv: &[&[u8]]) -> Reply {
    match argv.len() {
        2 => {}
        3 if is(argv[2], "async") || is(argv[2], "sync") => {}
        _ => return Reply::error("ERR SCRIPT FLUSH only support SYNC|ASYNC option"),
    }
    ctx.shared.scripts.flush();
    super::propagate::scripts_flushed(ctx);
    Reply::Ok
}

/// SCRIPT KILL
pub fn script_kill(ctx: &mut Ctx<'_>, _argv: &[&[u8]]) -> Reply {
    ctx.shared.scripts.kill(false)
}

/// SCRIPT HELP
pub fn script_help(_ctx: &mut Ctx<'_>, _argv: &[&[u8]]) -> Reply {
    super::server::help_reply(
        "SCRIPT",
        &[
            "EXISTS <sha1> [<sha1> ...]",
            "    Return information about the existence of the scripts in the script cache.",
            "FLUSH [ASYNC|SYNC]",
            "    Flush the Lua scripts cache. Very dangerous on replicas.",
            "KILL",
            "    Kill the currently executing Lua script.",
            "LOAD <script>",
            "    Load a script into the scripts cache without executing it.",
        ],
    )
}
