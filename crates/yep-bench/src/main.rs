//! `yep-bench`: yep's hot paths against a raw pipe, rmcp and yolop-yep, measured in one run.
//!
//! `cargo run --release -p yep-bench` prints a table; `-- --json` prints one object per figure
//! plus the derived ratios and whether each target holds.

mod agent_hooks;
mod egress;
mod launchers;
mod rmcp_bench;
mod shared;
mod stats;
mod yep_side;

use rmcp_bench::RmcpPeer;
use serde_json::{Map, Value, json};
use stats::{Percentiles, percentiles};
use std::sync::Arc;
use std::time::Instant;
use yep_side::*;

const PAYLOADS: [usize; 4] = [200, 4096, 65536, 1 << 20];
const IN_FLIGHT: [usize; 3] = [1, 8, 64];
/// The prompt timeout and startup bound the hung-server figures run against.
const PROMPT_TIMEOUT: std::time::Duration = std::time::Duration::from_millis(50);
const STARTUP_BOUND: std::time::Duration = std::time::Duration::from_millis(100);
/// What `floor_spin`'s p50 and p99 stay under on a quiet machine: its usual is a couple of µs.
const FLOOR_SPIN_QUIET_US: f64 = 5.0;
/// How far above [`FLOOR_SPIN_QUIET_US`] `floor_spin`'s p50 may read, at the start, at the end
/// or between the sections of a run, before the run is too noisy to judge: another process
/// holds a core.
const NOISY_FACTOR: f64 = 3.0;
/// The same for its p99: a core taken for part of the probe costs its samples ~100 µs each
/// (both ends' spin windows run out), while the p50 still reads quiet.
const NOISY_P99_FACTOR: f64 = 10.0;

/// The figures, in the order they are measured and printed.
#[derive(Default)]
struct Report {
    figures: Map<String, Value>,
    table: Vec<(String, String)>,
    /// `floor_spin` probed before the sections: where, and what it read.
    probes: Vec<(String, Percentiles)>,
    /// The floor's pong server, which the probes run (none: no probes).
    pong: Option<std::path::PathBuf>,
}

impl Report {
    /// A short `floor_spin` before section `at`: noise that comes and goes during a run
    /// shows in one of these if not at its start or end.
    fn probe(&mut self, at: &str) -> anyhow::Result<()> {
        let Some(pong) = &self.pong else {
            return Ok(());
        };
        let p = percentiles(floor(pong, true, 200, 500, 5_000)?);
        self.probes.push((at.into(), p));
        Ok(())
    }

    /// The probes as one figure.
    fn probes_figure(&mut self) {
        if self.probes.is_empty() {
            return;
        }
        let max = |f: fn(&Percentiles) -> f64| {
            self.probes
                .iter()
                .map(|(at, p)| (f(p), at.as_str()))
                .fold((0.0, ""), |a, b| if b.0 > a.0 { b } else { a })
        };
        let ((p50, at50), (p99, at99)) = (max(|p| p.p50_us), max(|p| p.p99_us));
        let text = format!(
            "p50 {p50:>9.1} µs   p99 {p99:>9.1} µs   (the most of {} probes: before {at50}, before {at99})",
            self.probes.len()
        );
        let list: Vec<Value> = self
            .probes
            .iter()
            .map(|(at, p)| json!({ "at": at, "p50_us": p.p50_us, "p99_us": p.p99_us }))
            .collect();
        self.value("floor_spin_probes", text, Value::Array(list));
    }

    fn latency(&mut self, name: &str, p: Percentiles) {
        self.table.push((
            name.into(),
            format!(
                "p50 {:>9.1} µs   p99 {:>9.1} µs   (n={})",
                p.p50_us, p.p99_us, p.samples
            ),
        ));
        self.figures.insert(name.into(), json!(p));
    }

    fn rate(&mut self, name: &str, calls_per_s: f64) {
        self.table
            .push((name.into(), format!("{calls_per_s:>12.0} calls/s")));
        self.figures
            .insert(name.into(), json!({ "calls_per_s": calls_per_s }));
    }

    fn value(&mut self, name: &str, text: String, value: Value) {
        self.table.push((name.into(), text));
        self.figures.insert(name.into(), value);
    }

    /// A latency's p50 in µs (NaN when it was not measured).
    fn p50(&self, name: &str) -> f64 {
        self.figures
            .get(name)
            .and_then(|f| f["p50_us"].as_f64())
            .unwrap_or(f64::NAN)
    }

    /// A rate in calls/s (NaN when it was not measured).
    fn calls(&self, name: &str) -> f64 {
        self.figures
            .get(name)
            .and_then(|f| f["calls_per_s"].as_f64())
            .unwrap_or(f64::NAN)
    }
}

/// The Rust echo server's cold starts: bare, in the default sandbox, and in a sandbox that
/// writes a workspace holding protected files (its own user and mount namespaces, and a
/// read-only bind mount for each).
async fn cold_starts(
    r: &mut Report,
    echo: &std::path::Path,
    scratch: &std::path::Path,
) -> anyhow::Result<()> {
    use yep_sandbox::Mode;
    let none = Default::default();
    r.latency(
        "cold_start_rust",
        percentiles(cold_start(echo, &[], scratch, 50, Mode::Off, &none).await?),
    );
    // The same start in the sandbox: the profile built, the rules applied in the child.
    r.latency(
        "cold_start_rust_sandboxed",
        percentiles(cold_start(echo, &[], scratch, 50, Mode::BestEffort, &none).await?),
    );
    let write = yep_host::manifest::SandboxGrants {
        workspace: Some("write".into()),
        ..Default::default()
    };
    let ws = yep_side::protected_workspace(scratch)?;
    r.latency(
        "cold_start_rust_protected",
        percentiles(cold_start(echo, &[], &ws, 50, Mode::BestEffort, &write).await?),
    );
    Ok(())
}

fn main() -> anyhow::Result<()> {
    if std::env::args().any(|a| a == launchers::CHILD_FLAG) {
        return launchers::child();
    }
    let json_out = std::env::args().any(|a| a == "--json");
    // Only the `yep mcp serve` figures, for working on the bridge (the ratios of the rest
    // are then missing).
    let bridge_only = std::env::args().any(|a| a == "--bridge-only");
    // Only the host's MCP client against a direct rmcp call, for longer (for a profiler).
    let mcp_only = std::env::args().any(|a| a == "--mcp-only");
    // Only the shared host against a host per session.
    let shared_only = std::env::args().any(|a| a == "--shared-only");
    // Only the yep round trips and throughput, for working on the call path (or profiling it).
    let calls_only = std::env::args().any(|a| a == "--calls-only");
    // Only the package launchers' figures (section 11), or only `yep hook`'s (section 12).
    let launchers_only = std::env::args().any(|a| a == "--launchers-only");
    let agent_hooks_only = std::env::args().any(|a| a == "--agent-hooks-only");
    let egress_only = std::env::args().any(|a| a == "--egress-only"); // section 13
    // Only the Rust server's cold starts (section 7), bare, sandboxed, and sandboxed with
    // protected workspace files to mount.
    let cold_start_only = std::env::args().any(|a| a == "--cold-start-only");
    let args: Vec<String> = std::env::args().collect();
    // One figure in a loop for about ten seconds, for a profiler to watch: `rtt` (200 B, one
    // in flight) or `throughput` (64 in flight).
    let profile = match args.iter().position(|a| a == "--profile") {
        Some(i) => match args.get(i + 1).map(String::as_str) {
            Some(what @ ("rtt" | "throughput")) => Some(what.to_owned()),
            _ => anyhow::bail!("--profile needs `rtt` or `throughput`"),
        },
        None => None,
    };
    // Another build's echo server against this one's, for working on the SDK.
    let ab_echo = match args.iter().position(|a| a == "--ab-echo") {
        Some(i) => match args.get(i + 1) {
            Some(path) => Some(std::path::PathBuf::from(path)),
            None => anyhow::bail!("--ab-echo needs the path of another build's yep-bench-echo"),
        },
        None => None,
    };
    build_peers()?;
    let started = Instant::now();
    let scratch = tempdir()?;
    let pong = sibling("yep-bench-pong")?;
    let echo = sibling("yep-bench-echo")?;
    let yolop = sibling("yep-bench-yolop")?;
    let rmcp_server = sibling("yep-bench-rmcp")?;
    let mut r = Report {
        pong: Some(pong.clone()),
        ..Report::default()
    };
    if !json_out {
        eprintln!("measuring (about a minute and a half)…");
    }

    // 1. The floor: a raw pipe round trip, no runtime, no JSON work, both ends blocking in
    // `read`. `floor_spin` is the same with both ends busy-polling first, as yep does.
    r.latency(
        "floor",
        percentiles(floor(&pong, false, 200, 2_000, 20_000)?),
    );
    r.latency(
        "floor_spin",
        percentiles(floor(&pong, true, 200, 2_000, 20_000)?),
    );

    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    rt.block_on(async {
        if launchers_only || agent_hooks_only || egress_only {
            r.probe("launchers, agent hooks or egress")?;
            return match (launchers_only, agent_hooks_only) {
                (true, _) => launchers::launchers(&mut r, &scratch),
                (_, true) => agent_hooks::measure(&mut r, &echo, &scratch),
                _ => egress::measure_in(&mut r, &scratch).await,
            };
        }
        if bridge_only {
            r.probe("bridge")?;
            return bridge(&mut r, &echo, &rmcp_server, &scratch).await;
        }
        if mcp_only {
            r.probe("mcp host")?;
            return mcp_host_vs_direct(&mut r, &rmcp_server, &scratch, 40).await;
        }
        if cold_start_only {
            r.probe("cold starts")?;
            return cold_starts(&mut r, &echo, &scratch).await;
        }
        if shared_only {
            r.probe("shared")?;
            return shared::shared(&mut r, &echo, &rmcp_server, &scratch).await;
        }
        // 8. Host memory per idle, connected extension: first, while the allocator holds
        // little freed memory (after the 1 MiB round trips it would serve the new extensions
        // from what they freed, and the figure would read 0).
        let kib = memory_per_extension(&echo, &scratch, 50).await?;
        r.value(
            "memory_per_extension",
            format!("{kib:>9.0} KiB host RSS each (over 50)"),
            json!({ "kib": kib, "extensions": 50 }),
        );
        r.probe("yep calls")?;
        // 2–3. yep-host → yep-sdk echo, arguments checked against the echo tool's schema as
        // the runtime checks them.
        let ext = Arc::new(extension("echo", &echo, &scratch, echo_schemas()?));
        ext.handshake().await?;
        // The argument check: its cost alone, then a call with it against one without it
        // (two servers, in alternating rounds; the difference is within run-to-run noise, the
        // check's own cost is the figure above).
        let ns = check_cost(&ext, 200, 1_000_000)?;
        r.value(
            "args_check_200",
            format!("{ns:>9.0} ns per call (schema check of the 200 B echo arguments)"),
            json!({ "ns_per_call": ns, "calls": 1_000_000 }),
        );
        let unchecked = extension("echo-unchecked", &echo, &scratch, Default::default());
        unchecked.handshake().await?;
        let (with, without) = rtt_pair(&ext, &unchecked, 200, 20, 1_000).await?;
        unchecked.stop().await;
        r.latency("yep_rtt_200_checked", percentiles(with));
        r.latency("yep_rtt_200_unchecked", percentiles(without));
        // The sandbox is applied once, at spawn: a contained server's calls cost the same.
        let contained = sandboxed_extension(
            "echo-contained",
            &echo,
            &scratch,
            echo_schemas()?,
            yep_sandbox::Mode::BestEffort,
        );
        contained.handshake().await?;
        let (open, closed) = rtt_pair(&ext, &contained, 200, 20, 1_000).await?;
        contained.stop().await;
        r.latency("yep_rtt_200_unsandboxed", percentiles(open));
        r.latency("yep_rtt_200_sandboxed", percentiles(closed));
        if let Some(other) = &ab_echo {
            return ab(&mut r, &ext, other, &scratch).await;
        }
        if let Some(what) = &profile {
            let until = Instant::now() + std::time::Duration::from_secs(10);
            while Instant::now() < until {
                if what == "rtt" {
                    r.latency(
                        "yep_rtt_200",
                        percentiles(rtt(&ext, 200, 100, 10_000).await?),
                    );
                } else {
                    let (rate, cpu) = throughput_cpu(Arc::clone(&ext), 64, 60_000).await?;
                    r.rate("yep_throughput_64", rate);
                    if let Some((host, server)) = cpu {
                        r.value(
                            "yep_throughput_64_cpu",
                            format!("host {host:>6.2} µs/call   server {server:>6.2} µs/call"),
                            json!({ "host_us_per_call": host, "server_us_per_call": server }),
                        );
                    }
                }
            }
            return anyhow::Ok(());
        }
        if calls_only {
            for bytes in PAYLOADS {
                r.latency(
                    &format!("yep_rtt_{bytes}"),
                    percentiles(rtt(&ext, bytes, 1_000, 10_000).await?),
                );
            }
            for n in IN_FLIGHT {
                r.rate(
                    &format!("yep_throughput_{n}"),
                    throughput(Arc::clone(&ext), n, 60_000).await?,
                );
            }
            return anyhow::Ok(());
        }
        for bytes in PAYLOADS {
            let samples = match bytes {
                0..10_000 => 10_000,
                10_000..100_000 => 3_000,
                _ => 300,
            };
            r.latency(
                &format!("yep_rtt_{bytes}"),
                percentiles(rtt(&ext, bytes, 1_000, samples).await?),
            );
        }
        // 6. A warm hook decision, from the same server.
        r.latency(
            "warm_hook",
            percentiles(warm_hook(&ext, 1_000, 10_000).await?),
        );
        for n in IN_FLIGHT {
            r.rate(
                &format!("yep_throughput_{n}"),
                throughput(Arc::clone(&ext), n, 60_000).await?,
            );
        }
        // The same after a 64-in-flight burst grew the server's thread pool.
        r.latency(
            "warm_hook_after_burst",
            percentiles(warm_hook(&ext, 1_000, 10_000).await?),
        );
        // From `cancel` to the cancelled call resolving.
        r.latency("cancel_rtt", percentiles(cancel_rtt(&ext, 200).await?));
        ext.stop().await;
        // The same decision from a Claude Code command hook (spawn, stdin, decision), through
        // the host's Claude dialect, contained as a session runs it, and outside the sandbox.
        for (name, mode) in [
            ("claude_command_hook", yep_sandbox::Mode::BestEffort),
            ("claude_command_hook_unsandboxed", yep_sandbox::Mode::Off),
        ] {
            let claude = claude_hook_extension(&scratch, mode)?;
            r.latency(name, percentiles(warm_hook(&claude, 10, 200).await?));
            claude.stop().await;
        }

        // What the host's behaviour around a server that never answers costs the agent loop
        // (the tests assert only that it does not wait): a post hook, a dynamic prompt (against
        // a 50 ms prompt timeout) and an eager start (against a 100 ms startup bound).
        r.latency(
            "post_hook_dispatch",
            percentiles(post_hook_dispatch(&echo, &scratch, 2_000).await?),
        );
        r.latency(
            "prompt_hung_server",
            percentiles(prompt_hung_server(&echo, &scratch, PROMPT_TIMEOUT, 20).await?),
        );
        r.latency(
            "startup_hung_server",
            percentiles(startup_hung_server(&scratch, STARTUP_BOUND, 10).await?),
        );

        // 4. rmcp client → rmcp server, same echo, same payloads, same in-flight counts.
        r.probe("rmcp")?;
        for (label, args) in [("rmcp", &[][..]), ("rmcp_pipes", &["--pipes"][..])] {
            let peer = Arc::new(RmcpPeer::connect(&rmcp_server, args).await?);
            for bytes in PAYLOADS {
                let samples = match bytes {
                    0..10_000 => 3_000,
                    10_000..100_000 => 1_000,
                    _ => 200,
                };
                r.latency(
                    &format!("{label}_rtt_{bytes}"),
                    percentiles(peer.rtt(bytes, 300, samples).await?),
                );
            }
            for n in IN_FLIGHT {
                r.rate(
                    &format!("{label}_throughput_{n}"),
                    peer.throughput(n, 20_000).await?,
                );
            }
            if let Ok(peer) = Arc::try_unwrap(peer) {
                peer.close().await;
            }
        }
        r.probe("mcp host")?;
        mcp_host_vs_direct(&mut r, &rmcp_server, &scratch, 10).await?;

        r.probe("bridge")?;
        bridge(&mut r, &echo, &rmcp_server, &scratch).await?;
        r.probe("shared")?;
        shared::shared(&mut r, &echo, &rmcp_server, &scratch).await?;

        // 5. yep-host → a server on the published yolop-yep 0.5 SDK.
        r.probe("yolop and zot")?;
        let ext = extension("echo", &yolop, &scratch, echo_schemas()?);
        r.latency(
            "yolop_rtt_200",
            percentiles(rtt(&ext, 200, 1_000, 10_000).await?),
        );
        ext.stop().await;

        // The zot wire: the same host calling a Node zot extension's echo, beside YEP's.
        let zot_echo = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("zot_echo.js");
        let ext = zot_extension(&zot_echo, &scratch);
        ext.handshake().await?;
        r.latency(
            "zot_rtt_200",
            percentiles(rtt(&ext, 200, 1_000, 10_000).await?),
        );
        ext.stop().await;

        // 7. Cold start: spawn plus handshake.
        r.probe("cold starts")?;
        use yep_sandbox::Mode;
        cold_starts(&mut r, &echo, &scratch).await?;
        // The SDKs' echo servers on the interpreter itself (a version manager's shim, such as
        // pyenv's, would add its own start to both), against the bare interpreter's start.
        let sdk = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../sdk");
        for (label, interpreter, script, bare) in [
            (
                "python",
                interpreter("python3", &["-c", "import sys; print(sys.executable)"])?,
                sdk.join("python/examples/echo_server.py"),
                ["-c", "pass"],
            ),
            (
                "node",
                interpreter("node", &["-e", "console.log(process.execPath)"])?,
                sdk.join("typescript/examples/echo-server.js"),
                ["-e", "0"],
            ),
        ] {
            let script = script.canonicalize()?.display().to_string();
            r.latency(
                &format!("cold_start_{label}"),
                percentiles(
                    cold_start(
                        &interpreter,
                        &[script],
                        &scratch,
                        20,
                        Mode::Off,
                        &Default::default(),
                    )
                    .await?,
                ),
            );
            r.latency(
                &format!("bare_start_{label}"),
                percentiles(bare_start(&interpreter, &bare, 20)?),
            );
        }

        // Trace forwarding: what `emit` costs the agent loop (it never awaits a server).
        let (ns, dropped) = emit_cost(&echo, &scratch, 1_000_000).await?;
        r.value(
            "trace_emit",
            format!(
                "{ns:>9.0} ns per emit (1,000,000 events, {dropped} dropped by the bounded queue)"
            ),
            json!({ "ns_per_emit": ns, "events": 1_000_000, "dropped": dropped }),
        );

        anyhow::Ok(())
    })?;
    rt.shutdown_background();

    // 6. The same decision from a process spawned per event.
    let part = mcp_only
        || launchers_only
        || agent_hooks_only
        || egress_only
        || bridge_only
        || shared_only
        || calls_only
        || cold_start_only
        || profile.is_some()
        || ab_echo.is_some();
    if !part {
        // 11. Package launchers pinned (a child of its own, with its own home).
        r.probe("launchers")?;
        launchers::launchers(&mut r, &scratch)?;
        r.probe("spawned hooks")?;
        r.latency(
            "spawn_hook_bash",
            percentiles(spawned_hook("bash".as_ref(), &["-c", BASH_HOOK], 20, 300)?),
        );
        r.latency(
            "spawn_hook_rust",
            percentiles(spawned_hook(&pong, &["hook"], 20, 300)?),
        );
        // 12. `yep hook claude` per event, as Claude Code runs it.
        r.probe("agent hooks")?;
        agent_hooks::measure(&mut r, &echo, &scratch)?;
        r.probe("egress")?; // 13. A brokered secret's HTTPS request, TLS terminated.
        egress::measure(&mut r, &scratch)?;
    }
    // The floor again: a core taken during the run shows here if not at the start.
    r.latency(
        "floor_spin_end",
        percentiles(floor(&pong, true, 200, 2_000, 20_000)?),
    );

    r.probes_figure();
    let noisy = noise(&r);
    let ratios = ratios(&r, noisy.is_some());
    let machine = machine();
    let seconds = started.elapsed().as_secs_f64();
    if json_out {
        let doc = json!({ "machine": machine, "seconds": seconds, "noisy": noisy.is_some(),
            "noisy_reason": noisy, "figures": r.figures, "ratios": ratios });
        let mut out = std::io::stdout().lock();
        use std::io::Write;
        writeln!(out, "{}", serde_json::to_string_pretty(&doc)?)?;
    } else {
        print_table(&r, &ratios, noisy.as_deref(), &machine, seconds);
    }
    Ok(())
}

/// Why the run is too noisy to judge its timed ratios, if it is: `floor_spin` far above what
/// it reads on a quiet machine, at the start, at the end or in a probe between sections (its
/// p50: a core taken throughout; its p99: a core taken for part of the time).
fn noise(r: &Report) -> Option<String> {
    let figure = |name: &str, key: &str| {
        r.figures
            .get(name)
            .and_then(|f| f[key].as_f64())
            .unwrap_or(f64::NAN)
    };
    let mut read: Vec<(String, f64, f64)> = [
        ("at the start", "floor_spin"),
        ("at the end", "floor_spin_end"),
    ]
    .into_iter()
    .map(|(when, name)| {
        (
            when.to_string(),
            figure(name, "p50_us"),
            figure(name, "p99_us"),
        )
    })
    .collect();
    let probes = r.figures.get("floor_spin_probes").and_then(Value::as_array);
    for p in probes.into_iter().flatten() {
        let at = p["at"].as_str().unwrap_or("?");
        let (p50, p99) = (p["p50_us"].as_f64(), p["p99_us"].as_f64());
        read.push((
            format!("before {at}"),
            p50.unwrap_or(f64::NAN),
            p99.unwrap_or(f64::NAN),
        ));
    }
    let mut over = Vec::new();
    for (when, p50, p99) in read {
        for (pct, value, factor) in [("p50", p50, NOISY_FACTOR), ("p99", p99, NOISY_P99_FACTOR)] {
            let ceiling = FLOOR_SPIN_QUIET_US * factor;
            if value > ceiling {
                over.push(format!(
                    "floor_spin {pct} read {value:.1} µs {when} (above {ceiling:.0} µs)"
                ));
            }
        }
    }
    (!over.is_empty()).then(|| {
        format!(
            "{}; a quiet machine reads under {FLOOR_SPIN_QUIET_US} µs: another process took a core",
            over.join(", ")
        )
    })
}

/// `--ab-echo <server>`: this build's echo server (`ext`) against another build's, the same
/// host driving both in alternating rounds, so both see the same machine: the one comparison
/// that tells an SDK change of a few percent from this VM's run-to-run swings.
/// The rmcp echo server as an MCP server of the host: the call an agent makes through
/// `ExtensionHost` (table, pin check, the host's rmcp client), against a direct rmcp call, in
/// `rounds` alternating rounds with a direct rmcp client of another copy of the server, so both
/// see the same machine.
async fn mcp_host_vs_direct(
    r: &mut Report,
    rmcp_server: &std::path::Path,
    scratch: &std::path::Path,
    rounds: usize,
) -> anyhow::Result<()> {
    let host = mcp_host(rmcp_server, scratch).await?;
    let direct = RmcpPeer::connect(rmcp_server, &[]).await?;
    let (mut through, mut straight) = (Vec::new(), Vec::new());
    for _ in 0..rounds {
        through.extend(host_rtt(&host, "mcp__files__echo", 200, 30, 300).await?);
        straight.extend(direct.rtt(200, 30, 300).await?);
    }
    r.latency("mcp_host_rtt_200", percentiles(through));
    r.latency("mcp_direct_rtt_200", percentiles(straight));
    direct.close().await;
    host.shutdown().await;
    Ok(())
}

async fn ab(
    r: &mut Report,
    ext: &Arc<yep_host::Extension>,
    other: &std::path::Path,
    scratch: &std::path::Path,
) -> anyhow::Result<()> {
    let b = extension("echo-b", other, scratch, echo_schemas()?);
    b.handshake().await?;
    let (x, y) = rtt_pair(ext, &b, 200, 40, 2_000).await?;
    r.latency("a_rtt_200", percentiles(x));
    r.latency("b_rtt_200", percentiles(y));
    let b = Arc::new(b);
    for n in IN_FLIGHT {
        let (mut ta, mut tb) = (0.0, 0.0);
        for _ in 0..5 {
            ta += throughput(Arc::clone(ext), n, 20_000).await?;
            tb += throughput(Arc::clone(&b), n, 20_000).await?;
        }
        r.rate(&format!("a_throughput_{n}"), ta / 5.0);
        r.rate(&format!("b_throughput_{n}"), tb / 5.0);
    }
    if let Ok(b) = Arc::try_unwrap(b) {
        b.stop().await;
    }
    Ok(())
}

/// Section 9, `yep mcp serve --no-shared` on stdio over 20 enabled packages, driven by rmcp's
/// client as an agent drives it: from spawn to the tool list (nothing starts), then a call of the echo
/// extension through the bridge, against a direct rmcp call and the same call in process.
async fn bridge(
    r: &mut Report,
    echo: &std::path::Path,
    rmcp_server: &std::path::Path,
    scratch: &std::path::Path,
) -> anyhow::Result<()> {
    let yep = sibling("yep")?;
    let home = bridge_home(echo, scratch, 20)?;
    let home_arg = home.display().to_string();
    // A host of its own (as before the shared host): the per-session baseline the shared
    // section is held against.
    let serve = ["--home", home_arg.as_str(), "mcp", "serve", "--no-shared"];
    let mut starts = Vec::new();
    for _ in 0..10 {
        let t = Instant::now();
        let peer = RmcpPeer::connect(&yep, &serve).await?;
        let listed = peer.count_tools().await?;
        starts.push(t.elapsed());
        anyhow::ensure!(listed == 22, "the bridge listed {listed} tools, not 22");
        peer.close().await;
    }
    r.latency("bridge_init_list_20", percentiles(starts));
    // In alternating rounds with a direct rmcp client of the rmcp server and with the same
    // call through an `ExtensionHost` in this process, so all three see the same machine.
    let peer = RmcpPeer::connect(&yep, &serve).await?;
    let direct = RmcpPeer::connect(rmcp_server, &[]).await?;
    let host = bridge_host(&home).await?;
    let (mut through, mut straight, mut in_process) = (Vec::new(), Vec::new(), Vec::new());
    for _ in 0..10 {
        through.extend(peer.rtt(200, 30, 300).await?);
        straight.extend(direct.rtt(200, 30, 300).await?);
        in_process.extend(host_rtt(&host, "echo", 200, 30, 300).await?);
    }
    r.latency("bridge_rtt_200", percentiles(through));
    r.latency("bridge_direct_rtt_200", percentiles(straight));
    r.latency("bridge_host_rtt_200", percentiles(in_process));
    peer.close().await;
    direct.close().await;
    host.shutdown().await;
    Ok(())
}

/// The ratio table as it is built: each ratio with its target and its verdict. A ratio whose
/// figures this run did not measure (a `--*-only` run) is left out.
struct Ratios<'a> {
    r: &'a Report,
    /// The run is too noisy to judge what moves with the machine's load.
    noisy: bool,
    out: Map<String, Value>,
}

impl Ratios<'_> {
    /// A ratio of timings (latency, throughput, timing against a peer): not judged in a noisy
    /// run.
    fn timed(&mut self, name: &str, needs: &[&str], value: f64, target: &str, met: bool) {
        let verdict = match (self.noisy, met) {
            (true, _) => "noisy",
            (false, true) => "ok",
            (false, false) => "missed",
        };
        self.put(name, needs, value, target, verdict);
    }

    /// A ratio of counts or memory, which another process's load does not move.
    fn counted(&mut self, name: &str, needs: &[&str], value: f64, target: &str, met: bool) {
        let verdict = if met { "ok" } else { "missed" };
        self.put(name, needs, value, target, verdict);
    }

    /// A figure shown for context, with no target.
    fn reported(&mut self, name: &str, needs: &[&str], value: f64, note: &str) {
        self.put(name, needs, value, note, "reported");
    }

    fn put(&mut self, name: &str, needs: &[&str], value: f64, target: &str, verdict: &str) {
        if !needs.iter().all(|n| self.r.figures.contains_key(*n)) {
            return;
        }
        let met = match verdict {
            "ok" => json!(true),
            "missed" => json!(false),
            _ => Value::Null,
        };
        self.out.insert(
            name.into(),
            json!({ "value": value, "target": target, "met": met, "verdict": verdict }),
        );
    }
}

/// Derived ratios, each with its target and whether it holds (in a `noisy` run, the timed
/// ones are not judged).
fn ratios(r: &Report, noisy: bool) -> Value {
    let mut t = Ratios {
        r,
        noisy,
        out: Map::new(),
    };
    let floor = r.p50("floor");
    let yep = r.p50("yep_rtt_200");
    let yep_floor = yep / floor;
    let yep_floor_spin = yep / r.p50("floor_spin");
    let rmcp_yep = r.p50("rmcp_rtt_200") / yep;
    let rmcp_pipes_yep = r.p50("rmcp_pipes_rtt_200") / yep;
    let mcp_host = r.p50("mcp_host_rtt_200") / r.p50("mcp_direct_rtt_200");
    let bridge = r.p50("bridge_rtt_200") / r.p50("bridge_direct_rtt_200");
    let bridge_start_ms = r.p50("bridge_init_list_20") / 1000.0;
    let tput = r.calls("yep_throughput_64") / r.calls("rmcp_throughput_64");
    let tput_pipes = r.calls("yep_throughput_64") / r.calls("rmcp_pipes_throughput_64");
    let hook = r.p50("spawn_hook_bash") / r.p50("warm_hook");
    let hook_rust = r.p50("spawn_hook_rust") / r.p50("warm_hook");
    let claude_hook = r.p50("claude_command_hook") / r.p50("warm_hook");
    let cold = r.p50("cold_start_rust");
    let python = r.p50("cold_start_python") / r.p50("bare_start_python");
    let node = r.p50("cold_start_node") / r.p50("bare_start_node");
    let big = |bytes: usize| {
        r.p50(&format!("yep_rtt_{bytes}")) / r.p50(&format!("rmcp_pipes_rtt_{bytes}"))
    };
    let field = |name: &str, key: &str| r.figures.get(name).and_then(|f| f[key].as_f64());
    let check_ns = field("args_check_200", "ns_per_call").unwrap_or(f64::NAN);
    let check_rtt_us = r.p50("yep_rtt_200_checked") - r.p50("yep_rtt_200_unchecked");
    let sandbox_spawn_ms = (r.p50("cold_start_rust_sandboxed") - r.p50("cold_start_rust")) / 1000.0;
    let sandbox_rtt_us = r.p50("yep_rtt_200_sandboxed") - r.p50("yep_rtt_200_unsandboxed");
    let mem = field("memory_per_extension", "kib").unwrap_or(f64::NAN);
    let cancel_ms = r.p50("cancel_rtt") / 1000.0;
    let post_us = field("post_hook_dispatch", "p99_us").unwrap_or(f64::NAN);
    let bound_ms = |name: &str, bound: std::time::Duration| {
        field(name, "p99_us").unwrap_or(f64::NAN) / 1000.0 - bound.as_secs_f64() * 1000.0
    };
    let prompt_over = bound_ms("prompt_hung_server", PROMPT_TIMEOUT);
    let startup_over = bound_ms("startup_hung_server", STARTUP_BOUND);

    let rtt = ["yep_rtt_200"];
    t.timed(
        "yep_rtt_p50 / floor_p50",
        &["yep_rtt_200", "floor"],
        yep_floor,
        "<= 8",
        yep_floor <= 8.0,
    );
    t.timed(
        "yep_rtt_p50 / floor_spin_p50",
        &["yep_rtt_200", "floor_spin"],
        yep_floor_spin,
        "<= 2.5",
        yep_floor_spin <= 2.5,
    );
    t.timed(
        "yep_rtt_65536 / rmcp_pipes_rtt_65536",
        &["yep_rtt_65536", "rmcp_pipes_rtt_65536"],
        big(65536),
        "<= 0.5",
        big(65536) <= 0.5,
    );
    t.timed(
        "yep_rtt_1048576 / rmcp_pipes_rtt_1048576",
        &["yep_rtt_1048576", "rmcp_pipes_rtt_1048576"],
        big(1 << 20),
        "<= 1",
        big(1 << 20) <= 1.0,
    );
    t.reported(
        "zot_rtt_p50 / yep_rtt_p50",
        &["zot_rtt_200", rtt[0]],
        r.p50("zot_rtt_200") / yep,
        "(reported: a Node extension)",
    );
    t.timed(
        "rmcp_rtt_p50 / yep_rtt_p50",
        &["rmcp_rtt_200", rtt[0]],
        rmcp_yep,
        ">= 5",
        rmcp_yep >= 5.0,
    );
    t.reported(
        "rmcp_pipes_rtt_p50 / yep_rtt_p50",
        &["rmcp_pipes_rtt_200", rtt[0]],
        rmcp_pipes_yep,
        "(reported)",
    );
    t.timed(
        "mcp_host_rtt_p50 / mcp_direct_rtt_p50",
        &["mcp_host_rtt_200", "mcp_direct_rtt_200"],
        mcp_host,
        "<= 1.25",
        mcp_host <= 1.25,
    );
    t.timed(
        "bridge_rtt_p50 / bridge_direct_rtt_p50",
        &["bridge_rtt_200", "bridge_direct_rtt_200"],
        bridge,
        "<= 1.5",
        bridge <= 1.5,
    );
    t.reported(
        "bridge_rtt_p50 / bridge_host_rtt_p50",
        &["bridge_rtt_200", "bridge_host_rtt_200"],
        r.p50("bridge_rtt_200") / r.p50("bridge_host_rtt_200"),
        "(reported: the same call in process)",
    );
    t.timed(
        "bridge_init_list_20_p50_ms",
        &["bridge_init_list_20"],
        bridge_start_ms,
        "<= 20 ms",
        bridge_start_ms <= 20.0,
    );
    let t64 = "yep_throughput_64";
    t.timed(
        "yep_throughput_64 / rmcp_throughput_64",
        &[t64, "rmcp_throughput_64"],
        tput,
        ">= 20",
        tput >= 20.0,
    );
    t.timed(
        "yep_throughput_64 / rmcp_pipes_throughput_64",
        &[t64, "rmcp_pipes_throughput_64"],
        tput_pipes,
        ">= 10",
        tput_pipes >= 10.0,
    );
    t.timed(
        "yep_throughput_64",
        &[t64],
        r.calls(t64),
        ">= 200000 calls/s",
        r.calls(t64) >= 200_000.0,
    );
    t.timed(
        "spawn_hook_p50 / warm_hook_p50",
        &["spawn_hook_bash", "warm_hook"],
        hook,
        ">= 100 (bash)",
        hook >= 100.0,
    );
    t.reported(
        "spawn_hook_rust_p50 / warm_hook_p50",
        &["spawn_hook_rust", "warm_hook"],
        hook_rust,
        "(reported)",
    );
    t.reported(
        "claude_command_hook_p50 / warm_hook_p50",
        &["claude_command_hook", "warm_hook"],
        claude_hook,
        "(reported: what a warm YEP hook saves over a Claude Code command hook)",
    );
    t.timed(
        "args_check_ns_per_call",
        &["args_check_200"],
        check_ns,
        "< 1000 ns",
        check_ns < 1_000.0,
    );
    t.timed(
        "rtt_p50 checked - unchecked (µs)",
        &["yep_rtt_200_checked", "yep_rtt_200_unchecked"],
        check_rtt_us,
        "< 1 µs (noisy)",
        check_rtt_us < 1.0,
    );
    t.timed(
        "cold_start_rust_p50_ms",
        &["cold_start_rust"],
        cold / 1000.0,
        "<= 5 ms",
        cold <= 5_000.0,
    );
    t.timed(
        "cold_start_rust_sandboxed_p50 - cold_start_rust_p50 (ms)",
        &["cold_start_rust_sandboxed", "cold_start_rust"],
        sandbox_spawn_ms,
        "<= 1 ms",
        sandbox_spawn_ms <= 1.0,
    );
    let protected_ms =
        (r.p50("cold_start_rust_protected") - r.p50("cold_start_rust_sandboxed")) / 1000.0;
    t.timed(
        "cold_start_rust_protected_p50 - cold_start_rust_sandboxed_p50 (ms)",
        &["cold_start_rust_protected", "cold_start_rust_sandboxed"],
        protected_ms,
        "<= 1 ms",
        protected_ms <= 1.0,
    );
    t.timed(
        "rtt_p50 sandboxed - unsandboxed (µs)",
        &["yep_rtt_200_sandboxed", "yep_rtt_200_unsandboxed"],
        sandbox_rtt_us,
        "< 1 µs (noisy)",
        sandbox_rtt_us < 1.0,
    );
    let pinned = r.p50("launcher_start_pinned_sandboxed");
    let pinned_off = pinned / r.p50("launcher_start_pinned_unsandboxed");
    let npx_pinned = r.p50("launcher_start_npx_warm") / pinned;
    let add_warm_s = r.p50("launcher_add_warm") / 1e6;
    t.timed(
        "launcher_start_pinned_sandboxed_p50 / launcher_start_pinned_unsandboxed_p50",
        &[
            "launcher_start_pinned_sandboxed",
            "launcher_start_pinned_unsandboxed",
        ],
        pinned_off,
        "<= 1.3",
        pinned_off <= 1.3,
    );
    t.timed(
        "launcher_start_npx_warm_p50 / launcher_start_pinned_sandboxed_p50",
        &["launcher_start_npx_warm", "launcher_start_pinned_sandboxed"],
        npx_pinned,
        ">= 10",
        npx_pinned >= 10.0,
    );
    t.timed(
        "launcher_add_warm_p50_s",
        &["launcher_add_warm"],
        add_warm_s,
        "<= 10 s",
        add_warm_s <= 10.0,
    );
    t.reported(
        "launcher_add_cold_s",
        &["launcher_add_cold"],
        r.p50("launcher_add_cold") / 1e6,
        "(reported: bounded by the download)",
    );
    t.timed(
        "cold_start_python_p50 / bare_start_python_p50",
        &["cold_start_python", "bare_start_python"],
        python,
        "<= 2",
        python <= 2.0,
    );
    t.reported(
        "cold_start_node_p50 / bare_start_node_p50",
        &["cold_start_node", "bare_start_node"],
        node,
        "(reported)",
    );
    t.counted(
        "memory_per_extension_mib",
        &["memory_per_extension"],
        mem / 1024.0,
        "<= 1 MiB",
        mem <= 1024.0,
    );
    t.timed(
        "cancel_rtt_p50_ms",
        &["cancel_rtt"],
        cancel_ms,
        "<= 5 ms",
        cancel_ms <= 5.0,
    );
    t.timed(
        "post_hook_dispatch_p99_us",
        &["post_hook_dispatch"],
        post_us,
        "<= 500 µs",
        post_us <= 500.0,
    );
    t.timed(
        "prompt_hung_server_p99 - timeout (ms)",
        &["prompt_hung_server"],
        prompt_over,
        "<= 50 ms",
        prompt_over <= 50.0,
    );
    t.timed(
        "startup_hung_server_p99 - bound (ms)",
        &["startup_hung_server"],
        startup_over,
        "<= 100 ms",
        startup_over <= 100.0,
    );

    // The shared host (section 10). Eight sessions are eight `yep mcp serve` processes
    // whatever they attach to, so against one session's processes the whole tree cannot stay
    // within 1.2×: both counts are judged, the whole tree and the host with its servers.
    let procs = |name: &str, key: &str| field(name, key).unwrap_or(f64::NAN);
    let (p1, p8) = ("shared_processes_1", "shared_processes_8");
    let all = procs(p8, "processes") / procs(p1, "processes");
    let servers = procs(p8, "host_and_servers") / procs(p1, "host_and_servers");
    t.counted(
        "shared_processes_8 / shared_processes_1",
        &[p1, p8],
        all,
        "<= 1.2",
        all <= 1.2,
    );
    t.counted(
        "shared_processes_8 / _1, clients excluded",
        &[p1, p8],
        servers,
        "<= 1.2",
        servers <= 1.2,
    );
    let own = procs("per_session_processes_8", "processes") / procs(p8, "processes");
    t.reported(
        "per_session_processes_8 / shared_processes_8",
        &["per_session_processes_8", p8],
        own,
        "(reported)",
    );
    let (m8, own8) = ("shared_rss_8", "per_session_rss_8");
    let rss = procs(m8, "mib") / procs(own8, "mib");
    t.counted(
        "shared_rss_8 / per_session_rss_8",
        &[m8, own8],
        rss,
        "<= 0.3",
        rss <= 0.3,
    );
    let pss = procs(m8, "pss_mib") / procs(own8, "pss_mib");
    t.reported(
        "shared_pss_8 / per_session_pss_8",
        &[m8, own8],
        pss,
        "(reported: shared pages once)",
    );
    let call = r.p50("shared_rtt_200") / r.p50("per_session_rtt_200");
    t.timed(
        "shared_rtt_p50 / per_session_rtt_p50",
        &["shared_rtt_200", "per_session_rtt_200"],
        call,
        "<= 1.3",
        call <= 1.3,
    );
    let warm = r.p50("shared_attach_list_warm") / 1000.0;
    t.timed(
        "shared_attach_list_warm_p50_ms",
        &["shared_attach_list_warm"],
        warm,
        "<= 5 ms",
        warm <= 5.0,
    );
    let cold = r.p50("shared_attach_list_cold") / 1000.0;
    t.timed(
        "shared_attach_list_cold_p50_ms",
        &["shared_attach_list_cold"],
        cold,
        "<= 30 ms",
        cold <= 30.0,
    );
    let spawned = procs("shared_attach_cold_spawned", "processes");
    t.counted(
        "shared_attach_cold_spawned",
        &["shared_attach_cold_spawned"],
        spawned,
        "= 0",
        spawned == 0.0,
    );
    agent_hooks::targets(&mut t, r);
    egress::targets(&mut t, r);
    Value::Object(t.out)
}

fn print_table(r: &Report, ratios: &Value, noisy: Option<&str>, machine: &Value, seconds: f64) {
    let mut out = String::new();
    use std::fmt::Write;
    let _ = writeln!(
        out,
        "yep-bench on {} ({} cores), {:.0} s\n",
        machine["cpu"].as_str().unwrap_or("?"),
        machine["cores"],
        seconds
    );
    if let Some(why) = noisy {
        let _ = writeln!(out, "  NOISY RUN: {why}; the timed ratios are not judged\n");
    }
    for (name, text) in &r.table {
        let _ = writeln!(out, "  {name:<28} {text}");
    }
    let _ = writeln!(
        out,
        "\n  ratio                                         value   target"
    );
    for (name, v) in ratios.as_object().into_iter().flatten() {
        let mark = match v["verdict"].as_str() {
            Some("ok") => "ok",
            Some("missed") => "MISSED",
            Some("noisy") => "(noisy: not judged)",
            _ => "",
        };
        let _ = writeln!(
            out,
            "  {name:<44} {:>7.2}   {:<18} {mark}",
            v["value"].as_f64().unwrap_or(f64::NAN),
            v["target"].as_str().unwrap_or("")
        );
    }
    let mut stdout = std::io::stdout().lock();
    use std::io::Write as _;
    let _ = stdout.write_all(out.as_bytes());
}

/// What the numbers were measured on.
fn machine() -> Value {
    let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    let cpu = cpuinfo
        .lines()
        .find_map(|l| l.strip_prefix("model name"))
        .map(|l| l.trim_start_matches([' ', '\t', ':']).to_string())
        .unwrap_or_default();
    let cores = std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(0);
    json!({ "cpu": cpu, "cores": cores, "os": std::env::consts::OS, "arch": std::env::consts::ARCH })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spin(r: &mut Report, name: &str, p50_us: f64, p99_us: f64) {
        let p = Percentiles {
            p50_us,
            p99_us,
            samples: 20_000,
        };
        r.latency(name, p);
    }

    fn run(start: (f64, f64), end: (f64, f64)) -> Report {
        let mut r = Report::default();
        spin(&mut r, "floor_spin", start.0, start.1);
        spin(&mut r, "floor_spin_end", end.0, end.1);
        r
    }

    #[test]
    fn a_quiet_floor_spin_leaves_the_run_judged() {
        assert_eq!(noise(&run((1.8, 2.1), (1.6, 2.3))), None);
    }

    #[test]
    fn a_core_taken_at_the_end_marks_the_run_noisy() {
        let why = noise(&run((1.8, 2.1), (106.2, 124.0))).expect("noisy");
        assert!(why.contains("p50 read 106.2 µs at the end"), "{why}");
        assert!(!why.contains("at the start"), "{why}");
    }

    #[test]
    fn a_core_taken_part_of_the_time_marks_the_run_noisy() {
        let why = noise(&run((1.9, 122.0), (1.6, 2.1))).expect("noisy");
        assert!(why.contains("p99 read 122.0 µs at the start"), "{why}");
    }

    #[test]
    fn a_core_taken_between_sections_marks_the_run_noisy() {
        let mut r = run((1.8, 2.1), (1.6, 2.3));
        for (at, p99) in [("rmcp", 2.2), ("shared", 131.0)] {
            let p = Percentiles {
                p50_us: 1.7,
                p99_us: p99,
                samples: 5_000,
            };
            r.probes.push((at.into(), p));
        }
        r.probes_figure();
        let why = noise(&r).expect("noisy");
        assert!(why.contains("p99 read 131.0 µs before shared"), "{why}");
        assert!(!why.contains("rmcp"), "{why}");
    }

    #[test]
    fn a_noisy_run_judges_memory_but_not_timings() {
        let mut r = run((2.0, 120.0), (1.6, 2.0));
        spin(&mut r, "yep_rtt_200", 9.0, 40.0);
        r.value(
            "memory_per_extension",
            String::new(),
            json!({ "kib": 26.0 }),
        );
        let noisy = ratios(&r, true);
        let rtt = &noisy["yep_rtt_p50 / floor_spin_p50"];
        assert_eq!(rtt["verdict"], "noisy");
        assert_eq!(rtt["met"], Value::Null);
        assert_eq!(noisy["memory_per_extension_mib"]["verdict"], "ok");
        let quiet = ratios(&r, false);
        assert_eq!(quiet["yep_rtt_p50 / floor_spin_p50"]["verdict"], "missed");
        assert_eq!(quiet["yep_rtt_p50 / floor_spin_p50"]["met"], false);
    }

    #[test]
    fn a_ratio_of_figures_not_measured_is_left_out() {
        let r = run((1.8, 2.1), (1.6, 2.3));
        let table = ratios(&r, false);
        assert!(table.get("yep_rtt_p50 / floor_spin_p50").is_none());
        assert!(table.as_object().is_some_and(|t| t.is_empty()), "{table}");
    }
}
