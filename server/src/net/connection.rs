//! One client connection: read a batch, frame and run every whole command in
//! it, append the replies, and send them in ONE write.
//!
//! Deep pipelines therefore cost one read and one write per batch, not per
//! command. Argument errors are ordinary replies; a framing error replies
//! `-ERR Protocol error: ...` after the replies owed for the commands before it
//! and closes the connection, as Redis does.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use bytes::{Buf, BytesMut};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::TcpStream;

use crate::cmd::{self, After, ClientState, Ctx, ReplyMode};
use crate::resp::{parse_frame, Frame, FrameLimits, Reply, Resume};
use crate::state::{ClientInfo, Shared};

/// Bytes read per syscall at least; larger batches are read as they come.
const READ_CHUNK: usize = 16 * 1024;

/// Buffers above this size are released when they become empty.
const IDLE_BUFFER_MAX: usize = 1024 * 1024;

/// Reply bytes one read's commands may produce for a client that has not
/// authenticated: Redis's static reply buffer (16 KiB). Redis closes such a
/// client as soon as a reply spills past it (CVE-2025-21605).
const UNAUTHENTICATED_OUTPUT_MAX: usize = 16 * 1024;

/// Why the loop stopped reading.
enum Next {
    Continue,
    Close,
}

/// What woke an idle connection.
enum Wake {
    /// The client sent bytes.
    Input,
    /// Output others queued for this client (pub/sub messages, MONITOR
    /// lines) was put in the output buffer: this many bytes, as the
    /// output-buffer limit counts them.
    Queued(Queue, u64),
    /// The connection must close.
    Close,
    /// Idle long enough to give its buffers back.
    Release,
}

/// Whose queue a [`Wake::Queued`] drained.
enum Queue {
    PubSub,
    Monitor,
}

/// Most messages encoded per wake-up, so that a flood of publications
/// cannot keep a subscriber from reading its own commands.
const MESSAGES_PER_WAKE: usize = 1024;

/// A client's byte stream: a TCP socket, or TLS over one.
pub trait ClientStream: AsyncRead + AsyncWrite + Unpin + Send + 'static {}

impl<S: AsyncRead + AsyncWrite + Unpin + Send + 'static> ClientStream for S {}

/// Serves one plain TCP connection (see [`serve_stream`]).
pub async fn serve(shared: Arc<Shared>, stream: TcpStream, info: Arc<ClientInfo>) {
    prepare_socket(&stream, &info);
    serve_stream(shared, stream, info).await
}

/// Sets TCP_NODELAY and shows the socket's descriptor in CLIENT LIST.
pub fn prepare_socket(stream: &TcpStream, info: &ClientInfo) {
    let _ = stream.set_nodelay(true);
    #[cfg(unix)]
    {
        use std::os::fd::AsRawFd;
        info.io
            .fd
            .store(i64::from(stream.as_raw_fd()), Ordering::Relaxed);
    }
}

/// Serves one connection until the client leaves, is killed, idles past
/// `timeout`, breaks the protocol, or the server shuts down.
pub async fn serve_stream<S: ClientStream>(
    shared: Arc<Shared>,
    mut stream: S,
    info: Arc<ClientInfo>,
) {
    let (user, acl_generation) = crate::acl::initial_user(&shared.acl);
    let authenticated = user.enabled && user.nopass;
    let mut client = ClientState::new(info.clone(), authenticated);
    client.user = user;
    client.acl_generation = acl_generation;
    let mut registration = Registration {
        shared: shared.clone(),
        client,
    };
    let client = &mut registration.client;
    let mut input = BytesMut::with_capacity(READ_CHUNK);
    let mut output = BytesMut::with_capacity(READ_CHUNK);
    // Where framing stopped in a command still arriving.
    let mut resume = Resume::Start;
    // True after DEBUG SLEEP paused in the middle of a batch: the rest of the
    // batch is already buffered and runs before anything new is read.
    let mut resume_buffered = false;
    // One kill listener for the life of the connection: registering a fresh
    // one per read would cost two lock round trips per request.
    let killed = info.kill_notify.notified();
    tokio::pin!(killed);
    // The same for the sampler's request to give idle buffers back.
    let release = info.release_notify.notified();
    tokio::pin!(release);
    loop {
        if info.killed.load(Ordering::SeqCst) {
            break;
        }
        if !std::mem::take(&mut resume_buffered) {
            match wait(
                &shared,
                &mut stream,
                (killed.as_mut(), release.as_mut()),
                &mut input,
                client,
                &mut output,
            )
            .await
            {
                Wake::Input => info.io.input(input.len(), input.capacity()),
                Wake::Close => break,
                Wake::Release => {
                    // Idle for 2 s (Redis's clientsCron frees the query
                    // buffer then): the next read starts small and grows.
                    if input.is_empty() {
                        input = BytesMut::new();
                    }
                    if output.is_empty() {
                        output = BytesMut::new();
                    }
                    publish_state(client, &input, &output);
                    release.set(info.release_notify.notified());
                    continue;
                }
                Wake::Queued(queue, bytes) => {
                    // Queued bytes are counted by the output budget until written.
                    if !write_out(&shared, &info, &mut stream, &output, false, killed.as_mut())
                        .await
                    {
                        break;
                    }
                    output.clear();
                    match (queue, &client.pubsub, &client.monitor) {
                        (Queue::PubSub, Some(subs), _) => {
                            subs.subscriber.budget.written(bytes, shared.pubsub.limit())
                        }
                        (Queue::Monitor, _, Some(mode)) => {
                            mode.sink.budget.written(bytes, shared.monitors.limit())
                        }
                        _ => {}
                    }
                    continue;
                }
            }
        }
        let (mut next, commands) = run_batch(&shared, client, &mut input, &mut resume, &mut output);
        // The batch's changes go to the replicas in one piece.
        shared.store.feed().flush_replicas();
        let after = match std::mem::take(&mut client.after) {
            After::Migrate(migration) => {
                // MIGRATE's network half; the commands after it wait, as
                // Redis's client does.
                let (reply, offset) = crate::net::migrate::carry_out(&shared, *migration).await;
                if let Reply::Error(text) = &reply {
                    client.batch.errors.count(text);
                }
                if client.replies != ReplyMode::Off {
                    reply.encode(client.proto, &mut output);
                }
                // The keys it dropped are in the append-only file before the
                // reply goes (under `always`, synced: waited for below).
                if offset != 0 && !crate::persistence::aof::before_reply(&shared, offset) {
                    client.aof_offset = client.aof_offset.max(offset);
                }
                resume_buffered = !input.is_empty();
                After::Continue
            }
            After::Block { waiter, deadline } => {
                // The replies owed before the blocking command go now.
                if client.aof_offset != 0
                    && !crate::persistence::aof::before_replies(
                        &shared,
                        std::mem::take(&mut client.aof_offset),
                    )
                    .await
                {
                    shared.blocked.remove(&waiter);
                    break;
                }
                if !output.is_empty() {
                    if !write_out(&shared, &info, &mut stream, &output, true, killed.as_mut()).await
                    {
                        shared.blocked.remove(&waiter);
                        break;
                    }
                    output.clear();
                }
                publish_state(client, &input, &output);
                let outcome = wait_blocked(
                    &shared,
                    &waiter,
                    deadline,
                    &mut stream,
                    &mut input,
                    killed.as_mut(),
                )
                .await;
                shared.blocked.remove(&waiter);
                let Some(outcome) = outcome else {
                    break;
                };
                match &outcome {
                    crate::blocking::Outcome::Served { aof_offset, .. } => {
                        client.aof_offset = client.aof_offset.max(*aof_offset);
                    }
                    crate::blocking::Outcome::RoleChanged => client.then(After::Close),
                    _ => {}
                }
                let reply = outcome.into_reply();
                if let Reply::Error(text) = &reply {
                    client.batch.errors.count(text);
                }
                if client.replies != ReplyMode::Off {
                    reply.encode(client.proto, &mut output);
                }
                if matches!(client.after, After::Close) {
                    // Sent, then the connection closes.
                    std::mem::take(&mut client.after);
                    next = Next::Close;
                } else {
                    resume_buffered = !input.is_empty();
                }
                After::Continue
            }
            After::WaitForReplicas {
                wanted,
                offset,
                timeout_ms,
            } => {
                let Some(count) =
                    wait_for_replicas(&shared, wanted, offset, timeout_ms, killed.as_mut()).await
                else {
                    break;
                };
                if client.replies != ReplyMode::Off {
                    Reply::Int(count as i64).encode(client.proto, &mut output);
                }
                resume_buffered = !input.is_empty();
                After::Continue
            }
            after => after,
        };
        publish_state(client, &input, &output);
        if input.len() as u64 > shared.client_query_buffer_limit.load(Ordering::Relaxed) {
            // Redis closes a client whose unprocessed input passes the limit.
            tracing::warn!(
                client = info.id,
                "closing client: query buffer limit reached"
            );
            break;
        }
        // A pipeline's replies wait one turn of the worker: every other
        // connection ready at this moment runs its batch first, and then
        // the replies go out together, as Redis reads every ready client
        // and only then writes (beforeSleep). Written one by one, each
        // reply found the client asleep again and woke it, and on loopback
        // that wake-up is paid by the sender: at -P 16 it was a third of
        // the server's CPU. The changes of those batches also reach the
        // append-only file in one write. A lone command's reply goes at
        // once: there the extra turn (a poll of the worker's sockets)
        // costs more than it saves, and adds latency.
        if commands > 1 && !output.is_empty() {
            tokio::task::yield_now().await;
        }
        // What the batch changed is in the append-only file before its
        // replies go. Under `appendfsync always` a write the log could not
        // fsync is not acknowledged: the client is disconnected instead
        // (Redis exits).
        if client.aof_offset != 0
            && !crate::persistence::aof::before_replies(
                &shared,
                std::mem::take(&mut client.aof_offset),
            )
            .await
        {
            break;
        }
        if !output.is_empty() {
            let written = if client.authenticated {
                write_out(&shared, &info, &mut stream, &output, true, killed.as_mut()).await
            } else {
                write_unauthenticated(&shared, &info, &mut stream, &output, killed.as_mut()).await
            };
            if !written {
                break;
            }
            output.clear();
        }
        if matches!(next, Next::Close) {
            break;
        }
        // A huge request or reply leaves a huge buffer behind; give it back
        // once it is empty rather than keep it for the life of the connection.
        if input.is_empty() && input.capacity() > IDLE_BUFFER_MAX {
            input = BytesMut::with_capacity(READ_CHUNK);
        }
        if output.capacity() > IDLE_BUFFER_MAX {
            output = BytesMut::with_capacity(READ_CHUNK);
        }
        match after {
            After::Sleep(pause) => {
                tokio::time::sleep(pause).await;
                resume_buffered = !input.is_empty();
            }
            After::WaitForMigration => {
                // Its key is on its way to another node: look again shortly
                // (it will be gone, and the command answered with ASK).
                tokio::select! {
                    biased;
                    _ = killed.as_mut() => break,
                    _ = tokio::time::sleep(std::time::Duration::from_millis(1)) => {}
                }
                resume_buffered = true;
            }
            After::WaitForPause => {
                tokio::select! {
                    biased;
                    _ = killed.as_mut() => break,
                    _ = shared.pause.wait() => {}
                }
                resume_buffered = true;
            }
            // Closing is `next`'s; a migration, a WAIT or a blocked command
            // was carried out above.
            After::Continue
            | After::Close
            | After::Migrate(_)
            | After::WaitForReplicas { .. }
            | After::Block { .. } => {}
        }
    }
    // Forgotten before the socket closes, so that a peer who sees the close
    // also sees the client gone (CLIENT LIST, PUBSUB NUMSUB).
    drop(registration);
    let _ = stream.shutdown().await;
}

/// WAIT's wait: the number of replicas that acknowledged `offset`, once
/// `wanted` have or `timeout_ms` passed (0: no limit); `None` when the
/// client was killed meanwhile. Rechecked at each acknowledgement, and
/// every second, when the replicas are asked again.
async fn wait_for_replicas(
    shared: &Shared,
    wanted: usize,
    offset: u64,
    timeout_ms: u64,
    mut killed: std::pin::Pin<&mut tokio::sync::futures::Notified<'_>>,
) -> Option<usize> {
    let deadline = (timeout_ms != 0)
        .then(|| tokio::time::Instant::now() + std::time::Duration::from_millis(timeout_ms));
    loop {
        let acked = shared.replica_acks.notified();
        tokio::pin!(acked);
        acked.as_mut().enable();
        let count = cmd::replication::acknowledged(shared, offset);
        let now = tokio::time::Instant::now();
        if count >= wanted || deadline.is_some_and(|d| now >= d) {
            return Some(count);
        }
        let second = now + std::time::Duration::from_secs(1);
        let wake = deadline.map_or(second, |d| d.min(second));
        tokio::select! {
            biased;
            _ = killed.as_mut() => return None,
            _ = acked => {}
            _ = tokio::time::sleep_until(wake) => shared.store.feed().request_acks(),
        }
    }
}

/// A blocked client's wait: the outcome of its waiter (served, timed out,
/// unblocked), or `None` when the client was killed or closed its
/// connection meanwhile. What the client sends while blocked is read and
/// kept for after, as Redis keeps it; an end of stream ends the wait.
async fn wait_blocked(
    shared: &Shared,
    waiter: &crate::blocking::Waiter,
    deadline: Option<std::time::Instant>,
    stream: &mut impl ClientStream,
    input: &mut BytesMut,
    mut killed: std::pin::Pin<&mut tokio::sync::futures::Notified<'_>>,
) -> Option<crate::blocking::Outcome> {
    let deadline = deadline.map(tokio::time::Instant::from_std);
    // Past the deadline while another connection was serving it: the
    // outcome comes from there (or the waiter is handed back and gives up).
    let mut expired = false;
    loop {
        let woken = waiter.wake.notified();
        tokio::pin!(woken);
        woken.as_mut().enable();
        if let Some(outcome) = waiter.outcome() {
            return Some(outcome);
        }
        if expired && waiter.give_up() {
            return Some(crate::blocking::Outcome::TimedOut);
        }
        if input.capacity() - input.len() < READ_CHUNK / 4 {
            input.reserve(READ_CHUNK);
        }
        tokio::select! {
            biased;
            _ = killed.as_mut() => {
                waiter.give_up();
                return None;
            }
            _ = woken => {}
            _ = tokio::time::sleep_until(deadline.unwrap_or_else(tokio::time::Instant::now)),
                if deadline.is_some() && !expired => {
                if waiter.give_up() {
                    return Some(crate::blocking::Outcome::TimedOut);
                }
                expired = true;
            }
            read = stream.read_buf(input) => match read {
                Ok(0) | Err(_) => {
                    waiter.give_up();
                    return None;
                }
                Ok(n) => {
                    shared.stats.net_input_bytes.fetch_add(n as u64, Ordering::Relaxed);
                    shared.stats.reads_processed.fetch_add(1, Ordering::Relaxed);
                }
            },
        }
    }
}

/// A connected client's place in the server: its slot under `maxclients`,
/// its watches and subscriptions. Given back on drop, so that a connection
/// task that ends in any way (return, panic, abort at shutdown) releases
/// everything it held.
struct Registration {
    shared: Arc<Shared>,
    client: ClientState,
}

impl Drop for Registration {
    fn drop(&mut self) {
        cmd::multi::forget_client(&self.shared, &mut self.client);
        self.shared.clients.unregister(self.client.info.id);
    }
}

/// Publishes what CLIENT LIST shows of this connection after a batch.
fn publish_state(client: &ClientState, input: &BytesMut, output: &BytesMut) {
    let io = &client.info.io;
    io.input(input.len(), input.capacity());
    io.output(output.capacity());
    let (queued, queued_bytes) = cmd::multi::queued_size(client);
    io.multi.store(queued, Ordering::Relaxed);
    io.multi_mem.store(queued_bytes, Ordering::Relaxed);
    let (channels, patterns, shard_channels) = client.pubsub.as_ref().map_or((0, 0, 0), |s| {
        (s.channels.len(), s.patterns.len(), s.shard_channels.len())
    });
    io.sub.store(channels, Ordering::Relaxed);
    io.psub.store(patterns, Ordering::Relaxed);
    io.ssub.store(shard_channels, Ordering::Relaxed);
    let info = &client.info;
    info.tracking_redirect.store(
        client.tracking.as_ref().map_or(-1, |m| m.redirect as i64),
        Ordering::Relaxed,
    );
    info.tracking_bcast.store(
        client.tracking.as_ref().is_some_and(|m| m.bcast),
        Ordering::Relaxed,
    );
}

/// Waits for input, or for pub/sub messages when the client subscribed.
async fn wait(
    shared: &Shared,
    stream: &mut impl ClientStream,
    wakers: Wakers<'_, '_>,
    input: &mut BytesMut,
    client: &mut ClientState,
    output: &mut BytesMut,
) -> Wake {
    if let Some(mode) = client.monitor.as_mut() {
        let line = tokio::select! {
            biased;
            read = read_more(shared, stream, wakers, input) => return read,
            line = mode.receiver.recv() => line,
        };
        // A replica's stream (or a monitor's lines) comes a connection
        // batch at a time: before writing, the other connections' batches
        // running now get a turn, so that one write (and one wake-up of
        // the replica) carries several, as Redis writes to its replicas
        // once per event loop.
        tokio::task::yield_now().await;
        let mut next = line;
        let mut bytes = 0;
        let mut copied = 0;
        while let Some(line) = next {
            bytes += line.len() as u64;
            output.extend_from_slice(&line);
            copied += 1;
            if copied == MESSAGES_PER_WAKE {
                break;
            }
            next = mode.receiver.try_recv().ok();
        }
        return Wake::Queued(Queue::Monitor, bytes);
    }
    let Some(subs) = client.pubsub.as_mut() else {
        return read_more(shared, stream, wakers, input).await;
    };
    let message = tokio::select! {
        biased;
        read = read_more(shared, stream, wakers, input) => return read,
        message = subs.receiver.recv() => message,
    };
    let mut bytes = 0;
    let mut next = message;
    let mut encoded = 0;
    while let Some(message) = next {
        bytes += message.size();
        if let crate::pubsub::Message::ShardDropped(channel) = &message {
            // The channel's slot moved away: the subscription ends here.
            subs.shard_channels.shift_remove(channel.as_ref());
            Reply::Push(vec![
                Reply::BulkStatic(b"sunsubscribe"),
                Reply::bulk(channel),
                Reply::Int(subs.shard_channels.len() as i64),
            ])
            .encode(client.proto, output);
        }
        let invalidate_subscribed = subs.channels.contains(crate::tracking::INVALIDATE_CHANNEL);
        if let Some(reply) = message.reply_for(client.proto, invalidate_subscribed) {
            reply.encode(client.proto, output);
        }
        encoded += 1;
        if encoded == MESSAGES_PER_WAKE {
            break;
        }
        next = subs.receiver.try_recv().ok();
    }
    Wake::Queued(Queue::PubSub, bytes)
}

/// Writes `output`; false when the connection should close (a write error,
/// or a kill while the peer is not reading, as a slow subscriber's is).
/// `replies`: the bytes are replies, shown in CLIENT LIST `omem` while
/// they are written (queued messages are shown by their budget).
async fn write_out(
    shared: &Shared,
    info: &ClientInfo,
    stream: &mut impl ClientStream,
    output: &[u8],
    replies: bool,
    killed: std::pin::Pin<&mut tokio::sync::futures::Notified<'_>>,
) -> bool {
    let stats = &shared.stats;
    stats
        .net_output_bytes
        .fetch_add(output.len() as u64, Ordering::Relaxed);
    stats.writes_processed.fetch_add(1, Ordering::Relaxed);
    if replies {
        info.io.writing.store(output.len(), Ordering::Relaxed);
    }
    // The write first: replies owed before a kill (SHUTDOWN's drain, a
    // killed client's last batch) still go out when the peer reads; only a
    // write that cannot complete gives way to the kill.
    let written = tokio::select! {
        biased;
        written = stream.write_all(output) => written.is_ok(),
        _ = killed => false,
    };
    info.io.writing.store(0, Ordering::Relaxed);
    written
}

/// [`write_out`] for a client that has not authenticated: the socket must
/// take the replies now. A client that does not read them would have the
/// server hold them, and the next read's, which Redis refuses to do for
/// such a client (CVE-2025-21605): it closes the connection, and so does
/// this. (An authenticated client that does not read is waited for: its
/// commands are not read meanwhile, so nothing grows either.)
async fn write_unauthenticated(
    shared: &Shared,
    info: &ClientInfo,
    stream: &mut impl ClientStream,
    output: &[u8],
    killed: std::pin::Pin<&mut tokio::sync::futures::Notified<'_>>,
) -> bool {
    tokio::select! {
        biased;
        // Unconstrained: tokio's cooperative budget may answer Pending for
        // a socket that is writable; only a full socket may close the client.
        written = tokio::task::unconstrained(write_out(shared, info, stream, output, true, killed)) => written,
        // Ready at its second poll: the write had one more chance after
        // the socket said it was full.
        _ = tokio::task::yield_now() => {
            tracing::warn!(client = info.id, "closing unauthenticated client: it does not read its replies");
            false
        }
    }
}

/// The kill listener and the buffer-release listener a wait for input
/// watches besides the socket.
type Wakers<'a, 'b> = (
    std::pin::Pin<&'a mut tokio::sync::futures::Notified<'b>>,
    std::pin::Pin<&'a mut tokio::sync::futures::Notified<'b>>,
);

/// Reads what the client sent next: [`Wake::Input`], [`Wake::Close`] when
/// the connection should close (end of stream, error, kill, idle
/// timeout), or [`Wake::Release`] when it idled long enough to give its
/// buffers back.
async fn read_more(
    shared: &Shared,
    stream: &mut impl ClientStream,
    (killed, release): Wakers<'_, '_>,
    input: &mut BytesMut,
) -> Wake {
    // A buffer given back while idle (capacity 0) is not refilled here:
    // the first read after the idle spell grows it, so an idle connection
    // holds nothing.
    if input.capacity() != 0 && input.capacity() - input.len() < READ_CHUNK / 4 {
        input.reserve(READ_CHUNK);
    }
    let idle_secs = shared.idle_timeout_secs.load(Ordering::Relaxed);
    let read = tokio::select! {
        biased;
        _ = killed => return Wake::Close,
        read = stream.read_buf(input) => read,
        _ = release => return Wake::Release,
        _ = idle(idle_secs) => return Wake::Close,
    };
    match read {
        Ok(0) | Err(_) => Wake::Close,
        Ok(n) => {
            let stats = &shared.stats;
            stats.net_input_bytes.fetch_add(n as u64, Ordering::Relaxed);
            stats.reads_processed.fetch_add(1, Ordering::Relaxed);
            let capacity = input.capacity() as u64;
            if capacity > stats.max_input_buffer.load(Ordering::Relaxed) {
                stats
                    .max_input_buffer
                    .fetch_max(capacity, Ordering::Relaxed);
            }
            Wake::Input
        }
    }
}

/// Sleeps for the idle timeout, or forever when there is none.
async fn idle(secs: u64) {
    if secs == 0 {
        std::future::pending::<()>().await;
    } else {
        tokio::time::sleep(Duration::from_secs(secs)).await;
    }
}

/// Frames and runs every whole command at the front of `input`, appending
/// replies to `output`. Consumed bytes are removed from `input`. Returns
/// what the connection does next and how many commands ran.
fn run_batch(
    shared: &Shared,
    client: &mut ClientState,
    input: &mut BytesMut,
    resume: &mut Resume,
    output: &mut BytesMut,
) -> (Next, usize) {
    let now_ms = shared.clock.now_ms();
    client
        .info
        .last_interaction_ms
        .store(now_ms, Ordering::Relaxed);
    let limits = FrameLimits {
        max_bulk_len: shared.proto_max_bulk_len.load(Ordering::Relaxed) as usize,
        unauthenticated: !client.authenticated,
    };
    let mut pos = 0;
    let mut commands = 0usize;
    let mut next = Next::Continue;
    let mut argv: Vec<&[u8]> = Vec::with_capacity(8);
    let buf: &[u8] = input;
    while pos < buf.len() {
        let frame = parse_frame(
            &buf[pos..],
            FrameLimits {
                unauthenticated: !client.authenticated,
                ..limits
            },
            resume,
        );
        let start = pos;
        let reply = match &frame {
            Frame::Command { args, consumed } => {
                argv.clear();
                argv.extend(args.iter().map(|r| &buf[pos + r.start..pos + r.end]));
                pos += consumed;
                commands += 1;
                run_one(shared, client, &argv, now_ms)
            }
            Frame::Inline { args, consumed } => {
                let owned: Vec<&[u8]> = args.iter().map(|a| a.as_slice()).collect();
                pos += consumed;
                commands += 1;
                run_one(shared, client, &owned, now_ms)
            }
            Frame::Empty { consumed } => {
                pos += consumed;
                continue;
            }
            Frame::Incomplete => break,
            Frame::Error(message) => {
                next = Next::Close;
                let reply = Reply::error(format!("ERR Protocol error: {message}"));
                if let Reply::Error(text) = &reply {
                    client.batch.errors.count(text);
                }
                reply
            }
        };
        if client.after.retries() {
            // CLIENT PAUSE holds this command, or a MIGRATE holds its key:
            // it stays in the buffer and runs, framed afresh, once that ends.
            pos = start;
            *resume = Resume::Start;
            break;
        }
        // CLIENT REPLY OFF / SKIP silence replies, as Redis does, but not
        // pub/sub confirmations, which are pushes rather than replies.
        if client.replies.sends() || reply.is_push() {
            reply.encode(client.proto, output);
        }
        client.replies = client.replies.after_reply();
        if !client.authenticated && output.len() > UNAUTHENTICATED_OUTPUT_MAX {
            // A client that has not authenticated may not make the server
            // hold replies for it (Redis's fix for CVE-2025-21605): past
            // what Redis's per-client reply buffer holds, it is closed and
            // none of its replies are sent, as Redis does.
            tracing::warn!(
                client = client.info.id,
                "closing unauthenticated client: output buffer limit reached"
            );
            output.clear();
            next = Next::Close;
            break;
        }
        if matches!(frame, Frame::Error(_)) || matches!(client.after, After::Close) {
            next = Next::Close;
            break;
        }
        if matches!(
            client.after,
            After::Sleep(_)
                | After::Migrate(_)
                | After::WaitForReplicas { .. }
                | After::Block { .. }
        ) {
            // DEBUG SLEEP: send what is owed, pause, then carry on with the
            // rest. MIGRATE: its reply comes once the target answered. A
            // blocked command: its reply comes when it is served.
            break;
        }
    }
    input.advance(pos);
    if input.is_empty() {
        // Everything read was consumed: the buffer's space before the read
        // position is free again. Taking it back costs no allocation (the
        // buffer is ours alone) and keeps a steady client on one buffer of
        // the read size, which CLIENT LIST shows as Redis shows its own
        // (qbuf + qbuf-free).
        let _ = input.try_reclaim(READ_CHUNK);
    }
    // What this batch changed reaches the append-only file before its
    // replies go out: `client.aof_offset` stays set for the connection's
    // loop, which awaits `aof::before_replies` before it writes.
    client.batch.flush(shared, client.info.id);
    shared.tracking.flush_broadcasts();
    (next, commands)
}

/// Runs one command. A panic is a bug, but it must stop only this request:
/// it is contained here, logged, answered with an error, and the connection
/// closes (its state may be half-updated); every other client carries on.
/// Shard locks are parking_lot's, released during unwinding and never
/// poisoned.
fn run_one(shared: &Shared, client: &mut ClientState, argv: &[&[u8]], now_ms: u64) -> Reply {
    let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        let mut ctx = Ctx {
            shared,
            client: &mut *client,
            now_ms,
            held: None,
        };
        let reply = cmd::dispatch(&mut ctx, argv);
        // Clients blocked on the keys it wrote are served before its reply
        // goes out, as Redis serves them before its next command.
        if shared.blocked.any() {
            cmd::blocking::serve_ready(shared, now_ms);
        }
        reply
    }));
    outcome.unwrap_or_else(|panic| {
        let what = panic
            .downcast_ref::<&str>()
            .map(|s| s.to_string())
            .or_else(|| panic.downcast_ref::<String>().cloned())
            .unwrap_or_default();
        let command = String::from_utf8_lossy(argv.first().copied().unwrap_or_default());
        tracing::error!(client = client.info.id, %command, "command panicked: {what}");
        shared.stats.panics.fetch_add(1, Ordering::Relaxed);
        client.then(After::Close);
        Reply::error(crate::cmd::error::INTERNAL)
    })
}
