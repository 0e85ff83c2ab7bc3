//! This server as a replica: the link to the master REPLICAOF names, on
//! Redis's protocol, so that the master may be a redis-server or tally.
//!
//! One task runs for the server's life. While a master is set it connects,
//! shakes hands as Redis's replica does (PING, AUTH with `masteruser` /
//! `masterauth`, REPLCONF listening-port / ip-address / capa eof psync2),
//! and asks to continue its history with PSYNC (with FAILOVER when this
//! server hands its master role over: `cmd::failover`). A `+FULLRESYNC` brings
//! the master's snapshot, sized or, from a diskless master, between
//! `$EOF:` marks; it replaces the dataset. A `+CONTINUE` keeps it. Then
//! the stream is applied command by command (`stream.rs`). A lost link is
//! made again a second later, asking to continue where it stopped; a new
//! REPLICAOF drops the link at once.
//!
//! What commands read of the link (its state, offsets, the read-only
//! rule) is `crate::master_link`; the stream's offset and replication ids
//! are the change feed's (`store::feed`).

mod stream;

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use bytes::BytesMut;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::TcpStream;

use crate::master_link::{LinkState, Target};
use crate::state::Shared;
use crate::store::feed;

/// How long to wait before connecting again after a link was lost (Redis
/// retries from its once-a-second replicationCron).
const RECONNECT_AFTER: Duration = Duration::from_secs(1);

/// Longest reply line the handshake accepts.
const LINE_MAX: usize = 64 * 1024;

/// Follows the master REPLICAOF names, for as long as the server runs.
pub async fn run(shared: Arc<Shared>) {
    let link = &shared.master_link;
    let mut generations = link.watch();
    let mut stopping = shared.shutdown.subscribe();
    loop {
        let generation = *generations.borrow_and_update();
        let Some(target) = link.target() else {
            tokio::select! {
                _ = generations.changed() => continue,
                _ = stopping.wait_for(|&stop| stop) => return,
            }
        };
        // A snapshot or log loading at start comes first: Redis loads its
        // own data before it connects to its master.
        while shared.persistence.loading.load(Ordering::SeqCst) {
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        let outcome = tokio::select! {
            outcome = follow(&shared, &target, generation) => outcome,
            _ = generations.changed() => continue,
            _ = stopping.wait_for(|&stop| stop) => return,
        };
        if let Err(why) = outcome {
            tracing::warn!(host = %target.host, port = target.port, "replication link to the master: {why}");
        }
        link.lost(generation, shared.clock.now_ms());
        tokio::select! {
            _ = tokio::time::sleep(RECONNECT_AFTER) => {}
            _ = generations.changed() => {}
            _ = stopping.wait_for(|&stop| stop) => return,
        }
    }
}

/// The link's reading half: a TCP socket's, or a TLS stream's with
/// `tls-replication`.
type MasterSocket = Box<dyn AsyncRead + Send + Unpin>;

/// The link's writing half.
type MasterWriter = Box<dyn AsyncWrite + Send + Unpin>;

/// The master's side of the link, read with `repl-timeout`.
struct MasterReader {
    socket: MasterSocket,
    buf: BytesMut,
    timeout: Duration,
}

impl MasterReader {
    /// Reads what the master sent next; the number of bytes, or an error
    /// when it closed the link or stayed silent past `repl-timeout`.
    async fn read_more(&mut self) -> Result<usize, String> {
        self.buf.reserve(16 * 1024);
        match tokio::time::timeout(self.timeout, self.socket.read_buf(&mut self.buf)).await {
            Err(_) => Err("timeout: nothing from the master within repl-timeout".to_string()),
            Ok(Err(e)) => Err(format!("reading: {e}")),
            Ok(Ok(0)) => Err("the master closed the link".to_string()),
            Ok(Ok(n)) => Ok(n),
        }
    }

    /// The next reply line, without its CRLF.
    async fn line(&mut self) -> Result<String, String> {
        loop {
            if let Some(end) = self.buf.iter().position(|&b| b == b'\n') {
                let line = self.buf.split_to(end + 1);
                let text = line.strip_suffix(b"\n").unwrap_or(&line);
                let text = text.strip_suffix(b"\r").unwrap_or(text);
                return Ok(String::from_utf8_lossy(text).into_owned());
            }
            if self.buf.len() > LINE_MAX {
                return Err("a reply line from the master is too long".to_string());
            }
            self.read_more().await?;
        }
    }

    /// The next reply line that is not a bare newline (a master preparing
    /// a snapshot sends those to keep the link alive).
    async fn reply_line(&mut self) -> Result<String, String> {
        loop {
            let line = self.line().await?;
            if !line.is_empty() {
                return Ok(line);
            }
        }
    }
}

/// Sends one command to the master.
async fn send(writer: &mut MasterWriter, argv: &[&[u8]]) -> Result<(), String> {
    let mut bytes = Vec::new();
    feed::encode(&mut bytes, argv);
    writer
        .write_all(&bytes)
        .await
        .map_err(|e| format!("writing: {e}"))
}

/// Sends a command and reads its one-line reply.
async fn ask(
    reader: &mut MasterReader,
    writer: &mut MasterWriter,
    argv: &[&[u8]],
) -> Result<String, String> {
    send(writer, argv).await?;
    reader.reply_line().await
}

/// What this replica says of itself and how it authenticates.
struct Handshake {
    timeout: Duration,
    user: String,
    password: String,
    announce_ip: String,
    listening_port: u16,
}

impl Handshake {
    fn of(shared: &Shared) -> Handshake {
        let config = shared.config.read();
        let own_port = shared
            .local_addr
            .lock()
            .map(|a| a.port())
            .unwrap_or(config.port);
        Handshake {
            timeout: Duration::from_secs(config.repl_timeout.max(1)),
            user: config.masteruser.clone(),
            password: config.masterauth.clone(),
            announce_ip: config.replica_announce_ip.clone(),
            listening_port: match config.replica_announce_port {
                0 => own_port,
                port => port,
            },
        }
    }
}

/// One link: connect, shake hands, synchronize, then apply the stream
/// until the link fails.
async fn follow(shared: &Arc<Shared>, target: &Target, generation: u64) -> Result<(), String> {
    let link = &shared.master_link;
    let hello = Handshake::of(shared);
    link.set_state_for(generation, LinkState::Connecting);
    let socket = tokio::time::timeout(
        hello.timeout,
        TcpStream::connect((target.host.as_str(), target.port)),
    )
    .await
    .map_err(|_| "timed out connecting".to_string())?
    .map_err(|e| format!("connecting: {e}"))?;
    let _ = socket.set_nodelay(true);
    let peer = socket.peer_addr().map_err(|e| e.to_string())?;
    let local = socket.local_addr().map_err(|e| e.to_string())?;
    let (socket, mut writer) = secure(shared, socket, &target.host, hello.timeout).await?;
    let mut reader = MasterReader {
        socket,
        buf: BytesMut::with_capacity(16 * 1024),
        timeout: hello.timeout,
    };
    link.set_state_for(generation, LinkState::Handshake);
    shake_hands(&mut reader, &mut writer, &hello).await?;
    synchronize(shared, &mut reader, &mut writer, generation).await?;
    link.set_state_for(generation, LinkState::Connected);
    link.last_io_ms
        .store(shared.clock.now_ms(), Ordering::Relaxed);
    stream::apply(shared, reader, writer, (peer, local)).await
}

/// The link's two halves: the socket's own, or with `tls-replication` a
/// TLS session's, the master's certificate verified against the CA as
/// the bus verifies a node's.
async fn secure(
    shared: &Shared,
    socket: TcpStream,
    host: &str,
    timeout: Duration,
) -> Result<(MasterSocket, MasterWriter), String> {
    if !shared.config.read().tls.replication {
        let (read, write) = socket.into_split();
        return Ok((Box::new(read), Box::new(write)));
    }
    let connector = shared
        .tls
        .replication()
        .ok_or("tls-replication is on but TLS is not configured (tls-cert-file, tls-key-file, tls-ca-cert-file)")?;
    let name = crate::net::tls::peer_name(host)
        .ok_or_else(|| format!("'{host}' is not a name a TLS handshake can use"))?;
    let stream = tokio::time::timeout(timeout, connector.connect(name, socket))
        .await
        .map_err(|_| "timed out in the TLS handshake".to_string())?
        .map_err(|e| format!("TLS handshake with the master: {e}"))?;
    let (read, write) = tokio::io::split(stream);
    Ok((Box::new(read), Box::new(write)))
}

/// PING, AUTH, REPLCONF, as Redis's syncWithMaster sends them. A master
/// that wants a password answers PING with NOAUTH, which AUTH then
/// settles; a REPLCONF the master does not know is not fatal.
async fn shake_hands(
    reader: &mut MasterReader,
    writer: &mut MasterWriter,
    hello: &Handshake,
) -> Result<(), String> {
    let pong = ask(reader, writer, &[b"PING"]).await?;
    if pong.starts_with('-')
        && !pong.starts_with("-NOAUTH")
        && !pong.starts_with("-NOPERM")
        && !pong.starts_with("-ERR operation not permitted")
    {
        return Err(format!("error reply to PING from the master: '{pong}'"));
    }
    if !hello.password.is_empty() {
        let mut auth: Vec<&[u8]> = vec![b"AUTH"];
        if !hello.user.is_empty() {
            auth.push(hello.user.as_bytes());
        }
        auth.push(hello.password.as_bytes());
        let reply = ask(reader, writer, &auth).await?;
        if reply.starts_with('-') {
            return Err(format!("unable to AUTH to the master: {reply}"));
        }
    }
    let port = hello.listening_port.to_string();
    let reply = ask(
        reader,
        writer,
        &[b"REPLCONF", b"listening-port", port.as_bytes()],
    )
    .await?;
    if reply.starts_with('-') {
        tracing::info!("the master refused REPLCONF listening-port: {reply}");
    }
    if !hello.announce_ip.is_empty() {
        let reply = ask(
            reader,
            writer,
            &[b"REPLCONF", b"ip-address", hello.announce_ip.as_bytes()],
        )
        .await?;
        if reply.starts_with('-') {
            tracing::info!("the master refused REPLCONF ip-address: {reply}");
        }
    }
    let reply = ask(
        reader,
        writer,
        &[b"REPLCONF", b"capa", b"eof", b"capa", b"psync2"],
    )
    .await?;
    if reply.starts_with('-') {
        tracing::info!("the master refused REPLCONF capa: {reply}");
    }
    Ok(())
}

/// PSYNC: continue this server's history where it stopped, or take the
/// master's snapshot. A server that was a master asks to continue its own
/// history, as Redis's does (its cached master "using myself"): a master
/// that was its replica, promoted, continues it.
async fn synchronize(
    shared: &Arc<Shared>,
    reader: &mut MasterReader,
    writer: &mut MasterWriter,
    generation: u64,
) -> Result<(), String> {
    let feed = shared.store.feed();
    let history = feed.history();
    let (replid, from) = (history.replid, (history.offset + 1).to_string());
    // A master handing over with FAILOVER asks its target to take over.
    let handing_over = shared.failover.stage() == crate::failover::Stage::InProgress;
    let mut psync: Vec<&[u8]> = vec![b"PSYNC", replid.as_bytes(), from.as_bytes()];
    if handing_over {
        psync.push(b"FAILOVER");
    }
    let reply = ask(reader, writer, &psync).await?;
    if handing_over {
        let accepted = reply.starts_with("+FULLRESYNC") || reply.starts_with("+CONTINUE");
        crate::cmd::failover::psync_answered(shared, accepted);
    }
    if let Some(rest) = reply.strip_prefix("+FULLRESYNC ") {
        let mut words = rest.split_whitespace();
        let (Some(replid), Some(offset)) = (
            words.next(),
            words.next().and_then(|o| o.parse::<u64>().ok()),
        ) else {
            return Err(format!("bad +FULLRESYNC from the master: '{reply}'"));
        };
        let replid = replid.to_string();
        let data = receive_snapshot(shared, reader, generation).await?;
        load_snapshot(shared, &data, replid, offset)
    } else if let Some(rest) = reply.strip_prefix("+CONTINUE") {
        let new_id = rest.split_whitespace().next().map(str::to_string);
        tracing::info!("partial resynchronization with the master accepted");
        if feed.follow_continued(new_id) {
            close_replicas(shared);
        }
        Ok(())
    } else {
        Err(format!(
            "unexpected reply to PSYNC from the master: '{reply}'"
        ))
    }
}

/// The snapshot after `+FULLRESYNC`: `$<len>` and that many bytes, or,
/// from a diskless master, `$EOF:<40-byte mark>`, the file, and the mark.
async fn receive_snapshot(
    shared: &Shared,
    reader: &mut MasterReader,
    generation: u64,
) -> Result<Vec<u8>, String> {
    let link = &shared.master_link;
    link.set_state_for(generation, LinkState::Sync);
    link.sync_started_ms
        .store(shared.clock.now_ms(), Ordering::Relaxed);
    link.sync_read_bytes.store(0, Ordering::Relaxed);
    let header = reader.reply_line().await?;
    let Some(size) = header.strip_prefix('$') else {
        return Err(format!("bad snapshot header from the master: '{header}'"));
    };
    if let Some(mark) = size.strip_prefix("EOF:") {
        let mark = mark.as_bytes().to_vec();
        if mark.len() != 40 {
            return Err(format!("bad snapshot mark from the master: '{header}'"));
        }
        link.sync_total_bytes.store(-1, Ordering::Relaxed);
        loop {
            if reader.buf.len() >= mark.len() && reader.buf.ends_with(&mark) {
                let mut data = reader.buf.split().to_vec();
                data.truncate(data.len() - mark.len());
                return Ok(data);
            }
            reader.read_more().await?;
            link.sync_read_bytes
                .store(reader.buf.len() as u64, Ordering::Relaxed);
            link.last_io_ms
                .store(shared.clock.now_ms(), Ordering::Relaxed);
        }
    }
    let size: usize = size
        .parse()
        .map_err(|_| format!("bad snapshot size from the master: '{header}'"))?;
    link.sync_total_bytes.store(size as i64, Ordering::Relaxed);
    while reader.buf.len() < size {
        reader.read_more().await?;
        link.sync_read_bytes
            .store(reader.buf.len().min(size) as u64, Ordering::Relaxed);
        link.last_io_ms
            .store(shared.clock.now_ms(), Ordering::Relaxed);
    }
    let data = reader.buf.split_to(size).to_vec();
    Ok(data)
}

/// Replaces the dataset with the master's snapshot and takes up its
/// history at `offset`. Its own replicas, whose history ends here, are
/// closed and resynchronize; the append-only file, if on, is rewritten
/// from the new data, as Redis restarts its AOF after a sync.
fn load_snapshot(
    shared: &Arc<Shared>,
    data: &[u8],
    replid: String,
    offset: u64,
) -> Result<(), String> {
    let feed = shared.store.feed();
    let loaded = crate::store::off_worker(|| {
        let _order = feed.relay_order();
        let loaded = crate::persistence::snapshot::replace_with_masters(shared, data);
        if loaded.is_ok() {
            feed.follow_new_history(replid, offset);
            // The master's stream after a snapshot starts in database 0.
            shared.master_link.stream_db.store(0, Ordering::Relaxed);
        }
        loaded
    })
    .map_err(|e| format!("loading the master's snapshot: {e}"))?;
    tracing::info!(
        keys = loaded.keys,
        bytes = data.len(),
        "loaded the master's snapshot"
    );
    close_replicas(shared);
    if feed.logging() {
        let _ = crate::persistence::aof::bgrewriteaof(shared);
    }
    Ok(())
}

/// Closes the connections of this server's own replicas: their history
/// changed under them, and they must ask again.
fn close_replicas(shared: &Shared) {
    for client in shared.clients.snapshot() {
        if client.replica.is_replica.load(Ordering::Relaxed) {
            client.kill();
        }
    }
}
