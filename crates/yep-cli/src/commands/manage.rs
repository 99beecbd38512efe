//! `yep enable`, `yep disable`, `yep remove`, `yep list`, `yep logs`.

use crate::output::stdout_line;
use std::io::{IsTerminal, Read, Seek, SeekFrom};
use std::os::unix::fs::MetadataExt;
use std::process::ExitCode;
use std::time::Duration;
use yep_host::settings::sandbox_mode_or_required;
use yep_store::Home;
use yep_store::components::Component;
use yep_store::text::{escape, escape_multiline};

#[derive(clap::Args)]
pub struct NameArgs {
    /// The installed extension's name.
    name: String,
    /// Print what was done as one JSON object.
    #[arg(long)]
    json: bool,
}

/// One hook, MCP server or command of a package, switched alone (`--hook`, `--server`,
/// `--command`); none given: the whole package.
#[derive(clap::Args)]
pub struct Switches {
    /// A hook, as `event` (every hook of it) or `event:matcher` (`PreToolUse:Bash`); repeatable.
    #[arg(long = "hook", value_name = "EVENT[:MATCHER]")]
    hooks: Vec<String>,
    /// An MCP server it declares, by its name in the package; repeatable.
    #[arg(long = "server", value_name = "NAME")]
    servers: Vec<String>,
    /// A command it declares, by its name without the package's (`review`); repeatable.
    #[arg(long = "command", value_name = "NAME")]
    commands: Vec<String>,
}

impl Switches {
    fn items(&self) -> Vec<(Component, &str)> {
        let kinds = [
            (Component::Hook, &self.hooks),
            (Component::Server, &self.servers),
            (Component::Command, &self.commands),
        ];
        kinds
            .into_iter()
            .flat_map(|(kind, items)| items.iter().map(move |i| (kind, i.as_str())))
            .collect()
    }
}

/// `yep disable`: the name, or components of it.
#[derive(clap::Args)]
pub struct DisableArgs {
    #[command(flatten)]
    name: NameArgs,
    #[command(flatten)]
    switches: Switches,
}

/// `yep enable`: the name, and how its hooks fail.
#[derive(clap::Args)]
pub struct EnableArgs {
    #[command(flatten)]
    name: NameArgs,
    #[command(flatten)]
    switches: Switches,
    /// A hook of it that crashes, hangs, is missing or cannot start blocks the call (by
    /// default a Claude Code plugin's hooks, like Claude Code's, let it go on, and say so).
    #[arg(long, conflicts_with = "fail_open")]
    fail_closed: bool,
    /// Undo --fail-closed: its hooks fail as its manifest says.
    #[arg(long)]
    fail_open: bool,
}

#[derive(clap::Args)]
pub struct ListArgs {
    /// Print every extension as JSON (config as set/unset, never values).
    #[arg(long)]
    json: bool,
}

#[derive(clap::Args)]
pub struct LogsArgs {
    /// The installed extension's name, or the MCP server's as `yep mcp list` names it.
    name: String,
    /// Keep printing what the server writes.
    #[arg(long, short)]
    follow: bool,
}

/// `yep disable`: the package, or the components named.
pub async fn disable(args: DisableArgs, home: &Home) -> anyhow::Result<ExitCode> {
    match args.switches.items().is_empty() {
        true => enable(args.name, home, false).await,
        false => switch(&args.name, &args.switches, home, false),
    }
}

/// `yep enable/disable <name> --hook/--server/--command`: each component named switched on
/// or off, apart from the package's own state, in turn: the first that names nothing it
/// declares stops there, with the error.
fn switch(args: &NameArgs, switches: &Switches, home: &Home, on: bool) -> anyhow::Result<ExitCode> {
    let mut changed = Vec::new();
    for (kind, item) in switches.items() {
        changed.push((kind, item, home.set_component(&args.name, kind, item, on)?));
    }
    let state = if on { "on" } else { "off" };
    let off = yep_store::settings::off(&home.settings_path(), &args.name)?;
    if args.json {
        let switched: Vec<_> = changed
            .iter()
            .map(|(kind, item, changed)| {
                serde_json::json!({"kind": kind, "name": item, "changed": changed})
            })
            .collect();
        stdout_line(
            &serde_json::json!({
                "name": args.name,
                "on": on,
                "changed": changed.iter().any(|(_, _, c)| *c),
                "components": switched,
                "off": off,
            })
            .to_string(),
        );
        return Ok(ExitCode::SUCCESS);
    }
    for (kind, item, changed) in changed {
        let (kind, item) = (kind.word(), escape(item));
        stdout_line(&match changed {
            true => format!("{} {kind} {item}: switched {state}", args.name),
            false => format!("{} {kind} {item} was already {state}", args.name),
        });
    }
    Ok(ExitCode::SUCCESS)
}

/// `yep enable`, with how its hooks fail when asked.
pub async fn enable_with(args: EnableArgs, home: &Home) -> anyhow::Result<ExitCode> {
    if !args.switches.items().is_empty() {
        if args.fail_closed || args.fail_open {
            return Err(crate::output::hinted(
                "--fail-closed and --fail-open are about the whole package, not one component",
                &["run them apart: `yep enable <name> --fail-closed`"],
            ));
        }
        return switch(&args.name, &args.switches, home, true);
    }
    let name = args.name.name.clone();
    // Enabled first: the entry is what carries the choice.
    let enabled = home.set_enabled(&name, true)?;
    let path = home.settings_path();
    let mode = match (args.fail_closed, args.fail_open) {
        (true, _) => Some(true),
        (_, true) => Some(false),
        _ => None,
    };
    if let Some(closed) = mode
        && yep_store::settings::set_fails_closed(&path, &name, closed)?
        && !args.name.json
    {
        stdout_line(&if closed {
            format!("{name}: a hook that cannot answer now blocks the call")
        } else {
            format!("{name}: its hooks fail as its manifest says")
        });
    }
    enable_done(args.name, home, true, enabled).await
}

pub async fn enable(args: NameArgs, home: &Home, on: bool) -> anyhow::Result<ExitCode> {
    let changed = home.set_enabled(&args.name, on)?;
    enable_done(args, home, on, changed).await
}

async fn enable_done(
    args: NameArgs,
    home: &Home,
    on: bool,
    changed: bool,
) -> anyhow::Result<ExitCode> {
    let state = if on { "enabled" } else { "disabled" };
    // Setup asks at a terminal; with --json nothing but the object goes to stdout.
    let missing = if on {
        super::config::setup(home, &args.name).await?
    } else {
        Vec::new()
    };
    if on {
        super::install::warn_unresolved(home, &args.name);
    }
    if args.json {
        let (fields, commands): (Vec<_>, Vec<_>) = missing.into_iter().unzip();
        stdout_line(
            &serde_json::json!({
                "name": args.name,
                "enabled": on,
                "changed": changed,
                "setup_incomplete": fields,
                "setup_commands": commands,
            })
            .to_string(),
        );
        return Ok(ExitCode::SUCCESS);
    }
    stdout_line(&if changed {
        format!("{state} {}", args.name)
    } else {
        format!("{} was already {state}", args.name)
    });
    if !missing.is_empty() {
        let fields: Vec<&str> = missing.iter().map(|(f, _)| f.as_str()).collect();
        stdout_line(&format!(
            "setup_incomplete: {}; set {} with:",
            fields.join(", "),
            if fields.len() == 1 { "it" } else { "them" }
        ));
        for (_, command) in &missing {
            stdout_line(&format!("  {command}"));
        }
    }
    Ok(ExitCode::SUCCESS)
}

pub fn remove(args: NameArgs, home: &Home) -> anyhow::Result<ExitCode> {
    home.remove(&args.name)?;
    if args.json {
        stdout_line(&serde_json::json!({ "name": args.name, "removed": true }).to_string());
        return Ok(ExitCode::SUCCESS);
    }
    stdout_line(&format!(
        "removed {} (package, lock entry, enable entry, config, stored secrets and data)",
        args.name
    ));
    Ok(ExitCode::SUCCESS)
}

pub fn list(args: ListArgs, home: &Home) -> anyhow::Result<ExitCode> {
    let mut rows = home.list()?;
    // Which of their MCP servers run as one process, by the host's rule.
    let workspace = std::env::current_dir().unwrap_or_default();
    let shared = yep_host::runtime::mcp::shared_servers(home, &workspace);
    for row in &mut rows {
        let own = format!("{}__", row.name);
        row.shared = shared
            .iter()
            .filter(|group| group.iter().any(|s| s.starts_with(&own)))
            .cloned()
            .collect();
    }
    if args.json {
        stdout_line(&serde_json::to_string_pretty(&rows)?);
        return Ok(ExitCode::SUCCESS);
    }
    if rows.is_empty() {
        stdout_line(
            "no extensions installed; try: yep install <dir | git-url | crates.io:crate | name>",
        );
    }
    for r in rows {
        let version = r
            .version
            .as_deref()
            .map(|v| format!(" {}", escape(v)))
            .unwrap_or_default();
        let state = if r.enabled { "enabled" } else { "disabled" };
        let run = match (r.enabled && r.server_command.is_some(), r.state) {
            (true, run) => format!(", {run}"),
            (false, "configured") => String::new(),
            (false, run) => format!(", {run}"),
        };
        stdout_line(&format!(
            "{}{version}  [{state}{run}]  {}",
            escape(&r.name),
            escape(&r.source)
        ));
        if let Some(failure) = &r.failure {
            stdout_line(&format!("  last failure: {}", escape(failure)));
        }
        if let Some(err) = &r.error {
            stdout_line(&format!("  error: {}", escape(err)));
            continue;
        }
        stdout_line(&format!("  contributes {}", r.contributes.join(", ")));
        for group in &r.shared {
            let own = format!("{}__", r.name);
            let (mine, others): (Vec<&String>, Vec<&String>) =
                group.iter().partition(|s| s.starts_with(&own));
            let others: Vec<String> = others.iter().map(|s| escape(s).into_owned()).collect();
            for server in mine {
                stdout_line(&format!(
                    "  MCP server {} runs as one process with {}",
                    escape(server),
                    others.join(", ")
                ));
            }
        }
        if !r.off.is_empty() {
            stdout_line(&format!(
                "  off (switched off by you): {}",
                r.off.lines().join(", ")
            ));
        }
        if let Some(listed) = &r.marketplace {
            stdout_line(&format!("  from marketplace: {}", escape(listed)));
        }
        if r.runs {
            stdout_line(&format!(
                "  sandbox: {}",
                super::grant::profile_text(&r.sandbox, sandbox_mode_or_required(home))
            ));
        }
        if let Some(cmd) = &r.server_command {
            let found = if r.server_resolves {
                "found"
            } else {
                "NOT FOUND (install it, or put it on PATH)"
            };
            stdout_line(&format!("  server `{}` {found}", escape(cmd)));
        }
        if let Some(n) = r.trace_dropped {
            stdout_line(&format!("  trace events dropped last session: {n}"));
        }
        for c in &r.config {
            let kind = if c.secret { " (secret)" } else { "" };
            let need = if c.required && !c.set {
                ", required"
            } else {
                ""
            };
            stdout_line(&format!(
                "  config {}{kind}: {}{need}",
                escape(&c.name),
                if c.set { "set" } else { "unset" }
            ));
        }
        stdout_line(&format!(
            "  {}{}",
            r.content_hash,
            if r.drifted {
                "  (changed on disk since approval)"
            } else {
                ""
            }
        ));
        if let Some(drift) = &r.drift {
            stdout_line(&format!("  warning: {drift}"));
        }
    }
    Ok(ExitCode::SUCCESS)
}

pub fn logs(args: LogsArgs, home: &Home) -> anyhow::Result<ExitCode> {
    // A name, never a path: `../` would read outside the logs folder.
    if args.name.is_empty() || args.name.contains(['/', '\\', '\0']) || args.name.starts_with('.') {
        return Err(crate::output::hinted(
            format!("`{}` is not a server's name", escape(&args.name)),
            &[
                "a log is named by its extension or MCP server: see `yep list` and `yep mcp list` (its `log`)",
            ],
        ));
    }
    // An extension's log is named for it; an MCP server's (as `yep mcp list` names it) for
    // its log stem.
    let installed = home.lockfile()?.get(&args.name).is_some();
    let server = match installed {
        true => None,
        false => super::mcp::named(home, &args.name)?,
    };
    let path = match &server {
        Some(source) => home.log_path(&yep_host::runtime::mcp::log_stem(
            &source.name,
            &source.origin,
        )),
        None => home.log_path(&args.name),
    };
    let mut file = match std::fs::File::open(&path) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            if !installed && server.is_none() {
                return Err(super::mcp::no_such_server(home, &args.name));
            }
            return Err(crate::output::hinted(
                format!("no log for `{}` at {}", args.name, path.display()),
                &["a server's log appears once it has run"],
            ));
        }
        Err(e) => return Err(anyhow::anyhow!("failed to open {}: {e}", path.display())),
    };
    let mut out = std::io::stdout().lock();
    // A log is the server's own words: at a terminal, its control characters are escaped.
    let raw = !std::io::stdout().is_terminal();
    let mut buf = Vec::new();
    file.read_to_end(&mut buf)?;
    write_log(&mut out, &buf, raw)?;
    if !args.follow {
        return Ok(ExitCode::SUCCESS);
    }
    let mut pos = file.stream_position()?;
    let mut buf = Vec::new();
    loop {
        std::thread::sleep(Duration::from_millis(200));
        // Follow the name, not the file: at 8 MiB the log is rotated to `<name>.log.1` and a
        // new one starts, which is read from its beginning once the old one is finished.
        let rotated = match (std::fs::metadata(&path), file.metadata()) {
            (Ok(now), Ok(open)) => now.ino() != open.ino() || now.dev() != open.dev(),
            _ => false,
        };
        if !rotated && std::fs::metadata(&path).is_ok_and(|m| m.len() < pos) {
            pos = 0; // truncated in place: start over
        }
        file.seek(SeekFrom::Start(pos))?;
        buf.clear();
        file.read_to_end(&mut buf)?;
        pos += buf.len() as u64;
        if write_log(&mut out, &buf, raw).is_err() {
            return Ok(ExitCode::SUCCESS);
        }
        if rotated && let Ok(next) = std::fs::File::open(&path) {
            file = next;
            pos = 0;
        }
    }
}

fn write_log(out: &mut impl std::io::Write, bytes: &[u8], raw: bool) -> std::io::Result<()> {
    if raw {
        out.write_all(bytes)?;
    } else {
        let text = String::from_utf8_lossy(bytes);
        out.write_all(escape_multiline(&text).as_bytes())?;
    }
    out.flush()
}
