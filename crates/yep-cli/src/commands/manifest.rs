//! `yep manifest sync [dir] [--check] [--json]`: bring `plugin.json` in line with what the
//! server's handlers say of their tools.

use crate::author::sync::sync;
use crate::output::{Colour, hinted, stdout_line, stdout_line_painted};
use anyhow::Context;
use serde_json::json;
use std::path::PathBuf;
use std::process::ExitCode;
use yep_host::store::Home;
use yep_host::store::manifest::MANIFEST_FILE;
use yep_host::text::escape;
use yep_host::{Manifest, ServerSpec};
use yep_tools::doctor::drift::Drift;

#[derive(clap::Subcommand)]
pub enum ManifestCommand {
    /// Spawn the package's server (as `yep doctor` does) and write the schemas and
    /// descriptions its handlers derive into plugin.json's tools, keeping every other field
    /// and the file's layout. Shows the diff. A served tool the manifest lacks is added; a
    /// declared tool no longer served is reported, never dropped.
    Sync(SyncArgs),
}

#[derive(clap::Args)]
pub struct SyncArgs {
    /// The package directory (default: the current one).
    #[arg(default_value = ".")]
    dir: PathBuf,
    /// Change nothing: exit 1 if plugin.json is out of sync, or declares a tool the server no
    /// longer serves (for CI).
    #[arg(long)]
    check: bool,
    /// Print what changed and the diff as JSON.
    #[arg(long)]
    json: bool,
}

pub async fn run(cmd: ManifestCommand, home: &Home) -> anyhow::Result<ExitCode> {
    match cmd {
        ManifestCommand::Sync(args) => sync_dir(args, home).await,
    }
}

async fn sync_dir(args: SyncArgs, home: &Home) -> anyhow::Result<ExitCode> {
    let dir = std::fs::canonicalize(&args.dir)
        .with_context(|| format!("{} is not a package directory", args.dir.display()))?;
    if yep_host::store::zot::is_zot_package(&dir) {
        return Err(hinted(
            format!(
                "{} is a zot extension: it registers its tools in code, and `yep install` pins them",
                dir.display()
            ),
            &["`yep manifest sync` writes a YEP package's plugin.json"],
        ));
    }
    let path = dir.join(MANIFEST_FILE);
    // As package content is read: a regular file under the manifest cap, never a FIFO.
    let text = yep_host::store::fsutil::read_regular_string(
        &path,
        yep_host::manifest::MAX_MANIFEST_BYTES,
        yep_host::store::fsutil::Links::Follow,
    )
    .with_context(|| format!("failed to read {}", path.display()))?;
    let manifest = Manifest::parse(&text, &path)?;
    let cwd = std::env::current_dir().context("failed to read the current directory")?;
    let spec = ServerSpec::from_manifest(&manifest, dir.clone(), cwd, home.logs_dir()).ok_or_else(
        || {
            anyhow::anyhow!(
                "`{}` declares no capability server: there are no served tools to sync",
                manifest.name
            )
        },
    )?;
    let log = spec.log_path();
    let offer = yep_tools::doctor::offer(spec, yep_host::settings::sandbox_mode_or_required(home))
        .await
        .map_err(|err| {
            hinted(
                format!("the server did not start, so nothing was synced: {err}"),
                &[&format!(
                    "its stderr is in {} (`yep doctor {}` grades it)",
                    log.display(),
                    dir.display()
                )],
            )
        })?;
    let (after, changes) =
        sync(&text, &path, &manifest, &offer.tools).map_err(anyhow::Error::msg)?;
    let changed = after != text;
    let diff = similar::TextDiff::from_lines(&text, &after)
        .unified_diff()
        .context_radius(3)
        .header(MANIFEST_FILE, MANIFEST_FILE)
        .to_string();
    if changed && !args.check {
        let mode = {
            use std::os::unix::fs::PermissionsExt;
            std::fs::metadata(&path)
                .map(|m| m.permissions().mode() & 0o777)
                .unwrap_or(0o644)
        };
        yep_host::store::fsutil::write_atomic(&path, after.as_bytes(), mode)
            .with_context(|| format!("failed to write {}", path.display()))?;
    }
    let unserved = changes
        .iter()
        .filter(|d| matches!(d, Drift::Unserved { .. }))
        .count();
    if args.json {
        let report = json!({
            "path": path,
            "changed": changed,
            "written": changed && !args.check,
            "changes": changes,
            "diff": diff,
        });
        stdout_line(&serde_json::to_string_pretty(&report)?);
    } else {
        report(&path, &changes, &diff, changed, args.check);
    }
    Ok(if args.check && (changed || unserved > 0) {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    })
}

fn report(path: &std::path::Path, changes: &[Drift], diff: &str, changed: bool, check: bool) {
    for d in changes {
        let tool = format!("`{}`", escape(d.tool()));
        let (lead, colour, rest) = match d {
            Drift::Schema { detail, .. } => (
                "schema",
                Colour::Green,
                format!("{tool}: {}", escape(detail)),
            ),
            Drift::OutputSchema { .. } => (
                "output",
                Colour::Green,
                format!("{tool}: the output schema"),
            ),
            Drift::Description { .. } => (
                "describe",
                Colour::Green,
                format!("{tool}: the description"),
            ),
            Drift::New { .. } => (
                "NEW",
                Colour::Yellow,
                format!(
                    "{tool}: served but not declared; added (review it: plugin.json is what users approve)"
                ),
            ),
            Drift::Unserved { .. } => (
                "GONE?",
                Colour::Yellow,
                format!(
                    "{tool}: declared but not served; kept (delete it from plugin.json if it is gone)"
                ),
            ),
        };
        stdout_line_painted(&format!("{lead:<9}"), colour, &rest);
    }
    for line in diff.lines() {
        stdout_line(line);
    }
    let shown = path.display();
    match (changed, check) {
        (false, _) => stdout_line_painted("ok", Colour::Green, &format!(": {shown} is in sync")),
        (true, true) => stdout_line_painted(
            "out of sync",
            Colour::Red,
            &format!(": {shown} (nothing written; run `yep manifest sync` to write it)"),
        ),
        (true, false) => stdout_line_painted("wrote", Colour::Green, &format!(" {shown}")),
    }
}
