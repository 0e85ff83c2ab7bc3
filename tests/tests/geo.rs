//! Geo commands against redis-server: GEOADD, GEOPOS, GEODIST, GEOHASH,
//! GEORADIUS, GEORADIUSBYMEMBER (and their `_RO` forms), GEOSEARCH and
//! GEOSEARCHSTORE. The same streams go to both servers and every reply must
//! match byte for byte: positions to the last of Redis's 17 decimals,
//! distances to its four, search results in its order (ties included, where
//! COUNT sorts only part of them), every error text, RESP3 doubles.

use rand::rngs::StdRng;
use rand::{RngExt, SeedableRng};
use tally_tests::{
    assert_no_mismatch, assert_script_matches_redis, compare_streams, RedisServer, TestServer,
};

/// Every command and option once, the errors in Redis's order (the wrong
/// type before the arguments, coordinates before the radius, options left
/// to right), scores no GEOADD stored, points at the poles and the date
/// line, ties in distance cut by COUNT, RESP3, and the keys COMMAND finds.
const HAND_WRITTEN: &str = r#"
    FLUSHALL
    GEOADD Sicily 13.361389 38.115556 Palermo 15.087269 37.502669 Catania
    ZSCORE Sicily Palermo
    ZSCORE Sicily Catania
    GEOPOS Sicily Palermo Catania NonExisting
    GEOPOS Sicily
    GEOPOS nokey a b
    GEOHASH Sicily Palermo Catania x
    GEOHASH nokey a
    GEODIST Sicily Palermo Catania
    GEODIST Sicily Palermo Catania km
    GEODIST Sicily Palermo Catania mi
    GEODIST Sicily Palermo Catania ft
    GEODIST Sicily Palermo Catania furlong
    GEODIST Sicily Palermo Catania km extra
    GEODIST Sicily Palermo x
    GEODIST nokey a b
    GEORADIUS Sicily 15 37 200 km WITHDIST
    GEORADIUS Sicily 15 37 200 km WITHCOORD
    GEORADIUS Sicily 15 37 200 km WITHDIST WITHCOORD WITHHASH
    GEORADIUS Sicily 15 37 200 km WITHDIST WITHCOORD WITHHASH DESC
    GEORADIUS Sicily 15 37 200 km COUNT 1
    GEORADIUS Sicily 15 37 200 km COUNT 1 ANY
    GEORADIUS Sicily 15 37 200 km ANY
    GEORADIUS Sicily 15 37 200 km COUNT 0
    GEORADIUS Sicily 15 37 200 km COUNT -3
    GEORADIUS Sicily 15 37 200 km COUNT x
    GEORADIUS Sicily 15 37 -1 km
    GEORADIUS Sicily 15 37 x km
    GEORADIUS Sicily 15 37 1 lightyear
    GEORADIUS Sicily 200 37 1 km
    GEORADIUS Sicily 15 86 1 km
    GEORADIUS Sicily abc 37 1 km
    GEORADIUS Sicily 15 37 200 km BOGUS
    GEORADIUS Sicily 15 37 200 km STORE dst
    ZRANGE dst 0 -1 WITHSCORES
    GEORADIUS Sicily 15 37 200 km STOREDIST dst2
    ZRANGE dst2 0 -1 WITHSCORES
    GEORADIUS Sicily 15 37 200 km STORE dst WITHDIST
    GEORADIUS Sicily 15 37 1 km STORE dst
    EXISTS dst
    GEORADIUS_RO Sicily 15 37 200 km STORE dst
    GEORADIUS_RO Sicily 15 37 200 km WITHDIST ASC
    GEORADIUSBYMEMBER Sicily Palermo 200 km WITHDIST
    GEORADIUSBYMEMBER Sicily nobody 200 km WITHDIST
    GEORADIUSBYMEMBER nokey nobody 200 km WITHDIST
    GEORADIUSBYMEMBER nokey nobody 200 km STORE dst
    GEORADIUSBYMEMBER_RO Sicily Palermo 100 km
    GEOSEARCH Sicily FROMLONLAT 15 37 BYRADIUS 200 km ASC
    GEOSEARCH Sicily FROMLONLAT 15 37 BYBOX 400 400 km ASC WITHCOORD WITHDIST
    GEOSEARCH Sicily FROMMEMBER Palermo BYBOX 400 400 km DESC WITHHASH
    GEOSEARCH Sicily FROMMEMBER Palermo FROMLONLAT 1 1 BYRADIUS 1 km
    GEOSEARCH Sicily FROMLONLAT 1 1 FROMMEMBER Palermo BYRADIUS 1 km
    GEOSEARCH Sicily BYRADIUS 1 km
    GEOSEARCH Sicily FROMLONLAT 1 1
    GEOSEARCH Sicily FROMLONLAT 1 1 COUNT 1
    geosearch Sicily FROMLONLAT 1 1 WITHDIST
    GEOSEARCH Sicily FROMLONLAT 1 1 BYRADIUS 1 km BYBOX 1 1 km
    GEOSEARCH Sicily FROMLONLAT 1 1 BYBOX -1 1 km
    GEOSEARCH Sicily FROMLONLAT 1 1 BYBOX x 1 km
    GEOSEARCH Sicily FROMLONLAT 1 1 BYBOX 1 y km
    GEOSEARCH Sicily FROMLONLAT 1 1 BYRADIUS 1 km STOREDIST
    GEOSEARCH Sicily FROMMEMBER nobody BYRADIUS 1 km
    GEOSEARCH nokey FROMMEMBER nobody BYRADIUS 1 km
    GEOSEARCH Sicily FROMLONLAT 15 37 BYRADIUS 200 km ANY
    GEOSEARCH Sicily FROMLONLAT 15 37 BYRADIUS 200 km COUNT 1 ANY
    GEOSEARCHSTORE dst Sicily FROMLONLAT 15 37 BYRADIUS 200 km
    ZRANGE dst 0 -1 WITHSCORES
    GEOSEARCHSTORE dst Sicily FROMLONLAT 15 37 BYRADIUS 200 km STOREDIST
    ZRANGE dst 0 -1 WITHSCORES
    GEOSEARCHSTORE dst Sicily FROMLONLAT 15 37 BYRADIUS 200 km STOREDIST WITHDIST
    GEOSEARCHSTORE dst Sicily FROMLONLAT 15 37 BYRADIUS 200 km STORE x
    GEOSEARCHSTORE dst nokey FROMLONLAT 15 37 BYRADIUS 200 km
    EXISTS dst
    GEOADD Sicily NX 13.361389 38.115556 Palermo
    GEOADD Sicily XX CH 13.4 38.1 Palermo
    GEOADD Sicily NX XX 13.361389 38.115556 Palermo
    GEOADD Sicily 13.361389 38.115556
    GEOADD Sicily CH 13.361389 38.115556 Palermo 1
    GEOADD Sicily 181 0 x
    GEOADD Sicily 0 -86 x
    GEOADD Sicily 1e400 0 x
    GEOADD Sicily GT 1 2 x
    SET str x
    GEOADD str 1 2 x
    GEOPOS str a
    GEORADIUS str 1 2 3 km
    GEORADIUS str 1 2 3 km BAD
    GEORADIUS Sicily 1 2 3
    GEOSEARCH str FROMLONLAT 1 1 BYRADIUS 1 km
    ZADD weird -1 neg 1e19 huge 0 zero 5 five
    GEOPOS weird neg huge zero five
    GEOHASH weird neg huge zero five
    GEODIST weird neg huge
    GEOADD big 0 0 a 0 0 b 0 0 c 0 0 d 0 0 e 0.0001 0 f 0.0001 0 g 0.0001 0 h 0.0002 0 i 0.0002 0 j
    GEOSEARCH big FROMLONLAT 0 0 BYRADIUS 100 km ASC
    GEOSEARCH big FROMLONLAT 0 0 BYRADIUS 100 km DESC
    GEOSEARCH big FROMLONLAT 0 0 BYRADIUS 100 km COUNT 3
    GEOSEARCH big FROMLONLAT 0 0 BYRADIUS 100 km COUNT 7 DESC
    GEOSEARCH big FROMLONLAT 0 0 BYRADIUS 100 km
    GEOADD poles 0 85 n 0 -85 s 179.9 0 e -179.9 0 w 180 85.05112878 corner
    GEOSEARCH poles FROMLONLAT 0 0 BYRADIUS 20000 km ASC WITHDIST
    GEOSEARCH poles FROMLONLAT 179.99 0 BYRADIUS 100 km ASC WITHDIST
    GEOSEARCH poles FROMLONLAT 0 84.9 BYBOX 5000 100 km ASC WITHDIST
    GEOPOS poles n s e w corner
    GEOHASH poles n s e w corner
    FLUSHALL
GEOADD Sicily 13.361389 38.115556 Palermo 15.087269 37.502669 Catania 0 0 origin 180 85.05112878 corner -180 -85.05112878 corner2
GEOSEARCH Sicily FROMLONLAT 0 0 BYRADIUS inf km ASC
GEOSEARCH Sicily FROMLONLAT 0 0 BYRADIUS -inf km ASC
GEOSEARCH Sicily FROMLONLAT 0 0 BYRADIUS nan km ASC
GEOSEARCH Sicily FROMLONLAT 0 0 BYBOX inf inf km ASC WITHDIST
GEOSEARCH Sicily FROMLONLAT 0 0 BYBOX inf 1 km ASC
GEOSEARCH Sicily FROMLONLAT 0 0 BYBOX 1e308 1e308 mi DESC
GEOSEARCH Sicily FROMLONLAT 0 0 BYRADIUS 1e-300 m
GEOSEARCH Sicily FROMLONLAT 0 0 BYRADIUS 0 m WITHDIST
GEOSEARCH Sicily FROMMEMBER origin BYRADIUS 0 m WITHDIST WITHHASH WITHCOORD
GEOSEARCH Sicily FROMLONLAT 180 85.05112878 BYRADIUS 10 km WITHDIST
GEOSEARCH Sicily FROMLONLAT -180 -85.05112878 BYRADIUS 10000 km WITHDIST ASC
GEOSEARCH Sicily FROMLONLAT 0 0 BYRADIUS 1 km COUNT 9223372036854775807
GEOSEARCH Sicily FROMLONLAT 0 0 BYRADIUS 1 km COUNT 9223372036854775808
GEOSEARCH Sicily FROMLONLAT 0 0 BYRADIUS 30000 km COUNT 2 ANY
GEOSEARCH Sicily FROMLONLAT 0 0 BYRADIUS 30000 km COUNT 2 ANY DESC
GEOSEARCH Sicily FROMLONLAT 0x10 0 BYRADIUS 30000 km
GEOSEARCH Sicily FROMLONLAT 1e-400 0 BYRADIUS 30000 km
GEORADIUS Sicily 0 0 30000 km STORE a STORE b
EXISTS a b
GEORADIUS Sicily 0 0 30000 km STORE a STOREDIST b
ZRANGE b 0 -1 WITHSCORES
GEORADIUS Sicily 0 0 30000 km STORE
GEORADIUS Sicily 0 0 30000 km STOREDIST
GEORADIUS_RO Sicily 0 0 30000 km STORE a
GEORADIUSBYMEMBER Sicily origin 30000 km STORE Sicily
ZRANGE Sicily 0 -1 WITHSCORES
GEOADD Sicily -180 -85.05112878 a 180 85.05112878 b
GEOPOS Sicily a b
GEOHASH Sicily a b
GEODIST Sicily a b
GEODIST Sicily a a
HELLO 3
    GEOPOS Sicily Palermo x
    GEORADIUS Sicily 15 37 200 km WITHDIST WITHCOORD WITHHASH
    GEODIST Sicily Palermo Catania
    GEOHASH Sicily Palermo y
    HELLO 2
    COMMAND GETKEYS GEORADIUS k 0 0 1 km STORE a
    COMMAND GETKEYS GEORADIUS k 0 0 1 km STORE a STOREDIST b
    COMMAND GETKEYS GEOSEARCHSTORE d s FROMLONLAT 0 0 BYRADIUS 1 km
    COMMAND INFO GEORADIUS GEORADIUS_RO GEOADD GEOSEARCHSTORE
"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hand_written_geo_stream_matches_redis() {
    assert_script_matches_redis(HAND_WRITTEN).await;
}

/// A coordinate pair: anywhere, or at an edge of the range.
fn point(rng: &mut StdRng) -> (String, String) {
    if rng.random_range(0..5) == 0 {
        let lon = ["-180", "180", "0", "179.999999", "-179.999999"][rng.random_range(0..5)];
        let lat = [
            "85.05112878",
            "-85.05112878",
            "0",
            "84.9",
            "-84.9",
            "66.5",
            "-80.1",
        ][rng.random_range(0..7)];
        return (lon.to_string(), lat.to_string());
    }
    let decimals = rng.random_range(0..9usize);
    let lon: f64 = rng.random_range(-180.0..180.0);
    let lat: f64 = rng.random_range(-85.05..85.05);
    (format!("{lon:.decimals$}"), format!("{lat:.decimals$}"))
}

/// Geo sets of 3 to 400 points, half of them clustered (so searches find
/// many), then searches of every kind with random options, radii from
/// nothing to past the Earth's size, and the single-point commands.
fn stream(seed: u64) -> Vec<Vec<Vec<u8>>> {
    let mut rng = StdRng::seed_from_u64(seed);
    let mut out: Vec<String> = vec!["FLUSHALL".into()];
    let keys = ["g1", "g2", "g3"];
    for key in keys {
        let n = [3, 50, 200, 400][rng.random_range(0..4)];
        let centre = (
            rng.random_range(-170.0..170.0f64),
            rng.random_range(-80.0..80.0f64),
        );
        let mut args = Vec::new();
        for i in 0..n {
            let (lon, lat) = if rng.random_range(0..2) == 0 {
                let lon = (centre.0 + rng.random_range(-1.0..1.0f64)).clamp(-180.0, 180.0);
                let lat = (centre.1 + rng.random_range(-1.0..1.0f64)).clamp(-85.05, 85.05);
                (format!("{lon:.6}"), format!("{lat:.6}"))
            } else {
                point(&mut rng)
            };
            let member = if rng.random_range(0..10) == 0 {
                rng.random_range(0..6)
            } else {
                i
            };
            args.push(format!("{lon} {lat} m{member}"));
            if args.len() == 20 || i == n - 1 {
                out.push(format!("GEOADD {key} {}", args.join(" ")));
                args.clear();
            }
        }
    }
    let units = ["m", "km", "ft", "mi", "KM"];
    for _ in 0..300 {
        let key = ["g1", "g2", "g3", "missing"][rng.random_range(0..4)];
        let mut options: Vec<String> = Vec::new();
        for with in ["WITHDIST", "WITHCOORD", "WITHHASH"] {
            if rng.random_range(0..10) < 3 {
                options.push(with.into());
            }
        }
        if rng.random_range(0..2) == 0 {
            options.push(format!(
                "COUNT {}",
                [1, 2, 3, 5, 10, 50, 1000][rng.random_range(0..7)]
            ));
            if rng.random_range(0..10) < 3 {
                options.push("ANY".into());
            }
        }
        if rng.random_range(0..10) < 6 {
            options.push(["ASC", "DESC"][rng.random_range(0..2)].into());
        }
        let options = options.join(" ");
        let (lon, lat) = point(&mut rng);
        let scale = [0.0, 1.0, 100.0, 1000.0, 5e4, 5e5, 5e6, 2e7, 1e8][rng.random_range(0..9)];
        let radius = format!("{:.2}", scale * rng.random_range(0.0..1.0f64));
        let unit = units[rng.random_range(0..units.len())];
        let member = format!("m{}", rng.random_range(0..30));
        let from = if rng.random_range(0..5) < 2 {
            format!("FROMMEMBER {member}")
        } else {
            format!("FROMLONLAT {lon} {lat}")
        };
        match rng.random_range(0..5) {
            0 => out.push(format!(
                "GEORADIUS {key} {lon} {lat} {radius} {unit} {options}"
            )),
            1 => out.push(format!(
                "GEORADIUSBYMEMBER {key} {member} {radius} {unit} {options}"
            )),
            2 => {
                let by = if rng.random_range(0..2) == 0 {
                    format!("BYRADIUS {radius} {unit}")
                } else {
                    let side = |rng: &mut StdRng| scale * 2.0 * rng.random_range(0.0..1.0f64);
                    format!("BYBOX {:.2} {:.2} {unit}", side(&mut rng), side(&mut rng))
                };
                out.push(format!("GEOSEARCH {key} {from} {by} {options}"));
            }
            3 => {
                let stored: Vec<&str> = options
                    .split(' ')
                    .filter(|o| !o.starts_with("WITH"))
                    .collect();
                let dist = if rng.random_range(0..2) == 0 {
                    "STOREDIST"
                } else {
                    ""
                };
                out.push(format!(
                    "GEOSEARCHSTORE dst {key} {from} BYRADIUS {radius} {unit} {} {dist}",
                    stored.join(" ")
                ));
                out.push("ZRANGE dst 0 -1 WITHSCORES".into());
            }
            _ => {
                let a = rng.random_range(0..30);
                let b = rng.random_range(0..30);
                out.push(format!("GEODIST {key} m{a} m{b} {unit}"));
                out.push(format!("GEOPOS {key} m{a} m{b}"));
                out.push(format!("GEOHASH {key} m{a} m{b}"));
            }
        }
    }
    out.iter().map(|line| tally_tests::words(line)).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn random_geo_streams_match_redis() {
    let Some(redis) = RedisServer::start() else {
        return;
    };
    let tally = TestServer::start_real_clock().await;
    for seed in 1..=6 {
        let mismatches = compare_streams(redis.addr, tally.addr(), &stream(seed)).await;
        if !mismatches.is_empty() {
            eprintln!("seed {seed} diverged");
        }
        assert_no_mismatch(&mismatches);
    }
}
