//! SORT and SORT_RO against a real redis-server, reply for reply: every
//! option, the BY and GET patterns (hash fields too), LIMIT's edges, STORE,
//! the errors, and the ACL rule for patterns (Redis's fix for
//! CVE-2023-41053). Sets are kept to integers (an intset's order is
//! Redis's too) wherever their own order would show. An out-of-range
//! weight comes last: Redis tests strtod's errno without clearing it, so
//! after one ERANGE its next numeric sorts fail too.

use tally_tests::{assert_script_matches_redis, TestServer};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sorting_lists_sets_and_sorted_sets_matches_redis() {
    assert_script_matches_redis(
        r#"
        RPUSH l 3 1 2 10 -5 2.5 1e2
        SORT l
        SORT l DESC
        SORT l ALPHA
        SORT l ALPHA DESC
        SORT l LIMIT 0 3
        SORT l LIMIT 2 3 DESC
        SORT l LIMIT -1 2
        SORT l LIMIT 5 100
        SORT l LIMIT 7 1
        SORT l LIMIT 100 1
        SORT l LIMIT 0 0
        SORT l LIMIT 0 -1
        SORT l LIMIT 0 -5
        SORT l LIMIT 1
        SORT l LIMIT a 1
        SORT l LIMIT 1 a
        SORT l BY nosort
        SORT l BY nosort DESC
        SORT l BY nosort LIMIT 1 3
        SORT l BY nosort LIMIT 1 3 DESC
        SORT l BY nosort LIMIT 10 3
        SORT l ASC DESC ASC
        SORT l FOO
        SORT_RO l
        SORT_RO l DESC LIMIT 1 2
        SORT_RO l STORE x
        RPUSH words banana apple cherry apple
        SORT words
        SORT words ALPHA
        SORT words ALPHA DESC LIMIT 1 2
        SADD ints 5 -3 100 7 0
        SORT ints
        SORT ints DESC
        SORT ints BY nosort
        SORT ints BY nosort LIMIT 1 2
        SADD names bob alice carol
        SORT names ALPHA
        SORT names ALPHA DESC
        SORT names BY nosort STORE stored
        LRANGE stored 0 -1
        ZADD z 3 c 1 a 2 b 10 j
        SORT z ALPHA
        SORT z BY nosort
        SORT z BY nosort DESC
        SORT z BY nosort LIMIT 1 2
        SORT z BY nosort LIMIT 1 2 DESC
        ZADD zn 1 30 2 10 3 20
        SORT zn
        SORT zn DESC LIMIT 0 2
        SORT missing
        SORT missing ALPHA STORE dst
        EXISTS dst
        SET str x
        SORT str
        HSET h f v
        SORT h
        SORT_RO h
        "#,
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn by_and_get_patterns_match_redis() {
    assert_script_matches_redis(
        r#"
        RPUSH ids 1 2 3 4
        MSET w_1 40 w_2 10 w_3 30 w_4 20
        MSET name_1 one name_2 two name_3 three
        HSET obj_1 age 30 name ann
        HSET obj_2 age 20 name bob
        HSET obj_3 age 40
        HSET obj_4 age 10 name dan
        SORT ids BY w_*
        SORT ids BY w_* DESC
        SORT ids BY w_* LIMIT 1 2
        SORT ids BY w_* GET name_*
        SORT ids BY w_* GET # GET name_* GET obj_*->name
        SORT ids BY obj_*->age GET obj_*->name
        SORT ids BY obj_*->age DESC GET # GET obj_*->missing
        SORT ids BY obj_*-> GET obj_*->
        SORT ids BY missing_*
        SORT ids BY missing_* ALPHA
        SORT ids BY name_* ALPHA
        SORT ids BY name_* ALPHA DESC
        SORT ids BY name_*
        SORT ids GET fixed
        SORT ids GET #
        SORT ids GET name_* GET name_*
        SORT ids BY w_* GET name_* STORE out
        LRANGE out 0 -1
        SORT ids BY w_* GET missing_* STORE out
        LRANGE out 0 -1
        SORT ids LIMIT 0 0 STORE out
        EXISTS out
        SET w_2 notanumber
        SORT ids BY w_*
        SORT ids BY w_* ALPHA
        SET w_2 5.
        SORT ids BY w_*
        SET w_2 -inf
        SORT ids BY w_*
        SET w_2 nan
        SORT ids BY w_*
        SET w_2 0x10
        SORT ids BY w_*
        RPUSH bad 1 x 3
        SORT bad
        SORT bad ALPHA
        LPUSH h_w 1
        SORT ids BY h_*
        SORT_RO ids BY w_* GET name_*
        SET w_2 1e400
        SORT ids BY w_*
        "#,
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn keys_and_acl_match_redis() {
    assert_script_matches_redis(
        r#"
        COMMAND GETKEYS SORT abc STORE def
        COMMAND GETKEYS SORT_RO abc
        COMMAND GETKEYS SORT abc STORE invalid STORE stillbad STORE def
        COMMAND GETKEYS SORT abc GET store BY store LIMIT store store STORE x
        COMMAND GETKEYS SORT abc STORE
        ACL SETUSER limited on nopass ~ids* ~w_* +@all
        ACL SETUSER readall on nopass %R~* +@all
        ACL SETUSER writer on nopass ~src %W~dst +@all
        RPUSH ids 2 1
        AUTH limited x
        SORT ids
        SORT ids BY nosort
        SORT ids BY w_*
        SORT ids GET #
        SORT ids GET w_*
        SORT_RO ids BY w_*
        SORT ids STORE elsewhere
        AUTH readall x
        SORT ids BY w_* GET #
        SORT_RO ids BY w_*
        SORT ids STORE idscopy
        AUTH writer x
        RPUSH src 1
        SORT src STORE dst
        SORT dst
        "#,
    )
    .await;
}

/// A SORT that STOREs is logged and replayed; one that only reads is not
/// logged at all.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn only_a_stored_sort_reaches_the_log() {
    use tally_tests::keyspace::{aof_increment, logged_server};
    let dir = tally_tests::scratch_dir();
    let server: TestServer = logged_server(&dir).await;
    let mut conn = server.raw().await;
    conn.line("RPUSH l 3 1 2").await;
    assert_eq!(
        conn.line("SORT l").await,
        "*3\r\n$1\r\n1\r\n$1\r\n2\r\n$1\r\n3\r\n"
    );
    assert_eq!(conn.line("SORT l DESC STORE d").await, ":3\r\n");
    let log = aof_increment(&dir);
    assert!(
        log.ends_with("*5\r\n$4\r\nSORT\r\n$1\r\nl\r\n$4\r\nDESC\r\n$5\r\nSTORE\r\n$1\r\nd\r\n"),
        "{log:?}"
    );
    assert_eq!(
        log.matches("SORT").count(),
        1,
        "a sort without STORE is not logged: {log:?}"
    );
}
