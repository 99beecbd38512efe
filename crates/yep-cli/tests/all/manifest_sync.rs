//! `yep manifest sync` against a real Python server with typed tools, and `yep doctor`'s
//! `schema_sync` check before and after: a hand-edited, stale plugin.json is brought in line,
//! every unrelated byte stays as written, a removed tool is reported and kept.

use crate::common;
use crate::common::yep;
use common::text;
use serde_json::{Value, json};
use std::path::{Path, PathBuf};

const SERVER: &str = r#"#!/usr/bin/env python3
from yep_sdk import Server

server = Server("wx")

@server.tool
def forecast(city: str, days: int = 3, *, ctx):
    """The weather for a city."""
    return {"city": city, "days": days}

@server.tool
def alerts(region: str):
    """Weather alerts."""
    return []

@server.tool("raw")
def raw(args, ctx):
    return args

server.serve()
"#;

/// Hand-written: four-space indent, its own key order, fields sync has no business touching.
const STALE: &str = r#"{
    "name": "wx",
    "version": "0.2.0",
    "description": "Weather, by hand",
    "engines": { "yolop": ">=0.11" },
    "yolop": {
        "capabilityServer": { "command": "bin/wx-server" },
        "tools": [
            {
                "name": "forecast",
                "schema": { "type": "object", "properties": { "city": { "type": "string" } }, "required": ["city"] },
                "description": "Old words",
                "never_defer": true
            },
            { "name": "raw", "description": "Anything goes" },
            { "name": "gone", "description": "Removed from the code" }
        ],
        "status": true
    }
}
"#;

fn package(tmp: &Path) -> PathBuf {
    yep_test_support::Package::at(tmp.join("wx"))
        .file("plugin.json", STALE)
        .executable("bin/wx-server", SERVER)
        .python_sdk()
        .into_dir()
}

fn doctor(home: &Path, dir: &Path) -> Value {
    let out = yep(home, &["doctor", dir.to_str().unwrap(), "--json"]);
    serde_json::from_str(&text(&out.stdout))
        .unwrap_or_else(|e| panic!("{e}: {}", text(&out.stderr)))
}

#[test]
fn a_stale_manifest_is_brought_in_line_and_everything_else_stays_as_written() {
    let tmp = tempfile::tempdir().unwrap();
    let home = tmp.path().join("home");
    let dir = package(tmp.path());
    let dir_arg = dir.to_str().unwrap();

    // Doctor fails on the drift and names the fix.
    let before = doctor(&home, &dir);
    assert_eq!(before["ok"], false, "{before:#}");
    let sync_row = common::doctor_check(&before, "schema_sync");
    assert_eq!(sync_row["status"], "fail");
    let detail = sync_row["detail"].as_str().unwrap();
    assert!(
        detail.contains("`forecast`: the code takes `days` too"),
        "{detail}"
    );
    assert!(detail.contains("yep manifest sync"), "{detail}");
    assert_eq!(
        common::doctor_check(&before, "tools")["status"],
        "fail",
        "alerts is served, undeclared"
    );

    // --check changes nothing and says so by its exit code.
    let check = yep(&home, &["manifest", "sync", dir_arg, "--check"]);
    assert_eq!(check.status.code(), Some(1), "{}", text(&check.stdout));
    assert!(
        text(&check.stdout).contains("out of sync"),
        "{}",
        text(&check.stdout)
    );
    assert_eq!(
        std::fs::read_to_string(dir.join("plugin.json")).unwrap(),
        STALE
    );

    let out = yep(&home, &["manifest", "sync", dir_arg, "--json"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let report: Value = serde_json::from_str(&text(&out.stdout)).unwrap();
    assert_eq!(report["changed"], true);
    assert_eq!(report["written"], true);
    let changes: Vec<(String, String)> = report["changes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| {
            (
                c["change"].as_str().unwrap().into(),
                c["tool"].as_str().unwrap().into(),
            )
        })
        .collect();
    let pair = |a: &str, b: &str| (a.to_string(), b.to_string());
    assert_eq!(
        changes,
        vec![
            pair("schema", "forecast"),
            pair("description", "forecast"),
            pair("unserved", "gone"),
            pair("new", "alerts"),
        ]
    );
    assert!(
        report["diff"]
            .as_str()
            .unwrap()
            .contains("+                \"description\": \"Weather alerts.\""),
        "{}",
        report["diff"]
    );

    let after = std::fs::read_to_string(dir.join("plugin.json")).unwrap();
    let manifest: Value = serde_json::from_str(&after).unwrap();
    let tools = manifest["yolop"]["tools"].as_array().unwrap();
    let names: Vec<&str> = tools.iter().map(|t| t["name"].as_str().unwrap()).collect();
    // The removed tool is kept (reported, never dropped); the new one is added last.
    assert_eq!(names, ["forecast", "raw", "gone", "alerts"]);
    assert_eq!(
        tools[0],
        json!({"name": "forecast", "description": "The weather for a city.", "never_defer": true,
               "schema": {"type": "object", "properties": {"city": {"type": "string"}, "days": {"type": "integer", "default": 3}}, "required": ["city"]}})
    );
    // A raw handler says nothing of its schema or description: its entry is left alone.
    assert_eq!(
        tools[1],
        json!({"name": "raw", "description": "Anything goes"})
    );
    assert_eq!(tools[3]["schema"]["required"], json!(["region"]));
    // Everything outside the tools array is byte for byte as written, and what was added
    // follows the file's four-space indent.
    let head = &STALE[..STALE.find("\"tools\"").unwrap()];
    let tail = &STALE[STALE.find("        \"status\"").unwrap()..];
    assert!(after.starts_with(head), "{after}");
    assert!(after.ends_with(tail), "{after}");
    assert!(
        after.contains("\n                \"name\": \"alerts\",\n"),
        "{after}"
    );
    assert!(
        after.contains(r#"            { "name": "gone", "description": "Removed from the code" }"#),
        "{after}"
    );

    // Doctor passes now; the kept tool is a warning, not a failure.
    let synced = doctor(&home, &dir);
    assert_eq!(synced["ok"], true, "{synced:#}");
    assert_eq!(
        common::doctor_check(&synced, "schema_sync")["status"],
        "pass"
    );
    assert_eq!(common::doctor_check(&synced, "tools")["status"], "warn");
    assert!(
        common::doctor_check(&synced, "tools")["detail"]
            .as_str()
            .unwrap()
            .contains("gone")
    );

    // A second sync changes nothing and says why the removed tool is still there.
    let again = yep(&home, &["manifest", "sync", dir_arg]);
    assert!(again.status.success());
    let said = text(&again.stdout);
    assert!(said.contains("is in sync"), "{said}");
    assert!(
        said.lines()
            .any(|l| l.starts_with("GONE?") && l.contains("`gone`")),
        "{said}"
    );
    assert_eq!(
        std::fs::read_to_string(dir.join("plugin.json")).unwrap(),
        after
    );
}

#[test]
fn a_server_that_does_not_start_leaves_the_manifest_untouched() {
    let tmp = tempfile::tempdir().unwrap();
    let home = tmp.path().join("home");
    let dir = package(tmp.path());
    std::fs::write(
        dir.join("bin/wx-server"),
        "#!/bin/sh\necho 'not yep' >&2\nexit 3\n",
    )
    .unwrap();
    let out = yep(&home, &["manifest", "sync", dir.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1));
    let stderr = text(&out.stderr);
    assert!(
        stderr.contains("the server did not start, so nothing was synced"),
        "{stderr}"
    );
    assert!(stderr.contains("hint:"), "{stderr}");
    assert_eq!(
        std::fs::read_to_string(dir.join("plugin.json")).unwrap(),
        STALE
    );

    // Not a package at all: a clear error.
    let none = yep(
        &home,
        &[
            "manifest",
            "sync",
            tmp.path().join("nope").to_str().unwrap(),
        ],
    );
    assert!(
        text(&none.stderr).contains("is not a package directory"),
        "{}",
        text(&none.stderr)
    );
}

/// A `--link`ed package is held to the manifest it was approved with: after `yep manifest
/// sync`, doctor says that is what the code differs from and that `yep update` approves the
/// new schema; a parameter the code now requires is a change `yep update` shows and asks for.
#[test]
fn a_synced_linked_package_is_held_to_its_approved_manifest_until_yep_update() {
    let tmp = tempfile::tempdir().unwrap();
    let home = tmp.path().join("home");
    let dir = package(tmp.path());
    let dir_arg = dir.to_str().unwrap();
    let installed = yep(&home, &["install", dir_arg, "--link", "--yes"]);
    assert!(installed.status.success(), "{}", text(&installed.stderr));

    let approve = |change: &str| {
        let synced = yep(&home, &["manifest", "sync", dir_arg]);
        assert!(synced.status.success(), "{}", text(&synced.stderr));
        let report = doctor(&home, Path::new("wx"));
        let row = common::doctor_check(&report, "schema_sync");
        assert_eq!(row["status"], "fail", "{report:#}");
        let detail = row["detail"].as_str().unwrap();
        for part in [
            "the code's schemas differ from the approved manifest",
            change,
            "plugin.json matches the code already: `yep update wx` approves the new schema",
        ] {
            assert!(detail.contains(part), "{part}: {detail}");
        }
        assert!(!detail.contains("yep manifest sync"), "{detail}");
        // Without a terminal or --yes, update shows the change and asks.
        let asked = yep(&home, &["update", "wx"]);
        assert_eq!(asked.status.code(), Some(1), "{}", text(&asked.stdout));
        let shown = text(&asked.stderr);
        assert!(
            shown.contains("~ tool forecast definition changed")
                && shown.contains("this update asks for more than you approved")
                && !shown.contains("narrowed only"),
            "{shown}"
        );
        let updated = yep(&home, &["update", "wx", "--yes"]);
        assert!(updated.status.success(), "{}", text(&updated.stderr));
        let report = doctor(&home, Path::new("wx"));
        let row = common::doctor_check(&report, "schema_sync");
        assert_eq!(row["status"], "pass", "{report:#}");
    };
    approve("`forecast`: the code takes `days` too");

    // A parameter the code now requires.
    common::edit(
        &dir.join("bin/wx-server"),
        "def forecast(city: str, days",
        "def forecast(city: str, units: str, days",
    );
    approve("`forecast`: the code takes `units` too");
}
