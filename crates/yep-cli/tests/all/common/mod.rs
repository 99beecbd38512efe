//! Helpers shared by the CLI's test files (each file uses some of them).
#![allow(dead_code)]

pub mod claude;
pub mod http;
pub mod registry;
pub mod zot;

use std::path::Path;

use std::process::{Command, Output, Stdio};
pub use yep_test_support::Sealed;
pub use yep_test_support::fixtures::{copy_tree, edit, git};
pub use yep_test_support::text::{assert_nothing_hidden, ok, text};

/// Run the CLI in home `home`, sealed, with nothing on its stdin.
pub fn yep(home: &Path, args: &[&str]) -> Output {
    yep_with_stdin(home, args, "")
}

/// The CLI to run, sealed ([`Sealed`]), for a test that drives the process itself (its stdin,
/// a signal, a pty); one that names its yep home sets `YEP_HOME` after.
pub fn yep_command() -> Command {
    let sealed = Sealed::get();
    sealed.command(env!("CARGO_BIN_EXE_yep"), &sealed.home().join(".yep"))
}

/// Run the CLI in home `home` with `stdin` as its whole input.
pub fn yep_with_stdin(home: &Path, args: &[&str], stdin: &str) -> Output {
    yep_with_env(home, args, stdin, &[])
}

/// [`yep_with_stdin`], with `env` added (what the CLI starts inherits it).
pub fn yep_with_env(home: &Path, args: &[&str], stdin: &str, env: &[(&str, &str)]) -> Output {
    yep_at(None, home, args, stdin, env)
}

/// [`yep_with_stdin`], run in directory `cwd` (the workspace it sees).
pub fn yep_in(cwd: &Path, home: &Path, args: &[&str], stdin: &str) -> Output {
    yep_at(Some(cwd), home, args, stdin, &[])
}

/// The CLI in directory `cwd` (or here) and home `home`, sealed ([`Sealed`]), with `env`
/// added and `stdin` its whole input.
pub fn yep_at(
    cwd: Option<&Path>,
    home: &Path,
    args: &[&str],
    stdin: &str,
    env: &[(&str, &str)],
) -> Output {
    use std::io::Write;
    let mut command = Sealed::get().command(env!("CARGO_BIN_EXE_yep"), home);
    if let Some(dir) = cwd {
        command.current_dir(dir);
    }
    let mut child = command
        .args(args)
        .envs(env.iter().copied())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(stdin.as_bytes())
        .unwrap();
    child.wait_with_output().unwrap()
}

/// `git args` in `dir`, with a throwaway identity and no signing; its trimmed stdout.
/// util-linux `script` running the shell command `inner` on a pseudo-terminal, sealed
/// ([`Sealed`]; `inner` may set `YEP_HOME` and the like before its command). `inner` is a
/// command, with variable assignments before it if need be. The shell is pinned to `/bin/sh` and
/// `inner` is `exec`ed through `env`: the results do not depend on the caller's `$SHELL` (CI has
/// none), and no shell stays between the pty and the CLI to die of a Ctrl-C a test types.
pub fn script(inner: &str) -> Command {
    #[allow(clippy::disallowed_methods)] // util-linux `script`, to run the CLI on a pty
    let mut command = Command::new("script");
    let sealed = Sealed::get();
    sealed.seal(&mut command, &sealed.home().join(".yep"));
    command
        .args(["-qec", &format!("exec env {inner}"), "/dev/null"])
        .env("SHELL", "/bin/sh");
    command
}

/// Run `inner` on a pseudo-terminal (see [`script`]); what the terminal showed.
pub fn on_a_pty(inner: &str) -> String {
    let out = script(inner)
        .env_remove("NO_COLOR")
        .env_remove("RUST_LOG")
        .stdin(Stdio::null())
        .output()
        .expect("util-linux `script` runs the CLI on a pseudo-terminal");
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// A Rust package is built as its README says, with a shared target dir so repeated runs
/// stay quick; a script package runs as it is.
pub fn build_package(lang: &str, dir: &Path, name: &str) {
    if lang != "rust" {
        return;
    }
    let target = Path::new(env!("CARGO_BIN_EXE_yep"))
        .parent()
        .unwrap()
        .parent()
        .unwrap()
        .join("scaffold-e2e");
    #[allow(clippy::disallowed_methods)]
    let built = Command::new(env!("CARGO"))
        .args(["build", "--quiet", "--release", "--manifest-path"])
        .arg(dir.join("Cargo.toml"))
        .env("CARGO_TARGET_DIR", &target)
        .status()
        .unwrap();
    assert!(built.success(), "the Rust template did not build");
    std::fs::create_dir_all(dir.join("bin")).unwrap();
    std::fs::copy(
        target.join(format!("release/{name}-server")),
        dir.join(format!("bin/{name}-server")),
    )
    .unwrap();
}

/// The check named `name` in a `yep doctor --json` report.
pub fn doctor_check<'a>(report: &'a serde_json::Value, name: &str) -> &'a serde_json::Value {
    report["checks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["name"] == name)
        .unwrap_or_else(|| panic!("no {name} check: {report:#}"))
}

/// The edit an author makes to a tool `yep new` wrote in `lang`: `forecast` takes `days`
/// (an integer, 3 when not given) besides `text`. Only the code changes, not plugin.json.
pub fn add_days_parameter(lang: &str, server: &Path) {
    match lang {
        "python" => edit(
            server,
            "def forecast(text: str, *, ctx):",
            "def forecast(text: str, days: int = 3, *, ctx):",
        ),
        "typescript" => edit(
            server,
            "properties: { text: { type: \"string\" } }",
            "properties: { text: { type: \"string\" }, days: { type: \"integer\", default: 3 } }",
        ),
        _ => edit(
            server,
            "    text: String,\n}",
            "    text: String,\n    #[serde(default)]\n    days: Option<u32>,\n}",
        ),
    }
}

/// A running `yep mcp serve`, killed when dropped: a failed assertion leaves no server behind.
pub struct Serving(pub std::process::Child);

impl Drop for Serving {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// `yep mcp serve --http <addr> [extra]` on `home`, running: the process, its url, and the
/// line after it (the token, when it was just made).
pub fn serve_http(home: &Path, addr: &str, extra: &[&str]) -> (Serving, String, String) {
    serve_http_limited(home, addr, extra, None)
}

/// [`serve_http`], with at most `nofile` open files when given (`ulimit -n`).
#[allow(clippy::disallowed_methods)] // kept running while clients connect
pub fn serve_http_limited(
    home: &Path,
    addr: &str,
    extra: &[&str],
    nofile: Option<u32>,
) -> (Serving, String, String) {
    use std::io::BufRead;
    let yep = env!("CARGO_BIN_EXE_yep");
    let mut command = match nofile {
        Some(n) => {
            let mut sh = Command::new("sh");
            sh.args(["-c", &format!("ulimit -n {n} && exec \"$0\" \"$@\""), yep]);
            sh
        }
        None => Command::new(yep),
    };
    let mut server = Serving(
        command
            .args(["mcp", "serve", "--http", addr])
            .args(extra)
            .env("YEP_HOME", home)
            .env_remove("RUST_LOG")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap(),
    );
    let mut lines = std::io::BufReader::new(server.0.stderr.take().unwrap()).lines();
    let mut said = Vec::new();
    let url = loop {
        let Some(Ok(line)) = lines.next() else {
            let status = server.0.wait();
            panic!(
                "yep mcp serve ended ({status:?}) before saying where it listens:\n{}",
                said.join("\n")
            );
        };
        if let Some(rest) = line.strip_prefix("serving MCP at ") {
            break rest.split_whitespace().next().unwrap().to_string();
        }
        said.push(line);
    };
    let next = lines.next().unwrap().unwrap();
    // Keep reading its stderr, so the server never blocks on a full pipe.
    std::thread::spawn(move || for _ in lines {});
    (server, url, next)
}

/// A home in `tmp` with one enabled extension (the fixture `t`, whose tool `t1` echoes its
/// arguments).
pub fn fixture_home(tmp: &Path) -> std::path::PathBuf {
    let home = tmp.join("home");
    let fixture = Path::new(env!("CARGO_BIN_EXE_yep")).with_file_name("yep-fixture");
    let dir = tmp.join("src").join("t");
    std::fs::create_dir_all(&dir).unwrap();
    let manifest = serde_json::json!({"name": "t", "version": "1.0.0", "description": "t", "yolop": {
        "capabilityServer": {"command": fixture, "args": [serde_json::json!({"name": "t", "tools": ["t1"]}).to_string()]},
        "tools": [{"name": "t1", "description": "echoes its arguments"}]}});
    std::fs::write(dir.join("plugin.json"), manifest.to_string()).unwrap();
    let install = yep_with_stdin(&home, &["install", dir.to_str().unwrap(), "--yes"], "");
    assert!(install.status.success(), "{}", text(&install.stderr));
    let enable = yep_with_stdin(&home, &["enable", "t"], "");
    assert!(enable.status.success(), "{}", text(&enable.stderr));
    home
}

/// `s` as a regex that matches it literally (for insta filters: a temp path, a binary's path).
pub fn regex_escape(s: &str) -> String {
    s.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '/' {
                c.to_string()
            } else {
                format!("\\{c}")
            }
        })
        .collect()
}

/// `insta` settings that hide what differs between runs: the test's temp dir `tmp`, the sealed
/// home, this build's `yep`, hashes, commits, times and measured durations (a fraction, or a
/// wait: `in 12 ms`); a configured timeout (`timeout 10 s`) is the same every run and stays.
pub fn stable(tmp: &Path) -> insta::Settings {
    let mut settings = insta::Settings::clone_current();
    settings.add_filter(&regex_escape(tmp.to_str().unwrap()), "[TMP]");
    settings.add_filter(
        &regex_escape(Sealed::get().home().to_str().unwrap()),
        "[USER_HOME]",
    );
    settings.add_filter(&regex_escape(env!("CARGO_BIN_EXE_yep")), "[YEP]");
    settings.add_filter(r"sha256:[0-9a-f]{64}", "sha256:[HASH]");
    settings.add_filter(r"\b[0-9a-f]{40}\b", "[COMMIT]");
    settings.add_filter(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z", "[TIME]");
    settings.add_filter(r"\b\d+\.\d+ ?(ms|s)\b", "[DURATION]");
    settings.add_filter(r"\b(in|after) \d+ ?(ms|s)\b", "$1 [DURATION]");
    settings
}

/// `yep mcp serve` on `home` in `cwd`, spoken to in raw JSON-RPC, initialized, asked
/// `requests` in turn: their answers.
pub fn raw_over_mcp(
    cwd: &Path,
    home: &Path,
    requests: &[serde_json::Value],
) -> Vec<serde_json::Value> {
    use std::io::{BufRead, Write};
    #[allow(clippy::disallowed_methods)] // the CLI under test, as an agent starts it
    let child = yep_command()
        .args(["--home", home.to_str().unwrap(), "mcp", "serve"])
        .current_dir(cwd)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let mut server = Serving(child);
    let mut stdin = server.0.stdin.take().unwrap();
    let mut stdout = std::io::BufReader::new(server.0.stdout.take().unwrap());
    let mut answer = |id: usize| loop {
        let mut line = String::new();
        assert!(
            stdout.read_line(&mut line).unwrap() > 0,
            "yep mcp serve ended"
        );
        let message: serde_json::Value = serde_json::from_str(&line).unwrap_or_default();
        if message["id"] == id {
            break message;
        }
    };
    let initialize = serde_json::json!({"jsonrpc": "2.0", "id": 0, "method": "initialize",
        "params": {"protocolVersion": "2025-06-18", "capabilities": {},
            "clientInfo": {"name": "claude-test", "version": "1"}}});
    writeln!(stdin, "{initialize}").unwrap();
    answer(0);
    writeln!(
        stdin,
        "{}",
        serde_json::json!({"jsonrpc": "2.0", "method": "notifications/initialized"})
    )
    .unwrap();
    let mut answers = Vec::new();
    for (i, request) in requests.iter().enumerate() {
        let mut request = request.clone();
        request["jsonrpc"] = "2.0".into();
        request["id"] = (i + 1).into();
        writeln!(stdin, "{request}").unwrap();
        answers.push(answer(i + 1));
    }
    answers
}

/// `node tests/mcp/<script> <args>` (an official TypeScript SDK's client, driving the CLI under
/// test) and the one JSON report it prints.
#[allow(clippy::disallowed_methods)] // the official SDK's client, under which yep runs
pub fn node_report(script: &str, args: &[&str]) -> serde_json::Value {
    let script = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/mcp")
        .join(script);
    assert!(
        std::env::var_os("npm_config_prefix").is_some(),
        "run through scripts/test, which installs the TypeScript client and says where"
    );
    let out = Command::new("node")
        .arg(script)
        .args(args)
        .env_remove("RUST_LOG")
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out.stderr));
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{e}: {}", text(&out.stdout)))
}
