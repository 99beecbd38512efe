//! Approving an MCP server: starting it once to list its tools (the probe), pinning them in
//! the lock, and asking the user about the session's servers that may not start.

use super::entry::McpEntry;
use super::{
    McpLaunchError, McpSource, Package, StageOptions, Staged, launch, log_stem, pinned_form, stage,
};
use crate::capability::{Events, Question};
use crate::dialect::FetchedSkill;
use crate::store::Home;
use crate::store::code::CodeError;
use crate::store::launcher::{self, InstallError, Installed};
use crate::store::mcp::{McpPin, McpTool};
use crate::supervisor::{Extension, SupervisorOptions};
use std::path::Path;
use std::sync::Arc;

/// Why an MCP server's tools could not be listed ([`probe`]) or pinned ([`approve`]).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum McpProbeError {
    /// Its definition cannot run in this build (a transport it lacks, a url that is not one).
    #[error(transparent)]
    Launch(#[from] McpLaunchError),
    /// The code it runs from the workspace cannot be pinned: it is not run.
    #[error("yep cannot pin the code it runs from the workspace: {0}")]
    Unpinnable(CodeError),
    /// It did not start, or its handshake failed (a tool list past the caps among the causes).
    #[error("{}", crate::error::report(&**.0))]
    Start(Box<crate::supervisor::ExtensionError>),
    /// Its tools were listed, but they could not be pinned (past a cap, or the lock could not
    /// be written).
    #[error("{}", crate::error::report(&**.0))]
    Record(Box<crate::store::StoreError>),
    /// The package its launcher fetches could not be installed.
    #[error("{0}")]
    Install(Box<InstallError>),
}

impl McpProbeError {
    /// Whether it refused to go on without a login (`yep mcp login` is the way on).
    pub fn wants_login(&self) -> bool {
        use crate::dialect::HandshakeError;
        use crate::supervisor::ExtensionError;
        matches!(self, McpProbeError::Start(e) if matches!(&**e, ExtensionError::Handshake {
            error: HandshakeError::LoginWanted(_),
            ..
        }))
    }

    /// The cap its tool list passed, when that is why: approving it again cannot help.
    pub fn over_cap(&self) -> Option<&crate::store::mcp::ListCap> {
        use crate::dialect::HandshakeError;
        use crate::supervisor::ExtensionError;
        match self {
            McpProbeError::Start(e) => match &**e {
                ExtensionError::Handshake {
                    error: HandshakeError::OfferPastCap(cap),
                    ..
                } => Some(cap),
                _ => None,
            },
            McpProbeError::Record(e) => match &**e {
                crate::store::StoreError::McpToolList { cap, .. } => Some(cap),
                _ => None,
            },
            McpProbeError::Launch(_) | McpProbeError::Unpinnable(_) | McpProbeError::Install(_) => {
                None
            }
        }
    }
}

/// Start `source` once, list its tools and stop it: what `yep trust`, `yep mcp add` and an
/// install show and pin. Questions it asks meanwhile are answered cancelled. A launcher's
/// package runs as `package` says ([`stage`] makes it ready).
pub async fn probe(
    home: &Home,
    source: &McpSource,
    workspace: &Path,
    base: &SupervisorOptions,
    package: Package<'_>,
) -> Result<Probed, McpProbeError> {
    // Code that cannot be pinned is never run to be approved.
    if let Some(Err(why)) = &source.code {
        return Err(McpProbeError::Unpinnable(why.clone()));
    }
    let (spec, opts) = launch(home, source, workspace, base, package)?;
    let wait = opts.handshake_timeout;
    let ext = Extension::new(spec, opts, Arc::new(crate::capability::NoEvents));
    let listed = match ext.live().await {
        Ok(live) => {
            let tools = live.peer().listed();
            // Its skills are read whole now, checked, and kept with the approval; a server
            // whose skills cannot be read is approved without them, said so.
            let skills = match live.peer().skills(wait).await {
                Ok(skills) => skills,
                Err(e) => {
                    tracing::warn!(
                        "MCP server `{}`: its skills are not pinned: {}",
                        source.name,
                        crate::error::report(&e)
                    );
                    Vec::new()
                }
            };
            Ok((tools, skills))
        }
        Err(e) => Err(McpProbeError::Start(Box::new(e))),
    };
    ext.stop().await;
    let (tools, skills) = listed?;
    Ok(Probed {
        tools: tools.iter().map(pinned_form).collect(),
        skills,
    })
}

/// What a probe found: the tools in their pinned form, and the skills, read and checked.
#[derive(Debug, Default)]
pub struct Probed {
    pub tools: Vec<McpTool>,
    pub skills: Vec<FetchedSkill>,
}

impl Probed {
    /// Whether its skills are other than the ones `pin` approved.
    pub fn skills_moved(&self, pin: Option<&McpPin>) -> bool {
        let now: std::collections::BTreeMap<&str, String> = self
            .skills
            .iter()
            .map(|s| {
                (
                    s.name.as_str(),
                    crate::store::mcp_skills::skill_hash(&s.files),
                )
            })
            .collect();
        let before = pin.map(|p| &p.skills);
        let before: std::collections::BTreeMap<&str, String> = before
            .into_iter()
            .flatten()
            .map(|(n, h)| (n.as_str(), h.clone()))
            .collect();
        now != before
    }
}

/// What an approval pinned: the tools, and the package installed for a launcher.
#[derive(Debug)]
pub struct Pinned {
    pub tools: Vec<McpTool>,
    pub install: Option<Installed>,
}

/// Approve `source` as it is now: start it once, list its tools, and pin them in the lock
/// (what `yep mcp add`, `yep trust` and an install do). Its tools, or why it could not be
/// listed.
pub async fn approve(
    home: &Home,
    source: &McpSource,
    workspace: &Path,
    base: &SupervisorOptions,
) -> Result<Vec<McpTool>, McpProbeError> {
    Ok(
        approve_with(home, source, workspace, base, &StageOptions::default())
            .await?
            .tools,
    )
}

/// [`approve`], with the launcher's package made ready as `opts` says first.
pub async fn approve_with(
    home: &Home,
    source: &McpSource,
    workspace: &Path,
    base: &SupervisorOptions,
    opts: &StageOptions,
) -> Result<Pinned, McpProbeError> {
    let staged = stage(home, source, opts).await?;
    let probed = match probe(home, source, workspace, base, staged.package()).await {
        Ok(probed) => probed,
        Err(e) => {
            staged.discard(home);
            return Err(e);
        }
    };
    if let Err(e) = record(home, source, &staged, &probed) {
        staged.discard(home);
        return Err(McpProbeError::Record(Box::new(e)));
    }
    Ok(Pinned {
        tools: probed.tools,
        install: staged.install,
    })
}

/// Pin what `probed` found of `source` (its tools; its skills, kept whole) with its package as
/// `staged`, and remove the server's installs nothing pins any more.
pub fn record(
    home: &Home,
    source: &McpSource,
    staged: &Staged,
    probed: &Probed,
) -> Result<McpPin, crate::store::StoreError> {
    let skills: Vec<(String, crate::store::mcp_skills::SkillFiles)> = probed
        .skills
        .iter()
        .map(|s| (s.name.clone(), s.files.clone()))
        .collect();
    // The files first: a crash between the two leaves files no pin vouches for, never a pin
    // without its files.
    let skills = crate::store::mcp_skills::keep(home, &source.name, &source.origin, &skills)?;
    let pin = crate::store::mcp::record(
        home,
        &source.name,
        &source.origin,
        approved_as(source, staged),
        &probed.tools,
        skills,
    )?;
    let keep: Vec<&str> = staged.install.iter().map(|i| i.dir.as_str()).collect();
    for dir in &keep {
        launcher::approved(home, dir);
    }
    launcher::prune(home, &log_stem(&source.name, &source.origin), &keep);
    Ok(pin)
}

/// What approving `source` with its package as `staged` approves.
fn approved_as<'a>(source: &'a McpSource, staged: &'a Staged) -> crate::store::mcp::Approved<'a> {
    crate::store::mcp::Approved {
        spec: source.definition(),
        code: source.code_pin(),
        install: staged.install.as_ref(),
        as_written: staged.as_written,
    }
}

/// `source` as it is now, with its package as `staged` and the `tools` it listed, in the one
/// approval model: what `yep trust` decides on against its pin.
pub fn candidate(
    source: &McpSource,
    staged: &Staged,
    tools: &[McpTool],
) -> crate::store::approval::Approval {
    let pin = approved_as(source, staged).pin(&source.name, &source.origin, tools);
    crate::store::approval::Approval::of_mcp(pin)
}

/// The answer that approves an MCP server when the session asks.
pub const APPROVE: &str = "approve";

/// Ask the user, one server at a time, about each MCP server of the session that may not
/// start (a workspace's never approved, one whose definition changed): approved, its tools
/// are pinned as they are now and the session offers them. Holds the host weakly, so a
/// question left open does not keep it alive.
pub(crate) async fn ask_approval(host: crate::runtime::WeakHost) {
    let waiting: Vec<Arc<McpEntry>> = match host.upgrade() {
        Some(h) => h
            .snapshot()
            .mcp
            .iter()
            .filter(|e| e.blocked.is_some())
            .cloned()
            .collect(),
        None => return,
    };
    for entry in waiting {
        let Some(h) = host.upgrade() else {
            return;
        };
        let source = &entry.source;
        let prompt = format!(
            "{} It would run {}. Run it and offer its tools?",
            entry.blocked.as_deref().unwrap_or_default(),
            source.described(),
        );
        let question = Question {
            prompt,
            options: vec![APPROVE.into(), "not now".into()],
            ..Question::default()
        };
        let events = Arc::clone(&h.core.events);
        drop(h);
        let answer = Events::ask(&*events, &source.name, question).await;
        if answer.cancelled || answer.answer != APPROVE {
            continue;
        }
        let Some(h) = host.upgrade() else {
            return;
        };
        let base = &h.core.opts.supervisor;
        match approve(&h.core.home, source, &h.core.workspace_root(), base).await {
            Ok(_) => {
                let _ = h.refresh().await;
            }
            Err(why) => h.core.warn(format!(
                "MCP server `{}` was approved, but its tools could not be listed: {}",
                crate::text::escape(&source.name),
                crate::error::report(&why)
            )),
        }
    }
}
