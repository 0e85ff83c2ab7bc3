//! Native twins of bucket4j's Redis scripts (`bucket4j-redis`'s
//! `LuaScripts`, 8.14 to 8.19, byte for byte as its Jedis, Lettuce,
//! Redisson and Glide proxy managers EVAL them): bucket4j keeps each bucket's
//! state as a serialized blob and updates it by compare-and-swap.
//!
//! - `scripts/bucket4j_set_nx_px.lua`, `scripts/bucket4j_set_nx.lua`: the
//!   first state of a bucket, `SET key state NX [PX ttl]`. ARGV = state
//!   [, ttl ms].
//! - `scripts/bucket4j_compare_and_swap_px.lua`,
//!   `scripts/bucket4j_compare_and_swap.lua`: the next state, written when
//!   the stored one is still the state the client read (PSETEX with a TTL,
//!   or SET). ARGV = expected state, new state [, ttl ms].
//!
//! Each replies 1 when it wrote and 0 when it did not.

use crate::fixed_window::canonical_integer;
use crate::Fallback;

/// Which script.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Script {
    /// `SET key ARGV[1] NX PX ARGV[2]`.
    SetNxPx,
    /// `SET key ARGV[1] NX`.
    SetNx,
    /// `PSETEX key ARGV[3] ARGV[2]` when GET gives ARGV[1].
    CompareAndSwapPx,
    /// `SET key ARGV[2]` when GET gives ARGV[1].
    CompareAndSwap,
}

/// The key as the scripts see it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Current<'a> {
    /// No such key.
    Missing,
    /// A string, as GET gives it.
    Text(&'a [u8]),
    /// A key of another type: SET NX sees it exists, GET fails (Lua).
    Other,
}

/// The write a run makes: the key set to ARGV[`value`], with a TTL or
/// without one (a SET without PX drops the key's deadline).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Write {
    /// Index in ARGV of the value written.
    pub value: usize,
    /// The TTL in milliseconds (PX, PSETEX).
    pub ttl_ms: Option<i64>,
}

/// Runs `script` for ARGV = `args` with the key as stored: the write, if
/// any (the reply is 1 exactly when there is one).
pub fn run(
    script: Script,
    args: &[&[u8]],
    current: Current<'_>,
) -> Result<Option<Write>, Fallback> {
    // A TTL as PX and PSETEX take it: a canonical integer, at least 1.
    let ttl = |arg: &[u8]| match canonical_integer(arg)? {
        ms if ms >= 1 => Ok(ms),
        _ => Err(Fallback),
    };
    match script {
        Script::SetNxPx | Script::SetNx => {
            let ttl_ms = match (script, args) {
                (Script::SetNxPx, [_, px, ..]) => Some(ttl(px)?),
                (Script::SetNx, [_, ..]) => None,
                _ => return Err(Fallback),
            };
            Ok((current == Current::Missing).then_some(Write { value: 0, ttl_ms }))
        }
        Script::CompareAndSwapPx | Script::CompareAndSwap => {
            let (expected, ttl_ms) = match (script, args) {
                (Script::CompareAndSwapPx, [expected, _, px, ..]) => (expected, Some(ttl(px)?)),
                (Script::CompareAndSwap, [expected, _, ..]) => (expected, None),
                _ => return Err(Fallback),
            };
            match current {
                Current::Other => Err(Fallback),
                Current::Missing => Ok(None),
                Current::Text(stored) => {
                    Ok((stored == *expected).then_some(Write { value: 1, ttl_ms }))
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_first_state_is_set_only_on_a_missing_key() {
        let fresh = Some(Write {
            value: 0,
            ttl_ms: Some(5000),
        });
        assert_eq!(
            run(Script::SetNxPx, &[b"s0", b"5000"], Current::Missing),
            Ok(fresh)
        );
        assert_eq!(
            run(Script::SetNxPx, &[b"s0", b"5000"], Current::Text(b"x")),
            Ok(None)
        );
        assert_eq!(run(Script::SetNx, &[b"s0"], Current::Other), Ok(None));
        assert_eq!(
            run(Script::SetNxPx, &[b"s0", b"0"], Current::Missing),
            Err(Fallback)
        );
    }

    #[test]
    fn a_swap_needs_the_state_the_client_read() {
        let swap = Some(Write {
            value: 1,
            ttl_ms: None,
        });
        assert_eq!(
            run(
                Script::CompareAndSwap,
                &[b"s0", b"s1"],
                Current::Text(b"s0")
            ),
            Ok(swap)
        );
        assert_eq!(
            run(
                Script::CompareAndSwap,
                &[b"s0", b"s1"],
                Current::Text(b"s9")
            ),
            Ok(None)
        );
        assert_eq!(
            run(Script::CompareAndSwap, &[b"s0", b"s1"], Current::Missing),
            Ok(None)
        );
        assert_eq!(
            run(Script::CompareAndSwap, &[b"s0", b"s1"], Current::Other),
            Err(Fallback)
        );
        assert_eq!(
            run(
                Script::CompareAndSwapPx,
                &[b"s0", b"s1", b"-1"],
                Current::Text(b"s0")
            ),
            Err(Fallback)
        );
    }
}
