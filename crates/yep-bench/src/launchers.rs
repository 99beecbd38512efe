//! Section 11, package launchers pinned: an MCP server added as `npx -y <pkg>`, which yep
//! installs once and starts from its install, in the sandbox, against the same install
//! started unsandboxed and against `npx -y` itself with a warm npm cache; and how long
//! approving it (`yep mcp add`) takes with a cold and a warm cache.
//!
//! The package comes from the loopback registry over `scripts/test`'s mirror (`$YEP_PEERS`),
//! into a home of its own: the measurements run in a child of the bench started with that
//! home's `HOME` and the registry's `npm_config_registry`, as a user's npm would have them.

use crate::Report;
use crate::stats::percentiles;
use serde_json::{Map, Value, json};
use std::io::BufRead;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};
use yep_host::runtime::mcp::{Package, StageOptions, approve_with, launch, sources};
use yep_host::store::Home;
use yep_sandbox::Mode;

/// What the child is started with.
pub const CHILD_FLAG: &str = "--launchers-child";

/// The published server measured: small, and in the mirror.
const PACKAGE: &str = "@modelcontextprotocol/server-memory@2026.8.31";

/// Measure, into `r`; a run without the mirror says so and measures nothing.
#[allow(clippy::disallowed_methods)] // the registry and the bench's own child, run to the end
pub fn launchers(r: &mut Report, scratch: &Path) -> anyhow::Result<()> {
    let mirror = std::env::var_os("YEP_PEERS")
        .map(|p| PathBuf::from(p).join("mirror"))
        .filter(|m| m.join("npm").is_dir());
    let Some(mirror) = mirror else {
        r.value(
            "launchers",
            "skipped: no registry mirror in $YEP_PEERS (run `scripts/test` once)".into(),
            json!({ "skipped": true }),
        );
        return Ok(());
    };
    let serve =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/fixtures/registry/serve.py");
    let dir = scratch.join("launchers");
    let home = dir.join("home");
    std::fs::create_dir_all(home.join(".npm"))?;
    let mut registry = std::process::Command::new("python3")
        .arg(serve)
        .arg(&mirror)
        .arg(dir.join("requests.log"))
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .spawn()?;
    let mut port = String::new();
    std::io::BufReader::new(registry.stdout.take().expect("piped")).read_line(&mut port)?;
    let out = std::process::Command::new(std::env::current_exe()?)
        .arg(CHILD_FLAG)
        .env("HOME", &home)
        .env(
            "npm_config_registry",
            format!("http://127.0.0.1:{}/", port.trim()),
        )
        .env_remove("npm_config_prefix")
        .env_remove("NPM_CONFIG_PREFIX")
        .env("YEP_BENCH_LAUNCHERS", &dir)
        .stdin(std::process::Stdio::null())
        .output();
    let _ = registry.kill();
    let _ = registry.wait();
    let out = out?;
    anyhow::ensure!(
        out.status.success(),
        "the launchers' child failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let figures: Map<String, Value> = serde_json::from_slice(&out.stdout)?;
    for (name, samples) in figures {
        let samples = samples
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(Value::as_u64)
            .map(Duration::from_nanos)
            .collect();
        r.latency(&name, percentiles(samples));
    }
    Ok(())
}

/// The child: every figure as nanoseconds, by name, on stdout.
pub fn child() -> anyhow::Result<()> {
    let dir = PathBuf::from(
        std::env::var_os("YEP_BENCH_LAUNCHERS")
            .ok_or_else(|| anyhow::anyhow!("{CHILD_FLAG} is the bench's own"))?,
    );
    let figures = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?
        .block_on(measure(&dir))?;
    let out: Map<String, Value> = figures
        .into_iter()
        .map(|(k, v)| {
            let ns: Vec<u64> = v.iter().map(|d| d.as_nanos() as u64).collect();
            (k.to_string(), json!(ns))
        })
        .collect();
    println!("{}", Value::Object(out));
    Ok(())
}

async fn measure(dir: &Path) -> anyhow::Result<Vec<(&'static str, Vec<Duration>)>> {
    use anyhow::Context;
    let home = Home {
        root: dir.join("yep-home"),
    };
    let workspace = dir.join("workspace");
    std::fs::create_dir_all(&workspace)?;
    let server = yep_host::store::manifest::McpServer {
        transport: "stdio".into(),
        command: Some("npx".into()),
        args: vec!["-y".into(), PACKAGE.into()],
        env: Default::default(),
        url: None,
        headers: Default::default(),
    };
    // Approving it: the first with an empty npm cache, the rest with it warm.
    let mut adds = Vec::new();
    for round in 0..4 {
        if round > 0 {
            yep_host::store::mcp::remove(&home, "mem")?;
        }
        yep_host::store::mcp::add(&home, "mem", &server)?;
        let source = sources(&home, &[], &workspace, &mut |_| {})
            .into_iter()
            .find(|s| s.name == "mem")
            .context("the server just added is not listed")?;
        let t = Instant::now();
        approve_with(
            &home,
            &source,
            &workspace,
            &Default::default(),
            &StageOptions::default(),
        )
        .await?;
        adds.push(t.elapsed());
    }
    let source = sources(&home, &[], &workspace, &mut |_| {})
        .into_iter()
        .find(|s| s.name == "mem")
        .context("the server is not listed")?;
    let pin = yep_host::store::mcp::pin(&home, "mem", &source.origin)?
        .context("the server approved has no pin")?;
    let pinned = Package::of(Some(&pin));
    let at = (&home, &source, workspace.as_path());
    let sandboxed = starts(at, pinned, Mode::BestEffort, 15).await?;
    let unsandboxed = starts(at, pinned, Mode::Off, 15).await?;
    let as_written = Package {
        install: None,
        as_written: true,
    };
    let npx = starts(at, as_written, Mode::Off, 5).await?;
    Ok(vec![
        ("launcher_add_cold", adds[..1].to_vec()),
        ("launcher_add_warm", adds[1..].to_vec()),
        ("launcher_start_pinned_sandboxed", sandboxed),
        ("launcher_start_pinned_unsandboxed", unsandboxed),
        ("launcher_start_npx_warm", npx),
    ])
}

/// `samples` cold starts of `source` (after 2 untimed) run as `package` says, with `sandbox`:
/// from the host's launch (the install checked against its pin) to the handshake's end.
async fn starts(
    (home, source, workspace): (&Home, &yep_host::runtime::mcp::McpSource, &Path),
    package: Package<'_>,
    sandbox: Mode,
    samples: usize,
) -> anyhow::Result<Vec<Duration>> {
    let base = yep_host::supervisor::SupervisorOptions {
        sandbox,
        ..Default::default()
    };
    let mut out = Vec::new();
    for i in 0..samples + 2 {
        let t = Instant::now();
        let (spec, opts) = launch(home, source, workspace, &base, package)?;
        let ext = yep_host::supervisor::Extension::new(
            spec,
            opts,
            Arc::new(yep_host::capability::NoEvents),
        );
        ext.handshake().await?;
        if i >= 2 {
            out.push(t.elapsed());
        }
        ext.stop().await;
    }
    Ok(out)
}
