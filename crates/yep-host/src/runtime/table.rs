//! The table of extensions: the loaded ones (and those kept only for their hooks), the MCP
//! servers and their tools, as one immutable snapshot the registry task publishes.

use super::tools::{ToolDefinition, extension_tools, mcp_tools};
use super::{HostError, load::Core, mcp, prompt, trace};
use crate::manifest::Manifest;
use crate::supervisor::Extension;
use std::collections::{BTreeSet, HashMap};
use std::sync::{Arc, Mutex};

/// One enabled extension in the session.
pub(crate) struct Loaded {
    pub(crate) name: String,
    /// Started with the session whatever it contributes.
    pub(super) eager: bool,
    pub(crate) manifest: Manifest,
    /// What of it the user switched off (already out of `manifest`): a change reloads it.
    pub(crate) off: crate::store::components::Off,
    pub(crate) ext: Extension,
    /// The pid whose refused (unapproved) tools were already logged.
    pub(super) warned_pid: Mutex<Option<u32>>,
    pub(super) prompt: Mutex<prompt::PromptCache>,
    /// The trace forwarder, when the manifest declares `trace`.
    pub(crate) forwarder: Option<Arc<trace::Forwarder>>,
    pub(super) forwarding: Mutex<Option<tokio::task::AbortHandle>>,
    /// The workspace's own Claude Code config: the hash it was approved at.
    pub(super) project_hash: Option<String>,
}

impl Loaded {
    /// Stop the trace forwarder task (it holds this value, so dropping cannot do it).
    pub(super) fn stop_forwarding(&self) {
        if let Some(task) = self
            .forwarding
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .take()
        {
            task.abort();
        }
    }
}

/// The loaded extensions and what they contribute, as one immutable snapshot. The registry
/// task publishes a new one on every change; readers never wait for it.
#[derive(Default)]
pub struct Table {
    /// The enabled extensions: the loaded ones, then the packages that could not be loaded
    /// but whose approved manifest has hooks.
    pub(super) entries: Vec<Entry>,
    /// The MCP servers the session sees, approved or not.
    pub(super) mcp: Vec<Arc<mcp::McpEntry>>,
    pub(super) tools: Vec<ToolDefinition>,
    /// Each of `tools` by the name it is called by, with what serves it: a call finds its
    /// server without a scan.
    pub(super) routes: HashMap<String, Route>,
    pub(super) forwarders: Vec<Arc<trace::Forwarder>>,
}

/// One enabled extension of the session: loaded, or kept only for its approved hooks.
pub(crate) enum Entry {
    Loaded(Arc<Loaded>),
    Unloaded(Arc<Unloaded>),
}

impl Entry {
    /// Its name, as enabled.
    pub(crate) fn name(&self) -> &str {
        match self {
            Entry::Loaded(l) => &l.name,
            Entry::Unloaded(u) => &u.name,
        }
    }
}

/// What serves a tool of the table, and the tool's own name there.
pub(super) struct Route {
    pub(super) tool: String,
    pub(super) to: Serves,
}

/// The extension or MCP server a [`Route`] leads to.
pub(super) enum Serves {
    Extension(Arc<Loaded>),
    Mcp(Arc<mcp::McpEntry>),
}

/// An enabled package that could not be loaded (its files drifted from what was approved, its
/// config is invalid, …), kept for its approved hooks: a guard that cannot load must not
/// vanish from the decisions it was approved to have a say in.
pub(crate) struct Unloaded {
    pub(crate) name: String,
    /// The approved manifest, from the lock.
    pub(crate) manifest: Manifest,
    /// Why it could not be loaded.
    pub(crate) reason: String,
}

impl Table {
    /// The loaded extensions, in enable order.
    pub(crate) fn loaded(&self) -> impl Iterator<Item = &Arc<Loaded>> {
        self.entries.iter().filter_map(|e| match e {
            Entry::Loaded(l) => Some(l),
            Entry::Unloaded(_) => None,
        })
    }

    /// The enabled packages kept only for their approved hooks.
    pub(crate) fn unloaded(&self) -> impl Iterator<Item = &Arc<Unloaded>> {
        self.entries.iter().filter_map(|e| match e {
            Entry::Unloaded(u) => Some(u),
            Entry::Loaded(_) => None,
        })
    }

    /// Why `name` is no tool of this table: a tool an MCP server lists but that is withheld
    /// since its approval, or one of a server that is not approved, says so; anything else
    /// is unknown.
    pub(super) fn unknown_tool(&self, name: &str) -> HostError {
        for entry in &self.mcp {
            let server = &entry.source.name;
            if let Some(why) = &entry.blocked {
                let prefix = mcp::tool_name(server, "");
                if name.starts_with(&prefix) {
                    return HostError::Unapproved(why.clone());
                }
                continue;
            }
            for change in entry.tools().1 {
                use crate::store::mcp::ToolChange;
                let (ToolChange::Added(tool) | ToolChange::Changed(tool)) = change else {
                    continue;
                };
                if mcp::tool_name(server, &tool) == name {
                    return HostError::Withheld {
                        server: server.clone(),
                        new: entry
                            .pin
                            .as_ref()
                            .is_none_or(|p| !p.tools.contains_key(&tool)),
                        tool,
                    };
                }
            }
        }
        HostError::UnknownTool(name.to_string())
    }

    /// The enabled extensions, in enable order.
    pub fn extensions(&self) -> Vec<String> {
        self.loaded().map(|l| l.name.clone()).collect()
    }

    /// Every tool, with its extension and whether it is always loaded or deferred.
    pub fn tools(&self) -> &[ToolDefinition] {
        &self.tools
    }

    /// What serves the tool called `name`, or why nothing does.
    pub(super) fn route(&self, name: &str) -> Result<&Route, HostError> {
        match self.routes.get(name) {
            Some(route) => Ok(route),
            // Listed, but what listed it is gone from the table.
            None if self.tools.iter().any(|t| t.name == name) => {
                Err(HostError::UnknownTool(name.to_string()))
            }
            None => Err(self.unknown_tool(name)),
        }
    }

    /// The enabled extensions this table stands for: the loaded ones, then those kept only
    /// for their hooks.
    pub(super) fn wanted(&self) -> Vec<String> {
        self.entries.iter().map(|e| e.name().to_string()).collect()
    }
}

impl Core {
    /// A new table: tool names, collisions and never-defer budgets are decided here.
    pub(super) fn table(
        &self,
        loaded: Vec<Arc<Loaded>>,
        unloaded: Vec<Arc<Unloaded>>,
        mcp: Vec<Arc<mcp::McpEntry>>,
    ) -> Table {
        let mut taken: BTreeSet<String> = self.opts.builtins.iter().cloned().collect();
        let mut warnings = Vec::new();
        let mut tools = extension_tools(&loaded, &mut taken, &mut warnings);
        // MCP servers' tools, after the extensions' (whose names they cannot take): each
        // approved one as it is now, the rest withheld with a warning.
        tools.extend(mcp_tools(&self.home, &mcp, &mut taken, &mut warnings));
        let mut forwarders = Vec::new();
        for l in &loaded {
            if let Some(f) = &l.forwarder {
                forwarders.push(Arc::clone(f));
                let mut task = l.forwarding.lock().unwrap_or_else(|p| p.into_inner());
                if task.is_none() {
                    let handle = tokio::spawn(Arc::clone(f).run(Arc::clone(l)));
                    *task = Some(handle.abort_handle());
                }
            }
        }
        for event in warnings {
            self.report(event);
        }
        let routes = routes(&tools, &loaded, &mcp);
        let entries = (loaded.into_iter().map(Entry::Loaded))
            .chain(unloaded.into_iter().map(Entry::Unloaded))
            .collect();
        Table {
            entries,
            mcp,
            tools,
            routes,
            forwarders,
        }
    }
}

/// Each of `tools` by its name, with the loaded extension or MCP server that serves it.
fn routes(
    tools: &[ToolDefinition],
    loaded: &[Arc<Loaded>],
    mcp: &[Arc<mcp::McpEntry>],
) -> HashMap<String, Route> {
    let by_name: HashMap<&str, &Arc<Loaded>> =
        loaded.iter().map(|l| (l.name.as_str(), l)).collect();
    let servers: HashMap<&str, &Arc<mcp::McpEntry>> =
        mcp.iter().map(|e| (e.source.name.as_str(), e)).collect();
    let mut routes = HashMap::with_capacity(tools.len());
    for def in tools {
        let to = match def.mcp {
            true => servers
                .get(def.extension.as_str())
                .map(|e| Serves::Mcp(Arc::clone(e))),
            false => by_name
                .get(def.extension.as_str())
                .map(|l| Serves::Extension(Arc::clone(l))),
        };
        if let Some(to) = to {
            let tool = def.tool.clone();
            routes.insert(def.name.clone(), Route { tool, to });
        }
    }
    routes
}

pub(super) fn find(table: &Table, name: &str) -> Result<Arc<Loaded>, HostError> {
    table
        .loaded()
        .find(|l| l.name == name)
        .cloned()
        .ok_or_else(|| HostError::NotLoaded(name.to_string()))
}
