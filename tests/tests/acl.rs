//! ACL against redis-server 7.0: the ACL commands' replies and errors,
//! AUTH and HELLO with users, NOPERM for commands, keys and channels at top
//! level, in transactions and in scripts, ACL LOG entries, and the gateway
//! user of docs/security.md on the native limiter path.
//!
//! Where Redis's own output depends on its command dictionary's iteration
//! order (seeded at random per process: the single-command part of a
//! described rule set, ACL CAT's list), the words are compared as sets.

use std::collections::BTreeSet;

use tally_tests::{assert_no_mismatch, assert_script_matches_redis, compare_streams, RawConn};
use tally_tests::{RedisServer, TestServer};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn acl_commands_match_redis() {
    assert_script_matches_redis(
        "
        ACL WHOAMI
        ACL USERS
        ACL LIST
        ACL GETUSER default
        ACL SETUSER alice on >p1 ~rl:* %R~cfg:* %W~log:* -@all +evalsha
        ACL GETUSER alice
        ACL LIST
        ACL SETUSER bob
        ACL GETUSER bob
        ACL SETUSER bob +nosuchcommand
        ACL SETUSER bob +@nosuchcategory
        ACL SETUSER bob allkeys ~more
        ACL SETUSER bob allchannels &more
        ACL SETUSER bob #abc
        ACL SETUSER bob <never-set
        ACL SETUSER bob %X~k
        ACL SETUSER bob +config|get|x
        ACL SETUSER bob (~a +get
        ACL SETUSER bob on nopass (~a +get) (%R~b +get)
        ACL GETUSER bob
        ACL SETUSER bob clearselectors
        ACL GETUSER bob
        ACL SETUSER bob reset
        ACL GETUSER bob
        ACL SETUSER b\u{0}x on
        ACL GETUSER nobody
        ACL DRYRUN alice evalsha abc 1 rl:1
        ACL DRYRUN alice evalsha abc 1 other
        ACL DRYRUN alice get rl:1
        ACL DRYRUN alice flushall
        ACL DRYRUN nobody get x
        ACL DRYRUN alice nosuchcommand
        ACL DRYRUN alice get
        ACL SETUSER carol on nopass ~* -@all +set +get +publish &news:*
        ACL DRYRUN carol set k v
        ACL DRYRUN carol publish news:1 x
        ACL DRYRUN carol publish other x
        ACL SETUSER dave on nopass %W~w:* %R~r:* +@all
        ACL DRYRUN dave set w:1 v
        ACL DRYRUN dave set w:1 v GET
        ACL DRYRUN dave get w:1
        ACL DRYRUN dave get r:1
        ACL DRYRUN dave copy r:1 w:1
        ACL DRYRUN dave copy w:1 r:1
        ACL CAT nosuchcategory
        ACL GENPASS 0
        ACL GENPASS 5000
        ACL GENPASS x
        ACL LOG x
        ACL LOAD
        ACL SAVE
        ACL DELUSER default
        ACL DELUSER bob nobody
        ACL USERS
        ACL HELP
        ACL NOSUCH
        ",
    )
    .await;
}

/// `acl-pubsub-default`: under `allchannels` a new user, a new selector
/// and `reset` start from every channel, under `resetchannels` from none;
/// users made before the change keep what they have. Reply for reply as
/// redis-server's.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn acl_pubsub_default_decides_what_new_users_start_with() {
    assert_script_matches_redis(
        "
        CONFIG GET acl-pubsub-default
        ACL SETUSER before
        CONFIG SET acl-pubsub-default allchannels
        CONFIG GET acl-pubsub-default
        ACL SETUSER u1
        ACL SETUSER u2 on nopass resetchannels &x reset
        ACL SETUSER u3 (+get ~k)
        ACL LIST
        ACL SETUSER before reset
        ACL GETUSER before
        CONFIG SET acl-pubsub-default RESETCHANNELS
        CONFIG GET acl-pubsub-default
        ACL SETUSER u4 (+get)
        ACL SETUSER u1 reset
        ACL LIST
        CONFIG SET acl-pubsub-default somechannels
        CONFIG SET acl-pubsub-default
        ",
    )
    .await;
}

/// Each way a check finds a call's keys (one key spec from a fixed
/// argument, a key count, a stride, several specs, a keyword search) and
/// each way a pattern matches (a short or long literal prefix, a glob),
/// decided as Redis decides: the empty key too, which Redis's glob never
/// matches with a bare `*`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn keys_are_found_and_matched_as_redis_does() {
    let Some(redis) = RedisServer::start() else {
        return;
    };
    let tally = TestServer::start_real_clock().await;
    let mut stream = tally_tests::script(
        "
        ACL SETUSER erin on nopass %R~* %W~w:* ~12345678* ~longprefix:* ~g?ob:[ab]* +@all
        ACL DRYRUN erin get r:1
        ACL DRYRUN erin set r:1 v
        ACL DRYRUN erin set w:1 v
        ACL DRYRUN erin set w:1 v GET
        ACL DRYRUN erin set 12345678 v
        ACL DRYRUN erin set 1234567 v
        ACL DRYRUN erin set 12345678x v
        ACL DRYRUN erin set longprefix:1 v
        ACL DRYRUN erin set longprefix v
        ACL DRYRUN erin set glob:a1 v
        ACL DRYRUN erin set glob:c1 v
        ACL DRYRUN erin mset w:1 a w:2 b
        ACL DRYRUN erin mset w:1 a r:2 b
        ACL DRYRUN erin eval return 2 w:1 w:2
        ACL DRYRUN erin eval return 2 w:1 r:2
        ACL DRYRUN erin eval return 0
        ACL DRYRUN erin eval return x w:1
        ACL DRYRUN erin eval return 3 w:1
        ACL DRYRUN erin lmove r:1 w:1 left right
        ACL DRYRUN erin lmove w:1 r:1 left right
        ACL DRYRUN erin rename w:1 w:2
        ACL DRYRUN erin rename w:1 r:2
        ACL DRYRUN erin sinterstore w:9 r:1 r:2
        ACL DRYRUN erin sinterstore r:9 r:1 r:2
        ACL DRYRUN erin zrangestore w:9 r:1 0 -1
        ACL DRYRUN erin migrate 127.0.0.1 1 w:1 0 5
        ACL DRYRUN erin migrate 127.0.0.1 1 r:1 0 5
        ACL SETUSER frank on nopass %R~* +@all
        ",
    );
    let dryrun = |user: &str, words: &[&[u8]]| {
        let mut argv = vec![
            b"ACL".to_vec(),
            b"DRYRUN".to_vec(),
            user.as_bytes().to_vec(),
        ];
        argv.extend(words.iter().map(|w| w.to_vec()));
        argv
    };
    stream.push(dryrun("erin", &[b"get", b""]));
    stream.push(dryrun("erin", &[b"set", b"", b"v"]));
    stream.push(dryrun(
        "erin",
        &[
            b"migrate",
            b"127.0.0.1",
            b"1",
            b"",
            b"0",
            b"5",
            b"keys",
            b"w:1",
            b"w:2",
        ],
    ));
    stream.push(dryrun(
        "erin",
        &[
            b"migrate",
            b"127.0.0.1",
            b"1",
            b"",
            b"0",
            b"5",
            b"keys",
            b"w:1",
            b"r:2",
        ],
    ));
    stream.push(dryrun("frank", &[b"get", b""]));
    stream.push(dryrun("frank", &[b"get", b"k"]));
    let mismatches = compare_streams(redis.addr, tally.addr(), &stream).await;
    assert_no_mismatch(&mismatches);
}

/// A command taken away after `+@all` is denied (a rule the check once
/// skipped: `+@all` let every command through whatever followed it), and
/// ACL LIST describes the rules as Redis does; given back, it is allowed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn commands_taken_away_after_all_commands_are_denied() {
    let Some(redis) = RedisServer::start() else {
        return;
    };
    let tally = TestServer::start_real_clock().await;
    let stream = tally_tests::script(
        "
        ACL SETUSER gina on nopass ~* +@all -get -psync -@dangerous
        ACL DRYRUN gina get k
        ACL DRYRUN gina set k v
        ACL DRYRUN gina psync ? -1
        ACL DRYRUN gina flushall
        ACL DRYRUN gina client|list
        ACL GETUSER gina
        ACL LIST
        ACL SETUSER gina +get +@dangerous
        ACL DRYRUN gina get k
        ACL DRYRUN gina flushall
        ACL DRYRUN gina psync ? -1
        ACL LIST
        ACL SETUSER default -set
        ACL DRYRUN default set k v
        ACL DRYRUN default get k
        ACL LIST
        ACL SETUSER default +set
        ACL LIST
        ",
    );
    assert_no_mismatch(&compare_streams(redis.addr, tally.addr(), &stream).await);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn users_are_refused_what_their_rules_deny() {
    assert_script_matches_redis(
        "
        ACL SETUSER alice on >p1 ~rl:* %R~cfg:* -@all +get +set +multi +exec +publish +subscribe +psubscribe &news:* +acl|whoami
        AUTH alice wrong
        AUTH nobody p1
        AUTH alice p1
        ACL WHOAMI
        SET rl:1 5
        GET rl:1
        GET other
        SET cfg:1 v
        GET cfg:1
        FLUSHALL
        CONFIG GET maxmemory
        PUBLISH news:1 hi
        PUBLISH other hi
        MULTI
        GET rl:1
        FLUSHALL
        EXEC
        MULTI
        SET rl:2 1
        GET other
        EXEC
        HELLO 2 AUTH alice wrong
        HELLO 2 AUTH default anything
        ACL WHOAMI
        SET other 1
        ACL SETUSER alice -get
        AUTH alice p1
        GET rl:1
        AUTH default x
        ACL SETUSER alice off
        AUTH alice p1
        ",
    )
    .await;
}

/// A script's redis.call runs as the caller: a refused command is the
/// script's error, in Redis's words; transactions re-check at EXEC.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn scripts_and_transactions_run_as_their_user() {
    let Some(redis) = RedisServer::start() else {
        return;
    };
    let tally = TestServer::start_real_clock().await;
    let commands: Vec<Vec<Vec<u8>>> = [
        &[
            "ACL", "SETUSER", "eve", "on", ">pw", "~rl:*", "-@all", "+eval", "+get", "+multi",
            "+exec",
        ][..],
        &["AUTH", "eve", "pw"],
        &["EVAL", "return redis.call('get', KEYS[1])", "1", "rl:1"],
        &[
            "EVAL",
            "return redis.call('set', KEYS[1], 'x')",
            "1",
            "rl:1",
        ],
        &["EVAL", "return redis.call('get', 'other')", "0"],
        &["EVAL", "return redis.pcall('flushall')", "0"],
        &["MULTI"],
        &["GET", "rl:1"],
        &["EXEC"],
    ]
    .iter()
    .map(|c| c.iter().map(|a| a.as_bytes().to_vec()).collect())
    .collect();
    assert_no_mismatch(&compare_streams(redis.addr, tally.addr(), &commands).await);
    // Permissions taken away between MULTI and EXEC refuse the command at
    // EXEC (NOPERM in its slot), as Redis re-checks there.
    let mut redis_admin = RawConn::connect(redis.addr).await;
    let mut tally_admin = RawConn::connect(tally.addr()).await;
    let mut redis_eve = RawConn::connect(redis.addr).await;
    let mut tally_eve = RawConn::connect(tally.addr()).await;
    for conn in [&mut redis_eve, &mut tally_eve] {
        assert_eq!(conn.cmd(&["AUTH", "eve", "pw"]).await, b"+OK\r\n");
        assert_eq!(conn.cmd(&["MULTI"]).await, b"+OK\r\n");
        assert_eq!(conn.cmd(&["GET", "rl:1"]).await, b"+QUEUED\r\n");
    }
    for conn in [&mut redis_admin, &mut tally_admin] {
        assert_eq!(
            conn.cmd(&["ACL", "SETUSER", "eve", "-get"]).await,
            b"+OK\r\n"
        );
    }
    let expected = redis_eve.cmd(&["EXEC"]).await;
    assert_eq!(
        String::from_utf8_lossy(&tally_eve.cmd(&["EXEC"]).await),
        String::from_utf8_lossy(&expected)
    );
}

/// ACL LOG: one entry per kind of refusal, merged counts, Redis's fields
/// (client-info and age compared apart: they differ by nature).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn refusals_are_logged_as_redis_logs_them() {
    let Some(redis) = RedisServer::start() else {
        return;
    };
    let tally = TestServer::start_real_clock().await;
    let mut logs = Vec::new();
    for addr in [redis.addr, tally.addr()] {
        let mut conn = RawConn::connect(addr).await;
        for command in [
            &[
                "ACL", "SETUSER", "mallory", "on", ">pw", "~rl:*", "-@all", "+get", "+eval",
                "+publish",
            ][..],
            &["AUTH", "mallory", "nope"],
            &["AUTH", "mallory", "pw"],
            &["GET", "secret"],
            &["GET", "secret"],
            &["FLUSHALL"],
            &["PUBLISH", "ch", "x"],
            &["EVAL", "return redis.pcall('get', 'secret')", "0"],
            &["AUTH", "default", "x"],
        ] {
            conn.cmd(command).await;
        }
        let mut client = tally_tests::keyspace::patient(
            &redis::Client::open(format!("redis://{addr}/")).expect("client"),
        )
        .await
        .expect("connection");
        let entries: Vec<Vec<redis::Value>> = redis::cmd("ACL")
            .arg("LOG")
            .query_async(&mut client)
            .await
            .expect("ACL LOG");
        let described: Vec<Vec<String>> = entries
            .iter()
            .map(|entry| {
                entry
                    .chunks(2)
                    .filter_map(|pair| {
                        let key: String = redis::from_redis_value_ref(&pair[0]).ok()?;
                        if key == "age-seconds" || key == "client-info" {
                            let value: String = redis::from_redis_value_ref(&pair[1]).ok()?;
                            assert!(!value.is_empty(), "{key}");
                            return Some(key);
                        }
                        let value: String = redis::from_redis_value_ref(&pair[1]).ok()?;
                        Some(format!("{key}={value}"))
                    })
                    .collect()
            })
            .collect();
        logs.push(described);
    }
    assert_eq!(logs[1], logs[0]);
    assert_eq!(logs[0].len(), 5, "{:?}", logs[0]);
}

/// Where Redis's order is its dictionary's (random per process): the
/// words of described rules and ACL CAT's commands, as sets.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn described_rules_and_categories_hold_redis_s_words() {
    let Some(redis) = RedisServer::start() else {
        return;
    };
    let tally = TestServer::start_real_clock().await;
    let setup: &[&[&str]] = &[
        &[
            "ACL",
            "SETUSER",
            "gw",
            "on",
            ">pw",
            "~rl:*",
            "-@all",
            "+evalsha",
            "+evalsha_ro",
            "+get",
            "+incr",
            "+expire",
            "+time",
            "+script|load",
        ],
        &[
            "ACL",
            "SETUSER",
            "ops",
            "on",
            ">pw",
            "~*",
            "&*",
            "+@all",
            "-@dangerous",
            "+info",
            "-flushall",
        ],
        &[
            "ACL",
            "SETUSER",
            "reader",
            "on",
            ">pw",
            "~*",
            "+@read",
            "+@connection",
            "-@slow",
        ],
    ];
    // Every command and subcommand tally has.
    let tally_commands: BTreeSet<String> = tally_server::catalog::registry()
        .all()
        .map(|c| c.name.to_string())
        .collect();
    // A `+cmd`/`-cmd` word of a command tally does not have is Redis's
    // alone.
    // And a word of a command newer than Redis 7.0 is tally's alone.
    let known = |word: &String| {
        let name = word.trim_start_matches(['+', '-']);
        !word.starts_with(['+', '-'])
            || name.starts_with('@')
            || (tally_commands.contains(name) && !NEWER_THAN_7_0.iter().any(|(n, _)| *n == name))
    };
    let mut described = Vec::new();
    for addr in [redis.addr, tally.addr()] {
        let mut conn = RawConn::connect(addr).await;
        for command in setup {
            assert_eq!(conn.cmd(command).await, b"+OK\r\n");
        }
        let list = String::from_utf8_lossy(&conn.cmd(&["ACL", "LIST"]).await).into_owned();
        let words: Vec<BTreeSet<String>> = list
            .lines()
            .filter(|l| l.starts_with("user "))
            .map(|l| l.split(' ').map(str::to_string).filter(known).collect())
            .collect();
        let mut categories = Vec::new();
        for category in [
            "scripting",
            "read",
            "write",
            "dangerous",
            "connection",
            "slow",
            "fast",
            "keyspace",
            "pubsub",
            "admin",
            "transaction",
        ] {
            let reply = conn.cmd(&["ACL", "CAT", category]).await;
            let names: BTreeSet<String> = String::from_utf8_lossy(&reply)
                .lines()
                .filter(|l| !l.starts_with('*') && !l.starts_with('$'))
                .map(str::to_string)
                .collect();
            categories.push((category, names));
        }
        described.push((words, categories));
    }
    assert_eq!(described[1].0, described[0].0, "ACL LIST words");
    // tally has fewer commands than Redis: its categories are Redis's
    // restricted to the commands tally has.
    for ((category, redis_names), (_, tally_names)) in described[0].1.iter().zip(&described[1].1) {
        // CLIENT SETINFO is Redis 7.2's (docs/compatibility.md); CL.THROTTLE
        // is redis-cell's, @write and @fast, which a Redis without the module
        // does not have; INCREX is Redis 8.8's, @write @string @fast, and
        // HGETDEL Redis 8.0's, @write @hash @fast.
        let mut tally_names = tally_names.clone();
        tally_names.remove("client|setinfo");
        assert_eq!(
            tally_names.remove("client|no-touch"),
            matches!(*category, "connection" | "slow"),
            "CLIENT NO-TOUCH in @{category}"
        );
        assert_eq!(
            tally_names.remove("hgetdel"),
            matches!(*category, "write" | "hash" | "fast"),
            "HGETDEL in @{category}"
        );
        assert_eq!(
            tally_names.remove("cl.throttle"),
            matches!(*category, "write" | "fast"),
            "CL.THROTTLE in @{category}"
        );
        assert_eq!(
            tally_names.remove("increx"),
            matches!(*category, "write" | "string" | "fast"),
            "INCREX in @{category}"
        );
        // Commands of Redis 7.4, 8.0 and 8.4, in the categories Redis 8
        // puts them in.
        for (name, categories) in NEWER_THAN_7_0 {
            assert_eq!(
                tally_names.remove(name),
                categories.contains(category),
                "{name} in @{category}"
            );
        }
        let tally_names = &tally_names;
        let known: BTreeSet<String> = redis_names
            .iter()
            .filter(|n| tally_commands.contains(*n))
            .cloned()
            .collect();
        assert!(
            tally_names.is_subset(redis_names),
            "@{category}: {:?}",
            tally_names.difference(redis_names).collect::<Vec<_>>()
        );
        assert_eq!(tally_names, &known, "@{category}");
    }
}

/// The least-privilege gateway user of docs/security.md runs the
/// sliding-window limiter script on `rl:*` (natively), and nothing else.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_gateway_user_runs_the_limiter_and_nothing_else() {
    let tally = TestServer::start_real_clock().await;
    let script = tally_lua::SCRIPTS
        .iter()
        .find(|s| s.name == "sliding_window")
        .expect("the sliding-window script");
    let mut admin = RawConn::connect(tally.addr()).await;
    assert_eq!(
        admin
            .cmd(&[
                "ACL",
                "SETUSER",
                "gateway",
                "on",
                ">gw-secret",
                "~rl:*",
                "resetchannels",
                "-@all",
                "+evalsha",
                "+script|load",
                "+get",
                "+incr",
                "+expire"
            ])
            .await,
        b"+OK\r\n"
    );
    let mut gateway = RawConn::connect(tally.addr()).await;
    assert_eq!(
        gateway.cmd(&["AUTH", "gateway", "gw-secret"]).await,
        b"+OK\r\n"
    );
    let sha = gateway.cmd(&["SCRIPT", "LOAD", script.source]).await;
    let sha = String::from_utf8_lossy(&sha)
        .lines()
        .nth(1)
        .expect("a sha")
        .to_string();
    let call = |k1: &'static str, k2: &'static str| {
        vec![
            "EVALSHA".to_string(),
            sha.clone(),
            "2".into(),
            k1.into(),
            k2.into(),
            "10".into(),
            "60".into(),
            "1720000000".into(),
            "1".into(),
        ]
    };
    let allowed = gateway
        .cmd(&call("rl:u:1720000000", "rl:u:1719999940"))
        .await;
    assert!(
        allowed.starts_with(b"*3\r\n:1\r\n"),
        "{:?}",
        String::from_utf8_lossy(&allowed)
    );
    // It ran natively (the batch's counters reach INFO after the batch).
    let info = String::from_utf8_lossy(&admin.cmd(&["INFO", "limiter_scripts"]).await).into_owned();
    assert!(
        info.contains(&format!(
            "script_sliding_window:sha={sha},native_runs=1,lua_runs=0"
        )),
        "{info}"
    );
    let outside = gateway.cmd(&call("other:1", "other:0")).await;
    assert_eq!(
        outside,
        b"-NOPERM this user has no permissions to access one of the keys used as arguments\r\n"
    );
    for (command, denied) in [
        (&["FLUSHALL"][..], "flushall"),
        (&["CONFIG", "GET", "maxmemory"][..], "config|get"),
        (&["KEYS", "*"][..], "keys"),
    ] {
        assert_eq!(
            String::from_utf8_lossy(&gateway.cmd(command).await),
            format!("-NOPERM this user has no permissions to run the '{denied}' command\r\n")
        );
    }
    // Without INCR the Lua run would fail: so does the native run, with
    // the Lua run's error.
    assert_eq!(
        admin.cmd(&["ACL", "SETUSER", "gateway", "-incr"]).await,
        b"+OK\r\n"
    );
    let refused = gateway
        .cmd(&call("rl:u:1720000000", "rl:u:1719999940"))
        .await;
    assert!(
        String::from_utf8_lossy(&refused)
            .starts_with("-ERR The user executing the script can't run this command or subcommand"),
        "{:?}",
        String::from_utf8_lossy(&refused)
    );
}

/// docs/security.md's gateway user syncs leases (tally-client's cached
/// mode) on the native path; without DECRBY it still tops leases up (Lua
/// runs instead, and makes no DECRBY), and a give-back is refused with the
/// Lua run's error.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_gateway_user_syncs_leases_natively() {
    let tally = TestServer::start_real_clock().await;
    let mut admin = RawConn::connect(tally.addr()).await;
    let rules = "on >gw ~rl:* %R~tally:rules resetchannels &tally:rules -@all +evalsha +eval \
                 +script|load +get +incrby +decrby +expire +time +subscribe +ping";
    let mut setuser = vec!["ACL", "SETUSER", "gateway"];
    setuser.extend(rules.split_whitespace());
    assert_eq!(admin.cmd(&setuser).await, b"+OK\r\n");
    let mut gateway = RawConn::connect(tally.addr()).await;
    assert_eq!(gateway.cmd(&["AUTH", "gateway", "gw"]).await, b"+OK\r\n");
    let sha = tally_lua::sha1_hex(tally_lua::lease::SOURCE);
    // One limit of 100/min: current, previous and reserved-on key; give
    // back `back`, want 10, cost 1.
    let call = |back: &str| -> Vec<String> {
        let mut argv: Vec<String> = vec!["EVALSHA".into(), sha.clone(), "3".into()];
        argv.extend(["rl:{u}:1", "rl:{u}:0", "rl:{u}:1"].map(String::from));
        argv.extend(["100", "60", back, "10", "1"].map(String::from));
        argv
    };
    let granted = |reply: &[u8]| String::from_utf8_lossy(reply).into_owned();
    let first = granted(&gateway.cmd(&call("0")).await);
    assert!(first.starts_with("*7\r\n:1\r\n"), "{first:?}");
    let second = granted(&gateway.cmd(&call("5")).await);
    assert!(second.starts_with("*7\r\n:1\r\n"), "{second:?}");
    // 11 leased and counted, 5 given back, 11 more: 17.
    assert_eq!(admin.cmd(&["GET", "rl:{u}:1"]).await, b"$2\r\n17\r\n");
    let info = granted(&admin.cmd(&["INFO", "limiter_scripts"]).await);
    assert!(
        info.contains(&format!("script_lease:sha={sha},native_runs=2,lua_runs=0")),
        "{info}"
    );
    assert_eq!(
        admin.cmd(&["ACL", "SETUSER", "gateway", "-decrby"]).await,
        b"+OK\r\n"
    );
    let top_up = granted(&gateway.cmd(&call("0")).await);
    assert!(top_up.starts_with("*7\r\n:1\r\n"), "{top_up:?}");
    let refused = granted(&gateway.cmd(&call("5")).await);
    assert!(
        refused
            .starts_with("-ERR The user executing the script can't run this command or subcommand"),
        "{refused:?}"
    );
    assert_eq!(admin.cmd(&["GET", "rl:{u}:1"]).await, b"$2\r\n28\r\n");
}

/// A user with two selectors (so each call the script would make is
/// checked on its key) runs rate-limiter-flexible's script natively; once
/// EXPIRE is taken away, a call that would not reach EXPIRE still succeeds
/// (in Lua) and one that would is refused with the Lua run's error.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_user_with_selectors_runs_a_library_script_natively_within_its_rights() {
    let tally = TestServer::start_real_clock().await;
    let mut admin = RawConn::connect(tally.addr()).await;
    let rules = "on >gw ~rlflx:* resetchannels -@all +evalsha +set +incrby +pttl +expire                  (~audit:* +get)";
    let mut setuser = vec!["ACL", "SETUSER", "gateway"];
    setuser.extend(rules.split_whitespace());
    assert_eq!(admin.cmd(&setuser).await, b"+OK\r\n");
    let mut gateway = RawConn::connect(tally.addr()).await;
    assert_eq!(gateway.cmd(&["AUTH", "gateway", "gw"]).await, b"+OK\r\n");
    let source = tally_lua::SCRIPTS
        .iter()
        .find(|s| s.name == "rate_limiter_flexible")
        .expect("rate-limiter-flexible's script")
        .source;
    let sha = tally_lua::sha1_hex(source);
    let consume = |key: &str| -> Vec<String> {
        ["EVALSHA", &sha, "1", key, "1", "60", "5", "60"]
            .map(String::from)
            .to_vec()
    };
    let show = |reply: Vec<u8>| String::from_utf8_lossy(&reply).into_owned();
    assert_eq!(
        show(gateway.cmd(&consume("rlflx:a")).await),
        "*2\r\n:1\r\n:60000\r\n"
    );
    let runs = |info: &str| {
        info.lines()
            .find(|l| l.starts_with("script_rate_limiter_flexible:"))
            .map(|l| l.split_once(',').map(|(_, runs)| runs.to_string()))
            .unwrap_or_default()
    };
    let info = show(admin.cmd(&["INFO", "limiter_scripts"]).await);
    assert_eq!(runs(&info).as_deref(), Some("native_runs=1,lua_runs=0"));
    assert_eq!(
        admin.cmd(&["ACL", "SETUSER", "gateway", "-expire"]).await,
        b"+OK\r\n"
    );
    // A new key gets its deadline from SET: the Lua run never calls EXPIRE.
    assert_eq!(
        show(gateway.cmd(&consume("rlflx:b")).await),
        "*2\r\n:1\r\n:60000\r\n"
    );
    // A key without a deadline needs EXPIRE.
    assert_eq!(admin.cmd(&["SET", "rlflx:c", "5"]).await, b"+OK\r\n");
    let refused = show(gateway.cmd(&consume("rlflx:c")).await);
    assert!(
        refused
            .starts_with("-ERR The user executing the script can't run this command or subcommand"),
        "{refused:?}"
    );
    let info = show(admin.cmd(&["INFO", "limiter_scripts"]).await);
    assert_eq!(runs(&info).as_deref(), Some("native_runs=1,lua_runs=2"));
}

/// `aclfile`: ACL SAVE writes the users as Redis writes them, ACL LOAD
/// reads them back all or nothing (a bad line changes nothing and names
/// the line), and a server started with the file has its users.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn users_round_trip_through_the_acl_file() {
    let redis_dir = tally_tests::scratch_dir();
    let redis_file = format!("{redis_dir}/users.acl");
    std::fs::write(&redis_file, "").expect("an empty ACL file");
    let Some(redis) = RedisServer::start_with(&["--aclfile", &redis_file]) else {
        return;
    };
    let tally_dir = tally_tests::scratch_dir();
    let tally_file = format!("{tally_dir}/users.acl");
    std::fs::write(&tally_file, "").expect("an empty ACL file");
    let tally = TestServer::start_with(|c| c.aclfile = tally_file.clone()).await;
    let setup: &[&[&str]] = &[
        &[
            "ACL", "SETUSER", "gw", "on", ">pw", "~rl:*", "-@all", "+evalsha",
        ],
        &[
            "ACL", "SETUSER", "ro", "on", "nopass", "%R~*", "&news:*", "+@all",
        ],
        &["ACL", "SAVE"],
    ];
    for addr in [redis.addr, tally.addr()] {
        let mut conn = RawConn::connect(addr).await;
        for command in setup {
            assert_eq!(conn.cmd(command).await, b"+OK\r\n", "{command:?}");
        }
    }
    let saved = std::fs::read_to_string(&tally_file).expect("saved");
    assert_eq!(saved, std::fs::read_to_string(&redis_file).expect("saved"));
    // A bad line: nothing changes, the error names it, as Redis's.
    let broken = format!("{saved}user bad on +nosuchcommand\n");
    std::fs::write(&redis_file, &broken).expect("write");
    std::fs::write(&tally_file, &broken).expect("write");
    let commands: Vec<Vec<Vec<u8>>> = [&["ACL", "LOAD"][..], &["ACL", "USERS"]]
        .iter()
        .map(|c| c.iter().map(|a| a.as_bytes().to_vec()).collect())
        .collect();
    let mismatches = compare_streams(redis.addr, tally.addr(), &commands).await;
    // The file's path is in the error: compare past it.
    for m in &mismatches {
        assert_eq!(
            m.tally.replace(&tally_file, "FILE"),
            m.redis.replace(&redis_file, "FILE"),
            "{}",
            m.command
        );
    }
    // A server started with the file has its users.
    std::fs::write(&tally_file, &saved).expect("write");
    let again = TestServer::start_with(|c| c.aclfile = tally_file.clone()).await;
    let mut conn = RawConn::connect(again.addr()).await;
    assert_eq!(conn.cmd(&["AUTH", "gw", "pw"]).await, b"+OK\r\n");
    assert_eq!(
        conn.cmd(&["ACL", "WHOAMI"]).await,
        b"-NOPERM this user has no permissions to run the 'acl|whoami' command\r\n"
    );
}

/// `user` directives in the configuration, `requirepass` as the default
/// user's password (CONFIG SET too), CLIENT LIST's `user=`, and ACL
/// DELUSER closing the deleted user's connections.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn configured_users_requirepass_and_deleted_users() {
    let mut config = tally_server::Config::default();
    config
        .apply_text(
            "user gw on >pw ~rl:* -@all +get\nrequirepass s3cret\n",
            "test",
        )
        .expect("valid directives");
    assert!(config
        .apply_text("user broken on +nosuchcommand\n", "test")
        .is_err());
    let tally = TestServer::start_with(|c| {
        c.users = config.users.clone();
        c.requirepass = config.requirepass.clone();
    })
    .await;
    let mut anonymous = RawConn::connect(tally.addr()).await;
    assert_eq!(
        anonymous.cmd(&["GET", "k"]).await,
        b"-NOAUTH Authentication required.\r\n"
    );
    assert_eq!(anonymous.cmd(&["AUTH", "s3cret"]).await, b"+OK\r\n");
    assert_eq!(
        anonymous.cmd(&["CONFIG", "SET", "requirepass", ""]).await,
        b"+OK\r\n"
    );
    let mut fresh = RawConn::connect(tally.addr()).await;
    assert_eq!(fresh.cmd(&["ACL", "WHOAMI"]).await, b"$7\r\ndefault\r\n");
    let mut gateway = RawConn::connect(tally.addr()).await;
    assert_eq!(gateway.cmd(&["AUTH", "gw", "pw"]).await, b"+OK\r\n");
    let list = fresh.cmd(&["CLIENT", "LIST"]).await;
    assert!(
        String::from_utf8_lossy(&list).contains(" user=gw "),
        "{}",
        String::from_utf8_lossy(&list)
    );
    assert_eq!(fresh.cmd(&["ACL", "DELUSER", "gw"]).await, b":1\r\n");
    gateway
        .send(&tally_tests::encode_command(&["GET", "rl:1"]))
        .await;
    assert_eq!(gateway.read_until_closed().await, b"");
}

/// Commands newer than Redis 7.0 (Valkey 9.0's DELIFEQ, Redis 7.2's WAITAOF, 7.4's hash field expiry, 8.0's
/// HGETEX and HSETEX, 8.4's DELEX, DIGEST and MSETEX), with their ACL
/// categories in Redis 8.6.3.
const NEWER_THAN_7_0: [(&str, &[&str]); 16] = [
    ("hexpire", &["write", "hash", "fast"]),
    ("hpexpire", &["write", "hash", "fast"]),
    ("hexpireat", &["write", "hash", "fast"]),
    ("hpexpireat", &["write", "hash", "fast"]),
    ("httl", &["read", "hash", "fast"]),
    ("hpttl", &["read", "hash", "fast"]),
    ("hexpiretime", &["read", "hash", "fast"]),
    ("hpexpiretime", &["read", "hash", "fast"]),
    ("hpersist", &["write", "hash", "fast"]),
    ("hgetex", &["write", "hash", "fast"]),
    ("hsetex", &["write", "hash", "fast"]),
    ("delex", &["write", "string", "fast"]),
    ("digest", &["read", "string", "fast"]),
    ("msetex", &["write", "string", "slow"]),
    ("waitaof", &["connection", "slow"]),
    ("delifeq", &["write", "string", "slow"]),
];
