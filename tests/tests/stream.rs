//! Stream commands against redis-server: XADD, XLEN, XRANGE, XREVRANGE,
//! XDEL, XTRIM, XSETID and XREAD (its blocking form is in blocking.rs). The same streams go to both servers and every
//! reply must match byte for byte, DUMP's included: a DUMP payload holds
//! the stream's nodes as they are, so equal payloads mean the entries sit
//! in the same nodes, packed the same way, as Redis's.

use rand::rngs::StdRng;
use rand::{RngExt, SeedableRng};
use tally_tests::{
    assert_no_mismatch, assert_script_matches_redis, compare_streams, RedisServer, TestServer,
};

/// Every command and option once, the errors in Redis's order (options
/// left to right, arity, 0-0, the wrong type, the stream's last ID), node
/// limits small enough that an approximate trim finds whole nodes, and
/// the IDs at the edges of the range.
const HAND_WRITTEN: &str = r#"
    FLUSHALL
    CONFIG SET stream-node-max-entries 3
    XADD s 1-1 name alice n 1
    XADD s 1-* name bob n 2
    XADD s 1 name carol n 3
    XADD s 2 name dave n 4
    XADD s 2-* other field
    XADD s 3-0 name erin n -700 extra 100000
    XADD s 0-0 a b
    XADD s 0-* a b
    XADD s 1-5 a b
    XADD s 3-0 a b
    XADD s 3-1 a
    XADD s 3-1
    XADD s - a b
    XADD s + a b
    XADD s 3-x a b
    XADD s NOMKSTREAM 4-0 a b
    XADD missing NOMKSTREAM 1-0 a b
    EXISTS missing
    XADD s MAXLEN 5 LIMIT 2 5-0 a b
    XADD s MAXLEN ~ 5 LIMIT -1 5-0 a b
    XADD s MAXLEN -1 5-0 a b
    XADD s MAXLEN x 5-0 a b
    XADD s MAXLEN 1 MINID 1 5-0 a b
    XADD s LIMIT 2 5-0 a b
    XADD s MAXLEN
    XADD s NOMKSTREAM MAXLEN 5
    XADD s MAXLEN ~ 5 LIMIT 2
    XADD s NOMKSTREAM NOMKSTREAM NOMKSTREAM
    XTRIM s MAXLEN ~ 5 LIMIT
    XLEN s
    XRANGE s - +
    XREVRANGE s + -
    XRANGE s 1 1
    XRANGE s (1-1 (2-1
    XRANGE s 1-2 +
    XRANGE s - + COUNT 2
    XRANGE s - + COUNT 0
    XRANGE s - + COUNT -5
    XRANGE s - + COUNT x
    XRANGE s - + COUNT
    XRANGE s - + LIMIT 2
    XRANGE s (- +
    XRANGE s ( +
    XRANGE s (18446744073709551615-18446744073709551615 +
    XRANGE s - (0-0
    XRANGE s 3 1
    XREVRANGE s (3-0 - COUNT 2
    XREVRANGE s 2 2
    XRANGE missing - +
    XREVRANGE missing + -
    XLEN missing
    DUMP s
    XDEL s 2-0 2-1 9-9
    XDEL s bad
    XDEL s -
    XDEL missing bad
    XLEN s
    XRANGE s - +
    DUMP s
    XADD s 4-0 name frank n 6
    XADD s 5-0 name grace n 7
    XADD s 6-0 name heidi n 8
    XADD s MAXLEN ~ 4 7-0 name ivan n 9
    XLEN s
    DUMP s
    XTRIM s MAXLEN ~ 2
    XTRIM s MAXLEN = 3
    XRANGE s - +
    XTRIM s MINID 6-0
    XTRIM s MINID ~ 7
    XTRIM s MAXLEN 100
    XTRIM s
    XTRIM s MAXLEN
    XTRIM s NOMKSTREAM MAXLEN 1
    XTRIM s MAXLEN ~ 1 LIMIT 1
    XTRIM s MAXLEN 1 LIMIT 1
    XTRIM missing MAXLEN 0
    XTRIM s MINID -
    XLEN s
    DUMP s
    XSETID s 1-0
    XSETID s 9-0
    XSETID s 9-0 ENTRIESADDED 0
    XSETID s 9-0 ENTRIESADDED -1
    XSETID s 9-0 ENTRIESADDED 50 MAXDELETEDID 9-1
    XSETID s 9-0 ENTRIESADDED 50 MAXDELETEDID 8-0
    XSETID s 9-0 BOGUS
    XSETID s 9-0 ENTRIESADDED
    XSETID s +
    XSETID missing 1-0
    XADD s 9-0 a b
    XADD s 9-* a b
    DUMP s
    XTRIM s MAXLEN 0
    XLEN s
    EXISTS s
    DUMP s
    XADD s 10-0 a b
    XADD s 11-18446744073709551615 a b
    XADD s 11-* a b
    XADD s 11 a b
    XADD s 12-* a b
    XSETID s 18446744073709551615-18446744073709551615
    XADD s 18446744073709551615-* a b
    XADD s * a b
    SET str x
    XADD str 1-0 a b
    XLEN str
    XRANGE str - +
    XDEL str 1-0
    XTRIM str MAXLEN 0
    XSETID str 1-0
    TYPE s
    OBJECT ENCODING s
    CONFIG GET stream-node-max-entries
    CONFIG GET stream-node-max-bytes
    CONFIG SET stream-node-max-bytes -1
    CONFIG SET stream-node-max-entries x
    CONFIG SET stream-node-max-entries 0
    CONFIG SET stream-node-max-bytes 60
    DEL s
    XADD s 1-0 f 1
    XADD s 2-0 f 2
    XADD s 3-0 f 3
    XADD s 4-0 f 4 a-longer-field-name a-longer-value
    XADD s 5-0 f 5
    DUMP s
    XREAD STREAMS s 0
    XREAD COUNT 2 STREAMS s missing 2 0
    XREAD STREAMS s s 0 3
    XREAD STREAMS s $
    XREAD STREAMS missing $
    XREAD STREAMS s
    XREAD STREAMS s 0 1
    XREAD COUNT -1 STREAMS s 0
    XREAD COUNT x STREAMS s 0
    XREAD BLOCK x STREAMS s 0
    XREAD BLOCK -1 STREAMS s 0
    XREAD BLOCK 1.5 STREAMS s 0
    XREAD GROUP g c STREAMS s 0
    XREAD NOACK STREAMS s 0
    XREAD BOGUS STREAMS s 0
    XREAD STREAMS s >
    XREAD STREAMS s bad
    XREAD STREAMS s +
    XREAD STREAMS str s 0 0
    XREAD COUNT 1
    HELLO 3
    XREAD STREAMS s 0
    XREAD STREAMS s 999
    XRANGE s - + COUNT 2
    XRANGE s - + COUNT 0
    XLEN s
    COMMAND GETKEYS XADD k * a b
    COMMAND GETKEYS XTRIM k MAXLEN 1
    HELLO 2
    XINFO STREAM s
    XINFO STREAM s FULL
    XINFO STREAM s FULL COUNT 2
    XINFO STREAM s FULL COUNT 0
    XINFO STREAM s FULL COUNT -1
    XINFO STREAM s FULL COUNT x
    XINFO STREAM s FULL LIMIT 2
    XINFO STREAM s PARTIAL
    XINFO STREAM s FULL COUNT
    XINFO STREAM missing FULL COUNT x
    XINFO STREAM str
    XINFO GROUPS s
    XINFO GROUPS missing
    XINFO CONSUMERS s g
    XINFO CONSUMERS s
    XINFO HELP
    XINFO HELP extra
    XINFO
    XINFO BOGUS s
    DEL empty
    XADD empty 1-0 a b
    XDEL empty 1-0
    XINFO STREAM empty
    XINFO STREAM empty FULL
    HELLO 3
    XINFO STREAM s
    XINFO STREAM s FULL COUNT 1
    COMMAND INFO XADD XLEN XRANGE XREVRANGE XDEL XTRIM XSETID XREAD
    COMMAND GETKEYS XREAD COUNT 1 BLOCK 0 STREAMS a b 0 0
    COMMAND GETKEYS XREAD STREAMS streams streams 0 0
    COMMAND GETKEYS XREAD STREAMS a b 0
"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hand_written_stream_commands_match_redis() {
    assert_script_matches_redis(HAND_WRITTEN).await;
}

/// A field or value: small and large integers (stored as integers in a
/// listpack), short and long strings (crossing its encodings' limits).
fn word(rng: &mut StdRng) -> String {
    match rng.random_range(0..6) {
        0 => rng.random_range(0..128).to_string(),
        1 => rng.random_range(-5000i64..5000).to_string(),
        2 => rng.random_range(i64::MIN..i64::MAX).to_string(),
        3 => "v".repeat(rng.random_range(1..80)),
        4 => format!("f{}", rng.random_range(0..4)),
        _ => "x".repeat(rng.random_range(60..300)),
    }
}

/// Streams grown under random node limits, entries of the same fields or
/// not, deleted, trimmed exactly and approximately (with and without
/// LIMIT), read back in ranges either way; DUMP after each phase.
fn stream(seed: u64) -> Vec<Vec<Vec<u8>>> {
    let mut rng = StdRng::seed_from_u64(seed);
    let mut out: Vec<String> = vec!["FLUSHALL".into()];
    out.push(format!(
        "CONFIG SET stream-node-max-entries {}",
        [0, 1, 2, 5, 10, 100][rng.random_range(0..6)]
    ));
    out.push(format!(
        "CONFIG SET stream-node-max-bytes {}",
        [0, 50, 200, 1000, 4096][rng.random_range(0..5)]
    ));
    let mut ms = 1u64;
    let mut added: Vec<(u64, u64)> = Vec::new();
    for round in 0..4 {
        let fields: Vec<String> = (0..rng.random_range(1..4))
            .map(|_| word(&mut rng))
            .collect();
        for _ in 0..rng.random_range(5..120) {
            ms += rng.random_range(0..3);
            let id = match rng.random_range(0..3) {
                0 => format!("{ms}-*"),
                1 => format!("{ms}"),
                _ => format!("{ms}-{}", rng.random_range(0..1000)),
            };
            let mut line = format!("XADD s {id}");
            let same = rng.random_range(0..3) != 0;
            let count = if same {
                fields.len()
            } else {
                rng.random_range(1..4)
            };
            for n in 0..count {
                let field = match fields.get(n) {
                    Some(field) if same => field.clone(),
                    _ => word(&mut rng),
                };
                line.push_str(&format!(" {field} {}", word(&mut rng)));
            }
            if rng.random_range(0..10) == 0 {
                let approx = if rng.random_range(0..2) == 0 {
                    "~"
                } else {
                    "="
                };
                line = line.replacen(
                    "XADD s ",
                    &format!("XADD s MAXLEN {approx} {} ", rng.random_range(0..200)),
                    1,
                );
            }
            out.push(line);
            added.push((ms, 0));
        }
        out.push("XLEN s".into());
        out.push("DUMP s".into());
        out.push("XINFO STREAM s FULL COUNT 5".into());
        for _ in 0..rng.random_range(0..30) {
            let (ms, _) = added[rng.random_range(0..added.len())];
            out.push(format!("XDEL s {ms}-{} {ms}-0", rng.random_range(0..3)));
        }
        for _ in 0..10 {
            let a = rng.random_range(0..ms + 2);
            let b = rng.random_range(0..ms + 2);
            let count = rng.random_range(0..20);
            out.push(format!("XRANGE s {a} {b} COUNT {count}"));
            out.push(format!("XREVRANGE s {b} ({a}"));
        }
        let approx = if rng.random_range(0..2) == 0 {
            "~ "
        } else {
            ""
        };
        match round % 2 {
            0 => out.push(format!(
                "XTRIM s MAXLEN {approx}{}",
                rng.random_range(0..added.len() as u64 + 1)
            )),
            _ => out.push(format!(
                "XTRIM s MINID {approx}{}",
                rng.random_range(0..ms + 1)
            )),
        }
        if !approx.is_empty() && rng.random_range(0..2) == 0 {
            out.push(format!(
                "XTRIM s MAXLEN ~ 0 LIMIT {}",
                rng.random_range(0..50)
            ));
        }
        out.push("XRANGE s - +".into());
        out.push("XLEN s".into());
        out.push("DUMP s".into());
        out.push("XINFO STREAM s".into());
    }
    out.iter().map(|line| tally_tests::words(line)).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn random_stream_streams_match_redis() {
    let Some(redis) = RedisServer::start() else {
        return;
    };
    let tally = TestServer::start_real_clock().await;
    for seed in 1..=8 {
        let mismatches = compare_streams(redis.addr, tally.addr(), &stream(seed)).await;
        if !mismatches.is_empty() {
            eprintln!("seed {seed} diverged");
        }
        assert_no_mismatch(&mismatches);
    }
}

/// A stream with consumer groups, made on redis-server (tally has no group
/// commands yet) and RESTOREd into both: XINFO shows its groups, their
/// pending entries and consumers, entries read and lag as Redis does, and
/// the DUMP of it is Redis's.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stream_with_groups_restored_from_redis_shows_them_as_redis_does() {
    let (Some(maker), Some(redis)) = (RedisServer::start(), RedisServer::start()) else {
        return;
    };
    let made = "XADD s 1-0 a 1|XADD s 2-0 b 2|XADD s 3-0 c 3|XADD s 4-0 d 4|\
                XGROUP CREATE s g1 0|XGROUP CREATE s g2 $|XGROUP CREATE s g3 2-0|\
                XREADGROUP GROUP g1 alice COUNT 2 STREAMS s >|\
                XREADGROUP GROUP g1 bob COUNT 1 STREAMS s >|\
                XGROUP CREATECONSUMER s g1 carol|XDEL s 2-0";
    let mut conn = tally_tests::RawConn::connect(maker.addr).await;
    for line in made.split('|') {
        conn.cmd(&tally_tests::words(line)).await;
    }
    let payload = conn.cmd(&[b"DUMP".to_vec(), b"s".to_vec()]).await;
    // The bulk string's body: past `$<len>\r\n`, before the last CRLF.
    let start = payload
        .iter()
        .position(|&b| b == b'\n')
        .map_or(0, |at| at + 1);
    let payload = payload[start..payload.len() - 2].to_vec();
    let tally = TestServer::start_real_clock().await;
    let mut commands = vec![vec![
        b"RESTORE".to_vec(),
        b"s".to_vec(),
        b"0".to_vec(),
        payload,
    ]];
    for line in [
        "XINFO STREAM s",
        "XINFO STREAM s FULL",
        "XINFO STREAM s FULL COUNT 1",
        "XINFO GROUPS s",
        "XINFO CONSUMERS s nosuch",
        "XRANGE s - +",
        "DUMP s",
        "XADD s 5-0 e 5",
        "XINFO GROUPS s",
        "XTRIM s MAXLEN 0",
        "XINFO GROUPS s",
        "XINFO STREAM s FULL",
        "HELLO 3",
        "XINFO GROUPS s",
    ] {
        commands.push(tally_tests::words(line));
    }
    let mismatches = compare_streams(redis.addr, tally.addr(), &commands).await;
    assert_no_mismatch(&mismatches);
}
