//! ACL users as Redis 7.0 keeps them (passwords, flags, selectors: see
//! `selector`), the rules that change them (`ACL SETUSER`, `user`
//! directives) and how they are described back, with Redis's error texts.

use sha2::{Digest, Sha256};

pub use super::selector::{
    category_bit, category_bits, pattern_string, KeyPattern, Selector, ALL, CATEGORIES, READ, WRITE,
};

/// Why a rule was refused, worded as Redis's ACLSetUserStringError.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RuleError {
    /// EINVAL.
    Syntax,
    /// ENOENT.
    Unknown,
    /// EEXIST.
    AfterAllKeys,
    /// EISDIR.
    AfterAllChannels,
    /// ENODEV.
    NoSuchPassword,
    /// EBADMSG.
    BadHash,
    /// ECHILD.
    FirstArgOfSubcommand,
    /// A selector rule inside `(...)` failed: Redis reports the default.
    InSelector,
}

impl RuleError {
    /// Redis's text.
    pub fn text(self) -> &'static str {
        match self {
            RuleError::Syntax => "Syntax error",
            RuleError::Unknown => "Unknown command or category name in ACL",
            RuleError::AfterAllKeys => {
                "Adding a pattern after the * pattern (or the 'allkeys' flag) is not valid and \
                 does not have any effect. Try 'resetkeys' to start with an empty list of patterns"
            }
            RuleError::AfterAllChannels => {
                "Adding a pattern after the * pattern (or the 'allchannels' flag) is not valid \
                 and does not have any effect. Try 'resetchannels' to start with an empty list of \
                 channels"
            }
            RuleError::NoSuchPassword => {
                "The password you are trying to remove from the user does not exist"
            }
            RuleError::BadHash => {
                "The password hash must be exactly 64 characters and contain only lowercase \
                 hexadecimal characters"
            }
            RuleError::FirstArgOfSubcommand => {
                "Allowing first-arg of a subcommand is not supported"
            }
            RuleError::InSelector => "Syntax error",
        }
    }
}

/// A user.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct User {
    /// Its name.
    pub name: String,
    /// `on`: it may authenticate.
    pub enabled: bool,
    /// `nopass`: any password is accepted.
    pub nopass: bool,
    /// `sanitize-payload` (Some(true)) or `skip-sanitize-payload`
    /// (Some(false)); neither until a rule says (Redis 7.0 shows neither).
    pub sanitize: Option<bool>,
    /// SHA-256 hex digests of its passwords.
    pub passwords: Vec<String>,
    /// The root selector first, then `(...)` selectors.
    pub selectors: Vec<Selector>,
    /// The root selector allows everything: nothing is checked (kept up to
    /// date by [`User::apply`], so the per-command test is one load).
    unrestricted: bool,
    /// `acl-pubsub-default allchannels` when the rules are applied: a new
    /// selector and `reset` start from every channel rather than none, as
    /// Redis's ACLCreateSelector and `reset` read the setting. Set by
    /// whoever applies rules (ACL SETUSER, the ACL file, the config's
    /// users); not part of the user's rules.
    pub channels_by_default: bool,
}

/// SHA-256 of a password, in lowercase hex (ACLHashPassword).
pub fn hash_password(password: &[u8]) -> String {
    Sha256::digest(password)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

fn valid_hash(hash: &[u8]) -> bool {
    hash.len() == 64
        && hash
            .iter()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(b))
}

impl User {
    /// A new user, as ACL SETUSER creates one: off, no passwords, no
    /// permissions.
    pub fn new(name: &str) -> User {
        User::created(name, false)
    }

    /// A new user under `acl-pubsub-default`: with `all_channels`
    /// (`allchannels`) its root selector starts with every channel.
    pub fn created(name: &str, all_channels: bool) -> User {
        User {
            name: name.to_string(),
            enabled: false,
            nopass: false,
            sanitize: None,
            passwords: Vec::new(),
            selectors: vec![Selector::new_default(all_channels)],
            unrestricted: false,
            channels_by_default: all_channels,
        }
    }

    /// The default user of a server without `requirepass`: on, nopass,
    /// every key, channel and command.
    pub fn default_user() -> User {
        let mut user = User::new("default");
        for rule in ["on", "nopass", "~*", "&*", "+@all"] {
            user.apply(rule.as_bytes()).ok();
        }
        user
    }

    /// True when nothing is checked for this user.
    #[inline]
    pub fn unrestricted(&self) -> bool {
        self.unrestricted
    }

    /// Applies one rule (ACLSetUser).
    pub fn apply(&mut self, op: &[u8]) -> Result<(), RuleError> {
        let outcome = self.apply_rule(op);
        self.unrestricted = self.selectors[0].unrestricted();
        outcome
    }

    fn apply_rule(&mut self, op: &[u8]) -> Result<(), RuleError> {
        if op.is_empty() {
            return Ok(());
        }
        let lower = String::from_utf8_lossy(op).to_ascii_lowercase();
        match lower.as_str() {
            "on" => self.enabled = true,
            "off" => self.enabled = false,
            "skip-sanitize-payload" => self.sanitize = Some(false),
            "sanitize-payload" => self.sanitize = Some(true),
            "nopass" => {
                self.nopass = true;
                self.passwords.clear();
            }
            "resetpass" => {
                self.nopass = false;
                self.passwords.clear();
            }
            "clearselectors" => self.selectors.truncate(1),
            "reset" => {
                let channels = if self.channels_by_default {
                    "allchannels"
                } else {
                    "resetchannels"
                };
                for rule in [
                    "resetpass",
                    "resetkeys",
                    channels,
                    "off",
                    "sanitize-payload",
                    "clearselectors",
                    "-@all",
                ] {
                    self.apply(rule.as_bytes())?;
                }
            }
            _ => match op[0] {
                b'>' | b'#' => {
                    let hash = if op[0] == b'>' {
                        hash_password(&op[1..])
                    } else if valid_hash(&op[1..]) {
                        String::from_utf8_lossy(&op[1..]).into_owned()
                    } else {
                        return Err(RuleError::BadHash);
                    };
                    if !self.passwords.contains(&hash) {
                        self.passwords.push(hash);
                    }
                    self.nopass = false;
                }
                b'<' | b'!' => {
                    let hash = if op[0] == b'<' {
                        hash_password(&op[1..])
                    } else if valid_hash(&op[1..]) {
                        String::from_utf8_lossy(&op[1..]).into_owned()
                    } else {
                        return Err(RuleError::BadHash);
                    };
                    let at = self
                        .passwords
                        .iter()
                        .position(|p| *p == hash)
                        .ok_or(RuleError::NoSuchPassword)?;
                    self.passwords.remove(at);
                }
                b'(' if op.last() == Some(&b')') => {
                    let inner = &op[1..op.len() - 1];
                    let words =
                        crate::resp::parse::split_args(inner).ok_or(RuleError::InSelector)?;
                    let mut selector = Selector::new_default(self.channels_by_default);
                    for word in words {
                        selector.apply(&word).map_err(|_| RuleError::InSelector)?;
                    }
                    self.selectors.push(selector);
                }
                _ => self.selectors[0].apply(op)?,
            },
        }
        Ok(())
    }

    /// Checks a password (any, for a nopass user).
    pub fn password_matches(&self, password: &[u8]) -> bool {
        self.nopass || self.passwords.contains(&hash_password(password))
    }

    /// The user's flags, in Redis's order.
    pub fn flags(&self) -> Vec<&'static str> {
        let mut flags = vec![if self.enabled { "on" } else { "off" }];
        if self.nopass {
            flags.push("nopass");
        }
        match self.sanitize {
            Some(false) => flags.push("skip-sanitize-payload"),
            Some(true) => flags.push("sanitize-payload"),
            None => {}
        }
        flags
    }

    /// The user as ACL LIST shows it (without the leading `user <name>`).
    pub fn describe(&self) -> String {
        let mut out = String::new();
        for flag in self.flags() {
            out.push_str(flag);
            out.push(' ');
        }
        for password in &self.passwords {
            out.push('#');
            out.push_str(password);
            out.push(' ');
        }
        for (i, selector) in self.selectors.iter().enumerate() {
            if i == 0 {
                out.push_str(&selector.describe());
            } else {
                out.push_str(&format!(" ({})", selector.describe()));
            }
        }
        out
    }
}

/// Merges arguments that together make one `(...)` selector (ACL SETUSER
/// may split one across several arguments), as ACLMergeSelectorArguments;
/// the index of an unmatched opening one is the error.
pub fn merge_selector_arguments(args: &[&[u8]]) -> Result<Vec<Vec<u8>>, usize> {
    let mut out = Vec::new();
    let mut open: Option<(usize, Vec<u8>)> = None;
    for (i, arg) in args.iter().enumerate() {
        match open.as_mut() {
            Some((_, merged)) => {
                merged.push(b' ');
                merged.extend_from_slice(arg);
                if arg.last() == Some(&b')') {
                    if let Some((_, merged)) = open.take() {
                        out.push(merged);
                    }
                }
            }
            None if arg.first() == Some(&b'(') && arg.last() != Some(&b')') => {
                open = Some((i, arg.to_vec()));
            }
            None => out.push(arg.to_vec()),
        }
    }
    match open {
        Some((i, _)) => Err(i),
        None => Ok(out),
    }
}

/// Applies `rules` (selectors may span arguments) with Redis's errors.
pub fn apply_rules(user: &mut User, rules: &[&[u8]]) -> Result<(), String> {
    let merged = merge_selector_arguments(rules).map_err(|at| {
        format!(
            "Unmatched parenthesis in acl selector starting at '{}'.",
            String::from_utf8_lossy(rules[at])
        )
    })?;
    for rule in &merged {
        user.apply(rule).map_err(|e| {
            format!(
                "Error in ACL SETUSER modifier '{}': {}",
                String::from_utf8_lossy(rule),
                e.text()
            )
        })?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn user(rules: &[&str]) -> User {
        let mut user = User::new("u");
        for rule in rules {
            user.apply(rule.as_bytes()).expect("a valid rule");
        }
        user
    }

    #[test]
    fn users_describe_as_redis_lists_them() {
        assert_eq!(User::default_user().describe(), "on nopass ~* &* +@all");
        assert_eq!(User::new("u").describe(), "off resetchannels -@all");
        assert_eq!(
            user(&["on", ">secret", "~rl:*", "%R~cfg:*", "-@all", "+evalsha", "+get"]).describe(),
            format!(
                "on #{} ~rl:* %R~cfg:* resetchannels -@all +get +evalsha",
                hash_password(b"secret")
            )
        );
    }

    #[test]
    fn bad_rules_are_refused_with_redis_reasons() {
        let mut u = User::new("u");
        assert_eq!(u.apply(b"+nosuchcommand"), Err(RuleError::Unknown));
        assert_eq!(u.apply(b"+@nosuchcategory"), Err(RuleError::Unknown));
        assert_eq!(u.apply(b"bogus"), Err(RuleError::Syntax));
        assert_eq!(u.apply(b"#abc"), Err(RuleError::BadHash));
        assert_eq!(u.apply(b"<never-set"), Err(RuleError::NoSuchPassword));
        assert_eq!(u.apply(b"%X~x"), Err(RuleError::Syntax));
        u.apply(b"allkeys").expect("allkeys");
        assert_eq!(u.apply(b"~x"), Err(RuleError::AfterAllKeys));
    }

    #[test]
    fn selectors_merge_across_arguments() {
        let args: [&[u8]; 4] = [b"on", b"(~a", b"+get)", b"+set"];
        assert_eq!(
            merge_selector_arguments(&args).expect("balanced"),
            vec![b"on".to_vec(), b"(~a +get)".to_vec(), b"+set".to_vec()]
        );
        let unbalanced: [&[u8]; 2] = [b"on", b"(~a"];
        assert_eq!(merge_selector_arguments(&unbalanced), Err(1));
    }
}
