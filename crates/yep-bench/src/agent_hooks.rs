//! Section 12: the hook command end to end, as Claude Code runs it for each event (`yep-hook
//! claude`, as `yep hooks config` wires it): the process start, the attach to the warm shared
//! host, a chain of one warm YEP pre hook, and the answer. `yep hook claude`, the same through
//! the whole `yep` binary, is reported beside it. Beside it are the same check as a Python command hook, and a bare `true` spawn:
//! what any command hook costs before it does anything.

use crate::stats::percentiles;
use crate::yep_side::{command, interpreter, sibling};
use crate::{Ratios, Report};
use serde_json::json;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

/// Claude Code's PreToolUse input for its own Bash.
fn event(workspace: &Path) -> String {
    json!({"session_id": "bench", "transcript_path": "/dev/null", "cwd": workspace,
        "hook_event_name": "PreToolUse", "tool_name": "Bash",
        "tool_input": {"command": "ls -la", "description": "list"},
        "tool_use_id": "toolu_bench", "permission_mode": "default"})
    .to_string()
}

/// The same check as a Python command hook: read the event, refuse `rm -rf`, else say
/// nothing.
const PYTHON_HOOK: &str = r#"import json, sys
e = json.load(sys.stdin)
if "rm -rf" in e.get("tool_input", {}).get("command", ""):
    print(json.dumps({"hookSpecificOutput": {"hookEventName": "PreToolUse", "permissionDecision": "deny", "permissionDecisionReason": "no rm -rf"}}))
"#;

/// Spawn `program args` with `input` on stdin, `warmup + samples` times: each run's time
/// from spawn to exit.
fn spawned(
    program: &Path,
    args: &[&str],
    input: &str,
    warmup: usize,
    samples: usize,
) -> anyhow::Result<Vec<Duration>> {
    let mut out = Vec::with_capacity(samples);
    for i in 0..warmup + samples {
        let t = Instant::now();
        let mut child = command(program)
            .args(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()?;
        // `true` reads none of it: a write it never takes is no failure.
        let _ = child
            .stdin
            .take()
            .expect("piped")
            .write_all(input.as_bytes());
        let output = child.wait_with_output()?;
        anyhow::ensure!(
            output.status.success(),
            "{} failed: {:?}: {}",
            program.display(),
            output.status,
            String::from_utf8_lossy(&output.stderr)
        );
        if i >= warmup {
            out.push(t.elapsed());
        }
    }
    Ok(out)
}

/// A home with one YEP package, the bench's echo server with a `pre_tool_use` hook on `bash`,
/// installed and enabled.
fn home_with_hook(yep: &Path, echo: &Path, scratch: &Path) -> anyhow::Result<PathBuf> {
    let home = scratch.join("agent-hooks-home");
    let dir = scratch.join("agent-hooks-src");
    std::fs::create_dir_all(&dir)?;
    let manifest = json!({"name": "guard", "version": "1.0.0", "description": "bench",
        "yolop": {"capabilityServer": {"command": echo, "args": []},
            "tools": [{"name": "echo", "description": "echo"}],
            "hooks": [{"event": "pre_tool_use", "tool_name_glob": "bash"}]}});
    std::fs::write(dir.join("plugin.json"), manifest.to_string())?;
    for args in [
        vec!["install", dir.to_str().unwrap_or_default(), "--yes"],
        vec!["enable", "guard"],
    ] {
        let out = command(yep)
            .arg("--home")
            .arg(&home)
            .args(&args)
            .stdin(Stdio::null())
            .output()?;
        anyhow::ensure!(
            out.status.success(),
            "yep {}: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr)
        );
    }
    // A host left behind by a run killed outright exits a minute after its last use.
    std::fs::write(home.join("settings.toml"), {
        let text = std::fs::read_to_string(home.join("settings.toml")).unwrap_or_default();
        format!("host_linger = \"60s\"\n{text}")
    })?;
    Ok(home)
}

/// Measure `hook_command`, `python_command_hook` and `true_spawn`.
pub fn measure(r: &mut Report, echo: &Path, scratch: &Path) -> anyhow::Result<()> {
    let yep = sibling("yep")?;
    let workspace = scratch.join("agent-hooks-workspace");
    std::fs::create_dir_all(&workspace)?;
    let workspace = workspace.canonicalize()?;
    let home = home_with_hook(&yep, echo, scratch)?;
    let input = event(&workspace);
    let home_arg = home.display().to_string();
    // What `yep hooks config` wires: the small `yep-hook`. The first event starts the shared
    // host and the package's server: the warm-up.
    let small = sibling("yep-hook")?;
    let hooked = spawned(
        &small,
        &["--home", home_arg.as_str(), "claude"],
        &input,
        20,
        300,
    );
    // The same through the whole `yep` binary (`yep hook claude`).
    let whole = ["--home", home_arg.as_str(), "hook", "claude"];
    let hooked_yep = spawned(&yep, &whole, &input, 5, 100);
    let _ = command(&yep)
        .args(["--home", home_arg.as_str(), "host", "stop"])
        .stdin(Stdio::null())
        .output();
    r.latency("hook_command", percentiles(hooked?));
    r.latency("hook_command_yep", percentiles(hooked_yep?));
    let python = interpreter("python3", &["-c", "import sys; print(sys.executable)"])?;
    r.latency(
        "python_command_hook",
        percentiles(spawned(&python, &["-c", PYTHON_HOOK], &input, 5, 100)?),
    );
    r.latency(
        "true_spawn",
        percentiles(spawned(Path::new("true"), &[], &input, 20, 300)?),
    );
    Ok(())
}

/// The target: `yep hook` end to end in at most 3 ms (p50), and how it compares.
pub fn targets(t: &mut Ratios<'_>, r: &Report) {
    let ms = r.p50("hook_command") / 1000.0;
    t.timed(
        "hook_command_p50_ms",
        &["hook_command"],
        ms,
        "<= 3 ms",
        ms <= 3.0,
    );
    t.reported(
        "python_command_hook_p50 / hook_command_p50",
        &["python_command_hook", "hook_command"],
        r.p50("python_command_hook") / r.p50("hook_command"),
        "(reported)",
    );
    t.reported(
        "hook_command_p50 / true_spawn_p50",
        &["hook_command", "true_spawn"],
        r.p50("hook_command") / r.p50("true_spawn"),
        "(reported)",
    );
}
