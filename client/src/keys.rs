//! The key schema: `rl:{<scope>:<identifier>}:<endpoint_hash>:<window_start>`.
//!
//! The usual `rl:<scope>:<id>:<endpoint>:<window>` schema with the identity
//! in a hash tag, so that every key of one identity (global and
//! per-endpoint, current and previous window) lands in one Redis Cluster
//! slot and one multi-limit script call can touch them all. The global limit uses `*` for the endpoint hash.
//! A GCRA limit keeps one key, `<prefix>:gcra`; a fixed window one counter
//! per window, `<prefix>:fw:<window_start>`.

/// Who a request is counted against.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Identity {
    /// What identifies the caller: `user`, `ip`, `key` ...
    pub scope: String,
    /// The caller within the scope: `u_99182`, `203.0.113.42` ...
    pub id: String,
    /// The caller's tier in the rules: `free`, `paid` ...
    pub tier: String,
}

impl Identity {
    /// An identity.
    pub fn new(
        scope: impl Into<String>,
        id: impl Into<String>,
        tier: impl Into<String>,
    ) -> Identity {
        Identity {
            scope: scope.into(),
            id: id.into(),
            tier: tier.into(),
        }
    }
}

/// Six hex characters of the endpoint's SHA1: short keys, and among a few
/// hundred endpoints a collision is a one-in-tens-of-thousands event.
pub fn endpoint_hash(endpoint: &str) -> String {
    sha1_smol::Sha1::from(endpoint.as_bytes())
        .digest()
        .to_string()[..6]
        .to_string()
}

/// [`endpoint_hash`] as six ASCII bytes (what a cached limit state keeps).
pub fn endpoint_key_hash(endpoint: &str) -> [u8; 6] {
    let mut hash = [0u8; 6];
    hash.copy_from_slice(endpoint_hash(endpoint).as_bytes());
    hash
}

/// The key prefix of one limit, without the window start:
/// `rl:{user:u_99182}:a3f2c1` (or `...:*` for the global limit).
pub fn limit_prefix(identity: &Identity, endpoint: Option<&str>) -> String {
    let hash = endpoint.map_or_else(|| "*".to_string(), endpoint_hash);
    prefix_of(&identity.scope, &identity.id, &hash)
}

/// The key prefix of the limit whose endpoint part (hash, or `*`) is
/// `endpoint_part`: `rl:{<scope>:<id>}:<endpoint_part>`.
pub fn prefix_of(scope: &str, id: &str, endpoint_part: &str) -> String {
    format!("rl:{{{scope}:{id}}}:{endpoint_part}")
}

/// `floor(now / window) * window`.
pub fn window_start(now_secs: u64, window_seconds: u64) -> u64 {
    now_secs / window_seconds * window_seconds
}

/// The key of a limit's window starting at `start`.
pub fn window_key(prefix: &str, start: u64) -> String {
    format!("{prefix}:{start}")
}

/// The key of a GCRA limit (CL.THROTTLE's theoretical arrival time): one
/// per identity and limit, `<prefix>:gcra`.
pub fn gcra_key(prefix: &str) -> String {
    format!("{prefix}:gcra")
}

/// The counter of a fixed-window limit for the window starting at `start`
/// (INCREX's): `<prefix>:fw:<start>`, apart from the sliding window's
/// counters so that a limit whose algorithm changes starts afresh.
pub fn fixed_window_key(prefix: &str, start: u64) -> String {
    format!("{prefix}:fw:{start}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_follow_the_seed_schema_with_a_hash_tag() {
        let user = Identity::new("user", "u_99182", "free");
        let prefix = limit_prefix(&user, Some("GET /search"));
        assert!(prefix.starts_with("rl:{user:u_99182}:"));
        assert_eq!(prefix.len(), "rl:{user:u_99182}:".len() + 6);
        assert_eq!(limit_prefix(&user, None), "rl:{user:u_99182}:*");
        let start = window_start(1_720_000_059, 60);
        assert_eq!(start, 1_720_000_020);
        assert_eq!(
            window_key("rl:{user:u_1}:*", start),
            "rl:{user:u_1}:*:1720000020"
        );
        assert_eq!(gcra_key("rl:{user:u_1}:*"), "rl:{user:u_1}:*:gcra");
        assert_eq!(
            fixed_window_key("rl:{user:u_1}:*", start),
            "rl:{user:u_1}:*:fw:1720000020"
        );
        assert_eq!(endpoint_hash("GET /search"), endpoint_hash("GET /search"));
        assert_ne!(endpoint_hash("GET /search"), endpoint_hash("POST /search"));
    }
}
