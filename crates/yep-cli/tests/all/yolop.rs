//! The published yolop 0.22 agent installs a package made with `yep new` and `yep manifest
//! sync`, in each language, and passes it in its own doctor: the manifest stays inside the
//! fields yolop knows, and the handshake's extra tool fields are ones yolop ignores.
//!
//! Ignored by default: it builds yolop 0.22.0 from crates.io once, into the target dir
//! (`YOLOP_BIN=/path/to/yolop` uses a build you have). Run it with
//! `cargo test -p yep-cli --test all yolop:: -- --ignored`.

use crate::common;
use common::text;
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn yep(home: &Path, args: &[&str]) -> String {
    let out = common::yep_with_stdin(home, args, "");
    assert!(
        out.status.success(),
        "yep {args:?}:\n{}{}",
        text(&out.stdout),
        text(&out.stderr)
    );
    text(&out.stdout)
}

/// yolop 0.22.0: `YOLOP_BIN`, or `cargo install`ed once into the target dir.
fn yolop_bin() -> PathBuf {
    if let Some(bin) = std::env::var_os("YOLOP_BIN").filter(|b| !b.is_empty()) {
        return PathBuf::from(bin);
    }
    let root = Path::new(env!("CARGO_BIN_EXE_yep"))
        .parent()
        .unwrap()
        .parent()
        .unwrap()
        .join("yolop-0.22.0");
    let bin = root.join("bin/yolop");
    if !bin.is_file() {
        #[allow(clippy::disallowed_methods)] // the published agent, from crates.io
        let status = Command::new(env!("CARGO"))
            .args([
                "install",
                "yolop",
                "--version",
                "0.22.0",
                "--locked",
                "--root",
            ])
            .arg(&root)
            .status()
            .unwrap();
        assert!(status.success(), "cargo install yolop 0.22.0 failed");
    }
    bin
}

/// yolop with its config, data and extensions under `dir`, run from `workspace`.
fn yolop(bin: &Path, dir: &Path, workspace: &Path, args: &[&str]) -> Output {
    #[allow(clippy::disallowed_methods)] // the agent under test
    let out = Command::new(bin)
        .args(args)
        .current_dir(workspace)
        .env("HOME", dir.join("home"))
        .env("XDG_CONFIG_HOME", dir.join("xdg"))
        .env("YOLOP_CONFIG_DIR", dir.join("config"))
        .env("YOLOP_DATA_DIR", dir.join("data"))
        .env_remove("YOLOP_EXTENSIONS_DIR")
        .env_remove("YOLOP_CONTROL_ENDPOINT")
        .env_remove("YOLOP_CONTROL_TOKEN")
        .env_remove("YOLOP_CONTROL_ROUTES")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "yolop {args:?}:\n{}{}",
        text(&out.stdout),
        text(&out.stderr)
    );
    out
}

#[test]
#[ignore = "needs the network: builds the yolop 0.22 agent from crates.io"]
fn yolop_0_22_installs_synced_packages_and_its_doctor_passes_them() {
    let bin = yolop_bin();
    for lang in ["python", "typescript", "rust"] {
        let tmp = tempfile::tempdir().unwrap();
        let home = tmp.path().join("yep-home");
        let name = format!("wx{lang}");
        let made: Value = serde_json::from_str(&yep(
            &home,
            &[
                "new",
                &name,
                "--lang",
                lang,
                "--tool",
                "forecast",
                "--status",
                "--dir",
                tmp.path().to_str().unwrap(),
                "--json",
            ],
        ))
        .unwrap();
        let dir = PathBuf::from(made["dir"].as_str().unwrap());
        let server = dir.join(made["edit"].as_str().unwrap());
        // A parameter more, synced into plugin.json as an author would.
        common::add_days_parameter(lang, &server);
        common::build_package(lang, &dir, &name);
        let synced = yep(&home, &["manifest", "sync", dir.to_str().unwrap()]);
        assert!(synced.contains("\"days\""), "{synced}");

        let workspace = tmp.path().join("workspace");
        std::fs::create_dir_all(&workspace).unwrap();
        let agent = tmp.path().join("yolop");
        let install = yolop(
            &bin,
            &agent,
            &workspace,
            &["extensions", "install", dir.to_str().unwrap()],
        );
        let said = text(&install.stdout);
        assert!(said.contains(&name), "{lang}: {said}");
        let doctor = yolop(&bin, &agent, &workspace, &["extensions", "doctor", &name]);
        // yolop's doctor exits 0 either way: its verdict is the report's `ok`.
        let report: Value = serde_json::from_str(&text(&doctor.stdout))
            .unwrap_or_else(|e| panic!("{lang}: {e}: {}", text(&doctor.stdout)));
        assert_eq!(report["ok"], true, "{lang}: {report:#}");
        let checks = report["checks"].as_array().unwrap();
        assert!(
            checks.iter().any(|c| c["name"] == "handshake")
                && checks.iter().all(|c| c["status"] == "pass"),
            "{lang}: {report:#}"
        );
    }
}
