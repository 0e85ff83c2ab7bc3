//! What INFO reads of the process and the machine from the operating
//! system: resident memory, total memory, CPU time and the kernel's name.

/// Resident set size of this process, from /proc (0 where unavailable).
pub fn rss_bytes() -> u64 {
    std::fs::read_to_string("/proc/self/statm")
        .ok()
        .and_then(|s| s.split_whitespace().nth(1)?.parse::<u64>().ok())
        .map(|pages| pages * 4096)
        .unwrap_or(0)
}

/// Physical memory of the machine, from /proc/meminfo (0 where unavailable).
pub(super) fn total_system_memory() -> u64 {
    std::fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|text| {
            let line = text.lines().find(|l| l.starts_with("MemTotal:"))?;
            line.split_whitespace().nth(1)?.parse::<u64>().ok()
        })
        .map_or(0, |kib| kib * 1024)
}

/// User and system CPU seconds of this process, from /proc.
pub(super) fn cpu_seconds() -> (f64, f64) {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    // Fields after the parenthesised command name; utime and stime are 14 and 15.
    let rest = stat.rsplit_once(')').map(|(_, r)| r).unwrap_or("");
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let ticks = |i: usize| {
        fields
            .get(i)
            .and_then(|f| f.parse::<f64>().ok())
            .unwrap_or(0.0)
    };
    (ticks(11) / 100.0, ticks(12) / 100.0)
}

/// `Linux 6.1.0 x86_64`, as Redis's uname-based `os` field.
pub(super) fn os_name() -> String {
    let read = |name: &str| {
        std::fs::read_to_string(format!("/proc/sys/kernel/{name}"))
            .map(|s| s.trim().to_string())
            .unwrap_or_default()
    };
    let (ostype, release) = (read("ostype"), read("osrelease"));
    if ostype.is_empty() {
        format!("{} {}", std::env::consts::OS, std::env::consts::ARCH)
    } else {
        format!("{ostype} {release} {}", std::env::consts::ARCH)
    }
}
