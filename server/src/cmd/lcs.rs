//! LCS: the longest common subsequence of two strings, with Redis 7.0's
//! options (LEN, IDX, MINMATCHLEN, WITHMATCHLEN), replies and limits. The
//! classic dynamic-programming table, walked back from its corner as
//! Redis's lcsCommand walks it, so that ties resolve, and the ranges come
//! out, in Redis's order.

use super::args::{int_arg, is};
use super::error;
use super::string::{string_of, value_bytes};
use super::Ctx;
use crate::resp::Reply;

/// LCS key1 key2 [LEN] [IDX] [MINMATCHLEN min-match-len] [WITHMATCHLEN]
pub fn lcs(ctx: &mut Ctx<'_>, argv: &[&[u8]]) -> Reply {
    let (ka, kb) = (ctx.key(argv[1]), ctx.key(argv[2]));
    let now = ctx.now_ms;
    let mut locked = ctx.lock_keys(&[ka, kb]);
    let mut read = |key| match locked.shard(key).lookup_read(key, now) {
        Some(entry) => string_of(entry)
            .map(value_bytes)
            .map_err(|_| Reply::error(error::LCS_NOT_STRINGS)),
        // A missing key is the empty string.
        None => Ok(Vec::new()),
    };
    // Both are looked up (and counted) before either is checked, as Redis does.
    let (a, b) = (read(ka), read(kb));
    drop(locked);
    let (a, b) = match (a, b) {
        (Ok(a), Ok(b)) => (a, b),
        (Err(reply), _) | (_, Err(reply)) => return reply,
    };
    let mut len_only = false;
    let mut indexes = false;
    let mut with_match_len = false;
    let mut min_match_len = 0u64;
    let mut j = 3;
    while j < argv.len() {
        let option = argv[j];
        if is(option, "idx") {
            indexes = true;
        } else if is(option, "len") {
            len_only = true;
        } else if is(option, "withmatchlen") {
            with_match_len = true;
        } else if is(option, "minmatchlen") && j + 1 < argv.len() {
            min_match_len = match int_arg(argv[j + 1]) {
                Ok(n) => n.max(0) as u64,
                Err(reply) => return reply,
            };
            j += 1;
        } else {
            return Reply::error(error::SYNTAX);
        }
        j += 1;
    }
    if len_only && indexes {
        return Reply::error(error::LCS_LEN_AND_IDX);
    }
    if a.len() as u64 >= u64::from(u32::MAX - 1) || b.len() as u64 >= u64::from(u32::MAX - 1) {
        return Reply::error(error::LCS_TOO_LONG);
    }
    let table_bytes = (a.len() as u64 + 1) * (b.len() as u64 + 1) * 4;
    if table_bytes > ctx.shared.config.read().proto_max_bulk_len {
        return Reply::error(error::LCS_TABLE_TOO_BIG);
    }
    let Some(table) = Table::build(&a, &b) else {
        return Reply::error(error::LCS_NO_MEMORY);
    };
    let total = table.at(a.len(), b.len());
    if len_only {
        return Reply::Int(i64::from(total));
    }
    let (common, ranges) = table.walk(&a, &b, min_match_len, indexes);
    if !indexes {
        return Reply::Bulk(common);
    }
    let matches = ranges
        .into_iter()
        .map(|r| {
            let mut entry = vec![
                Reply::Array(vec![Reply::Int(r.a.0 as i64), Reply::Int(r.a.1 as i64)]),
                Reply::Array(vec![Reply::Int(r.b.0 as i64), Reply::Int(r.b.1 as i64)]),
            ];
            if with_match_len {
                entry.push(Reply::Int(r.len as i64));
            }
            Reply::Array(entry)
        })
        .collect();
    Reply::Map(vec![
        (Reply::bulk(b"matches"), Reply::Array(matches)),
        (Reply::bulk(b"len"), Reply::Int(i64::from(total))),
    ])
}

/// LCS(i, j): the length of the longest common subsequence of a[..i] and
/// b[..j], for every i and j.
struct Table {
    cells: Vec<u32>,
    width: usize,
}

/// One matching run: its first and last index in each string.
struct Range {
    a: (usize, usize),
    b: (usize, usize),
    len: usize,
}

impl Table {
    /// `None` when the table cannot be allocated.
    fn build(a: &[u8], b: &[u8]) -> Option<Table> {
        let width = b.len() + 1;
        let mut cells = Vec::new();
        cells.try_reserve_exact((a.len() + 1) * width).ok()?;
        cells.resize((a.len() + 1) * width, 0);
        for i in 1..=a.len() {
            for j in 1..=b.len() {
                cells[i * width + j] = if a[i - 1] == b[j - 1] {
                    cells[(i - 1) * width + j - 1] + 1
                } else {
                    cells[(i - 1) * width + j].max(cells[i * width + j - 1])
                };
            }
        }
        Some(Table { cells, width })
    }

    fn at(&self, i: usize, j: usize) -> u32 {
        self.cells[i * self.width + j]
    }

    /// The common subsequence, and (with `ranges`) its matching runs of at
    /// least `min_len`, from the strings' ends back, as Redis emits them.
    fn walk(&self, a: &[u8], b: &[u8], min_len: u64, ranges: bool) -> (Vec<u8>, Vec<Range>) {
        let mut common = vec![0u8; self.at(a.len(), b.len()) as usize];
        let mut idx = common.len();
        let mut found = Vec::new();
        // The run being extended backwards: (a start, a end, b start, b end).
        let mut run: Option<(usize, usize, usize, usize)> = None;
        let (mut i, mut j) = (a.len(), b.len());
        while i > 0 && j > 0 {
            let mut emit = false;
            if a[i - 1] == b[j - 1] {
                common[idx - 1] = a[i - 1];
                run = match run {
                    None => Some((i - 1, i - 1, j - 1, j - 1)),
                    Some((sa, ea, sb, eb)) if sa == i && sb == j => Some((sa - 1, ea, sb - 1, eb)),
                    Some(current) => {
                        emit = true;
                        Some(current)
                    }
                };
                if let Some((sa, _, sb, _)) = run {
                    // A run that reached the first byte of either string
                    // is complete.
                    if sa == 0 || sb == 0 {
                        emit = true;
                    }
                }
                idx -= 1;
                i -= 1;
                j -= 1;
            } else {
                if self.at(i - 1, j) > self.at(i, j - 1) {
                    i -= 1;
                } else {
                    j -= 1;
                }
                emit = run.is_some();
            }
            if emit {
                if let Some((sa, ea, sb, eb)) = run.take() {
                    let len = ea - sa + 1;
                    if ranges && (min_len == 0 || len as u64 >= min_len) {
                        found.push(Range {
                            a: (sa, ea),
                            b: (sb, eb),
                            len,
                        });
                    }
                }
            }
        }
        (common, found)
    }
}
