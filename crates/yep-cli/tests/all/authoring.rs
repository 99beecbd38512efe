//! The author's loop, end to end, in each language: `yep new`, edit the hook, change a tool's
//! parameters (doctor fails), `yep manifest sync` (doctor passes), install, doctor, then drive
//! it in `yep session --json`.

use crate::common;
use serde_json::{Value, json};
use std::path::{Path, PathBuf};
use std::process::Output;

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// The CLI, every server it starts fully contained (`sandbox = "required"`): a scaffolded
/// server in each language runs inside the default profile.
fn yep(home: &Path, args: &[&str], stdin: &str) -> Output {
    common::yep_with_env(home, args, stdin, &[("YEP_SANDBOX", "required")])
}

fn ok(home: &Path, args: &[&str]) -> String {
    let out = yep(home, args, "");
    assert!(
        out.status.success(),
        "yep {args:?}:\n{}{}",
        text(&out.stdout),
        text(&out.stderr)
    );
    text(&out.stdout)
}

use common::edit;

fn author_loop(lang: &str) {
    let tmp = tempfile::tempdir().unwrap();
    let home = tmp.path().join("home");
    let name = format!("wx{lang}");
    let out = ok(
        &home,
        &[
            "new",
            &name,
            "--lang",
            lang,
            "--tool",
            "forecast",
            "--hook",
            "pre_tool_use:*",
            "--prompt",
            "Use forecast for weather.",
            "--command",
            "hello",
            "--status",
            "--dir",
            tmp.path().to_str().unwrap(),
            "--json",
        ],
    );
    let made: Value = serde_json::from_str(&out).unwrap();
    let dir = PathBuf::from(made["dir"].as_str().unwrap());
    let server = dir.join(made["edit"].as_str().unwrap());
    // `--lang typescript` says what it writes: JavaScript, typed, with no build step.
    let language = made["language"].as_str().unwrap();
    if lang == "typescript" {
        assert!(
            language.starts_with("JavaScript") && language.contains("no build step"),
            "{language}"
        );
        let readme = std::fs::read_to_string(dir.join("README.md")).unwrap();
        assert!(readme.contains("JavaScript for Node"), "{readme}");
    }
    // The next steps install as docs/authoring.md does: a script server linked, so edits run
    // without reinstalling; a Rust one copied, to be updated after each rebuild.
    let next: Vec<&str> = made["next"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s.as_str().unwrap())
        .collect();
    let install = next.iter().find(|s| s.starts_with("yep install ")).unwrap();
    let flags = if lang == "rust" {
        " --yes"
    } else {
        " --link --yes"
    };
    assert!(install.ends_with(flags), "{install}");
    assert!(
        next.contains(&format!("yep enable {name}").as_str()),
        "{next:?}"
    );
    let readme = std::fs::read_to_string(dir.join("README.md")).unwrap();
    assert!(
        readme.contains(&format!("yep install .{flags}")),
        "{readme}"
    );
    // A non-empty target is refused.
    let again = yep(
        &home,
        &[
            "new",
            &name,
            "--lang",
            lang,
            "--tool",
            "t",
            "--dir",
            tmp.path().to_str().unwrap(),
        ],
        "",
    );
    assert!(
        text(&again.stderr).contains("exists and is not empty"),
        "{}",
        text(&again.stderr)
    );

    // The one edit an author makes: block `git`.
    match lang {
        "python" => edit(
            &server,
            "    return None\n",
            "    if \"git\" in str(params.get(\"args\", {}).get(\"command\", \"\")):\n        return block(\"git is not allowed here\")\n    return None\n",
        ),
        "typescript" => edit(
            &server,
            "  return undefined;\n",
            "  if (String(params.args?.command ?? \"\").includes(\"git\")) return block(\"git is not allowed here\");\n  return undefined;\n",
        ),
        _ => edit(
            &server,
            "            let _ = fire;\n            HookDecision::allow()",
            "            if fire.args.get(\"command\").and_then(Value::as_str).is_some_and(|c| c.contains(\"git\")) {\n                return HookDecision::block(\"git is not allowed here\");\n            }\n            HookDecision::allow()",
        ),
    }
    common::build_package(lang, &dir, &name);
    // As scaffolded, the manifest says what the typed handler derives.
    let dir_arg = dir.to_str().unwrap();
    let doctor: Value = serde_json::from_str(&ok(&home, &["doctor", dir_arg, "--json"])).unwrap();
    assert_eq!(
        common::doctor_check(&doctor, "schema_sync")["status"],
        "pass",
        "{doctor:#}"
    );

    // The tool takes one more argument: the code changes, plugin.json does not (yet).
    common::add_days_parameter(lang, &server);
    // And the handler uses it.
    match lang {
        "python" => edit(
            &server,
            "\"text\": text}",
            "\"text\": text, \"days\": days}",
        ),
        "typescript" => {
            edit(
                &server,
                "async ({ text }, ctx)",
                "async ({ text, days }, ctx)",
            );
            edit(&server, "text };", "text, days };");
        }
        _ => edit(
            &server,
            "\"text\": args.text }",
            "\"text\": args.text, \"days\": args.days.unwrap_or(3) }",
        ),
    }
    common::build_package(lang, &dir, &name);
    let stale = yep(&home, &["doctor", dir_arg], "");
    assert!(!stale.status.success(), "{}", text(&stale.stdout));
    let said = text(&stale.stdout);
    let row = said.lines().find(|l| l.contains("schema_sync")).unwrap();
    assert!(
        row.starts_with("FAIL") && row.contains("`days`") && row.contains("yep manifest sync"),
        "{said}"
    );
    let synced = ok(&home, &["manifest", "sync", dir_arg]);
    assert!(synced.contains("+            \"days\": {"), "{synced}");
    let doctor: Value = serde_json::from_str(&ok(&home, &["doctor", dir_arg, "--json"])).unwrap();
    assert_eq!(
        common::doctor_check(&doctor, "schema_sync")["status"],
        "pass",
        "{doctor:#}"
    );
    ok(&home, &["manifest", "sync", dir_arg, "--check"]);

    ok(&home, &["install", dir.to_str().unwrap(), "--yes"]);
    let doctor: Value = serde_json::from_str(&ok(&home, &["doctor", &name, "--json"])).unwrap();
    assert_eq!(doctor["ok"], true, "{doctor:#}");
    assert!(
        doctor["checks"]
            .as_array()
            .unwrap()
            .iter()
            // Startup time is a figure, not a property: a loaded machine may warn on it.
            .filter(|c| c["name"] != "startup")
            .all(|c| c["status"] == "pass"),
        "{doctor:#}"
    );
    ok(&home, &["enable", &name]);

    let script = format!(
        "pre bash {{\"command\":\"git push\"}}\npre bash {{\"command\":\"ls\"}}\ncommand {name}:hello world\ncall forecast {{\"text\":\"Oslo\",\"days\":2}}\nprompt\nstatus\nquit\n"
    );
    let out = yep(&home, &["session", "--json"], &script);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let lines: Vec<Value> = text(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines[0]["decision"], "block", "{lines:?}");
    assert_eq!(lines[0]["reason"], "git is not allowed here");
    assert_eq!(lines[1]["decision"], "allow", "{lines:?}");
    assert_eq!(
        lines[2],
        json!({"success": true, "message": "hello: world"})
    );
    assert_eq!(
        lines[3]["result"],
        json!({"tool": "forecast", "text": "Oslo", "days": 2}),
        "{lines:?}"
    );
    assert!(
        lines[4]["prompt"]
            .as_str()
            .unwrap()
            .contains("Use forecast for weather."),
        "{lines:?}"
    );
    assert_eq!(
        lines[5]["status"][&name]["text"],
        format!("{name} ready"),
        "{lines:?}"
    );
}

#[test]
fn the_python_author_loop_works_end_to_end() {
    author_loop("python");
}

#[test]
fn the_typescript_author_loop_works_end_to_end() {
    author_loop("typescript");
}

#[test]
fn the_rust_author_loop_works_end_to_end() {
    author_loop("rust");
}

#[test]
fn new_refuses_bad_names_and_empty_packages() {
    let tmp = tempfile::tempdir().unwrap();
    let bad = yep(
        tmp.path(),
        &[
            "new",
            "no spaces",
            "--tool",
            "t",
            "--dir",
            tmp.path().to_str().unwrap(),
        ],
        "",
    );
    assert!(
        text(&bad.stderr).contains("not a valid extension name"),
        "{}",
        text(&bad.stderr)
    );
    let empty = yep(
        tmp.path(),
        &["new", "nothing", "--dir", tmp.path().to_str().unwrap()],
        "",
    );
    assert!(
        text(&empty.stderr).contains("declares no contributions")
            && text(&empty.stderr).contains("hint: say what it contributes, e.g. `--tool NAME`"),
        "{}",
        text(&empty.stderr)
    );
    let skills = ok(
        tmp.path(),
        &[
            "new",
            "skilled",
            "--skills",
            "--dir",
            tmp.path().to_str().unwrap(),
        ],
    );
    assert!(skills.contains("created"));
    assert!(tmp.path().join("skilled/skills/skilled/SKILL.md").is_file());
}
