//! TLS termination for the hosts the proxy must see into: a per-home CA ([`Ca`]) that signs a
//! certificate for each such host, and the client side that verifies the real origin.
//!
//! The CA is made at first use in the home's broker directory (`ca.key` owner-only, beside
//! `ca.pem`), which no sandbox reaches. A sandboxed process trusts it only through the trust
//! variables its proxy gives it ([`super::EgressProxy::write_trust`]); nothing on the system
//! trusts it. Its certificates are made in memory, one per host, and kept for the life of
//! the host process.
//!
//! The origin is verified against the system's roots (`rustls-native-certs`: the system
//! bundle, or `SSL_CERT_FILE`), and against the certificates in the PEM file
//! `$YEP_EGRESS_ROOTS` names (tests: a loopback server with a test CA). Only the host process
//! reads that variable: a sandbox's scrubbed environment never passes it on.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, OnceLock, PoisonError};

use rcgen::{BasicConstraints, CertificateParams, DnType, IsCa, Issuer, KeyPair, KeyUsagePurpose};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer, ServerName};

/// The environment variable naming a PEM file of more roots the proxy trusts for origins.
pub const ROOTS_ENV: &str = "YEP_EGRESS_ROOTS";

/// The most certificates one CA keeps made (one per host asked for).
const MAX_LEAVES: usize = 1024;

/// A home's CA: what signs the certificates the proxy shows a sandboxed client.
pub struct Ca {
    issuer: Issuer<'static, KeyPair>,
    /// The CA's certificate, PEM: what a client is told to trust.
    pem: String,
    /// The key every host's certificate carries (made once per host process).
    leaf_key: KeyPair,
    /// Each host's server configuration, made at first use.
    leaves: Mutex<HashMap<String, Arc<rustls::ServerConfig>>>,
}

impl std::fmt::Debug for Ca {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Ca")
    }
}

/// The CA's name and uses: the same each time, so a CA read back signs as it was made.
fn ca_params() -> CertificateParams {
    let mut params = CertificateParams::default();
    params
        .distinguished_name
        .push(DnType::CommonName, "yep egress proxy CA (this home only)");
    params
        .distinguished_name
        .push(DnType::OrganizationName, "yep");
    params.is_ca = IsCa::Ca(BasicConstraints::Constrained(0));
    params.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
    params
}

/// Why a CA could not be had.
fn tls_error(what: &str, e: impl std::fmt::Display) -> std::io::Error {
    std::io::Error::other(format!("{what}: {e}"))
}

impl Ca {
    /// The CA kept in `dir`, made there (owner-only) at first use. Each directory's CA is
    /// read once per host process.
    pub fn open(dir: &Path) -> std::io::Result<Arc<Ca>> {
        static OPEN: Mutex<Vec<(PathBuf, Arc<Ca>)>> = Mutex::new(Vec::new());
        let mut open = OPEN.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some((_, ca)) = open.iter().find(|(d, _)| d == dir) {
            return Ok(Arc::clone(ca));
        }
        let ca = Arc::new(Ca::read_or_make(dir)?);
        open.push((dir.to_path_buf(), Arc::clone(&ca)));
        Ok(ca)
    }

    fn read_or_make(dir: &Path) -> std::io::Result<Ca> {
        let (key_path, pem_path) = (dir.join("ca.key"), dir.join("ca.pem"));
        // Regular files of the home, read bounded: a planted link, FIFO or huge file is no CA
        // (a new one replaces it), and never hangs or floods the read.
        let read = |path: &Path| {
            yep_store::fsutil::read_regular_string(
                path,
                64 * 1024,
                yep_store::fsutil::Links::Refuse,
            )
        };
        let key = match (read(&key_path), read(&pem_path)) {
            (Ok(key), Ok(pem)) => {
                let key = KeyPair::from_pem(&key).map_err(|e| tls_error("yep's CA key", e))?;
                return Ca::with(key, pem);
            }
            _ => KeyPair::generate().map_err(|e| tls_error("making yep's CA key", e))?,
        };
        let cert = ca_params()
            .self_signed(&key)
            .map_err(|e| tls_error("making yep's CA", e))?;
        yep_store::fsutil::create_private_dir(dir)?;
        // The key first: a certificate is never kept without its key.
        yep_store::fsutil::write_atomic(&key_path, key.serialize_pem().as_bytes(), 0o600)?;
        yep_store::fsutil::write_atomic(&pem_path, cert.pem().as_bytes(), 0o644)?;
        Ca::with(key, cert.pem())
    }

    fn with(key: KeyPair, pem: String) -> std::io::Result<Ca> {
        Ok(Ca {
            issuer: Issuer::new(ca_params(), key),
            pem,
            leaf_key: KeyPair::generate().map_err(|e| tls_error("making a host key", e))?,
            leaves: Mutex::new(HashMap::new()),
        })
    }

    /// The CA's certificate, PEM.
    pub fn pem(&self) -> &str {
        &self.pem
    }

    /// The server side of a terminated connection to `host` (a name or an IP address): a
    /// certificate for it signed by this CA, offering HTTP/1.1.
    pub(super) fn server_config(&self, host: &str) -> std::io::Result<Arc<rustls::ServerConfig>> {
        let mut leaves = self.leaves.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(config) = leaves.get(host) {
            return Ok(Arc::clone(config));
        }
        let mut params = CertificateParams::new(vec![host.to_string()])
            .map_err(|e| tls_error("a host certificate", e))?;
        params.distinguished_name.push(DnType::CommonName, host);
        let cert = params
            .signed_by(&self.leaf_key, &self.issuer)
            .map_err(|e| tls_error("signing a host certificate", e))?;
        let key = PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(self.leaf_key.serialize_der()));
        let mut config = rustls::ServerConfig::builder_with_provider(provider())
            .with_safe_default_protocol_versions()
            .map_err(|e| tls_error("TLS versions", e))?
            .with_no_client_auth()
            .with_single_cert(vec![cert.der().clone()], key)
            .map_err(|e| tls_error("a host certificate", e))?;
        config.alpn_protocols = vec![b"http/1.1".to_vec()];
        let config = Arc::new(config);
        if leaves.len() >= MAX_LEAVES {
            leaves.clear();
        }
        leaves.insert(host.to_string(), Arc::clone(&config));
        Ok(config)
    }
}

/// The crypto the proxy's TLS runs on: ring, as the rest of yep.
fn provider() -> Arc<rustls::crypto::CryptoProvider> {
    static PROVIDER: OnceLock<Arc<rustls::crypto::CryptoProvider>> = OnceLock::new();
    Arc::clone(PROVIDER.get_or_init(|| Arc::new(rustls::crypto::ring::default_provider())))
}

/// The client side toward origins: the system's roots, and those of the PEM file `roots`
/// names, else of `$YEP_EGRESS_ROOTS`; HTTP/1.1. Made once per host process and roots file
/// (reading the system's roots takes milliseconds).
pub(super) fn client_config(roots: Option<&Path>) -> std::io::Result<Arc<rustls::ClientConfig>> {
    type Made = Result<Arc<rustls::ClientConfig>, String>;
    static MADE: Mutex<Vec<(Option<PathBuf>, Made)>> = Mutex::new(Vec::new());
    let extra = roots
        .map(Path::to_path_buf)
        .or_else(|| std::env::var_os(ROOTS_ENV).map(PathBuf::from));
    let mut made = MADE.lock().unwrap_or_else(PoisonError::into_inner);
    if let Some((_, config)) = made.iter().find(|(p, _)| *p == extra) {
        return config.clone().map_err(std::io::Error::other);
    }
    let config = make_client_config(extra.as_deref());
    made.push((extra, config.clone()));
    config.map_err(std::io::Error::other)
}

fn make_client_config(extra: Option<&Path>) -> Result<Arc<rustls::ClientConfig>, String> {
    static NATIVE: OnceLock<Vec<CertificateDer<'static>>> = OnceLock::new();
    let native = NATIVE.get_or_init(|| rustls_native_certs::load_native_certs().certs);
    let mut roots = rustls::RootCertStore::empty();
    roots.add_parsable_certificates(native.iter().cloned());
    if let Some(path) = extra {
        let certs: Vec<CertificateDer<'static>> = CertificateDer::pem_file_iter(path)
            .map_err(|e| format!("{}: {e}", path.display()))?
            .collect::<Result<_, _>>()
            .map_err(|e| format!("{}: {e}", path.display()))?;
        roots.add_parsable_certificates(certs);
    }
    if roots.is_empty() {
        return Err(
            "no root certificates: the system has none where rustls looks (set SSL_CERT_FILE)"
                .to_string(),
        );
    }
    let mut config = rustls::ClientConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()
        .map_err(|e| e.to_string())?
        .with_root_certificates(roots)
        .with_no_client_auth();
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(Arc::new(config))
}

/// The name an origin's certificate must carry: `host` as a DNS name or an IP address.
pub(super) fn server_name(host: &str) -> std::io::Result<ServerName<'static>> {
    ServerName::try_from(host.to_string()).map_err(|e| tls_error("the origin's name", e))
}

/// The system's bundle of roots, PEM, for the trust variables that replace it
/// (`SSL_CERT_FILE` and the like): the host's `SSL_CERT_FILE`, or the first bundle found
/// where distributions keep one. Empty when there is none.
pub(super) fn system_bundle() -> String {
    const BUNDLES: &[&str] = &[
        "/etc/ssl/certs/ca-certificates.crt",
        "/etc/pki/tls/certs/ca-bundle.crt",
        "/etc/ssl/ca-bundle.pem",
        "/etc/ssl/cert.pem",
        "/etc/pki/ca-trust/extracted/pem/tls-ca-bundle.pem",
    ];
    static BUNDLE: OnceLock<String> = OnceLock::new();
    BUNDLE
        .get_or_init(|| {
            let host = std::env::var_os("SSL_CERT_FILE").map(PathBuf::from);
            host.into_iter()
                .chain(BUNDLES.iter().map(PathBuf::from))
                .find_map(|p| std::fs::read_to_string(p).ok())
                .unwrap_or_default()
        })
        .clone()
}
