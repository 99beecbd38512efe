//! `yep hook <agent>`, what an agent runs for each of its hook events, and
//! `yep hooks config <agent>`, the configuration that makes it run it (docs/agents.md).
//!
//! The hook command reads the agent's hook JSON on stdin, has the shared host of its workspace
//! run the chain (started if none runs), and answers in the agent's own format. yep's hooks,
//! zot's intercepts and the Claude Code plugins' hooks so guard the agent's own tools.

use serde_json::Value;
use std::io::{Read, Write};
use std::path::PathBuf;
use std::process::ExitCode;
use yep_serve::agents::{Agent, Input, MAX_INPUT, Reply};
use yep_serve::shared::AttachError;
use yep_store::Home;
use yep_store::text::escape;

/// An agent that runs yep's hooks.
#[derive(Clone, Copy, clap::ValueEnum)]
pub enum AgentName {
    /// Claude Code (settings.json's `hooks`).
    Claude,
    /// Codex (`$CODEX_HOME/hooks.json`).
    Codex,
    /// Gemini CLI (settings.json's `hooks`).
    Gemini,
}

impl AgentName {
    fn agent(self) -> Agent {
        match self {
            AgentName::Claude => Agent::Claude,
            AgentName::Codex => Agent::Codex,
            AgentName::Gemini => Agent::Gemini,
        }
    }
}

#[derive(clap::Args)]
pub struct HookArgs {
    /// The agent whose hook event is on stdin.
    #[arg(value_enum)]
    agent: AgentName,
    /// When yep cannot answer (the host does not start, a failure), let the tool call or
    /// prompt go on with a warning instead of blocking it.
    #[arg(long)]
    fail_open: bool,
}

#[derive(clap::Args)]
pub struct StatuslineArgs {
    /// Print each extension's status as JSON instead of one line.
    #[arg(long)]
    json: bool,
}

#[derive(clap::Subcommand)]
pub enum HooksCommand {
    /// Print the hook configuration that makes an agent run `yep hook` for each of its
    /// events (stdout), and where it goes (stderr).
    Config {
        /// The agent to configure.
        #[arg(value_enum)]
        agent: AgentName,
        /// Configure `yep hook --fail-open`: when yep cannot answer, calls go on.
        #[arg(long)]
        fail_open: bool,
    },
}

/// `yep hook <agent>`: the agent's event on stdin, the answer on stdout, its exit code.
pub async fn hook(args: HookArgs, home: &Home) -> anyhow::Result<ExitCode> {
    let agent = args.agent.agent();
    let reply = match read_input(agent) {
        Err(why) => agent.failed(None, &why, args.fail_open),
        // Nothing for yep to say: no host is reached.
        Ok(input) if input.event.is_none() => Reply::default(),
        Ok(input) => match answer(home, &input).await {
            Ok(answer) => agent.answer(&input, &answer),
            Err(why) => agent.failed(Some(&input), &why, args.fail_open),
        },
    };
    Ok(emit(reply))
}

/// The agent's hook input, read (bounded) from stdin.
fn read_input(agent: Agent) -> Result<Input, String> {
    let mut bytes = Vec::new();
    std::io::stdin()
        .take(MAX_INPUT as u64 + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| format!("the hook input could not be read: {e}"))?;
    if bytes.len() > MAX_INPUT {
        return Err(format!(
            "the hook input is over {} MiB",
            MAX_INPUT / (1024 * 1024)
        ));
    }
    agent.parse(&bytes)
}

/// The chain's answer to `input`'s event, from the shared host of its workspace; a workspace
/// the shared host never serves (the home, `/`) is served by a host of this process's own.
async fn answer(home: &Home, input: &Input) -> Result<yep_host::runtime::AgentAnswer, String> {
    let Some(event) = &input.event else {
        return Ok(Default::default());
    };
    let workspace = workspace(input);
    let start = super::host::starter(home).map_err(|e| e.to_string())?;
    match yep_serve::shared::hook(home, workspace.clone(), event, &start).await {
        Ok(answer) => Ok(answer),
        Err(AttachError::Unshared(_)) => own_host(home, workspace, event.clone()).await,
        Err(e) => Err(e.to_string()),
    }
}

/// The agent's project: the directory the agent names for its hooks (`CLAUDE_PROJECT_DIR`,
/// `GEMINI_PROJECT_DIR`), else this process's, else the input's `cwd`. A session of
/// `yep mcp serve` started by the same agent has the same one, so they share a host.
fn workspace(input: &Input) -> PathBuf {
    let named = ["CLAUDE_PROJECT_DIR", "GEMINI_PROJECT_DIR"]
        .iter()
        .filter_map(std::env::var_os)
        .map(PathBuf::from)
        .find(|p| p.is_absolute() && p.is_dir());
    let dir = named
        .or_else(|| std::env::current_dir().ok())
        .or_else(|| input.cwd.clone())
        .unwrap_or_else(|| PathBuf::from("/"));
    dir.canonicalize().unwrap_or(dir)
}

/// Run the event on a host of this process's own, then stop it.
async fn own_host(
    home: &Home,
    workspace: PathBuf,
    event: yep_host::runtime::AgentEvent,
) -> Result<yep_host::runtime::AgentAnswer, String> {
    use yep_host::runtime::{ExtensionHost, HostOptions, Session};
    let session = Session {
        id: format!("yep-hook-{}", std::process::id()),
        workspace_root: workspace,
    };
    let opts = HostOptions {
        supervisor: yep_host::supervisor::SupervisorOptions::for_home(home),
        ..HostOptions::default()
    };
    let host = ExtensionHost::start(home.clone(), session, opts)
        .await
        .map_err(|e| yep_host::error::report(&e))?;
    let answer = host.agent_event(event).await;
    host.shutdown().await;
    Ok(answer)
}

/// Write the reply and give its exit code.
fn emit(reply: Reply) -> ExitCode {
    let mut stdout = std::io::stdout().lock();
    let written = stdout
        .write_all(reply.stdout.as_bytes())
        .and_then(|()| stdout.flush());
    drop(stdout);
    crate::output::stdout_written(written);
    if !reply.stderr.is_empty() {
        let _ = std::io::stderr().write_all(reply.stderr.as_bytes());
    }
    ExitCode::from(reply.code)
}

/// `yep statusline`: the extensions' status in one line, for Claude Code's `statusLine`
/// command (its session JSON on stdin names the project). Nothing when no shared host runs:
/// the status line never starts one.
pub async fn statusline(args: StatuslineArgs, home: &Home) -> anyhow::Result<ExitCode> {
    use std::io::IsTerminal;
    let mut given = Value::Null;
    if !std::io::stdin().is_terminal() {
        let mut bytes = Vec::new();
        let _ = std::io::stdin().take(1024 * 1024).read_to_end(&mut bytes);
        given = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
    }
    let said = given["workspace"]["project_dir"]
        .as_str()
        .or_else(|| given["cwd"].as_str())
        .map(PathBuf::from);
    let input = Input {
        name: String::new(),
        event: None,
        cwd: said,
        tool: None,
    };
    let workspace = match input.cwd.clone().filter(|p| p.is_absolute() && p.is_dir()) {
        Some(dir) => dir.canonicalize().unwrap_or(dir),
        None => workspace(&input),
    };
    let status = match yep_serve::shared::hook_if_running(
        home,
        workspace,
        &yep_host::runtime::AgentEvent::Status,
    )
    .await
    {
        Ok(answer) => answer.map(|a| a.status).unwrap_or_default(),
        // A status line shows what there is, and never an error of its own.
        Err(e) => {
            tracing::debug!("no status: {e}");
            Default::default()
        }
    };
    let line = match args.json {
        true => serde_json::to_string(&status)?,
        false => status_line(&status),
    };
    let mut stdout = std::io::stdout().lock();
    let written = writeln!(stdout, "{line}").and_then(|()| stdout.flush());
    drop(stdout);
    crate::output::stdout_written(written);
    Ok(ExitCode::SUCCESS)
}

/// Each extension's status, escaped, in one line: `name: text`, a warning marked `!`, an
/// error `✗`.
fn status_line(
    status: &std::collections::BTreeMap<String, yep_host::capability::Status>,
) -> String {
    use yep_host::capability::StatusLevel;
    status
        .iter()
        .map(|(name, s)| {
            let mark = match s.level {
                StatusLevel::Ok => "",
                StatusLevel::Warn => "! ",
                StatusLevel::Error => "✗ ",
            };
            let text: String = s
                .text
                .lines()
                .next()
                .unwrap_or_default()
                .chars()
                .take(80)
                .collect();
            format!("{mark}{}: {}", escape(name), escape(&text))
        })
        .collect::<Vec<_>>()
        .join(" · ")
}

/// `yep hooks config <agent>`.
pub fn run(cmd: HooksCommand, home: &Home) -> anyhow::Result<ExitCode> {
    let HooksCommand::Config { agent, fail_open } = cmd;
    let agent = agent.agent();
    let yep = std::env::current_exe()
        .ok()
        .and_then(|p| p.to_str().map(String::from))
        .unwrap_or_else(|| "yep".into());
    let home_dir = home.root.display().to_string();
    let yep = [yep.as_str(), "--home", home_dir.as_str()]
        .iter()
        .map(|w| shell_word(w))
        .collect::<Vec<_>>()
        .join(" ");
    let config = agent.config(&yep, fail_open);
    let mut stdout = std::io::stdout().lock();
    let written = stdout
        .write_all(config.text.as_bytes())
        .and_then(|()| stdout.flush());
    drop(stdout);
    crate::output::stdout_written(written);
    crate::output::stderr_line(&format!(
        "merge this into {}; `yep mcp config {}` adds yep's tools as well",
        config.file,
        agent.name()
    ));
    Ok(ExitCode::SUCCESS)
}

/// `word` as one word of a POSIX shell command line: as it is when it is plain, else in
/// single quotes.
fn shell_word(word: &str) -> String {
    let plain = !word.is_empty()
        && word
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"-_./=:@%+,".contains(&b));
    match plain {
        true => word.to_string(),
        false => format!("'{}'", word.replace('\'', r"'\''")),
    }
}

#[cfg(test)]
mod tests {
    use super::shell_word;

    #[test]
    fn a_path_with_spaces_or_quotes_stays_one_shell_word() {
        assert_eq!(shell_word("/usr/bin/yep"), "/usr/bin/yep");
        assert_eq!(shell_word("/my home/yep"), "'/my home/yep'");
        assert_eq!(shell_word("it's"), r"'it'\''s'");
        assert_eq!(shell_word(""), "''");
    }
}
