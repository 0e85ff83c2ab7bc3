//! Consumer groups against redis-server: XGROUP, XREADGROUP, XACK,
//! XPENDING, XCLAIM, XAUTOCLAIM and what XINFO shows of them. The same
//! commands go to both servers and every reply must match byte for byte,
//! but for what the clock decides (how long an entry or a consumer has
//! been idle, when an entry was delivered), which is blanked in both.
//! Blocking XREADGROUP is in blocking.rs.

use rand::rngs::StdRng;
use rand::{RngExt, SeedableRng};
use tally_tests::{
    assert_no_mismatch, compare_streams_masked, mask_times, script, words, RedisServer, TestServer,
};

/// Every group command and option, with the errors in Redis's order:
/// options left to right, the key's type, the key, the group, the IDs.
const HAND_WRITTEN: &str = r#"
    FLUSHALL
    SET str x
    XGROUP CREATE s g 0
    XGROUP CREATE s g $ MKSTREAM
    XGROUP CREATE s g $ MKSTREAM
    XGROUP CREATE s g2 0 ENTRIESREAD 3
    XGROUP CREATE s g3 0 ENTRIESREAD -1
    XGROUP CREATE s g4 0 ENTRIESREAD -2
    XGROUP CREATE s g4 0 ENTRIESREAD x
    XGROUP CREATE s g4 0 ENTRIESREAD
    XGROUP CREATE s g4 0 BOGUS
    XGROUP CREATE s g4 - MKSTREAM
    XGROUP CREATE s g4 + MKSTREAM
    XGROUP CREATE s g4 bad
    XGROUP CREATE s g4 0 MKSTREAM MKSTREAM ENTRIESREAD 1
    XGROUP CREATE str g 0
    XGROUP CREATE str g 0 MKSTREAM
    XGROUP CREATE missing g 0
    XGROUP CREATE missing g bad MKSTREAM
    EXISTS missing
    XGROUP CREATE s
    XGROUP SETID s g 0 MKSTREAM
    XGROUP SETID s nosuch 0
    XGROUP SETID missing g 0
    XGROUP SETID s g -
    XGROUP SETID s g +
    XGROUP SETID s g bad
    XGROUP SETID s g 5 ENTRIESREAD 2
    XGROUP SETID s g 0 ENTRIESREAD 2 extra
    XGROUP SETID s g 0 extra
    XGROUP SETID s g $
    XGROUP DESTROY s nosuch
    XGROUP DESTROY missing g
    XGROUP DESTROY str g
    XGROUP CREATECONSUMER s nosuch c
    XGROUP CREATECONSUMER missing g c
    XGROUP CREATECONSUMER s g c
    XGROUP CREATECONSUMER s g c
    XGROUP DELCONSUMER s g nosuch
    XGROUP DELCONSUMER s nosuch c
    XGROUP DELCONSUMER s g c
    XGROUP HELP
    XGROUP HELP extra
    XGROUP
    XGROUP BOGUS s g
    XGROUP DESTROY s g extra
    XINFO GROUPS s
    XGROUP DESTROY s g2
    XGROUP DESTROY s g3
    XADD s 1-0 a 1
    XADD s 2-0 b 2
    XADD s 3-0 c 3
    XADD s 4-0 d 4
    XADD s 5-0 e 5
    XINFO GROUPS s
    XREADGROUP GROUP g alice COUNT 2 STREAMS s >
    XREADGROUP GROUP g alice COUNT 2 STREAMS s >
    XREADGROUP GROUP g bob STREAMS s >
    XREADGROUP GROUP g bob STREAMS s >
    XREADGROUP GROUP g alice STREAMS s 0
    XREADGROUP GROUP g alice STREAMS s 1-0
    XREADGROUP GROUP g alice COUNT 1 STREAMS s 0
    XREADGROUP GROUP g carol STREAMS s 0
    XREADGROUP GROUP g alice STREAMS s $
    XREADGROUP GROUP g alice STREAMS s bad
    XREADGROUP GROUP g alice STREAMS s -
    XREADGROUP GROUP nosuch alice STREAMS s >
    XREADGROUP GROUP g alice STREAMS missing >
    XREADGROUP GROUP g alice STREAMS str >
    XREADGROUP GROUP g alice STREAMS s
    XREADGROUP GROUP g alice STREAMS s > >
    XREADGROUP STREAMS s >
    XREADGROUP GROUP g STREAMS s >
    XREADGROUP GROUP g alice COUNT x STREAMS s >
    XREADGROUP GROUP g alice BLOCK x STREAMS s >
    XREADGROUP GROUP g alice BOGUS STREAMS s >
    XREADGROUP GROUP g alice NOACK
    XREAD GROUP g alice STREAMS s >
    XREADGROUP GROUP g alice STREAMS s 18446744073709551615-18446744073709551615
    XINFO GROUPS s
    XINFO CONSUMERS s g
    XINFO CONSUMERS s nosuch
    XPENDING s g
    XPENDING s g - + 10
    XPENDING s g - + 10 alice
    XPENDING s g - + 10 nosuch
    XPENDING s g (1-0 (5-0 10
    XPENDING s g - + 2
    XPENDING s g - + 0
    XPENDING s g - + -1
    XPENDING s g 5 1 10
    XPENDING s g IDLE 0 - + 10
    XPENDING s g IDLE 99999999 - + 10
    XPENDING s g IDLE 0 - + 10 bob
    XPENDING s g IDLE x - + 10
    XPENDING s g IDLE 0 - +
    XPENDING s g - + x
    XPENDING s g bad + 10
    XPENDING s g - bad 10
    XPENDING s g (18446744073709551615-18446744073709551615 + 10
    XPENDING s g - (0-0 10
    XPENDING s g -
    XPENDING s g - + 10 alice extra
    XPENDING s nosuch
    XPENDING missing g
    XPENDING str g
    XPENDING s nosuch - + x
    XACK s g 1-0
    XACK s g 1-0
    XACK s g 2-0 3-0 9-0
    XACK s g bad
    XACK s g 4-0 bad
    XACK s nosuch bad
    XACK missing g bad
    XACK str g 1-0
    XPENDING s g
    XCLAIM s g carol 0 4-0
    XCLAIM s g carol 0 4-0 JUSTID
    XCLAIM s g carol 99999999 4-0 5-0
    XCLAIM s g dave 0 5-0 JUSTID RETRYCOUNT 7
    XCLAIM s g dave 0 5-0 RETRYCOUNT -1
    XCLAIM s g dave 0 5-0 IDLE 10 TIME 1000
    XCLAIM s g dave 0 5-0 TIME 99999999999999
    XCLAIM s g dave 0 5-0 IDLE -5
    XCLAIM s g erin 0 1-0 2-0
    XCLAIM s g erin 0 1-0 FORCE
    XCLAIM s g erin 0 2-0 3-0 FORCE JUSTID
    XCLAIM s g erin 0 9-0 FORCE
    XCLAIM s g erin 0 4-0 LASTID 4-5
    XCLAIM s g erin 0 LASTID 6-0
    XCLAIM s g erin 0 bad
    XCLAIM s g erin 0 1-0 IDLE
    XCLAIM s g erin 0 1-0 IDLE x
    XCLAIM s g erin 0 1-0 TIME x
    XCLAIM s g erin 0 1-0 RETRYCOUNT x
    XCLAIM s g erin 0 1-0 LASTID bad
    XCLAIM s g erin x 1-0
    XCLAIM s nosuch erin x 1-0
    XCLAIM missing g erin 0 1-0
    XCLAIM str g erin 0 1-0
    XINFO GROUPS s
    XPENDING s g - + 10
    XINFO STREAM s FULL
    XAUTOCLAIM s g frank 0 0
    XAUTOCLAIM s g frank 0 0 COUNT 1
    XAUTOCLAIM s g frank 0 (1-0 COUNT 2 JUSTID
    XAUTOCLAIM s g frank 99999999 -
    XAUTOCLAIM s g frank 0 - COUNT 0
    XAUTOCLAIM s g frank 0 - COUNT -1
    XAUTOCLAIM s g frank 0 - COUNT x
    XAUTOCLAIM s g frank 0 - COUNT 576460752303423487
    XAUTOCLAIM s g frank 0 - COUNT 576460752303423488
    XAUTOCLAIM s g frank 0 - BOGUS
    XAUTOCLAIM s g frank 0 - COUNT
    XAUTOCLAIM s g frank x -
    XAUTOCLAIM s g frank 0 bad
    XAUTOCLAIM s g frank 0 (18446744073709551615-18446744073709551615
    XAUTOCLAIM s nosuch frank 0 -
    XAUTOCLAIM missing g frank 0 -
    XAUTOCLAIM str g frank 0 -
    XDEL s 2-0 4-0
    XAUTOCLAIM s g frank 0 - COUNT 1
    XAUTOCLAIM s g frank 0 -
    XCLAIM s g frank 0 1-0 2-0 3-0 4-0 5-0
    XPENDING s g
    XREADGROUP GROUP g frank STREAMS s 0
    XGROUP SETID s g 0
    XREADGROUP GROUP g zed STREAMS s >
    XPENDING s g
    XINFO GROUPS s
    XGROUP DELCONSUMER s g zed
    XPENDING s g
    XREADGROUP GROUP g yves NOACK STREAMS s >
    XGROUP SETID s g 0 ENTRIESREAD 0
    XREADGROUP GROUP g yves NOACK COUNT 2 STREAMS s >
    XINFO GROUPS s
    XINFO STREAM s FULL
    XINFO STREAM s FULL COUNT 1
    XINFO CONSUMERS s g
    DEL s2
    XADD s2 1-0 x 1
    XGROUP CREATE s2 g 0
    XREADGROUP GROUP g alice STREAMS s s2 > >
    XREADGROUP GROUP g alice STREAMS s2 s 0 0
    XREADGROUP GROUP g alice STREAMS s2 s2 0 >
    HELLO 3
    XREADGROUP GROUP g alice STREAMS s s2 0 0
    XREADGROUP GROUP g alice STREAMS s >
    XPENDING s g
    XPENDING s g - + 10
    XINFO GROUPS s
    XINFO CONSUMERS s g
    XAUTOCLAIM s g frank 0 -
    HELLO 2
    DEL lag
    XADD lag 1-0 f 1
    XADD lag 2-0 f 2
    XADD lag 3-0 f 3
    XDEL lag 2-0
    XGROUP CREATE lag g 0
    XINFO GROUPS lag
    XREADGROUP GROUP g c COUNT 1 STREAMS lag >
    XINFO GROUPS lag
    XREADGROUP GROUP g c COUNT 1 STREAMS lag >
    XINFO GROUPS lag
    XADD lag 4-0 f 4
    XINFO GROUPS lag
    XTRIM lag MAXLEN 0
    XINFO GROUPS lag
    XGROUP SETID lag g 0 ENTRIESREAD 0
    XINFO GROUPS lag
    EVAL return(redis.call('XRANGE',KEYS[1],'-','+','COUNT','2')) 1 s
    EVAL return(redis.call('XREVRANGE',KEYS[1],'+','-','COUNT','1')) 1 s
    EVAL return(redis.call('XREAD','STREAMS',KEYS[1],'0-0')) 1 s
    XADD s 50-0 n 12345 s text
    EVAL return(redis.call('XREADGROUP','GROUP','g','lua','STREAMS',KEYS[1],'>')) 1 s
    EVAL return(redis.call('XREADGROUP','GROUP','g','lua','STREAMS',KEYS[1],'0')) 1 s
    EVAL return(redis.call('XCLAIM',KEYS[1],'g','lua2','0','50-0')) 1 s
    EVAL return(redis.call('XREADGROUP','GROUP','g','lua','BLOCK','0','STREAMS',KEYS[1],'>')) 1 s
    COMMAND INFO XREADGROUP XACK XPENDING XCLAIM XAUTOCLAIM xgroup|create xgroup|setid
    COMMAND INFO xgroup|destroy xgroup|createconsumer xgroup|delconsumer xgroup|help
    COMMAND GETKEYS XREADGROUP GROUP g c STREAMS a b > >
    COMMAND GETKEYS XGROUP CREATE k g $
    COMMAND GETKEYS XCLAIM k g c 0 1-0
"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hand_written_group_commands_match_redis() {
    let Some(redis) = RedisServer::start() else {
        return;
    };
    let tally = TestServer::start_real_clock().await;
    let mismatches =
        compare_streams_masked(redis.addr, tally.addr(), &script(HAND_WRITTEN), mask_times).await;
    assert_no_mismatch(&mismatches);
}

/// Groups read, acknowledged, claimed and reset at random over a stream
/// that is added to, deleted from and trimmed meanwhile: what each
/// command answers, and what the groups look like after each round.
fn group_stream(seed: u64) -> Vec<Vec<Vec<u8>>> {
    let mut rng = StdRng::seed_from_u64(seed);
    let mut out: Vec<String> = vec![
        "FLUSHALL".into(),
        format!(
            "CONFIG SET stream-node-max-entries {}",
            [1, 3, 100][rng.random_range(0..3)]
        ),
    ];
    let groups = ["g1", "g2", "g3"];
    let consumers = ["ann", "bo", "cy", "di"];
    let mut ms = 0u64;
    out.push("XGROUP CREATE s g1 $ MKSTREAM".into());
    for round in 0..6 {
        for _ in 0..rng.random_range(3..25) {
            ms += rng.random_range(1..3);
            out.push(format!("XADD s {ms} f {}", rng.random_range(0..100)));
        }
        if round == 1 {
            out.push("XGROUP CREATE s g2 0".into());
            out.push(format!("XGROUP CREATE s g3 {}", ms / 2));
        }
        for _ in 0..rng.random_range(10..40) {
            let group = groups[rng.random_range(0..groups.len())];
            let consumer = consumers[rng.random_range(0..consumers.len())];
            let id = |rng: &mut StdRng| format!("{}-0", rng.random_range(0..ms + 2));
            let line = match rng.random_range(0..12) {
                0..=2 => format!(
                    "XREADGROUP GROUP {group} {consumer} COUNT {} STREAMS s >",
                    rng.random_range(0..6)
                ),
                3 => format!(
                    "XREADGROUP GROUP {group} {consumer} NOACK COUNT {} STREAMS s >",
                    rng.random_range(1..4)
                ),
                4 => format!(
                    "XREADGROUP GROUP {group} {consumer} COUNT {} STREAMS s {}",
                    rng.random_range(0..4),
                    id(&mut rng)
                ),
                5 => format!("XACK s {group} {} {}", id(&mut rng), id(&mut rng)),
                6 => format!(
                    "XCLAIM s {group} {consumer} 0 {} {}{}",
                    id(&mut rng),
                    id(&mut rng),
                    ["", " JUSTID", " FORCE", " RETRYCOUNT 3"][rng.random_range(0..4)]
                ),
                7 => format!(
                    "XAUTOCLAIM s {group} {consumer} 0 {} COUNT {}{}",
                    id(&mut rng),
                    rng.random_range(1..5),
                    ["", " JUSTID"][rng.random_range(0..2)]
                ),
                8 => format!("XDEL s {}", id(&mut rng)),
                9 => format!("XPENDING s {group} - + 5 {consumer}"),
                10 => match rng.random_range(0..4) {
                    0 => format!("XGROUP SETID s {group} {}", id(&mut rng)),
                    1 => format!("XGROUP DELCONSUMER s {group} {consumer}"),
                    2 => format!("XGROUP CREATECONSUMER s {group} {consumer}"),
                    _ => format!("XTRIM s MAXLEN {}", rng.random_range(0..30)),
                },
                _ => format!("XPENDING s {group}"),
            };
            out.push(line);
        }
        out.push("XINFO GROUPS s".into());
        out.push("XINFO STREAM s FULL COUNT 0".into());
        for group in groups {
            out.push(format!("XINFO CONSUMERS s {group}"));
            out.push(format!("XPENDING s {group} - + 100"));
        }
    }
    out.iter().map(|line| words(line)).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn random_group_streams_match_redis() {
    let Some(redis) = RedisServer::start() else {
        return;
    };
    let tally = TestServer::start_real_clock().await;
    for seed in 1..=8 {
        let mismatches =
            compare_streams_masked(redis.addr, tally.addr(), &group_stream(seed), mask_times).await;
        if !mismatches.is_empty() {
            eprintln!("seed {seed} diverged");
        }
        assert_no_mismatch(&mismatches);
    }
}
