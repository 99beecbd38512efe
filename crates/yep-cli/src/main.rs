//! `yep`: the command-line tool for people who install, author and debug extensions.

mod commands;
mod output;

use clap::{Parser, Subcommand};
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(Parser)]
#[command(
    name = "yep",
    version,
    about = "Install, author and debug YEP extensions"
)]
struct Cli {
    /// The yep home (extensions, settings, logs). Defaults to $YEP_HOME, then <config dir>/yep.
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
    /// Enable an installed extension (settings.toml).
    Enable(commands::manage::NameArgs),
    /// Disable an extension (settings.toml).
    Disable(commands::manage::NameArgs),
    /// Delete an extension: package, lock entry, enable entry, config, stored secrets, data.
    #[command(alias = "uninstall")]
    Remove(commands::manage::NameArgs),
    /// List installed extensions: what they contribute, config set/unset, hashes.
    List(commands::manage::ListArgs),
    /// Show an extension server's stderr log.
    Logs(commands::manage::LogsArgs),
    /// Scaffold a new extension package (Python, TypeScript or Rust).
    New(commands::new::Args),
    /// Spawn an extension's server as the runtime would and grade it (conformance).
    Doctor(commands::doctor::Args),
    /// Show or set an extension's plain config.
    #[command(subcommand)]
    Config(commands::config::ConfigCommand),
    /// Store an extension's secrets (masked prompt, or stdin; never on the command line).
    #[command(subcommand)]
    Secret(commands::config::SecretCommand),
    /// A live host session over the enabled extensions (interactive, or JSON lines).
    Session(commands::session::Args),
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
    init_tracing(cli.verbose);
    let home = yep_host::store::Home::resolve(cli.home);
    let runtime = match tokio::runtime::Runtime::new() {
        Ok(rt) => rt,
        Err(err) => {
            return output::fail(&anyhow::anyhow!("failed to start the async runtime: {err}"));
        }
    };
    let result = runtime.block_on(async {
        match cli.command {
            Command::Call(args) => commands::call::run(args, &home).await,
            Command::Demo(args) => commands::demo::run(args).await,
            Command::Install(args) => commands::install::install(args, &home),
            Command::Update(args) => commands::install::update(args, &home),
            Command::Enable(args) => commands::manage::enable(args, &home, true).await,
            Command::Disable(args) => commands::manage::enable(args, &home, false).await,
            Command::Remove(args) => commands::manage::remove(args, &home),
            Command::List(args) => commands::manage::list(args, &home),
            Command::Logs(args) => commands::manage::logs(args, &home),
            Command::Session(args) => commands::session::run(args, &home).await,
            Command::Config(cmd) => commands::config::config(cmd, &home),
            Command::Doctor(args) => commands::doctor::run(args, &home).await,
            Command::New(args) => commands::new::run(args),
            Command::Secret(cmd) => commands::config::secret(cmd, &home),
            Command::ServeExampleEcho => unreachable!("handled above"),
        }
    });
    // Don't wait on a terminal read nobody will finish (a question cut short by Ctrl-C).
    runtime.shutdown_timeout(std::time::Duration::from_millis(100));
    match result {
        Ok(code) => code,
        Err(err) => output::fail(&err),
    }
}

fn init_tracing(verbose: u8) {
    let default = match verbose {
        0 => "warn",
        1 => "debug",
        _ => "trace",
    };
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(default));
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(|| output::EscapingStderr)
        .with_ansi(false)
        .with_target(false)
        .init();
}
