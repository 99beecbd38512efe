//! `yep mcp add | remove | list`: MCP servers the user adds to the home, their header secrets
//! kept out of settings and listings, and a session that reaches them through the host's MCP
//! dialect.

mod common;
use common::{text, yep_with_stdin};
use serde_json::{Value, json};
use std::path::Path;
use std::process::Output;

fn yep(home: &Path, args: &[&str]) -> Output {
    yep_with_stdin(home, args, "")
}

fn ok(out: &Output) -> String {
    assert!(
        out.status.success(),
        "stdout: {}\nstderr: {}",
        text(&out.stdout),
        text(&out.stderr)
    );
    text(&out.stdout)
}

#[test]
fn servers_added_to_the_home_are_listed_without_their_secrets_and_reached_in_a_session() {
    let tmp = tempfile::tempdir().unwrap();
    let home = tmp.path().join("home");
    let rmcp_server = Path::new(env!("CARGO_BIN_EXE_yep")).with_file_name("yep-bench-rmcp");
    assert!(rmcp_server.is_file(), "run `cargo test --workspace`");
    let server = rmcp_server.to_str().unwrap();
    ok(&yep(
        &home,
        &["mcp", "add", "files", "--", server, "--pipes"],
    ));
    ok(&yep(
        &home,
        &[
            "mcp",
            "add",
            "remote",
            "--url",
            "http://127.0.0.1:9/mcp",
            "--header",
            "Authorization=Bearer s3cret",
        ],
    ));
    // A taken name, a bad name, neither command nor url: refused, saying why.
    let taken = yep(&home, &["mcp", "add", "files", "--", "true"]);
    assert!(
        text(&taken.stderr).contains("already configured"),
        "{taken:?}"
    );
    let bad = yep(&home, &["mcp", "add", "a__b", "--", "true"]);
    assert!(
        text(&bad.stderr).contains("is not an MCP server name"),
        "{bad:?}"
    );
    let empty = yep(&home, &["mcp", "add", "nothing"]);
    assert!(
        text(&empty.stderr).contains("give a command after --"),
        "{empty:?}"
    );

    let listed: Value = serde_json::from_str(&ok(&yep(&home, &["mcp", "list", "--json"]))).unwrap();
    assert_eq!(
        listed,
        json!([
            {"name": "files", "source": "home", "type": "stdio", "command": server,
             "args": ["--pipes"], "env": {}, "headers": {}, "approval": "approved"},
            {"name": "remote", "source": "home", "type": "http", "args": [], "env": {},
             "url": "http://127.0.0.1:9/mcp", "headers": {"Authorization": "(secret)"},
             "approval": "MCP server `remote` has no approved tool list, so it does not start; approve it with `yep trust remote`"}
        ])
    );
    // The header's value is a secret: in connections.toml (owner-only), nowhere else.
    let settings = std::fs::read_to_string(home.join("settings.toml")).unwrap();
    assert!(!settings.contains("s3cret"), "{settings}");
    let connections = home.join("connections.toml");
    assert!(
        std::fs::read_to_string(&connections)
            .unwrap()
            .contains("Bearer s3cret")
    );
    use std::os::unix::fs::PermissionsExt;
    let mode = std::fs::metadata(&connections)
        .unwrap()
        .permissions()
        .mode();
    assert_eq!(mode & 0o777, 0o600);

    // A session sees them, and lists a stdio server's tools through the host's MCP client.
    let out = yep_with_stdin(
        &home,
        &["session", "--json"],
        "mcp\nmcp list-tools files\ntools\ncall mcp__files__echo {\"text\": \"hi\"}\nmcp status\nquit\n",
    );
    let lines: Vec<Value> = text(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .filter(|l| l.get("warning").is_none())
        .collect();
    assert_eq!(lines[0]["mcp"]["files"]["command"], json!(server));
    assert_eq!(
        lines[0]["mcp"]["remote"]["headers"]["Authorization"],
        "(secret)"
    );
    assert_eq!(
        lines[1],
        json!({"mcp_tools": ["echo"]}),
        "{}",
        text(&out.stderr)
    );
    assert!(home.join("logs/mcp-files.log").is_file());
    // Its tools are the session's, under `mcp__<server>__<tool>`, and calls go through.
    let tools = lines[2]["tools"].as_array().unwrap();
    let echo = tools.iter().find(|t| t["name"] == "mcp__files__echo");
    assert!(
        echo.is_some_and(|t| t["mcp"] == true && t["extension"] == "files"),
        "{tools:?}"
    );
    assert_eq!(
        lines[3]["result"]["content"][0]["text"], r#"{"echoed":"hi"}"#,
        "{:?}",
        lines[3]
    );
    // The server it could not reach at `add` is not approved, and says so.
    let status = lines[4]["mcp_status"].as_array().unwrap();
    let remote = status.iter().find(|s| s["name"] == "remote").unwrap();
    assert_eq!(remote["state"], "unapproved", "{status:?}");
    assert!(
        remote["message"]
            .as_str()
            .unwrap()
            .contains("yep trust remote")
    );
    let files = status.iter().find(|s| s["name"] == "files").unwrap();
    assert_eq!(files["state"], "started", "{status:?}");

    // Removed, with its secret.
    ok(&yep(&home, &["mcp", "remove", "remote"]));
    assert!(
        !std::fs::read_to_string(&connections)
            .unwrap()
            .contains("s3cret")
    );
    let gone = yep(&home, &["mcp", "remove", "remote"]);
    assert!(
        text(&gone.stderr).contains("no MCP server named `remote`"),
        "{gone:?}"
    );
}
