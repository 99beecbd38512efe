use super::guard::OwnAddresses;
use super::*;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// How long a test waits for any one answer before it fails instead of hanging.
const WAIT: Duration = Duration::from_secs(10);

type Refusals = Arc<Mutex<Vec<Refusal>>>;

/// A proxy for package `pkg` granted `grants`, resolving with `table`, and the refusals
/// it reports.
fn proxy(grants: &[&str], table: &str) -> (EgressProxy, Refusals) {
    let refusals: Refusals = Arc::default();
    let sink = Arc::clone(&refusals);
    let proxy = EgressProxy::start(
        "pkg",
        Setup {
            allowed: Allowed::from_grants(grants.iter().copied()),
            resolver: Some(Resolver::with_table(table)),
            on_refused: Some(Arc::new(move |r| sink.lock().unwrap().push(r))),
            ..Setup::default()
        },
    )
    .unwrap();
    (proxy, refusals)
}

/// A loopback TCP server that echoes what it reads; its port.
async fn echo_server() -> u16 {
    let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).await.unwrap();
    let port = listener.local_addr().unwrap().port();
    tokio::spawn(async move {
        while let Ok((mut stream, _)) = listener.accept().await {
            tokio::spawn(async move {
                let (mut r, mut w) = stream.split();
                let _ = tokio::io::copy(&mut r, &mut w).await;
            });
        }
    });
    port
}

async fn connect(proxy: &EgressProxy) -> TcpStream {
    TcpStream::connect((Ipv4Addr::LOCALHOST, proxy.port()))
        .await
        .unwrap()
}

/// Read up to the end of a response head (or the end of the stream).
async fn read_head(stream: &mut TcpStream) -> String {
    let mut head = Vec::new();
    let mut byte = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n") && head.len() < MAX_HEAD_BYTES {
        match tokio::time::timeout(WAIT, stream.read(&mut byte)).await {
            Ok(Ok(1)) => head.push(byte[0]),
            Ok(_) => break,
            Err(_) => panic!("no answer within {WAIT:?}: {head:?}"),
        }
    }
    String::from_utf8_lossy(&head).into_owned()
}

async fn read_to_end(stream: &mut TcpStream) -> String {
    let mut out = Vec::new();
    let _ = tokio::time::timeout(WAIT, stream.read_to_end(&mut out))
        .await
        .expect("the proxy closes the connection");
    String::from_utf8_lossy(&out).into_owned()
}

/// Send `CONNECT target` on a new connection; the stream and the answer's head.
async fn send_connect(proxy: &EgressProxy, target: &str) -> (TcpStream, String) {
    let mut stream = connect(proxy).await;
    stream
        .write_all(format!("CONNECT {target} HTTP/1.1\r\nHost: {target}\r\n\r\n").as_bytes())
        .await
        .unwrap();
    let head = read_head(&mut stream).await;
    (stream, head)
}

/// Whether a tunnel through `proxy` to `target` (an echo server) carries bytes both ways.
async fn tunnels(proxy: &EgressProxy, target: &str) -> bool {
    let (mut stream, head) = send_connect(proxy, target).await;
    if !head.starts_with("HTTP/1.1 200") {
        return false;
    }
    stream.write_all(b"ping").await.unwrap();
    let mut echoed = [0u8; 4];
    tokio::time::timeout(WAIT, stream.read_exact(&mut echoed))
        .await
        .unwrap()
        .unwrap();
    &echoed == b"ping"
}

#[tokio::test]
async fn connect_to_an_allowed_name_tunnels_to_the_origin() {
    let echo = echo_server().await;
    let (proxy, refusals) = proxy(
        &[&format!("echo.test:{echo}"), "private"],
        "echo.test=127.0.0.1",
    );
    // Names compare case-insensitively, a trailing dot ignored.
    assert!(tunnels(&proxy, &format!("Echo.TEST.:{echo}")).await);
    assert!(refusals.lock().unwrap().is_empty());
}

#[tokio::test]
async fn plain_http_to_an_allowed_name_is_forwarded_and_answered() {
    let origin = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).await.unwrap();
    let port = origin.local_addr().unwrap().port();
    let (seen, heard) = tokio::sync::oneshot::channel();
    tokio::spawn(async move {
        let (mut stream, _) = origin.accept().await.unwrap();
        let head = read_head(&mut stream).await;
        stream
            .write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\nConnection: close\r\n\r\nhello")
            .await
            .unwrap();
        let _ = seen.send(head);
    });
    let (proxy, _) = proxy(
        &[&format!("web.test:{port}"), "private"],
        "web.test=127.0.0.1",
    );
    let mut stream = connect(&proxy).await;
    stream
        .write_all(
            format!(
                "GET http://web.test:{port}/path?q=1 HTTP/1.1\r\nHost: elsewhere.test\r\n\
                 Proxy-Authorization: Basic eA==\r\nX-Kept: yes\r\nConnection: close\r\n\r\n"
            )
            .as_bytes(),
        )
        .await
        .unwrap();
    let answer = read_to_end(&mut stream).await;
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    assert!(answer.ends_with("hello"), "{answer}");
    let head = heard.await.unwrap().to_ascii_lowercase();
    assert!(head.starts_with("get /path?q=1 http/1.1\r\n"), "{head}");
    assert!(
        head.contains(&format!("host: web.test:{port}\r\n")),
        "{head}"
    );
    assert!(head.contains("x-kept: yes\r\n"), "{head}");
    assert!(!head.contains("proxy-authorization"), "{head}");
}

#[tokio::test]
async fn a_request_without_a_host_is_a_bad_request() {
    let (proxy, refusals) = proxy(&["web.test"], "");
    let mut stream = connect(&proxy).await;
    stream
        .write_all(b"GET /path HTTP/1.1\r\nHost: web.test\r\n\r\n")
        .await
        .unwrap();
    let answer = read_to_end(&mut stream).await;
    assert!(answer.starts_with("HTTP/1.1 400"), "{answer}");
    assert!(refusals.lock().unwrap().is_empty());
}

#[tokio::test]
async fn a_name_not_granted_is_refused_with_its_grant_and_reported_once() {
    let (proxy, refusals) = proxy(&["api.github.com"], "");
    for _ in 0..5 {
        let (mut stream, head) = send_connect(&proxy, "denied.test:443").await;
        assert!(head.starts_with("HTTP/1.1 403"), "{head}");
        let body = read_to_end(&mut stream).await;
        assert!(body.contains("refused denied.test:443"), "{body}");
        assert!(body.contains("package pkg"), "{body}");
        assert!(body.contains("`net:denied.test`"), "{body}");
    }
    let refusals = refusals.lock().unwrap();
    assert_eq!(
        *refusals,
        [Refusal {
            package: "pkg".to_string(),
            host: "denied.test".to_string(),
            port: 443,
            grant: "net:denied.test".to_string(),
            resolved: None,
            reason: Reason::Host,
        }]
    );
}

#[tokio::test]
async fn refusals_past_the_cap_are_answered_but_not_reported() {
    let (proxy, refusals) = proxy(&["api.github.com"], "");
    for i in 0..MAX_REPORTED + 8 {
        let (_, head) = send_connect(&proxy, &format!("h{i}.test:8080")).await;
        assert!(head.starts_with("HTTP/1.1 403"), "{head}");
    }
    let refusals = refusals.lock().unwrap();
    assert_eq!(refusals.len(), MAX_REPORTED);
    assert_eq!(refusals[0].grant, "net:h0.test:8080");
}

#[tokio::test]
async fn a_wildcard_allows_subdomains_only() {
    let allowed = Allowed::from_grants(["*.example.test"]);
    assert!(allowed.allows("a.example.test", 443));
    assert!(allowed.allows("b.a.EXAMPLE.test.", 80));
    assert!(!allowed.allows("example.test", 443));
    assert!(!allowed.allows("evilexample.test", 443));
    assert!(!allowed.allows("a.example.test", 8080));

    let echo = echo_server().await;
    let (proxy, refusals) = proxy(
        &[&format!("*.example.test:{echo}"), "private"],
        "a.example.test=127.0.0.1,example.test=127.0.0.1,evilexample.test=127.0.0.1",
    );
    assert!(tunnels(&proxy, &format!("a.example.test:{echo}")).await);
    for refused in ["example.test", "evilexample.test"] {
        let (_, head) = send_connect(&proxy, &format!("{refused}:{echo}")).await;
        assert!(head.starts_with("HTTP/1.1 403"), "{refused}: {head}");
    }
    assert_eq!(refusals.lock().unwrap().len(), 2);
}

#[test]
fn a_port_names_that_port_and_a_bare_name_the_web_ports() {
    let allowed = Allowed::from_grants(["example.org:8443", "API.GitHub.com."]);
    assert!(allowed.allows("example.org", 8443));
    assert!(!allowed.allows("example.org", 443));
    assert!(!allowed.allows("example.org", 80));
    assert!(allowed.allows("api.github.com", 443));
    assert!(allowed.allows("api.github.com", 80));
    assert!(!allowed.allows("api.github.com", 8443));
    assert!(!allowed.allows("api.github.com", 22));
}

#[test]
fn any_and_private_name_no_host_and_addresses_name_themselves() {
    let allowed = Allowed::from_grants(["*", "private", "", "a b:1"]);
    assert!(allowed.is_empty(), "{allowed:?}");
    assert!(allowed.private);
    assert!(!allowed.allows("private", 443));
    let allowed = Allowed::from_grants(["10.0.0.5", "[2001:db8::1]", "10.1.2.3:5432"]);
    assert!(allowed.allows("10.0.0.5", 443));
    assert!(allowed.allows("[2001:db8::1]", 443));
    assert!(!allowed.allows("10.0.0.5", 8080));
    assert!(allowed.allows("10.1.2.3", 5432));
    assert!(!allowed.allows("10.1.2.3", 443));
    assert!(!allowed.private);
}

#[tokio::test]
async fn a_name_that_resolves_to_loopback_is_refused() {
    let echo = echo_server().await;
    let (proxy, refusals) = proxy(&[&format!("localhost:{echo}")], "");
    let (mut stream, head) = send_connect(&proxy, &format!("localhost:{echo}")).await;
    let body = read_to_end(&mut stream).await;
    assert!(head.starts_with("HTTP/1.1 403"), "{head}{body}");
    assert!(body.contains("a loopback address"), "{body}");
    assert!(body.contains("`net:private`"), "{body}");
    assert_eq!(refusals.lock().unwrap()[0].grant, "net:private");
}

#[tokio::test]
async fn a_granted_name_mapped_to_loopback_is_refused_and_told_unless_private_is_granted() {
    let echo = echo_server().await;
    let (refused, refusals) = proxy(&[&format!("echo.test:{echo}")], "echo.test=127.0.0.1");
    let (mut stream, head) = send_connect(&refused, &format!("echo.test:{echo}")).await;
    let body = read_to_end(&mut stream).await;
    assert!(head.starts_with("HTTP/1.1 403"), "{head}{body}");
    assert!(
        body.contains(&format!(
            "refused echo.test:{echo} for package pkg: it resolves to 127.0.0.1, a loopback address"
        )),
        "{body}"
    );
    assert!(body.contains("the grant `net:private`"), "{body}");
    assert_eq!(
        *refusals.lock().unwrap(),
        [Refusal {
            package: "pkg".to_string(),
            host: "echo.test".to_string(),
            port: echo,
            grant: "net:private".to_string(),
            resolved: Some((IpAddr::V4(Ipv4Addr::LOCALHOST), Guarded::Loopback)),
            reason: Reason::Host,
        }]
    );

    let (private, _) = proxy(
        &[&format!("echo.test:{echo}"), "private"],
        "echo.test=127.0.0.1",
    );
    assert!(tunnels(&private, &format!("echo.test:{echo}")).await);
}

#[tokio::test]
async fn an_address_granted_by_itself_is_reached_by_address_only() {
    let echo = echo_server().await;
    let (proxy, _) = proxy(&[&format!("127.0.0.1:{echo}")], "echo.test=127.0.0.1");
    assert!(tunnels(&proxy, &format!("127.0.0.1:{echo}")).await);
    let (_, head) = send_connect(&proxy, &format!("echo.test:{echo}")).await;
    assert!(head.starts_with("HTTP/1.1 403"), "{head}");
}

#[tokio::test]
async fn a_name_mapped_to_this_machines_own_address_is_refused() {
    // A service bound to every interface, reached by one of this machine's addresses.
    let Some(own) = nix::ifaddrs::getifaddrs()
        .unwrap()
        .filter_map(|i| i.address?.as_sockaddr_in().map(|a| a.ip()))
        .find(|ip| !ip.is_loopback())
    else {
        eprintln!("skipped: this machine has no address but loopback");
        return;
    };
    let listener = TcpListener::bind((Ipv4Addr::UNSPECIFIED, 0)).await.unwrap();
    let port = listener.local_addr().unwrap().port();
    tokio::spawn(async move {
        while let Ok((mut stream, _)) = listener.accept().await {
            tokio::spawn(async move {
                let (mut r, mut w) = stream.split();
                let _ = tokio::io::copy(&mut r, &mut w).await;
            });
        }
    });
    let table = format!("me.test={own}");
    let (refused, refusals) = proxy(&[&format!("me.test:{port}")], &table);
    let (mut stream, head) = send_connect(&refused, &format!("me.test:{port}")).await;
    let body = read_to_end(&mut stream).await;
    assert!(head.starts_with("HTTP/1.1 403"), "{head}{body}");
    assert!(body.contains(&format!("it resolves to {own}")), "{body}");
    assert_eq!(refusals.lock().unwrap()[0].grant, "net:private");

    let (private, _) = proxy(&[&format!("me.test:{port}"), "private"], &table);
    assert!(tunnels(&private, &format!("me.test:{port}")).await);
}

#[tokio::test]
async fn a_name_mapped_to_a_metadata_address_is_refused_even_with_private() {
    let (proxy, refusals) = proxy(
        &["meta.test", "private"],
        "meta.test=169.254.169.254,mapped.test=::ffff:10.0.0.1",
    );
    let (mut stream, head) = send_connect(&proxy, "meta.test:80").await;
    let body = read_to_end(&mut stream).await;
    assert!(head.starts_with("HTTP/1.1 403"), "{head}{body}");
    assert!(
        body.contains("it resolves to 169.254.169.254, a cloud metadata service's address"),
        "{body}"
    );
    assert_eq!(refusals.lock().unwrap()[0].grant, "net:169.254.169.254:80");
}

#[test]
fn addresses_are_guarded_by_their_range_in_every_form() {
    let cases: &[(&str, Option<Guarded>)] = &[
        ("127.0.0.1", Some(Guarded::Loopback)),
        ("127.9.9.9", Some(Guarded::Loopback)),
        ("::1", Some(Guarded::Loopback)),
        ("::ffff:127.0.0.1", Some(Guarded::Loopback)),
        ("::127.0.0.1", Some(Guarded::Loopback)),
        ("64:ff9b::127.0.0.1", Some(Guarded::Loopback)),
        ("0.0.0.0", Some(Guarded::Unspecified)),
        ("::", Some(Guarded::Unspecified)),
        ("::ffff:0.0.0.0", Some(Guarded::Unspecified)),
        ("169.254.169.254", Some(Guarded::Metadata)),
        ("::ffff:169.254.169.254", Some(Guarded::Metadata)),
        ("fd00:ec2::254", Some(Guarded::Metadata)),
        ("100.100.100.200", Some(Guarded::Metadata)),
        ("168.63.129.16", Some(Guarded::Metadata)),
        ("169.254.1.1", Some(Guarded::LinkLocal)),
        ("fe80::1", Some(Guarded::LinkLocal)),
        ("febf::1", Some(Guarded::LinkLocal)),
        ("10.1.2.3", Some(Guarded::Private)),
        ("172.16.0.1", Some(Guarded::Private)),
        ("172.31.255.255", Some(Guarded::Private)),
        ("192.168.1.1", Some(Guarded::Private)),
        ("::ffff:192.168.1.1", Some(Guarded::Private)),
        ("100.64.0.1", Some(Guarded::SharedNat)),
        ("100.127.255.255", Some(Guarded::SharedNat)),
        ("fc00::1", Some(Guarded::UniqueLocal)),
        ("fdff::1", Some(Guarded::UniqueLocal)),
        ("8.8.8.8", None),
        ("172.15.0.1", None),
        ("172.32.0.1", None),
        ("100.128.0.1", None),
        ("168.63.129.17", None),
        ("fec0::1", None),
        ("2001:db8::1", None),
        ("::ffff:8.8.8.8", None),
    ];
    for (ip, want) in cases {
        assert_eq!(Guarded::of(ip.parse().unwrap()), *want, "{ip}");
    }
    // The machine's own addresses are listed: loopback is one of them.
    assert!(OwnAddresses::default().contains(IpAddr::V4(Ipv4Addr::LOCALHOST)));
}

#[tokio::test]
async fn garbage_and_oversized_heads_leave_the_proxy_serving() {
    let echo = echo_server().await;
    let (proxy, _) = proxy(
        &[&format!("echo.test:{echo}"), "private"],
        "echo.test=127.0.0.1",
    );

    let mut garbage = connect(&proxy).await;
    garbage
        .write_all(b"\x00\x01\xff garbage\r\n\r\n")
        .await
        .unwrap();
    let answer = read_to_end(&mut garbage).await;
    assert!(answer.starts_with("HTTP/1.1 400"), "{answer}");

    let mut oversized = connect(&proxy).await;
    let big = format!(
        "CONNECT echo.test:{echo} HTTP/1.1\r\nX-Big: {}\r\n\r\n",
        "a".repeat(MAX_HEAD_BYTES * 2)
    );
    // The proxy may close before it has read it all.
    let _ = oversized.write_all(big.as_bytes()).await;
    let head = read_head(&mut oversized).await;
    assert!(head.starts_with("HTTP/1.1 431"), "{head}");

    assert!(tunnels(&proxy, &format!("echo.test:{echo}")).await);
}

#[tokio::test]
async fn connections_past_the_cap_are_closed() {
    let (proxy, _) = proxy(&["web.test"], "");
    let mut held = Vec::new();
    for _ in 0..MAX_CONNECTIONS {
        let mut stream = connect(&proxy).await;
        // A head that never ends holds its slot until the header timeout.
        stream
            .write_all(b"GET http://web.test/ HTTP/1.1\r\n")
            .await
            .unwrap();
        held.push(stream);
    }
    let mut extra = connect(&proxy).await;
    let mut byte = [0u8; 1];
    let read = tokio::time::timeout(WAIT, extra.read(&mut byte))
        .await
        .unwrap();
    assert!(matches!(read, Ok(0) | Err(_)), "{read:?}");
}

#[tokio::test]
async fn dropping_the_proxy_closes_its_tunnels() {
    let echo = echo_server().await;
    let (proxy, _) = proxy(
        &[&format!("echo.test:{echo}"), "private"],
        "echo.test=127.0.0.1",
    );
    let (mut stream, head) = send_connect(&proxy, &format!("echo.test:{echo}")).await;
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
    drop(proxy);
    let mut byte = [0u8; 1];
    let read = tokio::time::timeout(WAIT, stream.read(&mut byte))
        .await
        .unwrap();
    assert!(matches!(read, Ok(0) | Err(_)), "{read:?}");
}

#[tokio::test]
async fn the_environment_points_every_scheme_at_the_proxy() {
    let (proxy, _) = proxy(&["web.test"], "");
    let url = format!("http://127.0.0.1:{}", proxy.port());
    let env: HashMap<String, String> = proxy.env().into_iter().collect();
    for name in ["HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy"] {
        assert_eq!(env[name], url, "{name}");
    }
    assert_eq!(env["NO_PROXY"], "localhost,127.0.0.1,::1");
    assert_eq!(env["no_proxy"], "localhost,127.0.0.1,::1");
}

#[test]
fn the_host_table_skips_what_is_not_name_equals_address() {
    let resolver = Resolver::with_table("a.test=127.0.0.1, B.test.=[::1],junk,c.test=nope");
    assert_eq!(resolver.fixed.len(), 2);
    assert_eq!(resolver.fixed["b.test"], IpAddr::V6(Ipv6Addr::LOCALHOST));
}

#[test]
fn starting_outside_a_runtime_is_an_error_not_a_panic() {
    let started = EgressProxy::start("pkg", Setup::default());
    assert!(started.is_err());
}
