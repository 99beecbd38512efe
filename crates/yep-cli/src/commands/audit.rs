//! `yep audit`: the audit trail (`<home>/audit.jsonl` and its rotated files), oldest first,
//! as a table or as JSON lines. A line that is not a record (a write cut short, garbage) is
//! skipped and counted on stderr, never fatal.

use crate::output::{eline, hinted, stdout_line, usage};
use serde_json::Value;
use std::io::BufRead;
use std::process::ExitCode;
use std::time::{Duration, SystemTime};
use yep_store::Home;
use yep_store::text::escape;

#[derive(clap::Args)]
pub struct Args {
    /// Only records since then: a duration back from now (`10m`, `2h`, `1day`) or an RFC 3339
    /// time (`2026-01-31T09:00:00Z`).
    #[arg(long, value_name = "DUR|TIME")]
    since: Option<String>,
    /// Only records about this extension (or MCP server).
    #[arg(long, value_name = "NAME")]
    extension: Option<String>,
    /// Only records of this kind: tool, agent_tool, sandbox_denied, egress, injection,
    /// dropped.
    #[arg(long, value_name = "KIND")]
    kind: Option<String>,
    /// Print each record as it is kept: one JSON object per line (JSON lines), oldest first.
    #[arg(long)]
    json: bool,
    /// Only the last N records that match.
    #[arg(long, value_name = "N")]
    limit: Option<usize>,
}

/// Which records to show.
struct Filter {
    since: Option<SystemTime>,
    extension: Option<String>,
    kind: Option<String>,
}

impl Filter {
    fn keeps(&self, record: &Value) -> bool {
        let field = |name: &str| record.get(name).and_then(Value::as_str).unwrap_or_default();
        let after = self.since.is_none_or(|since| {
            humantime::parse_rfc3339_weak(field("ts")).is_ok_and(|at| at >= since)
        });
        after
            && self
                .extension
                .as_deref()
                .is_none_or(|e| field("extension") == e)
            && self.kind.as_deref().is_none_or(|k| field("kind") == k)
    }
}

pub fn run(args: Args, home: &Home) -> anyhow::Result<ExitCode> {
    let filter = Filter {
        since: args.since.as_deref().map(since).transpose()?,
        extension: args.extension,
        kind: args.kind,
    };
    let path = home.audit_path();
    let files = yep_host::audit::files(&path);
    if files.is_empty() {
        return no_trail(home, &path);
    }
    let mut kept = Vec::new();
    let mut skipped = 0usize;
    for file in &files {
        let opened = std::fs::File::open(file)
            .map_err(|e| anyhow::anyhow!("failed to read {}: {e}", file.display()))?;
        for line in std::io::BufReader::new(opened).split(b'\n') {
            let line =
                line.map_err(|e| anyhow::anyhow!("failed to read {}: {e}", file.display()))?;
            if line.iter().all(u8::is_ascii_whitespace) {
                continue;
            }
            match serde_json::from_slice::<Value>(&line) {
                Ok(record) if record.is_object() => {
                    if filter.keeps(&record) {
                        kept.push((record, line));
                    }
                }
                _ => skipped += 1,
            }
        }
    }
    if let Some(limit) = args.limit {
        let drop = kept.len().saturating_sub(limit);
        kept.drain(..drop);
    }
    if skipped > 0 {
        eline!(
            "warning: skipped {skipped} line{} of the audit trail that {} not a record (cut short or damaged)",
            if skipped == 1 { "" } else { "s" },
            if skipped == 1 { "is" } else { "are" }
        );
    }
    match args.json {
        // Each line as it is kept (a record is one line of JSON).
        true => kept
            .iter()
            .for_each(|(_, line)| stdout_line(&String::from_utf8_lossy(line))),
        false => table(&kept.into_iter().map(|(r, _)| r).collect::<Vec<_>>()),
    }
    Ok(ExitCode::SUCCESS)
}

/// `--since`: a duration back from now, or a time.
fn since(text: &str) -> anyhow::Result<SystemTime> {
    if let Ok(back) = humantime::parse_duration(text) {
        return Ok(SystemTime::now()
            .checked_sub(back)
            .unwrap_or(SystemTime::UNIX_EPOCH));
    }
    humantime::parse_rfc3339_weak(text).map_err(|e| {
        usage(
            format!(
                "--since {}: neither a duration (`10m`) nor an RFC 3339 time (`2026-01-31T09:00:00Z`)",
                escape(text)
            ),
            e,
        )
    })
}

/// A home with no trail yet. Nothing has run yet: nothing to show, said on stderr (a new
/// home's `yep audit` is no error). The trail turned off: an error, saying so.
fn no_trail(home: &Home, path: &std::path::Path) -> anyhow::Result<ExitCode> {
    let settings = yep_store::settings::audit(&home.settings_path()).unwrap_or_default();
    if !settings.enabled {
        return Err(hinted(
            format!("no audit trail at {}", path.display()),
            &["settings.toml turns it off (`[audit] enabled = false`)"],
        ));
    }
    eline!(
        "no audit records yet: yep writes them to {} as a session, `yep mcp serve` or `yep call` runs tools",
        path.display()
    );
    Ok(ExitCode::SUCCESS)
}

/// The records as a table: time, kind, extension, and what each kind says.
fn table(records: &[Value]) {
    if records.is_empty() {
        eline!("no records match");
        return;
    }
    let rows: Vec<[String; 4]> = records
        .iter()
        .map(|r| {
            let field = |name: &str| {
                escape(r.get(name).and_then(Value::as_str).unwrap_or_default()).into_owned()
            };
            [field("ts"), field("kind"), field("extension"), detail(r)]
        })
        .collect();
    let width = |i: usize| rows.iter().map(|r| r[i].chars().count()).max().unwrap_or(0);
    let (w_kind, w_ext) = (width(1).max(4), width(2).max(9));
    stdout_line(&format!(
        "{:<24}  {:<w_kind$}  {:<w_ext$}  WHAT",
        "TIME", "KIND", "EXTENSION"
    ));
    for [ts, kind, ext, what] in rows {
        stdout_line(&format!("{ts:<24}  {kind:<w_kind$}  {ext:<w_ext$}  {what}"));
    }
}

/// What one record says beyond its time, kind and extension, escaped for a terminal.
fn detail(r: &Value) -> String {
    let s =
        |name: &str| escape(r.get(name).and_then(Value::as_str).unwrap_or_default()).into_owned();
    let shown =
        |name: &str| escape(&r.get(name).map(Value::to_string).unwrap_or_default()).into_owned();
    match r.get("kind").and_then(Value::as_str).unwrap_or_default() {
        "tool" | "agent_tool" => {
            let mut out = format!("{} {}", s("tool"), shown("args"));
            for (name, label) in [("phase", ""), ("decision", ""), ("outcome", "→ ")] {
                if r.get(name).is_some() {
                    out.push_str(&format!(" {label}{}", s(name)));
                }
            }
            if let Some(by) = r
                .get("by")
                .and_then(Value::as_array)
                .filter(|b| !b.is_empty())
            {
                let by: Vec<String> = by
                    .iter()
                    .map(|b| escape(b.as_str().unwrap_or_default()).into_owned())
                    .collect();
                out.push_str(&format!(" by {}", by.join(", ")));
            }
            if let Some(secret) = r.get("secret") {
                let shape = secret
                    .get("shape")
                    .and_then(Value::as_str)
                    .unwrap_or_default();
                out.push_str(&format!(" (a credential: {})", escape(shape)));
            }
            if let Some(us) = r.get("duration_us").and_then(Value::as_u64) {
                let took = Duration::from_micros(us);
                out.push_str(&format!(" in {:.1} ms", took.as_secs_f64() * 1000.0));
            }
            out
        }
        "sandbox_denied" => format!("refused {} (grant: {})", s("target"), s("grant")),
        "egress" => {
            let verdict = match r.get("allowed").and_then(Value::as_bool) {
                Some(true) => "allowed",
                _ => "refused",
            };
            let port = r.get("port").and_then(Value::as_u64).unwrap_or_default();
            let mut out = format!("{verdict} {}:{port}", s("host"));
            if r.get("method").is_some() {
                out.push_str(&format!(" {} {}", s("method"), s("path")));
            }
            out.push_str(&format!(" (rule: {})", s("rule")));
            out
        }
        "injection" => format!("secret {} sent to {}", s("secret"), s("host")),
        "dropped" => format!("{} records dropped (the writer was behind)", shown("count")),
        _ => String::new(),
    }
}
