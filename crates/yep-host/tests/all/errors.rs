//! Errors an embedder can match on: every fallible function of the host returns a typed error,
//! never a `String` to parse.

use serde_json::json;
use std::path::{Path, PathBuf};
use yep_host::capability::{BoxFuture, Events, HostToolCall, HostToolError, NoEvents};
use yep_host::runtime::mcp::{McpLaunchError, McpSource, launch};
use yep_host::runtime::{BuiltinError, ServerTools};
use yep_host::store::Home;
use yep_host::store::mcp::Origin;

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

/// The 1-based lines of `text` where a `Result<…>` whose last type argument is `String`
/// opens, however its arguments nest or wrap over lines.
fn string_results(text: &str) -> Vec<usize> {
    let bytes = text.as_bytes();
    let mut found = Vec::new();
    let mut from = 0;
    while let Some(at) = text[from..].find("Result<") {
        let start = from + at;
        let open = start + "Result<".len();
        from = open;
        // A name ending in `Result` (`ToolResult<`) is another type.
        if start > 0 && (bytes[start - 1].is_ascii_alphanumeric() || bytes[start - 1] == b'_') {
            continue;
        }
        // Where each top-level argument ends (at its comma, or the closing `>`).
        // `depth` counts angle brackets, `inner` parentheses and square brackets (a tuple's
        // commas are not the `Result`'s).
        let (mut depth, mut inner, mut ends, mut i) = (1usize, 0usize, Vec::new(), open);
        while i < bytes.len() && depth > 0 {
            match bytes[i] {
                // An arrow (`Fn() -> T`) closes nothing.
                b'-' if bytes.get(i + 1) == Some(&b'>') => i += 1,
                b'<' => depth += 1,
                b'>' => depth -= 1,
                b'(' | b'[' => inner += 1,
                b')' | b']' => inner = inner.saturating_sub(1),
                b',' if depth == 1 && inner == 0 => ends.push(i),
                _ => {}
            }
            i += 1;
        }
        if depth != 0 {
            continue;
        }
        ends.push(i - 1);
        let starts = std::iter::once(open).chain(ends.iter().map(|e| e + 1));
        let args: Vec<&str> = starts
            .zip(&ends)
            .map(|(start, &end)| text[start..end].trim())
            .filter(|arg| !arg.is_empty())
            .collect();
        let error = args.get(1).copied();
        if matches!(
            error,
            Some("String" | "std::string::String" | "alloc::string::String")
        ) {
            found.push(text[..open].lines().count());
        }
    }
    found
}

#[test]
fn the_scan_finds_string_errors_across_lines_and_nesting() {
    let text = "fn a() -> Result<(), String> {}\n\
                fn b() -> io::Result<String> {}\n\
                fn c(\n) -> Result<\n    Vec<(String, u8)>,\n    String,\n> {}\n\
                type D = oneshot::Sender<Result<Box<dyn Fn() -> u8>, String>>;\n\
                fn e() -> Result<String, HostError> {}\n\
                fn f() -> ToolResult<(), String> {}\n\
                fn g() -> Result<(Spec, Options), String> {}\n\
                fn h() -> Result<(String, String), Error> {}\n";
    assert_eq!(string_results(text), [1, 4, 8, 11]);
}

/// The host's API is typed errors all the way up: an embedder matches on a variant, never
/// parses a `String`.
#[test]
fn no_result_in_the_host_carries_a_string_error() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    files.sort();
    let mut offenders = Vec::new();
    for file in &files {
        let text = std::fs::read_to_string(file).unwrap();
        for line in string_results(&text) {
            let rel = file.strip_prefix(&src).unwrap_or(file);
            offenders.push(format!("src/{}:{line}", rel.display()));
        }
    }
    assert!(
        offenders.is_empty(),
        "`Result<_, String>` in yep-host (give it a typed error, as `HostError` is):\n{}",
        offenders.join("\n")
    );
}

/// An embedder tells why an MCP server cannot run by matching, not by reading the sentence.
#[test]
fn an_embedder_matches_on_why_an_mcp_server_cannot_run() {
    let dir = tempfile::tempdir().unwrap();
    let home = Home {
        root: dir.path().join("home"),
    };
    let server: yep_host::manifest::McpServer =
        serde_json::from_value(json!({"type": "carrier-pigeon", "command": "coo"})).unwrap();
    let source = McpSource {
        name: "birds".into(),
        origin: Origin::Home,
        server: server.clone(),
        shown: server,
        code: None,
        needs_login: false,
    };
    match launch(
        &home,
        &source,
        dir.path(),
        &Default::default(),
        Default::default(),
    ) {
        Err(McpLaunchError::Transport { server, transport }) => {
            assert_eq!(
                (server.as_str(), transport.as_str()),
                ("birds", "carrier-pigeon")
            );
        }
        Err(other) => panic!("another error: {other}"),
        Ok(_) => panic!("a transport nobody speaks was launched"),
    }
}

/// The defaults of the traits an embedder implements answer with variants it can match.
#[tokio::test]
async fn the_default_host_tool_and_builtin_refusals_are_variants() {
    let call = HostToolCall {
        tool: "read_file".into(),
        args: json!({}),
        chain: Vec::new(),
        cancel: Default::default(),
    };
    let ran: BoxFuture<_> = NoEvents.run_tool("x", call);
    assert!(matches!(ran.await, Err(HostToolError::Unavailable)));

    struct Nothing;
    impl ServerTools for Nothing {}
    match Nothing.run_builtin("read_file", json!({})).await {
        Err(BuiltinError::NotOffered { tool }) => assert_eq!(tool, "read_file"),
        other => panic!("{other:?}"),
    }
}
