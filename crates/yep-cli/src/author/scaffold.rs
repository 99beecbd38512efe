//! `yep new`: a package that is correct by construction. The manifest declares exactly the
//! facets asked for; the server is wired to the SDK (vendored, so the package needs no
//! toolchain beyond its language's runtime) and the only edit points are the handler bodies.

use serde::Serialize;
use serde_json::{Value, json};
use std::path::{Path, PathBuf};
use yep_store::manifest::{Manifest, valid_name};

/// The server's language.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Lang {
    Python,
    Typescript,
    Rust,
}

/// What to scaffold.
#[derive(Debug, Clone)]
pub struct NewOptions {
    pub name: String,
    pub lang: Lang,
    pub tools: Vec<String>,
    /// `(event, glob)`.
    pub hooks: Vec<(String, String)>,
    pub prompt: Option<String>,
    pub dynamic_prompt: bool,
    pub commands: Vec<String>,
    pub status: bool,
    pub ui_ask: bool,
    pub trace: bool,
    pub skills: bool,
    /// The package goes to `<parent>/<name>`.
    pub parent: PathBuf,
}

/// What was written.
#[derive(Debug, Clone, Serialize)]
pub struct Scaffolded {
    pub dir: PathBuf,
    pub files: Vec<String>,
    /// The server's source, where the handler bodies are.
    pub edit: String,
    /// The language the server is written in, as it runs.
    pub language: String,
    /// The build step (Rust only).
    pub build: Option<String>,
    pub next: Vec<String>,
}

const PY_SDK: &str = include_str!("../../../../sdk/python/yep_sdk.py");
const TS_SDK: &str = include_str!("../../../../sdk/typescript/yep-sdk.js");
const TS_TYPES: &str = include_str!("../../../../sdk/typescript/yep-sdk.d.ts");

/// The Rust SDK's sources, vendored into a Rust package.
const RUST_SDK: &[(&str, &str)] = &[
    (
        "vendor/yep-protocol/src/lib.rs",
        include_str!("../../../yep-protocol/src/lib.rs"),
    ),
    (
        "vendor/yep-protocol/src/error.rs",
        include_str!("../../../yep-protocol/src/error.rs"),
    ),
    (
        "vendor/yep-protocol/src/framing.rs",
        include_str!("../../../yep-protocol/src/framing.rs"),
    ),
    (
        "vendor/yep-protocol/src/json.rs",
        include_str!("../../../yep-protocol/src/json.rs"),
    ),
    (
        "vendor/yep-protocol/src/message.rs",
        include_str!("../../../yep-protocol/src/message.rs"),
    ),
    (
        "vendor/yep-protocol/src/meta.rs",
        include_str!("../../../yep-protocol/src/meta.rs"),
    ),
    (
        "vendor/yep-protocol/src/methods.rs",
        include_str!("../../../yep-protocol/src/methods.rs"),
    ),
    (
        "vendor/yep-protocol/src/types.rs",
        include_str!("../../../yep-protocol/src/types.rs"),
    ),
    (
        "vendor/yep-protocol/src/version.rs",
        include_str!("../../../yep-protocol/src/version.rs"),
    ),
    (
        "vendor/yep-sdk/src/lib.rs",
        include_str!("../../../yep-sdk/src/lib.rs"),
    ),
    (
        "vendor/yep-sdk/src/context.rs",
        include_str!("../../../yep-sdk/src/context.rs"),
    ),
    (
        "vendor/yep-sdk/src/framing.rs",
        include_str!("../../../yep-sdk/src/framing.rs"),
    ),
    (
        "vendor/yep-sdk/src/server.rs",
        include_str!("../../../yep-sdk/src/server.rs"),
    ),
    (
        "vendor/yep-sdk/src/typed.rs",
        include_str!("../../../yep-sdk/src/typed.rs"),
    ),
];

/// An identifier-safe spelling of a tool or command name.
fn ident(name: &str) -> String {
    let s: String = name
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() {
                c.to_ascii_lowercase()
            } else {
                '_'
            }
        })
        .collect();
    if s.starts_with(|c: char| c.is_ascii_digit()) {
        format!("_{s}")
    } else {
        s
    }
}

/// A Python docstring holding `text`.
fn py_docstring(text: &str) -> String {
    format!(
        "\"\"\"{}\"\"\"",
        text.replace('\\', "\\\\").replace("\"\"\"", "\\\"\\\"\\\"")
    )
}

/// A Rust/JS/Python string literal (JSON's escaping is valid in all three).
fn lit(s: &str) -> String {
    serde_json::to_string(s).unwrap_or_default()
}

/// What a scaffolded tool says of itself, in every template.
fn tool_description(tool: &str) -> String {
    format!("TODO: what `{tool}` does.")
}

/// The argument schema each template's typed handler derives: one string, `text`.
fn tool_schema() -> Value {
    json!({"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]})
}

/// A Rust type name for each tool's arguments, `web-search` → `WebSearchArgs`; tools whose
/// names spell the same (`web-search`, `web_search`) are numbered (`WebSearchArgs2`).
fn args_types(tools: &[String]) -> Vec<String> {
    let mut taken = std::collections::HashSet::new();
    tools
        .iter()
        .map(|t| {
            let base = args_type(t);
            let mut name = base.clone();
            let mut n = 1;
            while !taken.insert(name.clone()) {
                n += 1;
                name = format!("{base}{n}");
            }
            name
        })
        .collect()
}

/// A Rust type name for a tool's arguments: `web-search` → `WebSearchArgs`.
fn args_type(tool: &str) -> String {
    let mut out = String::new();
    for word in ident(tool).split('_').filter(|w| !w.is_empty()) {
        let mut chars = word.chars();
        if let Some(first) = chars.next() {
            out.push(first.to_ascii_uppercase());
            out.extend(chars);
        }
    }
    if out.starts_with(|c: char| c.is_ascii_digit()) || out.is_empty() {
        out.insert(0, 'T');
    }
    out + "Args"
}

fn manifest(o: &NewOptions) -> Value {
    let mut facet = serde_json::Map::new();
    facet.insert(
        "protocol_version".into(),
        json!(yep_protocol::PROTOCOL_VERSION),
    );
    facet.insert(
        "capabilityServer".into(),
        json!({"command": format!("{}-server", o.name)}),
    );
    if !o.tools.is_empty() {
        // Exactly what each template's typed handler derives, so it starts in sync.
        let tools = o.tools.iter().map(
            |t| json!({"name": t, "description": tool_description(t), "schema": tool_schema()}),
        );
        facet.insert("tools".into(), Value::Array(tools.collect()));
    }
    if !o.hooks.is_empty() {
        facet.insert(
            "hooks".into(),
            Value::Array(
                o.hooks
                    .iter()
                    .map(|(e, g)| json!({"event": e, "tool_name_glob": g}))
                    .collect(),
            ),
        );
    }
    if o.prompt.is_some() {
        facet.insert("prompt".into(), json!(true));
    }
    if o.dynamic_prompt {
        facet.insert("dynamic_prompt".into(), json!(true));
    }
    if !o.commands.is_empty() {
        facet.insert("commands".into(), Value::Array(o.commands.iter().map(|c| json!({"name": c, "description": format!("TODO: what /{}:{c} does", o.name)})).collect()));
    }
    for (on, key) in [
        (o.status, "status"),
        (o.ui_ask, "ui_ask"),
        (o.trace, "trace"),
        (o.skills, "skills"),
    ] {
        if on {
            facet.insert(key.into(), json!(true));
        }
    }
    json!({"name": o.name, "version": "0.1.0", "description": format!("TODO: what {} does", o.name), "yolop": facet})
}

fn python_server(o: &NewOptions) -> String {
    let mut s = format!(
        "#!/usr/bin/env python3\n\"\"\"{name}: a YEP capability server. Edit the bodies marked EDIT; the rest is wiring.\"\"\"\nimport os\nimport sys\n\nsys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))\nfrom yep_sdk import Server, block, modify  # noqa: E402,F401  (the SDK is vendored beside this file)\n\nserver = Server({lit_name}{instr})\n",
        name = o.name,
        lit_name = lit(&o.name),
        instr = o
            .prompt
            .as_ref()
            .map(|p| format!(", instructions={}", lit(p)))
            .unwrap_or_default()
    );
    for t in &o.tools {
        s += &format!(
            "\n\n@server.tool({})\ndef {}(text: str, *, ctx):\n    {}\n    # EDIT: the `{t}` tool. Its parameters are its arguments: after changing them, run\n    # `yep manifest sync` so plugin.json says the same. ctx.update(text) streams progress.\n    return {{\"tool\": {}, \"text\": text}}\n",
            lit(t),
            ident(t),
            py_docstring(&tool_description(t)),
            lit(t)
        );
    }
    if !o.hooks.is_empty() {
        s += "\n\n@server.hook\ndef on_hook(params):\n    # EDIT: decide on each subscribed tool call (params: event, tool_name, args).\n    # Return None to allow, block(\"why\") to refuse, modify(new_args) to rewrite.\n    return None\n";
    }
    if o.dynamic_prompt {
        s += "\n\n@server.dynamic_prompt\ndef prompt():\n    # EDIT: the prompt text for this turn.\n    return \"\"\n";
    }
    for c in &o.commands {
        s += &format!(
            "\n\n@server.command({})\ndef command_{}(arguments, ctx):\n    # EDIT: the /{}:{c} command; the text is shown to the user.\n    return {} + arguments\n",
            lit(c),
            ident(c),
            o.name,
            lit(&format!("{c}: "))
        );
    }
    if o.trace {
        s += "\n\n@server.on_trace\ndef on_trace(event):\n    # EDIT: export one lifecycle event (event_type, id, ts, context, data).\n    pass\n";
    }
    if o.status {
        s += &format!(
            "\n\n@server.on_start\ndef started(ctx):\n    # EDIT: the status shown once the session starts.\n    ctx.status({})\n",
            lit(&format!("{} ready", o.name))
        );
    }
    s += "\n\nif __name__ == \"__main__\":\n    server.serve()\n";
    s
}

fn typescript_server(o: &NewOptions) -> String {
    let mut s = format!(
        "#!/usr/bin/env node\n// {name}: a YEP capability server. Edit the bodies marked EDIT; the rest is wiring.\nimport {{ Server, block, modify }} from \"./yep-sdk.js\"; // the SDK is vendored beside this file\n\nconst server = new Server({lit_name}{instr});\n",
        name = o.name,
        lit_name = lit(&o.name),
        instr = o
            .prompt
            .as_ref()
            .map(|p| format!(", {{ instructions: {} }}", lit(p)))
            .unwrap_or_default()
    );
    for t in &o.tools {
        s += &format!(
            "\nserver.tool(\n  {},\n  {{\n    description: {},\n    // The arguments, checked before each call. After changing them, run `yep manifest sync`.\n    schema: {{ type: \"object\", properties: {{ text: {{ type: \"string\" }} }}, required: [\"text\"] }},\n  }},\n  async ({{ text }}, ctx) => {{\n    // EDIT: the `{t}` tool. ctx.update(text) streams progress; ctx.signal aborts on cancel.\n    return {{ tool: {}, text }};\n  }},\n);\n",
            lit(t),
            lit(&tool_description(t)),
            lit(t)
        );
    }
    if !o.hooks.is_empty() {
        s += "\nserver.onHook(async (params) => {\n  // EDIT: decide on each subscribed tool call (params: event, tool_name, args).\n  // Return undefined to allow, block(\"why\") to refuse, modify(newArgs) to rewrite.\n  return undefined;\n});\n";
    }
    if o.dynamic_prompt {
        s += "\nserver.dynamicPrompt(async () => {\n  // EDIT: the prompt text for this turn.\n  return \"\";\n});\n";
    }
    for c in &o.commands {
        s += &format!(
            "\nserver.command({}, async (argumentsText, ctx) => {{\n  // EDIT: the /{}:{c} command; the text is shown to the user.\n  return {} + argumentsText;\n}});\n",
            lit(c),
            o.name,
            lit(&format!("{c}: "))
        );
    }
    if o.trace {
        s += "\nserver.onTrace((event) => {\n  // EDIT: export one lifecycle event (event_type, id, ts, context, data).\n});\n";
    }
    if o.status {
        s += &format!(
            "\nserver.onStart((ctx) => {{\n  // EDIT: the status shown once the session starts.\n  ctx.status({});\n}});\n",
            lit(&format!("{} ready", o.name))
        );
    }
    s += "\nawait server.serve();\n";
    s
}

fn rust_server(o: &NewOptions) -> String {
    let mut s = format!(
        "//! {name}: a YEP capability server. Edit the bodies marked EDIT; the rest is wiring.\n#![deny(clippy::print_stdout)]\n\n#[allow(unused_imports)]\nuse serde_json::{{Value, json}};\n#[allow(unused_imports)]\nuse yep_sdk::{{CommandExecuteResult, HookDecision, JsonSchema, Server, StatusLevel}};\n",
        name = o.name,
    );
    let types = args_types(&o.tools);
    for (t, ty) in o.tools.iter().zip(&types) {
        s += &format!(
            "\n// The arguments of `{t}`; its schema in plugin.json is derived from this type. After\n// changing it, run `yep manifest sync`. (A doc comment here would become the schema's description.)\n#[derive(serde::Deserialize, JsonSchema)]\nstruct {ty} {{\n    text: String,\n}}\n"
        );
    }
    s += &format!(
        "\nfn main() -> std::io::Result<()> {{\n    Server::new({})\n",
        lit(&o.name)
    );
    if let Some(p) = &o.prompt {
        s += &format!("        .instructions({})\n", lit(p));
    }
    for (t, ty) in o.tools.iter().zip(&types) {
        s += &format!(
            "        .typed_tool({}, {}, |args: {ty}, _ctx| {{\n            // EDIT: the `{t}` tool. ctx.update(text) streams progress.\n            Ok(json!({{ \"tool\": {}, \"text\": args.text }}))\n        }})\n",
            lit(t),
            lit(&tool_description(t)),
            lit(t)
        );
    }
    if !o.hooks.is_empty() {
        s += "        .on_hook(|fire| {\n            // EDIT: decide on each subscribed tool call (fire.event, fire.tool_name, fire.args).\n            let _ = fire;\n            HookDecision::allow()\n        })\n";
    }
    if o.dynamic_prompt {
        s += "        .dynamic_prompt(|| {\n            // EDIT: the prompt text for this turn.\n            String::new()\n        })\n";
    }
    for c in &o.commands {
        s += &format!(
            "        .command({}, |arguments, _ctx| {{\n            // EDIT: the /{}:{c} command; the text is shown to the user.\n            CommandExecuteResult::ok(format!(\"{c}: {{arguments}}\"))\n        }})\n",
            lit(c),
            o.name
        );
    }
    if o.trace {
        s += "        .on_trace(|event| {\n            // EDIT: export one lifecycle event.\n            let _ = event;\n        })\n";
    }
    if o.status {
        s += &format!(
            "        .on_start(|n| {{\n            // EDIT: the status shown once the session starts.\n            n.status({}, StatusLevel::Ok);\n        }})\n",
            lit(&format!("{} ready", o.name))
        );
    }
    s += "        .serve()\n}\n";
    s
}

fn rust_files(o: &NewOptions) -> Vec<(String, String)> {
    let v = "0.1.0";
    let mut files = vec![
        ("Cargo.toml".to_string(), format!("[package]\nname = \"{n}-server\"\nversion = \"{v}\"\nedition = \"2024\"\npublish = false\n\n[[bin]]\nname = \"{n}-server\"\npath = \"src/main.rs\"\n\n[dependencies]\nyep-sdk = {{ path = \"vendor/yep-sdk\" }}\nserde = {{ version = \"1\", features = [\"derive\"] }}\nserde_json = \"1\"\nschemars = \"1\"\n\n[workspace]\n", n = o.name)),
        ("vendor/yep-protocol/Cargo.toml".to_string(), "[package]\nname = \"yep-protocol\"\nversion = \"0.1.0\"\nedition = \"2024\"\npublish = false\n\n[features]\nschema = []\n\n[dependencies]\nserde = { version = \"1\", features = [\"derive\"] }\nserde_json = { version = \"1\", features = [\"raw_value\"] }\nthiserror = \"2\"\nmemchr = \"2\"\nitoa = \"1\"\n".to_string()),
        ("vendor/yep-sdk/Cargo.toml".to_string(), "[package]\nname = \"yep-sdk\"\nversion = \"0.1.0\"\nedition = \"2024\"\npublish = false\n\n[dependencies]\nyep-protocol = { path = \"../yep-protocol\" }\nserde = { version = \"1\", features = [\"derive\"] }\nserde_json = \"1\"\nlibc = \"0.2\"\nschemars = \"1\"\nserde_path_to_error = \"0.1\"\n".to_string()),
        (".gitignore".to_string(), "/target\n".to_string()),
        ("src/main.rs".to_string(), rust_server(o)),
    ];
    files.extend(RUST_SDK.iter().map(|(p, c)| (p.to_string(), c.to_string())));
    files
}

fn readme(o: &NewOptions, build: Option<&str>) -> String {
    let lang = match o.lang {
        Lang::Python => "Python (the SDK is vendored as `bin/yep_sdk.py`)",
        Lang::Typescript => {
            "JavaScript for Node >= 18, with TypeScript types for editors (the SDK is vendored as `bin/yep-sdk.js`, its types as `bin/yep-sdk.d.ts`); there is no build step"
        }
        Lang::Rust => "Rust (the SDK is vendored under `vendor/`)",
    };
    let build = build
        .map(|b| format!("Build the server first:\n\n```sh\n{b}\n```\n\n"))
        .unwrap_or_default();
    format!(
        "# {n}\n\nA YEP extension written in {lang}. Fill in the bodies marked `EDIT` in the server.\n\n{build}```sh\nyep install . {flags}{why}\nyep doctor {n}\nyep enable {n}\nyep session             # try it; `reload {n}` after an edit\n```\n\n`plugin.json` declares what the extension may do; a server can only narrow it. Each tool's\nargument schema there is derived from its handler. After changing a tool's parameters:\n\n```sh\n{rebuild}yep manifest sync .      # writes the handlers' schemas into plugin.json, shows the diff\nyep doctor .             # fails while plugin.json and the code disagree\n```\n",
        n = o.name,
        rebuild = if o.lang == Lang::Rust {
            "# rebuild first (above), then\n"
        } else {
            ""
        },
        flags = install_flags(o.lang),
        why = if o.lang == Lang::Rust {
            format!("   # after each rebuild: yep update {}", o.name)
        } else {
            "   # --link: your edits run without reinstalling".to_string()
        },
    )
}

/// How the next steps install a new package. A script server is linked, so edits run without
/// reinstalling (docs/authoring.md); a Rust server is rebuilt and installed again.
fn install_flags(lang: Lang) -> &'static str {
    match lang {
        Lang::Python | Lang::Typescript => "--link --yes",
        Lang::Rust => "--yes",
    }
}

/// Write the package. Refuses an invalid name and a non-empty target.
pub fn scaffold(o: &NewOptions) -> Result<Scaffolded, String> {
    if !valid_name(&o.name) {
        return Err(format!(
            "{:?} is not a valid extension name: use only A-Z a-z 0-9 _ -",
            o.name
        ));
    }
    for (event, _) in &o.hooks {
        if event != "pre_tool_use" && event != "post_tool_use" {
            return Err(format!(
                "hook event {event:?} is neither pre_tool_use nor post_tool_use"
            ));
        }
    }
    let dir = o.parent.join(&o.name);
    if std::fs::read_dir(&dir).is_ok_and(|mut d| d.next().is_some()) {
        return Err(format!("{} exists and is not empty", dir.display()));
    }
    let manifest_text = serde_json::to_string_pretty(&manifest(o)).unwrap_or_default() + "\n";
    // Correct by construction: the manifest must pass the same validation as an install.
    Manifest::parse(&manifest_text, &dir.join("plugin.json")).map_err(|e| e.to_string())?;
    let server = format!("bin/{}-server", o.name);
    let (mut files, edit, build): (Vec<(String, String)>, String, Option<String>) = match o.lang {
        Lang::Python => (
            vec![
                (server.clone(), python_server(o)),
                ("bin/yep_sdk.py".into(), PY_SDK.into()),
            ],
            server.clone(),
            None,
        ),
        Lang::Typescript => (
            vec![
                (server.clone(), typescript_server(o)),
                ("bin/yep-sdk.js".into(), TS_SDK.into()),
                ("bin/yep-sdk.d.ts".into(), TS_TYPES.into()),
                (
                    "bin/package.json".into(),
                    "{ \"type\": \"module\" }\n".into(),
                ),
            ],
            server.clone(),
            None,
        ),
        Lang::Rust => {
            let d = dir.display();
            let build = format!(
                "cargo build --release --manifest-path {d}/Cargo.toml && mkdir -p {d}/bin && cp {d}/target/release/{n}-server {d}/bin/",
                n = o.name
            );
            (rust_files(o), "src/main.rs".into(), Some(build))
        }
    };
    files.push(("plugin.json".into(), manifest_text));
    files.push(("README.md".into(), readme(o, build.as_deref())));
    if o.skills {
        files.push((format!("skills/{}/SKILL.md", o.name), format!("---\nname: {n}\ndescription: TODO: when to use {n}\n---\n\n# {n}\n\nTODO: what the agent should know.\n", n = o.name)));
    }
    for (rel, text) in &files {
        let path = dir.join(rel);
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent)
                .map_err(|e| format!("failed to create {}: {e}", parent.display()))?;
        }
        std::fs::write(&path, text)
            .map_err(|e| format!("failed to write {}: {e}", path.display()))?;
    }
    if o.lang != Lang::Rust {
        make_executable(&dir.join(&server))?;
    }
    let mut next = Vec::new();
    if let Some(b) = &build {
        next.push(b.clone());
    }
    // A bare name would mean the registry: spell the directory as a path.
    let shown = dir.display().to_string();
    let shown = if yep_store::source::looks_like_path(&shown) {
        shown
    } else {
        format!("./{shown}")
    };
    next.push(format!("yep install {shown} {}", install_flags(o.lang)));
    next.push(format!("yep doctor {}", o.name));
    next.push(format!("yep enable {}", o.name));
    Ok(Scaffolded {
        dir,
        files: files.into_iter().map(|(p, _)| p).collect(),
        edit,
        language: match o.lang {
            Lang::Python => "Python 3, standard library only",
            Lang::Typescript => "JavaScript (ES modules, Node 18+), typed by bin/yep-sdk.d.ts for editors: no build step, no TypeScript compiler",
            Lang::Rust => "Rust",
        }
        .into(),
        build,
        next,
    })
}

fn make_executable(path: &Path) -> Result<(), String> {
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755))
            .map_err(|e| format!("failed to make {} executable: {e}", path.display()))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The vendored crates' manifests name every dependency the workspace's crates have (not
    /// optional): one added to `yep-protocol` or `yep-sdk` and not here breaks every Rust
    /// server `yep new` makes.
    #[test]
    fn the_vendored_manifests_keep_up_with_the_crates() {
        let files = rust_files(&NewOptions {
            name: "t".into(),
            lang: Lang::Rust,
            tools: Vec::new(),
            hooks: Vec::new(),
            prompt: None,
            dynamic_prompt: false,
            commands: Vec::new(),
            status: false,
            ui_ask: false,
            trace: false,
            skills: false,
            parent: PathBuf::new(),
        });
        let vendored = |path: &str| -> toml::Table {
            let (_, text) = files.iter().find(|(p, _)| p == path).expect(path);
            text.parse().expect("a manifest")
        };
        for (krate, real) in [
            (
                "yep-protocol",
                include_str!("../../../yep-protocol/Cargo.toml"),
            ),
            ("yep-sdk", include_str!("../../../yep-sdk/Cargo.toml")),
        ] {
            let real: toml::Table = real.parse().unwrap();
            let ours = vendored(&format!("vendor/{krate}/Cargo.toml"));
            let ours = ours["dependencies"].as_table().unwrap();
            for (name, dep) in real["dependencies"].as_table().unwrap() {
                if dep.get("optional").and_then(toml::Value::as_bool) == Some(true) {
                    continue;
                }
                assert!(ours.contains_key(name), "vendor/{krate} lacks {name}");
            }
        }
    }

    #[test]
    fn tools_whose_names_spell_the_same_get_distinct_argument_types() {
        let tools: Vec<String> = ["web-search", "web_search", "Foo", "foo", "9lives"]
            .iter()
            .map(|t| t.to_string())
            .collect();
        assert_eq!(
            args_types(&tools),
            [
                "WebSearchArgs",
                "WebSearchArgs2",
                "FooArgs",
                "FooArgs2",
                "T9livesArgs"
            ]
        );
    }
}
