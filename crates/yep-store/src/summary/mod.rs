//! What a package asks for, read from its manifest without executing anything, and how an
//! update changes that.

use crate::manifest::{HookDef, HookEvent, Manifest, McpServer, OnError, ToolDef};
use crate::text::escape;
use serde::Serialize;
use serde_json::Value;
use std::collections::BTreeSet;
use std::fmt::Write;

/// One config field from `config_schema`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ConfigField {
    pub name: String,
    pub secret: bool,
    pub required: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub env: Option<String>,
    /// Where a secret field may go, as its manifest declares (`"broker": {…}`, see
    /// [`crate::broker`]); one that does not read is kept with no hosts, which nothing
    /// accepts, so its secret is never given in the clear instead.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub broker: Option<crate::broker::binding::Binding>,
}

/// The config fields a manifest declares, in schema order.
pub fn config_fields(manifest: &Manifest) -> Vec<ConfigField> {
    let Some(schema) = manifest.yolop.config_schema.as_ref() else {
        return Vec::new();
    };
    let required: BTreeSet<&str> = schema
        .get("required")
        .and_then(Value::as_array)
        .map(|r| r.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    schema
        .get("properties")
        .and_then(Value::as_object)
        .map(|props| {
            props
                .iter()
                .map(|(name, prop)| ConfigField {
                    name: name.clone(),
                    secret: prop.get("secret").and_then(Value::as_bool).unwrap_or(false),
                    required: required.contains(name.as_str()),
                    env: prop.get("env").and_then(Value::as_str).map(String::from),
                    broker: prop
                        .get("broker")
                        .map(|b| serde_json::from_value(b.clone()).unwrap_or_default()),
                })
                .collect()
        })
        .unwrap_or_default()
}

fn event_name(event: HookEvent) -> &'static str {
    match event {
        HookEvent::PreToolUse => "pre_tool_use",
        HookEvent::PostToolUse => "post_tool_use",
    }
}

/// A glob of stars alone matches every tool (`*`, `**`, ...).
pub fn matches_every_tool(glob: &str) -> bool {
    !glob.is_empty() && glob.chars().all(|c| c == '*')
}

/// A hook as the user approves it: event, glob, timeout and what an error does. A change in
/// any of them reads as a different hook, so an update that changes one needs consent.
fn hook_line(h: &HookDef) -> String {
    let glob = escape(&h.tool_name_glob);
    let glob = if matches_every_tool(&h.tool_name_glob) {
        format!("{glob} (every tool call)")
    } else {
        glob.into_owned()
    };
    let on_error = match h.on_error {
        OnError::Warn => "",
        OnError::Block => ", blocks the call if it fails",
    };
    format!(
        "{} on {glob} (timeout {} ms{on_error})",
        event_name(h.event),
        h.effective_timeout_ms()
    )
}

/// The widest a piece of a package's free text may run in the summary: with the 12-column
/// label, a line stays inside 80 columns and never wraps into a row of its own.
const FIELD_CHARS: usize = 56;

/// Continuation lines start here, under the labels' values.
const INDENT: &str = "            ";

/// A package's free text as one summary field: runs of white space folded to one space (so no
/// padding can line text up as a row of its own), control characters escaped, and at most
/// `max` characters.
fn field(s: &str, max: usize) -> String {
    let folded = s.split_whitespace().collect::<Vec<_>>().join(" ");
    shorten(&escape(&folded), max)
}

/// A command line as the summary shows it.
fn command_line(command: &str, args: &[String]) -> String {
    let joined = std::iter::once(command)
        .chain(args.iter().map(String::as_str))
        .collect::<Vec<_>>()
        .join(" ");
    field(&joined, FIELD_CHARS)
}

/// An MCP server's lines: its name and transport, then what it runs or where it connects, the
/// env and header names it sets, and the `${VAR}`s it is given.
fn mcp_lines(name: &str, m: &McpServer) -> Vec<String> {
    let mut lines = Vec::new();
    match (&m.command, &m.url) {
        (_, Some(url)) if m.transport == "http" => {
            lines.push(format!("{} (http)", escape(name)));
            lines.push(field(url, FIELD_CHARS));
        }
        (Some(cmd), _) => {
            lines.push(format!("{} (stdio)", escape(name)));
            lines.push(format!("`{}`", command_line(cmd, &m.args)));
        }
        _ => lines.push(format!("{} ({})", escape(name), field(&m.transport, 16))),
    }
    let names = |kind: &str, keys: Vec<&String>| {
        let list: Vec<String> = keys.iter().map(|k| field(k, 24)).collect();
        format!("{kind} {}", shorten(&list.join(", "), FIELD_CHARS))
    };
    if !m.env.is_empty() {
        lines.push(names("env", m.env.keys().collect()));
    }
    if !m.headers.is_empty() {
        lines.push(names("headers", m.headers.keys().collect()));
    }
    let vars = referenced_vars(m);
    if !vars.is_empty() {
        let vars: Vec<String> = vars
            .iter()
            .map(|v| format!("${{{}}}", field(v, 24)))
            .collect();
        lines.push(format!(
            "note: it is given {}",
            shorten(&vars.join(", "), FIELD_CHARS)
        ));
    }
    lines
}

/// The `${VAR}` names an MCP server spec expands (env, secrets), in order of first use; not
/// the package's own directories (`${PLUGIN_ROOT}`, …).
fn referenced_vars(m: &McpServer) -> Vec<String> {
    let texts = m
        .command
        .iter()
        .chain(&m.args)
        .chain(m.env.values())
        .chain(&m.url)
        .chain(m.headers.values());
    let mut vars: Vec<String> = Vec::new();
    for text in texts {
        let mut rest = text.as_str();
        while let Some(start) = rest.find("${") {
            let after = &rest[start + 2..];
            let Some(end) = after.find('}') else { break };
            let var = &after[..end];
            // Its own directories are not something it is given.
            let own = crate::claude::PACKAGE_DIR_VARS.contains(&var);
            if !own && !vars.iter().any(|v| v == var) {
                vars.push(var.to_string());
            }
            rest = &after[end + 1..];
        }
    }
    vars
}

fn server_line(manifest: &Manifest) -> Option<String> {
    manifest
        .yolop
        .capability_server
        .as_ref()
        .map(|s| command_line(&s.command, &s.args))
}

/// The most of a description the consent summary shows.
const MAX_DESCRIPTION_CHARS: usize = 200;

/// At most `max` characters of `s`, with an ellipsis when cut.
pub(crate) fn shorten(s: &str, max: usize) -> String {
    match s.char_indices().nth(max) {
        Some((i, _)) => format!("{}…", &s[..i]),
        None => s.to_string(),
    }
}

/// Pieces, space-separated, into lines of at most `width` characters (a piece longer than
/// that stands alone).
fn fill(pieces: impl IntoIterator<Item = String>, width: usize) -> Vec<String> {
    let mut lines: Vec<String> = Vec::new();
    let mut line = String::new();
    for piece in pieces {
        if !line.is_empty() && line.chars().count() + 1 + piece.chars().count() > width {
            lines.push(std::mem::take(&mut line));
        }
        if !line.is_empty() {
            line.push(' ');
        }
        line.push_str(&piece);
    }
    if !line.is_empty() {
        lines.push(line);
    }
    lines
}

/// Words into lines of at most `width` characters.
fn wrap(text: &str, width: usize) -> Vec<String> {
    fill(text.split(' ').map(|w| shorten(w, width)), width)
}

/// One labelled block: the first line carries the label, the rest are indented under it.
fn block(out: &mut String, label: &str, lines: &[String]) {
    if lines.is_empty() {
        let _ = writeln!(out, "  {label:<10}(none)");
        return;
    }
    for (i, line) in lines.iter().enumerate() {
        if i == 0 {
            let _ = writeln!(out, "  {label:<10}{line}");
        } else {
            let _ = writeln!(out, "{INDENT}{line}");
        }
    }
}

/// A list as lines of comma-separated items that stay inside 80 columns where the items allow.
fn list(items: &[String]) -> Vec<String> {
    let last = items.len().saturating_sub(1);
    let pieces = items.iter().enumerate().map(|(i, item)| {
        if i < last {
            format!("{item},")
        } else {
            item.clone()
        }
    });
    fill(pieces, 80 - INDENT.len())
}

/// The facets a manifest grants (as opposed to lists it declares), by name.
pub fn flags(manifest: &Manifest) -> Vec<&'static str> {
    let f = &manifest.yolop;
    [
        (f.prompt, "prompt"),
        (f.dynamic_prompt, "dynamic_prompt"),
        (f.status, "status"),
        (f.ui_ask, "ui_ask"),
        (f.trace, "trace"),
        (f.skills, "skills"),
    ]
    .into_iter()
    .filter_map(|(on, name)| on.then_some(name))
    .collect()
}

/// The contribution summary shown before consent, as text lines.
///
/// Everything the package wrote is escaped, folded and cut to fit its field, and sits after a
/// label or under one: nothing in a manifest can draw a row of its own.
pub fn summary(manifest: &Manifest) -> String {
    let f = &manifest.yolop;
    let mut out = String::new();
    let version = manifest
        .version
        .as_deref()
        .map(|v| format!(" {}", field(v, 14)))
        .unwrap_or_default();
    let _ = writeln!(out, "{}{version}", escape(&manifest.name));
    let about = field(&manifest.description, MAX_DESCRIPTION_CHARS);
    if !about.is_empty() {
        block(&mut out, "about", &wrap(&about, FIELD_CHARS + 8));
    }
    let mut server: Vec<String> = server_line(manifest).into_iter().collect();
    if let Some(url) = f
        .capability_server
        .as_ref()
        .and_then(|s| s.binaries.as_deref())
    {
        server.push(format!(
            "prebuilt binary from {}",
            field(url, FIELD_CHARS - 8)
        ));
    }
    block(&mut out, "server", &server);
    let tools: Vec<String> = f
        .tools
        .iter()
        .map(|t| {
            if t.never_defer {
                format!("{} (always loaded)", escape(&t.name))
            } else {
                escape(&t.name).into_owned()
            }
        })
        .collect();
    block(&mut out, "tools", &list(&tools));
    let mut hooks: Vec<String> = f.hooks.iter().map(hook_line).collect();
    if f.hooks
        .iter()
        .any(|h| matches_every_tool(&h.tool_name_glob))
    {
        hooks.push("note: a `*` hook sees the arguments of every tool call".into());
    }
    block(&mut out, "hooks", &hooks);
    let prompt = match (f.prompt, f.dynamic_prompt) {
        (true, true) => "static and dynamic (recomputed each turn)",
        (true, false) => "static",
        (false, true) => "dynamic (recomputed each turn)",
        (false, false) => "(none)",
    };
    let _ = writeln!(out, "  prompt    {prompt}");
    let commands: Vec<String> = f
        .commands
        .iter()
        .map(|c| format!("/{}:{}", escape(&manifest.name), escape(&c.name)))
        .collect();
    block(&mut out, "commands", &list(&commands));
    let mcp: Vec<String> = f
        .mcp_servers
        .iter()
        .flat_map(|(n, m)| mcp_lines(n, m))
        .collect();
    block(&mut out, "mcp", &mcp);
    let mut grants: Vec<String> = manifest
        .sandbox
        .lines()
        .iter()
        .map(|g| field(g, FIELD_CHARS))
        .collect();
    // A grant that lifts a protected workspace path (`.git/hooks`, `.vscode`…) says so.
    for warning in manifest.sandbox.warnings() {
        grants.extend(wrap(&warning, FIELD_CHARS + 8));
    }
    // Shown when it asks for more than the default profile (docs/sandbox.md).
    if !grants.is_empty() {
        block(&mut out, "sandbox", &grants);
    }
    let also: Vec<String> = [
        (f.status, "status"),
        (f.ui_ask, "ui_ask (may ask you questions)"),
        (f.trace, "trace (receives the session's events)"),
        (f.skills, "skills"),
    ]
    .into_iter()
    .filter(|(on, _)| *on)
    .map(|(_, n)| n.to_string())
    .collect();
    block(&mut out, "also", &list(&also));
    let config: Vec<String> = config_fields(manifest)
        .iter()
        .map(|c| {
            let mut tags = Vec::new();
            if c.secret {
                tags.push("secret".to_string());
            }
            if c.required {
                tags.push("required".to_string());
            }
            if let Some(b) = c.broker.as_ref().filter(|_| c.secret) {
                tags.push(format!("brokered: only to {}", escape(&b.describe())));
            }
            if tags.is_empty() {
                escape(&c.name).into_owned()
            } else {
                format!("{} ({})", escape(&c.name), tags.join(", "))
            }
        })
        .collect();
    block(&mut out, "config", &list(&config));
    out.truncate(out.trim_end().len());
    out
}

/// The most ignored keys of an `extension.json` the summary names; the rest are counted.
const MAX_IGNORED_SHOWN: usize = 16;

/// The summary lines for what only a zot extension has: that installing ran it, what its
/// pin holds beyond tools, commands and hooks, registrations yep left out (`notes`), and the
/// keys of its manifest that nothing reads.
pub fn zot_summary(
    ext: &crate::zot::ZotManifest,
    pin: &crate::zot::ZotPin,
    notes: &[String],
) -> String {
    let mut out = String::new();
    let ran = if !ext.spawns() {
        "extension.json (zot protocol v1), with nothing to run."
    } else if ext.enabled {
        "extension.json (zot protocol v1). Installing ran it once to read what it registers (npx or go run may download or compile); that is what is pinned."
    } else {
        "extension.json (zot protocol v1), turned off: installing did not run it, so nothing it registers is approved yet."
    };
    block(&mut out, "zot", &wrap(ran, FIELD_CHARS + 8));
    if !ext.enabled {
        block(
            &mut out,
            "off",
            &wrap(
                &format!(
                    "its extension.json says \"enabled\": false, so zot does not start it. yep enable refuses it until that says true and yep update {} has read it again.",
                    escape(&ext.name)
                ),
                FIELD_CHARS + 8,
            ),
        );
    }
    let names = |items: &[String]| {
        items
            .iter()
            .map(|i| escape(i).into_owned())
            .collect::<Vec<_>>()
    };
    if !pin.intercepts.is_empty() {
        block(&mut out, "intercept", &list(&names(&pin.intercepts)));
    }
    if !pin.events.is_empty() {
        block(&mut out, "events", &list(&names(&pin.events)));
    }
    if pin.has(crate::zot::CALL_TOOL) {
        block(
            &mut out,
            "calls",
            &wrap(
                "may run the host's tools (call_tool), through the same hooks",
                FIELD_CHARS + 8,
            ),
        );
    }
    for note in notes {
        block(&mut out, "note", &wrap(note, FIELD_CHARS + 8));
    }
    let ignored = ext.ignored_keys();
    if !ignored.is_empty() {
        let mut keys: Vec<String> = ignored
            .iter()
            .take(MAX_IGNORED_SHOWN)
            .map(|k| field(k, 24))
            .collect();
        if ignored.len() > MAX_IGNORED_SHOWN {
            keys.push(format!("and {} more", ignored.len() - MAX_IGNORED_SHOWN));
        }
        let last = keys.len() - 1;
        keys[last].push_str(" (zot ignores them too)");
        block(&mut out, "ignored", &list(&keys));
    }
    out.truncate(out.trim_end().len());
    out
}

/// The most of one hook's or inline command's command line the summary shows; past it, an
/// ellipsis (the whole line is pinned in the lock).
const MAX_COMMAND_CHARS: usize = 400;

/// The most hooks, inline commands, agents or ignored keys listed one by one in a Claude
/// summary; the rest are counted.
const MAX_CLAUDE_ROWS: usize = 32;

/// A command line as Claude summary lines: escaped, white space folded, at most
/// [`MAX_COMMAND_CHARS`], wrapped under its label.
fn command_lines(command: &str) -> Vec<String> {
    let line = format!("`{}`", field(command, MAX_COMMAND_CHARS));
    let width = FIELD_CHARS + 6;
    // At spaces where it can; a word longer than a line is cut into lines of its own.
    let pieces = line.split(' ').flat_map(|word| {
        let chars: Vec<char> = word.chars().collect();
        chars
            .chunks(width)
            .map(|c| c.iter().collect::<String>())
            .collect::<Vec<_>>()
    });
    fill(pieces, width)
}

/// "N things", with "and N more" when the list was cut.
fn cut<T>(items: &[T]) -> (&[T], Option<String>) {
    if items.len() > MAX_CLAUDE_ROWS {
        (
            &items[..MAX_CLAUDE_ROWS],
            Some(format!("and {} more", items.len() - MAX_CLAUDE_ROWS)),
        )
    } else {
        (items, None)
    }
}

/// The consent summary of a Claude Code, Codex or Agent Plugins package: what it is and that
/// installing ran nothing; every hook (event, matcher, rule, its command line, its timeout
/// and yep's clamp, and that it fails open); every inline command its slash commands run, and
/// those their `allowed-tools` do not permit; its commands, skills, agents and MCP servers;
/// its config; `notes` on what was left out; the keys yep ignores; and the counts. Everything
/// from the package is escaped and folded, so nothing in it can draw a row of its own.
pub fn claude_summary(
    manifest: &Manifest,
    pin: &crate::claude::ClaudePin,
    notes: &[String],
) -> String {
    let f = &manifest.yolop;
    let width = FIELD_CHARS + 8;
    let mut out = String::new();
    let version = manifest
        .version
        .as_deref()
        .map(|v| format!(" {}", field(v, 14)))
        .unwrap_or_default();
    let _ = writeln!(out, "{}{version}", escape(&manifest.name));
    let about = field(&manifest.description, MAX_DESCRIPTION_CHARS);
    if !about.is_empty() {
        block(&mut out, "about", &wrap(&about, width));
    }
    block(&mut out, "kind", &claude_kind(manifest, pin, width));
    block(&mut out, "hooks", &claude_hooks(pin, width));
    let plugin = escape(&manifest.name);
    block(&mut out, "inline", &claude_inline(&plugin, pin));

    let commands: Vec<String> = f
        .commands
        .iter()
        .map(|c| format!("/{plugin}:{}", escape(&c.name)))
        .collect();
    block(&mut out, "commands", &list(&commands));
    let skills: Vec<String> = pin.skills.iter().map(|s| field(s, 40)).collect();
    block(&mut out, "skills", &list(&skills));
    let (shown, more) = cut(&pin.agents);
    let mut agents: Vec<String> = shown.iter().map(|a| field(&a.name, 40)).collect();
    agents.extend(more);
    if !agents.is_empty() {
        let last = agents.len() - 1;
        agents[last].push_str(" (listed: yep runs no agents)");
    }
    block(&mut out, "agents", &list(&agents));
    let mcp: Vec<String> = f
        .mcp_servers
        .iter()
        .flat_map(|(n, m)| mcp_lines(n, m))
        .collect();
    block(&mut out, "mcp", &mcp);
    let config: Vec<String> = config_fields(manifest)
        .iter()
        .map(|c| {
            let secret = match (&c.broker, c.secret) {
                (Some(b), true) => {
                    format!(" (secret, brokered: only to {})", escape(&b.describe()))
                }
                (None, true) => " (secret)".to_string(),
                _ => String::new(),
            };
            format!("{}{secret}", escape(&c.name))
        })
        .collect();
    if !config.is_empty() {
        block(&mut out, "config", &list(&config));
    }
    note_blocks(&mut out, notes, width);
    if !pin.ignored.is_empty() {
        let (shown, more) = cut(&pin.ignored);
        let mut keys: Vec<String> = shown.iter().map(|k| field(k, 24)).collect();
        keys.extend(more);
        let last = keys.len() - 1;
        keys[last].push_str(" (yep reads no such key)");
        block(&mut out, "ignored", &list(&keys));
    }
    block(
        &mut out,
        "counts",
        &wrap(&claude_counts(manifest, pin), width),
    );
    out.truncate(out.trim_end().len());
    out
}

/// The `kind` rows of a Claude plugin's summary: its kind and where it was read from, that
/// installing ran nothing, and that approving starts its local MCP servers.
fn claude_kind(manifest: &Manifest, pin: &crate::claude::ClaudePin, width: usize) -> Vec<String> {
    use crate::claude::{CLAUDE_MANIFEST_FILE, CODEX_MANIFEST_FILE, PluginKind};
    let file = match pin.kind {
        PluginKind::Claude if pin.manifest_less && pin.marketplace.is_some() => {
            "no manifest: its marketplace entry"
        }
        PluginKind::Claude if pin.manifest_less => "no manifest: its directory layout",
        PluginKind::Claude => CLAUDE_MANIFEST_FILE,
        PluginKind::Codex => CODEX_MANIFEST_FILE,
        PluginKind::AgentPlugin => "plugin.json",
    };
    // A workspace's own config is approved, not installed.
    let ran = match manifest.name == crate::claude::project::PROJECT {
        true => "nothing of it has run",
        false => "installing ran nothing",
    };
    let mut kind = vec![format!("{} ({file})", pin.kind.label()), ran.into()];
    if manifest
        .yolop
        .mcp_servers
        .values()
        .any(|m| m.transport == "stdio")
    {
        kind.extend(wrap(
            "approving starts its local MCP servers once each, contained, to pin their tools",
            width,
        ));
    }
    kind
}

/// The `hooks` rows: each hook's event, matcher and rule, its timeout (and yep's clamp), that
/// it fails open, and its command line.
fn claude_hooks(pin: &crate::claude::ClaudePin, width: usize) -> Vec<String> {
    let mut hooks = Vec::new();
    let (shown, more) = cut(&pin.hooks);
    for h in shown {
        let mut head = escape(&h.event).into_owned();
        if let Some(m) = h.matcher.as_deref().filter(|m| !m.is_empty() && *m != "*") {
            head.push_str(&format!(" on {}", field(m, FIELD_CHARS)));
        }
        if let Some(rule) = &h.if_rule {
            head.push_str(&format!(" if {}", field(rule, FIELD_CHARS)));
        }
        let mut timeout = format!("timeout {} s", h.timeout());
        if h.effective_timeout() < h.timeout() {
            timeout.push_str(&format!(" → {} s", h.effective_timeout()));
        }
        let async_ = if h.is_async {
            ", in the background"
        } else {
            ""
        };
        hooks.extend(wrap(&format!("{head}:"), width));
        hooks.push(format!("  {timeout}, fails open{async_}"));
        let command = std::iter::once(h.command.as_str())
            .chain(h.args.iter().map(String::as_str))
            .collect::<Vec<_>>()
            .join(" ");
        hooks.extend(
            command_lines(&command)
                .into_iter()
                .map(|l| format!("  {l}")),
        );
    }
    hooks.extend(more);
    if !pin.hooks.is_empty() {
        hooks.extend(wrap(
            "hooks run shell commands with your files on every matching call",
            width,
        ));
    }
    hooks
}

/// The `inline` rows: each inline command a slash command of `plugin` runs, and whether its
/// `allowed-tools` permit it.
fn claude_inline(plugin: &str, pin: &crate::claude::ClaudePin) -> Vec<String> {
    let mut inline = Vec::new();
    let runs: Vec<(&crate::claude::PinnedCommand, &String)> = pin
        .commands
        .iter()
        .flat_map(|c| c.inline.iter().map(move |i| (c, i)))
        .collect();
    let (shown, more) = cut(&runs);
    // Only what is read-only, or what a command's allowed-tools permit, runs; the rest stays
    // in its text, not run. One heading for each run of lines a command runs alike.
    let mut last: Option<(&str, bool)> = None;
    for (c, command) in shown {
        let runs = !c.not_permitted().contains(&command.as_str());
        if last != Some((c.name.as_str(), runs)) {
            let verb = match runs {
                true => "runs",
                false => "does not run (not read-only, and its allowed-tools do not permit it)",
            };
            inline.push(format!("/{plugin}:{} {verb}", escape(&c.name)));
            last = Some((c.name.as_str(), runs));
        }
        inline.extend(command_lines(command).into_iter().map(|l| format!("  {l}")));
    }
    inline.extend(more);
    inline
}

/// A `note` block for each of `notes`; the same note twice (five hooks left out alike) is
/// one row, counted.
fn note_blocks(out: &mut String, notes: &[String], width: usize) {
    let mut seen: Vec<(&String, usize)> = Vec::new();
    for note in notes {
        match seen.iter_mut().find(|(n, _)| *n == note) {
            Some((_, count)) => *count += 1,
            None => seen.push((note, 1)),
        }
    }
    for (note, count) in seen {
        let times = if count > 1 {
            format!(" (×{count})")
        } else {
            String::new()
        };
        block(
            out,
            "note",
            &wrap(&format!("{}{times}", field(note, 400)), width),
        );
    }
}

/// `n` and the noun in its number: "1 skill", "2 skills".
fn count(n: usize, one: &str, many: &str) -> String {
    format!("{n} {}", if n == 1 { one } else { many })
}

/// How many of each part a Claude plugin has, in one line.
fn claude_counts(manifest: &Manifest, pin: &crate::claude::ClaudePin) -> String {
    let f = &manifest.yolop;
    let inline: usize = pin.commands.iter().map(|c| c.inline.len()).sum();
    let mut counts = [
        count(pin.hooks.len(), "hook", "hooks"),
        count(f.commands.len(), "command", "commands"),
        count(inline, "inline command", "inline commands"),
        count(pin.skills.len(), "skill", "skills"),
        count(pin.agents.len(), "agent", "agents"),
        count(f.mcp_servers.len(), "MCP server", "MCP servers"),
    ]
    .join(", ");
    if !pin.lsp_servers.is_empty() {
        counts.push_str(&format!(
            ", {} (not run)",
            count(pin.lsp_servers.len(), "LSP server", "LSP servers")
        ));
    }
    counts
}

/// How a new manifest differs from the approved one.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct ContributionDiff {
    /// `+ …` widens, `- …` narrows, `~ …` changes without widening; `warning: …` follows a
    /// grant that lifts a protected workspace path.
    pub lines: Vec<String>,
    /// Anything added or newly granted: consent is needed again.
    pub widened: bool,
    /// Config fields the new manifest requires that the approved one did not (new, or made
    /// required): the extension needs them set before it runs as intended.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub needs_setup: Vec<ConfigField>,
}

impl ContributionDiff {
    pub fn is_empty(&self) -> bool {
        self.lines.is_empty()
    }

    /// Whether it only takes away (a tool, a hook, a grant, a config field; a new version
    /// aside). A field made required is a change to see, not a narrowing.
    pub fn narrows_only(&self) -> bool {
        self.lines.iter().all(|l| {
            l.starts_with("- ")
                || l.starts_with("~ version ")
                || (l.starts_with("~ config field ") && l.ends_with(" removed"))
        })
    }

    pub fn render(&self) -> String {
        self.lines
            .iter()
            .map(|l| format!("  {l}"))
            .collect::<Vec<_>>()
            .join("\n")
    }
}

/// What tool `now` says (its description and schemas), against `was` when it changed, as
/// indented diff lines with hidden characters marked ([`crate::tooltext`]).
fn text_lines(was: Option<&ToolDef>, now: &ToolDef) -> Vec<String> {
    let lines = |t: &ToolDef| {
        crate::tooltext::tool_lines(
            Some(&t.description),
            Some(&t.schema),
            t.output_schema.as_ref(),
            None,
        )
    };
    let before = was.map(lines);
    crate::tooltext::diff(before.as_deref(), &lines(now))
        .into_iter()
        .map(|l| format!("    {l}"))
        .collect()
}

/// The field name of a `fields` entry (`name` or `name (secret)`).
fn fields_name(entry: &str) -> &str {
    entry.strip_suffix(" (secret)").unwrap_or(entry)
}

/// Compare the approved manifest with a new one.
pub fn diff(old: &Manifest, new: &Manifest) -> ContributionDiff {
    let mut d = ContributionDiff::default();
    tools_added_removed(old, new, &mut d);
    let hooks = |m: &Manifest| m.yolop.hooks.iter().map(hook_line).collect();
    set_diff("hook", hooks(old), hooks(new), &mut d);
    mcp_server_changes(old, new, &mut d);
    let commands = |m: &Manifest| {
        m.yolop
            .commands
            .iter()
            .map(|c| format!("/{}:{}", escape(&m.name), escape(&c.name)))
            .collect()
    };
    set_diff("command", commands(old), commands(new), &mut d);
    let granted = |m: &Manifest| flags(m).into_iter().map(String::from).collect();
    set_diff("grant", granted(old), granted(new), &mut d);
    // The sandbox's grants: each new one widens (a changed limit is a new line too).
    let sandbox = |m: &Manifest| {
        m.sandbox
            .lines()
            .iter()
            .map(|g| field(g, FIELD_CHARS))
            .collect()
    };
    set_diff("sandbox", sandbox(old), sandbox(new), &mut d);
    d.lines.extend(new.sandbox.without(&old.sandbox).warnings());
    server_changes(old, new, &mut d);
    tool_changes(old, new, &mut d);
    config_changes(old, new, &mut d);
    if old.version != new.version {
        d.lines.insert(
            0,
            format!(
                "~ version {} → {}",
                escape(old.version.as_deref().unwrap_or("?")),
                escape(new.version.as_deref().unwrap_or("?"))
            ),
        );
    }
    d
}

/// `+ kind x` for each of `after` not in `before` (which widens), `- kind x` for each gone.
fn set_diff(
    kind: &str,
    before: BTreeSet<String>,
    after: BTreeSet<String>,
    d: &mut ContributionDiff,
) {
    for added in after.difference(&before) {
        d.lines.push(format!("+ {kind} {added}"));
        d.widened = true;
    }
    for removed in before.difference(&after) {
        d.lines.push(format!("- {kind} {removed}"));
    }
}

/// The tools added (which widens) and removed, by name.
fn tools_added_removed(old: &Manifest, new: &Manifest, d: &mut ContributionDiff) {
    // A new tool is shown with what it says, as a changed one is below: what the model will
    // read is approved seen.
    let mut added: Vec<&ToolDef> = new
        .yolop
        .tools
        .iter()
        .filter(|t| old.tool(&t.name).is_none())
        .collect();
    added.sort_by_key(|t| escape(&t.name).into_owned());
    for t in added {
        d.lines.push(format!("+ tool {}", escape(&t.name)));
        d.lines.extend(text_lines(None, t));
        d.widened = true;
    }
    let mut removed: Vec<String> = old
        .yolop
        .tools
        .iter()
        .filter(|t| new.tool(&t.name).is_none())
        .map(|t| escape(&t.name).into_owned())
        .collect();
    removed.sort();
    for name in removed {
        d.lines.push(format!("- tool {name}"));
    }
}

/// The MCP servers added, removed, and changed (which widens).
fn mcp_server_changes(old: &Manifest, new: &Manifest, d: &mut ContributionDiff) {
    let mcp = |m: &Manifest| {
        m.yolop
            .mcp_servers
            .keys()
            .map(|n| escape(n).into_owned())
            .collect()
    };
    set_diff("mcp server", mcp(old), mcp(new), d);
    // Any change to a server it keeps (command, args, env, headers, URL) needs consent too:
    // a new `${VAR}` in a header hands a secret to wherever the URL points.
    for (name, spec) in &new.yolop.mcp_servers {
        if let Some(before) = old.yolop.mcp_servers.get(name)
            && serde_json::to_value(before).ok() != serde_json::to_value(spec).ok()
        {
            d.lines.push(format!(
                "~ mcp server {} changed: {}",
                escape(name),
                mcp_lines(name, spec)[1..].join("; ")
            ));
            d.widened = true;
        }
    }
}

/// How the capability server changed: its command line, its prebuilt binary, or anything
/// else of it (any change widens).
fn server_changes(old: &Manifest, new: &Manifest, d: &mut ContributionDiff) {
    if server_line(old) != server_line(new) {
        d.lines.push(format!(
            "~ server `{}` → `{}`",
            server_line(old).unwrap_or_default(),
            server_line(new).unwrap_or_default()
        ));
    }
    let binaries = |m: &Manifest| {
        m.yolop
            .capability_server
            .as_ref()
            .and_then(|s| s.binaries.clone())
    };
    if binaries(old) != binaries(new) {
        d.lines.push(format!(
            "~ prebuilt binary from {}",
            binaries(new).map_or("(none)".into(), |u| field(&u, FIELD_CHARS))
        ));
    }
    // Compared whole, not as shown: a change past what the summary shows counts too.
    let server = |m: &Manifest| serde_json::to_value(&m.yolop.capability_server).ok();
    if server(old) != server(new) {
        if !d
            .lines
            .iter()
            .any(|l| l.starts_with("~ server") || l.starts_with("~ prebuilt"))
        {
            d.lines
                .push("~ server command line changed past what is shown".into());
        }
        d.widened = true;
    }
}

/// The tools kept that are now always loaded, or whose definition changed (either widens).
fn tool_changes(old: &Manifest, new: &Manifest, d: &mut ContributionDiff) {
    let never_defer = |m: &Manifest| {
        m.yolop
            .tools
            .iter()
            .filter(|t| t.never_defer)
            .map(|t| t.name.clone())
            .collect::<BTreeSet<_>>()
    };
    for t in never_defer(new).difference(&never_defer(old)) {
        if old.tool(t).is_some() {
            d.lines
                .push(format!("+ tool {} now always loaded", escape(t)));
            d.widened = true;
        }
    }
    for t in &new.yolop.tools {
        if let Some(before) = old.tool(&t.name)
            && (before.schema != t.schema
                || before.description != t.description
                || before.output_schema != t.output_schema)
        {
            d.lines
                .push(format!("~ tool {} definition changed", escape(&t.name)));
            d.lines.extend(text_lines(Some(before), t));
            // What the model reads of it changed: asked, as for an MCP server's tool.
            d.widened = true;
        }
    }
}

/// The config fields added, removed, and newly required (which need setting up).
fn config_changes(old: &Manifest, new: &Manifest, d: &mut ContributionDiff) {
    let fields = |m: &Manifest| {
        config_fields(m)
            .into_iter()
            .map(|c| {
                if c.secret {
                    format!("{} (secret)", escape(&c.name))
                } else {
                    escape(&c.name).into_owned()
                }
            })
            .collect()
    };
    let (before, after): (BTreeSet<String>, BTreeSet<String>) = (fields(old), fields(new));
    let old_fields = config_fields(old);
    // A brokered secret that may now go to a host it could not: widened.
    for f in config_fields(new).into_iter().filter(|f| f.secret) {
        let Some(was) = old_fields.iter().find(|o| o.name == f.name) else {
            continue;
        };
        let hosts =
            |b: &Option<crate::broker::binding::Binding>| b.as_ref().map(|b| b.hosts.clone());
        let (then, now) = (hosts(&was.broker), hosts(&f.broker));
        let new_hosts: Vec<&String> = match (&then, &now) {
            (Some(then), Some(now)) => now.iter().filter(|h| !then.contains(h)).collect(),
            (None, Some(_)) | (_, None) => Vec::new(),
        };
        if then.is_some() && now.is_none() {
            d.lines.push(format!(
                "+ config field {} (secret) no longer brokered: the server gets its value",
                escape(&f.name)
            ));
            d.widened = true;
        } else if !new_hosts.is_empty() {
            let hosts: Vec<String> = new_hosts.iter().map(|h| escape(h).into_owned()).collect();
            d.lines.push(format!(
                "+ config field {} (secret) now also goes to {}",
                escape(&f.name),
                hosts.join(", ")
            ));
            d.widened = true;
        }
    }
    for f in config_fields(new).into_iter().filter(|f| f.required) {
        let was = old_fields.iter().find(|o| o.name == f.name);
        if was.is_some_and(|o| o.required) {
            continue;
        }
        let secret = if f.secret { " (secret)" } else { "" };
        let how = if was.is_some() {
            "now required"
        } else {
            "added, required"
        };
        d.lines
            .push(format!("! config field {}{secret} {how}", escape(&f.name)));
        d.needs_setup.push(f);
    }
    for added in after.difference(&before) {
        if d.needs_setup.iter().any(|f| fields_name(added) == f.name) {
            continue;
        }
        d.lines.push(format!("~ config field {added} added"));
    }
    for removed in before.difference(&after) {
        d.lines.push(format!("~ config field {removed} removed"));
    }
}

#[cfg(test)]
mod tests;
