//! What format a package is written in: the one kind the lock stores, the consent screen
//! names and the host picks a wire by.

use serde::{Deserialize, Serialize};

/// What a package (or an MCP server) is, whatever file it was read from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PackageKind {
    /// A YEP extension (`plugin.json` with a `yolop` block).
    Yep,
    /// A zot extension (`extension.json`), approved with what its first run registered.
    Zot,
    /// A Claude Code plugin (`.claude-plugin/plugin.json`, or its directory layout).
    Claude,
    /// A Codex plugin (`.codex-plugin/plugin.json`).
    Codex,
    /// An Agent Plugins 1.0 plugin (a root `plugin.json` with its `$schema`).
    AgentPlugin,
    /// An MCP server, approved by the tools it listed.
    Mcp,
}

impl PackageKind {
    /// What a person calls it: "zot extension", "Codex plugin".
    pub fn label(self) -> &'static str {
        match self {
            PackageKind::Yep => "extension",
            PackageKind::Zot => "zot extension",
            PackageKind::Mcp => "MCP server",
            PackageKind::Claude => "Claude Code plugin",
            PackageKind::Codex => "Codex plugin",
            PackageKind::AgentPlugin => "Agent Plugins 1.0 plugin",
        }
    }

    /// Whether its server speaks zot's extension protocol (the host's one wire choice that
    /// the package kind makes).
    pub fn speaks_zot(self) -> bool {
        self == PackageKind::Zot
    }
}

impl std::fmt::Display for PackageKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.label())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_kind_has_a_label_and_plugins_round_trip() {
        use crate::claude::PluginKind;
        // (The plugin kinds' side of this lives with them, in `claude`.)
        for p in [
            PluginKind::Claude,
            PluginKind::Codex,
            PluginKind::AgentPlugin,
        ] {
            let kind = PackageKind::from(p);
            assert_eq!(kind.plugin(), Some(p));
            assert_eq!(kind.label(), p.label());
        }
        assert_eq!(PackageKind::Zot.label(), "zot extension");
        assert_eq!(PackageKind::Yep.plugin(), None);
        assert!(PackageKind::Zot.speaks_zot() && !PackageKind::Yep.speaks_zot());
        let json = serde_json::to_string(&PackageKind::AgentPlugin).unwrap();
        assert_eq!(json, "\"agent_plugin\"");
    }
}
