//! tally-server: a Redis-protocol counter store for API rate limiting.
//!
//! The server speaks RESP2/RESP3 and Redis 7.0's commands for strings,
//! counters, keys and TTLs, keeps its keyspace in sharded in-memory tables,
//! never evicts, and can run inside another tokio program:
//!
//! ```no_run
//! # async fn demo() -> std::io::Result<()> {
//! use tally_server::{Config, Server};
//!
//! let config = Config { port: 0, ..Config::default() };
//! let handle = Server::new(config).start().await?;
//! println!("listening on {}", handle.local_addr());
//! handle.shutdown().await;
//! # Ok(())
//! # }
//! ```
#![warn(missing_docs)]
// No panic may reach a worker from a request: `unwrap`/`expect` are refused
// outside tests, and the few that remain state why they cannot fail.
#![cfg_attr(not(test), deny(clippy::unwrap_used, clippy::expect_used))]

pub mod allocator;
pub mod cmd;
pub mod config;
pub mod expiry;
pub mod float;
#[cfg(feature = "fuzzing")]
pub mod fuzzing;
pub mod glob;
pub mod latency;
pub mod metrics;
pub mod monitor;
pub mod net;
pub mod pause;
pub mod persistence;
pub mod pubsub;
pub mod resp;
pub mod scripting;
pub mod slowlog;
pub mod state;
pub mod stats;
pub mod store;
pub mod tracking;
pub mod util;

use std::net::SocketAddr;
use std::sync::atomic::Ordering;
use std::sync::Arc;

use tokio::net::TcpListener;
use tokio::task::JoinHandle;

pub use config::Config;
pub use state::Shared;
pub use store::{Clock, ManualClock, SystemClock};

/// A server built from a [`Config`], not yet listening.
pub struct Server {
    config: Config,
}

impl Server {
    /// A server for `config`.
    pub fn new(config: Config) -> Server {
        Server { config }
    }

    /// Binds every `bind` address on `port` and starts serving inside the
    /// current tokio runtime. Port 0 picks a free port; the handle tells which.
    pub async fn start(self) -> std::io::Result<ServerHandle> {
        let mut listeners = Vec::new();
        let mut port = self.config.port;
        for address in &self.config.bind {
            let host = address.trim_start_matches('-');
            let listener = TcpListener::bind((host, port)).await?;
            if port == 0 {
                // Every address listens on the same port, like Redis.
                port = listener.local_addr()?.port();
            }
            listeners.push(listener);
        }
        let local_addr = match listeners.first() {
            Some(listener) => listener.local_addr()?,
            None => {
                return Err(std::io::Error::new(
                    std::io::ErrorKind::InvalidInput,
                    "no bind address configured",
                ))
            }
        };
        // The Prometheus endpoint, when asked for, on the first address.
        let metrics_listener = match self.config.metrics_port {
            0 => None,
            metrics_port => {
                let host = self.config.bind[0].trim_start_matches('-').to_string();
                Some(TcpListener::bind((host.as_str(), metrics_port)).await?)
            }
        };
        let skip_unsupported = self.config.rdb_skip_unsupported;
        let shared = Arc::new(Shared::new(self.config));
        let _ = shared.itself.set(Arc::downgrade(&shared));
        *shared.local_addr.lock() = Some(local_addr);
        // The snapshot, if there is one: checked whole before the port
        // opens (a damaged file stops the start), loaded while clients get
        // -LOADING, as Redis does.
        if let Some(data) = persistence::snapshot::open(&shared).map_err(std::io::Error::other)? {
            shared.persistence.loading.store(true, Ordering::SeqCst);
            let loader = shared.clone();
            tokio::task::spawn_blocking(move || {
                match persistence::snapshot::load(&loader, &data, skip_unsupported) {
                    Ok(loaded) => tracing::info!(
                        keys = loaded.keys,
                        expired = loaded.expired,
                        skipped = loaded.skipped,
                        "DB loaded from disk"
                    ),
                    Err(message) => {
                        tracing::error!("Fatal error loading the DB: {message}. Exiting.");
                        loader.persistence.load_failed.store(true, Ordering::SeqCst);
                        loader.begin_shutdown();
                    }
                }
                loader.persistence.loading.store(false, Ordering::SeqCst);
            });
        }
        let sweeper = tokio::spawn(expiry::run(shared.clone()));
        let sampler = tokio::spawn(stats::run_sampler(shared.clone()));
        let save_schedule = tokio::spawn(persistence::run_schedule(shared.clone()));
        if let Some(listener) = metrics_listener {
            tokio::spawn(metrics::run(shared.clone(), listener));
        }
        let accept_loop = tokio::spawn(net::listener::run(shared.clone(), listeners));
        let task = tokio::spawn(async move {
            let _ = accept_loop.await;
            sweeper.abort();
            sampler.abort();
            save_schedule.abort();
        });
        Ok(ServerHandle {
            local_addr,
            shared,
            task,
        })
    }
}

/// A running server.
pub struct ServerHandle {
    local_addr: SocketAddr,
    shared: Arc<Shared>,
    task: JoinHandle<()>,
}

impl ServerHandle {
    /// The address the server listens on (the first, when several are bound).
    pub fn local_addr(&self) -> SocketAddr {
        self.local_addr
    }

    /// The server's shared state (store, statistics), for embedding programs
    /// and tests.
    pub fn shared(&self) -> &Arc<Shared> {
        &self.shared
    }

    /// True once shutdown began (SHUTDOWN, a signal or [`ServerHandle::shutdown`]).
    pub fn is_shutting_down(&self) -> bool {
        self.shared.shutting_down.load(Ordering::SeqCst)
    }

    /// Stops accepting, lets connections finish the replies they owe, and
    /// returns when every connection is closed.
    pub async fn shutdown(self) {
        self.shared.begin_shutdown();
        let _ = self.task.await;
    }

    /// Waits until the server stops by itself (the SHUTDOWN command).
    pub async fn wait(self) {
        let _ = self.task.await;
    }
}
