//! XINFO STREAM, GROUPS, CONSUMERS and HELP, as Redis 7.0's xinfoCommand
//! answers them.

use super::collection::read;
use super::error;
use super::Ctx;
use crate::resp::Reply;
use crate::store::object::{ConsumerGroup, Stream, StreamId};

fn bulk(text: &str) -> Reply {
    Reply::Bulk(text.as_bytes().to_vec())
}

fn id_reply(id: StreamId) -> Reply {
    Reply::Bulk(id.to_bytes())
}

fn count_reply(n: usize) -> Reply {
    Reply::Int(n as i64)
}

/// Runs `answer` on the stream at argv[2]: `no such key` when missing,
/// WRONGTYPE for another type.
fn with_stream(ctx: &mut Ctx<'_>, argv: &[&[u8]], answer: impl FnOnce(&Stream) -> Reply) -> Reply {
    let key = ctx.key(argv[2]);
    let now = ctx.now_ms;
    let mut shard = ctx.lock(key);
    match read::<Stream, _>(&mut shard, key, now, answer) {
        Ok(Some(reply)) => reply,
        Ok(None) => Reply::error(error::NO_SUCH_KEY),
        Err(reply) => reply,
    }
}

/// XINFO STREAM key [FULL [COUNT count]]
pub fn xinfo_stream(ctx: &mut Ctx<'_>, argv: &[&[u8]]) -> Reply {
    let options = &argv[3..];
    with_stream(ctx, argv, |stream| {
        let syntax = || Reply::error_bytes(error::subcommand_syntax("XINFO", argv[1]));
        let full = !options.is_empty();
        let mut count = 10usize;
        if full {
            if (options.len() != 1 && options.len() != 3) || !super::args::is(options[0], "full") {
                return syntax();
            }
            if options.len() == 3 {
                if !super::args::is(options[1], "count") {
                    return syntax();
                }
                match super::args::int_arg(options[2]) {
                    Ok(n) if n < 0 => count = 10,
                    Ok(n) => count = n as usize,
                    Err(reply) => return reply,
                }
            }
        }
        let mut fields = vec![
            (bulk("length"), Reply::Int(stream.len() as i64)),
            (bulk("radix-tree-keys"), count_reply(stream.node_count())),
            (
                bulk("radix-tree-nodes"),
                count_reply(stream.radix_tree_nodes()),
            ),
            (bulk("last-generated-id"), id_reply(stream.last_id())),
            (
                bulk("max-deleted-entry-id"),
                id_reply(stream.max_deleted_entry_id()),
            ),
            (
                bulk("entries-added"),
                Reply::Int(stream.entries_added() as i64),
            ),
            (bulk("recorded-first-entry-id"), id_reply(stream.first_id())),
        ];
        if !full {
            let edge = |rev| match super::stream::range_reply(
                stream,
                StreamId::MIN,
                StreamId::MAX,
                rev,
                1,
            ) {
                Reply::Array(mut one) if !one.is_empty() => one.swap_remove(0),
                _ => Reply::Nil,
            };
            fields.push((bulk("groups"), count_reply(stream.groups().len())));
            fields.push((bulk("first-entry"), edge(false)));
            fields.push((bulk("last-entry"), edge(true)));
        } else {
            let entries =
                super::stream::range_reply(stream, StreamId::MIN, StreamId::MAX, false, count);
            fields.push((bulk("entries"), entries));
            let groups = stream
                .groups()
                .iter()
                .map(|(name, group)| full_group(stream, name, group, count))
                .collect();
            fields.push((bulk("groups"), Reply::Array(groups)));
        }
        Reply::Map(fields)
    })
}

/// One group in XINFO STREAM FULL: its pending entries and consumers, at
/// most `count` pending entries each (0: all).
fn full_group(stream: &Stream, name: &[u8], group: &ConsumerGroup, count: usize) -> Reply {
    let limit = if count == 0 { usize::MAX } else { count };
    let pending = group
        .pending
        .iter()
        .take(limit)
        .map(|(id, entry)| {
            Reply::Array(vec![
                id_reply(*id),
                Reply::Bulk(entry.owner.clone()),
                Reply::Int(entry.delivery_time as i64),
                Reply::Int(entry.delivery_count as i64),
            ])
        })
        .collect();
    let consumers = group
        .consumers
        .iter()
        .map(|(name, consumer)| {
            let listed = consumer
                .pending
                .iter()
                .take(limit)
                .filter_map(|id| {
                    let entry = group.pending.get(id)?;
                    Some(Reply::Array(vec![
                        id_reply(*id),
                        Reply::Int(entry.delivery_time as i64),
                        Reply::Int(entry.delivery_count as i64),
                    ]))
                })
                .collect();
            Reply::Map(vec![
                (bulk("name"), Reply::Bulk(name.clone())),
                (bulk("seen-time"), Reply::Int(consumer.seen_time as i64)),
                (bulk("pel-count"), count_reply(consumer.pending.len())),
                (bulk("pending"), Reply::Array(listed)),
            ])
        })
        .collect();
    Reply::Map(vec![
        (bulk("name"), Reply::Bulk(name.to_vec())),
        (bulk("last-delivered-id"), id_reply(group.last_id)),
        (bulk("entries-read"), entries_read(group)),
        (bulk("lag"), lag(stream, group)),
        (bulk("pel-count"), count_reply(group.pending.len())),
        (bulk("pending"), Reply::Array(pending)),
        (bulk("consumers"), Reply::Array(consumers)),
    ])
}

fn entries_read(group: &ConsumerGroup) -> Reply {
    match group.entries_read {
        -1 => Reply::Nil,
        n => Reply::Int(n),
    }
}

fn lag(stream: &Stream, group: &ConsumerGroup) -> Reply {
    stream.lag(group).map_or(Reply::Nil, Reply::Int)
}

/// XINFO GROUPS key
pub fn xinfo_groups(ctx: &mut Ctx<'_>, argv: &[&[u8]]) -> Reply {
    with_stream(ctx, argv, |stream| {
        Reply::Array(
            stream
                .groups()
                .iter()
                .map(|(name, group)| {
                    Reply::Map(vec![
                        (bulk("name"), Reply::Bulk(name.clone())),
                        (bulk("consumers"), count_reply(group.consumers.len())),
                        (bulk("pending"), count_reply(group.pending.len())),
                        (bulk("last-delivered-id"), id_reply(group.last_id)),
                        (bulk("entries-read"), entries_read(group)),
                        (bulk("lag"), lag(stream, group)),
                    ])
                })
                .collect(),
        )
    })
}

/// XINFO CONSUMERS key group
pub fn xinfo_consumers(ctx: &mut Ctx<'_>, argv: &[&[u8]]) -> Reply {
    let now = ctx.now_ms;
    with_stream(ctx, argv, |stream| {
        let Some(group) = stream.group(argv[3]) else {
            return super::stream_group::no_group_for_key(argv[2], argv[3]);
        };
        Reply::Array(
            group
                .consumers
                .iter()
                .map(|(name, consumer)| {
                    Reply::Map(vec![
                        (bulk("name"), Reply::Bulk(name.clone())),
                        (bulk("pending"), count_reply(consumer.pending.len())),
                        (
                            bulk("idle"),
                            Reply::Int(now.saturating_sub(consumer.seen_time) as i64),
                        ),
                    ])
                })
                .collect(),
        )
    })
}

/// XINFO HELP
pub fn xinfo_help(_ctx: &mut Ctx<'_>, _argv: &[&[u8]]) -> Reply {
    super::server::help_reply(
        "XINFO",
        &[
            "CONSUMERS <key> <groupname>",
            "    Show consumers of <groupname>.",
            "GROUPS <key>",
            "    Show the stream consumer groups.",
            "STREAM <key> [FULL [COUNT <count>]",
            "    Show information about the stream.",
        ],
    )
}
