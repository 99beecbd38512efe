//! `yep-hook [--home DIR] <claude|codex|gemini> [--fail-open]`: `yep hook <agent>` in a binary
//! of its own. An agent starts it for every hook event, so it does no more than that: no
//! command-line parser, no logging set-up, and only the code of the hook client in it (the
//! shared host it attaches to is the `yep` binary beside it).

use std::path::PathBuf;
use std::process::ExitCode;
use yep_serve::agents::{Agent, Reply, command};
use yep_store::Home;

const USAGE: &str = "usage: yep-hook [--home DIR] <claude|codex|gemini> [--fail-open]";

fn main() -> ExitCode {
    let mut home: Option<PathBuf> = None;
    let mut agent: Option<Agent> = None;
    let mut fail_open = false;
    let mut args = std::env::args_os().skip(1);
    while let Some(arg) = args.next() {
        match arg.to_str() {
            Some("--home") => home = args.next().map(PathBuf::from),
            Some("--fail-open") => fail_open = true,
            Some(name) if agent.is_none() && Agent::named(name).is_some() => {
                agent = Agent::named(name);
            }
            _ => {
                eprintln!("{USAGE}");
                return ExitCode::from(2);
            }
        }
    }
    let Some(agent) = agent else {
        eprintln!("{USAGE}");
        return ExitCode::from(2);
    };
    let home = Home::resolve(home);
    // Its secrets, lock and packages never reach a server by way of the workspace.
    yep_sandbox::protect(&home.root);
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(e) => {
            let why = format!("the async runtime could not start: {e}");
            return ExitCode::from(command::emit(&agent.failed(None, &why, fail_open)));
        }
    };
    let reply: Reply = runtime.block_on(async {
        match starter(&home) {
            Ok(start) => command::run(&home, agent, fail_open, &start).await,
            Err(why) => agent.failed(None, &why, fail_open),
        }
    });
    ExitCode::from(command::emit(&reply))
}

/// How this home's shared host starts when none runs: `yep --home <home> host serve`, with
/// the `yep` beside this binary.
fn starter(home: &Home) -> Result<Box<yep_serve::shared::Starter>, String> {
    let me = std::env::current_exe().map_err(|e| format!("where yep-hook is: {e}"))?;
    let yep = me.with_file_name("yep");
    if !yep.is_file() {
        return Err(format!(
            "{} is not there: yep-hook starts the shared host with the yep beside it",
            yep.display()
        ));
    }
    Ok(yep_serve::shared::starter(yep, home))
}
