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

pub mod acl;
pub mod allocator;
pub mod blocking;
pub mod catalog;
pub mod clients;
pub mod cluster;
pub mod cmd;
pub mod config;
pub mod event_classes;
pub mod expiry;
pub mod failover;
pub mod float;
#[cfg(feature = "fuzzing")]
pub mod fuzzing;
pub mod geo;
pub mod glob;
pub mod hyperloglog;
pub mod keyspace_events;
pub mod latency;
pub mod master_link;
pub mod metrics;
pub mod monitor;
pub mod net;
pub mod number;
pub mod pause;
pub mod persistence;
pub mod pubsub;
pub mod resp;
pub mod scripting;
pub mod slot_gate;
pub mod slowlog;
pub mod state;
pub mod stats;
pub mod store;
pub mod striped;
pub mod syslog;
pub mod throttle;
pub mod tracking;
pub mod util;

use std::net::SocketAddr;
use std::sync::atomic::Ordering;
use std::sync::Arc;

use tokio::net::TcpListener;
use tokio::task::JoinHandle;

pub use config::Config;
pub use net::workers::ConnectionWorkers;
pub use state::Shared;
pub use store::{Clock, ManualClock, SystemClock};

/// A server built from a [`Config`], not yet listening.
pub struct Server {
    config: Config,
    workers: Option<Arc<ConnectionWorkers>>,
}

impl Server {
    /// A server for `config`.
    pub fn new(config: Config) -> Server {
        Server {
            config,
            workers: None,
        }
    }

    /// Serves each client connection on one of `workers` rather than on
    /// the runtime the server starts in (see [`net::workers`]).
    pub fn with_connection_workers(mut self, workers: Arc<ConnectionWorkers>) -> Server {
        self.workers = Some(workers);
        self
    }

    /// Binds every `bind` address on `port` and starts serving inside the
    /// current tokio runtime. Port 0 picks a free port; the handle tells which.
    /// With `tls-port` set, `port 0` means what it means to Redis: no
    /// plaintext port at all, the server speaks TLS only.
    pub async fn start(self) -> std::io::Result<ServerHandle> {
        // A TLS-only server must not open a plaintext port anywhere: an
        // ephemeral one would serve in clear text what the operator meant
        // to encrypt.
        let tls_only = self.config.port == 0 && self.config.tls.port != 0;
        let mut listeners = Vec::new();
        let mut port = self.config.port;
        if !tls_only {
            for address in &self.config.bind {
                let host = address.trim_start_matches('-');
                let listener = TcpListener::bind((host, port)).await?;
                if port == 0 {
                    // Every address listens on the same port, like Redis.
                    port = listener.local_addr()?.port();
                }
                listeners.push(((address.clone(), port, false), listener));
            }
        }
        // TLS beside the plain port, on every bind address.
        let mut tls_listeners = Vec::new();
        if self.config.tls.port != 0 {
            for address in &self.config.bind {
                let host = address.trim_start_matches('-');
                tls_listeners.push((
                    (address.clone(), self.config.tls.port, true),
                    TcpListener::bind((host, self.config.tls.port)).await?,
                ));
            }
        }
        let tls_addr = tls_listeners
            .first()
            .map(|(_, l)| l.local_addr())
            .transpose()?;
        let plain_addr = listeners.first().map(|(_, l)| l.local_addr()).transpose()?;
        // The port clients reach; in a TLS-only server the TLS one, which
        // is also what Redis's INFO gives as tcp_port then.
        let local_addr = plain_addr.or(tls_addr).ok_or_else(|| {
            std::io::Error::new(
                std::io::ErrorKind::InvalidInput,
                "no bind address configured",
            )
        })?;
        let plain_port = plain_addr.map_or(0, |a| a.port());
        // The Unix socket (`unixsocket`), beside the TCP ones.
        let unix_listener = match self.config.unixsocket.as_str() {
            "" => None,
            path => Some(net::listener::bind_unix(path, self.config.unixsocketperm)?),
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
        let aclfile = self.config.aclfile.clone();
        if !aclfile.is_empty() && !self.config.users.is_empty() {
            return Err(std::io::Error::other(
                "Configuring Redis with users defined in redis.conf and at the same setting an \
                 ACL file path is invalid. This setup is very likely to lead to configuration \
                 errors and security holes, please define either an ACL file or declare users \
                 directly in your redis.conf, but not both.",
            ));
        }
        let shared = Arc::new(Shared::new(self.config));
        let _ = shared.itself.set(Arc::downgrade(&shared));
        let tls_wanted = {
            let tls = &shared.config.read().tls;
            tls.port != 0 || tls.replication || tls.cluster
        };
        if tls_wanted {
            let settings = shared.config.read().tls.clone();
            shared
                .tls
                .install(&settings)
                .map_err(std::io::Error::other)?;
        }
        if !aclfile.is_empty() {
            acl::file::load(&shared.acl, &aclfile).map_err(std::io::Error::other)?;
        }
        let cluster_config = {
            let config = shared.config.read();
            config.cluster_enabled.then(|| {
                (
                    std::path::Path::new(&config.dir).join(&config.cluster_config_file),
                    config.cluster_require_full_coverage,
                    config.cluster_node_timeout,
                    // Redis: 10000 above the client port, the TLS one
                    // with tls-cluster.
                    match config.cluster_port {
                        0 if config.tls.cluster && config.tls.port != 0 => {
                            config.tls.port.wrapping_add(10000)
                        }
                        0 => local_addr.port().wrapping_add(10000),
                        port => port,
                    },
                    config.bind[0].trim_start_matches('-').to_string(),
                )
            })
        };
        let mut bus_listener = None;
        if let Some((path, full_coverage, node_timeout, cport, host)) = cluster_config {
            // The bus port, on the first bind address.
            bus_listener = Some(TcpListener::bind((host.as_str(), cport)).await?);
            let node = cluster::Cluster::open(path, plain_port, cport, node_timeout, full_coverage)
                .map_err(std::io::Error::other)?;
            node.allow_reads_when_down.store(
                shared.config.read().cluster_allow_reads_when_down,
                Ordering::Relaxed,
            );
            node.allow_pubsubshard_when_down.store(
                shared.config.read().cluster_allow_pubsubshard_when_down,
                Ordering::Relaxed,
            );
            {
                let config = shared.config.read();
                node.announce(&config);
            }
            let itself = Arc::downgrade(&shared);
            node.on_slots_lost(Box::new(move |lost| {
                let Some(shared) = itself.upgrade() else {
                    return;
                };
                let lost: hashbrown::HashSet<u16> = lost.iter().copied().collect();
                shared.pubsub.drop_shard_channels(
                    |channel| lost.contains(&tally_cluster::slot::key_slot(channel)),
                    shared.clock.now_ms(),
                );
            }));
            let _ = shared.cluster.set(node);
            // Before anything is loaded: every key is indexed by its slot.
            shared.store.enable_slot_index();
        }
        *shared.local_addr.lock() = Some(local_addr);
        // With `appendonly yes` the append-only file is loaded and the
        // snapshot is not, as in Redis; otherwise the snapshot, if there is
        // one. Either is checked before the port opens (a damaged file stops
        // the start) and loaded while clients get -LOADING.
        if let Some(plan) = persistence::aof::plan(&shared).map_err(std::io::Error::other)? {
            shared.persistence.loading.store(true, Ordering::SeqCst);
            let loader = shared.clone();
            tokio::task::spawn_blocking(move || {
                let mut replay = cmd::persistence::aof_replayer(&loader);
                match persistence::aof::load_and_open(&loader, plan, &mut replay) {
                    Ok(loaded) => {
                        // The replay ran at time 0; its keys were used now.
                        loader.store.stamp_loaded_keys(loader.clock.now_ms());
                        tracing::info!(
                            base_keys = loaded.base_keys,
                            commands = loaded.commands,
                            truncated = loaded.truncated,
                            "DB loaded from append only file"
                        )
                    }
                    Err(message) => {
                        tracing::error!(
                            "Fatal error loading the append only file: {message}. Exiting."
                        );
                        loader.persistence.fatal.store(true, Ordering::SeqCst);
                        loader.begin_shutdown();
                    }
                }
                loader.persistence.loading.store(false, Ordering::SeqCst);
            });
        } else if let Some(data) =
            persistence::snapshot::open(&shared).map_err(std::io::Error::other)?
        {
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
                        loader.persistence.fatal.store(true, Ordering::SeqCst);
                        loader.begin_shutdown();
                    }
                }
                loader.persistence.loading.store(false, Ordering::SeqCst);
            });
        }
        let sweeper = tokio::spawn(expiry::run(shared.clone()));
        let sampler = tokio::spawn(stats::run_sampler(shared.clone()));
        let save_schedule = tokio::spawn(persistence::run_schedule(shared.clone()));
        let aof_writer = tokio::spawn(persistence::aof::run(shared.clone()));
        let master_link = tokio::spawn(net::replica::run(shared.clone()));
        let failovers = tokio::spawn(cmd::failover::run(shared.clone()));
        let bus =
            bus_listener.map(|listener| tokio::spawn(net::bus::run(shared.clone(), listener)));
        let metrics =
            metrics_listener.map(|listener| tokio::spawn(metrics::run(shared.clone(), listener)));
        let accept_loop = tokio::spawn(net::listener::run(
            shared.clone(),
            listeners,
            tls_listeners,
            unix_listener,
            self.workers,
        ));
        let closing = shared.clone();
        let task = tokio::spawn(async move {
            let _ = accept_loop.await;
            sweeper.abort();
            sampler.abort();
            save_schedule.abort();
            aof_writer.abort();
            master_link.abort();
            failovers.abort();
            // The bus and the metrics endpoint stop on the shutdown signal
            // and close their listeners before the handle's shutdown returns.
            for task in bus.into_iter().chain(metrics) {
                let _ = task.await;
            }
            // Every connection is closed: what the feed holds goes to the
            // append-only file, fsynced, before the server is gone.
            let _ = tokio::task::spawn_blocking(move || persistence::aof::shutdown(&closing)).await;
        });
        Ok(ServerHandle {
            local_addr,
            tls_addr,
            shared,
            task,
        })
    }
}

/// A running server.
pub struct ServerHandle {
    local_addr: SocketAddr,
    tls_addr: Option<SocketAddr>,
    shared: Arc<Shared>,
    task: JoinHandle<()>,
}

impl ServerHandle {
    /// The address the server listens on (the first, when several are
    /// bound): the plain port's, or in a TLS-only server (`port 0` with
    /// `tls-port`) the TLS port's.
    pub fn local_addr(&self) -> SocketAddr {
        self.local_addr
    }

    /// The TLS port's address (the first bind address), when `tls-port`
    /// is set.
    pub fn tls_addr(&self) -> Option<SocketAddr> {
        self.tls_addr
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
    /// returns when every connection is closed and every port it listened
    /// on (client, TLS, cluster bus, metrics) is free again.
    pub async fn shutdown(self) {
        self.shared.begin_shutdown();
        let _ = self.task.await;
    }

    /// Waits until the server stops by itself (the SHUTDOWN command).
    pub async fn wait(self) {
        let _ = self.task.await;
    }
}
