//! `yep doctor` with no target: the setup around the agents yep's hooks run in. A Claude Code
//! plugin enabled both in yep and in Claude Code itself would run its hooks twice once
//! Claude Code runs `yep hook claude`: each such plugin is a warning naming both switches.

use super::{Check, Report, Status};
use serde_json::Value;
use std::path::{Path, PathBuf};
use yep_host::store::Home;
use yep_host::store::approval::PackageKind;

/// The settings files where Claude Code keeps which plugins are on (`enabledPlugins`, keyed
/// `name@marketplace`): the user's, then the project's and its local one.
fn claude_settings(project: &Path) -> Vec<PathBuf> {
    let user = std::env::var_os("CLAUDE_CONFIG_DIR")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".claude")));
    let mut files: Vec<PathBuf> = user.into_iter().map(|d| d.join("settings.json")).collect();
    files.push(project.join(".claude/settings.json"));
    files.push(project.join(".claude/settings.local.json"));
    files
}

/// The plugins Claude Code has on, by plugin name: each with the id and the file that turns
/// it on. A file that cannot be read or parsed turns nothing on.
fn enabled_in_claude_code(project: &Path) -> Vec<(String, String, PathBuf)> {
    let mut on = Vec::new();
    for file in claude_settings(project) {
        let Ok(text) = yep_host::store::fsutil::read_regular_string(
            &file,
            4 * 1024 * 1024,
            yep_host::store::fsutil::Links::Follow,
        ) else {
            continue;
        };
        let Ok(settings) = serde_json::from_str::<Value>(&text) else {
            continue;
        };
        let Some(plugins) = settings["enabledPlugins"].as_object() else {
            continue;
        };
        for (id, enabled) in plugins {
            let name = id.split('@').next().unwrap_or(id);
            match enabled.as_bool() {
                Some(true) => on.push((name.to_string(), id.clone(), file.clone())),
                // A later scope turns it off again.
                Some(false) => on.retain(|(n, ..)| n != name),
                None => {}
            }
        }
    }
    on
}

/// The checks of the setup in `project`: each plugin enabled in yep and in Claude Code.
pub fn setup(home: &Home, project: &Path) -> Result<Report, yep_host::store::StoreError> {
    let lock = home.lockfile()?;
    let enabled = yep_host::store::settings::enabled(&home.settings_path())?;
    let in_claude = enabled_in_claude_code(project);
    let mut checks = Vec::new();
    for name in &enabled {
        let Some(entry) = lock.get(name) else {
            continue;
        };
        if !matches!(entry.kind(), PackageKind::Claude) {
            continue;
        }
        if let Some((_, id, file)) = in_claude.iter().find(|(n, ..)| n == name) {
            checks.push(Check {
                name: "twice".into(),
                status: Status::Warn,
                detail: format!(
                    "plugin `{name}` is enabled in yep and in Claude Code ({id}, {}): when Claude Code runs `yep hook claude`, its hooks run twice; turn one off (`claude plugin disable {id}`, or `yep disable {name}`)",
                    file.display()
                ),
            });
        }
    }
    if checks.is_empty() {
        checks.push(Check {
            name: "twice".into(),
            status: Status::Pass,
            detail: "no Claude Code plugin is enabled both in yep and in Claude Code".into(),
        });
    }
    Ok(Report {
        ok: true,
        checks,
        sandbox_learn: None,
    })
}
