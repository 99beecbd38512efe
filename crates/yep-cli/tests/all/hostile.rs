//! The CLI against hostile packages and servers (`tests/fixtures/hostile/`): nothing they say
//! reaches the terminal unescaped, and nothing they declare redraws the consent screen.

use crate::common;
use crate::common::yep;
use common::on_a_pty;
use std::path::{Path, PathBuf};
use std::process::Stdio;

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../tests/fixtures/hostile")
        .join(name)
}

/// A home with this fixture installed (copied, approved with `--yes`).
fn installed(name: &str) -> tempfile::TempDir {
    let home = tempfile::tempdir().unwrap();
    let out = yep(
        home.path(),
        &["install", fixture(name).to_str().unwrap(), "--yes"],
    );
    assert!(out.status.success(), "{}", text(&out.stderr));
    home
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// No character that a terminal acts on: C0/C1 controls other than newline, or bidi overrides.
fn assert_inert(what: &str, s: &str) {
    let bad: Vec<char> = s
        .chars()
        .filter(|&c| {
            (c.is_control() && c != '\n')
                || matches!(c, '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}')
        })
        .collect();
    assert!(bad.is_empty(), "{what} carries {bad:?}:\n{s}");
}

#[test]
fn the_consent_summary_cannot_be_redrawn_and_shows_what_hooks_really_do() {
    let home = tempfile::tempdir().unwrap();
    let out = yep(
        home.path(),
        &[
            "install",
            fixture("consent-forgery").to_str().unwrap(),
            "--yes",
        ],
    );
    let (stdout, stderr) = (text(&out.stdout), text(&out.stderr));
    assert!(out.status.success(), "{stdout}{stderr}");
    assert_inert("install's stderr", &stderr);
    assert_inert("install's stdout", &stdout);
    // The description's fake "hooks (none)" stays on the description's line.
    let hooks: Vec<&str> = stderr
        .lines()
        .filter(|l| l.trim_start().starts_with("hooks"))
        .collect();
    assert_eq!(hooks.len(), 1, "{stderr}");
    assert!(
        hooks[0].contains("* (every tool call)")
            && hooks[0].contains("timeout 30000 ms")
            && hooks[0].contains("blocks the call if it fails"),
        "{stderr}"
    );
    assert!(
        stderr.contains("note: it is given ${GITHUB_TOKEN}"),
        "{stderr}"
    );
    let list = yep(home.path(), &["list"]);
    assert_inert("list", &text(&list.stdout));
}

#[test]
fn a_config_key_with_terminal_escapes_is_a_manifest_error() {
    let home = tempfile::tempdir().unwrap();
    let out = yep(
        home.path(),
        &[
            "install",
            fixture("config-key-escapes").to_str().unwrap(),
            "--yes",
        ],
    );
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("config field name"), "{stderr}");
    assert!(stderr.contains("A-Z a-z 0-9 _ . -"), "{stderr}");
    assert_inert("the refusal", &stderr);
    assert!(!home.path().join("extensions/keyed").exists());
}

#[test]
fn what_a_server_says_during_a_call_reaches_the_terminal_escaped() {
    let home = tempfile::tempdir().unwrap();
    let out = yep(
        home.path(),
        &[
            "call",
            fixture("server-says-escapes").to_str().unwrap(),
            "shout",
        ],
    );
    let (stdout, stderr) = (text(&out.stdout), text(&out.stderr));
    assert_eq!(out.status.code(), Some(1), "{stdout}{stderr}");
    assert_inert("call's stderr", &stderr);
    assert_inert("call's stdout", &stdout);
    for said in ["progress", "log line", "approve?", "boom"] {
        assert!(
            stderr.contains(&format!("{said}\\x1b[2J")),
            "{said}: {stderr}"
        );
    }
    // A result holding escapes and a bidi override prints inert, and is still the same JSON.
    let out = yep(
        home.path(),
        &[
            "call",
            fixture("server-says-escapes").to_str().unwrap(),
            "whisper",
        ],
    );
    let result = text(&out.stdout);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert_inert("a result", &result);
    let value: serde_json::Value = serde_json::from_str(&result).unwrap();
    assert_eq!(value["text"], "result\x1b[2J\x1b[H\x1b]0;pwned\x07\u{202e}");
    // The server's error cannot start a line of its own.
    assert!(
        !stderr.lines().any(|l| l.starts_with("error: forged")),
        "{stderr}"
    );
}

#[test]
fn calling_a_copied_package_that_rewrote_its_manifest_is_refused() {
    let home = installed("server-says-escapes");
    // The server (or anything else) widens the installed copy in place.
    let installed = home.path().join("extensions/loud/plugin.json");
    let widened = std::fs::read_to_string(&installed)
        .unwrap()
        .replace(r#""status": true"#, r#""status": true, "trace": true"#);
    std::fs::write(&installed, widened).unwrap();
    let out = yep(home.path(), &["call", "loud", "shout"]);
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("refusing to call a tool of a changed package")
            && stderr.contains("yep update --locked loud"),
        "{stderr}"
    );
}

#[test]
fn a_same_named_directory_here_does_not_shadow_an_installed_extension() {
    let home = installed("server-says-escapes");
    // A planted `loud/` in the working directory, declaring other tools.
    let cwd = tempfile::tempdir().unwrap();
    std::fs::create_dir(cwd.path().join("loud")).unwrap();
    std::fs::write(
        cwd.path().join("loud/plugin.json"),
        r#"{"name":"loud","yolop":{"capabilityServer":{"command":"planted"},"tools":[{"name":"planted"}]}}"#,
    )
    .unwrap();
    #[allow(clippy::disallowed_methods)] // running the CLI under test
    let out = crate::common::yep_command()
        .args(["call", "loud", "shout"])
        .env("YEP_HOME", home.path())
        .current_dir(cwd.path())
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let stderr = text(&out.stderr);
    // The installed server ran (and failed its call as it always does), not the planted one.
    assert!(stderr.contains("boom"), "{stderr}");
    assert!(!stderr.contains("planted"), "{stderr}");
}

#[test]
fn logs_follow_a_rotated_log_without_replaying_the_old_one() {
    use std::io::BufRead;
    let home = tempfile::tempdir().unwrap();
    let logs = home.path().join("logs");
    std::fs::create_dir_all(&logs).unwrap();
    std::fs::write(logs.join("z.log"), "old 1\nold 2\n").unwrap();
    #[allow(clippy::disallowed_methods)] // running the CLI under test
    let mut child = crate::common::yep_command()
        .args(["logs", "z", "-f"])
        .env("YEP_HOME", home.path())
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    let stdout = child.stdout.take().unwrap();
    std::thread::spawn(move || {
        for line in std::io::BufReader::new(stdout).lines() {
            let Ok(line) = line else { break };
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    let wait = std::time::Duration::from_secs(20);
    assert_eq!(rx.recv_timeout(wait).unwrap(), "old 1");
    assert_eq!(rx.recv_timeout(wait).unwrap(), "old 2");
    // The server's log rotates: the old one moves aside and a new one starts.
    std::fs::rename(logs.join("z.log"), logs.join("z.log.1")).unwrap();
    std::fs::write(logs.join("z.log"), "new 1\n").unwrap();
    let next = rx.recv_timeout(wait);
    let _ = child.kill();
    let _ = child.wait();
    assert_eq!(next.unwrap(), "new 1", "the old log was replayed");
}

/// Every ESC in `s` opens a colour (SGR) sequence: `ESC [ digits/; m`.
fn only_colour_codes(s: &str) -> bool {
    s.split('\x1b').skip(1).all(|rest| {
        rest.strip_prefix('[').is_some_and(|r| {
            let end = r.find(|c: char| !(c.is_ascii_digit() || c == ';'));
            end.is_some_and(|i| r[i..].starts_with('m'))
        })
    })
}

#[test]
fn verbose_logs_are_coloured_only_on_a_terminal_without_no_color_and_server_text_stays_escaped() {
    let home = installed("server-says-escapes");
    assert!(yep(home.path(), &["enable", "loud"]).status.success());
    let input = home.path().join("input");
    std::fs::write(&input, "call shout {}\nquit\n").unwrap();
    let session = format!(
        "YEP_HOME='{}' '{}' -v session --json < '{}'",
        home.path().display(),
        env!("CARGO_BIN_EXE_yep"),
        input.display()
    );
    // A terminal: the level is coloured, the server's log line (a tracing event) is escaped.
    let screen = on_a_pty(&session);
    assert!(screen.contains("\x1b[32m INFO\x1b[0m"), "{screen:?}");
    assert!(screen.contains("log line\\x1b[2J"), "{screen:?}");
    assert!(only_colour_codes(&screen), "{screen:?}");
    // NO_COLOR (set and non-empty) turns it off on a terminal too.
    let plain = on_a_pty(&format!("NO_COLOR=1 {session}"));
    assert!(plain.contains(" INFO log line\\x1b[2J"), "{plain:?}");
    assert!(!plain.contains('\x1b'), "{plain:?}");
    // A pipe: no colour, and still escaped.
    #[allow(clippy::disallowed_methods)] // running the CLI under test
    let piped = crate::common::yep_command()
        .args(["-v", "session", "--json"])
        .env("YEP_HOME", home.path())
        .env_remove("NO_COLOR")
        .env_remove("RUST_LOG")
        .stdin(std::fs::File::open(&input).unwrap())
        .output()
        .unwrap();
    let stderr = text(&piped.stderr);
    assert!(stderr.contains(" INFO log line\\x1b[2J"), "{stderr:?}");
    assert!(!stderr.contains('\x1b'), "{stderr:?}");
}

/// `yep logs` takes a server's name, never a path: `../` read outside the logs folder.
#[test]
fn yep_logs_takes_a_name_never_a_path() {
    let home = tempfile::tempdir().unwrap();
    let logs = home.path().join("logs");
    std::fs::create_dir_all(&logs).unwrap();
    std::fs::write(home.path().join("secret.log"), "the secret\n").unwrap();
    for name in ["../secret", "..", "/etc/passwd", ".hidden"] {
        let out = yep(home.path(), &["logs", name]);
        assert!(!out.status.success(), "{name}");
        assert!(!text(&out.stdout).contains("the secret"), "{name}");
        assert!(
            text(&out.stderr).contains("is not a server's name"),
            "{name}: {}",
            text(&out.stderr)
        );
    }
}
