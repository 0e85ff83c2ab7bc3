//! Blocking commands (BLPOP, BRPOP, BLMOVE, BRPOPLPUSH, BLMPOP, BZPOPMIN,
//! BZPOPMAX, BZMPOP) against a real redis-server: several connections play
//! the same scenario on both servers, and every reply must be the same
//! bytes, the blocked clients' included. A scenario names the connection
//! each step runs on:
//!
//! - `N> COMMAND`: send on connection N and read its reply;
//! - `N! COMMAND`: send on connection N without reading (it blocks);
//! - `N<`: read connection N's pending reply;
//! - `blocked K`: wait until INFO reports K blocked clients;
//! - `id N`: remember connection N's CLIENT ID as `$N` (not compared);
//! - `close N`: close connection N.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::time::{Duration, Instant};

use tally_tests::{words, RawConn, RedisServer, TestServer};

/// Plays `scenario` on the server at `addr`: each compared step and the
/// reply it got.
async fn play(addr: SocketAddr, scenario: &str) -> Vec<(String, String)> {
    let mut conns: HashMap<usize, RawConn> = HashMap::new();
    let mut ids: HashMap<usize, String> = HashMap::new();
    let mut admin = RawConn::connect(addr).await;
    let mut transcript = Vec::new();
    for line in scenario.lines().map(str::trim) {
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        if let Some(count) = line.strip_prefix("blocked ") {
            if !admin
                .wait_blocked_clients(count.parse().expect("a count"))
                .await
            {
                panic!("{addr}: never `{line}`; replies so far: {transcript:#?}");
            }
            continue;
        }
        if let Some(n) = line.strip_prefix("id ") {
            let n: usize = n.parse().expect("a connection");
            let conn = conn(&mut conns, addr, n).await;
            let reply = conn.line("CLIENT ID").await;
            ids.insert(n, reply.trim().trim_start_matches(':').to_string());
            continue;
        }
        if let Some(n) = line.strip_prefix("close ") {
            conns.remove(&n.parse().expect("a connection"));
            continue;
        }
        let (n, rest) = line.split_at(line.find(['>', '!', '<']).expect("a step"));
        let n: usize = n.trim().parse().expect("a connection");
        let conn = conn(&mut conns, addr, n).await;
        let mut command = rest[1..].trim().to_string();
        for (who, id) in &ids {
            command = command.replace(&format!("${who}"), id);
        }
        let argv = split(&command);
        let reply = match &rest[..1] {
            ">" => within(addr, line, &transcript, conn.cmd(&argv)).await,
            "!" => {
                conn.send(&tally_tests::encode_command(&argv)).await;
                continue;
            }
            _ => within(addr, line, &transcript, conn.reply()).await,
        };
        let mut reply = String::from_utf8_lossy(&reply).into_owned();
        if command.starts_with("HELLO") {
            // The connection's id differs between the servers.
            if let Some(at) = reply.find("$2\r\nid\r\n:") {
                let start = at + "$2\r\nid\r\n:".len();
                let end = start + reply[start..].find('\r').unwrap_or(0);
                reply.replace_range(start..end, "?");
            }
        }
        transcript.push((line.to_string(), reply));
    }
    transcript
}

/// A command's words: split on spaces, except inside double quotes.
fn split(command: &str) -> Vec<Vec<u8>> {
    let mut argv = Vec::new();
    let mut word = String::new();
    let mut quoted = false;
    for ch in command.chars() {
        match ch {
            '"' => quoted = !quoted,
            ' ' if !quoted => {
                if !word.is_empty() {
                    argv.push(std::mem::take(&mut word).into_bytes());
                }
            }
            _ => word.push(ch),
        }
    }
    if !word.is_empty() {
        argv.push(word.into_bytes());
    }
    argv
}

/// A reply, or a failure naming the step that got none.
async fn within(
    addr: SocketAddr,
    step: &str,
    transcript: &[(String, String)],
    reply: impl std::future::Future<Output = Vec<u8>>,
) -> Vec<u8> {
    match tokio::time::timeout(Duration::from_secs(5), reply).await {
        Ok(reply) => reply,
        Err(_) => panic!("{addr}: no reply to `{step}`; replies so far: {transcript:#?}"),
    }
}

async fn conn(conns: &mut HashMap<usize, RawConn>, addr: SocketAddr, n: usize) -> &mut RawConn {
    if let std::collections::hash_map::Entry::Vacant(slot) = conns.entry(n) {
        slot.insert(RawConn::connect(addr).await);
    }
    conns.get_mut(&n).expect("just made")
}

/// Plays `scenario` on redis-server and on tally and asserts the same
/// replies.
async fn assert_same(scenario: &str) {
    let Some(redis) = RedisServer::start() else {
        return;
    };
    let tally = TestServer::start_real_clock().await;
    let expected = play(redis.addr, scenario).await;
    let actual = play(tally.addr(), scenario).await;
    assert_eq!(expected.len(), actual.len());
    let differences: Vec<String> = expected
        .iter()
        .zip(&actual)
        .filter(|(e, a)| e != a)
        .map(|((step, e), (_, a))| format!("{step}\n  redis: {e:?}\n  tally: {a:?}"))
        .collect();
    assert!(differences.is_empty(), "{}", differences.join("\n"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn list_pops_block_and_are_served_as_in_redis() {
    assert_same(
        "
        # Data already there: no blocking.
        0> RPUSH a 1 2 3
        1> BLPOP nothing a 0
        1> BRPOP nothing a 0
        1> BLMPOP 0 2 nothing a LEFT COUNT 5
        1> EXISTS a
        # Served by a later push, from the key that became ready.
        1! BLPOP l1 l2 0
        blocked 1
        0> RPUSH l2 x y
        1<
        0> LRANGE l2 0 -1
        0> DEL l2
        1! BRPOP l1 l2 0
        blocked 1
        0> LPUSH l1 p q
        1<
        0> LRANGE l1 0 -1
        # Waiters are served first come, first served, one element each.
        1! BLPOP q 0
        blocked 1
        2! BLPOP q 0
        blocked 2
        3! BLMPOP 0 1 q RIGHT COUNT 2
        blocked 3
        0> RPUSH q a b c d e
        1<
        2<
        3<
        0> LRANGE q 0 -1
        0> DEL q
        # BLMPOP's count takes what is there.
        1! BLMPOP 0 2 m1 m2 LEFT COUNT 10
        blocked 1
        0> RPUSH m2 1 2 3
        1<
        0> EXISTS m2
        # The same key named twice.
        1! BLPOP d d d 0
        blocked 1
        0> LPUSH d v
        1<
        ",
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn moves_chain_and_carry_their_errors_as_in_redis() {
    assert_same(
        "
        # A BLMOVE into a list another client waits on: both are served.
        2! BLPOP target 0
        blocked 1
        1! BLMOVE src target RIGHT LEFT 0
        blocked 2
        0> RPUSH src foo
        1<
        2<
        0> EXISTS target
        # Linked BRPOPLPUSHes.
        1! BRPOPLPUSH list1 list2 0
        blocked 1
        2! BRPOPLPUSH list2 list3 0
        blocked 2
        0> RPUSH list1 foo
        1<
        2<
        0> LRANGE list1 0 -1
        0> LRANGE list2 0 -1
        0> LRANGE list3 0 -1
        # A destination of the wrong type: the waiter gets the error and
        # the element stays.
        0> SET dest notalist
        1! BRPOPLPUSH blist dest 0
        blocked 1
        0> RPUSH blist foo
        1<
        0> LRANGE blist 0 -1
        0> DEL blist dest
        # Errors at once.
        0> SET str x
        1> BLPOP str 0
        1> BLPOP nothing str 0
        1> BRPOPLPUSH str dest 0
        1> BLMOVE a b UP LEFT 0
        1> BLMOVE a b LEFT LEFT -1
        1> BLPOP k -1
        1> BLPOP k abc
        1> BLPOP k 1e30
        1> BLPOP k inf
        1> BLPOP k 0x7FFFFFFFFFFFFF
        1> BLMPOP 0 0 k LEFT
        1> BLMPOP 0 -1 k LEFT
        1> BLMPOP 0 2 k LEFT
        1> BLMPOP 0 1 k UP
        1> BLMPOP 0 1 k LEFT COUNT 0
        1> BLMPOP 0 1 k LEFT COUNT 1 COUNT 2
        1> BLMPOP -1 1 k LEFT
        1> BLMPOP x 1 k LEFT
        1> BZMPOP 0 1 k LEFT
        1> BZPOPMIN str 0
        ",
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sorted_set_pops_block_in_both_protocols() {
    assert_same(
        "
        0> ZADD z 1 a 2 b 3 c
        1> BZPOPMIN z 0
        1> BZPOPMAX z 0
        1> BZMPOP 0 1 z MIN COUNT 5
        1! BZPOPMIN z1 z2 0
        blocked 1
        0> ZADD z2 5 five 6 six
        1<
        0> DEL z2
        1! BZPOPMAX z1 z2 0
        blocked 1
        0> ZADD z1 1.5 x
        1<
        1! BZMPOP 0 2 z1 z2 MAX COUNT 3
        blocked 1
        0> ZADD z1 1 one 2 two
        1<
        0> ZRANGE z1 0 -1 WITHSCORES
        # RESP3: scores are doubles, a timeout is a null.
        1> HELLO 3
        1! BZPOPMIN r 0
        blocked 1
        0> ZADD r 2.5 m
        1<
        1! BZMPOP 0 1 r MIN COUNT 2
        blocked 1
        0> ZADD r 1 a 2 b 3 c
        1<
        1! BLPOP rl 0
        blocked 1
        0> RPUSH rl v
        1<
        1> BZPOPMIN none 0.01
        1> BLMOVE none other LEFT LEFT 0.01
        1> BLMPOP 0.01 1 none LEFT
        ",
    )
    .await;
}

/// XREAD BLOCK: `$` read as the last ID when the call is made, each
/// reader served from the key that got an entry past its own ID (one
/// waiting past a later ID stays blocked while the next is served), the
/// default COUNT of a blocked read, a key of another type, MULTI and
/// scripts, a timeout, RESP3's map.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stream_readers_block_and_are_served_as_in_redis() {
    assert_same(
        "
        0> XADD s 1-1 a 1
        1! XREAD BLOCK 0 STREAMS s t $ $
        blocked 1
        0> XADD t 5-0 b 2
        1<
        1! XREAD BLOCK 0 STREAMS s 100-0
        blocked 1
        2! XREAD COUNT 1 BLOCK 0 STREAMS s 1-1
        blocked 2
        0> XADD s 50-0 c 3
        2<
        0> XADD s 51-0 d 4
        0> XADD s 150-0 e 5
        1<
        1! XREAD BLOCK 0 STREAMS s $
        blocked 1
        0> XADD s 150-* f 6
        1<
        1! XREAD BLOCK 0 STREAMS w 0
        blocked 1
        0> SET w x
        0> DEL w
        0> XADD w 1-0 g 7
        1<
        1> XREAD BLOCK 10 STREAMS s $
        1> MULTI
        1> XREAD BLOCK 0 STREAMS s $
        1> EXEC
        1> EVAL \"return redis.call('XREAD', 'BLOCK', '0', 'STREAMS', 's', '$')\" 0
        1> EVAL \"return redis.call('XREAD', 'STREAMS', 's', '150')\" 0
        1> HELLO 3
        1! XREAD BLOCK 0 STREAMS s $
        blocked 1
        0> XADD s 200-0 h 8
        1<
        1> XREAD STREAMS s t 150 0
        1> XREAD STREAMS s 999
        # A reader of what is there already is answered at once, all of
        # it, while another waits on the key for what is not.
        2! XREAD BLOCK 0 STREAMS s $
        blocked 1
        1> XREAD BLOCK 0 STREAMS s 0
        0> XADD s 300-0 i 9
        2<
        ",
    )
    .await;
}

/// XREADGROUP BLOCK: waiters on one group served in turn, each with the
/// entries no consumer of the group had (the second waits on while the
/// first takes the only entry), NOACK, a consumer's history answered at
/// once, and the errors of a waiter whose group is destroyed (NOGROUP) or
/// whose key is deleted, replaced, renamed over or flushed (UNBLOCKED);
/// a timeout, MULTI, and the statistics of a failed unblocked call.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn group_readers_block_and_are_served_as_in_redis() {
    assert_same(
        "
        0> CONFIG RESETSTAT
        0> XGROUP CREATE s g $ MKSTREAM
        1! XREADGROUP GROUP g alice BLOCK 0 STREAMS s >
        blocked 1
        2! XREADGROUP GROUP g bob COUNT 5 BLOCK 0 STREAMS s >
        blocked 2
        0> XADD s 1-0 a 1
        1<
        0> XADD s 2-0 b 2
        2<
        0> XPENDING s g
        1! XREADGROUP GROUP g carol BLOCK 0 NOACK STREAMS s >
        blocked 1
        0> XADD s 3-0 c 3
        1<
        0> XPENDING s g
        0> XINFO GROUPS s
        1> XREADGROUP GROUP g alice BLOCK 0 STREAMS s 0
        1> XREADGROUP GROUP g alice BLOCK 10 STREAMS s >
        1> MULTI
        1> XREADGROUP GROUP g alice BLOCK 0 STREAMS s >
        1> EXEC
        1! XREADGROUP GROUP g alice BLOCK 0 STREAMS s >
        blocked 1
        0> XGROUP DESTROY s g
        1<
        0> XGROUP CREATE s g $
        1! XREADGROUP GROUP g alice BLOCK 0 STREAMS s >
        blocked 1
        0> DEL s
        1<
        0> XGROUP CREATE s g $ MKSTREAM
        1! XREADGROUP GROUP g alice BLOCK 0 STREAMS s >
        blocked 1
        0> SET s x
        1<
        0> DEL s
        0> XGROUP CREATE s g $ MKSTREAM
        1! XREADGROUP GROUP g alice BLOCK 0 STREAMS s >
        blocked 1
        0> FLUSHALL
        1<
        0> XGROUP CREATE s g $ MKSTREAM
        0> XGROUP CREATE s2 g $ MKSTREAM
        0> XADD s2 9-0 z 9
        1! XREADGROUP GROUP g alice BLOCK 0 STREAMS s >
        blocked 1
        0> RENAME s2 s
        1<
        0> XADD other 1-0 x 1
        1! XREADGROUP GROUP g alice BLOCK 0 STREAMS s >
        blocked 1
        0> RENAME other s
        1<
        1> HELLO 3
        0> XGROUP CREATE s g $
        1! XREADGROUP GROUP g alice BLOCK 0 STREAMS s >
        blocked 1
        0> XADD s 10-0 r 3
        1<
        0> INFO errorstats
        ",
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn timeouts_transactions_scripts_and_unblocking_behave_as_in_redis() {
    assert_same(
        "
        # Timeouts: a null array for every one of them (RESP2).
        1> BLPOP none 0.01
        1> BRPOP none 0.01
        1> BLMOVE none other LEFT LEFT 0.01
        1> BRPOPLPUSH none other 0.01
        1> BLMPOP 0.01 1 none LEFT
        1> BZPOPMIN none 0.01
        1> BZMPOP 0.01 1 none MAX
        # Inside MULTI nothing blocks: nulls at once (a null bulk for the
        # moves).
        1> MULTI
        1> BLPOP none 0
        1> BLMOVE none other LEFT LEFT 0
        1> BRPOPLPUSH none other 0
        1> BLMPOP 0 1 none LEFT
        1> BZPOPMAX none 0
        1> EXEC
        # In a script, BLMPOP and BZMPOP do not block either; the others
        # may not be called.
        1> EVAL \"return redis.call('blmpop', 0, 1, KEYS[1], 'LEFT')\" 1 none
        1> EVAL \"return redis.call('bzmpop', 0, 1, KEYS[1], 'MIN')\" 1 none
        1> EVAL \"return redis.call('blpop', KEYS[1], 0)\" 1 none
        # A transaction's pushes are seen whole: the waiter gets the last.
        1! BLPOP t 0
        blocked 1
        0> MULTI
        0> LPUSH t a
        0> LPUSH t b
        0> LPUSH t c
        0> EXEC
        1<
        0> DEL t
        # A push undone in the same transaction wakes nobody.
        1! BLPOP t 0
        blocked 1
        0> MULTI
        0> LPUSH t a
        0> DEL t
        0> SET t foo
        0> EXEC
        0> DEL t
        0> LPUSH t b
        1<
        # A script's push.
        1! BRPOP s 0
        blocked 1
        0> EVAL \"redis.call('rpush', KEYS[1], 'x', 'y') return 1\" 1 s
        1<
        # Keys that arrive by RENAME, SORT ... STORE and SWAPDB.
        1! BLPOP moved 0
        blocked 1
        0> RPUSH bob abc def
        0> RENAME bob moved
        1<
        1! BLPOP sorted 0
        blocked 1
        0> RPUSH unsorted c a b
        0> SORT unsorted ALPHA STORE sorted
        1<
        0> SELECT 1
        0> RPUSH k hello
        0> SELECT 0
        1! BRPOP k 5
        blocked 1
        0> SWAPDB 1 0
        1<
        0> SWAPDB 1 0
        # COPY into another database, and a source key named db.
        0> SELECT 2
        1! BLPOP copied 0
        blocked 1
        0> RPUSH db x
        0> COPY db copied DB 0
        0> SELECT 0
        1<
        0> SELECT 2
        0> DEL db
        0> SELECT 0
        # CLIENT UNBLOCK: a timeout's reply, or an error.
        id 1
        1! BLPOP u 0
        blocked 1
        0> CLIENT UNBLOCK $1
        1<
        1! BLPOP u 0
        blocked 1
        0> CLIENT UNBLOCK $1 ERROR
        1<
        0> CLIENT UNBLOCK $1
        0> CLIENT UNBLOCK $1 PLEASE
        0> CLIENT UNBLOCK abc
        0> CLIENT UNBLOCK 1 TIMEOUT extra
        # A blocked client killed is served nothing.
        id 3
        3! BLPOP killed 0
        blocked 1
        0> CLIENT KILL ID $3
        blocked 0
        0> RPUSH killed v
        0> LLEN killed
        # A blocked client that leaves is served nothing.
        1! BLPOP gone 0
        blocked 1
        close 1
        blocked 0
        0> RPUSH gone v
        0> LRANGE gone 0 -1
        # What a blocked client sent after its command runs once served.
        2! BLPOP p 0
        2! PING
        blocked 1
        0> RPUSH p v
        2<
        2<
        ",
    )
    .await;
}

/// What only tally's own view shows: CLIENT LIST's `b` flag and INFO's
/// count while a client waits, and a waiter that costs nothing once it
/// timed out.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_blocked_client_is_listed_with_the_b_flag() {
    let tally = TestServer::start_real_clock().await;
    let mut admin = tally.raw().await;
    let mut blocked = tally.raw().await;
    blocked
        .send(&tally_tests::encode_command(&words("BLPOP k 0")))
        .await;
    assert!(admin.wait_blocked_clients(1).await);
    let list = admin.line("CLIENT LIST").await;
    let info = admin.line("INFO clients").await;
    assert!(info.contains("clients_in_timeout_table:0\r\n"), "{info}");
    let line = list
        .lines()
        .find(|l| l.contains("cmd=blpop"))
        .expect("the blocked client is listed");
    assert!(line.contains("flags=b "), "{line}");
    assert!(line.contains("qbuf=0 "), "{line}");
    assert_eq!(admin.line("RPUSH k v").await, ":1\r\n");
    assert_eq!(
        String::from_utf8_lossy(&blocked.reply().await),
        "*2\r\n$1\r\nk\r\n$1\r\nv\r\n"
    );
    assert!(admin.wait_blocked_clients(0).await);
    let list = admin.line("CLIENT LIST").await;
    assert!(!list.contains("flags=b "), "{list}");
    // One with a timeout is in Redis's timeout table.
    blocked
        .send(&tally_tests::encode_command(&words("BLPOP k 100")))
        .await;
    assert!(admin.wait_blocked_clients(1).await);
    let info = admin.line("INFO clients").await;
    assert!(info.contains("clients_in_timeout_table:1\r\n"), "{info}");
}

/// The replication stream a raw PSYNC gets from `addr`, read for a moment
/// once the snapshot is through: its commands as words, PINGs and SELECTs
/// left out.
async fn stream_after(
    addr: SocketAddr,
    writes: impl std::future::Future<Output = ()>,
) -> Vec<String> {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut replica = tokio::net::TcpStream::connect(addr).await.expect("connect");
    replica.write_all(b"PSYNC ? -1\r\n").await.expect("psync");
    let mut got = Vec::new();
    // +FULLRESYNC ...\r\n$<len>\r\n<snapshot>, then the stream.
    let deadline = Instant::now() + Duration::from_secs(10);
    let stream_start = loop {
        let mut chunk = vec![0u8; 64 * 1024];
        let n = tokio::time::timeout(Duration::from_secs(10), replica.read(&mut chunk))
            .await
            .expect("the snapshot arrives")
            .expect("read");
        got.extend_from_slice(&chunk[..n]);
        let text = String::from_utf8_lossy(&got).into_owned();
        if let Some(at) = text.find("\r\n$") {
            let len_start = at + 3;
            if let Some(len_end) = text[len_start..].find("\r\n") {
                let len: usize = text[len_start..len_start + len_end]
                    .parse()
                    .expect("a length");
                let body = len_start + len_end + 2;
                if got.len() >= body + len {
                    break body + len;
                }
            }
        }
        assert!(Instant::now() < deadline, "no snapshot");
    };
    writes.await;
    let mut rest = got.split_off(stream_start);
    let mut chunk = vec![0u8; 64 * 1024];
    while let Ok(Ok(n)) =
        tokio::time::timeout(Duration::from_millis(300), replica.read(&mut chunk)).await
    {
        if n == 0 {
            break;
        }
        rest.extend_from_slice(&chunk[..n]);
    }
    let mut commands = Vec::new();
    let mut at = 0;
    while at < rest.len() {
        if rest[at] == b'\n' {
            at += 1;
            continue;
        }
        let len = tally_tests::frame_len(&rest[at..], false).expect("whole commands");
        let frame = String::from_utf8_lossy(&rest[at..at + len]).into_owned();
        at += len;
        let words: Vec<&str> = frame
            .split("\r\n")
            .filter(|w| !w.is_empty() && !w.starts_with('*') && !w.starts_with('$'))
            .collect();
        let line = words.join(" ");
        if !line.eq_ignore_ascii_case("ping") && !line.to_ascii_uppercase().starts_with("SELECT") {
            commands.push(line);
        }
    }
    commands
}

/// A served pop reaches the replicas (and the append-only file) as the
/// plain pop Redis 7.0 propagates, after the write that served it; a pop
/// that timed out propagates nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn served_pops_are_replicated_as_the_plain_pops_redis_propagates() {
    let tally = TestServer::start_real_clock().await;
    let addr = tally.addr();
    let stream = stream_after(addr, async {
        let mut admin = RawConn::connect(addr).await;
        let mut writer = RawConn::connect(addr).await;
        let mut waiter = RawConn::connect(addr).await;
        for (block, write) in [
            ("BLMPOP 0 2 mylist other LEFT COUNT 5", "LPUSH mylist a b c"),
            ("BLPOP l 0", "RPUSH l x y"),
            ("BLMOVE src dst LEFT RIGHT 0", "RPUSH src x"),
            ("BZPOPMAX z 0", "ZADD z 1 a 2 b"),
            ("BZMPOP 0 1 z2 MIN COUNT 9", "ZADD z2 1 a 2 b"),
        ] {
            waiter
                .send(&tally_tests::encode_command(&words(block)))
                .await;
            assert!(admin.wait_blocked_clients(1).await, "{block}");
            writer.line(write).await;
            waiter.reply().await;
        }
        assert_eq!(waiter.line("BLPOP nothing 0.01").await, "*-1\r\n");
        writer.line("SET after x").await;
    })
    .await;
    assert_eq!(
        stream,
        [
            "LPUSH mylist a b c",
            "LPOP mylist 3",
            "RPUSH l x y",
            "LPOP l",
            "RPUSH src x",
            "LMOVE src dst LEFT RIGHT",
            "ZADD z 1 a 2 b",
            "ZPOPMAX z",
            "ZADD z2 1 a 2 b",
            "ZPOPMIN z2 2",
            "SET after x",
        ]
    );
}

/// A server that becomes a replica lets its blocked clients go with
/// Redis's error and closes their connections.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn becoming_a_replica_unblocks_and_disconnects_as_redis_does() {
    let Some(redis) = RedisServer::start() else {
        return;
    };
    let tally = TestServer::start_real_clock().await;
    let mut seen = Vec::new();
    for addr in [redis.addr, tally.addr()] {
        let mut admin = RawConn::connect(addr).await;
        let mut blocked = RawConn::connect(addr).await;
        blocked
            .send(&tally_tests::encode_command(&words("BLPOP k 0")))
            .await;
        assert!(admin.wait_blocked_clients(1).await);
        // Nothing listens on port 1: the link stays down, which is all the
        // test needs.
        assert_eq!(admin.line("REPLICAOF 127.0.0.1 1").await, "+OK\r\n");
        let last = blocked.read_until_closed().await;
        assert!(admin.wait_blocked_clients(0).await);
        assert_eq!(admin.line("REPLICAOF NO ONE").await, "+OK\r\n");
        seen.push(String::from_utf8_lossy(&last).into_owned());
    }
    assert_eq!(
        seen[0],
        "-UNBLOCKED force unblock from blocking operation, instance state changed (master -> replica?)\r\n"
    );
    assert_eq!(seen[0], seen[1]);
}

/// Waiters that time out while writers push: every element pushed is
/// either popped by exactly one waiter or still in the list, whichever way
/// a timeout and a push race (a waiter being served when its timeout
/// passes gets the element, not a timeout).
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn racing_timeouts_and_pushes_lose_and_duplicate_nothing() {
    let tally = TestServer::start_real_clock().await;
    let addr = tally.addr();
    const PUSHED_EACH: usize = 300;
    let mut waiters = Vec::new();
    for _ in 0..6 {
        waiters.push(tokio::spawn(async move {
            let mut conn = RawConn::connect(addr).await;
            let mut got = Vec::new();
            let deadline = Instant::now() + Duration::from_secs(3);
            while Instant::now() < deadline {
                let reply = conn.line("BLPOP race 0.001").await;
                if reply != "*-1\r\n" {
                    let value = reply.rsplit("\r\n").nth(1).expect("a value").to_string();
                    got.push(value);
                }
            }
            got
        }));
    }
    let mut writers = Vec::new();
    for writer in 0..2 {
        writers.push(tokio::spawn(async move {
            let mut conn = RawConn::connect(addr).await;
            for i in 0..PUSHED_EACH {
                conn.line(&format!("RPUSH race {writer}-{i}")).await;
                if i % 10 == 0 {
                    tokio::time::sleep(Duration::from_millis(1)).await;
                }
            }
        }));
    }
    for writer in writers {
        writer.await.expect("writer");
    }
    let mut seen = Vec::new();
    for waiter in waiters {
        seen.extend(waiter.await.expect("waiter"));
    }
    // Most elements reach a waiter (the rest would be a test of nothing).
    assert!(seen.len() > PUSHED_EACH, "only {} popped", seen.len());
    let mut conn = RawConn::connect(addr).await;
    let left = conn.cmd(&["LRANGE", "race", "0", "-1"]).await;
    let left = String::from_utf8_lossy(&left).into_owned();
    seen.extend(
        left.split("\r\n")
            .filter(|w| w.contains('-') && !w.starts_with('$') && !w.starts_with('*'))
            .map(str::to_string),
    );
    let total = seen.len();
    seen.sort();
    seen.dedup();
    assert_eq!(total, seen.len(), "an element was delivered twice");
    assert_eq!(seen.len(), 2 * PUSHED_EACH, "an element was lost");
    assert!(conn.wait_blocked_clients(0).await);
}

/// A client that blocks on a key others already wait for queues behind
/// them, and serves the queue itself when the key holds something: here a
/// sorted-set waiter keeps waiting on a key that became a list, and a list
/// pop on it is answered at once, as in Redis. (The same path keeps a
/// client from taking an element that a write made ready for earlier
/// waiters before they were served, which Redis's single thread never
/// lets happen: its unit type/list's "BRPOPLPUSH with multiple blocked
/// clients".)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_queues_behind_earlier_waiters_and_is_served() {
    assert_same(
        "
        0> DEL k
        1! BZPOPMIN k 0
        blocked 1
        0> LPUSH k a b
        2> BLPOP k 0
        2> BRPOPLPUSH k k2 0
        0> EXISTS k
        0> ZADD k 1 m
        1<
        0> LRANGE k2 0 -1
        ",
    )
    .await;
}
