//! LATENCY LATEST / HISTORY / RESET / HISTOGRAM / DOCTOR / GRAPH / HELP, with
//! Redis 7.0's replies; the measurements live in `crate::latency`.

use super::server::help_reply;
use super::Ctx;
use crate::catalog::{registry, Command};
use crate::latency::{self, DoctorSettings};
use crate::resp::Reply;

fn now_s(ctx: &Ctx<'_>) -> u64 {
    ctx.now_ms / 1000
}

/// LATENCY LATEST: `[event, time, latest ms, max ms]` per event.
pub fn latency_latest(ctx: &mut Ctx<'_>, _argv: &[&[u8]]) -> Reply {
    let events = ctx.shared.stats.latency_monitor.snapshot();
    Reply::Array(
        events
            .into_iter()
            .map(|(event, series)| {
                let latest = series.latest();
                Reply::Array(vec![
                    Reply::Bulk(event.into_bytes()),
                    Reply::Int(latest.time as i64),
                    Reply::Int(latest.latency as i64),
                    Reply::Int(series.max as i64),
                ])
            })
            .collect(),
    )
}

/// LATENCY HISTORY event: `[time, ms]` per second with a sample, oldest first.
pub fn latency_history(ctx: &mut Ctx<'_>, argv: &[&[u8]]) -> Reply {
    let event = String::from_utf8_lossy(argv[2]);
    let Some(series) = ctx.shared.stats.latency_monitor.event(&event) else {
        return Reply::Array(Vec::new());
    };
    Reply::Array(
        series
            .history()
            .map(|s| {
                Reply::Array(vec![
                    Reply::Int(s.time as i64),
                    Reply::Int(s.latency as i64),
                ])
            })
            .collect(),
    )
}

/// LATENCY RESET [event ...]: the number of events forgotten.
pub fn latency_reset(ctx: &mut Ctx<'_>, argv: &[&[u8]]) -> Reply {
    let monitor = &ctx.shared.stats.latency_monitor;
    let forgotten = if argv.len() == 2 {
        monitor.reset(None)
    } else {
        let names: Vec<String> = argv[2..]
            .iter()
            .map(|a| String::from_utf8_lossy(a).into_owned())
            .collect();
        monitor.reset(Some(&names))
    };
    Reply::Int(forgotten as i64)
}

/// LATENCY DOCTOR: Redis's report on the recorded events.
pub fn latency_doctor(ctx: &mut Ctx<'_>, _argv: &[&[u8]]) -> Reply {
    let settings = {
        let config = ctx.shared.config.read();
        DoctorSettings {
            threshold_ms: config.latency_monitor_threshold_ms,
            slowlog_slower_than_us: config.slowlog_log_slower_than,
            hz: config.hz,
        }
    };
    let events = ctx.shared.stats.latency_monitor.snapshot();
    Reply::Verbatim(latency::doctor(&events, &settings, now_s(ctx)).into_bytes())
}

/// LATENCY GRAPH event: the event's samples drawn as Redis draws them.
pub fn latency_graph(ctx: &mut Ctx<'_>, argv: &[&[u8]]) -> Reply {
    let event = String::from_utf8_lossy(argv[2]).into_owned();
    match ctx.shared.stats.latency_monitor.event(&event) {
        Some(series) => Reply::Verbatim(latency::graph(&event, &series, now_s(ctx)).into_bytes()),
        None => Reply::error_bytes(
            [&b"ERR No samples available for event '"[..], argv[2], b"'"].concat(),
        ),
    }
}

/// LATENCY HISTOGRAM [command ...]: per command, its calls and cumulative
/// counts at power-of-two microsecond buckets. Unknown commands and
/// commands that never ran are left out; a container command brings its
/// subcommands.
pub fn latency_histogram(ctx: &mut Ctx<'_>, argv: &[&[u8]]) -> Reply {
    // This batch's calls are in the histograms before they are read.
    ctx.client.batch.flush(ctx.shared, ctx.client.info.id);
    let registry = registry();
    let mut wanted: Vec<&'static Command> = Vec::new();
    if argv.len() == 2 {
        wanted.extend(registry.all());
    } else {
        for name in &argv[2..] {
            let Some(command) = registry.lookup_full(name) else {
                continue;
            };
            wanted.push(command);
            wanted.extend(command.subcommands.iter());
        }
    }
    let latencies = &ctx.shared.stats.latencies;
    let mut entries = Vec::new();
    for command in wanted {
        let Some(index) = registry.index_of(command.name.as_bytes()) else {
            continue;
        };
        let Some(histogram) = latencies.of(index) else {
            continue;
        };
        let buckets = latency::cumulative_buckets(&histogram)
            .into_iter()
            .map(|(us, count)| (Reply::Int(us as i64), Reply::Int(count as i64)))
            .collect();
        entries.push((
            Reply::bulk(command.name.as_bytes()),
            Reply::Map(vec![
                (Reply::bulk(b"calls"), Reply::Int(histogram.len() as i64)),
                (Reply::bulk(b"histogram_usec"), Reply::Map(buckets)),
            ]),
        ));
    }
    Reply::Map(entries)
}

/// LATENCY HELP
pub fn latency_help(_ctx: &mut Ctx<'_>, _argv: &[&[u8]]) -> Reply {
    help_reply(
        "LATENCY",
        &[
            "DOCTOR",
            "    Return a human readable latency analysis report.",
            "GRAPH <event>",
            "    Return an ASCII latency graph for the <event> class.",
            "HISTORY <event>",
            "    Return time-latency samples for the <event> class.",
            "LATEST",
            "    Return the latest latency samples for all events.",
            "RESET [<event> ...]",
            "    Reset latency data of one or more <event> classes.",
            "    (default: reset all data for all event classes)",
            "HISTOGRAM [COMMAND ...]",
            "    Return a cumulative distribution of latencies in the format of a histogram for the specified command names.",
            "    If no commands are specified then all histograms are replied.",
        ],
    )
}
