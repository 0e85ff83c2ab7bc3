//! Splitting reply streams into frames, for tests and the fuzzers.

/// The length of the reply frame at the start of `buf`, if it is whole and
/// well-formed: what tests and the fuzzers use to split and check reply
/// streams. Byte-level (error and status lines may hold any bytes, as
/// Redis's do) and iterative (a count of elements still owed per open
/// aggregate): script results nest eight thousand deep, and a recursive
/// decoder would overflow the caller's stack.
pub fn reply_frame_len(buf: &[u8], resp3: bool) -> Option<usize> {
    let mut pos = 0;
    let mut owed: Vec<u64> = Vec::new();
    loop {
        let kind = *buf.get(pos)?;
        let line_end = pos + buf[pos..].windows(2).position(|w| w == b"\r\n")?;
        let line = &buf[pos + 1..line_end];
        let number = || -> Option<i64> { std::str::from_utf8(line).ok()?.parse().ok() };
        pos = line_end + 2;
        let mut children = 0u64;
        match (kind, resp3) {
            (b'+' | b'-', _) => {}
            (b':', _) => {
                number()?;
            }
            (b'$', _) | (b'=' | b'!', true) => match number()? {
                -1 if !resp3 => {}
                n if n >= 0 => {
                    let end = pos.checked_add(n as usize)?;
                    if buf.get(end..end + 2)? != b"\r\n" {
                        return None;
                    }
                    pos = end + 2;
                }
                _ => return None,
            },
            (b'*', _) | (b'~' | b'>', true) => match number()? {
                -1 if !resp3 => {}
                n if n >= 0 => children = n as u64,
                _ => return None,
            },
            (b'%', true) => children = 2 * u64::try_from(number()?).ok()?,
            (b'_', true) if line.is_empty() => {}
            (b'#', true) if line == b"t" || line == b"f" => {}
            (b',', true) => {
                std::str::from_utf8(line).ok()?;
            }
            (b'(', true) => {
                number()?;
            }
            _ => return None,
        }
        if children > 0 {
            owed.push(children);
            continue;
        }
        // One value done: it completes every aggregate it was the last of.
        loop {
            match owed.last_mut() {
                None => return Some(pos),
                Some(left) => {
                    *left -= 1;
                    if *left > 0 {
                        break;
                    }
                    owed.pop();
                }
            }
        }
    }
}
