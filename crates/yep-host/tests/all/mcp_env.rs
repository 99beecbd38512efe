//! MCP `${VAR}` expansion against the host's real environment: a variable whose name says
//! nothing about its value (`DATABASE_URL`) never reaches a server's command line. One test in
//! its own binary, because it sets a variable of this process's environment.

use crate::common;

use yep_host::store::{AlwaysYes, Home, InstallOptions};
use yep_host::{ExtensionHost, HostOptions, Session};

const DSN: &str = "postgres://app:hunter2-pw@127.0.0.1:5432/app";

#[tokio::test]
async fn a_host_variable_in_mcp_args_reaches_the_server_by_env_never_by_argv() {
    // SAFETY: this binary holds this one test, and the current-thread runtime has started no
    // other thread yet: nothing reads the environment concurrently.
    unsafe { std::env::set_var("DATABASE_URL", DSN) };
    let fixture = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../tests/fixtures/hostile/mcp-env-in-argv");
    let dir = tempfile::tempdir().unwrap();
    let home = Home {
        root: dir.path().join("home"),
    };
    home.install(
        fixture.to_str().unwrap(),
        &InstallOptions::default(),
        &mut AlwaysYes,
    )
    .unwrap();
    home.set_enabled("dbkit", true).unwrap();
    let session = Session {
        id: "s1".into(),
        workspace_root: dir.path().to_path_buf(),
    };
    let host = ExtensionHost::start(home.clone(), session, HostOptions::default())
        .await
        .unwrap();
    // Every server the session sees, approved or not, as it would run.
    let servers: std::collections::BTreeMap<_, _> = host
        .mcp_sources()
        .into_iter()
        .map(|s| (s.name, s.server))
        .collect();
    let db = &servers["dbkit__db"];
    let home_var = std::env::var("HOME").unwrap_or_default();
    assert_eq!(
        db.args,
        ["server.sh", "--dsn=", &format!("--home={home_var}")],
        "HOME may expand in argv, DATABASE_URL may not"
    );
    assert_eq!(db.env["DATABASE_URL"], DSN);
    // Spawned the way `yep session`'s `mcp list-tools` does: command, args, env as given.
    let out = common::run_mcp_spec(
        db,
        &home.package_dir("dbkit"),
        dir.path().join("logs/db.log"),
    )
    .await;
    let argv = out.lines().find_map(|l| l.strip_prefix("argv:")).unwrap();
    assert!(
        !argv.contains("hunter2-pw"),
        "the password is in argv: {out}"
    );
    assert!(argv.contains("--dsn="), "{out}");
    assert!(out.contains(&format!("env:{DSN}")), "{out}");
    assert!(
        host.warnings().iter().any(|w| w.starts_with(
            "extension `dbkit`: MCP server `db` puts variable `${DATABASE_URL}` in its command line"
        )),
        "{:?}",
        host.warnings()
    );
    // The spec shown to people keeps the reference as written.
    assert_eq!(
        host.mcp_servers_unexpanded()["dbkit__db"].args[1],
        "--dsn=${DATABASE_URL}"
    );
    host.shutdown().await;
}
