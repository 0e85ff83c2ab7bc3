//! TLS as Redis configures it (`tls-port` beside the plain port, the
//! `tls-*` options), with rustls and its `ring` provider: no OpenSSL at
//! build or run time. The acceptor is rebuilt from the files whenever a
//! `tls-*` option is set, so `CONFIG SET tls-cert-file <same path>` loads
//! rotated certificates without a restart; a connection keeps the
//! configuration it was accepted with.

use std::path::Path;
use std::sync::Arc;

use parking_lot::RwLock;
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer};
use tokio_rustls::rustls::{self, server::WebPkiClientVerifier, RootCertStore, ServerConfig};
use tokio_rustls::TlsAcceptor;

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
    /// `tls-key-file-pass`: accepted only empty (see [`build`]).
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
        }
    }
}

/// The acceptor new TLS connections use (none until TLS is configured).
#[derive(Default)]
pub struct Tls {
    acceptor: RwLock<Option<TlsAcceptor>>,
}

impl Tls {
    /// The current acceptor.
    pub fn acceptor(&self) -> Option<TlsAcceptor> {
        self.acceptor.read().clone()
    }

    /// Rebuilds the acceptor from `settings`; on error the previous one
    /// stays and the reason is returned (and logged).
    pub fn install(&self, settings: &TlsSettings) -> Result<(), String> {
        if settings.port == 0 && settings.cert_file.is_empty() {
            *self.acceptor.write() = None;
            return Ok(());
        }
        match build(settings) {
            Ok(config) => {
                *self.acceptor.write() = Some(TlsAcceptor::from(Arc::new(config)));
                Ok(())
            }
            Err(e) => {
                tracing::warn!(error = %e, "failed to configure TLS");
                Err(e)
            }
        }
    }
}

/// OpenSSL's names of the TLS 1.2 ciphers rustls has, and rustls's.
const TLS12_NAMES: &[(&str, &str)] = &[
    (
        "ECDHE-ECDSA-AES256-GCM-SHA384",
        "TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384",
    ),
    (
        "ECDHE-ECDSA-AES128-GCM-SHA256",
        "TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256",
    ),
    (
        "ECDHE-ECDSA-CHACHA20-POLY1305",
        "TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256",
    ),
    (
        "ECDHE-RSA-AES256-GCM-SHA384",
        "TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384",
    ),
    (
        "ECDHE-RSA-AES128-GCM-SHA256",
        "TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256",
    ),
    (
        "ECDHE-RSA-CHACHA20-POLY1305",
        "TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256",
    ),
];

/// The names (IANA's, as OpenSSL's `-ciphersuites` takes them) of the TLS
/// 1.3 suites, and rustls's.
const TLS13_NAMES: &[(&str, &str)] = &[
    ("TLS_AES_256_GCM_SHA384", "TLS13_AES_256_GCM_SHA384"),
    ("TLS_AES_128_GCM_SHA256", "TLS13_AES_128_GCM_SHA256"),
    (
        "TLS_CHACHA20_POLY1305_SHA256",
        "TLS13_CHACHA20_POLY1305_SHA256",
    ),
];

fn read(path: &str, what: &str) -> Result<Vec<u8>, String> {
    std::fs::read(path).map_err(|e| format!("Failed to load {what} {path}: {e}"))
}

/// The rustls configuration the settings describe.
pub fn build(settings: &TlsSettings) -> Result<ServerConfig, String> {
    if settings.cert_file.is_empty() || settings.key_file.is_empty() {
        return Err("No tls-cert-file or tls-key-file configured".to_string());
    }
    if !settings.key_file_pass.is_empty() {
        return Err(
            "tls-key-file-pass: encrypted private keys are not supported; decrypt the key \
             (openssl pkey -in key.pem -out plain.pem) and keep it readable by tally only"
                .to_string(),
        );
    }
    let certs: Vec<CertificateDer<'static>> =
        CertificateDer::pem_slice_iter(&read(&settings.cert_file, "certificate")?)
            .collect::<Result<_, _>>()
            .map_err(|e| format!("Failed to load certificate {}: {e}", settings.cert_file))?;
    if certs.is_empty() {
        return Err(format!("No certificate in {}", settings.cert_file));
    }
    let key = PrivateKeyDer::from_pem_slice(&read(&settings.key_file, "private key")?)
        .map_err(|e| format!("Failed to load private key {}: {e}", settings.key_file))?;

    let mut provider = rustls::crypto::ring::default_provider();
    let wanted12: Vec<&str> = split_names(&settings.ciphers, TLS12_NAMES, "tls-ciphers")?;
    let wanted13: Vec<&str> = split_names(&settings.ciphersuites, TLS13_NAMES, "tls-ciphersuites")?;
    provider.cipher_suites.retain(|suite| {
        let name = format!("{:?}", suite.suite());
        let tls13 = name.starts_with("TLS13_");
        let wanted = if tls13 { &wanted13 } else { &wanted12 };
        wanted.is_empty() || wanted.contains(&name.as_str())
    });
    let versions = protocol_versions(&settings.protocols)?;
    let builder = ServerConfig::builder_with_provider(Arc::new(provider))
        .with_protocol_versions(&versions)
        .map_err(|e| format!("tls-protocols / ciphers: {e}"))?;

    let builder = match settings.auth_clients {
        ClientAuth::No => builder.with_no_client_auth(),
        auth => {
            let roots = Arc::new(ca_roots(settings)?);
            let verifier = WebPkiClientVerifier::builder(roots);
            let verifier = if auth == ClientAuth::Optional {
                verifier.allow_unauthenticated()
            } else {
                verifier
            };
            builder.with_client_cert_verifier(
                verifier
                    .build()
                    .map_err(|e| format!("Failed to configure client verification: {e}"))?,
            )
        }
    };
    let mut config = builder
        .with_single_cert(certs, key)
        .map_err(|e| format!("Failed to use certificate and key: {e}"))?;
    config.ignore_client_order = settings.prefer_server_ciphers;
    config.session_storage = if settings.session_caching {
        rustls::server::ServerSessionMemoryCache::new(settings.session_cache_size.max(1) as usize)
    } else {
        Arc::new(rustls::server::NoServerSessionStorage {})
    };
    if !settings.session_caching {
        config.send_tls13_tickets = 0;
    }
    Ok(config)
}

/// Names in an OpenSSL-style list (`:`-separated), mapped to rustls's.
fn split_names<'a>(
    list: &str,
    table: &'a [(&str, &'a str)],
    option: &str,
) -> Result<Vec<&'a str>, String> {
    let mut out = Vec::new();
    for name in list.split([':', ',', ' ']).filter(|n| !n.is_empty()) {
        match table
            .iter()
            .find(|(openssl, _)| openssl.eq_ignore_ascii_case(name))
        {
            Some((_, rustls)) => out.push(*rustls),
            None => {
                return Err(format!(
                    "{option}: '{name}' is not a cipher tally's TLS offers (known: {})",
                    table.iter().map(|(n, _)| *n).collect::<Vec<_>>().join(":")
                ))
            }
        }
    }
    Ok(out)
}

/// `tls-protocols`: "TLSv1.2 TLSv1.3" by default; TLSv1 and TLSv1.1 are
/// refused (rustls does not implement them; Redis's defaults leave them
/// out too).
fn protocol_versions(
    protocols: &str,
) -> Result<Vec<&'static rustls::SupportedProtocolVersion>, String> {
    let mut versions = Vec::new();
    for word in protocols.split_whitespace() {
        match word.to_ascii_lowercase().as_str() {
            "tlsv1.2" => versions.push(&rustls::version::TLS12),
            "tlsv1.3" => versions.push(&rustls::version::TLS13),
            "tlsv1" | "tlsv1.1" => {
                return Err(format!(
                    "tls-protocols: {word} is not supported (only TLSv1.2 and TLSv1.3)"
                ))
            }
            _ => return Err(format!("Invalid tls-protocols specified: {word}")),
        }
    }
    if versions.is_empty() {
        versions = vec![&rustls::version::TLS12, &rustls::version::TLS13];
    }
    Ok(versions)
}

/// The CA certificates of `tls-ca-cert-file` and every PEM file in
/// `tls-ca-cert-dir`.
fn ca_roots(settings: &TlsSettings) -> Result<RootCertStore, String> {
    let mut roots = RootCertStore::empty();
    let mut add = |bytes: &[u8], from: &str| -> Result<(), String> {
        for cert in CertificateDer::pem_slice_iter(bytes) {
            let cert = cert.map_err(|e| format!("Failed to load CA certificate {from}: {e}"))?;
            roots
                .add(cert)
                .map_err(|e| format!("Failed to load CA certificate {from}: {e}"))?;
        }
        Ok(())
    };
    if !settings.ca_cert_file.is_empty() {
        add(
            &read(&settings.ca_cert_file, "CA certificate")?,
            &settings.ca_cert_file,
        )?;
    }
    if !settings.ca_cert_dir.is_empty() {
        let entries = std::fs::read_dir(Path::new(&settings.ca_cert_dir)).map_err(|e| {
            format!(
                "Failed to read tls-ca-cert-dir {}: {e}",
                settings.ca_cert_dir
            )
        })?;
        for entry in entries.flatten() {
            let path = entry.path();
            if path.is_file() {
                let bytes = std::fs::read(&path).map_err(|e| e.to_string())?;
                // A directory may hold other files (OpenSSL's hash links
                // point at the same certificates): skip what is not PEM.
                let _ = add(&bytes, &path.display().to_string());
            }
        }
    }
    if roots.is_empty() {
        return Err(
            "Either tls-ca-cert-file or tls-ca-cert-dir must be specified when \
             tls-auth-clients is yes or optional"
                .to_string(),
        );
    }
    Ok(roots)
}
