//! `yep install` from a crates.io-style sparse index, served from loopback by a tiny HTTP
//! server in this file (plus one ignored test against the real crates.io).

use sha2::{Digest, Sha256};
use std::collections::HashMap;
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::{Arc, Mutex};

const WEATHER_CRATE: &str = "yep-extension-weather";

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

fn sha256_hex(bytes: &[u8]) -> String {
    Sha256::digest(bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

// ---------------------------------------------------------------------------------------------
// A tiny HTTP/1.1 server: GET by path from a fixed map, 200 or 404, one request per connection.
// ---------------------------------------------------------------------------------------------

struct Server {
    base: String,
    /// Every request path, in order.
    requests: Arc<Mutex<Vec<String>>>,
}

impl Server {
    fn start(files: HashMap<String, Vec<u8>>) -> Server {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let base = format!("http://{}", listener.local_addr().unwrap());
        let requests = Arc::new(Mutex::new(Vec::new()));
        let log = requests.clone();
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                let Ok(stream) = stream else { continue };
                let _ = serve_one(stream, &files, &log);
            }
        });
        Server { base, requests }
    }

    fn index_url(&self) -> String {
        format!("{}/index/", self.base)
    }

    fn download_template(&self) -> String {
        format!("{}/dl/{{crate}}/{{version}}", self.base)
    }

    fn requests(&self) -> Vec<String> {
        self.requests.lock().unwrap().clone()
    }
}

fn serve_one(
    mut stream: TcpStream,
    files: &HashMap<String, Vec<u8>>,
    log: &Mutex<Vec<String>>,
) -> std::io::Result<()> {
    stream.set_read_timeout(Some(std::time::Duration::from_secs(10)))?;
    let mut head = Vec::new();
    let mut buf = [0u8; 1024];
    while !head.windows(4).any(|w| w == b"\r\n\r\n") {
        let n = stream.read(&mut buf)?;
        if n == 0 {
            break;
        }
        head.extend_from_slice(&buf[..n]);
    }
    let head = String::from_utf8_lossy(&head);
    let mut parts = head.lines().next().unwrap_or("").split_whitespace();
    let (method, target) = (parts.next().unwrap_or(""), parts.next().unwrap_or(""));
    let path = target.split('?').next().unwrap_or("").to_string();
    log.lock().unwrap().push(path.clone());
    let (status, body): (&str, &[u8]) = match files.get(&path) {
        Some(body) if method == "GET" => ("200 OK", body),
        _ => ("404 Not Found", b"not found"),
    };
    write!(
        stream,
        "HTTP/1.1 {status}\r\nContent-Length: {}\r\nContent-Type: application/octet-stream\r\nConnection: close\r\n\r\n",
        body.len()
    )?;
    stream.write_all(body)?;
    stream.flush()
}

/// The sparse index path of a crate, as the server serves it (`/index/ab/cd/abcd…`).
fn index_path(name: &str) -> String {
    let name = name.to_ascii_lowercase();
    let rel = match name.len() {
        1 => format!("1/{name}"),
        2 => format!("2/{name}"),
        3 => format!("3/{}/{name}", &name[..1]),
        _ => format!("{}/{}/{name}", &name[..2], &name[2..4]),
    };
    format!("/index/{rel}")
}

fn download_path(name: &str, version: &str) -> String {
    format!("/dl/{name}/{version}")
}

/// One line of the sparse index.
fn index_line(name: &str, version: &str, cksum: &str, yanked: bool) -> String {
    serde_json::json!({
        "name": name,
        "vers": version,
        "deps": [],
        "cksum": cksum,
        "features": {},
        "yanked": yanked,
    })
    .to_string()
}

// ---------------------------------------------------------------------------------------------
// Packages and `.crate` archives.
// ---------------------------------------------------------------------------------------------

fn plugin_json(version: &str) -> String {
    serde_json::json!({
        "name": "weather",
        "version": version,
        "description": "d",
        "yolop": {
            "capabilityServer": {"command": "weather-server"},
            "tools": [{"name": "forecast"}],
            "trace": true,
            "config_schema": {
                "type": "object",
                "properties": {
                    "token": {"type": "string", "secret": true, "env": "WEATHER_TOKEN"}
                },
                "required": ["token"]
            }
        }
    })
    .to_string()
}

/// The files of a weather package at `version`, relative paths with `/`.
fn weather_files(version: &str) -> Vec<(String, Vec<u8>)> {
    vec![
        ("plugin.json".into(), plugin_json(version).into_bytes()),
        (
            "Cargo.toml".into(),
            format!("[package]\nname = \"{WEATHER_CRATE}\"\nversion = \"{version}\"\n")
                .into_bytes(),
        ),
        ("README.md".into(), b"# weather\n".to_vec()),
        ("skills/forecast.md".into(), b"how to forecast\n".to_vec()),
    ]
}

/// A `.crate`: a gzip'd tar with every entry under `<crate>-<version>/`.
fn crate_archive(crate_name: &str, version: &str, files: &[(String, Vec<u8>)]) -> Vec<u8> {
    let gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    let mut tar = tar::Builder::new(gz);
    for (path, data) in files {
        let mut header = tar::Header::new_gnu();
        header.set_size(data.len() as u64);
        header.set_mode(0o644);
        header.set_entry_type(tar::EntryType::Regular);
        tar.append_data(
            &mut header,
            format!("{crate_name}-{version}/{path}"),
            data.as_slice(),
        )
        .unwrap();
    }
    tar.into_inner().unwrap().finish().unwrap()
}

/// A `.crate` with a valid package first and then an entry whose raw name climbs out with
/// `..` (written into the header bytes directly: the `tar` crate's path API refuses it).
fn traversal_archive(crate_name: &str, version: &str, evil: &str) -> Vec<u8> {
    let gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    let mut tar = tar::Builder::new(gz);
    for (path, data) in weather_files(version) {
        let mut header = tar::Header::new_gnu();
        header.set_size(data.len() as u64);
        header.set_mode(0o644);
        header.set_entry_type(tar::EntryType::Regular);
        tar.append_data(
            &mut header,
            format!("{crate_name}-{version}/{path}"),
            data.as_slice(),
        )
        .unwrap();
    }
    let data = b"escaped\n";
    let mut header = tar::Header::new_gnu();
    let name = evil.as_bytes();
    assert!(name.len() < 100);
    header.as_old_mut().name[..name.len()].copy_from_slice(name);
    header.set_size(data.len() as u64);
    header.set_mode(0o644);
    header.set_entry_type(tar::EntryType::Regular);
    header.set_cksum();
    tar.append(&header, &data[..]).unwrap();
    tar.into_inner().unwrap().finish().unwrap()
}

/// A loopback registry serving one version of the weather crate as `archive`, with its checksum.
fn serve_archive(version: &str, archive: Vec<u8>) -> Server {
    let mut files = HashMap::new();
    files.insert(
        index_path(WEATHER_CRATE),
        (index_line(WEATHER_CRATE, version, &sha256_hex(&archive), false) + "\n").into_bytes(),
    );
    files.insert(download_path(WEATHER_CRATE, version), archive);
    Server::start(files)
}

/// A registry serving `crate_name` with the given `(version, yanked)` list, each version a
/// weather package of that version. Returns the files map and each version's checksum.
fn registry_files(
    crate_name: &str,
    versions: &[(&str, bool)],
) -> (HashMap<String, Vec<u8>>, HashMap<String, String>) {
    let mut files = HashMap::new();
    let mut sums = HashMap::new();
    let mut lines = Vec::new();
    for (version, yanked) in versions {
        let archive = crate_archive(crate_name, version, &weather_files(version));
        let sum = sha256_hex(&archive);
        lines.push(index_line(crate_name, version, &sum, *yanked));
        sums.insert(version.to_string(), sum);
        files.insert(download_path(crate_name, version), archive);
    }
    files.insert(
        index_path(crate_name),
        (lines.join("\n") + "\n").into_bytes(),
    );
    (files, sums)
}

// ---------------------------------------------------------------------------------------------
// Running the binary and reading the home.
// ---------------------------------------------------------------------------------------------

/// A sealed temp dir with the home inside it (so "escaped the home" can be checked too).
struct Sandbox {
    root: tempfile::TempDir,
}

impl Sandbox {
    fn new() -> Sandbox {
        Sandbox {
            root: tempfile::tempdir().unwrap(),
        }
    }

    fn home(&self) -> PathBuf {
        self.root.path().join("home")
    }

    fn package(&self) -> PathBuf {
        self.home().join("extensions/weather")
    }
}

fn run_yep(home: &Path, args: &[&str], registry: Option<&Server>) -> Output {
    run_yep_with(home, args, registry, &[])
}

fn run_yep_with(
    home: &Path,
    args: &[&str],
    registry: Option<&Server>,
    vars: &[(&str, &str)],
) -> Output {
    yep_command(home, args, registry, vars).output().unwrap()
}

/// The CLI as the tests run it: in `home`, against `registry` (never crates.io), with `vars`.
#[allow(clippy::disallowed_methods)] // running the CLI under test
fn yep_command(
    home: &Path,
    args: &[&str],
    registry: Option<&Server>,
    vars: &[(&str, &str)],
) -> Command {
    let mut cmd = crate::common::yep_command();
    cmd.args(args)
        .env("YEP_HOME", home)
        .env_remove("RUST_LOG")
        .env_remove("YEP_SPARSE_INDEX")
        .env_remove("YEP_CRATE_DOWNLOAD")
        .env_remove("YEP_MAX_UNPACKED_BYTES")
        .env_remove("YEP_MAX_ARCHIVE_ENTRIES")
        .envs(vars.iter().copied())
        .stdin(Stdio::null());
    if let Some(server) = registry {
        cmd.env("YEP_SPARSE_INDEX", server.index_url())
            .env("YEP_CRATE_DOWNLOAD", server.download_template());
        // Loopback must not go through a proxy.
        for var in [
            "http_proxy",
            "HTTP_PROXY",
            "https_proxy",
            "HTTPS_PROXY",
            "all_proxy",
            "ALL_PROXY",
        ] {
            cmd.env_remove(var);
        }
    }
    cmd
}

fn install(sandbox: &Sandbox, server: &Server, args: &[&str]) -> Output {
    let mut all = vec!["install"];
    all.extend_from_slice(args);
    run_yep(&sandbox.home(), &all, Some(server))
}

/// The parsed lock, or `None` when there is no lock file.
fn lock(home: &Path) -> Option<toml::Table> {
    let text = std::fs::read_to_string(home.join("extensions.lock")).ok()?;
    Some(text.parse::<toml::Table>().unwrap())
}

/// The lock entries (an absent lock has none).
fn lock_entries(home: &Path) -> Vec<toml::Table> {
    lock(home)
        .and_then(|t| t.get("extensions").cloned())
        .and_then(|v| v.as_array().cloned())
        .unwrap_or_default()
        .into_iter()
        .map(|v| v.as_table().cloned().unwrap())
        .collect()
}

fn lock_entry(home: &Path, name: &str) -> toml::Table {
    lock_entries(home)
        .into_iter()
        .find(|e| e.get("name").and_then(|v| v.as_str()) == Some(name))
        .unwrap_or_else(|| {
            panic!(
                "no lock entry for {name}: {:?}",
                std::fs::read_to_string(home.join("extensions.lock"))
            )
        })
}

fn str_at<'a>(table: &'a toml::Table, path: &[&str]) -> &'a str {
    let mut value = table
        .get(path[0])
        .unwrap_or_else(|| panic!("no {}", path[0]));
    for key in &path[1..] {
        value = value.get(key).unwrap_or_else(|| panic!("no {key}"));
    }
    value.as_str().unwrap()
}

/// Every file under `dir`, as relative `/` paths (directories skipped).
fn files_under(dir: &Path) -> Vec<String> {
    fn walk(root: &Path, dir: &Path, skip_git: bool, out: &mut Vec<String>) {
        let Ok(entries) = std::fs::read_dir(dir) else {
            return;
        };
        for entry in entries.flatten() {
            let path = entry.path();
            let kind = entry.file_type().unwrap();
            if kind.is_dir() {
                if !(skip_git && entry.file_name() == ".git") {
                    walk(root, &path, skip_git, out);
                }
            } else {
                let rel = path.strip_prefix(root).unwrap();
                let parts: Vec<String> = rel
                    .components()
                    .map(|c| c.as_os_str().to_string_lossy().into_owned())
                    .collect();
                out.push(parts.join("/"));
            }
        }
    }
    let mut out = Vec::new();
    walk(dir, dir, false, &mut out);
    out.sort();
    out
}

/// The content hash, computed independently of the product: files sorted by relative `/`
/// path (skipping `.git`), SHA-256 over `path ‖ 0 ‖ len u64 LE ‖ bytes` each.
fn content_hash(dir: &Path) -> String {
    let mut files: Vec<String> = files_under(dir)
        .into_iter()
        .filter(|p| !p.split('/').any(|c| c == ".git"))
        .collect();
    files.sort();
    let mut hasher = Sha256::new();
    for rel in &files {
        let bytes = std::fs::read(dir.join(rel)).unwrap();
        hasher.update(rel.as_bytes());
        hasher.update([0u8]);
        hasher.update((bytes.len() as u64).to_le_bytes());
        hasher.update(&bytes);
    }
    let hex: String = hasher
        .finalize()
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    format!("sha256:{hex}")
}

/// Nothing was installed: no package directory, no lock entry, no stray manifest anywhere.
fn assert_nothing_installed(sandbox: &Sandbox) {
    assert!(
        sandbox.package().symlink_metadata().is_err(),
        "{} exists",
        sandbox.package().display()
    );
    assert!(
        lock_entries(&sandbox.home()).is_empty(),
        "lock: {:?}",
        std::fs::read_to_string(sandbox.home().join("extensions.lock"))
    );
    let stray: Vec<String> = files_under(&sandbox.home())
        .into_iter()
        .filter(|p| p.ends_with("plugin.json"))
        .collect();
    assert!(stray.is_empty(), "left behind: {stray:?}");
}

// ---------------------------------------------------------------------------------------------
// Tests.
// ---------------------------------------------------------------------------------------------

#[test]
fn installs_a_crate_and_locks_its_source_checksum_and_content_hash() {
    let (files, sums) = registry_files(WEATHER_CRATE, &[("0.3.0", false)]);
    let server = Server::start(files);
    let sandbox = Sandbox::new();
    let out = install(
        &sandbox,
        &server,
        &["crates.io:yep-extension-weather", "--yes"],
    );
    assert!(
        out.status.success(),
        "stdout: {}\nstderr: {}",
        text(&out.stdout),
        text(&out.stderr)
    );

    // The package is unpacked with the `<crate>-<version>/` prefix stripped.
    let package = sandbox.package();
    assert!(package.join("plugin.json").is_file());
    assert_eq!(
        files_under(&package),
        [
            "Cargo.toml",
            "README.md",
            "plugin.json",
            "skills/forecast.md"
        ]
    );
    for (path, data) in weather_files("0.3.0") {
        assert_eq!(std::fs::read(package.join(&path)).unwrap(), data, "{path}");
    }

    let entry = lock_entry(&sandbox.home(), "weather");
    assert_eq!(str_at(&entry, &["source", "type"]), "crate");
    assert_eq!(str_at(&entry, &["source", "crate_name"]), WEATHER_CRATE);
    assert_eq!(str_at(&entry, &["source", "version"]), "0.3.0");
    assert_eq!(str_at(&entry, &["source", "checksum"]), sums["0.3.0"]);
    assert_eq!(str_at(&entry, &["version"]), "0.3.0");
    let expected_hash = content_hash(&package);
    assert_eq!(str_at(&entry, &["content_hash"]), expected_hash);
    assert!(
        text(&out.stdout).contains(&expected_hash),
        "{}",
        text(&out.stdout)
    );
    assert_eq!(
        server.requests(),
        [
            index_path(WEATHER_CRATE),
            download_path(WEATHER_CRATE, "0.3.0")
        ]
    );
}

#[test]
fn picks_the_highest_stable_unyanked_version_unless_one_is_named() {
    let versions = [
        ("0.1.0", false),
        ("0.3.0", false),
        ("0.4.0", true),
        ("1.0.0-beta.1", false),
    ];
    let (files, sums) = registry_files(WEATHER_CRATE, &versions);
    let server = Server::start(files);

    let sandbox = Sandbox::new();
    let out = install(
        &sandbox,
        &server,
        &["crates.io:yep-extension-weather", "--yes"],
    );
    assert!(out.status.success(), "{}", text(&out.stderr));
    let entry = lock_entry(&sandbox.home(), "weather");
    assert_eq!(str_at(&entry, &["source", "version"]), "0.3.0");
    assert_eq!(str_at(&entry, &["source", "checksum"]), sums["0.3.0"]);
    let manifest: serde_json::Value =
        serde_json::from_slice(&std::fs::read(sandbox.package().join("plugin.json")).unwrap())
            .unwrap();
    assert_eq!(manifest["version"], "0.3.0");
    assert!(
        !server
            .requests()
            .iter()
            .any(|r| r.starts_with("/dl/") && !r.ends_with("/0.3.0")),
        "{:?}",
        server.requests()
    );

    // Named explicitly, the yanked version is installed.
    let sandbox = Sandbox::new();
    let out = install(
        &sandbox,
        &server,
        &["crates.io:yep-extension-weather@0.4.0", "--yes"],
    );
    assert!(out.status.success(), "{}", text(&out.stderr));
    let entry = lock_entry(&sandbox.home(), "weather");
    assert_eq!(str_at(&entry, &["source", "version"]), "0.4.0");
    assert_eq!(str_at(&entry, &["source", "checksum"]), sums["0.4.0"]);
    assert_eq!(str_at(&entry, &["version"]), "0.4.0");
}

#[test]
fn a_checksum_mismatch_is_refused_and_writes_nothing() {
    let archive = crate_archive(WEATHER_CRATE, "0.3.0", &weather_files("0.3.0"));
    let wrong = sha256_hex(b"some other bytes");
    let mut files = HashMap::new();
    files.insert(
        index_path(WEATHER_CRATE),
        (index_line(WEATHER_CRATE, "0.3.0", &wrong, false) + "\n").into_bytes(),
    );
    files.insert(download_path(WEATHER_CRATE, "0.3.0"), archive);
    let server = Server::start(files);
    let sandbox = Sandbox::new();
    let out = install(
        &sandbox,
        &server,
        &["crates.io:yep-extension-weather", "--yes"],
    );
    let stderr = text(&out.stderr);
    assert!(!out.status.success(), "{stderr}");
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("checksum mismatch"), "{stderr}");
    assert!(stderr.contains(&wrong), "{stderr}");
    assert_nothing_installed(&sandbox);
}

#[test]
fn an_archive_entry_climbing_out_with_dotdot_is_refused() {
    let evil = "weather-0.3.0/../../escape.txt";
    let deep_evil = "weather-0.3.0/../../../../../escape.txt";
    for entry in [evil, deep_evil] {
        let archive = traversal_archive(WEATHER_CRATE, "0.3.0", entry);
        let server = serve_archive("0.3.0", archive);
        let sandbox = Sandbox::new();
        let out = install(
            &sandbox,
            &server,
            &["crates.io:yep-extension-weather", "--yes"],
        );
        let stderr = text(&out.stderr);
        assert!(!out.status.success(), "{stderr}");
        assert!(
            stderr.contains(entry),
            "the error names the entry: {stderr}"
        );
        assert!(stderr.contains("`..`"), "{stderr}");
        let escaped: Vec<String> = files_under(sandbox.root.path())
            .into_iter()
            .filter(|p| p.ends_with("escape.txt"))
            .collect();
        assert!(escaped.is_empty(), "{escaped:?}");
        let parent = sandbox.root.path().parent().unwrap();
        assert!(!parent.join("escape.txt").exists());
        assert_nothing_installed(&sandbox);
    }
}

#[test]
fn only_yanked_versions_are_refused() {
    let (files, _) = registry_files(WEATHER_CRATE, &[("0.1.0", true), ("0.2.0", true)]);
    let server = Server::start(files);
    let sandbox = Sandbox::new();
    let out = install(
        &sandbox,
        &server,
        &["crates.io:yep-extension-weather", "--yes"],
    );
    let stderr = text(&out.stderr);
    assert!(!out.status.success(), "{stderr}");
    assert!(stderr.contains("no stable, non-yanked version"), "{stderr}");
    assert!(stderr.contains("0.2.0 (yanked)"), "{stderr}");
    assert!(
        !server.requests().iter().any(|r| r.starts_with("/dl/")),
        "nothing is downloaded: {:?}",
        server.requests()
    );
    assert_nothing_installed(&sandbox);
}

#[test]
fn a_bare_name_falls_back_to_the_yolop_extension_crate() {
    let yolop = "yolop-extension-weather";
    let (files, sums) = registry_files(yolop, &[("0.3.0", false)]);
    let server = Server::start(files);
    let sandbox = Sandbox::new();
    let out = install(&sandbox, &server, &["weather", "--yes"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(sandbox.package().join("plugin.json").is_file());
    let entry = lock_entry(&sandbox.home(), "weather");
    assert_eq!(str_at(&entry, &["source", "type"]), "crate");
    assert_eq!(str_at(&entry, &["source", "crate_name"]), yolop);
    assert_eq!(str_at(&entry, &["source", "version"]), "0.3.0");
    assert_eq!(str_at(&entry, &["source", "checksum"]), sums["0.3.0"]);
    // `yep-extension-weather` was tried first.
    assert_eq!(
        server.requests(),
        [
            index_path(WEATHER_CRATE),
            index_path(yolop),
            download_path(yolop, "0.3.0")
        ]
    );
}

#[test]
fn an_unknown_crate_is_a_clear_error() {
    let server = Server::start(HashMap::new());
    let sandbox = Sandbox::new();
    let out = install(
        &sandbox,
        &server,
        &["crates.io:yep-extension-nonexistent", "--yes"],
    );
    let stderr = text(&out.stderr);
    assert!(!out.status.success(), "{stderr}");
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("yep-extension-nonexistent") && stderr.contains("not found"),
        "{stderr}"
    );
    assert_eq!(server.requests(), [index_path("yep-extension-nonexistent")]);
    assert_nothing_installed(&sandbox);
}

#[test]
fn a_bare_name_on_no_registry_says_what_was_tried_and_how_to_mean_the_directory_here() {
    let server = Server::start(HashMap::new());
    let sandbox = Sandbox::new();
    let here = sandbox.root.path().join("work");
    std::fs::create_dir_all(here.join("wc")).unwrap();
    std::fs::write(
        here.join("wc/plugin.json"),
        r#"{"name":"wc","yolop":{"prompt":true}}"#,
    )
    .unwrap();
    let install_here = |args: &[&str], registry: Option<&Server>| {
        yep_command(&sandbox.home(), args, registry, &[])
            .current_dir(&here)
            .output()
            .unwrap()
    };
    let out = install_here(&["install", "wc", "--yes"], Some(&server));
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(
        text(&out.stderr),
        "error: no extension `wc` on crates.io (tried yep-extension-wc and yolop-extension-wc); a bare name means crates.io, so to install the directory `wc` here, write `./wc`\n"
    );
    assert_nothing_installed(&sandbox);
    // Installed from that directory, the bare name says so, and how to take it again.
    let installed = install_here(&["install", "./wc", "--yes"], None);
    assert!(installed.status.success(), "{}", text(&installed.stderr));
    let out = install_here(&["install", "wc", "--yes"], Some(&server));
    let err = text(&out.stderr);
    assert!(
        err.contains("; the installed `wc` is from path ")
            && err
                .contains("`yep update wc` takes it from there again; a bare name means crates.io"),
        "{err}"
    );
}

#[test]
fn without_yes_or_a_terminal_the_install_is_refused_after_the_summary() {
    let (files, _) = registry_files(WEATHER_CRATE, &[("0.3.0", false)]);
    let server = Server::start(files);
    let sandbox = Sandbox::new();
    let out = install(&sandbox, &server, &["crates.io:yep-extension-weather"]);
    let stderr = text(&out.stderr);
    assert!(!out.status.success(), "{stderr}");
    assert!(
        stderr
            .lines()
            .any(|l| l.starts_with("hint:") && l.contains("--yes")),
        "{stderr}"
    );
    assert!(stderr.contains("forecast"), "{stderr}");
    assert!(stderr.contains("trace"), "{stderr}");
    assert!(stderr.contains("token (secret, required)"), "{stderr}");
    assert!(text(&out.stdout).is_empty(), "{}", text(&out.stdout));
    assert_nothing_installed(&sandbox);
}

#[test]
#[ignore = "needs the network: installs from the real crates.io"]
fn installs_logfire_from_the_real_crates_io() {
    let sandbox = Sandbox::new();
    let out = run_yep(
        &sandbox.home(),
        &[
            "install",
            "crates.io:yolop-extension-logfire@0.2.1",
            "--yes",
        ],
        None,
    );
    let stderr = text(&out.stderr);
    assert!(
        out.status.success(),
        "stdout: {}\nstderr: {stderr}",
        text(&out.stdout)
    );
    assert!(stderr.contains("trace"), "{stderr}");
    let config = stderr
        .lines()
        .find(|l| l.trim_start().starts_with("config"))
        .unwrap_or_else(|| panic!("no config line: {stderr}"));
    assert!(
        config.contains("token (secret"),
        "the token field is secret: {stderr}"
    );
    let entries = lock_entries(&sandbox.home());
    assert_eq!(entries.len(), 1, "{entries:?}");
    let entry = &entries[0];
    assert_eq!(str_at(entry, &["source", "type"]), "crate");
    assert_eq!(
        str_at(entry, &["source", "crate_name"]),
        "yolop-extension-logfire"
    );
    assert_eq!(str_at(entry, &["source", "version"]), "0.2.1");
    let name = str_at(entry, &["name"]);
    let package = sandbox.home().join("extensions").join(name);
    assert!(package.join("plugin.json").is_file());
    assert_eq!(str_at(entry, &["content_hash"]), content_hash(&package));
}

// ---------------------------------------------------------------------------------------------
// Prebuilt server binaries from `capabilityServer.binaries`.
// ---------------------------------------------------------------------------------------------

/// The target triple yep names binaries by.
fn host_target() -> String {
    let os = match std::env::consts::OS {
        "linux" => "unknown-linux-gnu",
        "macos" => "apple-darwin",
        other => other,
    };
    format!("{}-{os}", std::env::consts::ARCH)
}

/// A local package whose manifest names a prebuilt binary on `server`.
fn binary_package(sandbox: &Sandbox, server: &Server) -> PathBuf {
    let pkg = sandbox.root.path().join("src-pkg");
    std::fs::create_dir_all(&pkg).unwrap();
    let manifest = serde_json::json!({
        "name": "weather", "version": "0.3.0", "description": "d",
        "yolop": {
            "capabilityServer": {"command": "weather-server", "binaries": format!("{}/bin/{{name}}-{{version}}-{{target}}.tar.gz", server.base)},
            "tools": [{"name": "forecast"}]
        }
    });
    std::fs::write(pkg.join("plugin.json"), manifest.to_string()).unwrap();
    pkg
}

fn binary_archive() -> Vec<u8> {
    let gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    let mut tar = tar::Builder::new(gz);
    let data = b"#!/bin/sh\necho weather\n";
    let mut header = tar::Header::new_gnu();
    header.set_size(data.len() as u64);
    header.set_mode(0o755);
    header.set_entry_type(tar::EntryType::Regular);
    tar.append_data(&mut header, "weather-0.3.0/weather-server", &data[..])
        .unwrap();
    tar.into_inner().unwrap().finish().unwrap()
}

fn binary_server(sum: Option<&str>) -> Server {
    let archive = binary_archive();
    let path = format!("/bin/weather-0.3.0-{}.tar.gz", host_target());
    let mut files = HashMap::new();
    if let Some(sum) = sum {
        let sum = if sum == "right" {
            sha256_hex(&archive)
        } else {
            sum.to_string()
        };
        files.insert(
            format!("{path}.sha256"),
            format!("{sum}  weather.tar.gz\n").into_bytes(),
        );
        files.insert(path, archive);
    }
    Server::start(files)
}

#[test]
fn a_prebuilt_binary_is_fetched_verified_and_kept_out_of_the_content_hash() {
    let sandbox = Sandbox::new();
    let server = binary_server(Some("right"));
    let pkg = binary_package(&sandbox, &server);
    let out = run_yep(
        &sandbox.home(),
        &["install", pkg.to_str().unwrap(), "--yes"],
        Some(&server),
    );
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(
        text(&out.stdout).contains("binary: fetched `weather-server`"),
        "{}",
        text(&out.stdout)
    );
    let bin = sandbox.package().join("bin/weather-server");
    use std::os::unix::fs::PermissionsExt;
    assert_eq!(
        std::fs::metadata(&bin).unwrap().permissions().mode() & 0o111,
        0o111,
        "the binary must be executable"
    );
    // The approved content is the package as published, without the fetched binary.
    assert_eq!(
        str_at(&lock_entry(&sandbox.home(), "weather"), &["content_hash"]),
        content_hash(&pkg)
    );
    let list = text(&run_yep(&sandbox.home(), &["list"], None).stdout);
    assert!(list.contains("server `weather-server` found"), "{list}");
    // The binary is pinned on its own: intact, it is no drift; swapped, it is.
    assert!(!list.contains("changed on disk"), "{list}");
    std::fs::write(
        &bin,
        "#!/bin/sh
echo swapped
",
    )
    .unwrap();
    let list = text(&run_yep(&sandbox.home(), &["list"], None).stdout);
    assert!(
        list.contains("its prebuilt binary bin/weather-server differs"),
        "{list}"
    );
}

#[test]
fn a_binary_with_a_wrong_checksum_is_not_written_and_the_package_still_installs() {
    let sandbox = Sandbox::new();
    let server = binary_server(Some(&"0".repeat(64)));
    let pkg = binary_package(&sandbox, &server);
    let out = run_yep(
        &sandbox.home(),
        &["install", pkg.to_str().unwrap(), "--yes"],
        Some(&server),
    );
    assert!(out.status.success(), "{}", text(&out.stderr));
    let stdout = text(&out.stdout);
    assert!(
        stdout.contains("binary: not available") && stdout.contains("checksum mismatch"),
        "{stdout}"
    );
    assert!(!sandbox.package().join("bin/weather-server").exists());
    assert!(sandbox.package().join("plugin.json").is_file());
}

#[test]
fn a_missing_binary_leaves_a_package_only_install_with_a_clear_note() {
    let sandbox = Sandbox::new();
    let server = binary_server(None);
    let pkg = binary_package(&sandbox, &server);
    let out = run_yep(
        &sandbox.home(),
        &["install", pkg.to_str().unwrap(), "--yes"],
        Some(&server),
    );
    assert!(out.status.success(), "{}", text(&out.stderr));
    let stdout = text(&out.stdout);
    assert!(
        stdout.contains("binary: not available")
            && stdout.contains("calls will fail until `weather-server` is on PATH"),
        "{stdout}"
    );
    let list = text(&run_yep(&sandbox.home(), &["list"], None).stdout);
    assert!(list.contains("NOT FOUND"), "{list}");
}

#[test]
fn a_squatting_crate_cannot_take_an_installed_name() {
    let yolop = "yolop-extension-weather";
    let (mut files, _) = registry_files(yolop, &[("0.3.0", false)]);
    let sandbox = Sandbox::new();
    let fixture = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../tests/fixtures/hostile/squatted-crate-name/plugin.json");
    let squat = crate_archive(
        WEATHER_CRATE,
        "9.0.0",
        &[("plugin.json".into(), std::fs::read(&fixture).unwrap())],
    );
    let squat_sum = sha256_hex(&squat);
    files.insert(download_path(WEATHER_CRATE, "9.0.0"), squat.clone());
    // The same manifest under a crate whose name implies another extension.
    files.insert(download_path("yep-extension-sunny", "9.0.0"), squat);
    files.insert(
        index_path("yep-extension-sunny"),
        (index_line("yep-extension-sunny", "9.0.0", &squat_sum, false) + "\n").into_bytes(),
    );
    // First only the yolop crate exists: `weather` resolves to it.
    let first = Server::start(files.clone());
    let out = install(&sandbox, &first, &["weather", "--yes"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(
        text(&out.stderr).contains(&format!("source    crates.io {yolop}@0.3.0")),
        "{}",
        text(&out.stderr)
    );
    let before = std::fs::read_to_string(sandbox.home().join("extensions.lock")).unwrap();
    // Then the squatter publishes `yep-extension-weather`, which a bare name tries first.
    files.insert(
        index_path(WEATHER_CRATE),
        (index_line(WEATHER_CRATE, "9.0.0", &squat_sum, false) + "\n").into_bytes(),
    );
    let second = Server::start(files);
    for spec in ["weather", "crates.io:yep-extension-sunny"] {
        let out = install(&sandbox, &second, &[spec, "--yes"]);
        let stderr = text(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{spec}: {stderr}");
        assert!(
            stderr.contains(&format!(
                "`weather` is already installed from crates.io {yolop}@0.3.0"
            )) && stderr.contains("--replace"),
            "{spec}: {stderr}"
        );
        assert_eq!(
            std::fs::read_to_string(sandbox.home().join("extensions.lock")).unwrap(),
            before
        );
    }
    // Updating follows the crate that was approved, not the squatter.
    let out = run_yep(
        &sandbox.home(),
        &["update", "weather", "--yes"],
        Some(&second),
    );
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert_eq!(
        str_at(
            &lock_entry(&sandbox.home(), "weather"),
            &["source", "crate_name"]
        ),
        yolop
    );
    // A crate whose manifest name differs from what its name implies says so before consent.
    let fresh = Sandbox::new();
    let out = install(&fresh, &second, &["crates.io:yep-extension-sunny"]);
    assert!(
        text(&out.stderr)
            .contains("crate `yep-extension-sunny` installs as `weather`, not `sunny`"),
        "{}",
        text(&out.stderr)
    );
}

#[test]
fn an_archive_link_that_resolves_through_another_link_is_refused() {
    let fixture = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../tests/fixtures/hostile/archive-link-chain/links.json");
    let links: Vec<(String, String)> =
        serde_json::from_str(&std::fs::read_to_string(fixture).unwrap()).unwrap();
    let version = "0.3.0";
    let gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    let mut tar = tar::Builder::new(gz);
    for (path, data) in weather_files(version) {
        let mut header = tar::Header::new_gnu();
        header.set_size(data.len() as u64);
        header.set_mode(0o644);
        tar.append_data(
            &mut header,
            format!("{WEATHER_CRATE}-{version}/{path}"),
            data.as_slice(),
        )
        .unwrap();
    }
    for (path, target) in &links {
        let mut header = tar::Header::new_gnu();
        header.set_entry_type(tar::EntryType::Symlink);
        header.set_size(0);
        tar.append_link(
            &mut header,
            format!("{WEATHER_CRATE}-{version}/{path}"),
            target,
        )
        .unwrap();
    }
    let archive = tar.into_inner().unwrap().finish().unwrap();
    let server = serve_archive(version, archive);
    let sandbox = Sandbox::new();
    let out = install(
        &sandbox,
        &server,
        &["crates.io:yep-extension-weather", "--yes"],
    );
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("\"d/t\"") && stderr.contains("links through another link"),
        "{stderr}"
    );
    assert_nothing_installed(&sandbox);
}

/// The decompression bomb fixture: `(file count, bytes per file)` of zeros.
fn bomb_spec() -> (usize, usize) {
    let fixture = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../tests/fixtures/hostile/decompression-bomb/bomb.json");
    let spec: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(fixture).unwrap()).unwrap();
    (
        spec["files"].as_u64().unwrap() as usize,
        spec["bytes_per_file"].as_u64().unwrap() as usize,
    )
}

#[test]
fn a_decompression_bomb_is_refused_before_it_is_unpacked_and_the_limits_can_be_raised() {
    let (count, each) = bomb_spec();
    let version = "0.3.0";
    let mut files = weather_files(version);
    for i in 0..count {
        files.push((format!("data/zeros-{i}.bin"), vec![0u8; each]));
    }
    let archive = crate_archive(WEATHER_CRATE, version, &files);
    assert!(archive.len() < each, "the fixture compresses well");
    let server = serve_archive(version, archive);
    let sandbox = Sandbox::new();
    let args = ["install", "crates.io:yep-extension-weather", "--yes"];
    let total = (count * each).to_string();
    let half = (count * each / 2).to_string();

    let out = run_yep_with(
        &sandbox.home(),
        &args,
        Some(&server),
        &[("YEP_MAX_UNPACKED_BYTES", &half)],
    );
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains(&format!("past {half} bytes")) && stderr.contains("YEP_MAX_UNPACKED_BYTES"),
        "{stderr}"
    );
    assert_nothing_installed(&sandbox);
    assert!(
        files_under(&sandbox.home())
            .iter()
            .all(|f| !f.contains("zeros")),
        "{:?}",
        files_under(&sandbox.home())
    );

    let out = run_yep_with(
        &sandbox.home(),
        &args,
        Some(&server),
        &[("YEP_MAX_ARCHIVE_ENTRIES", "3")],
    );
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("past the limit of 3 entries")
            && stderr.contains("YEP_MAX_ARCHIVE_ENTRIES"),
        "{stderr}"
    );
    assert_nothing_installed(&sandbox);

    // Raised, the same archive installs.
    let raised = (count * each + 1_000_000).to_string();
    let out = run_yep_with(
        &sandbox.home(),
        &args,
        Some(&server),
        &[("YEP_MAX_UNPACKED_BYTES", &raised)],
    );
    assert!(
        out.status.success(),
        "{} (total {total})",
        text(&out.stderr)
    );
}

#[test]
fn a_prebuilt_binary_archive_bomb_is_refused_and_the_package_still_installs() {
    let (count, each) = bomb_spec();
    let gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    let mut tar = tar::Builder::new(gz);
    for i in 0..count {
        let mut header = tar::Header::new_gnu();
        header.set_size(each as u64);
        header.set_mode(0o755);
        tar.append_data(&mut header, format!("pad-{i}"), &vec![0u8; each][..])
            .unwrap();
    }
    let mut header = tar::Header::new_gnu();
    header.set_size(3);
    header.set_mode(0o755);
    tar.append_data(&mut header, "weather-server", &b"#!\n"[..])
        .unwrap();
    let archive = tar.into_inner().unwrap().finish().unwrap();
    let sum = sha256_hex(&archive);
    let mut served = HashMap::new();
    let name = format!("/bin/weather-0.3.0-{}.tar.gz", host_target());
    served.insert(format!("{name}.sha256"), format!("{sum}  x\n").into_bytes());
    served.insert(name, archive);
    let server = Server::start(served);
    let sandbox = Sandbox::new();
    let pkg = binary_package(&sandbox, &server);
    let half = (count * each / 2).to_string();
    let out = run_yep_with(
        &sandbox.home(),
        &["install", pkg.to_str().unwrap(), "--yes"],
        None,
        &[("YEP_MAX_UNPACKED_BYTES", &half)],
    );
    assert!(out.status.success(), "{}", text(&out.stderr));
    let stdout = text(&out.stdout);
    assert!(
        stdout.contains("binary: not available") && stdout.contains("YEP_MAX_UNPACKED_BYTES"),
        "{stdout}"
    );
    assert!(!sandbox.package().join("bin/weather-server").exists());
    assert!(!sandbox.package().join(".bin-unpack").exists());
}

/// A server for `binary_package` serving `archive` with its right checksum.
fn serve_binary_archive(archive: Vec<u8>) -> Server {
    let sum = sha256_hex(&archive);
    let mut served = HashMap::new();
    let name = format!("/bin/weather-0.3.0-{}.tar.gz", host_target());
    served.insert(format!("{name}.sha256"), format!("{sum}  x\n").into_bytes());
    served.insert(name, archive);
    Server::start(served)
}

/// A tar.gz of symlinks only.
fn link_archive(links: &[(String, String)]) -> Vec<u8> {
    let gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    let mut tar = tar::Builder::new(gz);
    for (path, target) in links {
        let mut header = tar::Header::new_gnu();
        header.set_entry_type(tar::EntryType::Symlink);
        header.set_size(0);
        tar.append_link(&mut header, path, target).unwrap();
    }
    tar.into_inner().unwrap().finish().unwrap()
}

/// Run `yep`, failing (not hanging) when it takes more than a generous two minutes.
#[allow(clippy::disallowed_methods)] // running the CLI under test
fn run_yep_bounded(home: &Path, args: &[&str]) -> std::process::ExitStatus {
    let mut child = crate::common::yep_command()
        .args(args)
        .env("YEP_HOME", home)
        .env_remove("RUST_LOG")
        .env_remove("YEP_MAX_UNPACKED_BYTES")
        .env_remove("YEP_MAX_ARCHIVE_ENTRIES")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(120);
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            return status;
        }
        if std::time::Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("yep {args:?} did not finish");
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
}

#[test]
fn a_prebuilt_binary_that_is_a_link_never_chmods_outside_and_link_loops_do_not_hang() {
    use std::os::unix::fs::PermissionsExt;
    let fixture = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../tests/fixtures/hostile/binary-archive-links/links.json");
    let spec: HashMap<String, Vec<(String, String)>> =
        serde_json::from_str(&std::fs::read_to_string(fixture).unwrap()).unwrap();

    let sandbox = Sandbox::new();
    // Six `..` from `<home>/extensions/.scratch/<n>/package/bin` reach the sandbox root.
    let victim = sandbox.root.path().join("victimfile");
    std::fs::write(&victim, "secret\n").unwrap();
    std::fs::set_permissions(&victim, std::fs::Permissions::from_mode(0o600)).unwrap();
    let server = serve_binary_archive(link_archive(&spec["chmod"]));
    let pkg = binary_package(&sandbox, &server);
    let out = run_yep(
        &sandbox.home(),
        &["install", pkg.to_str().unwrap(), "--yes"],
        None,
    );
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(
        text(&out.stdout).contains("binary: not available"),
        "{}",
        text(&out.stdout)
    );
    assert_eq!(
        std::fs::metadata(&victim).unwrap().permissions().mode() & 0o777,
        0o600,
        "the link's target was chmodded"
    );
    assert!(
        sandbox
            .package()
            .join("bin/weather-server")
            .symlink_metadata()
            .is_err()
    );

    let sandbox = Sandbox::new();
    let server = serve_binary_archive(link_archive(&spec["loop"]));
    let pkg = binary_package(&sandbox, &server);
    let status = run_yep_bounded(
        &sandbox.home(),
        &["install", pkg.to_str().unwrap(), "--yes"],
    );
    assert!(status.success());
    assert!(sandbox.package().join("plugin.json").is_file());
}

#[test]
fn a_crate_whose_long_name_header_declares_a_huge_body_is_refused() {
    let fixture = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../tests/fixtures/hostile/long-name-bomb/headers.json");
    let spec: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(fixture).unwrap()).unwrap();
    let declared = spec["declared_bytes"].as_u64().unwrap();
    let written = spec["written_bytes"].as_u64().unwrap() as usize;
    let version = "0.3.0";
    // The long-name header first, its body of zeros cut short, then a valid package.
    let mut raw = Vec::new();
    let mut h = tar::Header::new_gnu();
    h.set_entry_type(tar::EntryType::GNULongName);
    h.set_path("././@LongLink").unwrap();
    h.set_size(declared);
    h.set_cksum();
    raw.extend_from_slice(h.as_bytes());
    raw.extend(std::iter::repeat_n(0u8, written));
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    std::io::Write::write_all(&mut gz, &raw).unwrap();
    let mut tar = tar::Builder::new(gz);
    for (path, data) in weather_files(version) {
        let mut header = tar::Header::new_gnu();
        header.set_size(data.len() as u64);
        header.set_mode(0o644);
        tar.append_data(
            &mut header,
            format!("{WEATHER_CRATE}-{version}/{path}"),
            data.as_slice(),
        )
        .unwrap();
    }
    let archive = tar.into_inner().unwrap().finish().unwrap();
    let server = serve_archive(version, archive);
    let sandbox = Sandbox::new();
    let out = install(
        &sandbox,
        &server,
        &["crates.io:yep-extension-weather", "--yes"],
    );
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains(&format!("is a long-name or PAX header of {declared} bytes")),
        "{stderr}"
    );
    assert_nothing_installed(&sandbox);
}

#[test]
fn a_download_larger_than_the_cap_is_refused() {
    let version = "0.3.0";
    let mut files = weather_files(version);
    // Two MiB that do not compress.
    let mut state = 0x2545_f491_4f6c_dd1du64;
    let noise: Vec<u8> = (0..2 << 20)
        .map(|_| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state as u8
        })
        .collect();
    files.push(("data/noise.bin".into(), noise));
    let archive = crate_archive(WEATHER_CRATE, version, &files);
    let size = archive.len();
    let server = serve_archive(version, archive);
    let sandbox = Sandbox::new();
    // Entries 0 and bytes 0 leave a 1 MiB cap on the download; the archive is larger.
    assert!(size > 1 << 20, "{size}");
    let out = run_yep_with(
        &sandbox.home(),
        &["install", "crates.io:yep-extension-weather", "--yes"],
        Some(&server),
        &[
            ("YEP_MAX_UNPACKED_BYTES", "0"),
            ("YEP_MAX_ARCHIVE_ENTRIES", "0"),
        ],
    );
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains(&format!("larger than {} bytes", 1 << 20)),
        "{stderr}"
    );
    assert_nothing_installed(&sandbox);
}

#[test]
#[allow(clippy::disallowed_methods)] // running the CLI under test
fn a_bare_name_means_the_registry_even_with_a_same_named_directory_here() {
    let (files, _) = registry_files(WEATHER_CRATE, &[("0.3.0", false)]);
    let server = Server::start(files);
    let sandbox = Sandbox::new();
    let here =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/fixtures/hostile/cwd-shadow");
    assert!(here.join("weather/plugin.json").is_file());
    let run = |spec: &str| {
        crate::common::yep_command()
            .args(["install", spec, "--yes"])
            .current_dir(&here)
            .env("YEP_HOME", sandbox.home())
            .env_remove("RUST_LOG")
            .env("YEP_SPARSE_INDEX", server.index_url())
            .env("YEP_CRATE_DOWNLOAD", server.download_template())
            .env_remove("http_proxy")
            .env_remove("HTTP_PROXY")
            .env_remove("all_proxy")
            .env_remove("ALL_PROXY")
            .stdin(Stdio::null())
            .output()
            .unwrap()
    };
    let out = run("weather");
    let stderr = text(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(
        stderr.contains(&format!("source    crates.io {WEATHER_CRATE}@0.3.0")),
        "{stderr}"
    );
    assert_eq!(
        str_at(&lock_entry(&sandbox.home(), "weather"), &["source", "type"]),
        "crate"
    );
    assert!(
        !std::fs::read_to_string(sandbox.package().join("plugin.json"))
            .unwrap()
            .contains("6.6.6")
    );
    // Spelled as a path, the directory is what the user meant; it is another source, so it
    // needs --replace, and the summary says where it comes from.
    let out = run("./weather");
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("--replace"), "{stderr}");
}
