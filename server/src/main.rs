//! The `tally-server` binary: parse redis-server-style options, start the
//! server on a multi-threaded tokio runtime, stop cleanly on SIGINT, SIGTERM
//! or SHUTDOWN.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Arg, ArgAction, ArgMatches};
use tally_server::config::directives::DIRECTIVES;
use tally_server::{Config, ConnectionWorkers, Server};

/// The command line: a redis.conf-style file first, then any directive as
/// `--<directive> <value>...`, as redis-server takes them. The options
/// are made from the directive table (`config::directives`), so every
/// directive a file takes is an option too, with the same reading and
/// errors; they apply after the file, in the order given.
fn command_line() -> clap::Command {
    let defaults = Config::default();
    let mut command = clap::Command::new("tally-server")
        .version(env!("CARGO_PKG_VERSION"))
        .about(
            "A Redis-protocol counter store for API rate limiting.\n\n\
             Options are redis-server's directives. A redis.conf-style file may \
             be given first; options on the command line override it.",
        )
        .arg(
            Arg::new(CONFIG_FILE)
                .value_name("CONFIG_FILE")
                .value_parser(clap::value_parser!(PathBuf))
                .help("redis.conf-style configuration file (one `directive value` per line)"),
        );
    for directive in DIRECTIVES {
        let help = match directive.get(&defaults).filter(|value| !value.is_empty()) {
            Some(default) => format!("{} [default: {default}]", directive.help),
            None => directive.help.to_string(),
        };
        let arg = Arg::new(directive.name)
            .long(directive.name)
            .aliases(directive.aliases)
            .value_name("VALUE")
            .help(help)
            .action(ArgAction::Append);
        command = command.arg(if directive.takes_a_list() {
            arg.num_args(1..)
        } else {
            // A single value may start with a dash (`-1`).
            arg.num_args(1).allow_hyphen_values(true)
        });
    }
    command
}

/// The positional argument naming the config file.
const CONFIG_FILE: &str = "config-file";

/// The configuration the command line asks for: defaults, then the file,
/// then each option in the order given.
fn config_from(matches: &ArgMatches) -> Result<Config, String> {
    let mut config = Config::default();
    if let Some(path) = matches.get_one::<PathBuf>(CONFIG_FILE) {
        config.apply_file(path).map_err(|e| e.to_string())?;
        // Absolute: CONFIG REWRITE writes it whatever `dir` is by then.
        config.config_file = Some(std::path::absolute(path).unwrap_or_else(|_| path.clone()));
    }
    let mut given: Vec<(usize, &str, Vec<String>)> = Vec::new();
    for directive in DIRECTIVES {
        let (Some(occurrences), Some(indices)) = (
            matches.get_occurrences::<String>(directive.name),
            matches.indices_of(directive.name),
        ) else {
            continue;
        };
        let mut indices = indices;
        for values in occurrences {
            let values: Vec<String> = values.cloned().collect();
            // An occurrence's place is that of its first value.
            let at = indices.next().unwrap_or(0);
            for _ in 1..values.len() {
                indices.next();
            }
            given.push((at, directive.name, values));
        }
    }
    given.sort_by_key(|(at, _, _)| *at);
    for (_, name, values) in given {
        config
            .apply(name, &values)
            .map_err(|why| format!("--{name}: {why}"))?;
    }
    Ok(config)
}

/// Logs at `level` to standard output, or appended to `logfile` when one
/// is set, and to the system log too with `syslog-enabled`; a log file
/// that cannot be opened stops the start, as in Redis.
fn init_logging(config: &tally_server::config::Config) -> Result<(), String> {
    let filter = match config.loglevel.as_str() {
        "debug" => "debug",
        "verbose" => "info",
        "notice" => "info",
        "warning" => "warn",
        _ => "off",
    };
    let subscriber = tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(filter)),
        )
        .with_target(false);
    let file = if config.logfile.is_empty() {
        None
    } else {
        let file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&config.logfile)
            .map_err(|e| format!("Can't open the log file: {e}"))?;
        Some(std::sync::Mutex::new(file))
    };
    if config.syslog_enabled {
        tally_server::syslog::open(&config.syslog_ident, &config.syslog_facility);
    }
    use tally_server::syslog::Tee;
    match (file, config.syslog_enabled) {
        (None, false) => subscriber.init(),
        (None, true) => subscriber
            .with_ansi(false)
            .with_writer(Tee::new(std::io::stdout))
            .init(),
        (Some(file), false) => subscriber.with_ansi(false).with_writer(file).init(),
        (Some(file), true) => subscriber
            .with_ansi(false)
            .with_writer(Tee::new(file))
            .init(),
    }
    Ok(())
}

/// Writes the process id to `pidfile` (when set); a failure is logged and
/// the server goes on, as Redis's createPidFile does.
fn write_pidfile(pidfile: &str) {
    if pidfile.is_empty() {
        return;
    }
    if let Err(e) = std::fs::write(pidfile, format!("{}\n", std::process::id())) {
        tracing::warn!("Failed to write PID file: {e}");
    }
}

/// How the process tells its supervisor about itself (`supervised`), as
/// Redis's redisSupervisedSystemd / redisSupervisedUpstart do.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Supervisor {
    None,
    /// sd_notify: datagrams to the socket in `NOTIFY_SOCKET`.
    Systemd,
    /// A job stops itself once ready; upstart resumes it.
    Upstart,
}

impl Supervisor {
    /// The supervisor `supervised` names; `auto` takes the one the
    /// environment announces.
    fn from_config(mode: &str) -> Supervisor {
        let systemd = std::env::var_os("NOTIFY_SOCKET").is_some();
        let upstart = std::env::var_os("UPSTART_JOB").is_some();
        match mode {
            "systemd" => Supervisor::Systemd,
            "upstart" => Supervisor::Upstart,
            "auto" if systemd => Supervisor::Systemd,
            "auto" if upstart => Supervisor::Upstart,
            _ => Supervisor::None,
        }
    }

    /// The server listens: systemd gets READY=1 with a status line,
    /// upstart a stopped job.
    fn ready(self, replica: bool) {
        match self {
            Supervisor::Systemd => {
                let status = if replica {
                    "Ready to accept connections in read-only mode. Waiting for MASTER <-> REPLICA sync"
                } else {
                    "Ready to accept connections"
                };
                notify_systemd(&format!("STATUS={status}\n"));
                notify_systemd("READY=1\n");
            }
            Supervisor::Upstart => {
                // SAFETY: raise only sends a signal to this process.
                unsafe {
                    libc::raise(libc::SIGSTOP);
                }
            }
            Supervisor::None => {}
        }
    }

    /// The server is stopping.
    fn stopping(self) {
        if self == Supervisor::Systemd {
            notify_systemd("STOPPING=1\n");
        }
    }
}

/// Sends one sd_notify message to the socket systemd named in
/// `NOTIFY_SOCKET` (a path, or `@name` in the abstract namespace).
fn notify_systemd(message: &str) {
    use std::os::unix::net::UnixDatagram;
    let Some(path) = std::env::var_os("NOTIFY_SOCKET") else {
        tracing::warn!("systemd supervision requested, but NOTIFY_SOCKET not found");
        return;
    };
    let sent = UnixDatagram::unbound().and_then(|socket| {
        let path = path.to_string_lossy();
        match path.strip_prefix('@') {
            Some(name) => {
                use std::os::linux::net::SocketAddrExt;
                let address = std::os::unix::net::SocketAddr::from_abstract_name(name)?;
                socket.send_to_addr(message.as_bytes(), &address)
            }
            None => socket.send_to(message.as_bytes(), &*path),
        }
    });
    if let Err(e) = sent {
        tracing::warn!("Can't send notification to systemd: {e}");
    }
}

/// Removes the pid file on the way out, as Redis's shutdown does.
fn remove_pidfile(pidfile: &str) {
    if !pidfile.is_empty() {
        tracing::info!("Removing the pid file.");
        let _ = std::fs::remove_file(pidfile);
    }
}

/// The signals that stop the server.
#[derive(Debug, Clone, Copy)]
enum StopSignal {
    Term,
    Int,
}

/// Waits for the next SIGTERM or SIGINT.
async fn wait_for_signal(
    terminate: &mut tokio::signal::unix::Signal,
    interrupt: &mut tokio::signal::unix::Signal,
) -> StopSignal {
    tokio::select! {
        _ = terminate.recv() => StopSignal::Term,
        _ = interrupt.recv() => StopSignal::Int,
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
    let config = match config_from(&command_line().get_matches()) {
        Ok(config) => config,
        Err(message) => {
            eprintln!("tally-server: configuration error: {message}");
            return ExitCode::from(1);
        }
    };
    if let Err(message) = init_logging(&config) {
        eprintln!("tally-server: {message}");
        return ExitCode::from(1);
    }
    let pidfile = config.pidfile.clone();
    let supervisor = Supervisor::from_config(&config.supervised);
    let replica = config.replicaof.is_some();
    // Clients are served on `io-threads` connection workers (one per core
    // by default); the server's own tasks (accepting, expiry, persistence,
    // the cluster bus) on a runtime of one worker, busy only in bursts.
    let io_threads = match config.io_threads {
        0 => std::thread::available_parallelism().map_or(1, |n| n.get()),
        n => n,
    };
    let started = ConnectionWorkers::start(io_threads).and_then(|workers| {
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .map(|runtime| (runtime, workers))
    });
    let (runtime, workers) = match started {
        Ok(started) => started,
        Err(e) => {
            eprintln!("tally-server: cannot start the runtime: {e}");
            return ExitCode::from(1);
        }
    };
    let served = runtime.block_on(async move {
        let server = Server::new(config).with_connection_workers(workers);
        let handle = match server.start().await {
            Ok(handle) => handle,
            Err(e) => {
                eprintln!("tally-server: cannot listen: {e}");
                return ExitCode::from(1);
            }
        };
        write_pidfile(&pidfile);
        tracing::info!(
            "tally-server {} ready to accept connections on {}",
            env!("CARGO_PKG_VERSION"),
            handle.local_addr()
        );
        // Signals are handled before the supervisor hears the server is
        // ready: a SIGTERM sent the moment READY=1 arrived must stop it
        // cleanly, not kill it by the signal's default action.
        watch_signals(handle.shared().clone());
        supervisor.ready(replica);
        let mut stopped = handle.shared().shutdown.subscribe();
        let _ = stopped.wait_for(|&stop| stop).await;
        let fatal = handle
            .shared()
            .persistence
            .fatal
            .load(std::sync::atomic::Ordering::SeqCst);
        supervisor.stopping();
        handle.shutdown().await;
        remove_pidfile(&pidfile);
        if fatal {
            // As Redis: a snapshot that cannot be loaded, or a replica
            // that cannot persist its master's writes, is fatal.
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
/// Returns once the thread handles them.
/// Each first does what `shutdown-on-sigterm` / `shutdown-on-sigint` say
/// (by default, wait for lagging replicas up to `shutdown-timeout`, then
/// save when save points are set, as Redis does); if that save fails the
/// server keeps running, as Redis's does, until a signal whose shutdown
/// succeeds.
fn watch_signals(shared: std::sync::Arc<tally_server::Shared>) {
    use tokio::signal::unix::{signal, SignalKind};
    let (handling, handled) = std::sync::mpsc::channel::<()>();
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
            let handlers = runtime.block_on(async {
                Ok::<_, std::io::Error>((
                    signal(SignalKind::terminate())?,
                    signal(SignalKind::interrupt())?,
                ))
            });
            let (mut terminate, mut interrupt) = match handlers {
                Ok(handlers) => handlers,
                Err(e) => {
                    tracing::warn!("signals will not stop the server: {e}");
                    return;
                }
            };
            let _ = handling.send(());
            loop {
                let received = runtime.block_on(wait_for_signal(&mut terminate, &mut interrupt));
                let flags = match received {
                    StopSignal::Term => shared.config.read().shutdown_on_sigterm,
                    StopSignal::Int => shared.config.read().shutdown_on_sigint,
                };
                tracing::info!("received {received:?}, scheduling shutdown");
                use tally_server::cmd::server::{start_shutdown, ShutdownStart};
                match start_shutdown(&shared, flags) {
                    ShutdownStart::Stopping => break,
                    // It stops the server by itself once the replicas
                    // caught up; a signal meanwhile joins it.
                    ShutdownStart::Waiting => {}
                    ShutdownStart::Refused => tracing::warn!(
                        "{received:?} received but errors trying to shut down the server, check the logs for more information"
                    ),
                }
            }
        });
    match spawned {
        // An error here means the thread gave up on signals and said so.
        Ok(_) => {
            let _ = handled.recv();
        }
        Err(e) => tracing::warn!("signals will not stop the server: {e}"),
    }
}
