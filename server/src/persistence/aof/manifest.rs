//! Redis 7's append-only file manifest: which files make up the log, in
//! Redis's own format (`file <name> seq <n> type <b|i|h>` per line), so a
//! directory moves between tally and redis-server either way.

use std::fmt::Write as _;
use std::path::Path;

/// A file's role in the log.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// The base: a snapshot (RDB, or commands) the increments apply to.
    Base,
    /// An increment: commands, in order.
    Incr,
    /// Replaced by a rewrite, to be deleted.
    History,
}

impl Kind {
    fn letter(self) -> char {
        match self {
            Kind::Base => 'b',
            Kind::Incr => 'i',
            Kind::History => 'h',
        }
    }
}

/// One file of the log.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileInfo {
    /// Its name inside the append-only directory.
    pub name: String,
    /// Its sequence number (bases and increments count separately).
    pub seq: u64,
    /// What it is.
    pub kind: Kind,
}

/// The files of the log.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Manifest {
    /// The base, if any.
    pub base: Option<FileInfo>,
    /// The increments, oldest first.
    pub incrs: Vec<FileInfo>,
    /// Files a rewrite replaced, not yet deleted.
    pub history: Vec<FileInfo>,
    /// The last base sequence number used.
    pub base_seq: u64,
    /// The last increment sequence number used.
    pub incr_seq: u64,
}

/// The manifest's name: `<appendfilename>.manifest`.
pub fn manifest_name(appendfilename: &str) -> String {
    format!("{appendfilename}.manifest")
}

impl Manifest {
    /// Parses a manifest as Redis's aofLoadManifestFromFile does, with its
    /// error texts.
    pub fn parse(text: &str) -> Result<Manifest, String> {
        let mut manifest = Manifest::default();
        if text.is_empty() {
            return Err("Found an empty AOF manifest".to_string());
        }
        for raw in text.split_inclusive('\n') {
            if raw.starts_with('#') {
                continue;
            }
            if !raw.ends_with('\n') && raw.len() > 1024 {
                return Err("The AOF manifest file contains too long line".to_string());
            }
            let line = raw.trim_matches([' ', '\t', '\r', '\n']);
            let invalid = || "Invalid AOF manifest file format".to_string();
            if line.is_empty() {
                return Err(invalid());
            }
            let words = crate::resp::parse::split_args(line.as_bytes()).ok_or_else(invalid)?;
            if words.len() < 6 || words.len() % 2 != 0 {
                return Err(invalid());
            }
            let (mut name, mut seq, mut kind) = (None, 0u64, None);
            for pair in words.chunks(2) {
                let key = String::from_utf8_lossy(&pair[0]).to_ascii_lowercase();
                let value = String::from_utf8_lossy(&pair[1]).into_owned();
                match key.as_str() {
                    "file" => {
                        if value.contains('/') {
                            return Err("File can't be a path, just a filename".to_string());
                        }
                        name = Some(value);
                    }
                    // atoll: digits up to the first other character.
                    "seq" => {
                        let digits: String =
                            value.chars().take_while(|c| c.is_ascii_digit()).collect();
                        seq = digits.parse().unwrap_or(0);
                    }
                    "type" => kind = value.chars().next(),
                    _ => {}
                }
            }
            let (Some(name), Some(kind)) = (name, kind) else {
                return Err(invalid());
            };
            if seq == 0 {
                return Err(invalid());
            }
            match kind {
                'b' => {
                    if manifest.base.is_some() {
                        return Err("Found duplicate base file information".to_string());
                    }
                    manifest.base_seq = seq;
                    manifest.base = Some(FileInfo {
                        name,
                        seq,
                        kind: Kind::Base,
                    });
                }
                'h' => manifest.history.push(FileInfo {
                    name,
                    seq,
                    kind: Kind::History,
                }),
                'i' => {
                    if seq <= manifest.incr_seq {
                        return Err("Found a non-monotonic sequence number".to_string());
                    }
                    manifest.incr_seq = seq;
                    manifest.incrs.push(FileInfo {
                        name,
                        seq,
                        kind: Kind::Incr,
                    });
                }
                _ => return Err("Unknown AOF file type".to_string()),
            }
        }
        Ok(manifest)
    }

    /// The manifest as Redis writes it: base, history, increments.
    pub fn render(&self) -> String {
        let mut out = String::new();
        let files = self
            .base
            .iter()
            .chain(self.history.iter())
            .chain(self.incrs.iter());
        for file in files {
            let _ = writeln!(
                out,
                "file {} seq {} type {}",
                quoted(&file.name),
                file.seq,
                file.kind.letter()
            );
        }
        out
    }

    /// Starts a new base, `<appendfilename>.<seq>.base.rdb`; the old one
    /// becomes history.
    pub fn new_base(&mut self, appendfilename: &str) -> String {
        if let Some(mut old) = self.base.take() {
            old.kind = Kind::History;
            self.history.insert(0, old);
        }
        self.base_seq += 1;
        let name = format!("{appendfilename}.{}.base.rdb", self.base_seq);
        self.base = Some(FileInfo {
            name: name.clone(),
            seq: self.base_seq,
            kind: Kind::Base,
        });
        name
    }

    /// Starts a new increment, `<appendfilename>.<seq>.incr.aof`.
    pub fn new_incr(&mut self, appendfilename: &str) -> String {
        self.incr_seq += 1;
        let name = format!("{appendfilename}.{}.incr.aof", self.incr_seq);
        self.incrs.push(FileInfo {
            name: name.clone(),
            seq: self.incr_seq,
            kind: Kind::Incr,
        });
        name
    }

    /// After a rewrite: every increment but the last (the one being
    /// written) becomes history.
    pub fn retire_rewritten_incrs(&mut self) {
        let keep = self.incrs.pop();
        self.retire_all_incrs();
        self.incrs.extend(keep);
    }

    /// Every increment becomes history (a rewrite while the log is off).
    pub fn retire_all_incrs(&mut self) {
        for mut old in self.incrs.drain(..).rev() {
            old.kind = Kind::History;
            self.history.insert(0, old);
        }
    }

    /// Base then increments: what a load reads, in order.
    pub fn files_to_load(&self) -> Vec<&FileInfo> {
        self.base.iter().chain(self.incrs.iter()).collect()
    }
}

/// A file name as Redis's sdscatrepr quotes one that needs it. An empty
/// name (a hand-written manifest may hold one) is `""`: left bare, the
/// line would lose a word and not parse again.
fn quoted(name: &str) -> String {
    let plain = !name.is_empty()
        && name
            .bytes()
            .all(|b| b.is_ascii_graphic() && b != b'"' && b != b'\'' && b != b'\\');
    if plain {
        return name.to_string();
    }
    let mut out = String::from("\"");
    for b in name.bytes() {
        match b {
            b'\\' => out.push_str("\\\\"),
            b'"' => out.push_str("\\\""),
            b'\n' => out.push_str("\\n"),
            b'\r' => out.push_str("\\r"),
            b'\t' => out.push_str("\\t"),
            b if b.is_ascii_graphic() || b == b' ' => out.push(b as char),
            b => {
                let _ = write!(out, "\\x{b:02x}");
            }
        }
    }
    out.push('"');
    out
}

/// Writes the manifest durably: a temporary file, fsynced, renamed over
/// the manifest, the directory fsynced.
pub fn persist(dir: &Path, appendfilename: &str, manifest: &Manifest) -> std::io::Result<()> {
    use std::io::Write;
    let name = manifest_name(appendfilename);
    let temp = dir.join(format!("temp-{name}"));
    let mut file = std::fs::File::create(&temp)?;
    file.write_all(manifest.render().as_bytes())?;
    file.sync_all()?;
    drop(file);
    std::fs::rename(&temp, dir.join(&name))?;
    std::fs::File::open(dir)?.sync_all()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn redis_manifest_round_trips() {
        let text = "file appendonly.aof.1.base.rdb seq 1 type b\n\
                    file appendonly.aof.1.incr.aof seq 1 type i\n\
                    file appendonly.aof.2.incr.aof seq 2 type i\n";
        let manifest = Manifest::parse(text).expect("valid");
        assert_eq!(manifest.base_seq, 1);
        assert_eq!(manifest.incrs.len(), 2);
        assert_eq!(manifest.render(), text);
    }

    /// Found by the cluster_bus fuzz target: a name given as `""`
    /// rendered bare, and the rendered manifest no longer parsed.
    #[test]
    fn an_empty_or_odd_file_name_renders_to_a_manifest_that_parses_back() {
        for name in ["", "a b", "q\"x", "\x12ctl"] {
            let manifest = Manifest {
                base: Some(FileInfo {
                    name: name.to_string(),
                    seq: 1,
                    kind: Kind::Base,
                }),
                base_seq: 1,
                ..Manifest::default()
            };
            let rendered = manifest.render();
            assert_eq!(Manifest::parse(&rendered), Ok(manifest), "{rendered:?}");
        }
        assert_eq!(quoted(""), "\"\"");
    }

    #[test]
    fn malformed_manifests_are_refused_with_redis_texts() {
        assert_eq!(
            Manifest::parse("").unwrap_err(),
            "Found an empty AOF manifest"
        );
        assert_eq!(
            Manifest::parse("file a seq 1\n").unwrap_err(),
            "Invalid AOF manifest file format"
        );
        assert_eq!(
            Manifest::parse("file a/b seq 1 type b\n").unwrap_err(),
            "File can't be a path, just a filename"
        );
        assert_eq!(
            Manifest::parse("file a seq 2 type i\nfile b seq 1 type i\n").unwrap_err(),
            "Found a non-monotonic sequence number"
        );
        assert_eq!(
            Manifest::parse("file a seq 1 type x\n").unwrap_err(),
            "Unknown AOF file type"
        );
    }

    #[test]
    fn a_rewrite_moves_old_files_to_history() {
        let mut manifest = Manifest::default();
        manifest.new_base("appendonly.aof");
        manifest.new_incr("appendonly.aof");
        manifest.new_incr("appendonly.aof");
        manifest.new_base("appendonly.aof");
        manifest.retire_rewritten_incrs();
        // History in Redis's order: each retired file goes to the front.
        assert_eq!(
            manifest.render(),
            "file appendonly.aof.2.base.rdb seq 2 type b\n\
             file appendonly.aof.1.incr.aof seq 1 type h\n\
             file appendonly.aof.1.base.rdb seq 1 type h\n\
             file appendonly.aof.2.incr.aof seq 2 type i\n"
        );
    }
}
