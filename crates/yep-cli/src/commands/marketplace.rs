//! `yep marketplace`: add, list and remove plugin marketplaces (Claude Code's
//! `.claude-plugin/marketplace.json` catalogues, and Codex's).

use crate::output::stdout_line;
use serde_json::json;
use std::process::ExitCode;
use yep_store::Home;
use yep_store::marketplace::{self, Entry, EntrySource, Marketplace, Registered};
use yep_store::text::escape;

#[derive(clap::Subcommand)]
pub enum MarketplaceCommand {
    /// Add a marketplace: a directory (read in place) or a git URL `[@rev]` (checked out
    /// into the home). Its name is the one its catalogue gives.
    Add {
        /// A directory, or `https://…[@rev]`, `file://…`, `git@…`.
        source: String,
        /// Print what was added as JSON.
        #[arg(long)]
        json: bool,
    },
    /// List the marketplaces added, or the plugins one offers.
    List {
        /// A marketplace: its plugins, with their sources.
        name: Option<String>,
        /// Print them as JSON.
        #[arg(long)]
        json: bool,
    },
    /// Remove a marketplace (and a git one's checkout). What was installed from it stays.
    Remove {
        /// The marketplace, by the name `yep marketplace list` shows.
        name: String,
    },
}

/// An entry as `list` shows it in JSON.
fn entry_json(entry: &Entry) -> serde_json::Value {
    let source = match &entry.source {
        EntrySource::Path(path) => json!({"path": path}),
        EntrySource::Git { url, rev, subdir } => json!({"git": url, "rev": rev, "subdir": subdir}),
    };
    json!({
        "name": entry.name,
        "version": entry.version,
        "description": entry.description,
        "category": entry.category,
        "source": source,
        "strict": entry.strict,
        "components": entry.components.keys().collect::<Vec<_>>(),
    })
}

fn summary_json(registered: &Registered, market: &Marketplace) -> serde_json::Value {
    json!({
        "name": registered.name,
        "source": registered.source,
        "rev": registered.rev,
        "description": market.description,
        "owner": market.owner,
        "plugins": market.entries.len(),
        "skipped": market.skipped,
    })
}

/// One line of a catalogue's text, escaped and cut to `width` characters.
fn folded(text: &str, width: usize) -> String {
    let line = text.lines().next().unwrap_or("");
    let cut: String = line.chars().take(width).collect();
    let more = line.chars().count() > width || text.lines().nth(1).is_some();
    format!("{}{}", escape(&cut), if more { "…" } else { "" })
}

pub fn run(cmd: MarketplaceCommand, home: &Home) -> anyhow::Result<ExitCode> {
    match cmd {
        MarketplaceCommand::Add { source, json } => {
            let (registered, market) = marketplace::add(home, &source)?;
            if json {
                stdout_line(&serde_json::to_string_pretty(&summary_json(
                    &registered,
                    &market,
                ))?);
            } else {
                stdout_line(&format!(
                    "added marketplace {} ({} plugins{}): `yep marketplace list {}` lists them; `yep install <plugin>@{}` installs one",
                    escape(&registered.name),
                    market.entries.len(),
                    match market.skipped.len() {
                        0 => String::new(),
                        n => format!(", {n} skipped"),
                    },
                    escape(&registered.name),
                    escape(&registered.name),
                ));
                for why in &market.skipped {
                    stdout_line(&format!("  skipped: {why}"));
                }
            }
        }
        MarketplaceCommand::List { name: None, json } => {
            let mut rows = Vec::new();
            for registered in marketplace::registered(home)? {
                let read = marketplace::read(&registered.root);
                rows.push((registered, read));
            }
            if json {
                let all: Vec<_> = rows
                    .iter()
                    .map(|(r, read)| match read {
                        Ok(market) => summary_json(r, market),
                        Err(e) => {
                            json!({"name": r.name, "source": r.source, "error": e.to_string()})
                        }
                    })
                    .collect();
                stdout_line(&serde_json::to_string_pretty(&all)?);
            } else if rows.is_empty() {
                stdout_line("no marketplaces; add one: yep marketplace add <dir | git-url>");
            } else {
                for (r, read) in &rows {
                    match read {
                        Ok(market) => stdout_line(&format!(
                            "{}  {} plugins  {}",
                            escape(&r.name),
                            market.entries.len(),
                            escape(&r.source)
                        )),
                        Err(e) => stdout_line(&format!(
                            "{}  unreadable: {}",
                            escape(&r.name),
                            escape(&e.to_string())
                        )),
                    }
                }
            }
        }
        MarketplaceCommand::List {
            name: Some(name),
            json,
        } => {
            let Some(registered) = marketplace::registered(home)?
                .into_iter()
                .find(|r| r.name == name)
            else {
                anyhow::bail!(
                    "no marketplace named `{}` is added; `yep marketplace list` lists them",
                    escape(&name)
                );
            };
            let market = marketplace::read(&registered.root)?;
            if json {
                let mut shown = summary_json(&registered, &market);
                shown["entries"] = market.entries.iter().map(entry_json).collect();
                stdout_line(&serde_json::to_string_pretty(&shown)?);
            } else {
                for entry in &market.entries {
                    stdout_line(&format!(
                        "{}{}  {}  ({})",
                        escape(&entry.name),
                        entry
                            .version
                            .as_deref()
                            .map(|v| format!(" {}", escape(v)))
                            .unwrap_or_default(),
                        folded(entry.description.as_deref().unwrap_or(""), 80),
                        folded(&entry.source.to_string(), 100),
                    ));
                }
                for why in &market.skipped {
                    stdout_line(&format!("skipped: {why}"));
                }
            }
        }
        MarketplaceCommand::Remove { name } => {
            if marketplace::remove(home, &name)? {
                stdout_line(&format!("removed marketplace {}", escape(&name)));
            } else {
                anyhow::bail!("no marketplace named `{}` is added", escape(&name));
            }
        }
    }
    Ok(ExitCode::SUCCESS)
}
