//! The built-in Prometheus endpoint (`--metrics-port`, off by default):
//! `GET /metrics` in the Prometheus text format, with what a Redis exporter
//! cannot show of a counter store: how each known limiter script ran
//! (natively or in Lua) and what it decided, shard lock waits, and keys and
//! memory per shard; plus the core server figures, so one scrape is enough
//! for a dashboard. Everything Redis's own fields cover stays available
//! through INFO and prometheus-redis-exporter (docs/operations.md).

use std::convert::Infallible;
use std::fmt::Write as _;
use std::sync::atomic::Ordering;
use std::sync::Arc;

use bytes::Bytes;
use http_body_util::Full;
use hyper::body::Incoming;
use hyper::{Request, Response, StatusCode};
use tokio::net::TcpListener;

use crate::catalog::registry;
use crate::state::Shared;

/// Serves `/metrics` on `listener` until shutdown.
pub async fn run(shared: Arc<Shared>, listener: TcpListener) {
    let mut stopping = shared.shutdown.subscribe();
    loop {
        let accepted = tokio::select! {
            accepted = listener.accept() => accepted,
            _ = stopping.wait_for(|&stop| stop) => return,
        };
        let Ok((stream, _)) = accepted else {
            continue;
        };
        let shared = shared.clone();
        tokio::spawn(async move {
            let service = hyper::service::service_fn(move |request| {
                let shared = shared.clone();
                async move { Ok::<_, Infallible>(respond(&shared, &request)) }
            });
            let io = hyper_util::rt::TokioIo::new(stream);
            if let Err(e) = hyper::server::conn::http1::Builder::new()
                .serve_connection(io, service)
                .await
            {
                tracing::debug!("metrics connection: {e}");
            }
        });
    }
}

fn respond(shared: &Shared, request: &Request<Incoming>) -> Response<Full<Bytes>> {
    if request.uri().path() != "/metrics" {
        let mut response = Response::new(Full::new(Bytes::from_static(b"see /metrics\n")));
        *response.status_mut() = StatusCode::NOT_FOUND;
        return response;
    }
    let mut response = Response::new(Full::new(Bytes::from(render(shared))));
    response.headers_mut().insert(
        hyper::header::CONTENT_TYPE,
        hyper::header::HeaderValue::from_static("text/plain; version=0.0.4; charset=utf-8"),
    );
    response
}

/// One metric family: its help, type and samples.
struct Family<'a> {
    out: &'a mut String,
    name: &'a str,
}

impl Family<'_> {
    fn new<'a>(out: &'a mut String, name: &'a str, kind: &str, help: &str) -> Family<'a> {
        let _ = writeln!(out, "# HELP {name} {help}");
        let _ = writeln!(out, "# TYPE {name} {kind}");
        Family { out, name }
    }

    fn sample(&mut self, labels: &[(&str, &str)], value: impl std::fmt::Display) {
        self.out.push_str(self.name);
        if !labels.is_empty() {
            self.out.push('{');
            for (i, (key, label)) in labels.iter().enumerate() {
                if i > 0 {
                    self.out.push(',');
                }
                let _ = write!(self.out, "{key}=\"{}\"", escape(label));
            }
            self.out.push('}');
        }
        let _ = writeln!(self.out, " {value}");
    }
}

/// A label value as the text format wants it.
fn escape(value: &str) -> String {
    value
        .replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

/// The whole exposition.
pub fn render(shared: &Shared) -> String {
    let mut out = String::new();
    let load = |c: &std::sync::atomic::AtomicU64| c.load(Ordering::Relaxed);
    let stats = &shared.stats;
    let scripts = &shared.scripts;

    let mut f = Family::new(&mut out, "tally_up", "gauge", "1 while the server answers.");
    f.sample(&[], 1);
    let mut f = Family::new(
        &mut out,
        "tally_connected_clients",
        "gauge",
        "Client connections.",
    );
    f.sample(&[], shared.clients.len());
    let mut f = Family::new(
        &mut out,
        "tally_used_memory_bytes",
        "gauge",
        "Bytes the keyspace holds (what maxmemory limits).",
    );
    f.sample(&[], shared.store.used_memory());
    let mut f = Family::new(
        &mut out,
        "tally_commands_processed_total",
        "counter",
        "Commands run.",
    );
    f.sample(&[], load(&stats.commands_processed));
    let mut f = Family::new(
        &mut out,
        "tally_error_replies_total",
        "counter",
        "Error replies, by error code.",
    );
    for (code, count) in stats.errorstats.lock().iter() {
        f.sample(&[("code", &String::from_utf8_lossy(code))], count);
    }
    let mut f = Family::new(
        &mut out,
        "tally_commands_total",
        "counter",
        "Calls per command.",
    );
    for (index, command) in registry().all().enumerate() {
        let calls = load(&stats.commands[index].calls);
        if calls > 0 {
            f.sample(&[("command", command.name)], calls);
        }
    }

    // The limiter scripts: which path ran them and what they decided.
    let mut f = Family::new(
        &mut out,
        "tally_script_runs_total",
        "counter",
        "Runs of each known limiter script, by path: native (Rust twin) or lua.",
    );
    for (known, (native, lua)) in tally_lua::SCRIPTS.iter().zip(&scripts.known_runs) {
        f.sample(&[("script", known.name), ("path", "native")], load(native));
        f.sample(&[("script", known.name), ("path", "lua")], load(lua));
    }
    let mut f = Family::new(
        &mut out,
        "tally_script_decisions_total",
        "counter",
        "Requests each known limiter script allowed or denied.",
    );
    for (known, (allowed, denied)) in tally_lua::SCRIPTS.iter().zip(&scripts.known_decisions) {
        f.sample(
            &[("script", known.name), ("decision", "allowed")],
            load(allowed),
        );
        f.sample(
            &[("script", known.name), ("decision", "denied")],
            load(denied),
        );
    }
    let mut f = Family::new(
        &mut out,
        "tally_lua_runs_total",
        "counter",
        "Lua runs of any script.",
    );
    f.sample(&[], load(&scripts.lua_runs));

    // Shards: contention and balance.
    let store = &shared.store;
    let mut per_shard = Vec::new();
    for db in 0..store.databases() {
        let database = store.db(db);
        for index in 0..database.shard_count() {
            let (keys, bytes) = {
                let shard = database.lock_shard(index);
                (shard.len(), shard.bytes())
            };
            per_shard.push((db, index, database.lock_waits(index), keys, bytes));
        }
    }
    // (name, type, help, the value, whether a shard outside database 0
    // is listed): shards without keys are left out there.
    type Pick = fn(&(usize, usize, u64, usize, usize)) -> u64;
    let families: [(&str, &str, &str, Pick, Pick); 3] = [
        (
            "tally_shard_lock_waits_total",
            "counter",
            "Times a command found its shard locked by another and waited.",
            |s| s.2,
            |s| s.2,
        ),
        (
            "tally_shard_keys",
            "gauge",
            "Keys per shard.",
            |s| s.3 as u64,
            |s| s.3 as u64,
        ),
        (
            "tally_shard_memory_bytes",
            "gauge",
            "Bytes each shard holds.",
            |s| s.4 as u64,
            |s| s.3 as u64,
        ),
    ];
    for (name, kind, help, value, listed) in families {
        let mut f = Family::new(&mut out, name, kind, help);
        for shard in per_shard.iter().filter(|s| s.0 == 0 || listed(s) > 0) {
            f.sample(
                &[
                    ("db", &shard.0.to_string()),
                    ("shard", &shard.1.to_string()),
                ],
                value(shard),
            );
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn label_values_are_escaped() {
        assert_eq!(escape("a\"b\\c\nd"), "a\\\"b\\\\c\\nd");
    }
}
