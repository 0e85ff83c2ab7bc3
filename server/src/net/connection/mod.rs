//! One client connection: read a batch, frame and run every whole command in
//! it, append the replies, and send them in ONE write.
//!
//! Deep pipelines therefore cost one read and one write per batch, not per
//! command. Argument errors are ordinary replies; a framing error replies
//! `-ERR Protocol error: ...` after the replies owed for the commands before it
//! and closes the connection, as Redis does.

use std::sync::atomic::Ordering;
use std::sync::Arc;

use bytes::{Buf, BytesMut};
use tokio::io::{AsyncRead, AsyncWrite, AsyncWriteExt};
use tokio::net::TcpStream;

use crate::cmd::{self, After, ClientState, Ctx};
use crate::resp::{parse_frame, Frame, FrameLimits, Reply, Resume};
use crate::state::{ClientInfo, Shared};

mod after;
mod lookahead;
mod socket;
mod waits;

use socket::{send_owed, wait, write_out};

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

/// Serves one connection on the Unix socket (see [`serve_stream`]).
pub async fn serve_unix(
    shared: Arc<Shared>,
    stream: tokio::net::UnixStream,
    info: Arc<ClientInfo>,
) {
    #[cfg(unix)]
    {
        use std::os::fd::AsRawFd;
        info.io
            .fd
            .store(i64::from(stream.as_raw_fd()), Ordering::Relaxed);
    }
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
        let left = std::mem::take(&mut client.after);
        let Some(after) = after::carry_out(
            &shared,
            &info,
            &mut stream,
            client,
            &mut input,
            &mut output,
            killed.as_mut(),
            left,
            &mut next,
            &mut resume_buffered,
        )
        .await
        else {
            break;
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
        if !send_owed(
            &shared,
            &info,
            &mut stream,
            client,
            &mut output,
            killed.as_mut(),
        )
        .await
        {
            break;
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
            | After::WaitForAof { .. }
            | After::WaitForShutdown
            | After::SendSnapshot { .. }
            | After::Block { .. } => {}
        }
    }
    // Forgotten before the socket closes, so that a peer who sees the close
    // also sees the client gone (CLIENT LIST, PUBSUB NUMSUB).
    drop(registration);
    let _ = stream.shutdown().await;
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
    let capacity = input.capacity();
    let buf: &[u8] = input;
    let batch = shared.prefetch_batch_max_size.load(Ordering::Relaxed);
    // Where the commands whose keys were prefetched end.
    let mut looked_ahead_to = 0;
    while pos < buf.len() {
        if batch > 1 && pos >= looked_ahead_to && client.authenticated {
            looked_ahead_to = pos + lookahead::prefetch_keys(shared, client.db, &buf[pos..], batch);
        }
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
                client.input_left = (buf.len() - pos, capacity);
                run_one(shared, client, &argv, now_ms)
            }
            Frame::Inline { args, consumed } => {
                let owned: Vec<&[u8]> = args.iter().map(|a| a.as_slice()).collect();
                pos += consumed;
                commands += 1;
                client.input_left = (buf.len() - pos, capacity);
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
                | After::WaitForAof { .. }
                | After::Block { .. }
                | After::SendSnapshot { .. }
        ) {
            // DEBUG SLEEP: send what is owed, pause, then carry on with the
            // rest. MIGRATE: its reply comes once the target answered. A
            // blocked command: its reply comes when it is served. A
            // replica's snapshot: it goes once written.
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
