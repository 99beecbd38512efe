//! Section 13: what brokering a secret costs a request. A loopback HTTPS origin (its own test
//! CA) answers small requests on one keep-alive connection, asked directly (`https_direct`)
//! and through an egress proxy that terminates TLS to put a brokered secret into each one
//! (`https_brokered`): the proxy reads the request, swaps the placeholder, and sends it on
//! over its own verified TLS connection to the origin.

use crate::stats::percentiles;
use crate::{Ratios, Report};
use std::net::Ipv4Addr;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::io::{AsyncBufReadExt, AsyncRead, AsyncWrite, AsyncWriteExt, BufReader};
use tokio::net::{TcpListener, TcpStream};
use yep_sandbox::egress::{Allowed, EgressProxy, Resolver, Setup};
use yep_store::broker::{Binding, Broker, Brokered};

const WARMUP: usize = 200;
const SAMPLES: usize = 3_000;
const PLACEHOLDER: &str = "yep_ph_0123456789abcdef0123456789abcdef";

fn provider() -> Arc<rustls::crypto::CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

/// The origin: a test CA's certificate for `api.test`, answering every request `200` on a
/// kept-alive connection. Its port and the CA's PEM.
async fn origin() -> anyhow::Result<(u16, String)> {
    let ca_key = rcgen::KeyPair::generate()?;
    let mut ca_params = rcgen::CertificateParams::default();
    ca_params.distinguished_name = rcgen::DistinguishedName::new();
    ca_params
        .distinguished_name
        .push(rcgen::DnType::CommonName, "yep-bench origin CA");
    ca_params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
    let ca = ca_params.self_signed(&ca_key)?;
    let issuer = rcgen::Issuer::new(ca_params, ca_key);
    let key = rcgen::KeyPair::generate()?;
    let cert =
        rcgen::CertificateParams::new(vec!["api.test".to_string()])?.signed_by(&key, &issuer)?;
    let config = rustls::ServerConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()?
        .with_no_client_auth()
        .with_single_cert(
            vec![cert.der().clone()],
            rustls::pki_types::PrivateKeyDer::Pkcs8(key.serialize_der().into()),
        )?;
    let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(config));
    let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).await?;
    let port = listener.local_addr()?.port();
    tokio::spawn(async move {
        while let Ok((stream, _)) = listener.accept().await {
            let _ = stream.set_nodelay(true);
            let acceptor = acceptor.clone();
            tokio::spawn(async move {
                if let Ok(tls) = acceptor.accept(stream).await {
                    let _ = answer_all(tls).await;
                }
            });
        }
    });
    Ok((port, ca.pem()))
}

/// Answer each request's head `200 ok` until the client closes.
async fn answer_all<S: AsyncRead + AsyncWrite + Unpin>(stream: S) -> std::io::Result<()> {
    let mut stream = BufReader::new(stream);
    loop {
        if !read_head(&mut stream).await? {
            return Ok(());
        }
        stream
            .get_mut()
            .write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
            .await?;
        stream.get_mut().flush().await?;
    }
}

/// Read one head (to its blank line); `false` at the end of the stream.
async fn read_head<S: AsyncRead + Unpin>(stream: &mut BufReader<S>) -> std::io::Result<bool> {
    let mut line = String::new();
    loop {
        line.clear();
        if stream.read_line(&mut line).await? == 0 {
            return Ok(false);
        }
        if line == "\r\n" {
            return Ok(true);
        }
    }
}

/// A TLS client trusting `roots` (PEM), over `stream`, to `api.test`.
async fn tls_client(
    stream: TcpStream,
    roots: &str,
) -> anyhow::Result<tokio_rustls::client::TlsStream<TcpStream>> {
    use rustls::pki_types::pem::PemObject;
    let mut store = rustls::RootCertStore::empty();
    for cert in rustls::pki_types::CertificateDer::pem_slice_iter(roots.as_bytes()) {
        store.add(cert?)?;
    }
    let config = rustls::ClientConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()?
        .with_root_certificates(store)
        .with_no_client_auth();
    let name = rustls::pki_types::ServerName::try_from("api.test")?;
    Ok(tokio_rustls::TlsConnector::from(Arc::new(config))
        .connect(name, stream)
        .await?)
}

/// `WARMUP + SAMPLES` requests on one keep-alive connection: each one's time to its answer.
async fn requests<S: AsyncRead + AsyncWrite + Unpin>(
    stream: S,
    host: &str,
) -> anyhow::Result<Vec<Duration>> {
    let mut stream = BufReader::new(stream);
    let request = format!(
        "GET /user HTTP/1.1\r\nHost: {host}\r\nAuthorization: Bearer {PLACEHOLDER}\r\n\r\n"
    );
    let mut out = Vec::with_capacity(SAMPLES);
    let mut body = [0u8; 2];
    for i in 0..WARMUP + SAMPLES {
        let t = Instant::now();
        stream.get_mut().write_all(request.as_bytes()).await?;
        stream.get_mut().flush().await?;
        anyhow::ensure!(read_head(&mut stream).await?, "the connection closed");
        tokio::io::AsyncReadExt::read_exact(&mut stream, &mut body).await?;
        if i >= WARMUP {
            out.push(t.elapsed());
        }
    }
    Ok(out)
}

/// Measure both, into `r`, on a runtime of its own.
pub fn measure(r: &mut Report, scratch: &Path) -> anyhow::Result<()> {
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?
        .block_on(measure_in(r, scratch))
}

/// [`measure`] on the current runtime.
pub async fn measure_in(r: &mut Report, scratch: &Path) -> anyhow::Result<()> {
    let (port, origin_ca) = origin().await?;
    let roots = scratch.join("bench-origin-ca.pem");
    std::fs::write(&roots, &origin_ca)?;
    let target = format!("api.test:{port}");

    let direct = TcpStream::connect((Ipv4Addr::LOCALHOST, port)).await?;
    direct.set_nodelay(true)?;
    let direct = tls_client(direct, &origin_ca).await?;
    r.latency(
        "https_direct",
        percentiles(requests(direct, &target).await?),
    );

    let secret = Brokered {
        field: "TOKEN".into(),
        env: None,
        placeholder: PLACEHOLDER.into(),
        value: yep_store::config::Secret::new("bench-secret-value"),
        binding: Binding {
            hosts: vec![target.clone()],
            ..Binding::default()
        },
    };
    let proxy = EgressProxy::start(
        "bench",
        Setup {
            allowed: Allowed::from_grants([target.as_str(), "private"]),
            broker: Some(Broker {
                ca_dir: scratch.join("broker"),
                secrets: vec![secret],
            }),
            resolver: Some(Resolver::with_table("api.test=127.0.0.1")),
            origin_roots: Some(roots),
            ..Setup::default()
        },
    )?;
    let yep_ca = std::fs::read_to_string(scratch.join("broker/ca.pem"))?;
    let mut tunnel = TcpStream::connect((Ipv4Addr::LOCALHOST, proxy.port())).await?;
    tunnel.set_nodelay(true)?;
    tunnel
        .write_all(format!("CONNECT {target} HTTP/1.1\r\nHost: {target}\r\n\r\n").as_bytes())
        .await?;
    let mut head = BufReader::new(tunnel);
    let mut status = String::new();
    head.read_line(&mut status).await?;
    anyhow::ensure!(status.starts_with("HTTP/1.1 200"), "CONNECT: {status}");
    read_head(&mut head).await?;
    let tunnel = tls_client(head.into_inner(), &yep_ca).await?;
    r.latency(
        "https_brokered",
        percentiles(requests(tunnel, &target).await?),
    );
    Ok(())
}

/// The target: brokering adds at most a millisecond at the median.
pub fn targets(t: &mut Ratios<'_>, r: &Report) {
    let added_ms = (r.p50("https_brokered") - r.p50("https_direct")) / 1000.0;
    t.timed(
        "https_brokered_p50 - https_direct_p50 (ms)",
        &["https_brokered", "https_direct"],
        added_ms,
        "<= 1 ms",
        added_ms <= 1.0,
    );
}
