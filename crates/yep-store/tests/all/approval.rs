//! The one approval model through the store's library calls: the kind the lock records, and
//! `Home::grant`/`Home::revoke` deciding what widens, without the CLI.

use std::path::Path;
use yep_store::approval::{GrantError, PackageKind, Subject};
use yep_store::grants::SandboxGrants;
use yep_store::{AlwaysYes, Home, InstallOptions};

fn package(dir: &Path, manifest: serde_json::Value) {
    std::fs::create_dir_all(dir).unwrap();
    std::fs::write(dir.join("plugin.json"), manifest.to_string()).unwrap();
}

fn yep_package(dir: &Path) {
    package(
        dir,
        serde_json::json!({
            "name": "notes",
            "version": "1.0.0",
            "yolop": {
                "capabilityServer": {"command": "notes-server"},
                "tools": [{"name": "note", "description": "Keep a note", "inputSchema": {"type": "object"}}],
            },
            "sandbox": {"net": ["example.com"]},
        }),
    );
}

fn grants(text: &str) -> SandboxGrants {
    SandboxGrants::parse(text).unwrap()
}

#[test]
fn every_install_records_its_kind_in_the_lock() {
    let home_dir = tempfile::tempdir().unwrap();
    let home = Home {
        root: home_dir.path().join("yep"),
    };
    let src = tempfile::tempdir().unwrap();
    yep_package(&src.path().join("notes"));
    let codex = src.path().join("review");
    std::fs::create_dir_all(codex.join(".codex-plugin")).unwrap();
    std::fs::write(
        codex.join(".codex-plugin/plugin.json"),
        r#"{"name": "review", "version": "0.1.0", "description": "d"}"#,
    )
    .unwrap();
    std::fs::create_dir_all(codex.join("skills/check")).unwrap();
    std::fs::write(
        codex.join("skills/check/SKILL.md"),
        "---\nname: check\ndescription: checks\n---\nCheck it.\n",
    )
    .unwrap();
    for dir in ["notes", "review"] {
        let spec = src.path().join(dir).display().to_string();
        home.install(&spec, &InstallOptions::default(), &mut AlwaysYes)
            .unwrap();
    }
    let lock = home.lockfile().unwrap();
    assert_eq!(lock.get("notes").unwrap().kind, Some(PackageKind::Yep));
    assert_eq!(lock.get("review").unwrap().kind, Some(PackageKind::Codex));
    let text = std::fs::read_to_string(home.root.join("extensions.lock")).unwrap();
    assert!(text.contains("kind = \"codex\""), "{text}");
}

#[test]
fn a_grant_asks_only_for_what_widens_and_a_revoke_keeps_the_manifests_own() {
    let home_dir = tempfile::tempdir().unwrap();
    let home = Home {
        root: home_dir.path().join("yep"),
    };
    let src = tempfile::tempdir().unwrap();
    yep_package(&src.path().join("notes"));
    let spec = src.path().join("notes").display().to_string();
    home.install(&spec, &InstallOptions::default(), &mut AlwaysYes)
        .unwrap();
    let subject = || Subject::package(&home, "notes").unwrap().unwrap();
    let anywhere = |_: &Path| false;
    let data = src.path().display().to_string();

    // What its manifest asks for already: nothing is asked, nothing is kept.
    let mut asked = Vec::new();
    let same = home
        .grant(
            &subject(),
            &grants("net:example.com"),
            &anywhere,
            &mut |new| {
                asked.push(new.to_vec());
                true
            },
        )
        .unwrap();
    assert!(same.new.is_empty() && asked.is_empty());
    assert!(home.lockfile().unwrap().granted("notes", None).is_empty());

    // More than it has: asked with exactly that; a no keeps nothing.
    let wider = grants(&format!("read:{data}"));
    let no = home.grant(&subject(), &wider, &anywhere, &mut |new| {
        assert_eq!(new, [format!("read {data}")]);
        false
    });
    assert!(matches!(no, Err(GrantError::Declined(_))), "{no:?}");
    assert!(home.lockfile().unwrap().granted("notes", None).is_empty());
    let yes = home
        .grant(&subject(), &wider, &anywhere, &mut |_| true)
        .unwrap();
    assert_eq!(yes.new, [format!("read {data}")]);
    assert_eq!(home.lockfile().unwrap().granted("notes", None), wider);
    let effective = yes.effective.lines();
    assert!(
        effective.contains(&"net example.com".to_string()),
        "{effective:?}"
    );

    // A missing path it may not make is refused before anything is kept.
    let gone = grants("read:/nonexistent/yep-approval-test");
    let missing = home.grant(&subject(), &gone, &anywhere, &mut |_| true);
    assert!(
        matches!(missing, Err(GrantError::Missing { kind: "read", .. })),
        "{missing:?}"
    );

    // The manifest's own grant is not the user's to take back; the user's is.
    let own = home.revoke(&subject(), Some(&grants("net:example.com")));
    assert!(
        matches!(own, Err(GrantError::NotGranted { own: true, .. })),
        "{own:?}"
    );
    let taken = home.revoke(&subject(), None).unwrap();
    assert_eq!(taken.taken, [format!("read {data}")]);
    assert!(home.lockfile().unwrap().granted("notes", None).is_empty());
}
