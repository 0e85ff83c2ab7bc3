//! Geospatial indexing as Redis 7.0 does it (geo.c, geohash.c,
//! geohash_helper.c): a point is stored in a sorted set, its score the
//! 52-bit geohash of its longitude and latitude, so that the points of one
//! geohash cell are one score range. The commands (GEOADD, GEOSEARCH, ...)
//! are in `cmd::geo`; this module is their arithmetic, kept to Redis's
//! operations and their order so that positions, distances and search
//! results are Redis's to the last digit.
//!
//! - `geohash`: encoding and decoding points, cells and their neighbours;
//! - `search`: the cells that cover a circle or a box, and the members
//!   within it;
//! - `partial_sort`: Redis's partial quicksort, which orders the results
//!   of a search with COUNT.

pub mod geohash;
pub mod partial_sort;
pub mod search;
