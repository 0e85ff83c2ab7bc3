//! What a connection carries out itself after a command that does not
//! answer at once (the command's [`After`]): MIGRATE's network half, a
//! blocked command's wait, SHUTDOWN's, WAIT's and WAITAOF's, and a
//! replica's snapshot. Each appends its reply to the output as its
//! command's would have been, and the connection then carries on with the
//! commands after it.

use std::pin::Pin;
use std::sync::atomic::Ordering;
use std::sync::Arc;

use bytes::BytesMut;
use tokio::sync::futures::Notified;

use super::socket::send_owed;
use super::waits::{
    wait_blocked, wait_for_aof, wait_for_replicas, wait_for_shutdown, wait_for_snapshot,
    wait_for_snapshot_turn,
};
use super::{publish_state, ClientStream, Next};
use crate::cmd::{After, ClientState, ReplyMode};
use crate::resp::Reply;
use crate::state::{ClientInfo, Shared};

/// Carries out `after`, the batch's last command's: what it waited for is
/// answered in `output`, and `After::Continue` is returned (`next` set to
/// close when the answer ends the connection, `resume_buffered` when
/// commands after it are buffered already). Any other `After` is returned
/// as it came, for the connection loop. `None`: the connection must close
/// now (killed, or a write failed).
#[allow(clippy::too_many_arguments)]
pub(super) async fn carry_out(
    shared: &Arc<Shared>,
    info: &ClientInfo,
    stream: &mut impl ClientStream,
    client: &mut ClientState,
    input: &mut BytesMut,
    output: &mut BytesMut,
    mut killed: Pin<&mut Notified<'_>>,
    after: After,
    next: &mut Next,
    resume_buffered: &mut bool,
) -> Option<After> {
    match after {
        After::Migrate(migration) => {
            // MIGRATE's network half; the commands after it wait, as
            // Redis's client does.
            let (reply, offset) = crate::net::migrate::carry_out(shared, *migration).await;
            answer(client, output, &reply);
            // The keys it dropped are in the append-only file before the
            // reply goes (under `always`, synced: waited for below).
            if offset != 0 && !crate::persistence::aof::before_reply(shared, offset) {
                client.aof_offset = client.aof_offset.max(offset);
            }
            *resume_buffered = !input.is_empty();
            Some(After::Continue)
        }
        After::Block {
            waiter,
            deadline,
            call_usec,
        } => {
            // The replies owed before the blocking command go first.
            let outcome = if send_owed(shared, info, stream, client, output, killed.as_mut()).await
            {
                publish_state(client, input, output);
                wait_blocked(shared, &waiter, deadline, stream, input, killed.as_mut()).await
            } else {
                None
            };
            shared.blocked.remove(&waiter);
            let outcome = outcome?;
            if outcome.logged() {
                crate::cmd::log_unblocked(shared, info, &waiter.argv, call_usec);
            }
            match &outcome {
                crate::blocking::Outcome::Served { aof_offset, .. } => {
                    client.aof_offset = client.aof_offset.max(*aof_offset);
                }
                // The error is sent, then the connection closes.
                crate::blocking::Outcome::RoleChanged => *next = Next::Close,
                _ => {}
            }
            let reply = outcome.into_reply();
            answer(client, output, &reply);
            // In INFO errorstats from the moment it is answered, as Redis
            // counts it on unblocking, not at this client's next command.
            client.batch.flush_errors(shared);
            *resume_buffered = !input.is_empty();
            Some(After::Continue)
        }
        After::WaitForShutdown => {
            if !wait_for_shutdown(shared, killed.as_mut()).await {
                return None;
            }
            // It did not happen: its save failed, or SHUTDOWN ABORT.
            let reply = Reply::error(crate::cmd::server::SHUTDOWN_FAILED);
            answer(client, output, &reply);
            *resume_buffered = !input.is_empty();
            Some(After::Continue)
        }
        After::WaitForAof {
            local,
            wanted,
            aof_offset,
            offset,
            timeout_ms,
        } => {
            let (here, replicas) = wait_for_aof(
                shared,
                (local, wanted),
                (aof_offset, offset),
                timeout_ms,
                killed.as_mut(),
            )
            .await?;
            answer(
                client,
                output,
                &crate::cmd::replication::aof_reply(here, replicas),
            );
            *resume_buffered = !input.is_empty();
            Some(After::Continue)
        }
        After::SendSnapshot { snapshot, close } => {
            // What is owed goes first (PSYNC's +FULLRESYNC line), then
            // the snapshot once written; the stream queued meanwhile
            // follows it.
            if !send_owed(shared, info, stream, client, output, killed.as_mut()).await {
                return None;
            }
            let bytes = match snapshot {
                crate::cmd::Snapshot::Started(bytes) => bytes,
                crate::cmd::Snapshot::Queued(turn) => {
                    wait_for_snapshot_turn(shared, info, stream, &turn, killed.as_mut()).await?
                }
            };
            let file = wait_for_snapshot(shared, info, stream, bytes, killed.as_mut()).await?;
            info.replica.awaits_snapshot.store(false, Ordering::Relaxed);
            match file {
                Ok(file) => {
                    output.extend_from_slice(format!("${}\r\n", file.len()).as_bytes());
                    output.extend_from_slice(&file);
                }
                Err(e) => {
                    tracing::warn!(client = info.id, error = %e, "a replica's snapshot failed");
                    Reply::error_bytes(format!("ERR {e}").into_bytes())
                        .encode(client.proto, output);
                    *next = Next::Close;
                }
            }
            if close {
                *next = Next::Close;
            }
            *resume_buffered = !input.is_empty();
            Some(After::Continue)
        }
        After::WaitForReplicas {
            wanted,
            offset,
            timeout_ms,
        } => {
            let count =
                wait_for_replicas(shared, wanted, offset, timeout_ms, killed.as_mut()).await?;
            answer(client, output, &Reply::Int(count as i64));
            *resume_buffered = !input.is_empty();
            Some(After::Continue)
        }
        after => Some(after),
    }
}

/// Gives the waiting command's reply as the dispatcher gives a command's:
/// an error is counted (INFO errorstats), and nothing is sent under
/// CLIENT REPLY OFF.
fn answer(client: &mut ClientState, output: &mut BytesMut, reply: &Reply) {
    if let Reply::Error(text) = reply {
        client.batch.errors.count(text);
    }
    if client.replies != ReplyMode::Off {
        reply.encode(client.proto, output);
    }
}
