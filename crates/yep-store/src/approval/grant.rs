//! `grant` and `revoke` as library calls: what the user lets an extension or MCP server reach
//! beyond its own manifest, decided by [`decide`](super::decide) and pinned in the lock. The
//! caller parses, asks and renders; the policy is here.

use super::{Approval, Decision, Moment, PackageKind, decide};
use crate::grants::SandboxGrants;
use crate::{Home, StoreError};
use std::path::{Path, PathBuf};

/// Whom a grant is for: an installed package, or an MCP server a session sees (kept for the
/// workspace whose `.mcp.json` defines it).
#[derive(Debug, Clone)]
pub struct Subject {
    pub name: String,
    pub kind: SubjectKind,
    /// The workspace a grant for it is kept for (a workspace's MCP server).
    pub workspace: Option<String>,
    /// What it was approved as: its own grants are its manifest's.
    pub approval: Approval,
}

/// What a [`Subject`] is, as a person reads it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SubjectKind {
    Package(PackageKind),
    /// An MCP server: of the home, of an extension (named), or of a workspace.
    McpServer(crate::mcp::Origin),
}

impl std::fmt::Display for SubjectKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        use crate::mcp::Origin;
        match self {
            // A plugin's grants are its package's: "extension" names all but zot's.
            SubjectKind::Package(PackageKind::Zot) => f.write_str("zot extension"),
            SubjectKind::Package(_) => f.write_str("extension"),
            SubjectKind::McpServer(Origin::Extension(ext)) => {
                write!(f, "MCP server of extension {ext}")
            }
            SubjectKind::McpServer(Origin::Home) => f.write_str("MCP server"),
            SubjectKind::McpServer(Origin::Workspace(_)) => f.write_str("workspace MCP server"),
        }
    }
}

impl Subject {
    /// The installed package `name`, if there is one: its approval as the lock holds it.
    pub fn package(home: &Home, name: &str) -> Result<Option<Subject>, StoreError> {
        let lock = home.lockfile()?;
        let Some(entry) = lock.get(name) else {
            return Ok(None);
        };
        let approval = Approval::pinned(&lock, entry, || home.package_manifest(entry).ok());
        Ok(Some(Subject {
            name: name.to_string(),
            kind: SubjectKind::Package(approval.kind),
            workspace: None,
            approval,
        }))
    }

    /// The MCP server `name` of `origin`, with what the user granted it.
    pub fn mcp_server(
        home: &Home,
        name: &str,
        origin: crate::mcp::Origin,
    ) -> Result<Subject, StoreError> {
        let lock = home.lockfile()?;
        let workspace = origin.workspace();
        let approval = Approval {
            mcp: crate::mcp::pin_in(&lock, name, &origin),
            ..Approval::of_kind(PackageKind::Mcp)
        }
        .with_granted(lock.granted(name, workspace.as_deref()));
        Ok(Subject {
            name: name.to_string(),
            kind: SubjectKind::McpServer(origin),
            workspace,
            approval,
        })
    }
}

/// What a grant did.
#[derive(Debug, Clone)]
pub struct Granted {
    /// What it added (none when it had all of it).
    pub new: Vec<String>,
    /// Everything the user has granted it now.
    pub granted: SandboxGrants,
    /// What it runs with now: its own grants and the user's.
    pub effective: SandboxGrants,
    /// Directories made for `write:` grants of missing paths, each with the grant.
    pub made: Vec<(String, PathBuf)>,
}

/// What a revoke did.
#[derive(Debug, Clone)]
pub struct Revoked {
    /// What it took back (none when the user had granted none of it).
    pub taken: Vec<String>,
    pub granted: SandboxGrants,
    pub effective: SandboxGrants,
}

/// Why a grant or revoke did not happen.
#[derive(Debug, thiserror::Error)]
pub enum GrantError {
    /// A grant names a path that does not exist, and yep may not make it.
    #[error(
        "`{kind}:{}` names {}, which does not exist: the sandbox can open only what exists when the server starts",
        crate::text::escape(written),
        crate::text::escape(&path.display().to_string())
    )]
    Missing {
        kind: &'static str,
        written: String,
        path: PathBuf,
    },
    /// The user said no (or could not be asked).
    #[error("not granted: `{}`", crate::text::escape(.0))]
    Declined(String),
    /// A revoke named what the user never granted; `own` when the package's manifest asks
    /// for it.
    #[error(
        "`{}` was not granted to `{}` with yep grant",
        crate::text::escape(line),
        crate::text::escape(name)
    )]
    NotGranted {
        name: String,
        line: String,
        own: bool,
    },
    #[error("failed to make {}: {source}", path.display())]
    Make {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// The directories `write:` grants name that do not exist yet, to be made once granted.
#[derive(Debug, Default)]
#[must_use]
pub struct Missing(Vec<(String, PathBuf)>);

impl Missing {
    /// Check that every path `grants` names exists: the sandbox can open only what exists
    /// when the server starts, so a grant of a missing path would do nothing. A missing
    /// `write:` one that `may_make` allows (the sandbox's rule: inside the user's home, away
    /// from credentials and yep homes) is made once granted; any other is refused.
    pub fn check(
        grants: &SandboxGrants,
        may_make: &dyn Fn(&Path) -> bool,
    ) -> Result<Missing, GrantError> {
        let mut make = Vec::new();
        let named = grants
            .read
            .iter()
            .map(|p| ("read", p))
            .chain(grants.write.iter().map(|p| ("write", p)));
        for (kind, written) in named {
            let Some(path) = crate::grants::grant_path(written) else {
                continue;
            };
            if std::fs::symlink_metadata(&path).is_ok() {
                continue;
            }
            if kind == "write" && may_make(&path) {
                make.push((written.clone(), path));
                continue;
            }
            return Err(GrantError::Missing {
                kind,
                written: written.clone(),
                path,
            });
        }
        Ok(Missing(make))
    }

    /// Make each missing directory (owner-only, with its missing parents).
    pub fn make(self) -> Result<Vec<(String, PathBuf)>, GrantError> {
        use std::os::unix::fs::DirBuilderExt;
        for (_, path) in &self.0 {
            std::fs::DirBuilder::new()
                .recursive(true)
                .mode(0o700)
                .create(path)
                .map_err(|source| GrantError::Make {
                    path: path.clone(),
                    source,
                })?;
        }
        Ok(self.0)
    }
}

impl Home {
    /// Grant `subject` what `asked` names. When that widens what it runs with, `ask` is shown
    /// the new lines and says yes or no; nothing is asked when it had all of it.
    pub fn grant(
        &self,
        subject: &Subject,
        asked: &SandboxGrants,
        may_make: &dyn Fn(&Path) -> bool,
        ask: &mut dyn FnMut(&[String]) -> bool,
    ) -> Result<Granted, GrantError> {
        let missing = Missing::check(asked, may_make)?;
        let pinned = &subject.approval;
        let before = pinned.granted.clone();
        let after = before.merged(asked);
        let candidate = pinned.clone().with_granted(after.clone());
        let new = pinned.effective_grants().widened_by(&after);
        let granted = match decide(Some(pinned), &candidate, Moment::Grant) {
            // Granted already: a directory removed since is made again.
            Decision::Run => before,
            Decision::Ask(_) if !ask(&new) => {
                return Err(GrantError::Declined(subject.name.clone()));
            }
            Decision::Ask(_) => after,
            Decision::Refuse(_) => return Err(GrantError::Declined(subject.name.clone())),
        };
        let made = missing.make()?;
        if !new.is_empty() {
            self.set_granted(&subject.name, subject.workspace.as_deref(), granted.clone())?;
        }
        let effective = pinned
            .clone()
            .with_granted(granted.clone())
            .effective_grants();
        Ok(Granted {
            new,
            granted,
            effective,
            made,
        })
    }

    /// Take back from `subject` what `named` names, as `grant` gave it; none takes back all
    /// the user granted. Only the user's grants can be: a manifest's are part of the package.
    pub fn revoke(
        &self,
        subject: &Subject,
        named: Option<&SandboxGrants>,
    ) -> Result<Revoked, GrantError> {
        let before = subject.approval.granted.clone();
        let after = match named {
            None => SandboxGrants::default(),
            Some(named) => {
                let held = before.lines();
                // A limit is named by its kind (`processes:1` takes back any processes
                // limit).
                let kind = |l: &str| l.split(' ').take(2).collect::<Vec<_>>().join(" ");
                let not_held = named
                    .lines()
                    .into_iter()
                    .find(|l| match l.starts_with("limit ") {
                        true => !held.iter().any(|h| kind(h) == kind(l)),
                        false => !held.contains(l),
                    });
                if let Some(line) = not_held {
                    let own = subject.approval.own_grants().lines().contains(&line);
                    return Err(GrantError::NotGranted {
                        name: subject.name.clone(),
                        line,
                        own,
                    });
                }
                before.without(named)
            }
        };
        let taken = after.widened_by(&before);
        self.set_granted(&subject.name, subject.workspace.as_deref(), after.clone())?;
        let effective = subject
            .approval
            .clone()
            .with_granted(after.clone())
            .effective_grants();
        Ok(Revoked {
            taken,
            granted: after,
            effective,
        })
    }
}
