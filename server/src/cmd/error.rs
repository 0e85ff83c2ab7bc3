//! Every error text the server sends, each spelled once, exactly as Redis 7.0
//! spells it. Replies carry the code (`ERR`, `WRONGTYPE`, ...) as the first word.

/// A command that panicked (a bug, contained to its connection).
pub const INTERNAL: &str =
    "ERR internal error: the command failed unexpectedly and the connection will close";
/// `ERR syntax error`
pub const SYNTAX: &str = "ERR syntax error";
/// HINCRBYFLOAT with an infinite increment.
pub const VALUE_NAN_OR_INFINITY: &str = "ERR value is NaN or Infinity";
/// Argument not a 64-bit signed integer.
pub const NOT_INTEGER: &str = "ERR value is not an integer or out of range";
/// Argument not a float.
pub const NOT_FLOAT: &str = "ERR value is not a valid float";
/// INCR family overflow.
pub const OVERFLOW: &str = "ERR increment or decrement would overflow";
/// INCRBYFLOAT producing NaN or infinity.
pub const NAN_OR_INFINITY: &str = "ERR increment would produce NaN or Infinity";
/// Operation on a key of another type.
pub const WRONGTYPE: &str = "WRONGTYPE Operation against a key holding the wrong kind of value";
/// A string value that is not a HyperLogLog sketch (PFADD, PFCOUNT, ...).
pub const NOT_A_SKETCH: &str = "WRONGTYPE Key is not a valid HyperLogLog string value.";
/// A sparse HyperLogLog whose runs do not cover exactly its registers.
pub const CORRUPT_SKETCH: &str = "INVALIDOBJ Corrupted HLL object detected";
/// HGETDEL (and Redis 8's other FIELDS commands) without FIELDS where it
/// belongs.
pub const FIELDS_MISSING: &str =
    "ERR Mandatory argument FIELDS is missing or not at the right position";
/// RENAME of a missing key.
pub const NO_SUCH_KEY: &str = "ERR no such key";
/// SELECT / MOVE / SWAPDB / COPY DB outside 0..databases.
pub const DB_INDEX_OUT_OF_RANGE: &str = "ERR DB index is out of range";
/// noeviction refusal.
/// `min-replicas-to-write` not met.
pub const NOREPLICAS: &str = "NOREPLICAS Not enough good replicas to write.";
/// A client's write on a replica with `replica-read-only yes`.
pub const READONLY_REPLICA: &str = "READONLY You can't write against a read only replica.";
/// A command that needs fresh data on a replica whose link is down, with
/// `replica-serve-stale-data no`.
pub const MASTERDOWN: &str =
    "MASTERDOWN Link with MASTER is down and replica-serve-stale-data is set to 'no'.";
/// A write while the last background save failed (stop-writes-on-bgsave-error).
pub const MISCONF: &str = "MISCONF Redis is configured to save RDB snapshots, but it's currently unable to persist to disk. Commands that may modify the data set are disabled, because this instance is configured to report errors during writes if RDB snapshotting fails (stop-writes-on-bgsave-error option). Please check the Redis logs for details about the RDB error.";
/// A command that must wait for the snapshot to load.
pub const LOADING: &str = "LOADING Redis is loading the dataset in memory";
/// A write past maxmemory.
pub const OOM: &str = "OOM command not allowed when used memory > 'maxmemory'.";
/// A command before AUTH on a password-protected server.
pub const NOAUTH: &str = "NOAUTH Authentication required.";
/// AUTH with a wrong password.
pub const WRONGPASS: &str = "WRONGPASS invalid username-password pair or user is disabled.";
/// AUTH when no password is configured.
pub const AUTH_NOT_CONFIGURED: &str = "ERR AUTH <password> called without any password configured for the default user. Are you sure your configuration is correct?";
/// Connection refused past maxclients.
pub const MAX_CLIENTS: &str = "ERR max number of clients reached";
/// A value past proto-max-bulk-len (SETRANGE, APPEND).
pub const STRING_TOO_LONG: &str = "ERR string exceeds maximum allowed size (proto-max-bulk-len)";
/// SETRANGE with a negative offset.
pub const OFFSET_OUT_OF_RANGE: &str = "ERR offset is out of range";
/// EXPIRE NX combined with XX/GT/LT.
pub const NX_XX_GT_LT: &str = "ERR NX and XX, GT or LT options at the same time are not compatible";
/// EXPIRE GT with LT.
pub const GT_LT: &str = "ERR GT and LT options at the same time are not compatible";
/// SWAPDB with a bad index.
pub const INVALID_FIRST_DB: &str = "ERR invalid first DB index";
/// SWAPDB with a bad index.
pub const INVALID_SECOND_DB: &str = "ERR invalid second DB index";
/// RENAME/COPY with the same source and destination.
pub const SAME_OBJECT: &str = "ERR source and destination objects are the same";
/// SCAN with a cursor that is not a number.
pub const INVALID_CURSOR: &str = "ERR invalid cursor";
/// HELLO with an unsupported protocol version.
pub const NOPROTO: &str = "NOPROTO unsupported protocol version";
/// CLIENT KILL that matched nobody.
pub const NO_SUCH_CLIENT: &str = "ERR No such client";
/// CONFIG SET of a value that does not parse.
pub const CLIENT_NAME_SPACES: &str =
    "ERR Client names cannot contain spaces, newlines or special characters.";
/// GETEX with PERSIST combined with an expiry.
pub const TIMEOUT_NEGATIVE: &str = "ERR timeout is negative";

/// A count that must not be negative (LPOP, SPOP, ZPOPMIN ...).
pub const MUST_BE_POSITIVE: &str = "ERR value is out of range, must be positive";
/// HRANDFIELD/SRANDMEMBER/ZRANDMEMBER/LPOS with i64::MIN.
pub const COUNT_RANGE: &str =
    "ERR value is out of range, value must between -9223372036854775807 and 9223372036854775807";
/// ZRANDMEMBER WITHSCORES / HRANDFIELD WITHVALUES with a count past
/// ±LONG_MAX/2 (Redis's fix for CVE-2023-22458).
pub const OUT_OF_RANGE: &str = "ERR value is out of range";
/// A negative random-pick count too large to answer (tally's own limit).
pub const MUST_BE_POSITIVE_OR_SMALL: &str =
    "ERR value is out of range: a negative count may ask for at most 16777216 elements";
/// HINCRBY on a field that does not hold an integer.
pub const HASH_NOT_INTEGER: &str = "ERR hash value is not an integer";
/// HINCRBYFLOAT on a field that does not hold a float.
pub const HASH_NOT_FLOAT: &str = "ERR hash value is not a float";
/// LSET past the end of the list.
pub const INDEX_OUT_OF_RANGE: &str = "ERR index out of range";
/// ZCOUNT / ZRANGEBYSCORE bounds that do not parse.
pub const MIN_MAX_NOT_FLOAT: &str = "ERR min or max is not a float";
/// ZLEXCOUNT / ZRANGEBYLEX bounds that do not parse.
pub const MIN_MAX_NOT_STRING_RANGE: &str = "ERR min or max not valid string range item";
/// ZADD INCR / ZINCRBY giving NaN.
pub const SCORE_NAN: &str = "ERR resulting score is not a number (NaN)";
/// ZADD with both NX and XX.
pub const XX_AND_NX: &str = "ERR XX and NX options at the same time are not compatible";
/// ZADD with GT/LT and NX, or GT and LT.
pub const GT_LT_NX: &str = "ERR GT, LT, and/or NX options at the same time are not compatible";
/// ZADD INCR with several pairs.
pub const INCR_SINGLE_PAIR: &str = "ERR INCR option supports a single increment-element pair";
/// SINTERCARD / ZINTERCARD with numkeys < 1.
pub const NUMKEYS_POSITIVE: &str = "ERR numkeys should be greater than 0";
/// SINTERCARD numkeys beyond the arguments.
pub const NUMKEYS_TOO_MANY: &str = "ERR Number of keys can't be greater than number of args";
/// SINTERCARD LIMIT below 0.
pub const LIMIT_NEGATIVE: &str = "ERR LIMIT can't be negative";
/// LPOS RANK 0.
pub const RANK_ZERO: &str = "ERR RANK can't be zero: use 1 to start from the first match, 2 from the second ... or use negative to start from the end of the list";
/// LPOS COUNT below 0.
pub const COUNT_NEGATIVE: &str = "ERR COUNT can't be negative";
/// LPOS MAXLEN below 0.
pub const MAXLEN_NEGATIVE: &str = "ERR MAXLEN can't be negative";
/// ZRANGE LIMIT without BYSCORE or BYLEX.
pub const LIMIT_NEEDS_BY: &str =
    "ERR syntax error, LIMIT is only supported in combination with either BYSCORE or BYLEX";
/// ZRANGE BYLEX with WITHSCORES.
pub const BYLEX_WITHSCORES: &str =
    "ERR syntax error, WITHSCORES not supported in combination with BYLEX";

/// `ERR wrong number of arguments for '<name>' command`.
pub fn wrong_arity(full_name: &str) -> String {
    format!("ERR wrong number of arguments for '{full_name}' command")
}

/// `ERR invalid expire time in '<name>' command`.
pub fn invalid_expire(command: &str) -> String {
    format!("ERR invalid expire time in '{command}' command")
}

/// Client-supplied bytes as Redis shows them in an error: as a C string
/// (`%.*s` stops at a NUL), at most `max` bytes, raw. (CR and LF become
/// spaces in [`Reply::error_bytes`](crate::resp::Reply::error_bytes).)
pub fn sanitize(text: &[u8], max: usize) -> Vec<u8> {
    let text = match text.iter().position(|&b| b == 0) {
        Some(nul) => &text[..nul],
        None => text,
    };
    text[..text.len().min(max)].to_vec()
}

/// `ERR unknown subcommand or wrong number of arguments for '<sub>'. Try
/// <CMD> HELP.`: Redis's addReplySubcommandSyntaxError.
pub fn subcommand_syntax(command: &str, sub: &[u8]) -> Vec<u8> {
    let mut message = b"ERR unknown subcommand or wrong number of arguments for '".to_vec();
    message.extend_from_slice(&sanitize(sub, 128));
    message.extend_from_slice(format!("'. Try {command} HELP.").as_bytes());
    message
}

/// `ERR unknown command '<name>', with args beginning with: '<a>' '<b>' `.
pub fn unknown_command(argv: &[&[u8]]) -> Vec<u8> {
    let mut args: Vec<u8> = Vec::new();
    for arg in &argv[1..] {
        if args.len() >= 128 {
            break;
        }
        let room = 128 - args.len();
        args.push(b'\'');
        args.extend_from_slice(&sanitize(arg, room));
        args.extend_from_slice(b"' ");
    }
    let mut message = b"ERR unknown command '".to_vec();
    message.extend_from_slice(&sanitize(argv[0], 128));
    message.extend_from_slice(b"', with args beginning with: ");
    message.extend_from_slice(&args);
    message
}

/// `ERR unknown subcommand '<sub>'. Try <CMD> HELP.`
pub fn unknown_subcommand(command: &[u8], sub: &[u8]) -> Vec<u8> {
    let mut message = b"ERR unknown subcommand '".to_vec();
    message.extend_from_slice(&sanitize(sub, 128));
    message.extend_from_slice(b"'. Try ");
    message.extend_from_slice(&command.to_ascii_uppercase());
    message.extend_from_slice(b" HELP.");
    message
}

/// A bit offset past `proto-max-bulk-len` bytes, negative, or no integer.
pub const BIT_OFFSET: &str = "ERR bit offset is not an integer or out of range";
/// SETBIT's value is neither 0 nor 1.
pub const BIT_VALUE: &str = "ERR bit is not an integer or out of range";
/// BITPOS looks for neither 0 nor 1.
pub const BITPOS_BIT: &str = "ERR The bit argument must be 1 or 0.";
/// A BITFIELD type that is not i1..i64 or u1..u63.
pub const BITFIELD_TYPE: &str =
    "ERR Invalid bitfield type. Use something like i16 u8. Note that u64 is not supported but i64 is.";
/// BITFIELD OVERFLOW that is not WRAP, SAT or FAIL.
pub const BITFIELD_OVERFLOW: &str = "ERR Invalid OVERFLOW type specified";
/// BITFIELD_RO given SET or INCRBY.
pub const BITFIELD_RO_WRITES: &str = "ERR BITFIELD_RO only supports the GET subcommand";
/// BITOP NOT of more than one key.
pub const BITOP_NOT_ONE_KEY: &str = "ERR BITOP NOT must be called with a single source key.";
/// LCS of a key holding something other than a string.
pub const LCS_NOT_STRINGS: &str = "ERR The specified keys must contain string values";
/// LCS given both LEN and IDX.
pub const LCS_LEN_AND_IDX: &str =
    "ERR If you want both the length and indexes, please just use IDX.";
/// LCS of a string of 4 GB or more.
pub const LCS_TOO_LONG: &str = "ERR String too long for LCS";
/// LCS whose table would pass `proto-max-bulk-len`.
pub const LCS_TABLE_TOO_BIG: &str =
    "ERR Insufficient memory, transient memory for LCS exceeds proto-max-bulk-len";
/// LCS whose table could not be allocated.
pub const LCS_NO_MEMORY: &str =
    "ERR Insufficient memory, failed allocating transient memory for LCS";
/// SORT BY a pattern in cluster mode, where its keys may live elsewhere.
pub const SORT_BY_CLUSTER: &str = "ERR BY option of SORT denied in Cluster mode.";
/// SORT BY a pattern for a user who may not read every key.
pub const SORT_BY_ACL: &str = "ERR BY option of SORT denied due to insufficient ACL permissions.";
/// SORT GET in cluster mode.
pub const SORT_GET_CLUSTER: &str = "ERR GET option of SORT denied in Cluster mode.";
/// SORT GET for a user who may not read every key.
pub const SORT_GET_ACL: &str = "ERR GET option of SORT denied due to insufficient ACL permissions.";
/// A numeric SORT whose weights are not all numbers.
pub const SORT_NOT_A_DOUBLE: &str = "ERR One or more scores can't be converted into double";
/// A ZUNION / ZINTER (and STORE) weight that is not a float.
pub const WEIGHT_NOT_FLOAT: &str = "ERR weight value is not a float";
/// LMPOP / ZMPOP COUNT below 1 or not a number.
pub const COUNT_POSITIVE: &str = "ERR count should be greater than 0";
