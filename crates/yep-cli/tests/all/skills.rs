//! Skills over MCP's skills extension (SEP-2640): a Claude Code plugin's skills, served by
//! `yep mcp serve`, listed, fetched and verified by the official TypeScript client's skills
//! host (`SkillsClient`) at two revisions and by the Python SDK's client; and what a package
//! holds beside its skills (a dot file, a link) is never served.

use crate::claude::over_mcp;
use crate::common;

use common::{ok, text, yep};
use serde_json::{Value, json};
use std::path::{Path, PathBuf};

/// A manifest-less Claude Code plugin `pdf-kit` with two skills: `pdf-forms` (frontmatter
/// with a list, a reference, two scripts, one of them bytes; a dot file and a link beside
/// them) and `notes`, whose `SKILL.md` has no frontmatter.
fn pdf_kit(tmp: &Path) -> PathBuf {
    let dir = tmp.join("pdf-kit");
    let forms = dir.join("skills/pdf-forms");
    for sub in ["references", "scripts"] {
        std::fs::create_dir_all(forms.join(sub)).unwrap();
    }
    std::fs::create_dir_all(dir.join("skills/notes")).unwrap();
    std::fs::write(
        forms.join("SKILL.md"),
        "---\nname: pdf-forms\ndescription: \"Fill PDF forms: fields and checkboxes\"\n\
         allowed-tools: [Read, Bash]\n---\n# PDF forms\nRead references/fields.md first.\n",
    )
    .unwrap();
    std::fs::write(forms.join("references/fields.md"), "# Fields\n").unwrap();
    std::fs::write(forms.join("scripts/fill.py"), "print('filled')\n").unwrap();
    std::fs::write(forms.join("scripts/blank.bin"), b"\xff\xfe\x00bin").unwrap();
    std::fs::write(forms.join(".env"), "TOKEN=not-for-anyone\n").unwrap();
    std::os::unix::fs::symlink("fields.md", forms.join("references/alias.md")).unwrap();
    std::fs::write(
        dir.join("skills/notes/SKILL.md"),
        "# Notes\nKeep notes short.\n",
    )
    .unwrap();
    dir
}

/// A home with `pdf-kit` installed and enabled.
fn skills_home(tmp: &Path) -> PathBuf {
    let home = tmp.join("home");
    let plugin = pdf_kit(tmp);
    ok(&yep(&home, &["install", plugin.to_str().unwrap(), "--yes"]));
    ok(&yep(&home, &["enable", "pdf-kit"]));
    home
}

const FORMS: &str = "skill://pdf-kit/pdf-forms";

/// `pdf-forms`' files, as listed: the dot file and the link are not among them.
fn forms_files() -> Vec<String> {
    [
        "SKILL.md",
        "references/fields.md",
        "scripts/blank.bin",
        "scripts/fill.py",
    ]
    .map(|f| format!("{FORMS}/{f}"))
    .to_vec()
}

/// `tests/mcp/ts_skills.mjs` at `revision` against `yep mcp serve` on stdio: its report.
fn ts_skills(revision: &str, home: &Path) -> Value {
    let args = [revision, env!("CARGO_BIN_EXE_yep"), home.to_str().unwrap()];
    common::node_report("ts_skills.mjs", &args)
}

#[test]
fn the_official_typescript_skills_host_lists_reads_and_verifies_a_plugins_skills() {
    let tmp = tempfile::tempdir().unwrap();
    let home = skills_home(tmp.path());
    for revision in ["2025-11-25", "2026-07-28"] {
        let report = ts_skills(revision, &home);
        let about = format!("{revision}: {report}");
        assert!(report.get("error").is_none(), "{about}");
        assert_eq!(report["negotiated"], revision, "{about}");
        assert_eq!(report["supported"], true, "{about}");
        assert_eq!(report["directory_read"], true, "{about}");
        assert_eq!(report["invalid"], json!([]), "{about}");
        assert_eq!(
            report["skills"],
            json!([
                {"uri": "skill://pdf-kit/notes/SKILL.md", "name": "notes",
                 "description": "Keep notes short.",
                 "files": ["skill://pdf-kit/notes/SKILL.md"]},
                {"uri": format!("{FORMS}/SKILL.md"), "name": "pdf-forms",
                 "description": "Fill PDF forms: fields and checkboxes", "files": forms_files()},
            ]),
            "{about}"
        );
        // Every file read, and its size and digest (and the SKILL.md's frontmatter) checked
        // against the entry by the client itself.
        let reads = &report["reads"];
        for file in forms_files() {
            assert_eq!(reads[&file]["verified"], true, "{file}: {about}");
        }
        assert_eq!(
            reads[format!("{FORMS}/SKILL.md")]["frontmatter"],
            json!({"name": "pdf-forms", "description": "Fill PDF forms: fields and checkboxes",
                   "allowed-tools": ["Read", "Bash"]}),
            "{about}"
        );
        // A SKILL.md without frontmatter is served with the name and description yep gave it.
        assert_eq!(
            reads["skill://pdf-kit/notes/SKILL.md"]["frontmatter"],
            json!({"name": "notes", "description": "Keep notes short."}),
            "{about}"
        );
        assert_eq!(reads[format!("{FORMS}/scripts/blank.bin")]["bytes"], 6);
        assert_eq!(
            reads[FORMS],
            json!([
                ["SKILL.md", "text/markdown"],
                ["references", "inode/directory"],
                ["scripts", "inode/directory"]
            ]),
            "{about}"
        );
        assert_eq!(
            reads[format!("{FORMS}/scripts")],
            json!([["blank.bin", null], ["fill.py", "text/x-python"]]),
            "{about}"
        );
        assert_eq!(report["get"]["uri"], "skill://pdf-kit/notes/SKILL.md");
        if revision == "2026-07-28" {
            assert_eq!(report["get"]["ttlMs"], 0, "{about}");
            assert_eq!(report["get"]["cacheScope"], "private", "{about}");
        }
        assert_eq!(report["unknown"], -32602, "{about}");
    }
}

#[test]
fn the_python_sdks_client_lists_and_fetches_a_plugins_skill_and_nothing_beside_it() {
    let tmp = tempfile::tempdir().unwrap();
    let home = skills_home(tmp.path());
    let skill_md = format!("{FORMS}/SKILL.md");
    let mut steps = vec![
        json!(["extensions"]),
        json!(["request", "skills/list", {}]),
        json!(["request", "skills/get", {"uri": skill_md}]),
        json!(["request", "skills/get", {"uri": "skill://pdf-kit/nothing/SKILL.md"}]),
        json!(["request", "resources/directory/read", {"uri": format!("{FORMS}/references")}]),
        json!(["request", "resources/directory/read", {"uri": format!("{FORMS}/nowhere")}]),
        json!(["read", format!("{FORMS}/.env")]),
        json!(["read", format!("{FORMS}/references/alias.md")]),
        json!([
            "read",
            format!("{FORMS}/../../../pdf-kit/skills/pdf-forms/.env")
        ]),
    ];
    steps.extend(forms_files().iter().map(|f| json!(["digest", f])));
    let seen = over_mcp(&home, tmp.path(), &steps);
    assert_eq!(
        seen[0],
        json!({"io.modelcontextprotocol/skills": {"directoryRead": true}})
    );
    let listed = &seen[1]["skills"];
    let forms = listed
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["uri"] == skill_md)
        .unwrap_or_else(|| panic!("{listed}"));
    assert_eq!(
        seen[2]["skill"], *forms,
        "skills/get gives the listed entry"
    );
    assert_eq!(seen[3], json!({"error": -32602}));
    assert_eq!(
        seen[4]["resources"],
        json!([{"uri": format!("{FORMS}/references/fields.md"), "name": "fields.md",
                "mimeType": "text/markdown", "size": 9}])
    );
    assert_eq!(seen[5], json!({"error": -32602}));
    // The dot file and the link are no resources; no path climbs out.
    for (step, refused) in seen[6..9].iter().enumerate() {
        assert!(
            refused.to_string().contains("no skill file at"),
            "{:?}: {refused}",
            steps[6 + step]
        );
    }
    // Each file's bytes, as read, are what the entry's digest says.
    let digests: Vec<Value> = forms["resources"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["digest"].clone())
        .collect();
    assert_eq!(seen[9..].to_vec(), digests);
}

/// A skill directory `release-notes` (a SKILL.md and a template) under `dir`, with `body` in
/// its SKILL.md.
fn release_notes(dir: &Path, body: &str) {
    let skill = dir.join("release-notes");
    std::fs::create_dir_all(skill.join("templates")).unwrap();
    std::fs::write(
        skill.join("SKILL.md"),
        format!("---\nname: release-notes\ndescription: How to write release notes\n---\n{body}\n"),
    )
    .unwrap();
    std::fs::write(skill.join("templates/entry.md"), "- what changed\n").unwrap();
}

/// A server on the official Python SDK offers a skill (`tests/mcp/skills_server.py`): `yep mcp
/// add` reads it whole, checks it and pins it with the server's tools; `yep session` lists it
/// and `yep mcp serve` serves it onward, as approved, even after the server changes it; `yep
/// trust` shows the change and pins the new one.
#[test]
fn an_mcp_servers_skills_are_pinned_with_its_approval_listed_and_served_onward() {
    let tmp = tempfile::tempdir().unwrap();
    let home = tmp.path().join("home");
    let skills = tmp.path().join("offered");
    release_notes(&skills, "# Release notes\nUse templates/entry.md.");
    let server = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/mcp/skills_server.py");
    let python = std::env::var("YEP_MCP_PYTHON")
        .ok()
        .filter(|p| !p.is_empty())
        .unwrap_or_else(|| "python3".into());
    let added = common::yep_in(
        tmp.path(),
        &home,
        &[
            "mcp",
            "add",
            "notes",
            "--",
            &python,
            server,
            skills.to_str().unwrap(),
        ],
        "",
    );
    ok(&added);
    let lock = std::fs::read_to_string(home.join("extensions.lock")).unwrap();
    assert!(lock.contains("release-notes"), "{lock}");

    let (answers, warnings) = crate::claude::session(tmp.path(), &home, "skills\nquit\n");
    let listed = answers[0].to_string();
    assert!(
        listed.contains("release-notes") && listed.contains("mcp.notes"),
        "{listed} {warnings:?}"
    );

    // Served onward, with its files and digests, as any skill of yep's.
    let uri = "skill://mcp.notes/release-notes/SKILL.md";
    let onward = |home: &Path| {
        over_mcp(
            home,
            tmp.path(),
            &[
                json!(["request", "skills/get", {"uri": uri}]),
                json!(["read", uri]),
            ],
        )
    };
    let seen = onward(&home);
    let files: Vec<&str> = seen[0]["skill"]["resources"]
        .as_array()
        .unwrap_or_else(|| panic!("{seen:?}"))
        .iter()
        .map(|r| r["uri"].as_str().unwrap())
        .collect();
    assert_eq!(
        files,
        [uri, "skill://mcp.notes/release-notes/templates/entry.md"]
    );
    assert!(
        seen[1][0]
            .as_str()
            .unwrap()
            .contains("Use templates/entry.md."),
        "{seen:?}"
    );

    // The server changes its skill: what is served is still what was approved.
    release_notes(&skills, "# Release notes\nPaste the whole diff.");
    let seen = onward(&home);
    let text = seen[1][0].as_str().unwrap();
    assert!(
        text.contains("Use templates/entry.md.") && !text.contains("whole diff"),
        "{text}"
    );

    // `yep trust` says so and pins the new one.
    let trusted = common::yep_in(tmp.path(), &home, &["trust", "notes", "--yes"], "");
    let said = text_of(&trusted);
    assert!(
        said.contains("skills (SEP-2640) other than approved"),
        "{said}"
    );
    let seen = onward(&home);
    assert!(
        seen[1][0]
            .as_str()
            .unwrap()
            .contains("Paste the whole diff."),
        "{seen:?}"
    );
}

fn text_of(out: &std::process::Output) -> String {
    format!("{}{}", text(&out.stdout), text(&out.stderr))
}
