//! Stream commands without consumer groups, as Redis 7.0's t_stream.c
//! answers them: XADD, XLEN, XRANGE, XREVRANGE, XDEL, XTRIM and XSETID.
//! The entries live in `store::object::stream`, in Redis's own node
//! layout, so that what a trim removes and what a file holds are Redis's.
//!
//! XADD and XTRIM are logged as Redis propagates them: with the ID the
//! entry got, and an approximate trim (`~`) as the exact one it amounted
//! to, so that a replica or a replay ends with the same entries.

use super::args::{int_arg, is};
use super::collection::{either, read};
use super::error;
use super::propagate;
use super::Ctx;
use crate::event_classes::class;
use crate::resp::{BulkList, Reply};
use crate::store::object::{
    AppendError, Element, EntryView, Stream, StreamEntry, StreamId, Trim, TrimTo,
};
use crate::store::Kind;

const INVALID_ID: &str = "ERR Invalid stream ID specified as stream command argument";
const BOTH_STRATEGIES: &str =
    "ERR syntax error, MAXLEN and MINID options at the same time are not compatible";

/// An ID argument (streamGenericParseIDOrReply): `-` and `+` unless
/// `strict`, `<ms>-<seq>`, `<ms>` (the sequence is `missing_seq`), and,
/// where `star` allows it, `<ms>-*` (XADD: the next sequence). Returns the
/// ID and whether its sequence was given.
pub(super) fn parse_id(
    arg: &[u8],
    strict: bool,
    missing_seq: u64,
    star: bool,
) -> Result<(StreamId, bool), Reply> {
    let invalid = || Reply::error(INVALID_ID);
    if arg.len() > 127 {
        return Err(invalid());
    }
    // Redis reads the argument as a C string: it ends at a NUL.
    let text = arg.split(|&b| b == 0).next().unwrap_or_default();
    match text {
        b"-" | b"+" if strict => Err(invalid()),
        b"-" => Ok((StreamId::MIN, true)),
        b"+" => Ok((StreamId::MAX, true)),
        _ => {
            let (ms, seq) = match text.iter().position(|&b| b == b'-') {
                Some(dash) => (&text[..dash], Some(&text[dash + 1..])),
                None => (text, None),
            };
            let ms = string_to_u64(ms).ok_or_else(invalid)?;
            match seq {
                Some(b"*") if star => Ok((StreamId::new(ms, 0), false)),
                Some(seq) => Ok((
                    StreamId::new(ms, string_to_u64(seq).ok_or_else(invalid)?),
                    true,
                )),
                None => Ok((StreamId::new(ms, missing_seq), true)),
            }
        }
    }
}

/// Redis's string2ull: a canonical integer that is not negative, or what
/// C's strtoull takes whole (leading blanks, a sign, leading zeros; a
/// minus negates), refusing overflow.
fn string_to_u64(text: &[u8]) -> Option<u64> {
    if let Some(value) = crate::number::parse_i64(text) {
        return u64::try_from(value).ok();
    }
    let blank = |b: &u8| matches!(b, b' ' | b'\t' | b'\n' | b'\x0b' | b'\x0c' | b'\r');
    let start = text.iter().position(|b| !blank(b))?;
    let mut rest = &text[start..];
    let negative = match rest.first() {
        Some(b'-') => {
            rest = &rest[1..];
            true
        }
        Some(b'+') => {
            rest = &rest[1..];
            false
        }
        _ => false,
    };
    if rest.is_empty() || !rest.iter().all(u8::is_ascii_digit) {
        return None;
    }
    let mut value: u64 = 0;
    for &digit in rest {
        value = value
            .checked_mul(10)?
            .checked_add(u64::from(digit - b'0'))?;
    }
    Some(if negative {
        value.wrapping_neg()
    } else {
        value
    })
}

/// A trim as XADD or XTRIM asked for it, and where its count or ID is.
struct TrimArgs {
    trim: Option<Trim>,
    /// The index of the MAXLEN count or MINID id, for the log's rewrite.
    arg_index: usize,
}

/// What XADD's and XTRIM's options say.
struct Options {
    trim: TrimArgs,
    /// NOMKSTREAM.
    no_mkstream: bool,
    /// Where XADD's ID is (where its options stopped).
    id_index: usize,
    /// XADD's ID, and whether its sequence was given; `None` for `*`
    /// (and for XTRIM).
    id: Option<(StreamId, bool)>,
}

/// XADD's and XTRIM's options (streamParseAddOrTrimArgsOrReply).
fn parse_options(ctx: &Ctx<'_>, argv: &[&[u8]], xadd: bool) -> Result<Options, Reply> {
    let mut to: Option<TrimTo> = None;
    let mut approx = false;
    let mut arg_index = 0;
    let mut limit: Option<i64> = None;
    let mut no_mkstream = false;
    let mut id = None;
    let mut i = 2;
    while i < argv.len() {
        let more = argv.len() - 1 - i;
        let option = argv[i];
        if xadd && option == b"*" {
            break;
        } else if (is(option, "maxlen") || is(option, "minid")) && more > 0 {
            if to.is_some() {
                return Err(Reply::error(BOTH_STRATEGIES));
            }
            approx = false;
            let next = argv[i + 1];
            if more >= 2 && next == b"~" {
                approx = true;
                i += 1;
            } else if more >= 2 && next == b"=" {
                i += 1;
            }
            let value = argv[i + 1];
            to = Some(if is(option, "maxlen") {
                let maxlen = int_arg(value)?;
                if maxlen < 0 {
                    return Err(Reply::error("ERR The MAXLEN argument must be >= 0."));
                }
                TrimTo::MaxLen(maxlen as u64)
            } else {
                TrimTo::MinId(parse_id(value, true, 0, false)?.0)
            });
            i += 1;
            arg_index = i;
        } else if is(option, "limit") && more > 0 {
            let value = int_arg(argv[i + 1])?;
            if value < 0 {
                return Err(Reply::error("ERR The LIMIT argument must be >= 0."));
            }
            limit = Some(value);
            i += 1;
        } else if xadd && is(option, "nomkstream") {
            no_mkstream = true;
        } else if xadd {
            id = Some(parse_id(option, true, 0, true)?);
            break;
        } else {
            return Err(Reply::error(error::SYNTAX));
        }
        i += 1;
    }
    if limit.is_some_and(|l| l != 0) && to.is_none() {
        return Err(Reply::error(
            "ERR syntax error, LIMIT cannot be used without specifying a trimming strategy",
        ));
    }
    if !xadd && to.is_none() {
        return Err(Reply::error(
            "ERR syntax error, XTRIM must be called with a trimming strategy",
        ));
    }
    // A master's stream or the append-only file replays a trim exactly as
    // it was logged: no work limit, and LIMIT beside an exact trim (the
    // rewrite of an approximate one) accepted.
    let limit = if ctx.must_obey() {
        0
    } else if let Some(limit) = limit {
        if !approx {
            return Err(Reply::error(
                "ERR syntax error, LIMIT cannot be used without the special ~ option",
            ));
        }
        limit as u64
    } else if approx {
        // At most a hundred nodes' worth, as Redis bounds the work.
        let entries = ctx.shared.encodings.get().stream_node_max_entries as u64;
        match entries.saturating_mul(100) {
            0 => 10_000,
            n => n.min(1_000_000),
        }
    } else {
        0
    };
    let trim = to.map(|to| Trim { to, approx, limit });
    Ok(Options {
        trim: TrimArgs { trim, arg_index },
        no_mkstream,
        id_index: i,
        id,
    })
}

/// The logged form of an approximate trim: `=` and what the trim left
/// (the length, or the first entry's ID, deleted or not).
fn rewrite_trim(change: &mut [Vec<u8>], stream: &Stream, trim: &Trim, arg_index: usize) {
    change[arg_index - 1] = b"=".to_vec();
    change[arg_index] = match trim.to {
        TrimTo::MaxLen(_) => stream.len().to_string().into_bytes(),
        TrimTo::MinId(_) => stream.edge_id(true, false).to_bytes(),
    };
}

/// XADD key [NOMKSTREAM] [MAXLEN|MINID [=|~] threshold [LIMIT count]]
/// *|id field value [field value ...]: the new entry's ID.
pub fn xadd(ctx: &mut Ctx<'_>, argv: &[&[u8]]) -> Reply {
    let Options {
        trim,
        no_mkstream,
        id_index,
        id,
    } = match parse_options(ctx, argv, true) {
        Ok(parsed) => parsed,
        Err(reply) => return reply,
    };
    // The options may have taken every argument, leaving no ID.
    let pairs = argv.get(id_index + 1..).unwrap_or_default();
    if pairs.len() < 2 || pairs.len() % 2 == 1 {
        return Reply::error("ERR wrong number of arguments for 'xadd' command");
    }
    if id == Some((StreamId::MIN, true)) {
        return Reply::error("ERR The ID specified in XADD must be greater than 0-0");
    }
    let limits = ctx.shared.encodings.get().stream_nodes();
    let key = ctx.key(argv[1]);
    let now = ctx.now_ms;
    let mut shard = ctx.lock(key);
    let make = || (!no_mkstream).then(|| Box::new(Stream::empty()));
    let Some(mut entry) = shard.get_mut_or_create(key, now, make) else {
        return Reply::Nil;
    };
    let Some(stream) = entry.object_mut().and_then(Stream::of_mut) else {
        entry.leave_unmodified();
        return Reply::error(error::WRONGTYPE);
    };
    if stream.last_id() == StreamId::MAX {
        entry.leave_unmodified();
        return Reply::error(
            "ERR The stream has exhausted the last possible ID, unable to add more items",
        );
    }
    let added = stream
        .next_id(id.map(|(id, _)| id), id.is_some_and(|(_, seq)| seq), now)
        .and_then(|next| stream.append(next, pairs, limits));
    let added = match added {
        Ok(added) => added,
        Err(failure) => {
            entry.leave_unmodified();
            return Reply::error(match failure {
                AppendError::NotGreater => {
                    "ERR The ID specified in XADD is equal or smaller than the target stream top item"
                }
                AppendError::TooLarge => "ERR Elements are too large to be stored",
            });
        }
    };
    let trimmed = trim.trim.map(|t| stream.trim(t));
    let mut change: Vec<Vec<u8>> = argv.iter().map(|a| a.to_vec()).collect();
    if let Some(t) = trim.trim.filter(|t| t.approx) {
        rewrite_trim(&mut change, stream, &t, trim.arg_index);
    }
    if !id.is_some_and(|(_, seq_given)| seq_given) {
        change[id_index] = added.to_bytes();
    }
    drop(entry);
    ctx.notify(class::STREAM, "xadd", argv[1]);
    if trimmed.is_some_and(|n| n > 0) {
        ctx.notify(class::STREAM, "xtrim", argv[1]);
    }
    drop(shard);
    propagate::effect_owned(ctx, change);
    Reply::Bulk(added.to_bytes())
}

/// XTRIM key MAXLEN|MINID [=|~] threshold [LIMIT count]: entries removed.
pub fn xtrim(ctx: &mut Ctx<'_>, argv: &[&[u8]]) -> Reply {
    let trim = match parse_options(ctx, argv, false) {
        Ok(options) => options.trim,
        Err(reply) => return reply,
    };
    let Some(t) = trim.trim else {
        return Reply::error(error::SYNTAX);
    };
    let key = ctx.key(argv[1]);
    let now = ctx.now_ms;
    let mut shard = ctx.lock(key);
    let Some(mut entry) = shard.get_mut_or_create(key, now, || None) else {
        return Reply::Int(0);
    };
    let Some(stream) = entry.object_mut().and_then(Stream::of_mut) else {
        entry.leave_unmodified();
        return Reply::error(error::WRONGTYPE);
    };
    let deleted = stream.trim(t);
    if deleted == 0 {
        entry.leave_unmodified();
        return Reply::Int(0);
    }
    let mut change: Vec<Vec<u8>> = argv.iter().map(|a| a.to_vec()).collect();
    if t.approx {
        rewrite_trim(&mut change, stream, &t, trim.arg_index);
    }
    drop(entry);
    ctx.notify(class::STREAM, "xtrim", argv[1]);
    drop(shard);
    propagate::effect_owned(ctx, change);
    Reply::Int(deleted as i64)
}

/// XDEL key id [id ...]: how many of the entries were there and are gone.
pub fn xdel(ctx: &mut Ctx<'_>, argv: &[&[u8]]) -> Reply {
    let key = ctx.key(argv[1]);
    let now = ctx.now_ms;
    let mut shard = ctx.lock(key);
    let Some(mut entry) = shard.get_mut_or_create(key, now, || None) else {
        return Reply::Int(0);
    };
    let Some(stream) = entry.object_mut().and_then(Stream::of_mut) else {
        entry.leave_unmodified();
        return Reply::error(error::WRONGTYPE);
    };
    let mut ids = Vec::with_capacity(argv.len() - 2);
    for arg in &argv[2..] {
        match parse_id(arg, true, 0, false) {
            Ok((id, _)) => ids.push(id),
            Err(reply) => {
                entry.leave_unmodified();
                return reply;
            }
        }
    }
    let deleted: Vec<StreamId> = ids.into_iter().filter(|id| stream.delete(*id)).collect();
    stream.note_deleted(&deleted);
    if deleted.is_empty() {
        entry.leave_unmodified();
        return Reply::Int(0);
    }
    drop(entry);
    ctx.notify(class::STREAM, "xdel", argv[1]);
    Reply::Int(deleted.len() as i64)
}

/// XSETID key last-id [ENTRIESADDED entries-added] [MAXDELETEDID
/// max-deleted-id]: sets the stream's last ID and counters.
pub fn xsetid(ctx: &mut Ctx<'_>, argv: &[&[u8]]) -> Reply {
    let id = match parse_id(argv[2], true, 0, false) {
        Ok((id, _)) => id,
        Err(reply) => return reply,
    };
    let mut entries_added: Option<u64> = None;
    let mut max_deleted = StreamId::MIN;
    let mut i = 3;
    while i < argv.len() {
        let more = argv.len() - 1 - i;
        if is(argv[i], "entriesadded") && more > 0 {
            match int_arg(argv[i + 1]) {
                Ok(n) if n < 0 => return Reply::error("ERR entries_added must be positive"),
                Ok(n) => entries_added = Some(n as u64),
                Err(reply) => return reply,
            }
        } else if is(argv[i], "maxdeletedid") && more > 0 {
            match parse_id(argv[i + 1], true, 0, false) {
                Ok((given, _)) if id < given => {
                    return Reply::error(
                        "ERR The ID specified in XSETID is smaller than the provided max_deleted_entry_id",
                    )
                }
                Ok((given, _)) => max_deleted = given,
                Err(reply) => return reply,
            }
        } else {
            return Reply::error(error::SYNTAX);
        }
        i += 2;
    }
    let key = ctx.key(argv[1]);
    let now = ctx.now_ms;
    let mut shard = ctx.lock(key);
    let Some(mut entry) = shard.get_mut_or_create(key, now, || None) else {
        return Reply::error(error::NO_SUCH_KEY);
    };
    let Some(stream) = entry.object_mut().and_then(Stream::of_mut) else {
        entry.leave_unmodified();
        return Reply::error(error::WRONGTYPE);
    };
    if !stream.is_empty() {
        if id < stream.edge_id(false, true) {
            entry.leave_unmodified();
            return Reply::error(
                "ERR The ID specified in XSETID is smaller than the target stream top item",
            );
        }
        if entries_added.is_some_and(|added| stream.len() > added) {
            entry.leave_unmodified();
            return Reply::error(
                "ERR The entries_added specified in XSETID is smaller than the target stream length",
            );
        }
    }
    let max_deleted = (max_deleted != StreamId::MIN).then_some(max_deleted);
    stream.set_id(id, entries_added, max_deleted);
    drop(entry);
    ctx.notify(class::STREAM, "xsetid", argv[1]);
    Reply::Ok
}

/// XLEN key: the live entries, 0 for a missing key.
pub fn xlen(ctx: &mut Ctx<'_>, argv: &[&[u8]]) -> Reply {
    let key = ctx.key(argv[1]);
    let now = ctx.now_ms;
    let mut shard = ctx.lock(key);
    let found = read::<Stream, _>(&mut shard, key, now, |s| Reply::Int(s.len() as i64));
    either(found.map(|reply| reply.unwrap_or(Reply::Int(0))))
}

/// XRANGE key start end [COUNT count].
pub fn xrange(ctx: &mut Ctx<'_>, argv: &[&[u8]]) -> Reply {
    range(ctx, argv, false)
}

/// XREVRANGE key end start [COUNT count].
pub fn xrevrange(ctx: &mut Ctx<'_>, argv: &[&[u8]]) -> Reply {
    range(ctx, argv, true)
}

/// An interval's end: `(` makes it open, when more than `(` is given.
pub(super) fn interval_id(arg: &[u8], missing_seq: u64) -> Result<(StreamId, bool), Reply> {
    if arg.len() > 1 && arg[0] == b'(' {
        Ok((parse_id(&arg[1..], true, missing_seq, false)?.0, true))
    } else {
        Ok((parse_id(arg, false, missing_seq, false)?.0, false))
    }
}

/// XRANGE and XREVRANGE (xrangeGenericCommand).
fn range(ctx: &mut Ctx<'_>, argv: &[&[u8]], rev: bool) -> Reply {
    let (start_arg, end_arg) = if rev {
        (argv[3], argv[2])
    } else {
        (argv[2], argv[3])
    };
    let (mut start, start_open) = match interval_id(start_arg, 0) {
        Ok(parsed) => parsed,
        Err(reply) => return reply,
    };
    if start_open {
        match start.next() {
            Some(next) => start = next,
            None => return Reply::error("ERR invalid start ID for the interval"),
        }
    }
    let (mut end, end_open) = match interval_id(end_arg, u64::MAX) {
        Ok(parsed) => parsed,
        Err(reply) => return reply,
    };
    if end_open {
        match end.prev() {
            Some(prev) => end = prev,
            None => return Reply::error("ERR invalid end ID for the interval"),
        }
    }
    let mut count: Option<i64> = None;
    let mut i = 4;
    while i < argv.len() {
        if is(argv[i], "count") && i + 1 < argv.len() {
            match int_arg(argv[i + 1]) {
                Ok(n) => count = Some(n.max(0)),
                Err(reply) => return reply,
            }
            i += 2;
        } else {
            return Reply::error(error::SYNTAX);
        }
    }
    let key = ctx.key(argv[1]);
    let now = ctx.now_ms;
    let mut shard = ctx.lock(key);
    let found = read::<Stream, _>(&mut shard, key, now, |stream| match count {
        Some(0) => Reply::NilArray,
        Some(n) => range_reply(stream, start, end, rev, n as usize),
        None => range_reply(stream, start, end, rev, 0),
    });
    drop(shard);
    match found {
        Err(reply) => reply,
        Ok(None) => Reply::Array(Vec::new()),
        Ok(Some(reply)) => reply,
    }
}

/// One entry as Redis replies with it: its ID and a flat array of its
/// fields and values.
pub(super) fn entry_reply(entry: StreamEntry) -> Reply {
    let fields = BulkList::collect(
        entry
            .fields
            .iter()
            .flat_map(|(field, value)| [field.as_slice(), value.as_slice()]),
    );
    Reply::Array(vec![Reply::Bulk(entry.id.to_bytes()), Reply::Bulks(fields)])
}

/// One entry as Redis replies with it, its fields and values read straight
/// from its node into the reply's buffer.
pub(super) fn view_reply(entry: &EntryView<'_, '_>) -> Reply {
    // Room for two short strings a field (a header, a CRLF and some dozen
    // bytes each), so that a typical event's fields need no second
    // allocation.
    let mut fields = BulkList::with_capacity(entry.field_count() * 48);
    let mut push = |element: Element<'_>| match element {
        Element::Int(n) => fields.push_int(n),
        Element::Str(bytes) => fields.push(bytes),
    };
    entry.for_each_field(|field, value| {
        push(field);
        push(value);
    });
    Reply::Array(vec![
        Reply::Bulk(entry.id().to_bytes()),
        Reply::Bulks(fields),
    ])
}

/// The live entries from `start` to `end` (in reverse with `rev`), at
/// most `count` (0: all), as Redis replies with them.
pub(super) fn range_reply(
    stream: &Stream,
    start: StreamId,
    end: StreamId,
    rev: bool,
    count: usize,
) -> Reply {
    let mut replies = Vec::new();
    stream.visit_range(start, end, rev, count, |entry| {
        replies.push(view_reply(entry));
    });
    Reply::Array(replies)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_parse_as_redis_reads_them() {
        let id = |arg: &[u8]| parse_id(arg, true, 7, true).ok();
        assert_eq!(id(b"5-3"), Some((StreamId::new(5, 3), true)));
        assert_eq!(id(b"5"), Some((StreamId::new(5, 7), true)));
        assert_eq!(id(b"5-*"), Some((StreamId::new(5, 0), false)));
        assert_eq!(id(b"-"), None, "strict");
        assert_eq!(
            parse_id(b"+", false, 0, false).ok(),
            Some((StreamId::MAX, true))
        );
        // What strtoull takes: leading zeros, a plus, blanks; a minus that
        // negates, except a canonical negative, which string2ll refuses.
        assert_eq!(id(b"007-1"), Some((StreamId::new(7, 1), true)));
        assert_eq!(id(b" +7"), Some((StreamId::new(7, 7), true)));
        assert_eq!(id(b"1--0"), Some((StreamId::new(1, 0), true)));
        assert_eq!(id(b"1--5"), None);
        assert_eq!(
            id(b"18446744073709551615-18446744073709551615"),
            Some((StreamId::MAX, true))
        );
        assert_eq!(id(b"18446744073709551616"), None, "overflow");
        assert_eq!(id(b"5-x"), None);
        assert_eq!(id(b"5-"), None);
        assert_eq!(id(b"5-*"), Some((StreamId::new(5, 0), false)));
        assert_eq!(
            parse_id(b"5-*", true, 0, false).ok(),
            None,
            "no * outside XADD"
        );
        // A C string ends at its NUL.
        assert_eq!(id(b"9\0-1"), Some((StreamId::new(9, 7), true)));
    }
}
