//! `yep doctor` for an MCP server, by the name `yep mcp list` gives it: start it as a session
//! does (its approved definition, its grants, its log), see it list its tools, and make the
//! call asked for, or the one its sandbox last denied ([`Replay`](super::Replay)). With
//! `--sandbox-learn` the run is a learning one ([`yep_sandbox::learn`]): what that call touched
//! beyond the default profile is proposed as grants.

use super::{Against, Grader, Report, Status};
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;
use yep_host::capability::NoEvents;
use yep_host::runtime::mcp::{McpSource, Package, launch};
use yep_host::store::Home;
use yep_host::supervisor::{Extension, SupervisorOptions};

/// Grade MCP server `source` as a session in `workspace` runs it, making `replay`'s call; with
/// `learn`, outside the sandbox under `strace`, and propose the grants it needs.
pub async fn run(
    home: &Home,
    source: &McpSource,
    workspace: &Path,
    learn: Option<yep_sandbox::learn::Learning>,
    replay: Option<super::Replay>,
) -> Report {
    let learn = learn.map(Arc::new);
    let mut r = Grader::default();
    // What is not approved never runs, not even to be checked.
    let pin = home
        .lockfile()
        .ok()
        .and_then(|lock| yep_host::store::mcp::pin_in(&lock, &source.name, &source.origin));
    if let Some(why) = source.unapproved(pin.as_ref()) {
        r.add("approval", Status::Fail, why);
        return r.done();
    }
    r.add(
        "approval",
        Status::Pass,
        "its definition is the one approved",
    );
    let base = SupervisorOptions {
        learn: learn.clone(),
        request_timeout: Duration::from_secs(30),
        ..SupervisorOptions::for_home(home)
    };
    // Its package as its approval pins it (a launcher's install, or the launcher as written).
    let package = Package::of(pin.as_ref());
    let (mut spec, opts) = match launch(home, source, workspace, &base, package) {
        Ok(launched) => launched,
        Err(e) => {
            r.add("spawn", Status::Fail, e.to_string());
            return r.done();
        }
    };
    spec.session_id = "doctor".into();
    let stdio = source.server.transport == "stdio";
    let (sandbox_status, sandbox_detail) = match (&learn, stdio) {
        (_, false) => (
            Status::Skip,
            "it is reached over HTTP: yep runs no process for it".to_string(),
        ),
        (Some(_), true) => super::learning_sandbox_row(),
        (None, true) => super::sandbox_row(&spec.sandbox_grants, base.sandbox),
    };
    r.add("sandbox", sandbox_status, sandbox_detail);
    let ext = Extension::new(spec, opts, Arc::new(NoEvents));
    match ext.live().await {
        Ok(live) => {
            let tools: Vec<String> = live
                .peer()
                .listed()
                .iter()
                .map(|t| yep_host::text::escape(&t.name).into_owned())
                .collect();
            r.add(
                "tools",
                Status::Pass,
                format!("started; it lists {}: {}", tools.len(), tools.join(", ")),
            );
            if let Some(replay) = &replay {
                super::replay_row(&mut r, &ext, replay).await;
            }
        }
        Err(e) => r.add("start", Status::Fail, yep_host::error::report(&e)),
    }
    ext.stop().await;
    let learned = learn.map(|l| {
        let against = Against::Approved { on_disk: None };
        super::learned_row(&mut r, &l, &source.name, against)
    });
    let mut report = r.done();
    report.sandbox_learn = learned.flatten();
    report
}
