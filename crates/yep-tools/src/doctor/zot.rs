//! `yep doctor` for a zot extension: run it as a session would and grade it against the zot
//! protocol's rules (summed up in `docs/zot.md`), and against its pin when it
//! is installed. zot has no doctor of its own.

use super::{Grader, Recording, Report, Status, probe_tool};
use serde_json::json;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use yep_host::capability::{HookFiring, Intercept, NoEvents};
use yep_host::dialect::Dialect;
use yep_host::dialect::zot::frames::FromExtension;
use yep_host::dialect::zot::{Capture, Registrations, Zot};
use yep_host::manifest::{HookEvent, Manifest};
use yep_host::rpc::Tap;
use yep_host::store::zot::{ZotManifest, ZotPin};
use yep_host::supervisor::{Extension, ExtensionError, ServerSpec, SupervisorOptions};

/// How long a zot intercept may take (zot's own bound).
const INTERCEPT_WITHIN: Duration = Duration::from_secs(5);

/// Grade the zot extension `manifest` describes, run from `spec`. `approved` is the manifest
/// it was installed with and `pin` what its lock pinned; both `None` for a directory.
pub async fn run(
    manifest: &ZotManifest,
    mut spec: ServerSpec,
    approved: Option<&Manifest>,
    pin: Option<ZotPin>,
    mode: yep_sandbox::Mode,
) -> Report {
    let mut r = Grader::default();
    let recording = Arc::new(Mutex::new(Recording::default()));
    let rec = Arc::clone(&recording);
    let tap: Tap = Arc::new(move |sent: bool, line: &[u8]| {
        if !sent {
            rec.lock().unwrap_or_else(|p| p.into_inner()).keep(line);
        }
    });
    spec.session_id = "doctor".into();
    let capture = Arc::new(Capture::new(Zot::pinned(pin.clone())));
    let opts = SupervisorOptions {
        dialect: Arc::clone(&capture) as Arc<dyn Dialect>,
        tap: Some(tap),
        request_timeout: Duration::from_secs(10),
        grace: Duration::from_secs(2),
        term_wait: Duration::from_secs(1),
        sandbox: mode,
        ..SupervisorOptions::default()
    };
    let (sandbox_status, sandbox_detail) = super::sandbox_row(&spec.sandbox_grants, mode);
    let ext = Extension::new(spec, opts, Arc::new(NoEvents));
    match ext.handshake().await {
        Ok(_) => {
            r.add("spawn", Status::Pass, "started");
            r.add("sandbox", sandbox_status, sandbox_detail);
        }
        Err(err @ ExtensionError::Spawn { .. }) => {
            r.add("spawn", Status::Fail, err.to_string());
            r.add("sandbox", sandbox_status, sandbox_detail);
            return r.done();
        }
        Err(err) => {
            r.add("spawn", Status::Pass, "started");
            r.add("sandbox", sandbox_status, sandbox_detail);
            r.add("hello", Status::Fail, err.to_string());
            ext.stop().await;
            check_frames(&mut r, &recording);
            return r.done();
        }
    }
    let seen = capture.take().unwrap_or_default();
    let lines: Vec<Vec<u8>> = recording
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .received
        .clone();
    check_hello(&mut r, manifest, &lines, &seen);

    // A tool call, a command, and each intercept, as a session would make them.
    check_tool_call(&mut r, &ext, &seen, approved).await;
    check_command(&mut r, &ext, &seen).await;
    check_intercepts(&mut r, &ext, &seen).await;

    // Within what it was approved with, when installed.
    if let (Some(pin), Some(approved)) = (&pin, approved) {
        check_pin(&mut r, manifest, pin, approved, &seen);
    }

    // It runs until told to stop, and stops when told: `shutdown`, stdin closed, an exit
    // within the grace.
    let status = match ext.stop_running().await {
        Ok(status) => status.unwrap_or_default(),
        Err(ended) => {
            r.add("shutdown", Status::Fail, ended.to_string());
            check_frames(&mut r, &recording);
            return r.done();
        }
    };
    if status.contains("signal") {
        r.add(
            "shutdown",
            Status::Warn,
            format!("did not exit within 2 s of shutdown and a closed stdin ({status})"),
        );
    } else {
        r.add("shutdown", Status::Pass, format!("exited ({status})"));
    }
    check_frames(&mut r, &recording);
    r.done()
}

/// The hello, first, and the name it gives; what it registered; and its `ready`.
fn check_hello(r: &mut Grader, manifest: &ZotManifest, lines: &[Vec<u8>], seen: &Registrations) {
    match lines.first().map(|l| FromExtension::parse(l)) {
        Some(Ok(FromExtension::Hello {
            name, capabilities, ..
        })) => {
            let caps = match capabilities.is_empty() {
                true => "no capabilities".to_string(),
                false => format!("capabilities {}", capabilities.join(", ")),
            };
            if name != manifest.name {
                r.add(
                    "hello",
                    Status::Warn,
                    format!(
                        "first line is hello ({caps}); it calls itself `{name}`, extension.json `{}` (the manifest wins)",
                        manifest.name
                    ),
                );
            } else {
                r.add(
                    "hello",
                    Status::Pass,
                    format!("first line is hello ({caps})"),
                );
            }
        }
        _ => r.add("hello", Status::Fail, "the first line is not a hello"),
    }
    r.add(
        "registrations",
        Status::Pass,
        format!(
            "{} tool(s), {} command(s), intercepts [{}], events [{}]",
            seen.tools.len(),
            seen.commands.len(),
            seen.intercepts.join(", "),
            seen.events.join(", ")
        ),
    );
    let said_ready = lines
        .iter()
        .any(|l| matches!(FromExtension::parse(l), Ok(FromExtension::Ready)));
    if said_ready {
        r.add("ready", Status::Pass, "sent ready");
    } else {
        r.add(
            "ready",
            Status::Warn,
            "never sent ready: it is ready after 250 ms without a frame (zot's older extensions do this); send `ready` after registering",
        );
    }
}

/// A call of its first tool a session's model could call, with the simplest arguments the
/// schema a call is checked against takes.
async fn check_tool_call(
    r: &mut Grader,
    ext: &Extension,
    seen: &Registrations,
    approved: Option<&Manifest>,
) {
    match seen
        .tools
        .iter()
        .find(|t| !seen.interactive.contains(&t.name))
    {
        None => r.add("tool_call", Status::Pass, "no tools to call"),
        Some(tool) => {
            // Arguments the schema a call is checked against takes: the approved one when
            // installed, else what it registered.
            let schema = approved
                .and_then(|m| m.tool(&tool.name))
                .map(|t| t.schema.clone())
                .or_else(|| tool.schema.clone())
                .unwrap_or_else(|| json!({"type": "object"}));
            match yep_host::tool_args::probe_args(&schema) {
                Err(why) => r.add(
                    "tool_call",
                    Status::Skip,
                    format!("`{}` not called: {why}", tool.name),
                ),
                Ok(args) => match ext.call_tool(&tool.name, args, None, None).await {
                    Ok(_) => r.add(
                        "tool_call",
                        Status::Pass,
                        format!("`{}` answered", tool.name),
                    ),
                    Err(e) if e.remote().is_some() => r.add(
                        "tool_call",
                        Status::Pass,
                        format!(
                            "`{}` answered (an error, for the simplest arguments its schema takes)",
                            tool.name
                        ),
                    ),
                    Err(e) => r.add("tool_call", Status::Fail, format!("`{}`: {e}", tool.name)),
                },
            }
        }
    }
}

/// Its first command, run with no arguments.
async fn check_command(r: &mut Grader, ext: &Extension, seen: &Registrations) {
    match seen.commands.first() {
        None => r.add("command", Status::Pass, "no commands to run"),
        Some(c) => match ext.with_peer(|p, t| p.command(&c.name, "", t)).await {
            Ok(_) => r.add("command", Status::Pass, format!("/{} answered", c.name)),
            Err(e) => r.add("command", Status::Fail, format!("/{}: {e}", c.name)),
        },
    }
}

/// Each intercept it subscribed to, fired as a session fires it: answered within zot's bound.
async fn check_intercepts(r: &mut Grader, ext: &Extension, seen: &Registrations) {
    let mut late = Vec::new();
    for name in &seen.intercepts {
        let answered = match name.as_str() {
            "tool_call" => {
                let firing = HookFiring {
                    event: HookEvent::PreToolUse,
                    tool: probe_tool("*"),
                    args: json!({"doctor": true}),
                    result: None,
                };
                ext.with_peer(|p, _| p.fire_hook(&firing, INTERCEPT_WITHIN))
                    .await
                    .map(|_| ())
            }
            other => {
                let point = match other {
                    "turn_start" => Intercept::TurnStart { step: 1 },
                    "assistant_message" => Intercept::AssistantMessage {
                        text: "doctor".into(),
                    },
                    _ => Intercept::SystemPrompt {
                        prompt: "doctor".into(),
                        provider: String::new(),
                        model: String::new(),
                    },
                };
                ext.with_peer(|p, _| p.intercept(&point, INTERCEPT_WITHIN))
                    .await
                    .map(|_| ())
            }
        };
        if let Err(e) = answered {
            late.push(format!("{name}: {e}"));
        }
    }
    match (seen.intercepts.is_empty(), late.is_empty()) {
        (true, _) => r.add("intercepts", Status::Pass, "none subscribed"),
        (false, true) => r.add(
            "intercepts",
            Status::Pass,
            format!("{} answered within 5 s", seen.intercepts.len()),
        ),
        (false, false) => r.add("intercepts", Status::Fail, late.join("; ")),
    }
}

/// It registers nothing beyond the pin it was installed with.
fn check_pin(
    r: &mut Grader,
    manifest: &ZotManifest,
    pin: &ZotPin,
    approved: &Manifest,
    seen: &Registrations,
) {
    let mut beyond = Vec::new();
    for t in seen
        .tools
        .iter()
        .filter(|t| approved.tool(&t.name).is_none())
    {
        beyond.push(format!("tool {}", t.name));
    }
    for c in &seen.commands {
        if !approved.yolop.commands.iter().any(|a| a.name == c.name) {
            beyond.push(format!("command {}", c.name));
        }
    }
    let (lines, _) = pin.diff(&seen.pin());
    beyond.extend(
        lines
            .iter()
            .filter_map(|l| l.strip_prefix("+ "))
            .map(String::from),
    );
    if beyond.is_empty() {
        r.add(
            "pin",
            Status::Pass,
            "registers nothing beyond what was approved",
        );
    } else {
        r.add(
            "pin",
            Status::Fail,
            format!(
                "registers beyond what was approved (a session withholds it; `yep trust {}` asks again): {}",
                manifest.name,
                beyond.join(", ")
            ),
        );
    }
}

/// Grade the zot extension in directory `dir` (an author's work in progress: nothing is
/// pinned, its data dir is its own); `None` for a bundle with nothing to run.
pub async fn run_dir(
    dir: &std::path::Path,
    workspace: std::path::PathBuf,
    log_dir: &std::path::Path,
    mode: yep_sandbox::Mode,
) -> Result<Option<Report>, yep_host::manifest::ManifestError> {
    let manifest = ZotManifest::load(dir)?;
    let Some(spec) = yep_host::runtime::launch::zot_dir_spec(&manifest, dir, workspace, log_dir)
    else {
        return Ok(None);
    };
    Ok(Some(run(&manifest, spec, None, None, mode).await))
}

/// Every line it wrote, against the reference's frame rules; anything that is not JSON is
/// stdout noise, which zot skips (write logs to stderr).
fn check_frames(r: &mut Grader, recording: &Mutex<Recording>) {
    let rec = recording.lock().unwrap_or_else(|p| p.into_inner());
    let mut noise = Vec::new();
    let mut bad = Vec::new();
    let mut unknown = Vec::new();
    for line in &rec.received {
        let text = String::from_utf8_lossy(line);
        if serde_json::from_slice::<serde_json::Value>(line).is_err() {
            noise.push(
                yep_host::text::escape(&text.chars().take(80).collect::<String>()).into_owned(),
            );
            continue;
        }
        match FromExtension::parse(line) {
            Ok(FromExtension::Unknown { kind }) => unknown.push(kind),
            Ok(_) => {}
            Err(e) => bad.push(e.to_string()),
        }
    }
    if noise.is_empty() {
        r.add("stdout", Status::Pass, "every line is a JSON frame");
    } else {
        r.add(
            "stdout",
            Status::Fail,
            format!(
                "{} line(s) on stdout are not JSON (zot skips them; log to stderr): {}",
                noise.len(),
                noise
                    .iter()
                    .take(3)
                    .cloned()
                    .collect::<Vec<_>>()
                    .join(" | ")
            ),
        );
    }
    match (bad.is_empty(), unknown.is_empty()) {
        (true, true) => r.add(
            "frames",
            Status::Pass,
            format!("{} frame(s), all well-formed", rec.received.len()),
        ),
        (true, false) => r.add(
            "frames",
            Status::Warn,
            format!(
                "unknown frame types (zot ignores them): {}",
                unknown.join(", ")
            ),
        ),
        (false, _) => r.add(
            "frames",
            Status::Fail,
            format!(
                "{} malformed frame(s): {}",
                bad.len(),
                bad.iter().take(3).cloned().collect::<Vec<_>>().join("; ")
            ),
        ),
    }
}
