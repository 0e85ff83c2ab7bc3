//! The accept loop: registers each connection (enforcing `maxclients`) and
//! spawns its task (on a connection worker, when the server has them); on shutdown stops accepting and waits for connections to
//! finish the replies they owe.

use std::net::SocketAddr;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use tokio::io::{AsyncWrite, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream, UnixListener, UnixStream};
use tokio::task::JoinSet;

use super::workers::ConnectionWorkers;
use crate::cmd::error;
use crate::state::{ClientInfo, Shared};

/// How long shutdown waits for connections to finish their last batch.
const DRAIN_TIMEOUT: Duration = Duration::from_secs(5);

/// How long a TLS client has to finish its handshake.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// An accepted connection.
pub enum Accepted {
    /// On a TCP port: the stream, its peer and local addresses, and
    /// whether the port is the TLS one.
    Tcp(TcpStream, SocketAddr, SocketAddr, bool),
    /// On the Unix socket, whose path it carries.
    Unix(UnixStream, Arc<str>),
}

/// The Unix socket clients may connect to (`unixsocket`): its path, and
/// the listener.
pub struct UnixSocket {
    path: Arc<str>,
    listener: UnixListener,
}

/// Listens on the Unix socket at `path`, replacing a file left there (a
/// previous run's socket), with the permissions `perm` when not 0, as
/// Redis's anetUnixServer does.
pub fn bind_unix(path: &str, perm: u32) -> std::io::Result<UnixSocket> {
    let _ = std::fs::remove_file(path);
    let listener = UnixListener::bind(path)?;
    if perm != 0 {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(perm))?;
    }
    Ok(UnixSocket {
        path: path.into(),
        listener,
    })
}

/// Accepts connections on `listeners` (plain) and `tls_listeners` until
/// shutdown, then drains them. With `workers`, each connection is served
/// on one of them; without, on this runtime.
pub async fn run(
    shared: Arc<Shared>,
    listeners: Vec<(Endpoint, TcpListener)>,
    tls_listeners: Vec<(Endpoint, TcpListener)>,
    unix: Option<UnixSocket>,
    workers: Option<Arc<ConnectionWorkers>>,
) {
    let mut connections = JoinSet::new();
    let (tx, mut rx) = tokio::sync::mpsc::channel::<Accepted>(1024);
    let tx_unix = tx.clone();
    *shared.listening.lock() = Some(Listening::new(
        tx,
        tokio::runtime::Handle::current(),
        listeners.into_iter().chain(tls_listeners).collect(),
    ));
    let unix_path = unix.as_ref().map(|socket| socket.path.clone());
    let unix_task = unix.map(|socket| tokio::spawn(accept_unix(socket, tx_unix)));
    let mut stopping = shared.shutdown.subscribe();
    loop {
        tokio::select! {
            accepted = rx.recv() => {
                let Some(accepted) = accepted else { break };
                admit(&shared, workers.as_deref(), &mut connections, accepted);
            }
            Some(_) = connections.join_next(), if !connections.is_empty() => {}
            _ = stopping.wait_for(|&stop| stop) => break,
        }
        if shared.shutting_down.load(Ordering::SeqCst) {
            break;
        }
    }
    // Closed before the server's shutdown returns: an aborted task's
    // listener is dropped only when the runtime next gets to it, and a
    // server started again on the same port must find it free.
    let listening = shared.listening.lock().take();
    if let Some(listening) = listening {
        listening.close().await;
    }
    if let Some(task) = unix_task {
        task.abort();
        let _ = task.await;
    }
    if let Some(path) = unix_path {
        tracing::info!("Removing the unix socket file.");
        let _ = std::fs::remove_file(&*path);
    }
    shared.clients.kill_all();
    let drained = tokio::time::timeout(DRAIN_TIMEOUT, async {
        while connections.join_next().await.is_some() {}
    })
    .await;
    if drained.is_err() {
        connections.abort_all();
    }
}

/// Takes connections from one listening socket and hands them to the
/// accept loop, until aborted.
async fn accept_loop(listener: TcpListener, tls: bool, tx: tokio::sync::mpsc::Sender<Accepted>) {
    loop {
        match listener.accept().await {
            Ok((stream, peer)) => {
                let local = stream.local_addr().unwrap_or(peer);
                if tx
                    .send(Accepted::Tcp(stream, peer, local, tls))
                    .await
                    .is_err()
                {
                    return;
                }
            }
            // That connection's own failure: take the next at once.
            Err(e) if super::accept_failed_for_that_connection_only(&e) => {}
            Err(e) => {
                // Out of file descriptors and similar: back off briefly.
                tracing::warn!("accept failed: {e}");
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
        }
    }
}

/// Takes connections from the Unix socket and hands them to the accept
/// loop, until aborted.
async fn accept_unix(socket: UnixSocket, tx: tokio::sync::mpsc::Sender<Accepted>) {
    loop {
        match socket.listener.accept().await {
            Ok((stream, _)) => {
                if tx
                    .send(Accepted::Unix(stream, socket.path.clone()))
                    .await
                    .is_err()
                {
                    return;
                }
            }
            Err(e) if super::accept_failed_for_that_connection_only(&e) => {}
            Err(e) => {
                tracing::warn!("accept failed on the unix socket: {e}");
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
        }
    }
}

/// The sockets the server listens on for clients, which CONFIG SET bind,
/// port and tls-port replace while it runs.
pub struct Listening {
    /// Where accepted connections go (the accept loop).
    tx: tokio::sync::mpsc::Sender<Accepted>,
    /// The runtime the sockets are registered with.
    runtime: tokio::runtime::Handle,
    /// Each socket as configured (address, port, TLS), the address it
    /// is bound to, and its accept task.
    open: Vec<(Endpoint, Option<SocketAddr>, tokio::task::JoinHandle<()>)>,
}

/// A listening socket as configured: the bind address, the port, TLS.
pub type Endpoint = (String, u16, bool);

impl Listening {
    /// The sockets the server listens on from its start.
    pub fn new(
        tx: tokio::sync::mpsc::Sender<Accepted>,
        runtime: tokio::runtime::Handle,
        sockets: Vec<(Endpoint, TcpListener)>,
    ) -> Listening {
        let mut listening = Listening {
            tx,
            runtime,
            open: Vec::new(),
        };
        for (endpoint, socket) in sockets {
            listening.serve(endpoint, socket);
        }
        listening
    }

    /// Accepts connections on `socket` from now on.
    fn serve(&mut self, endpoint: Endpoint, socket: TcpListener) {
        let bound = socket.local_addr().ok();
        let task = self
            .runtime
            .spawn(accept_loop(socket, endpoint.2, self.tx.clone()));
        self.open.push((endpoint, bound, task));
    }

    /// Stops every accept task and waits until their sockets are closed.
    pub async fn close(self) {
        for (_, _, task) in self.open {
            task.abort();
            let _ = task.await;
        }
    }
}

/// Listens on `port` and `tls_port` at every `bind` address, instead of
/// the sockets open now, as Redis's changeListenPort and changeBindAddr
/// do. A socket already open at an address and port that stays is kept;
/// the new ones are all opened before any old one closes, so a failure
/// (the port taken, an address this host does not have) changes nothing.
/// Port 0 means no socket of that kind, as in Redis. Connections already
/// made stay open. Returns the first plain address listened on, if any.
pub fn relisten(
    shared: &Shared,
    bind: &[String],
    port: u16,
    tls_port: u16,
) -> Result<Option<SocketAddr>, String> {
    let mut slot = shared.listening.lock();
    let Some(listening) = slot.as_mut() else {
        return Err("the server is not listening".to_string());
    };
    let wanted: Vec<Endpoint> = [(port, false), (tls_port, true)]
        .into_iter()
        .filter(|(port, _)| *port != 0)
        .flat_map(|(port, tls)| bind.iter().map(move |host| (host.clone(), port, tls)))
        .collect();
    let _runtime = listening.runtime.enter();
    let mut opened = Vec::new();
    for endpoint in &wanted {
        if listening.open.iter().any(|(e, _, _)| e == endpoint) {
            continue;
        }
        let (host, port, _) = endpoint;
        let host = host.trim_start_matches('-');
        let socket = std::net::TcpListener::bind((host, *port))
            .and_then(|socket| {
                socket.set_nonblocking(true)?;
                TcpListener::from_std(socket)
            })
            .map_err(|e| {
                tracing::warn!("cannot listen on {host}:{port}: {e}");
                format!("{host}:{port}: {e}")
            })?;
        opened.push((endpoint.clone(), socket));
    }
    for (endpoint, bound, task) in std::mem::take(&mut listening.open) {
        if wanted.contains(&endpoint) {
            listening.open.push((endpoint, bound, task));
        } else {
            task.abort();
        }
    }
    for (endpoint, socket) in opened {
        listening.serve(endpoint, socket);
    }
    let first_plain = wanted.iter().find(|(_, _, tls)| !tls).and_then(|first| {
        listening
            .open
            .iter()
            .find(|(endpoint, _, _)| endpoint == first)
            .and_then(|(_, bound, _)| *bound)
    });
    Ok(first_plain)
}

/// Redis's refusal of a client from outside the loopback interface while
/// protected mode is on and the default user has no password.
pub const DENIED: &str = "-DENIED Redis is running in protected mode because protected mode is \
enabled and no password is set for the default user. In this mode connections are only accepted \
from the loopback interface. If you want to connect from external computers to Redis you may \
adopt one of the following solutions: 1) Just disable protected mode sending the command 'CONFIG \
SET protected-mode no' from the loopback interface by connecting to Redis from the same host the \
server is running, however MAKE SURE Redis is not publicly accessible from internet if you do \
so. Use CONFIG REWRITE to make this change permanent. 2) Alternatively you can just disable the \
protected mode by editing the Redis configuration file, and setting the protected mode option to \
'no', and then restarting the server. 3) If you started the server manually just for testing, \
restart it with the '--protected-mode no' option. 4) Setup a an authentication password for the \
default user. NOTE: You only need to do one of the above things in order for the server to \
start accepting connections from the outside.\r\n";

/// True when a client connecting from `peer` must be refused: protected
/// mode is on, the default user needs no password, and the peer is not on
/// the loopback interface (Redis 7.0's clientAcceptHandler).
pub fn protected_refusal(shared: &Shared, peer: SocketAddr) -> bool {
    shared.config.read().protected_mode
        && !peer.ip().is_loopback()
        && !peer.ip().to_canonical().is_loopback()
        && shared.acl.user("default").is_none_or(|u| u.nopass)
}

fn admit(
    shared: &Arc<Shared>,
    workers: Option<&ConnectionWorkers>,
    connections: &mut JoinSet<()>,
    accepted: Accepted,
) {
    shared
        .stats
        .connections_received
        .fetch_add(1, Ordering::Relaxed);
    let now = shared.clock.now_ms();
    let id = shared.clients.next_id();
    let info = match &accepted {
        Accepted::Tcp(_, peer, local, tls) => {
            if protected_refusal(shared, *peer) {
                refuse(shared, connections, accepted, DENIED.to_string());
                return;
            }
            ClientInfo::new(id, *peer, *local, now).over_tls(*tls)
        }
        Accepted::Unix(_, path) => {
            let addr = crate::clients::ClientAddr::Unix(path.clone());
            ClientInfo::new(id, addr.clone(), addr, now)
        }
    };
    let info = Arc::new(info);
    let maxclients = shared.config.read().maxclients;
    if shared.clients.register(info.clone(), maxclients).is_err() {
        // Redis answers with the error and closes.
        refuse(
            shared,
            connections,
            accepted,
            format!("-{}\r\n", error::MAX_CLIENTS),
        );
        return;
    }
    let shared = shared.clone();
    let Some(workers) = workers else {
        connections.spawn(serve_accepted(shared, accepted, info));
        return;
    };
    let (worker, placement) = workers.place();
    // A socket belongs to the reactor of the runtime that accepted it: it
    // moves to its worker as a plain socket and is registered there.
    let moved = match accepted {
        Accepted::Tcp(stream, _, _, tls) => stream.into_std().map(|s| Moved::Tcp(s, tls)),
        Accepted::Unix(stream, path) => stream.into_std().map(|s| Moved::Unix(s, path)),
    };
    let moved = match moved {
        Ok(moved) => moved,
        Err(e) => {
            tracing::debug!(peer = %info.addr, "cannot hand the connection to a worker: {e}");
            shared.clients.unregister(info.id);
            return;
        }
    };
    connections.spawn_on(
        async move {
            let _placement = placement;
            let accepted = match moved {
                Moved::Tcp(stream, tls) => TcpStream::from_std(stream).map(|stream| {
                    Accepted::Tcp(stream, placeholder(), placeholder(), tls)
                }),
                Moved::Unix(stream, path) => {
                    UnixStream::from_std(stream).map(|stream| Accepted::Unix(stream, path))
                }
            };
            match accepted {
                Ok(accepted) => serve_accepted(shared, accepted, info).await,
                Err(e) => {
                    tracing::debug!(peer = %info.addr, "cannot serve the connection on its worker: {e}");
                    shared.clients.unregister(info.id);
                }
            }
        },
        &worker,
    );
}

/// A connection on its way to a connection worker, as a plain socket.
enum Moved {
    Tcp(std::net::TcpStream, bool),
    Unix(std::os::unix::net::UnixStream, Arc<str>),
}

/// An address the served connection does not read: its addresses are in
/// its [`ClientInfo`] by then.
fn placeholder() -> SocketAddr {
    SocketAddr::from(([0, 0, 0, 0], 0))
}

/// Counts a refused connection and answers it `reply` before closing it,
/// without holding up the accept loop.
fn refuse(shared: &Shared, connections: &mut JoinSet<()>, accepted: Accepted, reply: String) {
    shared
        .stats
        .rejected_connections
        .fetch_add(1, Ordering::Relaxed);
    async fn answer(mut stream: impl AsyncWrite + Unpin, reply: String) {
        let _ = stream.write_all(reply.as_bytes()).await;
        let _ = stream.shutdown().await;
    }
    match accepted {
        Accepted::Tcp(stream, ..) => connections.spawn(answer(stream, reply)),
        Accepted::Unix(stream, _) => connections.spawn(answer(stream, reply)),
    };
}

/// Serves an admitted connection, TLS after its handshake.
async fn serve_accepted(shared: Arc<Shared>, accepted: Accepted, info: Arc<ClientInfo>) {
    let (stream, tls) = match accepted {
        Accepted::Tcp(stream, _, _, tls) => (stream, tls),
        Accepted::Unix(stream, _) => {
            return crate::net::connection::serve_unix(shared, stream, info).await;
        }
    };
    if !tls {
        return crate::net::connection::serve(shared, stream, info).await;
    }
    // The handshake runs in the connection's own task, bounded, so a slow
    // or silent TLS client holds up nobody else.
    let Some(acceptor) = shared.tls.acceptor() else {
        shared.clients.unregister(info.id);
        return;
    };
    let peer = info.addr.clone();
    crate::net::connection::prepare_socket(&stream, &info);
    match tokio::time::timeout(HANDSHAKE_TIMEOUT, acceptor.accept(stream)).await {
        Ok(Ok(tls_stream)) => crate::net::connection::serve_stream(shared, tls_stream, info).await,
        Ok(Err(e)) => {
            tracing::debug!(%peer, "TLS handshake failed: {e}");
            shared.clients.unregister(info.id);
        }
        Err(_) => {
            tracing::debug!(%peer, "TLS handshake timed out");
            shared.clients.unregister(info.id);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Config;

    /// Only the decision: tests never send traffic to another address.
    #[test]
    fn protected_mode_refuses_outsiders_while_the_default_user_has_no_password() {
        let outsider: SocketAddr = "192.0.2.7:50000".parse().expect("address");
        let local: SocketAddr = "127.0.0.1:50000".parse().expect("address");
        let mapped: SocketAddr = "[::ffff:127.0.0.1]:50000".parse().expect("address");
        let shared = Shared::new(Config::default());
        assert!(protected_refusal(&shared, outsider));
        assert!(!protected_refusal(&shared, local));
        assert!(!protected_refusal(&shared, mapped));
        shared.acl.set_requirepass(Some("secret"));
        assert!(!protected_refusal(&shared, outsider), "a password lifts it");
        let open = Shared::new(Config {
            protected_mode: false,
            ..Config::default()
        });
        assert!(!protected_refusal(&open, outsider), "protected-mode no");
    }
}
