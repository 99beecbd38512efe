//! `yep doctor`: spawn a server as the runtime would and grade it against its manifest and the
//! protocol, including validating every message it sent against `schema/yep/v1/schema.json`;
//! with `--conformance`, replay the corpus's YEP server-side transcripts against it.

use yep_host::capability::{HookFiring, NoEvents, Offer};
use yep_host::manifest::{HookEvent, Manifest};
use yep_host::rpc::Tap;
use yep_sandbox::Mode;

use serde::Serialize;
use serde_json::{Value, json};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use yep_host::supervisor::{DeniedCall, Extension, ExtensionError, ServerSpec, SupervisorOptions};
use yep_protocol::Message;

pub mod agents;
pub mod drift;
pub mod mcp;
pub mod zot;

/// The committed payload schema, which every server message must satisfy.
pub const SCHEMA_JSON: &str = include_str!("../../../../schema/yep/v1/schema.json");

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Status {
    Pass,
    Warn,
    Fail,
    /// Not checked, and why: what doctor would need to check it is missing (arguments a
    /// tool's schema takes, say).
    Skip,
}

#[derive(Debug, Clone, Serialize)]
pub struct Check {
    pub name: String,
    pub status: Status,
    pub detail: String,
}

#[derive(Debug, Clone, Serialize)]
pub struct Report {
    pub ok: bool,
    pub checks: Vec<Check>,
    /// What `--sandbox-learn` proposes.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sandbox_learn: Option<Learned>,
}

/// The grants a `--sandbox-learn` run proposes, and how to give them.
#[derive(Debug, Clone, Serialize)]
pub struct Learned {
    /// As `yep grant` takes them, escaped.
    pub grants: Vec<String>,
    /// How many more there were past [`yep_sandbox::learn::MAX_PROPOSALS`].
    pub more: usize,
    /// For an installed extension: the `yep grant` that gives them.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub command: Option<String>,
    /// For a package directory: its plugin.json's `sandbox` key that asks for them.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub plugin_json: Option<Value>,
}

#[derive(Default)]
pub(crate) struct Grader {
    checks: Vec<Check>,
}

impl Grader {
    pub(crate) fn add(&mut self, name: &str, status: Status, detail: impl Into<String>) {
        self.checks.push(Check {
            name: name.into(),
            status,
            detail: detail.into(),
        });
    }

    pub(crate) fn done(self) -> Report {
        Report {
            ok: self.checks.iter().all(|c| c.status != Status::Fail),
            checks: self.checks,
            sandbox_learn: None,
        }
    }
}

/// At most this many of the lines a server writes are kept for the checks.
pub const KEEP_LINES: usize = 10_000;
/// At most this many bytes of them.
pub const KEEP_BYTES: usize = 8 * 1024 * 1024;

/// The first lines the server wrote (bounded: a flooding server must not grow the doctor),
/// how many more were only counted, and the method of every request the host sent (by id).
#[derive(Default)]
struct Recording {
    received: Vec<Vec<u8>>,
    kept_bytes: usize,
    dropped: u64,
    sent: HashMap<u64, String>,
}

impl Recording {
    fn keep(&mut self, line: &[u8]) {
        if self.received.len() < KEEP_LINES && self.kept_bytes + line.len() <= KEEP_BYTES {
            self.kept_bytes += line.len();
            self.received.push(line.to_vec());
        } else {
            self.dropped += 1;
        }
    }
}

/// A name that `glob` matches.
fn probe_tool(glob: &str) -> String {
    if glob == "*" {
        "doctor_probe".into()
    } else {
        glob.replace('*', "x")
    }
}

/// The server of `spec` as doctor runs it: session `doctor`, 10 s to answer, `tap` seeing
/// every line.
fn doctor_extension(
    mut spec: ServerSpec,
    tap: Option<Tap>,
    learn: Option<Arc<yep_sandbox::learn::Learning>>,
    mode: Mode,
) -> Extension {
    spec.session_id = "doctor".into();
    let opts = SupervisorOptions {
        tap,
        learn,
        sandbox: mode,
        request_timeout: Duration::from_secs(10),
        handshake_timeout: Duration::from_secs(10),
        grace: Duration::from_secs(2),
        ..SupervisorOptions::default()
    };
    Extension::new(spec, opts, Arc::new(NoEvents))
}

/// Start the server of `spec` as doctor does, and stop it once it has said what it serves:
/// its handshake, for `yep manifest sync`.
pub async fn offer(
    spec: ServerSpec,
    mode: Mode,
) -> Result<yep_host::capability::Offer, ExtensionError> {
    let ext = doctor_extension(spec, None, None, mode);
    let offer = ext.handshake().await;
    ext.stop().await;
    offer
}

/// How the server ran contained, for doctor's `sandbox` row: the mode, what this system
/// enforces, and what its approval grants beyond the default profile.
pub fn sandbox_row(grants: &yep_host::manifest::SandboxGrants, mode: Mode) -> (Status, String) {
    use yep_sandbox::Support;
    if mode == Mode::Off {
        return (
            Status::Skip,
            "off: it runs with your rights (`sandbox = \"best-effort\"` or `\"required\"` in settings.toml contains it; docs/sandbox.md)".into(),
        );
    }
    let support = Support::current();
    let mut missing = support.missing();
    // Protected workspace files are kept read-only for a server that may write the
    // workspace, in namespaces of its own.
    if !support.namespaces && (grants.writes_workspace() || !grants.write.is_empty()) {
        missing.push(yep_sandbox::NO_PROTECTED_FILES);
    }
    let granted = grants.lines();
    let granted = if granted.is_empty() {
        "none (the default profile)".to_string()
    } else {
        granted.join(", ")
    };
    let on = |yes: bool| if yes { "on" } else { "unavailable" };
    let enforced = format!(
        "{mode}: Landlock ABI {}, seccomp {}, user namespaces {}; grants: {granted}",
        support.landlock_abi,
        on(support.seccomp),
        on(support.namespaces)
    );
    match (missing.is_empty(), mode) {
        (true, _) => (Status::Pass, enforced),
        (false, Mode::Required) => (
            Status::Fail,
            format!(
                "{enforced}; this system cannot enforce {}",
                missing.join(", ")
            ),
        ),
        (false, _) => (
            Status::Warn,
            format!(
                "{enforced}; this system cannot enforce {}, so it runs without",
                missing.join(", ")
            ),
        ),
    }
}

/// `yep doctor --conformance`: the YEP server-side transcripts of the conformance corpus
/// ([`crate::conformance::YEP_SERVER`]) replayed against fresh servers of `spec`, spawned
/// as a session spawns it; a row each, `conformance/<name>`. A transcript whose `requires`
/// the manifest does not declare is skipped, saying what it lacks; one the server does not
/// follow fails with the step, the path and both frames.
pub async fn conformance(manifest: &Manifest, spec: &ServerSpec, mode: Mode) -> Vec<Check> {
    let transcripts = match crate::conformance::yep_server() {
        Ok(t) => t,
        Err(e) => {
            return vec![Check {
                name: "conformance".into(),
                status: Status::Fail,
                detail: format!("the compiled-in corpus does not parse: {e}"),
            }];
        }
    };
    let opts = SupervisorOptions {
        sandbox: mode,
        ..SupervisorOptions::default()
    };
    let mut rows = Vec::with_capacity(transcripts.len());
    for t in &transcripts {
        let name = format!("conformance/{}", t.name);
        let lacks = t.requires.unmet(manifest);
        let (status, detail) = if !lacks.is_empty() {
            (
                Status::Skip,
                format!(
                    "the manifest does not declare {} ({})",
                    lacks.join(", "),
                    t.description
                ),
            )
        } else {
            match crate::conformance::replay_server(t, spec, &opts, Some(CONFORMANCE_WAIT)).await {
                Ok(()) => (Status::Pass, t.description.clone()),
                Err(failure) => (Status::Fail, failure.to_string()),
            }
        };
        rows.push(Check {
            name,
            status,
            detail,
        });
    }
    rows
}

/// How long a conformance replay waits for each frame: doctor's request timeout.
const CONFORMANCE_WAIT: Duration = Duration::from_secs(10);

/// What doctor grades a server against.
#[derive(Debug, Clone, Copy)]
pub enum Against<'a> {
    /// A package directory's own `plugin.json`.
    Package,
    /// An installed extension's approved manifest (the one a session holds it to);
    /// `on_disk` is its package's manifest as it is now, when that reads.
    Approved { on_disk: Option<&'a Manifest> },
}

/// Grade the server of package manifest `manifest` (already spawn-ready in `spec`).
pub async fn run(manifest: &Manifest, spec: ServerSpec, mode: Mode) -> Report {
    run_against(manifest, spec, Against::Package, mode).await
}

/// Grade the server of `manifest` (already spawn-ready in `spec`), saying what `manifest`
/// is. For an installed extension both come from `runtime::launch::installed`: the approved
/// manifest, and the spec a session would spawn (its config, its secrets as env, its log).
pub async fn run_against(
    manifest: &Manifest,
    spec: ServerSpec,
    against: Against<'_>,
    mode: Mode,
) -> Report {
    run_learning(manifest, spec, against, None, None, mode).await
}

/// [`run_against`], and with `learn` the run is a learning one ([`yep_sandbox::learn`]): outside
/// the sandbox, under `strace`, and a `sandbox_learn` row proposes the grants it needs. With
/// `replay`, that call is made too (a `call` row), so what it touches is learned.
pub async fn run_learning(
    manifest: &Manifest,
    spec: ServerSpec,
    against: Against<'_>,
    learn: Option<yep_sandbox::learn::Learning>,
    replay: Option<Replay>,
    mode: Mode,
) -> Report {
    let learn = learn.map(Arc::new);
    let name = spec.grant_name.clone().unwrap_or_else(|| spec.name.clone());
    let mut r = Grader::default();
    grade(&mut r, manifest, spec, against, learn.clone(), replay, mode).await;
    let learned = learn.map(|l| learned_row(&mut r, &l, &name, against));
    let mut report = r.done();
    report.sandbox_learn = learned.flatten();
    report
}

/// A tool call doctor makes once the server is up: the one its sandbox last denied
/// ([`DeniedCall::last`]), or one asked for (`--tool`, `--args`).
#[derive(Debug, Clone)]
pub struct Replay {
    pub call: DeniedCall,
    /// It is the call the sandbox denied (else the one asked for).
    pub denied: bool,
}

/// The `call` row: `replay`'s call made on `ext`, and how it went. Its arguments are never
/// shown (they may be secret).
pub(crate) async fn replay_row(r: &mut Grader, ext: &Extension, replay: &Replay) {
    let tool = yep_host::text::escape(&replay.call.tool);
    let what = match replay.denied {
        true => "the call its sandbox last denied",
        false => "the call asked for",
    };
    if replay.call.too_big {
        r.add(
            "call",
            Status::Skip,
            format!(
                "{what}, of `{tool}`, had arguments too big to keep (over {} KiB): make it with `--tool {tool} --args '<json>'`",
                DeniedCall::MAX_ARGS / 1024
            ),
        );
        return;
    }
    let args = replay.call.args.clone();
    match ext.call_tool(&replay.call.tool, args, None, None).await {
        Ok(_) => r.add(
            "call",
            Status::Pass,
            format!("{what}, of `{tool}`, answered"),
        ),
        Err(e) => r.add(
            "call",
            Status::Warn,
            format!("{what}, of `{tool}`, failed: {e}"),
        ),
    }
}

/// The `sandbox` row of a learning run.
fn learning_sandbox_row() -> (Status, String) {
    (
        Status::Skip,
        "off for this run: --sandbox-learn runs it outside the sandbox, under strace, to see what it needs".into(),
    )
}

/// The `sandbox_learn` row: what the run touched beyond its default profile, as grants.
pub(crate) fn learned_row(
    r: &mut Grader,
    learn: &yep_sandbox::learn::Learning,
    name: &str,
    against: Against<'_>,
) -> Option<Learned> {
    let proposal = match learn.proposal() {
        Ok(p) => p,
        Err(e) => {
            r.add("sandbox_learn", Status::Fail, e.to_string());
            return None;
        }
    };
    if proposal.grants.is_empty() {
        r.add(
            "sandbox_learn",
            Status::Pass,
            "the default profile suffices: it touched nothing beyond it",
        );
        return Some(Learned {
            grants: Vec::new(),
            more: 0,
            command: None,
            plugin_json: None,
        });
    }
    let more = match proposal.more {
        0 => String::new(),
        n => format!(" and {n} more"),
    };
    let listed = proposal.grants.join(", ");
    let (command, plugin_json, how) = match against {
        Against::Approved { .. } => {
            let mut words = vec!["yep".to_string(), "grant".into(), shell_word(name)];
            words.extend(proposal.grants.iter().map(|g| shell_word(g)));
            let command = words.join(" ");
            let how = format!("`{command}` gives them");
            (Some(command), None, how)
        }
        Against::Package => {
            let key = sandbox_key(&proposal.grants);
            let how = format!("put them in plugin.json's `sandbox` key: {key}");
            (None, Some(key), how)
        }
    };
    r.add(
        "sandbox_learn",
        Status::Warn,
        format!("it touched what the default profile keeps out: {listed}{more}; {how}"),
    );
    Some(Learned {
        grants: proposal.grants,
        more: proposal.more,
        command,
        plugin_json,
    })
}

/// `word` as a shell reads it back: quoted unless it is plain.
fn shell_word(word: &str) -> String {
    let plain = !word.is_empty()
        && word
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"/._:~@+-=,[]".contains(&b));
    match plain {
        true => word.to_string(),
        false => format!("'{}'", word.replace('\'', "'\\''")),
    }
}

/// A plugin.json `sandbox` value asking for `grants` (as `yep grant` takes them).
fn sandbox_key(grants: &[String]) -> Value {
    let mut key = serde_json::Map::new();
    for g in grants {
        let Some((kind, value)) = g.split_once(':') else {
            continue;
        };
        match kind {
            "workspace" => {
                key.insert("workspace".into(), json!(value));
            }
            "read" | "write" | "net" => {
                if let Value::Array(list) = key.entry(kind).or_insert_with(|| json!([])) {
                    list.push(json!(value));
                }
            }
            _ => {}
        }
    }
    Value::Object(key)
}

/// Every check of the server of `manifest`, into `r`.
async fn grade(
    r: &mut Grader,
    manifest: &Manifest,
    spec: ServerSpec,
    against: Against<'_>,
    learn: Option<Arc<yep_sandbox::learn::Learning>>,
    replay: Option<Replay>,
    mode: Mode,
) {
    let recording = Arc::new(Mutex::new(Recording::default()));
    let rec = Arc::clone(&recording);
    let tap: Tap = Arc::new(move |sent: bool, line: &[u8]| {
        let mut rec = rec.lock().unwrap_or_else(|p| p.into_inner());
        if sent {
            if let Ok(Message::Request(req)) = Message::parse(line) {
                rec.sent.insert(req.id, req.method);
            }
        } else {
            rec.keep(line);
        }
    });
    let (sandbox_status, sandbox_detail) = match learn {
        Some(_) => learning_sandbox_row(),
        None => sandbox_row(&spec.sandbox_grants, mode),
    };
    let ext = doctor_extension(spec, Some(tap), learn, mode);

    let started = Instant::now();
    let init = match ext.handshake().await {
        Ok(init) => init,
        Err(err @ ExtensionError::Spawn { .. }) => {
            r.add("spawn", Status::Fail, err.to_string());
            r.add("sandbox", sandbox_status, sandbox_detail);
            return;
        }
        Err(err) => {
            r.add("spawn", Status::Pass, "started");
            r.add("sandbox", sandbox_status, sandbox_detail);
            r.add("handshake", Status::Fail, err.to_string());
            ext.stop().await;
            check_stream(r, &recording);
            return;
        }
    };
    let startup = started.elapsed();
    r.add("spawn", Status::Pass, "started");
    r.add("sandbox", sandbox_status, sandbox_detail);
    check_handshake(r, manifest, &init);

    // Tools: the handshake may only narrow the manifest.
    check_tools(r, manifest, &init.tools);

    // What the handlers say of their tools must be what the manifest declares.
    schema_sync(r, manifest, &init.tools, against);

    // Argument schemas: a tool whose schema does not compile is refused at every call.
    check_tool_schemas(r, manifest);

    check_prompt(r, manifest, &init);

    // Hooks: a synthetic fire per subscription, within its timeout.
    check_hooks(r, &ext, manifest).await;

    // Dynamic prompt within its budget.
    if manifest.yolop.dynamic_prompt {
        check_dynamic_prompt(r, &ext).await;
    }

    // Cancel of an unknown id is benign.
    check_cancel(r, &ext).await;

    check_config_push(r, &ext).await;

    if let Some(replay) = &replay {
        replay_row(r, &ext, replay).await;
    }
    ext.stop().await;
    check_stream(r, &recording);
    startup_row(r, startup);
}

/// The handshake's rows: it answered, speaks a compatible version, and names itself.
fn check_handshake(r: &mut Grader, manifest: &Manifest, init: &Offer) {
    r.add(
        "handshake",
        Status::Pass,
        format!("initialize answered; {}", init.wire),
    );
    r.add(
        "protocol_version",
        Status::Pass,
        format!(
            "{} is compatible with YEP {}",
            init.wire,
            yep_protocol::PROTOCOL_VERSION
        ),
    );
    if !init.name.is_empty() && init.name != manifest.name {
        r.add(
            "name",
            Status::Warn,
            format!(
                "the server calls itself `{}`, the manifest `{}` (the manifest wins)",
                init.name, manifest.name
            ),
        );
    } else {
        r.add("name", Status::Pass, manifest.name.clone());
    }
}

/// The `tools` row: the handshake may only narrow the manifest.
fn check_tools(r: &mut Grader, manifest: &Manifest, offered: &[yep_host::capability::OfferedTool]) {
    let served: Vec<String> = offered.iter().map(|t| t.name.clone()).collect();
    // Served names are the server's words: escaped before a report shows them.
    let widened: Vec<String> = served
        .iter()
        .filter(|t| manifest.tool(t).is_none())
        .map(|t| yep_host::text::escape(t).into_owned())
        .collect();
    let unserved: Vec<&str> = manifest
        .yolop
        .tools
        .iter()
        .map(|t| t.name.as_str())
        .filter(|t| !served.iter().any(|s| s == t))
        .collect();
    if !widened.is_empty() {
        r.add(
            "tools",
            Status::Fail,
            format!(
                "serves tools the manifest does not declare (a session withholds them): {}",
                widened.join(", ")
            ),
        );
    } else if !unserved.is_empty() {
        r.add(
            "tools",
            Status::Warn,
            format!("declared but not served: {}", unserved.join(", ")),
        );
    } else {
        r.add(
            "tools",
            Status::Pass,
            format!("{} served, all declared", served.len()),
        );
    }
}

/// The `tool_schemas` row: a tool whose schema does not compile is refused at every call.
fn check_tool_schemas(r: &mut Grader, manifest: &Manifest) {
    let broken = yep_host::tool_args::ToolSchemas::from_manifest(manifest).invalid();
    if broken.is_empty() {
        r.add(
            "tool_schemas",
            Status::Pass,
            format!("{} argument schema(s) compile", manifest.yolop.tools.len()),
        );
    } else {
        let list: Vec<String> = broken
            .iter()
            .map(|(tool, why)| format!("`{tool}`: {why}"))
            .collect();
        r.add(
            "tool_schemas",
            Status::Fail,
            format!(
                "not valid JSON Schema, so every call is refused: {}",
                list.join("; ")
            ),
        );
    }
}

/// The `prompt` row: the prompt text it offers against what the manifest declares.
fn check_prompt(r: &mut Grader, manifest: &Manifest, init: &Offer) {
    let f = &manifest.yolop;
    let offers_static = init.prompt.as_ref().is_some_and(|p| !p.trim().is_empty());
    let offers_dynamic = init.dynamic_prompt;
    match (f.prompt || f.dynamic_prompt, offers_static || offers_dynamic) {
        (false, true) => r.add("prompt", Status::Warn, "the server offers prompt text, but the manifest declares neither prompt nor dynamic_prompt (it will be ignored)"),
        (true, false) if f.prompt && !f.dynamic_prompt => r.add("prompt", Status::Warn, "the manifest declares prompt, but the handshake carries no static text"),
        _ => r.add("prompt", Status::Pass, "consistent with the manifest"),
    }
}

/// The `hooks` row: a synthetic fire per subscription, within its timeout.
async fn check_hooks(r: &mut Grader, ext: &Extension, manifest: &Manifest) {
    if manifest.yolop.hooks.is_empty() {
        r.add("hooks", Status::Pass, "none declared");
    } else {
        let mut problems = Vec::new();
        for h in &manifest.yolop.hooks {
            let event = match h.event {
                HookEvent::PreToolUse => "pre_tool_use",
                HookEvent::PostToolUse => "post_tool_use",
            };
            let firing = HookFiring {
                event: h.event,
                tool: probe_tool(&h.tool_name_glob),
                args: json!({"doctor": true}),
                result: (h.event == HookEvent::PostToolUse).then(|| json!({})),
            };
            if let Err(err) = ext
                .with_peer(|p, _| {
                    p.fire_hook(&firing, yep_host::manifest::hook_timeout(h.timeout_ms))
                })
                .await
            {
                problems.push(format!("{event} on {}: {err}", h.tool_name_glob));
            }
        }
        if problems.is_empty() {
            r.add(
                "hooks",
                Status::Pass,
                format!(
                    "{} subscription(s) answered within their timeout_ms",
                    manifest.yolop.hooks.len()
                ),
            );
        } else {
            r.add("hooks", Status::Fail, problems.join("; "));
        }
    }
}

/// The `dynamic_prompt` row: its prompt within its budget.
async fn check_dynamic_prompt(r: &mut Grader, ext: &Extension) {
    match ext.with_peer(|p, _| p.prompt(Duration::from_secs(2))).await {
        Ok(text) => r.add(
            "dynamic_prompt",
            Status::Pass,
            format!("{} bytes within 2 s", text.len()),
        ),
        Err(err) => r.add("dynamic_prompt", Status::Fail, err.to_string()),
    }
}

/// The `cancel` row: a cancel of an unknown id is benign.
async fn check_cancel(r: &mut Grader, ext: &Extension) {
    match ext
        .with_peer(|p, t| p.request("cancel", Some(json!({"id": 987_654_321u64})), t))
        .await
    {
        Ok(v) if v == json!({"cancelled": false}) => r.add(
            "cancel",
            Status::Pass,
            "cancel of an unknown id answers {cancelled:false}",
        ),
        Ok(v) => r.add(
            "cancel",
            Status::Fail,
            format!("cancel of an unknown id answered {v}, not {{\"cancelled\":false}}"),
        ),
        Err(e) if e.remote().is_some_and(|e| e.is_method_not_found()) => r.add(
            "cancel",
            Status::Warn,
            "the server does not support cancel (-32601): calls cannot be stopped early",
        ),
        Err(e) => r.add("cancel", Status::Fail, e.to_string()),
    }
}

/// The `config_push` row: a config push answered, or said to be unsupported.
async fn check_config_push(r: &mut Grader, ext: &Extension) {
    match ext
        .with_peer(|p, t| p.request("config/changed", Some(json!({"config": Value::Null})), t))
        .await
    {
        Ok(v) => r.add(
            "config_push",
            Status::Pass,
            format!("config/changed answered {v}"),
        ),
        Err(e) if e.remote().is_some_and(|e| e.is_method_not_found()) => r.add(
            "config_push",
            Status::Warn,
            "the server does not support config/changed (-32601): every config change restarts it",
        ),
        Err(e) => r.add("config_push", Status::Fail, e.to_string()),
    }
}

/// The `startup` row: spawn and handshake within 2 s.
fn startup_row(r: &mut Grader, startup: Duration) {
    let ms = startup.as_secs_f64() * 1000.0;
    let status = if startup > Duration::from_secs(2) {
        Status::Warn
    } else {
        Status::Pass
    };
    r.add(
        "startup",
        status,
        format!("spawn + handshake in {ms:.1} ms"),
    );
}

/// The `schema_sync` row: the served schemas and descriptions against the manifest's.
fn schema_sync(
    r: &mut Grader,
    manifest: &Manifest,
    served: &[yep_host::capability::OfferedTool],
    against: Against<'_>,
) {
    use drift::Drift;
    let said = served
        .iter()
        .filter(|t| t.schema.is_some() || t.output_schema.is_some() || t.description.is_some())
        .count();
    if said == 0 {
        r.add(
            "schema_sync",
            Status::Pass,
            "no tool says its schema (raw handlers): plugin.json is the only definition",
        );
        return;
    }
    let found = drift::drift(manifest, served);
    let said_differently = |d: &Drift| !matches!(d, Drift::New { .. } | Drift::Unserved { .. });
    // An installed package is held to what was approved, whatever its plugin.json says now:
    // once that matches the code, approving it is what is left.
    let name = &manifest.name;
    let (what, hint) = match against {
        Against::Package => (
            "plugin.json",
            format!(
                "run `yep manifest sync` on the package directory; an installed package then needs `yep update {name}`"
            ),
        ),
        Against::Approved { on_disk } => {
            let synced =
                on_disk.is_some_and(|m| !drift::drift(m, served).iter().any(said_differently));
            let what = "the approved manifest (what `yep install` or `yep update` approved, which a session holds it to)";
            let hint = if synced {
                format!(
                    "plugin.json matches the code already: `yep update {name}` approves the new schema"
                )
            } else {
                format!(
                    "run `yep manifest sync` on the package directory, then `yep update {name}` approves the new schema"
                )
            };
            (what, hint)
        }
    };
    let schemas: Vec<String> = found
        .iter()
        .filter_map(|d| match d {
            Drift::Schema { tool, detail } => Some(format!("`{tool}`: {detail}")),
            Drift::OutputSchema { tool } => Some(format!("`{tool}`: its output schema differs")),
            _ => None,
        })
        .collect();
    let descriptions: Vec<String> = found
        .iter()
        .filter(|d| matches!(d, Drift::Description { .. }))
        .map(|d| format!("`{}`", d.tool()))
        .collect();
    if !schemas.is_empty() {
        r.add(
            "schema_sync",
            Status::Fail,
            format!(
                "the code's schemas differ from {what}, so the model is shown arguments the server does not take: {} ({hint})",
                schemas.join("; ")
            ),
        );
    } else if !descriptions.is_empty() {
        r.add(
            "schema_sync",
            Status::Warn,
            format!(
                "the code describes {} differently from {what} ({hint})",
                descriptions.join(", ")
            ),
        );
    } else {
        r.add(
            "schema_sync",
            Status::Pass,
            format!(
                "{said} tool(s) say their schema; {} matches",
                match against {
                    Against::Package => "plugin.json",
                    Against::Approved { .. } => "the approved manifest",
                }
            ),
        );
    }
}

/// Stdout hygiene and schema validation over everything the server wrote.
fn check_stream(r: &mut Grader, recording: &Mutex<Recording>) {
    let rec = recording.lock().unwrap_or_else(|p| p.into_inner());
    let mut stray = Vec::new();
    let mut invalid = Vec::new();
    let schema: Value = serde_json::from_str(SCHEMA_JSON).unwrap_or_default();
    let mut validators: HashMap<String, Option<jsonschema::Validator>> = HashMap::new();
    let mut validate = |what: &str, pointer: &str, value: &Value, invalid: &mut Vec<String>| {
        let validator = validators.entry(pointer.to_string()).or_insert_with(|| {
            let target = schema.pointer(pointer)?.clone();
            let mut doc = schema.clone();
            let obj = doc.as_object_mut()?;
            obj.retain(|k, _| k == "$defs" || k == "$schema");
            if let Value::Object(t) = target {
                obj.extend(t);
            }
            jsonschema::validator_for(&doc).ok()
        });
        if let Some(v) = validator
            && let Some(e) = v.iter_errors(value).next()
        {
            invalid.push(format!("{what}: {e}"));
        }
    };
    for line in &rec.received {
        if line.iter().all(u8::is_ascii_whitespace) {
            continue;
        }
        match Message::parse(line) {
            // Escaped and cut as the handshake's error quotes it.
            Err(_) => stray.push(yep_host::rpc::stray_preview(line)),
            Ok(Message::Response(resp)) => {
                let method = rec.sent.get(&resp.id).cloned().unwrap_or_default();
                match &resp.result {
                    Ok(v) => {
                        if schema
                            .pointer(&format!("/messages/{}/result", method.replace('/', "~1")))
                            .is_some()
                        {
                            validate(
                                &format!("{method} result"),
                                &format!("/messages/{}/result", method.replace('/', "~1")),
                                v,
                                &mut invalid,
                            );
                        }
                    }
                    Err(e) => {
                        let v = serde_json::to_value(e).unwrap_or_default();
                        validate(&format!("{method} error"), "/error", &v, &mut invalid);
                    }
                }
            }
            Ok(Message::Notification(n)) => {
                let p = format!("/messages/{}/params", n.method.replace('/', "~1"));
                if schema.pointer(&p).is_some() {
                    validate(&format!("{} params", n.method), &p, &n.params, &mut invalid);
                }
            }
            Ok(Message::Request(req)) => {
                let p = format!("/messages/{}/params", req.method.replace('/', "~1"));
                if schema.pointer(&p).is_some() {
                    validate(
                        &format!("{} params", req.method),
                        &p,
                        &req.params,
                        &mut invalid,
                    );
                }
            }
        }
    }
    // What a report shows is bounded too.
    stray.truncate(10);
    invalid.truncate(10);
    if stray.is_empty() && rec.dropped > 0 {
        r.add(
            "stdout",
            Status::Warn,
            format!(
                "{} lines, of which only the first {} were kept and checked (a flood of output)",
                rec.received.len() as u64 + rec.dropped,
                rec.received.len()
            ),
        );
    } else if stray.is_empty() {
        r.add(
            "stdout",
            Status::Pass,
            format!("{} lines, all protocol", rec.received.len()),
        );
    } else {
        r.add(
            "stdout",
            Status::Fail,
            format!(
                "non-protocol output on stdout (stdout carries only the protocol: logs must go to stderr): {}",
                stray
                    .iter()
                    .map(|l| format!("\"{l}\""))
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        );
    }
    if invalid.is_empty() {
        r.add(
            "schema",
            Status::Pass,
            "every message matches schema/yep/v1/schema.json",
        );
    } else {
        r.add("schema", Status::Fail, invalid.join("; "));
    }
}
