//! The layers keep to themselves: the runtime and the rpc core speak the capability model
//! only, so a new wire is one more dialect and touches neither.

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

/// What in `text` ties it to YEP: the protocol crate, or a YEP method name as a string.
fn wire_words(text: &str) -> Vec<String> {
    let mut found = Vec::new();
    if text.contains("yep_protocol") {
        found.push("imports yep_protocol".to_string());
    }
    for method in YEP_METHODS {
        if text.contains(&format!("\"{method}\"")) {
            found.push(format!("names the YEP method \"{method}\""));
        }
    }
    found
}

#[test]
fn the_runtime_and_the_rpc_core_know_no_wire() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    rust_files(&src.join("runtime"), &mut files);
    rust_files(&src.join("rpc"), &mut files);
    assert!(files.len() >= 8, "{files:?}");
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
}
