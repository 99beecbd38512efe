//! Writes `schema/yep/v1/{meta,schema}.json` from the wire types. `--check` only compares.

use std::path::PathBuf;
use std::process::ExitCode;

fn main() -> ExitCode {
    let check = std::env::args().any(|a| a == "--check");
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../schema/yep/v1");
    let mut stale = false;
    for (name, contents) in yep_protocol::schema::artifacts() {
        let path = dir.join(name);
        let current = std::fs::read_to_string(&path).unwrap_or_default();
        if current == contents {
            continue;
        }
        if check {
            eprintln!(
                "{} is stale; run: cargo run -p yep-protocol --features schema --bin yep-schema-gen",
                path.display()
            );
            stale = true;
        } else if let Err(err) =
            std::fs::create_dir_all(&dir).and_then(|()| std::fs::write(&path, contents))
        {
            eprintln!("failed to write {}: {err}", path.display());
            return ExitCode::FAILURE;
        } else {
            eprintln!("wrote {}", path.display());
        }
    }
    if stale {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    }
}
