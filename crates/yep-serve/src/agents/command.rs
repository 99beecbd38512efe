//! The hook command itself, as both `yep hook <agent>` and the small `yep-hook` binary run
//! it: the agent's event read from stdin (bounded), the chain run by the shared host of its
//! workspace (started if none runs), and the reply written.

use super::{Agent, Input, MAX_INPUT, Reply};
use crate::shared::{AttachError, Starter};
use std::io::{Read, Write};
use std::path::PathBuf;
use yep_host::runtime::{AgentAnswer, AgentEvent};
use yep_host::store::Home;

/// Read the agent's event on stdin and reply: what to write, and the exit code.
pub async fn run(home: &Home, agent: Agent, fail_open: bool, start: &Starter) -> Reply {
    match read_input(agent) {
        Err(why) => agent.failed(None, &why, fail_open),
        // Nothing for yep to say: no host is reached.
        Ok(input) if input.event.is_none() => Reply::default(),
        Ok(input) => match answer(home, &input, start).await {
            Ok(answer) => agent.answer(&input, &answer),
            Err(why) => agent.failed(Some(&input), &why, fail_open),
        },
    }
}

/// Write `reply`; its exit code. A closed stdout is no failure of the hook's.
pub fn emit(reply: &Reply) -> u8 {
    let mut stdout = std::io::stdout().lock();
    let _ = stdout
        .write_all(reply.stdout.as_bytes())
        .and_then(|()| stdout.flush());
    drop(stdout);
    if !reply.stderr.is_empty() {
        let _ = std::io::stderr().write_all(reply.stderr.as_bytes());
    }
    reply.code
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
/// the shared host never serves (the home, `/`), or whose environment is not the host's, is
/// served by a host of this process's own.
async fn answer(home: &Home, input: &Input, start: &Starter) -> Result<AgentAnswer, String> {
    let Some(event) = &input.event else {
        return Ok(AgentAnswer::default());
    };
    let workspace = workspace(input);
    let session = input.session.clone();
    match crate::shared::hook(home, workspace.clone(), session.clone(), event, start).await {
        Ok(answer) => Ok(answer),
        Err(AttachError::Unshared(_) | AttachError::OtherEnv(_)) => {
            own_host(home, workspace, session, event.clone()).await
        }
        Err(e) => Err(e.to_string()),
    }
}

/// The agent's project: the directory the agent names for its hooks (`CLAUDE_PROJECT_DIR`,
/// `GEMINI_PROJECT_DIR`), else this process's, else the input's `cwd`. A session of
/// `yep mcp serve` started by the same agent has the same one, so they share a host.
pub fn workspace(input: &Input) -> PathBuf {
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
    session: Option<String>,
    event: AgentEvent,
) -> Result<AgentAnswer, String> {
    use yep_host::runtime::{ExtensionHost, HostOptions, Session};
    let own = Session {
        id: format!("yep-hook-{}", std::process::id()),
        workspace_root: workspace,
    };
    let opts = HostOptions {
        supervisor: yep_host::supervisor::SupervisorOptions::for_home(home),
        mcp_list_deadline: yep_host::runtime::mcp_list_deadline_setting(home)
            .unwrap_or_else(|_| HostOptions::default().mcp_list_deadline),
        ..HostOptions::default()
    };
    let host = ExtensionHost::start(home.clone(), own, opts)
        .await
        .map_err(|e| yep_host::error::report(&e))?;
    let answer = host.agent_event_in(session, event).await;
    host.shutdown().await;
    Ok(answer)
}
