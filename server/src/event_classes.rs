//! The classes of keyspace notifications and the letters that name them
//! in `notify-keyspace-events` (Redis's `NOTIFY_*` flags), read and shown
//! as Redis reads and shows them. The configuration checks a value with
//! [`parse`]; `keyspace_events` publishes by the flags.

/// The classes of events and the two kinds of channel, as Redis's
/// `NOTIFY_*` flags.
pub mod class {
    /// `K`: messages on `__keyspace@<db>__:<key>`.
    pub const KEYSPACE: u32 = 1 << 0;
    /// `E`: messages on `__keyevent@<db>__:<event>`.
    pub const KEYEVENT: u32 = 1 << 1;
    /// `g`: DEL, EXPIRE, RENAME and the other commands of no one type.
    pub const GENERIC: u32 = 1 << 2;
    /// `$`: strings.
    pub const STRING: u32 = 1 << 3;
    /// `l`: lists.
    pub const LIST: u32 = 1 << 4;
    /// `s`: sets.
    pub const SET: u32 = 1 << 5;
    /// `h`: hashes.
    pub const HASH: u32 = 1 << 6;
    /// `z`: sorted sets.
    pub const ZSET: u32 = 1 << 7;
    /// `x`: keys dropped when their deadline passed.
    pub const EXPIRED: u32 = 1 << 8;
    /// `e`: keys evicted for maxmemory (tally never evicts).
    pub const EVICTED: u32 = 1 << 9;
    /// `t`: streams (tally has none).
    pub const STREAM: u32 = 1 << 10;
    /// `m`: reads of missing keys.
    pub const KEY_MISS: u32 = 1 << 11;
    /// `d`: modules' (tally has none).
    pub const MODULE: u32 = 1 << 13;
    /// `n`: keys created.
    pub const NEW: u32 = 1 << 14;
    /// `A`: every class but `m` and `n`.
    pub const ALL: u32 =
        GENERIC | STRING | LIST | SET | HASH | ZSET | EXPIRED | EVICTED | STREAM | MODULE;
}

/// The flags a `notify-keyspace-events` value names, or `None` for a
/// character that names no class (Redis's keyspaceEventsStringToFlags).
pub fn parse(text: &str) -> Option<u32> {
    text.chars().try_fold(0, |flags, c| {
        Some(
            flags
                | match c {
                    'A' => class::ALL,
                    'g' => class::GENERIC,
                    '$' => class::STRING,
                    'l' => class::LIST,
                    's' => class::SET,
                    'h' => class::HASH,
                    'z' => class::ZSET,
                    'x' => class::EXPIRED,
                    'e' => class::EVICTED,
                    'K' => class::KEYSPACE,
                    'E' => class::KEYEVENT,
                    't' => class::STREAM,
                    'm' => class::KEY_MISS,
                    'd' => class::MODULE,
                    'n' => class::NEW,
                    _ => return None,
                },
        )
    })
}

/// The value CONFIG GET shows for `flags`, in Redis's order
/// (keyspaceEventsFlagsToString).
pub fn format(flags: u32) -> String {
    let mut out = String::new();
    if flags & class::ALL == class::ALL {
        out.push('A');
    } else {
        for (flag, c) in [
            (class::GENERIC, 'g'),
            (class::STRING, '$'),
            (class::LIST, 'l'),
            (class::SET, 's'),
            (class::HASH, 'h'),
            (class::ZSET, 'z'),
            (class::EXPIRED, 'x'),
            (class::EVICTED, 'e'),
            (class::STREAM, 't'),
            (class::MODULE, 'd'),
            (class::NEW, 'n'),
        ] {
            if flags & flag != 0 {
                out.push(c);
            }
        }
    }
    for (flag, c) in [
        (class::KEYSPACE, 'K'),
        (class::KEYEVENT, 'E'),
        (class::KEY_MISS, 'm'),
    ] {
        if flags & flag != 0 {
            out.push(c);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_read_and_show_as_redis_s() {
        assert_eq!(parse(""), Some(0));
        assert_eq!(parse("KEA").map(format).as_deref(), Some("AKE"));
        assert_eq!(parse("Ex").map(format).as_deref(), Some("xE"));
        assert_eq!(parse("g$lshzxetdKE").map(format).as_deref(), Some("AKE"));
        assert_eq!(parse("nmK").map(format).as_deref(), Some("nKm"));
        assert_eq!(parse("AmnKE").map(format).as_deref(), Some("AKEm"));
        assert_eq!(parse("Kw"), None);
        assert_eq!(parse("k"), None);
    }
}
