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
use tokio_rustls::rustls::client::danger::{
    HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier,
};
use tokio_rustls::rustls::client::WebPkiServerVerifier;
use tokio_rustls::rustls::{
    self, server::WebPkiClientVerifier, CertificateError, ClientConfig, DigitallySignedStruct,
    RootCertStore, ServerConfig, SignatureScheme,
};
use tokio_rustls::{TlsAcceptor, TlsConnector};

use crate::config::{ClientAuth, TlsSettings};

/// What new TLS connections use (nothing until TLS is configured): the
/// client port's acceptor, and with `tls-cluster` the bus's acceptor and
/// the connector for links to other nodes.
#[derive(Default)]
pub struct Tls {
    current: RwLock<Option<Contexts>>,
}

#[derive(Clone)]
struct Contexts {
    acceptor: TlsAcceptor,
    /// With `tls-cluster`: the bus's acceptor and the connector.
    cluster: Option<(TlsAcceptor, TlsConnector)>,
    /// With `tls-replication`: the connector for the link to the master.
    replication: Option<TlsConnector>,
}

impl Tls {
    /// The client port's acceptor.
    pub fn acceptor(&self) -> Option<TlsAcceptor> {
        self.current.read().as_ref().map(|c| c.acceptor.clone())
    }

    /// The bus's acceptor (a certificate from every peer, whatever
    /// `tls-auth-clients` says, as Redis) and the connector for this
    /// node's links and MIGRATEs; `None` without `tls-cluster`.
    pub fn cluster(&self) -> Option<(TlsAcceptor, TlsConnector)> {
        self.current.read().as_ref().and_then(|c| c.cluster.clone())
    }

    /// The connector for this replica's link to its master; `None` without
    /// `tls-replication` (or without TLS configured).
    pub fn replication(&self) -> Option<TlsConnector> {
        self.current
            .read()
            .as_ref()
            .and_then(|c| c.replication.clone())
    }

    /// Rebuilds everything from `settings`; on error what was there
    /// stays and the reason is returned (and logged).
    pub fn install(&self, settings: &TlsSettings) -> Result<(), String> {
        if settings.port == 0 && settings.cert_file.is_empty() {
            *self.current.write() = None;
            return Ok(());
        }
        let built = build(settings).and_then(|config| {
            let cluster = if settings.cluster {
                let bus = build_with_client_auth(settings, ClientAuth::Yes)?;
                let connector = build_client(settings)?;
                Some((
                    TlsAcceptor::from(Arc::new(bus)),
                    TlsConnector::from(Arc::new(connector)),
                ))
            } else {
                None
            };
            // The same client configuration as the bus's: this node's
            // certificate, the master's verified against the CA.
            let replication = if settings.replication {
                Some(TlsConnector::from(Arc::new(build_client(settings)?)))
            } else {
                None
            };
            Ok(Contexts {
                acceptor: TlsAcceptor::from(Arc::new(config)),
                cluster,
                replication,
            })
        });
        match built {
            Ok(contexts) => {
                *self.current.write() = Some(contexts);
                Ok(())
            }
            Err(e) => {
                tracing::warn!(error = %e, "failed to configure TLS");
                Err(e)
            }
        }
    }
}

/// The name another node is addressed by in a handshake: its IP (sent
/// as no name at all), else its hostname. Its certificate is checked
/// against the CA only (see [`build_client`]).
pub fn peer_name(host: &str) -> Option<rustls_pki_types::ServerName<'static>> {
    let host = host.trim_matches(['[', ']']);
    match host.parse::<std::net::IpAddr>() {
        Ok(ip) => Some(ip.into()),
        Err(_) => rustls_pki_types::ServerName::try_from(host.to_string()).ok(),
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

/// The client port's rustls configuration the settings describe.
pub fn build(settings: &TlsSettings) -> Result<ServerConfig, String> {
    build_with_client_auth(settings, settings.auth_clients)
}

/// A certificate chain and its key, as files name them. With a password
/// (`tls-key-file-pass`), an encrypted PKCS#8 key (`BEGIN ENCRYPTED
/// PRIVATE KEY`, what OpenSSL 3 writes for `-passout`/`-aes256`) is
/// decrypted; an unencrypted key is read as it is, as OpenSSL ignores the
/// password then.
fn certificate_and_key(
    cert_file: &str,
    key_file: &str,
    key_file_pass: &str,
    pass_option: &str,
) -> Result<(Vec<CertificateDer<'static>>, PrivateKeyDer<'static>), String> {
    let certs: Vec<CertificateDer<'static>> =
        CertificateDer::pem_slice_iter(&read(cert_file, "certificate")?)
            .collect::<Result<_, _>>()
            .map_err(|e| format!("Failed to load certificate {cert_file}: {e}"))?;
    if certs.is_empty() {
        return Err(format!("No certificate in {cert_file}"));
    }
    let pem = read(key_file, "private key")?;
    let key = private_key(&pem, key_file_pass, pass_option)
        .map_err(|e| format!("Failed to load private key {key_file}: {e}"))?;
    Ok((certs, key))
}

/// A certificate chain and its key as rustls serves them, from the files
/// that name them. rustls's own constructor parses the certificate with
/// webpki, which refuses X.509 v1 certificates (what `openssl x509 -req`
/// makes without `-extfile`); OpenSSL, and so Redis, serves them. This
/// node's own certificate needs no verification, only the check OpenSSL's
/// `SSL_CTX_check_private_key` makes: that the key is the certificate's.
/// (Peers' certificates are verified by webpki, strictly, v1 refused.)
fn certified_key(
    cert_file: &str,
    key_file: &str,
    key_file_pass: &str,
    pass_option: &str,
    provider: &rustls::crypto::CryptoProvider,
) -> Result<rustls::sign::CertifiedKey, String> {
    let (certs, key) = certificate_and_key(cert_file, key_file, key_file_pass, pass_option)?;
    let signing_key = provider
        .key_provider
        .load_private_key(key)
        .map_err(|e| format!("Failed to load private key {key_file}: {e}"))?;
    let key_spki = signing_key.public_key().ok_or_else(|| {
        format!("Failed to load private key {key_file}: no public key can be derived from it")
    })?;
    let cert_spki = subject_public_key_info(&certs[0]).ok_or_else(|| {
        format!("Failed to load certificate {cert_file}: not an X.509 certificate")
    })?;
    if key_spki.as_ref() != cert_spki {
        return Err(format!(
            "Private key {key_file} does not match the certificate {cert_file}"
        ));
    }
    Ok(rustls::sign::CertifiedKey::new(certs, signing_key))
}

/// The SubjectPublicKeyInfo of a DER certificate, whatever its version:
/// Certificate ::= SEQUENCE { tbsCertificate SEQUENCE { [0] version
/// OPTIONAL (absent in v1), serialNumber, signature, issuer, validity,
/// subject, subjectPublicKeyInfo, ... }, ... } (RFC 5280, 4.1).
fn subject_public_key_info(certificate: &[u8]) -> Option<&[u8]> {
    let (_, certificate, _) = der_element(certificate)?;
    let (_, mut tbs, _) = der_element(certificate)?;
    let (tag, _, rest) = der_element(tbs)?;
    if tag == 0xa0 {
        tbs = rest;
    }
    for _ in 0..5 {
        tbs = der_element(tbs)?.2;
    }
    let (_, content, rest) = der_element(tbs)?;
    let header = tbs.len() - rest.len() - content.len();
    Some(&tbs[..header + content.len()])
}

/// One DER element at the front of `bytes`: its tag, its contents and what
/// follows it. Definite lengths only, as DER has.
fn der_element(bytes: &[u8]) -> Option<(u8, &[u8], &[u8])> {
    let tag = *bytes.first()?;
    let first = *bytes.get(1)?;
    let (length, header) = if first < 0x80 {
        (first as usize, 2)
    } else {
        let count = (first & 0x7f) as usize;
        if count == 0 || count > 4 {
            return None;
        }
        let length = bytes
            .get(2..2 + count)?
            .iter()
            .fold(0usize, |acc, &b| (acc << 8) | b as usize);
        (length, 2 + count)
    };
    let end = header.checked_add(length)?;
    Some((tag, bytes.get(header..end)?, &bytes[end..]))
}

/// The private key in a PEM file, decrypted with `password` when it is an
/// encrypted PKCS#8 key.
fn private_key(
    pem: &[u8],
    password: &str,
    pass_option: &str,
) -> Result<PrivateKeyDer<'static>, String> {
    let text = String::from_utf8_lossy(pem);
    if text.contains("-----BEGIN ENCRYPTED PRIVATE KEY-----") {
        if password.is_empty() {
            return Err(format!("the key is encrypted and {pass_option} is not set"));
        }
        let (_, document) = pkcs8::SecretDocument::from_pem(&text).map_err(|e| e.to_string())?;
        let encrypted = pkcs8::EncryptedPrivateKeyInfo::try_from(document.as_bytes())
            .map_err(|e| e.to_string())?;
        let decrypted = encrypted
            .decrypt(password)
            .map_err(|_| format!("cannot decrypt the key with {pass_option} (wrong password?)"))?;
        return Ok(PrivateKeyDer::Pkcs8(decrypted.as_bytes().to_vec().into()));
    }
    if text.contains("Proc-Type: 4,ENCRYPTED") {
        // OpenSSL's legacy encryption (`-traditional`), keyed by MD5.
        return Err(
            "the key is encrypted in OpenSSL's legacy format; convert it to PKCS#8 \
             (openssl pkcs8 -topk8 -in key.pem -out key8.pem)"
                .to_string(),
        );
    }
    PrivateKeyDer::from_pem_slice(pem).map_err(|e| e.to_string())
}

/// The crypto provider with the ciphers `tls-ciphers` and
/// `tls-ciphersuites` allow.
fn provider(settings: &TlsSettings) -> Result<rustls::crypto::CryptoProvider, String> {
    let mut provider = rustls::crypto::ring::default_provider();
    let wanted12: Vec<&str> = split_names(&settings.ciphers, TLS12_NAMES, "tls-ciphers")?;
    let wanted13: Vec<&str> = split_names(&settings.ciphersuites, TLS13_NAMES, "tls-ciphersuites")?;
    provider.cipher_suites.retain(|suite| {
        let name = format!("{:?}", suite.suite());
        let tls13 = name.starts_with("TLS13_");
        let wanted = if tls13 { &wanted13 } else { &wanted12 };
        wanted.is_empty() || wanted.contains(&name.as_str())
    });
    Ok(provider)
}

/// A server configuration asking clients for certificates as `auth` says.
fn build_with_client_auth(
    settings: &TlsSettings,
    auth: ClientAuth,
) -> Result<ServerConfig, String> {
    if settings.cert_file.is_empty() || settings.key_file.is_empty() {
        return Err("No tls-cert-file or tls-key-file configured".to_string());
    }
    let provider = provider(settings)?;
    let certified = certified_key(
        &settings.cert_file,
        &settings.key_file,
        &settings.key_file_pass,
        "tls-key-file-pass",
        &provider,
    )?;
    let versions = protocol_versions(&settings.protocols)?;
    let builder = ServerConfig::builder_with_provider(Arc::new(provider))
        .with_protocol_versions(&versions)
        .map_err(|e| format!("tls-protocols / ciphers: {e}"))?;

    let builder = match auth {
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
    let mut config =
        builder.with_cert_resolver(Arc::new(rustls::sign::SingleCertAndKey::from(certified)));
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

/// The configuration of this node's connections to others (bus links,
/// MIGRATE, a replica's link to its master): its client certificate (`tls-client-cert-file`, else the
/// server's), the peer's certificate verified against the CA, and, as
/// Redis (OpenSSL without a host check), not against the peer's address.
fn build_client(settings: &TlsSettings) -> Result<ClientConfig, String> {
    let (cert_file, key_file, pass, pass_option) =
        if settings.client_cert_file.is_empty() || settings.client_key_file.is_empty() {
            (
                &settings.cert_file,
                &settings.key_file,
                &settings.key_file_pass,
                "tls-key-file-pass",
            )
        } else {
            (
                &settings.client_cert_file,
                &settings.client_key_file,
                &settings.client_key_file_pass,
                "tls-client-key-file-pass",
            )
        };
    let provider = Arc::new(provider(settings)?);
    let certified = certified_key(cert_file, key_file, pass, pass_option, &provider)?;
    let versions = protocol_versions(&settings.protocols)?;
    let roots = Arc::new(ca_roots(settings)?);
    let verifier = WebPkiServerVerifier::builder_with_provider(roots, provider.clone())
        .build()
        .map_err(|e| format!("Failed to configure server verification: {e}"))?;
    Ok(ClientConfig::builder_with_provider(provider)
        .with_protocol_versions(&versions)
        .map_err(|e| format!("tls-protocols / ciphers: {e}"))?
        .dangerous()
        .with_custom_certificate_verifier(Arc::new(WithoutHostCheck(verifier)))
        .with_client_cert_resolver(Arc::new(rustls::sign::SingleCertAndKey::from(certified))))
}

/// WebPKI's verification of a peer's chain, without its name check: a
/// cluster node is reached at whatever address it announces, and Redis
/// does not check names either.
#[derive(Debug)]
struct WithoutHostCheck(Arc<WebPkiServerVerifier>);

impl ServerCertVerifier for WithoutHostCheck {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &rustls_pki_types::ServerName<'_>,
        ocsp_response: &[u8],
        now: rustls_pki_types::UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        // The chain is checked first: a name error means it was valid.
        match self
            .0
            .verify_server_cert(end_entity, intermediates, server_name, ocsp_response, now)
        {
            Err(rustls::Error::InvalidCertificate(
                CertificateError::NotValidForName | CertificateError::NotValidForNameContext { .. },
            )) => Ok(ServerCertVerified::assertion()),
            other => other,
        }
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.0.verify_tls12_signature(message, cert, dss)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.0.verify_tls13_signature(message, cert, dss)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.supported_verify_schemes()
    }
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
            "Either tls-ca-cert-file or tls-ca-cert-dir must be specified when tls-cluster, \
             tls-replication or tls-auth-clients are enabled!"
                .to_string(),
        );
    }
    Ok(roots)
}
