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

fn find_crlf(buf: &[u8], from: usize) -> Option<usize> {
    // Redis looks for '\r' and trusts the '\n' after it.
    memchr_cr(&buf[from..]).map(|i| from + i)
}

fn memchr_cr(haystack: &[u8]) -> Option<usize> {
    haystack.iter().position(|&b| b == b'\r')
}

/// Parses a header integer strictly, as Redis's string2ll does.
fn parse_header_int(bytes: &[u8]) -> Option<i64> {
    crate::cmd::args::parse_i64(bytes)
}

/// Frames the command at the start of `buf`.
pub fn parse_frame(buf: &[u8], limits: FrameLimits) -> Frame {
    if buf.is_empty() {
        return Frame::Incomplete;
    }
    if buf[0] == b'*' {
        parse_multibulk(buf, limits)
    } else {
        parse_inline(buf)
    }
}

fn parse_multibulk(buf: &[u8], limits: FrameLimits) -> Frame {
    let Some(line_end) = find_crlf(buf, 1) else {
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
    let mut pos = line_end + 2;
    if count <= 0 {
        return Frame::Empty { consumed: pos };
    }
    // Never trust the claimed count for an allocation: grow as arguments arrive.
    let mut args = Vec::with_capacity((count as usize).min(16));
    for _ in 0..count {
        if pos >= buf.len() {
            return Frame::Incomplete;
        }
        let Some(line_end) = find_crlf(buf, pos) else {
            if buf.len() - pos > INLINE_MAX_SIZE {
                return Frame::Error("too big bulk count string".into());
            }
            return Frame::Incomplete;
        };
        if line_end + 2 > buf.len() {
            return Frame::Incomplete;
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
            return Frame::Incomplete;
        }
        args.push(start..end);
        pos = end + 2;
    }
    Frame::Command {
        args,
        consumed: pos,
    }
}

fn parse_inline(buf: &[u8]) -> Frame {
    let Some(newline) = buf.iter().position(|&b| b == b'\n') else {
        if buf.len() > INLINE_MAX_SIZE {
            return Frame::Error("too big inline request".into());
        }
        return Frame::Incomplete;
    };
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
    let mut args = Vec::new();
    let mut i = 0;
    loop {
        while i < line.len() && line[i].is_ascii_whitespace() {
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
                    if i + 1 < line.len() && !line[i + 1].is_ascii_whitespace() {
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
                    if i + 1 < line.len() && !line[i + 1].is_ascii_whitespace() {
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
                    b' ' | b'\n' | b'\r' | b'\t' | 0 => break,
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

    fn words(frame: Frame, buf: &[u8]) -> Vec<Vec<u8>> {
        match frame {
            Frame::Command { args, .. } => args.into_iter().map(|r| buf[r].to_vec()).collect(),
            Frame::Inline { args, .. } => args,
            other => panic!("not a command: {other:?}"),
        }
    }

    #[test]
    fn multibulk_command_is_framed_and_partial_input_is_incomplete() {
        let buf = b"*2\r\n$3\r\nGET\r\n$1\r\nk\r\n";
        for cut in 0..buf.len() {
            assert_eq!(
                parse_frame(&buf[..cut], LIMITS),
                Frame::Incomplete,
                "cut {cut}"
            );
        }
        let frame = parse_frame(buf, LIMITS);
        assert!(matches!(frame, Frame::Command { consumed, .. } if consumed == buf.len()));
        assert_eq!(words(frame, buf), vec![b"GET".to_vec(), b"k".to_vec()]);
    }

    #[test]
    fn huge_claimed_bulk_is_rejected_from_the_header() {
        let buf = b"*1\r\n$9999999999\r\n";
        assert_eq!(
            parse_frame(buf, LIMITS),
            Frame::Error("invalid bulk length".into())
        );
        let buf = b"*1\r\n$536870913\r\n";
        assert_eq!(
            parse_frame(buf, LIMITS),
            Frame::Error("invalid bulk length".into())
        );
    }

    #[test]
    fn malformed_headers_give_redis_errors() {
        assert_eq!(
            parse_frame(b"*x\r\n", LIMITS),
            Frame::Error("invalid multibulk length".into())
        );
        assert_eq!(
            parse_frame(b"*1\r\n+foo\r\n", LIMITS),
            Frame::Error("expected '$', got '+'".into())
        );
        assert_eq!(
            parse_frame(b"*1\r\n$-1\r\n", LIMITS),
            Frame::Error("invalid bulk length".into())
        );
        assert_eq!(parse_frame(b"*0\r\n", LIMITS), Frame::Empty { consumed: 4 });
    }

    #[test]
    fn inline_commands_split_like_redis() {
        let buf = b"SET a \"b c\\x41\" 'd\\'e'\r\n";
        assert_eq!(
            words(parse_frame(buf, LIMITS), buf),
            vec![
                b"SET".to_vec(),
                b"a".to_vec(),
                b"b cA".to_vec(),
                b"d'e".to_vec()
            ]
        );
        assert_eq!(
            parse_frame(b"SET \"a\r\n", LIMITS),
            Frame::Error("unbalanced quotes in request".into())
        );
        assert_eq!(parse_frame(b"\r\n", LIMITS), Frame::Empty { consumed: 2 });
        assert_eq!(parse_frame(b"PING", LIMITS), Frame::Incomplete);
    }
}
