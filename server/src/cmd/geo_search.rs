//! The geo searches, as Redis 7.0's georadiusGeneric answers them:
//! GEORADIUS and GEORADIUSBYMEMBER (and their `_RO` forms), GEOSEARCH and
//! GEOSEARCHSTORE. The source is looked up first and the arguments read in
//! Redis's order, under the lock; a search that neither stores nor stops
//! early copies what it reads and measures it after the lock is released.

use super::args::{int_arg, is};
use super::collection::read;
use super::error;
use super::geo::{box_arg, long_lat, point_of, radius_arg, COULD_NOT_DECODE};
use super::Ctx;
use crate::catalog::georadius_key_positions;
use crate::event_classes::class;
use crate::float::{format_fixed4, format_human};
use crate::geo::partial_sort::partial_sort;
use crate::geo::search::{self, Extent, Found, Shape};
use crate::resp::Reply;
use crate::store::object::ZSet;
use crate::store::Object;

/// Which search command runs (Redis's georadiusGeneric flags).
#[derive(Clone, Copy, PartialEq, Eq)]
enum Kind {
    /// GEORADIUS: around a longitude and latitude.
    Coordinates { store_allowed: bool },
    /// GEORADIUSBYMEMBER: around a member.
    Member { store_allowed: bool },
    /// GEOSEARCH, or GEOSEARCHSTORE with `store`.
    GeoSearch { store: bool },
}

/// GEORADIUS key longitude latitude radius M|KM|FT|MI [options]
pub fn georadius(ctx: &mut Ctx<'_>, argv: &[&[u8]]) -> Reply {
    search_generic(
        ctx,
        argv,
        1,
        Kind::Coordinates {
            store_allowed: true,
        },
    )
}

/// GEORADIUS_RO: GEORADIUS without STORE.
pub fn georadius_ro(ctx: &mut Ctx<'_>, argv: &[&[u8]]) -> Reply {
    search_generic(
        ctx,
        argv,
        1,
        Kind::Coordinates {
            store_allowed: false,
        },
    )
}

/// GEORADIUSBYMEMBER key member radius M|KM|FT|MI [options]
pub fn georadiusbymember(ctx: &mut Ctx<'_>, argv: &[&[u8]]) -> Reply {
    search_generic(
        ctx,
        argv,
        1,
        Kind::Member {
            store_allowed: true,
        },
    )
}

/// GEORADIUSBYMEMBER_RO: GEORADIUSBYMEMBER without STORE.
pub fn georadiusbymember_ro(ctx: &mut Ctx<'_>, argv: &[&[u8]]) -> Reply {
    search_generic(
        ctx,
        argv,
        1,
        Kind::Member {
            store_allowed: false,
        },
    )
}

/// GEOSEARCH key FROMMEMBER member|FROMLONLAT longitude latitude
/// BYRADIUS radius unit|BYBOX width height unit [options]
pub fn geosearch(ctx: &mut Ctx<'_>, argv: &[&[u8]]) -> Reply {
    search_generic(ctx, argv, 1, Kind::GeoSearch { store: false })
}

/// GEOSEARCHSTORE destination source ... [STOREDIST]
pub fn geosearchstore(ctx: &mut Ctx<'_>, argv: &[&[u8]]) -> Reply {
    search_generic(ctx, argv, 2, Kind::GeoSearch { store: true })
}

/// What a search returns or stores, once its arguments are read.
#[derive(Default)]
struct Options {
    with_dist: bool,
    with_hash: bool,
    with_coord: bool,
    /// `Some(true)` ascending, `Some(false)` descending.
    ascending: Option<bool>,
    any: bool,
    /// COUNT (0: none).
    count: usize,
    /// The destination's argument index (STORE, STOREDIST, GEOSEARCHSTORE).
    store: Option<usize>,
    store_dist: bool,
}

/// Redis's georadiusGeneric: the source is looked up first (a wrong type
/// is the first error), then the arguments are read in Redis's order, with
/// its errors, then the search runs.
fn search_generic(ctx: &mut Ctx<'_>, argv: &[&[u8]], source_index: usize, kind: Kind) -> Reply {
    let now = ctx.now_ms;
    let source = ctx.key(argv[source_index]);
    // The destination is known for sure only once the arguments are read,
    // but both keys are locked before: it is the last of the keys the
    // catalog declares (routing, ACL and a transaction's locks saw them),
    // as Redis's georadiusGetKeys finds it.
    let store_at = match kind {
        Kind::GeoSearch { store: true } => Some(1),
        Kind::Coordinates {
            store_allowed: true,
        }
        | Kind::Member {
            store_allowed: true,
        } => georadius_key_positions(argv)
            .get(1..)
            .and_then(|s| s.last().copied()),
        _ => None,
    };
    let keys: Vec<_> = std::iter::once(source)
        .chain(store_at.map(|i| ctx.key(argv[i])))
        .collect();
    let mut locked = ctx.lock_keys(&keys);
    let read_source = read::<ZSet, _>(locked.shard(source), source, now, |zset| {
        let parsed = parse(argv, kind, Some(zset))?;
        let Some(shape) = parsed.shape else {
            return Ok((parsed, Points::Found(Vec::new())));
        };
        // A search that stores, or stops at COUNT (ANY), reads and measures
        // under the lock; any other copies what it reads and measures once
        // the lock is released.
        let points = if parsed.options.store.is_some() || parsed.options.any {
            let limit = parsed.options.any.then_some(parsed.options.count);
            Points::Found(search::members_within(zset, &shape, limit))
        } else {
            Points::Read(search::Candidates::read(zset, &shape))
        };
        Ok((parsed, points))
    });
    let read_source = match read_source {
        Ok(Some(read)) => read,
        Ok(None) => parse(argv, kind, None).map(|parsed| (parsed, Points::Found(Vec::new()))),
        Err(reply) => return reply,
    };
    let (
        Parsed {
            mut options,
            shape,
            unit,
        },
        points,
    ) = match read_source {
        Ok(read) => read,
        Err(reply) => return reply,
    };
    if options.store.is_none() {
        drop(locked);
        let found = order(points.within(shape.as_ref()), &mut options);
        return reply_found(found, &options, unit);
    }
    let found = order(points.within(shape.as_ref()), &mut options);
    let Some(store_index) = options.store else {
        return reply_found(found, &options, unit);
    };
    if Some(store_index) != store_at {
        // The reading above and `store_argument` take the same argument
        // after STORE; a difference would write a key not locked.
        return Reply::error("ERR internal error: STORE's key is not the one locked");
    }
    let dst = ctx.key(argv[store_index]);
    let shard = locked.shard(dst);
    if found.is_empty() {
        if shard.remove(dst, now) {
            ctx.notify(class::GENERIC, "del", argv[store_index]);
        }
        return Reply::Int(0);
    }
    let limits = ctx.shared.encodings.get();
    let mut stored = ZSet::default();
    for point in &found {
        let score = if options.store_dist {
            point.distance / unit
        } else {
            point.score
        };
        stored.insert(&point.member, score, &limits);
    }
    shard.set_object(dst, Box::new(Object::ZSet(stored)), 0, now);
    let event = match kind {
        Kind::GeoSearch { .. } => "geosearchstore",
        _ => "georadiusstore",
    };
    ctx.notify(class::ZSET, event, argv[store_index]);
    Reply::Int(found.len() as i64)
}

/// A search's arguments, read.
struct Parsed {
    options: Options,
    /// What to search (`None`: the source does not exist).
    shape: Option<Shape>,
    /// The unit's metres.
    unit: f64,
}

/// The members a search met: measured already, or read to be measured.
enum Points {
    Found(Vec<Found>),
    Read(search::Candidates),
}

impl Points {
    /// The members within the shape, in the order they were met.
    fn within(self, shape: Option<&Shape>) -> Vec<Found> {
        match (self, shape) {
            (Points::Found(found), _) => found,
            (Points::Read(candidates), Some(shape)) => candidates.within(shape),
            (Points::Read(_), None) => Vec::new(),
        }
    }
}

/// Reads the arguments against the source (`None`: it does not exist), in
/// Redis's order and with its errors.
fn parse(argv: &[&[u8]], kind: Kind, zset: Option<&ZSet>) -> Result<Parsed, Reply> {
    let mut centre = None;
    let mut extent = None;
    let mut unit_metres = 1.0;
    let base = match kind {
        Kind::Coordinates { .. } => {
            centre = Some(long_lat(argv[2], argv[3])?);
            let (radius, metres) = radius_arg(argv[4], argv[5])?;
            (extent, unit_metres) = (Some(Extent::Radius(radius)), metres);
            6
        }
        Kind::Member { .. } => {
            if let Some(zset) = zset {
                centre =
                    Some(point_of(zset, argv[2]).ok_or_else(|| Reply::error(COULD_NOT_DECODE))?);
                let (radius, metres) = radius_arg(argv[3], argv[4])?;
                (extent, unit_metres) = (Some(Extent::Radius(radius)), metres);
            }
            5
        }
        Kind::GeoSearch { store: false } => 2,
        Kind::GeoSearch { store: true } => 3,
    };
    let geosearch = matches!(kind, Kind::GeoSearch { .. });
    let store_allowed = matches!(
        kind,
        Kind::Coordinates {
            store_allowed: true
        } | Kind::Member {
            store_allowed: true
        }
    );
    let mut options = Options {
        store: matches!(kind, Kind::GeoSearch { store: true }).then_some(1),
        ..Options::default()
    };
    let (mut from_member, mut from_lonlat, mut by_radius, mut by_box) =
        (false, false, false, false);
    let rest = &argv[base..];
    let mut i = 0;
    while i < rest.len() {
        let arg = rest[i];
        let left = rest.len() - i - 1;
        if is(arg, "withdist") {
            options.with_dist = true;
        } else if is(arg, "withhash") {
            options.with_hash = true;
        } else if is(arg, "withcoord") {
            options.with_coord = true;
        } else if is(arg, "any") {
            options.any = true;
        } else if is(arg, "asc") {
            options.ascending = Some(true);
        } else if is(arg, "desc") {
            options.ascending = Some(false);
        } else if is(arg, "count") && left >= 1 {
            let count = int_arg(rest[i + 1])?;
            if count <= 0 {
                return Err(Reply::error("ERR COUNT must be > 0"));
            }
            options.count = usize::try_from(count).unwrap_or(usize::MAX);
            i += 1;
        } else if (is(arg, "store") || is(arg, "storedist")) && left >= 1 && store_allowed {
            options.store = Some(base + i + 1);
            options.store_dist = is(arg, "storedist");
            i += 1;
        } else if is(arg, "storedist") && matches!(kind, Kind::GeoSearch { store: true }) {
            options.store_dist = true;
        } else if is(arg, "frommember") && left >= 1 && geosearch && !from_lonlat {
            // Without a source, reading goes on and the search finds nothing.
            if let Some(zset) = zset {
                centre = Some(
                    point_of(zset, rest[i + 1]).ok_or_else(|| Reply::error(COULD_NOT_DECODE))?,
                );
            }
            from_member = true;
            i += 1;
        } else if is(arg, "fromlonlat") && left >= 2 && geosearch && !from_member {
            centre = Some(long_lat(rest[i + 1], rest[i + 2])?);
            from_lonlat = true;
            i += 2;
        } else if is(arg, "byradius") && left >= 2 && geosearch && !by_box {
            let (radius, metres) = radius_arg(rest[i + 1], rest[i + 2])?;
            (extent, unit_metres) = (Some(Extent::Radius(radius)), metres);
            by_radius = true;
            i += 2;
        } else if is(arg, "bybox") && left >= 3 && geosearch && !by_radius {
            let (boxed, metres) = box_arg(rest[i + 1], rest[i + 2], rest[i + 3])?;
            (extent, unit_metres) = (Some(boxed), metres);
            by_box = true;
            i += 3;
        } else {
            return Err(Reply::error(error::SYNTAX));
        }
        i += 1;
    }
    if options.store.is_some() && (options.with_dist || options.with_hash || options.with_coord) {
        let what = if matches!(kind, Kind::GeoSearch { store: true }) {
            "GEOSEARCHSTORE"
        } else {
            "STORE option in GEORADIUS"
        };
        return Err(Reply::error(format!(
            "ERR {what} is not compatible with WITHDIST, WITHHASH and WITHCOORD options"
        )));
    }
    let name = String::from_utf8_lossy(argv[0]);
    if geosearch && !(from_member || from_lonlat) {
        return Err(Reply::error(format!(
            "ERR exactly one of FROMMEMBER or FROMLONLAT can be specified for {name}"
        )));
    }
    if geosearch && !(by_radius || by_box) {
        return Err(Reply::error(format!(
            "ERR exactly one of BYRADIUS and BYBOX can be specified for {name}"
        )));
    }
    if options.any && options.count == 0 {
        return Err(Reply::error("ERR the ANY argument requires COUNT argument"));
    }
    let shape = match (zset, centre, extent) {
        (Some(_), Some(centre), Some(extent)) => Some(Shape {
            centre,
            extent,
            unit: unit_metres,
        }),
        _ => None,
    };
    Ok(Parsed {
        options,
        shape,
        unit: unit_metres,
    })
}

/// The members found, in reply order and cut to COUNT: COUNT means the
/// nearest ones, so ascending unless told otherwise (but ANY takes
/// whichever it met first).
fn order(mut found: Vec<Found>, options: &mut Options) -> Vec<Found> {
    if options.count != 0 && options.ascending.is_none() && !options.any {
        options.ascending = Some(true);
    }
    let returned = if options.count == 0 {
        found.len()
    } else {
        found.len().min(options.count)
    };
    if let Some(ascending) = options.ascending {
        let by_distance = |a: &Found, b: &Found| {
            let order = a.distance.total_cmp(&b.distance);
            if ascending {
                order
            } else {
                order.reverse()
            }
        };
        if returned == found.len() {
            // glibc's qsort of this size is a merge sort: stable.
            found.sort_by(by_distance);
        } else if returned > 0 {
            partial_sort(&mut found, by_distance, 0, returned - 1);
        }
    }
    found.truncate(returned);
    found
}

/// The reply of a search without STORE: members, or per member an array
/// of the member and what WITHDIST, WITHHASH and WITHCOORD asked for.
fn reply_found(found: Vec<Found>, options: &Options, unit: f64) -> Reply {
    let nested = options.with_dist || options.with_hash || options.with_coord;
    Reply::Array(
        found
            .into_iter()
            .map(|point| {
                if !nested {
                    return Reply::Bulk(point.member);
                }
                let mut fields = vec![Reply::Bulk(point.member)];
                if options.with_dist {
                    fields.push(Reply::Bulk(
                        format_fixed4(point.distance / unit).into_bytes(),
                    ));
                }
                if options.with_hash {
                    fields.push(Reply::Int(point.score as i64));
                }
                if options.with_coord {
                    fields.push(Reply::Array(vec![
                        Reply::HumanDouble(format_human(point.point.0)),
                        Reply::HumanDouble(format_human(point.point.1)),
                    ]));
                }
                Reply::Array(fields)
            })
            .collect(),
    )
}
