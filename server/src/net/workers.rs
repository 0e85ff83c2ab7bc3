//! Connection workers: each client connection is served, for its whole life,
//! by one of a fixed set of runtimes of one worker thread each (one per core
//! by default), chosen when it is accepted.
//!
//! Why not one runtime with a worker per core: tokio's work-stealing
//! scheduler wakes a parked worker whenever the running one has more than
//! one task ready, so that it can steal half. With many connections each
//! sending a pipeline, that happens on nearly every turn: the other worker
//! wakes through a futex, takes a few connections, and parks again. On a
//! server that is not saturated those hand-offs were a large part of its
//! system time (GETs at -P 16: 20,000 context switches per 2M requests
//! against Redis's 170, and 1.29x Redis's CPU per request; see
//! docs/benchmarks.md, 2026-12-05). A connection that stays on one thread
//! is woken only by its own socket, and its buffers stay in that core's
//! cache.
//!
//! Each runtime is still tokio's multi-threaded flavour with one worker, not
//! a current-thread runtime: a script that runs long, or a wait for a shard
//! lock, hands the worker's other connections to another thread
//! (`block_in_place`, see `store::off_worker`), so a busy script never
//! starves the connections that share its worker, SCRIPT KILL included.
//! Its LIFO slot is switched off (tokio's unstable setting, see
//! .cargo/config.toml): a worker runs the connections woken by one poll
//! in the order their data arrived, as Redis's event loop does.
//!
//! The server's own tasks (the accept loop, expiry, persistence, the
//! cluster bus, replication links) run on the runtime the server was
//! started in. A server embedded without workers serves its connections
//! there too.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use tokio::runtime::{Handle, Runtime};

/// The runtimes connections are served on, and how many each serves now.
pub struct ConnectionWorkers {
    workers: Box<[Worker]>,
    /// Where the search for the least busy worker starts next, so that
    /// ties are shared out in turn.
    next: AtomicUsize,
}

struct Worker {
    handle: Handle,
    connections: Arc<AtomicUsize>,
}

/// A connection's place on its worker, given back when dropped.
pub struct Placement {
    connections: Arc<AtomicUsize>,
}

impl Drop for Placement {
    fn drop(&mut self) {
        self.connections.fetch_sub(1, Ordering::Relaxed);
    }
}

impl ConnectionWorkers {
    /// Starts `count` runtimes of one worker thread each (at least one),
    /// named `tally-io-N`. The runtimes live as long as the process: their
    /// threads are what serve clients until the server exits.
    pub fn start(count: usize) -> std::io::Result<Arc<ConnectionWorkers>> {
        let runtimes = (0..count.max(1))
            .map(|i| {
                {
                    let mut builder = tokio::runtime::Builder::new_multi_thread();
                    builder
                        .worker_threads(1)
                        .thread_name(format!("tally-io-{i}"))
                        .enable_all();
                    // Tasks woken together run in the order they were woken:
                    // with the LIFO slot the last woken runs first, so of two
                    // connections whose commands arrived together the later
                    // one's would run first, where Redis runs the earlier.
                    #[cfg(tokio_unstable)]
                    builder.disable_lifo_slot();
                    builder.build()
                }
            })
            .collect::<std::io::Result<Vec<Runtime>>>()?;
        let handles = runtimes.iter().map(|r| r.handle().clone()).collect();
        // Dropping a runtime stops its threads, and may not happen inside
        // another runtime (where the server's shutdown runs): these are kept
        // until the process exits, as its main thread is.
        std::mem::forget(runtimes);
        ConnectionWorkers::on(handles).ok_or_else(|| std::io::Error::other("no connection worker"))
    }

    /// Workers on runtimes the caller made and keeps running; `None`
    /// without any.
    pub fn on(handles: Vec<Handle>) -> Option<Arc<ConnectionWorkers>> {
        if handles.is_empty() {
            return None;
        }
        Some(Arc::new(ConnectionWorkers {
            workers: handles
                .into_iter()
                .map(|handle| Worker {
                    handle,
                    connections: Arc::new(AtomicUsize::new(0)),
                })
                .collect(),
            next: AtomicUsize::new(0),
        }))
    }

    /// The worker a new connection goes to: the one serving the fewest
    /// connections now (ties in turn), so that long-lived connections end
    /// up spread evenly even as others come and go.
    pub fn place(&self) -> (Handle, Placement) {
        let count = self.workers.len();
        let start = self.next.fetch_add(1, Ordering::Relaxed) % count;
        let mut chosen = &self.workers[start];
        for i in 1..count {
            let worker = &self.workers[(start + i) % count];
            if worker.connections.load(Ordering::Relaxed)
                < chosen.connections.load(Ordering::Relaxed)
            {
                chosen = worker;
            }
        }
        chosen.connections.fetch_add(1, Ordering::Relaxed);
        (
            chosen.handle.clone(),
            Placement {
                connections: chosen.connections.clone(),
            },
        )
    }

    /// How many connections each worker serves now.
    pub fn connections(&self) -> Vec<usize> {
        self.workers
            .iter()
            .map(|w| w.connections.load(Ordering::Relaxed))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn runtimes(count: usize) -> Vec<Runtime> {
        (0..count)
            .map(|_| {
                tokio::runtime::Builder::new_multi_thread()
                    .worker_threads(1)
                    .enable_all()
                    .build()
                    .expect("runtime")
            })
            .collect()
    }

    #[test]
    fn new_connections_go_to_the_least_busy_worker() {
        let rts = runtimes(3);
        let workers = ConnectionWorkers::on(rts.iter().map(|r| r.handle().clone()).collect())
            .expect("workers");
        let placed: Vec<Placement> = (0..6).map(|_| workers.place().1).collect();
        assert_eq!(workers.connections(), vec![2, 2, 2]);
        // Two leave the first worker: the next two connections go there.
        let mut placed = placed.into_iter();
        let mut kept: Vec<Placement> = Vec::new();
        for p in placed.by_ref() {
            if Arc::ptr_eq(&p.connections, &workers.workers[0].connections) {
                drop(p);
            } else {
                kept.push(p);
            }
        }
        assert_eq!(workers.connections(), vec![0, 2, 2]);
        kept.push(workers.place().1);
        kept.push(workers.place().1);
        assert_eq!(workers.connections(), vec![2, 2, 2]);
        drop(kept);
        assert_eq!(workers.connections(), vec![0, 0, 0]);
    }

    #[test]
    fn ties_are_shared_out_in_turn() {
        let rts = runtimes(2);
        let workers = ConnectionWorkers::on(rts.iter().map(|r| r.handle().clone()).collect())
            .expect("workers");
        // A connection that comes and goes leaves every worker at 0; the
        // next ones still alternate rather than all landing on the first.
        let mut firsts = 0;
        for _ in 0..10 {
            let (_, placement) = workers.place();
            if Arc::ptr_eq(&placement.connections, &workers.workers[0].connections) {
                firsts += 1;
            }
        }
        assert_eq!(firsts, 5);
    }

    /// Connections accepted on one runtime are served on the workers, and
    /// leave their place when they close.
    #[test]
    fn a_server_serves_its_connections_on_its_workers() {
        use std::io::{Read, Write};

        let rts = runtimes(2);
        let workers = ConnectionWorkers::on(rts.iter().map(|r| r.handle().clone()).collect())
            .expect("workers");
        let main = runtimes(1).pop().expect("runtime");
        let config = crate::Config {
            port: 0,
            bind: vec!["127.0.0.1".into()],
            ..crate::Config::default()
        };
        let server = main
            .block_on(
                crate::Server::new(config)
                    .with_connection_workers(workers.clone())
                    .start(),
            )
            .expect("the server starts");
        let mut clients: Vec<std::net::TcpStream> = (0..4)
            .map(|_| std::net::TcpStream::connect(server.local_addr()).expect("connect"))
            .collect();
        for client in &mut clients {
            client.write_all(b"PING\r\n").expect("write");
            let mut reply = [0u8; 7];
            client.read_exact(&mut reply).expect("read");
            assert_eq!(&reply, b"+PONG\r\n");
        }
        assert_eq!(workers.connections(), vec![2, 2]);
        drop(clients);
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        while workers.connections() != vec![0, 0] && std::time::Instant::now() < deadline {
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        assert_eq!(workers.connections(), vec![0, 0]);
        main.block_on(server.shutdown());
    }
}
