//! ACL: users and their permissions, as Redis 7.0's ACL command family
//! (see `crate::acl` for the model and the checks).

use super::args::parse_i64;
use super::server::help_reply;
use super::{error, Ctx};
use std::sync::Arc;

use crate::acl::user::{self, User, CATEGORIES};
use crate::acl::{Context, Denied, LogEntry};
use crate::catalog::{registry, Command};
use crate::resp::Reply;

fn bulk(text: impl Into<Vec<u8>>) -> Reply {
    Reply::Bulk(text.into())
}

/// Reads the client's user again after a change to the users; a user
/// that was deleted leaves the client able to run nothing (ACL DELUSER
/// also closes its connections).
pub fn refresh_user(ctx: &mut Ctx<'_>) {
    let acl = &ctx.shared.acl;
    let generation = acl.generation();
    let name = ctx.client.user.name.clone();
    ctx.client.user = acl
        .user(&name)
        .unwrap_or_else(|| Arc::new(User::new(&name)));
    ctx.client.acl_generation = generation;
}

/// Logs a refused command in ACL LOG: the command's name, or the key or
/// channel refused; a script's refusals name the client that ran it.
pub fn log_denial(
    ctx: &Ctx<'_>,
    user: &User,
    command: &Command,
    argv: &[&[u8]],
    denied: Denied,
    context: Context,
) {
    let (reason, object) = match denied {
        Denied::Command => ("command", command.name.as_bytes().to_vec()),
        Denied::Key(at) => ("key", argv[at].to_vec()),
        Denied::Channel(at) => ("channel", argv[at].to_vec()),
    };
    log_event(ctx, &user.name, reason, object, context);
}

/// Adds an event to ACL LOG for the calling client.
pub fn log_event(
    ctx: &Ctx<'_>,
    username: &str,
    reason: &'static str,
    object: Vec<u8>,
    context: Context,
) {
    let now_ms = ctx.shared.clock.now_ms();
    ctx.shared.acl.log(LogEntry {
        count: 1,
        reason,
        context: context.name(),
        object,
        username: username.to_string(),
        created_ms: now_ms,
        client_info: super::client::describe(&ctx.client.info, now_ms, 0),
    });
}

/// ACL SETUSER username [rule ...]: all rules or none, as Redis applies
/// them to a copy first.
pub fn acl_setuser(ctx: &mut Ctx<'_>, argv: &[&[u8]]) -> Reply {
    let name = argv[2];
    if name.iter().any(|&b| b.is_ascii_whitespace() || b == 0) {
        return Reply::error("ERR Usernames can't contain spaces or null characters");
    }
    let name = String::from_utf8_lossy(name).into_owned();
    match set_user(ctx, &name, &argv[3..]) {
        Ok(()) => Reply::Ok,
        Err(text) => Reply::error_bytes(format!("ERR {text}").into_bytes()),
    }
}

/// Applies rules to a user (created if new), all or none; Redis's error
/// text on failure.
pub fn set_user(ctx: &Ctx<'_>, name: &str, rules: &[&[u8]]) -> Result<(), String> {
    let acl = &ctx.shared.acl;
    let all_channels = acl
        .channels_by_default
        .load(std::sync::atomic::Ordering::Relaxed);
    let mut changed = acl
        .user(name)
        .map(|u| (*u).clone())
        .unwrap_or_else(|| User::created(name, all_channels));
    changed.channels_by_default = all_channels;
    user::apply_rules(&mut changed, rules)?;
    let before = acl.user(name);
    let channels_narrowed = before.is_some_and(|old| {
        let channels = |u: &User| {
            u.selectors
                .iter()
                .map(|s| (s.all_channels, s.channels.clone()))
                .collect::<Vec<_>>()
        };
        channels(&old) != channels(&changed) && !changed.selectors.iter().any(|s| s.all_channels)
    });
    acl.put(changed);
    if channels_narrowed {
        // Redis closes subscribers whose channels the new rules may no
        // longer allow (ACLKillPubsubClientsIfNeeded); tally closes every
        // subscribed client of the user whose channel rules changed.
        for client in ctx.shared.clients.snapshot() {
            let subscribed = client.io.sub.load(std::sync::atomic::Ordering::Relaxed)
                + client.io.psub.load(std::sync::atomic::Ordering::Relaxed)
                > 0;
            if subscribed && *client.user.lock() == name {
                client.kill();
            }
        }
    }
    Ok(())
}

/// ACL DELUSER username [username ...]: the number deleted; their
/// connections are closed.
pub fn acl_deluser(ctx: &mut Ctx<'_>, argv: &[&[u8]]) -> Reply {
    if argv[2..].iter().any(|n| *n == b"default") {
        return Reply::error("ERR The 'default' user cannot be removed");
    }
    let mut deleted = 0;
    for name in &argv[2..] {
        let name = String::from_utf8_lossy(name);
        if ctx.shared.acl.delete(&name) {
            deleted += 1;
            for client in ctx.shared.clients.snapshot() {
                if *client.user.lock() == name {
                    client.kill();
                }
            }
        }
    }
    Reply::Int(deleted)
}

/// A selector's `commands`, `keys` and `channels` (aclAddReplySelectorDescription).
fn selector_fields(selector: &user::Selector) -> Vec<(Reply, Reply)> {
    let keys = if selector.all_keys {
        "~*".to_string()
    } else {
        selector
            .patterns
            .iter()
            .map(user::pattern_string)
            .collect::<Vec<_>>()
            .join(" ")
    };
    let channels = if selector.all_channels {
        "&*".to_string()
    } else {
        selector
            .channels
            .iter()
            .map(|c| format!("&{}", String::from_utf8_lossy(c)))
            .collect::<Vec<_>>()
            .join(" ")
    };
    vec![
        (bulk("commands"), bulk(selector.describe_commands())),
        (bulk("keys"), bulk(keys)),
        (bulk("channels"), bulk(channels)),
    ]
}

/// ACL GETUSER username
pub fn acl_getuser(ctx: &mut Ctx<'_>, argv: &[&[u8]]) -> Reply {
    let Some(user) = ctx.shared.acl.user(&String::from_utf8_lossy(argv[2])) else {
        return Reply::Nil;
    };
    let mut fields = vec![
        (
            bulk("flags"),
            Reply::Set(user.flags().into_iter().map(bulk).collect()),
        ),
        (
            bulk("passwords"),
            Reply::Array(user.passwords.iter().map(|p| bulk(p.as_str())).collect()),
        ),
    ];
    fields.extend(selector_fields(&user.selectors[0]));
    fields.push((
        bulk("selectors"),
        Reply::Array(
            user.selectors[1..]
                .iter()
                .map(|s| Reply::Map(selector_fields(s)))
                .collect(),
        ),
    ));
    Reply::Map(fields)
}

/// ACL LIST: every user in the configuration file's form.
pub fn acl_list(ctx: &mut Ctx<'_>, _argv: &[&[u8]]) -> Reply {
    Reply::Array(
        ctx.shared
            .acl
            .users()
            .iter()
            .map(|u| bulk(format!("user {} {}", u.name, u.describe())))
            .collect(),
    )
}

/// ACL USERS
pub fn acl_users(ctx: &mut Ctx<'_>, _argv: &[&[u8]]) -> Reply {
    Reply::Array(
        ctx.shared
            .acl
            .users()
            .iter()
            .map(|u| bulk(u.name.as_str()))
            .collect(),
    )
}

/// ACL WHOAMI
pub fn acl_whoami(ctx: &mut Ctx<'_>, _argv: &[&[u8]]) -> Reply {
    bulk(ctx.client.user.name.as_str())
}

/// ACL CAT [category]
pub fn acl_cat(_ctx: &mut Ctx<'_>, argv: &[&[u8]]) -> Reply {
    let Some(category) = argv.get(2) else {
        return Reply::Array(CATEGORIES.iter().map(|c| bulk(*c)).collect());
    };
    let name = String::from_utf8_lossy(category);
    let Some(bit) = user::category_bit(&name) else {
        let shown: String = name.chars().take(128).collect();
        return Reply::error_bytes(format!("ERR Unknown category '{shown}'").into_bytes());
    };
    let bits = user::category_bits();
    let registry = registry();
    let mut names = Vec::new();
    for command in registry.top_level() {
        for candidate in std::iter::once(command).chain(command.subcommands.iter()) {
            if registry
                .index_of(candidate.name.as_bytes())
                .is_some_and(|i| bits[i] & bit != 0)
            {
                names.push(bulk(candidate.name));
            }
        }
    }
    Reply::Array(names)
}

/// ACL GENPASS [bits]: random hex, 256 bits by default.
pub fn acl_genpass(_ctx: &mut Ctx<'_>, argv: &[&[u8]]) -> Reply {
    const MAX_BITS: i64 = 4096;
    let bits = match argv.get(2) {
        None => 256,
        Some(arg) => match parse_i64(arg) {
            Some(bits) => bits,
            None => return Reply::error(error::NOT_INTEGER),
        },
    };
    if bits <= 0 || bits > MAX_BITS {
        return Reply::error(format!(
            "ERR ACL GENPASS argument must be the number of bits for the output password, a \
             positive number up to {MAX_BITS}"
        ));
    }
    let chars = (bits as usize).div_ceil(4);
    let mut random = vec![0u8; chars.div_ceil(2)];
    if getrandom::fill(&mut random).is_err() {
        return Reply::error("ERR no source of random bytes");
    }
    let hex: String = random.iter().map(|b| format!("{b:02x}")).collect();
    bulk(&hex[..chars])
}

/// ACL LOG [count | RESET]
pub fn acl_log(ctx: &mut Ctx<'_>, argv: &[&[u8]]) -> Reply {
    let mut count = 10i64;
    if let Some(arg) = argv.get(2) {
        if arg.eq_ignore_ascii_case(b"reset") {
            ctx.shared.acl.reset_log();
            return Reply::Ok;
        }
        match parse_i64(arg) {
            Some(n) => count = n.max(0),
            None => return Reply::error(error::NOT_INTEGER),
        }
    }
    let now_ms = ctx.shared.clock.now_ms();
    Reply::Array(
        ctx.shared
            .acl
            .log_entries(count as usize)
            .into_iter()
            .map(|entry| {
                let age = now_ms.saturating_sub(entry.created_ms) as f64 / 1000.0;
                Reply::Map(vec![
                    (bulk("count"), Reply::Int(entry.count as i64)),
                    (bulk("reason"), bulk(entry.reason)),
                    (bulk("context"), bulk(entry.context)),
                    (bulk("object"), bulk(entry.object)),
                    (bulk("username"), bulk(entry.username)),
                    (bulk("age-seconds"), Reply::Double(age)),
                    (bulk("client-info"), bulk(entry.client_info)),
                ])
            })
            .collect(),
    )
}

/// ACL DRYRUN username command [arg ...]
pub fn acl_dryrun(ctx: &mut Ctx<'_>, argv: &[&[u8]]) -> Reply {
    let Some(user) = ctx.shared.acl.user(&String::from_utf8_lossy(argv[2])) else {
        return Reply::error_bytes(
            format!("ERR User '{}' not found", String::from_utf8_lossy(argv[2])).into_bytes(),
        );
    };
    let call = &argv[3..];
    let Ok(command) = super::resolve(call) else {
        return Reply::error_bytes(
            format!(
                "ERR Command '{}' not found",
                String::from_utf8_lossy(call[0])
            )
            .into_bytes(),
        );
    };
    if !super::arity_ok(command.arity, call.len()) {
        return Reply::error(format!(
            "ERR wrong number of arguments for '{}' command",
            command.name
        ));
    }
    match crate::acl::check(&user, command, call) {
        Ok(()) => Reply::Ok,
        Err(crate::acl::Denied::Command) => bulk(format!(
            "This user has no permissions to run the '{}' command",
            command.name
        )),
        Err(crate::acl::Denied::Key(at)) => bulk(format!(
            "This user has no permissions to access the '{}' key",
            String::from_utf8_lossy(call[at])
        )),
        Err(crate::acl::Denied::Channel(at)) => bulk(format!(
            "This user has no permissions to access the '{}' channel",
            String::from_utf8_lossy(call[at])
        )),
    }
}

const NO_ACL_FILE: &str = "ERR This Redis instance is not configured to use an ACL file. You may \
    want to specify users via the ACL SETUSER command and then issue a CONFIG REWRITE (assuming \
    you have a Redis configuration file set) in order to store users in the Redis configuration.";

/// ACL LOAD: the users of `aclfile`, all or none.
pub fn acl_load(ctx: &mut Ctx<'_>, _argv: &[&[u8]]) -> Reply {
    let path = ctx.shared.config.read().aclfile.clone();
    if path.is_empty() {
        return Reply::error(NO_ACL_FILE);
    }
    match crate::acl::file::load(&ctx.shared.acl, &path) {
        Ok(()) => Reply::Ok,
        Err(text) => Reply::error_bytes(format!("ERR {text}").into_bytes()),
    }
}

/// ACL SAVE: every user into `aclfile`.
pub fn acl_save(ctx: &mut Ctx<'_>, _argv: &[&[u8]]) -> Reply {
    let path = ctx.shared.config.read().aclfile.clone();
    if path.is_empty() {
        return Reply::error(NO_ACL_FILE);
    }
    match crate::acl::file::save(&ctx.shared.acl, &path) {
        Ok(()) => Reply::Ok,
        Err(e) => {
            tracing::warn!(error = %e, path, "failed saving the ACL file");
            Reply::error(
                "ERR There was an error trying to save the ACLs. Please check the server logs \
                 for more information",
            )
        }
    }
}

/// ACL HELP
pub fn acl_help(_ctx: &mut Ctx<'_>, _argv: &[&[u8]]) -> Reply {
    help_reply(
        "ACL",
        &[
            "CAT [<category>]",
            "    List all commands that belong to <category>, or all command categories",
            "    when no category is specified.",
            "DELUSER <username> [<username> ...]",
            "    Delete a list of users.",
            "DRYRUN <username> <command> [<arg> ...]",
            "    Returns whether the user can execute the given command without executing the command.",
            "GETUSER <username>",
            "    Get the user's details.",
            "GENPASS [<bits>]",
            "    Generate a secure 256-bit user password. The optional `bits` argument can",
            "    be used to specify a different size.",
            "LIST",
            "    Show users details in config file format.",
            "LOAD",
            "    Reload users from the ACL file.",
            "LOG [<count> | RESET]",
            "    Show the ACL log entries.",
            "SAVE",
            "    Save the current config to the ACL file.",
            "SETUSER <username> <attribute> [<attribute> ...]",
            "    Create or modify a user with the specified attributes.",
            "USERS",
            "    List all the registered usernames.",
            "WHOAMI",
            "    Return the current connection username.",
        ],
    )
}
