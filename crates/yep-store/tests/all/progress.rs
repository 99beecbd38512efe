//! The store reports its progress to the caller's callback (and draws nothing itself).

use std::io::{Read, Write};
use std::path::Path;
use std::sync::{Arc, Mutex};
use yep_store::{AlwaysYes, Home, InstallOptions, Progress, ProgressEvent};

/// A progress callback that keeps every event.
fn recorder() -> (Progress, Arc<Mutex<Vec<ProgressEvent>>>) {
    let seen = Arc::new(Mutex::new(Vec::new()));
    let sink = Arc::clone(&seen);
    (Progress::new(move |e| sink.lock().unwrap().push(e)), seen)
}

/// Serve `body` once on a loopback port, with its length declared; returns the URL.
fn serve_once(body: Vec<u8>) -> String {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    std::thread::spawn(move || {
        let (mut stream, _) = listener.accept().unwrap();
        let mut request = Vec::new();
        let mut byte = [0u8; 1];
        while !request.ends_with(b"\r\n\r\n") && stream.read(&mut byte).unwrap_or(0) == 1 {
            request.push(byte[0]);
        }
        let head = format!(
            "HTTP/1.1 200 OK\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
            body.len()
        );
        let _ = stream.write_all(head.as_bytes());
        let _ = stream.write_all(&body);
    });
    format!("http://{addr}/pkg.crate")
}

#[test]
fn a_download_reports_its_size_and_every_byte_then_finishes() {
    let body = vec![7u8; 200 * 1024];
    let url = serve_once(body.clone());
    let (progress, seen) = recorder();
    let got = yep_store::fetch::http_get(&url, "pkg 1.0.0", &progress).unwrap();
    assert_eq!(got, body);
    let seen = seen.lock().unwrap().clone();
    assert_eq!(
        seen.first(),
        Some(&ProgressEvent::Download {
            label: "pkg 1.0.0".into(),
            total: Some(body.len() as u64)
        }),
        "{seen:?}"
    );
    assert_eq!(seen.last(), Some(&ProgressEvent::Finished), "{seen:?}");
    let received: Vec<u64> = seen
        .iter()
        .filter_map(|e| match e {
            ProgressEvent::Bytes { received } => Some(*received),
            _ => None,
        })
        .collect();
    assert!(
        received.windows(2).all(|w| w[0] < w[1]),
        "bytes only grow: {received:?}"
    );
    assert_eq!(received.last(), Some(&(body.len() as u64)), "{seen:?}");
    assert_eq!(seen.len(), received.len() + 2, "{seen:?}");
}

#[allow(clippy::disallowed_methods)] // a real git repository for the git source
fn git(dir: &Path, args: &[&str]) {
    let out = std::process::Command::new("git")
        .args(["-c", "user.name=t", "-c", "user.email=t@t"])
        .args(["-c", "commit.gpgsign=false"])
        .args(args)
        .current_dir(dir)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "git {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn a_git_install_reports_its_clone_as_one_finished_step() {
    let tmp = tempfile::tempdir().unwrap();
    let repo = tmp.path().join("repo");
    std::fs::create_dir_all(&repo).unwrap();
    let manifest = serde_json::json!({
        "name": "gitext",
        "version": "0.1.0",
        "description": "test package",
        "yolop": {"tools": [{"name": "lookup"}], "capabilityServer": {"command": "server"}}
    });
    std::fs::write(repo.join("plugin.json"), manifest.to_string()).unwrap();
    git(&repo, &["init", "-q"]);
    git(&repo, &["add", "."]);
    git(&repo, &["commit", "-qm", "first"]);
    let url = format!("file://{}", repo.display());
    let (progress, seen) = recorder();
    let home = Home {
        root: tmp.path().join("home"),
    };
    let opts = InstallOptions {
        progress,
        ..InstallOptions::default()
    };
    home.install(&url, &opts, &mut AlwaysYes).unwrap();
    assert_eq!(
        *seen.lock().unwrap(),
        [
            ProgressEvent::Step {
                label: format!("cloning {url}")
            },
            ProgressEvent::Finished
        ]
    );
}

#[test]
fn the_store_depends_on_no_drawing_crate_and_no_async_runtime() {
    let manifest: toml::Table = toml::from_str(include_str!("../../Cargo.toml")).unwrap();
    let deps = manifest["dependencies"].as_table().unwrap();
    for banned in ["indicatif", "tokio"] {
        assert!(!deps.contains_key(banned), "yep-store depends on {banned}");
    }
}
