//! A selector: one set of permissions (commands by the command table's
//! indexes, key patterns with read/write permissions, channel patterns),
//! the rules that change it and the rules that describe it back, as Redis
//! 7.0's ACLSetSelector and ACLDescribeSelector.

use std::collections::BTreeMap;

use super::user::RuleError;
use crate::catalog::{registry, Command};

/// Key pattern permissions (`%R~`, `%W~`, `~` is both).
pub const READ: u8 = 1;
/// Write permission of a key pattern.
pub const WRITE: u8 = 2;
/// Both.
pub const ALL: u8 = READ | WRITE;

pub use crate::catalog::ACL_CATEGORIES as CATEGORIES;

/// Each command's category bits (bit i = `CATEGORIES[i]`), by registry index.
pub fn category_bits() -> &'static [u32] {
    static BITS: std::sync::OnceLock<Vec<u32>> = std::sync::OnceLock::new();
    BITS.get_or_init(|| {
        registry()
            .all()
            .map(|command| {
                command
                    .acl_category_names()
                    .into_iter()
                    .filter_map(|name| CATEGORIES.iter().position(|c| *c == name))
                    .fold(0u32, |bits, i| bits | 1 << i)
            })
            .collect()
    })
}

/// The bit of a category name (case-insensitive), if it is one.
pub fn category_bit(name: &str) -> Option<u32> {
    CATEGORIES
        .iter()
        .position(|c| c.eq_ignore_ascii_case(name))
        .map(|i| 1 << i)
}

/// A key pattern and what it grants.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeyPattern {
    /// The glob.
    pub pattern: Vec<u8>,
    /// [`READ`], [`WRITE`] or both.
    pub flags: u8,
    /// How a key is matched, decided when the rule is set rather than on
    /// every key.
    matcher: Matcher,
}

/// How a [`KeyPattern`] matches a key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Matcher {
    /// A literal prefix of at most 8 bytes and a final `*` (`rl:*`): the
    /// key's first 8 bytes, as a word, agree with `prefix` under `mask`
    /// (one comparison instead of a call to memcmp), and the key has at
    /// least `min_len` bytes: the prefix's length, and 1 for the bare `*`,
    /// which in Redis's glob matches no empty key.
    ShortPrefix {
        prefix: u64,
        mask: u64,
        min_len: usize,
    },
    /// A longer literal prefix (this many bytes) and a final `*`.
    Prefix(usize),
    /// Anything else: Redis's glob.
    Glob,
}

/// The first (up to) 8 bytes of `bytes` as a little-endian word, zeros
/// past its end.
#[inline]
fn first_word(bytes: &[u8]) -> u64 {
    match bytes.first_chunk::<8>() {
        Some(&eight) => u64::from_le_bytes(eight),
        None => {
            let mut word = [0; 8];
            word[..bytes.len()].copy_from_slice(bytes);
            u64::from_le_bytes(word)
        }
    }
}

impl KeyPattern {
    /// The pattern `pattern` granting `flags`.
    pub fn new(pattern: Vec<u8>, flags: u8) -> KeyPattern {
        let matcher = match pattern.split_last() {
            Some((b'*', prefix)) if !prefix.iter().any(|b| b"*?[\\".contains(b)) => {
                if prefix.len() <= 8 {
                    Matcher::ShortPrefix {
                        prefix: first_word(prefix),
                        mask: u64::MAX
                            .checked_shr(64 - 8 * prefix.len() as u32)
                            .unwrap_or(0),
                        min_len: prefix.len().max(1),
                    }
                } else {
                    Matcher::Prefix(prefix.len())
                }
            }
            _ => Matcher::Glob,
        };
        KeyPattern {
            pattern,
            flags,
            matcher,
        }
    }

    /// True when `key` matches. The common gateway pattern, a literal
    /// prefix and one final `*` (`rl:*`), is a prefix test; anything else
    /// goes through Redis's glob.
    #[inline(always)]
    pub fn matches(&self, key: &[u8]) -> bool {
        match self.matcher {
            Matcher::ShortPrefix {
                prefix,
                mask,
                min_len,
            } => key.len() >= min_len && (first_word(key) ^ prefix) & mask == 0,
            Matcher::Prefix(len) => key.starts_with(&self.pattern[..len]),
            Matcher::Glob => crate::glob::glob_match(&self.pattern, key, false),
        }
    }
}

/// One set of permissions; a user's first is its root selector.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Selector {
    /// Every command is allowed: set by `+@all` / `allcommands`, cleared
    /// by any command taken away (Redis's SELECTOR_FLAG_ALLCOMMANDS), so
    /// that the check can skip the table.
    pub all_commands: bool,
    /// `+@all` / `allcommands` was given and not undone by `-@all`: ACL
    /// LIST describes the rules from `+@all` (Redis keeps this as the bit
    /// of commands added later, which `-get` leaves alone).
    pub from_all: bool,
    /// Allowed commands, by registry index.
    pub allowed: Vec<bool>,
    /// `+cmd|firstarg` of commands otherwise denied.
    pub first_args: BTreeMap<usize, Vec<String>>,
    /// `allkeys` / `~*`.
    pub all_keys: bool,
    /// Key patterns, in the order given.
    pub patterns: Vec<KeyPattern>,
    /// `allchannels` / `&*`.
    pub all_channels: bool,
    /// Channel patterns, in the order given.
    pub channels: Vec<Vec<u8>>,
}

impl Selector {
    /// A selector that allows nothing (Redis's `acl-pubsub-default`
    /// resetchannels: no channels either).
    pub fn empty() -> Selector {
        Selector {
            all_commands: false,
            from_all: false,
            allowed: vec![false; registry().len()],
            first_args: BTreeMap::new(),
            all_keys: false,
            patterns: Vec::new(),
            all_channels: false,
            channels: Vec::new(),
        }
    }

    /// A new selector as `acl-pubsub-default` has it: no commands or keys,
    /// and every channel when `all_channels` (`allchannels`), none
    /// otherwise (`resetchannels`, Redis 7's default).
    pub fn new_default(all_channels: bool) -> Selector {
        Selector {
            all_channels,
            ..Selector::empty()
        }
    }

    /// True when the selector allows every command, key and channel.
    pub fn unrestricted(&self) -> bool {
        self.all_commands && self.all_keys && self.all_channels && self.allowed.iter().all(|&a| a)
    }

    /// True when a key pattern grants `needed` ([`READ`], [`WRITE`]) on
    /// `key`. A plain loop, inlined into the check's key loop: as
    /// `Iterator::any` it stayed a call per key, whose register saves cost
    /// as much as the prefix test itself.
    #[inline(always)]
    pub fn grants_key(&self, key: &[u8], needed: u8) -> bool {
        for pattern in &self.patterns {
            if pattern.flags & needed == needed && pattern.matches(key) {
                return true;
            }
        }
        false
    }

    /// Allows or denies a command, and with a container all its
    /// subcommands (ACLChangeSelectorPerm).
    fn change(&mut self, command: &Command, allow: bool) {
        let registry = registry();
        if !allow {
            self.all_commands = false;
        }
        if let Some(index) = registry.index_of(command.name.as_bytes()) {
            self.allowed[index] = allow;
            self.first_args.remove(&index);
        }
        for sub in command.subcommands {
            if let Some(index) = registry.index_of(sub.name.as_bytes()) {
                self.allowed[index] = allow;
            }
        }
    }

    /// `+@category` / `-@category`.
    fn change_category(&mut self, bit: u32, allow: bool) {
        let bits = category_bits();
        let registry = registry();
        for command in registry.top_level() {
            let index = registry.index_of(command.name.as_bytes()).unwrap_or(0);
            if bits[index] & bit != 0 {
                self.change(command, allow);
            }
            for sub in command.subcommands {
                let sub_index = registry.index_of(sub.name.as_bytes()).unwrap_or(0);
                if bits[sub_index] & bit != 0 {
                    self.change(sub, allow);
                }
            }
        }
    }

    /// Applies one selector rule (ACLSetSelector).
    pub fn apply(&mut self, op: &[u8]) -> Result<(), RuleError> {
        let lower = String::from_utf8_lossy(op).to_ascii_lowercase();
        match lower.as_str() {
            "allkeys" | "~*" => {
                self.all_keys = true;
                self.patterns.clear();
                return Ok(());
            }
            "resetkeys" => {
                self.all_keys = false;
                self.patterns.clear();
                return Ok(());
            }
            "allchannels" | "&*" => {
                self.all_channels = true;
                self.channels.clear();
                return Ok(());
            }
            "resetchannels" => {
                self.all_channels = false;
                self.channels.clear();
                return Ok(());
            }
            "allcommands" | "+@all" => {
                self.allowed.iter_mut().for_each(|a| *a = true);
                self.all_commands = true;
                self.from_all = true;
                self.first_args.clear();
                return Ok(());
            }
            "nocommands" | "-@all" => {
                self.allowed.iter_mut().for_each(|a| *a = false);
                self.all_commands = false;
                self.from_all = false;
                self.first_args.clear();
                return Ok(());
            }
            _ => {}
        }
        match op.first() {
            Some(b'~') | Some(b'%') => self.add_key_pattern(op),
            Some(b'&') => {
                if self.all_channels {
                    return Err(RuleError::AfterAllChannels);
                }
                let pattern = &op[1..];
                if has_spaces(pattern) {
                    return Err(RuleError::Syntax);
                }
                if !self.channels.iter().any(|c| c == pattern) {
                    self.channels.push(pattern.to_vec());
                }
                Ok(())
            }
            Some(b'+') if op.get(1) != Some(&b'@') => self.allow_command(&lower[1..]),
            Some(b'-') if op.get(1) != Some(&b'@') => {
                let command = registry()
                    .lookup_full(&lower.as_bytes()[1..])
                    .ok_or(RuleError::Unknown)?;
                self.change(command, false);
                Ok(())
            }
            Some(b'+') | Some(b'-') => {
                let bit = category_bit(&lower[2..]).ok_or(RuleError::Unknown)?;
                self.change_category(bit, op[0] == b'+');
                Ok(())
            }
            _ => Err(RuleError::Syntax),
        }
    }

    fn add_key_pattern(&mut self, op: &[u8]) -> Result<(), RuleError> {
        if self.all_keys {
            return Err(RuleError::AfterAllKeys);
        }
        let mut flags = 0u8;
        let mut offset = 1;
        if op[0] == b'%' {
            // As Redis after CVE-2024-31227 and CVE-2024-51741: R and W at
            // most once each, then `~` and the pattern. No permission at all
            // (`%~`, `%`) is an error: Redis asserted later on such a
            // selector. A missing `~` (`%RW`) is accepted as an empty
            // pattern, which matches no key, as Redis accepts it.
            while let Some(&c) = op.get(offset) {
                match c.to_ascii_uppercase() {
                    b'R' if flags & READ == 0 => flags |= READ,
                    b'W' if flags & WRITE == 0 => flags |= WRITE,
                    b'~' => {
                        offset += 1;
                        break;
                    }
                    _ => return Err(RuleError::Syntax),
                }
                offset += 1;
            }
            if flags == 0 {
                return Err(RuleError::Syntax);
            }
        } else {
            flags = ALL;
        }
        let pattern = &op[offset..];
        if has_spaces(pattern) {
            return Err(RuleError::Syntax);
        }
        match self.patterns.iter_mut().find(|p| p.pattern == pattern) {
            Some(existing) => existing.flags |= flags,
            None => self.patterns.push(KeyPattern::new(pattern.to_vec(), flags)),
        }
        Ok(())
    }

    /// `+cmd`, `+container|sub`, `+cmd|firstarg`.
    fn allow_command(&mut self, name: &str) -> Result<(), RuleError> {
        let registry = registry();
        let Some((container, sub)) = name.rsplit_once('|') else {
            let command = registry
                .lookup_full(name.as_bytes())
                .ok_or(RuleError::Unknown)?;
            self.change(command, true);
            return Ok(());
        };
        let command = registry
            .lookup_full(container.as_bytes())
            .ok_or(RuleError::Unknown)?;
        if command.name.contains('|') {
            return Err(RuleError::FirstArgOfSubcommand);
        }
        if sub.is_empty() {
            return Err(RuleError::Syntax);
        }
        if !command.subcommands.is_empty() {
            let sub = registry
                .lookup_full(name.as_bytes())
                .ok_or(RuleError::Unknown)?;
            self.change(sub, true);
        } else {
            let index = registry
                .index_of(command.name.as_bytes())
                .ok_or(RuleError::Unknown)?;
            let args = self.first_args.entry(index).or_default();
            if !args.iter().any(|a| a == sub) {
                args.push(sub.to_string());
            }
        }
        Ok(())
    }

    /// The selector's rules as ACL LIST shows them: keys, channels,
    /// commands.
    pub fn describe(&self) -> String {
        let mut out = String::new();
        if self.all_keys {
            out.push_str("~* ");
        } else {
            for pattern in &self.patterns {
                out.push_str(&pattern_string(pattern));
                out.push(' ');
            }
        }
        if self.all_channels {
            out.push_str("&* ");
        } else {
            out.push_str("resetchannels ");
            for channel in &self.channels {
                out.push('&');
                out.push_str(&String::from_utf8_lossy(channel));
                out.push(' ');
            }
        }
        out.push_str(&self.describe_commands());
        out
    }

    /// The command rules alone, as Redis derives them: `+@all` or `-@all`,
    /// the categories that best fit, then single commands
    /// (ACLDescribeSelectorCommandRules).
    pub fn describe_commands(&self) -> String {
        let mut rules = String::new();
        let additive = !self.from_all;
        let mut fake = Selector::empty();
        if additive {
            rules.push_str("-@all ");
        } else {
            rules.push_str("+@all ");
            fake.apply(b"+@all").ok();
        }
        let mut temp = self.clone();
        let mut applied = vec![false; CATEGORIES.len()];
        let bits = category_bits();
        loop {
            let mut best: Option<usize> = None;
            let (mut min_diff, mut max_same) = (usize::MAX, 0usize);
            for (j, _) in CATEGORIES.iter().enumerate() {
                if applied[j] {
                    continue;
                }
                let (mut on, mut off) = (0usize, 0usize);
                for (index, allowed) in temp.allowed.iter().enumerate() {
                    if bits[index] & (1 << j) != 0 {
                        if *allowed {
                            on += 1;
                        } else {
                            off += 1;
                        }
                    }
                }
                let (diff, same) = if additive { (off, on) } else { (on, off) };
                if same > diff && (diff < min_diff || (diff == min_diff && same > max_same)) {
                    best = Some(j);
                    min_diff = diff;
                    max_same = same;
                }
            }
            let Some(best) = best else { break };
            let name = CATEGORIES[best];
            let (op, inverse) = if additive {
                (format!("+@{name}"), format!("-@{name}"))
            } else {
                (format!("-@{name}"), format!("+@{name}"))
            };
            fake.apply(op.as_bytes()).ok();
            temp.apply(inverse.as_bytes()).ok();
            rules.push_str(&op);
            rules.push(' ');
            applied[best] = true;
        }
        let registry = registry();
        let single = |command: &'static Command, rules: &mut String, fake: &mut Selector| {
            let Some(index) = registry.index_of(command.name.as_bytes()) else {
                return;
            };
            let user_bit = self.allowed[index];
            if user_bit != fake.allowed[index] {
                rules.push(if user_bit { '+' } else { '-' });
                rules.push_str(command.name);
                rules.push(' ');
                fake.change(command, user_bit);
            }
            if !user_bit {
                for arg in self.first_args.get(&index).into_iter().flatten() {
                    rules.push_str(&format!("+{}|{arg} ", command.name));
                }
            }
        };
        for command in registry.top_level() {
            single(command, &mut rules, &mut fake);
            for sub in command.subcommands {
                single(sub, &mut rules, &mut fake);
            }
        }
        rules.pop();
        rules
    }
}

/// `~pat`, `%R~pat` or `%W~pat`.
pub fn pattern_string(pattern: &KeyPattern) -> String {
    let prefix = match pattern.flags {
        READ => "%R~",
        WRITE => "%W~",
        _ => "~",
    };
    format!("{prefix}{}", String::from_utf8_lossy(&pattern.pattern))
}

fn has_spaces(text: &[u8]) -> bool {
    text.iter().any(|&b| b.is_ascii_whitespace() || b == 0)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A literal prefix and a final `*` is a prefix test; a pattern with
    /// glob characters before its last `*` still goes through the glob.
    #[test]
    fn key_patterns_match_as_redis_globs() {
        let cases: [(&[u8], &[u8], bool); 19] = [
            (b"rl:*", b"rl:{u}:1:c", true),
            (b"rl:*", b"rl:1", true),
            (b"ab*", b"a", false),
            (b"ab*", b"xb", false),
            (b"*", b"", false),
            (b"*", b"k", true),
            (b"12345678*", b"12345678", true),
            (b"12345678*", b"1234567x9", false),
            (b"123456789*", b"123456789abc", true),
            (b"123456789*", b"123456780abc", false),
            (b"rl:*", b"rl:", true),
            (b"rl:*", b"rx:1", false),
            (b"rl:*", b"r", false),
            (b"*", b"anything", true),
            (b"r?:*", b"rl:1", true),
            (b"r[lx]:*", b"rx:1", true),
            (b"r[lx]:*", b"ry:1", false),
            (b"a\\*b*", b"a*bc", true),
            (b"a\\*b*", b"axbc", false),
        ];
        for (pattern, key, expected) in cases {
            let compiled = KeyPattern::new(pattern.to_vec(), READ);
            assert_eq!(compiled.matches(key), expected, "{pattern:?} {key:?}");
            assert_eq!(
                crate::glob::glob_match(pattern, key, false),
                expected,
                "the glob itself: {pattern:?} {key:?}"
            );
        }
    }
}
