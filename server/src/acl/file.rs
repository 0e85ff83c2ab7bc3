//! The ACL file (`aclfile`): one `user <name> <rules...>` line per user,
//! loaded all or nothing (ACL LOAD, start) and written whole (ACL SAVE).

use std::io::Write;

use super::{Acl, User};

/// Parses a `user` line's words after `user`: the name, then rules;
/// `all_channels` is `acl-pubsub-default allchannels`.
pub fn parse_user(words: &[Vec<u8>], all_channels: bool) -> Result<User, String> {
    let Some((name, rules)) = words.split_first() else {
        return Err("Syntax error".to_string());
    };
    let name = String::from_utf8_lossy(name).into_owned();
    if name.chars().any(|c| c.is_whitespace() || c == '\0') {
        return Err("Usernames can't contain spaces or null characters".to_string());
    }
    let mut user = User::created(&name, all_channels);
    let rules: Vec<&[u8]> = rules.iter().map(Vec::as_slice).collect();
    super::user::apply_rules(&mut user, &rules)?;
    Ok(user)
}

/// Reads `path` and replaces every user with its users, or changes
/// nothing and returns every error found, in Redis's words
/// (ACLLoadFromFile: lines split on spaces, errors gathered per line).
pub fn load(acl: &Acl, path: &str) -> Result<(), String> {
    let text = std::fs::read(path).map_err(|e| {
        format!(
            "Error loading ACLs, opening file '{path}': {}",
            strerror(&e)
        )
    })?;
    let mut errors = String::new();
    let mut users: Vec<User> = Vec::new();
    for (index, raw) in text.split(|&b| b == b'\n').enumerate() {
        let line_no = index + 1;
        let line = trim(raw, b" \t\r\n");
        if line.is_empty() {
            continue;
        }
        let words: Vec<&[u8]> = line.split(|&b| b == b' ').collect();
        if words[0] != b"user" || words.len() < 2 {
            errors.push_str(&format!(
                "{path}:{line_no} should start with user keyword followed by the username. "
            ));
            continue;
        }
        let name = String::from_utf8_lossy(words[1]).into_owned();
        if name.chars().any(|c| c.is_whitespace() || c == '\0') {
            errors.push_str(&format!(
                "'{path}:{line_no}: username '{name}' contains invalid characters. "
            ));
            continue;
        }
        if users.iter().any(|u| u.name == name) {
            errors.push_str(&format!(
                "WARNING: Duplicate user '{name}' found on line {line_no}. "
            ));
            continue;
        }
        let all_channels = acl
            .channels_by_default
            .load(std::sync::atomic::Ordering::Relaxed);
        let mut user = User::created(&name, all_channels);
        let rules = match super::user::merge_selector_arguments(&words[2..]) {
            Ok(rules) => rules,
            Err(_) => {
                errors.push_str(&format!(
                    "{path}:{line_no}: Unmatched parenthesis in selector definition."
                ));
                Vec::new()
            }
        };
        let mut syntax_error = false;
        for rule in &rules {
            let rule = trim(rule, b"\t\r\n");
            match user.apply(rule) {
                Ok(()) => {}
                Err(super::RuleError::Unknown) => errors.push_str(&format!(
                    "{path}:{line_no}: Error in applying operation '{}': {}. ",
                    String::from_utf8_lossy(rule),
                    super::RuleError::Unknown.text()
                )),
                Err(e) if !syntax_error => {
                    errors.push_str(&format!("{path}:{line_no}: {}. ", e.text()));
                    syntax_error = true;
                }
                Err(_) => {}
            }
        }
        users.push(user);
    }
    if !errors.is_empty() {
        errors.push_str(
            "WARNING: ACL errors detected, no change to the previously active ACL rules was \
             performed",
        );
        return Err(errors);
    }
    acl.replace_all(users);
    Ok(())
}

fn trim<'a>(bytes: &'a [u8], set: &[u8]) -> &'a [u8] {
    let start = bytes
        .iter()
        .position(|b| !set.contains(b))
        .unwrap_or(bytes.len());
    let end = bytes
        .iter()
        .rposition(|b| !set.contains(b))
        .map_or(start, |e| e + 1);
    &bytes[start..end]
}

/// An I/O error as C's strerror words it.
fn strerror(e: &std::io::Error) -> String {
    let text = e.to_string();
    match text.find(" (os error") {
        Some(at) => text[..at].to_string(),
        None => text,
    }
}

/// Writes every user to `path` (a temporary file renamed over it).
pub fn save(acl: &Acl, path: &str) -> std::io::Result<()> {
    let temp = format!("{path}.tmp-{}", std::process::id());
    let mut file = std::fs::File::create(&temp)?;
    for user in acl.users() {
        writeln!(file, "user {} {}", user.name, user.describe())?;
    }
    file.sync_all()?;
    drop(file);
    std::fs::rename(&temp, path)
}
