//! `yep mcp login` against a remote MCP server behind OAuth, on loopback
//! (`tests/mcp/oauth_server.py`: an authorization server and the protected server in one):
//! the login with PKCE through a loopback redirect, the tokens kept as secrets, a refresh when
//! the access token runs out, and a revocation that ends in "log in again".

use crate::common;
use common::{ok, text, yep_with_env};
use serde_json::Value;
use std::io::{BufRead, BufReader, Read, Write};
use std::path::Path;
use std::process::{Child, Command, Stdio};

/// The server, running until dropped (its stdin closes).
struct OAuthServer {
    child: Child,
    url: String,
}

impl Drop for OAuthServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[allow(clippy::disallowed_methods)] // the remote server the tests log in to
fn oauth_server() -> OAuthServer {
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/mcp/oauth_server.py");
    let mut child = Command::new("python3")
        .arg(script)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let said: Value = serde_json::from_str(&line).unwrap();
    OAuthServer {
        url: said["url"].as_str().unwrap().to_string(),
        child,
    }
}

/// `<method> <path>` on the server's origin (a test hook); its body.
fn hook(server: &OAuthServer, method: &str, path: &str) -> String {
    let host = server
        .url
        .trim_start_matches("http://")
        .trim_end_matches("/mcp");
    let mut stream = std::net::TcpStream::connect(host).unwrap();
    write!(
        stream,
        "{method} {path} HTTP/1.1\r\nHost: {host}\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut answer = String::new();
    stream.read_to_string(&mut answer).unwrap();
    answer
        .split("\r\n\r\n")
        .nth(1)
        .unwrap_or_default()
        .to_string()
}

/// A "browser" that fetches the page and follows its redirects to yep's loopback callback.
fn browser(dir: &Path) -> String {
    let script = dir.join("fetch.py");
    std::fs::write(
        &script,
        "import sys, urllib.request\nurllib.request.urlopen(sys.argv[1]).read()\n",
    )
    .unwrap();
    format!("python3 {}", script.display())
}

/// Every file under `dir`, as text.
fn all_text(dir: &Path) -> String {
    let mut out = String::new();
    for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let path = entry.path();
        if path.is_dir() {
            out.push_str(&all_text(&path));
        } else {
            out.push_str(&String::from_utf8_lossy(
                &std::fs::read(&path).unwrap_or_default(),
            ));
        }
    }
    out
}

#[test]
fn login_keeps_the_tokens_as_secrets_refreshes_them_and_a_revoked_login_says_log_in_again() {
    let tmp = tempfile::tempdir().unwrap();
    let home = tmp.path().join("home");
    let server = oauth_server();
    let opener = browser(tmp.path());
    let env = [("BROWSER", opener.as_str())];
    let run = |args: &[&str], stdin: &str| yep_with_env(&home, args, stdin, &env);

    // Added as one that takes a login: nothing is pinned yet, and the list says what to do.
    let added = ok(&run(
        &["mcp", "add", "remote", "--url", &server.url, "--oauth"],
        "",
    ));
    assert!(added.contains("needs login"), "{added}");
    let listed = ok(&run(&["mcp", "list"], ""));
    assert!(
        listed.contains("login: needs login (`yep mcp login remote`)"),
        "{listed}"
    );
    // A session that reaches for it is told which command logs in.
    let said = text(&run(&["session", "--json"], "mcp list-tools remote\nquit\n").stdout);
    assert!(said.contains("`yep mcp login remote`"), "{said}");

    // The login: the page opens (through $BROWSER), approves, and comes back to yep.
    let login = run(&["mcp", "login", "remote"], "");
    let said = ok(&login);
    assert!(
        said.contains("logged in to MCP server remote (scopes: tools)"),
        "{said}"
    );
    assert!(said.contains("2 tools pinned"), "{said}");
    assert!(
        text(&login.stderr).contains("open this page to log in"),
        "{}",
        text(&login.stderr)
    );
    let listed = ok(&run(&["mcp", "list"], ""));
    assert!(listed.contains("login: logged in"), "{listed}");
    let json: Value = serde_json::from_str(&ok(&run(&["mcp", "list", "--json"], ""))).unwrap();
    assert_eq!(json[0]["login"], "logged in", "{json}");

    // The tokens are secrets: in connections.toml (owner-only), nowhere else in the home.
    let secrets = std::fs::read_to_string(home.join("connections.toml")).unwrap();
    assert!(secrets.contains("access-1-"), "{secrets}");
    use std::os::unix::fs::PermissionsExt;
    let mode = std::fs::metadata(home.join("connections.toml"))
        .unwrap()
        .permissions()
        .mode();
    assert_eq!(mode & 0o777, 0o600);

    let call = "call mcp__remote__whoami {}\nquit\n";
    let said = text(&run(&["session", "--json"], call).stdout);
    assert!(said.contains("token 1 (tools)"), "{said}");

    // A tool that wants more access than the login gave: refused, saying so; the next login
    // asks for what the server named, and the call goes through.
    let admin = "call mcp__remote__admin {}\nquit\n";
    let said = text(&run(&["session", "--json"], admin).stdout);
    assert!(
        said.contains("wants more access than the login gave: `yep mcp login` asks for it"),
        "{said}"
    );
    let said = ok(&run(&["mcp", "login", "remote"], ""));
    assert!(said.contains("(scopes: tools admin)"), "{said}");
    let said = text(&run(&["session", "--json"], admin).stdout);
    assert!(said.contains("token 2 (tools admin)"), "{said}");

    // The access token ends: the next request is refused, the refresh token gets a new one,
    // and the call goes through with it.
    hook(&server, "POST", "/test/expire");
    let said = text(&run(&["session", "--json"], call).stdout);
    assert!(said.contains("token 3 (tools admin)"), "{said}");
    let stats: Value = serde_json::from_str(&hook(&server, "GET", "/test/stats")).unwrap();
    assert_eq!(stats["refreshes"], 1, "{stats}");
    assert_eq!(stats["authorizations"], 2, "{stats}");

    // Every token revoked: no refresh helps, and the session says to log in again.
    hook(&server, "POST", "/test/revoke");
    let out = run(&["session", "--json"], call);
    let said = format!("{}{}", text(&out.stdout), text(&out.stderr));
    assert!(said.contains("`yep mcp login remote`"), "{said}");

    // Nothing yep wrote outside connections.toml holds a token: settings, logs, lock, caches.
    let mut rest = String::new();
    for entry in std::fs::read_dir(&home).unwrap().flatten() {
        if entry.file_name() == "connections.toml" {
            continue;
        }
        let path = entry.path();
        rest.push_str(&match path.is_dir() {
            true => all_text(&path),
            false => String::from_utf8_lossy(&std::fs::read(&path).unwrap()).into_owned(),
        });
    }
    assert!(
        !rest.contains("access-") && !rest.contains("refresh-"),
        "{rest}"
    );
    assert!(!listed.contains("access-"));

    // Logging out forgets the tokens.
    ok(&run(&["mcp", "logout", "remote"], ""));
    let secrets = std::fs::read_to_string(home.join("connections.toml")).unwrap();
    assert!(!secrets.contains("access-"), "{secrets}");
    let listed = ok(&run(&["mcp", "list"], ""));
    assert!(listed.contains("login: needs login"), "{listed}");
}

#[test]
fn a_login_the_page_refuses_says_why_and_keeps_nothing() {
    let tmp = tempfile::tempdir().unwrap();
    let home = tmp.path().join("home");
    let server = oauth_server();
    // A "browser" that answers the callback with the authorization server's refusal.
    let script = tmp.path().join("deny.py");
    std::fs::write(
        &script,
        "import sys, urllib.parse, urllib.request\n\
         q = dict(urllib.parse.parse_qsl(urllib.parse.urlparse(sys.argv[1]).query))\n\
         urllib.request.urlopen(q['redirect_uri'] + '?error=access_denied&error_description=the+user+said+no&state=' + q['state']).read()\n",
    )
    .unwrap();
    let opener = format!("python3 {}", script.display());
    let env = [("BROWSER", opener.as_str())];
    ok(&yep_with_env(
        &home,
        &["mcp", "add", "remote", "--url", &server.url, "--oauth"],
        "",
        &env,
    ));
    let refused = yep_with_env(&home, &["mcp", "login", "remote"], "", &env);
    assert_eq!(refused.status.code(), Some(1));
    let said = text(&refused.stderr);
    assert!(
        said.contains("the authorization server said no: access_denied: the user said no"),
        "{said}"
    );
    let secrets = std::fs::read_to_string(home.join("connections.toml")).unwrap_or_default();
    assert!(!secrets.contains("access-"), "{secrets}");
}

/// A login whose "browser" runs `steps` (Python, with `page` the login page and `redirect`
/// yep's callback) and then opens the page; what it wrote and the login's output.
fn login_with(steps: &str, wait: &str) -> (String, std::process::Output) {
    let tmp = tempfile::tempdir().unwrap();
    let home = tmp.path().join("home");
    let server = oauth_server();
    let script = tmp.path().join("browser.py");
    let said = tmp.path().join("said.txt");
    std::fs::write(
        &script,
        format!(
            "import socket, sys, urllib.error, urllib.parse, urllib.request\n\
             page = sys.argv[1]\n\
             redirect = dict(urllib.parse.parse_qsl(urllib.parse.urlparse(page).query))['redirect_uri']\n\
             said = open({said:?}, 'w')\n\
             {steps}\n\
             urllib.request.urlopen(page, timeout=15).read()\n\
             said.write('opened\\n')\n",
            said = said.to_str().unwrap(),
        ),
    )
    .unwrap();
    let opener = format!("python3 {}", script.display());
    let env = [("BROWSER", opener.as_str())];
    ok(&yep_with_env(
        &home,
        &["mcp", "add", "remote", "--url", &server.url, "--oauth"],
        "",
        &env,
    ));
    let login = yep_with_env(&home, &["mcp", "login", "remote", "--wait", wait], "", &env);
    (std::fs::read_to_string(&said).unwrap_or_default(), login)
}

#[test]
fn a_callback_with_another_state_is_answered_with_an_error_and_the_login_goes_on() {
    // Forged answers first: a code and a refusal, each with a state that is not the login's,
    // and one with none.
    let steps = "for query in ['code=forged&state=wrong', 'error=access_denied&state=wrong', 'code=forged']:\n    \
                 try:\n        \
                 urllib.request.urlopen(redirect + '?' + query, timeout=15).read()\n        \
                 said.write('accepted\\n')\n    \
                 except urllib.error.HTTPError as e:\n        \
                 said.write(f'{e.code} {e.read().decode()}')";
    let (said, login) = login_with(steps, "60s");
    assert_eq!(
        said.matches("400 yep: this answer is not for the login")
            .count(),
        3,
        "{said}"
    );
    assert!(!said.contains("accepted"), "{said}");
    let out = ok(&login);
    assert!(
        out.contains("logged in to MCP server remote (scopes: tools)"),
        "{out}\n{said}"
    );
}

#[test]
fn idle_connections_to_the_callback_do_not_hold_the_login() {
    // Idle connections opened first, held until the page has come back. Served one after
    // another, each would hold the login for its read timeout, together past `--wait`.
    let steps = "host, port = urllib.parse.urlparse(redirect).hostname, urllib.parse.urlparse(redirect).port\n\
                 idle = [socket.create_connection((host, port)) for _ in range(4)]";
    let (said, login) = login_with(steps, "6s");
    let out = ok(&login);
    assert!(
        out.contains("logged in to MCP server remote (scopes: tools)"),
        "{out}\n{said}"
    );
    assert!(said.contains("opened"), "{said}");
}

/// A server added without `--oauth` that answers with a login challenge is kept as one that
/// takes a login (the typed handshake error says so), not refused as one that cannot start.
#[test]
fn a_server_added_without_oauth_that_wants_a_login_is_kept_for_one() {
    let tmp = tempfile::tempdir().unwrap();
    let home = tmp.path().join("home");
    let server = oauth_server();
    let added = yep_with_env(
        &home,
        &["mcp", "add", "remote", "--url", &server.url],
        "",
        &[],
    );
    let said = text(&added.stderr);
    assert!(added.status.success(), "{said}");
    assert!(
        said.contains(
            "MCP server remote wants a login: `yep mcp login remote` logs in and pins its tools"
        ),
        "{said}"
    );
    let listed = ok(&yep_with_env(&home, &["mcp", "list"], "", &[]));
    assert!(
        listed.contains("login: needs login (`yep mcp login remote`)"),
        "{listed}"
    );
}
