//! A FIFO planted in an installed package (by the extension itself: its package is its own
//! to write) is refused, never waited on, by everything that reads package files: `yep list`
//! reads the manifest and checks drift, which hashes the package.
#![cfg(unix)]

use std::path::Path;
use std::time::Duration;
use yep_store::{AlwaysYes, Home, InstallOptions};

/// `run` on a thread of its own, or `None` when it has not returned within 10 s: it hangs,
/// and the test fails instead of hanging with it.
fn within<T: Send + 'static>(run: impl FnOnce() -> T + Send + 'static) -> Option<T> {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(run());
    });
    rx.recv_timeout(Duration::from_secs(10)).ok()
}

fn mkfifo(path: &Path) {
    use std::os::unix::ffi::OsStrExt;
    let c = std::ffi::CString::new(path.as_os_str().as_bytes()).unwrap();
    // SAFETY: `c` is a valid NUL-terminated path for the duration of the call.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o644) }, 0, "mkfifo");
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let target = to.join(entry.file_name());
        if entry.file_type().unwrap().is_dir() {
            copy_dir(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), &target).unwrap();
        }
    }
}

#[test]
fn a_fifo_planted_as_the_manifest_does_not_hang_list_drift_or_the_hash() {
    let dir = tempfile::tempdir().unwrap();
    let home = Home {
        root: dir.path().join("home"),
    };
    let fixture =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/fixtures/hostile/skill-fifo");
    let src = dir.path().join("skill-fifo");
    copy_dir(&fixture, &src);
    home.install(
        src.to_str().unwrap(),
        &InstallOptions::default(),
        &mut AlwaysYes,
    )
    .unwrap();
    let package = home.package_dir("skill-fifo");
    std::fs::remove_file(package.join("plugin.json")).unwrap();
    mkfifo(&package.join("plugin.json"));
    mkfifo(&package.join("skills/notes/more.md"));

    let (h, p) = (home.clone(), package.clone());
    let (listed, drift, hash) = within(move || {
        let listed = h.list();
        let drift = h.drift("skill-fifo");
        let hash = yep_store::hash::content_hash(&p);
        (listed, drift, hash)
    })
    .expect("reading the package hung on a FIFO");

    let listed = listed.unwrap();
    let error = listed[0].error.as_deref().unwrap_or_default();
    assert!(
        error.contains("plugin.json") && error.contains("named pipe (FIFO)"),
        "{error}"
    );
    let drift = drift.unwrap().expect("a FIFO for a manifest is drift");
    assert!(drift.contains("named pipe (FIFO)"), "{drift}");
    // The hash takes files and links; the pipes are neither, and are not read.
    assert!(hash.unwrap().starts_with("sha256:"));
}

#[test]
fn a_directory_holding_a_fifo_is_refused_at_install_not_waited_on() {
    let dir = tempfile::tempdir().unwrap();
    let home = Home {
        root: dir.path().join("home"),
    };
    let fixture =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/fixtures/hostile/skill-fifo");
    let src = dir.path().join("skill-fifo");
    copy_dir(&fixture, &src);
    std::fs::remove_file(src.join("skills/x/SKILL.md")).unwrap();
    mkfifo(&src.join("skills/x/SKILL.md"));
    let h = home.clone();
    let installed = within(move || {
        h.install(
            src.to_str().unwrap(),
            &InstallOptions::default(),
            &mut AlwaysYes,
        )
        .map(drop)
        .map_err(|e| yep_store_report(&e))
    })
    .expect("installing a package holding a FIFO hung");
    let err = installed.unwrap_err();
    assert!(
        err.contains("skills/x/SKILL.md") && err.contains("named pipe (FIFO)"),
        "{err}"
    );
    assert!(home.list().unwrap().is_empty(), "nothing was installed");
}

/// `err` and its causes on one line.
fn yep_store_report(err: &dyn std::error::Error) -> String {
    let mut out = err.to_string();
    let mut next = err.source();
    while let Some(cause) = next {
        out.push_str(": ");
        out.push_str(&cause.to_string());
        next = cause.source();
    }
    out
}
