//! Process lifecycle through the public API: the group dies with its owner, the server runs in
//! its workspace, and a failed spawn says why. The rest is unit-tested in `src/process/tests.rs`.

// The HOME, TMPDIR and yep home of this test process are its own (yep-test-support).
yep_test_support::seal_this_test_binary!();

#[path = "all/common/mod.rs"]
mod common;

use common::*;
use std::sync::Arc;
use yep_host::process::{self, SpawnSpec};

/// Alive and not a zombie.
fn running(pid: i32) -> bool {
    yep_test_support::procs::running(pid.into())
}

#[tokio::test]
async fn dropping_an_extension_kills_its_whole_process_group() {
    let fx = Fixture::new();
    let pidfile = fx.dir.path().join("grandchild.pid");
    let script = format!(
        "sleep 300 & echo $! > '{}'; exec '{}'",
        pidfile.display(),
        echo_bin()
    );
    let ext = extension(fx.spec("echo", "sh", &["-c", &script]), Arc::default());
    ext.handshake().await.unwrap();
    let grandchild: i32 = std::fs::read_to_string(&pidfile)
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    assert!(running(grandchild));
    drop(ext);
    assert!(
        eventually(|| !running(grandchild)).await,
        "the server's child {grandchild} outlived it"
    );
}

#[tokio::test]
async fn the_server_runs_in_the_workspace_with_its_bin_dir_first_on_path() {
    let fx = Fixture::new();
    let bin = fx.dir.path().join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    // A `bin/` script that reports its cwd and PATH on stderr, then becomes the echo server.
    let script = bin.join("echo-server");
    std::fs::write(
        &script,
        format!(
            "#!/bin/sh\necho \"cwd=$(pwd)\" >&2\necho \"path=$PATH\" >&2\nexec '{}'\n",
            echo_bin()
        ),
    )
    .unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
    let ext = extension(fx.spec("echo", "echo-server", &[]), Arc::default());
    ext.handshake().await.unwrap();
    ext.stop().await;
    let log = std::fs::read_to_string(ext.log_path()).unwrap();
    let root = fx.dir.path().canonicalize().unwrap();
    assert!(log.contains(&format!("cwd={}", root.display())), "{log}");
    assert!(log.contains(&format!("path={}:", bin.display())), "{log}");
}

#[tokio::test]
async fn a_failed_spawn_chains_its_cause_instead_of_repeating_it() {
    let fx = Fixture::new();
    let err = process::spawn(&SpawnSpec {
        program: "no-such-yep-program".into(),
        args: vec![],
        cwd: fx.dir.path().into(),
        bin_dir: None,
        env: vec![],
        log_path: fx.dir.path().join("missing.log"),
        sandbox: None,
    })
    .err()
    .expect("there is no such program");
    assert_eq!(err.to_string(), "cannot spawn `no-such-yep-program`");
    let source = std::error::Error::source(&err).expect("the I/O error is chained");
    assert!(source.to_string().contains("No such file"), "{source}");
}
