//! Geohashes as Redis 7.0 computes them (geohash.c): a point's longitude
//! and latitude, each scaled to a fixed-point fraction of its range, with
//! their bits interleaved (latitude in the even positions, longitude in the
//! odd). A 26-step hash is 52 bits, which a double holds exactly: that is
//! the score a GEOADD stores.
//!
//! Latitudes are kept within ±85.05112878°, the limits of the Web Mercator
//! projection Redis encodes for, so the stored hash is not a standard
//! geohash; GEOHASH re-encodes with ±90° for its string.

/// Steps (bits per coordinate) of a stored hash: 26 × 2 = 52 bits.
pub const STEP_MAX: u8 = 26;
/// The longitudes a point may have.
pub const LONG_MIN: f64 = -180.0;
/// See [`LONG_MIN`].
pub const LONG_MAX: f64 = 180.0;
/// The latitudes a point may have (Web Mercator's limits).
pub const LAT_MIN: f64 = -85.05112878;
/// See [`LAT_MIN`].
pub const LAT_MAX: f64 = 85.05112878;

/// A closed interval of one coordinate.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Range {
    /// The lower end.
    pub min: f64,
    /// The upper end.
    pub max: f64,
}

/// The ranges a stored hash encodes: Redis's (longitude, latitude).
pub const STORED: (Range, Range) = (
    Range {
        min: LONG_MIN,
        max: LONG_MAX,
    },
    Range {
        min: LAT_MIN,
        max: LAT_MAX,
    },
);

/// The ranges of a standard geohash, which GEOHASH prints.
pub const STANDARD: (Range, Range) = (
    Range {
        min: -180.0,
        max: 180.0,
    },
    Range {
        min: -90.0,
        max: 90.0,
    },
);

/// A hash of `step` bits per coordinate. `step == 0` with no bits is the
/// empty hash, which names no area (a neighbour left out of a search).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Hash {
    /// The interleaved bits, in the low `2 * step` positions.
    pub bits: u64,
    /// Bits per coordinate.
    pub step: u8,
}

impl Hash {
    /// The empty hash.
    pub const NONE: Hash = Hash { bits: 0, step: 0 };

    /// True for [`Hash::NONE`].
    pub fn is_none(&self) -> bool {
        self.bits == 0 && self.step == 0
    }

    /// The hash shifted to 52 bits: the smallest score of the points it
    /// contains.
    pub fn align52(&self) -> u64 {
        self.bits << (52 - u32::from(self.step) * 2)
    }
}

/// The cell a hash names.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Area {
    /// The hash itself.
    pub hash: Hash,
    /// The cell's longitudes.
    pub longitude: Range,
    /// The cell's latitudes.
    pub latitude: Range,
}

/// Spreads the low 32 bits of `x` and `y` over the even and odd bits.
fn interleave64(xlo: u32, ylo: u32) -> u64 {
    const B: [u64; 5] = [
        0x5555555555555555,
        0x3333333333333333,
        0x0F0F0F0F0F0F0F0F,
        0x00FF00FF00FF00FF,
        0x0000FFFF0000FFFF,
    ];
    const S: [u32; 5] = [1, 2, 4, 8, 16];
    let (mut x, mut y) = (u64::from(xlo), u64::from(ylo));
    for i in (0..5).rev() {
        x = (x | (x << S[i])) & B[i];
        y = (y | (y << S[i])) & B[i];
    }
    x | (y << 1)
}

/// The inverse of [`interleave64`]: the even bits in the low half, the odd
/// bits in the high half.
fn deinterleave64(interleaved: u64) -> u64 {
    const B: [u64; 6] = [
        0x5555555555555555,
        0x3333333333333333,
        0x0F0F0F0F0F0F0F0F,
        0x00FF00FF00FF00FF,
        0x0000FFFF0000FFFF,
        0x00000000FFFFFFFF,
    ];
    const S: [u32; 6] = [0, 1, 2, 4, 8, 16];
    let (mut x, mut y) = (interleaved, interleaved >> 1);
    for i in 0..6 {
        x = (x | (x >> S[i])) & B[i];
        y = (y | (y >> S[i])) & B[i];
    }
    x | (y << 32)
}

/// The hash of a point at `step` bits per coordinate within `ranges`
/// (longitude, latitude); `None` for a point outside them or outside the
/// stored ranges (Redis's geohashEncode).
pub fn encode(ranges: (Range, Range), longitude: f64, latitude: f64, step: u8) -> Option<Hash> {
    let (long_range, lat_range) = ranges;
    if step == 0 || step > 32 {
        return None;
    }
    if !(LONG_MIN..=LONG_MAX).contains(&longitude) || !(LAT_MIN..=LAT_MAX).contains(&latitude) {
        return None;
    }
    if latitude < lat_range.min
        || latitude > lat_range.max
        || longitude < long_range.min
        || longitude > long_range.max
    {
        return None;
    }
    let scale = (1u64 << step) as f64;
    let lat_offset = (latitude - lat_range.min) / (lat_range.max - lat_range.min) * scale;
    let long_offset = (longitude - long_range.min) / (long_range.max - long_range.min) * scale;
    // C converts the offsets to uint32_t: truncation (they are in range).
    Some(Hash {
        bits: interleave64(lat_offset as u32, long_offset as u32),
        step,
    })
}

/// The cell of `hash` within `ranges` (Redis's geohashDecode); `None` for
/// the empty hash.
pub fn decode(ranges: (Range, Range), hash: Hash) -> Option<Area> {
    if hash.is_none() {
        return None;
    }
    let (long_range, lat_range) = ranges;
    let separated = deinterleave64(hash.bits);
    let lat_scale = lat_range.max - lat_range.min;
    let long_scale = long_range.max - long_range.min;
    let ilato = separated as u32;
    let ilono = (separated >> 32) as u32;
    let cells = (1u64 << hash.step) as f64;
    Some(Area {
        hash,
        latitude: Range {
            min: lat_range.min + (f64::from(ilato) / cells) * lat_scale,
            max: lat_range.min + ((f64::from(ilato) + 1.0) / cells) * lat_scale,
        },
        longitude: Range {
            min: long_range.min + (f64::from(ilono) / cells) * long_scale,
            max: long_range.min + ((f64::from(ilono) + 1.0) / cells) * long_scale,
        },
    })
}

/// The centre of a cell, clamped to the stored ranges: (longitude,
/// latitude).
pub fn centre(area: &Area) -> (f64, f64) {
    let longitude = ((area.longitude.min + area.longitude.max) / 2.0).clamp(LONG_MIN, LONG_MAX);
    let latitude = ((area.latitude.min + area.latitude.max) / 2.0).clamp(LAT_MIN, LAT_MAX);
    (longitude, latitude)
}

/// The point a sorted-set score stands for (Redis's decodeGeohash): the
/// centre of its 52-bit cell. Any score decodes; one no GEOADD stored
/// gives whatever point its bits spell.
pub fn point_of_score(score: f64) -> (f64, f64) {
    let hash = Hash {
        bits: c_double_to_u64(score),
        step: STEP_MAX,
    };
    // A hash of 26 steps is never the empty one.
    decode(STORED, hash).map_or((0.0, 0.0), |area| centre(&area))
}

/// The score GEOADD stores for a point already checked to be in range.
pub fn score_of_point(longitude: f64, latitude: f64) -> Option<f64> {
    encode(STORED, longitude, latitude, STEP_MAX).map(|hash| hash.align52() as f64)
}

/// `(uint64_t)score` as x86-64 code compiled by GCC computes it, for any
/// score a sorted set may hold: below 2^63 a signed truncation (so -1.0
/// becomes all ones), above it the truncation of `score - 2^63` with the
/// top bit flipped; a value no 64-bit integer holds becomes the "integer
/// indefinite" 2^63 (0 above 2^64). Rust's `as u64` saturates instead.
fn c_double_to_u64(score: f64) -> u64 {
    const TWO_63: f64 = 9_223_372_036_854_775_808.0;
    const INDEFINITE: u64 = 1 << 63;
    let signed = |value: f64| {
        if (-TWO_63..TWO_63).contains(&value) {
            value as i64 as u64
        } else {
            INDEFINITE
        }
    };
    if score.is_nan() || score < TWO_63 {
        if score.is_nan() {
            INDEFINITE
        } else {
            signed(score)
        }
    } else {
        signed(score - TWO_63) ^ INDEFINITE
    }
}

/// The bits of an interleaved hash that hold the longitude (odd) and the
/// latitude (even).
const LONGITUDE_BITS: u64 = 0xaaaaaaaaaaaaaaaa;
const LATITUDE_BITS: u64 = 0x5555555555555555;

/// Moves a hash one cell along one coordinate, wrapping around: `moving`
/// names that coordinate's bits, `d > 0` east or north, `d < 0` west or
/// south (Redis's geohash_move_x and geohash_move_y, one function). The
/// coordinate's bits are stepped as one number by filling the gaps between
/// them with ones (the other coordinate's positions) so the carry or borrow
/// runs across.
fn step(hash: &mut Hash, d: i8, moving: u64) {
    if d == 0 {
        return;
    }
    let still = !moving;
    let shift = 64 - u32::from(hash.step) * 2;
    let mut along = hash.bits & moving;
    let across = hash.bits & still;
    let gaps = still >> shift;
    if d > 0 {
        along = along.wrapping_add(gaps + 1);
    } else {
        along |= gaps;
        along = along.wrapping_sub(gaps + 1);
    }
    along &= moving >> shift;
    hash.bits = along | across;
}

/// A cell and its eight neighbours.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Neighbours {
    /// North.
    pub north: Hash,
    /// South.
    pub south: Hash,
    /// East.
    pub east: Hash,
    /// West.
    pub west: Hash,
    /// North-east.
    pub north_east: Hash,
    /// North-west.
    pub north_west: Hash,
    /// South-east.
    pub south_east: Hash,
    /// South-west.
    pub south_west: Hash,
}

/// The eight cells around `hash`, of its step (Redis's geohashNeighbors).
pub fn neighbours(hash: &Hash) -> Neighbours {
    let moved = |dx: i8, dy: i8| {
        let mut moved = *hash;
        step(&mut moved, dx, LONGITUDE_BITS);
        step(&mut moved, dy, LATITUDE_BITS);
        moved
    };
    Neighbours {
        east: moved(1, 0),
        west: moved(-1, 0),
        south: moved(0, -1),
        north: moved(0, 1),
        north_west: moved(-1, 1),
        north_east: moved(1, 1),
        south_east: moved(1, -1),
        south_west: moved(-1, -1),
    }
}

/// The eleven-character standard geohash of a stored score (GEOHASH):
/// its point re-encoded with ±90° latitudes, 52 bits in ten characters
/// and a final `0`, as Redis prints it.
pub fn standard_string(score: f64) -> [u8; 11] {
    const ALPHABET: &[u8; 32] = b"0123456789bcdefghjkmnpqrstuvwxyz";
    let (longitude, latitude) = point_of_score(score);
    // A decoded point is within the stored ranges, which the standard
    // ones contain; Redis prints the zero hash if encoding ever failed.
    let hash = encode(STANDARD, longitude, latitude, STEP_MAX).unwrap_or_default();
    let mut out = [b'0'; 11];
    for (i, byte) in out.iter_mut().enumerate().take(10) {
        let index = (hash.bits >> (52 - (i + 1) * 5)) & 0x1f;
        *byte = ALPHABET[index as usize];
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn interleaving_round_trips() {
        for (x, y) in [
            (0u32, 0u32),
            (1, 0),
            (0, 1),
            (0x3ff_ffff, 0x155_5555),
            (u32::MAX, 7),
        ] {
            let separated = deinterleave64(interleave64(x, y));
            assert_eq!((separated as u32, (separated >> 32) as u32), (x, y));
        }
    }

    #[test]
    fn palermo_has_the_score_and_position_redis_gives() {
        // `GEOADD Sicily 13.361389 38.115556 Palermo` on redis-server 7.0:
        // ZSCORE 3479099956230698, GEOPOS 13.36138933897018433
        // 38.11555639549629859, GEOHASH sqc8b49rny0.
        let score = score_of_point(13.361389, 38.115556).unwrap();
        assert_eq!(score, 3479099956230698.0);
        let (longitude, latitude) = point_of_score(score);
        assert_eq!(format!("{longitude:.17}"), "13.36138933897018433");
        assert_eq!(format!("{latitude:.17}"), "38.11555639549629859");
        assert_eq!(&standard_string(score), b"sqc8b49rny0");
    }

    #[test]
    fn points_outside_the_mercator_range_have_no_hash() {
        assert_eq!(score_of_point(0.0, 85.06), None);
        assert_eq!(score_of_point(180.1, 0.0), None);
        assert!(score_of_point(180.0, LAT_MAX).is_some());
    }

    #[test]
    fn scores_no_geoadd_stored_decode_as_the_c_cast_reads_them() {
        assert_eq!(c_double_to_u64(-1.0), u64::MAX);
        assert_eq!(c_double_to_u64(1e19), 10_000_000_000_000_000_000);
        assert_eq!(c_double_to_u64(f64::INFINITY), 0);
        assert_eq!(c_double_to_u64(-f64::INFINITY), 1 << 63);
        assert_eq!(c_double_to_u64(42.9), 42);
    }

    #[test]
    fn neighbours_wrap_around_the_cell_grid() {
        let hash = encode(STORED, 0.0, 0.0, 1).unwrap();
        let around = neighbours(&hash);
        // At one step the grid is 2 × 2: east and west are the same cell.
        assert_eq!(around.east, around.west);
        assert_ne!(around.east, hash);
    }
}
