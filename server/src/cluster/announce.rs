//! What this node tells the others and its clients its address is:
//! `cluster-announce-*`, `tls-cluster`'s port switch and
//! `cluster-preferred-endpoint-type`.

use std::sync::atomic::Ordering;

use tally_cluster::node::Node;

use super::Cluster;
use crate::config::EndpointType;

/// What this node tells the others (and clients) its address is: the
/// `cluster-announce-*` options applied to its real ports, with
/// `tls-cluster`'s port switch (Redis's deriveAnnouncedPorts).
#[derive(Debug, Clone, Default)]
pub(super) struct Announced {
    ip: Option<Vec<u8>>,
    port: u16,
    pport: u16,
    cport: u16,
    hostname: Vec<u8>,
}

impl EndpointType {
    pub(super) fn code(self) -> u8 {
        self as u8
    }

    fn from_code(code: u8) -> EndpointType {
        Self::ALL[code as usize]
    }

    /// The endpoint of a node with `ip` and `hostname` (empty: none).
    pub fn endpoint<'a>(self, ip: &'a str, hostname: &'a str) -> &'a str {
        match self {
            EndpointType::Ip => ip,
            EndpointType::Hostname if hostname.is_empty() => "?",
            EndpointType::Hostname => hostname,
            EndpointType::UnknownEndpoint => "",
        }
    }
}

impl Cluster {
    /// Applies the options that shape what this node announces and how
    /// it names nodes: `cluster-announce-ip`, `-port`, `-tls-port`,
    /// `-bus-port` and `-hostname` (empty or 0: the real address),
    /// `tls-cluster`, `cluster-preferred-endpoint-type`. The next
    /// messages carry them.
    pub fn announce(&self, config: &crate::config::Config) {
        let tls = config.tls.cluster && config.tls.port != 0;
        // deriveAnnouncedPorts: with tls-cluster the client port is the
        // TLS one and the plaintext one rides along.
        let (mut port, mut pport) = if tls {
            (config.tls.port, self.port)
        } else {
            (self.port, 0)
        };
        if tls && config.cluster_announce_tls_port != 0 {
            port = config.cluster_announce_tls_port;
            pport = config.cluster_announce_port;
        } else if config.cluster_announce_port != 0 {
            port = config.cluster_announce_port;
        }
        let announced = Announced {
            ip: (!config.cluster_announce_ip.is_empty())
                .then(|| config.cluster_announce_ip.as_bytes().to_vec()),
            port,
            pport,
            cport: match config.cluster_announce_bus_port {
                0 => self.cport,
                bus_port => bus_port,
            },
            hostname: config.cluster_announce_hostname.as_bytes().to_vec(),
        };
        self.tls.store(tls, Ordering::Relaxed);
        self.set_preferred_endpoint(config.cluster_preferred_endpoint_type);
        apply_announced(&mut self.node.lock(), &announced);
        *self.announced.lock() = announced;
    }

    /// True with `tls-cluster`: bus links and MIGRATE run TLS.
    pub fn tls(&self) -> bool {
        self.tls.load(Ordering::Relaxed)
    }

    /// `cluster-preferred-endpoint-type` now.
    pub fn preferred_endpoint(&self) -> EndpointType {
        EndpointType::from_code(self.preferred_endpoint.load(Ordering::Relaxed))
    }

    /// Applies `cluster-preferred-endpoint-type`.
    pub fn set_preferred_endpoint(&self, preferred: EndpointType) {
        self.preferred_endpoint
            .store(preferred.code(), Ordering::Relaxed);
    }
}

/// Gives the state machine what this node announces.
pub(super) fn apply_announced(node: &mut Node, announced: &Announced) {
    node.announce(
        announced.ip.clone(),
        announced.port,
        announced.pport,
        announced.cport,
    );
    node.announce_hostname(&announced.hostname);
}
