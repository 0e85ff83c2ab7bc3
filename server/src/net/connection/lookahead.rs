//! A look ahead at a pipeline's next commands: their keys' memory is
//! fetched together before the first of them runs.
//!
//! A key not in the CPU's cache costs its lookup three cache misses, one
//! after the other (see `store::shard::prefetch`), and one command at a
//! time nothing overlaps them. A pipelined batch names its keys in
//! advance: asking for all of their memory first lets the misses of the
//! whole batch overlap, and each command then finds its key in cache.
//! Valkey 8 does the same for the commands its I/O threads framed, with
//! the same directive, `prefetch-batch-max-size`.
//!
//! The look ahead decides nothing: it frames without allocating, resolves
//! each command only to find its keys, and a frame it cannot read ends it.
//! Every command is framed again and run as if it had not looked.

use std::ops::Range;

use crate::catalog::registry;
use crate::resp::peek_command;
use crate::state::Shared;
use crate::store::KeyRef;

/// After this many commands naming fewer than two keys, the look ahead
/// gives the batch up as a pipeline on one key. Two: every command framed
/// past them in such a batch is framed for nothing (four cost LPUSH onto
/// one list 5% of its CPU; two, half that).
const HOT_KEY_COMMANDS: usize = 2;

/// Prefetches the keys of the whole commands at the front of `buf`, for
/// a client on database `db`, until `batch` keys or commands: every key's
/// table memory first, then every key's entry. Returns how many bytes of
/// `buf` the commands looked at span, so that the next look ahead starts
/// after them.
pub(super) fn prefetch_keys(shared: &Shared, db: usize, buf: &[u8], batch: usize) -> usize {
    if !shared.store.outgrows_cache() {
        // The keys are in cache already: looking would only cost.
        return buf.len();
    }
    let (keys, spanned) = keys_ahead(shared, buf, batch);
    if keys.len() > 1 {
        // One key alone gains nothing: its lookup follows at once.
        let db = shared.store.db(db);
        db.prefetch_all_buckets(&keys);
        for key in &keys {
            db.prefetch_entry(*key);
        }
    }
    spanned
}

/// The keys of the whole commands at the front of `buf`, until `batch`
/// keys or commands, a key repeated from the one before left out; and how
/// many bytes those commands span.
fn keys_ahead<'b>(shared: &Shared, buf: &'b [u8], batch: usize) -> (Vec<KeyRef<'b>>, usize) {
    let mut ranges: Vec<Range<usize>> = Vec::new();
    let mut argv: Vec<&[u8]> = Vec::new();
    let mut keys: Vec<KeyRef<'b>> = Vec::new();
    let mut spanned = 0;
    let mut commands = 0;
    while keys.len() < batch && commands < batch {
        let Some(length) = peek_command(&buf[spanned..], &mut ranges) else {
            break;
        };
        if spanned == 0 && length == buf.len() {
            // A lone command (no pipeline): nothing to overlap.
            return (keys, length);
        }
        if commands == 0 {
            // A pipeline: room for the batch at once, not before (a lone
            // command, the commonest case at P=1, allocates nothing here).
            keys.reserve(batch);
        }
        if commands == HOT_KEY_COMMANDS && keys.len() < 2 {
            // A pipeline on one key (a shared limit, a queue): the key is
            // hot already, and looking further costs every command a
            // framing and a lookup for nothing. Not again in this batch.
            return (Vec::new(), buf.len());
        }
        let frame = &buf[spanned..spanned + length];
        argv.clear();
        argv.extend(ranges.iter().map(|range| &frame[range.clone()]));
        spanned += length;
        commands += 1;
        let Some(index) = registry().index_of(argv[0]) else {
            continue;
        };
        let command = registry().command(index);
        let positions = match command.only_key_position() {
            0 => command.counted_key_range(&argv).unwrap_or(0..0),
            only => only..only + 1,
        };
        for position in positions {
            let Some(&key) = argv.get(position) else {
                continue;
            };
            // A key the command before used is in cache by its turn, and
            // prefetching it would only take its shard's lock once more.
            if keys
                .last()
                .is_some_and(|last: &KeyRef<'_>| last.bytes == key)
            {
                continue;
            }
            keys.push(shared.store.key(key));
        }
    }
    (keys, spanned)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Config;
    use crate::store::ValueRef;

    fn command(words: &[&str]) -> Vec<u8> {
        let mut out = format!("*{}\r\n", words.len()).into_bytes();
        for word in words {
            out.extend(format!("${}\r\n{word}\r\n", word.len()).into_bytes());
        }
        out
    }

    /// A server whose keyspace is past what the look ahead skips.
    fn server_with_keyspace() -> Shared {
        let shared = Shared::new(Config::default());
        let value = [b'v'; 32];
        for i in 0..40_000 {
            let name = format!("counter:{i}");
            let key = shared.store.key(name.as_bytes());
            shared
                .store
                .db(0)
                .lock_for(key)
                .set(key, ValueRef::Str(&value), 0, 0);
        }
        assert!(shared.store.outgrows_cache());
        shared
    }

    #[test]
    fn a_keyspace_in_cache_is_not_looked_at() {
        let shared = Shared::new(Config::default());
        let buf = [command(&["GET", "a"]), command(&["GET", "b"])].concat();
        assert_eq!(prefetch_keys(&shared, 0, &buf, 16), buf.len());
    }

    #[test]
    fn the_look_ahead_spans_whole_commands_up_to_the_batch() {
        let shared = server_with_keyspace();
        // Sixteen commands of a key each (all of one length), and more.
        let gets: Vec<Vec<u8>> = (10..30)
            .map(|i| command(&["GET", &format!("counter:{i}")]))
            .collect();
        let buf = gets.concat();
        assert_eq!(prefetch_keys(&shared, 0, &buf, 16), gets[0].len() * 16);
        // A script's keys count toward the batch: 3 + 3 + 3 + 3 keys.
        let script = command(&["EVALSHA", "0123", "3", "a", "b", "c", "arg"]);
        let buf = script.repeat(6);
        assert_eq!(prefetch_keys(&shared, 0, &buf, 12), script.len() * 4);
        // Commands without keys count as commands.
        let ping = command(&["PING"]);
        let buf = [gets[0].clone(), gets[1].clone(), ping.repeat(3)].concat();
        assert_eq!(
            prefetch_keys(&shared, 0, &buf, 4),
            gets[0].len() * 2 + ping.len() * 2
        );
    }

    /// A key repeated from the command before is looked at once.
    #[test]
    fn a_repeated_key_is_looked_at_once() {
        let shared = Shared::new(Config::default());
        let push = command(&["LPUSH", "queue", "x"]);
        let get = command(&["GET", "counter:1"]);
        let buf = [get.clone(), push.repeat(3), get.repeat(2), push.clone()].concat();
        let (keys, spanned) = keys_ahead(&shared, &buf, 16);
        let names: Vec<&[u8]> = keys.iter().map(|k| k.bytes).collect();
        assert_eq!(names, [&b"counter:1"[..], b"queue", b"counter:1", b"queue"]);
        assert_eq!(spanned, buf.len());
        // Two commands on one key: the batch is given up, whole.
        let buf = [push.repeat(2), get.repeat(2)].concat();
        let (keys, spanned) = keys_ahead(&shared, &buf, 16);
        assert!(keys.is_empty());
        assert_eq!(spanned, buf.len());
    }

    #[test]
    fn the_look_ahead_stops_where_it_cannot_frame() {
        let shared = server_with_keyspace();
        let get = command(&["GET", "counter:1"]);
        let inline = [get.clone(), b"GET counter:2\r\n".to_vec(), get.clone()].concat();
        assert_eq!(prefetch_keys(&shared, 0, &inline, 16), get.len());
        let cut = [get.clone(), get[..get.len() - 1].to_vec()].concat();
        assert_eq!(prefetch_keys(&shared, 0, &cut, 16), get.len());
        let unknown = [command(&["NOSUCH", "k"]), get.clone()].concat();
        assert_eq!(prefetch_keys(&shared, 0, &unknown, 16), unknown.len());
    }
}
