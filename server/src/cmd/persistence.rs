//! DUMP, RESTORE and the snapshot commands (SAVE, LASTSAVE), in Redis's
//! RDB format (see `crate::persistence`).

use std::sync::atomic::Ordering;
use std::sync::Arc;

use super::args::{is, parse_i64};
use super::error;
use super::{ClientState, Ctx};
use crate::event_classes::class;
use crate::persistence::{self, snapshot};
use crate::resp::Reply;
use crate::state::{ClientInfo, Shared};
use crate::store::access_clock;

/// DUMP key
pub fn dump(ctx: &mut Ctx<'_>, argv: &[&[u8]]) -> Reply {
    let key = ctx.key(argv[1]);
    let value = {
        let mut shard = ctx.lock(key);
        match shard.lookup_read(key, ctx.now_ms) {
            Some(entry) => persistence::to_rdb(entry.value()),
            None => return Reply::Nil,
        }
    };
    Reply::bulk(&tally_rdb::dump(&value, &snapshot::encodings(ctx.shared)))
}

/// RESTORE key ttl serialized-value [REPLACE] [ABSTTL] [IDLETIME seconds]
/// [FREQ frequency], checked in Redis's order: options, an existing key,
/// the TTL, the payload's footer, its contents. IDLETIME sets the key's
/// access time that far back, as Redis does under any policy but an LFU
/// one; FREQ is checked and then has nothing to set (no LFU counters are
/// kept under noeviction, tally's only policy).
pub fn restore(ctx: &mut Ctx<'_>, argv: &[&[u8]]) -> Reply {
    let (mut replace, mut absttl) = (false, false);
    let (mut idle, mut freq_given) = (None, false);
    let mut j = 4;
    while j < argv.len() {
        let more = j + 1 < argv.len();
        if is(argv[j], "replace") {
            replace = true;
        } else if is(argv[j], "absttl") {
            absttl = true;
        } else if is(argv[j], "idletime") && more && !freq_given {
            let Some(seconds) = parse_i64(argv[j + 1]) else {
                return Reply::error(error::NOT_INTEGER);
            };
            if seconds < 0 {
                return Reply::error("ERR Invalid IDLETIME value, must be >= 0");
            }
            idle = Some(seconds as u64);
            j += 1;
        } else if is(argv[j], "freq") && more && idle.is_none() {
            let Some(freq) = parse_i64(argv[j + 1]) else {
                return Reply::error(error::NOT_INTEGER);
            };
            if !(0..=255).contains(&freq) {
                return Reply::error("ERR Invalid FREQ value, must be >= 0 and <= 255");
            }
            freq_given = true;
            j += 1;
        } else {
            return Reply::error(error::SYNTAX);
        }
        j += 1;
    }
    let key = ctx.key(argv[1]);
    let now = ctx.now_ms;
    let mut shard = ctx.lock(key);
    let existed = shard.contains(key, now);
    if !replace && existed {
        return Reply::error("BUSYKEY Target key name already exists.");
    }
    let ttl = match parse_i64(argv[2]) {
        Some(ttl) if ttl < 0 => return Reply::error("ERR Invalid TTL value, must be >= 0"),
        Some(ttl) => ttl,
        None => return Reply::error(error::NOT_INTEGER),
    };
    let value = match tally_rdb::restore(argv[3]) {
        Ok(value) => value,
        Err(tally_rdb::Error::Checksum | tally_rdb::Error::Version(_)) => {
            return Reply::error("ERR DUMP payload version or checksum are wrong")
        }
        Err(_) => return Reply::error("ERR Bad data format"),
    };
    let Ok(Some(value)) = persistence::from_rdb(value, &ctx.shared.encodings.get()) else {
        return Reply::error("ERR Bad data format");
    };
    let expire_at = match ttl {
        0 => 0,
        ttl if absttl => ttl as u64,
        ttl => (now as i64).saturating_add(ttl) as u64,
    };
    if expire_at != 0 && expire_at <= now {
        // Already expired: nothing is stored (a replaced key is deleted).
        if replace && shard.remove(key, now) {
            ctx.notify(class::GENERIC, "del", argv[1]);
        }
        return Reply::Ok;
    }
    shard.set_owned(key, value, expire_at, now);
    if let Some(seconds) = idle {
        shard.set_access_clock(key, access_clock::clock_for_idle(seconds, now), now);
    }
    // Redis deletes a key it replaces and adds the value anew: `new`
    // either way (the store says so for a key that was missing).
    if existed {
        ctx.notify(class::NEW, "new", argv[1]);
    }
    ctx.notify(class::GENERIC, "restore", argv[1]);
    Reply::Ok
}

/// SAVE: the keyspace into `dir`/`dbfilename`, now.
pub fn save(ctx: &mut Ctx<'_>, _argv: &[&[u8]]) -> Reply {
    if ctx
        .shared
        .persistence
        .bgsave_in_progress
        .load(Ordering::SeqCst)
    {
        return Reply::error("ERR Background save already in progress");
    }
    match save_now(ctx.shared) {
        Ok(()) => Reply::Ok,
        Err(_) => Reply::error("ERR"),
    }
}

/// Saves and records the outcome for LASTSAVE and INFO; a failure is
/// logged, as Redis logs it, and returned.
pub fn save_now(shared: &crate::state::Shared) -> std::io::Result<()> {
    let state = &shared.persistence;
    // Counted before the save: writes during it are changes after it.
    state
        .writes_at_snapshot
        .store(persistence::write_calls(&shared.stats), Ordering::Relaxed);
    match snapshot::save(shared) {
        Ok(saved) => {
            tracing::info!(keys = saved.keys, bytes = saved.bytes, "DB saved on disk");
            persistence::saved(shared, shared.clock.now_ms() / 1000);
            Ok(())
        }
        Err(e) => {
            // As Redis's rdbSave: logged, and INFO's rdb_last_bgsave_status
            // (a background save's) left as it was.
            tracing::warn!(error = %e, path = %snapshot::path(shared).display(), "failed saving the snapshot");
            Err(e)
        }
    }
}

/// LASTSAVE: when the last save succeeded (the start time before any).
pub fn lastsave(ctx: &mut Ctx<'_>, _argv: &[&[u8]]) -> Reply {
    Reply::Int(
        ctx.shared
            .persistence
            .last_save_unix
            .load(Ordering::Relaxed) as i64,
    )
}

/// BGSAVE [SCHEDULE]: a snapshot of this moment, written in the background
/// without stopping clients (no fork: see `crate::store::snapshot`).
pub fn bgsave(ctx: &mut Ctx<'_>, argv: &[&[u8]]) -> Reply {
    let schedule = match argv.get(1) {
        None => false,
        Some(arg) if argv.len() == 2 && is(arg, "schedule") => true,
        Some(_) => return Reply::error(error::SYNTAX),
    };
    let state = &ctx.shared.persistence;
    if state.bgsave_in_progress.load(Ordering::SeqCst) {
        return Reply::error("ERR Background save already in progress");
    }
    if state.snapshot_busy.load(Ordering::SeqCst) {
        // An append-only file rewrite holds the snapshot, as Redis's AOF
        // child keeps BGSAVE from forking.
        if schedule {
            state.bgsave_scheduled.store(true, Ordering::SeqCst);
            return Reply::Status("Background saving scheduled".into());
        }
        return Reply::error(
            "ERR Another child process is active (AOF?): can't BGSAVE right now. \
             Use BGSAVE SCHEDULE in order to schedule a BGSAVE whenever possible.",
        );
    }
    let Some(shared) = ctx.shared.itself.get().and_then(std::sync::Weak::upgrade) else {
        return Reply::error("ERR BGSAVE needs a started server");
    };
    if snapshot::bgsave(&shared) {
        Reply::Status("Background saving started".into())
    } else {
        Reply::error("ERR Background save already in progress")
    }
}

/// BGREWRITEAOF: a new append-only file base, written in the background
/// from a snapshot of this moment (see `crate::persistence::aof`).
pub fn bgrewriteaof(ctx: &mut Ctx<'_>, _argv: &[&[u8]]) -> Reply {
    use crate::persistence::aof::{self, RewriteStart};
    let Some(shared) = ctx.shared.itself.get().and_then(std::sync::Weak::upgrade) else {
        return Reply::error("ERR BGREWRITEAOF needs a started server");
    };
    match aof::bgrewriteaof(&shared) {
        RewriteStart::Started => {
            Reply::Status("Background append only file rewriting started".into())
        }
        RewriteStart::Scheduled => {
            Reply::Status("Background append only file rewriting scheduled".into())
        }
        RewriteStart::AlreadyRunning => {
            Reply::error("ERR Background append only file rewriting already in progress")
        }
    }
}

/// The id of the client that replays the append-only file, which no
/// connection gets (FUNCTION LOAD lifts its load timeout for it, as for
/// the master).
pub const AOF_REPLAY_CLIENT_ID: u64 = u64::MAX;

/// The append-only file's replay client: each logged command goes
/// straight to its handler, as Redis's loader calls `cmd->proc` (none of
/// the checks meant for clients; the reply is dropped), at the replay
/// clock, before every deadline. `Err` for a command tally does not have.
pub fn aof_replayer(shared: &Shared) -> impl FnMut(&[&[u8]]) -> Result<(), ()> + '_ {
    let info = Arc::new(ClientInfo::new(
        AOF_REPLAY_CLIENT_ID,
        std::net::SocketAddr::from(([0, 0, 0, 0], 0)),
        std::net::SocketAddr::from(([0, 0, 0, 0], 0)),
        0,
    ));
    let mut client = ClientState::new(info, true);
    move |argv| {
        let (index, _) = super::resolve_indexed(argv).map_err(|_| ())?;
        let mut ctx = Ctx {
            shared,
            client: &mut client,
            now_ms: persistence::aof::load::REPLAY_NOW_MS,
            held: None,
        };
        let _ = super::handlers::handler(index)(&mut ctx, argv);
        Ok(())
    }
}
