//! Finding the members of a geo set within a circle or a box, as Redis
//! 7.0's geo.c and geohash_helper.c do it: pick a hash step whose cells
//! are about the size of the shape, take the centre's cell and its eight
//! neighbours (less those that lie wholly outside), read each cell's score
//! range from the sorted set, and keep the points whose great-circle
//! distance puts them inside the shape.

use super::geohash::{self, Area, Hash, Neighbours, STORED};

/// The members of a geo set by score, as a search reads them (the sorted
/// set implements it where the commands are: this module knows no store).
pub trait ScoreRange {
    /// Calls `visit` with each member whose score lies in `min..max` (`min`
    /// included, `max` not), in ascending order, until `visit` returns
    /// false.
    fn visit_range(&self, min: f64, max: f64, visit: &mut dyn FnMut(&[u8], f64) -> bool);
}

/// The radius of the Earth Redis measures with (WGS-84's quadratic mean),
/// in metres.
const EARTH_RADIUS_METERS: f64 = 6372797.560856;
/// Half the Earth's circumference in Web Mercator metres: a radius past
/// it needs no finer step than 1.
const MERCATOR_MAX: f64 = 20037726.37;

fn deg_rad(degrees: f64) -> f64 {
    degrees * (std::f64::consts::PI / 180.0)
}

fn rad_deg(radians: f64) -> f64 {
    radians / (std::f64::consts::PI / 180.0)
}

/// The distance between two latitudes along a meridian, in metres.
fn lat_distance(lat1: f64, lat2: f64) -> f64 {
    EARTH_RADIUS_METERS * (deg_rad(lat2) - deg_rad(lat1)).abs()
}

/// The great-circle (haversine) distance between two points, in metres.
pub fn distance(lon1: f64, lat1: f64, lon2: f64, lat2: f64) -> f64 {
    let (lon1r, lon2r) = (deg_rad(lon1), deg_rad(lon2));
    let v = ((lon2r - lon1r) / 2.0).sin();
    // Points on one meridian: the cheaper formula, as Redis takes it.
    if v == 0.0 {
        return lat_distance(lat1, lat2);
    }
    let (lat1r, lat2r) = (deg_rad(lat1), deg_rad(lat2));
    let u = ((lat2r - lat1r) / 2.0).sin();
    let a = u * u + lat1r.cos() * lat2r.cos() * v * v;
    2.0 * EARTH_RADIUS_METERS * a.sqrt().asin()
}

/// What a search covers, around its centre.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Extent {
    /// A circle of this radius.
    Radius(f64),
    /// An axis-aligned box of this width and height.
    Box {
        /// East to west.
        width: f64,
        /// North to south.
        height: f64,
    },
}

/// A search area: its centre (longitude, latitude), its extent in the
/// caller's unit, and how many metres that unit is.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Shape {
    /// (longitude, latitude).
    pub centre: (f64, f64),
    /// The radius or the box, in `unit`s.
    pub extent: Extent,
    /// Metres per unit (1 for m, 1000 for km, 0.3048 for ft, 1609.34 for mi).
    pub unit: f64,
}

/// A member found in a shape.
#[derive(Debug, Clone, PartialEq)]
pub struct Found {
    /// The member.
    pub member: Vec<u8>,
    /// Its score (the 52-bit hash).
    pub score: f64,
    /// The centre of its cell: (longitude, latitude).
    pub point: (f64, f64),
    /// Its distance from the shape's centre, in metres.
    pub distance: f64,
}

/// The hash step whose cells suit a search of `range_meters` around
/// latitude `lat` (Redis's geohashEstimateStepsByRadius).
fn steps_for_radius(range_meters: f64, lat: f64) -> u8 {
    if range_meters == 0.0 {
        return 26;
    }
    let mut range = range_meters;
    let mut step: i32 = 1;
    while range < MERCATOR_MAX {
        range *= 2.0;
        step += 1;
    }
    // Make sure the range is included in most of the base cases.
    step -= 2;
    // Cells narrow towards the poles: a coarser step keeps them wide enough.
    if !(-66.0..=66.0).contains(&lat) {
        step -= 1;
        if !(-80.0..=80.0).contains(&lat) {
            step -= 1;
        }
    }
    step.clamp(1, 26) as u8
}

/// The shape's bounding box: [min longitude, min latitude, max longitude,
/// max latitude] (Redis's geohashBoundingBox).
fn bounding_box(shape: &Shape) -> [f64; 4] {
    let (longitude, latitude) = shape.centre;
    let (half_height, half_width) = match shape.extent {
        Extent::Radius(radius) => (radius, radius),
        Extent::Box { width, height } => (height / 2.0, width / 2.0),
    };
    let height = shape.unit * half_height;
    let width = shape.unit * half_width;
    let lat_delta = rad_deg(height / EARTH_RADIUS_METERS);
    let long_delta_top = rad_deg(width / EARTH_RADIUS_METERS / deg_rad(latitude + lat_delta).cos());
    let long_delta_bottom =
        rad_deg(width / EARTH_RADIUS_METERS / deg_rad(latitude - lat_delta).cos());
    // The box is widest on the side nearer the equator.
    let long_delta = if latitude < 0.0 {
        long_delta_bottom
    } else {
        long_delta_top
    };
    [
        longitude - long_delta,
        latitude - lat_delta,
        longitude + long_delta,
        latitude + lat_delta,
    ]
}

/// The cells that cover a shape: the centre's and those of its neighbours
/// that reach into the bounding box (Redis's
/// geohashCalculateAreasByShapeWGS84).
struct Covering {
    hash: Hash,
    neighbours: Neighbours,
}

fn covering(shape: &Shape) -> Covering {
    let [min_lon, min_lat, max_lon, max_lat] = bounding_box(shape);
    let (longitude, latitude) = shape.centre;
    // A box's radius is the distance from its centre to a corner.
    let radius = match shape.extent {
        Extent::Radius(radius) => radius,
        Extent::Box { width, height } => {
            ((width / 2.0) * (width / 2.0) + (height / 2.0) * (height / 2.0)).sqrt()
        }
    } * shape.unit;
    let mut steps = steps_for_radius(radius, latitude);
    let cell = |steps: u8| {
        // The centre is a valid point and steps is 1..=26: both succeed.
        let hash = geohash::encode(STORED, longitude, latitude, steps).unwrap_or_default();
        let area = geohash::decode(STORED, hash);
        (hash, geohash::neighbours(&hash), area)
    };
    let (mut hash, mut neighbours, mut area) = cell(steps);
    // Near a cell's edge the estimated step can be too fine for the
    // neighbours to reach the whole box: one step coarser then.
    let reaches = |hash: Hash| geohash::decode(STORED, hash);
    let decrease = match (
        reaches(neighbours.north),
        reaches(neighbours.south),
        reaches(neighbours.east),
        reaches(neighbours.west),
    ) {
        (Some(north), Some(south), Some(east), Some(west)) => {
            north.latitude.max < max_lat
                || south.latitude.min > min_lat
                || east.longitude.max < max_lon
                || west.longitude.min > min_lon
        }
        _ => false,
    };
    if steps > 1 && decrease {
        steps -= 1;
        (hash, neighbours, area) = cell(steps);
    }
    // Leave out the neighbours wholly outside the bounding box.
    if let (
        true,
        Some(Area {
            longitude: lon,
            latitude: lat,
            ..
        }),
    ) = (steps >= 2, area)
    {
        let n = &mut neighbours;
        if lat.min < min_lat {
            (n.south, n.south_west, n.south_east) = (Hash::NONE, Hash::NONE, Hash::NONE);
        }
        if lat.max > max_lat {
            (n.north, n.north_east, n.north_west) = (Hash::NONE, Hash::NONE, Hash::NONE);
        }
        if lon.min < min_lon {
            (n.west, n.south_west, n.north_west) = (Hash::NONE, Hash::NONE, Hash::NONE);
        }
        if lon.max > max_lon {
            (n.east, n.south_east, n.north_east) = (Hash::NONE, Hash::NONE, Hash::NONE);
        }
    }
    Covering { hash, neighbours }
}

/// The point of `score` and its distance from the shape's centre, if it
/// lies within the shape (Redis's geoWithinShape).
fn within(shape: &Shape, score: f64) -> Option<((f64, f64), f64)> {
    let point = geohash::point_of_score(score);
    let (x1, y1) = shape.centre;
    let (x2, y2) = point;
    let distance_from_centre = match shape.extent {
        Extent::Radius(radius) => {
            let d = distance(x1, y1, x2, y2);
            if d > radius * shape.unit {
                return None;
            }
            d
        }
        Extent::Box { width, height } => {
            // The latitude test is the cheaper one, so it goes first.
            if lat_distance(y2, y1) > height * shape.unit / 2.0 {
                return None;
            }
            if distance(x2, y2, x1, y2) > width * shape.unit / 2.0 {
                return None;
            }
            distance(x1, y1, x2, y2)
        }
    };
    Some((point, distance_from_centre))
}

/// The cells a search of `shape` reads, in Redis's order: the centre's,
/// then north, south, east, west, north-east, north-west, south-east,
/// south-west, less those left out and those that repeat the cell read
/// before them (a huge radius makes neighbours the same cell; Redis
/// compares with the last cell read, unless that was the centre's).
fn cells_to_read(shape: &Shape) -> Vec<Hash> {
    let Covering { hash, neighbours } = covering(shape);
    let n = neighbours;
    let cells = [
        hash,
        n.north,
        n.south,
        n.east,
        n.west,
        n.north_east,
        n.north_west,
        n.south_east,
        n.south_west,
    ];
    let mut read = Vec::with_capacity(cells.len());
    let mut last_processed = 0;
    for (i, cell) in cells.iter().enumerate() {
        if cell.is_none() || (last_processed != 0 && *cell == cells[last_processed]) {
            continue;
        }
        read.push(*cell);
        last_processed = i;
    }
    read
}

/// The scores from a cell's 52-bit prefix (included) to the next prefix
/// (excluded): the members the cell holds.
fn score_range(cell: Hash) -> (f64, f64) {
    let next = Hash {
        bits: cell.bits + 1,
        step: cell.step,
    };
    (cell.align52() as f64, next.align52() as f64)
}

/// Every member of `zset` within `shape`, in the order Redis finds them
/// (cell by cell, by score within a cell). With `limit` (COUNT ... ANY)
/// the search stops once it has that many.
pub fn members_within(zset: &impl ScoreRange, shape: &Shape, limit: Option<usize>) -> Vec<Found> {
    let mut found = Vec::new();
    for cell in cells_to_read(shape) {
        if limit.is_some_and(|limit| found.len() >= limit) {
            break;
        }
        let (min, max) = score_range(cell);
        zset.visit_range(min, max, &mut |member, score| {
            if let Some((point, distance)) = within(shape, score) {
                found.push(Found {
                    member: member.to_vec(),
                    score,
                    point,
                    distance,
                });
            }
            limit.is_none_or(|limit| found.len() < limit)
        });
    }
    found
}

/// The members a search of `shape` reads, copied out of the set: what
/// [`members_within`] without a limit needs, so that the distances can be
/// worked out after the set's lock is released (a search of one hot geo
/// set from several connections then holds the lock for the copy only).
#[derive(Debug, Default)]
pub struct Candidates {
    /// The members' bytes, back to back.
    bytes: Vec<u8>,
    /// Each member's score and where its bytes end.
    entries: Vec<(f64, usize)>,
}

impl Candidates {
    /// Reads the cells covering `shape` from `zset`.
    pub fn read(zset: &impl ScoreRange, shape: &Shape) -> Candidates {
        let mut candidates = Candidates::default();
        for cell in cells_to_read(shape) {
            let (min, max) = score_range(cell);
            zset.visit_range(min, max, &mut |member, score| {
                candidates.bytes.extend_from_slice(member);
                candidates.entries.push((score, candidates.bytes.len()));
                true
            });
        }
        candidates
    }

    /// The candidates within `shape`, in the order they were read: what
    /// [`members_within`] finds, without a limit.
    pub fn within(&self, shape: &Shape) -> Vec<Found> {
        let mut found = Vec::new();
        let mut start = 0;
        for &(score, end) in &self.entries {
            if let Some((point, distance)) = within(shape, score) {
                found.push(Found {
                    member: self.bytes[start..end].to_vec(),
                    score,
                    point,
                    distance,
                });
            }
            start = end;
        }
        found
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Members sorted by score, as a sorted set keeps them.
    struct Sorted(Vec<(Vec<u8>, f64)>);

    impl ScoreRange for Sorted {
        fn visit_range(&self, min: f64, max: f64, visit: &mut dyn FnMut(&[u8], f64) -> bool) {
            for (member, score) in &self.0 {
                if *score >= min && *score < max && !visit(member, *score) {
                    return;
                }
            }
        }
    }

    #[test]
    fn distances_are_redis_haversine() {
        // GEODIST Sicily Palermo Catania on redis-server 7.0: 166274.1516.
        let palermo = geohash::point_of_score(3479099956230698.0);
        let catania = geohash::point_of_score(3479447370796909.0);
        let d = distance(palermo.0, palermo.1, catania.0, catania.1);
        assert_eq!(format!("{d:.4}"), "166274.1516");
        // One meridian: the latitude formula.
        assert_eq!(distance(10.0, 0.0, 10.0, 1.0), lat_distance(0.0, 1.0));
    }

    #[test]
    fn the_step_follows_the_radius_and_the_latitude() {
        assert_eq!(steps_for_radius(0.0, 0.0), 26);
        assert_eq!(steps_for_radius(1.0, 0.0), 24);
        assert_eq!(steps_for_radius(1.0, 70.0), 23);
        assert_eq!(steps_for_radius(1.0, -85.0), 22);
        assert_eq!(steps_for_radius(1e9, 0.0), 1);
    }

    #[test]
    fn a_search_finds_the_points_inside_and_not_those_outside() {
        let mut members: Vec<(Vec<u8>, f64)> = [
            ("palermo", 13.361389, 38.115556),
            ("catania", 15.087269, 37.502669),
            ("rome", 12.496366, 41.902782),
        ]
        .iter()
        .map(|&(name, lon, lat)| {
            let score = geohash::score_of_point(lon, lat).unwrap();
            (name.as_bytes().to_vec(), score)
        })
        .collect();
        members.sort_by(|a, b| a.1.total_cmp(&b.1));
        let zset = Sorted(members);
        let shape = Shape {
            centre: (15.0, 37.0),
            extent: Extent::Radius(200.0),
            unit: 1000.0,
        };
        let mut names: Vec<Vec<u8>> = members_within(&zset, &shape, None)
            .into_iter()
            .map(|found| found.member)
            .collect();
        names.sort();
        assert_eq!(names, vec![b"catania".to_vec(), b"palermo".to_vec()]);
        let boxed = Shape {
            extent: Extent::Box {
                width: 100.0,
                height: 200.0,
            },
            ..shape
        };
        let found = members_within(&zset, &boxed, None);
        assert_eq!(found.len(), 1);
        assert_eq!(found[0].member, b"catania");
        // Read first and measured after, the same members in the same order.
        for shape in [shape, boxed] {
            let read = Candidates::read(&zset, &shape);
            assert_eq!(read.within(&shape), members_within(&zset, &shape, None));
        }
    }
}
