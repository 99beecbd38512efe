//! `yep grant` and `yep revoke`: what the user lets an extension or MCP server reach beyond
//! the sandbox's default profile (and its manifest's own grants), pinned in the lock.

use super::install::Consent;
use crate::output::{hinted, stdout_line};
use serde::Serialize;
use std::io::Write;
use std::process::ExitCode;
use yep_host::settings::sandbox_mode_or_required;
use yep_store::Home;
use yep_store::approval::{GrantError, Granted, Missing, Subject};
use yep_store::grants::SandboxGrants;
use yep_store::text::escape;

#[derive(clap::Args)]
pub struct GrantArgs {
    /// The extension, or the MCP server as `yep mcp list` names it.
    name: String,
    /// What to grant: `workspace:write`, `read:<path>`, `write:<path>`,
    /// `net:<* | address:port | host name | private>`, `processes:<n>`, `open-files:<n>`,
    /// `address-space-mib:<n>` (docs/sandbox.md).
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

/// What `name` is here: an installed package, else an MCP server a session here sees.
fn subject(home: &Home, name: &str) -> anyhow::Result<Subject> {
    if let Some(subject) = Subject::package(home, name)? {
        return Ok(subject);
    }
    let source = super::mcp::named(home, name)?.ok_or_else(|| {
        hinted(
            format!(
                "no extension or MCP server named `{}` here",
                escape(name)
            ),
            &["`yep list` shows installed extensions, `yep mcp list` the MCP servers a session in this directory sees"],
        )
    })?;
    Ok(Subject::mcp_server(home, name, source.origin)?)
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

/// Check, before anything is kept, that every path `grants` names exists or is one yep may
/// make ([`Missing::check`]); the error says which and why.
pub fn missing_paths(home: &Home, grants: &SandboxGrants) -> anyhow::Result<Missing> {
    Missing::check(grants, &may_make(home)).map_err(|e| grant_error(e, None))
}

/// Make the directories `missing` holds, saying each.
pub fn make_missing(missing: Missing) -> anyhow::Result<()> {
    say_made(&missing.make()?);
    Ok(())
}

/// Where yep may make a missing directory for a `write:` grant: the sandbox's rule.
fn may_make(home: &Home) -> impl Fn(&std::path::Path) -> bool + '_ {
    |path| yep_sandbox::may_make_for_grant(path, &home.root)
}

/// A grant refused, with the hint that leads on.
fn grant_error(e: GrantError, consent: Option<&Consent>) -> anyhow::Error {
    let hint = match &e {
        GrantError::Missing { .. } => "create it first, then grant it (for `write:` yep makes a missing directory itself, inside your home only)".to_string(),
        GrantError::Declined(_) => match consent.is_some_and(|c| c.asked) {
            true => "no terminal to ask at: review the grants above and re-run with --yes to grant them".into(),
            false => "nothing was granted".into(),
        },
        GrantError::NotGranted { line, own: true, .. } => format!(
            "`{}` is asked for by the package's own manifest, and approved with it: disable or remove the package to stop it",
            escape(line)
        ),
        GrantError::NotGranted { .. } => "`yep list` or `yep mcp list` shows what it has".into(),
        GrantError::Make { .. } | GrantError::Store(_) => return e.into(),
    };
    hinted(e.to_string(), &[&hint])
}

/// Say each directory made for a `write:` grant, on stderr.
fn say_made(made: &[(String, std::path::PathBuf)]) {
    for (written, path) in made {
        crate::output::stderr_line(&format!(
            "made {}, a directory for the grant `write:{}` (it did not exist)",
            escape(&path.display().to_string()),
            escape(written)
        ));
    }
}

pub fn grant(args: GrantArgs, home: &Home) -> anyhow::Result<ExitCode> {
    let who = subject(home, &args.name)?;
    let mut consent = Consent::new(args.yes);
    let granted = widen(home, &who, &args.grants, &mut consent)?;
    let said = match granted.new.is_empty() {
        true => "nothing new: it has all of that already",
        false => "granted; it runs with it from its next start",
    };
    let (new, after, effective) = (granted.new, granted.granted, granted.effective);
    report(home, &who, new, &after, &effective, args.json, said)
}

/// Grant `name` what `tokens` name, with `consent` (`--yes`, or a `y` at the terminal) when
/// it widens what it runs with: the lines granted (none when it had them all).
pub fn grant_with_consent(
    home: &Home,
    name: &str,
    tokens: &[String],
    consent: &mut Consent,
) -> anyhow::Result<Vec<String>> {
    let who = subject(home, name)?;
    Ok(widen(home, &who, tokens, consent)?.new)
}

/// Grant what the user typed with the command that installs or adds `who`: typing it is
/// consenting to it.
pub fn grant_typed(home: &Home, who: &Subject, asked: &SandboxGrants) -> anyhow::Result<()> {
    if asked.is_empty() {
        return Ok(());
    }
    let granted = home
        .grant(who, asked, &may_make(home), &mut |_| true)
        .map_err(|e| grant_error(e, None))?;
    say_made(&granted.made);
    Ok(())
}

fn widen(
    home: &Home,
    who: &Subject,
    tokens: &[String],
    consent: &mut Consent,
) -> anyhow::Result<Granted> {
    let asked = parse_all(tokens)?;
    let mut ask = |new: &[String]| {
        let mut err = std::io::stderr().lock();
        let _ = writeln!(
            err,
            "{} `{}` would run with more than its sandbox allows now:",
            who.kind,
            escape(&who.name)
        );
        for line in new {
            let _ = writeln!(err, "  + {}", escape(line));
        }
        for warning in asked.warnings() {
            let _ = writeln!(err, "  {warning}");
        }
        consent.ask(&mut err, "grant it?")
    };
    let granted = home.grant(who, &asked, &may_make(home), &mut ask);
    let granted = granted.map_err(|e| grant_error(e, Some(consent)))?;
    say_made(&granted.made);
    Ok(granted)
}

pub fn revoke(args: RevokeArgs, home: &Home) -> anyhow::Result<ExitCode> {
    let who = subject(home, &args.name)?;
    let named = match args.grants.is_empty() {
        true => None,
        false => Some(parse_all(&args.grants)?),
    };
    let revoked = home
        .revoke(&who, named.as_ref())
        .map_err(|e| grant_error(e, None))?;
    let said = match revoked.taken.is_empty() {
        true => "nothing to take back: you granted it nothing",
        false => "revoked; it runs without it from its next start",
    };
    let (taken, after, effective) = (revoked.taken, revoked.granted, revoked.effective);
    report(home, &who, taken, &after, &effective, args.json, said)
}

fn report(
    home: &Home,
    who: &Subject,
    changed: Vec<String>,
    granted: &SandboxGrants,
    effective: &SandboxGrants,
    json: bool,
    said: &str,
) -> anyhow::Result<ExitCode> {
    let name = &who.name;
    let outcome = Outcome {
        name: name.to_string(),
        kind: who.kind.to_string(),
        changed,
        granted: granted.lines(),
        effective: effective.lines(),
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
