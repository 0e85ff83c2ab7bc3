//! CLIENT: the connection's own settings (name, library, reply mode), the
//! listing and killing of connections, and pausing them.

use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use super::args::{int_arg, is, parse_i64};
use super::connection::{set_name, valid_client_name};
use super::error;
use super::{After, Ctx, ReplyMode};
use crate::pause::{PauseKind, PausePurpose};
use crate::resp::Reply;
use crate::state::ClientInfo;
use crate::tracking::TrackingMode;

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

/// Memory a connection costs besides its buffers (its state and tasks),
/// counted in `tot-mem`.
const CLIENT_OVERHEAD: usize = 2048;

/// One CLIENT LIST line, in Redis 7.0's fields. `argv_mem` is the size of
/// the command being run, for the client asking about itself; others are
/// between commands.
pub(crate) fn describe(client: &ClientInfo, now_ms: u64, argv_mem: usize) -> String {
    let io = &client.io;
    let load = |a: &std::sync::atomic::AtomicUsize| a.load(Ordering::Relaxed);
    let (qbuf, qbuf_free) = (load(&io.qbuf), load(&io.qbuf_free));
    let (rbs, rbp) = (load(&io.reply_buffer), load(&io.reply_buffer_peak));
    let (sub, psub, ssub) = (load(&io.sub), load(&io.psub), load(&io.ssub));
    let multi = io.multi.load(Ordering::Relaxed);
    let multi_mem = load(&io.multi_mem);
    let omem = load(&io.writing) + io.queued.load(Ordering::Relaxed) as usize;
    let mut flags = String::new();
    if client.monitoring.load(Ordering::Relaxed) {
        flags.push('O');
    } else if client.replica.is_replica.load(Ordering::Relaxed) {
        flags.push('S');
    } else if client.replica.is_master.load(Ordering::Relaxed) {
        flags.push('M');
    }
    if sub + psub + ssub > 0 {
        flags.push('P');
    }
    if multi >= 0 {
        flags.push('x');
    }
    if client.blocked.load(Ordering::Relaxed) {
        flags.push('b');
    }
    let redirect = client.tracking_redirect.load(Ordering::Relaxed);
    if redirect >= 0 {
        flags.push('t');
    }
    if client.tracking_bcast.load(Ordering::Relaxed) {
        flags.push('B');
    }
    if matches!(client.addr, crate::clients::ClientAddr::Unix(_)) {
        flags.push('U');
    }
    if client.readonly.load(Ordering::Relaxed) {
        flags.push('r');
    }
    if client.no_evict.load(Ordering::Relaxed) {
        flags.push('e');
    }
    if client.no_touch.load(Ordering::Relaxed) {
        flags.push('T');
    }
    if flags.is_empty() {
        flags.push('N');
    }
    let events = if omem > 0 { "rw" } else { "r" };
    let tot_mem = qbuf + qbuf_free + rbs + omem + multi_mem + argv_mem + CLIENT_OVERHEAD;
    let name = client
        .name
        .lock()
        .as_ref()
        .map(|n| String::from_utf8_lossy(n).into_owned())
        .unwrap_or_default();
    let (lib_name, lib_ver) = client.lib.lock().clone();
    let last = client.last_interaction_ms.load(Ordering::Relaxed);
    let command = crate::catalog::registry()
        .name_of(client.last_command.load(Ordering::Relaxed))
        .unwrap_or("NULL");
    format!(
        "id={} addr={} laddr={} fd={} name={} age={} idle={} flags={flags} db={} sub={sub} \
         psub={psub} ssub={ssub} multi={multi} qbuf={qbuf} qbuf-free={qbuf_free} argv-mem={argv_mem} \
         multi-mem={multi_mem} rbs={rbs} rbp={rbp} obl=0 oll=0 omem={omem} tot-mem={tot_mem} \
         events={events} cmd={} user={} redir={redirect} resp={} lib-name={} lib-ver={}",
        client.id,
        client.addr,
        client.laddr,
        io.fd.load(Ordering::Relaxed),
        name,
        now_ms.saturating_sub(client.created_ms) / 1000,
        now_ms.saturating_sub(last) / 1000,
        client.db.load(Ordering::Relaxed),
        command,
        client.user.lock(),
        client.resp.load(Ordering::Relaxed),
        lib_name,
        lib_ver,
    )
}

/// CLIENT LIST [TYPE normal|master|replica|pubsub] [ID client-id ...]
pub fn client_list(ctx: &mut Ctx<'_>, argv: &[&[u8]]) -> Reply {
    let mut ids: Option<Vec<u64>> = None;
    let mut kind: Option<ClientKind> = None;
    let mut i = 2;
    while i < argv.len() {
        if is(argv[i], "type") && i + 1 < argv.len() {
            let Some(wanted) = ClientKind::named(argv[i + 1]) else {
                return Reply::error(format!(
                    "ERR Unknown client type '{}'",
                    String::from_utf8_lossy(argv[i + 1])
                ));
            };
            kind = Some(wanted);
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
        if ids.as_ref().is_some_and(|ids| !ids.contains(&client.id))
            || kind.is_some_and(|kind| ClientKind::of(&client) != kind)
        {
            continue;
        }
        let argv_mem = if client.id == ctx.client.info.id {
            argv.iter().map(|a| a.len()).sum()
        } else {
            0
        };
        text.push_str(&describe(&client, now, argv_mem));
        text.push('\n');
    }
    Reply::Verbatim(text.into_bytes())
}

/// A client's type, as CLIENT LIST and CLIENT KILL TYPE name it (Redis's
/// getClientType: a replica or the master first, then a subscriber).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum ClientKind {
    Normal,
    Replica,
    Master,
    PubSub,
}

impl ClientKind {
    fn named(name: &[u8]) -> Option<ClientKind> {
        if is(name, "normal") {
            Some(ClientKind::Normal)
        } else if is(name, "replica") || is(name, "slave") {
            Some(ClientKind::Replica)
        } else if is(name, "master") {
            Some(ClientKind::Master)
        } else if is(name, "pubsub") {
            Some(ClientKind::PubSub)
        } else {
            None
        }
    }

    fn of(client: &ClientInfo) -> ClientKind {
        let io = &client.io;
        let subscriptions = [&io.sub, &io.psub, &io.ssub]
            .iter()
            .map(|count| count.load(Ordering::Relaxed))
            .sum::<usize>();
        if client.replica.is_master.load(Ordering::Relaxed) {
            ClientKind::Master
        } else if client.replica.is_replica.load(Ordering::Relaxed)
            || client.monitoring.load(Ordering::Relaxed)
        {
            // Redis counts a MONITOR client as a replica.
            ClientKind::Replica
        } else if subscriptions > 0 {
            ClientKind::PubSub
        } else {
            ClientKind::Normal
        }
    }
}

/// CLIENT INFO
pub fn client_info(ctx: &mut Ctx<'_>, argv: &[&[u8]]) -> Reply {
    let argv_mem = argv.iter().map(|a| a.len()).sum();
    let mut text = describe(&ctx.client.info, ctx.now_ms, argv_mem);
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
                    ctx.client.then(After::Close);
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
            let Some(kind) = ClientKind::named(value) else {
                return Reply::error(format!("ERR Unknown client type '{text}'"));
            };
            filters.push(Box::new(move |c| ClientKind::of(c) == kind));
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
            ctx.client.then(After::Close);
        }
        client.kill();
        killed += 1;
    }
    Reply::Int(killed)
}

/// CLIENT REPLY ON|OFF|SKIP
pub fn client_reply(ctx: &mut Ctx<'_>, argv: &[&[u8]]) -> Reply {
    let client = &mut *ctx.client;
    if is(argv[2], "on") {
        // As Redis: ON clears a SKIP already in force, so its own OK is sent.
        client.replies = ReplyMode::On;
        Reply::Ok
    } else if is(argv[2], "off") {
        client.replies = ReplyMode::Off;
        Reply::Nothing
    } else if is(argv[2], "skip") {
        if client.replies != ReplyMode::Off {
            client.replies = ReplyMode::SkipNext;
        }
        Reply::Nothing
    } else {
        Reply::error(error::SYNTAX)
    }
}

/// CLIENT NO-TOUCH ON|OFF (Redis 7.2): the client's commands, TOUCH
/// excepted, leave keys' access times alone (the dispatcher's `call`
/// reads the flag); shown as `T` in CLIENT LIST.
pub fn client_no_touch(ctx: &mut Ctx<'_>, argv: &[&[u8]]) -> Reply {
    let on = if is(argv[2], "on") {
        true
    } else if is(argv[2], "off") {
        false
    } else {
        return Reply::error(error::SYNTAX);
    };
    ctx.client.info.no_touch.store(on, Ordering::Relaxed);
    Reply::Ok
}

/// CLIENT NO-EVICT ON|OFF. tally has no client eviction
/// (`maxmemory-clients`): the flag is kept and shown, and changes nothing.
pub fn client_no_evict(ctx: &mut Ctx<'_>, argv: &[&[u8]]) -> Reply {
    if is(argv[2], "on") {
        ctx.client.no_evict = true;
    } else if is(argv[2], "off") {
        ctx.client.no_evict = false;
    } else {
        return Reply::error(error::SYNTAX);
    }
    ctx.client
        .info
        .no_evict
        .store(ctx.client.no_evict, Ordering::Relaxed);
    Reply::Ok
}

/// CLIENT PAUSE timeout [WRITE|ALL]: `timeout` in milliseconds.
pub fn client_pause(ctx: &mut Ctx<'_>, argv: &[&[u8]]) -> Reply {
    let kind = match argv.get(3) {
        None => PauseKind::All,
        Some(mode) if is(mode, "write") => PauseKind::Write,
        Some(mode) if is(mode, "all") => PauseKind::All,
        Some(_) => return Reply::error("ERR CLIENT PAUSE mode must be WRITE or ALL"),
    };
    let Some(ms) = parse_i64(argv[2]) else {
        return Reply::error("ERR timeout is not an integer or out of range");
    };
    if ms < 0 {
        return Reply::error("ERR timeout is negative");
    }
    let Some(until) = Instant::now().checked_add(Duration::from_millis(ms as u64)) else {
        return Reply::error("ERR timeout is out of range");
    };
    ctx.shared.pause.pause(PausePurpose::Client, kind, until);
    Reply::Ok
}

/// CLIENT UNPAUSE
pub fn client_unpause(ctx: &mut Ctx<'_>, _argv: &[&[u8]]) -> Reply {
    ctx.shared.pause.unpause(PausePurpose::Client);
    Reply::Ok
}

/// CLIENT TRACKING ON|OFF [REDIRECT id] [BCAST] [PREFIX prefix ...] [OPTIN]
/// [OPTOUT] [NOLOOP], with Redis 7.0's checks and errors.
pub fn client_tracking(ctx: &mut Ctx<'_>, argv: &[&[u8]]) -> Reply {
    let mut mode = TrackingMode::default();
    let mut j = 3;
    while j < argv.len() {
        let more = j + 1 < argv.len();
        if is(argv[j], "redirect") && more {
            j += 1;
            if mode.redirect != 0 {
                return Reply::error("ERR A client can only redirect to a single other client");
            }
            let Some(id) = parse_i64(argv[j]) else {
                return Reply::error(error::NOT_INTEGER);
            };
            let exists = ctx
                .shared
                .clients
                .snapshot()
                .iter()
                .any(|c| c.id as i64 == id);
            if !exists {
                return Reply::error("ERR The client ID you want redirect to does not exist");
            }
            mode.redirect = id as u64;
        } else if is(argv[j], "bcast") {
            mode.bcast = true;
        } else if is(argv[j], "optin") {
            mode.optin = true;
        } else if is(argv[j], "optout") {
            mode.optout = true;
        } else if is(argv[j], "noloop") {
            mode.noloop = true;
        } else if is(argv[j], "prefix") && more {
            j += 1;
            mode.prefixes.push(argv[j].to_vec());
        } else {
            return Reply::error(error::SYNTAX);
        }
        j += 1;
    }
    let tracking = &ctx.shared.tracking;
    if is(argv[2], "off") {
        tracking.disable(ctx.client.info.id);
        ctx.client.tracking = None;
        ctx.client.caching = false;
        return Reply::Ok;
    }
    if !is(argv[2], "on") {
        return Reply::error(error::SYNTAX);
    }
    if !mode.bcast && !mode.prefixes.is_empty() {
        return Reply::error("ERR PREFIX option requires BCAST mode to be enabled");
    }
    let current = ctx.client.tracking.clone();
    if current.as_ref().is_some_and(|c| c.bcast != mode.bcast) {
        return Reply::error("ERR You can't switch BCAST mode on/off before disabling tracking for this client, and then re-enabling it with a different mode.");
    }
    if mode.bcast && (mode.optin || mode.optout) {
        return Reply::error("ERR OPTIN and OPTOUT are not compatible with BCAST");
    }
    if mode.optin && mode.optout {
        return Reply::error("ERR You can't specify both OPTIN mode and OPTOUT mode");
    }
    if current
        .as_ref()
        .is_some_and(|c| (mode.optin && c.optout) || (mode.optout && c.optin))
    {
        return Reply::error("ERR You can't switch OPTIN/OPTOUT mode before disabling tracking for this client, and then re-enabling it with a different mode.");
    }
    if mode.bcast {
        // Prefixes already registered stay; given ones must not overlap them
        // or each other (an equal prefix overlaps too), checked as Redis's
        // checkPrefixCollisionsOrReply. No prefix at all means the empty
        // one, added without a check.
        let mut prefixes = current.map(|c| c.prefixes).unwrap_or_default();
        let given = std::mem::take(&mut mode.prefixes);
        if let Some(error) = prefix_collision(&prefixes, &given) {
            return error;
        }
        let added = if given.is_empty() {
            vec![Vec::new()]
        } else {
            given
        };
        for prefix in added {
            if !prefixes.contains(&prefix) {
                prefixes.push(prefix);
            }
        }
        mode.prefixes = prefixes;
    }
    // Invalidations for the client itself arrive on its push queue.
    super::pubsub::subscriptions(ctx);
    tracking.enable(ctx.client.info.id, mode.clone());
    ctx.client.tracking = Some(mode);
    Reply::Ok
}

/// The error for the first given BCAST prefix that overlaps one the client
/// has or one given after it (one is a prefix of the other).
fn prefix_collision(existing: &[Vec<u8>], given: &[Vec<u8>]) -> Option<Reply> {
    let overlap = |a: &[u8], b: &[u8]| a.starts_with(b) || b.starts_with(a);
    let error = |prefix: &[u8], whose: &[u8], other: &[u8]| {
        Reply::error_bytes(
            [
                &b"ERR Prefix '"[..],
                prefix,
                b"' overlaps with ",
                whose,
                b" prefix '",
                other,
                b"'. Prefixes for a single client must not overlap.",
            ]
            .concat(),
        )
    };
    for (i, prefix) in given.iter().enumerate() {
        if let Some(other) = existing.iter().find(|p| overlap(p, prefix)) {
            return Some(error(prefix, b"an existing", other));
        }
        if let Some(other) = given[i + 1..].iter().find(|p| overlap(p, prefix)) {
            return Some(error(prefix, b"another provided", other));
        }
    }
    None
}

/// CLIENT CACHING YES|NO: whether the next command's reads are tracked
/// (OPTIN: YES tracks them; OPTOUT: NO leaves them out).
pub fn client_caching(ctx: &mut Ctx<'_>, argv: &[&[u8]]) -> Reply {
    let Some(mode) = &ctx.client.tracking else {
        return Reply::error("ERR CLIENT CACHING can be called only when the client is in tracking mode with OPTIN or OPTOUT mode enabled");
    };
    if is(argv[2], "yes") {
        if !mode.optin {
            return Reply::error(
                "ERR CLIENT CACHING YES is only valid when tracking is enabled in OPTIN mode.",
            );
        }
    } else if is(argv[2], "no") {
        if !mode.optout {
            return Reply::error(
                "ERR CLIENT CACHING NO is only valid when tracking is enabled in OPTOUT mode.",
            );
        }
    } else {
        return Reply::error(error::SYNTAX);
    }
    ctx.client.caching = true;
    Reply::Ok
}

/// CLIENT GETREDIR: the redirect id while tracking (0 for none), else -1.
pub fn client_getredir(ctx: &mut Ctx<'_>, _argv: &[&[u8]]) -> Reply {
    Reply::Int(
        ctx.client
            .tracking
            .as_ref()
            .map_or(-1, |m| m.redirect as i64),
    )
}

/// CLIENT TRACKINGINFO
pub fn client_trackinginfo(ctx: &mut Ctx<'_>, _argv: &[&[u8]]) -> Reply {
    let bulk = |s: &str| Reply::Bulk(s.as_bytes().to_vec());
    let mut flags = Vec::new();
    let (redirect, prefixes) = match &ctx.client.tracking {
        None => {
            flags.push(bulk("off"));
            (-1, Vec::new())
        }
        Some(mode) => {
            flags.push(bulk("on"));
            if mode.bcast {
                flags.push(bulk("bcast"));
            }
            if mode.optin {
                flags.push(bulk("optin"));
                if ctx.client.caching {
                    flags.push(bulk("caching-yes"));
                }
            }
            if mode.optout {
                flags.push(bulk("optout"));
                if ctx.client.caching {
                    flags.push(bulk("caching-no"));
                }
            }
            if mode.noloop {
                flags.push(bulk("noloop"));
            }
            if ctx.shared.tracking.redirect_broken(ctx.client.info.id) {
                flags.push(bulk("broken_redirect"));
            }
            let mut prefixes = mode.prefixes.clone();
            prefixes.sort();
            (mode.redirect as i64, prefixes)
        }
    };
    Reply::Map(vec![
        (bulk("flags"), Reply::Set(flags)),
        (bulk("redirect"), Reply::Int(redirect)),
        (
            bulk("prefixes"),
            Reply::Array(prefixes.into_iter().map(Reply::Bulk).collect()),
        ),
    ])
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
