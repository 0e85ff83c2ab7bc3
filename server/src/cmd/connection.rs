//! Connection commands: PING ECHO QUIT RESET HELLO AUTH and CLIENT.

use std::sync::atomic::Ordering;

use super::args::{int_arg, is, parse_i64};
use super::error;
use super::Ctx;
use crate::resp::{Protocol, Reply};
use crate::state::ClientInfo;

/// The version string clients see (`HELLO`, `INFO server`): tally speaks the
/// Redis 7.0 protocol and command set, so it reports the 7.0 line.
pub const REDIS_VERSION: &str = "7.0.15";

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
    ctx.client.close_after_reply = true;
    Reply::Ok
}

fn password_required(ctx: &Ctx<'_>) -> Option<String> {
    ctx.shared.config.read().requirepass.clone()
}

/// RESET: back to a freshly connected client.
pub fn reset(ctx: &mut Ctx<'_>, _argv: &[&[u8]]) -> Reply {
    ctx.client.transaction = None;
    super::multi::unwatch_all(ctx);
    super::pubsub::unsubscribe_all(ctx);
    ctx.client.db = 0;
    ctx.client.info.db.store(0, Ordering::Relaxed);
    ctx.client.proto = Protocol::Resp2;
    ctx.client.info.resp.store(2, Ordering::Relaxed);
    *ctx.client.info.name.lock() = None;
    ctx.client.authenticated = password_required(ctx).is_none();
    Reply::status("RESET")
}

/// Checks a username/password pair against the only user, `default`.
fn authenticate(ctx: &mut Ctx<'_>, username: &[u8], password: &[u8]) -> Result<(), Reply> {
    let ok = username == b"default"
        && match password_required(ctx) {
            None => true,
            Some(expected) => expected.as_bytes() == password,
        };
    if ok {
        ctx.client.authenticated = true;
        Ok(())
    } else {
        Err(Reply::error(error::WRONGPASS))
    }
}

/// AUTH [username] password
pub fn auth(ctx: &mut Ctx<'_>, argv: &[&[u8]]) -> Reply {
    if argv.len() > 3 {
        return Reply::error(error::SYNTAX);
    }
    if argv.len() == 2 && password_required(ctx).is_none() {
        return Reply::error(error::AUTH_NOT_CONFIGURED);
    }
    let (username, password) = if argv.len() == 3 {
        (argv[1], argv[2])
    } else {
        (&b"default"[..], argv[1])
    };
    match authenticate(ctx, username, password) {
        Ok(()) => Reply::Ok,
        Err(reply) => reply,
    }
}

fn valid_client_name(name: &[u8]) -> bool {
    name.iter().all(|&b| (b'!'..=b'~').contains(&b))
}

fn set_name(ctx: &mut Ctx<'_>, name: &[u8]) -> Result<(), Reply> {
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
        if let Err(reply) = authenticate(ctx, username, password) {
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
            Reply::bulk(REDIS_VERSION.as_bytes()),
        ),
        (Reply::bulk(b"proto"), Reply::Int(proto)),
        (Reply::bulk(b"id"), Reply::Int(ctx.client.info.id as i64)),
        (Reply::bulk(b"mode"), Reply::bulk(b"standalone")),
        (Reply::bulk(b"role"), Reply::bulk(b"master")),
        (Reply::bulk(b"modules"), Reply::Array(Vec::new())),
    ])
}

/// CLIENT ID
pub fn client_id(ctx: &mut Ctx<'_>, _argv: &[&[u8]]) -> Reply {
    Reply::Int(ctx.client.info.id as i64)
}

/// CLIENT SETNAME connection-name
pub fn client_setname(ctx: &mut Ctx<'_>, argv: &[&[u8]]) -> Reply {
    match set_name(ctx, argv[2]) {
        Ok(()) => Reply::Ok,
        Err(reply) => reply,
    }
}

/// CLIENT GETNAME
pub fn client_getname(ctx: &mut Ctx<'_>, _argv: &[&[u8]]) -> Reply {
    match &*ctx.client.info.name.lock() {
        Some(name) => Reply::bulk(name),
        None => Reply::Nil,
    }
}

/// CLIENT SETINFO <LIB-NAME libname | LIB-VER libver> (Redis 7.2; current
/// client libraries send it on connect).
pub fn client_setinfo(ctx: &mut Ctx<'_>, argv: &[&[u8]]) -> Reply {
    let value = argv[3];
    if !valid_client_name(value) {
        return Reply::error(format!(
            "ERR {} cannot contain spaces, newlines or special characters.",
            String::from_utf8_lossy(argv[2]).to_ascii_uppercase()
        ));
    }
    let text = String::from_utf8_lossy(value).into_owned();
    let mut lib = ctx.client.info.lib.lock();
    if is(argv[2], "lib-name") {
        lib.0 = text;
    } else if is(argv[2], "lib-ver") {
        lib.1 = text;
    } else {
        return Reply::error(format!(
            "ERR Unrecognized option '{}'",
            String::from_utf8_lossy(argv[2])
        ));
    }
    Reply::Ok
}

/// One CLIENT LIST line in Redis's field order.
fn describe(client: &ClientInfo, now_ms: u64) -> String {
    let name = client
        .name
        .lock()
        .as_ref()
        .map(|n| String::from_utf8_lossy(n).into_owned())
        .unwrap_or_default();
    let (lib_name, lib_ver) = client.lib.lock().clone();
    let last = client.last_interaction_ms.load(Ordering::Relaxed);
    let command = super::table::registry()
        .name_of(client.last_command.load(Ordering::Relaxed))
        .unwrap_or("NULL");
    format!(
        "id={} addr={} laddr={} fd=-1 name={} age={} idle={} flags=N db={} sub=0 psub=0 ssub=0 \
         multi=-1 qbuf=0 qbuf-free=0 argv-mem=0 multi-mem=0 rbs=0 rbp=0 obl=0 oll=0 omem=0 \
         tot-mem=0 events=r cmd={} user=default redir=-1 resp={} lib-name={} lib-ver={}",
        client.id,
        client.addr,
        client.laddr,
        name,
        now_ms.saturating_sub(client.created_ms) / 1000,
        now_ms.saturating_sub(last) / 1000,
        client.db.load(Ordering::Relaxed),
        command,
        client.resp.load(Ordering::Relaxed),
        lib_name,
        lib_ver,
    )
}

/// CLIENT LIST [TYPE NORMAL] [ID client-id ...]
pub fn client_list(ctx: &mut Ctx<'_>, argv: &[&[u8]]) -> Reply {
    let mut ids: Option<Vec<u64>> = None;
    let mut i = 2;
    while i < argv.len() {
        if is(argv[i], "type") && i + 1 < argv.len() {
            let kind = argv[i + 1];
            if !["normal", "master", "replica", "slave", "pubsub"]
                .iter()
                .any(|k| is(kind, k))
            {
                return Reply::error(format!(
                    "ERR Unknown client type '{}'",
                    String::from_utf8_lossy(kind)
                ));
            }
            if !is(kind, "normal") {
                ids = Some(Vec::new());
            }
            i += 2;
        } else if is(argv[i], "id") && i + 1 < argv.len() {
            let mut wanted = Vec::new();
            for arg in &argv[i + 1..] {
                match parse_i64(arg) {
                    Some(id) if id > 0 => wanted.push(id as u64),
                    _ => return Reply::error("ERR Invalid client ID"),
                }
            }
            ids = Some(wanted);
            i = argv.len();
        } else {
            return Reply::error(error::SYNTAX);
        }
    }
    let now = ctx.now_ms;
    let mut text = String::new();
    for client in ctx.shared.clients.snapshot() {
        if ids.as_ref().is_some_and(|ids| !ids.contains(&client.id)) {
            continue;
        }
        text.push_str(&describe(&client, now));
        text.push('\n');
    }
    Reply::Verbatim(text.into_bytes())
}

/// CLIENT INFO
pub fn client_info(ctx: &mut Ctx<'_>, _argv: &[&[u8]]) -> Reply {
    let mut text = describe(&ctx.client.info, ctx.now_ms);
    text.push('\n');
    Reply::Verbatim(text.into_bytes())
}

/// A CLIENT KILL filter.
type ClientFilter = Box<dyn Fn(&ClientInfo) -> bool>;

/// CLIENT KILL ip:port | CLIENT KILL <filter value> ... (ID, ADDR, LADDR, USER,
/// TYPE, SKIPME)
pub fn client_kill(ctx: &mut Ctx<'_>, argv: &[&[u8]]) -> Reply {
    let clients = ctx.shared.clients.snapshot();
    let me = ctx.client.info.id;
    if argv.len() == 3 {
        // Old form: the address of one client; killing yourself is allowed.
        let addr = String::from_utf8_lossy(argv[2]);
        return match clients.iter().find(|c| c.addr.to_string() == addr) {
            Some(client) => {
                if client.id == me {
                    ctx.client.close_after_reply = true;
                }
                client.kill();
                Reply::Ok
            }
            None => Reply::error(error::NO_SUCH_CLIENT),
        };
    }
    if argv.len() % 2 != 0 {
        return Reply::error(error::SYNTAX);
    }
    let mut skip_me = true;
    let mut filters: Vec<ClientFilter> = Vec::new();
    for pair in argv[2..].chunks(2) {
        let (name, value) = (pair[0], pair[1]);
        let text = String::from_utf8_lossy(value).into_owned();
        if is(name, "id") {
            match int_arg(value) {
                Ok(id) if id > 0 => filters.push(Box::new(move |c| c.id == id as u64)),
                _ => return Reply::error("ERR client-id should be greater than 0"),
            }
        } else if is(name, "addr") {
            filters.push(Box::new(move |c| c.addr.to_string() == text));
        } else if is(name, "laddr") {
            filters.push(Box::new(move |c| c.laddr.to_string() == text));
        } else if is(name, "user") {
            if text != "default" {
                return Reply::error(format!("ERR No such user '{text}'"));
            }
        } else if is(name, "type") {
            if !["normal", "master", "replica", "slave", "pubsub"]
                .iter()
                .any(|k| is(value, k))
            {
                return Reply::error(format!("ERR Unknown client type '{text}'"));
            }
            let normal = is(value, "normal");
            filters.push(Box::new(move |_| normal));
        } else if is(name, "skipme") {
            if is(value, "yes") {
                skip_me = true;
            } else if is(value, "no") {
                skip_me = false;
            } else {
                return Reply::error(error::SYNTAX);
            }
        } else {
            return Reply::error(error::SYNTAX);
        }
    }
    let mut killed = 0;
    for client in &clients {
        if (skip_me && client.id == me) || !filters.iter().all(|f| f(client)) {
            continue;
        }
        if client.id == me {
            ctx.client.close_after_reply = true;
        }
        client.kill();
        killed += 1;
    }
    Reply::Int(killed)
}

/// CLIENT HELP
pub fn client_help(_ctx: &mut Ctx<'_>, _argv: &[&[u8]]) -> Reply {
    super::server::help_reply(
        "CLIENT",
        &[
            "GETNAME",
            "    Return the name of the current connection.",
            "ID",
            "    Return the ID of the current connection.",
            "INFO",
            "    Return information about the current client connection.",
            "KILL <ip:port>",
            "    Kill connection made from <ip:port>.",
            "KILL <option> <value> [<option> <value> [...]]",
            "    Kill connections. Options are: ID, ADDR, LADDR, USER, TYPE, SKIPME.",
            "LIST [TYPE <type>] [ID <id> [<id> ...]]",
            "    Return information about client connections.",
            "SETINFO <option> <value>",
            "    Set client meta attributes: LIB-NAME, LIB-VER.",
            "SETNAME <name>",
            "    Assign the name <name> to the current connection.",
        ],
    )
}
