//! The socket side of a connection: waiting for input (or for the
//! messages queued for a subscriber or a monitor), reading, and writing
//! replies out.

use std::sync::atomic::Ordering;
use std::time::Duration;

use bytes::BytesMut;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use super::{ClientStream, Queue, Wake, MESSAGES_PER_WAKE, READ_CHUNK};
use crate::cmd::ClientState;
use crate::resp::Reply;
use crate::state::{ClientInfo, Shared};

/// Waits for input, or for pub/sub messages when the client subscribed.
pub(super) async fn wait(
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

/// Sends the replies owed, once what their commands changed is in the
/// append-only file; false when the connection should close. Under
/// `appendfsync always` a write the log could not fsync is not
/// acknowledged: the client is disconnected instead (Redis exits).
pub(super) async fn send_owed(
    shared: &Shared,
    info: &ClientInfo,
    stream: &mut impl ClientStream,
    client: &mut ClientState,
    output: &mut BytesMut,
    killed: std::pin::Pin<&mut tokio::sync::futures::Notified<'_>>,
) -> bool {
    if client.aof_offset != 0
        && !crate::persistence::aof::before_replies(shared, std::mem::take(&mut client.aof_offset))
            .await
    {
        return false;
    }
    if output.is_empty() {
        return true;
    }
    let written = if client.authenticated {
        write_out(shared, info, stream, output, true, killed).await
    } else {
        write_unauthenticated(shared, info, stream, output, killed).await
    };
    output.clear();
    written
}

/// Writes `output`; false when the connection should close (a write error,
/// or a kill while the peer is not reading, as a slow subscriber's is).
/// `replies`: the bytes are replies, shown in CLIENT LIST `omem` while
/// they are written (queued messages are shown by their budget).
pub(super) async fn write_out(
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
