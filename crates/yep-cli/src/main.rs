//! `yep`: the command-line tool for people who install, author and debug extensions.

mod author;
mod commands;
mod output;
mod progress;

use clap::{CommandFactory, Parser, Subcommand};
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(Parser)]
#[command(
    name = "yep",
    version,
    about = "Install, author and run extensions for AI coding agents, contained: Claude Code, Codex and Agent Plugins packages, YEP and zot extensions, and MCP servers",
    long_about = "Install, author and run extensions for AI coding agents, contained: Claude Code, Codex and Agent Plugins packages, YEP and zot extensions, and MCP servers\nEach runs in a sandbox (Landlock, seccomp, an egress proxy). Any MCP agent gets their tools (`yep mcp serve`); Claude Code, Codex and Gemini CLI run their hooks on the agent's own tools (`yep hooks config <agent>`)."
)]
struct Cli {
    /// The yep home (extensions, settings, logs). Defaults to `$YEP_HOME`, then `<config dir>/yep`.
    #[arg(long, global = true, value_name = "DIR")]
    home: Option<PathBuf>,
    /// More logging on stderr (-v debug, -vv trace). RUST_LOG overrides.
    #[arg(short, long, global = true, action = clap::ArgAction::Count)]
    verbose: u8,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Spawn a package's server and call one tool: progress to stderr, the result to stdout.
    Call(commands::call::Args),
    /// Run the bundled echo extension through the host and show each step.
    Demo(commands::demo::Args),
    /// Install an extension: show what it asks for, ask, pin it in the lock. Not enabled.
    Install(commands::install::InstallArgs),
    /// Fetch installed extensions again; a change that asks for more needs consent.
    Update(commands::install::UpdateArgs),
    /// Enable an installed extension, or one hook, MCP server or command of it (settings.toml).
    Enable(commands::manage::EnableArgs),
    /// Disable an extension, or one hook, MCP server or command of it (settings.toml).
    Disable(commands::manage::DisableArgs),
    /// Delete an extension: package, lock entry, enable entry, config, stored secrets, data.
    #[command(alias = "uninstall")]
    Remove(commands::manage::NameArgs),
    /// List installed extensions: what they contribute, config set/unset, hashes.
    List(commands::manage::ListArgs),
    /// Show an extension server's stderr log.
    Logs(commands::manage::LogsArgs),
    /// Show the audit trail: each tool call (the shape of its arguments, never their values),
    /// sandbox denial and egress decision, oldest first.
    Audit(commands::audit::Args),
    /// Scaffold a new extension package (Python, TypeScript or Rust).
    New(commands::new::Args),
    /// Spawn an extension's server as the runtime would and grade it (conformance).
    Doctor(commands::doctor::Args),
    /// Keep plugin.json in line with the server's code (`yep manifest sync`).
    #[command(subcommand)]
    Manifest(commands::manifest::ManifestCommand),
    /// Show or set an extension's plain config.
    #[command(subcommand)]
    Config(commands::config::ConfigCommand),
    /// Store an extension's secrets (masked prompt, or stdin; never on the command line).
    #[command(subcommand)]
    Secret(commands::config::SecretCommand),
    /// A live host session over the enabled extensions (interactive, or JSON lines).
    Session(commands::session::Args),
    /// MCP servers: add one to the home, remove it, list every one a session sees.
    #[command(subcommand)]
    Mcp(commands::mcp::McpCommand),
    /// What an agent runs for each of its hook events (`yep hooks config` wires it): the
    /// event's JSON on stdin, yep's hooks run, the answer in the agent's format on stdout.
    Hook(commands::hooks::HookArgs),
    /// yep's hooks in the agents people use: `yep hooks config <agent>` prints the
    /// configuration that runs them on the agent's own tools (Claude Code, Codex, Gemini CLI).
    #[command(subcommand)]
    Hooks(commands::hooks::HooksCommand),
    /// The extensions' status in one line, for Claude Code's `statusLine` command (its session
    /// JSON on stdin); nothing when no shared host runs.
    Statusline(commands::hooks::StatuslineArgs),
    /// The shared host every `yep mcp serve` of this home attaches to: its status, stop it.
    #[command(subcommand)]
    Host(commands::host::HostCommand),
    /// Plugin marketplaces (Claude Code's catalogues): add one, list what it offers, remove it.
    #[command(subcommand)]
    Marketplace(commands::marketplace::MarketplaceCommand),
    /// Approve an MCP server's tools as they are now (a workspace's `.mcp.json` server, or
    /// tools new or changed since approval), or a zot extension's widened registrations:
    /// shows the diff and asks.
    Trust(commands::mcp::TrustArgs),
    /// Let an extension or MCP server reach more than the sandbox's default profile (and
    /// its manifest's grants): shows what widens and asks; pinned in the lock.
    Grant(commands::grant::GrantArgs),
    /// Take back what `yep grant` gave (all of it when no grant is named).
    Revoke(commands::grant::RevokeArgs),
    /// Print a shell completion script to stdout (e.g. `yep completions bash > ~/.local/share/bash-completion/completions/yep`).
    Completions {
        /// The shell to complete for.
        shell: clap_complete::Shell,
    },
    /// Serve the bundled echo example on stdio (what `yep demo` spawns).
    #[command(name = "serve-example-echo", hide = true)]
    ServeExampleEcho,
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    if let Command::ServeExampleEcho = cli.command {
        // A capability server: stdout is the wire, so nothing else may run first.
        return match yep_example_echo::server().serve() {
            Ok(()) => ExitCode::SUCCESS,
            Err(err) => {
                eprintln!("error: {err}");
                ExitCode::FAILURE
            }
        };
    }
    if let Command::Completions { shell } = cli.command {
        let mut out = Vec::new();
        clap_complete::generate(shell, &mut Cli::command(), "yep", &mut out);
        let mut stdout = std::io::stdout().lock();
        let written = std::io::Write::write_all(&mut stdout, &out)
            .and_then(|()| std::io::Write::flush(&mut stdout));
        drop(stdout);
        // `yep completions bash | head` ends quietly; a full disk does not.
        output::stdout_written(written);
        return ExitCode::SUCCESS;
    }
    // A session shows the host's warnings itself (`warning: …`, or `{"warning": …}` with
    // `--json`): the host's log of them would say each twice.
    let shows_warnings = matches!(cli.command, Command::Session(_));
    // The shared host's log says when it started, stopped and why: the place a session that
    // lost it points at.
    let host = matches!(
        cli.command,
        Command::Host(commands::host::HostCommand::Serve)
    );
    init_tracing(cli.verbose, shows_warnings, host);
    let home = yep_store::Home::resolve(cli.home);
    // Its secrets, lock and packages never reach a server by way of the workspace.
    yep_sandbox::protect(&home.root);
    // Every server this run starts is contained as the home says (or `$YEP_SANDBOX`):
    // `SupervisorOptions::for_home`. One it cannot read holds servers to the strictest mode
    // until it is fixed, never weaker than what the user may have meant: said once, here.
    if let Err(err) = yep_host::settings::sandbox_mode(&home) {
        output::stderr_line(&format!(
            "warning: {err}; servers run under sandbox \"required\" until it is fixed"
        ));
    }
    // A session attached to the shared host only passes the agent's requests on: one thread
    // does it with no hand-off between threads (another only waits for the host to hang up).
    let one_thread = matches!(&cli.command, Command::Mcp(m) if m.attaches())
        || matches!(cli.command, Command::Hook(_) | Command::Statusline(_));
    let runtime = match one_thread {
        true => tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build(),
        false => tokio::runtime::Runtime::new(),
    };
    let runtime = match runtime {
        Ok(rt) => rt,
        Err(err) => {
            return output::fail(&output::internal("failed to start the async runtime", err));
        }
    };
    let result = runtime.block_on(async {
        match cli.command {
            Command::Call(args) => commands::call::run(args, &home).await,
            Command::Demo(args) => commands::demo::run(args).await,
            Command::Install(args) => commands::install::install(args, &home).await,
            Command::Update(args) => commands::install::update(args, &home).await,
            Command::Enable(args) => commands::manage::enable_with(args, &home).await,
            Command::Disable(args) => commands::manage::disable(args, &home).await,
            Command::Remove(args) => commands::manage::remove(args, &home),
            Command::List(args) => commands::manage::list(args, &home),
            Command::Logs(args) => commands::manage::logs(args, &home),
            Command::Audit(args) => commands::audit::run(args, &home),
            Command::Session(args) => commands::session::run(args, &home).await,
            Command::Config(cmd) => commands::config::config(cmd, &home),
            Command::Doctor(args) => commands::doctor::run(args, &home).await,
            Command::Manifest(cmd) => commands::manifest::run(cmd, &home).await,
            Command::New(args) => commands::new::run(args),
            Command::Secret(cmd) => commands::config::secret(cmd, &home),
            Command::Mcp(cmd) => commands::mcp::run(cmd, &home).await,
            Command::Marketplace(cmd) => commands::marketplace::run(cmd, &home),
            Command::Host(cmd) => commands::host::run(cmd, &home).await,
            Command::Hook(args) => commands::hooks::hook(args, &home).await,
            Command::Hooks(cmd) => commands::hooks::run(cmd, &home),
            Command::Statusline(args) => commands::hooks::statusline(args, &home).await,
            Command::Trust(args) => commands::mcp::trust(args, &home).await,
            Command::Grant(args) => commands::grant::grant(args, &home),
            Command::Revoke(args) => commands::grant::revoke(args, &home),
            Command::ServeExampleEcho | Command::Completions { .. } => {
                unreachable!("handled above")
            }
        }
    });
    // Don't wait on a terminal read nobody will finish (a question cut short by Ctrl-C).
    runtime.shutdown_timeout(std::time::Duration::from_millis(100));
    match result {
        Ok(code) => code,
        Err(err) => output::fail(&err),
    }
}

fn init_tracing(verbose: u8, shows_warnings: bool, host: bool) {
    use std::io::IsTerminal;
    // What the host says while a start takes long (a `go run .` building) is shown too.
    let default = match verbose {
        0 if shows_warnings => "warn,rmcp=off,yep_host::health=error,yep_host::progress=info",
        0 if host => "warn,rmcp=off,yep_host::progress=info,yep_serve::shared=info",
        // rmcp logs what it meets at error level; the host reports each as its own error.
        0 => "warn,rmcp=off,yep_host::progress=info",
        1 => "debug",
        _ => "trace",
    };
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(default));
    // Every field is escaped as it is formatted (a server's log line is a field), so the only
    // control characters left are the formatter's own colour codes, and those only on a terminal.
    let fields = tracing_subscriber::fmt::format::debug_fn(|w, field, value| {
        let value = yep_store::text::escape(&format!("{value:?}")).into_owned();
        if field.name() == "message" {
            write!(w, "{value}")
        } else {
            write!(w, "{field}={value}")
        }
    });
    use tracing_subscriber::field::MakeExt;
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .fmt_fields(fields.delimited(" "))
        .with_writer(std::io::stderr)
        .with_ansi(output::colour(std::io::stderr().is_terminal()))
        .with_target(false)
        .init();
}

#[cfg(test)]
mod tests {
    use super::Cli;
    use clap::CommandFactory;

    /// Every argument, flag and positional of every subcommand says what it is for.
    #[test]
    fn every_argument_has_help_text() {
        fn walk(cmd: &clap::Command, path: &str, missing: &mut Vec<String>) {
            for arg in cmd.get_arguments() {
                let id = arg.get_id().as_str();
                if matches!(id, "help" | "version") {
                    continue; // clap's own, with its own help
                }
                if arg.get_help().is_none() && arg.get_long_help().is_none() {
                    missing.push(format!("{path} {id}"));
                }
            }
            for sub in cmd.get_subcommands() {
                walk(sub, &format!("{path} {}", sub.get_name()), missing);
            }
        }
        let cmd = Cli::command();
        cmd.clone().debug_assert();
        let mut missing = Vec::new();
        walk(&cmd, "yep", &mut missing);
        assert!(missing.is_empty(), "arguments without help: {missing:?}");
    }
}
