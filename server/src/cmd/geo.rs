//! Geo commands, as Redis 7.0's geo.c answers them: GEOADD, GEOPOS,
//! GEODIST and GEOHASH, and the argument readers every geo command shares.
//! The searches (GEORADIUS, GEORADIUSBYMEMBER and their `_RO` forms,
//! GEOSEARCH, GEOSEARCHSTORE) are in `geo_search.rs`. A geo set is a sorted
//! set whose scores are 52-bit geohashes (`crate::geo`), so every
//! sorted-set command works on it too, and it moves between tally and
//! Redis as any sorted set.

use std::ops::Bound;

use super::args::is;
use super::collection::{either, read};
use super::error;
use super::propagate;
use super::Ctx;
use crate::float::{format_fixed4, format_human, string2d};
use crate::geo::geohash::{self, LAT_MAX, LAT_MIN, LONG_MAX, LONG_MIN};
use crate::geo::search::{self, Extent, ScoreRange};
use crate::resp::Reply;
use crate::store::object::ZSet;

pub(super) const COULD_NOT_DECODE: &str = "ERR could not decode requested zset member";
const UNSUPPORTED_UNIT: &str = "ERR unsupported unit provided. please use M, KM, FT, MI";

/// A double argument as Redis's getDoubleFromObjectOrReply reads it, with
/// its error (`message`, or the generic one).
fn double_arg(arg: &[u8], message: &'static str) -> Result<f64, Reply> {
    string2d(arg).ok_or_else(|| Reply::error(message))
}

/// A longitude and a latitude (Redis's extractLongLatOrReply).
pub(super) fn long_lat(longitude: &[u8], latitude: &[u8]) -> Result<(f64, f64), Reply> {
    let longitude = double_arg(longitude, error::NOT_FLOAT)?;
    let latitude = double_arg(latitude, error::NOT_FLOAT)?;
    if !(LONG_MIN..=LONG_MAX).contains(&longitude) || !(LAT_MIN..=LAT_MAX).contains(&latitude) {
        return Err(Reply::error(format!(
            "ERR invalid longitude,latitude pair {longitude:.6},{latitude:.6}"
        )));
    }
    Ok((longitude, latitude))
}

/// Metres per unit (Redis's extractUnitOrReply).
fn unit(arg: &[u8]) -> Result<f64, Reply> {
    let metres = [("m", 1.0), ("km", 1000.0), ("ft", 0.3048), ("mi", 1609.34)];
    metres
        .iter()
        .find(|(name, _)| is(arg, name))
        .map(|&(_, metres)| metres)
        .ok_or_else(|| Reply::error(UNSUPPORTED_UNIT))
}

/// `<radius> <unit>` (Redis's extractDistanceOrReply): the radius and the
/// unit's metres.
pub(super) fn radius_arg(radius: &[u8], unit_arg: &[u8]) -> Result<(f64, f64), Reply> {
    let radius = double_arg(radius, "ERR need numeric radius")?;
    if radius < 0.0 {
        return Err(Reply::error("ERR radius cannot be negative"));
    }
    Ok((radius, unit(unit_arg)?))
}

/// `<width> <height> <unit>` (Redis's extractBoxOrReply).
pub(super) fn box_arg(
    width: &[u8],
    height: &[u8],
    unit_arg: &[u8],
) -> Result<(Extent, f64), Reply> {
    let width = double_arg(width, "ERR need numeric width")?;
    let height = double_arg(height, "ERR need numeric height")?;
    if height < 0.0 || width < 0.0 {
        return Err(Reply::error("ERR height or width cannot be negative"));
    }
    Ok((Extent::Box { width, height }, unit(unit_arg)?))
}

impl ScoreRange for ZSet {
    fn visit_range(&self, min: f64, max: f64, visit: &mut dyn FnMut(&[u8], f64) -> bool) {
        let range = self.range_by_score(Bound::Included(min), Bound::Excluded(max));
        for (member, score) in range {
            if !visit(member, score) {
                return;
            }
        }
    }
}

/// A member's point, if the set has it.
pub(super) fn point_of(zset: &ZSet, member: &[u8]) -> Option<(f64, f64)> {
    zset.score(member).map(geohash::point_of_score)
}

/// GEOADD key [NX|XX] [CH] longitude latitude member [...]: ZADD with each
/// point's hash as its score, and logged as that ZADD, as Redis rewrites it.
pub fn geoadd(ctx: &mut Ctx<'_>, argv: &[&[u8]]) -> Reply {
    let (mut nx, mut xx) = (false, false);
    let mut first = 2;
    while first < argv.len() {
        let option = argv[first];
        if is(option, "nx") {
            nx = true;
        } else if is(option, "xx") {
            xx = true;
        } else if !is(option, "ch") {
            break;
        }
        first += 1;
    }
    let points = &argv[first..];
    if points.len() % 3 != 0 || (xx && nx) {
        return Reply::error(error::SYNTAX);
    }
    let mut scores = Vec::with_capacity(points.len() / 3);
    for point in points.chunks_exact(3) {
        let (longitude, latitude) = match long_lat(point[0], point[1]) {
            Ok(pair) => pair,
            Err(reply) => return reply,
        };
        // In range, as just checked: the encoding cannot fail.
        let score = geohash::score_of_point(longitude, latitude).unwrap_or_default();
        scores.push((score as u64).to_string().into_bytes());
    }
    let mut zadd: Vec<&[u8]> = Vec::with_capacity(first + scores.len() * 2);
    // Spelled as Redis's rewrite spells it, so the logs match byte for byte.
    zadd.push(b"zadd");
    zadd.extend_from_slice(&argv[1..first]);
    for (score, point) in scores.iter().zip(points.chunks_exact(3)) {
        zadd.push(score);
        zadd.push(point[2]);
    }
    let reply = super::zset::zadd(ctx, &zadd);
    if !reply.is_error() {
        propagate::effect(ctx, &zadd);
    }
    reply
}

/// GEOPOS key [member ...]: each member's position, or a null array.
pub fn geopos(ctx: &mut Ctx<'_>, argv: &[&[u8]]) -> Reply {
    let members = &argv[2..];
    let key = ctx.key(argv[1]);
    let now = ctx.now_ms;
    let mut shard = ctx.lock(key);
    let points = read::<ZSet, _>(&mut shard, key, now, |zset| {
        members
            .iter()
            .map(|m| point_of(zset, m))
            .collect::<Vec<_>>()
    });
    // Printed once the lock is released: `%.17Lf` is most of the cost.
    drop(shard);
    let points = match points {
        Ok(points) => points.unwrap_or_else(|| vec![None; members.len()]),
        Err(reply) => return reply,
    };
    Reply::Array(
        points
            .into_iter()
            .map(|point| match point {
                Some((longitude, latitude)) => Reply::Array(vec![
                    Reply::HumanDouble(format_human(longitude)),
                    Reply::HumanDouble(format_human(latitude)),
                ]),
                None => Reply::NilArray,
            })
            .collect(),
    )
}

/// GEOHASH key [member ...]: each member's eleven-character geohash, or nil.
pub fn geohash(ctx: &mut Ctx<'_>, argv: &[&[u8]]) -> Reply {
    let members = &argv[2..];
    let key = ctx.key(argv[1]);
    let now = ctx.now_ms;
    let mut shard = ctx.lock(key);
    let found = read::<ZSet, _>(&mut shard, key, now, |zset| {
        Reply::Array(
            members
                .iter()
                .map(|member| match zset.score(member) {
                    Some(score) => Reply::bulk(&geohash::standard_string(score)),
                    None => Reply::Nil,
                })
                .collect(),
        )
    });
    either(found.map(|reply| {
        reply.unwrap_or_else(|| Reply::Array(members.iter().map(|_| Reply::Nil).collect()))
    }))
}

/// GEODIST key member1 member2 [M|KM|FT|MI]: the distance, four decimals.
pub fn geodist(ctx: &mut Ctx<'_>, argv: &[&[u8]]) -> Reply {
    let metres = match argv.len() {
        4 => 1.0,
        5 => match unit(argv[4]) {
            Ok(metres) => metres,
            Err(reply) => return reply,
        },
        _ => return Reply::error(error::SYNTAX),
    };
    let key = ctx.key(argv[1]);
    let now = ctx.now_ms;
    let mut shard = ctx.lock(key);
    let found = read::<ZSet, _>(&mut shard, key, now, |zset| {
        match (point_of(zset, argv[2]), point_of(zset, argv[3])) {
            (Some(a), Some(b)) => {
                let distance = search::distance(a.0, a.1, b.0, b.1) / metres;
                Reply::Bulk(format_fixed4(distance).into_bytes())
            }
            _ => Reply::Nil,
        }
    });
    either(found.map(|reply| reply.unwrap_or(Reply::Nil)))
}
