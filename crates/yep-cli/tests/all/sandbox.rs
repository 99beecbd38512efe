//! Containment through the real binary: an approved server that tries to reach what its
//! approval never gave it (`tests/fixtures/hostile/sandbox-escape/`) is refused by the OS each
//! time, while the host and the other extensions keep working.

use crate::common;
use common::zot::built_zot_corpus;
use common::{ok, text};
use serde_json::{Value, json};
use std::path::{Path, PathBuf};
use std::process::Output;

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../tests/fixtures/hostile")
        .join(name)
}

/// A server on the official MCP Python SDK, the tests' third-party MCP peer.
const SDK_SERVER: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../yep-host/tests/mcp/sdk_server.py"
);

/// The Python that has the official MCP SDK (`$YEP_MCP_PYTHON`, else `python3`).
fn mcp_python() -> String {
    std::env::var("YEP_MCP_PYTHON")
        .ok()
        .filter(|p| !p.is_empty())
        .unwrap_or_else(|| "python3".into())
}

/// A fake `$HOME` with planted keys and a yep home in it, as an attacker would find one.
pub(crate) struct FakeHome {
    pub(crate) tmp: tempfile::TempDir,
}

impl FakeHome {
    pub(crate) fn new() -> FakeHome {
        let tmp = tempfile::tempdir().unwrap();
        let home = tmp.path().join("home");
        for (file, body) in [
            (
                ".ssh/id_ed25519",
                "-----BEGIN OPENSSH PRIVATE KEY-----planted",
            ),
            (
                ".aws/credentials",
                "[default]\naws_secret_access_key = planted",
            ),
        ] {
            let path = home.join(file);
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(path, body).unwrap();
        }
        std::fs::create_dir_all(tmp.path().join("ws")).unwrap();
        FakeHome { tmp }
    }

    fn home(&self) -> PathBuf {
        self.tmp.path().join("home")
    }

    pub(crate) fn yep_home(&self) -> PathBuf {
        self.home().join(".config/yep")
    }

    fn workspace(&self) -> PathBuf {
        self.tmp.path().join("ws")
    }

    /// `yep args` with this `$HOME` and yep home, in the workspace, `stdin` its input, under
    /// everything this kernel (Landlock ABI 7, seccomp) can do, or nothing starts.
    pub(crate) fn yep(&self, args: &[&str], stdin: &str) -> Output {
        self.yep_with(args, stdin, &[("YEP_SANDBOX", "required")])
    }

    /// [`FakeHome::yep`] with `env` set.
    pub(crate) fn yep_with(&self, args: &[&str], stdin: &str, env: &[(&str, &str)]) -> Output {
        let home = self.home();
        let home = home.to_str().unwrap();
        let mut all = vec![("HOME", home), ("AGENT_API_KEY", "sk-host-secret-planted")];
        all.extend_from_slice(env);
        common::yep_at(Some(&self.workspace()), &self.yep_home(), args, stdin, &all)
    }
}

/// A second extension, with a secret of its own: the neighbour the hostile one reaches for.
fn neighbour(dir: &Path) -> PathBuf {
    let pkg = dir.join("keeper");
    std::fs::create_dir_all(&pkg).unwrap();
    let mut manifest: Value = serde_json::from_str(yep_example_echo::PLUGIN_JSON).unwrap();
    manifest["name"] = json!("keeper");
    manifest["yolop"]["capabilityServer"] =
        json!({"command": env!("CARGO_BIN_EXE_yep"), "args": ["serve-example-echo"]});
    manifest["yolop"]["config_schema"] = json!({"type": "object", "properties": {
        "token": {"type": "string", "secret": true, "env": "KEEPER_TOKEN"}}});
    std::fs::write(pkg.join("plugin.json"), manifest.to_string()).unwrap();
    pkg
}

#[test]
fn a_hostile_server_is_refused_by_the_os_and_the_host_and_its_neighbours_go_on() {
    every_attack_is_refused(&fixture("sandbox-escape"));
}

#[test]
fn a_hostile_compiled_server_is_refused_as_an_interpreted_one_is() {
    let dir = tempfile::tempdir().unwrap();
    every_attack_is_refused(&compiled_copy(dir.path(), Value::Null));
}

/// Install `escape` (a sandbox-escape server) beside a neighbour with a secret, in a fake
/// home with planted keys, and have it try every attack: each is refused by the OS, what it
/// may do it does, and the neighbour and the host go on.
fn every_attack_is_refused(escape: &Path) {
    let fake = FakeHome::new();
    ok(&fake.yep(&["install", escape.to_str().unwrap(), "--yes"], ""));
    let keeper = neighbour(fake.tmp.path());
    ok(&fake.yep(&["install", keeper.to_str().unwrap(), "--yes"], ""));
    ok(&fake.yep(
        &["secret", "set", "keeper", "token"],
        "keeper-secret-planted\n",
    ));
    ok(&fake.yep(&["enable", "sandbox-escape"], ""));
    ok(&fake.yep(&["enable", "keeper"], ""));
    let secrets = fake.yep_home().join("connections.toml");
    assert!(
        std::fs::read_to_string(&secrets)
            .unwrap()
            .contains("keeper-secret-planted")
    );

    // What it aims at from outside: a loopback port and an abstract unix socket of the test's.
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let udp = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    let abstract_name = format!(
        "yep-sandbox-test-{}-{}",
        std::process::id(),
        escape.display().to_string().len()
    );
    let addr =
        <std::os::unix::net::SocketAddr as std::os::linux::net::SocketAddrExt>::from_abstract_name(
            abstract_name.as_bytes(),
        )
        .unwrap();
    let _socket = std::os::unix::net::UnixListener::bind_addr(&addr).unwrap();
    let planted_outside = std::env::temp_dir().join(format!("yep-sandbox-{}", std::process::id()));
    let targets = json!({
        "ssh_key": fake.home().join(".ssh/id_ed25519"),
        "aws_credentials": fake.home().join(".aws/credentials"),
        "other_secrets": secrets,
        "other_package": fake.yep_home().join("extensions/keeper/plugin.json"),
        "home_file": fake.home().join("planted"),
        "system_tmp_file": planted_outside,
        "workspace_file": fake.workspace().join("planted"),
        "own_package_file": fake.yep_home().join("extensions/sandbox-escape/plugin.json"),
        "tcp_port": port,
        "udp_port": udp.local_addr().unwrap().port(),
        "abstract_socket": abstract_name,
        "host": true,
        "kernel": true,
        "fork_bomb": true,
    });
    let input = format!(
        "call attempt {}\ncall echo {{\"text\": \"still here\"}}\nquit\n",
        json!({ "targets": targets })
    );
    let out = fake.yep(&["session", "--json"], &input);
    let lines: Vec<Value> = text(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .filter(|l: &Value| l.get("warning").is_none())
        .collect();
    let result = &lines[0]["result"];
    assert!(result.is_object(), "{lines:?}\n{}", text(&out.stderr));
    for (attack, errno) in [
        ("read ssh_key", "EACCES"),
        ("read aws_credentials", "EACCES"),
        ("read other_secrets", "EACCES"),
        ("read other_package", "EACCES"),
        ("write home_file", "EACCES"),
        ("write system_tmp_file", "EACCES"),
        ("write workspace_file", "EACCES"),
        ("write own_package_file", "EACCES"),
        ("connect tcp_port", "EACCES"),
        ("send udp_port", "EPERM"),
        ("connect abstract_socket", "EPERM"),
        ("ptrace host", "EPERM"),
        ("signal host", "EPERM"),
        ("read host environ", "EACCES"),
        ("fork bomb", "EAGAIN"),
        ("connect mptcp", "EPERM"),
        ("connect sctp", "EPERM"),
        ("socket netlink", "EPERM"),
        ("socket vsock", "EPERM"),
        ("socket packet", "EPERM"),
        ("io_uring setup", "EPERM"),
        ("clone newuser", "EPERM"),
        // Its flags are out of seccomp's sight: "no such call", so callers use `clone`.
        ("clone3 newuser", "ENOSYS"),
    ] {
        assert_eq!(
            result[attack],
            format!("denied: {errno}"),
            "{attack}: {result:#}"
        );
    }
    // What it may do, it does.
    assert_eq!(result["write tmpdir"], "ALLOWED", "{result:#}");
    assert_eq!(result["read own package"], "ALLOWED", "{result:#}");
    assert_eq!(result["read own proc"], "ALLOWED", "{result:#}");
    assert_eq!(result["write data dir"], "ALLOWED", "{result:#}");
    // Nothing of the user's environment but what programs need; its own secrets it has.
    let env: Vec<&str> = result["environment"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap())
        .collect();
    assert!(!env.contains(&"AGENT_API_KEY"), "{env:?}");
    assert!(env.contains(&"TMPDIR") && env.contains(&"PATH"), "{env:?}");
    // Nothing was planted, and the neighbour and the host go on.
    assert!(!fake.home().join("planted").exists());
    assert!(!fake.workspace().join("planted").exists());
    assert!(!planted_outside.exists());
    udp.set_nonblocking(true).unwrap();
    assert!(udp.recv(&mut [0u8; 64]).is_err(), "a datagram got out");
    assert_eq!(lines[1]["result"]["echoed"], "still here", "{lines:?}");
    assert!(
        std::fs::read_to_string(
            fake.yep_home()
                .join("extensions/sandbox-escape/plugin.json")
        )
        .unwrap()
        .contains("sandbox-escape")
    );
}

/// An agent started in the home directory, or at the root, makes that the workspace: no
/// server may read it (the home's keys, yep's secrets, the host's environ), the session says
/// so once, and its own files still work.
#[test]
fn a_workspace_that_is_the_home_or_the_root_is_never_opened_to_a_server() {
    let fake = FakeHome::new();
    ok(&fake.yep(
        &[
            "install",
            fixture("sandbox-escape").to_str().unwrap(),
            "--yes",
        ],
        "",
    ));
    let keeper = neighbour(fake.tmp.path());
    ok(&fake.yep(&["install", keeper.to_str().unwrap(), "--yes"], ""));
    ok(&fake.yep(
        &["secret", "set", "keeper", "token"],
        "keeper-secret-planted\n",
    ));
    ok(&fake.yep(&["enable", "sandbox-escape"], ""));
    let targets = json!({
        "ssh_key": fake.home().join(".ssh/id_ed25519"),
        "aws_credentials": fake.home().join(".aws/credentials"),
        "other_secrets": fake.yep_home().join("connections.toml"),
        "other_package": fake.yep_home().join("extensions/keeper/plugin.json"),
        "host": true,
    });
    let input = format!(
        "call attempt {}\ncall attempt {}\nquit\n",
        json!({ "targets": targets }),
        json!({ "targets": targets })
    );
    let home = fake.home();
    for workspace in [home.as_path(), Path::new("/")] {
        let out = common::yep_at(
            Some(workspace),
            &fake.yep_home(),
            &["session", "--json"],
            &input,
            &[
                ("HOME", home.to_str().unwrap()),
                ("YEP_SANDBOX", "required"),
            ],
        );
        let said = text(&out.stdout);
        let lines: Vec<Value> = said
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        let warnings: Vec<&Value> = lines
            .iter()
            .filter(|l| l.get("warning").is_some())
            .collect();
        assert_eq!(warnings.len(), 1, "{said}");
        let warning = warnings[0]["warning"].as_str().unwrap();
        assert!(
            warning.contains("so no server may read it")
                && warning.contains("yep grant <name> read:<dir>"),
            "{warning}"
        );
        let results: Vec<&Value> = lines.iter().filter(|l| l.get("result").is_some()).collect();
        assert_eq!(results.len(), 2, "{said}\n{}", text(&out.stderr));
        for result in results {
            let result = &result["result"];
            for attack in [
                "read ssh_key",
                "read aws_credentials",
                "read other_secrets",
                "read other_package",
                "read host environ",
            ] {
                assert_eq!(
                    result[attack],
                    "denied: EACCES",
                    "{attack} from {}: {result:#}",
                    workspace.display()
                );
            }
            assert_eq!(result["write tmpdir"], "ALLOWED", "{result:#}");
            assert_eq!(result["read own package"], "ALLOWED", "{result:#}");
        }
    }
}

#[test]
fn a_server_on_the_official_mcp_sdk_runs_contained_with_the_default_profile() {
    let fake = FakeHome::new();
    let (python, server) = (mcp_python(), SDK_SERVER);
    ok(&fake.yep(&["mcp", "add", "sdk", "--", &python, server], ""));
    let out = fake.yep(
        &["session", "--json"],
        "call mcp__sdk__echo {\"text\": \"contained\"}\nquit\n",
    );
    let said = text(&out.stdout);
    assert!(said.contains("contained"), "{said}\n{}", text(&out.stderr));
}

/// The standard-library MCP server whose tools run git, read and write a file.
const FILES_SERVER: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/mcp/files_server.py");

/// What a session answered each call, in order: the result's text, or the error.
fn answers(out: &Output) -> Vec<Result<String, String>> {
    text(&out.stdout)
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|l| l.get("result").is_some() || l.get("error").is_some())
        .map(|l| match l["error"].as_str() {
            Some(error) => Err(error.to_string()),
            None => Ok(l["result"]["content"][0]["text"]
                .as_str()
                .unwrap_or_default()
                .to_string()),
        })
        .collect()
}

#[test]
fn git_runs_contained_with_the_users_config_and_never_its_credentials() {
    let fake = FakeHome::new();
    let home = fake.home();
    for (file, body) in [
        (
            ".gitconfig",
            "[user]\n\tname = Ada Planted\n\temail = ada@example.com\n[include]\n\tpath = ~/.gitconfig.local\n[credential]\n\thelper = store\n[url \"https://ada:ghp_planted@example.com/\"]\n\tinsteadOf = ex:\n[core]\n\tfsmonitor = /bin/false\n",
        ),
        (".gitconfig.local", "[alias]\n\tlast = log -1 --format=%s\n"),
        (".config/git/ignore", "*.scratch\n"),
        (".git-credentials", "https://ada:ghp_planted@example.com\n"),
    ] {
        let path = home.join(file);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, body).unwrap();
    }
    let ws = fake.workspace();
    common::git(&ws, &["init", "-q"]);
    std::fs::write(ws.join("a.txt"), "a").unwrap();
    common::git(&ws, &["add", "a.txt"]);
    common::git(&ws, &["commit", "-qm", "the first commit"]);
    std::fs::write(ws.join("new.txt"), "n").unwrap();
    std::fs::write(ws.join("notes.scratch"), "s").unwrap();
    ok(&fake.yep(&["mcp", "add", "files", "--", "python3", FILES_SERVER], ""));
    let calls = [
        r#"{"args": ["log", "--oneline"]}"#,
        r#"{"args": ["status", "--porcelain"]}"#,
        r#"{"args": ["config", "user.name"]}"#,
        r#"{"args": ["last"]}"#,
        r#"{"args": ["config", "--get-regexp", "^(credential|url|core\\.fsmonitor)"]}"#,
    ];
    let mut script: String = calls
        .iter()
        .map(|args| format!("call mcp__files__git {args}\n"))
        .collect();
    script.push_str("call mcp__files__read {\"path\": \"~/.git-credentials\"}\n");
    script.push_str("call mcp__files__read {\"path\": \"$XDG_CONFIG_HOME/git/config\"}\n");
    script.push_str("quit\n");
    let out = fake.yep(&["session", "--json"], &script);
    let said = answers(&out);
    let all = format!("{said:?}\n{}", text(&out.stderr));
    assert_eq!(said.len(), 7, "{all}");
    // git reads the user's name and alias, the XDG ignore file, and the repository.
    assert!(
        said[0]
            .as_ref()
            .is_ok_and(|t| t.contains("the first commit")),
        "{all}"
    );
    assert_eq!(said[1].as_deref(), Ok("?? new.txt\n"), "{all}");
    assert_eq!(said[2].as_deref(), Ok("Ada Planted\n"), "{all}");
    assert_eq!(said[3].as_deref(), Ok("the first commit\n"), "{all}");
    // Never the credential helper, a URL with a token in it, or a program to run.
    assert!(
        said[4]
            .as_ref()
            .is_err_and(|e| e.starts_with("git exited 1")),
        "{all}"
    );
    // Nor the credentials themselves, and the denial proposes no grant that would.
    assert!(
        said[5]
            .as_ref()
            .is_err_and(|e| e.contains("Permission denied") && !e.contains("read:~/.git")),
        "{all}"
    );
    // A library that reads git's files itself (GitPython) finds the same copy.
    assert!(
        said[6]
            .as_ref()
            .is_ok_and(|t| t.contains("name = Ada Planted") && !t.contains("credential")),
        "{all}"
    );
    assert!(!all.contains("ghp_planted"), "{all}");
}

#[test]
fn a_denial_names_yeps_egress_proxy_and_never_its_port() {
    let fake = FakeHome::new();
    ok(&fake.yep(
        &[
            "mcp",
            "add",
            "files",
            "--grant",
            "net:api.example.test",
            "--grant",
            "net:127.0.0.1:7",
            "--",
            "python3",
            FILES_SERVER,
        ],
        "",
    ));
    let out = fake.yep(
        &["session", "--json"],
        "call mcp__files__read {\"path\": \"~/.ssh/id_ed25519\"}\nquit\n",
    );
    let said = answers(&out);
    let error = said[0].as_ref().unwrap_err();
    assert!(
        error.contains(
            "with TCP to port 7 and api.example.test through yep's egress proxy (docs/sandbox.md)"
        ),
        "{error}"
    );
}

#[test]
fn a_grant_of_a_missing_path_is_made_in_the_home_refused_elsewhere_and_said_once_gone() {
    use std::os::unix::fs::PermissionsExt;
    let fake = FakeHome::new();
    ok(&fake.yep(&["mcp", "add", "files", "--", "python3", FILES_SERVER], ""));
    // A missing directory in the home, granted for writing, is made (owner-only), and works.
    let notes = fake.home().join("notes/today");
    let made = fake.yep(&["grant", "files", "write:~/notes/today", "--yes"], "");
    ok(&made);
    assert!(
        text(&made.stderr).contains(&format!(
            "made {}, a directory for the grant `write:~/notes/today` (it did not exist)",
            notes.display()
        )),
        "{}",
        text(&made.stderr)
    );
    let mode = std::fs::metadata(&notes).unwrap().permissions().mode();
    assert_eq!(mode & 0o777, 0o700);
    let write =
        "call mcp__files__write {\"path\": \"~/notes/today/a.txt\", \"text\": \"x\"}\nquit\n";
    let out = fake.yep(&["session", "--json"], write);
    assert!(answers(&out)[0].is_ok(), "{:?}", answers(&out));
    // Anywhere else, and for reading, a missing path is refused with the reason.
    let lock = fake.yep_home().join("extensions.lock");
    let before = std::fs::read_to_string(&lock).unwrap();
    let elsewhere = fake.tmp.path().join("elsewhere");
    for grant in [
        format!("read:{}", elsewhere.display()),
        format!("write:{}", elsewhere.display()),
        "read:~/missing".to_string(),
        "write:~/.ssh/new".to_string(),
    ] {
        let refused = fake.yep(&["grant", "files", &grant, "--yes"], "");
        assert_eq!(refused.status.code(), Some(1), "{grant}");
        let said = text(&refused.stderr);
        assert!(
            said.contains("which does not exist: the sandbox can open only what exists")
                && said.contains("create it first"),
            "{said}"
        );
    }
    assert!(!elsewhere.exists() && !fake.home().join(".ssh/new").exists());
    assert_eq!(std::fs::read_to_string(&lock).unwrap(), before);
    let grant = format!("write:{}", elsewhere.display());
    let refused = fake.yep(
        &[
            "mcp",
            "add",
            "other",
            "--grant",
            &grant,
            "--",
            "python3",
            FILES_SERVER,
        ],
        "",
    );
    assert_eq!(refused.status.code(), Some(1));
    assert!(!ok(&fake.yep(&["mcp", "list"], "")).contains("other"));
    // Removed since it was granted: each start says the grant opens nothing.
    std::fs::remove_dir_all(fake.home().join("notes")).unwrap();
    let out = fake.yep(&["session", "--json"], write);
    let said = text(&out.stdout);
    assert!(
        said.contains("sandbox: `files` is granted `write:~/notes/today`, which names nothing that exists, so it opens nothing"),
        "{said}"
    );
}

#[test]
fn logs_and_doctor_take_an_mcp_servers_name_and_sandbox_learn_replays_the_denied_call() {
    use std::os::unix::fs::PermissionsExt;
    let fake = FakeHome::new();
    ok(&fake.yep(&["mcp", "add", "files", "--", "python3", FILES_SERVER], ""));
    // A call the sandbox denies: its arguments may be secret.
    let out_dir = fake.tmp.path().join("out");
    std::fs::create_dir_all(&out_dir).unwrap();
    let note = out_dir.join("note.txt");
    let call = json!({"path": note, "text": "s3cret-argument"});
    let out = fake.yep(
        &["session", "--json"],
        &format!("call mcp__files__write {call}\nquit\n"),
    );
    assert!(
        answers(&out)[0]
            .as_ref()
            .is_err_and(|e| e.contains("Permission denied")),
        "{:?}",
        answers(&out)
    );
    // Its log, by the name `yep mcp list` gives it.
    let logs = ok(&fake.yep(&["logs", "files"], ""));
    assert!(
        logs.contains("write: [Errno 13] Permission denied"),
        "{logs}"
    );
    let kept = fake.yep_home().join("logs/mcp.files.denied.json");
    let mode = std::fs::metadata(&kept).unwrap().permissions().mode();
    assert_eq!(mode & 0o777, 0o600);
    // Doctor runs it as a session does.
    let report = doctor_json(&fake, &["files"]);
    assert_eq!(report["ok"], true, "{report:#}");
    let tools = common::doctor_check(&report, "tools");
    assert_eq!(
        tools["detail"], "started; it lists 3: git, read, write",
        "{report:#}"
    );
    assert_eq!(common::doctor_check(&report, "sandbox")["status"], "pass");
    // Learning makes the denied call again, and proposes what lets it through.
    let learned = fake.yep(&["doctor", "files", "--sandbox-learn", "--json"], "");
    let said = format!("{}{}", text(&learned.stdout), text(&learned.stderr));
    assert!(!said.contains("s3cret-argument"), "{said}");
    assert!(
        text(&learned.stderr).contains("making again the call its sandbox last denied, of `write`"),
        "{said}"
    );
    let report: Value = serde_json::from_slice(&learned.stdout).unwrap();
    // (Python also lists its script's directory, which the profile does not open: proposed
    // too, and harmless to leave out.)
    let grant = format!("write:{}", out_dir.canonicalize().unwrap().display());
    let grants = report["sandbox_learn"]["grants"].as_array().unwrap();
    assert!(grants.contains(&json!(grant)), "{report:#}");
    assert!(
        report["sandbox_learn"]["command"]
            .as_str()
            .unwrap()
            .starts_with(&format!("yep grant files {grant}")),
        "{report:#}"
    );
    assert_eq!(
        common::doctor_check(&report, "call")["detail"],
        "the call its sandbox last denied, of `write`, answered"
    );
    // Or the call asked for.
    let other = fake.tmp.path().join("other.txt");
    std::fs::write(&other, "o").unwrap();
    let args = json!({ "path": other }).to_string();
    let asked = doctor_json(
        &fake,
        &[
            "files",
            "--sandbox-learn",
            "--tool",
            "read",
            "--args",
            &args,
        ],
    );
    let grant = format!("read:{}", other.canonicalize().unwrap().display());
    let grants = asked["sandbox_learn"]["grants"].as_array().unwrap();
    assert!(grants.contains(&json!(grant)), "{asked:#}");
    // A name that is neither is said so.
    let none = fake.yep(&["doctor", "nothing"], "");
    assert!(
        text(&none.stderr).contains("no extension or MCP server named `nothing` here"),
        "{}",
        text(&none.stderr)
    );
}

#[test]
fn a_kernel_short_of_the_sandbox_is_said_once_under_best_effort_and_refused_under_required() {
    let fake = FakeHome::new();
    let keeper = neighbour(fake.tmp.path());
    ok(&fake.yep(&["install", keeper.to_str().unwrap(), "--yes"], ""));
    ok(&fake.yep(&["enable", "keeper"], ""));
    let call = "call echo {\"text\": \"a\"}\ncall echo {\"text\": \"b\"}\nquit\n";
    // As a kernel with Landlock ABI 3 would: no network rules, no scoping.
    let run = |mode: &str| {
        fake.yep_with(
            &["session", "--json"],
            call,
            &[("YEP_SANDBOX", mode), ("YEP_SANDBOX_LANDLOCK_ABI", "3")],
        )
    };
    let out = run("best-effort");
    let said = text(&out.stdout);
    let warnings: Vec<&str> = said.lines().filter(|l| l.contains("\"warning\"")).collect();
    assert_eq!(warnings.len(), 1, "{said}");
    assert!(
        warnings[0].contains("sandbox (best-effort): this system cannot enforce network rules (Landlock ABI 4), signal and abstract-socket scoping (Landlock ABI 6)"),
        "{said}"
    );
    assert_eq!(said.matches("\"echoed\"").count(), 2, "{said}");
    // With no pids cgroup to write (`YEP_NO_CGROUP`), no process limit: required refuses.
    let out = fake.yep_with(
        &["session", "--json"],
        call,
        &[("YEP_SANDBOX", "required"), ("YEP_NO_CGROUP", "1")],
    );
    let said = text(&out.stdout);
    assert!(
        !said.contains("\"echoed\"") && said.contains("cannot enforce the process limit"),
        "{said}"
    );
    // Required: nothing starts, and the error says why.
    let out = run("required");
    let said = text(&out.stdout);
    assert!(!said.contains("\"echoed\""), "{said}");
    assert!(
        said.contains("the sandbox is required (sandbox = \\\"required\\\" in settings.toml), and this kernel cannot enforce network rules (Landlock ABI 4)"),
        "{said}"
    );
}

#[test]
fn a_server_stopped_by_a_denial_says_it_ran_in_the_sandbox_and_how_to_tell() {
    use std::os::unix::fs::PermissionsExt;
    let fake = FakeHome::new();
    let pkg = fake.tmp.path().join("nosy");
    std::fs::create_dir_all(pkg.join("bin")).unwrap();
    std::fs::write(
        pkg.join("plugin.json"),
        json!({"name": "nosy", "yolop": {"capabilityServer": {"command": "server"}, "tools": [{"name": "t"}]}}).to_string(),
    )
    .unwrap();
    std::fs::write(
        pkg.join("bin/server"),
        "#!/bin/sh\ncat \"$HOME/.ssh/id_ed25519\" >/dev/null || exit 3\n",
    )
    .unwrap();
    std::fs::set_permissions(
        pkg.join("bin/server"),
        std::fs::Permissions::from_mode(0o755),
    )
    .unwrap();
    let out = fake.yep(&["call", pkg.to_str().unwrap(), "t"], "");
    assert_eq!(out.status.code(), Some(1));
    let err = text(&out.stderr);
    assert!(
        err.contains("(exit code 3; it ran in the sandbox,")
            && err.contains("`YEP_SANDBOX=off` runs it without")
            && err.contains("Permission denied"),
        "{err}"
    );
}

/// The hostile fixture copied to `dir`, its plugin.json granted `grants`.
fn granted_copy(dir: &Path, grants: Value) -> PathBuf {
    let pkg = dir.join("granted");
    std::fs::create_dir_all(pkg.join("bin")).unwrap();
    let from = fixture("sandbox-escape");
    for file in ["server.py", "bin/server"] {
        std::fs::copy(from.join(file), pkg.join(file)).unwrap();
    }
    let mut manifest: Value =
        serde_json::from_str(&std::fs::read_to_string(from.join("plugin.json")).unwrap()).unwrap();
    manifest["sandbox"] = grants;
    std::fs::write(pkg.join("plugin.json"), manifest.to_string()).unwrap();
    pkg
}

#[test]
fn grants_are_shown_before_consent_widen_only_what_they_name_and_a_new_one_asks_again() {
    let fake = FakeHome::new();
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let other = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let pkg = granted_copy(
        fake.tmp.path(),
        json!({"workspace": "write", "net": [format!("127.0.0.1:{port}")]}),
    );
    let install = fake.yep(&["install", pkg.to_str().unwrap(), "--yes"], "");
    let said = text(&install.stderr);
    assert!(
        said.contains("sandbox   workspace write") && said.contains(&format!("net port {port}")),
        "{said}"
    );
    ok(&install);
    ok(&fake.yep(&["enable", "sandbox-escape"], ""));
    // `yep list` says what it was granted, in text and JSON.
    let listed = ok(&fake.yep(&["list"], ""));
    assert!(
        listed.contains(&format!(
            "  sandbox: default profile + workspace write, net port {port}"
        )),
        "{listed}"
    );
    let listed: Value = serde_json::from_str(&ok(&fake.yep(&["list", "--json"], ""))).unwrap();
    assert_eq!(
        listed[0]["sandbox"],
        json!(["workspace write", format!("net port {port}")])
    );
    let targets = json!({
        "workspace_file": fake.workspace().join("granted.txt"),
        "home_file": fake.home().join("planted"),
        "tcp_port": port,
    });
    let other_port = json!({"tcp_port": other.local_addr().unwrap().port()});
    let input = format!(
        "call attempt {}\ncall attempt {}\nquit\n",
        json!({ "targets": targets }),
        json!({ "targets": other_port })
    );
    let out = fake.yep(&["session", "--json"], &input);
    let lines: Vec<Value> = text(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let result = &lines[0]["result"];
    assert_eq!(result["write workspace_file"], "ALLOWED", "{result:#}");
    assert_eq!(result["connect tcp_port"], "ALLOWED", "{result:#}");
    assert_eq!(result["write home_file"], "denied: EACCES", "{result:#}");
    assert_eq!(
        lines[1]["result"]["connect tcp_port"], "denied: EACCES",
        "only the granted port: {lines:?}"
    );
    assert!(fake.workspace().join("granted.txt").is_file());

    // A new grant on update is a widening: shown, and refused without consent.
    let mut manifest: Value =
        serde_json::from_str(&std::fs::read_to_string(pkg.join("plugin.json")).unwrap()).unwrap();
    manifest["sandbox"]["read"] = json!(["~/.ssh"]);
    std::fs::write(pkg.join("plugin.json"), manifest.to_string()).unwrap();
    let update = fake.yep(&["update", "sandbox-escape"], "");
    assert!(!update.status.success());
    let said = text(&update.stderr);
    assert!(said.contains("+ sandbox read ~/.ssh"), "{said}");
    let lock = std::fs::read_to_string(fake.yep_home().join("extensions.lock")).unwrap();
    assert!(!lock.contains("~/.ssh"), "{lock}");
}

#[test]
fn a_grant_that_is_not_one_is_a_manifest_error_at_install() {
    let fake = FakeHome::new();
    for (grants, says) in [
        (
            json!({"write": ["relative/path"]}),
            "must be absolute or start with ~/",
        ),
        (json!({"read": ["/srv/../root"]}), "have no `..`"),
        (
            json!({"read": ["~/"]}),
            "name something below the root or the home",
        ),
        (json!({"net": ["a b.example"]}), "is none of \"*\""),
        (json!({"net": ["*.com"]}), "is none of \"*\""),
        (
            json!({"workspace": "own"}),
            "is neither \"read\" nor \"write\"",
        ),
        (
            json!({"limits": {"processes": 10000000}}),
            "outside 1 to 65536",
        ),
        (json!({"everything": true}), "unknown field `everything`"),
    ] {
        let dir = tempfile::tempdir_in(fake.tmp.path()).unwrap();
        let pkg = granted_copy(dir.path(), grants.clone());
        let out = fake.yep(&["install", pkg.to_str().unwrap(), "--yes"], "");
        assert_eq!(out.status.code(), Some(1), "{grants}");
        let err = text(&out.stderr);
        assert!(err.contains(says), "{grants}: {err}");
    }
}

#[test]
fn doctor_says_how_a_server_runs_contained_and_what_it_was_granted() {
    let fake = FakeHome::new();
    let pkg = granted_copy(fake.tmp.path(), json!({"workspace": "write"}));
    let row = |out: &Output| {
        let report: Value = serde_json::from_slice(&out.stdout)
            .unwrap_or_else(|e| panic!("{e}: {}", text(&out.stderr)));
        common::doctor_check(&report, "sandbox").clone()
    };
    let contained = row(&fake.yep(&["doctor", pkg.to_str().unwrap(), "--json"], ""));
    assert_eq!(contained["status"], "pass", "{contained}");
    assert_eq!(
        contained["detail"],
        "required: Landlock ABI 7, seccomp on, user namespaces on; grants: workspace write"
    );
    // Without user namespaces, its protected workspace files would be writable.
    let no_userns = row(&fake.yep_with(
        &["doctor", pkg.to_str().unwrap(), "--json"],
        "",
        &[
            ("YEP_SANDBOX", "best-effort"),
            ("YEP_SANDBOX_NO_USERNS", "1"),
        ],
    ));
    assert_eq!(no_userns["status"], "warn", "{no_userns}");
    assert!(
        no_userns["detail"]
            .as_str()
            .unwrap()
            .contains("user namespaces unavailable; grants: workspace write; this system cannot enforce protected workspace files (user namespaces), so it runs without"),
        "{no_userns}"
    );
    let short = row(&fake.yep_with(
        &["doctor", pkg.to_str().unwrap(), "--json"],
        "",
        &[
            ("YEP_SANDBOX", "best-effort"),
            ("YEP_SANDBOX_LANDLOCK_ABI", "5"),
        ],
    ));
    assert_eq!(short["status"], "warn", "{short}");
    assert!(
        short["detail"]
            .as_str()
            .unwrap()
            .contains("cannot enforce signal and abstract-socket scoping (Landlock ABI 6)"),
        "{short}"
    );
    let off = row(&fake.yep_with(
        &["doctor", pkg.to_str().unwrap(), "--json"],
        "",
        &[("YEP_SANDBOX", "off")],
    ));
    assert_eq!(off["status"], "skip", "{off}");
}

/// The official-SDK MCP server, run from a workspace's `.mcp.json` with `MCP_MARKER` set to a
/// file in `out`: it writes there as it starts.
fn marker_server(fake: &FakeHome, out: &Path) {
    let (python, server) = (mcp_python(), SDK_SERVER);
    std::fs::create_dir_all(out).unwrap();
    let config = json!({"mcpServers": {"marker": {
        "command": python,
        "args": [server],
        "env": {"MCP_MARKER": out.join("started.txt")},
    }}});
    std::fs::write(fake.workspace().join(".mcp.json"), config.to_string()).unwrap();
}

#[test]
fn a_denied_mcp_server_names_the_grant_and_yep_grant_gives_it_with_consent_and_revoke_takes_it_back()
 {
    let fake = FakeHome::new();
    let out = fake.tmp.path().join("out");
    marker_server(&fake, &out);
    let grant = format!("write:{}", out.display());
    // Denied at its first run, the error names the sandbox, what it allowed and the grant.
    let refused = fake.yep(&["trust", "marker", "--yes"], "");
    assert_eq!(refused.status.code(), Some(1));
    let said = text(&refused.stderr);
    assert!(
        said.contains("it ran in the sandbox, which lets it read its package")
            && said.contains("with no network")
            && said.contains(&format!("`yep grant marker {grant}` allows it")),
        "{said}"
    );
    // No terminal, no --yes: nothing granted, nothing written.
    let lock = fake.yep_home().join("extensions.lock");
    let before = std::fs::read_to_string(&lock).unwrap_or_default();
    let asked = fake.yep(&["grant", "marker", &grant], "");
    assert_eq!(asked.status.code(), Some(1));
    let said = text(&asked.stderr);
    assert!(
        said.contains(&format!("+ write {}", out.display())) && said.contains("re-run with --yes"),
        "{said}"
    );
    assert_eq!(std::fs::read_to_string(&lock).unwrap_or_default(), before);
    // A grant that is not one says what is.
    let bad = fake.yep(&["grant", "marker", "write:relative", "--yes"], "");
    assert_eq!(bad.status.code(), Some(1));
    assert!(
        text(&bad.stderr).contains("must be absolute"),
        "{}",
        text(&bad.stderr)
    );
    // Granted: pinned in the lock, shown by `yep mcp list`, and the server starts.
    ok(&fake.yep(&["grant", "marker", &grant, "--yes"], ""));
    assert!(
        std::fs::read_to_string(&lock)
            .unwrap()
            .contains("[[grants]]")
    );
    let listed = ok(&fake.yep(&["mcp", "list"], ""));
    assert!(
        listed.contains(&format!(
            "  sandbox: default profile + write {}",
            out.display()
        )),
        "{listed}"
    );
    ok(&fake.yep(&["trust", "marker", "--yes"], ""));
    assert!(
        std::fs::read_to_string(out.join("started.txt"))
            .unwrap()
            .contains("started")
    );
    // Granting it again is nothing new.
    let again = ok(&fake.yep(&["grant", "marker", &grant, "--json"], ""));
    let again: Value = serde_json::from_str(&again).unwrap();
    assert_eq!(again["changed"], json!([]), "{again}");
    // Revoked: gone from the lock and the list, and its next start is denied again.
    let revoked: Value =
        serde_json::from_str(&ok(&fake.yep(&["revoke", "marker", "--json"], ""))).unwrap();
    assert_eq!(
        revoked["changed"],
        json!([format!("write {}", out.display())])
    );
    assert!(
        !std::fs::read_to_string(&lock)
            .unwrap()
            .contains("[[grants]]")
    );
    let listed = ok(&fake.yep(&["mcp", "list"], ""));
    assert!(listed.contains("  sandbox: default profile\n"), "{listed}");
    let session = fake.yep(
        &["session", "--json"],
        "call mcp__marker__echo {\"text\": \"x\"}\nquit\n",
    );
    assert!(
        !text(&session.stdout).contains("\"x\""),
        "{}",
        text(&session.stdout)
    );
}

#[test]
fn yep_grant_widens_an_installed_package_beyond_its_manifest_and_revoke_takes_back_only_its_own() {
    let fake = FakeHome::new();
    let pkg = granted_copy(fake.tmp.path(), json!({"net": ["127.0.0.1:9"]}));
    ok(&fake.yep(&["install", pkg.to_str().unwrap(), "--yes"], ""));
    ok(&fake.yep(&["enable", "sandbox-escape"], ""));
    let attempt = |fake: &FakeHome| {
        let targets = json!({"workspace_file": fake.workspace().join("w.txt")});
        let out = fake.yep(
            &["session", "--json"],
            &format!("call attempt {}\nquit\n", json!({ "targets": targets })),
        );
        let line: Value = serde_json::from_str(text(&out.stdout).lines().next().unwrap()).unwrap();
        line["result"]["write workspace_file"].clone()
    };
    assert_eq!(attempt(&fake), "denied: EACCES");
    let granted: Value = serde_json::from_str(&ok(&fake.yep(
        &[
            "grant",
            "sandbox-escape",
            "workspace:write",
            "--yes",
            "--json",
        ],
        "",
    )))
    .unwrap();
    assert_eq!(granted["changed"], json!(["workspace write"]));
    assert_eq!(
        granted["effective"],
        json!(["workspace write", "net port 9"])
    );
    let listed = ok(&fake.yep(&["list"], ""));
    assert!(
        listed.contains("  sandbox: default profile + workspace write, net port 9"),
        "{listed}"
    );
    assert_eq!(attempt(&fake), "ALLOWED");
    // The manifest's own grant is the package's: revoke says so, and keeps it.
    let own = fake.yep(&["revoke", "sandbox-escape", "net:127.0.0.1:9"], "");
    assert_eq!(own.status.code(), Some(1));
    assert!(
        text(&own.stderr).contains("asked for by the package's own manifest"),
        "{}",
        text(&own.stderr)
    );
    ok(&fake.yep(&["revoke", "sandbox-escape", "workspace:write"], ""));
    assert_eq!(attempt(&fake), "denied: EACCES");
    // Removing the package forgets what was granted to it.
    ok(&fake.yep(&["grant", "sandbox-escape", "processes:1024", "--yes"], ""));
    ok(&fake.yep(&["remove", "sandbox-escape"], ""));
    let lock = std::fs::read_to_string(fake.yep_home().join("extensions.lock")).unwrap();
    assert!(!lock.contains("[[grants]]"), "{lock}");
}

#[test]
fn yep_mcp_add_takes_grants_with_the_server_and_refuses_one_that_is_not() {
    let fake = FakeHome::new();
    let bad = fake.yep(
        &[
            "mcp", "add", "s", "--grant", "net:a b", "--", "python3", "-c", "pass",
        ],
        "",
    );
    assert_eq!(bad.status.code(), Some(1));
    assert!(
        text(&bad.stderr).contains("is none of"),
        "{}",
        text(&bad.stderr)
    );
    assert!(!ok(&fake.yep(&["mcp", "list"], "")).contains("python3"));
    let (python, server) = (mcp_python(), SDK_SERVER);
    ok(&fake.yep(
        &[
            "mcp",
            "add",
            "sdk",
            "--grant",
            "net:api.example.com",
            "--grant",
            "processes:1024",
            "--",
            &python,
            server,
        ],
        "",
    ));
    let listed: Value =
        serde_json::from_str(&ok(&fake.yep(&["mcp", "list", "--json"], ""))).unwrap();
    assert_eq!(
        listed[0]["sandbox"],
        json!(["net api.example.com", "limit processes 1024"]),
        "{listed}"
    );
    // Removing the server forgets its grants.
    ok(&fake.yep(&["mcp", "remove", "sdk"], ""));
    let lock = std::fs::read_to_string(fake.yep_home().join("extensions.lock")).unwrap_or_default();
    assert!(!lock.contains("[[grants]]"), "{lock}");
}

/// A loopback HTTP server answering every request with `body`, for as long as the test runs.
fn http_server(body: &'static str) -> u16 {
    use std::io::{Read, Write};
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    std::thread::spawn(move || {
        for mut conn in listener.incoming().flatten() {
            let mut head = Vec::new();
            let mut byte = [0u8; 1];
            while !head.ends_with(b"\r\n\r\n") && conn.read(&mut byte).unwrap_or(0) == 1 {
                head.push(byte[0]);
            }
            let _ = write!(
                conn,
                "HTTP/1.1 200 OK\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                body.len()
            );
        }
    });
    port
}

#[test]
fn a_granted_host_name_is_reached_through_the_proxy_and_any_other_is_refused_and_told() {
    names_go_through_the_proxy(granted_copy);
}

#[test]
fn a_compiled_server_reaches_names_only_through_the_proxy_too() {
    names_go_through_the_proxy(compiled_copy);
}

/// The Rust sandbox-escape server as a package in `dir`, its plugin.json granted `grants`
/// (none when null).
fn compiled_copy(dir: &Path, grants: Value) -> PathBuf {
    let bin = Path::new(env!("CARGO_BIN_EXE_yep")).with_file_name("yep-sandbox-escape");
    assert!(
        bin.is_file(),
        "run `cargo test --workspace` (it builds yep-fixture)"
    );
    let pkg = dir.join("sandbox-escape");
    std::fs::create_dir_all(&pkg).unwrap();
    let mut manifest: Value = serde_json::from_str(
        &std::fs::read_to_string(fixture("sandbox-escape").join("plugin.json")).unwrap(),
    )
    .unwrap();
    manifest["yolop"]["capabilityServer"] = json!({"command": bin});
    if !grants.is_null() {
        manifest["sandbox"] = grants;
    }
    std::fs::write(pkg.join("plugin.json"), manifest.to_string()).unwrap();
    pkg
}

/// A package (made by `package` with a net grant) fetches a granted name, one not granted, and
/// the address itself: only the first gets through, and the refusal is told. The names are
/// mapped to a loopback server, which `private` lets a granted name reach.
fn names_go_through_the_proxy(package: fn(&Path, Value) -> PathBuf) {
    let fake = FakeHome::new();
    let port = http_server("hello from granted.test");
    let pkg = package(
        fake.tmp.path(),
        json!({"net": [format!("granted.test:{port}"), "private"]}),
    );
    let install = fake.yep(&["install", pkg.to_str().unwrap(), "--yes"], "");
    assert!(
        text(&install.stderr).contains(&format!("net granted.test:{port}")),
        "{}",
        text(&install.stderr)
    );
    ok(&install);
    ok(&fake.yep(&["enable", "sandbox-escape"], ""));
    let targets = json!({
        "url_granted": format!("http://granted.test:{port}/"),
        "url_refused": format!("http://other.test:{port}/"),
        "url_direct": format!("http://127.0.0.1:{port}/"),
        "tcp_port": port,
    });
    let out = fake.yep_with(
        &["session", "--json"],
        &format!("call attempt {}\nquit\n", json!({ "targets": targets })),
        &[
            ("YEP_SANDBOX", "required"),
            (
                "YEP_EGRESS_HOSTS",
                "granted.test=127.0.0.1,other.test=127.0.0.1",
            ),
        ],
    );
    let said = text(&out.stdout);
    let lines: Vec<Value> = said
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let result = lines
        .iter()
        .find_map(|l| l.get("result"))
        .unwrap_or_else(|| panic!("{said}\n{}", text(&out.stderr)));
    assert_eq!(
        result["fetch url_granted"], "ALLOWED: hello from granted.test",
        "{result:#}"
    );
    let refused = result["fetch url_refused"].as_str().unwrap();
    assert!(
        refused.starts_with("refused: HTTP 403")
            && refused.contains(&format!("net:other.test:{port}")),
        "{refused}"
    );
    // Past the proxy, straight to the address: the kernel refuses it.
    assert_eq!(result["connect tcp_port"], "denied: EACCES", "{result:#}");
    if !result["fetch url_direct"].is_null() {
        assert_eq!(result["fetch url_direct"], "denied: EACCES", "{result:#}");
    }
    // The refusal is told, naming the package, the host and the grant to add.
    assert!(
        said.contains(&format!("`yep grant sandbox-escape net:other.test:{port}`")),
        "{said}"
    );
}

#[test]
fn a_granted_name_that_resolves_to_loopback_is_refused_and_told_with_the_address() {
    let fake = FakeHome::new();
    let port = http_server("hello from granted.test");
    let pkg = granted_copy(
        fake.tmp.path(),
        json!({"net": [format!("granted.test:{port}")]}),
    );
    ok(&fake.yep(&["install", pkg.to_str().unwrap(), "--yes"], ""));
    ok(&fake.yep(&["enable", "sandbox-escape"], ""));
    let targets = json!({ "url_granted": format!("http://granted.test:{port}/") });
    let out = fake.yep_with(
        &["session", "--json"],
        &format!("call attempt {}\nquit\n", json!({ "targets": targets })),
        &[
            ("YEP_SANDBOX", "required"),
            ("YEP_EGRESS_HOSTS", "granted.test=127.0.0.1"),
        ],
    );
    let said = text(&out.stdout);
    let result = said
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .find_map(|l| l.get("result").cloned())
        .unwrap_or_else(|| panic!("{said}\n{}", text(&out.stderr)));
    let refused = result["fetch url_granted"].as_str().unwrap();
    assert!(
        refused.starts_with("refused: HTTP 403") && refused.contains("net:private"),
        "{result:#}"
    );
    // Told as every refusal is: the name, the address it resolves to, the grant to add.
    assert!(
        said.contains(&format!(
            "refused granted.test:{port} for package sandbox-escape: it resolves to 127.0.0.1, a loopback address"
        )) && said.contains("`yep grant sandbox-escape net:private`"),
        "{said}"
    );
}

#[test]
fn with_no_setting_a_server_runs_sandboxed_best_effort() {
    let fake = FakeHome::new();
    let escape = fixture("sandbox-escape");
    ok(&fake.yep(&["install", escape.to_str().unwrap(), "--yes"], ""));
    ok(&fake.yep(&["enable", "sandbox-escape"], ""));
    let targets = json!({"ssh_key": fake.home().join(".ssh/id_ed25519")});
    // `$YEP_SANDBOX` empty and no `sandbox` in settings.toml: the default.
    let out = fake.yep_with(
        &["session", "--json"],
        &format!("call attempt {}\nquit\n", json!({ "targets": targets })),
        &[("YEP_SANDBOX", "")],
    );
    let said = text(&out.stdout);
    assert!(
        said.contains("\"read ssh_key\":\"denied: EACCES\""),
        "{said}"
    );
    let listed = ok(&fake.yep_with(&["list"], "", &[("YEP_SANDBOX", "")]));
    assert!(listed.contains("  sandbox: default profile\n"), "{listed}");
}

/// `tests/fixtures/needs-grants` copied to `dir`, told to write into `state` and connect to
/// `port` as it starts, its plugin.json's `sandbox` key `grants` (when given).
fn needs_grants(dir: &Path, state: &Path, port: u16, grants: Option<Value>) -> PathBuf {
    let pkg = dir.join("needs-grants");
    std::fs::create_dir_all(pkg.join("bin")).unwrap();
    let from = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/fixtures/needs-grants");
    for file in ["server.py", "bin/server"] {
        std::fs::copy(from.join(file), pkg.join(file)).unwrap();
    }
    let mut manifest: Value =
        serde_json::from_str(&std::fs::read_to_string(from.join("plugin.json")).unwrap()).unwrap();
    manifest["yolop"]["capabilityServer"]["args"] =
        json!(["--state-dir", state, "--port", port.to_string()]);
    if let Some(grants) = grants {
        manifest["sandbox"] = grants;
    }
    std::fs::write(pkg.join("plugin.json"), manifest.to_string()).unwrap();
    pkg
}

/// `yep doctor args --json`, read.
fn doctor_json(fake: &FakeHome, args: &[&str]) -> Value {
    let mut all = vec!["doctor"];
    all.extend_from_slice(args);
    all.push("--json");
    let out = fake.yep(&all, "");
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{e}: {}", text(&out.stderr)))
}

#[test]
fn sandbox_learn_proposes_the_grants_a_server_needs_and_none_the_default_profile_allows() {
    let fake = FakeHome::new();
    let state = fake.tmp.path().join("state");
    std::fs::create_dir_all(&state).unwrap();
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let pkg = needs_grants(fake.tmp.path(), &state, port, None);
    let wanted = vec![
        format!("write:{}", state.display()),
        format!("net:127.0.0.1:{port}"),
    ];

    // A package directory: the grants, and the plugin.json key that asks for them.
    let report = doctor_json(&fake, &[pkg.to_str().unwrap(), "--sandbox-learn"]);
    assert_eq!(
        report["sandbox_learn"]["grants"],
        json!(wanted),
        "{report:#}"
    );
    assert_eq!(
        report["sandbox_learn"]["plugin_json"],
        json!({"write": [state], "net": [format!("127.0.0.1:{port}")]})
    );
    let row = common::doctor_check(&report, "sandbox_learn");
    assert_eq!(row["status"], "warn", "{row}");
    assert_eq!(common::doctor_check(&report, "sandbox")["status"], "skip");
    // It really ran: what it writes as it starts is there.
    assert_eq!(
        std::fs::read_to_string(state.join("state.txt")).unwrap(),
        "state"
    );
    std::fs::remove_file(state.join("state.txt")).unwrap();

    // Asked for in plugin.json, they are what it needs: it runs contained, and a second
    // learning run proposes nothing.
    let granted_dir = fake.tmp.path().join("granted");
    let granted = needs_grants(
        &granted_dir,
        &state,
        port,
        Some(report["sandbox_learn"]["plugin_json"].clone()),
    );
    let contained = doctor_json(&fake, &[granted.to_str().unwrap()]);
    assert_eq!(contained["ok"], true, "{contained:#}");
    assert!(state.join("state.txt").is_file());
    let again = doctor_json(&fake, &[granted.to_str().unwrap(), "--sandbox-learn"]);
    assert_eq!(again["sandbox_learn"]["grants"], json!([]), "{again:#}");
    assert_eq!(
        common::doctor_check(&again, "sandbox_learn")["detail"],
        "the default profile suffices: it touched nothing beyond it"
    );

    // Installed: the text names the `yep grant` that gives them.
    ok(&fake.yep(&["install", pkg.to_str().unwrap(), "--yes"], ""));
    let said = text(
        &fake
            .yep(&["doctor", "needs-grants", "--sandbox-learn"], "")
            .stdout,
    );
    let command = format!("yep grant needs-grants {}", wanted.join(" "));
    assert!(said.contains(&format!("`{command}` gives them")), "{said}");
    let report = doctor_json(&fake, &["needs-grants", "--sandbox-learn"]);
    assert_eq!(report["sandbox_learn"]["command"], command, "{report:#}");
    drop(listener);
}

/// The CLI in workspace `ws` and yep home `home` under `sandbox = "required"`, with the user's
/// own `HOME` (where npx and Go keep their caches).
fn required_in<'a>(ws: &'a Path, home: &'a Path) -> impl Fn(&[&str], &str) -> Output + 'a {
    move |args, stdin| common::yep_at(Some(ws), home, args, stdin, &[("YEP_SANDBOX", "required")])
}

/// The official filesystem MCP server's program, which `scripts/test` installs (pinned) into
/// the npm prefix it puts on `PATH`.
const FS_SERVER: &str = "mcp-server-filesystem";

#[test]
fn the_official_filesystem_server_runs_contained_and_writes_the_workspace_once_granted() {
    let tmp = tempfile::tempdir().unwrap();
    let (home, ws) = (tmp.path().join("home"), tmp.path().join("ws"));
    std::fs::create_dir_all(&ws).unwrap();
    std::fs::write(ws.join("seed.txt"), "seeded").unwrap();
    let ws_text = ws.to_str().unwrap();
    // Nothing may reach the network.
    let run = required_in(&ws, &home);
    let added = run(&["mcp", "add", "fs", "--", FS_SERVER, ws_text], "");
    assert!(
        ok(&added).contains("tools pinned"),
        "is {FS_SERVER} on PATH? `scripts/test` installs it (README: Quick start)\n{}",
        text(&added.stderr)
    );
    let target = ws.join("written.txt");
    let script = format!(
        "call mcp__fs__read_text_file {}\ncall mcp__fs__write_file {}\nquit\n",
        json!({"path": ws.join("seed.txt")}),
        json!({"path": target, "content": "by the server"})
    );
    // It reads the workspace; writing it is denied, and the error names the grant.
    let said = text(&run(&["session", "--json"], &script).stdout);
    let lines: Vec<Value> = said
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines[0]["result"]["content"][0]["text"], "seeded", "{said}");
    let denied = lines[1]["error"].as_str().unwrap_or_default();
    assert!(
        denied.contains("EACCES")
            && denied.contains("it ran in the sandbox")
            && denied.contains("`yep grant fs workspace:write` allows it"),
        "{said}"
    );
    assert!(!target.exists());
    // Granted the workspace, it writes there.
    ok(&run(&["grant", "fs", "workspace:write", "--yes"], ""));
    let said = text(&run(&["session", "--json"], &script).stdout);
    assert!(said.contains("Successfully wrote"), "{said}");
    assert_eq!(std::fs::read_to_string(&target).unwrap(), "by the server");
}

#[test]
fn a_zot_extension_keeps_its_own_files_in_the_workspaces_zot_dir_and_nothing_else() {
    let tmp = tempfile::tempdir().unwrap();
    let root = common::zot::zot_corpus(tmp.path());
    let (home, ws) = (tmp.path().join("home"), tmp.path().join("ws"));
    std::fs::create_dir_all(&ws).unwrap();
    let run = required_in(&ws, &home);
    let notebook = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/zot/notebook");
    let scratchpad = root.join("examples/extensions/scratchpad");
    for (dir, name) in [(&scratchpad, "scratchpad"), (&notebook, "notebook")] {
        ok(&run(&["install", dir.to_str().unwrap(), "--yes"], ""));
        ok(&run(&["enable", name], ""));
    }
    // zot's scratchpad keeps its notes in `<workspace>/.zot/`, with no grant, across sessions.
    let out = run(
        &["session", "--json"],
        "command scratchpad:note buy milk\nquit\n",
    );
    let said = text(&out.stdout);
    assert!(!said.contains("\"warning\""), "{said}");
    let notes = std::fs::read_to_string(ws.join(".zot/scratchpad-notes.jsonl"))
        .unwrap_or_else(|e| panic!("{e}: {said}\n{}", text(&out.stderr)));
    assert!(notes.contains("\"text\":\"buy milk\""), "{notes}");
    let out = run(&["session", "--json"], "call read_notes {}\nquit\n");
    let said = text(&out.stdout);
    assert!(said.contains("] buy milk"), "{said}");
    // Regular files of its own there, and nothing else: no directory (zot runs what is in
    // `.zot/extensions/`), no link, nothing else of the workspace.
    let attempts = [
        ("write", ".zot/notebook-state.json", "ok"),
        ("write", ".zot/scratchpad-notes.jsonl", "ok"),
        ("mkdir", ".zot/extensions", "PermissionError"),
        ("symlink", ".zot/passwd", "PermissionError"),
        ("write", "README.md", "PermissionError"),
    ];
    let script: String = attempts
        .iter()
        .map(|(kind, path, _)| format!("call attempt {}\n", json!({"kind": kind, "path": path})))
        .chain(["quit\n".to_string()])
        .collect();
    let out = run(&["session", "--json"], &script);
    let said = answers(&out);
    for ((kind, path, expected), got) in attempts.iter().zip(&said) {
        assert!(
            got.as_ref().is_ok_and(|t| t.starts_with(expected)),
            "{kind} {path}: {said:?}"
        );
    }
    assert!(!ws.join("README.md").exists() && !ws.join(".zot/extensions").exists());
    // Once it holds a directory (a project's zot extensions), none of it is writable, and
    // the session says why.
    std::fs::create_dir_all(ws.join(".zot/extensions/other")).unwrap();
    let attempt = json!({"kind": "write", "path": ".zot/notebook-state.json"});
    let out = run(
        &["session", "--json"],
        &format!("call attempt {attempt}\nquit\n"),
    );
    let said = text(&out.stdout);
    assert!(said.contains("PermissionError"), "{said}");
    assert!(
        said.contains(&format!(
            "sandbox: `notebook` may not keep files in {}, which holds extensions, a directory",
            ws.join(".zot").display()
        )),
        "{said}"
    );
}

#[test]
fn zots_own_examples_run_contained_go_run_included() {
    let tmp = tempfile::tempdir().unwrap();
    let root = built_zot_corpus(tmp.path());
    let examples = root.join("examples/extensions");
    let (home, ws) = (tmp.path().join("home"), tmp.path().join("ws"));
    std::fs::create_dir_all(&ws).unwrap();
    let run = required_in(&ws, &home);
    for name in ["hello", "weather", "guard", "clock"] {
        let dir = examples.join(name);
        ok(&run(&["install", dir.to_str().unwrap(), "--yes"], ""));
        ok(&run(&["enable", name], ""));
    }
    // `go run .` is built once at install, with the user's Go (which reads the module the
    // copy replaces), and the program runs from then on: no grant needed, no compiler in the
    // sandbox.
    let todo = examples.join("todo");
    let installed = run(&["install", todo.to_str().unwrap(), "--yes"], "");
    let said = text(&installed.stderr);
    assert!(
        said.contains("installing builds its `go run .` once with `go build`"),
        "{said}"
    );
    ok(&installed);
    ok(&run(&["enable", "todo-panel"], ""));
    let listed = ok(&run(&["list"], ""));
    assert!(!listed.contains("+ read"), "{listed}");
    let lock = std::fs::read_to_string(home.join("extensions.lock")).unwrap();
    assert!(lock.contains(".yep-build/server"), "{lock}");
    let script = "call weather {\"city\": \"Berlin\"}\ncommand hello:hello yep\ncommand clock:now\ncall todo_manage {\"action\": \"add\", \"title\": \"contained\"}\ncall todo_manage {\"action\": \"list\"}\nquit\n";
    let out = run(&["session", "--json"], script);
    let said = text(&out.stdout);
    // Every one of them started (zot starts them all with the session): none failed.
    assert!(!said.contains("\"warning\""), "{said}");
    let lines: Vec<Value> = said
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert!(
        lines[0]["result"]["content"][0]["text"]
            .as_str()
            .is_some_and(|t| t.starts_with("Berlin:")),
        "{said}\n{}",
        text(&out.stderr)
    );
    assert_eq!(lines[1]["success"], true, "{said}");
    assert_eq!(lines[2]["success"], true, "{said}");
    assert!(
        lines[4]["result"]["content"][0]["text"]
            .as_str()
            .is_some_and(|t| t.contains("contained")),
        "{said}"
    );
}
