//! The `tally-server` binary: parse redis-server-style options, start the
//! server on a multi-threaded tokio runtime, stop cleanly on SIGINT, SIGTERM
//! or SHUTDOWN.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::Parser;
use tally_server::{Config, Server};

/// A Redis-protocol counter store for API rate limiting.
///
/// Options are named as redis-server's. A redis.conf-style file may be given
/// first; options on the command line override it.
#[derive(Parser, Debug)]
#[command(name = "tally-server", version, about, long_about = None)]
struct Cli {
    /// redis.conf-style configuration file (one `directive value` per line).
    config_file: Option<PathBuf>,

    /// TCP port to listen on (0 picks a free port). [default: 6379]
    #[arg(long)]
    port: Option<u16>,

    /// Addresses to listen on. [default: 127.0.0.1]
    #[arg(long, num_args = 1..)]
    bind: Option<Vec<String>>,

    /// Memory limit for data, e.g. 100mb or 1gb (0 = none). Past it, writes get
    /// an OOM error; nothing is evicted.
    #[arg(long)]
    maxmemory: Option<String>,

    /// Eviction policy. Only `noeviction` is accepted: an evicted rate-limit
    /// counter would silently reset a client's window.
    #[arg(long)]
    maxmemory_policy: Option<String>,

    /// Password clients must AUTH with.
    #[arg(long)]
    requirepass: Option<String>,

    /// Number of databases. [default: 16]
    #[arg(long)]
    databases: Option<u64>,

    /// Maximum simultaneous clients. [default: 10000]
    #[arg(long)]
    maxclients: Option<u64>,

    /// Close clients idle for this many seconds (0 = never). [default: 0]
    #[arg(long)]
    timeout: Option<u64>,

    /// Largest bulk string a client may send, e.g. 512mb. [default: 512mb]
    #[arg(long)]
    proto_max_bulk_len: Option<String>,

    /// Largest unprocessed input kept for one client, e.g. 1gb. [default: 1gb]
    #[arg(long)]
    client_query_buffer_limit: Option<String>,

    /// debug, verbose, notice, warning or nothing. [default: notice]
    #[arg(long)]
    loglevel: Option<String>,

    /// Shards per database (a power of two). [default: 8 per core]
    #[arg(long)]
    shards: Option<u64>,

    /// Worker threads. [default: one per core]
    #[arg(long)]
    io_threads: Option<u64>,

    /// Serve Prometheus metrics on this port (on the first bind address).
    /// [default: off]
    #[arg(long)]
    metrics_port: Option<u16>,

    /// Snapshot points, "<seconds> <changes> ..." ("" for none).
    /// [default: 3600 1 300 100 60 10000]
    #[arg(long, allow_hyphen_values = true)]
    save: Option<String>,

    /// Directory of the snapshot file. [default: .]
    #[arg(long)]
    dir: Option<String>,

    /// Snapshot file name, loaded at start and written by SAVE.
    /// [default: dump.rdb]
    #[arg(long)]
    dbfilename: Option<String>,

    /// LZF-compress long strings in snapshots and DUMP (yes/no). [default: yes]
    #[arg(long)]
    rdbcompression: Option<String>,

    /// Stamp snapshots with a CRC64 (yes/no). [default: yes]
    #[arg(long)]
    rdbchecksum: Option<String>,

    /// Load a snapshot's other keys when it holds streams or functions,
    /// which tally does not (yes/no); each skipped key is logged.
    /// [default: no]
    #[arg(long)]
    rdb_skip_unsupported: Option<String>,

    /// Keep the append-only file (yes/no); when on, it is loaded at start
    /// instead of the snapshot. [default: no]
    #[arg(long)]
    appendonly: Option<String>,

    /// When the append-only file is fsynced: always, everysec or no.
    /// [default: everysec]
    #[arg(long)]
    appendfsync: Option<String>,

    /// Directory of the append-only file, inside --dir. [default: appendonlydir]
    #[arg(long)]
    appenddirname: Option<String>,

    /// Base name of the append-only file's parts. [default: appendonly.aof]
    #[arg(long)]
    appendfilename: Option<String>,

    /// Load an append-only file cut short at its end up to its last whole
    /// command (yes/no). [default: yes]
    #[arg(long)]
    aof_load_truncated: Option<String>,

    /// Port for TLS connections, beside the plain port (0: none). [default: 0]
    #[arg(long)]
    tls_port: Option<u16>,

    /// The server's certificate chain (PEM).
    #[arg(long)]
    tls_cert_file: Option<String>,

    /// The server's private key (PEM; encrypted PKCS#8 with
    /// --tls-key-file-pass).
    #[arg(long)]
    tls_key_file: Option<String>,

    /// The password of an encrypted --tls-key-file.
    #[arg(long)]
    tls_key_file_pass: Option<String>,

    /// CA certificates clients are verified against (PEM).
    #[arg(long)]
    tls_ca_cert_file: Option<String>,

    /// Client certificates: yes (required), optional or no. [default: yes]
    #[arg(long)]
    tls_auth_clients: Option<String>,

    /// The cluster bus and MIGRATE between nodes over TLS (yes/no).
    /// [default: no]
    #[arg(long)]
    tls_cluster: Option<String>,

    /// The certificate shown to other nodes (PEM). [default: --tls-cert-file]
    #[arg(long)]
    tls_client_cert_file: Option<String>,

    /// Its private key (PEM). [default: --tls-key-file]
    #[arg(long)]
    tls_client_key_file: Option<String>,

    /// The password of an encrypted --tls-client-key-file.
    #[arg(long)]
    tls_client_key_file_pass: Option<String>,

    /// Refuse clients outside the loopback interface while the default
    /// user has no password (yes/no). [default: yes]
    #[arg(long)]
    protected_mode: Option<String>,

    /// Run as a Redis Cluster node (yes/no). [default: no]
    #[arg(long)]
    cluster_enabled: Option<String>,

    /// The cluster bus port. [default: the port + 10000]
    #[arg(long)]
    cluster_port: Option<u16>,

    /// The IP other cluster nodes are told to reach this one at (behind
    /// NAT, in containers). [default: the one they see]
    #[arg(long)]
    cluster_announce_ip: Option<String>,

    /// The client port other nodes and clients are told. [default: --port]
    #[arg(long)]
    cluster_announce_port: Option<u16>,

    /// The bus port other nodes are told. [default: --cluster-port]
    #[arg(long)]
    cluster_announce_bus_port: Option<u16>,

    /// With --tls-cluster, the TLS port other nodes are told.
    /// [default: --tls-port]
    #[arg(long)]
    cluster_announce_tls_port: Option<u16>,

    /// A hostname other nodes and clients are told (CLUSTER NODES, SLOTS,
    /// SHARDS). [default: none]
    #[arg(long)]
    cluster_announce_hostname: Option<String>,

    /// How redirects, CLUSTER SLOTS and SHARDS name a node: ip, hostname
    /// or unknown-endpoint. [default: ip]
    #[arg(long)]
    cluster_preferred_endpoint_type: Option<String>,

    /// Milliseconds without an answer before a node is suspected failing.
    /// [default: 15000]
    #[arg(long)]
    cluster_node_timeout: Option<u64>,

    /// The node's nodes.conf, in --dir. [default: nodes.conf]
    #[arg(long)]
    cluster_config_file: Option<String>,
}

impl Cli {
    /// The command-line options as (directive, values) pairs, applied after the file.
    fn overrides(&self) -> Vec<(&'static str, Vec<String>)> {
        let mut out = Vec::new();
        let mut one = |name: &'static str, value: Option<String>| {
            if let Some(value) = value {
                out.push((name, vec![value]));
            }
        };
        one("port", self.port.map(|v| v.to_string()));
        one("maxmemory", self.maxmemory.clone());
        one("maxmemory-policy", self.maxmemory_policy.clone());
        one("requirepass", self.requirepass.clone());
        one("databases", self.databases.map(|v| v.to_string()));
        one("maxclients", self.maxclients.map(|v| v.to_string()));
        one("timeout", self.timeout.map(|v| v.to_string()));
        one("proto-max-bulk-len", self.proto_max_bulk_len.clone());
        one(
            "client-query-buffer-limit",
            self.client_query_buffer_limit.clone(),
        );
        one("loglevel", self.loglevel.clone());
        one("shards", self.shards.map(|v| v.to_string()));
        one("io-threads", self.io_threads.map(|v| v.to_string()));
        one("metrics-port", self.metrics_port.map(|v| v.to_string()));
        one("save", self.save.clone());
        one("dir", self.dir.clone());
        one("dbfilename", self.dbfilename.clone());
        one("rdbcompression", self.rdbcompression.clone());
        one("rdbchecksum", self.rdbchecksum.clone());
        one("rdb-skip-unsupported", self.rdb_skip_unsupported.clone());
        one("appendonly", self.appendonly.clone());
        one("appendfsync", self.appendfsync.clone());
        one("appenddirname", self.appenddirname.clone());
        one("appendfilename", self.appendfilename.clone());
        one("aof-load-truncated", self.aof_load_truncated.clone());
        one("tls-port", self.tls_port.map(|v| v.to_string()));
        one("tls-cert-file", self.tls_cert_file.clone());
        one("tls-key-file", self.tls_key_file.clone());
        one("tls-key-file-pass", self.tls_key_file_pass.clone());
        one("tls-ca-cert-file", self.tls_ca_cert_file.clone());
        one("tls-auth-clients", self.tls_auth_clients.clone());
        one("tls-cluster", self.tls_cluster.clone());
        one("tls-client-cert-file", self.tls_client_cert_file.clone());
        one("tls-client-key-file", self.tls_client_key_file.clone());
        one(
            "tls-client-key-file-pass",
            self.tls_client_key_file_pass.clone(),
        );
        one("protected-mode", self.protected_mode.clone());
        one("cluster-enabled", self.cluster_enabled.clone());
        one("cluster-config-file", self.cluster_config_file.clone());
        one("cluster-port", self.cluster_port.map(|v| v.to_string()));
        one("cluster-announce-ip", self.cluster_announce_ip.clone());
        one(
            "cluster-announce-hostname",
            self.cluster_announce_hostname.clone(),
        );
        one(
            "cluster-preferred-endpoint-type",
            self.cluster_preferred_endpoint_type.clone(),
        );
        one(
            "cluster-announce-port",
            self.cluster_announce_port.map(|v| v.to_string()),
        );
        one(
            "cluster-announce-bus-port",
            self.cluster_announce_bus_port.map(|v| v.to_string()),
        );
        one(
            "cluster-announce-tls-port",
            self.cluster_announce_tls_port.map(|v| v.to_string()),
        );
        one(
            "cluster-node-timeout",
            self.cluster_node_timeout.map(|v| v.to_string()),
        );
        if let Some(bind) = &self.bind {
            out.push(("bind", bind.clone()));
        }
        out
    }

    fn into_config(self) -> Result<Config, String> {
        let mut config = Config::default();
        if let Some(path) = &self.config_file {
            config.apply_file(path).map_err(|e| e.to_string())?;
        }
        for (name, values) in self.overrides() {
            config
                .apply(name, &values)
                .map_err(|why| format!("--{name}: {why}"))?;
        }
        Ok(config)
    }
}

fn init_logging(level: &str) {
    let filter = match level {
        "debug" => "debug",
        "verbose" => "info",
        "notice" => "info",
        "warning" => "warn",
        _ => "off",
    };
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(filter)),
        )
        .with_target(false)
        .init();
}

async fn wait_for_signal() {
    use tokio::signal::unix::{signal, SignalKind};
    let mut terminate = match signal(SignalKind::terminate()) {
        Ok(s) => s,
        Err(_) => return std::future::pending().await,
    };
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {}
        _ = terminate.recv() => {}
    }
}

/// jemalloc, as Redis uses: it returns freed memory to the system.
#[cfg(feature = "jemalloc")]
#[global_allocator]
static ALLOCATOR: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

/// jemalloc's options, read at its first allocation: a background thread
/// purges unused pages, dirty ones within a second, so RSS comes back down
/// after a large reply or a script that failed on memory.
#[cfg(feature = "jemalloc")]
#[allow(non_upper_case_globals)]
#[export_name = "_rjem_malloc_conf"]
pub static malloc_conf: &[u8; JEMALLOC_OPTIONS.len()] = JEMALLOC_OPTIONS;

/// NUL-terminated, as jemalloc reads a `const char *` (a thin pointer: the
/// static above holds the address of this array).
#[cfg(feature = "jemalloc")]
const JEMALLOC_OPTIONS: &[u8; 60] =
    b"background_thread:true,dirty_decay_ms:1000,muzzy_decay_ms:0\0";

fn main() -> ExitCode {
    let config = match Cli::parse().into_config() {
        Ok(config) => config,
        Err(message) => {
            eprintln!("tally-server: configuration error: {message}");
            return ExitCode::from(1);
        }
    };
    init_logging(&config.loglevel);
    let mut runtime = tokio::runtime::Builder::new_multi_thread();
    if config.io_threads > 0 {
        runtime.worker_threads(config.io_threads);
    }
    let runtime = match runtime.enable_all().build() {
        Ok(runtime) => runtime,
        Err(e) => {
            eprintln!("tally-server: cannot start the runtime: {e}");
            return ExitCode::from(1);
        }
    };
    let served = runtime.block_on(async move {
        let handle = match Server::new(config).start().await {
            Ok(handle) => handle,
            Err(e) => {
                eprintln!("tally-server: cannot listen: {e}");
                return ExitCode::from(1);
            }
        };
        tracing::info!(
            "tally-server {} ready to accept connections on {}",
            env!("CARGO_PKG_VERSION"),
            handle.local_addr()
        );
        watch_signals(handle.shared().clone());
        let mut stopped = handle.shared().shutdown.subscribe();
        let _ = stopped.wait_for(|&stop| stop).await;
        let load_failed = handle
            .shared()
            .persistence
            .load_failed
            .load(std::sync::atomic::Ordering::SeqCst);
        handle.shutdown().await;
        if load_failed {
            // As Redis: a snapshot that cannot be loaded is fatal.
            return ExitCode::FAILURE;
        }
        tracing::info!("tally-server is now ready to exit, bye bye...");
        ExitCode::SUCCESS
    });
    if served != ExitCode::SUCCESS {
        return served;
    }
    // Not `return`: dropping the runtime waits for its worker threads, and
    // a worker may still be inside a long C call of a script that was told
    // to stop. Every reply owed has been written; leave now, as Redis does.
    std::process::exit(0)
}

/// SIGTERM and SIGINT start the shutdown from a thread of their own: the
/// runtime's workers may all be busy running scripts, and a signal must
/// still stop the server (it also stops those scripts, killable or not).
fn watch_signals(shared: std::sync::Arc<tally_server::Shared>) {
    let spawned = std::thread::Builder::new()
        .name("signals".into())
        .spawn(move || {
            let runtime = match tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
            {
                Ok(runtime) => runtime,
                Err(e) => {
                    tracing::warn!("signals will not stop the server: {e}");
                    return;
                }
            };
            runtime.block_on(wait_for_signal());
            tracing::info!("received a signal, shutting down");
            shared.begin_shutdown();
        });
    if let Err(e) = spawned {
        tracing::warn!("signals will not stop the server: {e}");
    }
}
