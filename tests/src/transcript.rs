//! Transcripts of a reference server's exact replies (tests/data/*.transcript,
//! written by tools/record_transcript.py), replayed against tally: used
//! where the reference is a Redis newer than the one CI installs.

use crate::{words, TestServer};

/// A transcript's steps: each command with its recorded reply (`None` for
/// a `SLEEP <ms>` step, which moves the test server's clock).
pub fn parse(text: &str) -> Vec<(String, Option<Vec<u8>>)> {
    let mut steps: Vec<(String, Option<Vec<u8>>)> = Vec::new();
    for line in text.lines() {
        if let Some(command) = line.strip_prefix("> ") {
            steps.push((command.to_string(), None));
        } else if let Some(reply) = line.strip_prefix("< ") {
            let mut bytes = Vec::new();
            let mut chars = reply.chars();
            while let Some(c) = chars.next() {
                if c != '\\' {
                    bytes.push(c as u8);
                    continue;
                }
                match chars.next() {
                    Some('r') => bytes.push(b'\r'),
                    Some('n') => bytes.push(b'\n'),
                    Some(other) => bytes.push(other as u8),
                    None => panic!("a dangling escape"),
                }
            }
            steps.last_mut().expect("a command before its reply").1 = Some(bytes);
        }
    }
    steps
}

/// Replays `text` on a fresh test server and asserts every reply is the
/// recorded one, byte for byte; returns how many commands it checked.
pub async fn replay(text: &str) -> usize {
    let server = TestServer::start().await;
    let mut conn = server.raw().await;
    let mut checked = 0;
    for (command, expected) in parse(text) {
        if let Some(ms) = command.strip_prefix("SLEEP ") {
            server.clock.advance_ms(ms.parse().expect("SLEEP <ms>"));
            continue;
        }
        let reply = conn.cmd(&words(&command)).await;
        let expected = expected.expect("a recorded reply");
        assert_eq!(
            String::from_utf8_lossy(&reply),
            String::from_utf8_lossy(&expected),
            "{command}"
        );
        checked += 1;
    }
    checked
}
