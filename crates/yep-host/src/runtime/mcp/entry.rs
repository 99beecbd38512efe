//! One MCP server in the session: its approval, the tools it offers (held to the pin), where
//! it stands, and which of the sources a session runs.

use super::{McpLaunchError, McpSource, Package, launch, launch_with, pinned_form, tool_name};
use crate::capability::{Events, HostToolCall, HostToolError, LogLevel, OfferedTool, Question};
use crate::health::HealthEvent;
use crate::store::Home;
use crate::store::mcp::{McpPin, McpTool, Origin, ToolChange};
use crate::supervisor::{Extension, SupervisorOptions};
use serde::Serialize;
use serde_json::Value;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

/// One MCP server in the session.
pub(crate) struct McpEntry {
    pub(crate) source: McpSource,
    pub(crate) pin: Option<McpPin>,
    /// Why it may not start (see [`McpSource::unapproved`]).
    pub(crate) blocked: Option<String>,
    /// The approved tools as cached at approval: offered until the server first starts.
    pub(crate) cached: Vec<McpTool>,
    /// What its server listed when the table last looked at it running: what it offers while
    /// stopped after that (an idle stop keeps its tools, even with no cache).
    listed: std::sync::Mutex<Option<Vec<McpTool>>>,
    /// What [`McpEntry::approves`] found for the running server's list: kept for as long as
    /// that list stands, so a call hashes its tool once per list, not once per call.
    verdicts: std::sync::Mutex<Verdicts>,
    /// Its server: its own, or one process shared with the identical servers of other
    /// extensions ([`share_key`]).
    pub(crate) ext: Arc<Extension>,
    /// The other servers (`<ext>__<server>`) its process is shared with.
    pub(crate) shared_with: Vec<String>,
    /// How long its first `tools/list` may take before [`McpEntry::cached`] is served in its
    /// place: only when there is such a list ([`crate::HostOptions::mcp_list_deadline`]).
    list_deadline: Option<Duration>,
}

/// [`McpEntry::approves`]'s verdicts on one list ([`Peer::listing`]), by tool: only tools on
/// that list, so a caller's made-up names never grow it.
///
/// [`Peer::listing`]: crate::dialect::Peer::listing
#[derive(Default)]
struct Verdicts {
    listing: Option<Arc<Vec<OfferedTool>>>,
    tools: std::collections::HashMap<String, bool>,
}

impl Verdicts {
    /// Whether `tool` on `listing` is what `pin` approved: hashed the first time it is asked
    /// of a list, remembered until another list comes.
    fn approves(&mut self, listing: Arc<Vec<OfferedTool>>, pin: &McpPin, tool: &str) -> bool {
        if !self
            .listing
            .as_ref()
            .is_some_and(|seen| Arc::ptr_eq(seen, &listing))
        {
            // Holding the list keeps its address from being taken by a later one.
            *self = Verdicts {
                listing: Some(Arc::clone(&listing)),
                tools: Default::default(),
            };
        }
        if let Some(verdict) = self.tools.get(tool) {
            return *verdict;
        }
        let Some(listed) = listing.iter().find(|t| t.name == tool) else {
            return false;
        };
        let verdict = pin.tools.get(tool) == Some(&pinned_form(listed).hash());
        self.tools.insert(tool.to_string(), verdict);
        verdict
    }
}

impl McpEntry {
    /// `source` in the session, approved as `pin` says.
    pub(crate) fn new(
        home: &Home,
        source: McpSource,
        pin: Option<McpPin>,
        workspace: &Path,
        base: &SupervisorOptions,
        list_deadline: Option<Duration>,
        events: Arc<dyn Events>,
    ) -> Result<McpEntry, McpLaunchError> {
        let blocked = source.unapproved(pin.as_ref());
        let cached = match (&pin, &blocked) {
            (Some(pin), None) => crate::store::mcp::cached(home, &source.origin, pin),
            _ => Vec::new(),
        };
        // A server with no pinned list to serve meanwhile is waited for, as ever.
        let list_deadline = list_deadline.filter(|_| !cached.is_empty());
        let package = Package::of(pin.as_ref());
        let (spec, opts) = launch_with(home, &source, workspace, base, package, list_deadline)?;
        let name = source.name.clone();
        let ext = Extension::new(
            spec,
            opts,
            Arc::new(McpEvents {
                name,
                inner: events,
            }),
        );
        Ok(McpEntry {
            source,
            pin,
            blocked,
            cached,
            listed: std::sync::Mutex::new(None),
            verdicts: std::sync::Mutex::default(),
            ext: Arc::new(ext),
            shared_with: Vec::new(),
            list_deadline,
        })
    }

    /// Whether it is the same server, approved the same way: a session keeps its process.
    pub(crate) fn same(&self, source: &McpSource, pin: Option<&McpPin>) -> bool {
        self.source == *source && self.pin.as_ref() == pin
    }

    /// The tools it offers now: the running server's list, else the list it gave when last
    /// seen running, else the approved cache; each held to the pin. The rest are what is
    /// withheld and why.
    pub(crate) fn tools(&self) -> (Vec<McpTool>, Vec<ToolChange>) {
        let (Some(pin), None) = (&self.pin, &self.blocked) else {
            return (Vec::new(), Vec::new());
        };
        // Running, but its list has not come: the approved list until it does.
        if self.slow() {
            return (self.cached.clone(), Vec::new());
        }
        let listed = match self.note_listed() {
            Some(listed) => listed,
            None => match self.last_listed() {
                Some(listed) => listed,
                None => return (self.cached.clone(), Vec::new()),
            },
        };
        let changes = crate::store::mcp::diff(Some(pin), &listed);
        let offered = listed
            .into_iter()
            .filter(|t| pin.tools.get(&t.name) == Some(&t.hash()))
            .collect();
        let withheld = changes
            .into_iter()
            .filter(|c| !matches!(c, ToolChange::Removed(_)))
            .collect();
        (offered, withheld)
    }

    /// What the running server lists now, remembered for when it stops; `None` when none runs.
    pub(crate) fn note_listed(&self) -> Option<Vec<McpTool>> {
        let listed: Vec<McpTool> = {
            let live = self.ext.running()?;
            // Not its list yet (a slow server's): nothing to remember.
            if live.peer().list_pending() {
                return None;
            }
            live.peer().listed().iter().map(pinned_form).collect()
        };
        *self.listed.lock().unwrap_or_else(|p| p.into_inner()) = Some(listed.clone());
        Some(listed)
    }

    /// What its server listed when last seen running, if it ever was.
    fn last_listed(&self) -> Option<Vec<McpTool>> {
        self.listed
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// Whether its server runs and its first list missed the deadline and has not come yet:
    /// the approved list ([`McpEntry::cached`]) is served meanwhile.
    pub(crate) fn slow(&self) -> bool {
        self.ext
            .running()
            .is_some_and(|live| live.peer().list_pending())
    }

    /// Whether the running server's `tool` is still what was approved. While the server's
    /// list has not come ([`McpEntry::slow`]), a tool of the approved list is: the call goes
    /// to the server, as any does.
    pub(crate) fn approves(&self, peer: &dyn crate::dialect::Peer, tool: &str) -> bool {
        let Some(pin) = &self.pin else {
            return false;
        };
        if peer.list_pending() {
            return pin.tools.contains_key(tool) && self.cached.iter().any(|t| t.name == tool);
        }
        self.verdicts
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .approves(peer.listing(), pin, tool)
    }

    /// Where it stands, for the session status and `yep list`.
    pub(crate) fn state(&self) -> McpState {
        let (offered, withheld) = self.tools();
        let state = if self.blocked.is_some() {
            "unapproved"
        } else if self.ext.is_running() {
            "started"
        } else if self.ext.is_idle_stopped() {
            "idle"
        } else if self.ext.failures() > 0 {
            "failed"
        } else {
            "configured"
        };
        McpState {
            name: self.source.name.clone(),
            origin: self.source.origin.clone(),
            transport: self.source.shown.transport.clone(),
            state,
            tools: offered
                .iter()
                .map(|t| tool_name(&self.source.name, &t.name))
                .collect(),
            withheld: withheld.iter().map(ToString::to_string).collect(),
            message: self.blocked.clone(),
            shared_with: self.shared_with.clone(),
            slow: match (self.slow(), self.list_deadline) {
                (true, Some(deadline)) => Some(format!(
                    "tools/list did not answer within {}; the {} tools pinned at approval are served until it does",
                    humantime::format_duration(deadline),
                    self.cached.len()
                )),
                _ => None,
            },
        }
    }
}

/// Where one MCP server stands in the session.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct McpState {
    pub name: String,
    pub origin: Origin,
    pub transport: String,
    /// `unapproved` (never started), `configured` (not started yet), `started`, `idle` (stopped
    /// for want of use; it starts again on next use) or `failed`.
    pub state: &'static str,
    /// Its tools in the table.
    pub tools: Vec<String>,
    /// Tools withheld as new or changed since approval (`+ tool x (new)`).
    pub withheld: Vec<String>,
    /// Why it does not start, when it does not.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    /// The other extensions' servers its one process serves too.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub shared_with: Vec<String>,
    /// Why it is slow, while it is: it runs, but its `tools/list` missed its deadline at start
    /// and has not answered yet, so `tools` are the ones pinned at approval.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub slow: Option<String>,
}

/// An MCP server's events: the host's, and a new table when its tools may have changed (it
/// started, restarted, or said its list changed).
struct McpEvents {
    name: String,
    inner: Arc<dyn Events>,
}

impl Events for McpEvents {
    fn log(&self, extension: &str, level: LogLevel, message: &str) {
        self.inner.log(extension, level, message);
    }

    fn health(&self, event: HealthEvent) {
        let changed = matches!(
            event,
            HealthEvent::Started { .. } | HealthEvent::Restarted { .. }
        );
        self.inner.health(event);
        if changed {
            self.inner.tools_changed(&self.name);
        }
    }

    fn tools_changed(&self, _extension: &str) {
        self.inner.tools_changed(&self.name);
    }

    fn run_tool(
        &self,
        extension: &str,
        call: HostToolCall,
    ) -> crate::capability::BoxFuture<Result<Value, HostToolError>> {
        self.inner.run_tool(extension, call)
    }

    fn ask(
        &self,
        _extension: &str,
        question: Question,
    ) -> crate::capability::BoxFuture<crate::capability::Answer> {
        // Asked in the server's own name, not its log file's.
        self.inner.ask(&self.name, question)
    }
}

/// What makes MCP servers of several extensions one process, or `None` for one that runs
/// alone. The rule (docs/plugins.md): two extensions' approved stdio servers share when what
/// would run is the same (command and arguments as expanded, launcher packages resolved), with
/// the same environment (names and values; only the package's own directory variables may
/// differ, and the shared process gets its own data dir, neither extension's), the same
/// sandbox grants (the user's included) and the same working directory, and neither holds a
/// brokered secret. So the one process gets exactly what each approved, and no extension's
/// calls reach another's secrets, files or wider grants.
fn share_key(entry: &McpEntry) -> Option<String> {
    match entry.blocked {
        Some(_) => None,
        None => key_of(&entry.source, entry.ext.spec()),
    }
}

/// [`share_key`] of an approved `source` that runs as `spec`.
fn key_of(source: &McpSource, spec: &crate::supervisor::ServerSpec) -> Option<String> {
    if !matches!(source.origin, Origin::Extension(_)) || source.server.transport != "stdio" {
        return None;
    }
    if spec.broker.as_ref().is_some_and(|b| !b.secrets.is_empty()) || spec.cwd.is_some() {
        return None;
    }
    let env: std::collections::BTreeMap<&str, &str> = spec
        .env
        .iter()
        .filter(|(k, _)| !super::PACKAGE_VARS.contains(&k.as_str()))
        .map(|(k, v)| (k.as_str(), v.as_str()))
        .collect();
    let grants = serde_json::to_value(&spec.sandbox_grants).ok()?;
    Some(serde_json::json!([spec.command, spec.args, env, grants]).to_string())
}

/// The enabled extensions' MCP servers that a session in `workspace` runs as one process
/// (`share_key`), each group by name (`<ext>__<server>`), for `yep list`.
pub fn shared_servers(home: &Home, workspace: &Path) -> Vec<Vec<String>> {
    let Ok(extensions) = super::enabled_manifests(home) else {
        return Vec::new();
    };
    let Ok(lock) = home.lockfile() else {
        return Vec::new();
    };
    let sources = super::sources(home, &extensions, workspace, &mut |_| {});
    let mut groups: std::collections::BTreeMap<String, Vec<String>> = Default::default();
    for source in sources {
        let pin = crate::store::mcp::pin_in(&lock, &source.name, &source.origin);
        if source.blocked(pin.as_ref()).is_some() {
            continue;
        }
        let base = SupervisorOptions::default();
        let Ok((spec, _)) = launch(home, &source, workspace, &base, Package::of(pin.as_ref()))
        else {
            continue;
        };
        if let Some(key) = key_of(&source, &spec) {
            groups.entry(key).or_default().push(source.name);
        }
    }
    groups.into_values().filter(|g| g.len() > 1).collect()
}

/// The data dir of a shared server: the home's, named for what it runs (no extension's name
/// has a `.`, so it is none of theirs).
fn shared_data_dir(home: &Home, key: &str) -> std::path::PathBuf {
    home.data_dir(&format!(
        "mcp.shared.{}",
        &crate::store::hash::sha256_hex(key.as_bytes())[..12]
    ))
}

/// Which of `sources` the session runs, keeping `old` entries that are still the same.
pub(crate) fn entries(
    home: &Home,
    sources: Vec<McpSource>,
    old: &[Arc<McpEntry>],
    workspace: &Path,
    opts: &crate::HostOptions,
    events: &Arc<dyn Events>,
    warn: &mut dyn FnMut(Option<String>, String),
) -> Vec<Arc<McpEntry>> {
    let mut out: Vec<Result<Arc<McpEntry>, McpEntry>> = Vec::new();
    // One read of the lock for every server's pin.
    let lock = home.lockfile().map_err(|e| crate::error::report(&e));
    for source in sources {
        let name = source.name.clone();
        let pin = match &lock {
            Ok(lock) => crate::store::mcp::pin_in(lock, &source.name, &source.origin),
            Err(why) => {
                warn(Some(name), why.clone());
                continue;
            }
        };
        if let Some(kept) = old.iter().find(|e| e.same(&source, pin.as_ref())) {
            out.push(Ok(Arc::clone(kept)));
            continue;
        }
        let entry = McpEntry::new(
            home,
            source,
            pin,
            workspace,
            &opts.supervisor,
            opts.mcp_list_deadline,
            Arc::clone(events),
        );
        match entry {
            Ok(entry) => {
                if let Some(why) = &entry.blocked {
                    warn(Some(name), why.clone());
                }
                out.push(Err(entry));
            }
            Err(why) => warn(Some(name), why.to_string()),
        }
    }
    share(home, &mut out, events);
    out.into_iter()
        .map(|e| e.unwrap_or_else(Arc::new))
        .collect()
}

/// Give the new entries of `out` (`Err`) that are the same server ([`share_key`]) one process:
/// the first one's, run with a data dir of its own. A kept entry keeps its process; one that
/// is new beside it runs its own until the next session.
fn share(home: &Home, out: &mut [Result<Arc<McpEntry>, McpEntry>], events: &Arc<dyn Events>) {
    let mut groups: std::collections::BTreeMap<String, Vec<usize>> = Default::default();
    for (i, entry) in out.iter().enumerate() {
        if let Err(entry) = entry
            && let Some(key) = share_key(entry)
        {
            groups.entry(key).or_default().push(i);
        }
    }
    for (key, members) in groups.into_iter().filter(|(_, m)| m.len() > 1) {
        let Err(first) = &out[members[0]] else {
            continue;
        };
        let mut spec = first.ext.spec().clone();
        let data = shared_data_dir(home, &key);
        let _ = std::fs::create_dir_all(&data);
        let shown = data.to_string_lossy().into_owned();
        // Its package directory stays the first's (code, read-only); its data dir is its own.
        for (k, v) in spec.env.iter_mut() {
            if super::PACKAGE_VARS[2..].contains(&k.as_str()) {
                *v = shown.clone();
            }
        }
        spec.data_dir = Some(data);
        let ext = Arc::new(Extension::new(
            spec,
            first.ext.opts().clone(),
            Arc::new(McpEvents {
                name: first.source.name.clone(),
                inner: Arc::clone(events),
            }),
        ));
        let names: Vec<String> = members
            .iter()
            .filter_map(|&i| out[i].as_ref().err().map(|e| e.source.name.clone()))
            .collect();
        for &i in &members {
            if let Err(entry) = &mut out[i] {
                entry.ext = Arc::clone(&ext);
                entry.shared_with = names
                    .iter()
                    .filter(|n| **n != entry.source.name)
                    .cloned()
                    .collect();
            }
        }
    }
}

/// Start, in the background, each approved server of `entries` whose tools were never cached
/// (approved elsewhere, or a cache lost): its list comes in with its start.
pub(crate) fn learn(entries: Vec<Arc<McpEntry>>) {
    for entry in entries {
        let unknown = entry.blocked.is_none()
            && entry.cached.is_empty()
            && entry.pin.as_ref().is_some_and(|p| !p.tools.is_empty());
        if unknown {
            tokio::spawn(async move {
                // A failure is reported where it happens, in the supervisor.
                let _ = entry.ext.live().await;
            });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tool(name: &str, description: &str) -> OfferedTool {
        OfferedTool {
            description: Some(description.into()),
            schema: Some(serde_json::json!({"type": "object"})),
            ..OfferedTool::named(name)
        }
    }

    /// A verdict holds for the list it was found on only: a new list, even one with the same
    /// tools in it, is looked at again, and a name the list lacks is refused and not kept.
    #[test]
    fn a_verdict_lasts_as_long_as_its_list() {
        let approved = tool("echo", "echo text");
        let pin = McpPin {
            name: "py".into(),
            workspace: None,
            spec: String::new(),
            code: None,
            install: None,
            as_written: false,
            tools: [("echo".to_string(), pinned_form(&approved).hash())].into(),
            skills: Default::default(),
        };
        let mut verdicts = Verdicts::default();
        let first = Arc::new(vec![approved.clone()]);
        for _ in 0..3 {
            assert!(verdicts.approves(Arc::clone(&first), &pin, "echo"));
        }
        // The server changed the tool and listed again.
        let changed = Arc::new(vec![tool("echo", "echo text, and send it elsewhere")]);
        assert!(!verdicts.approves(Arc::clone(&changed), &pin, "echo"));
        assert!(!verdicts.approves(Arc::clone(&changed), &pin, "echo"));
        // And back: a list equal to the first, but a new one, is hashed again.
        let back = Arc::new(vec![approved]);
        assert!(verdicts.approves(Arc::clone(&back), &pin, "echo"));
        for made_up in ["nope", "echo2", ""] {
            assert!(!verdicts.approves(Arc::clone(&back), &pin, made_up));
        }
        assert_eq!(verdicts.tools.len(), 1, "only listed tools are remembered");
    }
}
