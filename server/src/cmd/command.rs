//! COMMAND and its subcommands (COUNT LIST INFO DOCS GETKEYS GETKEYSANDFLAGS
//! HELP): the command table as clients introspect it.

// Redis 7.0's ACL categories in its order: one list, kept with the ACL
// selectors that use it.
use super::args::{glob_match, is};
use super::error;
use super::server::help_reply;
use super::Ctx;
use crate::catalog::{flags, key_flags, registry, Command};
use crate::resp::Reply;

fn flag_names(command: &Command) -> Vec<Reply> {
    flags::NAMES
        .iter()
        .filter(|(bit, _)| command.flags & bit != 0)
        .map(|(_, name)| Reply::status(name))
        .collect()
}

fn acl_categories(command: &Command) -> Vec<Reply> {
    command
        .acl_category_names()
        .into_iter()
        .map(|name| Reply::Status(format!("@{name}").into()))
        .collect()
}

/// One COMMAND INFO entry in Redis 7's ten-field form.
fn command_info(command: &'static Command) -> Reply {
    Reply::Array(vec![
        Reply::bulk(command.name.as_bytes()),
        Reply::Int(command.arity as i64),
        Reply::Set(flag_names(command)),
        Reply::Int(command.keys.first as i64),
        Reply::Int(command.keys.last as i64),
        Reply::Int(command.keys.step as i64),
        Reply::Set(acl_categories(command)),
        crate::catalog::docs::tips(command),
        crate::catalog::docs::key_specs(command),
        subcommands_info(command),
    ])
}

/// The subcommands' entries; a command without any has an empty set
/// there, as Redis's addReplyCommandSubCommands replies (`~0` in RESP3).
fn subcommands_info(command: &'static Command) -> Reply {
    if command.subcommands.is_empty() {
        return Reply::Set(Vec::new());
    }
    Reply::Array(command.subcommands.iter().map(command_info).collect())
}

/// COMMAND (every command's info)
pub fn command(_ctx: &mut Ctx<'_>, _argv: &[&[u8]]) -> Reply {
    Reply::Array(registry().top_level().map(command_info).collect())
}

/// COMMAND COUNT
pub fn command_count(_ctx: &mut Ctx<'_>, _argv: &[&[u8]]) -> Reply {
    Reply::Int(registry().top_level().count() as i64)
}

/// COMMAND LIST [FILTERBY MODULE name | ACLCAT category | PATTERN pattern]
///
/// Commands and their subcommands by full name (`acl|cat`), as Redis 7.0
/// lists them, each filtered on its own (a subcommand's own categories, its
/// full name against the pattern).
pub fn command_list(_ctx: &mut Ctx<'_>, argv: &[&[u8]]) -> Reply {
    let names = registry().all().map(|c| c.name);
    let filtered: Vec<&str> = match argv.len() {
        2 => names.collect(),
        5 if is(argv[2], "filterby") => {
            let value = argv[4];
            if is(argv[3], "pattern") {
                names
                    .filter(|n| glob_match(value, n.as_bytes(), true))
                    .collect()
            } else if is(argv[3], "aclcat") {
                registry()
                    .all()
                    .filter(|c| {
                        c.acl_category_names()
                            .iter()
                            .any(|cat| cat.as_bytes().eq_ignore_ascii_case(value))
                    })
                    .map(|c| c.name)
                    .collect()
            } else if is(argv[3], "module") {
                Vec::new()
            } else {
                return Reply::error(error::SYNTAX);
            }
        }
        _ => return Reply::error(error::SYNTAX),
    };
    Reply::Array(
        filtered
            .into_iter()
            .map(|n| Reply::bulk(n.as_bytes()))
            .collect(),
    )
}

/// COMMAND INFO [command-name ...]
pub fn command_info_cmd(_ctx: &mut Ctx<'_>, argv: &[&[u8]]) -> Reply {
    if argv.len() == 2 {
        return Reply::Array(registry().top_level().map(command_info).collect());
    }
    Reply::Array(
        argv[2..]
            .iter()
            .map(|name| match registry().lookup_full(name) {
                Some(command) => command_info(command),
                None => Reply::NilArray,
            })
            .collect(),
    )
}

/// COMMAND DOCS [command-name ...]
pub fn command_docs(_ctx: &mut Ctx<'_>, argv: &[&[u8]]) -> Reply {
    if argv.len() == 2 {
        return Reply::Map(crate::catalog::docs::all());
    }
    Reply::Map(
        argv[2..]
            .iter()
            .filter_map(|name| registry().lookup_full(name))
            .map(|command| {
                (
                    Reply::bulk(command.name.as_bytes()),
                    crate::catalog::docs::reply(command),
                )
            })
            .collect(),
    )
}

/// COMMAND GETKEYS command [arg ...]
pub fn command_getkeys(_ctx: &mut Ctx<'_>, argv: &[&[u8]]) -> Reply {
    getkeys(argv, false)
}

/// COMMAND GETKEYSANDFLAGS command [arg ...]: each key with what the
/// command does to it (`crate::catalog::key_flags`).
pub fn command_getkeysandflags(_ctx: &mut Ctx<'_>, argv: &[&[u8]]) -> Reply {
    getkeys(argv, true)
}

fn getkeys(argv: &[&[u8]], with_flags: bool) -> Reply {
    let target = &argv[2..];
    let command = match super::resolve(target) {
        Ok(command) => command,
        Err(_) => return Reply::error("ERR Invalid command specified"),
    };
    // Redis's order: keys at all, then arity, then the keys of this call.
    let counted = crate::catalog::counted_keys(command.name);
    // Redis's doesCommandHaveKeys: shard channels are in key specs flagged
    // not_key, routed like keys but not keys.
    let only_channels = command
        .doc
        .key_specs
        .iter()
        .all(|spec| spec.flags.contains(&"not_key"));
    let movable = command.flags & crate::catalog::flags::MOVABLE_KEYS != 0;
    if (command.keys.first <= 0 && !movable) || only_channels {
        return Reply::error("ERR The command has no key arguments");
    }
    if !super::arity_ok(command.arity, target.len()) {
        return Reply::error("ERR Invalid number of arguments specified for command");
    }
    let keys = if with_flags {
        key_flags::keys_and_flags(command, target)
    } else {
        let none: &'static [&'static str] = &[];
        command
            .key_positions(target)
            .into_iter()
            .map(|at| (at, none))
            .collect()
    };
    // genericGetKeys: no keys when the count is out of range, an error
    // unless the command is flagged NO_MANDATORY_KEYS.
    let mandatory = counted.is_some_and(|(_, _, mandatory)| mandatory) || command.name == "msetex";
    if keys.is_empty() && mandatory {
        return Reply::error("ERR Invalid arguments specified for command");
    }
    Reply::Array(
        keys.into_iter()
            .map(|(at, flags)| {
                let key = Reply::bulk(target[at]);
                if with_flags {
                    let flags = flags.iter().map(|f| Reply::status(f)).collect();
                    Reply::Array(vec![key, Reply::Set(flags)])
                } else {
                    key
                }
            })
            .collect(),
    )
}

/// COMMAND HELP
pub fn command_help(_ctx: &mut Ctx<'_>, _argv: &[&[u8]]) -> Reply {
    help_reply(
        "COMMAND",
        &[
            "(no subcommand)",
            "    Return details about all Redis commands.",
            "COUNT",
            "    Return the total number of commands in this Redis server.",
            "LIST",
            "    Return a list of all commands in this Redis server.",
            "INFO [<command-name> ...]",
            "    Return details about multiple Redis commands.",
            "    If no command names are given, documentation details for all",
            "    commands are returned.",
            "DOCS [<command-name> ...]",
            "    Return documentation details about multiple Redis commands.",
            "    If no command names are given, documentation details for all",
            "    commands are returned.",
            "GETKEYS <full-command>",
            "    Return the keys from a full Redis command.",
            "GETKEYSANDFLAGS <full-command>",
            "    Return the keys and the access flags from a full Redis command.",
        ],
    )
}
