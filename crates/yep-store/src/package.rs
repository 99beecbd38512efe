//! A package as the store reads it: a fetched one's manifest (a yep, zot or Claude Code
//! package), a zot extension run once to learn what it registers, and an installed one's
//! manifest in the terms it was approved in.

use crate::install::{Approver, InstallOptions};
use crate::lockfile::{LockEntry, LockSource};
use crate::manifest::{MANIFEST_FILE, Manifest, ManifestError};
use crate::source::SourceSpec;
use crate::{Home, StoreError, claude, marketplace, summary, text, zot};
use std::path::{Path, PathBuf};

/// A fetched package's manifest, before anything of it runs.
pub(crate) enum Package {
    Yep(Box<Manifest>),
    /// A zot extension; `shown` is its `extension.json` as the user knows it.
    Zot {
        extension: Box<zot::ZotManifest>,
        shown: PathBuf,
    },
    /// A Claude Code, Codex or Agent Plugins package, approved as it reads (nothing runs).
    Claude(Box<claude::approve::Approval>),
}

impl Package {
    pub(crate) fn name(&self) -> &str {
        match self {
            Package::Yep(m) => &m.name,
            Package::Zot { extension, .. } => &extension.name,
            Package::Claude(approval) => &approval.manifest.name,
        }
    }
}

/// Read the manifest of a fetched package in `root`; errors name it as the user knows it,
/// not the scratch copy.
///
/// Through a marketplace (`via`), it is a plugin, read with what its entry adds, which may
/// be all of it.
pub(crate) fn read_package(
    source: &SourceSpec,
    lock_source: &LockSource,
    root: &Path,
    via: Option<&marketplace::Resolved>,
) -> Result<Package, StoreError> {
    let zot = zot::is_zot_package(root);
    let kind = claude::plugin_kind(root).filter(|_| !zot);
    if kind.is_some() || via.is_some() {
        let shown = match source {
            SourceSpec::Path(p) => p.clone(),
            _ => PathBuf::from(lock_source.to_string()),
        };
        let what = match via {
            Some(found) => format!(
                "plugin `{}` of marketplace `{}`",
                text::escape(&found.pin.entry),
                text::escape(&found.pin.name)
            ),
            None => kind
                .unwrap_or(claude::PluginKind::Claude)
                .label()
                .to_string(),
        };
        let invalid = |message: String| ManifestError::Invalid {
            path: shown.clone(),
            message: format!("{what}: {message}"),
        };
        // A plugin that names itself nowhere takes its directory's name as the user knows it.
        let known_as = match lock_source {
            LockSource::Git { url, subdir, .. } => subdir
                .as_deref()
                .unwrap_or(url)
                .trim_end_matches('/')
                .rsplit(['/', ':'])
                .next()
                .map(|n| n.trim_end_matches(".git").to_string()),
            _ => shown.file_name().map(|n| n.to_string_lossy().into_owned()),
        };
        let overrides = claude::Overrides {
            fallback_name: known_as,
            fields: via.map(|f| f.overrides.fields.clone()).unwrap_or_default(),
        };
        let plugin =
            claude::ClaudePlugin::load(root, &overrides).map_err(|e| invalid(e.to_string()))?;
        let mut approval = plugin.approved().map_err(|e| invalid(e.to_string()))?;
        approval.pin.marketplace = via.map(|f| f.pin.clone());
        return Ok(Package::Claude(Box::new(approval)));
    }
    let file = if zot {
        zot::ZOT_MANIFEST_FILE
    } else {
        MANIFEST_FILE
    };
    let shown = match source {
        SourceSpec::Path(p) => p.join(file),
        _ => PathBuf::from(format!("{lock_source}: {file}")),
    };
    if !zot {
        return Ok(Package::Yep(Box::new(
            Manifest::load(root).map_err(|e| e.relabel(shown))?,
        )));
    }
    let extension = zot::ZotManifest::load(root).map_err(|e| e.relabel(shown.clone()))?;
    extension
        .check_exec(root)
        .map_err(|message| ManifestError::Invalid {
            path: shown.clone(),
            message,
        })?;
    Ok(Package::Zot {
        extension: Box::new(extension),
        shown,
    })
}

impl Home {
    /// A zot extension's approved manifest: `extension.json` with what it registers when run
    /// once (its pin), and notes on registrations yep cannot offer. `ask`, on a first install,
    /// is asked before it runs.
    /// A `go run` extension (not linked) is built first, once asked, into scratch, and run
    /// as that program: the path of what was built comes back, to be pinned with the package.
    #[allow(clippy::type_complexity)]
    pub(crate) fn run_zot(
        &self,
        ext: &zot::ZotManifest,
        shown: &Path,
        root: &Path,
        opts: &InstallOptions,
        scratch: &Path,
        ask: Option<&mut dyn Approver>,
    ) -> Result<(Manifest, zot::ZotPin, Vec<String>, Option<PathBuf>), StoreError> {
        let mut built = None;
        // One its manifest turns off (`"enabled": false`) is never started by zot, and is not
        // run here either: installed with nothing registered, until it says true.
        let registrations = if ext.spawns() && ext.enabled {
            let runner = opts
                .zot
                .as_ref()
                .ok_or_else(|| StoreError::NoZotRunner(ext.name.clone()))?;
            if let Some(approver) = ask {
                let line = std::iter::once(ext.exec.clone().unwrap_or_default())
                    .chain(ext.args.iter().cloned())
                    .collect::<Vec<_>>()
                    .join(" ");
                let dir = shown.parent().unwrap_or(shown).display().to_string();
                let builds = !opts.link && !root.join("bin/go").exists();
                let what = match (ext.go_run(), builds) {
                    (Some(_), true) => format!(
                        "`{}` is a zot extension: installing builds its `{}` once with `go build` (which may download modules), then runs the program in {} once, as a session would, to read what it registers; sessions run that program, pinned, not `go run`",
                        ext.name,
                        crate::text::escape(&line),
                        crate::text::escape(&dir)
                    ),
                    _ => format!(
                        "`{}` is a zot extension: installing runs `{}` in {} once, as a session would, to read what it registers (npx or go run may download or compile)",
                        ext.name,
                        crate::text::escape(&line),
                        crate::text::escape(&dir)
                    ),
                };
                if !approver.approve_run(&what) {
                    return Err(StoreError::Declined(format!("`{}` was not run", ext.name)));
                }
            }
            // `go run .` is built once here, and the program run from then on: no compiler at
            // each start, nor a module cache to reach from the sandbox.
            let mut probed = ext.clone();
            // Not a linked package (the author's, changing in place), nor one that ships its
            // own `go` (the session finds its `bin/` first): that runs as written.
            let own_go = root.join("bin/go").exists();
            if let (Some(run), false, false) = (ext.go_run(), opts.link, own_go) {
                let out = scratch.join("zot-build").join("server");
                let _step = opts
                    .progress
                    .step(format!("building {} with go build", ext.name));
                run.build(root, &out)
                    .map_err(|output| StoreError::ZotBuild {
                        name: ext.name.clone(),
                        output,
                    })?;
                probed.exec = Some(out.to_string_lossy().into_owned());
                probed.args = run.args;
                built = Some(out);
            }
            let _run = opts.progress.step(format!(
                "running {} once to read what it registers",
                ext.name
            ));
            // Its data goes to scratch: nothing of a run before consent is kept.
            let data = scratch.join("zot-data");
            runner
                .0
                .probe(&probed, root, &data)
                .map_err(|source| StoreError::ZotRun {
                    name: ext.name.clone(),
                    source,
                })?
        } else {
            zot::Registrations::default()
        };
        let (manifest, notes) =
            ext.approved(&registrations)
                .map_err(|message| ManifestError::Invalid {
                    path: shown.to_path_buf(),
                    message,
                })?;
        Ok((manifest, registrations.pin, notes, built))
    }

    /// The manifest an installed package has on disk, in the terms it was approved in: a
    /// YEP package's `plugin.json`; a zot extension's `extension.json` with the tools,
    /// commands and pin it was approved with (its registrations are only known by running
    /// it).
    pub fn package_manifest(&self, entry: &LockEntry) -> Result<Manifest, ManifestError> {
        let dir = self.package_dir(&entry.name);
        // A Claude plugin's, read from its files as at install.
        if entry.claude.is_some() {
            let invalid = |message: String| ManifestError::Invalid {
                path: dir.clone(),
                message,
            };
            // With what its marketplace entry added, as recorded.
            let overrides = entry
                .claude
                .as_ref()
                .and_then(|pin| pin.marketplace.as_ref())
                .map(claude::MarketplacePin::overrides)
                .unwrap_or_default();
            let plugin =
                claude::ClaudePlugin::load(&dir, &overrides).map_err(|e| invalid(e.to_string()))?;
            return plugin
                .approved()
                .map(|approval| approval.manifest)
                .map_err(|e| invalid(e.to_string()));
        }
        let Some(pin) = &entry.zot else {
            return Manifest::load(&dir);
        };
        let ext = zot::ZotManifest::load(&dir)?;
        let approved = entry.approved();
        let registrations = zot::Registrations {
            tools: approved
                .as_ref()
                .map(|m| m.yolop.tools.clone())
                .unwrap_or_default(),
            commands: approved
                .as_ref()
                .map(|m| m.yolop.commands.clone())
                .unwrap_or_default(),
            pin: pin.clone(),
        };
        let path = dir.join(zot::ZOT_MANIFEST_FILE);
        ext.approved(&registrations)
            .map(|(manifest, _)| manifest)
            .map_err(|message| ManifestError::Invalid { path, message })
    }

    /// The manifest of installed extension `name`, as [`Home::package_manifest`] reads it.
    pub fn installed_manifest(&self, name: &str) -> Result<Manifest, StoreError> {
        let lock = self.lockfile()?;
        let entry = lock.get(name).ok_or_else(|| self.not_installed(name))?;
        Ok(self.package_manifest(entry)?)
    }

    /// The commands of the installed `name` that resolve nowhere a session looks (the
    /// package's `bin/`, `PATH`, or the path as written): its server's, and each stdio MCP
    /// server's that names no `${VAR}`, with what it is (`server`, `MCP server x`). A session
    /// could not start them.
    pub fn unresolved_commands(&self, name: &str) -> Vec<(String, String)> {
        let Ok(manifest) = self.installed_manifest(name) else {
            return Vec::new();
        };
        let dir = self.package_dir(name);
        let server = manifest
            .yolop
            .capability_server
            .as_ref()
            .map(|s| ("server".to_string(), s.command.clone()));
        let mcp = manifest.yolop.mcp_servers.iter().filter_map(|(n, s)| {
            let command = s.command.clone().filter(|c| !c.contains('$'))?;
            Some((format!("MCP server `{n}`"), command))
        });
        server
            .into_iter()
            .chain(mcp)
            .filter(|(_, command)| !command_resolves(command, &dir))
            .collect()
    }
}

/// The facets a manifest contributes, as short words.
pub fn contributions(m: &Manifest) -> Vec<String> {
    contributions_of(m, None)
}

/// [`contributions`], a plugin's hooks counted from its pin (each command of each matcher,
/// as its consent screen counts them).
pub fn contributions_of(m: &Manifest, pin: Option<&crate::claude::ClaudePin>) -> Vec<String> {
    let f = &m.yolop;
    let mut out = Vec::new();
    let mut count = |n: usize, what: &str| {
        if n > 0 {
            out.push(format!("{n} {what}{}", if n == 1 { "" } else { "s" }));
        }
    };
    count(f.tools.len(), "tool");
    count(pin.map_or(f.hooks.len(), |p| p.hooks.len()), "hook");
    count(f.commands.len(), "command");
    count(f.mcp_servers.len(), "mcp server");
    out.extend(summary::flags(m).into_iter().map(String::from));
    out
}

/// Whether a server command resolves the way the runtime will spawn it: the package's `bin/`,
/// a path inside the package, or PATH.
pub fn command_resolves(command: &str, package: &Path) -> bool {
    if command.contains('/') {
        let p = Path::new(command);
        return if p.is_absolute() {
            p.is_file()
        } else {
            package.join(p).is_file()
        };
    }
    if package.join("bin").join(command).is_file() {
        return true;
    }
    std::env::var_os("PATH")
        .is_some_and(|paths| std::env::split_paths(&paths).any(|d| d.join(command).is_file()))
}
