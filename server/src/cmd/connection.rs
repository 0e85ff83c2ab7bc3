//! Connection commands: PING ECHO QUIT RESET HELLO AUTH and CLIENT.

use std::sync::atomic::Ordering;

use super::args::{is, parse_i64};
use super::error;
use super::{After, Ctx, ReplyMode};
use crate::resp::{Protocol, Reply};

/// PING [message]
pub fn ping(ctx: &mut Ctx<'_>, argv: &[&[u8]]) -> Reply {
    if argv.len() <= 2
        && ctx.client.proto == Protocol::Resp2
        && super::pubsub::in_subscribe_mode(ctx)
    {
        // A RESP2 subscriber gets PONG in the shape of a message.
        let message = argv
            .get(1)
            .map_or(Reply::BulkStatic(b""), |m| Reply::bulk(m));
        return Reply::Array(vec![Reply::BulkStatic(b"pong"), message]);
    }
    match argv.len() {
        1 => Reply::status("PONG"),
        2 => Reply::bulk(argv[1]),
        _ => Reply::error(error::wrong_arity("ping")),
    }
}

/// ECHO message
pub fn echo(_ctx: &mut Ctx<'_>, argv: &[&[u8]]) -> Reply {
    Reply::bulk(argv[1])
}

/// QUIT: reply +OK, then close.
pub fn quit(ctx: &mut Ctx<'_>, _argv: &[&[u8]]) -> Reply {
    ctx.client.then(After::Close);
    Reply::Ok
}

/// True when the default user needs a password (AUTH with one argument
/// is refused otherwise, as Redis refuses it).
fn password_required(ctx: &Ctx<'_>) -> bool {
    ctx.shared.acl.user("default").is_none_or(|u| !u.nopass)
}

/// RESET: back to a freshly connected client.
pub fn reset(ctx: &mut Ctx<'_>, _argv: &[&[u8]]) -> Reply {
    ctx.client.transaction = None;
    super::multi::unwatch_all(ctx);
    super::pubsub::unsubscribe_all(ctx);
    super::server::stop_monitor(ctx);
    ctx.shared.tracking.disable(ctx.client.info.id);
    ctx.client.tracking = None;
    ctx.client.caching = false;
    ctx.client.replies = ReplyMode::On;
    ctx.client.db = 0;
    ctx.client.info.db.store(0, Ordering::Relaxed);
    ctx.client.proto = Protocol::Resp2;
    ctx.client.info.resp.store(2, Ordering::Relaxed);
    *ctx.client.info.name.lock() = None;
    // Back to the default user, authenticated if it needs no password.
    let (user, generation) = crate::acl::initial_user(&ctx.shared.acl);
    ctx.client.authenticated = user.enabled && user.nopass;
    *ctx.client.info.user.lock() = user.name.clone();
    ctx.client.user = user;
    ctx.client.acl_generation = generation;
    Reply::status("RESET")
}

/// Checks a username/password pair: the user must exist, be on and
/// accept the password; the client then runs as that user. A failure is
/// an ACL LOG `auth` event naming the command (AUTH or HELLO).
fn authenticate(
    ctx: &mut Ctx<'_>,
    command: &[u8],
    username: &[u8],
    password: &[u8],
) -> Result<(), Reply> {
    let acl = &ctx.shared.acl;
    let generation = acl.generation();
    let name = String::from_utf8_lossy(username).into_owned();
    match acl.user(&name) {
        Some(user) if user.enabled && user.password_matches(password) => {
            *ctx.client.info.user.lock() = name;
            ctx.client.user = user;
            ctx.client.acl_generation = generation;
            ctx.client.authenticated = true;
            Ok(())
        }
        _ => {
            let context = if ctx.client.transaction.is_some() || ctx.held.is_some() {
                crate::acl::Context::Multi
            } else {
                crate::acl::Context::TopLevel
            };
            super::acl::log_event(ctx, &name, "auth", command.to_vec(), context);
            Err(Reply::error(error::WRONGPASS))
        }
    }
}

/// AUTH [username] password
pub fn auth(ctx: &mut Ctx<'_>, argv: &[&[u8]]) -> Reply {
    if argv.len() > 3 {
        return Reply::error(error::SYNTAX);
    }
    if argv.len() == 2 && !password_required(ctx) {
        return Reply::error(error::AUTH_NOT_CONFIGURED);
    }
    let (username, password) = if argv.len() == 3 {
        (argv[1], argv[2])
    } else {
        (&b"default"[..], argv[1])
    };
    match authenticate(ctx, argv[0], username, password) {
        Ok(()) => Reply::Ok,
        Err(reply) => reply,
    }
}

pub(super) fn valid_client_name(name: &[u8]) -> bool {
    name.iter().all(|&b| (b'!'..=b'~').contains(&b))
}

pub(super) fn set_name(ctx: &mut Ctx<'_>, name: &[u8]) -> Result<(), Reply> {
    if !valid_client_name(name) {
        return Err(Reply::error(error::CLIENT_NAME_SPACES));
    }
    *ctx.client.info.name.lock() = if name.is_empty() {
        None
    } else {
        Some(name.to_vec())
    };
    Ok(())
}

/// HELLO [protover [AUTH username password] [SETNAME clientname]]
pub fn hello(ctx: &mut Ctx<'_>, argv: &[&[u8]]) -> Reply {
    let mut version = None;
    let mut next = 1;
    if argv.len() >= 2 {
        match parse_i64(argv[1]) {
            Some(v @ 2..=3) => version = Some(v),
            Some(_) => return Reply::error(error::NOPROTO),
            None => return Reply::error("ERR Protocol version is not an integer or out of range"),
        }
        next = 2;
    }
    let mut credentials = None;
    let mut client_name = None;
    let mut j = next;
    while j < argv.len() {
        let more = argv.len() - 1 - j;
        if is(argv[j], "auth") && more >= 2 {
            credentials = Some((argv[j + 1], argv[j + 2]));
            j += 2;
        } else if is(argv[j], "setname") && more >= 1 {
            client_name = Some(argv[j + 1]);
            j += 1;
        } else {
            return Reply::error(format!(
                "ERR Syntax error in HELLO option '{}'",
                String::from_utf8_lossy(argv[j])
            ));
        }
        j += 1;
    }
    if let Some((username, password)) = credentials {
        if let Err(reply) = authenticate(ctx, argv[0], username, password) {
            return reply;
        }
    }
    if !ctx.client.authenticated {
        return Reply::error(
            "NOAUTH HELLO must be called with the client already authenticated, otherwise the \
             HELLO AUTH <user> <pass> option can be used to authenticate the client and \
             select the RESP protocol version at the same time",
        );
    }
    if let Some(name) = client_name {
        if let Err(reply) = set_name(ctx, name) {
            return reply;
        }
    }
    if let Some(version) = version {
        ctx.client.proto = if version == 3 {
            Protocol::Resp3
        } else {
            Protocol::Resp2
        };
        ctx.client.info.resp.store(version as u8, Ordering::Relaxed);
        if version == 3 {
            // Another client may redirect its invalidations here: a RESP3
            // client gets them as pushes without subscribing, as on Redis.
            super::pubsub::subscriptions(ctx);
        }
    }
    let proto = if ctx.client.proto == Protocol::Resp3 {
        3
    } else {
        2
    };
    Reply::Map(vec![
        (Reply::bulk(b"server"), Reply::bulk(b"redis")),
        (
            Reply::bulk(b"version"),
            Reply::bulk(crate::catalog::reported_version().as_bytes()),
        ),
        (Reply::bulk(b"proto"), Reply::Int(proto)),
        (Reply::bulk(b"id"), Reply::Int(ctx.client.info.id as i64)),
        (Reply::bulk(b"mode"), Reply::bulk(b"standalone")),
        (Reply::bulk(b"role"), Reply::bulk(b"master")),
        (Reply::bulk(b"modules"), Reply::Array(Vec::new())),
    ])
}
