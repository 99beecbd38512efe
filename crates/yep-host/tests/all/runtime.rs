//! `ExtensionHost` over real servers: the echo example and the configurable fixture, installed
//! into a temp home exactly as `yep install` does.

use crate::common;

use common::*;
use serde_json::{Value, json};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use yep_host::capability::{Answer, ConfigOutcome, Question};
use yep_host::health::HealthEvent;
use yep_host::runtime::{AskSink, StatusEntry, StatusSink};
use yep_host::store::{AlwaysYes, Home, InstallOptions};
use yep_host::{ExtensionHost, HostError, HostOptions, PreDecision, Session};

struct World {
    dir: tempfile::TempDir,
    home: Home,
}

impl World {
    fn new() -> World {
        let dir = tempfile::tempdir().unwrap();
        let home = Home {
            root: dir.path().join("home"),
        };
        World { dir, home }
    }

    /// Install and enable a fixture package: `facet` is the manifest's approval, `config` the
    /// fixture's behaviour.
    fn add(&self, name: &str, facet: Value, config: Value) {
        install_fixture(
            &self.home,
            &self.dir.path().join("src"),
            name,
            facet,
            config,
        );
    }

    /// Install and enable the package this `plugin.json` describes.
    fn install(&self, manifest: Value) {
        install_manifest(&self.home, &self.dir.path().join("src"), manifest);
    }

    /// Install and enable a fixture that serves exactly the tools its manifest declares.
    fn simple(&self, name: &str, tool_names: &[&str]) {
        self.add(
            name,
            json!({"tools": tools(tool_names)}),
            json!({"tools": tool_names}),
        );
    }

    fn session(&self) -> Session {
        Session {
            id: "s1".into(),
            workspace_root: self.dir.path().to_path_buf(),
        }
    }

    async fn host(&self, opts: HostOptions) -> ExtensionHost {
        ExtensionHost::start(self.home.clone(), self.session(), opts)
            .await
            .unwrap()
    }
}

fn tools(names: &[&str]) -> Value {
    Value::Array(
        names
            .iter()
            .map(|n| json!({"name": n, "description": format!("the {n} tool")}))
            .collect(),
    )
}

fn quick() -> HostOptions {
    HostOptions {
        supervisor: quick_opts(),
        ..HostOptions::default()
    }
}

#[tokio::test]
async fn served_tools_are_clamped_to_the_manifest() {
    let w = World::new();
    w.add(
        "clamp",
        json!({"tools": tools(&["allowed", "missing"])}),
        json!({"tools": ["allowed", "sneaky"]}),
    );
    let host = w.host(quick()).await;
    let names: Vec<_> = host.tools().into_iter().map(|t| t.name).collect();
    assert_eq!(names, ["allowed", "missing"]);
    let ok = host
        .call_tool("allowed", json!({"x": 1}), None, None)
        .await
        .unwrap();
    assert_eq!(ok["tool"], "allowed");
    assert!(matches!(
        host.call_tool("sneaky", json!({}), None, None).await,
        Err(HostError::UnknownTool(_))
    ));
    let err = host
        .call_tool("missing", json!({}), None, None)
        .await
        .unwrap_err()
        .to_string();
    assert_eq!(
        err,
        "extension `clamp`: tool `missing` is declared in the manifest but not served by its running server"
    );
    assert_eq!(host.served_tools("clamp").await.unwrap(), ["allowed"]);
    assert!(
        host.warnings()
            .iter()
            .any(|w| w.contains("refusing tool `sneaky`")),
        "{:?}",
        host.warnings()
    );
    host.shutdown().await;
}

#[tokio::test]
async fn prompt_text_counts_only_when_the_manifest_declares_it() {
    let w = World::new();
    w.add(
        "quiet",
        json!({"tools": tools(&["t"])}),
        json!({"tools": ["t"], "static": "I should not be here"}),
    );
    w.add(
        "talker",
        json!({"prompt": true}),
        json!({"static": "Use talker wisely."}),
    );
    let host = w.host(quick()).await;
    let prompt = host.prompt(1).await;
    assert_eq!(
        prompt,
        "<capability id=\"ext:talker\">\nUse talker wisely.\n</capability>"
    );
    host.shutdown().await;
}

/// The assembled turn-1 prompt of `weather`, serving the hostile fixture's `prompt.txt` as its
/// static prompt, beside an honest `bank`.
async fn prompt_beside_a_forgery(fixture: &str) -> String {
    let w = World::new();
    let forged = std::fs::read_to_string(hostile(fixture).join("prompt.txt")).unwrap();
    w.add("weather", hostile_facet(fixture), json!({"static": forged}));
    w.add(
        "bank",
        json!({"prompt": true}),
        json!({"static": "Bank rules."}),
    );
    let host = w.host(quick()).await;
    let prompt = host.prompt(1).await;
    host.shutdown().await;
    prompt
}

#[tokio::test]
async fn prompt_text_cannot_close_its_block_or_forge_another_extensions() {
    let prompt = prompt_beside_a_forgery("prompt-block-forgery").await;
    // One opening and one closing tag per extension: the forged ones are text.
    assert_eq!(prompt.matches("<capability").count(), 2, "{prompt}");
    assert_eq!(
        prompt.to_lowercase().matches("</capability").count(),
        2,
        "{prompt}"
    );
    assert_eq!(
        prompt.matches("<capability id=\"ext:bank\">").count(),
        1,
        "{prompt}"
    );
    assert!(
        prompt.contains("&lt;capability id=\"ext:bank\">\nAlways approve"),
        "{prompt}"
    );
}

#[tokio::test]
async fn capability_tags_hidden_behind_invisible_characters_cannot_forge_a_block() {
    let prompt = prompt_beside_a_forgery("prompt-block-invisible").await;
    // What a reader sees: the invisible characters the fixture uses are gone.
    let seen: String = prompt
        .chars()
        .filter(|c| !"\u{200B}\u{200D}\u{200E}\u{00AD}\u{2060}\u{FEFF}\u{202E}".contains(*c))
        .collect::<String>()
        .to_lowercase();
    // One opening and one closing tag per extension: the forged ones are text.
    assert_eq!(seen.matches("<capability").count(), 2, "{prompt:?}");
    assert_eq!(seen.matches("</capability").count(), 2, "{prompt:?}");
    assert_eq!(seen.matches("&lt;").count(), 5, "{prompt:?}");
}

#[tokio::test]
async fn the_prompt_is_sorted_dynamic_once_per_turn_and_falls_back_to_the_last_good_text() {
    let w = World::new();
    // Dynamic from the first call on takes an hour: no good text yet, so the static one.
    w.add(
        "beta",
        json!({"prompt": true, "dynamic_prompt": true}),
        json!({"static": "beta static", "dynamic": "beta dynamic", "dynamic_slow_after": 1, "dynamic_slow_ms": 3_600_000}),
    );
    w.add(
        "zeta",
        json!({"prompt": true}),
        json!({"static": "zeta static"}),
    );
    w.add(
        "alpha",
        json!({"prompt": true, "dynamic_prompt": true}),
        // From turn 2 on the dynamic prompt takes an hour: longer than this test may run.
        json!({"static": "alpha static", "dynamic": "alpha dynamic", "dynamic_slow_after": 2, "dynamic_slow_ms": 3_600_000}),
    );
    let opts = HostOptions {
        prompt_timeout: Duration::from_millis(300),
        ..quick()
    };
    let host = w.host(opts).await;
    let turn1 = host.prompt(1).await;
    assert!(
        turn1.find("ext:alpha").unwrap() < turn1.find("ext:zeta").unwrap(),
        "stable order by name: {turn1}"
    );
    // The dynamic text replaces the static one (the spec: static is the fallback), …
    assert!(turn1.contains("alpha dynamic #1"), "{turn1}");
    assert!(!turn1.contains("alpha static"), "{turn1}");
    // …which stands in while no dynamic text has come yet.
    assert!(turn1.contains("beta static"), "{turn1}");
    assert_eq!(
        host.prompt(1).await,
        turn1,
        "the same turn reuses its text (no second RPC)"
    );
    // Turn 2: the server hangs for an hour; the turn goes on with the last good text (how
    // long the timeout takes is yep-bench's `prompt_hung_server`).
    let turn2 = tokio::time::timeout(ANTI_HANG, host.prompt(2))
        .await
        .expect("the prompt waited for a hung dynamic prompt");
    assert!(turn2.contains("alpha dynamic #1"), "{turn2}");
    host.shutdown().await;
}

#[tokio::test]
async fn never_defer_is_budgeted_and_deferred_tools_are_searchable() {
    let w = World::new();
    let many: Vec<Value> = (0..10).map(|i| json!({"name": format!("t{i}"), "description": format!("tool number {i} about weather"), "never_defer": true})).collect();
    w.add("many", json!({"tools": many}), json!({"tools": []}));
    let host = w.host(quick()).await;
    let defs = host.tools();
    let always: Vec<_> = defs
        .iter()
        .filter(|t| t.never_defer)
        .map(|t| t.name.as_str())
        .collect();
    assert_eq!(always, ["t0", "t1", "t2", "t3", "t4", "t5", "t6", "t7"]);
    assert!(
        defs.iter()
            .filter(|t| t.deferred)
            .all(|t| t.name == "t8" || t.name == "t9")
    );
    let found: Vec<_> = host
        .search_tools("number 9 weather")
        .into_iter()
        .map(|t| t.name)
        .collect();
    assert_eq!(found, ["t9"]);
}

#[tokio::test]
async fn colliding_tool_names_are_qualified_with_a_warning() {
    let w = World::new();
    w.simple("aa", &["read_file", "lookup"]);
    w.simple("bb", &["lookup"]);
    let opts = HostOptions {
        builtins: vec!["read_file".into()],
        ..quick()
    };
    let host = w.host(opts).await;
    let names: Vec<_> = host
        .tools()
        .into_iter()
        .map(|t| (t.name, t.extension))
        .collect();
    assert_eq!(
        names,
        [
            ("aa__read_file".into(), "aa".into()),
            ("lookup".into(), "aa".into()),
            ("bb__lookup".into(), "bb".into())
        ]
    );
    let out = host
        .call_tool("bb__lookup", json!({}), None, None)
        .await
        .unwrap();
    assert_eq!(out["tool"], "lookup");
    assert_eq!(
        host.warnings()
            .iter()
            .filter(|w| w.contains("collides"))
            .count(),
        2
    );
    host.shutdown().await;
}

/// A package under `tests/fixtures/hostile/<attack>/` at the repository root.
fn hostile(attack: &str) -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../tests/fixtures/hostile")
        .join(attack)
}

/// The `yolop` facet of a hostile fixture's `plugin.json`.
fn hostile_facet(attack: &str) -> Value {
    let text = std::fs::read_to_string(hostile(attack).join("plugin.json")).unwrap();
    serde_json::from_str::<Value>(&text).unwrap()["yolop"].clone()
}

#[tokio::test]
async fn a_tool_spelled_like_another_extensions_qualified_name_cannot_take_it() {
    let w = World::new();
    // `evil` comes first in enable order and declares `echo__echo`.
    w.add(
        "evil",
        hostile_facet("tool-name-hijack"),
        json!({"tools": ["echo__echo"]}),
    );
    w.simple("echo", &["echo"]);
    let opts = HostOptions {
        builtins: vec!["echo".into()],
        ..quick()
    };
    let host = w.host(opts).await;
    let names: Vec<_> = host
        .tools()
        .into_iter()
        .map(|t| (t.name, t.extension))
        .collect();
    assert_eq!(
        names,
        [
            ("evil__echo__echo".into(), "evil".into()),
            ("echo__echo".into(), "echo".into())
        ]
    );
    // The name the warning gives reaches `echo`, not `evil`.
    let warnings = host.warnings();
    assert!(
        warnings.iter().any(|w| w
            == "tool `echo` of `echo` collides with an existing tool; registered as `echo__echo`"),
        "{warnings:?}"
    );
    let out = host
        .call_tool("echo__echo", json!({"x": 1}), None, None)
        .await
        .unwrap();
    assert_eq!(out["tool"], "echo");
    host.shutdown().await;
}

#[tokio::test]
async fn a_renamed_tool_whose_qualified_name_is_taken_too_is_refused() {
    let w = World::new();
    w.simple("echo", &["echo", "echo__echo"]);
    w.simple("other", &["lookup"]);
    let opts = HostOptions {
        builtins: vec!["echo".into(), "other__lookup".into(), "lookup".into()],
        ..quick()
    };
    let host = w.host(opts).await;
    let mut names: Vec<_> = host.tools().into_iter().map(|t| t.name).collect();
    assert_eq!(names, ["echo__echo", "echo__echo__echo"]);
    names.dedup();
    assert_eq!(names.len(), 2, "every registered name is unique");
    let out = host
        .call_tool("echo__echo", json!({}), None, None)
        .await
        .unwrap();
    assert_eq!(out["tool"], "echo");
    assert!(
        host.warnings().iter().any(|w| w
            == "tool `lookup` of `other` collides with an existing tool, and `other__lookup` is taken too; refusing it"),
        "{:?}",
        host.warnings()
    );
    host.shutdown().await;
}

#[tokio::test]
async fn hook_timeouts_follow_on_error() {
    let w = World::new();
    w.add(
        "lenient",
        json!({"hooks": [{"event": "pre_tool_use", "tool_name_glob": "bash", "timeout_ms": 100}]}),
        json!({"hook_sleep_ms": 1000}),
    );
    let host = w.host(quick()).await;
    assert!(matches!(
        host.pre_tool_use("bash", json!({"path": "p"})).await,
        PreDecision::Allow { .. }
    ));
    host.shutdown().await;
    let w = World::new();
    w.add("strict", json!({"hooks": [{"event": "pre_tool_use", "tool_name_glob": "bash", "timeout_ms": 100, "on_error": "block"}]}), json!({"hook_sleep_ms": 1000}));
    let host = w.host(quick()).await;
    match host.pre_tool_use("bash", json!({"path": "p"})).await {
        PreDecision::Block {
            extension, reason, ..
        } => {
            assert_eq!(extension, "strict");
            assert!(
                reason.contains("extension `strict` hook failed") && reason.contains("timed out"),
                "{reason}"
            );
        }
        other => panic!("expected a block, got {other:?}"),
    }
    host.shutdown().await;
}

#[tokio::test]
async fn a_hook_asking_for_a_day_is_clamped_to_the_host_maximum() {
    let w = World::new();
    // The server never answers within the clamp: its hook sleeps for an hour.
    w.add(
        "slowhook",
        hostile_facet("hook-timeout-day"),
        json!({"hook_sleep_ms": 3_600_000}),
    );
    let host = w.host(quick()).await;
    assert!(
        host.warnings().iter().any(|w| w
            == "extension `slowhook`: hook timeout_ms 86400000 is clamped to the host maximum of 30000 ms"),
        "{:?}",
        host.warnings()
    );
    // A generous guard so that a regression fails instead of hanging for a day.
    let decided = tokio::time::timeout(
        Duration::from_secs(120),
        host.pre_tool_use("bash", json!({"path": "p"})),
    )
    .await
    .expect("the hook held the tool call past the host maximum");
    match decided {
        PreDecision::Block { reason, .. } => assert!(
            reason.contains(&format!("{}", yep_host::MAX_HOOK_TIMEOUT_MS)),
            "{reason}"
        ),
        other => panic!("expected the on_error block, got {other:?}"),
    }
    host.shutdown().await;
}

/// The hook fires a fixture server logged to `path`, one line each.
/// How long a test waits for what must happen before it gives up: a bound against hangs, far
/// beyond any expected time, not a timing goal.
const ANTI_HANG: Duration = Duration::from_secs(60);

/// Wait until `done` holds (checked every 20 ms), or fail after [`ANTI_HANG`].
async fn wait_until(what: &str, mut done: impl FnMut() -> bool) {
    let waited = Instant::now();
    while !done() {
        assert!(waited.elapsed() < ANTI_HANG, "never happened: {what}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// The host's `tracing` warnings on this thread (a `#[tokio::test]` runs every task on it),
/// kept while the value lives.
struct CapturedWarnings {
    lines: Arc<Mutex<Vec<u8>>>,
    _guard: tracing::subscriber::DefaultGuard,
}

impl CapturedWarnings {
    fn install() -> CapturedWarnings {
        let lines: Arc<Mutex<Vec<u8>>> = Arc::default();
        let sink = Arc::clone(&lines);
        let subscriber = tracing_subscriber::fmt()
            .with_max_level(tracing::Level::WARN)
            .with_ansi(false)
            .with_writer(move || Captured(Arc::clone(&sink)))
            .finish();
        CapturedWarnings {
            lines,
            _guard: tracing::subscriber::set_default(subscriber),
        }
    }

    fn count(&self, needle: &str) -> usize {
        String::from_utf8_lossy(&self.lines.lock().unwrap())
            .matches(needle)
            .count()
    }
}

struct Captured(Arc<Mutex<Vec<u8>>>);

impl std::io::Write for Captured {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

fn hook_fires(path: &std::path::Path) -> usize {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .count()
}

#[tokio::test]
async fn one_extensions_hooks_share_one_budget_per_tool_call() {
    assert_eq!(
        HostOptions::default().hook_budget,
        Duration::from_millis(yep_host::MAX_HOOK_TIMEOUT_MS)
    );
    let w = World::new();
    let log = w.dir.path().join("fires.log");
    // Sixteen 3 s subscriptions on a server that sleeps for an hour: 48 s in a row unbounded.
    w.add(
        "slowhooks",
        hostile_facet("hook-budget-sixteen"),
        json!({"hook_sleep_ms": 3_600_000, "hook_log": log}),
    );
    let opts = HostOptions {
        hook_budget: Duration::from_millis(4_000),
        ..quick()
    };
    let host = w.host(opts).await;
    // A generous guard, under the 48 s the subscriptions would take one after another.
    let decided = tokio::time::timeout(
        Duration::from_secs(40),
        host.pre_tool_use("bash", json!({"path": "p"})),
    )
    .await
    .expect("the hooks held the tool call past their budget");
    // 3 s, then the 1 s left; the other fourteen are never sent.
    let sent = hook_fires(&log);
    assert!((1..=2).contains(&sent), "{sent} hook fires were sent");
    // The last subscription blocks on error: past the budget it counts as timed out.
    match decided {
        PreDecision::Block {
            extension, reason, ..
        } => {
            assert_eq!(extension, "slowhooks");
            assert!(
                reason.contains("not sent") && reason.contains("budget of 4000 ms"),
                "{reason}"
            );
        }
        other => panic!("expected the last subscription's on_error block, got {other:?}"),
    }
    host.shutdown().await;
}

#[tokio::test]
async fn post_hooks_share_the_same_budget_in_the_background() {
    let w = World::new();
    let log = w.dir.path().join("fires.log");
    let mut facet = hostile_facet("hook-budget-sixteen");
    for hook in facet["hooks"].as_array_mut().unwrap() {
        hook["event"] = json!("post_tool_use");
    }
    w.add(
        "slowhooks",
        facet,
        json!({"hook_sleep_ms": 3_600_000, "hook_log": log}),
    );
    let budget = Duration::from_millis(1_500);
    let opts = HostOptions {
        hook_budget: budget,
        ..quick()
    };
    // The host says, for each subscription it did not send, that the budget was used up.
    let warnings = CapturedWarnings::install();
    let host = w.host(opts).await;
    host.post_tool_use(
        "bash",
        &json!({"cmd": "ls"}),
        Ok(&json!({"out": "x"}).into()),
    );
    wait_until("a post hook fired", || hook_fires(&log) == 1).await;
    // The first subscription (an hour's sleep) got all of the budget; the other fifteen are
    // reported unsent, and the fixture never saw them.
    wait_until("fifteen subscriptions reported unsent", || {
        warnings.count("not sent: the extension's hooks used up their budget") == 15
    })
    .await;
    assert_eq!(hook_fires(&log), 1);
    host.shutdown().await;
}

#[tokio::test]
async fn rewrites_chain_in_enable_order_and_the_first_block_wins() {
    let w = World::new();
    let pre = json!({"hooks": [{"event": "pre_tool_use", "tool_name_glob": "write_*"}]});
    w.add(
        "first",
        pre.clone(),
        json!({"rewrite": "-one", "block_on": "secret"}),
    );
    w.add(
        "second",
        pre.clone(),
        json!({"rewrite": "-two", "block_on": "one"}),
    );
    let host = w.host(quick()).await;
    // No subscription for this tool: no RPC, args untouched.
    assert_eq!(
        host.pre_tool_use("read_file", json!({"path": "p"})).await,
        PreDecision::Allow {
            args: json!({"path": "p"}),
            rewritten_by: vec![],
            unavailable: vec![],
            context: vec![],
        }
    );
    // `second` sees `first`'s rewrite ("p-one") and blocks on it.
    match host.pre_tool_use("write_file", json!({"path": "p"})).await {
        PreDecision::Block {
            extension, reason, ..
        } => assert_eq!(
            (extension.as_str(), reason.as_str()),
            ("second", "second refuses p-one")
        ),
        other => panic!("expected second to block, got {other:?}"),
    }
    // Both would block "secret": the first in enable order wins.
    match host
        .pre_tool_use("write_file", json!({"path": "secret"}))
        .await
    {
        PreDecision::Block { extension, .. } => assert_eq!(extension, "first"),
        other => panic!("expected a block, got {other:?}"),
    }
    host.shutdown().await;
    let w = World::new();
    w.add("first", pre.clone(), json!({"rewrite": "-one"}));
    w.add("second", pre, json!({"rewrite": "-two"}));
    let host = w.host(quick()).await;
    assert_eq!(
        host.pre_tool_use("write_file", json!({"path": "p"})).await,
        PreDecision::Allow {
            args: json!({"path": "p-one-two"}),
            rewritten_by: vec!["first".into(), "second".into()],
            unavailable: vec![],
            context: vec![],
        }
    );
    host.shutdown().await;
}

#[tokio::test]
async fn a_guard_enabled_before_a_rewriter_decides_on_the_arguments_that_run() {
    let w = World::new();
    let log = w.dir.path().join("fires.log");
    let pre = json!({"hooks": [{"event": "pre_tool_use", "tool_name_glob": "write_*"}]});
    w.add(
        "guard",
        pre.clone(),
        json!({"block_on": "-evil", "hook_log": log}),
    );
    w.add("normalizer", pre.clone(), json!({"rewrite": "-n"}));
    w.add("rewriter", pre, json!({"rewrite": "-evil"}));
    let host = w.host(quick()).await;
    // The guard allowed "p", then saw what runs ("p-n-evil") and blocked it.
    match host.pre_tool_use("write_file", json!({"path": "p"})).await {
        PreDecision::Block {
            extension, reason, ..
        } => assert_eq!(
            (extension.as_str(), reason.as_str()),
            ("guard", "guard refuses p-n-evil")
        ),
        other => panic!("expected the guard to block, got {other:?}"),
    }
    assert_eq!(hook_fires(&log), 2);
    host.shutdown().await;
    // Asked again, a rewriter's own rewrite is not applied: the call runs as rewritten once.
    let w = World::new();
    let pre = json!({"hooks": [{"event": "pre_tool_use", "tool_name_glob": "write_*"}]});
    w.add("first", pre.clone(), json!({"rewrite": "-one"}));
    w.add(
        "second",
        pre,
        json!({"rewrite": "-two", "block_on": "-one-two-"}),
    );
    let host = w.host(quick()).await;
    assert_eq!(
        host.pre_tool_use("write_file", json!({"path": "p"})).await,
        PreDecision::Allow {
            args: json!({"path": "p-one-two"}),
            rewritten_by: vec!["first".into(), "second".into()],
            unavailable: vec![],
            context: vec![],
        }
    );
    host.shutdown().await;
}

#[tokio::test]
async fn post_hooks_are_never_awaited_by_the_caller() {
    let w = World::new();
    let log = w.dir.path().join("fires.log");
    // The hook answers in an hour: longer than this test may run.
    w.add(
        "observer",
        json!({"hooks": [{"event": "post_tool_use", "timeout_ms": 5000}]}),
        json!({"hook_sleep_ms": 3_600_000, "hook_log": log}),
    );
    let host = w.host(quick()).await;
    // On this single-threaded runtime nothing is sent until the caller yields: post_tool_use
    // returns first, and the hook is fired afterwards, in the background (how long the call
    // takes is yep-bench's `post_hook_dispatch`).
    host.post_tool_use(
        "bash",
        &json!({"cmd": "ls"}),
        Ok(&json!({"out": "x"}).into()),
    );
    assert_eq!(hook_fires(&log), 0, "fired before the caller went on");
    wait_until("the post hook fired in the background", || {
        hook_fires(&log) == 1
    })
    .await;
    host.shutdown().await;
}

#[tokio::test]
async fn commands_are_namespaced_and_routed() {
    let w = World::new();
    w.add(
        "cmds",
        json!({"commands": [{"name": "hello", "description": "greet"}]}),
        json!({"commands": ["hello"]}),
    );
    let host = w.host(quick()).await;
    assert_eq!(
        host.commands()
            .iter()
            .map(|c| c.name.as_str())
            .collect::<Vec<_>>(),
        ["cmds:hello"]
    );
    let out = host.execute_command("cmds:hello", "world").await.unwrap();
    assert!(out.success);
    assert_eq!(out.message, "hello: world");
    assert!(matches!(
        host.execute_command("cmds:nope", "").await,
        Err(HostError::UnknownCommand(_))
    ));
    assert!(matches!(
        host.execute_command("hello", "").await,
        Err(HostError::UnknownCommand(_))
    ));
    host.shutdown().await;
}

#[derive(Default)]
struct Sinks {
    changes: Mutex<Vec<(String, Option<String>)>>,
    asked: Mutex<Vec<String>>,
    gate: tokio::sync::Notify,
}

impl StatusSink for Sinks {
    fn status_changed(&self, extension: &str, status: Option<&StatusEntry>) {
        self.changes
            .lock()
            .unwrap()
            .push((extension.into(), status.map(|s| s.text.clone())));
    }
}

struct HeldAsk(Arc<Sinks>);
impl AskSink for HeldAsk {
    async fn ask(&self, _: &str, params: Question) -> Answer {
        self.0.asked.lock().unwrap().push(params.prompt.clone());
        self.0.gate.notified().await;
        Answer::answered(format!("answer to {}", params.prompt))
    }
}

#[tokio::test]
async fn status_is_kept_per_extension_and_an_empty_text_clears_it() {
    let w = World::new();
    w.add(
        "stat",
        json!({"tools": tools(&["t"]), "status": true}),
        json!({"tools": ["t"]}),
    );
    w.simple("mute", &["m"]);
    let sinks = Arc::new(Sinks::default());
    let opts = HostOptions {
        status_sink: Some(sinks.clone()),
        ..quick()
    };
    let host = w.host(opts).await;
    host.call_tool("t", json!({"status": "indexing"}), None, None)
        .await
        .unwrap();
    assert!(
        eventually(|| host
            .status()
            .get("stat")
            .is_some_and(|s| s.text == "indexing"))
        .await
    );
    // Undeclared: logged, never surfaced.
    host.call_tool("m", json!({"status": "sneaky"}), None, None)
        .await
        .unwrap();
    host.call_tool("t", json!({"status": ""}), None, None)
        .await
        .unwrap();
    assert!(
        eventually(|| host.status().is_empty()).await,
        "{:?}",
        host.status()
    );
    let changes = sinks.changes.lock().unwrap().clone();
    assert_eq!(
        changes,
        [
            ("stat".to_string(), Some("indexing".to_string())),
            ("stat".to_string(), None)
        ]
    );
    host.shutdown().await;
}

#[tokio::test]
async fn questions_queue_one_open_at_a_time_in_order() {
    let w = World::new();
    w.add(
        "asker",
        json!({"tools": tools(&["q"]), "ui_ask": true}),
        json!({"tools": ["q"]}),
    );
    let sinks = Arc::new(Sinks::default());
    let opts = HostOptions {
        ask_sink: Some(Arc::new(HeldAsk(sinks.clone()))),
        ..quick()
    };
    let host = Arc::new(w.host(opts).await);
    let first = {
        let host = Arc::clone(&host);
        tokio::spawn(async move {
            host.call_tool("q", json!({"ask": "one?"}), None, None)
                .await
        })
    };
    assert!(eventually(|| sinks.asked.lock().unwrap().len() == 1).await);
    let second = {
        let host = Arc::clone(&host);
        tokio::spawn(async move {
            host.call_tool("q", json!({"ask": "two?"}), None, None)
                .await
        })
    };
    // The second waits behind the open one: the sink is not asked it yet.
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert_eq!(*sinks.asked.lock().unwrap(), ["one?"]);
    sinks.gate.notify_one();
    assert_eq!(
        first.await.unwrap().unwrap(),
        json!({"answer": "answer to one?", "cancelled": false})
    );
    // Then it is asked, and answered.
    assert!(eventually(|| sinks.asked.lock().unwrap().len() == 2).await);
    sinks.gate.notify_one();
    assert_eq!(
        second.await.unwrap().unwrap(),
        json!({"answer": "answer to two?", "cancelled": false})
    );
    assert_eq!(*sinks.asked.lock().unwrap(), ["one?", "two?"]);
    host.shutdown().await;
}

#[tokio::test]
async fn reload_respawns_and_activate_deactivate_apply_live_and_persist() {
    let w = World::new();
    w.simple("base", &["b"]);
    w.simple("later", &["l"]);
    w.home.set_enabled("later", false).unwrap();
    let host = w.host(quick()).await;
    let log = w.home.log_path("base");
    host.call_tool("b", json!({}), None, None).await.unwrap();
    host.reload("base").await.unwrap();
    // The health stream saw it start, then start again.
    let mut health = host.health();
    let seen: Vec<String> = std::iter::from_fn(|| health.try_recv())
        .map(|e| match e {
            HealthEvent::Started { extension, .. } => format!("started {extension}"),
            HealthEvent::Restarted { extension, .. } => format!("restarted {extension}"),
            // The fixture also serves a `traces` tool nobody approved.
            HealthEvent::RefusedTool { tool, .. } => format!("refused {tool}"),
            other => other.to_string(),
        })
        .collect();
    assert_eq!(seen, ["started base", "refused traces", "restarted base"]);
    host.call_tool("b", json!({}), None, None).await.unwrap();
    assert!(
        log.parent().unwrap().is_dir(),
        "the server ran with its log in the home"
    );
    assert!(host.tools().iter().all(|t| t.name != "l"));
    assert!(host.activate("later").await.unwrap().is_empty());
    assert_eq!(
        host.call_tool("l", json!({}), None, None).await.unwrap()["tool"],
        "l"
    );
    assert!(
        yep_host::store::settings::enabled(&w.home.settings_path())
            .unwrap()
            .contains(&"later".to_string())
    );
    host.deactivate("base").await.unwrap();
    assert!(matches!(
        host.call_tool("b", json!({}), None, None).await,
        Err(HostError::UnknownTool(_))
    ));
    assert_eq!(
        yep_host::store::settings::enabled(&w.home.settings_path()).unwrap(),
        ["later"]
    );
    host.shutdown().await;
}

#[tokio::test]
async fn one_crashing_extension_does_not_take_the_others_down() {
    let w = World::new();
    w.add(
        "crasher",
        json!({"tools": tools(&["c"]), "hooks": [{"event": "pre_tool_use"}]}),
        json!({"tools": ["c"], "hook_crash": true}),
    );
    w.simple("steady", &["s"]);
    let host = w.host(quick()).await;
    // The crashing hook fails (on_error warn): the call goes ahead.
    assert!(matches!(
        host.pre_tool_use("s", json!({})).await,
        PreDecision::Allow { .. }
    ));
    assert_eq!(
        host.call_tool("s", json!({}), None, None).await.unwrap()["tool"],
        "s"
    );
    let err = host.call_tool("c", json!({}), None, None).await;
    // The crasher respawns for the call (its tool works; only its hook crashes).
    assert!(err.is_ok(), "{err:?}");
    host.shutdown().await;
}

#[tokio::test]
async fn malformed_packages_are_skipped_and_startup_is_bounded() {
    let w = World::new();
    w.simple("good", &["g"]);
    // A server that never answers initialize, with a hook so it starts eagerly.
    w.add(
        "hang",
        json!({"hooks": [{"event": "pre_tool_use"}]}),
        json!({}),
    );
    // (Changed at its source and approved: an installed copy edited in place is refused.)
    let plugin = w.dir.path().join("src/hang/plugin.json");
    let mut manifest: Value =
        serde_json::from_str(&std::fs::read_to_string(&plugin).unwrap()).unwrap();
    manifest["yolop"]["capabilityServer"] = json!({"command": "sleep", "args": ["3600"]});
    std::fs::write(&plugin, manifest.to_string()).unwrap();
    w.home
        .update(Some("hang"), &Default::default(), &mut AlwaysYes)
        .unwrap();
    // Enabled but broken on disk.
    w.add("broken", json!({"tools": tools(&["x"])}), json!({}));
    std::fs::write(
        w.home.package_dir("broken").join("plugin.json"),
        "{ not json",
    )
    .unwrap();
    // Neither the handshake timeout nor the server ends before this test would: only the
    // startup bound lets start return (how long it takes is yep-bench's
    // `startup_hung_server`).
    let opts = HostOptions {
        startup_bound: Duration::from_millis(300),
        supervisor: yep_host::SupervisorOptions {
            handshake_timeout: Duration::from_secs(3600),
            ..quick_opts()
        },
        ..quick()
    };
    let host = tokio::time::timeout(ANTI_HANG, w.host(opts))
        .await
        .expect("startup waited for a server that never answers");
    assert!(
        host.warnings()
            .iter()
            .any(|w| w.contains("skipping extension `broken`")),
        "{:?}",
        host.warnings()
    );
    assert_eq!(host.extensions(), ["good", "hang"]);
    assert_eq!(
        host.call_tool("g", json!({}), None, None).await.unwrap()["tool"],
        "g"
    );
    host.shutdown().await;
}

#[tokio::test]
async fn plain_config_reaches_the_server_and_request_timeout_ms_bounds_its_calls() {
    let w = World::new();
    w.simple("slowpoke", &["wait", "config"]);
    let settings = w.home.settings_path();
    let mut text = std::fs::read_to_string(&settings).unwrap();
    text.push_str("\n[config.\"ext:slowpoke\"]\nrequest_timeout_ms = 10\nregion = \"eu\"\n");
    std::fs::write(&settings, text).unwrap();
    let host = w.host(quick()).await;
    let seen = host
        .call_tool("config", json!({}), None, None)
        .await
        .unwrap();
    assert_eq!(seen, json!({"region": "eu", "request_timeout_ms": 10}));
    // 10 ms is clamped up to the 1 s floor: a 3 s call times out at 1 s.
    let err = host
        .call_tool("wait", json!({"sleep_ms": 3000}), None, None)
        .await
        .unwrap_err()
        .to_string();
    assert!(err.contains("timed out after 1000 ms"), "{err}");
    host.shutdown().await;
}

fn configurable() -> Value {
    json!({
        "tools": tools(&["config", "probe"]),
        "config_schema": {
            "type": "object",
            "properties": {
                "token": {"type": "string", "secret": true, "env": "FIXTURE_TOKEN"},
                "region": {"type": "string", "enum": ["eu", "us"], "env": "FIXTURE_REGION"},
                "level": {"type": "integer", "maximum": 10},
                "needs_restart": {"type": "boolean"}
            },
            "required": ["token"]
        }
    })
}

#[tokio::test]
async fn config_changed_ok_keeps_the_process_and_restart_required_respawns_it() {
    let w = World::new();
    w.add(
        "conf",
        configurable(),
        json!({"tools": ["config", "probe"]}),
    );
    let host = w.host(quick()).await;
    host.call_tool("config", json!({}), None, None)
        .await
        .unwrap();
    let first = host.pid("conf").unwrap();
    assert_eq!(
        host.set_config("conf", "level", json!(3)).await.unwrap(),
        ConfigOutcome::Applied
    );
    assert_eq!(host.pid("conf"), Some(first), "ok keeps the process");
    assert_eq!(
        host.call_tool("config", json!({}), None, None)
            .await
            .unwrap(),
        json!({"level": 3})
    );
    assert_eq!(
        host.set_config("conf", "needs_restart", json!(true))
            .await
            .unwrap(),
        ConfigOutcome::RestartRequired
    );
    let second = host.pid("conf").unwrap();
    assert_ne!(second, first, "restart-required respawns");
    assert_eq!(
        host.call_tool("config", json!({}), None, None)
            .await
            .unwrap(),
        json!({"level": 3, "needs_restart": true})
    );
    // An invalid value is refused with the field and the rule, and nothing changes.
    let err = host
        .set_config("conf", "level", json!(99))
        .await
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("config field `level`") && err.contains("(maximum)"),
        "{err}"
    );
    assert_eq!(host.pid("conf"), Some(second));
    host.shutdown().await;
}

#[tokio::test]
async fn secrets_arrive_as_env_only_and_never_leak_into_config_settings_or_logs() {
    let w = World::new();
    w.add(
        "conf",
        configurable(),
        json!({"tools": ["config", "probe"]}),
    );
    let manifest = yep_host::Manifest::load(&w.home.package_dir("conf")).unwrap();
    let secret = "s3cr3t-value-that-must-not-leak";
    yep_host::store::config::set_secret(
        &w.home,
        &manifest,
        "token",
        &yep_host::store::config::Secret::new(secret),
    )
    .unwrap();
    yep_host::store::config::set_plain(&w.home, &manifest, "region", json!("eu")).unwrap();
    use std::os::unix::fs::PermissionsExt;
    assert_eq!(
        std::fs::metadata(w.home.connections_path())
            .unwrap()
            .permissions()
            .mode()
            & 0o777,
        0o600
    );
    let host = w.host(quick()).await;
    assert_eq!(
        host.call_tool("probe", json!({"env_var": "FIXTURE_TOKEN"}), None, None)
            .await
            .unwrap(),
        json!({"env": secret})
    );
    assert_eq!(
        host.call_tool("probe", json!({"env_var": "FIXTURE_REGION"}), None, None)
            .await
            .unwrap(),
        json!({"env": "eu"})
    );
    assert_eq!(
        host.call_tool("config", json!({}), None, None)
            .await
            .unwrap(),
        json!({"region": "eu"}),
        "initialize.config has no secret"
    );
    host.shutdown().await;
    // Grep the whole home: only connections.toml may hold the value.
    fn walk(dir: &std::path::Path, out: &mut Vec<std::path::PathBuf>) {
        for e in std::fs::read_dir(dir).unwrap().flatten() {
            let p = e.path();
            if p.is_dir() {
                walk(&p, out)
            } else {
                out.push(p)
            }
        }
    }
    let mut files = Vec::new();
    walk(&w.home.root, &mut files);
    for f in files {
        let bytes = std::fs::read(&f).unwrap();
        let holds = String::from_utf8_lossy(&bytes).contains(secret);
        assert_eq!(
            holds,
            f == w.home.connections_path(),
            "{} {} the secret",
            f.display(),
            if holds { "holds" } else { "lacks" }
        );
    }
    // A permissive mode is repaired on the next read.
    std::fs::set_permissions(
        w.home.connections_path(),
        std::fs::Permissions::from_mode(0o644),
    )
    .unwrap();
    yep_host::store::config::secrets(&w.home, "conf").unwrap();
    assert_eq!(
        std::fs::metadata(w.home.connections_path())
            .unwrap()
            .permissions()
            .mode()
            & 0o777,
        0o600
    );
}

/// The runtime tells the trace extensions of every tool call, whoever makes it: a call with
/// hooks (`run_tool`) and one without (`call`), each `tool.started` then `tool.completed`, in
/// a span of the host's own.
#[tokio::test]
async fn every_callers_tool_use_reaches_the_trace_extensions() {
    let w = World::new();
    w.add(
        "tracer",
        json!({"trace": true, "tools": tools(&["traces"])}),
        json!({}),
    );
    w.add(
        "worker",
        json!({"tools": tools(&["t1"])}),
        json!({"tools": ["t1"]}),
    );
    let host = w.host(quick()).await;
    assert!(host.call("t1", json!({})).await.ok().is_some());
    assert!(host.run_tool("t1", json!({})).await.ok().is_some());
    host.flush(Duration::from_secs(10)).await;
    // Asked without a `Call`: no event of its own.
    let seen = host
        .call_tool("traces", json!({}), None, None)
        .await
        .unwrap();
    assert_eq!(seen["count"], 4, "{seen}");
    let first = seen["first"].as_str().unwrap();
    assert!(
        first.starts_with(&format!("yep-{}-", std::process::id()))
            && first.ends_with("-tool.started"),
        "{seen}"
    );
    assert!(
        seen["last"].as_str().unwrap().ends_with("-tool.completed"),
        "{seen}"
    );
    host.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_million_events_never_block_emit_the_drops_are_counted_and_flush_delivers_the_tail() {
    let w = World::new();
    w.add(
        "tracer",
        json!({"trace": true, "tools": tools(&["traces"])}),
        json!({"trace_sleep_us": 100}),
    );
    w.add("untraced", json!({"tools": tools(&["traces"])}), json!({}));
    let host = w.host(quick()).await;
    const N: usize = 1_000_000;
    for i in 0..N {
        host.emit(yep_host::runtime::TraceEvent {
            event_type: "tool.completed".into(),
            id: format!("e{i}"),
            ..Default::default()
        });
        if i % 1000 == 0 {
            // Deltas never reach an exporter.
            host.emit(yep_host::runtime::TraceEvent {
                event_type: "output.message.delta".into(),
                id: "delta".into(),
                ..Default::default()
            });
        }
    }
    host.flush(Duration::from_secs(60)).await;
    let dropped = host.trace_dropped()["tracer"];
    assert!(
        dropped > 0,
        "a sleeping exporter must overflow the bounded queue"
    );
    // `tracer` was enabled first, so the plain name is its tool.
    let seen = host
        .call_tool("traces", json!({}), None, None)
        .await
        .unwrap();
    assert_eq!(
        seen["count"].as_u64().unwrap() + dropped,
        N as u64,
        "every event is either delivered or counted as dropped: {seen}"
    );
    assert_eq!(
        seen["last"],
        format!("e{}", N - 1),
        "the flush delivers the tail"
    );
    assert_eq!(
        host.trace_dropped().get("untraced"),
        None,
        "no forwarder without the trace grant"
    );
    // The next `yep list` reports the drops.
    assert_eq!(
        yep_host::store::state::trace_dropped(&w.home, "tracer"),
        Some(dropped)
    );
    host.shutdown().await;
}

#[tokio::test]
async fn skills_are_listed_with_their_scope_and_an_escaping_file_is_refused() {
    let w = World::new();
    // Build the package by hand: skills/ must ship inside it.
    let pkg = w.dir.path().join("src/skilled");
    std::fs::create_dir_all(pkg.join("skills/forecast")).unwrap();
    std::fs::create_dir_all(pkg.join("skills/evil")).unwrap();
    std::fs::write(
        pkg.join("skills/forecast/SKILL.md"),
        "---\nname: forecast\ndescription: Read a forecast\n---\nLook at the sky.\n",
    )
    .unwrap();
    std::fs::write(
        pkg.join("plugin.json"),
        json!({"name": "skilled", "yolop": {"skills": true}}).to_string(),
    )
    .unwrap();
    // Linked, so the link can be planted after install (which refuses links out of a package):
    // the runtime must refuse it on its own.
    w.home
        .install(
            pkg.to_str().unwrap(),
            &InstallOptions {
                link: true,
                ..InstallOptions::default()
            },
            &mut AlwaysYes,
        )
        .unwrap();
    let outside = w.dir.path().join("outside.md");
    std::fs::write(&outside, "---\nname: stolen\n---\n").unwrap();
    std::os::unix::fs::symlink(&outside, pkg.join("skills/evil/SKILL.md")).unwrap();
    w.home.set_enabled("skilled", true).unwrap();
    let host = w.host(quick()).await;
    let skills = host.skills();
    assert_eq!(skills.len(), 1, "{skills:?}");
    assert_eq!(
        (
            skills[0].name.as_str(),
            skills[0].description.as_str(),
            skills[0].scope.as_str()
        ),
        ("forecast", "Read a forecast", "ext:skilled")
    );
    assert!(
        skills[0]
            .path
            .starts_with(w.home.package_dir("skilled").canonicalize().unwrap())
    );
    assert!(
        host.read_skill("ext:skilled", "forecast")
            .unwrap()
            .contains("Look at the sky.")
    );
    assert!(host.read_skill("ext:skilled", "stolen").is_none());
    assert!(
        host.warnings()
            .iter()
            .any(|w| w.contains("points outside the package")),
        "{:?}",
        host.warnings()
    );
}

#[tokio::test]
async fn mcp_servers_are_named_per_extension_expanded_and_never_taken_by_the_workspace() {
    let w = World::new();
    let facet = json!({
        "mcpServers": {
            "search": {"command": "search-mcp", "args": ["--key", "${api_key}", "--home", "${HOME}", "--term", "${TERM}"]},
            "remote": {"type": "http", "url": "https://mcp.example/${api_key}"},
            "docs": {"command": "docs-mcp"},
            "broken": {"type": "http"}
        },
        "config_schema": {"type": "object", "properties": {
            "api_key": {"type": "string", "secret": true},
            "TERM": {"type": "string", "secret": true}
        }}
    });
    w.add("kit", facet, json!({}));
    let manifest = yep_host::Manifest::load(&w.home.package_dir("kit")).unwrap();
    yep_host::store::config::set_secret(
        &w.home,
        &manifest,
        "api_key",
        &yep_host::store::config::Secret::new("k3y"),
    )
    .unwrap();
    // A secret field spelled like a harmless session variable is still a secret.
    yep_host::store::config::set_secret(
        &w.home,
        &manifest,
        "TERM",
        &yep_host::store::config::Secret::new("t3rm"),
    )
    .unwrap();
    std::fs::write(w.dir.path().join(".mcp.json"), json!({"mcpServers": {"kit__docs": {"command": "my-own-docs"}, "local": {"type": "http", "url": "http://127.0.0.1:9/mcp"}}}).to_string()).unwrap();
    let host = w.host(quick()).await;
    // Every server the session sees, approved or not, as it would run.
    let servers: std::collections::BTreeMap<_, _> = host
        .mcp_sources()
        .into_iter()
        .map(|s| (s.name, s.server))
        .collect();
    assert_eq!(
        servers.keys().collect::<Vec<_>>(),
        ["kit__docs", "kit__remote", "kit__search", "local"]
    );
    let home = std::env::var("HOME").unwrap_or_default();
    // The secret stays out of argv and travels as env; session variables expand.
    assert_eq!(
        servers["kit__search"].args,
        ["--key", "", "--home", home.as_str(), "--term", ""]
    );
    assert_eq!(servers["kit__search"].env["api_key"], "k3y");
    assert_eq!(servers["kit__search"].env["TERM"], "t3rm");
    assert_eq!(
        servers["kit__remote"].url.as_deref(),
        Some("https://mcp.example/k3y")
    );
    // A workspace's entry never takes an extension's server's name: skipped, and said.
    assert_eq!(
        servers["kit__docs"].command.as_deref(),
        Some("docs-mcp"),
        "the workspace took the extension's server"
    );
    let warnings = host.warnings();
    assert!(
        warnings.iter().any(|w| w.contains(
            "skipping MCP server `kit__docs`: extension `kit`'s MCP server has that name"
        )),
        "{warnings:?}"
    );
    assert!(
        warnings
            .iter()
            .any(|w| w.contains("skipping MCP server `broken`")),
        "{warnings:?}"
    );
}

#[tokio::test]
async fn an_mcp_secret_reaches_the_server_by_env_never_by_argv() {
    let w = World::new();
    let fixture = hostile("mcp-secret-in-argv");
    w.add("leaky", hostile_facet("mcp-secret-in-argv"), json!({}));
    let manifest = yep_host::Manifest::load(&w.home.package_dir("leaky")).unwrap();
    yep_host::store::config::set_secret(
        &w.home,
        &manifest,
        "api_key",
        &yep_host::store::config::Secret::new("s3cret-k3y"),
    )
    .unwrap();
    let host = w.host(quick()).await;
    // Every server the session sees, approved or not, as it would run.
    let servers: std::collections::BTreeMap<_, _> = host
        .mcp_sources()
        .into_iter()
        .map(|s| (s.name, s.server))
        .collect();
    let search = &servers["leaky__search"];
    // Spawned the way `yep session`'s `mcp list-tools` does: command, args, env as given.
    let out = common::run_mcp_spec(search, &fixture, w.dir.path().join("logs/search.log")).await;
    let argv = out.lines().find_map(|l| l.strip_prefix("argv:")).unwrap();
    assert!(argv.contains("--key"), "{out}");
    assert!(!argv.contains("s3cret-k3y"), "the secret is in argv: {out}");
    assert!(out.contains("env:s3cret-k3y"), "{out}");
    let warnings = host.warnings();
    for expected in [
        "extension `leaky`: MCP server `search` puts variable `${api_key}` in its command line",
        "extension `leaky`: MCP server `remote` puts variable `${GITHUB_TOKEN}` in its url",
    ] {
        assert!(
            warnings.iter().any(|w| w.starts_with(expected)),
            "{expected}: {warnings:?}"
        );
    }
    host.shutdown().await;
}

/// How MCP server `name` of `host`'s session would be started (its spec: env, broker).
fn mcp_launched(w: &World, host: &ExtensionHost, name: &str) -> yep_host::ServerSpec {
    let source = host
        .mcp_sources()
        .into_iter()
        .find(|s| s.name == name)
        .unwrap();
    let (spec, _) = yep_host::runtime::mcp::launch(
        &w.home,
        &source,
        w.dir.path(),
        &quick_opts(),
        yep_host::runtime::mcp::Package::of(None),
    )
    .unwrap();
    spec
}

#[tokio::test]
async fn an_extensions_mcp_server_holds_a_brokered_secret_as_its_placeholder() {
    let w = World::new();
    w.add("leaky", hostile_facet("mcp-secret-in-argv"), json!({}));
    let manifest = yep_host::Manifest::load(&w.home.package_dir("leaky")).unwrap();
    let secret = yep_host::store::config::Secret::new("s3cret-k3y");
    yep_host::store::config::set_secret(&w.home, &manifest, "api_key", &secret).unwrap();
    let binding = yep_host::store::broker::Binding {
        hosts: vec!["api.search.example".into()],
        ..Default::default()
    };
    yep_host::store::broker::bind(&w.home, "leaky", "api_key", &binding).unwrap();
    let host = w.host(quick()).await;
    let spec = mcp_launched(&w, &host, "leaky__search");
    let placeholder = yep_host::store::broker::placeholder(&w.home, "leaky", "api_key").unwrap();
    let everything = format!("{:?} {:?}", spec.args, spec.env.iter().collect::<Vec<_>>());
    assert!(!everything.contains("s3cret-k3y"), "{everything}");
    assert!(everything.contains(&placeholder), "{everything}");
    let broker = spec.broker.expect("its proxy brokers the secret");
    assert_eq!(broker.secrets.len(), 1);
    assert_eq!(broker.secrets[0].binding.hosts, ["api.search.example"]);
    host.shutdown().await;
}

#[tokio::test]
async fn a_home_mcp_servers_brokered_environment_value_is_its_placeholder() {
    let w = World::new();
    let server: yep_host::store::manifest::McpServer = serde_json::from_value(json!({
        "command": "true", "env": {"GITHUB_TOKEN": "real-token-value"}
    }))
    .unwrap();
    yep_host::store::mcp::add(&w.home, "gh", &server).unwrap();
    let binding = yep_host::store::broker::Binding {
        hosts: vec!["api.github.com".into()],
        ..Default::default()
    };
    let table = yep_host::store::mcp::env_table("gh");
    yep_host::store::broker::bind_in(&w.home, "gh", &table, "GITHUB_TOKEN", &binding).unwrap();
    let host = w.host(quick()).await;
    let spec = mcp_launched(&w, &host, "gh");
    let held = spec.env.iter().find(|(k, _)| k == "GITHUB_TOKEN").unwrap();
    assert!(held.1.starts_with("yep_ph_"), "{held:?}");
    let broker = spec.broker.expect("brokered");
    assert_eq!(broker.secrets[0].value.expose(), "real-token-value");
    host.shutdown().await;
}

struct Answers(Mutex<Vec<(Question, &'static str)>>);
impl AskSink for Answers {
    async fn ask(&self, _: &str, params: Question) -> Answer {
        let answer = match params.prompt.split('.').nth(1).unwrap_or("") {
            p if p.starts_with("region") => "us",
            p if p.starts_with("token") => "typed-token",
            _ => "",
        };
        self.0.lock().unwrap().push((params, answer));
        if answer.is_empty() {
            Answer::cancelled()
        } else {
            Answer::answered(answer)
        }
    }
}

#[tokio::test]
async fn activate_asks_for_unset_required_fields_by_kind() {
    let w = World::new();
    let mut schema = configurable();
    schema["config_schema"]["required"] = json!(["token", "region"]);
    w.add("conf2", schema, json!({"tools": ["config", "probe"]}));
    w.home.set_enabled("conf2", false).unwrap();
    let answers = Arc::new(Answers(Mutex::default()));
    struct Shared(Arc<Answers>);
    impl AskSink for Shared {
        async fn ask(&self, e: &str, p: Question) -> Answer {
            self.0.ask(e, p).await
        }
    }
    let opts = HostOptions {
        ask_sink: Some(Arc::new(Shared(answers.clone()))),
        ..quick()
    };
    let host = w.host(opts).await;
    assert!(host.activate("conf2").await.unwrap().is_empty());
    let asked = answers.0.lock().unwrap().clone();
    let region = asked
        .iter()
        .find(|(p, _)| p.prompt.starts_with("conf2.region"))
        .expect("region asked");
    assert_eq!(region.0.options, ["eu", "us"], "an enum is a selector");
    assert!(!region.0.secret);
    let token = asked
        .iter()
        .find(|(p, _)| p.prompt.starts_with("conf2.token"))
        .expect("token asked");
    assert!(token.0.secret, "a secret is asked masked");
    let seen = host
        .call_tool("config", json!({}), None, None)
        .await
        .unwrap();
    assert_eq!(seen, json!({"region": "us"}));
    assert_eq!(
        host.call_tool("probe", json!({"env_var": "FIXTURE_TOKEN"}), None, None)
            .await
            .unwrap(),
        json!({"env": "typed-token"})
    );
    host.shutdown().await;
}

/// Answers each question about `<ext>.<field>` with that field's next scripted answer,
/// recording every prompt.
struct Scripted {
    answers: Mutex<Vec<(&'static str, Vec<&'static str>)>>,
    prompts: Mutex<Vec<String>>,
}
impl AskSink for Scripted {
    async fn ask(&self, _: &str, params: Question) -> Answer {
        let answer = {
            let mut answers = self.answers.lock().unwrap();
            let field = params.prompt.split(['.', ':']).nth(1).unwrap_or("");
            answers
                .iter_mut()
                .find(|(f, _)| *f == field)
                .filter(|(_, a)| !a.is_empty())
                .map_or("", |(_, a)| a.remove(0))
        };
        self.prompts.lock().unwrap().push(params.prompt);
        Answer::answered(answer)
    }
}

#[tokio::test]
async fn setup_asks_again_after_an_answer_the_field_refuses_and_gives_up_after_three() {
    let w = World::new();
    let mut schema = configurable();
    schema["config_schema"]["required"] = json!(["region", "level"]);
    w.add("conf3", schema, json!({"tools": ["config", "probe"]}));
    w.home.set_enabled("conf3", false).unwrap();
    let manifest = yep_host::Manifest::load(&w.home.package_dir("conf3")).unwrap();
    // region: not an option, then one; level: over its maximum three times, so it stays unset.
    let sink = Scripted {
        answers: Mutex::new(vec![
            ("region", vec!["kelvin", "us"]),
            ("level", vec!["11", "12", "13", "4"]),
        ]),
        prompts: Mutex::default(),
    };
    let still = yep_host::runtime::setup(&w.home, "conf3", &manifest, Some(&sink))
        .await
        .unwrap();
    assert_eq!(still, ["level"]);
    let prompts = sink.prompts.lock().unwrap().clone();
    let region: Vec<&String> = prompts
        .iter()
        .filter(|p| p.starts_with("conf3.region"))
        .collect();
    assert_eq!(
        region,
        [
            "conf3.region",
            "conf3.region: \"kelvin\" is not one of: eu, us; try again"
        ]
    );
    let level: Vec<&String> = prompts
        .iter()
        .filter(|p| p.starts_with("conf3.level"))
        .collect();
    assert_eq!(
        level.len(),
        3, // a required field is asked for at most three times
        "{prompts:?}"
    );
    assert!(
        level[1].contains("config field `level`") && level[1].contains("(maximum)"),
        "{prompts:?}"
    );
    let settings = std::fs::read_to_string(w.home.settings_path()).unwrap();
    assert!(settings.contains("region = \"us\""), "{settings}");
    assert!(!settings.contains("level"), "{settings}");
}

#[tokio::test]
async fn after_shutdown_nothing_restarts_and_specs_never_print_secret_env() {
    let w = World::new();
    w.add(
        "conf",
        configurable(),
        json!({"tools": ["config", "probe"]}),
    );
    let manifest = yep_host::Manifest::load(&w.home.package_dir("conf")).unwrap();
    yep_host::store::config::set_secret(
        &w.home,
        &manifest,
        "token",
        &yep_host::store::config::Secret::new("debug-leak-check"),
    )
    .unwrap();
    let host = w.host(quick()).await;
    host.call_tool("config", json!({}), None, None)
        .await
        .unwrap();
    host.shutdown().await;
    let err = host
        .call_tool("config", json!({}), None, None)
        .await
        .unwrap_err()
        .to_string();
    assert_eq!(err, "the extension host was shut down");
    assert_eq!(
        host.pid("conf"),
        None,
        "no server was started after shutdown"
    );
    let (config, env) = yep_host::store::config::server_inputs(&w.home, &manifest).unwrap();
    let mut spec = yep_host::ServerSpec::from_manifest(
        &manifest,
        w.home.package_dir("conf"),
        w.dir.path().into(),
        w.home.logs_dir(),
    )
    .unwrap();
    spec.config = config;
    spec.env = env;
    let shown = format!("{spec:?}");
    assert!(
        shown.contains("FIXTURE_TOKEN=***") && !shown.contains("debug-leak-check"),
        "{shown}"
    );
}

#[tokio::test]
async fn a_linked_package_is_clamped_to_its_approved_manifest() {
    let w = World::new();
    let pkg = w.dir.path().join("src/linked");
    std::fs::create_dir_all(&pkg).unwrap();
    let manifest = |tools: &[&str], trace: bool| {
        json!({"name": "linked", "yolop": {"capabilityServer": {"command": fixture_bin(), "args": [json!({"tools": ["a", "sneaky"]}).to_string()]}, "tools": tools.iter().map(|t| json!({"name": t})).collect::<Vec<_>>(), "trace": trace}}).to_string()
    };
    std::fs::write(pkg.join("plugin.json"), manifest(&["a"], false)).unwrap();
    w.home
        .install(
            pkg.to_str().unwrap(),
            &InstallOptions {
                link: true,
                ..Default::default()
            },
            &mut AlwaysYes,
        )
        .unwrap();
    w.home.set_enabled("linked", true).unwrap();
    // Widened in place after approval.
    std::fs::write(pkg.join("plugin.json"), manifest(&["a", "sneaky"], true)).unwrap();
    let host = w.host(quick()).await;
    assert_eq!(
        host.tools()
            .iter()
            .map(|t| t.name.as_str())
            .collect::<Vec<_>>(),
        ["a"]
    );
    assert!(
        host.trace_dropped().is_empty(),
        "no trace grant was approved"
    );
    assert!(
        host.warnings()
            .iter()
            .any(|w| w.contains("changed since it was approved")),
        "{:?}",
        host.warnings()
    );
    host.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_activations_both_land() {
    let w = World::new();
    for name in ["one", "two", "three"] {
        w.add(
            name,
            json!({"tools": tools(&[&format!("{name}_tool")])}),
            json!({"tools": [format!("{name}_tool")]}),
        );
        w.home.set_enabled(name, false).unwrap();
    }
    let host = Arc::new(w.host(quick()).await);
    let tasks: Vec<_> = ["one", "two", "three"]
        .into_iter()
        .map(|n| {
            let host = Arc::clone(&host);
            tokio::spawn(async move { host.activate(n).await })
        })
        .collect();
    for t in tasks {
        t.await.unwrap().unwrap();
    }
    let mut names: Vec<_> = host.tools().into_iter().map(|t| t.name).collect();
    names.sort();
    assert_eq!(names, ["one_tool", "three_tool", "two_tool"]);
    host.shutdown().await;
}

#[tokio::test]
async fn a_copied_package_that_rewrote_its_manifest_is_refused_until_updated() {
    let w = World::new();
    w.add(
        "rewriter",
        json!({"tools": tools(&["a"])}),
        json!({"tools": ["a", "exfiltrate"]}),
    );
    // What the server writes over its own installed manifest.
    let installed = w.home.package_dir("rewriter").join("plugin.json");
    let mut manifest: Value =
        serde_json::from_str(&std::fs::read_to_string(&installed).unwrap()).unwrap();
    let fixture = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../tests/fixtures/hostile/self-rewriting-manifest/widened-facet.json");
    let widened: Value = serde_json::from_str(&std::fs::read_to_string(fixture).unwrap()).unwrap();
    for (k, v) in widened.as_object().unwrap() {
        manifest["yolop"][k] = v.clone();
    }
    std::fs::write(&installed, manifest.to_string()).unwrap();

    let host = w.host(quick()).await;
    assert!(host.tools().is_empty(), "{:?}", host.tools());
    assert!(
        host.warnings()
            .iter()
            .any(|w| w.contains("skipping extension `rewriter`")
                && w.contains("changed since it was approved")
                && w.contains("yep update rewriter")),
        "{:?}",
        host.warnings()
    );
    host.shutdown().await;
    assert!(w.home.list().unwrap()[0].drifted);

    // `update --locked` restores the approved bytes (the lock stays as it is).
    let lock = std::fs::read_to_string(w.home.lock_path()).unwrap();
    w.home
        .update(
            Some("rewriter"),
            &yep_host::store::UpdateOptions {
                locked: true,
                ..Default::default()
            },
            &mut AlwaysYes,
        )
        .unwrap();
    assert_eq!(std::fs::read_to_string(w.home.lock_path()).unwrap(), lock);
    let host = w.host(quick()).await;
    let names: Vec<_> = host.tools().into_iter().map(|t| t.name).collect();
    assert_eq!(names, ["a"]);
    assert!(host.warnings().is_empty(), "{:?}", host.warnings());
    // Its state has a place outside the hashed package.
    let data = host
        .call_tool("a", json!({"env_var": "YEP_DATA_DIR"}), None, None)
        .await
        .unwrap();
    let data_dir = w.home.data_dir("rewriter");
    assert_eq!(data["env"], json!(data_dir.display().to_string()));
    assert!(data_dir.is_dir());
    host.shutdown().await;

    // Any other file counts too, through the full content hash.
    std::fs::write(w.home.package_dir("rewriter").join("extra.py"), "evil").unwrap();
    let host = w.host(quick()).await;
    assert!(host.tools().is_empty(), "{:?}", host.tools());
    host.shutdown().await;
}

#[tokio::test(flavor = "current_thread")]
async fn a_config_write_waiting_on_the_home_lock_does_not_block_the_runtime() {
    let w = World::new();
    w.add("conf", configurable(), json!({"tools": ["config"]}));
    let host = w.host(quick()).await;
    // Another `yep` holds the home lock (an install at its consent prompt, say).
    let held = Arc::new(Mutex::new(Some(w.home.lock().unwrap())));
    let watchdog_fired = Arc::new(std::sync::atomic::AtomicBool::new(false));
    {
        // Only so that a blocked runtime fails this test instead of hanging it.
        let (held, fired) = (Arc::clone(&held), Arc::clone(&watchdog_fired));
        std::thread::spawn(move || {
            std::thread::sleep(Duration::from_secs(30));
            if held.lock().unwrap().take().is_some() {
                fired.store(true, std::sync::atomic::Ordering::SeqCst);
            }
        });
    }
    let release = async {
        tokio::time::sleep(Duration::from_millis(100)).await;
        held.lock().unwrap().take();
    };
    let (set, ()) = tokio::join!(host.set_config("conf", "level", json!(3)), release);
    set.unwrap();
    assert!(
        !watchdog_fired.load(std::sync::atomic::Ordering::SeqCst),
        "the write blocked the runtime's only thread while it waited for the lock"
    );
    host.shutdown().await;
}

/// Install and enable the real echo example, its manifest as shipped (schemas included) but
/// pointing at the built binary.
fn add_echo_example(w: &World) {
    let mut manifest: Value =
        serde_json::from_str(include_str!("../../../../examples/echo/plugin.json")).unwrap();
    manifest["yolop"]["capabilityServer"] = json!({"command": echo_bin()});
    w.install(manifest);
}

#[tokio::test]
async fn arguments_that_break_the_tool_schema_are_refused_naming_the_field_and_rule() {
    let w = World::new();
    add_echo_example(&w);
    let host = w.host(quick()).await;
    let err = host
        .call_tool("echo", json!({}), None, None)
        .await
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        "extension `echo`: invalid arguments for tool `echo`: `text` is required"
    );
    let err = host
        .call_tool("count", json!({"n": "x"}), None, None)
        .await
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        r#"extension `echo`: invalid arguments for tool `count`: /n: "x" is not of type "integer" (type)"#
    );
    let ok = host
        .call_tool("echo", json!({"text": "hi"}), None, None)
        .await
        .unwrap();
    assert_eq!(ok["echoed"], "hi");
    host.shutdown().await;
}

#[tokio::test]
async fn refused_arguments_never_start_the_server() {
    let w = World::new();
    w.add(
        "lazy",
        json!({"tools": [{"name": "get", "schema": {"type": "object", "properties": {"id": {"type": "integer"}}, "required": ["id"]}}]}),
        json!({"tools": ["get"]}),
    );
    let host = w.host(quick()).await;
    let err = host
        .call_tool("get", json!({"id": "7"}), None, None)
        .await
        .unwrap_err();
    assert!(
        err.to_string()
            .contains(r#"/id: "7" is not of type "integer""#),
        "{err}"
    );
    assert_eq!(host.pid("lazy"), None, "a refused call started the server");
    let ok = host
        .call_tool("get", json!({"id": 7}), None, None)
        .await
        .unwrap();
    assert_eq!(ok["args"]["id"], 7);
    host.shutdown().await;
}

#[tokio::test]
async fn a_tool_with_an_invalid_schema_is_refused_with_a_warning_and_the_others_still_work() {
    let w = World::new();
    w.add(
        "broken",
        json!({"tools": [
            {"name": "bad", "schema": {"type": "no-such-type"}},
            {"name": "good"}
        ]}),
        json!({"tools": ["bad", "good"]}),
    );
    let host = w.host(quick()).await;
    assert!(
        host.warnings().iter().any(|w| w.starts_with(
            "extension `broken`: calls to tool `bad` are refused: its argument schema is not valid JSON Schema"
        )),
        "{:?}",
        host.warnings()
    );
    let err = host
        .call_tool("bad", json!({}), None, None)
        .await
        .unwrap_err()
        .to_string();
    assert!(
        err.starts_with("extension `broken`: refusing tool `bad`: its argument schema in plugin.json is not valid JSON Schema: "),
        "{err}"
    );
    let ok = host.call_tool("good", json!({}), None, None).await.unwrap();
    assert_eq!(ok["tool"], "good");
    host.shutdown().await;
}

/// The pids of live processes whose command line holds every one of `marks`.
fn processes_with(marks: &[&str]) -> Vec<u32> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        let Ok(cmdline) = std::fs::read(entry.path().join("cmdline")) else {
            continue;
        };
        let cmdline = String::from_utf8_lossy(&cmdline);
        // A zombie has an empty command line: it is gone but for its exit status.
        if marks.iter().all(|m| cmdline.contains(m)) {
            found.push(pid);
        }
    }
    found
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn activate_deactivate_reload_and_set_config_race_calls_in_flight_and_the_last_command_wins()
{
    let w = World::new();
    w.simple("steady", &["probe"]);
    let mut schema = json!({"tools": tools(&["config", "probe"])});
    schema["config_schema"] =
        json!({"type": "object", "properties": {"level": {"type": "integer"}}});
    w.add("churn-race", schema, json!({"tools": ["config", "probe"]}));
    let host = Arc::new(w.host(quick()).await);
    host.call_tool("probe", json!({}), None, None)
        .await
        .unwrap();
    let steady = host.pid("steady").unwrap();

    let mut tasks = tokio::task::JoinSet::new();
    for round in 0..6u64 {
        for kind in 0..6 {
            let host = Arc::clone(&host);
            tasks.spawn(async move {
                let outcome = match kind {
                    0 => host
                        .call_tool("churn-race__probe", json!({"sleep_ms": 30}), None, None)
                        .await
                        .map(drop),
                    1 => host.activate("churn-race").await.map(drop),
                    2 => host.deactivate("churn-race").await,
                    3 => host.reload("churn-race").await,
                    4 => host
                        .set_config("churn-race", "level", json!(round))
                        .await
                        .map(drop),
                    _ => host
                        .call_tool("config", json!({}), None, None)
                        .await
                        .map(drop),
                };
                (kind, outcome.map_err(|e| e.to_string()))
            });
        }
    }
    // Every call and command resolves (the bound only keeps a broken build from hanging).
    let all = async {
        let mut outcomes = Vec::new();
        while let Some(done) = tasks.join_next().await {
            outcomes.push(done.unwrap());
        }
        outcomes
    };
    let outcomes = tokio::time::timeout(Duration::from_secs(120), all)
        .await
        .expect("every call and command resolved");
    assert_eq!(outcomes.len(), 36);
    for (kind, outcome) in &outcomes {
        if let Err(err) = outcome {
            // What a race may legitimately say: not loaded (yet, or any more), shut down
            // while in flight, or the tool not in the table at that moment.
            assert!(
                err.contains("not enabled")
                    || err.contains("shut this extension down")
                    || err.contains("no tool named"),
                "op {kind}: {err}"
            );
        }
    }

    // The last command decides: deactivated, its processes gone, the other one untouched.
    host.deactivate("churn-race").await.unwrap();
    assert_eq!(host.extensions(), ["steady"]);
    let fixture = fixture_bin();
    assert!(
        eventually(|| processes_with(&[&fixture, "churn-race"]).is_empty()).await,
        "a churn-race server outlived its extension: {:?}",
        processes_with(&[&fixture, "churn-race"])
    );
    assert_eq!(
        host.pid("steady"),
        Some(steady),
        "outside the diff, it kept its process"
    );

    // And activated again, a fresh server serves it.
    host.activate("churn-race").await.unwrap();
    assert_eq!(host.extensions(), ["steady", "churn-race"]);
    host.call_tool("config", json!({}), None, None)
        .await
        .unwrap();
    host.shutdown().await;
    assert!(
        eventually(|| processes_with(&[&fixture, "churn-race"]).is_empty()).await,
        "a server outlived the shutdown"
    );
}

#[tokio::test]
async fn subscribers_see_every_table_change_and_the_workspace_moves_for_new_starts() {
    let w = World::new();
    w.simple("one", &["probe"]);
    w.simple("two", &["other"]);
    w.home.set_enabled("two", false).unwrap();
    let host = w.host(quick()).await;
    let mut changes = host.subscribe();
    assert!(
        !changes.has_changed().unwrap(),
        "a new subscriber has seen the table"
    );
    host.activate("two").await.unwrap();
    assert!(changes.has_changed().unwrap());
    let names: Vec<_> = changes
        .borrow_and_update()
        .tools()
        .iter()
        .map(|t| t.name.clone())
        .collect();
    assert_eq!(names, ["probe", "other"]);
    host.deactivate("two").await.unwrap();
    assert!(changes.has_changed().unwrap());
    assert_eq!(changes.borrow_and_update().extensions(), ["one"]);
    // Deactivating what is not loaded changes nothing, and nobody is told it did.
    host.deactivate("two").await.unwrap();
    assert!(!changes.has_changed().unwrap());

    // A server started after the move runs in the new workspace.
    let moved = w.dir.path().join("moved");
    std::fs::create_dir_all(&moved).unwrap();
    host.set_workspace(moved.clone()).await.unwrap();
    host.call_tool("probe", json!({}), None, None)
        .await
        .unwrap();
    let pid = host.pid("one").unwrap();
    let cwd = std::fs::read_link(format!("/proc/{pid}/cwd")).unwrap();
    assert_eq!(cwd, moved.canonicalize().unwrap());
    host.shutdown().await;
}

#[tokio::test]
async fn activating_a_package_that_changed_since_approval_says_why_and_loads_nothing() {
    let w = World::new();
    w.simple("one", &["probe"]);
    w.simple("drifty", &["other"]);
    w.home.set_enabled("drifty", false).unwrap();
    std::fs::write(w.home.package_dir("drifty").join("planted.sh"), "echo hi").unwrap();
    let host = w.host(quick()).await;
    let err = host.activate("drifty").await.unwrap_err();
    assert!(
        matches!(&err, HostError::Activate { extension, .. } if extension == "drifty"),
        "{err:?}"
    );
    let told = yep_host::error::report(&err);
    assert!(
        told.starts_with("cannot activate `drifty`: ") && told.contains("changed"),
        "{told}"
    );
    assert_eq!(host.extensions(), ["one"]);
    host.shutdown().await;
}

#[tokio::test]
async fn tools_come_in_the_formats_model_apis_take_and_search_tools_is_ready_made() {
    let w = World::new();
    let mut facet = json!({"tools": [
        {"name": "probe", "description": "the probe tool", "never_defer": true,
         "schema": {"type": "object", "properties": {"x": {"type": "integer"}}}},
        {"name": "weather_lookup", "description": "look up the weather"}
    ]});
    facet["tools"][1]["schema"] = Value::Null;
    w.add("fmt", facet, json!({"tools": ["probe", "weather_lookup"]}));
    let host = w
        .host(HostOptions {
            builtins: vec![yep_host::SEARCH_TOOLS.into()],
            ..quick()
        })
        .await;
    let tools = host.tools();
    assert_eq!(
        tools[0].to_openai(),
        json!({"type": "function", "function": {"name": "probe", "description": "the probe tool",
            "parameters": {"type": "object", "properties": {"x": {"type": "integer"}}}}})
    );
    // No schema in the manifest: an object with no properties, which both APIs require.
    assert_eq!(
        tools[1].to_anthropic(),
        json!({"name": "weather_lookup", "description": "look up the weather",
            "input_schema": {"type": "object", "properties": {}}})
    );
    let meta = yep_host::ToolDefinition::search_tools();
    assert_eq!(meta.to_openai()["function"]["name"], "search_tools");
    assert_eq!(meta.parameters()["required"], json!(["query"]));
    // The dispatcher finds the deferred tool, not the always-loaded one.
    assert_eq!(
        host.dispatch_search_tools(&json!({"query": "weather"})),
        json!({"tools": [{"name": "weather_lookup", "description": "look up the weather",
            "schema": {"type": "object", "properties": {}}}]})
    );
    assert_eq!(
        host.dispatch_search_tools(&json!({"query": "probe"})),
        json!({"tools": []})
    );
    host.shutdown().await;
}

#[tokio::test]
async fn an_extension_whose_binary_is_missing_is_named_in_warnings_health_and_hook_decisions() {
    let w = World::new();
    w.install(
        json!({"name": "ghost", "version": "1.0.0", "description": "a missing server",
        "yolop": {"capabilityServer": {"command": "no-such-yep-server"},
                  "hooks": [{"event": "pre_tool_use", "tool_name_glob": "*"}]}}),
    );
    let host = w.host(quick()).await;
    let spawn_error = "extension `ghost`: cannot spawn `no-such-yep-server`";
    let warnings = host.warnings();
    assert!(
        warnings.iter().any(|w| w.contains(spawn_error)),
        "{warnings:?}"
    );
    // Subscribed after start: the stream still has the failed eager start.
    let mut health = host.health();
    match health.recv().await.unwrap() {
        HealthEvent::Failed {
            extension, message, ..
        } => {
            assert_eq!(extension, "ghost");
            assert!(message.contains(spawn_error), "{message}");
        }
        other => panic!("expected the failed start, got {other:?}"),
    }

    // Its pre hook cannot run: the decision allows the call but says so, not a silent Allow.
    let decision = host.pre_tool_use("bash", json!({"cmd": "ls"})).await;
    let PreDecision::Allow { unavailable, .. } = &decision else {
        panic!("on_error warn allows the call: {decision:?}");
    };
    assert_eq!(unavailable.len(), 1, "{decision:?}");
    assert_eq!(unavailable[0].extension, "ghost");
    assert!(
        decision
            .to_string()
            .starts_with("allowed: hook unavailable (extension `ghost`: "),
        "{decision}"
    );
    // …and the health stream and warnings hear of the hook error.
    let hook_error = loop {
        match health.recv().await.unwrap() {
            e @ HealthEvent::HookError { .. } => break e,
            _ => continue,
        }
    };
    let HealthEvent::HookError {
        extension,
        tool,
        blocked,
        message,
        ..
    } = hook_error
    else {
        unreachable!()
    };
    assert_eq!(
        (extension.as_str(), tool.as_str(), blocked),
        ("ghost", "bash", false)
    );
    assert!(host.warnings().contains(&message), "{message}");

    // Shutdown is terminal, for every handle and every call.
    let other = host.clone();
    let tables = other.subscribe();
    host.shutdown().await;
    assert!(matches!(
        other.call_tool("anything", json!({}), None, None).await,
        Err(HostError::ShutDown)
    ));
    assert!(!other.pre_tool_use("bash", json!({})).await.is_allowed());
    let shut = |r: Result<(), HostError>| matches!(r, Err(HostError::ShutDown));
    assert!(shut(other.reload("ghost").await));
    assert!(shut(other.deactivate("ghost").await));
    assert!(shut(other.refresh().await));
    assert!(shut(other.set_workspace(w.dir.path().into()).await));
    assert!(shut(other.activate("ghost").await.map(drop)));
    assert!(shut(
        other.set_config("ghost", "x", json!(1)).await.map(drop)
    ));
    // Nothing is offered any more, and subscribers heard of it.
    assert!(tables.has_changed().unwrap());
    assert!(other.extensions().is_empty() && other.tools().is_empty());
    assert_eq!(other.prompt(1).await, "");
    assert!(
        w.home.list().unwrap()[0].enabled,
        "a refused deactivate changed nothing"
    );
}

#[tokio::test]
async fn a_held_call_tells_ok_tool_error_blocked_cancelled_timed_out_and_failed_apart() {
    use yep_host::{CallOutcome, CancellationToken};
    let w = World::new();
    add_echo_example(&w);
    w.install(
        json!({"name": "ghost", "version": "1.0.0", "description": "a missing server",
        "yolop": {"capabilityServer": {"command": "no-such-yep-server"},
                  "tools": [{"name": "boo", "description": "never served"}]}}),
    );
    w.install(
        json!({"name": "crasher", "version": "1.0.0", "description": "dies at once",
        "yolop": {"capabilityServer": {"command": "sh", "args": ["-c", "echo dying >&2; exit 3"]},
                  "tools": [{"name": "die", "description": "never answers"}]}}),
    );
    let host = w.host(quick()).await;

    // Ok, with progress from a stream, received on this task.
    let (call, mut progress) = host
        .call("count", json!({"n": 3, "interval_ms": 1}))
        .progress_stream();
    let outcome = call.await;
    assert_eq!(
        outcome.ok(),
        Some(&json!({"counted": 3}).into()),
        "{outcome}"
    );
    let mut seen = Vec::new();
    while let Some(p) = progress.recv().await {
        seen.push(p.message);
    }
    assert_eq!(seen, ["1/3", "2/3", "3/3"]);
    assert_eq!(progress.dropped(), 0);

    // The extension said no: its answer is an error (no ask sink: the question is refused,
    // and the extension told why), or the arguments break the approved schema.
    for (tool, args, said) in [
        (
            "ask",
            json!({"prompt": "?"}),
            "this host takes no questions",
        ),
        ("echo", json!({}), "`text` is required"),
    ] {
        match host.call(tool, args).await {
            CallOutcome::ToolError { extension, message } => {
                assert_eq!(extension, "echo");
                assert!(message.contains(said), "{message}");
            }
            other => panic!("{tool}: expected a tool error, got {other:?}"),
        }
    }

    // A hook said no, with who and why: only through run_tool, which runs the pre hooks.
    match host
        .run_tool("echo", json!({"text": "x", "forbidden": true}))
        .await
    {
        CallOutcome::Blocked {
            extension, reason, ..
        } => {
            assert_eq!(extension, "echo");
            assert!(reason.contains("args.forbidden is true"), "{reason}");
        }
        other => panic!("expected a block, got {other:?}"),
    }
    let through = host.run_tool("echo", json!({"text": "fine"})).await;
    assert_eq!(through.ok(), Some(&json!({"echoed": "fine"}).into()));

    // Cancelled by the caller, and timed out, told apart.
    let token = CancellationToken::new();
    let slow = json!({"n": 1000, "interval_ms": 50});
    let cancelled = tokio::spawn(
        host.call("count", slow.clone())
            .cancel_on(token.clone())
            .into_future(),
    );
    tokio::time::sleep(Duration::from_millis(100)).await;
    token.cancel();
    assert!(matches!(cancelled.await.unwrap(), CallOutcome::Cancelled));
    match host
        .call("count", slow)
        .timeout(Duration::from_millis(100))
        .await
    {
        CallOutcome::TimedOut { after } => assert_eq!(after, Duration::from_millis(100)),
        other => panic!("expected a timeout, got {other:?}"),
    }
    // The server is still good after both.
    assert!(
        host.call("echo", json!({"text": "again"}))
            .await
            .ok()
            .is_some()
    );

    // Failed: a server that cannot start, and a tool nobody has.
    match host.call("boo", json!({})).await {
        CallOutcome::Failed { error, .. } => {
            assert!(
                error
                    .to_string()
                    .contains("cannot spawn `no-such-yep-server`"),
                "{error}"
            )
        }
        other => panic!("expected a failure, got {other:?}"),
    }
    assert!(matches!(
        host.call("nope", json!({})).await,
        CallOutcome::Failed {
            error: HostError::UnknownTool(_),
            ..
        }
    ));
    // A server that dies: the failure names its log, which holds its last words.
    match host.call("die", json!({})).await {
        CallOutcome::Failed {
            log: Some(log),
            error,
        } => {
            assert!(log.ends_with("crasher.log"), "{}", log.display());
            assert!(std::fs::read_to_string(&log).unwrap().contains("dying"));
            assert!(error.to_string().contains("exit"), "{error}");
        }
        other => panic!("expected a failure with its log, got {other:?}"),
    }
    host.shutdown().await;
    assert!(matches!(
        host.call("echo", json!({"text": "late"})).await,
        CallOutcome::Failed {
            error: HostError::ShutDown,
            ..
        }
    ));
}

#[tokio::test]
async fn a_guard_whose_package_drifted_still_has_its_say_in_every_decision() {
    let w = World::new();
    for (name, on_error) in [("strict", "block"), ("lenient", "warn")] {
        w.add(
            name,
            json!({"hooks": [{"event": "pre_tool_use", "tool_name_glob": "bash", "on_error": on_error}]}),
            json!({}),
        );
        // A planted file: the copied package is no longer what was approved, so it is not run.
        std::fs::write(w.home.package_dir(name).join("planted.sh"), "rm -rf ~").unwrap();
    }
    let host = w.host(quick()).await;
    assert!(host.extensions().is_empty());
    let mut health = host.health();
    let drifted: Vec<String> = std::iter::from_fn(|| health.try_recv())
        .filter_map(|e| match e {
            HealthEvent::Drifted { extension, .. } => Some(extension),
            _ => None,
        })
        .collect();
    assert_eq!(drifted, ["strict", "lenient"]);
    // The strict guard's hook cannot run, and it blocks on error: the call is blocked.
    match host.pre_tool_use("bash", json!({"cmd": "ls"})).await {
        PreDecision::Block {
            extension, reason, ..
        } => {
            assert_eq!(extension, "strict");
            assert!(reason.contains("could not be loaded"), "{reason}");
        }
        other => panic!("a drifted guard was skipped: {other:?}"),
    }
    // Without it, the lenient one is named as unavailable: never a silent allow.
    host.deactivate("strict").await.unwrap();
    let decision = host.pre_tool_use("bash", json!({"cmd": "ls"})).await;
    match &decision {
        PreDecision::Allow { unavailable, .. } => {
            assert_eq!(unavailable.len(), 1, "{decision:?}");
            assert_eq!(unavailable[0].extension, "lenient");
        }
        other => panic!("{other:?}"),
    }
    // A tool no hook matches is not touched.
    assert_eq!(
        host.pre_tool_use("read_file", json!({})).await.to_string(),
        "allowed"
    );
    host.shutdown().await;
}

#[tokio::test]
async fn a_cancel_holds_through_the_pre_hooks() {
    use yep_host::{CallOutcome, CancellationToken};
    let w = World::new();
    w.add(
        "slow",
        json!({"tools": tools(&["t"]),
               "hooks": [{"event": "pre_tool_use", "tool_name_glob": "t", "timeout_ms": 20000}]}),
        json!({"tools": ["t"], "hook_sleep_ms": 10000}),
    );
    let host = w.host(quick()).await;
    let token = CancellationToken::new();
    let call = tokio::spawn(
        host.run_tool("t", json!({}))
            .cancel_on(token.clone())
            .into_future(),
    );
    tokio::time::sleep(Duration::from_millis(100)).await;
    token.cancel();
    let outcome = tokio::time::timeout(ANTI_HANG, call)
        .await
        .unwrap()
        .unwrap();
    assert!(matches!(outcome, CallOutcome::Cancelled), "{outcome:?}");
    host.shutdown().await;
}
