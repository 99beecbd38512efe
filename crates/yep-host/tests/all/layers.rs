//! The layers keep to themselves: the runtime, the supervisor and the rpc core speak the
//! capability model only, and each dialect keeps its wire to itself, so a new wire is one
//! more dialect and touches none of them. Checked for every wire: YEP, zot, MCP and Claude
//! Code's hooks.

use std::path::{Path, PathBuf};

/// Every YEP method name, as the protocol crate spells it.
const YEP_METHODS: &[&str] = &[
    yep_protocol::methods::INITIALIZE,
    yep_protocol::methods::INITIALIZED,
    yep_protocol::methods::TOOL_CALL,
    yep_protocol::methods::TOOL_UPDATE,
    yep_protocol::methods::CANCEL,
    yep_protocol::methods::PROMPT_CONTRIBUTION,
    yep_protocol::methods::HOOK_FIRE,
    yep_protocol::methods::COMMAND_EXECUTE,
    yep_protocol::methods::CONFIG_CHANGED,
    yep_protocol::methods::WORKSPACE_CHANGED,
    yep_protocol::methods::TRACE_EVENT,
    yep_protocol::methods::UI_ASK,
    yep_protocol::methods::STATUS_CHANGED,
    yep_protocol::methods::LOG,
    yep_protocol::methods::SHUTDOWN,
    yep_protocol::methods::EXIT,
];

/// zot frame types that no other layer has a word for (`docs/zot.md`).
const ZOT_FRAMES: &[&str] = &[
    "hello_ack",
    "register_tool",
    "register_command",
    "tool_result",
    "command_invoked",
    "event_intercept",
    "event_intercept_response",
    "call_tool_cancel",
    "open_panel",
    "panel_render",
    "panel_key",
    "shutdown_ack",
    "submit_slash",
    "clear_notes",
];

/// MCP methods the host's client sends or hears.
const MCP_METHODS: &[&str] = &[
    "tools/list",
    "tools/call",
    "server/discover",
    "notifications/tools/list_changed",
];

/// Claude Code's hook events and answer fields.
const CLAUDE_WORDS: &[&str] = &[
    "PreToolUse",
    "PostToolUse",
    "UserPromptSubmit",
    "SessionStart",
    "hookSpecificOutput",
    "permissionDecision",
];

/// One wire: its dialect module, the crate that speaks it, and the strings only it says.
struct Wire {
    name: &'static str,
    /// Its module under `src/dialect/` (a folder, or `<module>.rs`).
    module: &'static str,
    /// A crate that speaks it, if one does.
    speaks: Option<&'static str>,
    /// What its `words` are ("method").
    kind: &'static str,
    words: &'static [&'static str],
}

const WIRES: &[Wire] = &[
    Wire {
        name: "YEP",
        module: "yep",
        speaks: Some("yep_protocol"),
        kind: "method",
        words: YEP_METHODS,
    },
    Wire {
        name: "zot",
        module: "zot",
        speaks: None,
        kind: "frame",
        words: ZOT_FRAMES,
    },
    Wire {
        name: "MCP",
        module: "mcp",
        speaks: Some("rmcp"),
        kind: "method",
        words: MCP_METHODS,
    },
    Wire {
        name: "Claude Code",
        module: "claude",
        speaks: None,
        kind: "hook word",
        words: CLAUDE_WORDS,
    },
];

/// The files that pick a wire: each builds its dialect value with the wire's own settings.
const WIRE_PICKERS: &[&str] = &["runtime/launch.rs", "runtime/mcp/launch.rs"];

/// A wire's type named outside the pickers, and why it may be.
const ALLOWED: &[(&str, &str, &str)] = &[(
    "runtime/mod.rs",
    "dialect::claude::ToolNames",
    "HostOptions carries the embedder's names for the agent's tools, handed to launch.rs",
)];

fn src() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("src")
}

/// `file`'s path under `src/`, with `/` between its parts.
fn under_src(file: &Path) -> String {
    let rel = file.strip_prefix(src()).unwrap();
    rel.components()
        .map(|c| c.as_os_str().to_string_lossy().into_owned())
        .collect::<Vec<_>>()
        .join("/")
}

/// `text` without its comment lines: a doc link to another layer is no dependency.
fn code(text: &str) -> String {
    text.lines()
        .filter(|l| !l.trim_start().starts_with("//"))
        .collect::<Vec<_>>()
        .join("\n")
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// What in `text` ties it to a wire: a crate that speaks it, or one of its words as a string.
fn wire_words(text: &str) -> Vec<String> {
    let mut found = Vec::new();
    for wire in WIRES {
        if let Some(speaks) = wire.speaks
            && text.contains(speaks)
        {
            found.push(format!("imports {speaks}"));
        }
        for word in wire.words {
            if text.contains(&format!("\"{word}\"")) {
                found.push(format!("names the {} {} \"{word}\"", wire.name, wire.kind));
            }
        }
    }
    found
}

#[test]
fn the_runtime_the_supervisor_and_the_rpc_core_know_no_wire() {
    let src = src();
    let mut files = Vec::new();
    rust_files(&src.join("runtime"), &mut files);
    rust_files(&src.join("supervisor"), &mut files);
    rust_files(&src.join("rpc"), &mut files);
    assert!(files.len() >= 15, "{files:?}");
    let mut problems = Vec::new();
    for file in files {
        let text = std::fs::read_to_string(&file).unwrap();
        for word in wire_words(&text) {
            problems.push(format!("{}: {word}", file.display()));
        }
    }
    assert!(
        problems.is_empty(),
        "wire details leaked above the dialects:\n{}",
        problems.join("\n")
    );
}

/// What in `code` reaches above the dialect layer.
fn upward(code: &str) -> Vec<String> {
    ["supervisor", "runtime", "probe", "doctor", "conformance"]
        .iter()
        .filter(|layer| code.contains(&format!("crate::{layer}")))
        .map(|layer| format!("imports crate::{layer}"))
        .collect()
}

#[test]
fn no_dialect_imports_a_layer_above_it() {
    let mut files = Vec::new();
    rust_files(&src().join("dialect"), &mut files);
    // Every wire's files are seen.
    for wire in WIRES {
        let module = format!("dialect/{}", wire.module);
        assert!(
            files.iter().any(|f| under_src(f).starts_with(&module)),
            "no file of {}",
            wire.name
        );
    }
    let mut problems = Vec::new();
    for file in files {
        let text = code(&std::fs::read_to_string(&file).unwrap());
        for word in upward(&text) {
            problems.push(format!("{}: {word}", under_src(&file)));
        }
    }
    assert!(
        problems.is_empty(),
        "a dialect reaches above its layer (runtime → supervisor → dialect, never back):\n{}",
        problems.join("\n")
    );
}

/// The other wires' modules `code`, a file of `wire`'s module (or of none), names.
fn other_wires(code: &str, wire: Option<&str>) -> Vec<String> {
    WIRES
        .iter()
        .filter(|w| Some(w.module) != wire)
        .filter(|w| {
            code.contains(&format!("dialect::{}", w.module))
                || (wire.is_some() && code.contains(&format!("super::{}::", w.module)))
        })
        .map(|w| format!("names the {} dialect", w.name))
        .collect()
}

#[test]
fn each_wire_keeps_to_its_own_module() {
    let mut files = Vec::new();
    rust_files(&src().join("dialect"), &mut files);
    let mut problems = Vec::new();
    for file in files {
        let path = under_src(&file);
        let Some(wire) = WIRES.iter().find(|w| {
            path.starts_with(&format!("dialect/{}/", w.module))
                || path == format!("dialect/{}.rs", w.module)
        }) else {
            continue;
        };
        let text = code(&std::fs::read_to_string(&file).unwrap());
        for word in other_wires(&text, Some(wire.module)) {
            problems.push(format!("{path} ({}): {word}", wire.name));
        }
    }
    assert!(
        problems.is_empty(),
        "a wire reaches into another's module:\n{}",
        problems.join("\n")
    );
}

/// What in `code` (a file of the supervisor or the runtime) names a wire: a dialect module,
/// a wire's own settings, or a decision on a dialect's name.
fn names_a_wire(code: &str) -> Vec<String> {
    let mut found = other_wires(code, None);
    for setting in ["ZotPin", "ClaudePin"] {
        if code.contains(setting) {
            found.push(format!("names {setting}, a wire's own setting"));
        }
    }
    // A dialect's name is for logs: nothing decides by it.
    for line in code.lines().filter(|l| l.contains("dialect.name()")) {
        if !line.contains("tracing::") && !line.trim_start().starts_with("wire =") {
            found.push(format!("decides by the dialect's name: {}", line.trim()));
        }
    }
    found
}

#[test]
fn the_supervisor_and_the_runtime_name_no_wire_but_where_one_is_picked() {
    let mut files = Vec::new();
    rust_files(&src().join("supervisor"), &mut files);
    rust_files(&src().join("runtime"), &mut files);
    let mut problems = Vec::new();
    for file in files {
        let path = under_src(&file);
        if WIRE_PICKERS.contains(&path.as_str()) {
            continue;
        }
        let mut text = code(&std::fs::read_to_string(&file).unwrap());
        for (allowed, word, _why) in ALLOWED {
            if path == *allowed {
                text = text.replace(word, "");
            }
        }
        for word in names_a_wire(&text) {
            problems.push(format!("{path}: {word}"));
        }
    }
    assert!(
        problems.is_empty(),
        "the supervisor or the runtime knows a wire (build its dialect in {}):\n{}",
        WIRE_PICKERS.join(" or "),
        problems.join("\n")
    );
    // The pickers still pick: the check would pass for nothing otherwise.
    for picker in WIRE_PICKERS {
        let text = std::fs::read_to_string(src().join(picker)).unwrap();
        assert!(
            !names_a_wire(&code(&text)).is_empty(),
            "{picker} picks no wire"
        );
    }
}

#[test]
fn the_check_sees_a_leak() {
    assert_eq!(
        wire_words("use yep_protocol::Message;"),
        ["imports yep_protocol"]
    );
    assert_eq!(
        wire_words("conn.send(\"tool/update\")"),
        ["names the YEP method \"tool/update\""]
    );
    assert!(wire_words("a tool update, a status change").is_empty());
    assert_eq!(
        wire_words("send(\"hello_ack\")"),
        ["names the zot frame \"hello_ack\""]
    );
    assert_eq!(
        wire_words("use rmcp::model::Tool; ask(\"tools/list\")"),
        ["imports rmcp", "names the MCP method \"tools/list\""]
    );
    assert_eq!(
        wire_words("if event == \"PreToolUse\""),
        ["names the Claude Code hook word \"PreToolUse\""]
    );
}

#[test]
fn the_layer_checks_see_a_leak() {
    assert_eq!(
        upward("use crate::supervisor::ServerSpec;"),
        ["imports crate::supervisor"]
    );
    assert!(upward(&code("/// Seen by [`crate::runtime::Call`].\nfn f() {}")).is_empty());
    assert_eq!(
        other_wires("use crate::dialect::mcp::Mcp;", Some("zot")),
        ["names the MCP dialect"]
    );
    assert!(other_wires("use super::frames::Hello;", Some("zot")).is_empty());
    assert_eq!(
        names_a_wire("pub pin: Option<crate::store::zot::ZotPin>,"),
        ["names ZotPin, a wire's own setting"]
    );
    assert_eq!(
        names_a_wire("let key = match self.opts.dialect.name() {"),
        ["decides by the dialect's name: let key = match self.opts.dialect.name() {"]
    );
    assert!(
        names_a_wire("tracing::debug!(wire = self.opts.dialect.name(), \"started\");").is_empty()
    );
}
