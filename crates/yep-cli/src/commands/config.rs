//! `yep config show|set`, `yep secret set`, and the setup `yep enable` runs for required
//! fields nobody has set yet.

use super::prompt::{TerminalAsk, read_answer};
use crate::output::{hinted, stdout_line};
use serde_json::{Value, json};
use std::io::IsTerminal;
use std::process::ExitCode;
use yep_host::Manifest;
use yep_host::capability::Question;
use yep_host::runtime::DynAskSink;
use yep_store::Home;
use yep_store::config::{self, Secret};
use yep_store::summary::config_fields;
use yep_store::text::escape;

#[derive(clap::Subcommand)]
pub enum ConfigCommand {
    /// Show an extension's config fields: plain values, and set/unset for secrets.
    Show {
        /// The installed extension's name.
        name: String,
        /// Print the fields as JSON (secrets as set/unset, never their values).
        #[arg(long)]
        json: bool,
    },
    /// Set a plain (non-secret) field; the value is parsed by the field's type.
    Set {
        /// The installed extension's name.
        name: String,
        /// A plain field of its config_schema.
        field: String,
        /// The value, parsed by the field's type.
        value: String,
        /// Print what was stored as one JSON object.
        #[arg(long)]
        json: bool,
    },
}

#[derive(clap::Subcommand)]
pub enum SecretCommand {
    /// Store a secret field: asked for with masked input, or read as one line from stdin.
    /// Never taken on the command line.
    Set {
        /// The installed extension's name.
        name: String,
        /// A secret field of its config_schema.
        field: String,
        /// Broker it: the server holds a placeholder, and its egress proxy puts the value
        /// into requests to this host only (repeatable; `api.github.com`, `*.example.com`,
        /// `example.org:8443`). HTTPS to it is terminated by yep's proxy.
        #[arg(long = "for", value_name = "HOST[:PORT]")]
        hosts: Vec<String>,
        /// With --for: set this header on every request to those hosts (any Authorization
        /// the client sent is removed), rather than swapping the placeholder where it is.
        #[arg(long, requires = "hosts")]
        header: Option<String>,
        /// With --header: the header's value, `{}` standing for the secret (`Bearer {}`).
        #[arg(long, requires = "header")]
        format: Option<String>,
        /// Give it in the environment in the clear, though its manifest declares it
        /// brokered (for a client that pins certificates).
        #[arg(long, conflicts_with = "hosts")]
        in_env: bool,
        /// Print what was stored (never the value) as one JSON object.
        #[arg(long)]
        json: bool,
    },
}

fn manifest(home: &Home, name: &str) -> anyhow::Result<Manifest> {
    Ok(home.installed_manifest(name)?)
}

pub fn config(cmd: ConfigCommand, home: &Home) -> anyhow::Result<ExitCode> {
    match cmd {
        ConfigCommand::Show { name, json } => {
            let m = manifest(home, &name)?;
            // Reading only: not `server_inputs`, which makes the data dir a server needs.
            let plain = config::plain(home, &m)?;
            let secrets = config::secrets(home, &name)?;
            let bound = yep_store::broker::user_bindings(home, &name)?;
            let rows: Vec<Value> = config_fields(&m)
                .into_iter()
                .map(|f| {
                    let set = if f.secret { secrets.contains_key(&f.name) } else { plain.get(&f.name).is_some() };
                    let shown = if f.secret { Value::Null } else { plain.get(&f.name).cloned().unwrap_or(Value::Null) };
                    // Where a brokered secret may go: the user's binding, else the manifest's.
                    let broker = bound.get(&f.name).or(f.broker.as_ref()).filter(|b| f.secret && !b.in_env);
                    let brokered = broker.map(|b| json!({ "hosts": b.hosts, "header": b.header, "format": b.format }));
                    let mut row = json!({ "name": f.name, "secret": f.secret, "required": f.required, "env": f.env, "set": set, "value": shown });
                    if let Some(brokered) = brokered {
                        row["brokered"] = brokered;
                    }
                    row
                })
                .collect();
            if json {
                stdout_line(&serde_json::to_string_pretty(&rows)?);
            } else if rows.is_empty() {
                stdout_line(&format!("`{name}` has no config fields"));
            } else {
                for r in rows {
                    let brokered = r["brokered"]["hosts"]
                        .as_array()
                        .map(|h| {
                            let hosts: Vec<&str> = h.iter().filter_map(Value::as_str).collect();
                            format!(", brokered: only to {}", escape(&hosts.join(", ")))
                        })
                        .unwrap_or_default();
                    let value = match (&r["secret"], &r["set"]) {
                        (Value::Bool(true), Value::Bool(true)) => {
                            format!("(secret, set{brokered})")
                        }
                        (Value::Bool(true), _) => format!("(secret, unset{brokered})"),
                        (_, Value::Bool(true)) => r["value"].to_string(),
                        _ => "(unset)".to_string(),
                    };
                    let required = if r["required"] == true {
                        " required"
                    } else {
                        ""
                    };
                    stdout_line(&format!(
                        "{}{required} = {value}",
                        r["name"].as_str().unwrap_or("")
                    ));
                }
            }
        }
        ConfigCommand::Set {
            name,
            field,
            value,
            json,
        } => {
            let m = manifest(home, &name)?;
            let parsed = config::parse_value(&m, &field, &value)?;
            config::set_plain(home, &m, &field, parsed.clone())?;
            if json {
                stdout_line(
                    &serde_json::json!({ "name": name, "field": field, "value": parsed })
                        .to_string(),
                );
            } else {
                stdout_line(&format!("set {name}.{field} = {parsed}"));
            }
        }
    }
    Ok(ExitCode::SUCCESS)
}

pub fn secret(cmd: SecretCommand, home: &Home) -> anyhow::Result<ExitCode> {
    let SecretCommand::Set {
        name,
        field,
        hosts,
        header,
        format,
        in_env,
        json,
    } = cmd;
    let binding_of = |hosts, header, format, in_env| {
        (in_env || !Vec::is_empty(&hosts)).then_some(yep_store::broker::Binding {
            hosts,
            header,
            format,
            in_env,
        })
    };
    // A home MCP server's environment value (`yep mcp add --env`), when no extension has
    // the name.
    if home.installed_manifest(&name).is_err() && yep_store::mcp::list(home)?.contains_key(&name) {
        let binding = binding_of(hosts, header, format, in_env);
        return mcp_secret(home, &name, &field, binding, json);
    }
    let m = manifest(home, &name)?;
    let binding = binding_of(hosts, header, format, in_env);
    // A binding that does not read is refused before the secret is asked for.
    if let Some(why) = binding.as_ref().and_then(|b| b.validate().err()) {
        return Err(hinted(
            format!("--for {name}.{field}: {why}"),
            &[
                "yep secret set <extension> <field> --for api.github.com [--header Authorization --format 'Bearer {}']",
            ],
        ));
    }
    if !config_fields(&m)
        .iter()
        .any(|f| f.name == field && f.secret)
    {
        return Err(hinted(
            format!("`{field}` is not a secret field of `{name}`"),
            &[&format!(
                "plain fields: yep config set {name} <field> <value>"
            )],
        ));
    }
    let value = read_secret(&name, &field)?;
    let Some(value) = value else {
        return Err(hinted(
            "no value given; nothing was stored",
            &["type the secret at the prompt, or pipe it on stdin"],
        ));
    };
    config::set_secret(home, &m, &field, &Secret::new(value))?;
    if let Some(binding) = &binding {
        yep_store::broker::bind(home, &name, &field, binding)?;
    }
    let ungranted = binding
        .as_ref()
        .map(|b| ungranted_hosts(home, &m, b))
        .unwrap_or_default();
    if json {
        let mut out = serde_json::json!({ "name": name, "field": field, "stored": true });
        if let Some(b) = binding.as_ref().filter(|b| !b.in_env) {
            out["brokered"] = serde_json::json!({
                "hosts": b.hosts,
                "header": b.header,
                "format": b.format,
                "ungranted": ungranted,
            });
        }
        stdout_line(&out.to_string());
        return Ok(ExitCode::SUCCESS);
    }
    stdout_line(&format!(
        "stored {name}.{field} (secret) in {}",
        home.connections_path().display()
    ));
    match &binding {
        Some(b) if b.in_env => stdout_line(&format!(
            "{name} gets it in its environment, in the clear (not brokered)"
        )),
        Some(b) => {
            stdout_line(&format!(
                "brokered: {name} holds a placeholder; its egress proxy puts the value into requests to {}",
                escape(&b.describe())
            ));
            for host in &ungranted {
                stdout_line(&format!(
                    "warning: {name}'s grants do not name {}, so its proxy refuses it: `yep grant {name} net:{}`",
                    escape(host),
                    escape(host)
                ));
            }
        }
        None => {}
    }
    Ok(ExitCode::SUCCESS)
}

/// `yep secret set <mcp server> <VAR>`: store the value of a home MCP server's environment
/// variable, brokered to the hosts `binding` names (or given in the clear with `--in-env`).
fn mcp_secret(
    home: &Home,
    name: &str,
    var: &str,
    binding: Option<yep_store::broker::Binding>,
    json: bool,
) -> anyhow::Result<ExitCode> {
    if let Some(why) = binding.as_ref().and_then(|b| b.validate().err()) {
        return Err(hinted(format!("--for {name}.{var}: {why}"), &[]));
    }
    let Some(value) = read_secret(name, var)? else {
        return Err(hinted(
            "no value given; nothing was stored",
            &["type the secret at the prompt, or pipe it on stdin"],
        ));
    };
    yep_store::mcp::set_env(home, name, var, &value)?;
    if let Some(binding) = &binding {
        let table = yep_store::mcp::env_table(name);
        yep_store::broker::bind_in(home, name, &table, var, binding)?;
    }
    if json {
        let brokered = binding.as_ref().filter(|b| !b.in_env);
        stdout_line(
            &json!({"name": name, "field": var, "stored": true,
                "brokered": brokered.map(|b| json!({"hosts": b.hosts, "header": b.header, "format": b.format}))})
            .to_string(),
        );
        return Ok(ExitCode::SUCCESS);
    }
    stdout_line(&format!(
        "stored MCP server {name}'s {var} (secret) in {}",
        home.connections_path().display()
    ));
    if let Some(b) = binding.as_ref().filter(|b| !b.in_env) {
        stdout_line(&format!(
            "brokered: {name} holds a placeholder; its egress proxy puts the value into requests to {} (grant the hosts with `yep grant {name} net:<host>`)",
            escape(&b.describe())
        ));
    }
    Ok(ExitCode::SUCCESS)
}

/// A secret, asked with masked input on a terminal, else read as one line of stdin; `None`
/// when none was given.
fn read_secret(name: &str, field: &str) -> anyhow::Result<Option<String>> {
    if std::io::stdin().is_terminal() {
        let params = Question {
            prompt: format!("{name}.{field}"),
            secret: true,
            ..Question::default()
        };
        return Ok(read_answer(name, &params)?);
    }
    let mut line = String::new();
    std::io::stdin().read_line(&mut line)?;
    Ok(Some(line.trim_end_matches(['\n', '\r']).to_string()).filter(|l| !l.is_empty()))
}

/// The hosts of `binding` that extension `m`'s grants (its manifest's and the user's) do
/// not let it reach: the secret can go nowhere there.
fn ungranted_hosts(home: &Home, m: &Manifest, binding: &yep_store::broker::Binding) -> Vec<String> {
    let Ok(lock) = home.lockfile() else {
        return Vec::new();
    };
    let grants = yep_store::approval::effective_grants(&lock, &m.name, None, &m.sandbox);
    let allowed = yep_sandbox::egress::Allowed::from_grants(grants.net.iter().map(String::as_str));
    binding
        .hosts
        .iter()
        .filter(|h| {
            let (host, port) = match h.rsplit_once(':') {
                Some((host, port)) => (host, port.parse().unwrap_or(443)),
                None => (h.as_str(), 443),
            };
            // A wildcard is reached when any name below it is: try one.
            let host = host.replace("*.", "x.");
            !allowed.allows(&host, port)
        })
        .cloned()
        .collect()
}

/// After `yep enable`: ask for each required field nobody set, by kind (secret: masked;
/// `enum`: a selector; else free text), asking again after an answer the field refuses. Without
/// a terminal, nothing is asked. Returns each field still unset with the command that sets it.
pub async fn setup(home: &Home, name: &str) -> anyhow::Result<Vec<(String, String)>> {
    let m = manifest(home, name)?;
    let interactive = std::io::stdin().is_terminal() && std::io::stderr().is_terminal();
    let terminal = TerminalAsk::default();
    let sink: Option<&dyn DynAskSink> = if interactive { Some(&terminal) } else { None };
    let still = yep_host::runtime::setup(home, name, &m, sink).await?;
    Ok(still
        .into_iter()
        .map(|field| {
            let command = config::set_command(&m, &field);
            (field, command)
        })
        .collect())
}
