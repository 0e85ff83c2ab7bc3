//! The value types of grouped or enumerated settings (`tls-*`,
//! `client-output-buffer-limit`, `appendfsync`,
//! `cluster-preferred-endpoint-type`): defined with the configuration, so
//! that reading a config file needs nothing of the parts that use them;
//! what each part does with its setting stays in that part.

/// The output-buffer limit of subscribers (`client-output-buffer-limit pubsub`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OutputLimit {
    /// Disconnect at once past this many bytes (0 = no limit).
    pub hard: u64,
    /// Disconnect when above this for `soft_seconds` (0 = no limit).
    pub soft: u64,
    /// How long the soft limit may be exceeded.
    pub soft_seconds: u64,
}

impl OutputLimit {
    /// Redis's default for replicas (and so monitors): 256mb 64mb 60.
    pub const REPLICA_DEFAULT: OutputLimit = OutputLimit {
        hard: 256 * 1024 * 1024,
        soft: 64 * 1024 * 1024,
        soft_seconds: 60,
    };

    /// Redis's default for pub/sub clients: 32mb 8mb 60.
    pub const PUBSUB_DEFAULT: OutputLimit = OutputLimit {
        hard: 32 * 1024 * 1024,
        soft: 8 * 1024 * 1024,
        soft_seconds: 60,
    };
}

/// `cluster-preferred-endpoint-type`: how MOVED and ASK, CLUSTER SLOTS and
/// CLUSTER SHARDS name a node (Redis's getPreferredEndpoint).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum EndpointType {
    /// By its IP.
    #[default]
    Ip,
    /// By the hostname it announces (`?` when it announces none).
    Hostname,
    /// By nothing: clients reach the slot on the address they asked.
    UnknownEndpoint,
}

impl EndpointType {
    /// Every type, in the order of their bus codes.
    pub const ALL: [EndpointType; 3] = [
        EndpointType::Ip,
        EndpointType::Hostname,
        EndpointType::UnknownEndpoint,
    ];

    /// The setting's value.
    pub fn name(self) -> &'static str {
        match self {
            EndpointType::Ip => "ip",
            EndpointType::Hostname => "hostname",
            EndpointType::UnknownEndpoint => "unknown-endpoint",
        }
    }

    /// Parses the setting's value (case-insensitive, as Redis's enums).
    pub fn parse(value: &str) -> Option<EndpointType> {
        Self::ALL
            .into_iter()
            .find(|t| t.name().eq_ignore_ascii_case(value))
    }
}

/// `tls-auth-clients`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ClientAuth {
    /// A client certificate signed by the CA is required.
    Yes,
    /// None is asked for.
    No,
    /// One is verified if the client offers it.
    Optional,
}

impl ClientAuth {
    /// The option's value.
    pub fn name(self) -> &'static str {
        match self {
            ClientAuth::Yes => "yes",
            ClientAuth::No => "no",
            ClientAuth::Optional => "optional",
        }
    }

    /// Parses the option's value.
    pub fn parse(value: &str) -> Option<ClientAuth> {
        match value.to_ascii_lowercase().as_str() {
            "yes" => Some(ClientAuth::Yes),
            "no" => Some(ClientAuth::No),
            "optional" => Some(ClientAuth::Optional),
            _ => None,
        }
    }
}

/// The `tls-*` options.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TlsSettings {
    /// `tls-port` (0: no TLS listener).
    pub port: u16,
    /// `tls-cert-file`: the server's certificate chain (PEM).
    pub cert_file: String,
    /// `tls-key-file`: its private key (PEM).
    pub key_file: String,
    /// `tls-key-file-pass`: the password of an encrypted private key.
    pub key_file_pass: String,
    /// `tls-ca-cert-file`: CA certificates clients are verified against.
    pub ca_cert_file: String,
    /// `tls-ca-cert-dir`: a directory of them.
    pub ca_cert_dir: String,
    /// `tls-auth-clients`.
    pub auth_clients: ClientAuth,
    /// `tls-protocols` ("" = TLSv1.2 and TLSv1.3).
    pub protocols: String,
    /// `tls-ciphersuites`: TLS 1.3 suites, colon-separated ("" = all).
    pub ciphersuites: String,
    /// `tls-ciphers`: TLS 1.2 ciphers in OpenSSL's names ("" = all).
    pub ciphers: String,
    /// `tls-prefer-server-ciphers`.
    pub prefer_server_ciphers: bool,
    /// `tls-session-caching`.
    pub session_caching: bool,
    /// `tls-session-cache-size`.
    pub session_cache_size: u64,
    /// `tls-session-cache-timeout` (seconds; rustls's cache has none of
    /// its own: accepted and shown).
    pub session_cache_timeout: u64,
    /// `tls-cluster`: the cluster bus (and MIGRATE between nodes) over TLS.
    pub cluster: bool,
    /// `tls-replication`: a replica's link to its master over TLS (the
    /// master's side needs nothing: its replicas come in on the TLS port).
    pub replication: bool,
    /// `tls-client-cert-file`: the certificate this node shows when it
    /// connects to another (bus links, MIGRATE); empty: `tls-cert-file`.
    pub client_cert_file: String,
    /// `tls-client-key-file`: its key; empty: `tls-key-file`.
    pub client_key_file: String,
    /// `tls-client-key-file-pass`: the password of the client key.
    pub client_key_file_pass: String,
}

impl Default for TlsSettings {
    fn default() -> TlsSettings {
        TlsSettings {
            port: 0,
            cert_file: String::new(),
            key_file: String::new(),
            key_file_pass: String::new(),
            ca_cert_file: String::new(),
            ca_cert_dir: String::new(),
            auth_clients: ClientAuth::Yes,
            protocols: String::new(),
            ciphersuites: String::new(),
            ciphers: String::new(),
            prefer_server_ciphers: false,
            session_caching: true,
            session_cache_size: 20 * 1024,
            session_cache_timeout: 300,
            cluster: false,
            replication: false,
            client_cert_file: String::new(),
            client_key_file: String::new(),
            client_key_file_pass: String::new(),
        }
    }
}

/// `enable-protected-configs`: who may CONFIG SET the parameters that
/// decide where files are written (Redis's PROTECTED_CONFIG: `dir`,
/// `dbfilename`), which an attacker with a connection would otherwise
/// point at a file of their choosing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ProtectedAction {
    /// Refused to every client (Redis's default).
    No,
    /// Allowed to every client.
    Yes,
    /// Allowed to clients on the loopback interface.
    Local,
}

impl ProtectedAction {
    /// The setting's name.
    pub fn name(self) -> &'static str {
        match self {
            ProtectedAction::No => "no",
            ProtectedAction::Yes => "yes",
            ProtectedAction::Local => "local",
        }
    }

    /// Parses the setting's value.
    pub fn parse(value: &str) -> Option<ProtectedAction> {
        match value.to_ascii_lowercase().as_str() {
            "no" => Some(ProtectedAction::No),
            "yes" => Some(ProtectedAction::Yes),
            "local" => Some(ProtectedAction::Local),
            _ => None,
        }
    }

    /// Whether a client on this host or not (`local`: the loopback
    /// interface or the Unix socket) may take the action.
    pub fn allows(self, local: bool) -> bool {
        match self {
            ProtectedAction::No => false,
            ProtectedAction::Yes => true,
            ProtectedAction::Local => local,
        }
    }
}

/// How a shutdown treats the dataset: SHUTDOWN's arguments, or the
/// `shutdown-on-sigterm` / `shutdown-on-sigint` flags a signal takes (Redis's
/// SHUTDOWN_* flags). None set is Redis's `default`: save when save points
/// are configured.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ShutdownFlags {
    /// Save the snapshot even without save points.
    pub save: bool,
    /// Do not save, even with save points.
    pub nosave: bool,
    /// Do not wait for lagging replicas.
    pub now: bool,
    /// Go on even if the save fails.
    pub force: bool,
}

impl ShutdownFlags {
    /// Reads the flags as Redis's CONFIG reads them: words from
    /// `default save nosave now force` in any case and order, `default`
    /// adding nothing, SAVE and NOSAVE not together.
    pub fn parse(values: &[String]) -> Result<ShutdownFlags, String> {
        let mut flags = ShutdownFlags::default();
        let words: Vec<&str> = values.iter().flat_map(|v| v.split_whitespace()).collect();
        if words.is_empty() {
            return Err(Self::UNKNOWN.to_string());
        }
        for word in words {
            match word.to_ascii_lowercase().as_str() {
                "default" => {}
                "save" => flags.save = true,
                "nosave" => flags.nosave = true,
                "now" => flags.now = true,
                "force" => flags.force = true,
                _ => return Err(Self::UNKNOWN.to_string()),
            }
        }
        if flags.save && flags.nosave {
            return Err(
                "shutdown options SAVE and NOSAVE can't be used simultaneously".to_string(),
            );
        }
        Ok(flags)
    }

    const UNKNOWN: &'static str =
        "argument(s) must be one of the following: default, save, nosave, now, force";

    /// As CONFIG GET shows them: the flags set, in Redis's order, or
    /// `default`.
    pub fn shown(self) -> String {
        let names: Vec<&str> = [
            (self.save, "save"),
            (self.nosave, "nosave"),
            (self.now, "now"),
            (self.force, "force"),
        ]
        .into_iter()
        .filter_map(|(set, name)| set.then_some(name))
        .collect();
        if names.is_empty() {
            "default".to_string()
        } else {
            names.join(" ")
        }
    }
}

/// `appendfsync`: when the file is fsynced.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fsync {
    /// Before the replies of every batch that wrote are sent.
    Always,
    /// Once a second, in the background.
    EverySec,
    /// When the kernel decides.
    No,
}

impl Fsync {
    /// The setting's name.
    pub fn name(self) -> &'static str {
        match self {
            Fsync::Always => "always",
            Fsync::EverySec => "everysec",
            Fsync::No => "no",
        }
    }

    /// Parses the setting's value.
    pub fn parse(value: &str) -> Option<Fsync> {
        match value.to_ascii_lowercase().as_str() {
            "always" => Some(Fsync::Always),
            "everysec" => Some(Fsync::EverySec),
            "no" => Some(Fsync::No),
            _ => None,
        }
    }
}
