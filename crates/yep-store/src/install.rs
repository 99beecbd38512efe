//! Install and update: fetch into scratch, read and hash what came, show the summary (or the
//! diff against what was approved), then commit through the journal.

use crate::approval::{self, Approval, Decision, Moment, PackageKind, decide};
use crate::components::Component;
use crate::fetch::{self, FetchError, Registry};
use crate::grants::SandboxGrants;
use crate::home::check_name;
use crate::journal::Journal;
use crate::lockfile::{LockBinary, LockEntry, LockSource, Lockfile};
use crate::manifest::{MANIFEST_FILE, Manifest};
use crate::package::{Package, command_resolves, read_package};
use crate::source::{self, SourceSpec};
use crate::summary::{self, ContributionDiff};
use crate::{Home, Progress, StoreError, claude, fsutil, hash, io, marketplace, zot};
use serde::Serialize;
use std::path::{Path, PathBuf};

/// What the caller decides when shown a summary (and, on update, a diff).
pub trait Approver {
    /// `diff` is `None` for a first install. Return true to go ahead.
    fn approve(&mut self, summary: &str, diff: Option<&ContributionDiff>) -> bool;

    /// Before a first install runs a package to learn what it registers (a zot extension):
    /// `what` says what runs and where. Return true to run it. By default, asked as a summary.
    fn approve_run(&mut self, what: &str) -> bool {
        self.approve(what, None)
    }
}

/// Approve everything (`--yes`).
pub struct AlwaysYes;
impl Approver for AlwaysYes {
    fn approve(&mut self, _: &str, _: Option<&ContributionDiff>) -> bool {
        true
    }
}

/// Runs zot extensions at install and update to read what they register ([`zot::Probe`]).
#[derive(Clone)]
pub struct ZotRunner(pub std::sync::Arc<dyn zot::Probe>);

impl std::fmt::Debug for ZotRunner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ZotRunner")
    }
}

/// Install options.
#[derive(Debug, Clone, Default)]
pub struct InstallOptions {
    /// Reference a local directory in place instead of copying it.
    pub link: bool,
    /// Allow a package from another origin to take an installed name. It is approved afresh,
    /// the old package's secrets, config and data are dropped, and it is left disabled.
    pub replace: bool,
    /// Where downloads and steps are reported.
    pub progress: Progress,
    /// How a zot extension is run to read its registrations; without it, one is refused.
    pub zot: Option<ZotRunner>,
    /// The package's directory inside a git repository (a git source only).
    pub subdir: Option<String>,
}

/// Update options.
#[derive(Debug, Clone, Default)]
pub struct UpdateOptions {
    /// Refuse any change to the lock (`--locked`).
    pub locked: bool,
    /// Where downloads and steps are reported.
    pub progress: Progress,
    /// How a zot extension is run to read its registrations again.
    pub zot: Option<ZotRunner>,
}

/// What an install or update did.
#[derive(Debug, Clone, Serialize)]
pub struct Installed {
    pub name: String,
    pub version: Option<String>,
    pub source: String,
    pub content_hash: String,
    /// First install, updated, or unchanged.
    pub outcome: Outcome,
    pub summary: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub diff: Option<ContributionDiff>,
    /// The prebuilt binary step, when the manifest names one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub binary: Option<String>,
    /// The keys of a zot extension's `extension.json` that zot and yep ignore (escaped).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub ignored: Vec<String>,
    /// A zot extension whose `extension.json` says `"enabled": false`: not run, and not
    /// enabled until it says true.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub disabled_in_manifest: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Outcome {
    Installed,
    Updated,
    /// A package from another origin took the name (`--replace`); nothing of the old one's
    /// secrets, config or enablement was kept.
    Replaced,
    Unchanged,
}

/// A package fetched into scratch, read and hashed: what an install or update judges, asks
/// about and commits.
struct Fetched<'a> {
    name: String,
    lock_source: LockSource,
    /// Where the package content is: `staged`, or a linked directory in place.
    root: PathBuf,
    staged: PathBuf,
    scratch: &'a Path,
    hash: String,
    opts: &'a InstallOptions,
    /// The installed entry of that name, if any.
    previous: Option<LockEntry>,
    /// A package from another origin takes the name (`--replace`).
    replacing: bool,
    /// On update: the entry updated, and whether `--locked`.
    update_of: Option<(&'a LockEntry, bool)>,
    via: Option<&'a marketplace::Resolved>,
}

impl Fetched<'_> {
    fn outcome(&self) -> Outcome {
        if self.replacing {
            Outcome::Replaced
        } else if self.previous.is_some() {
            Outcome::Updated
        } else {
            Outcome::Installed
        }
    }
}

/// What a fetched package is approved as: the manifest yep holds it to, and what only a zot
/// extension or a Claude plugin pins beside it.
struct Approved {
    kind: PackageKind,
    manifest: Manifest,
    zot_pin: Option<zot::ZotPin>,
    zot_notes: Vec<String>,
    zot_ext: Option<Box<zot::ZotManifest>>,
    claude_pin: Option<claude::ClaudePin>,
    claude_notes: Vec<String>,
    /// The program built for a zot extension's `go run`.
    go_built: Option<PathBuf>,
}

impl Approved {
    /// A manifest with nothing pinned beside it.
    fn plain(kind: PackageKind, manifest: Manifest) -> Approved {
        Approved {
            kind,
            manifest,
            zot_pin: None,
            zot_notes: Vec::new(),
            zot_ext: None,
            claude_pin: None,
            claude_notes: Vec::new(),
            go_built: None,
        }
    }

    /// It in the one approval model: what `decide` weighs against what was approved, with
    /// what the user granted the name before (`granted`).
    fn approval(&self, content: &str, granted: SandboxGrants) -> Approval {
        Approval {
            content: Some(content.to_string()),
            zot: self.zot_pin.clone(),
            claude: self.claude_pin.clone(),
            ..Approval::of_manifest(self.kind, self.manifest.clone())
        }
        .with_granted(granted)
    }
}

impl Home {
    /// Install a package from `spec`. Shows the summary through `approver` before anything
    /// is committed; nothing is enabled.
    pub fn install(
        &self,
        spec: &str,
        opts: &InstallOptions,
        approver: &mut dyn Approver,
    ) -> Result<Installed, StoreError> {
        let source = SourceSpec::parse(spec)?;
        let _lock = self.lock()?;
        // `<plugin>@<marketplace>` when a marketplace of that name is added; else the
        // crates.io `<name>@<version>` it always was. A bare `<plugin>` that one added
        // marketplace lists is that plugin (several: the user says which); else crates.io.
        let via = match &source {
            SourceSpec::Bare {
                name,
                version: Some(market),
            } => marketplace::resolve(self, name, market)?,
            SourceSpec::Bare {
                name,
                version: None,
            } => match marketplace::offering(self, name)?.as_slice() {
                [] => None,
                [market] => marketplace::resolve(self, name, market)?,
                several => {
                    return Err(StoreError::ListedInSeveral {
                        plugin: name.clone(),
                        marketplaces: several.to_vec(),
                    });
                }
            },
            _ => None,
        };
        if via.is_some() && opts.subdir.is_some() {
            return Err(StoreError::Source(source::SourceError::SubdirNotGit));
        }
        let scratch = self.scratch()?;
        let result = match &via {
            Some(found) => {
                let opts = InstallOptions {
                    subdir: found.subdir.clone(),
                    ..opts.clone()
                };
                self.install_locked(&found.source, &opts, approver, &scratch, None, via.as_ref())
            }
            None => self.install_locked(&source, opts, approver, &scratch, None, None),
        };
        self.discard(&scratch);
        result
    }

    /// Fetch `source` into scratch, check it, ask, commit.
    fn install_locked(
        &self,
        source: &SourceSpec,
        opts: &InstallOptions,
        approver: &mut dyn Approver,
        scratch: &Path,
        update_of: Option<(&LockEntry, bool)>,
        via: Option<&marketplace::Resolved>,
    ) -> Result<Installed, StoreError> {
        let staged = scratch.join("package");
        let (lock_source, root) = self.fetch(source, opts, &staged, via.is_some())?;
        let package = read_package(source, &lock_source, &root, via)?;
        let name = package.name().to_string();
        check_name(&name)?;
        if let Some((entry, _)) = update_of {
            same_package(entry, &name, &lock_source)?;
        }
        let lock = self.lockfile()?;
        let previous = lock.get(&name).cloned();
        let replacing = replaces(
            previous.as_ref(),
            update_of.is_some(),
            opts.replace,
            &name,
            &lock_source,
        )?;
        let hash =
            hash::content_hash(&root).map_err(io(format!("failed to hash {}", root.display())))?;
        let fetched = Fetched {
            name,
            lock_source,
            root,
            staged,
            scratch,
            hash,
            opts,
            previous,
            replacing,
            update_of,
            via,
        };
        // Only now, with the cheap refusals behind it, may a zot extension run; a first install
        // asks first.
        let approved = self.approve_as(&fetched, package, approver)?;
        let dest = self.package_dir(&approved.manifest.name);
        let unchanged = Installed {
            name: approved.manifest.name.clone(),
            version: approved.manifest.version.clone(),
            source: fetched.lock_source.to_string(),
            content_hash: fetched.hash.clone(),
            outcome: Outcome::Unchanged,
            summary: install_summary(&fetched, &approved) + &self.off_note(&fetched, &approved),
            diff: None,
            binary: None,
            ignored: ignored_keys(approved.zot_ext.as_deref()),
            disabled_in_manifest: approved.zot_ext.as_ref().is_some_and(|ext| !ext.enabled),
        };
        // In the one approval model: what was approved of the name (none for a first
        // install or a package from another origin taking it), and what came.
        let candidate = approved.approval(&fetched.hash, lock.granted(&fetched.name, None));
        let pinned = fetched
            .previous
            .as_ref()
            .filter(|_| !fetched.replacing)
            .map(|prev| Approval::pinned(&lock, prev, || Manifest::load(&dest).ok()));
        // Same approved bytes from the same source: nothing to do.
        // (The installed copy counts too: one rewritten in place is restored from the source.)
        if let (Some(prev), Some(pinned)) = (&fetched.previous, &pinned)
            && prev.source == fetched.lock_source
            && pinned.same_as(&candidate)
            && dest.symlink_metadata().is_ok()
            && (prev.is_linked() || self.drift_of(prev).is_none())
        {
            return Ok(unchanged);
        }
        let diff = pinned.as_ref().map(|p| approval::diff(p, &candidate));
        let moment = match fetched.update_of {
            Some((_, locked)) => Moment::Update { locked },
            None => Moment::Install,
        };
        match decide(pinned.as_ref(), &candidate, moment) {
            Decision::Run => {}
            Decision::Ask(shown) => {
                if !approver.approve(&unchanged.summary, shown.as_ref()) {
                    return Err(declined(&fetched, &approved.manifest));
                }
            }
            Decision::Refuse(_) => return Err(locked_out(&fetched, &approved.manifest)),
        }
        if fetched.replacing {
            // Before the new bytes land: a crash from here on leaves the old package
            // disabled and without secrets, never the new one holding them.
            self.forget_state(&approved.manifest.name)?;
        }
        let (binary, pinned) = self.place_binary(&fetched, &approved)?;
        let outcome = fetched.outcome();
        self.commit_install(&fetched, lock, approved, pinned, &dest)?;
        Ok(Installed {
            outcome,
            diff,
            binary,
            ..unchanged
        })
    }

    /// What `package` is approved as: its manifest, and what a Claude plugin or a zot
    /// extension pins beside it.
    fn approve_as(
        &self,
        fetched: &Fetched,
        package: Package,
        approver: &mut dyn Approver,
    ) -> Result<Approved, StoreError> {
        match package {
            Package::Yep(manifest) => Ok(Approved::plain(PackageKind::Yep, *manifest)),
            Package::Claude(approval) => {
                let claude::approve::Approval {
                    manifest,
                    pin,
                    notes,
                } = *approval;
                Ok(Approved {
                    claude_pin: Some(pin.clone()),
                    claude_notes: notes,
                    ..Approved::plain(pin.kind.into(), manifest)
                })
            }
            Package::Zot { extension, shown } => {
                self.approve_zot(fetched, extension, &shown, approver)
            }
        }
    }

    /// A zot extension, run once to read what it registers (a first install asks first). What
    /// is approved is the bytes hashed before it ran: a run that rewrites them is refused.
    fn approve_zot(
        &self,
        fetched: &Fetched,
        extension: Box<zot::ZotManifest>,
        shown: &Path,
        approver: &mut dyn Approver,
    ) -> Result<Approved, StoreError> {
        // An installed one that never ran (its manifest turned it off) asks as a
        // first install does, whatever the verb.
        let never_ran = fetched
            .previous
            .as_ref()
            .is_some_and(|p| p.kind().speaks_zot())
            && zot::ZotManifest::load(&self.package_dir(&fetched.name))
                .is_ok_and(|m| !m.enabled && m.spawns());
        let first = (fetched.update_of.is_none()
            && (fetched.previous.is_none() || fetched.replacing))
            || never_ran;
        let ask: Option<&mut dyn Approver> = match first {
            true => Some(&mut *approver),
            false => None,
        };
        let root = &fetched.root;
        let (manifest, pin, notes, built) =
            self.run_zot(&extension, shown, root, fetched.opts, fetched.scratch, ask)?;
        let after =
            hash::content_hash(root).map_err(io(format!("failed to hash {}", root.display())))?;
        if after != fetched.hash {
            return Err(StoreError::ZotRewrote {
                name: fetched.name.clone(),
            });
        }
        Ok(Approved {
            zot_pin: Some(pin),
            zot_notes: notes,
            zot_ext: Some(extension),
            go_built: built,
            ..Approved::plain(PackageKind::Zot, manifest)
        })
    }

    /// The prebuilt binary goes in after hashing: it is not part of the approved content.
    /// So does the program built for a zot extension's `go run`, pinned the same way.
    /// Returns what happened, and the pin of what was placed.
    fn place_binary(
        &self,
        fetched: &Fetched,
        approved: &Approved,
    ) -> Result<(Option<String>, Option<LockBinary>), StoreError> {
        if fetched.opts.link {
            return Ok((None, None));
        }
        let Some(built) = &approved.go_built else {
            return Ok(self.binary_step(
                &approved.manifest,
                &fetched.staged,
                &fetched.opts.progress,
            ));
        };
        let path = zot::GO_BUILT.to_string();
        let target = fetched.staged.join(&path);
        if let Some(dir) = target.parent() {
            std::fs::create_dir_all(dir)
                .map_err(io(format!("failed to create {}", dir.display())))?;
        }
        std::fs::copy(built, &target)
            .map_err(io(format!("failed to place {}", target.display())))?;
        let sha256 = hash::sha256_file(&target)
            .map_err(io(format!("failed to hash {}", target.display())))?;
        Ok((
            Some(format!("built `go run` into {path}")),
            Some(LockBinary { path, sha256 }),
        ))
    }

    /// Pin the approved package in the lock and put it at `dest` (moved from scratch, or
    /// linked), in one journaled commit; what was at `dest` goes with the scratch.
    fn commit_install(
        &self,
        fetched: &Fetched,
        mut lock: Lockfile,
        approved: Approved,
        binary: Option<LockBinary>,
        dest: &Path,
    ) -> Result<(), StoreError> {
        let manifest = approved.manifest;
        lock.upsert(LockEntry {
            name: manifest.name.clone(),
            source: fetched.lock_source.clone(),
            content_hash: fetched.hash.clone(),
            version: manifest.version.clone(),
            approved_manifest: Some(serde_json::to_string(&manifest).unwrap_or_default()),
            binary,
            kind: Some(approved.kind),
            zot: approved.zot_pin,
            claude: approved.claude_pin,
        });
        let trash = fetched.scratch.join("previous");
        let mut renames = Vec::new();
        if dest.symlink_metadata().is_ok() {
            renames.push((dest.to_path_buf(), trash.clone()));
        }
        if fetched.opts.link {
            // The link itself is staged, so placing it is one rename too.
            let link = fetched.scratch.join("link");
            #[cfg(unix)]
            std::os::unix::fs::symlink(&fetched.root, &link)
                .map_err(io("failed to create the link"))?;
            renames.push((link, dest.to_path_buf()));
        } else {
            renames.push((fetched.staged.clone(), dest.to_path_buf()));
        }
        self.commit(Journal {
            renames,
            lock: lock.render(),
            cleanup: vec![trash],
        })
    }

    /// Fetch into `staged`; returns the lock source and where the package content is. A
    /// directory a marketplace `listed` may hold nothing of its own (its entry describes it).
    fn fetch(
        &self,
        source: &SourceSpec,
        opts: &InstallOptions,
        staged: &Path,
        listed: bool,
    ) -> Result<(LockSource, PathBuf), StoreError> {
        if opts.subdir.is_some() && !matches!(source, SourceSpec::Git { .. }) {
            return Err(StoreError::Source(source::SourceError::SubdirNotGit));
        }
        match source {
            SourceSpec::Path(path) => {
                let abs = std::fs::canonicalize(path)
                    .map_err(io(format!("failed to resolve {}", path.display())))?;
                if !listed
                    && !abs.join(MANIFEST_FILE).is_file()
                    && !zot::is_zot_package(&abs)
                    && claude::plugin_kind(&abs).is_none()
                {
                    return Err(StoreError::NoManifest { dir: abs });
                }
                let lock_source = LockSource::Path {
                    path: abs.display().to_string(),
                    link: opts.link,
                };
                if opts.link {
                    // Referenced in place, so checked in place: no link may lead out of it.
                    fsutil::check_links(&abs)
                        .map_err(io(format!("failed to link {}", abs.display())))?;
                    return Ok((lock_source, abs));
                }
                let _copy = opts.progress.step(format!("copying {}", abs.display()));
                fetch::fetch_path(&abs, staged)?;
                Ok((lock_source, staged.to_path_buf()))
            }
            SourceSpec::Git { url, rev } => {
                let commit = {
                    let _clone = opts.progress.step(format!("cloning {url}"));
                    match &opts.subdir {
                        Some(subdir) => {
                            fetch::fetch_git_subdir(url, rev.as_deref(), subdir, staged)?
                        }
                        None => fetch::fetch_git(url, rev.as_deref(), staged)?,
                    }
                };
                Ok((
                    LockSource::Git {
                        url: url.clone(),
                        rev: commit,
                        subdir: opts.subdir.clone(),
                    },
                    staged.to_path_buf(),
                ))
            }
            SourceSpec::Crate { name, version } => {
                self.fetch_crate(name, version.as_deref(), staged, &opts.progress)
            }
            SourceSpec::Bare { name, version } => {
                for candidate in SourceSpec::candidates(name) {
                    match self.fetch_crate(&candidate, version.as_deref(), staged, &opts.progress) {
                        Err(StoreError::Fetch(FetchError::NotFound(_))) => {}
                        other => return other,
                    }
                }
                Err(StoreError::NotOnRegistry {
                    name: name.clone(),
                    tried: SourceSpec::candidates(name),
                    directory_here: Path::new(name).join(MANIFEST_FILE).is_file(),
                    installed_from: self
                        .lockfile()
                        .ok()
                        .and_then(|lock| lock.get(name).map(|e| e.source.to_string())),
                })
            }
        }
    }

    fn fetch_crate(
        &self,
        name: &str,
        version: Option<&str>,
        staged: &Path,
        progress: &Progress,
    ) -> Result<(LockSource, PathBuf), StoreError> {
        let registry = Registry::from_env();
        let versions = fetch::index_versions(&registry, name, progress)?;
        let picked = fetch::pick_version(name, &versions, version)?;
        fetch::fetch_crate(&registry, name, &picked, staged, progress)?;
        Ok((
            LockSource::Crate {
                crate_name: name.to_string(),
                version: picked.version,
                checksum: picked.checksum,
            },
            staged.to_path_buf(),
        ))
    }

    /// Fetch the prebuilt binary when the manifest names one and the command does not resolve.
    /// Returns what happened, and the binary's pin when one was placed.
    fn binary_step(
        &self,
        manifest: &Manifest,
        package: &Path,
        progress: &Progress,
    ) -> (Option<String>, Option<LockBinary>) {
        let Some(server) = manifest.yolop.capability_server.as_ref() else {
            return (None, None);
        };
        let Some(template) = server.binaries.as_ref() else {
            return (None, None);
        };
        if command_resolves(&server.command, package) {
            return (Some(format!("`{}` already resolves", server.command)), None);
        }
        if server.command.contains('/') {
            return (
                Some(format!(
                    "not fetched: `{}` is a path, so a prebuilt binary cannot stand in for it",
                    server.command
                )),
                None,
            );
        }
        let version = manifest.version.as_deref().unwrap_or("0.0.0");
        match fetch::fetch_binary(
            template,
            &manifest.name,
            version,
            &server.command,
            package,
            progress,
        ) {
            Ok(target) => {
                let path = format!("bin/{}", server.command);
                let pin = hash::sha256_file(&package.join(&path))
                    .ok()
                    .map(|sha256| LockBinary { sha256, path });
                (
                    Some(format!("fetched `{}` for {target}", server.command)),
                    pin,
                )
            }
            Err(e) => (
                Some(format!(
                    "not available ({e}); calls will fail until `{}` is on PATH",
                    server.command
                )),
                None,
            ),
        }
    }

    /// Fetch every (or one) installed package again; commit what changed. A change that widens
    /// the grant needs `approver`; `opts.locked` refuses any change.
    pub fn update(
        &self,
        name: Option<&str>,
        opts: &UpdateOptions,
        approver: &mut dyn Approver,
    ) -> Result<Vec<Installed>, StoreError> {
        let locked = opts.locked;
        if let Some(n) = name
            && self.surely_not_installed(n)
        {
            return Err(self.not_installed(n));
        }
        if name.is_none() && !self.journal_path().exists() && self.lockfile()?.extensions.is_empty()
        {
            return Ok(Vec::new());
        }
        let _lock = self.lock()?;
        let lock = self.lockfile()?;
        let entries: Vec<LockEntry> = match name {
            Some(n) => vec![lock.get(n).cloned().ok_or_else(|| self.not_installed(n))?],
            None => lock.extensions.clone(),
        };
        let mut out = Vec::new();
        // Each git marketplace is brought up to date once, before its first plugin.
        let mut refreshed = Vec::new();
        for entry in entries {
            let (mut source, link, mut subdir) = taken_again(&entry.source);
            let via = match entry.claude.as_ref().and_then(|c| c.marketplace.as_ref()) {
                Some(from) => {
                    Some(self.listed_again(&entry, from, &mut refreshed, &opts.progress)?)
                }
                None => None,
            };
            if let Some(found) = &via {
                source = found.source.clone();
                subdir = found.subdir.clone();
            }
            let install = InstallOptions {
                progress: opts.progress.clone(),
                zot: opts.zot.clone(),
                link,
                subdir,
                ..InstallOptions::default()
            };
            let scratch = self.scratch()?;
            let result = self.install_locked(
                &source,
                &install,
                approver,
                &scratch,
                Some((&entry, locked)),
                via.as_ref(),
            );
            self.discard(&scratch);
            out.push(result?);
        }
        Ok(out)
    }

    /// Where the plugin `entry`, installed through marketplace `from.name`, is listed now:
    /// the marketplace refreshed (once per run, in `refreshed`) and its entry resolved again.
    /// One whose marketplace was removed since is taken again from where it was installed,
    /// with what its entry added then.
    fn listed_again(
        &self,
        entry: &LockEntry,
        from: &claude::MarketplacePin,
        refreshed: &mut Vec<String>,
        progress: &Progress,
    ) -> Result<marketplace::Resolved, StoreError> {
        let Some(mut registered) = marketplace::registered(self)?
            .into_iter()
            .find(|r| r.name == from.name)
        else {
            let (source, _, subdir) = taken_again(&entry.source);
            return Ok(marketplace::Resolved {
                source,
                subdir,
                overrides: from.overrides(),
                pin: from.clone(),
                renamed_from: None,
            });
        };
        if registered.rev.is_some() && !refreshed.contains(&registered.name) {
            let _refresh = progress.step(format!("refreshing marketplace {}", registered.name));
            registered = marketplace::refresh(self, &registered)?;
            refreshed.push(registered.name.clone());
        }
        marketplace::resolve_in(&registered, &from.entry)
    }
}

/// How an installed package's source is fetched again: the spec, whether it is linked, and
/// its directory in a git repository. A git one follows its default branch, a crate its
/// newest version.
fn taken_again(source: &LockSource) -> (SourceSpec, bool, Option<String>) {
    match source {
        LockSource::Path { path, link } => (SourceSpec::Path(PathBuf::from(path)), *link, None),
        LockSource::Git { url, subdir, .. } => (
            SourceSpec::Git {
                url: url.clone(),
                rev: None,
            },
            false,
            subdir.clone(),
        ),
        LockSource::Crate { crate_name, .. } => (
            SourceSpec::Crate {
                name: crate_name.clone(),
                version: None,
            },
            false,
            None,
        ),
    }
}

/// An update brings the package it updates: under the name it had, and from the same origin.
/// A marketplace may point an entry elsewhere: another origin is another package, installed
/// (with --replace) rather than updated.
fn same_package(entry: &LockEntry, name: &str, lock_source: &LockSource) -> Result<(), StoreError> {
    if name != entry.name {
        return Err(StoreError::Renamed {
            name: entry.name.clone(),
            now: name.to_string(),
        });
    }
    if !entry.source.same_origin(lock_source) {
        return Err(StoreError::SourceChanged {
            name: name.to_string(),
            installed: entry.source.to_string(),
            offered: lock_source.to_string(),
        });
    }
    Ok(())
}

/// Whether an install of `name` from `lock_source` replaces the installed `previous`. A package
/// from another origin that reuses an installed name is a different package, never an update
/// of it: it would inherit the original's approval, secrets and enablement. So it needs
/// `--replace` (`replace`); an update never replaces.
fn replaces(
    previous: Option<&LockEntry>,
    updating: bool,
    replace: bool,
    name: &str,
    lock_source: &LockSource,
) -> Result<bool, StoreError> {
    match previous {
        Some(prev) if !updating && !prev.source.same_origin(lock_source) => {
            if !replace {
                return Err(StoreError::SourceChanged {
                    name: name.to_string(),
                    installed: prev.source.to_string(),
                    offered: lock_source.to_string(),
                });
            }
            Ok(true)
        }
        _ => Ok(false),
    }
}

/// The consent summary: the package's own screen, then where it comes from, where it is
/// listed, the name it installs as, and what it replaces.
impl Home {
    /// What the user switched off of the package an update or a reinstall replaces: it stays
    /// off, and the consent screen says so (and which switches name nothing it declares now).
    fn off_note(&self, fetched: &Fetched, approved: &Approved) -> String {
        if fetched.previous.is_none() || fetched.replacing {
            return String::new();
        }
        let name = &approved.manifest.name;
        let off = crate::settings::off(&self.settings_path(), name).unwrap_or_default();
        let declared =
            crate::components::Declared::of(&approved.manifest, approved.claude_pin.as_ref());
        let mut note = String::new();
        for kind in [Component::Hook, Component::Server, Component::Command] {
            for item in off.set(kind) {
                let gone = match declared.has(kind, item) {
                    true => "",
                    false => " (no longer declared)",
                };
                note.push_str(&format!(
                    "\n  off       {} {}{gone}: switched off by you, and stays off (`yep enable {name} --{} {}` turns it on)",
                    kind.word(),
                    crate::text::escape(item),
                    kind.word(),
                    crate::text::escape(item),
                ));
            }
        }
        note
    }
}

fn install_summary(fetched: &Fetched, approved: &Approved) -> String {
    let manifest = &approved.manifest;
    let mut summary = match &approved.claude_pin {
        // Its own screen: each hook's command line, not the `*` its manifest declares.
        Some(pin) => summary::claude_summary(manifest, pin, &approved.claude_notes),
        None => summary::summary(manifest),
    };
    if let (Some(pin), Some(ext)) = (&approved.zot_pin, &approved.zot_ext) {
        summary.push('\n');
        summary.push_str(&summary::zot_summary(ext, pin, &approved.zot_notes));
    }
    summary.push_str(&format!(
        "\n  source    {}",
        crate::text::escape(&fetched.lock_source.to_string())
    ));
    if let Some(found) = fetched.via {
        summary.push_str(&format!(
            "\n  listed    in marketplace {} as {}",
            crate::text::escape(&found.pin.name),
            crate::text::escape(&found.pin.entry)
        ));
        if let Some(old) = &found.renamed_from {
            summary.push_str(&format!(
                "\n            note: `{}` is called `{}` there now, so it installs as `{}`",
                crate::text::escape(old),
                crate::text::escape(&found.pin.entry),
                manifest.name
            ));
        }
    }
    if let LockSource::Crate { crate_name, .. } = &fetched.lock_source
        && source::implied_name(crate_name) != manifest.name
    {
        summary.push_str(&format!(
            "\n            note: crate `{crate_name}` installs as `{}`, not `{}`",
            manifest.name,
            source::implied_name(crate_name)
        ));
    }
    if let Some(prev) = fetched.previous.as_ref().filter(|_| fetched.replacing) {
        summary.push_str(&format!(
            "\n  replaces  `{}` from {} (its secrets, config and data are dropped; it stays disabled)",
            manifest.name,
            crate::text::escape(&prev.source.to_string())
        ));
    }
    summary
}

/// The keys of a zot extension's `extension.json` that zot and yep ignore (escaped).
fn ignored_keys(ext: Option<&zot::ZotManifest>) -> Vec<String> {
    ext.map(|ext| {
        ext.ignored_keys()
            .into_iter()
            .map(|k| crate::text::escape(k).into_owned())
            .collect()
    })
    .unwrap_or_default()
}

/// `--locked` refuses any change to the lock. Restoring the approved bytes leaves the lock as
/// it is, so `--locked` allows it.
fn locked_out(fetched: &Fetched, manifest: &Manifest) -> StoreError {
    StoreError::Locked(format!(
        "`{}` would change ({} → {}); the lock stays as it is",
        manifest.name,
        fetched
            .previous
            .as_ref()
            .map_or("?", |p| p.content_hash.as_str()),
        fetched.hash
    ))
}

/// The user said no to a first install, a replacement, or an update that widens.
fn declined(fetched: &Fetched, manifest: &Manifest) -> StoreError {
    let what = if fetched.update_of.is_some() {
        "updated"
    } else {
        "installed"
    };
    StoreError::Declined(format!("`{}` was not {what}", manifest.name))
}
