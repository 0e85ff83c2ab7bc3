//! The rate-limiter scripts tally knows, and their native Rust twins.
//!
//! Gateways run a sliding-window script through EVALSHA on every request.
//! tally recognises the scripts in [`SCRIPTS`] by SHA1 and runs the twin
//! instead of Lua. A twin is a pure function from the script's arguments and
//! the stored values it reads to the reply and the writes to make, and it
//! answers [`Fallback`] for anything off the happy path (an argument Lua would
//! parse differently, a stored value that is not a canonical integer, a
//! window of zero, ...), in which case the server runs the real Lua script.
//! So a reply can never differ from Lua's; the property tests in
//! `tests/tests/native_scripts.rs` compare the two on random inputs.
//!
//! Besides tally's own scripts (the seed's sliding window, the client's
//! multi-limit check and lease), the set holds the scripts of the most used
//! limiter libraries, byte for byte as each package sends them
//! ([`fixed_window`], [`limits_sliding_window`], [`limits_moving_window`],
//! [`token_bucket`],
//! [`gcra`], [`compare_and_swap`]).
#![warn(missing_docs)]

pub mod compare_and_swap;
pub mod fixed_window;
pub mod gcra;
pub mod lease;
pub mod limits_moving_window;
pub mod limits_sliding_window;
pub mod multi_limit;
pub mod sliding_window;
pub mod token_bucket;
pub mod window;

/// A known script.
#[derive(Debug, Clone, Copy)]
pub struct KnownScript {
    /// Short name (INFO, docs).
    pub name: &'static str,
    /// The Lua source, byte for byte as clients send it.
    pub source: &'static str,
    /// Which native twin runs it.
    pub twin: Twin,
}

/// The native implementations.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Twin {
    /// [`sliding_window`], the sliding-window limiter with the caller's clock.
    SlidingWindow,
    /// [`sliding_window::run_server_time`], the same reading TIME.
    SlidingWindowServerTime,
    /// [`multi_limit`], every limit of a request in one check.
    MultiLimit,
    /// [`lease`], tally-client's cached-mode sync.
    Lease,
    /// [`fixed_window::limits_incr_expire`], Python `limits`' fixed window.
    LimitsIncrExpire,
    /// [`fixed_window::rate_limit_redis`], express-rate-limit's Redis store.
    RateLimitRedis,
    /// [`fixed_window::rate_limiter_flexible`], `RateLimiterRedis`' consume.
    RateLimiterFlexible,
    /// [`fixed_window::rate_limiter_flexible_valkey_glide`],
    /// `RateLimiterValkeyGlide`'s consume function.
    RateLimiterFlexibleValkeyGlide,
    /// [`token_bucket`], Spring Cloud Gateway's `RedisRateLimiter`.
    SpringCloudGateway,
    /// [`limits_sliding_window`], Python `limits`' sliding-window counter.
    LimitsSlidingWindow,
    /// [`gcra`]'s `allowN`, go-redis/redis_rate's `Limiter.AllowN`.
    RedisRateAllowN,
    /// [`gcra`]'s `allowAtMost`, go-redis/redis_rate's `Limiter.AllowAtMost`.
    RedisRateAllowAtMost,
    /// One of bucket4j's [`compare_and_swap`] scripts.
    Bucket4j(compare_and_swap::Script),
    /// [`limits_moving_window`], Python `limits`' moving window.
    LimitsMovingWindow,
}

impl Twin {
    /// True when the script's reply starts with 1 for an allowed request
    /// and 0 for a denied one (tally's own scripts and Spring Cloud
    /// Gateway's). The fixed-window scripts reply with counts and leave the
    /// decision to the client; `limits`' sliding window replies true or
    /// false (1 or nil) as does its moving window, redis_rate the cost it
    /// allowed and bucket4j whether it swapped, which are no such replies
    /// either.
    pub fn replies_decision(self) -> bool {
        !matches!(
            self,
            Twin::LimitsIncrExpire
                | Twin::RateLimitRedis
                | Twin::RateLimiterFlexible
                | Twin::RateLimiterFlexibleValkeyGlide
                | Twin::LimitsSlidingWindow
                | Twin::RedisRateAllowN
                | Twin::RedisRateAllowAtMost
                | Twin::Bucket4j(_)
                | Twin::LimitsMovingWindow
        )
    }
}

/// Every script with a native twin.
pub const SCRIPTS: &[KnownScript] = &[
    KnownScript {
        name: "sliding_window",
        source: include_str!("../scripts/sliding_window.lua"),
        twin: Twin::SlidingWindow,
    },
    KnownScript {
        name: "sliding_window_server_time",
        source: include_str!("../scripts/sliding_window_server_time.lua"),
        twin: Twin::SlidingWindowServerTime,
    },
    KnownScript {
        name: "multi_limit",
        source: include_str!("../scripts/multi_limit.lua"),
        twin: Twin::MultiLimit,
    },
    KnownScript {
        name: "lease",
        source: lease::SOURCE,
        twin: Twin::Lease,
    },
    KnownScript {
        name: "limits_fixed_window",
        source: include_str!("../scripts/limits_incr_expire.lua"),
        twin: Twin::LimitsIncrExpire,
    },
    KnownScript {
        name: "rate_limit_redis",
        source: include_str!("../scripts/rate_limit_redis_increment.lua"),
        twin: Twin::RateLimitRedis,
    },
    KnownScript {
        name: "rate_limiter_flexible",
        source: include_str!("../scripts/rate_limiter_flexible_incr_ttl.lua"),
        twin: Twin::RateLimiterFlexible,
    },
    KnownScript {
        name: "rate_limiter_flexible_valkey_glide",
        source: include_str!("../scripts/rate_limiter_flexible_valkey_glide.lua"),
        twin: Twin::RateLimiterFlexibleValkeyGlide,
    },
    KnownScript {
        name: "spring_cloud_gateway",
        source: include_str!("../scripts/spring_cloud_gateway_request_rate_limiter.lua"),
        twin: Twin::SpringCloudGateway,
    },
    KnownScript {
        name: "limits_sliding_window",
        source: include_str!("../scripts/limits_acquire_sliding_window.lua"),
        twin: Twin::LimitsSlidingWindow,
    },
    KnownScript {
        name: "limits_moving_window",
        source: include_str!("../scripts/limits_acquire_moving_window.lua"),
        twin: Twin::LimitsMovingWindow,
    },
    KnownScript {
        name: "redis_rate_allow_n",
        source: include_str!("../scripts/redis_rate_allow_n.lua"),
        twin: Twin::RedisRateAllowN,
    },
    KnownScript {
        name: "redis_rate_allow_at_most",
        source: include_str!("../scripts/redis_rate_allow_at_most.lua"),
        twin: Twin::RedisRateAllowAtMost,
    },
    KnownScript {
        name: "bucket4j_set_nx_px",
        source: include_str!("../scripts/bucket4j_set_nx_px.lua"),
        twin: Twin::Bucket4j(compare_and_swap::Script::SetNxPx),
    },
    KnownScript {
        name: "bucket4j_set_nx",
        source: include_str!("../scripts/bucket4j_set_nx.lua"),
        twin: Twin::Bucket4j(compare_and_swap::Script::SetNx),
    },
    KnownScript {
        name: "bucket4j_compare_and_swap_px",
        source: include_str!("../scripts/bucket4j_compare_and_swap_px.lua"),
        twin: Twin::Bucket4j(compare_and_swap::Script::CompareAndSwapPx),
    },
    KnownScript {
        name: "bucket4j_compare_and_swap",
        source: include_str!("../scripts/bucket4j_compare_and_swap.lua"),
        twin: Twin::Bucket4j(compare_and_swap::Script::CompareAndSwap),
    },
];

/// Redis turns a Lua number into an integer reply with C's `(long long)`
/// cast: it truncates, and on x86-64 NaN and out-of-range values become
/// `i64::MIN` (Rust's `as` would saturate instead).
pub fn lua_number_to_integer(n: f64) -> i64 {
    const LIMIT: f64 = 9_223_372_036_854_775_808.0; // 2^63
    if n.is_nan() || !(-LIMIT..LIMIT).contains(&n) {
        i64::MIN
    } else {
        n as i64
    }
}

/// SHA1 of a script source in lower-case hex (what EVALSHA takes).
pub fn sha1_hex(source: &str) -> String {
    String::from_utf8_lossy(&sha1_hex_bytes(source.as_bytes())).into_owned()
}

/// SHA1 of `bytes` as 40 lower-case hex digits, on the stack: EVAL hashes
/// every script it is sent, and the digest's `Display` formats digit by
/// digit through the formatter.
pub fn sha1_hex_bytes(bytes: &[u8]) -> [u8; 40] {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let digest = sha1_smol::Sha1::from(bytes).digest().bytes();
    let mut hex = [0u8; 40];
    for (pair, byte) in hex.chunks_exact_mut(2).zip(digest) {
        pair[0] = DIGITS[usize::from(byte >> 4)];
        pair[1] = DIGITS[usize::from(byte & 0xf)];
    }
    hex
}

/// The twin cannot promise Lua's exact behaviour for these inputs: run Lua.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Fallback;

/// Parses an argument the way Lua's `tonumber` would, but only in the forms
/// where the result is certain to be the same: an optional `-`, digits, and
/// an optional fraction. Anything else (spaces, hex, exponents, `inf`) falls
/// back to Lua.
pub fn plain_number(bytes: &[u8]) -> Result<f64, Fallback> {
    let digits = bytes.strip_prefix(b"-").unwrap_or(bytes);
    let (int, frac) = match digits.iter().position(|&b| b == b'.') {
        Some(dot) => (&digits[..dot], Some(&digits[dot + 1..])),
        None => (digits, None),
    };
    let all_digits = |s: &[u8]| !s.is_empty() && s.iter().all(u8::is_ascii_digit);
    if !all_digits(int) || frac.is_some_and(|f| !all_digits(f)) || bytes.len() > 30 {
        return Err(Fallback);
    }
    std::str::from_utf8(bytes)
        .ok()
        .and_then(|s| s.parse::<f64>().ok())
        .filter(|n| n.is_finite())
        .ok_or(Fallback)
}

/// A stored string as a script reads it, for `tonumber(GET key)`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Stored<'a> {
    /// No such key: `nil`.
    Missing,
    /// A string the server holds as an integer.
    Integer(i64),
    /// Any other string.
    Text(&'a [u8]),
}

/// `tonumber(GET key)` where a twin can promise Lua's answer: `None` for a
/// missing key; a string only Lua parses, or an integer a Lua number would
/// round, goes to Lua.
pub fn stored_number(stored: Stored<'_>) -> Result<Option<f64>, Fallback> {
    match stored {
        Stored::Missing => Ok(None),
        Stored::Integer(n) if n.abs() <= EXACT_INTEGER => Ok(Some(n as f64)),
        Stored::Integer(_) => Err(Fallback),
        Stored::Text(bytes) => plain_number(bytes).map(Some),
    }
}

/// The largest magnitude at which every integer is exact in a Lua number.
pub const EXACT_INTEGER: i64 = 1 << 53;

#[cfg(test)]
mod tests {
    use super::*;

    /// The libraries' scripts are recognised by the SHA1 their clients send
    /// with EVALSHA, so not one byte of them may change (an editor trimming
    /// a trailing space would silently send every call to Lua). The digests
    /// are those of the scripts as extracted from each package (see
    /// `fixed_window`).
    #[test]
    fn library_scripts_keep_the_digests_their_clients_send() {
        let digest = |name: &str| {
            let known = SCRIPTS.iter().find(|s| s.name == name).unwrap();
            sha1_hex(known.source)
        };
        assert_eq!(
            digest("limits_fixed_window"),
            "628bd136a573a06b346879695681af12ccef300f"
        );
        assert_eq!(
            digest("rate_limit_redis"),
            "895b92e1712734e1b464999be23953485475357b"
        );
        assert_eq!(
            digest("rate_limiter_flexible"),
            "a1de965f42e177aa339706bd580f049065eca79a"
        );
        assert_eq!(
            digest("rate_limiter_flexible_valkey_glide"),
            "c2dd110244ccc4448172c0148049c05a426917b4"
        );
        assert_eq!(
            digest("limits_moving_window"),
            "741eab638ba93ed71020bb821c45c022d0fa02c4"
        );
        assert_eq!(
            digest("limits_sliding_window"),
            "e8ac2a60cb040b0dbb56815a1e9c6fd032ce62e7"
        );
        assert_eq!(
            digest("redis_rate_allow_n"),
            "f52a5b566060d79fd321d695df55bc918339c4aa"
        );
        assert_eq!(
            digest("redis_rate_allow_at_most"),
            "054143318f521948424aa25df61d7f7ba835a9d7"
        );
        for (name, sha) in [
            (
                "bucket4j_set_nx_px",
                "c0569386b0382069581dfaa1a8d241140bc0eeb4",
            ),
            (
                "bucket4j_set_nx",
                "1fed031c105d7c0315b3fc2e4a75e697247264f5",
            ),
            (
                "bucket4j_compare_and_swap_px",
                "535b2fd00a12a23393fe15cf99599ecc51cd3007",
            ),
            (
                "bucket4j_compare_and_swap",
                "9450de540565d89de15092a716555821601f128b",
            ),
        ] {
            assert_eq!(digest(name), sha, "{name}");
        }
        assert_eq!(
            digest("spring_cloud_gateway"),
            "0ad5736ed1c04aae6ec194376c784b89b8c08a7a"
        );
    }
}
