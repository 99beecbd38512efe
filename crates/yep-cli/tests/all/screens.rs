//! What users read, held as snapshots: consent screens (YEP, zot, Claude Code, Codex and Agent
//! Plugins packages, MCP servers), errors with their hints, and `--json` output. A change to any of them shows as a diff to review (`cargo insta review`, or
//! `INSTA_UPDATE=always`), never as a silently rewritten sentence.

use crate::common;
use common::claude::claude_corpus;
use common::{ok, stable, text, yep, yep_at, yep_in, yep_with_env, yep_with_stdin};
use std::path::Path;

#[test]
fn a_claude_plugins_consent_screen_and_the_list_that_follows() {
    let tmp = tempfile::tempdir().unwrap();
    let home = tmp.path().join("home");
    let corpus = claude_corpus(tmp.path());
    let plugin = corpus.join("plugins/commit-commands");
    // Refused at the prompt: the screen is all that happens.
    let refused = yep_with_stdin(&home, &["install", plugin.to_str().unwrap()], "n\n");
    assert!(!refused.status.success());
    let installed = yep(&home, &["install", plugin.to_str().unwrap(), "--yes"]);
    ok(&installed);
    let listed = ok(&yep(&home, &["list", "--json"]));
    stable(tmp.path()).bind(|| {
        insta::assert_snapshot!("claude_consent_refused", text(&refused.stderr));
        insta::assert_snapshot!("claude_consent_yes", text(&installed.stderr));
        insta::assert_snapshot!("list_json", listed);
    });
}

#[test]
fn errors_say_what_failed_and_what_to_do() {
    let tmp = tempfile::tempdir().unwrap();
    let home = tmp.path().join("home");
    let unstartable = yep(
        &home,
        &["mcp", "add", "broken", "--", "/nonexistent/mcp-server"],
    );
    assert!(!unstartable.status.success());
    let kept = yep(
        &home,
        &[
            "mcp",
            "add",
            "broken",
            "--keep",
            "--",
            "/nonexistent/mcp-server",
        ],
    );
    ok(&kept);
    let mcp_list = ok(&yep(&home, &["mcp", "list", "--json"]));
    let no_such = yep(&home, &["doctor", "nosuch"]);
    assert!(!no_such.status.success());
    let bad_grant = yep(&home, &["grant", "broken", "net:"]);
    assert!(!bad_grant.status.success());
    stable(tmp.path()).bind(|| {
        insta::assert_snapshot!("mcp_add_unstartable", text(&unstartable.stderr));
        insta::assert_snapshot!("mcp_add_kept", text(&kept.stdout) + &text(&kept.stderr));
        insta::assert_snapshot!("mcp_list_json", mcp_list);
        insta::assert_snapshot!("doctor_no_such", text(&no_such.stderr));
        insta::assert_snapshot!("grant_malformed", text(&bad_grant.stderr));
    });
}

/// A package with `tools` and the manifest's own grant of `example.com`.
fn notes_package(dir: &Path, tools: &[&str], version: &str) -> std::path::PathBuf {
    let tools: Vec<serde_json::Value> = tools
        .iter()
        .map(|t| serde_json::json!({"name": t, "description": format!("{t} a note"), "inputSchema": {"type": "object"}}))
        .collect();
    yep_test_support::Package::at(dir)
        .manifest(&serde_json::json!({
            "name": "notes",
            "version": version,
            "yolop": {"capabilityServer": {"command": "notes-server"}, "tools": tools},
            "sandbox": {"net": ["example.com"]},
        }))
        .into_dir()
}

#[test]
fn the_approval_screens_of_a_grant_a_revoke_and_an_update() {
    let tmp = tempfile::tempdir().unwrap();
    let home = tmp.path().join("home");
    let src = tmp.path().join("notes");
    notes_package(&src, &["read"], "1.0.0");
    ok(&yep(&home, &["install", src.to_str().unwrap(), "--yes"]));
    let data = tmp.path().join("data");
    std::fs::create_dir_all(&data).unwrap();
    let read = format!("read:{}", data.display());
    // No terminal to ask at: the screen, then why nothing was granted.
    let unasked = yep(&home, &["grant", "notes", &read]);
    assert!(!unasked.status.success());
    let granted = ok(&yep(&home, &["grant", "notes", &read, "--yes", "--json"]));
    let again = ok(&yep(&home, &["grant", "notes", "net:example.com"]));
    let own = yep(&home, &["revoke", "notes", "net:example.com"]);
    assert!(!own.status.success());
    // A new version that widens: its diff is asked about, and `--locked` refuses it.
    notes_package(&src, &["read", "delete"], "1.1.0");
    let locked = yep(&home, &["update", "notes", "--locked"]);
    assert!(!locked.status.success());
    let update = yep_with_stdin(&home, &["update", "notes"], "n\n");
    assert!(!update.status.success());
    stable(tmp.path()).bind(|| {
        insta::assert_snapshot!("grant_unasked", text(&unasked.stderr));
        insta::assert_snapshot!("grant_json", granted);
        insta::assert_snapshot!("grant_nothing_new", again);
        insta::assert_snapshot!("revoke_the_manifests_own", text(&own.stderr));
        insta::assert_snapshot!("update_locked", text(&locked.stderr));
        insta::assert_snapshot!("update_widens_refused", text(&update.stderr));
    });
}

#[test]
fn a_grant_that_lifts_a_protected_workspace_path_is_warned_of_before_consent() {
    // A path of one length wherever the tests run (a fresh clone's nested temp dir is
    // longer): the screens wrap and cut long paths, and the snapshots hold what they show.
    let tmp = tempfile::Builder::new()
        .prefix("yp")
        .rand_bytes(6)
        .tempdir_in("/tmp")
        .unwrap();
    let home = tmp.path().join("home");
    let ws = tmp.path().join("ws");
    for dir in [".vscode", ".git/hooks"] {
        std::fs::create_dir_all(ws.join(dir)).unwrap();
    }
    let (vscode, hooks) = (ws.join(".vscode"), ws.join(".git/hooks"));
    // A package that asks for one in its manifest: its summary warns.
    let src = tmp.path().join("editor");
    yep_test_support::Package::at(&src)
        .manifest(&serde_json::json!({
            "name": "editor",
            "version": "1.0.0",
            "yolop": {
                "capabilityServer": {"command": "editor-server"},
                "tools": [{"name": "open", "description": "open a file", "inputSchema": {"type": "object"}}],
            },
            "sandbox": {"workspace": "write", "write": [vscode.display().to_string()]},
        }))
        .into_dir();
    let refused = yep(&home, &["install", src.to_str().unwrap()]);
    assert!(!refused.status.success());
    // The user asked for one with `yep grant`: the screen warns.
    notes_package(&tmp.path().join("notes"), &["read"], "1.0.0");
    ok(&yep(
        &home,
        &[
            "install",
            tmp.path().join("notes").to_str().unwrap(),
            "--yes",
        ],
    ));
    let hooks = format!("write:{}", hooks.display());
    let unasked = yep(&home, &["grant", "notes", "workspace:write", &hooks]);
    assert!(!unasked.status.success());
    stable(tmp.path()).bind(|| {
        insta::assert_snapshot!("install_protected_refused", text(&refused.stderr));
        insta::assert_snapshot!("grant_protected_unasked", text(&unasked.stderr));
    });
}

/// `yep new`'s package `weather` in `tmp`, with every kind of contribution `yep new` writes:
/// what its `--json` printed.
fn new_weather(tmp: &Path) -> String {
    let dir = tmp.to_str().unwrap();
    #[rustfmt::skip]
    let args = [
        "new", "weather", "--dir", dir, "--tool", "forecast", "--tool", "alerts",
        "--hook", "pre_tool_use:bash", "--prompt", "Use forecast for the weather",
        "--command", "today", "--status", "--ui-ask", "--trace", "--skills", "--json",
    ];
    ok(&yep(&tmp.join("home"), &args))
}

#[test]
fn a_yep_package_from_new_through_consent_doctor_and_a_tampered_copy() {
    let tmp = tempfile::tempdir().unwrap();
    let home = tmp.path().join("home");
    let new = new_weather(tmp.path());
    let src = tmp.path().join("weather");
    let src = src.to_str().unwrap();
    let refused = yep(&home, &["install", src]);
    assert!(!refused.status.success());
    assert!(!home.join("extensions/weather").exists());
    let installed = ok(&yep(&home, &["install", src, "--yes", "--json"]));
    // Sandboxes differ between machines (Landlock's ABI, seccomp); without one the report
    // is the same everywhere.
    let doctor = yep_with_env(
        &home,
        &["doctor", "weather", "--json"],
        "",
        &[("YEP_SANDBOX", "off")],
    );
    assert!(doctor.status.success(), "{}", text(&doctor.stderr));
    // Another package under the same name is not an update of it.
    let other = tmp.path().join("other");
    common::copy_tree(Path::new(src), &other);
    let replaced = yep(&home, &["install", other.to_str().unwrap(), "--yes"]);
    assert!(!replaced.status.success());
    // The approved copy, changed behind yep's back, is refused.
    let server = home.join("extensions/weather/bin/weather-server");
    let mut code = std::fs::read_to_string(&server).unwrap();
    code.push_str("\n# changed after approval\n");
    std::fs::write(&server, code).unwrap();
    let tampered = yep_in(
        tmp.path(),
        &home,
        &["call", "weather", "forecast", r#"{"text":"x"}"#],
        "",
    );
    assert!(!tampered.status.success());
    stable(tmp.path()).bind(|| {
        insta::assert_snapshot!("new_json", new);
        insta::assert_snapshot!("yep_consent_refused", text(&refused.stderr));
        insta::assert_snapshot!("install_json", installed);
        insta::assert_snapshot!("doctor_json", text(&doctor.stdout));
        insta::assert_snapshot!("install_other_source_refused", text(&replaced.stderr));
        insta::assert_snapshot!("call_tampered", text(&tampered.stderr));
    });
}

/// A package whose server ends at once, saying why on stderr, and whose config wants a
/// secret `token` (required) and a plain `limit`.
fn weather_that_wants_a_token(dir: &Path) -> std::path::PathBuf {
    yep_test_support::Package::at(dir)
        .manifest(&serde_json::json!({
            "name": "weather",
            "version": "0.1.0",
            "description": "forecasts",
            "yolop": {
                "capabilityServer": {"command": "weather-server"},
                "tools": [{"name": "forecast"}],
                "config_schema": {"type": "object", "required": ["token"], "properties": {
                    "token": {"type": "string", "secret": true, "env": "WEATHER_TOKEN"},
                    "limit": {"type": "integer"},
                }},
            },
        }))
        // It reads the handshake's first line before it ends: the host's write never races
        // its exit, so the error is the same every run.
        .executable(
            "bin/weather-server",
            "#!/bin/sh\nread -r line\necho 'weather: no API token (set WEATHER_TOKEN)' >&2\nexit 3\n",
        )
        .into_dir()
}

#[test]
fn config_screens_and_a_server_that_ends_for_want_of_a_required_secret() {
    let tmp = tempfile::tempdir().unwrap();
    let home = tmp.path().join("home");
    let src = weather_that_wants_a_token(&tmp.path().join("weather"));
    ok(&yep(&home, &["install", src.to_str().unwrap(), "--yes"]));
    let enabled = ok(&yep(&home, &["enable", "weather", "--json"]));
    ok(&yep(&home, &["config", "set", "weather", "limit", "10"]));
    let shown = ok(&yep(&home, &["config", "show", "weather", "--json"]));
    let not_secret = yep(&home, &["secret", "set", "weather", "limit"]);
    assert!(!not_secret.status.success());
    let crashed = yep_in(tmp.path(), &home, &["call", "weather", "forecast"], "");
    assert_eq!(crashed.status.code(), Some(1), "{crashed:?}");
    stable(tmp.path()).bind(|| {
        insta::assert_snapshot!("enable_json_setup_incomplete", enabled);
        insta::assert_snapshot!("config_show_json", shown);
        insta::assert_snapshot!("secret_set_plain_field", text(&not_secret.stderr));
        insta::assert_snapshot!("call_server_ended_secret_unset", text(&crashed.stderr));
    });
}

#[test]
fn errors_about_names_and_paths_that_are_nothing_here() {
    let tmp = tempfile::tempdir().unwrap();
    let home = tmp.path().join("home");
    // Every verb that takes an installed extension says the same when there is none.
    let not_installed = yep(&home, &["remove", "nosuch"]);
    assert!(!not_installed.status.success());
    for args in [
        &["call", "nosuch", "t"][..],
        &["enable", "nosuch"],
        &["disable", "nosuch"],
        &["update", "nosuch"],
        &["config", "show", "nosuch"],
    ] {
        let out = yep(&home, args);
        assert!(!out.status.success(), "{args:?}");
        assert_eq!(text(&out.stderr), text(&not_installed.stderr), "{args:?}");
    }
    let trust = yep(&home, &["trust", "nosuch"]);
    assert!(!trust.status.success());
    let empty = tmp.path().join("empty");
    std::fs::create_dir_all(&empty).unwrap();
    let no_manifest = yep(&home, &["install", empty.to_str().unwrap()]);
    assert!(!no_manifest.status.success());
    ok(&yep(
        &home,
        &[
            "mcp",
            "add",
            "files",
            "--keep",
            "--",
            "/nonexistent/mcp-server",
        ],
    ));
    let clash = yep(&home, &["mcp", "add", "files", "--", "/nonexistent/other"]);
    assert!(!clash.status.success());
    // An agent yep has no snippet for is a usage error (2), with the ones it has.
    let agent = yep(&home, &["mcp", "config", "claud"]);
    assert_eq!(agent.status.code(), Some(2), "{agent:?}");
    stable(tmp.path()).bind(|| {
        insta::assert_snapshot!("not_installed", text(&not_installed.stderr));
        insta::assert_snapshot!("trust_unknown", text(&trust.stderr));
        insta::assert_snapshot!("install_no_manifest", text(&no_manifest.stderr));
        insta::assert_snapshot!("mcp_add_name_taken", text(&clash.stderr));
        insta::assert_snapshot!("mcp_config_unknown_agent", text(&agent.stderr));
    });
}

#[test]
fn the_snippet_each_agent_is_given_for_yep_mcp_serve() {
    let tmp = tempfile::tempdir().unwrap();
    let home = tmp.path().join("home");
    let mut said = String::new();
    for agent in ["claude", "codex", "cursor", "gemini", "goose"] {
        let out = yep(&home, &["mcp", "config", agent]);
        said += &format!(
            "── {agent}: stdout\n{}── {agent}: stderr\n{}",
            ok(&out),
            text(&out.stderr)
        );
    }
    stable(tmp.path()).bind(|| insta::assert_snapshot!("mcp_config", said));
}

#[test]
fn a_zot_extension_is_asked_about_before_its_first_run() {
    let tmp = tempfile::tempdir().unwrap();
    let home = tmp.path().join("home");
    let src = tmp.path().join("todo");
    std::fs::create_dir_all(&src).unwrap();
    let fixture = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/zot/todo");
    for file in ["extension.json", "todo.py"] {
        std::fs::copy(fixture.join(file), src.join(file)).unwrap();
    }
    let refused = yep(&home, &["install", src.to_str().unwrap()]);
    assert!(!refused.status.success());
    assert!(!home.join("extensions/todo-panel").exists());
    stable(tmp.path()).bind(|| {
        insta::assert_snapshot!("zot_first_run_refused", text(&refused.stderr));
    });
}

#[test]
fn a_codex_and_an_agent_plugins_packages_consent_screens() {
    let tmp = tempfile::tempdir().unwrap();
    let home = tmp.path().join("home");
    let fixtures = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures");
    let mut refused = Vec::new();
    for name in ["codex-guard", "agent-notes"] {
        let dir = tmp.path().join(name);
        common::copy_tree(&fixtures.join(name), &dir);
        let out = yep(&home, &["install", dir.to_str().unwrap()]);
        assert!(!out.status.success(), "{name}");
        refused.push(text(&out.stderr));
    }
    stable(tmp.path()).bind(|| {
        insta::assert_snapshot!("codex_consent_refused", refused[0]);
        insta::assert_snapshot!("agent_plugins_consent_refused", refused[1]);
    });
}

/// An MCP server (JSON-RPC 2.0 on stdio) whose tools are what `tools.json` in its working
/// directory lists.
const LISTED_SERVER: &str = r#"import json
import sys

for line in sys.stdin:
    try:
        message = json.loads(line)
    except ValueError:
        continue
    if "id" not in message:
        continue
    method, mid = message.get("method"), message["id"]
    if method == "initialize":
        result = {"protocolVersion": message.get("params", {}).get("protocolVersion", "2025-06-18"),
                  "capabilities": {"tools": {}}, "serverInfo": {"name": "notes", "version": "1.0.0"}}
    elif method == "tools/list":
        with open("tools.json", encoding="utf-8") as f:
            result = {"tools": json.load(f)}
    else:
        result = None
    reply = {"jsonrpc": "2.0", "id": mid}
    if result is None:
        reply["error"] = {"code": -32601, "message": "no such method"}
    else:
        reply["result"] = result
    sys.stdout.write(json.dumps(reply) + "\n")
    sys.stdout.flush()
"#;

/// `tools.json` for [`LISTED_SERVER`]: `read`, described as `read`, and the tools `more`.
fn list_tools(ws: &Path, read: &str, more: &[&str]) {
    let mut tools = vec![serde_json::json!({"name": "read", "description": read,
        "inputSchema": {"type": "object", "properties": {"name": {"type": "string"}}}})];
    for name in more {
        tools.push(
            serde_json::json!({"name": name, "description": format!("{name} a note"),
            "inputSchema": {"type": "object"}}),
        );
    }
    std::fs::write(
        ws.join("tools.json"),
        serde_json::Value::from(tools).to_string(),
    )
    .unwrap();
}

/// `.mcp.json` for [`LISTED_SERVER`], with `args` after the script and `env`.
fn mcp_json(ws: &Path, args: &[&str], env: serde_json::Value) {
    let mut all = vec!["server.py"];
    all.extend(args);
    let servers = serde_json::json!({"mcpServers": {"notes": {"command": "python3", "args": all, "env": env}}});
    std::fs::write(ws.join(".mcp.json"), servers.to_string()).unwrap();
}

#[test]
fn a_workspace_mcp_servers_trust_screens_first_then_for_changed_tools_and_definition() {
    let tmp = tempfile::tempdir().unwrap();
    let home = tmp.path().join("home");
    let ws = tmp.path().join("ws");
    std::fs::create_dir_all(&ws).unwrap();
    std::fs::write(ws.join("server.py"), LISTED_SERVER).unwrap();
    list_tools(&ws, "Read a note.", &[]);
    mcp_json(&ws, &[], serde_json::json!({"NOTES_DIR": "notes"}));
    let trust = |args: &[&str]| {
        let mut all = vec!["trust", "notes"];
        all.extend(args);
        yep_in(&ws, &home, &all, "")
    };
    let never = trust(&[]);
    assert!(!never.status.success());
    let first = trust(&["--yes"]);
    ok(&first);
    // The server now says more of `read` and has a tool more.
    list_tools(&ws, "Read a note, or all of them.", &["delete"]);
    let changed = trust(&[]);
    assert!(!changed.status.success());
    let approved = trust(&["--yes", "--json"]);
    let approved_json = ok(&approved);
    // What it runs changes: another argument, another variable.
    mcp_json(
        &ws,
        &["--verbose"],
        serde_json::json!({"NOTES_DIR": "notes", "NOTES_TOKEN": "t"}),
    );
    let redefined = trust(&[]);
    assert!(!redefined.status.success());
    let session = yep_at(Some(&ws), &home, &["session", "--json"], "quit\n", &[]);
    let warned = text(&session.stdout);
    assert!(warned.contains("yep trust notes"), "{warned}");
    stable(tmp.path()).bind(|| {
        insta::assert_snapshot!("mcp_trust_never_approved", text(&never.stderr));
        insta::assert_snapshot!(
            "mcp_trust_first_yes",
            text(&first.stderr) + &text(&first.stdout)
        );
        insta::assert_snapshot!("mcp_trust_tools_changed_refused", text(&changed.stderr));
        insta::assert_snapshot!("mcp_trust_json", approved_json);
        insta::assert_snapshot!(
            "mcp_trust_definition_changed_refused",
            text(&redefined.stderr)
        );
    });
}

#[test]
fn a_marketplaces_add_and_list_json() {
    let tmp = tempfile::tempdir().unwrap();
    let home = tmp.path().join("home");
    let market = tmp.path().join("market");
    yep_test_support::Package::at(market.join("plugins/hello"))
        .file(
            ".claude-plugin/plugin.json",
            r#"{"name": "hello", "description": "Says hello"}"#,
        )
        .file("commands/hi.md", "Say hello to the user.\n");
    let catalogue = serde_json::json!({
        "name": "team-tools",
        "owner": {"name": "The team"},
        "metadata": {"description": "What the team uses"},
        "plugins": [
            {"name": "hello", "source": "./plugins/hello", "description": "Says hello"},
            {"name": "remote", "source": {"source": "github", "repo": "example/remote"}, "description": "Lives elsewhere"},
            {"name": "broken", "source": 42},
        ],
    });
    std::fs::create_dir_all(market.join(".claude-plugin")).unwrap();
    std::fs::write(
        market.join(".claude-plugin/marketplace.json"),
        catalogue.to_string(),
    )
    .unwrap();
    let added = yep(&home, &["marketplace", "add", market.to_str().unwrap()]);
    let added = ok(&added) + &text(&added.stderr);
    let listed = ok(&yep(
        &home,
        &["marketplace", "list", "team-tools", "--json"],
    ));
    stable(tmp.path()).bind(|| {
        insta::assert_snapshot!("marketplace_add", added);
        insta::assert_snapshot!("marketplace_list_json", listed);
    });
}
