//! Package launchers made into pinned installs. `npx -y <pkg>`, `uvx <pkg>` and their kin
//! fetch whatever the registry serves at every cold start: slow (and, in the sandbox, with no
//! network to do it), and free to change under an approval. So when a server's command line
//! is one ([`parse`]), yep installs the package once, with the ecosystem's own client, into
//! a directory of the home ([`install`]), records the exact version and the registry's
//! integrity hash in the server's pin ([`Installed`]), and from then on starts the installed
//! entry point directly, offline, after checking the files are still what was installed
//! ([`Installed::verify`]).
//!
//! - npm: `npm install --save-exact --ignore-scripts` in `<home>/installs/<server>/<id>/`;
//!   the version and integrity come from its `package-lock.json`, the entry point from the
//!   package's `bin`, run as `node <bin>`.
//! - PyPI: a venv of `python3` in the same place, `pip install --only-binary :all: --report`;
//!   the version and the wheel's sha256 come from pip's report, the entry point is the
//!   console script in the venv.
//!
//! No package code runs at install: npm's lifecycle scripts are not run, and pip installs
//! wheels only.

use crate::Home;
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};

/// A package registry's ecosystem, and the client yep installs from it with.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Ecosystem {
    Npm,
    Pypi,
}

impl std::fmt::Display for Ecosystem {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Ecosystem::Npm => "npm",
            Ecosystem::Pypi => "PyPI",
        })
    }
}

/// What a launcher's command line asks for: a package from a registry, the program of it to
/// run, and that program's arguments.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Launched {
    /// The launcher as typed, from its file name on (`npx`, `uv tool run`).
    pub launcher: String,
    pub ecosystem: Ecosystem,
    /// The package's name (`@modelcontextprotocol/server-memory`, `mcp-server-time`).
    pub package: String,
    /// What was asked for, as the client takes it: `name@range` for npm, a requirement
    /// (`name==1.2`, `name>=1`) for pip.
    pub spec: String,
    /// The program to run when it is not the package's own (`npx -p pkg prog`, `uvx --from
    /// pkg prog`).
    pub program: Option<String>,
    /// The server's own arguments.
    pub args: Vec<String>,
}

/// The launcher `command args…` uses, when it is one yep installs for, with a package from a
/// registry; `None` for anything else (a local path, a git URL, an option yep does not know,
/// which would change what runs): that runs as written.
pub fn parse(command: &str, args: &[String]) -> Option<Launched> {
    let name = Path::new(command).file_name()?.to_str()?;
    let (launcher, ecosystem, rest) = match (name, args.first().map(String::as_str)) {
        ("npx" | "bunx" | "pnpx", _) => (name.to_string(), Ecosystem::Npm, args),
        ("npm", Some("exec" | "x")) => (format!("npm {}", args[0]), Ecosystem::Npm, &args[1..]),
        ("pnpm", Some("dlx")) => ("pnpm dlx".into(), Ecosystem::Npm, &args[1..]),
        ("uvx", _) => ("uvx".into(), Ecosystem::Pypi, args),
        ("uv", Some("tool")) if args.get(1).is_some_and(|a| a == "run") => {
            ("uv tool run".into(), Ecosystem::Pypi, &args[2..])
        }
        ("pipx", Some("run")) => ("pipx run".into(), Ecosystem::Pypi, &args[1..]),
        _ => return None,
    };
    let mut from: Option<String> = None;
    let mut i = 0;
    while let Some(arg) = rest.get(i) {
        i += 1;
        if arg == "--" {
            break;
        }
        if !arg.starts_with('-') {
            i -= 1;
            break;
        }
        let (flag, inline) = match arg.split_once('=') {
            Some((f, v)) if f.starts_with("--") => (f, Some(v.to_string())),
            _ => (arg.as_str(), None),
        };
        // Options that only quiet the launcher or answer its prompt.
        let quiet = match ecosystem {
            Ecosystem::Npm => matches!(
                flag,
                "-y" | "--yes" | "-q" | "--quiet" | "--silent" | "--prefer-online" | "--bun"
            ),
            Ecosystem::Pypi => matches!(flag, "-q" | "--quiet" | "--isolated"),
        };
        if quiet && inline.is_none() {
            continue;
        }
        let takes_package = match ecosystem {
            Ecosystem::Npm => matches!(flag, "-p" | "--package"),
            Ecosystem::Pypi => matches!(flag, "--from" | "--spec"),
        };
        if takes_package && from.is_none() {
            from = match inline {
                Some(v) => Some(v),
                None => {
                    i += 1;
                    Some(rest.get(i - 1)?.clone())
                }
            };
            continue;
        }
        // Anything else (`-c`, `--with`, `--python`, `--offline`…) changes what runs.
        return None;
    }
    let first = rest.get(i)?.clone();
    let args = rest[i + 1..].to_vec();
    let (spec, program) = match from {
        Some(spec) => (spec, Some(first)),
        None => (first, None),
    };
    let package = match ecosystem {
        Ecosystem::Npm => npm_name(&spec)?,
        Ecosystem::Pypi => pypi_name(&spec)?,
    };
    // A bare name the launcher finds installed already (`npx tsc`, `npx python3`) runs that
    // program, as the launcher would: nothing is fetched.
    if ecosystem == Ecosystem::Npm
        && spec == package
        && !package.starts_with('@')
        && on_path(&package).is_some()
    {
        return None;
    }
    // uvx's `name@version` is pip's `name==version`.
    let spec = match (ecosystem, spec.split_once('@')) {
        (Ecosystem::Pypi, Some((n, v))) if !v.is_empty() && n == package => format!("{n}=={v}"),
        _ => spec,
    };
    if program
        .as_deref()
        .is_some_and(|p| p.is_empty() || p.contains('/'))
    {
        return None;
    }
    Some(Launched {
        launcher,
        ecosystem,
        package,
        spec,
        program,
        args,
    })
}

/// The package an npm spec names from the registry (`@scope/name@range`, `name`), or `None`
/// for a path, a URL, a git or other protocol spec, or an alias.
fn npm_name(spec: &str) -> Option<String> {
    let (scope, rest) = match spec.strip_prefix('@') {
        Some(rest) => {
            let (scope, rest) = rest.split_once('/')?;
            (Some(scope), rest)
        }
        None => (None, spec),
    };
    let name = rest.split_once('@').map_or(rest, |(n, _)| n);
    let range = rest.split_once('@').map(|(_, r)| r);
    let ok = |s: &str| {
        !s.is_empty()
            && !s.starts_with('.')
            && s.len() <= 214
            && s.bytes().all(|b| {
                b.is_ascii_lowercase() || b.is_ascii_digit() || matches!(b, b'-' | b'.' | b'_')
            })
    };
    if !ok(name) || !scope.is_none_or(ok) {
        return None;
    }
    // A range is versions and operators, or a dist-tag: never `npm:`, `file:`, `git+…`.
    if range.is_some_and(|r| r.is_empty() || r.contains(':') || r.contains('/')) {
        return None;
    }
    Some(match scope {
        Some(scope) => format!("@{scope}/{name}"),
        None => name.to_string(),
    })
}

/// The project a pip requirement names (`name`, `name==1.0`, `name[extra]>=1`, `name@1.0`),
/// or `None` for a path, a URL or a direct reference.
fn pypi_name(spec: &str) -> Option<String> {
    let end = spec
        .find(|c: char| !(c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.')))
        .unwrap_or(spec.len());
    let (name, rest) = spec.split_at(end);
    if name.is_empty() || name.starts_with(['.', '-']) {
        return None;
    }
    let rest = rest.trim_start();
    let allowed = rest.is_empty()
        || rest.starts_with(['=', '<', '>', '!', '~', '['])
        || rest
            .strip_prefix('@')
            .is_some_and(|v| !v.trim().is_empty() && !v.contains(['/', ':']));
    if !allowed || rest.contains("://") {
        return None;
    }
    Some(name.to_string())
}

/// A server's package as installed and approved: recorded in its pin, so the approval covers
/// this version and these bytes.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Installed {
    pub ecosystem: Ecosystem,
    pub package: String,
    /// The exact version the request resolved to.
    pub version: String,
    /// The registry's hash of the package: npm's `integrity` (`sha512-…`), the wheel's
    /// `sha256:<hex>`.
    pub integrity: String,
    /// Where it is, relative to the home (`installs/<server>/<id>`).
    pub dir: String,
    /// What starts it, the first word a program found on `PATH` (`node`) or a path relative
    /// to the install, the rest relative paths.
    pub entry: Vec<String>,
    /// [`crate::hash::content_hash`] of the whole install: anything changed in it is not what
    /// was approved.
    pub tree: String,
    /// A quick stand-in for `tree`: every file's path, size, times and inode ([`stamp`]).
    /// While it holds, the contents are not read again.
    pub stamp: String,
    /// How many packages the install holds (the server's and its dependencies).
    pub packages: usize,
    /// Where the registry says it was built, when it says (npm's provenance).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub provenance: Option<Provenance>,
}

/// What a package's provenance attestation says built it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Provenance {
    /// The source repository (`https://github.com/owner/repo`).
    pub repository: String,
    /// The workflow that built it (`.github/workflows/release.yml`), and its ref.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub workflow: Option<String>,
}

/// Why a package could not be installed, or its install is not what was approved.
#[derive(Debug, thiserror::Error)]
pub enum InstallError {
    #[error("cannot run {client} to install {package}: {why}")]
    Client {
        client: String,
        package: String,
        why: String,
    },
    #[error("{client} could not install {package}: {output}")]
    Failed {
        client: String,
        package: String,
        /// The last lines it wrote, escaped.
        output: String,
    },
    #[error("{package} was installed, but {why}")]
    Entry { package: String, why: String },
    #[error("{0}")]
    Io(String),
    #[error(
        "the installed files of {package} {version} changed since it was approved ({dir}); it does not start: `yep update {server}` installs it again"
    )]
    Changed {
        server: String,
        package: String,
        version: String,
        dir: String,
    },
    #[error(
        "{package} {version} is not installed where it was approved ({dir}); it does not start: `yep update {server}` installs it again"
    )]
    Missing {
        server: String,
        package: String,
        version: String,
        dir: String,
    },
}

fn io(context: impl std::fmt::Display) -> impl FnOnce(std::io::Error) -> InstallError {
    move |e| InstallError::Io(format!("{context}: {e}"))
}

/// The longest an install may take: a cold cache is bounded by the download.
const INSTALL_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(15 * 60);

/// Where the installs of the server whose log stem is `stem` live.
pub fn installs_dir(home: &Home, stem: &str) -> PathBuf {
    home.root.join("installs").join(stem)
}

/// Install what `launched` asks for, for the server whose log stem is `stem`, into a new
/// directory of the home: the network is the client's, as for `yep install`. Nothing of the
/// package runs. On failure the directory is gone again.
pub fn install(
    home: &Home,
    stem: &str,
    launched: &Launched,
    progress: &crate::progress::Progress,
) -> Result<Installed, InstallError> {
    let parent = installs_dir(home, stem);
    std::fs::create_dir_all(&parent).map_err(io(format!("cannot create {}", parent.display())))?;
    let id = format!(
        "{}-{}",
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_millis())
            .unwrap_or_default(),
        std::process::id()
    );
    let dir = parent.join(&id);
    std::fs::create_dir(&dir).map_err(io(format!("cannot create {}", dir.display())))?;
    // Until an approval records it ([`approved`]), another approval's [`prune`] leaves it be.
    let _ = std::fs::write(parent.join(format!("{id}.unapproved")), b"");
    let _step = progress.step(format!(
        "installing {} with {}",
        launched.spec,
        match launched.ecosystem {
            Ecosystem::Npm => "npm",
            Ecosystem::Pypi => "pip",
        }
    ));
    let result = match launched.ecosystem {
        Ecosystem::Npm => install_npm(&dir, launched),
        Ecosystem::Pypi => install_pypi(&dir, launched),
    }
    .and_then(|mut installed| {
        installed.dir = format!("installs/{stem}/{id}");
        installed.tree = crate::hash::content_hash(&dir)
            .map_err(io(format!("cannot hash {}", dir.display())))?;
        installed.stamp = stamp(&dir).map_err(io(format!("cannot read {}", dir.display())))?;
        Ok(installed)
    });
    if result.is_err() {
        let _ = crate::fsutil::remove_tree(&dir);
        let _ = std::fs::remove_file(parent.join(format!("{id}.unapproved")));
        // The server's directory too, when this was its only install.
        let _ = std::fs::remove_dir(&parent);
    }
    result
}

/// Run `program args` in `dir` to completion (bounded by [`INSTALL_TIMEOUT`]), its output
/// going to `dir/../<id>.log`: what it wrote (the first MiB), or its last lines when it fails.
fn run(program: &Path, args: &[&str], dir: &Path, env: &[(&str, &str)]) -> Result<String, String> {
    run_logged(program, args, dir, env, &dir.with_extension("log"))
}

/// [`run`], its output going to `log` (removed after).
pub(crate) fn run_logged(
    program: &Path,
    args: &[&str],
    dir: &Path,
    env: &[(&str, &str)],
    log: &Path,
) -> Result<String, String> {
    let log = log.to_path_buf();
    let out = std::fs::File::create(&log).map_err(|e| e.to_string())?;
    let err = out.try_clone().map_err(|e| e.to_string())?;
    #[allow(clippy::disallowed_methods)] // the ecosystem's client, run to completion here
    let mut child = std::process::Command::new(program)
        .args(args)
        .current_dir(dir)
        .envs(env.iter().copied())
        .stdin(std::process::Stdio::null())
        .stdout(out)
        .stderr(err)
        .spawn()
        .map_err(|e| format!("cannot run {}: {e}", program.display()))?;
    let started = std::time::Instant::now();
    let status = loop {
        match child.try_wait() {
            Ok(Some(status)) => break status,
            Ok(None) if started.elapsed() > INSTALL_TIMEOUT => {
                let _ = child.kill();
                let _ = child.wait();
                let _ = std::fs::remove_file(&log);
                return Err(format!(
                    "it ran past {} minutes and was stopped",
                    INSTALL_TIMEOUT.as_secs() / 60
                ));
            }
            Ok(None) => std::thread::sleep(std::time::Duration::from_millis(50)),
            Err(e) => return Err(e.to_string()),
        }
    };
    let text = crate::fsutil::read_regular(&log, 1 << 20, crate::fsutil::Links::Refuse)
        .map(|b| String::from_utf8_lossy(&b).into_owned())
        .unwrap_or_default();
    let _ = std::fs::remove_file(&log);
    if status.success() {
        return Ok(text);
    }
    let lines: Vec<&str> = text.lines().filter(|l| !l.trim().is_empty()).collect();
    let tail = lines[lines.len().saturating_sub(6)..].join("\n");
    Err(crate::text::escape_controls(tail.trim()).into_owned())
}

/// Whether a version or hash from a registry is plain text (letters, digits, `.+-_:/=`), as
/// every real one is: anything else is refused before it is recorded or shown.
fn plain(text: &str) -> bool {
    !text.is_empty()
        && text.len() <= 256
        && text
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"._+-:/=".contains(&b))
}

/// `name` found on `PATH`.
pub fn on_path(name: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|d| d.join(name))
        .find(|p| p.is_file())
}

fn install_npm(dir: &Path, launched: &Launched) -> Result<Installed, InstallError> {
    let client = |why: String| InstallError::Client {
        client: "npm".into(),
        package: launched.spec.clone(),
        why,
    };
    let npm = on_path("npm").ok_or_else(|| client("npm is not on PATH".into()))?;
    std::fs::write(
        dir.join("package.json"),
        "{\"name\":\"yep-pinned-install\",\"private\":true}\n",
    )
    .map_err(io(format!("cannot write in {}", dir.display())))?;
    run(
        &npm,
        &[
            "install",
            "--save-exact",
            "--ignore-scripts",
            "--no-audit",
            "--no-fund",
            "--no-update-notifier",
            "--loglevel=error",
            "--",
            &launched.spec,
        ],
        dir,
        &[],
    )
    .map_err(|output| InstallError::Failed {
        client: "npm".into(),
        package: launched.spec.clone(),
        output,
    })?;
    // What the package says of itself is escaped before it is shown.
    let entry_err = |why: String| InstallError::Entry {
        package: launched.package.clone(),
        why: crate::text::escape_controls(&why).into_owned(),
    };
    let lock: serde_json::Value = std::fs::read(dir.join("package-lock.json"))
        .ok()
        .and_then(|b| serde_json::from_slice(&b).ok())
        .ok_or_else(|| entry_err("npm wrote no package-lock.json".into()))?;
    let packages = lock["packages"].as_object().map_or(0, |p| p.len());
    let own = &lock["packages"][format!("node_modules/{}", launched.package)];
    let version = own["version"]
        .as_str()
        .filter(|v| plain(v))
        .ok_or_else(|| {
            entry_err("its version in package-lock.json is missing or not one".into())
        })?;
    let integrity = own["integrity"]
        .as_str()
        .filter(|v| plain(v))
        .ok_or_else(|| entry_err("the registry gave no integrity hash for it".into()))?;
    let root = dir.join("node_modules").join(&launched.package);
    let manifest: serde_json::Value = std::fs::read(root.join("package.json"))
        .ok()
        .and_then(|b| serde_json::from_slice(&b).ok())
        .ok_or_else(|| entry_err("its package.json cannot be read".into()))?;
    let bare = launched
        .package
        .rsplit('/')
        .next()
        .unwrap_or(&launched.package);
    let bins: Vec<(String, String)> = match &manifest["bin"] {
        serde_json::Value::String(s) => vec![(bare.to_string(), s.clone())],
        serde_json::Value::Object(m) => m
            .iter()
            .filter_map(|(k, v)| Some((k.clone(), v.as_str()?.to_string())))
            .collect(),
        _ => Vec::new(),
    };
    // As npx picks: the program named, else the only one, else the one named as the package.
    let wanted = launched.program.as_deref();
    let bin = match wanted {
        Some(w) => bins.iter().find(|(k, _)| k == w),
        None if bins.len() == 1 => bins.first(),
        None => bins.iter().find(|(k, _)| k == bare),
    }
    .ok_or_else(|| {
        let names: Vec<&str> = bins.iter().map(|(k, _)| k.as_str()).collect();
        entry_err(match (wanted, names.is_empty()) {
            (_, true) => "it has no program to run (no `bin` in its package.json)".into(),
            (Some(w), false) => format!("it has no program `{w}` ({})", names.join(", ")),
            (None, false) => format!(
                "it has several programs and none is named as the package: name one with `npx -p {} <program>` ({})",
                launched.package,
                names.join(", ")
            ),
        })
    })?;
    let rel = Path::new("node_modules")
        .join(&launched.package)
        .join(bin.1.trim_start_matches("./"));
    if !crate::fsutil::stays_inside(&bin.1) || !dir.join(&rel).is_file() {
        return Err(entry_err(format!("its program `{}` is not in it", bin.1)));
    }
    let rel = rel.to_string_lossy().into_owned();
    let provenance = provenance(&npm, dir, &launched.package, version);
    // A script for Node, as npx would run it; a program with another interpreter runs as is.
    let head = std::fs::read(dir.join(&rel)).unwrap_or_default();
    let first = head.split(|b| *b == b'\n').next().unwrap_or_default();
    let entry = match first.starts_with(b"#!") && !String::from_utf8_lossy(first).contains("node") {
        true => vec![rel],
        false => vec!["node".into(), rel],
    };
    Ok(Installed {
        ecosystem: Ecosystem::Npm,
        package: launched.package.clone(),
        version: version.to_string(),
        integrity: integrity.to_string(),
        dir: String::new(),
        entry,
        tree: String::new(),
        stamp: String::new(),
        packages: packages.saturating_sub(1),
        provenance,
    })
}

fn install_pypi(dir: &Path, launched: &Launched) -> Result<Installed, InstallError> {
    let client = |why: String| InstallError::Client {
        client: "pip".into(),
        package: launched.spec.clone(),
        why,
    };
    let python = on_path("python3").ok_or_else(|| client("python3 is not on PATH".into()))?;
    let failed = |output| InstallError::Failed {
        client: "pip".into(),
        package: launched.spec.clone(),
        output,
    };
    run(&python, &["-m", "venv", "venv"], dir, &[]).map_err(failed)?;
    let pip = dir.join("venv/bin/pip");
    run(
        &pip,
        &[
            "install",
            "--only-binary",
            ":all:",
            "--disable-pip-version-check",
            "--no-input",
            "--quiet",
            "--report",
            "../report.json",
            "--",
            &launched.spec,
        ],
        &dir.join("venv"),
        &[("PIP_REQUIRE_VIRTUALENV", "1")],
    )
    .map_err(failed)?;
    let entry_err = |why: String| InstallError::Entry {
        package: launched.package.clone(),
        why: crate::text::escape_controls(&why).into_owned(),
    };
    let report_path = dir.join("report.json");
    let report: serde_json::Value = std::fs::read(&report_path)
        .ok()
        .and_then(|b| serde_json::from_slice(&b).ok())
        .ok_or_else(|| entry_err("pip wrote no report of what it installed".into()))?;
    let _ = std::fs::remove_file(&report_path);
    let items = report["install"].as_array().cloned().unwrap_or_default();
    let normal = |n: &str| n.to_ascii_lowercase().replace(['_', '.'], "-");
    let own = items
        .iter()
        .find(|i| normal(i["metadata"]["name"].as_str().unwrap_or("")) == normal(&launched.package))
        .ok_or_else(|| entry_err("pip's report does not name it".into()))?;
    let version = own["metadata"]["version"]
        .as_str()
        .unwrap_or("")
        .to_string();
    let archive = &own["download_info"]["archive_info"];
    let integrity = archive["hashes"]["sha256"]
        .as_str()
        .map(|h| format!("sha256:{h}"))
        .or_else(|| archive["hash"].as_str().map(|h| h.replace('=', ":")))
        .filter(|h| plain(h))
        .ok_or_else(|| entry_err("the index gave no hash for it".into()))?;
    let program = launched
        .program
        .clone()
        .unwrap_or_else(|| launched.package.clone());
    let rel = format!("venv/bin/{program}");
    if program.contains('/') || !dir.join(&rel).is_file() {
        let scripts: Vec<String> = std::fs::read_dir(dir.join("venv/bin"))
            .into_iter()
            .flatten()
            .flatten()
            .filter_map(|e| e.file_name().into_string().ok())
            .filter(|n| {
                !["python", "pip", "activate", "Activate"]
                    .iter()
                    .any(|p| n.starts_with(p))
            })
            .collect();
        return Err(entry_err(format!(
            "it has no program `{program}` ({}): name one with `uvx --from {} <program>`",
            match scripts.is_empty() {
                true => "it installs none".to_string(),
                false => format!("it installs {}", scripts.join(", ")),
            },
            launched.package
        )));
    }
    Ok(Installed {
        ecosystem: Ecosystem::Pypi,
        package: launched.package.clone(),
        version,
        integrity,
        dir: String::new(),
        entry: vec![rel],
        tree: String::new(),
        stamp: String::new(),
        packages: items.len(),
        provenance: None,
    })
}

/// Where the registry says `package` `version` was built: its provenance attestation's source
/// repository and workflow, when it has one (npm's `dist.attestations`). Best effort: none
/// when the registry has none or cannot be asked.
#[cfg(feature = "fetch")]
fn provenance(npm: &Path, dir: &Path, package: &str, version: &str) -> Option<Provenance> {
    let spec = format!("{package}@{version}");
    let said = run(
        npm,
        &[
            "view",
            "--json",
            "--loglevel=silent",
            "--",
            &spec,
            "dist.attestations.url",
        ],
        dir,
        &[],
    )
    .ok()?;
    let url: String = serde_json::from_str(said.trim()).ok()?;
    if !(url.starts_with("https://") || url.starts_with("http://")) {
        return None;
    }
    let body = crate::fetch::http_get_limited(&url, &spec, 4 << 20, &Default::default()).ok()?;
    provenance_of(&serde_json::from_slice(&body).ok()?)
}

/// What an npm attestations document (`{"attestations": [{predicateType, bundle}]}`) says
/// built the package: its SLSA provenance statement's workflow.
#[cfg(feature = "fetch")]
fn provenance_of(doc: &serde_json::Value) -> Option<Provenance> {
    use base64::Engine as _;
    let attestation = doc["attestations"].as_array()?.iter().find(|a| {
        a["predicateType"]
            .as_str()
            .is_some_and(|t| t.contains("slsa.dev/provenance"))
    })?;
    let payload = attestation["bundle"]["dsseEnvelope"]["payload"].as_str()?;
    let statement: serde_json::Value = serde_json::from_slice(
        &base64::engine::general_purpose::STANDARD
            .decode(payload)
            .ok()?,
    )
    .ok()?;
    let workflow = &statement["predicate"]["buildDefinition"]["externalParameters"]["workflow"];
    let repository = workflow["repository"].as_str()?.to_string();
    let path = workflow["path"].as_str();
    let at = workflow["ref"].as_str();
    Some(Provenance {
        repository,
        workflow: path.map(|p| match at {
            Some(r) => format!("{p} at {r}"),
            None => p.to_string(),
        }),
    })
}

#[cfg(not(feature = "fetch"))]
fn provenance(_: &Path, _: &Path, _: &str, _: &str) -> Option<Provenance> {
    None
}

/// Every file's and link's path, size, times and inode, hashed ([`crate::verify`]'s
/// fingerprint): what [`Installed::verify`] compares before it reads any content.
pub fn stamp(dir: &Path) -> std::io::Result<String> {
    let (digest, _) = crate::verify::fingerprint(dir)?;
    Ok(format!("stamp:{}", crate::hash::hex(&digest)))
}

impl Installed {
    /// Its directory in `home`.
    pub fn path(&self, home: &Home) -> PathBuf {
        home.root.join(&self.dir)
    }

    /// The program and arguments that start it, before the server's own arguments.
    pub fn command(&self, home: &Home) -> (PathBuf, Vec<String>) {
        let dir = self.path(home);
        let mut words = self.entry.iter();
        let first = words.next().map(String::as_str).unwrap_or_default();
        let program = match first.contains('/') {
            true => dir.join(first),
            false => on_path(first).unwrap_or_else(|| PathBuf::from(first)),
        };
        let args = words
            .map(|w| dir.join(w).to_string_lossy().into_owned())
            .collect();
        (program, args)
    }

    /// Whether the install is still what was approved: its stamp, else every byte. Server
    /// `server` is named in the error.
    pub fn verify(&self, home: &Home, server: &str) -> Result<(), InstallError> {
        let dir = self.path(home);
        let shown = dir.display().to_string();
        // The directory is the lock's: one that left the installs is never read.
        if !crate::fsutil::stays_inside(&self.dir) || !self.dir.starts_with("installs/") {
            return Err(InstallError::Missing {
                server: server.to_string(),
                package: self.package.clone(),
                version: self.version.clone(),
                dir: shown,
            });
        }
        if !dir.is_dir() {
            return Err(InstallError::Missing {
                server: server.to_string(),
                package: self.package.clone(),
                version: self.version.clone(),
                dir: shown,
            });
        }
        if stamp(&dir).is_ok_and(|s| s == self.stamp) {
            return Ok(());
        }
        match crate::hash::content_hash(&dir) {
            Ok(tree) if tree == self.tree => Ok(()),
            _ => Err(InstallError::Changed {
                server: server.to_string(),
                package: self.package.clone(),
                version: self.version.clone(),
                dir: shown,
            }),
        }
    }

    /// In a few words: `@scope/pkg 1.2.3 from npm (sha512-abc…, 97 packages)`.
    pub fn said(&self) -> String {
        let short: String = self.integrity.chars().take(20).collect();
        format!(
            "{} {} from {} ({short}…, {} package{})",
            self.package,
            self.version,
            self.ecosystem,
            self.packages,
            if self.packages == 1 { "" } else { "s" }
        )
    }
}

/// What a launcher kept as written (`--as-written`) needs beyond the default profile: its
/// registry, through the egress proxy (the one the environment names, else the public one),
/// and its caches, written (made here when missing: a rule needs a path that exists).
pub fn needs(launched: &Launched) -> crate::grants::SandboxGrants {
    let env = |names: &[&str]| {
        names
            .iter()
            .find_map(|n| std::env::var(n).ok().filter(|v| !v.is_empty()))
    };
    let (registries, caches): (Vec<String>, Vec<&str>) = match launched.ecosystem {
        Ecosystem::Npm => (
            vec![
                env(&["npm_config_registry", "NPM_CONFIG_REGISTRY"])
                    .unwrap_or_else(|| "https://registry.npmjs.org/".into()),
            ],
            match launched.launcher.as_str() {
                "pnpm dlx" | "pnpx" => vec![".cache/pnpm", ".local/share/pnpm"],
                "bunx" => vec![".bun/install/cache"],
                _ => vec![".npm"],
            },
        ),
        Ecosystem::Pypi => (
            match env(&["UV_DEFAULT_INDEX", "UV_INDEX_URL", "PIP_INDEX_URL"]) {
                Some(index) => vec![index],
                None => vec![
                    "https://pypi.org/".into(),
                    "https://files.pythonhosted.org/".into(),
                ],
            },
            match launched.launcher.as_str() {
                "pipx run" => vec![".cache/pipx", ".local/share/pipx"],
                _ => vec![".cache/uv", ".local/share/uv"],
            },
        ),
    };
    let home = std::env::var_os("HOME").map(PathBuf::from);
    let mut write = Vec::new();
    for cache in caches {
        if let Some(home) = &home {
            let _ = std::fs::create_dir_all(home.join(cache));
        }
        write.push(format!("~/{cache}"));
    }
    crate::grants::SandboxGrants {
        net: registries.iter().filter_map(|url| host_of(url)).collect(),
        write,
        ..Default::default()
    }
}

/// The registry settings of yep's environment a launcher kept as written is given (the
/// sandbox passes none of the user's variables by default): which registry or index it asks.
pub fn registry_env(launched: &Launched) -> Vec<(String, String)> {
    let names: &[&str] = match launched.ecosystem {
        Ecosystem::Npm => &["npm_config_registry", "NPM_CONFIG_REGISTRY"],
        Ecosystem::Pypi => &[
            "UV_DEFAULT_INDEX",
            "UV_INDEX_URL",
            "PIP_INDEX_URL",
            "PIP_EXTRA_INDEX_URL",
        ],
    };
    names
        .iter()
        .filter_map(|n| Some((n.to_string(), std::env::var(n).ok()?)))
        .collect()
}

/// `host` or `host:port` of an http(s) URL.
fn host_of(url: &str) -> Option<String> {
    let rest = url
        .strip_prefix("https://")
        .or_else(|| url.strip_prefix("http://"))?;
    let authority = rest.split(['/', '?', '#']).next()?;
    let authority = authority.rsplit('@').next()?;
    (!authority.is_empty()).then(|| authority.to_ascii_lowercase())
}

/// Mark the install in `dir` (relative to the home) approved: [`prune`] may now take it
/// when it is replaced.
pub fn approved(home: &Home, dir: &str) {
    let _ = std::fs::remove_file(home.root.join(format!("{dir}.unapproved")));
}

/// Remove the installs of server `stem` that none of `keep` (directories relative to the
/// home) is: each one replaced, and any left by an install that never finished. One being
/// made or approved right now (marked unapproved, for less than an hour) is left be.
pub fn prune(home: &Home, stem: &str, keep: &[&str]) {
    let parent = installs_dir(home, stem);
    let Ok(entries) = std::fs::read_dir(&parent) else {
        return;
    };
    for entry in entries.flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        if name.ends_with(".unapproved") || name.ends_with(".log") {
            continue;
        }
        if keep.contains(&format!("installs/{stem}/{name}").as_str()) {
            continue;
        }
        let marker = parent.join(format!("{name}.unapproved"));
        let pending = marker
            .metadata()
            .and_then(|m| m.modified())
            .ok()
            .and_then(|t| t.elapsed().ok())
            .is_some_and(|age| age < std::time::Duration::from_secs(3600));
        if pending {
            continue;
        }
        let _ = crate::fsutil::remove_tree(&entry.path());
        let _ = std::fs::remove_file(marker);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words(line: &str) -> (String, Vec<String>) {
        let mut w = line.split(' ').map(String::from);
        (w.next().unwrap(), w.collect())
    }

    fn parsed(line: &str) -> Option<(String, String, Option<String>, Vec<String>)> {
        let (c, a) = words(line);
        parse(&c, &a).map(|l| (l.package, l.spec, l.program, l.args))
    }

    #[test]
    fn launchers_read_as_the_package_they_fetch_and_its_arguments() {
        let s = |x: &str| x.to_string();
        assert_eq!(
            parsed("npx -y @modelcontextprotocol/server-filesystem@2026.8.31 /tmp/a"),
            Some((
                s("@modelcontextprotocol/server-filesystem"),
                s("@modelcontextprotocol/server-filesystem@2026.8.31"),
                None,
                vec![s("/tmp/a")]
            ))
        );
        assert_eq!(
            parsed("/usr/bin/npx --yes pkg --port 3"),
            Some((s("pkg"), s("pkg"), None, vec![s("--port"), s("3")]))
        );
        assert_eq!(
            parsed("npx -p @x/tools@^1 x-serve a"),
            Some((
                s("@x/tools"),
                s("@x/tools@^1"),
                Some(s("x-serve")),
                vec![s("a")]
            ))
        );
        assert_eq!(
            parsed("npm exec --yes -- pkg@1 a"),
            Some((s("pkg"), s("pkg@1"), None, vec![s("a")]))
        );
        assert_eq!(
            parsed("pnpm dlx pkg"),
            Some((s("pkg"), s("pkg"), None, vec![]))
        );
        assert_eq!(
            parsed("uvx mcp-server-git --repository /r"),
            Some((
                s("mcp-server-git"),
                s("mcp-server-git"),
                None,
                vec![s("--repository"), s("/r")]
            ))
        );
        assert_eq!(
            parsed("uvx mcp-server-time@2026.10.19"),
            Some((
                s("mcp-server-time"),
                s("mcp-server-time==2026.10.19"),
                None,
                vec![]
            ))
        );
        assert_eq!(
            parsed("uv tool run --from mcp-server-git==1.0 mcp-server-git"),
            Some((
                s("mcp-server-git"),
                s("mcp-server-git==1.0"),
                Some(s("mcp-server-git")),
                vec![]
            ))
        );
        assert_eq!(
            parsed("pipx run pkg>=2 x"),
            Some((s("pkg"), s("pkg>=2"), None, vec![s("x")]))
        );
    }

    #[test]
    #[cfg(feature = "fetch")]
    fn an_attestation_reads_as_the_repository_and_workflow_that_built_it() {
        use base64::Engine as _;
        let statement = serde_json::json!({
            "predicate": {"buildDefinition": {"externalParameters": {"workflow": {
                "repository": "https://github.com/modelcontextprotocol/servers",
                "path": ".github/workflows/release.yml",
                "ref": "refs/tags/2026.8.31"
            }}}}
        });
        let payload = base64::engine::general_purpose::STANDARD.encode(statement.to_string());
        let doc = serde_json::json!({"attestations": [
            {"predicateType": "https://github.com/npm/attestation/tree/main/specs/publish/v0.1",
             "bundle": {"dsseEnvelope": {"payload": "e30="}}},
            {"predicateType": "https://slsa.dev/provenance/v1",
             "bundle": {"dsseEnvelope": {"payload": payload}}}
        ]});
        assert_eq!(
            provenance_of(&doc),
            Some(Provenance {
                repository: "https://github.com/modelcontextprotocol/servers".into(),
                workflow: Some(".github/workflows/release.yml at refs/tags/2026.8.31".into()),
            })
        );
        assert_eq!(
            provenance_of(&serde_json::json!({"attestations": []})),
            None
        );
    }

    #[test]
    fn what_is_not_a_registry_package_runs_as_written() {
        for line in [
            "npx ./local",
            "npx /abs/server.js",
            "npx github:owner/repo",
            "npx pkg@npm:other",
            "npx -c 'do things'",
            "npx --offline pkg",
            "npx",
            "uvx --with extra pkg",
            "uvx ./dir",
            "uvx git+https://x/y",
            "uvx pkg@https://x/y.whl",
            "uv run server.py",
            "pipx install pkg",
            "node server.js",
            "npx -p pkg ../escape",
            "npx .hidden",
            "npx UPPER",
        ] {
            assert_eq!(parsed(line), None, "{line}");
        }
    }
}
