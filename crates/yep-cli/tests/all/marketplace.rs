//! `yep marketplace`: Claude Code's official catalogue read from the corpus, and one of our
//! own from a git repository; bounded and escaped. `yep install <plugin>@<marketplace>`
//! installs what a catalogue lists, following its renames, held inside it, and `yep update`
//! follows it.

use crate::common;

use common::claude::claude_corpus;
use common::{git, ok, text, yep};
use serde_json::{Value, json};
use std::path::{Path, PathBuf};

#[test]
fn the_official_marketplace_is_added_in_place_and_lists_every_entry_with_its_source() {
    let tmp = tempfile::tempdir().unwrap();
    let home = tmp.path().join("home");
    let corpus = claude_corpus(tmp.path());
    let added = ok(&yep(
        &home,
        &["marketplace", "add", corpus.to_str().unwrap(), "--json"],
    ));
    let added: Value = serde_json::from_str(&added).unwrap();
    assert_eq!(added["name"], "claude-plugins-official");
    // Every entry is taken or skipped with its reason: none is lost.
    let listed = ok(&yep(
        &home,
        &["marketplace", "list", "claude-plugins-official", "--json"],
    ));
    let listed: Value = serde_json::from_str(&listed).unwrap();
    let entries = listed["entries"].as_array().unwrap();
    let skipped = listed["skipped"].as_array().unwrap();
    assert_eq!(entries.len() + skipped.len(), 286, "{skipped:?}");
    assert!(entries.len() >= 280, "{skipped:?}");
    let entry = |name: &str| {
        entries
            .iter()
            .find(|e| e["name"] == name)
            .unwrap_or_else(|| panic!("no entry {name}"))
            .clone()
    };
    assert_eq!(
        entry("commit-commands")["source"],
        json!({"path": "plugins/commit-commands"})
    );
    let lsp = entry("rust-analyzer-lsp");
    assert_eq!(lsp["strict"], false);
    assert_eq!(lsp["components"], json!(["lspServers"]));
    let subdir = entry("42crunch-api-security-testing");
    assert_eq!(
        subdir["source"],
        json!({"git": "https://github.com/42Crunch-AI/claude-plugins.git",
            "rev": "30287f5e3f122a646d1ac5ca3ab96e130c52a3ad", "subdir": "plugins/api-security-testing"})
    );
    // Read in place: nothing of it was copied into the home.
    assert!(!home.join("marketplaces/claude-plugins-official").exists());
    let human = ok(&yep(&home, &["marketplace", "list"]));
    assert!(
        human.starts_with("claude-plugins-official  ") && human.contains(" plugins  "),
        "{human}"
    );
    let again = yep(&home, &["marketplace", "add", corpus.to_str().unwrap()]);
    assert!(!again.status.success());
    assert!(
        text(&again.stderr).contains("already added"),
        "{}",
        text(&again.stderr)
    );
}

#[test]
fn a_git_marketplace_is_checked_out_into_the_home_at_its_commit_and_removed_with_it() {
    let tmp = tempfile::tempdir().unwrap();
    let home = tmp.path().join("home");
    let repo = tmp.path().join("market");
    std::fs::create_dir_all(repo.join(".claude-plugin")).unwrap();
    let catalogue = json!({
        "name": "ours",
        "owner": {"name": "us"},
        "plugins": [
            {"name": "tidy", "source": "./plugins/tidy", "description": "first line\u{1b}[2J\nsecond"},
            {"name": "bad\u{1b}]0;owned\u{7}", "source": "./x"},
            {"name": "away", "source": "../../etc"},
        ],
    });
    std::fs::write(
        repo.join(".claude-plugin/marketplace.json"),
        catalogue.to_string(),
    )
    .unwrap();
    git(&repo, &["init", "-q"]);
    git(&repo, &["add", "."]);
    git(&repo, &["commit", "-qm", "catalogue"]);
    let commit = git(&repo, &["rev-parse", "HEAD"]);
    let url = format!("file://{}", repo.display());
    let said = ok(&yep(&home, &["marketplace", "add", &url]));
    assert!(
        said.starts_with("added marketplace ours (1 plugins, 2 skipped)"),
        "{said}"
    );
    assert!(
        !said.contains('\u{1b}') && !said.contains('\u{7}'),
        "{said:?}"
    );
    assert!(said.contains("leaves the directory"), "{said}");
    let checkout = home.join("marketplaces/ours");
    assert!(checkout.join(".claude-plugin/marketplace.json").is_file());
    let listed: Value =
        serde_json::from_str(&ok(&yep(&home, &["marketplace", "list", "--json"]))).unwrap();
    assert_eq!(listed[0]["rev"], commit.as_str());
    assert_eq!(listed[0]["plugins"], 1);
    let plugins = ok(&yep(&home, &["marketplace", "list", "ours"]));
    assert!(plugins.starts_with("tidy  first line"), "{plugins:?}");
    assert!(!plugins.contains('\u{1b}'), "{plugins:?}");
    ok(&yep(&home, &["marketplace", "remove", "ours"]));
    assert!(!checkout.exists());
    let gone = yep(&home, &["marketplace", "list", "ours"]);
    assert!(!gone.status.success());
    assert!(text(&gone.stderr).contains("no marketplace named `ours`"));
}

/// The lock's entry for `name`.
fn locked(home: &Path, name: &str) -> toml::Table {
    let text = std::fs::read_to_string(home.join("extensions.lock")).unwrap();
    let lock: toml::Table = text.parse().unwrap();
    lock["extensions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e.as_table().unwrap().clone())
        .find(|e| e["name"].as_str() == Some(name))
        .unwrap_or_else(|| panic!("no {name} in {text}"))
}

/// `yep install <spec> --yes --json`: the one report, and what went to stderr.
fn install(home: &Path, spec: &str) -> (Value, String) {
    let out = yep(home, &["install", spec, "--yes", "--json"]);
    let reports: Value = serde_json::from_str(&ok(&out)).unwrap();
    (reports[0].clone(), text(&out.stderr))
}

/// Its failure: the exit code is 1 and stderr is returned.
fn refused(out: &std::process::Output) -> String {
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stdout));
    text(&out.stderr)
}

#[test]
fn every_corpus_plugin_installs_through_the_official_marketplace_and_rust_analyzers_server_is_recorded_from_its_entry()
 {
    let tmp = tempfile::tempdir().unwrap();
    let home = tmp.path().join("home");
    let corpus = claude_corpus(tmp.path());
    ok(&yep(
        &home,
        &["marketplace", "add", corpus.to_str().unwrap()],
    ));
    let market = "claude-plugins-official";
    for name in [
        "code-review",
        "commit-commands",
        "explanatory-output-style",
        "learning-output-style",
        "rust-analyzer-lsp",
        "security-guidance",
    ] {
        let (report, _) = install(&home, &format!("{name}@{market}"));
        assert_eq!(report["name"], name);
        assert_eq!(report["outcome"], "installed", "{report}");
        let summary = report["summary"].as_str().unwrap();
        assert!(
            summary.contains(&format!("listed    in marketplace {market} as {name}")),
            "{summary}"
        );
        let lock = locked(&home, name);
        assert_eq!(lock["claude"]["marketplace"]["entry"].as_str(), Some(name));
        assert_eq!(
            lock["source"]["path"].as_str(),
            Some(
                corpus
                    .join("plugins")
                    .join(name)
                    .canonicalize()
                    .unwrap()
                    .to_str()
                    .unwrap()
            )
        );
    }
    // The corpus's example-plugin is in no catalogue.
    let example = refused(&yep(
        &home,
        &["install", &format!("example-plugin@{market}"), "--yes"],
    ));
    assert!(
        example.contains(&format!(
            "marketplace `{market}` has no plugin `example-plugin`"
        )),
        "{example}"
    );

    // rust-analyzer-lsp has no files but a README: its entry is all of it.
    let (report, _) = install(&home, &format!("rust-analyzer-lsp@{market}"));
    assert_eq!(report["outcome"], "unchanged", "{report}");
    let lock = locked(&home, "rust-analyzer-lsp");
    let pin = &lock["claude"];
    assert_eq!(pin["lsp_servers"].as_array().unwrap().len(), 1);
    assert_eq!(pin["lsp_servers"][0].as_str(), Some("rust-analyzer"));
    assert_eq!(pin["manifest_less"].as_bool(), Some(true));
    let added: Value =
        serde_json::from_str(pin["marketplace"]["overrides"].as_str().unwrap()).unwrap();
    assert_eq!(
        added["lspServers"]["rust-analyzer"]["command"],
        "rust-analyzer"
    );
    let listed: Value = serde_json::from_str(&ok(&yep(&home, &["list", "--json"]))).unwrap();
    let row = listed
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["name"] == "rust-analyzer-lsp")
        .unwrap();
    assert_eq!(row["lsp_servers"], json!(["rust-analyzer"]));
    assert_eq!(row["contributes"], json!(["1 LSP server (not run)"]));
    assert_eq!(row["marketplace"], format!("rust-analyzer-lsp@{market}"));
    // Read again from its files and the recorded entry, it is as approved.
    assert_eq!(row["drifted"], false, "{row}");
    assert!(row["error"].is_null(), "{row}");
    let human = ok(&yep(&home, &["list"]));
    assert!(
        human.contains("  contributes 1 LSP server (not run)\n"),
        "{human}"
    );
    // It runs nothing, and enabling it says so.
    let enable = refused(&yep(&home, &["enable", "rust-analyzer-lsp"]));
    assert!(
        enable.contains(
            "`rust-analyzer-lsp` offers only an LSP server (rust-analyzer), which yep does not run: enabling it would run nothing"
        ),
        "{enable}"
    );
    // An update resolves it through the marketplace again: nothing changed.
    let update = ok(&yep(&home, &["update", "rust-analyzer-lsp"]));
    assert!(
        update.starts_with("rust-analyzer-lsp is up to date"),
        "{update}"
    );
}

/// A manifest-less plugin with one command, in `dir`.
fn tidy_plugin(dir: &Path, command: &str) {
    std::fs::create_dir_all(dir.join("commands")).unwrap();
    std::fs::write(
        dir.join(format!("commands/{command}.md")),
        "---\ndescription: tidy up\n---\nTidy the tree.\n",
    )
    .unwrap();
}

/// A marketplace `ours` in `dir` with `catalogue` as its `plugins`, and `renames`.
fn our_marketplace(dir: &Path, plugins: Value, renames: Value) -> PathBuf {
    std::fs::create_dir_all(dir.join(".claude-plugin")).unwrap();
    let catalogue =
        json!({"name": "ours", "owner": {"name": "us"}, "renames": renames, "plugins": plugins});
    std::fs::write(
        dir.join(".claude-plugin/marketplace.json"),
        serde_json::to_string_pretty(&catalogue).unwrap(),
    )
    .unwrap();
    dir.to_path_buf()
}

#[test]
fn a_renamed_plugin_installs_under_its_new_name_and_says_so_and_one_renamed_to_nothing_is_refused()
{
    let tmp = tempfile::tempdir().unwrap();
    let home = tmp.path().join("home");
    let market = our_marketplace(
        &tmp.path().join("market"),
        json!([{"name": "tidy", "source": "./plugins/tidy", "description": "keeps it tidy"}]),
        json!({"tidy-old": "tidy", "sweep": null}),
    );
    tidy_plugin(&market.join("plugins/tidy"), "tidy");
    ok(&yep(
        &home,
        &["marketplace", "add", market.to_str().unwrap()],
    ));
    let (report, said) = install(&home, "tidy-old@ours");
    assert_eq!(report["name"], "tidy");
    assert!(
        said.contains("note: `tidy-old` is called `tidy` there now, so it installs as `tidy`"),
        "{said}"
    );
    assert_eq!(
        locked(&home, "tidy")["claude"]["marketplace"]["entry"].as_str(),
        Some("tidy")
    );
    let gone = refused(&yep(&home, &["install", "sweep@ours", "--yes"]));
    assert!(
        gone.contains("plugin `sweep` is gone from marketplace `ours`"),
        "{gone}"
    );
}

#[test]
fn a_url_source_that_is_a_local_path_installs_from_that_repository_and_never_from_the_network() {
    let tmp = tempfile::tempdir().unwrap();
    let home = tmp.path().join("home");
    let repo = tmp.path().join("tidy-repo");
    tidy_plugin(&repo, "tidy");
    tidy_plugin(&repo.join("plugins/sweep"), "sweep");
    git(&repo, &["init", "-q"]);
    git(&repo, &["add", "."]);
    git(&repo, &["commit", "-qm", "tidy"]);
    let commit = git(&repo, &["rev-parse", "HEAD"]);
    let path = repo.to_str().unwrap();
    let market = our_marketplace(
        &tmp.path().join("market"),
        json!([
            {"name": "tidy", "source": {"source": "url", "url": path}},
            {"name": "sweep", "source": {"source": "git-subdir", "url": path, "path": "plugins/sweep"}},
            {"name": "here", "source": {"source": "url", "url": "./tidy-repo"}},
            {"name": "up", "source": {"source": "url", "url": "../tidy-repo"}},
            {"name": "home", "source": {"source": "url", "url": "~/tidy-repo"}},
            {"name": "nowhere", "source": {"source": "url", "url": tmp.path().join("none").to_str().unwrap()}},
        ]),
        json!({}),
    );
    let added = ok(&yep(
        &home,
        &["marketplace", "add", market.to_str().unwrap()],
    ));
    assert!(
        added.starts_with("added marketplace ours (2 plugins, 4 skipped)"),
        "{added}"
    );
    assert!(
        added.contains("here: its `url` \"./tidy-repo\" is a relative path")
            && added.contains("up: its `url` \"../tidy-repo\" is a relative path")
            && added.contains("home: its `url` \"~/tidy-repo\" is a path under `~`")
            && added.contains("is a local path with no repository there"),
        "{added}"
    );
    assert!(!added.contains("github.com"), "{added}");

    let (report, said) = install(&home, "tidy@ours");
    assert_eq!(report["name"], "tidy", "{said}");
    assert_eq!(
        report["source"],
        format!("git file://{path}@{}", &commit[..12]),
        "{said}"
    );
    let (report, said) = install(&home, "sweep@ours");
    assert_eq!(
        report["source"],
        format!("git file://{path}@{} (plugins/sweep)", &commit[..12]),
        "{said}"
    );
    let refused_here = refused(&yep(&home, &["install", "here@ours", "--yes"]));
    assert!(
        refused_here.contains("is a relative path") && !refused_here.contains("github.com"),
        "{refused_here}"
    );
}

#[cfg(unix)]
#[test]
fn a_relative_source_that_leaves_the_marketplace_is_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let home = tmp.path().join("home");
    let outside = tmp.path().join("outside");
    tidy_plugin(&outside, "tidy");
    let market = our_marketplace(
        &tmp.path().join("market"),
        json!([
            {"name": "away", "source": "../outside"},
            {"name": "linked", "source": "./plugins/linked"},
        ]),
        json!({}),
    );
    std::fs::create_dir_all(market.join("plugins")).unwrap();
    std::os::unix::fs::symlink(&outside, market.join("plugins/linked")).unwrap();
    ok(&yep(
        &home,
        &["marketplace", "add", market.to_str().unwrap()],
    ));
    let away = refused(&yep(&home, &["install", "away@ours", "--yes"]));
    assert!(
        away.contains("marketplace `ours` lists `away`, but yep cannot install it")
            && away.contains("\"../outside\" leaves the directory it is relative to"),
        "{away}"
    );
    let linked = refused(&yep(&home, &["install", "linked@ours", "--yes"]));
    assert!(
        linked.contains(
            "the source of `linked` in marketplace `ours`, \"plugins/linked\", leaves the marketplace"
        ),
        "{linked}"
    );
    assert!(!home.join("extensions.lock").exists());
    assert!(!home.join("extensions/linked").exists());
}

/// A registry that has nothing: every request is a 404, and its path is kept.
struct EmptyRegistry {
    url: String,
    requests: std::sync::Arc<std::sync::Mutex<Vec<String>>>,
}

impl EmptyRegistry {
    fn start() -> EmptyRegistry {
        use std::io::{BufRead, Write};
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let requests = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        let log = requests.clone();
        std::thread::spawn(move || {
            for mut stream in listener.incoming().flatten() {
                let mut reader = std::io::BufReader::new(&stream);
                let mut line = String::new();
                let _ = reader.read_line(&mut line);
                if let Some(path) = line.split_whitespace().nth(1) {
                    log.lock().unwrap().push(path.to_string());
                }
                // The rest of the head, so the reply is read as one.
                while reader.read_line(&mut line).is_ok_and(|n| n > 2) {}
                let _ = stream.write_all(
                    b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
                );
            }
        });
        EmptyRegistry { url, requests }
    }

    /// `yep args` against it (never crates.io, never through a proxy).
    #[allow(clippy::disallowed_methods)] // running the CLI under test
    fn yep(&self, home: &Path, args: &[&str]) -> std::process::Output {
        let mut command = crate::common::yep_command();
        command
            .args(args)
            .env("YEP_HOME", home)
            .env("YEP_SPARSE_INDEX", format!("{}/index/", self.url))
            .env("YEP_CRATE_DOWNLOAD", format!("{}/dl/{{crate}}", self.url))
            .env_remove("RUST_LOG")
            .stdin(std::process::Stdio::null());
        for var in [
            "http_proxy",
            "HTTP_PROXY",
            "https_proxy",
            "HTTPS_PROXY",
            "all_proxy",
            "ALL_PROXY",
        ] {
            command.env_remove(var);
        }
        command.output().unwrap()
    }
}

#[test]
fn name_at_version_still_means_crates_io_when_no_marketplace_has_that_name() {
    let tmp = tempfile::tempdir().unwrap();
    let home = tmp.path().join("home");
    let market = our_marketplace(
        &tmp.path().join("market"),
        json!([{"name": "tidy", "source": "./plugins/tidy"}]),
        json!({}),
    );
    tidy_plugin(&market.join("plugins/tidy"), "tidy");
    ok(&yep(
        &home,
        &["marketplace", "add", market.to_str().unwrap()],
    ));
    let registry = EmptyRegistry::start();
    let said = refused(&registry.yep(&home, &["install", "tidy@nope", "--yes"]));
    assert!(
        said.contains(
            "no extension `tidy` on crates.io (tried yep-extension-tidy and yolop-extension-tidy)"
        ),
        "{said}"
    );
    assert!(
        said.contains("hint: `tidy@nope` means version nope of `tidy` on crates.io, as no marketplace named `nope` is added: `yep marketplace add <dir | git-url>` adds one"),
        "{said}"
    );
    assert_eq!(
        *registry.requests.lock().unwrap(),
        [
            "/index/ye/p-/yep-extension-tidy",
            "/index/yo/lo/yolop-extension-tidy"
        ]
    );
    // A version is no marketplace name: no hint.
    let said = refused(&registry.yep(&home, &["install", "tidy@0.2.1", "--yes"]));
    assert!(
        said.contains("on crates.io") && !said.contains("hint:"),
        "{said}"
    );
    assert!(!home.join("extensions.lock").exists());
    // The marketplace that is added still installs it.
    let installed = registry.yep(&home, &["install", "tidy@ours", "--yes"]);
    assert!(ok(&installed).starts_with("installed tidy from path "));
    assert_eq!(registry.requests.lock().unwrap().len(), 4);
}

#[test]
fn an_update_follows_a_git_marketplace_to_a_new_rev_and_shows_the_diff() {
    let tmp = tempfile::tempdir().unwrap();
    let home = tmp.path().join("home");
    let repo = tmp.path().join("market");
    let entry = json!({"name": "tidy", "source": "./plugins/tidy"});
    our_marketplace(&repo, json!([entry]), json!({}));
    tidy_plugin(&repo.join("plugins/tidy"), "tidy");
    git(&repo, &["init", "-q"]);
    git(&repo, &["add", "."]);
    git(&repo, &["commit", "-qm", "tidy"]);
    let first = git(&repo, &["rev-parse", "HEAD"]);
    let url = format!("file://{}", repo.display());
    ok(&yep(&home, &["marketplace", "add", &url]));
    let (report, _) = install(&home, "tidy@ours");
    assert_eq!(
        report["source"],
        format!("git {url}@{} (plugins/tidy)", &first[..12])
    );
    let lock = locked(&home, "tidy");
    assert_eq!(lock["source"]["rev"].as_str(), Some(first.as_str()));
    assert_eq!(lock["source"]["subdir"].as_str(), Some("plugins/tidy"));

    // The marketplace moves on: a second command in the plugin, and a hook its entry adds.
    tidy_plugin(&repo.join("plugins/tidy"), "sweep");
    let mut entry = entry;
    entry["hooks"] = json!({"hooks": {"PreToolUse": [
        {"matcher": "Bash", "hooks": [{"type": "command", "command": "echo guard"}]}
    ]}});
    our_marketplace(&repo, json!([entry]), json!({}));
    git(&repo, &["add", "."]);
    git(&repo, &["commit", "-qm", "sweep and guard"]);
    let second = git(&repo, &["rev-parse", "HEAD"]);
    let before = std::fs::read_to_string(home.join("extensions.lock")).unwrap();
    let asked = refused(&yep(&home, &["update", "tidy"]));
    assert!(
        asked.contains("changes against what you approved:")
            && asked.contains("+ command /tidy:sweep")
            && asked.contains("+ hook PreToolUse on Bash: `echo guard`"),
        "{asked}"
    );
    assert_eq!(
        std::fs::read_to_string(home.join("extensions.lock")).unwrap(),
        before
    );
    let updated = yep(&home, &["update", "tidy", "--yes"]);
    assert!(
        ok(&updated).starts_with("updated tidy from git "),
        "{}",
        text(&updated.stdout)
    );
    assert!(text(&updated.stderr).contains("+ command /tidy:sweep"));
    let lock = locked(&home, "tidy");
    assert_eq!(lock["source"]["rev"].as_str(), Some(second.as_str()));
    assert_eq!(
        lock["claude"]["hooks"][0]["command"].as_str(),
        Some("echo guard")
    );
    let listed: Value =
        serde_json::from_str(&ok(&yep(&home, &["marketplace", "list", "--json"]))).unwrap();
    assert_eq!(listed[0]["rev"], second.as_str());
}

/// A bare name that an added marketplace lists is that plugin: `yep install tidy` installs it
/// from there and asks crates.io nothing. Listed by two, the user is asked which; listed by
/// none, crates.io as ever.
#[test]
fn a_bare_name_an_added_marketplace_lists_installs_from_it_and_two_are_asked_about() {
    let tmp = tempfile::tempdir().unwrap();
    let home = tmp.path().join("home");
    let market = our_marketplace(
        &tmp.path().join("market"),
        json!([{"name": "tidy", "source": "./plugins/tidy"}]),
        json!({}),
    );
    tidy_plugin(&market.join("plugins/tidy"), "tidy");
    ok(&yep(
        &home,
        &["marketplace", "add", market.to_str().unwrap()],
    ));
    let registry = EmptyRegistry::start();
    let installed = registry.yep(&home, &["install", "tidy", "--yes"]);
    assert!(ok(&installed).starts_with("installed tidy from path "));
    assert_eq!(
        locked(&home, "tidy")["claude"]["marketplace"]["name"].as_str(),
        Some("ours")
    );
    assert!(registry.requests.lock().unwrap().is_empty());

    // A second marketplace that lists it too: which one is for the user to say.
    let other = tmp.path().join("other");
    std::fs::create_dir_all(other.join(".claude-plugin")).unwrap();
    std::fs::write(
        other.join(".claude-plugin/marketplace.json"),
        json!({"name": "theirs", "owner": {"name": "them"},
               "plugins": [{"name": "tidy", "source": "./tidy"}]})
        .to_string(),
    )
    .unwrap();
    tidy_plugin(&other.join("tidy"), "tidy");
    ok(&yep(
        &home,
        &["marketplace", "add", other.to_str().unwrap()],
    ));
    let said = refused(&registry.yep(&home, &["install", "tidy", "--yes", "--replace"]));
    assert!(
        said.contains("`tidy` is listed by the marketplaces `ours` and `theirs`: say which one, as `yep install tidy@<marketplace>`"),
        "{said}"
    );
    // A name no marketplace lists goes to crates.io.
    let said = refused(&registry.yep(&home, &["install", "sweep", "--yes"]));
    assert!(said.contains("no extension `sweep` on crates.io"), "{said}");
    assert!(!registry.requests.lock().unwrap().is_empty());
}
