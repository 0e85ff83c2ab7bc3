//! Request framing: RESP multibulk commands and inline commands.
//!
//! Requests are a small subset of RESP (an array of bulk strings, or one line
//! of space-separated words typed over telnet), so this parser is written for
//! exactly that grammar with Redis's own limits and error texts, rather than
//! going through a general RESP decoder: it must reject a bulk length above
//! `proto-max-bulk-len` from the header alone, before a byte of the body
//! arrives, and never allocate what a client merely claims.
//!
//! "Is a whole command here?" is its own typed outcome ([`Frame::Incomplete`]),
//! not an error.

use std::ops::Range;

/// Longest inline command, and longest multibulk/bulk header line, Redis accepts
/// before the terminating newline arrives (PROTO_INLINE_MAX_SIZE).
pub const INLINE_MAX_SIZE: usize = 64 * 1024;

/// Limits applied while framing.
#[derive(Debug, Clone, Copy)]
pub struct FrameLimits {
    /// `proto-max-bulk-len`.
    pub max_bulk_len: usize,
    /// True until the client has authenticated on a password-protected server:
    /// Redis then refuses multibulk counts above 1024*1024... and bulks above 16 KiB.
    pub unauthenticated: bool,
}

/// One outcome of framing the start of a buffer.
#[derive(Debug, PartialEq, Eq)]
pub enum Frame {
    /// A whole command: argument byte ranges within the buffer, and bytes consumed.
    Command {
        /// The arguments, as ranges of the buffer.
        args: Vec<Range<usize>>,
        /// How many bytes of the buffer the command used.
        consumed: usize,
    },
    /// An inline command whose arguments needed unquoting, so they are owned.
    Inline {
        /// The arguments.
        args: Vec<Vec<u8>>,
        /// How many bytes of the buffer the command used.
        consumed: usize,
    },
    /// Bytes to skip that hold no command (an empty line, `*0`, `*-1`).
    Empty {
        /// How many bytes to skip.
        consumed: usize,
    },
    /// More bytes are needed.
    Incomplete,
    /// The stream is broken: reply `-ERR Protocol error: <text>` and close.
    Error(String),
}

/// Where framing stopped in a command that has not fully arrived, so the
/// next read resumes there instead of re-parsing from the start (a client
/// trickling a million-argument MSET would otherwise cost O(n²)).
#[derive(Debug, Default, PartialEq, Eq)]
pub enum Resume {
    /// Nothing pending: frame from the start of the buffer.
    #[default]
    Start,
    /// A multibulk command with `count` arguments, of which `args` arrived;
    /// the next bulk header starts at `pos`.
    Multibulk {
        /// Arguments announced by the header.
        count: usize,
        /// Arguments framed so far.
        args: Vec<Range<usize>>,
        /// Offset of the next bulk header.
        pos: usize,
    },
    /// An inline command whose first `scanned` bytes hold no end of line.
    Inline {
        /// Bytes already searched.
        scanned: usize,
    },
}

/// The end of the header line starting at `from`: the first `\r`, trusting
/// the `\n` after it, as Redis does. Redis searches with `strchr`, which
/// stops at a NUL byte: a NUL before the `\r` means "no line yet" there too.
fn find_cr(buf: &[u8], from: usize) -> Option<usize> {
    let at = buf[from..].iter().position(|&b| b == b'\r' || b == 0)?;
    (buf[from + at] == b'\r').then_some(from + at)
}

/// Parses a header integer strictly, as Redis's string2ll does.
fn parse_header_int(bytes: &[u8]) -> Option<i64> {
    crate::number::parse_i64(bytes)
}

/// Frames the command at the start of `buf`, resuming from `resume` (which
/// must come from the previous call on the same bytes, or be `Start`) and
/// leaving there where an incomplete command stopped.
pub fn parse_frame(buf: &[u8], limits: FrameLimits, resume: &mut Resume) -> Frame {
    if buf.is_empty() {
        return Frame::Incomplete;
    }
    match std::mem::take(resume) {
        Resume::Multibulk { count, args, pos } => {
            continue_multibulk(buf, limits, count, args, pos, resume)
        }
        Resume::Inline { scanned } => parse_inline(buf, scanned, resume),
        Resume::Start if buf[0] == b'*' => parse_multibulk(buf, limits, resume),
        Resume::Start => parse_inline(buf, 0, resume),
    }
}

fn parse_multibulk(buf: &[u8], limits: FrameLimits, resume: &mut Resume) -> Frame {
    let Some(line_end) = find_cr(buf, 1) else {
        if buf.len() > INLINE_MAX_SIZE {
            return Frame::Error("too big mbulk count string".into());
        }
        return Frame::Incomplete;
    };
    if line_end + 2 > buf.len() {
        return Frame::Incomplete;
    }
    let count = match parse_header_int(&buf[1..line_end]) {
        Some(n) if n <= i32::MAX as i64 => n,
        _ => return Frame::Error("invalid multibulk length".into()),
    };
    if limits.unauthenticated && count > 10 {
        return Frame::Error("unauthenticated multibulk length".into());
    }
    let pos = line_end + 2;
    if count <= 0 {
        return Frame::Empty { consumed: pos };
    }
    // Never trust the claimed count for an allocation: grow as arguments arrive.
    let args = Vec::with_capacity((count as usize).min(16));
    continue_multibulk(buf, limits, count as usize, args, pos, resume)
}

fn continue_multibulk(
    buf: &[u8],
    limits: FrameLimits,
    count: usize,
    mut args: Vec<Range<usize>>,
    mut pos: usize,
    resume: &mut Resume,
) -> Frame {
    while args.len() < count {
        let incomplete = |args, resume: &mut Resume| {
            *resume = Resume::Multibulk { count, args, pos };
            Frame::Incomplete
        };
        if pos >= buf.len() {
            return incomplete(args, resume);
        }
        let Some(line_end) = find_cr(buf, pos) else {
            if buf.len() - pos > INLINE_MAX_SIZE {
                return Frame::Error("too big bulk count string".into());
            }
            return incomplete(args, resume);
        };
        if line_end + 2 > buf.len() {
            return incomplete(args, resume);
        }
        if buf[pos] != b'$' {
            return Frame::Error(format!("expected '$', got '{}'", buf[pos] as char));
        }
        let len = match parse_header_int(&buf[pos + 1..line_end]) {
            Some(n) if n >= 0 && (n as u64) <= limits.max_bulk_len as u64 => n as usize,
            _ => return Frame::Error("invalid bulk length".into()),
        };
        if limits.unauthenticated && len > 16384 {
            return Frame::Error("unauthenticated bulk length".into());
        }
        let start = line_end + 2;
        let end = start + len;
        if end + 2 > buf.len() {
            return incomplete(args, resume);
        }
        args.push(start..end);
        pos = end + 2;
    }
    Frame::Command {
        args,
        consumed: pos,
    }
}

/// Most arguments [`peek_command`] frames: a look ahead is for the small
/// commands of a pipeline, and stops at anything larger.
pub const PEEK_MAX_ARGS: usize = 64;

/// Frames the multibulk command at the start of `buf` without allocating
/// (the ranges go into `args`, cleared first) and returns the bytes it
/// takes, for a look ahead at a pipeline's next commands. Anything else is
/// `None`, and the look ahead stops there: an inline command, an
/// incomplete or malformed frame, one of more than [`PEEK_MAX_ARGS`]
/// arguments. It applies no limit: [`parse_frame`] still frames every
/// command that runs, with the client's limits and Redis's errors.
pub fn peek_command(buf: &[u8], args: &mut Vec<Range<usize>>) -> Option<usize> {
    args.clear();
    if buf.first() != Some(&b'*') {
        return None;
    }
    let line_end = find_cr(buf, 1)?;
    let count = parse_header_int(&buf[1..line_end])?;
    if !(1..=PEEK_MAX_ARGS as i64).contains(&count) {
        return None;
    }
    let mut pos = line_end + 2;
    for _ in 0..count {
        if buf.get(pos) != Some(&b'$') {
            return None;
        }
        let line_end = find_cr(buf, pos)?;
        let len = usize::try_from(parse_header_int(&buf[pos + 1..line_end])?).ok()?;
        let start = line_end + 2;
        let end = start.checked_add(len)?;
        if end.checked_add(2)? > buf.len() {
            return None;
        }
        args.push(start..end);
        pos = end + 2;
    }
    (pos <= buf.len()).then_some(pos)
}

fn parse_inline(buf: &[u8], scanned: usize, resume: &mut Resume) -> Frame {
    // Redis finds the end of line with strchr, which stops at a NUL byte:
    // input after a NUL waits for more, and is refused once it outgrows the
    // inline limit, exactly as if no newline had come.
    let end = buf[scanned..]
        .iter()
        .position(|&b| b == b'\n' || b == 0)
        .map(|i| scanned + i);
    let newline = match end {
        Some(i) if buf[i] == b'\n' => i,
        _ => {
            if buf.len() > INLINE_MAX_SIZE {
                return Frame::Error("too big inline request".into());
            }
            // A NUL stops the search for good; otherwise resume after what
            // was searched.
            let scanned = end.unwrap_or(buf.len());
            *resume = Resume::Inline { scanned };
            return Frame::Incomplete;
        }
    };
    // Redis refuses a line that outgrew the limit before its end arrived;
    // it reads 16 KiB at a time, so a longer line that came in one write
    // still passed the check there. Here the rule does not depend on how
    // the bytes were split.
    if newline > INLINE_MAX_SIZE {
        return Frame::Error("too big inline request".into());
    }
    let consumed = newline + 1;
    let mut line = &buf[..newline];
    if line.last() == Some(&b'\r') {
        line = &line[..line.len() - 1];
    }
    match split_args(line) {
        Some(args) if args.is_empty() => Frame::Empty { consumed },
        Some(args) => Frame::Inline { args, consumed },
        None => Frame::Error("unbalanced quotes in request".into()),
    }
}

/// C's `isspace` in the C locale: space, \t, \n, \v, \f, \r.
fn is_c_space(b: u8) -> bool {
    matches!(b, b' ' | b'\t' | b'\n' | 0x0b | 0x0c | b'\r')
}

fn is_hex(b: u8) -> bool {
    b.is_ascii_hexdigit()
}

fn hex_value(b: u8) -> u8 {
    match b {
        b'0'..=b'9' => b - b'0',
        b'a'..=b'f' => b - b'a' + 10,
        _ => b - b'A' + 10,
    }
}

/// Splits an inline line into words the way Redis's sdssplitargs does: spaces
/// separate, "double quotes" allow \n \r \t \b \a \\ \" and \xHH escapes,
/// 'single quotes' allow only \'. A closing quote must be followed by a space
/// or the end of the line. Returns None on unbalanced quotes.
pub fn split_args(line: &[u8]) -> Option<Vec<Vec<u8>>> {
    // Redis works on a C string: a NUL byte ends the line.
    let line = match line.iter().position(|&b| b == 0) {
        Some(nul) => &line[..nul],
        None => line,
    };
    let mut args = Vec::new();
    let mut i = 0;
    loop {
        while i < line.len() && is_c_space(line[i]) {
            i += 1;
        }
        if i >= line.len() {
            return Some(args);
        }
        let mut current = Vec::new();
        let mut in_double = false;
        let mut in_single = false;
        loop {
            if in_double {
                if i >= line.len() {
                    return None;
                }
                let c = line[i];
                if c == b'\\'
                    && i + 3 < line.len()
                    && line[i + 1] == b'x'
                    && is_hex(line[i + 2])
                    && is_hex(line[i + 3])
                {
                    current.push(hex_value(line[i + 2]) * 16 + hex_value(line[i + 3]));
                    i += 3;
                } else if c == b'\\' && i + 1 < line.len() {
                    i += 1;
                    current.push(match line[i] {
                        b'n' => b'\n',
                        b'r' => b'\r',
                        b't' => b'\t',
                        b'b' => 8,
                        b'a' => 7,
                        other => other,
                    });
                } else if c == b'"' {
                    if i + 1 < line.len() && !is_c_space(line[i + 1]) {
                        return None;
                    }
                    i += 1;
                    break;
                } else {
                    current.push(c);
                }
            } else if in_single {
                if i >= line.len() {
                    return None;
                }
                let c = line[i];
                if c == b'\\' && i + 1 < line.len() && line[i + 1] == b'\'' {
                    i += 1;
                    current.push(b'\'');
                } else if c == b'\'' {
                    if i + 1 < line.len() && !is_c_space(line[i + 1]) {
                        return None;
                    }
                    i += 1;
                    break;
                } else {
                    current.push(c);
                }
            } else {
                if i >= line.len() {
                    break;
                }
                match line[i] {
                    b' ' | b'\n' | b'\r' | b'\t' => break,
                    b'"' => in_double = true,
                    b'\'' => in_single = true,
                    c => current.push(c),
                }
            }
            i += 1;
        }
        args.push(current);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const LIMITS: FrameLimits = FrameLimits {
        max_bulk_len: 512 * 1024 * 1024,
        unauthenticated: false,
    };

    fn frame(buf: &[u8]) -> Frame {
        parse_frame(buf, LIMITS, &mut Resume::Start)
    }

    fn words(frame: Frame, buf: &[u8]) -> Vec<Vec<u8>> {
        match frame {
            Frame::Command { args, .. } => args.into_iter().map(|r| buf[r].to_vec()).collect(),
            Frame::Inline { args, .. } => args,
            other => panic!("not a command: {other:?}"),
        }
    }

    #[test]
    fn a_peek_frames_what_parse_frame_frames_and_nothing_else() {
        let pipeline: &[u8] =
            b"*2\r\n$3\r\nGET\r\n$1\r\nk\r\n*3\r\n$3\r\nSET\r\n$0\r\n\r\n$5\r\nv\r\nxy\r\n";
        let mut args = Vec::new();
        let mut pos = 0;
        while pos < pipeline.len() {
            let Frame::Command {
                args: parsed,
                consumed,
            } = frame(&pipeline[pos..])
            else {
                panic!("not a command at {pos}");
            };
            assert_eq!(peek_command(&pipeline[pos..], &mut args), Some(consumed));
            assert_eq!(args, parsed);
            pos += consumed;
        }
        // Every cut of a command is no command yet (the first is 20 bytes).
        for cut in 0..20 {
            assert_eq!(peek_command(&pipeline[..cut], &mut args), None, "cut {cut}");
        }
        // What the look ahead leaves to parse_frame: inline commands,
        // empty or malformed frames, too many arguments.
        let many = format!("*65\r\n{}", "$1\r\nx\r\n".repeat(65));
        for other in [
            &b"GET k\r\n"[..],
            b"*0\r\n",
            b"*-1\r\n",
            b"*1\r\n+GET\r\n",
            b"*1\r\n$x\r\nGET\r\n",
            b"*1\r\n$-1\r\n",
            b"*1\r\n$3\r\nGET\r",
            many.as_bytes(),
        ] {
            assert_eq!(peek_command(other, &mut args), None, "{other:?}");
        }
        let most = format!("*64\r\n{}", "$1\r\nx\r\n".repeat(64));
        assert_eq!(peek_command(most.as_bytes(), &mut args), Some(most.len()));
        assert_eq!(args.len(), 64);
    }

    #[test]
    fn multibulk_command_is_framed_and_partial_input_is_incomplete() {
        let buf = b"*2\r\n$3\r\nGET\r\n$1\r\nk\r\n";
        for cut in 0..buf.len() {
            assert_eq!(frame(&buf[..cut]), Frame::Incomplete, "cut {cut}");
        }
        let frame = frame(buf);
        assert!(matches!(frame, Frame::Command { consumed, .. } if consumed == buf.len()));
        assert_eq!(words(frame, buf), vec![b"GET".to_vec(), b"k".to_vec()]);
    }

    #[test]
    fn huge_claimed_bulk_is_rejected_from_the_header() {
        let buf = b"*1\r\n$9999999999\r\n";
        assert_eq!(frame(buf), Frame::Error("invalid bulk length".into()));
        let buf = b"*1\r\n$536870913\r\n";
        assert_eq!(frame(buf), Frame::Error("invalid bulk length".into()));
    }

    #[test]
    fn malformed_headers_give_redis_errors() {
        assert_eq!(
            frame(b"*x\r\n"),
            Frame::Error("invalid multibulk length".into())
        );
        assert_eq!(
            frame(b"*1\r\n+foo\r\n"),
            Frame::Error("expected '$', got '+'".into())
        );
        assert_eq!(
            frame(b"*1\r\n$-1\r\n"),
            Frame::Error("invalid bulk length".into())
        );
        assert_eq!(frame(b"*0\r\n"), Frame::Empty { consumed: 4 });
    }

    #[test]
    fn inline_commands_split_like_redis() {
        let buf = b"SET a \"b c\\x41\" 'd\\'e'\r\n";
        assert_eq!(
            words(frame(buf), buf),
            vec![
                b"SET".to_vec(),
                b"a".to_vec(),
                b"b cA".to_vec(),
                b"d'e".to_vec()
            ]
        );
        assert_eq!(
            frame(b"SET \"a\r\n"),
            Frame::Error("unbalanced quotes in request".into())
        );
        assert_eq!(frame(b"\r\n"), Frame::Empty { consumed: 2 });
        assert_eq!(frame(b"PING"), Frame::Incomplete);
    }

    #[test]
    fn a_nul_byte_ends_the_search_for_a_line_as_in_redis() {
        // strchr stops at the NUL: no line yet, whatever follows.
        assert_eq!(frame(b"\x00\r\n"), Frame::Incomplete);
        assert_eq!(frame(b"GET a\x00b\r\nPING\r\n"), Frame::Incomplete);
        assert_eq!(frame(b"*1\x00\r\n"), Frame::Incomplete);
        assert_eq!(frame(b"*1\r\n$3\x00\r\nGET\r\n"), Frame::Incomplete);
        // ... until the buffer outgrows the inline limit.
        let mut flood = b"\x00".to_vec();
        flood.resize(INLINE_MAX_SIZE + 1, b'\n');
        assert_eq!(frame(&flood), Frame::Error("too big inline request".into()));
        // split_args on its own treats NUL as the end of the string.
        assert_eq!(
            split_args(b"GET a\x00b"),
            Some(vec![b"GET".to_vec(), b"a".to_vec()])
        );
    }

    #[test]
    fn inline_whitespace_is_c_isspace() {
        let buf = b"\x0b\x0cGET\x0b a\r\n";
        // Leading \v and \f are blanks; inside a word \v is a byte of it.
        assert_eq!(
            words(frame(buf), buf),
            vec![b"GET\x0b".to_vec(), b"a".to_vec()]
        );
        assert_eq!(
            frame(b"SET \"a\"\x0bb\r\n"),
            Frame::Inline {
                args: vec![b"SET".to_vec(), b"a".to_vec(), b"b".to_vec()],
                consumed: 11
            }
        );
    }

    #[test]
    fn an_inline_line_past_the_limit_is_refused_even_in_one_read() {
        let mut line = vec![b'a'; INLINE_MAX_SIZE + 1];
        line.extend_from_slice(b"\r\n");
        assert_eq!(frame(&line), Frame::Error("too big inline request".into()));
        let mut line = vec![b'a'; INLINE_MAX_SIZE];
        line.extend_from_slice(b"\n");
        assert!(matches!(frame(&line), Frame::Inline { .. }));
    }

    #[test]
    fn resumed_framing_equals_framing_the_whole_at_every_split() {
        let buf = b"*3\r\n$3\r\nSET\r\n$2\r\nab\r\n$10\r\n0123456789\r\n";
        let inline = b"SET a \"b c\"\r\n";
        for whole in [&buf[..], &inline[..]] {
            let expected = frame(whole);
            for a in 0..whole.len() {
                for b in a..whole.len() {
                    let mut resume = Resume::Start;
                    let mut outcome = Frame::Incomplete;
                    for cut in [a, b, whole.len()] {
                        outcome = parse_frame(&whole[..cut], LIMITS, &mut resume);
                        if outcome != Frame::Incomplete {
                            break;
                        }
                    }
                    assert_eq!(outcome, expected, "splits {a} {b}");
                    assert_eq!(resume, Resume::Start);
                }
            }
        }
    }

    #[test]
    fn a_resumed_multibulk_does_not_rescan_arguments_it_has() {
        let mut buf = b"*3\r\n$1\r\na\r\n$1\r\nb\r\n".to_vec();
        let mut resume = Resume::Start;
        assert_eq!(parse_frame(&buf, LIMITS, &mut resume), Frame::Incomplete);
        assert_eq!(
            resume,
            Resume::Multibulk {
                count: 3,
                args: vec![8..9, 15..16],
                pos: 18
            }
        );
        // Corrupting bytes already framed changes nothing: they are not read again.
        buf[8] = b'x';
        buf.extend_from_slice(b"$1\r\nc\r\n");
        assert_eq!(
            parse_frame(&buf, LIMITS, &mut resume),
            Frame::Command {
                args: vec![8..9, 15..16, 22..23],
                consumed: buf.len()
            }
        );
    }
}
