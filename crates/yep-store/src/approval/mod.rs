//! One approval model. Every format a package can be written in (YEP, zot, Claude Code, Codex,
//! Agent Plugins) and every MCP server maps into one [`Approval`]: what the user approved, held
//! in the lock. Two approvals compare with one [`diff`] that says what widens, and one
//! [`decide`] says whether a candidate runs, is asked about, or is refused — at install,
//! update, launch, an MCP server's start, `yep trust` and `yep grant` alike. The effective
//! sandbox grants are computed here and nowhere else ([`Approval::effective_grants`]).

mod decide;
mod diff;
mod grant;
pub(crate) mod kind;

pub use decide::{Decision, Moment, Refusal, decide};
pub use diff::diff;
pub use grant::{GrantError, Granted, Missing, Revoked, Subject, SubjectKind};
pub use kind::PackageKind;

use crate::claude::ClaudePin;
use crate::grants::SandboxGrants;
use crate::lockfile::{LockEntry, Lockfile};
use crate::manifest::Manifest;
use crate::mcp::McpPin;
use crate::zot::ZotPin;

/// What a user approved of one package or MCP server, in one form whatever its format.
#[derive(Debug, Clone)]
pub struct Approval {
    pub kind: PackageKind,
    /// The content hash of a package's files as approved; none for an MCP server.
    pub content: Option<String>,
    /// The manifest a package is held to (a zot extension's and a plugin's as yep reads
    /// them); none for an MCP server.
    pub manifest: Option<Manifest>,
    /// What a zot extension's first run registered beyond its tools and commands.
    pub zot: Option<ZotPin>,
    /// A plugin's hooks, commands and the rest of what it was approved with beyond its
    /// manifest.
    pub claude: Option<ClaudePin>,
    /// An MCP server's definition, code, installed package and tools as approved.
    pub mcp: Option<McpPin>,
    /// What the user granted beyond the package's own manifest (`yep grant`).
    pub granted: SandboxGrants,
}

impl Approval {
    /// Nothing approved yet of a `kind`: no manifest, no pins, no grants.
    pub fn of_kind(kind: PackageKind) -> Approval {
        Approval {
            kind,
            content: None,
            manifest: None,
            zot: None,
            claude: None,
            mcp: None,
            granted: SandboxGrants::default(),
        }
    }

    /// A package approved as `manifest`, with nothing pinned beside it.
    pub fn of_manifest(kind: PackageKind, manifest: Manifest) -> Approval {
        Approval {
            manifest: Some(manifest),
            ..Approval::of_kind(kind)
        }
    }

    /// An MCP server approved as `pin`.
    pub fn of_mcp(pin: McpPin) -> Approval {
        Approval {
            mcp: Some(pin),
            ..Approval::of_kind(PackageKind::Mcp)
        }
    }

    /// What `entry` of `lock` holds as approved, with what the user granted it; `manifest`
    /// stands in for a lock written before yep recorded the approved manifest.
    pub fn pinned(
        lock: &Lockfile,
        entry: &LockEntry,
        manifest: impl FnOnce() -> Option<Manifest>,
    ) -> Approval {
        Approval {
            kind: entry.kind(),
            content: Some(entry.content_hash.clone()),
            manifest: entry.approved().or_else(manifest),
            zot: entry.zot.clone(),
            claude: entry.claude.clone(),
            mcp: None,
            granted: lock.granted(&entry.name, None),
        }
    }

    /// The same approval with what the user granted as `granted`.
    pub fn with_granted(self, granted: SandboxGrants) -> Approval {
        Approval { granted, ..self }
    }

    /// What it runs with beyond the sandbox's default profile: its manifest's own grants and
    /// the user's. The one place they are put together.
    pub fn effective_grants(&self) -> SandboxGrants {
        combine(&self.own_grants(), &self.granted)
    }

    /// What its own manifest asks of the sandbox (nothing, for an MCP server).
    pub fn own_grants(&self) -> SandboxGrants {
        self.manifest
            .as_ref()
            .map(|m| m.sandbox.clone())
            .unwrap_or_default()
    }

    /// Whether `other` is exactly this approval: the same bytes (when both name them), the
    /// same manifest, the same pins and the same grants.
    pub fn same_as(&self, other: &Approval) -> bool {
        let json = |m: &Option<Manifest>| m.as_ref().and_then(|m| serde_json::to_value(m).ok());
        let content = match (&self.content, &other.content) {
            (Some(a), Some(b)) => a == b,
            _ => true,
        };
        content
            && self.kind == other.kind
            && self.zot == other.zot
            && self.claude == other.claude
            && same_mcp(self.mcp.as_ref(), other.mcp.as_ref())
            && self.granted == other.granted
            && json(&self.manifest) == json(&other.manifest)
    }
}

/// Whether two MCP pins approve the same: a launcher's package is the same package when its
/// [`approved_package`] is.
fn same_mcp(a: Option<&McpPin>, b: Option<&McpPin>) -> bool {
    match (a, b) {
        (Some(a), Some(b)) => {
            McpPin {
                install: None,
                ..a.clone()
            } == McpPin {
                install: None,
                ..b.clone()
            } && approved_package(a) == approved_package(b)
        }
        (a, b) => a == b,
    }
}

/// The package a launcher's install was approved as: its ecosystem, name, version and
/// integrity (where and how it was laid out is not approved); none without an install.
fn approved_package(pin: &McpPin) -> Option<(crate::launcher::Ecosystem, &str, &str, &str)> {
    let i = pin.install.as_ref()?;
    Some((i.ecosystem, &i.package, &i.version, &i.integrity))
}

/// What `name` runs with beyond the default profile, given its manifest's own grants: those
/// and what the user granted it (for a workspace's MCP server, in `workspace`).
pub fn effective_grants(
    lock: &Lockfile,
    name: &str,
    workspace: Option<&str>,
    own: &SandboxGrants,
) -> SandboxGrants {
    combine(own, &lock.granted(name, workspace))
}

/// A package's own grants and the user's, put together: each widens, a limit takes the
/// higher value.
fn combine(own: &SandboxGrants, granted: &SandboxGrants) -> SandboxGrants {
    own.merged(granted)
}
