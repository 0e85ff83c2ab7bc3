//! MIGRATE's network half: the keys the handler copied out
//! (`crate::cmd::migrate`) go to the target as Redis sends them (AUTH,
//! SELECT, then RESTORE-ASKING in cluster mode or RESTORE, with the key's
//! TTL and its DUMP payload), the replies are read back, and each key the
//! target acknowledged is dropped here (unless COPY). Keys stay in the
//! cluster's in-flight set until then, so commands on them wait.

use std::sync::Arc;
use std::time::Duration;

use tokio::io::{AsyncBufRead, AsyncBufReadExt, AsyncRead, AsyncWrite, AsyncWriteExt, BufReader};
use tokio::net::TcpStream;

use crate::cmd::migrate::Migration;
use crate::resp::Reply;
use crate::state::Shared;
use crate::store::feed;

/// How the exchange with the target ended.
#[derive(Debug, Default)]
struct Outcome {
    /// Keys the target acknowledged, by index.
    acknowledged: Vec<usize>,
    /// The first error the target replied with.
    target_error: Option<String>,
    /// The link failed: while writing (`Some(true)`) or reading.
    io_error: Option<bool>,
}

/// Carries the migration out and returns MIGRATE's reply, and the change
/// feed's position after the keys dropped here (0: nothing logged).
pub async fn carry_out(shared: &Arc<Shared>, migration: Migration) -> (Reply, u64) {
    let timeout = Duration::from_millis(migration.timeout_ms);
    let connected = tokio::time::timeout(
        timeout,
        TcpStream::connect((migration.host.as_str(), migration.port)),
    )
    .await;
    if let Ok(Ok(stream)) = &connected {
        let _ = stream.set_nodelay(true);
    }
    // With tls-cluster, MIGRATE reaches the target over TLS, as Redis's.
    let tls = shared
        .cluster
        .get()
        .filter(|cluster| cluster.tls())
        .map(|_| shared.tls.cluster());
    let outcome = match (connected, tls) {
        (Ok(Ok(stream)), None) => exchange(stream, &migration, timeout).await,
        (Ok(Ok(stream)), Some(Some((_, connector)))) => {
            let handshake = crate::net::tls::peer_name(&migration.host)
                .map(|name| tokio::time::timeout(timeout, connector.connect(name, stream)));
            match handshake {
                Some(handshake) => match handshake.await {
                    Ok(Ok(stream)) => exchange(stream, &migration, timeout).await,
                    _ => return refused_connection(shared, &migration),
                },
                None => return refused_connection(shared, &migration),
            }
        }
        _ => return refused_connection(shared, &migration),
    };
    let offset = release(shared, &migration, &outcome.acknowledged);
    let reply = match (outcome.target_error, outcome.io_error) {
        (Some(error), _) => {
            Reply::error(format!("ERR Target instance replied with error: {error}"))
        }
        (None, Some(writing)) => Reply::error(format!(
            "IOERR error or timeout {} to target instance",
            if writing { "writing" } else { "reading" }
        )),
        (None, None) => Reply::Ok,
    };
    (reply, offset)
}

/// The target could not be reached: the keys stay, MIGRATE says so.
fn refused_connection(shared: &Arc<Shared>, migration: &Migration) -> (Reply, u64) {
    release(shared, migration, &[]);
    (
        Reply::error("IOERR error or timeout connecting to the client"),
        0,
    )
}

/// Sends the commands and reads the replies.
async fn exchange(
    stream: impl AsyncRead + AsyncWrite + Unpin,
    migration: &Migration,
    timeout: Duration,
) -> Outcome {
    let mut commands = Vec::new();
    match &migration.auth {
        Some((Some(user), password)) => {
            feed::encode(&mut commands, &[&b"AUTH"[..], user, password])
        }
        Some((None, password)) => feed::encode(&mut commands, &[&b"AUTH"[..], password]),
        None => {}
    }
    let db = migration.db.to_string();
    feed::encode(&mut commands, &[&b"SELECT"[..], db.as_bytes()]);
    let restore: &[u8] = if migration.cluster {
        b"RESTORE-ASKING"
    } else {
        b"RESTORE"
    };
    for moving in &migration.keys {
        let ttl = moving.ttl_ms.to_string();
        let mut argv: Vec<&[u8]> = vec![restore, &moving.key, ttl.as_bytes(), &moving.payload];
        if migration.replace {
            argv.push(b"REPLACE");
        }
        feed::encode(&mut commands, &argv);
    }
    let (read_half, mut write_half) = tokio::io::split(stream);
    let mut outcome = Outcome::default();
    let written = async {
        write_half.write_all(&commands).await?;
        // A TLS stream may hold records back until flushed.
        write_half.flush().await
    };
    if !matches!(tokio::time::timeout(timeout, written).await, Ok(Ok(()))) {
        outcome.io_error = Some(true);
        return outcome;
    }
    let mut reader = BufReader::new(read_half);
    let mut preamble_error = None;
    let preamble = 1 + usize::from(migration.auth.is_some());
    for _ in 0..preamble {
        match read_line(&mut reader, timeout).await {
            Some(line) if line.starts_with('-') => {
                preamble_error.get_or_insert(line[1..].to_string());
            }
            Some(_) => {}
            None => {
                outcome.io_error = Some(false);
                return outcome;
            }
        }
    }
    for index in 0..migration.keys.len() {
        let Some(line) = read_line(&mut reader, timeout).await else {
            outcome.io_error = Some(false);
            break;
        };
        // As Redis: once AUTH or SELECT failed, every RESTORE reply counts
        // as that error.
        let error = preamble_error
            .clone()
            .or_else(|| line.strip_prefix('-').map(str::to_string));
        match error {
            Some(error) => {
                outcome.target_error.get_or_insert(error);
            }
            None => outcome.acknowledged.push(index),
        }
    }
    outcome
}

/// One reply line, without its CRLF (`None`: the link failed or timed out).
async fn read_line(reader: &mut (impl AsyncBufRead + Unpin), timeout: Duration) -> Option<String> {
    let mut line = Vec::new();
    match tokio::time::timeout(timeout, reader.read_until(b'\n', &mut line)).await {
        Ok(Ok(n)) if n > 0 => {
            let text = String::from_utf8_lossy(&line);
            Some(text.trim_end_matches(['\r', '\n']).to_string())
        }
        _ => None,
    }
}

/// Drops the acknowledged keys here (unless COPY), logging each as the
/// DEL Redis propagates, and takes every key out of the in-flight set.
/// Returns the change feed's position after the DELs (0: none).
fn release(shared: &Arc<Shared>, migration: &Migration, acknowledged: &[usize]) -> u64 {
    let now_ms = shared.clock.now_ms();
    let mut offset = 0;
    if !migration.copy {
        let db = shared.store.db(migration.source_db);
        for &index in acknowledged {
            let key = shared.store.key(&migration.keys[index].key);
            let mut shard = db.lock_for(key);
            if !shard.remove(key, now_ms) {
                continue;
            }
            // Redis's MIGRATE deletes what the target took: a `del` event.
            shared.keyspace_events.notify(
                crate::keyspace_events::class::GENERIC,
                "del",
                key.bytes,
                migration.source_db,
                now_ms,
            );
            if shared.store.feed().active() {
                offset = shared.store.feed().append(&crate::store::feed::Change::one(
                    migration.source_db,
                    &[&b"DEL"[..], key.bytes],
                ));
            }
        }
    }
    if let Some(cluster) = shared.cluster.get() {
        let mut in_flight = cluster.in_flight.lock();
        for moving in &migration.keys {
            in_flight.remove(&moving.key);
        }
        drop(in_flight);
        cluster.end_moving(&migration.slots);
    }
    offset
}
