//! The declarative contributions of enabled extensions: skills (read-only `SKILL.md` files)
//! and MCP servers (from the manifest only, merged under the workspace's `.mcp.json`).

use super::ExtensionHost;
use crate::manifest::McpServer;
use serde::Serialize;
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// One skill an extension ships.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Skill {
    pub name: String,
    pub description: String,
    /// `ext:<name>`.
    pub scope: String,
    pub extension: String,
    /// The `SKILL.md` file, inside the package.
    pub path: PathBuf,
}

/// One agent definition a plugin ships (`agents/<name>.md`): listed for an embedder that runs
/// subagents; yep itself never runs one.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Agent {
    /// `<extension>:<name>`, as Claude Code names a plugin's agents.
    pub name: String,
    pub description: String,
    pub extension: String,
    /// Its definition (frontmatter and system prompt), inside the package.
    pub path: PathBuf,
}

/// The largest `SKILL.md` read; a longer one is refused with a warning.
pub(crate) const MAX_SKILL_BYTES: u64 = 1024 * 1024;

/// The text of a skill file at its real path (links resolved, checked inside its package):
/// a regular file of at most [`MAX_SKILL_BYTES`], never a FIFO or a device, which would hold
/// the reading thread forever.
fn read_skill_file(real: &Path) -> std::io::Result<String> {
    use crate::store::fsutil::{Links, read_regular_string};
    read_regular_string(real, MAX_SKILL_BYTES, Links::Refuse)
}

/// `name:` and `description:` from a `---` front matter block, read as Claude Code reads it
/// ([`crate::store::claude::frontmatter`]).
fn front_matter(text: &str) -> (Option<String>, Option<String>) {
    let read = crate::store::claude::frontmatter::Frontmatter::parse(text);
    let field = |key: &str| read.scalar(key).map(String::from);
    (field("name"), field("description"))
}

/// `SKILL.md` files under `dir`, at most three levels down.
fn skill_files(dir: &Path, depth: usize, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    let mut entries: Vec<_> = entries.flatten().collect();
    entries.sort_by_key(|e| e.file_name());
    for e in entries {
        let path = e.path();
        if path.is_dir() && depth < 3 {
            skill_files(&path, depth + 1, out);
        } else if e.file_name() == "SKILL.md" {
            out.push(path);
        }
    }
}

/// A server's `${VAR}` references, expanded from `vars`; unknown ones become empty.
pub(crate) fn expand(text: &str, vars: &dyn Fn(&str) -> Option<String>) -> String {
    expand_withholding(text, vars, &|_| false, &mut BTreeSet::new())
}

/// `expand`, except that references `withhold` says yes to expand to nothing and are recorded
/// in `withheld`: their values never go where they would be visible (argv).
pub(super) fn expand_withholding(
    text: &str,
    vars: &dyn Fn(&str) -> Option<String>,
    withhold: &dyn Fn(&str) -> bool,
    withheld: &mut BTreeSet<String>,
) -> String {
    let mut out = String::new();
    let mut rest = text;
    while let Some(start) = rest.find("${") {
        out.push_str(&rest[..start]);
        match rest[start + 2..].find('}') {
            Some(end) => {
                let name = &rest[start + 2..start + 2 + end];
                if withhold(name) {
                    withheld.insert(name.to_string());
                } else {
                    out.push_str(&vars(name).unwrap_or_default());
                }
                rest = &rest[start + 3 + end..];
            }
            None => {
                out.push_str(&rest[start..]);
                rest = "";
            }
        }
    }
    out.push_str(rest);
    out
}

/// The `${VAR}` names `text` references.
pub(super) fn references(text: &str) -> BTreeSet<String> {
    let mut names = BTreeSet::new();
    expand_withholding(text, &|_| None, &|_| true, &mut names);
    names
}

/// The host variables whose values may appear in an MCP server's command line: they describe
/// the user's session, not a credential. Every other variable (and any secret field, whatever
/// its name) is kept out of argv.
pub(crate) const ARGV_SAFE_VARS: [&str; 9] = [
    "HOME", "USER", "LOGNAME", "PATH", "PWD", "TMPDIR", "SHELL", "LANG", "TERM",
];

/// Whether `${name}` may expand in an MCP server's `command` or `args`: one of
/// [`ARGV_SAFE_VARS`] or an `XDG_*` directory. Deny by default: no name can tell that a value
/// (`DATABASE_URL=postgres://user:password@...`) holds no credential.
pub(crate) fn argv_safe(name: &str) -> bool {
    ARGV_SAFE_VARS.contains(&name) || name.starts_with("XDG_")
}

impl ExtensionHost {
    /// The skills of enabled extensions that declare `skills`, then those approved MCP servers
    /// offered (kept with the approval, extension `mcp.<server>`). A file that resolves outside
    /// its package (a symlink out), or that is not a regular file of at most
    /// `MAX_SKILL_BYTES` (a FIFO, a device), is refused with a warning.
    ///
    /// It reads every skill's file: call it off the async workers (`spawn_blocking`), as the
    /// bridge does.
    pub fn skills(&self) -> Vec<Skill> {
        let mut out = Vec::new();
        self.each_skill(&mut |skill, _| {
            out.push(skill);
            true
        });
        out
    }

    /// The agent definitions of the enabled plugins, as their locks pinned them: listed, for
    /// an embedder that runs subagents, never run by yep. Reads the lock: call it off the
    /// async workers.
    pub fn agents(&self) -> Vec<Agent> {
        let Ok(lock) = self.core.home.lockfile() else {
            return Vec::new();
        };
        let mut out = Vec::new();
        for l in self.loaded().iter() {
            let Some(pin) = lock.get(&l.name).and_then(|e| e.claude.as_ref()) else {
                continue;
            };
            let package = self.core.home.package_dir(&l.name);
            for agent in &pin.agents {
                out.push(Agent {
                    name: format!("{}:{}", l.name, agent.name),
                    description: agent.description.clone(),
                    extension: l.name.clone(),
                    path: package.join(&agent.file),
                });
            }
        }
        out
    }

    /// Where extension `name`'s skills are, relative to its package: the roots a plugin's lock
    /// pinned, else `skills/`.
    fn skill_roots(&self, name: &str) -> Vec<String> {
        let pinned = self.core.home.lockfile().ok().and_then(|lock| {
            lock.get(name)
                .and_then(|e| e.claude.as_ref())
                .map(|pin| pin.skill_roots.clone())
        });
        pinned
            .filter(|roots| !roots.is_empty())
            .unwrap_or_else(|| vec!["skills".into()])
    }

    /// Each skill, with its text, to `each` (in order) until it returns false.
    fn each_skill(&self, each: &mut dyn FnMut(Skill, String) -> bool) {
        for l in self.loaded().iter().filter(|l| l.manifest.yolop.skills) {
            let package = self.core.home.package_dir(&l.name);
            let Ok(root) = package.canonicalize() else {
                continue;
            };
            let mut files = Vec::new();
            for skills in self.skill_roots(&l.name) {
                if crate::store::fsutil::stays_inside(&skills) {
                    skill_files(&root.join(&skills), 0, &mut files);
                }
            }
            for file in files {
                let real = file
                    .canonicalize()
                    .ok()
                    .filter(|real| real.starts_with(&root));
                let Some(real) = real else {
                    self.warn(format!(
                        "extension `{}`: refusing skill {}, which points outside the package",
                        l.name,
                        file.display()
                    ));
                    continue;
                };
                let text = match read_skill_file(&real) {
                    Ok(text) => text,
                    Err(e) => {
                        self.warn(format!("extension `{}`: skipping a skill: {e}", l.name));
                        continue;
                    }
                };
                let (name, description) = front_matter(&text);
                let fallback = file
                    .parent()
                    .and_then(Path::file_name)
                    .map(|n| n.to_string_lossy().into_owned())
                    .unwrap_or_default();
                let skill = Skill {
                    name: name.unwrap_or(fallback),
                    description: description.unwrap_or_default(),
                    scope: format!("ext:{}", l.name),
                    extension: l.name.clone(),
                    path: file,
                };
                if !each(skill, text) {
                    return;
                }
            }
        }
        self.each_mcp_skill(each);
    }

    /// Each skill an approved MCP server offered (SEP-2640), as kept with its approval, to
    /// `each` until it returns false. Its extension is `mcp.<server>`.
    fn each_mcp_skill(&self, each: &mut dyn FnMut(Skill, String) -> bool) {
        let Ok(lock) = self.core.home.lockfile() else {
            return;
        };
        for source in self.mcp_sources() {
            let Some(pin) = crate::store::mcp::pin_in(&lock, &source.name, &source.origin) else {
                continue;
            };
            if pin.skills.is_empty() || source.unapproved(Some(&pin)).is_some() {
                continue;
            }
            let dir =
                crate::store::mcp_skills::skills_dir(&self.core.home, &source.name, &source.origin);
            for name in pin.skills.keys() {
                let file = dir.join(name).join("SKILL.md");
                let Ok(text) = read_skill_file(&file) else {
                    self.warn(format!(
                        "MCP server `{}`: its approved skill `{name}` is missing from {}",
                        source.name,
                        dir.display()
                    ));
                    continue;
                };
                let (_, description) = front_matter(&text);
                let skill = Skill {
                    name: name.clone(),
                    description: description.unwrap_or_default(),
                    scope: format!("mcp:{}", source.name),
                    extension: format!("mcp.{}", source.name),
                    path: file,
                };
                if !each(skill, text) {
                    return;
                }
            }
        }
    }

    /// A skill's text, by `scope` and name. Read-only: there is no write path. Reads files,
    /// as [`ExtensionHost::skills`] does: call it off the async workers.
    pub fn read_skill(&self, scope: &str, name: &str) -> Option<String> {
        let mut found = None;
        self.each_skill(&mut |skill, text| {
            let it = skill.scope == scope && skill.name == name;
            if it {
                found = Some(text);
            }
            !it
        });
        found
    }

    /// The MCP servers that may run, by name, as they run: those whose approval stands (see
    /// [`super::mcp::sources`] for where they come from and how `${VAR}` expands, deny by
    /// default in argv). A workspace's server nobody approved is never here: the host runs
    /// the approved ones itself, and [`ExtensionHost::mcp_status`] says why the rest wait.
    pub fn mcp_servers(&self) -> BTreeMap<String, McpServer> {
        // A lock that cannot be read approves nothing.
        let lock = self.core.home.lockfile().ok();
        self.mcp_sources()
            .into_iter()
            .filter(|s| {
                let pin = lock
                    .as_ref()
                    .and_then(|lock| crate::store::mcp::pin_in(lock, &s.name, &s.origin));
                s.unapproved(pin.as_ref()).is_none()
            })
            .map(|s| (s.name, s.server))
            .collect()
    }

    /// Every MCP server the session sees, approved or not, with `${VAR}` left as written: for
    /// showing to people, since the expanded form can carry secrets.
    pub fn mcp_servers_unexpanded(&self) -> BTreeMap<String, McpServer> {
        self.mcp_sources()
            .into_iter()
            .map(|s| (s.name, s.shown))
            .collect()
    }

    /// Every MCP server this session sees, approved or not, with where it comes from.
    pub fn mcp_sources(&self) -> Vec<super::McpSource> {
        self.core.mcp_sources(&self.loaded())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn front_matter_gives_name_and_description() {
        let (n, d) = front_matter(
            "---\nname: forecast\ndescription: \"How to read a forecast\"\n---\n# body",
        );
        assert_eq!(n.as_deref(), Some("forecast"));
        assert_eq!(d.as_deref(), Some("How to read a forecast"));
        assert_eq!(front_matter("# no front matter"), (None, None));
    }

    #[test]
    fn vars_expand_and_unknown_ones_are_empty() {
        let vars = |n: &str| (n == "TOKEN").then(|| "t0k".to_string());
        assert_eq!(expand("Bearer ${TOKEN}", &vars), "Bearer t0k");
        assert_eq!(expand("${NOPE}-x", &vars), "-x");
        assert_eq!(expand("${unterminated", &vars), "${unterminated");
    }

    #[test]
    fn withheld_references_expand_to_nothing_and_are_recorded() {
        let vars = |n: &str| Some(format!("<{n}>"));
        let mut withheld = BTreeSet::new();
        let out = expand_withholding(
            "${HOME}/x --dsn=${DATABASE_URL} --key ${api_key}",
            &vars,
            &|n| !argv_safe(n),
            &mut withheld,
        );
        assert_eq!(out, "<HOME>/x --dsn= --key ");
        assert_eq!(
            withheld.into_iter().collect::<Vec<_>>(),
            ["DATABASE_URL", "api_key"]
        );
    }

    #[test]
    fn only_a_few_session_variables_may_expand_in_argv() {
        for safe in [
            "HOME",
            "USER",
            "LOGNAME",
            "PATH",
            "PWD",
            "TMPDIR",
            "SHELL",
            "LANG",
            "TERM",
            "XDG_CONFIG_HOME",
            "XDG_RUNTIME_DIR",
        ] {
            assert!(argv_safe(safe), "{safe}");
        }
        for denied in [
            "DATABASE_URL",
            "GITHUB_TOKEN",
            "api_key",
            "home",
            "HOMEPAGE",
            "PATH_TO_KEYS",
            "LC_ALL",
            "xdg_config_home",
            "",
        ] {
            assert!(!argv_safe(denied), "{denied}");
        }
    }
}
