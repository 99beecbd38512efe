//! `yep install <source>` and `yep update [name]`: fetch, show what it asks for, ask, commit.

use crate::output::{hinted, stdout_line};
use std::io::{BufRead, IsTerminal, Write};
use std::process::ExitCode;
use yep_store::marketplace;
use yep_store::source::SourceSpec;
use yep_store::summary::ContributionDiff;
use yep_store::text::{escape, escape_controls};
use yep_store::{
    Approver, Home, InstallOptions, Installed, Outcome, StoreError, UpdateOptions, config,
};

#[derive(clap::Args)]
pub struct InstallArgs {
    /// A package directory, `<git-url>[@rev]`, `crates.io:<crate>[@version]`, a name
    /// (`yep-extension-<name>`, then `yolop-extension-<name>` on crates.io), or
    /// `<plugin>@<marketplace>` (a marketplace `yep marketplace add` added).
    source: String,
    /// Approve the contributions without asking.
    #[arg(long, short = 'y')]
    yes: bool,
    /// Reference a local directory in place (for authors); its hash is re-checked later.
    #[arg(long)]
    link: bool,
    /// The package's directory inside a git repository (a monorepo's), from its root.
    #[arg(long, value_name = "PATH")]
    subdir: Option<String>,
    /// Let a package from another source take the name of an installed one. It is approved
    /// afresh; the old one's secrets, config and data are dropped and it is left disabled.
    #[arg(long)]
    replace: bool,
    /// Print the result as JSON.
    #[arg(long)]
    json: bool,
    /// Let it reach more than the sandbox's default profile (repeatable, as `yep grant`
    /// takes them): its first run (a zot extension's) has them, and they are pinned with it.
    #[arg(long = "grant", value_name = "GRANT")]
    grants: Vec<String>,
}

#[derive(clap::Args)]
pub struct UpdateArgs {
    /// Update only this extension.
    name: Option<String>,
    /// Approve widened contributions without asking.
    #[arg(long, short = 'y')]
    yes: bool,
    /// Refuse any change to the lock.
    #[arg(long)]
    locked: bool,
    /// Print what was updated as JSON.
    #[arg(long)]
    json: bool,
}

impl UpdateArgs {
    /// `yep update <name>`, as another verb asks for it.
    pub(crate) fn only(name: &str, yes: bool, json: bool) -> UpdateArgs {
        UpdateArgs {
            name: Some(name.to_string()),
            yes,
            locked: false,
            json,
        }
    }
}

/// Shows the summary (and diff) on stderr; asks at a terminal, approves with `--yes`, refuses
/// otherwise.
pub(crate) struct Consent {
    yes: bool,
    pub(crate) asked: bool,
    /// `approved (--yes)` was said: once is enough, however many questions it answered.
    said_yes: bool,
}

impl Consent {
    pub(crate) fn new(yes: bool) -> Consent {
        Consent {
            yes,
            asked: false,
            said_yes: false,
        }
    }

    /// `--yes`, or a `y` at a terminal to `question`; without a terminal, no.
    pub(crate) fn ask(&mut self, err: &mut std::io::StderrLock, question: &str) -> bool {
        if self.yes {
            if !std::mem::replace(&mut self.said_yes, true) {
                let _ = writeln!(err, "approved (--yes)");
            }
            return true;
        }
        if !(std::io::stdin().is_terminal() && std::io::stderr().is_terminal()) {
            self.asked = true;
            return false;
        }
        let _ = write!(err, "{question} [y/N] ");
        let _ = err.flush();
        let mut answer = String::new();
        let _ = std::io::stdin().lock().read_line(&mut answer);
        matches!(answer.trim(), "y" | "Y" | "yes")
    }
}

impl Approver for Consent {
    fn approve_run(&mut self, what: &str) -> bool {
        let mut err = std::io::stderr().lock();
        let _ = writeln!(err, "{}", escape_controls(what));
        self.ask(&mut err, "run it?")
    }

    fn approve(&mut self, summary: &str, diff: Option<&ContributionDiff>) -> bool {
        let mut err = std::io::stderr().lock();
        // Escaped field by field already; the whole screen once more, as a last resort.
        let _ = writeln!(err, "{}", escape_controls(summary));
        if let Some(d) = diff.filter(|d| !d.is_empty()) {
            let _ = writeln!(
                err,
                "changes against what you approved:\n{}",
                escape_controls(&d.render())
            );
            if d.widened {
                let _ = writeln!(err, "this update asks for more than you approved");
            }
        }
        self.ask(&mut err, "approve these contributions?")
    }
}

fn declined(err: StoreError, consent: &Consent) -> anyhow::Error {
    match err {
        StoreError::Declined(msg) if consent.asked => hinted(
            format!("not approved: {msg}"),
            &[
                "no terminal to ask at: review the summary above and re-run with --yes to approve it",
            ],
        ),
        StoreError::SourceChanged {
            name,
            installed,
            offered,
        } => hinted(
            format!(
                "`{name}` is already installed from {installed}; refusing to replace it with {offered}"
            ),
            &[
                "a package from another source is a different package, not an update",
                &format!(
                    "remove it first (`yep remove {name}`), or pass --replace (its secrets, config and data are dropped and it is left disabled)"
                ),
            ],
        ),
        StoreError::NoManifest { dir } => hinted(
            StoreError::NoManifest { dir }.to_string(),
            &[
                "`yep new <name>` makes a YEP package; a zot extension has an extension.json, a Claude Code or Codex plugin a .claude-plugin/plugin.json or .codex-plugin/plugin.json",
            ],
        ),
        StoreError::Locked(msg) => hinted(
            format!("--locked: {msg}"),
            &["run without --locked to review and apply the change"],
        ),
        other => other.into(),
    }
}

/// For `<name>@<word>` that crates.io could not give, when no marketplace `<word>` is added:
/// the marketplace it may have meant.
fn marketplace_hint(home: &Home, source: &str, err: &StoreError) -> Option<String> {
    if !matches!(err, StoreError::NotOnRegistry { .. } | StoreError::Fetch(_)) {
        return None;
    }
    let Ok(SourceSpec::Bare {
        name,
        version: Some(market),
    }) = SourceSpec::parse(source)
    else {
        return None;
    };
    let added = marketplace::registered(home).unwrap_or_default();
    if !yep_store::manifest::valid_name(&market) || added.iter().any(|m| m.name == market) {
        return None;
    }
    Some(format!(
        "`{name}@{market}` means version {market} of `{name}` on crates.io, as no marketplace named `{market}` is added: `yep marketplace add <dir | git-url>` adds one, and `yep install <plugin>@<marketplace>` installs from it"
    ))
}

fn report(results: &[Installed], json: bool, home: &Home) -> anyhow::Result<()> {
    for r in results {
        warn_unresolved(home, &r.name);
    }
    if json {
        stdout_line(&serde_json::to_string_pretty(results)?);
        return Ok(());
    }
    for r in results {
        let version = r
            .version
            .as_deref()
            .map(|v| format!(" {v}"))
            .unwrap_or_default();
        let line = match r.outcome {
            Outcome::Installed => format!(
                "installed {}{version} from {} ({})",
                r.name, r.source, r.content_hash
            ),
            Outcome::Updated => format!(
                "updated {}{version} from {} ({})",
                r.name, r.source, r.content_hash
            ),
            Outcome::Replaced => format!(
                "replaced {}{version} with the package from {} ({}); the old secrets, config and data were dropped",
                r.name, r.source, r.content_hash
            ),
            Outcome::Unchanged => format!("{} is up to date ({})", r.name, r.content_hash),
        };
        stdout_line(&line);
        // New required fields nobody has set yet: the update went through, the extension
        // still needs them.
        let needs: Vec<_> = r.diff.iter().flat_map(|d| &d.needs_setup).collect();
        // The installed manifest and its unset fields are read once, and only when needed.
        let unset: Vec<_> = if needs.is_empty() {
            Vec::new()
        } else {
            match home.installed_manifest(&r.name) {
                Ok(manifest) => {
                    let missing = config::missing_required(home, &manifest).unwrap_or_default();
                    needs
                        .into_iter()
                        .filter(|f| missing.iter().any(|m| m.name == f.name))
                        .map(|f| (f, config::set_command(&manifest, &f.name)))
                        .collect()
                }
                Err(_) => Vec::new(),
            }
        };
        if let Some(d) = r.diff.as_ref().filter(|d| !d.widened && !d.is_empty()) {
            let head = if !unset.is_empty() {
                "nothing new to consent to, but it needs setup"
            } else if d.narrows_only() {
                "narrowed only, no consent needed"
            } else {
                "nothing new to consent to, but it changed"
            };
            stdout_line(&format!("  {head}:\n{}", d.render()));
        }
        for (f, command) in unset {
            let secret = if f.secret { " (secret)" } else { "" };
            stdout_line(&format!(
                "  needs setup: config field `{}`{secret} is now required: run `{}`",
                escape(&f.name),
                escape(&command)
            ));
        }
        if let Some(binary) = &r.binary {
            stdout_line(&format!("  binary: {binary}"));
        }
        if r.disabled_in_manifest {
            stdout_line(&format!(
                "  off: its extension.json says \"enabled\": false, so zot does not start it and yep enable refuses it; to use it, make that true and run `yep update {}`",
                r.name
            ));
        } else if matches!(r.outcome, Outcome::Installed | Outcome::Replaced) {
            stdout_line(&format!("  not enabled yet: yep enable {}", r.name));
        }
    }
    Ok(())
}

/// On stderr (with `--json` too: stdout is the JSON), each command of the installed `name`
/// a session could not start: found neither in the package's `bin/` nor on `PATH`.
pub(crate) fn warn_unresolved(home: &Home, name: &str) {
    for (what, command) in home.unresolved_commands(name) {
        crate::output::stderr_line(&format!(
            "warning: `{}`'s {what} runs `{}`, which is neither in the package's bin/ nor on PATH: a session cannot start it until it is installed or put on PATH",
            escape(name),
            escape(&command)
        ));
    }
}

/// How a zot extension is run once to read what it registers: from here, as a session in
/// this directory would start it.
fn zot_runner(home: &Home) -> yep_store::ZotRunner {
    let cwd = std::env::current_dir().unwrap_or_else(|_| std::path::PathBuf::from("."));
    yep_host::probe::runner(home, cwd)
}

pub async fn install(args: InstallArgs, home: &Home) -> anyhow::Result<ExitCode> {
    let mut consent = Consent::new(args.yes);
    let granting = super::grant::parse_all(&args.grants)?;
    // Made before the install, whose first run of a zot extension has the grants too.
    super::grant::make_missing(super::grant::missing_paths(home, &granting)?)?;
    if !granting.is_empty() {
        // Shown before the summary it is approved with.
        let mut err = std::io::stderr().lock();
        let _ = writeln!(err, "sandbox grants you give it (docs/sandbox.md):");
        for line in granting.lines() {
            let _ = writeln!(err, "  + {}", escape(&line));
        }
        for warning in granting.warnings() {
            let _ = writeln!(err, "  {warning}");
        }
    }
    let cwd = std::env::current_dir().unwrap_or_else(|_| std::path::PathBuf::from("."));
    let zot = yep_host::probe::ZotProbe::new(home, cwd)
        .granting(granting.clone())
        .runner();
    let opts = InstallOptions {
        link: args.link,
        subdir: args.subdir.clone(),
        replace: args.replace,
        progress: crate::progress::bars(),
        zot: Some(zot),
    };
    let result =
        home.install(&args.source, &opts, &mut consent)
            .map_err(|e| match marketplace_hint(home, &args.source, &e) {
                Some(hint) => hinted(e.to_string(), &[&hint]),
                None => declined(e, &consent),
            })?;
    if let Some(subject) = yep_store::approval::Subject::package(home, &result.name)? {
        super::grant::grant_typed(home, &subject, &granting)?;
    }
    report(std::slice::from_ref(&result), args.json, home)?;
    super::mcp::pin_contributed(home, &[result], args.json).await;
    Ok(ExitCode::SUCCESS)
}

pub async fn update(args: UpdateArgs, home: &Home) -> anyhow::Result<ExitCode> {
    // An MCP server started through a package launcher: its package resolved again, the
    // version change and tool diff shown and asked, as `yep trust` does.
    if let Some(name) = args.name.as_deref()
        && home.lockfile()?.get(name).is_none()
        && super::mcp::here(home)?
            .iter()
            .any(|s| s.name == name && s.launched().is_some())
    {
        if args.locked {
            anyhow::bail!(
                "--locked refuses any change to the lock: MCP server `{}` was not updated",
                yep_store::text::escape(name)
            );
        }
        let trust = super::mcp::TrustArgs::update(name, args.yes, args.json);
        return Box::pin(super::mcp::trust(trust, home)).await;
    }
    let mut consent = Consent::new(args.yes);
    let opts = UpdateOptions {
        locked: args.locked,
        progress: crate::progress::bars(),
        zot: Some(zot_runner(home)),
    };
    let results = home
        .update(args.name.as_deref(), &opts, &mut consent)
        .map_err(|e| declined(e, &consent))?;
    report(&results, args.json, home)?;
    if !args.locked {
        super::mcp::pin_contributed(home, &results, args.json).await;
    }
    Ok(ExitCode::SUCCESS)
}
