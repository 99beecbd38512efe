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
use yep_serve::agents::{Agent, Input};
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
    let start = super::host::starter(home)?;
    let reply =
        yep_serve::agents::command::run(home, args.agent.agent(), args.fail_open, &start).await;
    Ok(ExitCode::from(yep_serve::agents::command::emit(&reply)))
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
        session: None,
    };
    let workspace = match input.cwd.clone().filter(|p| p.is_absolute() && p.is_dir()) {
        Some(dir) => dir.canonicalize().unwrap_or(dir),
        None => yep_serve::agents::command::workspace(&input),
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
    let exe = std::env::current_exe().ok();
    let home_dir = home.root.display().to_string();
    let words = |program: &str, rest: &[&str]| -> String {
        [program, "--home", home_dir.as_str()]
            .iter()
            .chain(rest)
            .map(|w| shell_word(w))
            .collect::<Vec<_>>()
            .join(" ")
    };
    let yep = exe
        .as_deref()
        .and_then(|p| p.to_str())
        .unwrap_or("yep")
        .to_string();
    // The small binary beside this one when it is there (`cargo install` puts both): it
    // starts faster, and an agent starts it for every event.
    let hook = match exe.map(|p| p.with_file_name("yep-hook")) {
        Some(small) if small.is_file() => words(&small.to_string_lossy(), &[]),
        _ => words(&yep, &["hook"]),
    };
    let config = agent.config(&hook, &words(&yep, &[]), fail_open);
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
