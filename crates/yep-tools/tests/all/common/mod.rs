//! Shared helpers: locating the binaries cargo built, and server specs in a temp dir.

use serde_json::Value;
use yep_host::store::grants::SandboxGrants;
use yep_host::{Grants, ServerSpec};

pub use yep_test_support::bins::{built, target_dir};

/// The real `yep-example-echo` binary.
pub fn echo_bin() -> String {
    built(
        target_dir().join("yep-example-echo"),
        "cargo build -p yep-example-echo",
    )
}

/// The configurable runtime fixture (`examples/fixture`).
pub fn fixture_bin() -> String {
    built(
        target_dir().join("yep-fixture"),
        "cargo build -p yep-fixture",
    )
}

/// The yolop-yep fixture (an example of `yep-host`, where the interop tests use it too).
pub fn yolop_fixture_bin() -> String {
    built(
        target_dir().join("examples/yolop_fixture"),
        "cargo build -p yep-host --example yolop_fixture",
    )
}

pub struct Fixture {
    pub dir: tempfile::TempDir,
}

impl Fixture {
    pub fn new() -> Fixture {
        Fixture {
            dir: tempfile::tempdir().unwrap(),
        }
    }

    pub fn spec(&self, name: &str, command: &str, args: &[&str]) -> ServerSpec {
        ServerSpec {
            name: name.into(),
            command: command.into(),
            args: args.iter().map(|s| s.to_string()).collect(),
            package_dir: self.dir.path().to_path_buf(),
            workspace_root: self.dir.path().to_path_buf(),
            cwd: None,
            data_dir: None,
            language: None,
            session_id: "test-session".into(),
            config: Value::Null,
            env: Vec::new(),
            log_dir: self.dir.path().join("logs"),
            grants: Grants::ALL,
            // Unchecked: these tests drive servers with whatever arguments they like.
            tool_schemas: Default::default(),
            // The scripts these tests run write pid files and markers beside them and exec
            // the workspace's built servers: granted, as an embedder grants its servers.
            sandbox_grants: SandboxGrants {
                write: vec![self.dir.path().display().to_string()],
                read: vec![target_dir().display().to_string()],
                ..SandboxGrants::default()
            },
            grant_name: None,
        }
    }

    pub fn echo(&self) -> ServerSpec {
        self.spec("echo", &echo_bin(), &[])
    }
}
