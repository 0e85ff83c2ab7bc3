//! `nodes.conf` in Redis 7.0's format (clusterLoadConfig /
//! clusterGenNodesDescription): one line per node, then
//! `vars currentEpoch <n> lastVoteEpoch <n>`. CLUSTER NODES shows the same
//! lines without the `vars` line.

use std::fmt::Write as _;

/// One node's line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeLine {
    /// 40 hex characters.
    pub name: String,
    /// Its IP (empty when unknown).
    pub ip: String,
    /// Its client port (the TLS port in a cluster with `tls-cluster`).
    pub port: u16,
    /// Its plaintext port in a TLS cluster, as it announces it (0: none).
    /// Not in the file (Redis writes only the port); CLUSTER NODES,
    /// SLOTS and SHARDS show it to clients on the plaintext port.
    pub pport: u16,
    /// Its bus port.
    pub cport: u16,
    /// Its announced hostname, if any.
    pub hostname: Option<String>,
    /// `myself`, `master`, `slave`, `fail?`, `fail`, `handshake`, `noaddr`,
    /// `nofailover` (or `noflags`), in the order given.
    pub flags: Vec<String>,
    /// Its master's name, for a replica.
    pub master: Option<String>,
    /// Unix ms of the last PING sent to it (0 when none is pending).
    pub ping_sent: u64,
    /// Unix ms of the last PONG from it.
    pub pong_received: u64,
    /// Its config epoch.
    pub config_epoch: u64,
    /// `connected` or `disconnected`.
    pub link: String,
    /// Slot ranges it serves, inclusive.
    pub slots: Vec<(u16, u16)>,
    /// Slots being moved, in slot order as Redis writes them (only on the
    /// `myself` line).
    pub moving: Vec<(u16, Moving)>,
}

/// A slot on its way to or from this node.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Moving {
    /// `[slot->-node]`: migrating to that node.
    To(String),
    /// `[slot-<-node]`: importing from that node.
    From(String),
}

/// A whole `nodes.conf`.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct NodesConf {
    /// The nodes, `myself` among them.
    pub nodes: Vec<NodeLine>,
    /// The cluster's current epoch.
    pub current_epoch: u64,
    /// The epoch of the last vote this node gave.
    pub last_vote_epoch: u64,
}

fn number<T: std::str::FromStr>(text: &str, what: &str) -> Result<T, String> {
    text.parse().map_err(|_| {
        format!("Unrecoverable error: corrupted cluster config file: bad {what} '{text}'")
    })
}

impl NodeLine {
    /// Parses one node line.
    pub fn parse(line: &str) -> Result<NodeLine, String> {
        let words = words(line);
        if words.len() < 8 {
            return Err(
                "Unrecoverable error: corrupted cluster config file \"".to_string() + line + "\".",
            );
        }
        let (address, hostname) = match words[1].split_once(',') {
            Some((address, hostname)) => (address, Some(hostname.to_string())),
            None => (words[1], None),
        };
        let (host_port, cport) = match address.split_once('@') {
            Some((host_port, cport)) => (host_port, Some(cport)),
            None => (address, None),
        };
        let (ip, port) = host_port.rsplit_once(':').ok_or_else(|| {
            format!("Unrecoverable error: corrupted cluster config file: address '{address}'")
        })?;
        let port: u16 = number(port, "port")?;
        let cport = match cport {
            Some(c) => number(c, "cluster port")?,
            // Before Redis 4 the bus port was not written: port + 10000.
            None => port.wrapping_add(10000),
        };
        let mut node = NodeLine {
            name: words[0].to_string(),
            ip: ip.to_string(),
            port,
            pport: 0,
            cport,
            hostname,
            flags: words[2].split(',').map(str::to_string).collect(),
            master: (words[3] != "-").then(|| words[3].to_string()),
            ping_sent: number(words[4], "ping time")?,
            pong_received: number(words[5], "pong time")?,
            config_epoch: number(words[6], "config epoch")?,
            link: words[7].to_string(),
            slots: Vec::new(),
            moving: Vec::new(),
        };
        for word in &words[8..] {
            if let Some(inner) = word.strip_prefix('[').and_then(|w| w.strip_suffix(']')) {
                if let Some((slot, to)) = inner.split_once("->-") {
                    node.moving
                        .push((number(slot, "slot")?, Moving::To(to.to_string())));
                } else if let Some((slot, from)) = inner.split_once("-<-") {
                    node.moving
                        .push((number(slot, "slot")?, Moving::From(from.to_string())));
                } else {
                    return Err(format!(
                        "Unrecoverable error: corrupted cluster config file: '{word}'"
                    ));
                }
                continue;
            }
            let (start, end) = match word.split_once('-') {
                Some((a, b)) => (number(a, "slot")?, number(b, "slot")?),
                None => {
                    let slot = number(word, "slot")?;
                    (slot, slot)
                }
            };
            node.slots.push((start, end));
        }
        Ok(node)
    }

    /// The line as Redis writes it.
    pub fn render(&self) -> String {
        let mut out = format!("{} {}:{}@{}", self.name, self.ip, self.port, self.cport);
        if let Some(hostname) = &self.hostname {
            let _ = write!(out, ",{hostname}");
        }
        let _ = write!(
            out,
            " {} {} {} {} {} {}",
            self.flags.join(","),
            self.master.as_deref().unwrap_or("-"),
            self.ping_sent,
            self.pong_received,
            self.config_epoch,
            self.link
        );
        for (start, end) in &self.slots {
            if start == end {
                let _ = write!(out, " {start}");
            } else {
                let _ = write!(out, " {start}-{end}");
            }
        }
        for (slot, moving) in &self.moving {
            let _ = match moving {
                Moving::To(node) => write!(out, " [{slot}->-{node}]"),
                Moving::From(node) => write!(out, " [{slot}-<-{node}]"),
            };
        }
        out
    }
}

impl NodesConf {
    /// Parses a whole file.
    pub fn parse(text: &str) -> Result<NodesConf, String> {
        let mut conf = NodesConf::default();
        for line in text.lines() {
            let line = line.trim_end_matches('\r');
            if line.trim().is_empty() {
                continue;
            }
            if let Some(vars) = line.strip_prefix("vars ") {
                let words = words(vars);
                for pair in words.chunks(2) {
                    match pair {
                        ["currentEpoch", n] => conf.current_epoch = number(n, "currentEpoch")?,
                        ["lastVoteEpoch", n] => conf.last_vote_epoch = number(n, "lastVoteEpoch")?,
                        _ => {
                            return Err(format!(
                                "Unrecoverable error: corrupted cluster config file \"{line}\"."
                            ))
                        }
                    }
                }
                continue;
            }
            conf.nodes.push(NodeLine::parse(line)?);
        }
        if !conf
            .nodes
            .iter()
            .any(|n| n.flags.iter().any(|f| f == "myself"))
        {
            return Err(
                "Unrecoverable error: corrupted cluster config file: no node is myself".to_string(),
            );
        }
        Ok(conf)
    }

    /// The file as Redis writes it.
    pub fn render(&self) -> String {
        let mut out = String::new();
        for node in &self.nodes {
            out.push_str(&node.render());
            out.push('\n');
        }
        let _ = writeln!(
            out,
            "vars currentEpoch {} lastVoteEpoch {}",
            self.current_epoch, self.last_vote_epoch
        );
        out
    }
}

/// A line's words: Redis reads nodes.conf with `sdssplitargs`, which
/// splits on C's `isspace` (space, tab, CR, LF, vertical tab, form feed),
/// so a stray CR or tab inside a line separates words there too.
fn words(line: &str) -> Vec<&str> {
    line.split([' ', '\t', '\n', '\x0b', '\x0c', '\r'])
        .filter(|w| !w.is_empty())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    const THREE_NODES: &str = "\
07c37dfeb235213a872192d90877d0cd55635b91 127.0.0.1:30004@40004 slave e7d1eecce10fd6bb5eb35b9f99a514335d9ba9ca 0 1426238317239 4 connected
67ed2db8d677e59ec4a4cefb06858cf2a1a89fa1 127.0.0.1:30002@40002 master - 0 1426238316232 2 connected 5461-10922
292f8b365bb7edb5e285caf0b7e6ddc7265d2f4f 127.0.0.1:30003@40003 master - 0 1426238318243 3 connected 10923-16383
e7d1eecce10fd6bb5eb35b9f99a514335d9ba9ca 127.0.0.1:30001@40001,node-1.example myself,master - 0 0 1 connected 0-5460 [100->-292f8b365bb7edb5e285caf0b7e6ddc7265d2f4f] [5461-<-67ed2db8d677e59ec4a4cefb06858cf2a1a89fa1]
vars currentEpoch 6 lastVoteEpoch 0
";

    /// A CR or tab inside a line separates words, as Redis's
    /// `sdssplitargs` reads it; a CR before a line's trailing space used to
    /// stay in the last word and come back stripped after one rendering
    /// (found by the cluster_bus fuzz target).
    #[test]
    fn carriage_returns_and_tabs_inside_a_line_separate_words() {
        let text = "e7d1eecce10fd6bb5eb35b9f99a514335d9ba9ca\t127.0.0.1:30001@40001 myself,master - 0 0 1 connected\r \nvars currentEpoch 0\rlastVoteEpoch 0\n";
        let conf = NodesConf::parse(text).expect("parses");
        assert_eq!(conf.nodes[0].link, "connected");
        assert_eq!(conf.nodes[0].port, 30001);
        let rendered = conf.render();
        assert_eq!(
            rendered,
            "e7d1eecce10fd6bb5eb35b9f99a514335d9ba9ca 127.0.0.1:30001@40001 myself,master - 0 0 1 connected\nvars currentEpoch 0 lastVoteEpoch 0\n"
        );
        assert_eq!(
            NodesConf::parse(&rendered).expect("parses").render(),
            rendered
        );
    }

    #[test]
    fn a_redis_nodes_conf_round_trips() {
        let conf = NodesConf::parse(THREE_NODES).expect("valid");
        assert_eq!(conf.nodes.len(), 4);
        assert_eq!(conf.current_epoch, 6);
        let me = &conf.nodes[3];
        assert_eq!(me.hostname.as_deref(), Some("node-1.example"));
        assert_eq!(me.slots, vec![(0, 5460)]);
        assert_eq!(
            me.moving[0],
            (
                100,
                Moving::To("292f8b365bb7edb5e285caf0b7e6ddc7265d2f4f".to_string())
            )
        );
        assert!(matches!(me.moving[1], (5461, Moving::From(_))));
        assert_eq!(
            conf.nodes[0].master.as_deref(),
            Some("e7d1eecce10fd6bb5eb35b9f99a514335d9ba9ca")
        );
        assert_eq!(conf.render(), THREE_NODES);
    }

    #[test]
    fn damaged_files_are_refused() {
        assert!(NodesConf::parse("abc 127.0.0.1:1@2 master\n").is_err());
        assert!(NodesConf::parse(
            "67ed2db8d677e59ec4a4cefb06858cf2a1a89fa1 127.0.0.1:30002@40002 master - 0 0 2 connected\n"
        )
        .is_err(), "no myself");
        assert!(NodeLine::parse(
            "67ed2db8d677e59ec4a4cefb06858cf2a1a89fa1 127.0.0.1:x@40002 myself - 0 0 2 connected"
        )
        .is_err());
        // Redis before 4.0 wrote no bus port.
        let old = NodeLine::parse(
            "67ed2db8d677e59ec4a4cefb06858cf2a1a89fa1 127.0.0.1:7000 myself,master - 0 0 2 connected",
        )
        .expect("valid");
        assert_eq!(old.cport, 17000);
    }
}
