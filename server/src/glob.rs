//! Redis's glob matching (`stringmatchlen` of Redis 7.0.15), for KEYS, SCAN
//! MATCH, CONFIG GET, PSUBSCRIBE patterns and PUBSUB CHANNELS.
//!
//! This is a line-by-line port, quirks included, because clients see the
//! quirks (a `[` never closed, a trailing `\`, bytes above 127 compared as C's
//! signed `char`). Two things make it safe on hostile patterns:
//!
//! - **Bounded backtracking.** When the rest of the pattern after a `*`
//!   matches nowhere in the rest of the text, no earlier `*` can help either
//!   (a longer match for it only starts the rest later), so the whole match
//!   fails at once. This is Redis's fix for CVE-2022-36021
//!   (`skipLongerMatches`); without it `*a*a*a*a*a*a*a*a*a*a*b` against 40
//!   `a`s takes longer than the age of the universe.
//! - **No recursion.** Redis recurses once per `*`; here a loop keeps the one
//!   search that can still be live (see [`match_from`]), so a pattern of a
//!   million stars needs no stack. Time is O(pattern × text).

/// Redis's bound on its matcher's recursion (CVE-2024-31228): a pattern
/// that needs more than this many `*` searches, one inside the other, does
/// not match. Redis recursed once per `*`, so a long `*?*?...` pattern
/// could exhaust its stack; this matcher has no recursion, but the bound
/// decides replies (`KEYS` of such a pattern is empty on Redis), so it is
/// Redis's here too.
const MAX_NESTING: usize = 1000;

/// The pattern byte at `i`, or 0 past its end: the C code reads the NUL
/// terminator of its `sds` string there and relies on it.
#[inline]
fn at(bytes: &[u8], i: usize) -> u8 {
    bytes.get(i).copied().unwrap_or(0)
}

/// A byte as C's signed `char` widened to `int`, as the range test sees it.
#[inline]
fn signed(b: u8) -> i32 {
    b as i8 as i32
}

/// glibc's `tolower` in the C locale, on C's signed `char` widened to int:
/// it maps A-Z down, and -128..-2 (bytes 0x80..0xfe) to 128..254, leaving
/// -1 (EOF, byte 0xff) alone. The second part matters to ranges: with
/// NOCASE, `[\xfe-t]` compares against 254..116, which holds nothing.
/// (Found by the glob fuzz target against Redis's own code.)
#[inline]
fn lower(c: i32) -> i32 {
    match c {
        65..=90 => c + 32,
        -128..=-2 => c + 256,
        _ => c,
    }
}

/// True when `text` matches the glob `pattern` by Redis's rules: `*`, `?`,
/// `[abc]`, `[^abc]`, `[a-z]`, and `\` escaping the next byte.
pub fn glob_match(pattern: &[u8], text: &[u8], nocase: bool) -> bool {
    match_from(pattern, text, nocase)
}

/// The outcome of matching one suffix of the pattern against one suffix of
/// the text.
enum Step {
    Match,
    NoMatch,
    /// A `*` (a run of them collapsed) with more pattern after it, met at
    /// text position `at`: the rest must match starting somewhere from there.
    Star {
        rest: usize,
        at: usize,
    },
}

/// Drives [`step`]. Redis recurses at every `*`; with `skipLongerMatches`
/// a star whose search is exhausted fails the whole match, so an outer star
/// is never resumed once an inner one started searching. Only the innermost
/// search is live, and a loop replaces the recursion: no depth at all.
fn match_from(pattern: &[u8], text: &[u8], nocase: bool) -> bool {
    let mut search: Option<(usize, usize)> = None;
    // Stars whose search began: Redis's recursion depth. Past
    // MAX_NESTING Redis's innermost call answers no match, every search
    // above it runs dry, and the whole match fails.
    let mut nesting = 0;
    let mut outcome = step(pattern, 0, text, 0, nocase);
    loop {
        match outcome {
            Step::Match => return true,
            Step::Star { .. } if nesting == MAX_NESTING => return false,
            Step::Star { rest, at } => {
                nesting += 1;
                search = Some((rest, at));
            }
            Step::NoMatch => match search.as_mut() {
                Some((_, at)) if *at + 1 < text.len() => *at += 1,
                // No star, or the star's search is exhausted.
                _ => return false,
            },
        }
        let Some((rest, at)) = search else {
            return false;
        };
        outcome = step(pattern, rest, text, at, nocase);
    }
}

/// Matches `pattern[p..]` against `text[t..]` up to the first `*` that needs
/// a search: the loop body of `stringmatchlen_impl`.
fn step(pattern: &[u8], mut p: usize, text: &[u8], mut t: usize, nocase: bool) -> Step {
    let eq = |a: u8, b: u8| {
        if nocase {
            lower(signed(a)) == lower(signed(b))
        } else {
            a == b
        }
    };
    while p < pattern.len() && t < text.len() {
        match pattern[p] {
            b'*' => {
                while p < pattern.len() && at(pattern, p + 1) == b'*' {
                    p += 1;
                }
                if pattern.len() - p == 1 {
                    return Step::Match;
                }
                return Step::Star { rest: p + 1, at: t };
            }
            b'?' => t += 1,
            b'[' => {
                p += 1;
                let not = at(pattern, p) == b'^';
                if not {
                    p += 1;
                }
                let mut matched = false;
                loop {
                    let left = pattern.len().saturating_sub(p);
                    if at(pattern, p) == b'\\' && left >= 2 {
                        p += 1;
                        if pattern[p] == text[t] {
                            matched = true;
                        }
                    } else if at(pattern, p) == b']' {
                        break;
                    } else if left == 0 {
                        // An unclosed class: step back so the pattern ends here.
                        p -= 1;
                        break;
                    } else if left >= 3 && pattern[p + 1] == b'-' {
                        let (mut start, mut end) = (signed(pattern[p]), signed(pattern[p + 2]));
                        let mut c = signed(text[t]);
                        if start > end {
                            std::mem::swap(&mut start, &mut end);
                        }
                        if nocase {
                            start = lower(start);
                            end = lower(end);
                            c = lower(c);
                        }
                        p += 2;
                        if c >= start && c <= end {
                            matched = true;
                        }
                    } else if eq(pattern[p], text[t]) {
                        matched = true;
                    }
                    p += 1;
                }
                if not {
                    matched = !matched;
                }
                if !matched {
                    return Step::NoMatch;
                }
                t += 1;
            }
            c => {
                let c = if c == b'\\' && pattern.len() - p >= 2 {
                    p += 1;
                    pattern[p]
                } else {
                    c
                };
                if !eq(c, text[t]) {
                    return Step::NoMatch;
                }
                t += 1;
            }
        }
        p += 1;
        if t == text.len() {
            while at(pattern, p) == b'*' && p < pattern.len() {
                p += 1;
            }
            break;
        }
    }
    if p >= pattern.len() && t == text.len() {
        Step::Match
    } else {
        Step::NoMatch
    }
}

#[cfg(test)]
mod tests {
    use super::glob_match;

    #[test]
    fn matches_like_redis() {
        assert!(glob_match(b"*", b"anything", false));
        assert!(glob_match(b"h?llo", b"hello", false));
        assert!(glob_match(b"h[ae]llo", b"hallo", false));
        assert!(!glob_match(b"h[^e]llo", b"hello", false));
        assert!(glob_match(b"h[a-b]llo", b"hbllo", false));
        assert!(glob_match(b"h[b-a]llo", b"hbllo", false));
        assert!(glob_match(
            b"rl:*:a3f2:*",
            b"rl:user:u_1:a3f2:1720000000",
            false
        ));
        assert!(glob_match(b"h\\*llo", b"h*llo", false));
        assert!(!glob_match(b"h\\*llo", b"hello", false));
        assert!(glob_match(b"MAXMEMORY*", b"maxmemory-policy", true));
        assert!(glob_match(b"a*b*c", b"aXXbYYc", false));
        assert!(!glob_match(b"a*b*c", b"aXXbYYd", false));
        assert!(glob_match(b"*a", b"aaa", false));
    }

    #[test]
    fn quirks_follow_redis() {
        // An empty text never matches in stringmatchlen, not even `*`
        // (KEYS and SCAN special-case the lone `*` before matching).
        assert!(!glob_match(b"*", b"", false));
        assert!(glob_match(b"", b"", false));
        // An unclosed class ends the pattern; a trailing backslash is literal.
        assert!(glob_match(b"a[bc", b"ab", false));
        assert!(glob_match(b"a\\", b"a\\", false));
        // Bytes above 127 compare as C's signed char in ranges: [a-\xff] is
        // [\xff-a] swapped, which holds every byte from -1 up to 'a'.
        assert!(glob_match(b"[a-\xff]", b"\x00", false));
        assert!(!glob_match(b"[a-\xff]", b"b", false));
        // With NOCASE, glibc's tolower turns the signed 0xfe (-2) into 254
        // after the swap: [\xfe-t] then runs from 254 down to 116, empty.
        assert!(glob_match(b"[\xfe-t]", b"[", false));
        assert!(!glob_match(b"[\xfe-t]", b"[", true));
    }

    #[test]
    fn hostile_patterns_fail_fast() {
        // CVE-2022-36021's shape: exponential without the skip rule.
        let text = vec![b'a'; 40];
        assert!(!glob_match(b"*a*a*a*a*a*a*a*a*a*a*b", &text, false));
        // A long text and a pattern of many stars stay linear-ish; a million
        // stars need no stack.
        let text = vec![b'a'; 100_000];
        let pattern: Vec<u8> = b"*a".repeat(50).into_iter().chain(*b"*b").collect();
        assert!(!glob_match(&pattern, &text, false));
        let stars = vec![b'*'; 1_000_000];
        assert!(glob_match(&stars, b"x", false));
        let mut deep = b"*a".repeat(500_000);
        deep.push(b'b');
        assert!(!glob_match(&deep, &text, false));
    }
}
