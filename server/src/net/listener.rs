//! The accept loop: registers each connection (enforcing `maxclients`) and
//! spawns its task; on shutdown stops accepting and waits for connections to
//! finish the replies they owe.

use std::net::SocketAddr;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use tokio::io::AsyncWriteExt;
use tokio::net::{TcpListener, TcpStream};
use tokio::task::JoinSet;

use crate::cmd::error;
use crate::state::{ClientInfo, Shared};

/// How long shutdown waits for connections to finish their last batch.
const DRAIN_TIMEOUT: Duration = Duration::from_secs(5);

/// Accepts connections on `listeners` until shutdown, then drains them.
pub async fn run(shared: Arc<Shared>, listeners: Vec<TcpListener>) {
    let mut connections = JoinSet::new();
    let mut accepts = JoinSet::new();
    let (tx, mut rx) = tokio::sync::mpsc::channel::<(TcpStream, SocketAddr, SocketAddr)>(1024);
    for listener in listeners {
        let tx = tx.clone();
        accepts.spawn(async move {
            loop {
                match listener.accept().await {
                    Ok((stream, peer)) => {
                        let local = stream.local_addr().unwrap_or(peer);
                        if tx.send((stream, peer, local)).await.is_err() {
                            return;
                        }
                    }
                    Err(e) => {
                        // Out of file descriptors and similar: back off briefly.
                        tracing::warn!("accept failed: {e}");
                        tokio::time::sleep(Duration::from_millis(10)).await;
                    }
                }
            }
        });
    }
    drop(tx);
    let mut stopping = shared.shutdown.subscribe();
    loop {
        tokio::select! {
            accepted = rx.recv() => {
                let Some((stream, peer, local)) = accepted else { break };
                admit(&shared, &mut connections, stream, peer, local);
            }
            Some(_) = connections.join_next(), if !connections.is_empty() => {}
            _ = stopping.wait_for(|&stop| stop) => break,
        }
        if shared.shutting_down.load(Ordering::SeqCst) {
            break;
        }
    }
    accepts.abort_all();
    shared.clients.kill_all();
    let drained = tokio::time::timeout(DRAIN_TIMEOUT, async {
        while connections.join_next().await.is_some() {}
    })
    .await;
    if drained.is_err() {
        connections.abort_all();
    }
}

fn admit(
    shared: &Arc<Shared>,
    connections: &mut JoinSet<()>,
    mut stream: TcpStream,
    peer: SocketAddr,
    local: SocketAddr,
) {
    shared
        .stats
        .connections_received
        .fetch_add(1, Ordering::Relaxed);
    let now = shared.clock.now_ms();
    let info = Arc::new(ClientInfo::new(shared.clients.next_id(), peer, local, now));
    let maxclients = shared.config.read().maxclients;
    if shared.clients.register(info.clone(), maxclients).is_err() {
        shared
            .stats
            .rejected_connections
            .fetch_add(1, Ordering::Relaxed);
        // Redis answers with the error and closes; do the same without
        // holding up the accept loop.
        connections.spawn(async move {
            let reply = format!("-{}\r\n", error::MAX_CLIENTS);
            let _ = stream.write_all(reply.as_bytes()).await;
            let _ = stream.shutdown().await;
        });
        return;
    }
    let shared = shared.clone();
    connections.spawn(crate::net::connection::serve(shared, stream, info));
}
