//! SORT and SORT_RO, as Redis 7.0's sort.c answers them: the elements of a
//! list, set or sorted set ordered by their own value or by weights read
//! through a BY pattern (`weight_*`, `object_*->field`), ASC or DESC,
//! numeric or ALPHA, cut by LIMIT, with GET patterns in place of the
//! elements, replied or STOREd as a list.
//!
//! Patterns read keys that no ACL check and no shard plan saw: they are
//! refused in cluster mode and for a user who may not read every key
//! (Redis's fix for CVE-2023-41053), and a call that uses them locks every
//! shard of its database. ALPHA compares bytes, as Redis does in the C
//! locale (as a C string, so up to a NUL byte, except under STORE).

use std::cmp::Ordering;

use super::args::{int_arg, is};
use super::error;
use super::Ctx;
use crate::event_classes::class;
use crate::resp::Reply;
use crate::store::object::{List, Object};
use crate::store::{MultiLock, Store, ValueRef};

/// SORT key [BY pattern] [LIMIT offset count] [GET pattern ...] [ASC | DESC]
/// [ALPHA] [STORE destination]
pub fn sort(ctx: &mut Ctx<'_>, argv: &[&[u8]]) -> Reply {
    sort_generic(ctx, argv, false)
}

/// SORT_RO key [BY pattern] [LIMIT offset count] [GET pattern ...]
/// [ASC | DESC] [ALPHA]
pub fn sort_ro(ctx: &mut Ctx<'_>, argv: &[&[u8]]) -> Reply {
    sort_generic(ctx, argv, true)
}

/// The options of one call, parsed in Redis's order of checks.
#[derive(Default)]
struct Options<'a> {
    desc: bool,
    alpha: bool,
    limit_start: i64,
    limit_count: i64,
    store: Option<&'a [u8]>,
    by: Option<&'a [u8]>,
    /// BY a pattern without `*`: the elements keep their own order.
    dont_sort: bool,
    gets: Vec<&'a [u8]>,
}

fn parse<'a>(ctx: &Ctx<'_>, argv: &[&'a [u8]], read_only: bool) -> Result<Options<'a>, Reply> {
    let cluster = ctx.shared.cluster.get().is_some();
    let full_key_access = || {
        crate::catalog::registry()
            .lookup(argv[0])
            .is_some_and(|command| crate::acl::reads_every_key(&ctx.client.user, command, argv))
    };
    let mut options = Options {
        limit_count: -1,
        ..Options::default()
    };
    let mut j = 2;
    while j < argv.len() {
        let left = argv.len() - j - 1;
        let word = argv[j];
        if is(word, "asc") {
            options.desc = false;
        } else if is(word, "desc") {
            options.desc = true;
        } else if is(word, "alpha") {
            options.alpha = true;
        } else if is(word, "limit") && left >= 2 {
            options.limit_start = int_arg(argv[j + 1])?;
            options.limit_count = int_arg(argv[j + 2])?;
            j += 2;
        } else if !read_only && is(word, "store") && left >= 1 {
            options.store = Some(argv[j + 1]);
            j += 1;
        } else if is(word, "by") && left >= 1 {
            let pattern = argv[j + 1];
            options.by = Some(pattern);
            if !pattern.contains(&b'*') {
                options.dont_sort = true;
            } else if cluster {
                return Err(Reply::error(error::SORT_BY_CLUSTER));
            } else if !full_key_access() {
                return Err(Reply::error(error::SORT_BY_ACL));
            }
            j += 1;
        } else if is(word, "get") && left >= 1 {
            if cluster {
                return Err(Reply::error(error::SORT_GET_CLUSTER));
            }
            if !full_key_access() {
                return Err(Reply::error(error::SORT_GET_ACL));
            }
            options.gets.push(argv[j + 1]);
            j += 1;
        } else {
            return Err(Reply::error(error::SYNTAX));
        }
        j += 1;
    }
    Ok(options)
}

/// Redis's lookupKeyByPattern: `#` is the element itself; otherwise the
/// first `*` of the pattern becomes the element, and the key named so is
/// read as a string, or with `->field` after the `*` as that hash field.
/// `None` when the pattern has no `*`, or the key or field is missing or
/// of another type.
fn by_pattern(
    store: &Store,
    locked: &mut MultiLock<'_>,
    now: u64,
    pattern: &[u8],
    element: &[u8],
) -> Option<Vec<u8>> {
    if pattern == b"#" {
        return Some(element.to_vec());
    }
    let star = pattern.iter().position(|&b| b == b'*')?;
    let after = &pattern[star + 1..];
    let field = after
        .windows(2)
        .position(|w| w == b"->")
        .filter(|&at| at + 2 < after.len());
    let (middle, field) = match field {
        Some(at) => (&after[..at], Some(&after[at + 2..])),
        None => (after, None),
    };
    let mut name = Vec::with_capacity(pattern.len() + element.len());
    name.extend_from_slice(&pattern[..star]);
    name.extend_from_slice(element);
    name.extend_from_slice(middle);
    let key = store.key(&name);
    let entry = locked.shard(key).lookup_read(key, now)?;
    match (entry.value(), field) {
        (ValueRef::Obj(Object::Hash(hash)), Some(field)) => hash.get(field).map(<[u8]>::to_vec),
        (ValueRef::Int(n), None) => Some(itoa::Buffer::new().format(n).as_bytes().to_vec()),
        (ValueRef::Str(bytes), None) => Some(bytes.to_vec()),
        _ => None,
    }
}

/// One element being sorted, with what it is sorted by.
struct Item {
    element: Vec<u8>,
    score: f64,
    /// ALPHA BY: the weight's bytes, `None` when its key is missing.
    weight: Option<Vec<u8>>,
}

/// Compares as C's strcmp: up to the first NUL byte of each.
fn c_string_cmp(a: &[u8], b: &[u8]) -> Ordering {
    let end = |s: &[u8]| s.iter().position(|&b| b == 0).unwrap_or(s.len());
    a[..end(a)].cmp(&b[..end(b)])
}

fn sort_generic(ctx: &mut Ctx<'_>, argv: &[&[u8]], read_only: bool) -> Reply {
    let mut options = match parse(ctx, argv, read_only) {
        Ok(options) => options,
        Err(reply) => return reply,
    };
    let uses_patterns = options.by.is_some_and(|by| by.contains(&b'*')) || !options.gets.is_empty();
    let key = ctx.key(argv[1]);
    let store = options.store.map(|k| ctx.key(k));
    let now = ctx.now_ms;
    let in_script = ctx.client.in_script;
    let keys = &ctx.shared.store;
    let mut locked = if uses_patterns {
        ctx.lock_all(ctx.client.db)
    } else {
        ctx.lock_keys(&[Some(key), store].into_iter().flatten().collect::<Vec<_>>())
    };
    enum Kind {
        List,
        Set,
        ZSet,
    }
    // The elements in the value's own order (a sorted set's by score).
    let (kind, elements): (Kind, Vec<Vec<u8>>) = match locked.shard(key).lookup_read(key, now) {
        None => (Kind::List, Vec::new()),
        Some(entry) => match entry.value() {
            ValueRef::Obj(Object::List(list)) => {
                (Kind::List, list.iter().map(<[u8]>::to_vec).collect())
            }
            ValueRef::Obj(Object::Set(set)) => {
                (Kind::Set, set.iter().map(|m| m.to_vec()).collect())
            }
            ValueRef::Obj(Object::ZSet(zset)) => {
                (Kind::ZSet, zset.iter().map(|(m, _)| m.to_vec()).collect())
            }
            _ => return Reply::error(error::WRONGTYPE),
        },
    };
    // A set has no order of its own that a replica or a script's replay
    // would reproduce: stored or scripted, it is sorted ALPHA.
    if options.dont_sort && matches!(kind, Kind::Set) && (options.store.is_some() || in_script) {
        options.dont_sort = false;
        options.alpha = true;
        options.by = None;
    }
    let len = elements.len() as i64;
    let start0 = options.limit_start.max(0).min(len);
    let count = options.limit_count.max(-1).min(len);
    let (mut start, mut end) = (
        start0,
        if count < 0 {
            len - 1
        } else {
            start0 + count - 1
        },
    );
    if start >= len {
        start = len - 1;
        end = len - 2;
    }
    if end >= len {
        end = len - 1;
    }
    let mut items: Vec<Item> = if options.dont_sort && !matches!(kind, Kind::Set) {
        // In their own order, DESC from the other end, and only the range
        // LIMIT keeps.
        let picked: Vec<Vec<u8>> = if end >= start {
            let range = start as usize..=end as usize;
            if options.desc {
                elements.into_iter().rev().collect::<Vec<_>>()[range].to_vec()
            } else {
                elements[range].to_vec()
            }
        } else {
            Vec::new()
        };
        end -= start;
        start = 0;
        picked
    } else {
        elements
    }
    .into_iter()
    .map(|element| Item {
        element,
        score: 0.0,
        weight: None,
    })
    .collect();
    let mut not_a_number = false;
    if !options.dont_sort {
        for item in &mut items {
            let weight = match options.by {
                Some(by) => match by_pattern(keys, &mut locked, now, by, &item.element) {
                    Some(weight) => weight,
                    None => continue,
                },
                None => item.element.clone(),
            };
            if options.alpha {
                if options.by.is_some() {
                    item.weight = Some(weight);
                }
            } else {
                match crate::float::sort_weight(&weight) {
                    Some(score) => item.score = score,
                    None => not_a_number = true,
                }
            }
        }
        let (alpha, by, stored, desc) = (
            options.alpha,
            options.by.is_some(),
            options.store.is_some(),
            options.desc,
        );
        let text_cmp = |a: &[u8], b: &[u8]| if stored { a.cmp(b) } else { c_string_cmp(a, b) };
        items.sort_by(|a, b| {
            let order = if !alpha {
                a.score
                    .partial_cmp(&b.score)
                    .unwrap_or(Ordering::Equal)
                    .then_with(|| a.element.cmp(&b.element))
            } else if by {
                match (&a.weight, &b.weight) {
                    (Some(x), Some(y)) => text_cmp(x, y),
                    (x, y) => x.is_some().cmp(&y.is_some()),
                }
            } else {
                text_cmp(&a.element, &b.element)
            };
            if desc {
                order.reverse()
            } else {
                order
            }
        });
    }
    if not_a_number {
        return Reply::error(error::SORT_NOT_A_DOUBLE);
    }
    let range = if end >= start {
        &items[start as usize..=end as usize]
    } else {
        &[][..]
    };
    // What each kept element stands for in the output: itself, or its GETs.
    let mut output: Vec<Option<Vec<u8>>> = Vec::new();
    for item in range {
        if options.gets.is_empty() {
            output.push(Some(item.element.clone()));
        }
        for pattern in &options.gets {
            output.push(by_pattern(keys, &mut locked, now, pattern, &item.element));
        }
    }
    let Some(store) = store else {
        return Reply::Array(
            output
                .into_iter()
                .map(|value| value.map_or(Reply::Nil, Reply::Bulk))
                .collect(),
        );
    };
    let shard = locked.shard(store);
    if output.is_empty() {
        if shard.remove(store, now) {
            ctx.notify(class::GENERIC, "del", store.bytes);
        }
    } else {
        let mut list = List::default();
        for value in &output {
            list.push(value.as_deref().unwrap_or_default(), false);
        }
        // Replaced in place (a destination that existed is not `new`).
        shard.set_object(store, Box::new(Object::List(list)), 0, now);
        ctx.notify(class::LIST, "sortstore", store.bytes);
    }
    Reply::Int(output.len() as i64)
}
