//! MIGRATE and RESTORE-ASKING: moving keys between nodes, as `redis-cli
//! --cluster reshard` does. The handler parses and checks the command as
//! Redis's migrateCommand does and copies the keys out (DUMP payloads with
//! their TTLs); the connection then sends them to the target
//! (`crate::net::migrate`) and replies. A key being moved is held in the
//! cluster's in-flight set from the copy until the target acknowledged it
//! and it was dropped here: commands on it wait meanwhile, so no write
//! lands on a copy about to be thrown away.

use super::args::{is, parse_i64};
use super::error;
use super::Ctx;
use crate::resp::Reply;

/// One key on its way out.
#[derive(Debug)]
pub struct Moving {
    /// The key.
    pub key: Vec<u8>,
    /// Its TTL in ms (0: none), as RESTORE takes it.
    pub ttl_ms: u64,
    /// Its DUMP payload.
    pub payload: Vec<u8>,
}

/// A MIGRATE waiting for its network part.
#[derive(Debug)]
pub struct Migration {
    /// The target's host.
    pub host: String,
    /// The target's port.
    pub port: u16,
    /// The target's database.
    pub db: usize,
    /// The database the keys come from.
    pub source_db: usize,
    /// For connecting, each write and each reply (Redis's timeout).
    pub timeout_ms: u64,
    /// COPY: keep the keys here.
    pub copy: bool,
    /// REPLACE: overwrite the target's keys.
    pub replace: bool,
    /// AUTH (`None` user) or AUTH2.
    pub auth: Option<(Option<Vec<u8>>, Vec<u8>)>,
    /// This node is a cluster node: RESTORE-ASKING, not RESTORE.
    pub cluster: bool,
    /// The keys' slots, open while the keys move (cluster mode).
    pub slots: Vec<u16>,
    /// The keys, copied out.
    pub keys: Vec<Moving>,
}

/// MIGRATE host port key|"" destination-db timeout [COPY] [REPLACE]
/// [AUTH password | AUTH2 username password] [KEYS key ...]
pub fn migrate(ctx: &mut Ctx<'_>, argv: &[&[u8]]) -> Reply {
    let (mut copy, mut replace) = (false, false);
    let mut auth: Option<(Option<Vec<u8>>, Vec<u8>)> = None;
    let mut keys: Vec<&[u8]> = vec![argv[3]];
    let mut j = 6;
    while j < argv.len() {
        let more = argv.len() - 1 - j;
        if is(argv[j], "copy") {
            copy = true;
        } else if is(argv[j], "replace") {
            replace = true;
        } else if is(argv[j], "auth") {
            if more == 0 {
                return Reply::error(error::SYNTAX);
            }
            auth = Some((None, argv[j + 1].to_vec()));
            j += 1;
        } else if is(argv[j], "auth2") {
            if more < 2 {
                return Reply::error(error::SYNTAX);
            }
            auth = Some((Some(argv[j + 1].to_vec()), argv[j + 2].to_vec()));
            j += 2;
        } else if is(argv[j], "keys") {
            if !argv[3].is_empty() {
                return Reply::error(
                    "ERR When using MIGRATE KEYS option, the key argument must be set to \
                     the empty string",
                );
            }
            keys = argv[j + 1..].to_vec();
            break;
        } else {
            return Reply::error(error::SYNTAX);
        }
        j += 1;
    }
    let (Some(timeout_ms), Some(db)) = (parse_i64(argv[5]), parse_i64(argv[4])) else {
        return Reply::error(error::NOT_INTEGER);
    };
    let timeout_ms = if timeout_ms <= 0 {
        1000
    } else {
        timeout_ms as u64
    };
    let Ok(port) = std::str::from_utf8(argv[2])
        .unwrap_or_default()
        .parse::<u16>()
    else {
        // Redis's atoi gives 0 and the connection fails.
        return Reply::error("IOERR error or timeout connecting to the client");
    };
    let encodings = tally_rdb::Encodings {
        compress: ctx.shared.config.read().rdbcompression,
        ..tally_rdb::Encodings::default()
    };
    if ctx.held.is_some() || ctx.client.in_script {
        return Reply::error("ERR MIGRATE is not supported by tally inside MULTI or scripts");
    }
    // Copied out with their slots' gates closed: no command is between its
    // routing and its run on these keys, and none starts on them until
    // they are moved (they are in flight).
    let cluster = ctx.shared.cluster.get();
    let mut slots: Vec<u16> = keys
        .iter()
        .map(|k| tally_cluster::slot::key_slot(k))
        .collect();
    slots.sort_unstable();
    slots.dedup();
    if let Some(cluster) = cluster {
        cluster.begin_moving(&slots);
    }
    let closed = cluster.map(|c| c.close(slots.iter().copied()));
    let mut in_flight = cluster.map(|c| c.in_flight.lock());
    let mut moving = Vec::new();
    for key in keys {
        if in_flight.as_ref().is_some_and(|f| f.contains(key)) {
            // Another MIGRATE has it: moved already, or about to be.
            continue;
        }
        let key_ref = ctx.key(key);
        let shard = ctx.lock(key_ref);
        let mut shard = shard;
        let Some(entry) = shard.get(key_ref, ctx.now_ms) else {
            continue;
        };
        let ttl_ms = match entry.expire_at() {
            0 => 0,
            at => at.saturating_sub(ctx.now_ms).max(1),
        };
        let payload = tally_rdb::dump(&crate::persistence::to_rdb(entry.value()), &encodings);
        moving.push(Moving {
            key: key.to_vec(),
            ttl_ms,
            payload,
        });
    }
    if moving.is_empty() {
        drop((in_flight, closed));
        if let Some(cluster) = cluster {
            cluster.end_moving(&slots);
        }
        return Reply::status("NOKEY");
    }
    if let Some(set) = in_flight.as_mut() {
        set.extend(moving.iter().map(|m| m.key.clone()));
    }
    ctx.client.then(super::After::Migrate(Box::new(Migration {
        host: String::from_utf8_lossy(argv[1]).into_owned(),
        port,
        db: db as usize,
        source_db: ctx.client.db,
        timeout_ms,
        copy,
        replace,
        auth,
        cluster: cluster.is_some(),
        slots,
        keys: moving,
    })));
    Reply::Nothing
}

/// RESTORE-ASKING: RESTORE, sent by a MIGRATE in cluster mode to a node
/// importing the slot (routing treats it as if ASKING had been sent).
pub fn restore_asking(ctx: &mut Ctx<'_>, argv: &[&[u8]]) -> Reply {
    super::persistence::restore(ctx, argv)
}
