//! Socket tests for what the differential streams cannot pin down: random
//! picks checked by content, WATCH across connections and on expiry,
//! memory accounting and noeviction for the
//! collection types.

use std::collections::BTreeSet;

use tally_tests::{RawConn, TestServer};

/// Bulk strings of a flat reply, in order (arrays and sets alike).
fn bulks(reply: &[u8]) -> Vec<String> {
    let text = String::from_utf8_lossy(reply);
    let mut lines = text.split("\r\n");
    let mut out = Vec::new();
    while let Some(line) = lines.next() {
        if line.starts_with('$') && line != "$-1" {
            out.push(lines.next().unwrap_or_default().to_string());
        }
    }
    out
}

/// Sends MULTI, the commands and EXEC; returns EXEC's reply. (One await
/// per transaction also keeps the test futures small enough for a test
/// thread's stack in debug builds.)
async fn transaction(conn: &mut RawConn, commands: &[&str]) -> String {
    assert_eq!(conn.line("MULTI").await, "+OK\r\n");
    for command in commands {
        assert_eq!(conn.line(command).await, "+QUEUED\r\n");
    }
    conn.line("EXEC").await
}

async fn info_field(conn: &mut RawConn, field: &str) -> i64 {
    let info = conn.line("INFO memory").await;
    info.lines()
        .find_map(|l| l.strip_prefix(&format!("{field}:")))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or_else(|| panic!("{field} in {info}"))
}

#[tokio::test]
async fn spop_and_random_picks_return_members_of_the_set() {
    let server = TestServer::start().await;
    let mut conn = server.raw().await;
    let members: BTreeSet<String> = (0..50).map(|i| format!("m{i}")).collect();
    let args: Vec<&str> = members.iter().map(String::as_str).collect();
    assert_eq!(
        conn.line(&format!("SADD s {}", args.join(" "))).await,
        ":50\r\n"
    );
    assert_eq!(conn.line("OBJECT ENCODING s").await, "$9\r\nhashtable\r\n");

    let all: BTreeSet<String> = bulks(&conn.cmd(&["SMEMBERS", "s"]).await)
        .into_iter()
        .collect();
    assert_eq!(all, members);

    let picked = bulks(&conn.cmd(&["SRANDMEMBER", "s", "10"]).await);
    assert_eq!(picked.len(), 10);
    assert_eq!(picked.iter().collect::<BTreeSet<_>>().len(), 10, "distinct");
    assert!(picked.iter().all(|m| members.contains(m)));
    let repeated = bulks(&conn.cmd(&["SRANDMEMBER", "s", "-100"]).await);
    assert_eq!(repeated.len(), 100);
    assert!(repeated.iter().all(|m| members.contains(m)));

    let popped = bulks(&conn.cmd(&["SPOP", "s", "20"]).await);
    assert_eq!(popped.len(), 20);
    assert_eq!(conn.line("SCARD s").await, ":30\r\n");
    for member in &popped {
        assert!(members.contains(member));
        assert_eq!(conn.cmd(&["SISMEMBER", "s", member]).await, b":0\r\n");
    }
    let one = bulks(&conn.cmd(&["SPOP", "s"]).await);
    assert_eq!(one.len(), 1);
    assert_eq!(conn.line("SCARD s").await, ":29\r\n");
    let rest = bulks(&conn.cmd(&["SPOP", "s", "100"]).await);
    assert_eq!(rest.len(), 29);
    assert_eq!(conn.line("EXISTS s").await, ":0\r\n");
}

#[tokio::test]
async fn hrandfield_and_zrandmember_pick_existing_entries() {
    let server = TestServer::start().await;
    let mut conn = server.raw().await;
    conn.line("HSET h a 1 b 2 c 3 d 4").await;
    conn.line("ZADD z 1 a 2 b 3 c 4 d").await;
    for _ in 0..20 {
        let field = bulks(&conn.cmd(&["HRANDFIELD", "h"]).await);
        assert!(["a", "b", "c", "d"].contains(&field[0].as_str()));
        let pair = bulks(&conn.cmd(&["HRANDFIELD", "h", "1", "WITHVALUES"]).await);
        let expected = ((pair[0].as_bytes()[0] - b'a') + 1).to_string();
        assert_eq!(pair[1], expected, "value belongs to its field");
        let scored = bulks(&conn.cmd(&["ZRANDMEMBER", "z", "-2", "WITHSCORES"]).await);
        assert_eq!(scored.len(), 4);
        for pair in scored.chunks(2) {
            assert_eq!(pair[1], ((pair[0].as_bytes()[0] - b'a') + 1).to_string());
        }
    }
    let distinct = bulks(&conn.cmd(&["ZRANDMEMBER", "z", "3"]).await);
    assert_eq!(distinct.iter().collect::<BTreeSet<_>>().len(), 3);
}

/// Past the small encodings the random picks sample the tables: each
/// pick belongs to its collection, with its own value or score; a count
/// below the size gives distinct ones, a count past it every one, a
/// negative count that many with repeats; and repeated picks reach every
/// element.
#[tokio::test]
async fn random_picks_of_large_collections_follow_the_count() {
    let server = TestServer::start().await;
    let mut conn = server.raw().await;
    // Past Redis 7.0's defaults: 512 set and hash entries, 128 sorted-set ones.
    let n = 600;
    for i in 0..n {
        conn.cmd(&["SADD", "s", &format!("m{i}")]).await;
        conn.cmd(&["HSET", "h", &format!("f{i}"), &format!("v{i}")])
            .await;
        conn.cmd(&["ZADD", "z", &i.to_string(), &format!("m{i}")])
            .await;
    }
    assert_eq!(conn.line("OBJECT ENCODING s").await, "$9\r\nhashtable\r\n");
    assert_eq!(conn.line("OBJECT ENCODING h").await, "$9\r\nhashtable\r\n");
    assert_eq!(conn.line("OBJECT ENCODING z").await, "$8\r\nskiplist\r\n");
    let number = |s: &str| s[1..].parse::<usize>().unwrap_or(usize::MAX);
    for count in [1usize, 7, 199, 201, 400, 599] {
        let c = count.to_string();
        let members = bulks(&conn.cmd(&["SRANDMEMBER", "s", &c]).await);
        assert_eq!(
            members.iter().collect::<BTreeSet<_>>().len(),
            count,
            "SRANDMEMBER {count}"
        );
        assert!(members.iter().all(|m| number(m) < n));
        let pairs = bulks(&conn.cmd(&["HRANDFIELD", "h", &c, "WITHVALUES"]).await);
        assert_eq!(pairs.len(), 2 * count);
        let fields: BTreeSet<_> = pairs.chunks(2).map(|p| p[0].clone()).collect();
        assert_eq!(fields.len(), count, "HRANDFIELD {count}");
        assert!(pairs
            .chunks(2)
            .all(|p| p[1] == format!("v{}", number(&p[0]))));
        let scored = bulks(&conn.cmd(&["ZRANDMEMBER", "z", &c, "WITHSCORES"]).await);
        let zmembers: BTreeSet<_> = scored.chunks(2).map(|p| p[0].clone()).collect();
        assert_eq!(zmembers.len(), count, "ZRANDMEMBER {count}");
        assert!(scored.chunks(2).all(|p| p[1] == number(&p[0]).to_string()));
    }
    assert_eq!(
        bulks(&conn.cmd(&["SRANDMEMBER", "s", "1000"]).await).len(),
        n
    );
    assert_eq!(
        bulks(&conn.cmd(&["HRANDFIELD", "h", "1000"]).await).len(),
        n
    );
    let whole = bulks(&conn.cmd(&["ZRANDMEMBER", "z", "1000"]).await);
    let in_order: Vec<String> = (0..n).map(|i| format!("m{i}")).collect();
    assert_eq!(
        whole, in_order,
        "a count past the size gives the set in score order"
    );
    let repeats = bulks(&conn.cmd(&["SRANDMEMBER", "s", "-5000"]).await);
    assert_eq!(repeats.len(), 5000);
    let mut seen: BTreeSet<String> = repeats.into_iter().collect();
    for _ in 0..4 {
        seen.extend(bulks(&conn.cmd(&["SRANDMEMBER", "s", "-5000"]).await));
    }
    // 25,000 picks of 600: missing one by chance is below e^-35.
    assert_eq!(seen.len(), n, "every member comes up");
    let fields = bulks(&conn.cmd(&["HRANDFIELD", "h", "-1200"]).await);
    assert_eq!(fields.len(), 1200);
    assert!(fields.iter().all(|f| number(f) < n));
    let zpicks = bulks(&conn.cmd(&["ZRANDMEMBER", "z", "-1200"]).await);
    assert_eq!(zpicks.len(), 1200);
    // Popping most of the set shrinks its table; picks still find members.
    assert_eq!(bulks(&conn.cmd(&["SPOP", "s", "595"]).await).len(), 595);
    let left: BTreeSet<_> = bulks(&conn.cmd(&["SMEMBERS", "s"]).await)
        .into_iter()
        .collect();
    assert_eq!(left.len(), 5);
    for _ in 0..50 {
        let one = bulks(&conn.cmd(&["SRANDMEMBER", "s"]).await);
        assert!(left.contains(&one[0]));
    }
}

#[tokio::test]
async fn a_write_from_another_client_aborts_a_watching_transaction() {
    let server = TestServer::start().await;
    let mut a = server.raw().await;
    let mut b = server.raw().await;
    a.line("SET balance 10").await;
    assert_eq!(a.line("WATCH balance").await, "+OK\r\n");
    assert_eq!(a.line("GET balance").await, "$2\r\n10\r\n");
    // A write to another key does not disturb the watch.
    b.line("SET unrelated 1").await;
    let reply = transaction(&mut a, &["DECRBY balance 3"]).await;
    assert_eq!(reply, "*1\r\n:7\r\n");

    a.line("WATCH balance").await;
    b.line("INCRBY balance 100").await;
    let reply = transaction(&mut a, &["DECRBY balance 3"]).await;
    assert_eq!(reply, "*-1\r\n");
    assert_eq!(a.line("GET balance").await, "$3\r\n107\r\n");

    // The watch ended with EXEC: a later write does not abort the next one.
    b.line("INCR balance").await;
    let reply = transaction(&mut a, &["GET balance"]).await;
    assert_eq!(reply, "*1\r\n$3\r\n108\r\n");
}

#[tokio::test]
async fn a_watched_key_that_expires_aborts_the_transaction() {
    let server = TestServer::start().await;
    let mut conn = server.raw().await;
    conn.line("SET lease holder PX 1000").await;
    conn.line("WATCH lease").await;
    // Past the deadline's millisecond (a key lives through it, as on Redis).
    server.clock.advance_ms(1001);
    let reply = transaction(&mut conn, &["SET lease other"]).await;
    assert_eq!(reply, "*-1\r\n");
    assert_eq!(conn.line("EXISTS lease").await, ":0\r\n");

    // A key already expired when watched is simply absent: no abort.
    conn.line("SET gone v PX 10").await;
    server.clock.advance_ms(11);
    conn.line("WATCH gone").await;
    let reply = transaction(&mut conn, &["SET gone back"]).await;
    assert_eq!(reply, "*1\r\n+OK\r\n");
}

#[tokio::test]
async fn watches_of_a_closed_connection_are_released() {
    let server = TestServer::start().await;
    {
        let mut gone = server.raw().await;
        gone.line("WATCH k").await;
    }
    let mut conn = server.raw().await;
    // The shard forgets the closed client's flag; writes keep working.
    for _ in 0..100 {
        conn.line("INCR k").await;
    }
    assert_eq!(conn.line("GET k").await, "$3\r\n100\r\n");
}

#[tokio::test]
async fn collections_are_accounted_in_used_memory_and_given_back() {
    let server = TestServer::start().await;
    let mut conn = server.raw().await;
    // Let the tables of the four keys' shards exist first: they stay
    // allocated after the keys go, as Redis's dicts do until resized.
    conn.line("MSET h 1 l 1 s 1 z 1").await;
    conn.line("DEL h l s z").await;
    let empty = info_field(&mut conn, "used_memory").await;
    for i in 0..200 {
        conn.line(&format!("HSET h field{i} value-{i:060}")).await;
        conn.line(&format!("RPUSH l element-{i:060}")).await;
        conn.line(&format!("SADD s member-{i:060}")).await;
        conn.line(&format!("ZADD z {i} member-{i:060}")).await;
    }
    let full = info_field(&mut conn, "used_memory").await;
    // 800 elements of 60+ bytes each: at least 60 KB must show.
    assert!(full - empty > 800 * 60, "grew by {}", full - empty);
    conn.line("DEL h l s z").await;
    assert_eq!(info_field(&mut conn, "used_memory").await, empty);
}

#[tokio::test]
async fn collection_writes_past_maxmemory_get_oom_and_reads_still_work() {
    let server = TestServer::start_with(|c| c.maxmemory = 200_000).await;
    let mut conn = server.raw().await;
    let mut accepted = 0;
    for i in 0..10_000 {
        let reply = conn.line(&format!("RPUSH log entry-{i:080}")).await;
        if reply.starts_with('-') {
            assert_eq!(
                reply,
                "-OOM command not allowed when used memory > 'maxmemory'.\r\n"
            );
            break;
        }
        accepted += 1;
    }
    assert!(accepted > 100 && accepted < 10_000, "accepted {accepted}");
    assert_eq!(conn.line("LLEN log").await, format!(":{accepted}\r\n"));
    // Past the limit (lowered: the refused write's own bytes were what did
    // not fit), a small write is refused too.
    assert_eq!(conn.line("CONFIG SET maxmemory 100000").await, "+OK\r\n");
    assert_eq!(
        conn.line("HSET h f v").await,
        "-OOM command not allowed when used memory > 'maxmemory'.\r\n"
    );
    // Removing elements is allowed and frees memory.
    let pop = accepted - 10;
    let popped = conn.line(&format!("LPOP log {pop}")).await;
    assert!(popped.starts_with(&format!("*{pop}\r\n")));
    assert_eq!(conn.line("HSET h f v").await, ":1\r\n");
}

#[tokio::test]
async fn sorted_set_window_log_works_as_limiters_use_it() {
    // The sliding-log limiter: drop old entries, count, add, expire, in a
    // transaction, as libraries send it.
    let server = TestServer::start().await;
    let mut conn = server.raw().await;
    let now = tally_tests::T0_MS;
    for i in 0..5u64 {
        let t = now + i * 100;
        let trim = format!("ZREMRANGEBYSCORE log:u1 0 {}", t - 1000);
        let add = format!("ZADD log:u1 {t} req{i}");
        let reply = transaction(
            &mut conn,
            &[&trim, &add, "ZCARD log:u1", "PEXPIRE log:u1 1000"],
        )
        .await;
        assert_eq!(reply, format!("*4\r\n:0\r\n:1\r\n:{}\r\n:1\r\n", i + 1));
    }
    let trim = format!("ZREMRANGEBYSCORE log:u1 0 {}", now + 500);
    let reply = transaction(&mut conn, &[&trim, "ZCARD log:u1"]).await;
    assert_eq!(reply, "*2\r\n:5\r\n:0\r\n");
    assert_eq!(
        conn.line("EXISTS log:u1").await,
        ":0\r\n",
        "an emptied set goes away"
    );
}

/// Walks SSCAN, HSCAN or ZSCAN (`scan`) over `key` with COUNT `count`, removing
/// and adding members between pages with `churn`; returns the members seen
/// and the largest page.
async fn paged_walk(
    conn: &mut RawConn,
    scan: &str,
    key: &str,
    count: usize,
    churn: &[String],
) -> (BTreeSet<String>, usize) {
    let mut seen = BTreeSet::new();
    let mut cursor = "0".to_string();
    let mut largest = 0;
    let mut step = 0;
    loop {
        let reply = conn
            .line(&format!("{scan} {key} {cursor} COUNT {count}"))
            .await;
        let mut words = bulks(reply.as_bytes()).into_iter();
        cursor = words.next().expect("a cursor");
        let page: Vec<String> = words.collect();
        let members: Vec<String> = if scan == "HSCAN" || scan == "ZSCAN" {
            page.iter().step_by(2).cloned().collect()
        } else {
            page
        };
        largest = largest.max(members.len());
        seen.extend(members);
        if let Some(command) = churn.get(step) {
            conn.line(command).await;
        }
        step += 1;
        if cursor == "0" {
            return (seen, largest);
        }
    }
}

/// SSCAN, HSCAN and ZSCAN page a large set, hash or sorted set by COUNT,
/// as Redis does its hash tables, and keep SCAN's promise while members come and go between
/// pages: every member present from the first call to the last is
/// returned. The same walk runs on redis-server, which keeps it too.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sscan_hscan_and_zscan_page_large_collections_and_keep_the_promise() {
    let tally = TestServer::start().await;
    let redis = tally_tests::RedisServer::start();
    let mut addrs = vec![("tally", tally.addr())];
    if let Some(redis) = &redis {
        addrs.push(("redis", redis.addr));
    }
    for (name, addr) in addrs {
        let mut conn = RawConn::connect(addr).await;
        let mut sadd = vec!["SADD".to_string(), "s".to_string()];
        let mut hset = vec!["HSET".to_string(), "h".to_string()];
        let mut zadd = vec!["ZADD".to_string(), "z".to_string()];
        for i in 0..3000 {
            sadd.push(format!("m{i}"));
            hset.extend([format!("m{i}"), "v".to_string()]);
            zadd.extend([i.to_string(), format!("m{i}")]);
        }
        conn.cmd(&sadd).await;
        conn.cmd(&hset).await;
        conn.cmd(&zadd).await;
        // Removals of every seventh member and new arrivals, between pages.
        let churn = |remove: &str, add: &str| -> Vec<String> {
            (0..3000)
                .step_by(7)
                .map(|i| match i % 2 {
                    0 => format!("{remove} m{i}"),
                    _ => format!("{add} new{i}"),
                })
                .collect()
        };
        let removed: BTreeSet<String> = (0..3000)
            .step_by(7)
            .filter(|i| i % 2 == 0)
            .map(|i| format!("m{i}"))
            .collect();
        let throughout: BTreeSet<String> = (0..3000)
            .map(|i| format!("m{i}"))
            .filter(|m| !removed.contains(m))
            .collect();
        for (scan, key, churn) in [
            ("SSCAN", "s", churn("SREM s", "SADD s")),
            ("HSCAN", "h", churn("HDEL h", "HSET h")),
            ("ZSCAN", "z", churn("ZREM z", "ZADD z -1")),
        ] {
            let churn: Vec<String> = churn
                .into_iter()
                .map(|c| if c.starts_with("HSET") { c + " v" } else { c })
                .collect();
            let (seen, largest) = paged_walk(&mut conn, scan, key, 20, &churn).await;
            let missed: Vec<_> = throughout.difference(&seen).collect();
            assert!(missed.is_empty(), "{name} {scan} missed {missed:?}");
            assert!(
                largest < 200,
                "{name} {scan}: pages follow COUNT, the largest had {largest}"
            );
        }
        // An intset and a listpack hash come back whole, cursor 0, on both.
        conn.line("SADD small 1 2 3").await;
        assert_eq!(
            bulks(conn.line("SSCAN small 0 COUNT 1").await.as_bytes()),
            ["0", "1", "2", "3"],
            "{name}"
        );
        conn.line("HSET smallh a 1 b 2").await;
        assert_eq!(
            bulks(conn.line("HSCAN smallh 0 COUNT 1").await.as_bytes()),
            ["0", "a", "1", "b", "2"],
            "{name}"
        );
        // A listpack sorted set too, in score order.
        conn.line("ZADD smallz 2 b 1 a").await;
        assert_eq!(
            bulks(conn.line("ZSCAN smallz 0 COUNT 1").await.as_bytes()),
            ["0", "a", "1", "b", "2"],
            "{name}"
        );
    }
}
