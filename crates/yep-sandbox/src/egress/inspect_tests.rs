//! Brokered secrets and request rules, over plain HTTP and through terminated TLS, against
//! loopback origins that record what reached them.

use super::*;
use rustls::pki_types::pem::PemObject;
use tokio::io::{AsyncBufReadExt, AsyncRead, AsyncWrite, AsyncWriteExt, BufReader};
use yep_store::broker::{Binding, Brokered};
use yep_store::config::Secret;

const WAIT: Duration = Duration::from_secs(10);
const VALUE: &str = "real-secret-value-4242";
const PLACEHOLDER: &str = "yep_ph_0123456789abcdef0123456789abcdef";

type Heads = Arc<Mutex<Vec<String>>>;

/// Answer every request on `stream` `200 ok` (keep-alive), recording each head.
async fn answer_all<S: AsyncRead + AsyncWrite + Unpin>(stream: S, heads: Heads) {
    let mut stream = BufReader::new(stream);
    loop {
        let mut head = String::new();
        loop {
            let mut line = String::new();
            match stream.read_line(&mut line).await {
                Ok(0) | Err(_) => return,
                Ok(_) => {}
            }
            let end = line == "\r\n";
            head.push_str(&line);
            if end {
                break;
            }
        }
        heads.lock().unwrap().push(head);
        let answer = b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok";
        if stream.get_mut().write_all(answer).await.is_err() {
            return;
        }
    }
}

/// A loopback plain-HTTP origin: its port and the request heads it saw.
async fn origin() -> (u16, Heads) {
    let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let heads: Heads = Arc::default();
    let seen = Arc::clone(&heads);
    tokio::spawn(async move {
        while let Ok((stream, _)) = listener.accept().await {
            tokio::spawn(answer_all(stream, Arc::clone(&seen)));
        }
    });
    (port, heads)
}

/// A test CA, and a loopback HTTPS origin whose certificate it signed for `api.test`: the
/// port, the heads it saw, and the CA's PEM file (the proxy's origin roots).
async fn tls_origin(dir: &std::path::Path) -> (u16, Heads, std::path::PathBuf) {
    let ca_key = rcgen::KeyPair::generate().unwrap();
    let mut ca_params = rcgen::CertificateParams::default();
    ca_params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
    let ca_cert = ca_params.self_signed(&ca_key).unwrap();
    let issuer = rcgen::Issuer::new(ca_params, ca_key);
    let key = rcgen::KeyPair::generate().unwrap();
    let cert = rcgen::CertificateParams::new(vec!["api.test".to_string()])
        .unwrap()
        .signed_by(&key, &issuer)
        .unwrap();
    let roots = dir.join("origin-ca.pem");
    std::fs::write(&roots, ca_cert.pem()).unwrap();
    let config = rustls::ServerConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .unwrap()
    .with_no_client_auth()
    .with_single_cert(
        vec![cert.der().clone()],
        rustls::pki_types::PrivateKeyDer::Pkcs8(key.serialize_der().into()),
    )
    .unwrap();
    let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(config));
    let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let heads: Heads = Arc::default();
    let seen = Arc::clone(&heads);
    tokio::spawn(async move {
        while let Ok((stream, _)) = listener.accept().await {
            let (acceptor, seen) = (acceptor.clone(), Arc::clone(&seen));
            tokio::spawn(async move {
                if let Ok(tls) = acceptor.accept(stream).await {
                    answer_all(tls, seen).await;
                }
            });
        }
    });
    (port, heads, roots)
}

fn secret(hosts: &[String], header: Option<&str>, format: Option<&str>) -> Brokered {
    Brokered {
        field: "TOKEN".into(),
        env: Some("TOKEN".into()),
        placeholder: PLACEHOLDER.into(),
        value: Secret::new(VALUE),
        binding: Binding {
            hosts: hosts.to_vec(),
            header: header.map(String::from),
            format: format.map(String::from),
            in_env: false,
        },
    }
}

type Told = Arc<Mutex<Vec<Decision>>>;

/// A proxy granted `grants` (names resolving to loopback), brokering `secrets`, with its CA
/// in `dir`: the proxy, its refusals and every decision it told.
fn brokering(
    grants: &[String],
    secrets: Vec<Brokered>,
    dir: &std::path::Path,
    origin_roots: Option<std::path::PathBuf>,
) -> (EgressProxy, Arc<Mutex<Vec<Refusal>>>, Told) {
    let (refusals, told): (Arc<Mutex<Vec<Refusal>>>, Told) = Default::default();
    let (r, t) = (Arc::clone(&refusals), Arc::clone(&told));
    let mut entries: Vec<&str> = grants.iter().map(String::as_str).collect();
    entries.push("private");
    let proxy = EgressProxy::start(
        "pkg",
        Setup {
            allowed: Allowed::from_grants(entries),
            broker: Some(Broker {
                ca_dir: dir.join("broker"),
                secrets,
            }),
            resolver: Some(Resolver::with_table(
                "api.test=127.0.0.1,other.test=127.0.0.1",
            )),
            on_refused: Some(Arc::new(move |x| r.lock().unwrap().push(x))),
            on_decided: Some(Arc::new(move |x| t.lock().unwrap().push(x))),
            origin_roots,
        },
    )
    .unwrap();
    (proxy, refusals, told)
}

/// Send one plain-HTTP request through `proxy`; the answer's status line.
async fn plain(proxy: &EgressProxy, request: &str) -> String {
    let mut stream = TcpStream::connect((Ipv4Addr::LOCALHOST, proxy.port()))
        .await
        .unwrap();
    stream.write_all(request.as_bytes()).await.unwrap();
    let mut reader = BufReader::new(stream);
    let mut status = String::new();
    tokio::time::timeout(WAIT, reader.read_line(&mut status))
        .await
        .unwrap()
        .unwrap();
    status
}

#[tokio::test]
async fn a_brokered_secret_reaches_its_host_only_in_place_of_its_placeholder() {
    let dir = tempfile::tempdir().unwrap();
    let (port, heads) = origin().await;
    let (api, other) = (format!("api.test:{port}"), format!("other.test:{port}"));
    let (proxy, refusals, told) = brokering(
        &[api.clone(), other.clone()],
        vec![secret(std::slice::from_ref(&api), None, None)],
        dir.path(),
        None,
    );
    let ok = plain(
        &proxy,
        &format!("GET http://{api}/user?key={PLACEHOLDER} HTTP/1.1\r\nHost: {api}\r\nAuthorization: Bearer {PLACEHOLDER}\r\nConnection: close\r\n\r\n"),
    )
    .await;
    assert!(ok.starts_with("HTTP/1.1 200"), "{ok}");
    let stray = plain(
        &proxy,
        &format!("GET http://{other}/leak HTTP/1.1\r\nHost: {other}\r\nX-Token: {PLACEHOLDER}\r\nConnection: close\r\n\r\n"),
    )
    .await;
    assert!(stray.starts_with("HTTP/1.1 403"), "{stray}");
    let heads = heads.lock().unwrap().clone();
    assert_eq!(
        heads.len(),
        1,
        "only the brokered host was reached: {heads:?}"
    );
    assert!(
        heads[0].contains(&format!("authorization: Bearer {VALUE}")),
        "{}",
        heads[0]
    );
    assert!(
        heads[0].contains(&format!("/user?key={VALUE} ")),
        "{}",
        heads[0]
    );
    assert!(!heads[0].contains(PLACEHOLDER));
    let refusals = refusals.lock().unwrap();
    assert_eq!(refusals.len(), 1);
    assert_eq!(
        refusals[0].reason,
        Reason::Placeholder {
            secret: "TOKEN".into()
        }
    );
    assert!(refusals[0].to_string().contains("belongs to other hosts"));
    assert!(!refusals[0].to_string().contains(VALUE));
    let told = told.lock().unwrap();
    assert!(told.iter().any(|d| matches!(d, Decision::Injected { secret, host, .. } if secret == "TOKEN" && host == "api.test")));
    assert!(told.iter().all(|d| !format!("{d:?}").contains(VALUE)));
}

#[tokio::test]
async fn a_header_binding_replaces_what_the_client_said_of_itself() {
    let dir = tempfile::tempdir().unwrap();
    let (port, heads) = origin().await;
    let api = format!("api.test:{port}");
    let (proxy, _, _) = brokering(
        std::slice::from_ref(&api),
        vec![secret(
            std::slice::from_ref(&api),
            Some("Authorization"),
            Some("token {}"),
        )],
        dir.path(),
        None,
    );
    let ok = plain(
        &proxy,
        &format!("GET http://{api}/ HTTP/1.1\r\nHost: {api}\r\nAuthorization: Basic c3RvbGVu\r\nConnection: close\r\n\r\n"),
    )
    .await;
    assert!(ok.starts_with("HTTP/1.1 200"), "{ok}");
    let head = heads.lock().unwrap()[0].to_ascii_lowercase();
    assert_eq!(head.matches("authorization:").count(), 1, "{head}");
    assert!(head.contains(&format!(
        "authorization: token {}",
        VALUE.to_ascii_lowercase()
    )));
}

#[tokio::test]
async fn request_rules_let_through_their_methods_and_paths_only() {
    let dir = tempfile::tempdir().unwrap();
    let (port, heads) = origin().await;
    let api = format!("api.test:{port}");
    let rule = format!("{api} GET /repos/me/");
    let (proxy, refusals, _) = brokering(&[rule], Vec::new(), dir.path(), None);
    let ask = |method: &str, path: &str| {
        format!(
            "{method} http://{api}{path} HTTP/1.1\r\nHost: {api}\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
        )
    };
    for (method, path) in [
        ("POST", "/repos/me/x"),
        ("GET", "/repos/other/x"),
        ("GET", "/repos/me/../other/x"),
        ("GET", "/repos/me/%2e%2e/other"),
    ] {
        let status = plain(&proxy, &ask(method, path)).await;
        assert!(
            status.starts_with("HTTP/1.1 403"),
            "{method} {path}: {status}"
        );
    }
    assert!(heads.lock().unwrap().is_empty());
    let ok = plain(&proxy, &ask("GET", "/repos/me/x/issues")).await;
    assert!(ok.starts_with("HTTP/1.1 200"), "{ok}");
    let refusals = refusals.lock().unwrap();
    // Told once per host and kind; each names the rule and the grant that would allow it.
    assert_eq!(refusals.len(), 1, "{refusals:?}");
    let said = refusals[0].to_string();
    assert!(said.contains("POST /repos/me/x"), "{said}");
    assert!(said.contains(&format!("`{api} GET /repos/me/`")), "{said}");
    assert_eq!(refusals[0].grant, format!("net:{api} POST /repos/me/x"));
}

/// Open a CONNECT tunnel to `target` and begin TLS in it as a client trusting `roots` (PEM).
async fn tls_through(
    proxy: &EgressProxy,
    target: &str,
    roots: &str,
) -> std::io::Result<tokio_rustls::client::TlsStream<TcpStream>> {
    let mut stream = TcpStream::connect((Ipv4Addr::LOCALHOST, proxy.port()))
        .await
        .unwrap();
    stream
        .write_all(format!("CONNECT {target} HTTP/1.1\r\nHost: {target}\r\n\r\n").as_bytes())
        .await
        .unwrap();
    let mut head = Vec::new();
    let mut byte = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n") {
        tokio::io::AsyncReadExt::read_exact(&mut stream, &mut byte)
            .await
            .unwrap();
        head.push(byte[0]);
    }
    assert!(head.starts_with(b"HTTP/1.1 200"));
    let mut store = rustls::RootCertStore::empty();
    for cert in rustls::pki_types::CertificateDer::pem_slice_iter(roots.as_bytes()) {
        store.add(cert.unwrap()).unwrap();
    }
    let config = rustls::ClientConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .unwrap()
    .with_root_certificates(store)
    .with_no_client_auth();
    let name = rustls::pki_types::ServerName::try_from("api.test").unwrap();
    tokio_rustls::TlsConnector::from(Arc::new(config))
        .connect(name, stream)
        .await
}

#[tokio::test]
async fn https_to_a_brokered_host_is_terminated_verified_and_kept_alive() {
    let dir = tempfile::tempdir().unwrap();
    let (port, heads, origin_roots) = tls_origin(dir.path()).await;
    let api = format!("api.test:{port}");
    let (proxy, refusals, told) = brokering(
        std::slice::from_ref(&api),
        vec![secret(std::slice::from_ref(&api), None, None)],
        dir.path(),
        Some(origin_roots),
    );
    let ca = std::fs::read_to_string(dir.path().join("broker/ca.pem")).unwrap();
    let tls = tls_through(&proxy, &api, &ca).await.unwrap();
    let mut tls = BufReader::new(tls);
    // Two requests on one tunnel; the second names another host, which the origin never sees.
    for host in ["api.test", "evil.test"] {
        let request = format!(
            "GET /user HTTP/1.1\r\nHost: {host}\r\nAuthorization: Bearer {PLACEHOLDER}\r\n\r\n"
        );
        tls.get_mut().write_all(request.as_bytes()).await.unwrap();
        let mut status = String::new();
        tokio::time::timeout(WAIT, tls.read_line(&mut status))
            .await
            .unwrap()
            .unwrap();
        assert!(status.starts_with("HTTP/1.1 200"), "{status}");
        let mut rest = String::new();
        while rest != "\r\n" {
            rest.clear();
            tls.read_line(&mut rest).await.unwrap();
        }
        let mut body = [0u8; 2];
        tokio::io::AsyncReadExt::read_exact(&mut tls, &mut body)
            .await
            .unwrap();
    }
    let heads = heads.lock().unwrap().clone();
    assert_eq!(heads.len(), 2, "{heads:?}");
    for head in &heads {
        assert!(
            head.contains(&format!("authorization: Bearer {VALUE}")),
            "{head}"
        );
        assert!(head.contains(&format!("host: api.test:{port}")), "{head}");
        assert!(!head.contains("evil.test"), "{head}");
    }
    assert!(refusals.lock().unwrap().is_empty());
    let injected = told
        .lock()
        .unwrap()
        .iter()
        .filter(|d| matches!(d, Decision::Injected { .. }))
        .count();
    assert_eq!(injected, 2);

    // A client that does not trust yep's CA (it pins, or never read the trust variables)
    // gets no secret, and the host hears why, with how to keep plain CONNECT.
    let other_ca = rcgen::CertificateParams::default()
        .self_signed(&rcgen::KeyPair::generate().unwrap())
        .unwrap()
        .pem();
    assert!(tls_through(&proxy, &api, &other_ca).await.is_err());
    let deadline = tokio::time::Instant::now() + WAIT;
    while refusals.lock().unwrap().is_empty() && tokio::time::Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let refusals = refusals.lock().unwrap();
    assert!(
        matches!(&refusals[..], [r] if matches!(r.reason, Reason::Certificate { .. })),
        "{refusals:?}"
    );
    let said = refusals[0].to_string();
    assert!(
        said.contains("the brokered secret `TOKEN`") && said.contains("--in-env"),
        "{said}"
    );
    assert_eq!(heads.len(), 2);
}

#[tokio::test]
async fn an_origin_that_fails_verification_gets_no_request() {
    let dir = tempfile::tempdir().unwrap();
    // The origin's CA is not among the proxy's roots.
    let (port, heads, _) = tls_origin(dir.path()).await;
    let api = format!("api.test:{port}");
    let other_roots = dir.path().join("other-roots.pem");
    let other_ca = rcgen::CertificateParams::default()
        .self_signed(&rcgen::KeyPair::generate().unwrap())
        .unwrap();
    std::fs::write(&other_roots, other_ca.pem()).unwrap();
    let (proxy, _, _) = brokering(
        std::slice::from_ref(&api),
        vec![secret(std::slice::from_ref(&api), None, None)],
        dir.path(),
        Some(other_roots),
    );
    let ca = std::fs::read_to_string(dir.path().join("broker/ca.pem")).unwrap();
    let mut tls = BufReader::new(tls_through(&proxy, &api, &ca).await.unwrap());
    let request =
        format!("GET / HTTP/1.1\r\nHost: api.test\r\nAuthorization: {PLACEHOLDER}\r\n\r\n");
    tls.get_mut().write_all(request.as_bytes()).await.unwrap();
    let mut status = String::new();
    tokio::time::timeout(WAIT, tls.read_line(&mut status))
        .await
        .unwrap()
        .unwrap();
    assert!(status.starts_with("HTTP/1.1 502"), "{status}");
    assert!(heads.lock().unwrap().is_empty());
}
