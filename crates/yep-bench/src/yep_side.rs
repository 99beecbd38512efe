//! The yep side of the harness, plus the floor and the spawn-per-event hooks it is held against.

use serde_json::{Value, json};
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};
use yep_host::capability::{HookEvent, HookFiring, HookOutcome};
use yep_host::tool_args::ToolSchemas;
use yep_host::{Extension, Grants, Manifest, NoEvents, ServerSpec, SupervisorOptions};

/// A binary built beside this one: the peers are this package's other binaries.
pub fn sibling(name: &str) -> anyhow::Result<PathBuf> {
    let exe = std::env::current_exe()?;
    let path = exe.with_file_name(name);
    anyhow::ensure!(
        path.is_file(),
        "{} is missing; build the peers with `cargo build --release -p yep-bench --bins`",
        path.display()
    );
    Ok(path)
}

/// Under `cargo run` only this binary is built: build the peer binaries too, so that one
/// `cargo run --release -p yep-bench` measures current code on a fresh clone. Elsewhere (the
/// binary run directly) the peers are taken as they are.
pub fn build_peers() -> anyhow::Result<()> {
    let Some(cargo) = std::env::var_os("CARGO") else {
        return Ok(());
    };
    // The same profile as this binary, so the peers land beside it.
    let exe = std::env::current_exe()?;
    let release = exe
        .parent()
        .and_then(Path::file_name)
        .is_some_and(|d| d == "release");
    let mut build = command(Path::new(&cargo));
    // `yep` too: `yep mcp serve` is measured as an agent spawns it.
    build.args([
        "build",
        "--quiet",
        "-p",
        "yep-bench",
        "-p",
        "yep-cli",
        "--bins",
    ]);
    if release {
        build.arg("--release");
    }
    let status = build.status()?;
    anyhow::ensure!(status.success(), "building the peer binaries failed");
    Ok(())
}

#[allow(clippy::disallowed_methods)] // the harness spawns raw children on purpose: they are the baseline
pub fn command(program: &Path) -> Command {
    Command::new(program)
}

/// A ~`bytes` JSON-safe text.
pub fn text(bytes: usize) -> String {
    "x".repeat(bytes)
}

/// Raw pipe ping-pong of one line with a tiny Rust child; with `spin`, both ends busy-poll
/// for the next line before blocking.
pub fn floor(
    pong: &Path,
    spin: bool,
    bytes: usize,
    warmup: usize,
    samples: usize,
) -> anyhow::Result<Vec<Duration>> {
    let mode = if spin { "spin" } else { "block" };
    let mut child = command(pong)
        .arg(mode)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()?;
    let fd = std::os::fd::AsRawFd::as_raw_fd(child.stdout.as_ref().expect("piped"));
    let mut stdin = child.stdin.take().expect("piped");
    let mut stdout = BufReader::new(child.stdout.take().expect("piped"));
    let line = format!("{}\n", json!({ "text": text(bytes.saturating_sub(12)) }));
    let mut back = String::new();
    let mut out = Vec::with_capacity(samples);
    for i in 0..warmup + samples {
        let t = Instant::now();
        stdin.write_all(line.as_bytes())?;
        stdin.flush()?;
        back.clear();
        if spin && stdout.buffer().is_empty() {
            spin_until_readable(fd);
        }
        stdout.read_line(&mut back)?;
        if i >= warmup {
            out.push(t.elapsed());
        }
    }
    drop(stdin);
    child.wait()?;
    Ok(out)
}

/// Busy-poll `fd` for up to 50 µs (what yep's default window is).
pub fn spin_until_readable(fd: i32) {
    let until = Instant::now() + Duration::from_micros(50);
    while Instant::now() < until {
        let mut pfd = libc::pollfd {
            fd,
            events: libc::POLLIN,
            revents: 0,
        };
        // SAFETY: one valid pollfd, zero timeout.
        if unsafe { libc::poll(&mut pfd, 1, 0) } != 0 {
            return;
        }
        std::hint::spin_loop();
    }
}

/// The echo example's tool schemas, compiled as the runtime compiles them.
pub fn echo_schemas() -> anyhow::Result<ToolSchemas> {
    let manifest = Manifest::parse(yep_example_echo::PLUGIN_JSON, "plugin.json".as_ref())?;
    Ok(ToolSchemas::from_manifest(&manifest))
}

/// An extension over `command args`, in a scratch dir, whose calls are checked against
/// `tool_schemas` (the default checks nothing).
pub fn extension(
    name: &str,
    command: &Path,
    scratch: &Path,
    tool_schemas: ToolSchemas,
) -> Extension {
    sandboxed_extension(name, command, scratch, tool_schemas, yep_sandbox::Mode::Off)
}

/// [`extension`], spawned under `sandbox`.
pub fn sandboxed_extension(
    name: &str,
    command: &Path,
    scratch: &Path,
    tool_schemas: ToolSchemas,
    sandbox: yep_sandbox::Mode,
) -> Extension {
    let spec = spec(name, command, scratch, tool_schemas);
    let opts = SupervisorOptions {
        sandbox,
        ..SupervisorOptions::default()
    };
    Extension::new(spec, opts, Arc::new(NoEvents))
}

/// How the bench runs `command` (no config, nothing granted, logs in `scratch`).
fn spec(name: &str, command: &Path, scratch: &Path, tool_schemas: ToolSchemas) -> ServerSpec {
    ServerSpec {
        name: name.into(),
        command: command.to_string_lossy().into_owned(),
        args: vec![],
        package_dir: scratch.to_path_buf(),
        workspace_root: scratch.to_path_buf(),
        cwd: None,
        data_dir: None,
        language: None,
        session_id: "bench".into(),
        config: Value::Null,
        env: vec![],
        log_dir: scratch.join("logs"),
        grants: Grants::default(),
        tool_schemas,
        sandbox_grants: Default::default(),
        grant_name: None,
        broker: None,
    }
}

/// An extension on the zot wire: `node <script>`, in a scratch dir.
pub fn zot_extension(script: &Path, scratch: &Path) -> Extension {
    let mut ext_spec = spec("zot-echo", Path::new("node"), scratch, Default::default());
    ext_spec.args = vec![script.to_string_lossy().into_owned()];
    let opts = SupervisorOptions {
        dialect: Arc::new(yep_host::dialect::zot::Zot::default()),
        ..SupervisorOptions::default()
    };
    Extension::new(ext_spec, opts, Arc::new(NoEvents))
}

/// What the argument check costs one call: `Extension::check_args` on the `bytes` echo
/// arguments, in ns per call (the schema is compiled once, before the loop).
pub fn check_cost(ext: &Extension, bytes: usize, calls: usize) -> anyhow::Result<f64> {
    let args = json!({ "text": text(bytes.saturating_sub(12)) });
    ext.check_args("echo", &args)?;
    let start = Instant::now();
    for _ in 0..calls {
        std::hint::black_box(
            ext.check_args(std::hint::black_box("echo"), std::hint::black_box(&args)),
        )?;
    }
    Ok(start.elapsed().as_nanos() as f64 / calls as f64)
}

/// `rtt` on two extensions in alternating rounds (each warmed up again, so a server's
/// busy-poll window is hot), so drift in the machine lands on both alike:
/// (checked samples, unchecked samples).
pub async fn rtt_pair(
    checked: &Extension,
    unchecked: &Extension,
    bytes: usize,
    rounds: usize,
    per_round: usize,
) -> anyhow::Result<(Vec<Duration>, Vec<Duration>)> {
    let (mut a, mut b) = (Vec::new(), Vec::new());
    for _ in 0..rounds {
        a.extend(rtt(checked, bytes, 100, per_round).await?);
        b.extend(rtt(unchecked, bytes, 100, per_round).await?);
    }
    Ok((a, b))
}

/// One `tool/call` echo at a time.
pub async fn rtt(
    ext: &Extension,
    bytes: usize,
    warmup: usize,
    samples: usize,
) -> anyhow::Result<Vec<Duration>> {
    let args = json!({ "text": text(bytes.saturating_sub(12)) });
    let mut out = Vec::with_capacity(samples);
    for i in 0..warmup + samples {
        let t = Instant::now();
        ext.call_tool("echo", args.clone(), None, None).await?;
        if i >= warmup {
            out.push(t.elapsed());
        }
    }
    Ok(out)
}

/// Calls per second with `in_flight` callers sharing one extension (200 B payloads).
pub async fn throughput(
    ext: Arc<Extension>,
    in_flight: usize,
    total: usize,
) -> anyhow::Result<f64> {
    let args = json!({ "text": text(188) });
    let issued = Arc::new(AtomicUsize::new(0));
    let start = Instant::now();
    let mut tasks = Vec::new();
    for _ in 0..in_flight {
        let (ext, args, issued) = (Arc::clone(&ext), args.clone(), Arc::clone(&issued));
        tasks.push(tokio::spawn(async move {
            while issued.fetch_add(1, Ordering::Relaxed) < total {
                ext.call_tool("echo", args.clone(), None, None).await?;
            }
            anyhow::Ok(())
        }));
    }
    for t in tasks {
        t.await??;
    }
    Ok(total as f64 / start.elapsed().as_secs_f64())
}

/// CPU time (ns) a process has used so far, summed over its threads from `/proc`: this process
/// when `pid` is `None`. Threads that exited are not counted, so compare only across a span in
/// which the process kept its threads (a runtime's workers, a server's reader).
pub fn cpu_ns(pid: Option<u32>) -> Option<u64> {
    let dir = match pid {
        Some(pid) => format!("/proc/{pid}/task"),
        None => "/proc/self/task".into(),
    };
    let mut total = 0;
    for task in std::fs::read_dir(dir).ok()? {
        let stat = std::fs::read_to_string(task.ok()?.path().join("schedstat")).ok()?;
        total += stat.split_whitespace().next()?.parse::<u64>().ok()?;
    }
    Some(total)
}

/// [`throughput`], and the CPU each side spent per call meanwhile (µs): this process (the
/// host and the callers) and the server. On a shared machine these move less than the rate:
/// other tenants take wall time, not the CPU a call costs.
pub async fn throughput_cpu(
    ext: Arc<Extension>,
    in_flight: usize,
    total: usize,
) -> anyhow::Result<(f64, Option<(f64, f64)>)> {
    let pid = ext.pid();
    let before = (cpu_ns(None), pid.and_then(|p| cpu_ns(Some(p))));
    let rate = throughput(ext, in_flight, total).await?;
    let after = (cpu_ns(None), pid.and_then(|p| cpu_ns(Some(p))));
    let per_call =
        |a: Option<u64>, b: Option<u64>| Some(b?.checked_sub(a?)? as f64 / total as f64 / 1000.0);
    let cpu = per_call(before.0, after.0).zip(per_call(before.1, after.1));
    Ok((rate, cpu))
}

fn hook_event() -> HookFiring {
    HookFiring {
        event: HookEvent::PreToolUse,
        tool: "bash".into(),
        args: json!({ "command": "ls -la", "forbidden": false }),
        result: None,
    }
}

/// A `pre_tool_use` decision from a warm extension.
pub async fn warm_hook(
    ext: &Extension,
    warmup: usize,
    samples: usize,
) -> anyhow::Result<Vec<Duration>> {
    let event = hook_event();
    let mut out = Vec::with_capacity(samples);
    for i in 0..warmup + samples {
        let t = Instant::now();
        let decision = ext
            .with_peer(|p, _| p.fire_hook(&event, Duration::from_secs(5)))
            .await?;
        anyhow::ensure!(
            !matches!(decision.outcome, HookOutcome::Block { .. }),
            "the warm hook blocked an allowed call"
        );
        if i >= warmup {
            out.push(t.elapsed());
        }
    }
    Ok(out)
}

/// A Claude Code plugin whose one PreToolUse hook on `bash` is a command that reads the event
/// and allows it, run through the host's Claude Code dialect as a session runs it: a
/// contained `sh` per event (under `sandbox`), Claude Code's stdin and its answer read.
pub fn claude_hook_extension(
    scratch: &Path,
    sandbox: yep_sandbox::Mode,
) -> anyhow::Result<Extension> {
    let dir = scratch.join("claude-hook");
    std::fs::create_dir_all(dir.join("data"))?;
    let pin: yep_host::store::claude::ClaudePin = serde_json::from_value(json!({
        "kind": "claude",
        "hooks": [{"event": "PreToolUse", "matcher": "Bash", "command":
            "cat >/dev/null; echo '{\"hookSpecificOutput\": {\"permissionDecision\": \"allow\"}}'"}]
    }))?;
    let mut spec = spec("claude-hook", Path::new(""), &dir, Default::default());
    spec.command = String::new();
    spec.data_dir = Some(dir.join("data"));
    let mut opts = SupervisorOptions {
        sandbox,
        ..SupervisorOptions::default()
    };
    let names = Default::default();
    yep_host::runtime::launch::claude_wire(pin, &spec, &mut opts, &names);
    Ok(Extension::new(spec, opts, Arc::new(NoEvents)))
}

/// One process per event: `program args`, the event JSON on stdin, the decision on stdout.
pub fn spawned_hook(
    program: &Path,
    args: &[&str],
    warmup: usize,
    samples: usize,
) -> anyhow::Result<Vec<Duration>> {
    // What a spawned hook reads: the same event, as YEP's `hook/fire` params.
    let event = serde_json::to_string(&yep_protocol::HookFireParams {
        event: "pre_tool_use".into(),
        tool_name: "bash".into(),
        args: hook_event().args,
        result: None,
    })?;
    let mut out = Vec::with_capacity(samples);
    for i in 0..warmup + samples {
        let t = Instant::now();
        let mut child = command(program)
            .args(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()?;
        child
            .stdin
            .take()
            .expect("piped")
            .write_all(event.as_bytes())?;
        let output = child.wait_with_output()?;
        anyhow::ensure!(
            output.status.success(),
            "the spawned hook failed: {:?}",
            output.status
        );
        let decision: Value = serde_json::from_slice(&output.stdout)?;
        anyhow::ensure!(
            decision["block"] == false,
            "the spawned hook blocked an allowed call"
        );
        if i >= warmup {
            out.push(t.elapsed());
        }
    }
    Ok(out)
}

/// The bash hook script: read the event, answer allow unless `"forbidden": true`.
pub const BASH_HOOK: &str = r#"event=$(cat); case "$event" in *'"forbidden":true'*) echo '{"block":true}';; *) echo '{"block":false}';; esac"#;

/// Spawn plus handshake, fresh each time, in `scratch` as its workspace, with `grants`.
pub async fn cold_start(
    command: &Path,
    args: &[String],
    scratch: &Path,
    samples: usize,
    sandbox: yep_sandbox::Mode,
    grants: &yep_host::manifest::SandboxGrants,
) -> anyhow::Result<Vec<Duration>> {
    let mut out = Vec::with_capacity(samples);
    for i in 0..samples + 3 {
        let mut spec = spec("cold", command, scratch, Default::default());
        spec.args = args.to_vec();
        spec.sandbox_grants = grants.clone();
        let opts = SupervisorOptions {
            sandbox,
            ..SupervisorOptions::default()
        };
        let ext = Extension::new(spec, opts, Arc::new(NoEvents));
        let t = Instant::now();
        ext.handshake().await?;
        if i >= 3 {
            out.push(t.elapsed());
        }
        drop(ext);
    }
    Ok(out)
}

/// The interpreter `name` runs as, by its own account (`args` print its path): the binary
/// itself, past any version manager's shim.
pub fn interpreter(name: &str, args: &[&str]) -> anyhow::Result<std::path::PathBuf> {
    use anyhow::Context;
    let out = command(Path::new(name))
        .args(args)
        .output()
        .with_context(|| format!("failed to run {name}"))?;
    anyhow::ensure!(out.status.success(), "{name} could not say where it is");
    let path = String::from_utf8(out.stdout)?.trim().to_string();
    Ok(std::path::PathBuf::from(path))
}

/// From spawn to exit of `program args` (an interpreter doing nothing), `samples` times
/// after 3 untimed.
pub fn bare_start(program: &Path, args: &[&str], samples: usize) -> anyhow::Result<Vec<Duration>> {
    let mut out = Vec::with_capacity(samples);
    for i in 0..samples + 3 {
        let t = Instant::now();
        let status = command(program)
            .args(args)
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::null())
            .status()?;
        anyhow::ensure!(status.success(), "{} {args:?} failed", program.display());
        if i >= 3 {
            out.push(t.elapsed());
        }
    }
    Ok(out)
}

/// This process's resident set, in KiB, as the shared host reads any process's.
fn rss_kib() -> u64 {
    yep_serve::shared::rss_kib(std::process::id()).unwrap_or(0)
}

/// Host-side RSS added per idle, connected extension, over `n` of them (KiB each).
pub async fn memory_per_extension(command: &Path, scratch: &Path, n: usize) -> anyhow::Result<f64> {
    // Warm the allocator and runtime with one connection first, so only the marginal cost counts.
    let warm = extension("warm", command, scratch, Default::default());
    warm.handshake().await?;
    let before = rss_kib();
    let mut exts = Vec::with_capacity(n);
    for i in 0..n {
        let ext = extension(&format!("idle{i}"), command, scratch, Default::default());
        ext.handshake().await?;
        exts.push(ext);
    }
    tokio::time::sleep(Duration::from_millis(100)).await;
    let after = rss_kib();
    for ext in &exts {
        ext.stop().await;
    }
    warm.stop().await;
    Ok(after.saturating_sub(before) as f64 / n as f64)
}

/// Nanoseconds per `ExtensionHost::emit` of `n` events to a trace extension served by
/// `command`, and how many the bounded queue dropped.
pub async fn emit_cost(command: &Path, scratch: &Path, n: usize) -> anyhow::Result<(f64, u64)> {
    use yep_host::store::{AlwaysYes, Home, InstallOptions};
    let home = Home {
        root: scratch.join("trace-home"),
    };
    let pkg = scratch.join("trace-pkg");
    std::fs::create_dir_all(&pkg)?;
    let manifest = json!({"name": "tracer", "version": "1.0.0", "yolop": {"capabilityServer": {"command": command}, "trace": true}});
    std::fs::write(pkg.join("plugin.json"), manifest.to_string())?;
    home.install(
        &pkg.display().to_string(),
        &InstallOptions::default(),
        &mut AlwaysYes,
    )?;
    home.set_enabled("tracer", true)?;
    let session = yep_host::Session {
        id: "bench".into(),
        workspace_root: scratch.to_path_buf(),
    };
    let host =
        yep_host::ExtensionHost::start(home, session, yep_host::HostOptions::default()).await?;
    let started = Instant::now();
    for i in 0..n {
        host.emit(yep_host::runtime::TraceEvent {
            event_type: "tool.completed".into(),
            id: i.to_string(),
            ..Default::default()
        });
    }
    let per = started.elapsed().as_nanos() as f64 / n as f64;
    host.flush(Duration::from_secs(30)).await;
    let dropped = host.trace_dropped().values().sum();
    host.shutdown().await;
    Ok((per, dropped))
}

/// From `cancel` to the call resolving `cancelled`: a long count on the echo server, cancelled
/// once its first update arrives (host and SDK both: the cancel is written, the SDK wakes the
/// handler and answers).
pub async fn cancel_rtt(ext: &Arc<Extension>, samples: usize) -> anyhow::Result<Vec<Duration>> {
    let mut out = Vec::with_capacity(samples);
    for i in 0..samples + 5 {
        let token = tokio_util::sync::CancellationToken::new();
        let (tx, under_way) = tokio::sync::oneshot::channel::<()>();
        let tx = std::sync::Mutex::new(Some(tx));
        let sink: yep_host::UpdateSink = Arc::new(move |_: &yep_host::capability::Progress| {
            if let Some(tx) = tx.lock().unwrap_or_else(|p| p.into_inner()).take() {
                let _ = tx.send(());
            }
        });
        let call = {
            let (ext, token) = (Arc::clone(ext), token.clone());
            tokio::spawn(async move {
                ext.call_tool(
                    "count",
                    json!({"n": 1_000_000, "interval_ms": 2}),
                    Some(sink),
                    Some(token),
                )
                .await
            })
        };
        under_way.await?;
        let t = Instant::now();
        token.cancel();
        let outcome = call.await?;
        let took = t.elapsed();
        anyhow::ensure!(
            outcome.as_ref().is_err_and(|e| e.is_cancelled()),
            "a cancelled count resolved as {outcome:?}"
        );
        if i >= 5 {
            out.push(took);
        }
    }
    Ok(out)
}

/// An `ExtensionHost` over one installed extension served by `command args`, with `facet` as
/// its manifest (the server comes from `command`), in its own home under `scratch`.
async fn host_over(
    scratch: &Path,
    name: &str,
    command: &Path,
    args: &[&str],
    facet: Value,
    opts: yep_host::HostOptions,
) -> anyhow::Result<yep_host::ExtensionHost> {
    use yep_host::store::{AlwaysYes, Home, InstallOptions};
    let home = Home {
        root: scratch.join(format!("{name}-home")),
    };
    let pkg = scratch.join(format!("{name}-pkg"));
    std::fs::create_dir_all(&pkg)?;
    let mut facet = facet;
    facet["capabilityServer"] = json!({"command": command, "args": args});
    let manifest = json!({"name": name, "version": "1.0.0", "yolop": facet});
    std::fs::write(pkg.join("plugin.json"), manifest.to_string())?;
    home.install(
        &pkg.display().to_string(),
        &InstallOptions::default(),
        &mut AlwaysYes,
    )?;
    home.set_enabled(name, true)?;
    let session = yep_host::Session {
        id: "bench".into(),
        workspace_root: scratch.to_path_buf(),
    };
    Ok(yep_host::ExtensionHost::start(home, session, opts).await?)
}

/// What `ExtensionHost::post_tool_use` costs the agent loop when the extension's post hook
/// never answers (`yep-bench-echo --hang`): it returns without waiting for the hook.
pub async fn post_hook_dispatch(
    hanging_echo: &Path,
    scratch: &Path,
    samples: usize,
) -> anyhow::Result<Vec<Duration>> {
    let opts = yep_host::HostOptions {
        supervisor: SupervisorOptions {
            grace: Duration::from_millis(100),
            ..SupervisorOptions::default()
        },
        ..yep_host::HostOptions::default()
    };
    let facet = json!({"tools": [{"name": "echo"}], "hooks": [{"event": "post_tool_use"}]});
    let host = host_over(scratch, "posthook", hanging_echo, &["--hang"], facet, opts).await?;
    let args = json!({"cmd": "ls"});
    let result = json!({"out": "x"}).into();
    let mut out = Vec::with_capacity(samples);
    for i in 0..samples + 100 {
        let t = Instant::now();
        host.post_tool_use("bash", &args, Ok(&result));
        let took = t.elapsed();
        if i >= 100 {
            out.push(took);
        }
        // Let the background fire go out, as an agent loop would between tool calls.
        tokio::task::yield_now().await;
    }
    host.shutdown().await;
    Ok(out)
}

/// How long `ExtensionHost::prompt` takes when the extension's dynamic prompt never answers
/// (`yep-bench-echo --hang`), against a `timeout` prompt timeout: the turn goes on without it.
pub async fn prompt_hung_server(
    hanging_echo: &Path,
    scratch: &Path,
    timeout: Duration,
    samples: usize,
) -> anyhow::Result<Vec<Duration>> {
    let opts = yep_host::HostOptions {
        prompt_timeout: timeout,
        supervisor: SupervisorOptions {
            grace: Duration::from_millis(100),
            ..SupervisorOptions::default()
        },
        ..yep_host::HostOptions::default()
    };
    let facet = json!({"tools": [{"name": "echo"}], "dynamic_prompt": true});
    let host = host_over(
        scratch,
        "hungprompt",
        hanging_echo,
        &["--hang"],
        facet,
        opts,
    )
    .await?;
    let mut out = Vec::with_capacity(samples);
    for turn in 0..samples as u64 + 1 {
        let t = Instant::now();
        host.prompt(turn + 1).await;
        if turn >= 1 {
            out.push(t.elapsed());
        }
    }
    host.shutdown().await;
    Ok(out)
}

/// How long `ExtensionHost::start` takes when an eager extension's server never answers its
/// handshake (`sleep 3600`), against a `bound` startup bound: start returns anyway.
pub async fn startup_hung_server(
    scratch: &Path,
    bound: Duration,
    samples: usize,
) -> anyhow::Result<Vec<Duration>> {
    let opts = || yep_host::HostOptions {
        startup_bound: bound,
        supervisor: SupervisorOptions {
            handshake_timeout: Duration::from_secs(3600),
            grace: Duration::from_millis(100),
            ..SupervisorOptions::default()
        },
        ..yep_host::HostOptions::default()
    };
    // A hook makes it start eagerly, with the session.
    let facet = json!({"hooks": [{"event": "pre_tool_use"}]});
    let sleep = Path::new("sleep");
    let first = host_over(scratch, "hungstart", sleep, &["3600"], facet, opts()).await?;
    drop(first);
    let home = yep_host::store::Home {
        root: scratch.join("hungstart-home"),
    };
    let mut out = Vec::with_capacity(samples);
    for _ in 0..samples {
        let session = yep_host::Session {
            id: "bench".into(),
            workspace_root: scratch.to_path_buf(),
        };
        let t = Instant::now();
        let host = yep_host::ExtensionHost::start(home.clone(), session, opts()).await?;
        out.push(t.elapsed());
        // Dropped, not shut down: the server's process group is killed with it.
        drop(host);
    }
    Ok(out)
}

/// An `ExtensionHost` in a scratch home whose one MCP server, `files`, is `server`, approved as
/// `yep mcp add` approves it: MCP tool calls as an agent makes them, through the host's table,
/// its pin check and its MCP client.
pub async fn mcp_host(server: &Path, scratch: &Path) -> anyhow::Result<yep_host::ExtensionHost> {
    use anyhow::Context;
    let home = yep_host::store::Home {
        root: scratch.join("mcp-home"),
    };
    let spec = yep_host::store::manifest::McpServer {
        transport: "stdio".into(),
        command: Some(server.display().to_string()),
        args: Vec::new(),
        env: Default::default(),
        url: None,
        headers: Default::default(),
    };
    yep_host::store::mcp::add(&home, "files", &spec)?;
    let workspace = scratch.to_path_buf();
    let source = yep_host::runtime::mcp::sources(&home, &[], &workspace, &mut |_| {})
        .into_iter()
        .find(|s| s.name == "files")
        .context("the MCP server just added is not listed")?;
    yep_host::runtime::mcp::approve(&home, &source, &workspace, &Default::default()).await?;
    let session = yep_host::Session {
        id: "bench".into(),
        workspace_root: workspace,
    };
    Ok(yep_host::ExtensionHost::start(home, session, yep_host::HostOptions::default()).await?)
}

/// Round trips of `tool` (an echo) through `host`'s `run_tool`, as an agent calls it, with
/// `bytes` of text, one in flight.
pub async fn host_rtt(
    host: &yep_host::ExtensionHost,
    tool: &str,
    bytes: usize,
    warmup: usize,
    samples: usize,
) -> anyhow::Result<Vec<Duration>> {
    let args = json!({ "text": "x".repeat(bytes) });
    let mut out = Vec::with_capacity(samples);
    for i in 0..warmup + samples {
        let t = Instant::now();
        match host.run_tool(tool, args.clone()).await {
            yep_host::runtime::CallOutcome::Ok(_) => {}
            other => anyhow::bail!("{tool}: {other}"),
        }
        if i >= warmup {
            out.push(t.elapsed());
        }
    }
    Ok(out)
}

/// An `ExtensionHost` over the home [`bridge_home`] made, as `yep mcp serve` starts one.
pub async fn bridge_host(home: &Path) -> anyhow::Result<yep_host::ExtensionHost> {
    let home = yep_host::store::Home {
        root: home.to_path_buf(),
    };
    let session = yep_host::Session {
        id: "bench-bridge".into(),
        workspace_root: home.root.clone(),
    };
    Ok(yep_host::ExtensionHost::start(home, session, yep_host::HostOptions::default()).await?)
}

/// A scratch home with `packages` enabled packages for `yep mcp serve`: the first is `echo`
/// (its three tools), the rest declare one tool each and are never started.
pub fn bridge_home(echo: &Path, scratch: &Path, packages: usize) -> anyhow::Result<PathBuf> {
    let home = yep_host::store::Home {
        root: scratch.join("bridge-home"),
    };
    for i in 0..packages {
        let name = format!("pkg{i:02}");
        let tools = match i {
            0 => json!([
                {"name": "echo", "description": "echo", "schema": {"type": "object", "properties": {"text": {"type": "string"}}}},
                {"name": "count", "description": "count"},
                {"name": "ask", "description": "ask"},
            ]),
            _ => json!([{"name": format!("tool{i:02}"), "description": "never called"}]),
        };
        let manifest = json!({"name": name, "version": "1.0.0", "description": "bench",
            "yolop": {"capabilityServer": {"command": echo}, "tools": tools}});
        let dir = scratch.join("bridge-src").join(&name);
        std::fs::create_dir_all(&dir)?;
        std::fs::write(dir.join("plugin.json"), manifest.to_string())?;
        let source = dir.display().to_string();
        let opts = yep_host::store::InstallOptions::default();
        home.install(&source, &opts, &mut yep_host::store::AlwaysYes)?;
        home.set_enabled(&name, true)?;
    }
    Ok(home.root)
}

/// This run's scratch directory, under the system's temp dir.
pub fn tempdir() -> anyhow::Result<std::path::PathBuf> {
    let dir = std::env::temp_dir().join(format!("yep-bench-{}", std::process::id()));
    std::fs::create_dir_all(&dir)?;
    Ok(dir)
}

/// A workspace in `scratch` that holds a git repository's hooks and config, `.vscode/` and
/// `.envrc`: a server that may write it starts with them mounted read-only.
pub fn protected_workspace(scratch: &Path) -> anyhow::Result<PathBuf> {
    let ws = scratch.join("protected-ws");
    for dir in [".git/hooks", ".vscode"] {
        std::fs::create_dir_all(ws.join(dir))?;
    }
    for file in [".git/config", ".envrc"] {
        std::fs::write(ws.join(file), "")?;
    }
    Ok(ws)
}
