//! Published MCP servers installed the way their READMEs say, outside the workspace, run
//! contained with the default profile through the real binary, and every tool is called.
//!
//! They come from the loopback registry ([`common::registry`]), which serves the pinned
//! versions `scripts/test` mirrors, into a user's home with a `~/.gitconfig` and an ordinary
//! npm cache. The profile reads each one's install root: the `node_modules` tree a program
//! lives in, the venv a script lives in (`docs/sandbox.md`, Toolchains).

use crate::common;
use common::registry::{GIT_EMAIL, GIT_NAME, Registry, UserHome};
use common::{ok, text};
use serde_json::{Value, json};

/// The npm servers, pinned in `scripts/test`'s mirror.
const NPM_SERVERS: &[&str] = &[
    "@modelcontextprotocol/server-everything@2026.8.31",
    "@modelcontextprotocol/server-filesystem@2026.8.31",
    "@modelcontextprotocol/server-memory@2026.8.31",
];

/// The PyPI servers, likewise.
const PYPI_SERVERS: &[&str] = &["mcp-server-time==2026.10.19", "mcp-server-git==2026.10.19"];

/// `yep mcp add args…`, which must pin the server's tools.
fn add(user: &UserHome, args: &[&str]) {
    let mut all = vec!["mcp", "add"];
    all.extend_from_slice(args);
    let out = user.yep(&all, "");
    assert!(
        ok(&out).contains("tools pinned"),
        "yep {all:?}\n{}",
        text(&out.stderr)
    );
}

/// A session's line for one call: its result's text, all parts joined; fails on an error.
fn result_text(line: &Value) -> String {
    let content = line["result"]["content"].as_array();
    assert!(content.is_some(), "not a result: {line}");
    content
        .unwrap()
        .iter()
        .filter_map(|c| c["text"].as_str().or(c["resource"]["text"].as_str()))
        .collect::<Vec<_>>()
        .join("\n")
}

/// A session script calling `server`'s `calls` in order.
fn calls(server: &str, calls: &[(&str, Value)]) -> String {
    calls
        .iter()
        .map(|(tool, args)| format!("call mcp__{server}__{tool} {args}\n"))
        .collect()
}

/// Every tool of the three npm servers, added as `everything`, `files` (the workspace, granted
/// to write it) and `memory` (its graph in `memory_file`), called in one session, each
/// answering as it does outside the sandbox.
fn every_npm_tool_answers(user: &UserHome, memory_file: &std::path::Path) {
    let ws = user.workspace();
    std::fs::write(ws.join("seed.txt"), "seeded\n").unwrap();
    let path = |p: &str| ws.join(p).display().to_string();
    let top = ws.display().to_string();
    let tiny_gzip = "data:text/plain;base64,aGVsbG8=";
    let mut script = calls(
        "everything",
        &[
            ("echo", json!({"message": "contained"})),
            ("get-annotated-message", json!({"messageType": "success"})),
            ("get-env", json!({})),
            ("get-resource-links", json!({"count": 2})),
            ("get-resource-reference", json!({"resourceId": 1})),
            ("get-structured-content", json!({"location": "New York"})),
            ("get-sum", json!({"a": 2, "b": 3})),
            ("get-tiny-image", json!({})),
            (
                "gzip-file-as-resource",
                json!({"name": "x.gz", "data": tiny_gzip, "outputType": "resource"}),
            ),
            ("toggle-simulated-logging", json!({})),
            ("toggle-subscriber-updates", json!({})),
            (
                "trigger-long-running-operation",
                json!({"duration": 1, "steps": 2}),
            ),
            ("trigger-elicitation-request", json!({})),
            (
                "trigger-url-elicitation",
                json!({"url": "https://example.org/auth"}),
            ),
            ("simulate-research-query", json!({"topic": "sandboxes"})),
        ],
    );
    script += &calls(
        "files",
        &[
            ("list_allowed_directories", json!({})),
            ("read_file", json!({"path": path("seed.txt")})),
            (
                "read_text_file",
                json!({"path": path("seed.txt"), "head": 1}),
            ),
            (
                "write_file",
                json!({"path": path("notes/a.txt"), "content": "x"}),
            ),
            ("create_directory", json!({"path": path("notes")})),
            (
                "write_file",
                json!({"path": path("notes/a.txt"), "content": "one\n"}),
            ),
            (
                "edit_file",
                json!({"path": path("notes/a.txt"), "edits": [{"oldText": "one", "newText": "two"}]}),
            ),
            (
                "read_multiple_files",
                json!({"paths": [path("seed.txt"), path("notes/a.txt")]}),
            ),
            ("read_media_file", json!({"path": path("seed.txt")})),
            ("list_directory", json!({"path": top})),
            ("list_directory_with_sizes", json!({"path": top})),
            ("directory_tree", json!({"path": path("notes")})),
            (
                "move_file",
                json!({"source": path("notes/a.txt"), "destination": path("notes/b.txt")}),
            ),
            ("search_files", json!({"path": top, "pattern": "**/b.txt"})),
            ("get_file_info", json!({"path": path("notes/b.txt")})),
        ],
    );
    let entity = json!([{"name": "yep", "entityType": "project", "observations": ["runs contained"]},
                        {"name": "ada", "entityType": "person", "observations": []}]);
    script += &calls(
        "memory",
        &[
            ("create_entities", json!({"entities": entity})),
            (
                "create_relations",
                json!({"relations": [{"from": "ada", "to": "yep", "relationType": "uses"}]}),
            ),
            (
                "add_observations",
                json!({"observations": [{"entityName": "yep", "contents": ["pinned"]}]}),
            ),
            ("read_graph", json!({})),
            ("search_nodes", json!({"query": "pinned"})),
            ("open_nodes", json!({"names": ["ada"]})),
            (
                "delete_observations",
                json!({"deletions": [{"entityName": "yep", "observations": ["pinned"]}]}),
            ),
            (
                "delete_relations",
                json!({"relations": [{"from": "ada", "to": "yep", "relationType": "uses"}]}),
            ),
            ("delete_entities", json!({"entityNames": ["ada"]})),
        ],
    );
    script += "quit\n";
    let lines: Vec<Value> = user
        .session(&script)
        .into_iter()
        .filter(|l| l.get("update").is_none())
        .collect();
    let said = |i: usize| result_text(&lines[i]);
    let all = || format!("{lines:#?}");
    assert_eq!(lines.len(), 39, "{}", all());

    // everything: each tool answered, from inside the sandbox.
    assert_eq!(said(0), "Echo: contained");
    assert!(said(1).contains("successfully"), "{}", all());
    let env: Value = serde_json::from_str(&said(2)).unwrap();
    assert_eq!(env["HOME"], json!(user.home()), "{}", all());
    assert!(said(3).contains("2 resource links"), "{}", all());
    assert!(said(4).contains("Resource 1"), "{}", all());
    assert!(lines[5]["result"]["structuredContent"]["temperature"].is_number());
    assert!(said(6).contains("is 5"), "{}", all());
    assert!(
        lines[7]["result"]["content"][1]["data"].is_string(),
        "{}",
        all()
    );
    assert!(lines[8]["result"]["content"][0]["resource"]["blob"].is_string());
    assert!(said(9).contains("Started simulated"), "{}", all());
    assert!(said(10).contains("Started simulated"), "{}", all());
    assert!(said(11).contains("completed"), "{}", all());
    // No one answers an elicitation in a scripted session; the server hears it cancelled.
    assert!(said(12).contains("cancel"), "{}", all());
    assert!(said(13).contains("cancel"), "{}", all());
    // It needs a client that runs tasks: refused by the server, not the sandbox.
    let research = lines[14]["error"].as_str().unwrap_or_default();
    assert!(research.contains("task augmentation"), "{}", all());

    // filesystem: reads the workspace, writes it as granted.
    let files = 15;
    assert!(said(files).contains(&top), "{}", all());
    assert_eq!(said(files + 1).trim(), "seeded");
    assert_eq!(said(files + 2).trim(), "seeded");
    // Its parent does not exist yet: the server's own error.
    assert!(lines[files + 3]["error"].is_string(), "{}", all());
    assert!(
        said(files + 4).contains("Successfully created"),
        "{}",
        all()
    );
    assert!(said(files + 5).contains("Successfully wrote"), "{}", all());
    assert!(said(files + 6).contains("+two"), "{}", all());
    assert!(said(files + 7).contains("two"), "{}", all());
    assert!(
        lines[files + 8]["result"]["content"][0].is_object(),
        "{}",
        all()
    );
    assert!(said(files + 9).contains("[FILE] seed.txt"), "{}", all());
    assert!(said(files + 10).contains("seed.txt"), "{}", all());
    assert!(said(files + 11).contains("a.txt"), "{}", all());
    assert!(said(files + 12).contains("Successfully moved"), "{}", all());
    assert!(said(files + 13).contains("b.txt"), "{}", all());
    assert!(said(files + 14).contains("size"), "{}", all());
    assert_eq!(
        std::fs::read_to_string(ws.join("notes/b.txt")).unwrap(),
        "two\n"
    );

    // memory: its graph, kept where its user told it to.
    let memory = files + 15;
    for line in &lines[memory..] {
        result_text(line);
    }
    assert!(said(memory + 3).contains("runs contained"), "{}", all());
    assert!(said(memory + 4).contains("\"yep\""), "{}", all());
    assert!(said(memory + 5).contains("\"ada\""), "{}", all());
    let kept = std::fs::read_to_string(memory_file).unwrap();
    assert!(
        kept.contains("runs contained") && !kept.contains("ada"),
        "{kept}"
    );
}

#[test]
fn npm_servers_installed_locally_outside_the_workspace_run_contained_and_every_tool_answers() {
    let registry = Registry::start();
    let user = UserHome::new(Some(&registry));
    let ws = user.workspace();
    // `npm install` in a directory of the home: what the issue found would not start.
    let dir = user.home().join("mcp-servers");
    user.npm_install(&dir, NPM_SERVERS);
    let installed = registry.requests().len();
    assert!(installed > 0, "npm reached the loopback registry");
    let bin = |name: &str| dir.join("node_modules/.bin").join(name);
    let memory_file = ws.join("memory.jsonl");
    let memory_env = format!("MEMORY_FILE_PATH={}", memory_file.display());
    // Its bin is a link into the tree; Node loads `@modelcontextprotocol/sdk` beside it.
    add(
        &user,
        &[
            "everything",
            "--",
            bin("mcp-server-everything").to_str().unwrap(),
        ],
    );
    add(
        &user,
        &[
            "files",
            "--grant",
            "workspace:write",
            "--",
            bin("mcp-server-filesystem").to_str().unwrap(),
            ws.to_str().unwrap(),
        ],
    );
    // Node given the package's entry on its command line (through `env`, for the memory
    // file its README has users set): the tree is read as well.
    let entry = dir.join("node_modules/@modelcontextprotocol/server-memory/dist/index.js");
    add(
        &user,
        &[
            "memory",
            "--grant",
            "workspace:write",
            "--",
            "env",
            &memory_env,
            "node",
            entry.to_str().unwrap(),
        ],
    );

    every_npm_tool_answers(&user, &memory_file);

    // Installed, they start and answer with no registry asked.
    registry.asked_nothing_since(installed);
}

/// Make the workspace a repository with one commit and a change.
fn repository(ws: &std::path::Path) {
    common::git(ws, &["init"]);
    std::fs::write(ws.join("a.txt"), "one\n").unwrap();
    common::git(ws, &["add", "a.txt"]);
    common::git(ws, &["commit", "-m", "first"]);
    std::fs::write(ws.join("a.txt"), "one\ntwo\n").unwrap();
}

/// Every tool of the two PyPI servers, added as `time` and `git` (on the workspace, a
/// repository with one commit and a change, granted to write it), called in one session; the
/// commit git makes is the user's, from `~/.gitconfig`.
fn every_python_tool_answers(user: &UserHome) {
    let ws = user.workspace();
    let repo = ws.to_str().unwrap();
    let mut input = calls(
        "time",
        &[
            ("get_current_time", json!({"timezone": "Europe/Berlin"})),
            (
                "convert_time",
                json!({"source_timezone": "UTC", "time": "12:00", "target_timezone": "Asia/Tokyo"}),
            ),
        ],
    );
    input += &calls(
        "git",
        &[
            ("git_status", json!({"repo_path": repo})),
            ("git_diff_unstaged", json!({"repo_path": repo})),
            ("git_add", json!({"repo_path": repo, "files": ["a.txt"]})),
            ("git_diff_staged", json!({"repo_path": repo})),
            ("git_reset", json!({"repo_path": repo})),
            ("git_add", json!({"repo_path": repo, "files": ["a.txt"]})),
            (
                "git_commit",
                json!({"repo_path": repo, "message": "second"}),
            ),
            ("git_diff", json!({"repo_path": repo, "target": "HEAD~1"})),
            ("git_log", json!({"repo_path": repo, "max_count": 5})),
            (
                "git_create_branch",
                json!({"repo_path": repo, "branch_name": "feature"}),
            ),
            (
                "git_checkout",
                json!({"repo_path": repo, "branch_name": "feature"}),
            ),
            ("git_show", json!({"repo_path": repo, "revision": "HEAD"})),
            (
                "git_branch",
                json!({"repo_path": repo, "branch_type": "local"}),
            ),
        ],
    );
    input += "quit\n";
    let lines = user.session(&input);
    let said = |i: usize| result_text(&lines[i]);
    let all = || format!("{lines:#?}");
    assert_eq!(lines.len(), 15, "{}", all());

    assert!(said(0).contains("Europe/Berlin"), "{}", all());
    assert!(said(1).contains("21:00"), "{}", all());

    let git = 2;
    assert!(said(git).contains("a.txt"), "{}", all());
    assert!(said(git + 1).contains("+two"), "{}", all());
    assert!(said(git + 2).contains("staged"), "{}", all());
    assert!(said(git + 3).contains("+two"), "{}", all());
    assert!(said(git + 4).contains("reset"), "{}", all());
    assert!(said(git + 5).contains("staged"), "{}", all());
    assert!(said(git + 6).contains("committed"), "{}", all());
    assert!(said(git + 7).contains("+two"), "{}", all());
    // The commit is the user's: git read `~/.gitconfig` inside the sandbox.
    assert!(
        said(git + 8).contains(GIT_NAME) && said(git + 8).contains("second"),
        "{}",
        all()
    );
    assert!(said(git + 9).contains("feature"), "{}", all());
    assert!(said(git + 10).contains("feature"), "{}", all());
    assert!(said(git + 11).contains("second"), "{}", all());
    assert!(said(git + 12).contains("feature"), "{}", all());
    let author = common::git(&ws, &["log", "-1", "--format=%an <%ae>"]);
    assert_eq!(author, format!("{GIT_NAME} <{GIT_EMAIL}>"));
}

#[test]
fn python_servers_installed_in_a_venv_run_contained_and_every_tool_answers() {
    let registry = Registry::start();
    let user = UserHome::new(Some(&registry));
    let ws = user.workspace();
    // A venv in the home, made and filled as the servers' READMEs say.
    let venv = user.home().join(".venvs/mcp");
    user.venv_install(&venv, PYPI_SERVERS);
    let installed = registry.requests().len();
    assert!(installed > 0, "pip reached the loopback index");
    repository(&ws);
    let script = |name: &str| venv.join("bin").join(name).display().to_string();
    add(&user, &["time", "--", &script("mcp-server-time")]);
    add(
        &user,
        &[
            "git",
            "--grant",
            "workspace:write",
            "--",
            &script("mcp-server-git"),
            "--repository",
            ws.to_str().unwrap(),
        ],
    );

    every_python_tool_answers(&user);

    registry.asked_nothing_since(installed);
}

/// The loopback registry answers npm and uv as the real ones do, from the mirror alone: what
/// the launcher tests (`npx -y`, `uvx`) build on.
#[test]
fn npm_and_uvx_resolve_pinned_servers_from_the_loopback_registry_alone() {
    let registry = Registry::start();
    let user = UserHome::new(Some(&registry));
    let out = user
        .command("npm")
        .args([
            "view",
            "@modelcontextprotocol/server-memory@2026.8.31",
            "dist.tarball",
        ])
        .output()
        .unwrap();
    assert_eq!(
        ok(&out).trim(),
        format!(
            "{}@modelcontextprotocol/server-memory/-/server-memory-2026.8.31.tgz",
            registry.url()
        )
    );
    let out = user
        .command("uvx")
        .args(["--from", PYPI_SERVERS[0], "mcp-server-time", "--help"])
        .output()
        .unwrap();
    assert!(
        ok(&out).contains("--local-timezone"),
        "{}",
        text(&out.stderr)
    );
    let asked = registry.requests();
    assert!(
        asked.contains(&"/@modelcontextprotocol%2fserver-memory".to_string()),
        "{asked:?}"
    );
    assert!(
        asked.contains(&"/simple/mcp-server-time/".to_string()),
        "{asked:?}"
    );
    // A package it does not mirror is not found: nothing falls through to a real registry.
    let missing = user
        .command("npm")
        .args(["view", "left-pad", "version"])
        .output()
        .unwrap();
    assert!(!missing.status.success());
}

/// The lock's record of the package yep installed for server `name`'s launcher.
fn pinned_install(user: &UserHome, name: &str) -> toml::Value {
    let lock: toml::Value =
        toml::from_str(&std::fs::read_to_string(user.yep_home().join("extensions.lock")).unwrap())
            .unwrap();
    lock["mcp"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["name"].as_str() == Some(name))
        .and_then(|p| p.get("install"))
        .unwrap_or_else(|| panic!("no install pinned for {name}: {lock:#?}"))
        .clone()
}

/// A mirrored npm package version's document, as the registry serves it.
fn npm_document(package: &str, version: &str) -> Value {
    let path = std::path::PathBuf::from(std::env::var_os("YEP_PEERS").unwrap())
        .join("mirror/npm")
        .join(package)
        .join(format!("{version}.json"));
    serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap()
}

/// The servers READMEs start with `npx -y`, added as written: yep installs each once into its
/// home with npm (a cold cache, then a warm one), pins the version and the registry's
/// integrity in the lock, and starts the installed program directly, contained and offline.
#[test]
fn npx_servers_are_installed_pinned_once_and_start_offline_with_every_tool() {
    let registry = Registry::start();
    let user = UserHome::new(Some(&registry));
    let ws = user.workspace();
    let memory_file = ws.join("memory.jsonl");
    let memory_env = format!("MEMORY_FILE_PATH={}", memory_file.display());
    let ws_text = ws.to_str().unwrap();
    let added = user.yep(
        &[
            "mcp",
            "add",
            "everything",
            "--",
            "npx",
            "-y",
            NPM_SERVERS[0],
        ],
        "",
    );
    let said = ok(&added);
    assert!(
        said.contains("added MCP server everything (15 tools pinned)")
            && said.contains(
                "installed @modelcontextprotocol/server-everything 2026.8.31 from npm (sha512-"
            )
            && said.contains("runs offline from"),
        "{said}\n{}",
        text(&added.stderr)
    );
    // The cache is warm now: the next ones install from it.
    add(
        &user,
        &[
            "files",
            "--grant",
            "workspace:write",
            "--",
            "npx",
            "-y",
            NPM_SERVERS[1],
            ws_text,
        ],
    );
    add(
        &user,
        &[
            "memory",
            "--env",
            &memory_env,
            "--grant",
            "workspace:write",
            "--",
            "npx",
            "--yes",
            NPM_SERVERS[2],
        ],
    );
    // The lock holds each one's exact version and the registry's integrity for it.
    for (name, package) in [
        ("everything", "@modelcontextprotocol/server-everything"),
        ("files", "@modelcontextprotocol/server-filesystem"),
        ("memory", "@modelcontextprotocol/server-memory"),
    ] {
        let pin = pinned_install(&user, name);
        let doc = npm_document(package, "2026.8.31");
        assert_eq!(pin["package"].as_str(), Some(package));
        assert_eq!(pin["version"].as_str(), Some("2026.8.31"));
        assert_eq!(pin["integrity"].as_str(), doc["dist"]["integrity"].as_str());
        assert!(pin["packages"].as_integer().unwrap() > 10, "{pin:#?}");
    }
    // The environment value is kept as a secret is: never in settings.toml nor `list`.
    let settings = std::fs::read_to_string(user.yep_home().join("settings.toml")).unwrap();
    assert!(!settings.contains("memory.jsonl"), "{settings}");
    let listed = ok(&user.yep(&["mcp", "list"], ""));
    assert!(
        !listed.contains("memory.jsonl")
            && listed.contains("package: @modelcontextprotocol/server-memory 2026.8.31 from npm"),
        "{listed}"
    );
    let installed = registry.requests().len();
    every_npm_tool_answers(&user, &memory_file);
    // Started with no package manager in the way: the registry was not asked again.
    registry.asked_nothing_since(installed);
}

/// `uvx` servers likewise: installed once into a venv of the home with pip, pinned by the
/// wheel's hash, and started from the venv; git reads the user's `~/.gitconfig` in the sandbox.
#[test]
fn uvx_servers_are_installed_pinned_once_and_start_offline_with_every_tool() {
    let registry = Registry::start();
    let user = UserHome::new(Some(&registry));
    let ws = user.workspace();
    repository(&ws);
    add(&user, &["time", "--", "uvx", "mcp-server-time@2026.10.19"]);
    add(
        &user,
        &[
            "git",
            "--grant",
            "workspace:write",
            "--",
            "uvx",
            "--from",
            PYPI_SERVERS[1],
            "mcp-server-git",
            "--repository",
            ws.to_str().unwrap(),
        ],
    );
    for (name, package) in [("time", "mcp-server-time"), ("git", "mcp-server-git")] {
        let pin = pinned_install(&user, name);
        assert_eq!(pin["ecosystem"].as_str(), Some("pypi"));
        assert_eq!(pin["package"].as_str(), Some(package));
        assert_eq!(pin["version"].as_str(), Some("2026.10.19"));
        let wheel = std::fs::read_dir(
            std::path::PathBuf::from(std::env::var_os("YEP_PEERS").unwrap()).join("mirror/pypi"),
        )
        .unwrap()
        .flatten()
        .find(|e| {
            e.file_name()
                .to_string_lossy()
                .starts_with(&format!("{}-2026.10.19", package.replace('-', "_")))
        })
        .unwrap();
        let digest = sha256_hex(&std::fs::read(wheel.path()).unwrap());
        assert_eq!(
            pin["integrity"].as_str(),
            Some(format!("sha256:{digest}").as_str())
        );
    }
    let installed = registry.requests().len();
    every_python_tool_answers(&user);
    registry.asked_nothing_since(installed);
}

/// SHA-256 of `bytes`, hex.
fn sha256_hex(bytes: &[u8]) -> String {
    use sha2::Digest;
    sha2::Sha256::digest(bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// A pinned install whose files changed does not start, and says how to fix it; `yep update`
/// installs it again, showing the version it resolves to, and it starts again.
#[test]
fn a_pinned_install_changed_on_disk_does_not_start_until_yep_update_installs_it_again() {
    let registry = Registry::start();
    let user = UserHome::new(Some(&registry));
    add(&user, &["memory", "--", "npx", "-y", NPM_SERVERS[2]]);
    let dir = user
        .yep_home()
        .join(pinned_install(&user, "memory")["dir"].as_str().unwrap());
    let entry = dir.join("node_modules/@modelcontextprotocol/server-memory/dist/index.js");
    let mut code = std::fs::read_to_string(&entry).unwrap();
    code.push_str("\n// planted\n");
    std::fs::write(&entry, code).unwrap();
    let script = "call mcp__memory__read_graph {}\nquit\n";
    let out = user.yep(&["session", "--json"], script);
    let said = text(&out.stdout);
    assert!(
        said.contains("the installed files of @modelcontextprotocol/server-memory 2026.8.31 changed since it was approved")
            && said.contains("`yep update memory` installs it again")
            && said.contains("no tool named `mcp__memory__read_graph`"),
        "{said}"
    );
    let listed = ok(&user.yep(&["mcp", "list"], ""));
    assert!(listed.contains("changed since it was approved"), "{listed}");
    let updated = user.yep(&["update", "memory", "--yes"], "");
    assert!(
        ok(&updated).contains("@modelcontextprotocol/server-memory 2026.8.31 is what"),
        "{}",
        text(&updated.stderr)
    );
    let lines = user.session(script);
    assert!(result_text(&lines[0]).contains("entities"), "{lines:?}");
    // The changed copy is gone with its pin.
    assert!(!dir.exists());
}

/// `yep mcp add` of a server that cannot be installed or started exits 1 with the reason and
/// keeps nothing; `--keep` keeps it, unapproved.
#[test]
fn a_server_that_cannot_start_is_not_added_unless_kept() {
    let registry = Registry::start();
    let user = UserHome::new(Some(&registry));
    let missing = user.yep(
        &[
            "mcp",
            "add",
            "nope",
            "--",
            "npx",
            "-y",
            "@modelcontextprotocol/server-nowhere@1.0.0",
        ],
        "",
    );
    assert_eq!(missing.status.code(), Some(1));
    let said = text(&missing.stderr);
    assert!(
        said.contains("not added: MCP server nope could not start and list its tools: npm could not install @modelcontextprotocol/server-nowhere@1.0.0"),
        "{said}"
    );
    let dead = user.yep(&["mcp", "add", "dead", "--", "false"], "");
    assert_eq!(dead.status.code(), Some(1));
    let said = text(&dead.stderr);
    assert!(
        said.contains("not added: MCP server dead could not start")
            && said.contains("`yep logs dead`")
            && said.contains("`--keep` adds it anyway"),
        "{said}"
    );
    let listed = ok(&user.yep(&["mcp", "list"], ""));
    assert!(
        !listed.contains("nope") && !listed.contains("dead"),
        "{listed}"
    );
    assert!(!user.yep_home().join("installs/mcp.nope").exists());
    let kept = user.yep(&["mcp", "add", "dead", "--keep", "--", "false"], "");
    assert!(ok(&kept).contains("added MCP server dead (not approved yet)"));
    let listed = ok(&user.yep(&["mcp", "list"], ""));
    assert!(listed.contains("dead"), "{listed}");
}

/// `--as-written` keeps the launcher: nothing is installed, the lock says so, and what the
/// launcher reaches (its registry, its cache) is named.
#[test]
fn as_written_keeps_the_launcher_and_names_what_it_reaches() {
    let registry = Registry::start();
    let user = UserHome::new(Some(&registry));
    let out = user.yep(
        &[
            "mcp",
            "add",
            "memory",
            "--as-written",
            "--",
            "npx",
            "-y",
            NPM_SERVERS[2],
        ],
        "",
    );
    let said = ok(&out);
    let port = registry.url();
    let port = port.trim_start_matches("http://").trim_end_matches('/');
    assert!(
        said.contains("runs `npx` as written: it fetches @modelcontextprotocol/server-memory@2026.8.31 at each cold start from")
            && said.contains(port)
            && said.contains("~/.npm"),
        "{said}\n{}",
        text(&out.stderr)
    );
    assert!(!user.yep_home().join("installs").join("mcp.memory").exists());
    let listed = ok(&user.yep(&["mcp", "list"], ""));
    assert!(listed.contains("fetched by its launcher"), "{listed}");
}

/// A workspace's `.mcp.json` that starts its server with `npx -y`, and a Claude Code plugin
/// whose `.mcp.json` does: each approval (`yep trust`, `yep install`) installs the package
/// pinned, and a session starts it from the install, offline.
#[test]
fn workspace_and_plugin_npx_servers_are_installed_pinned_when_approved() {
    let registry = Registry::start();
    let user = UserHome::new(Some(&registry));
    let ws = user.workspace();
    let server = json!({"command": "npx", "args": ["-y", NPM_SERVERS[2]]});
    std::fs::write(
        ws.join(".mcp.json"),
        json!({"mcpServers": {"mem": server}}).to_string(),
    )
    .unwrap();
    let trusted = user.yep(&["trust", "mem", "--yes"], "");
    let said = text(&trusted.stderr);
    assert!(
        said.contains("installed @modelcontextprotocol/server-memory 2026.8.31 from npm"),
        "{said}\n{}",
        text(&trusted.stdout)
    );
    ok(&trusted);
    let plugin = user.home().join("plugins/p");
    std::fs::create_dir_all(plugin.join(".claude-plugin")).unwrap();
    std::fs::write(
        plugin.join(".claude-plugin/plugin.json"),
        r#"{"name": "p"}"#,
    )
    .unwrap();
    std::fs::write(plugin.join(".mcp.json"), json!({"mem": server}).to_string()).unwrap();
    let installed = user.yep(&["install", plugin.to_str().unwrap(), "--yes"], "");
    let said = ok(&installed);
    assert!(
        said.contains("pinned 9 tools of MCP server p__mem")
            && said.contains("installed @modelcontextprotocol/server-memory 2026.8.31 from npm"),
        "{said}\n{}",
        text(&installed.stderr)
    );
    ok(&user.yep(&["enable", "p"], ""));
    let asked = registry.requests().len();
    let lines =
        user.session("call mcp__mem__read_graph {}\ncall mcp__p__mem__read_graph {}\nquit\n");
    assert!(result_text(&lines[0]).contains("entities"), "{lines:?}");
    assert!(result_text(&lines[1]).contains("entities"), "{lines:?}");
    registry.asked_nothing_since(asked);
}
