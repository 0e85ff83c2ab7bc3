//! Latency, as Redis 7.0 measures it: the latency monitor (LATENCY LATEST /
//! HISTORY / DOCTOR / GRAPH, events past `latency-monitor-threshold`) and the
//! per-command latency histograms (LATENCY HISTOGRAM, INFO latencystats).

use std::fmt::Write as _;

use hdrhistogram::Histogram;
use indexmap::IndexMap;
use parking_lot::Mutex;

/// Nanoseconds on the monotonic clock since an arbitrary start: a
/// command's duration is the difference of two readings. One
/// `clock_gettime` (the vDSO) and integer arithmetic; `Instant` added a
/// `Duration` subtraction with normalisation and a 128-bit `as_nanos`,
/// costing about as much as the two clock reads (callgrind).
#[inline]
pub fn monotonic_ns() -> u64 {
    #[cfg(unix)]
    {
        let mut now = libc::timespec {
            tv_sec: 0,
            tv_nsec: 0,
        };
        // SAFETY: clock_gettime writes only the timespec it is given, and
        // CLOCK_MONOTONIC exists on every unix this builds for.
        unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut now) };
        now.tv_sec as u64 * 1_000_000_000 + now.tv_nsec as u64
    }
    #[cfg(not(unix))]
    {
        static START: std::sync::OnceLock<std::time::Instant> = std::sync::OnceLock::new();
        START
            .get_or_init(std::time::Instant::now)
            .elapsed()
            .as_nanos() as u64
    }
}

/// Samples kept per event, as Redis's LATENCY_TS_LEN.
const SAMPLES_PER_EVENT: usize = 160;

/// One second's worst latency of an event.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Sample {
    /// Unix seconds (0: an unused slot).
    pub time: u64,
    /// Milliseconds.
    pub latency: u64,
}

/// The recent history of one event: a ring of per-second samples.
#[derive(Debug, Clone)]
pub struct EventSeries {
    samples: [Sample; SAMPLES_PER_EVENT],
    /// Where the next sample goes.
    next: usize,
    /// The worst latency ever seen for the event.
    pub max: u64,
}

impl EventSeries {
    fn new() -> EventSeries {
        EventSeries {
            samples: [Sample::default(); SAMPLES_PER_EVENT],
            next: 0,
            max: 0,
        }
    }

    /// Redis's latencyAddSample: one sample per second, the worst of it.
    fn add(&mut self, now_s: u64, latency: u64) {
        self.max = self.max.max(latency);
        let previous = &mut self.samples[(self.next + SAMPLES_PER_EVENT - 1) % SAMPLES_PER_EVENT];
        if previous.time == now_s {
            previous.latency = previous.latency.max(latency);
            return;
        }
        self.samples[self.next] = Sample {
            time: now_s,
            latency,
        };
        self.next = (self.next + 1) % SAMPLES_PER_EVENT;
    }

    /// The newest sample.
    pub fn latest(&self) -> Sample {
        self.samples[(self.next + SAMPLES_PER_EVENT - 1) % SAMPLES_PER_EVENT]
    }

    /// The samples, oldest first.
    pub fn history(&self) -> impl Iterator<Item = Sample> + '_ {
        (0..SAMPLES_PER_EVENT)
            .map(move |j| self.samples[(self.next + j) % SAMPLES_PER_EVENT])
            .filter(|s| s.time != 0)
    }
}

/// The latency monitor: events (`command`, `fast-command`, `expire-cycle`)
/// that took at least `latency-monitor-threshold` milliseconds.
#[derive(Default)]
pub struct LatencyMonitor {
    events: Mutex<IndexMap<String, EventSeries>>,
}

impl LatencyMonitor {
    /// Records that `event` took `latency_ms` at `now_s` (the caller checked
    /// the threshold).
    pub fn add(&self, event: &str, latency_ms: u64, now_s: u64) {
        let mut events = self.events.lock();
        if !events.contains_key(event) {
            events.insert(event.to_string(), EventSeries::new());
        }
        if let Some(series) = events.get_mut(event) {
            series.add(now_s, latency_ms);
        }
    }

    /// A copy of every event's series, in the order events first happened.
    pub fn snapshot(&self) -> Vec<(String, EventSeries)> {
        self.events
            .lock()
            .iter()
            .map(|(name, series)| (name.clone(), series.clone()))
            .collect()
    }

    /// One event's series.
    pub fn event(&self, name: &str) -> Option<EventSeries> {
        self.events.lock().get(name).cloned()
    }

    /// LATENCY RESET: forgets the named events (every event for `None`);
    /// returns how many there were.
    pub fn reset(&self, names: Option<&[String]>) -> usize {
        let mut events = self.events.lock();
        match names {
            None => {
                let n = events.len();
                events.clear();
                n
            }
            Some(names) => names
                .iter()
                .filter(|name| events.shift_remove(name.as_str()).is_some())
                .count(),
        }
    }

    /// True when no event was ever recorded (or all were reset).
    pub fn is_empty(&self) -> bool {
        self.events.lock().is_empty()
    }
}

/// Statistics of one event's samples, as Redis's analyzeLatencyForEvent.
struct EventAnalysis {
    samples: u64,
    avg: u64,
    mad: u64,
    period: u64,
}

fn analyze(series: &EventSeries, now_s: u64) -> EventAnalysis {
    let samples: Vec<Sample> = series.history().collect();
    let count = samples.len() as u64;
    if count == 0 {
        return EventAnalysis {
            samples: 0,
            avg: 0,
            mad: 0,
            period: 0,
        };
    }
    let avg = samples.iter().map(|s| s.latency).sum::<u64>() / count;
    let oldest = samples.iter().map(|s| s.time).min().unwrap_or(now_s);
    let period = now_s.saturating_sub(oldest).max(1);
    let mad = samples
        .iter()
        .map(|s| (avg as i64 - s.latency as i64).unsigned_abs())
        .sum::<u64>()
        / count;
    EventAnalysis {
        samples: count,
        avg,
        mad,
        period,
    }
}

/// What LATENCY DOCTOR needs besides the events.
pub struct DoctorSettings {
    /// `latency-monitor-threshold` in ms.
    pub threshold_ms: u64,
    /// `slowlog-log-slower-than` in µs.
    pub slowlog_slower_than_us: i64,
    /// `hz`.
    pub hz: u32,
}

/// LATENCY DOCTOR's report, in Redis 7.0's words, for the events tally
/// records (it has no fork, AOF or eviction events to advise on).
pub fn doctor(events: &[(String, EventSeries)], settings: &DoctorSettings, now_s: u64) -> String {
    let mut report = String::new();
    if events.is_empty() && settings.threshold_ms == 0 {
        report.push_str("I'm sorry, Dave, I can't do that. Latency monitoring is disabled in this Redis instance. You may use \"CONFIG SET latency-monitor-threshold <milliseconds>.\" in order to enable it. If we weren't in a deep space mission I'd suggest to take a look at https://redis.io/topics/latency-monitor.\n");
        return report;
    }
    let (mut slowlog_enabled, mut slowlog_tuning, mut slowlog_inspect) = (false, false, false);
    let (mut scheduler, mut hz, mut large_objects) = (false, false, false);
    let mut advices = 0;
    for (number, (event, series)) in events.iter().enumerate() {
        if number == 0 {
            report.push_str("Dave, I have observed latency spikes in this Redis instance. You don't mind talking about it, do you Dave?\n\n");
        }
        let analysis = analyze(series, now_s);
        let _ = write!(
            report,
            "{}. {}: {} latency spikes (average {}ms, mean deviation {}ms, period {:.2} sec). Worst all time event {}ms.",
            number + 1,
            event,
            analysis.samples,
            analysis.avg,
            analysis.mad,
            analysis.period as f64 / analysis.samples.max(1) as f64,
            series.max
        );
        match event.to_ascii_lowercase().as_str() {
            "command" => {
                if settings.slowlog_slower_than_us < 0 {
                    slowlog_enabled = true;
                    advices += 1;
                } else if settings.slowlog_slower_than_us / 1000 > settings.threshold_ms as i64 {
                    slowlog_tuning = true;
                    advices += 1;
                }
                slowlog_inspect = true;
                large_objects = true;
                advices += 2;
            }
            "fast-command" => {
                scheduler = true;
                advices += 1;
            }
            "expire-cycle" => {
                hz = true;
                large_objects = true;
                advices += 2;
            }
            _ => {}
        }
        report.push('\n');
    }
    if events.is_empty() && advices == 0 {
        report.push_str("Dave, no latency spike was observed during the lifetime of this Redis instance, not in the slightest bit. I honestly think you ought to sit down calmly, take a stress pill, and think things over.\n");
        return report;
    }
    if advices == 0 {
        report.push_str("\nWhile there are latency events logged, I'm not able to suggest any easy fix. Please use the Redis community to get some help, providing this report in your help request.\n");
        return report;
    }
    report.push_str("\nI have a few advices for you:\n\n");
    let suggested = settings.threshold_ms * 1000;
    if slowlog_enabled {
        let _ = writeln!(report, "- There are latency issues with potentially slow commands you are using. Try to enable the Slow Log Redis feature using the command 'CONFIG SET slowlog-log-slower-than {suggested}'. If the Slow log is disabled Redis is not able to log slow commands execution for you.");
    }
    if slowlog_tuning {
        let _ = writeln!(report, "- Your current Slow Log configuration only logs events that are slower than your configured latency monitor threshold. Please use 'CONFIG SET slowlog-log-slower-than {suggested}'.");
    }
    if slowlog_inspect {
        report.push_str("- Check your Slow Log to understand what are the commands you are running which are too slow to execute. Please check https://redis.io/commands/slowlog for more information.\n");
    }
    if scheduler {
        report.push_str("- The system is slow to execute Redis code paths not containing system calls. This usually means the system does not provide Redis CPU time to run for long periods. You should try to:\n  1) Lower the system load.\n  2) Use a computer / VM just for Redis if you are running other software in the same system.\n  3) Check if you have a \"noisy neighbour\" problem.\n  4) Check with 'redis-cli --intrinsic-latency 100' what is the intrinsic latency in your system.\n  5) Check if the problem is allocator-related by recompiling Redis with MALLOC=libc, if you are using Jemalloc. However this may create fragmentation problems.\n");
    }
    if hz && settings.hz < 100 {
        report.push_str("- In order to make the Redis keys expiring process more incremental, try to set the 'hz' configuration parameter to 100 using 'CONFIG SET hz 100'.\n");
    }
    if large_objects {
        report.push_str("- Deleting, expiring or evicting (because of maxmemory policy) large objects is a blocking operation. If you have very large objects that are often deleted, expired, or evicted, try to fragment those objects into multiple smaller objects.\n");
    }
    report
}

/// LATENCY GRAPH: Redis's sparkline of an event's samples, 80 columns wide
/// and 4 rows high, labelled with how long ago each sample was taken.
pub fn graph(event: &str, series: &EventSeries, now_s: u64) -> String {
    let samples: Vec<Sample> = series.history().collect();
    let min = samples.iter().map(|s| s.latency).min().unwrap_or(0);
    let max = samples.iter().map(|s| s.latency).max().unwrap_or(0);
    let mut out = format!(
        "{event} - high {max} ms, low {min} ms (all time high {} ms)\n",
        series.max
    );
    out.push_str(&"-".repeat(GRAPH_COLUMNS));
    out.push('\n');
    let labelled: Vec<(f64, String)> = samples
        .iter()
        .map(|s| {
            let elapsed = now_s.saturating_sub(s.time);
            let label = if elapsed < 60 {
                format!("{elapsed}s")
            } else if elapsed < 3600 {
                format!("{}m", elapsed / 60)
            } else if elapsed < 86400 {
                format!("{}h", elapsed / 3600)
            } else {
                format!("{}d", elapsed / 86400)
            };
            (s.latency as f64, label)
        })
        .collect();
    let (low, high) = (min as f64, max as f64);
    for (n, chunk) in labelled.chunks(GRAPH_COLUMNS).enumerate() {
        if n != 0 {
            out.push('\n');
        }
        sparkline(&mut out, chunk, low, high);
    }
    out
}

const GRAPH_COLUMNS: usize = 80;
const GRAPH_ROWS: i64 = 4;

/// Redis's sparklineRenderRange with SPARKLINE_FILL, ported as it is:
/// `GRAPH_ROWS` rows drawn with `_o#` and `|`, a blank line, then each
/// sample's label written downwards.
fn sparkline(out: &mut String, samples: &[(f64, String)], min: f64, max: f64) {
    const FILL: &[u8] = b"_o#";
    let charset_len = FILL.len() as i64;
    let relmax = if max - min == 0.0 { 1.0 } else { max - min };
    let steps = charset_len * GRAPH_ROWS;
    let mut row = 0i64;
    loop {
        let mut again = false;
        let mut chars = vec![b' '; samples.len()];
        for (j, (value, label)) in samples.iter().enumerate() {
            let relval = value - min;
            let step = (((relval * steps as f64) as i64) as f64 / relmax) as i64;
            let step = step.clamp(0, steps - 1);
            if row < GRAPH_ROWS {
                let charidx = step - (GRAPH_ROWS - row - 1) * charset_len;
                again = true;
                if (0..charset_len).contains(&charidx) {
                    chars[j] = FILL[charidx as usize];
                } else if charidx >= charset_len {
                    chars[j] = b'|';
                }
            } else {
                // One blank line between the graph and the labels.
                if row - GRAPH_ROWS < 1 {
                    again = true;
                    break;
                }
                let label_char = (row - GRAPH_ROWS - 1) as usize;
                if let Some(&c) = label.as_bytes().get(label_char) {
                    again = true;
                    chars[j] = c;
                }
            }
        }
        if !again {
            break;
        }
        row += 1;
        out.push_str(&String::from_utf8_lossy(&chars));
        out.push('\n');
    }
}

/// Per-command latency histograms (INFO latencystats, LATENCY HISTOGRAM),
/// in nanoseconds from 1 ns to 1 s at two significant digits, as Redis's.
/// Connections record into one of a few stripes so that workers running the
/// same command do not contend on one lock; readers merge the stripes.
pub struct CommandLatencies {
    stripes: Box<[Mutex<Histograms>]>,
}

/// One stripe: a histogram per command table row, made on first use.
type Histograms = Vec<Option<Box<Histogram<u64>>>>;

/// Stripes of [`CommandLatencies`].
const STRIPES: usize = 4;
/// Redis's LATENCY_HISTOGRAM_MIN_VALUE and MAX_VALUE (ns) and PRECISION.
const HISTOGRAM_MIN_NS: u64 = 1;
const HISTOGRAM_MAX_NS: u64 = 1_000_000_000;
const HISTOGRAM_DIGITS: u8 = 2;

impl CommandLatencies {
    /// Histograms for `commands` table rows (allocated on first use).
    pub fn new(commands: usize) -> CommandLatencies {
        CommandLatencies {
            stripes: (0..STRIPES)
                .map(|_| Mutex::new((0..commands).map(|_| None).collect()))
                .collect(),
        }
    }

    /// Records one batch's durations, `(command index, ns)`, sorted or not,
    /// into the stripe of `client_id`.
    pub fn record(&self, client_id: u64, durations: &[(usize, u64)]) {
        let mut stripe = self.stripes[client_id as usize % STRIPES].lock();
        for &(index, ns) in durations {
            let Some(slot) = stripe.get_mut(index) else {
                continue;
            };
            if slot.is_none() {
                *slot = new_histogram().map(Box::new);
            }
            if let Some(histogram) = slot {
                histogram.saturating_record(ns.clamp(HISTOGRAM_MIN_NS, HISTOGRAM_MAX_NS));
            }
        }
    }

    /// The merged histogram of one command, if it ran since the last reset.
    pub fn of(&self, index: usize) -> Option<Histogram<u64>> {
        let mut merged: Option<Histogram<u64>> = None;
        for stripe in self.stripes.iter() {
            let stripe = stripe.lock();
            let Some(Some(histogram)) = stripe.get(index) else {
                continue;
            };
            match merged.as_mut() {
                Some(m) => {
                    let _ = m.add(histogram.as_ref());
                }
                None => merged = Some(histogram.as_ref().clone()),
            }
        }
        merged.filter(|h| !h.is_empty())
    }

    /// CONFIG RESETSTAT.
    pub fn reset(&self) {
        for stripe in self.stripes.iter() {
            for slot in stripe.lock().iter_mut() {
                *slot = None;
            }
        }
    }
}

fn new_histogram() -> Option<Histogram<u64>> {
    Histogram::new_with_bounds(HISTOGRAM_MIN_NS, HISTOGRAM_MAX_NS, HISTOGRAM_DIGITS).ok()
}

/// INFO latencystats' line for one command:
/// `p50=1.003,p99=3.007,p99.9=3.007` (µs at each percentile).
pub fn percentiles_line(histogram: &Histogram<u64>, percentiles: &[f64]) -> String {
    percentiles
        .iter()
        .map(|p| {
            let ns = histogram.value_at_quantile(p / 100.0);
            format!(
                "p{}={:.3}",
                crate::float::trim_double(*p),
                ns as f64 / 1000.0
            )
        })
        .collect::<Vec<_>>()
        .join(",")
}

/// LATENCY HISTOGRAM's buckets for one command: (µs, cumulative calls) at
/// power-of-two steps from 1024 ns, each labelled with the highest value
/// its step's bucket holds, as Redis's fillCommandCDF lists them.
pub fn cumulative_buckets(histogram: &Histogram<u64>) -> Vec<(u64, u64)> {
    let mut out = Vec::new();
    let mut cumulative = 0;
    let mut previous = 0;
    for step in histogram.iter_log(1024, 2.0) {
        cumulative += step.count_since_last_iteration();
        if cumulative > previous {
            let top = histogram.highest_equivalent(step.value_iterated_to());
            out.push((top / 1000, cumulative));
        }
        previous = cumulative;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_sample_per_second_keeps_the_worst() {
        let monitor = LatencyMonitor::default();
        monitor.add("command", 120, 1000);
        monitor.add("command", 300, 1000);
        monitor.add("command", 200, 1000);
        monitor.add("command", 150, 1001);
        let series = monitor.event("command").expect("recorded");
        let history: Vec<_> = series.history().map(|s| (s.time, s.latency)).collect();
        assert_eq!(history, vec![(1000, 300), (1001, 150)]);
        assert_eq!(series.latest().latency, 150);
        assert_eq!(series.max, 300);
    }

    #[test]
    fn the_ring_keeps_the_newest_160_seconds() {
        let monitor = LatencyMonitor::default();
        for second in 1..=200 {
            monitor.add("command", second, second);
        }
        let series = monitor.event("command").expect("recorded");
        let times: Vec<u64> = series.history().map(|s| s.time).collect();
        assert_eq!(times.len(), 160);
        assert_eq!(times.first(), Some(&41));
        assert_eq!(times.last(), Some(&200));
    }

    #[test]
    fn reset_counts_the_events_it_forgot() {
        let monitor = LatencyMonitor::default();
        monitor.add("command", 1, 1);
        monitor.add("fast-command", 1, 1);
        assert_eq!(monitor.reset(Some(&["command".into(), "nope".into()])), 1);
        assert_eq!(monitor.reset(None), 1);
        assert!(monitor.is_empty());
    }

    #[test]
    fn histograms_merge_stripes_and_report_microseconds() {
        let latencies = CommandLatencies::new(3);
        latencies.record(1, &[(2, 1_000), (2, 1_000)]);
        latencies.record(2, &[(2, 3_000)]);
        let histogram = latencies.of(2).expect("recorded");
        assert_eq!(histogram.len(), 3);
        assert_eq!(
            percentiles_line(&histogram, &[50.0, 99.0, 99.9]),
            "p50=1.003,p99=3.007,p99.9=3.007"
        );
        assert_eq!(cumulative_buckets(&histogram), vec![(1, 2), (4, 3)]);
        assert!(latencies.of(0).is_none());
        latencies.reset();
        assert!(latencies.of(2).is_none());
    }
}
