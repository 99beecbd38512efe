//! `yep grant` and `yep revoke`: what the user lets an extension or MCP server reach beyond
//! the sandbox's default profile (and its manifest's own grants), pinned in the lock.

use crate::output::{hinted, stdout_line};
use serde::Serialize;
use std::io::Write;
use std::process::ExitCode;
use yep_host::settings::sandbox_mode_or_required;
use yep_store::Home;
use yep_store::grants::SandboxGrants;
use yep_store::mcp::Origin;
use yep_store::text::escape;

#[derive(clap::Args)]
pub struct GrantArgs {
    /// The extension, or the MCP server as `yep mcp list` names it.
    name: String,
    /// What to grant: workspace:write, read:<path>, write:<path>,
    /// net:<* | address:port | host name | private>, processes:<n>, open-files:<n>,
    /// address-space-mib:<n> (docs/sandbox.md).
    #[arg(required = true, value_name = "GRANT")]
    grants: Vec<String>,
    /// Grant without asking.
    #[arg(long, short = 'y')]
    yes: bool,
    /// Print the outcome as JSON.
    #[arg(long)]
    json: bool,
}

#[derive(clap::Args)]
pub struct RevokeArgs {
    /// The extension, or the MCP server as `yep mcp list` names it.
    name: String,
    /// What to take back, as `yep grant` took it; none takes back everything you granted.
    #[arg(value_name = "GRANT")]
    grants: Vec<String>,
    /// Print the outcome as JSON.
    #[arg(long)]
    json: bool,
}

/// What a grant or revoke left.
#[derive(Serialize)]
struct Outcome {
    name: String,
    /// `extension`, or the MCP server's origin (`home`, `extension <name>`, `workspace`).
    kind: String,
    /// What this run added or took back.
    changed: Vec<String>,
    /// Everything the user has granted it now.
    granted: Vec<String>,
    /// What it runs with: its manifest's grants and the user's (the default profile beyond).
    effective: Vec<String>,
}

/// What `name` is here: its kind, the workspace a grant for it is kept for, and its
/// manifest's own grants.
struct Grantee {
    kind: String,
    workspace: Option<String>,
    manifest: SandboxGrants,
}

fn grantee(home: &Home, name: &str) -> anyhow::Result<Grantee> {
    if let Some(entry) = home.lockfile()?.get(name) {
        let manifest = entry
            .approved()
            .map(|m| m.sandbox)
            .or_else(|| home.package_manifest(entry).ok().map(|m| m.sandbox))
            .unwrap_or_default();
        let kind = match entry.zot {
            Some(_) => "zot extension",
            None => "extension",
        };
        return Ok(Grantee {
            kind: kind.into(),
            workspace: None,
            manifest,
        });
    }
    let source = super::mcp::here(home)?
        .into_iter()
        .find(|s| s.name == name)
        .ok_or_else(|| {
            hinted(
                format!(
                    "no extension or MCP server named `{}` here",
                    escape(name)
                ),
                &["`yep list` shows installed extensions, `yep mcp list` the MCP servers a session in this directory sees"],
            )
        })?;
    let kind = match &source.origin {
        Origin::Extension(ext) => format!("MCP server of extension {ext}"),
        Origin::Home => "MCP server".into(),
        Origin::Workspace(_) => "workspace MCP server".into(),
    };
    Ok(Grantee {
        kind,
        workspace: source.origin.workspace(),
        manifest: SandboxGrants::default(),
    })
}

/// The grants `tokens` name, each checked; the first bad one is the error.
pub fn parse_all(tokens: &[String]) -> anyhow::Result<SandboxGrants> {
    tokens.iter().try_fold(SandboxGrants::default(), |all, t| {
        let one = SandboxGrants::parse(t).map_err(|e| {
            hinted(
                format!("{e}"),
                &["docs/sandbox.md lists every grant, with examples"],
            )
        })?;
        Ok(all.merged(&one))
    })
}

/// The directories `write:` grants name that do not exist yet, to be made once the grants
/// are given ([`Missing::make`]).
#[must_use]
pub struct Missing(Vec<(String, std::path::PathBuf)>);

/// Check that every path `grants` names exists: the sandbox can open only what exists when
/// the server starts, so a grant of a missing path would do nothing. A `write:` one inside
/// the home is made (by [`Missing::make`], once granted); any other is refused, saying why.
pub fn missing_paths(home: &Home, grants: &SandboxGrants) -> anyhow::Result<Missing> {
    use yep_sandbox::{grant_path, may_make_for_grant};
    let mut make = Vec::new();
    for (kind, written) in grants
        .read
        .iter()
        .map(|p| ("read", p))
        .chain(grants.write.iter().map(|p| ("write", p)))
    {
        let Some(path) = grant_path(written) else {
            continue;
        };
        if std::fs::symlink_metadata(&path).is_ok() {
            continue;
        }
        if kind == "write" && may_make_for_grant(&path, &home.root) {
            make.push((written.clone(), path));
            continue;
        }
        return Err(hinted(
            format!(
                "`{kind}:{}` names {}, which does not exist: the sandbox can open only what exists when the server starts",
                escape(written),
                escape(&path.display().to_string())
            ),
            &[
                "create it first, then grant it (for `write:` yep makes a missing directory itself, inside your home only)",
            ],
        ));
    }
    Ok(Missing(make))
}

impl Missing {
    /// Make each missing directory (owner-only, with its missing parents), saying so on
    /// stderr.
    pub fn make(self) -> anyhow::Result<()> {
        use std::os::unix::fs::DirBuilderExt;
        for (written, path) in self.0 {
            std::fs::DirBuilder::new()
                .recursive(true)
                .mode(0o700)
                .create(&path)
                .map_err(|e| anyhow::anyhow!("failed to make {}: {e}", path.display()))?;
            crate::output::stderr_line(&format!(
                "made {}, a directory for the grant `write:{}` (it did not exist)",
                escape(&path.display().to_string()),
                escape(&written)
            ));
        }
        Ok(())
    }
}

pub fn grant(args: GrantArgs, home: &Home) -> anyhow::Result<ExitCode> {
    let who = grantee(home, &args.name)?;
    let mut consent = super::install::Consent::new(args.yes);
    let (new, after) = widen(home, &args.name, &who, &args.grants, &mut consent)?;
    let said = match new.is_empty() {
        true => "nothing new: it has all of that already",
        false => "granted; it runs with it from its next start",
    };
    report(home, &args.name, &who, new, &after, args.json, said)
}

/// Grant `name` what `tokens` name, with `consent` (`--yes`, or a `y` at the terminal) when
/// it widens what it runs with: the lines granted (none when it had them all).
pub fn grant_with_consent(
    home: &Home,
    name: &str,
    tokens: &[String],
    consent: &mut super::install::Consent,
) -> anyhow::Result<Vec<String>> {
    let who = grantee(home, name)?;
    Ok(widen(home, name, &who, tokens, consent)?.0)
}

fn widen(
    home: &Home,
    name: &str,
    who: &Grantee,
    tokens: &[String],
    consent: &mut super::install::Consent,
) -> anyhow::Result<(Vec<String>, SandboxGrants)> {
    let asked = parse_all(tokens)?;
    let missing = missing_paths(home, &asked)?;
    let before = home.lockfile()?.granted(name, who.workspace.as_deref());
    let after = before.merged(&asked);
    let new = before.merged(&who.manifest).widened_by(&after);
    if new.is_empty() {
        // Granted already: a directory removed since is made again.
        missing.make()?;
        return Ok((new, before));
    }
    let mut err = std::io::stderr().lock();
    let _ = writeln!(
        err,
        "{} `{}` would run with more than its sandbox allows now:",
        who.kind,
        escape(name)
    );
    for line in &new {
        let _ = writeln!(err, "  + {}", escape(line));
    }
    if !consent.ask(&mut err, "grant it?") {
        let hint = if consent.asked {
            "no terminal to ask at: review the grants above and re-run with --yes to grant them"
        } else {
            "nothing was granted"
        };
        return Err(hinted(format!("not granted: `{}`", escape(name)), &[hint]));
    }
    drop(err);
    missing.make()?;
    home.set_granted(name, who.workspace.as_deref(), after.clone())?;
    Ok((new, after))
}

pub fn revoke(args: RevokeArgs, home: &Home) -> anyhow::Result<ExitCode> {
    let who = grantee(home, &args.name)?;
    let before = home
        .lockfile()?
        .granted(&args.name, who.workspace.as_deref());
    let after = match args.grants.is_empty() {
        true => SandboxGrants::default(),
        false => {
            let named = parse_all(&args.grants)?;
            // Only what the user granted can be taken back here: the manifest's are part of
            // the package the user approved.
            let held = before.lines();
            // A limit is named by its kind (`processes:1` takes back any processes limit).
            let kind = |l: &str| l.split(' ').take(2).collect::<Vec<_>>().join(" ");
            let own: Vec<String> = named
                .lines()
                .into_iter()
                .filter(|l| match l.starts_with("limit ") {
                    true => !held.iter().any(|h| kind(h) == kind(l)),
                    false => !held.contains(l),
                })
                .collect();
            if let Some(line) = own.first() {
                let why = match who.manifest.lines().contains(line) {
                    true => format!(
                        "`{}` is asked for by the package's own manifest, and approved with it: disable or remove the package to stop it",
                        escape(line)
                    ),
                    false => "`yep list` or `yep mcp list` shows what it has".into(),
                };
                return Err(hinted(
                    format!(
                        "`{}` was not granted to `{}` with yep grant",
                        escape(line),
                        escape(&args.name)
                    ),
                    &[&why],
                ));
            }
            before.without(&named)
        }
    };
    let taken: Vec<String> = after.widened_by(&before);
    home.set_granted(&args.name, who.workspace.as_deref(), after.clone())?;
    let said = match taken.is_empty() {
        true => "nothing to take back: you granted it nothing",
        false => "revoked; it runs without it from its next start",
    };
    report(home, &args.name, &who, taken, &after, args.json, said)
}

fn report(
    home: &Home,
    name: &str,
    who: &Grantee,
    changed: Vec<String>,
    granted: &SandboxGrants,
    json: bool,
    said: &str,
) -> anyhow::Result<ExitCode> {
    let outcome = Outcome {
        name: name.to_string(),
        kind: who.kind.clone(),
        changed,
        granted: granted.lines(),
        effective: who.manifest.merged(granted).lines(),
    };
    if json {
        stdout_line(&serde_json::to_string(&outcome)?);
        return Ok(ExitCode::SUCCESS);
    }
    stdout_line(&format!("{} `{}`: {said}", who.kind, escape(name)));
    stdout_line(&format!(
        "  sandbox: {}",
        profile_text(&outcome.effective, sandbox_mode_or_required(home))
    ));
    Ok(ExitCode::SUCCESS)
}

/// The effective profile in a line: the default profile, and each grant beyond it.
pub fn profile_text(grants: &[String], mode: yep_sandbox::Mode) -> String {
    if mode == yep_sandbox::Mode::Off {
        return "off (sandbox = \"off\": servers run with your rights)".into();
    }
    match grants.is_empty() {
        true => "default profile".into(),
        false => format!("default profile + {}", escape(&grants.join(", "))),
    }
}
