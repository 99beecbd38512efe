//! Fuzz target bodies: every parser that reads untrusted bytes, with the invariants it must keep.
//!
//! Shared by the cargo-fuzz targets under `fuzz/` (nightly) and by `tests/all/fuzz_corpus.rs`, which
//! replays every committed corpus file and crash on stable, so both run the very same code. A
//! body panics when an invariant breaks; an error returned by the code under test is fine.

use crate::manifest::Manifest;
use crate::store::lockfile::Lockfile;
use crate::store::{Home, config, settings, summary};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use yep_protocol::{
    HostNotification, HostRequest, Message, RawMessage, ServerNotification, ServerRequest,
};

// The archive unpacker exists only with the store's `fetch` feature.
#[cfg(feature = "fetch")]
mod unpack;
#[cfg(feature = "fetch")]
use unpack::unpack;

/// A target body: feed it any bytes; it panics only when an invariant breaks.
type Body = fn(&[u8]);

/// Every target: its name (the directory under `fuzz/corpus/` and `fuzz/artifacts/`) and body.
pub const TARGETS: &[(&str, Body)] = &[
    ("wire", wire),
    ("manifest", manifest),
    ("zot_manifest", zot_manifest),
    ("claude_plugin", claude_plugin),
    ("cargo_manifest", cargo_manifest),
    ("lockfile", lockfile),
    ("settings", settings),
    ("gitconfig", gitconfig),
    #[cfg(feature = "fetch")]
    ("unpack", unpack),
];

/// Feed `data` to the body of target `name` (one of [`TARGETS`]): what each `fuzz/` target and
/// the stable corpus replay run. An unknown name panics.
pub fn run(name: &str, data: &[u8]) {
    let Some((_, body)) = TARGETS.iter().find(|(target, _)| *target == name) else {
        panic!("no fuzz target {name}");
    };
    body(data)
}

/// The frame reader and the envelope classifier, in both dialect directions: split the bytes
/// into capped lines as a connection does, then type each line the way the host (server to host
/// methods) and the SDK (host to server methods) do.
fn wire(data: &[u8]) {
    let cap = crate::rpc::DEFAULT_MAX_FRAME_BYTES;
    let frames = crate::rpc::split_frames(data, cap);
    let mut consumed = 0;
    for frame in &frames {
        let line = frame
            .as_ref()
            .unwrap_or_else(|len| panic!("a {len}-byte line can't exceed a 4 MiB cap"));
        assert!(!line.contains(&b'\n'), "a frame holds a newline");
        assert_eq!(&data[consumed..consumed + line.len()], &line[..]);
        consumed += line.len() + 1;
        classify(line);
    }
    // A small cap cuts the same frames short: what it reads is a prefix of the above.
    let small = 1 + usize::from(data.first().copied().unwrap_or(0) % 64);
    let capped = crate::rpc::split_frames(data, small);
    for (i, frame) in capped.iter().enumerate() {
        match frame {
            Ok(line) => {
                assert!(line.len() <= small, "a frame is over its cap");
                assert_eq!(frames.get(i), Some(frame), "a small cap changed a frame");
            }
            Err(len) => {
                assert!(*len > small, "a frame within its cap was refused");
                assert_eq!(
                    i,
                    capped.len() - 1,
                    "reading went on past an oversized line"
                );
            }
        }
    }
}

fn classify(line: &[u8]) {
    if line.iter().all(u8::is_ascii_whitespace) {
        return;
    }
    // The fast writer of results and arguments writes what serde_json writes.
    if let Ok(value) = serde_json::from_slice::<serde_json::Value>(line) {
        let theirs = serde_json::to_string(&value).expect("a Value serializes");
        assert_eq!(
            yep_protocol::json::to_string(&value),
            theirs,
            "the fast writer differs"
        );
    }
    let raw = RawMessage::parse(line);
    // The SDK's one-pass reading of a request agrees with the two-pass one where it answers.
    if let Some((id, request)) = HostRequest::parse_line(line) {
        match &raw {
            Ok(RawMessage::Request {
                id: two,
                method,
                params,
            }) => {
                assert_eq!(id, *two, "the one-pass id differs");
                let typed = HostRequest::parse_raw(method, *params);
                assert_eq!(
                    typed.ok().as_ref(),
                    Some(&request),
                    "the one-pass request differs"
                );
            }
            other => panic!("read in one pass as {request:?}, in two as {other:?}"),
        }
    }
    let Ok(msg) = Message::parse(line) else {
        return;
    };
    // The host's own reading, payloads left as text, classifies it the same.
    let raw = raw.expect("a line Message reads, RawMessage reads");
    match (&msg, &raw) {
        (Message::Request(a), RawMessage::Request { id, method, .. }) => {
            assert_eq!((a.id, a.method.as_str()), (*id, method.as_ref()));
        }
        (Message::Notification(a), RawMessage::Notification { method, .. }) => {
            assert_eq!(a.method, method.as_ref());
        }
        (Message::Response(a), RawMessage::Response { id, result }) => {
            assert_eq!((a.id, a.result.is_ok()), (*id, result.is_ok()));
            if let (Ok(value), Ok(text)) = (&a.result, result) {
                let read: serde_json::Value = serde_json::from_str(text.get()).expect("its text");
                assert_eq!(value, &read, "the result's text reads as the result");
            }
        }
        _ => panic!("{msg:?} read raw as {raw:?}"),
    }
    // The encoding reads back as the same kind of message, with the same id and method.
    let again = Message::parse(msg.to_line().as_bytes()).expect("an encoded message parses");
    match (&msg, &again) {
        (Message::Request(a), Message::Request(b)) => {
            assert_eq!((a.id, &a.method), (b.id, &b.method));
        }
        (Message::Notification(a), Message::Notification(b)) => assert_eq!(a.method, b.method),
        (Message::Response(a), Message::Response(b)) => {
            assert_eq!((a.id, a.result.is_ok()), (b.id, b.result.is_ok()));
        }
        _ => panic!("{msg:?} read back as {again:?}"),
    }
    match msg {
        Message::Request(req) => {
            if let Ok(typed) = ServerRequest::parse(&req.method, req.params.clone()) {
                assert_eq!(typed.method(), req.method);
                let _ = typed.params();
            }
            if let Ok(typed) = HostRequest::parse(&req.method, req.params) {
                assert_eq!(typed.method(), req.method);
                let _ = typed.params();
            }
        }
        Message::Notification(n) => {
            if let Ok(typed) = ServerNotification::parse(&n.method, n.params.clone()) {
                assert_eq!(typed.method(), n.method);
                let _ = typed.params();
            }
            if let Ok(typed) = HostNotification::parse(&n.method, n.params) {
                assert_eq!(typed.method(), n.method);
                let _ = typed.params();
            }
        }
        Message::Response(resp) => {
            if let Err(err) = resp.result {
                let _ = err.to_string();
            }
        }
    }
}

/// `plugin.json` parsing and validation, and what is shown from a valid one before consent.
fn manifest(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    if let Ok(m) = Manifest::parse(text, Path::new("plugin.json")) {
        accepted(&m);
    }
}

/// A zot `extension.json`, read as zot's Go decoder reads it: what is shown of a valid one is
/// escaped, and it reads the same once written.
fn zot_manifest(data: &[u8]) {
    use crate::store::zot::{Registrations, ZotManifest, ZotPin};
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let Ok(m) = ZotManifest::parse(text, Path::new("extension.json")) else {
        return;
    };
    let shown = summary::zot_summary(&m, &ZotPin::default(), &[]);
    assert!(
        !shown.chars().any(|c| c.is_control() && c != '\n'),
        "a control character in the summary: {shown:?}"
    );
    let _ = m.approved(&Registrations::default());
    let text = serde_json::to_string(&m).expect("a zot manifest serializes");
    let again = ZotManifest::parse(&text, Path::new("extension.json"))
        .unwrap_or_else(|e| panic!("a valid zot manifest no longer validates once written: {e}"));
    assert_eq!(m, again, "a zot manifest changed once written");
}

/// The files of a Claude Code plugin, NUL-separated in this order, written to a scratch
/// package (an empty part is no file).
const CLAUDE_PARTS: [&str; 5] = [
    ".claude-plugin/plugin.json",
    "hooks/hooks.json",
    "commands/c.md",
    ".mcp.json",
    "skills/s/SKILL.md",
];

/// A Claude Code plugin (manifest, hooks, a command, MCP servers, a skill), read, approved and
/// summarised: its approved manifest reads again, its pin is its own diff's empty side and
/// reads back as written, and nothing in its summary can move the cursor. Each part is also a
/// hook matcher and a permission rule.
fn claude_plugin(data: &[u8]) {
    use crate::store::claude::{ClaudePin, ClaudePlugin, Matcher, Overrides, PermissionRule};
    let dir = Scratch::new();
    for (rel, part) in CLAUDE_PARTS.iter().zip(data.split(|b| *b == 0)) {
        if part.is_empty() {
            continue;
        }
        let path = dir.0.join(rel);
        std::fs::create_dir_all(path.parent().expect("a part has a parent"))
            .expect("create a scratch part dir");
        std::fs::write(&path, part).expect("write a scratch part");
        if let Ok(text) = std::str::from_utf8(part) {
            if let Ok(m) = Matcher::parse(text) {
                let _ = m.matches("Bash");
            }
            if let Some(rule) = PermissionRule::parse(text) {
                let _ = rule.allows_command("git status");
            }
            // Each part is also a command line to cut into its simple commands.
            let _ = crate::store::claude::shell::subcommands(text);
            let rm = PermissionRule::parse("Bash(rm *)").expect("a rule");
            let _ = rm.takes_any_part(text);
        }
    }
    let Ok(plugin) = ClaudePlugin::load(&dir.0, &Overrides::default()) else {
        return;
    };
    let Ok(approval) = plugin.approved() else {
        return;
    };
    // An approval yep made reads back as one (an LSP-only plugin's runs nothing).
    accepted_as(&approval.manifest, Manifest::parse_approval);
    let shown = summary::claude_summary(&approval.manifest, &approval.pin, &approval.notes);
    assert!(
        !shown
            .chars()
            .any(|c| (c.is_control() && c != '\n') || ('\u{202a}'..='\u{202e}').contains(&c)),
        "a control character in the summary: {shown:?}"
    );
    assert_eq!(
        approval.pin.diff(&approval.pin),
        (Vec::new(), false),
        "a pin differs from itself"
    );
    // Its hooks' command lines, split as `sh` would, as a workspace's project pins them.
    if let Ok(root) = dir.0.canonicalize() {
        let _ = crate::store::code::hooks_code(&approval.pin.hooks, &root);
    }
    let text = serde_json::to_string(&approval.pin).expect("a pin serializes");
    let again: ClaudePin = serde_json::from_str(&text).expect("a pin reads back");
    assert_eq!(approval.pin, again, "a pin changed once written");
}

/// The `[package.metadata.yolop]` facet of a crate's `Cargo.toml`, read from a real file.
fn cargo_manifest(data: &[u8]) {
    let dir = Scratch::new();
    let path = dir.0.join("Cargo.toml");
    std::fs::write(&path, data).expect("write the scratch Cargo.toml");
    if let Ok(m) = Manifest::from_cargo_toml(&path) {
        accepted(&m);
    }
}

/// What every valid manifest must allow: a summary, a diff against itself that is empty, and
/// a serialized form that validates again to the same contributions.
fn accepted(m: &Manifest) {
    accepted_as(m, Manifest::parse);
}

/// [`accepted`], reading the serialized form back with `parse`.
fn accepted_as(
    m: &Manifest,
    parse: fn(&str, &Path) -> Result<Manifest, crate::store::manifest::ManifestError>,
) {
    let _ = summary::summary(m);
    let _ = summary::flags(m);
    let _ = summary::config_fields(m);
    let _ = crate::store::contributions(m);
    assert!(
        summary::diff(m, m).is_empty(),
        "a manifest differs from itself"
    );
    let text = serde_json::to_string(m).expect("a manifest serializes");
    let again = parse(&text, Path::new("plugin.json"))
        .unwrap_or_else(|e| panic!("a valid manifest no longer validates once written: {e}"));
    assert!(
        summary::diff(m, &again).is_empty(),
        "a manifest changed once written"
    );
}

/// `extensions.lock`, read from a real file: a corrupt lock is an error, never a panic, and a
/// lock that reads writes back to one that reads the same.
fn lockfile(data: &[u8]) {
    let dir = Scratch::new();
    let path = dir.0.join("extensions.lock");
    std::fs::write(&path, data).expect("write the scratch lock");
    let Ok(lock) = Lockfile::load(&path) else {
        return;
    };
    for entry in &lock.extensions {
        let _ = entry.source.to_string();
        let _ = entry.approved();
        let _ = lock.get(&entry.name);
    }
    let again: Lockfile = toml::from_str(&lock.render())
        .unwrap_or_else(|e| panic!("a lock yep wrote does not read again: {e}"));
    let mut sorted = lock.clone();
    sorted.extensions.sort_by(|a, b| a.name.cmp(&b.name));
    assert_eq!(sorted, again, "a lock changed once written");
}

/// `settings.toml` and `connections.toml` as the store reads and edits them: whatever the file
/// holds, an edit that succeeds is seen by the next read.
fn settings(data: &[u8]) {
    let dir = Scratch::new();
    let home = Home {
        root: dir.0.clone(),
    };
    let path = home.settings_path();
    std::fs::write(&path, data).expect("write the scratch settings");
    std::fs::write(home.connections_path(), data).expect("write the scratch connections");
    let Ok(names) = settings::enabled(&path) else {
        return;
    };
    for name in names.iter().map(String::as_str).chain(["fuzz"]) {
        let _ = settings::config(&path, name);
        let _ = config::secrets(&home, name);
    }
    if settings::set_enabled(&path, "fuzz", true).is_ok() {
        let now = settings::enabled(&path).expect("settings yep wrote read again");
        assert!(
            now.iter().any(|n| n == "fuzz"),
            "an enabled extension is not listed"
        );
    }
    if settings::set_enabled(&path, "fuzz", false).is_ok() {
        let now = settings::enabled(&path).expect("settings yep wrote read again");
        assert!(
            !now.iter().any(|n| n == "fuzz"),
            "a disabled extension is listed"
        );
    }
    let value = serde_json::json!("v");
    if settings::set_config(&path, "fuzz", "k", &value).is_ok() {
        let now = settings::config(&path, "fuzz").expect("settings yep wrote read again");
        assert_eq!(
            now.get("k"),
            Some(&value),
            "a config value set is not read back"
        );
    }
}

/// A fresh directory under the system temp dir, removed on drop.
struct Scratch(PathBuf);

impl Scratch {
    fn new() -> Scratch {
        static NEXT: AtomicU64 = AtomicU64::new(0);
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        // On tmpfs where there is one: the store fsyncs what it writes, which would otherwise
        // cost more than the parsing under test.
        let shm = Path::new("/dev/shm");
        let base = if shm.is_dir() {
            shm.to_path_buf()
        } else {
            std::env::temp_dir()
        };
        let path = base.join(format!("yep-fuzz-{}-{n}", std::process::id()));
        let _ = std::fs::remove_dir_all(&path);
        std::fs::create_dir_all(&path).expect("create a scratch dir");
        Scratch(path)
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// A git config file, sanitised as a sandboxed process's copy is
/// ([`yep_sandbox::gitconfig::sanitise`]): what it writes is only what the policy keeps (a
/// file it names points at the copy), and sanitising that again changes nothing.
fn gitconfig(data: &[u8]) {
    use yep_sandbox::gitconfig::{Verdict, entries, sanitise, verdict};
    let (dir, home) = (Path::new("/home/fuzz/cfg"), Path::new("/home/fuzz"));
    let copy = Path::new("/tmp/copy");
    let once = sanitise(data, dir, Some(home), &mut |_, _| Some(copy.to_path_buf()));
    for (section, sub, key, value) in entries(&once) {
        match verdict(&section, sub.as_deref(), &key, value.as_deref()) {
            Verdict::Keep => {}
            Verdict::Drop => panic!("{section}.{key} was copied, which the policy leaves out"),
            _ => assert_eq!(
                value.as_deref(),
                Some(b"/tmp/copy".as_slice()),
                "{section}.{key} names a file that is not the copy"
            ),
        }
    }
    let twice = sanitise(&once, dir, Some(home), &mut |_, p| Some(p));
    assert_eq!(
        String::from_utf8_lossy(&twice),
        String::from_utf8_lossy(&once),
        "sanitising a sanitised config changed it"
    );
}
