//! Getting a package's bytes into a staging directory: a local copy, a git clone, or a crate
//! from the crates.io sparse index (checksum verified before anything is written, unpacked
//! without trusting archive paths). Also the optional prebuilt server binary.

use super::fsutil::copy_tree;
use super::hash::sha256_hex;
use serde_json::Value;
use std::io::Read;
use std::path::{Component, Path, PathBuf};
use std::time::Duration;

/// Why a fetch failed. Nothing was written to the home.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum FetchError {
    #[error("{0} was not found")]
    NotFound(String),
    #[error("failed to download {url}: {message}")]
    Http { url: String, message: String },
    #[error(
        "checksum mismatch for {what}: the index says {expected}, the download is {actual}; nothing was written"
    )]
    Checksum {
        what: String,
        expected: String,
        actual: String,
    },
    #[error("refusing {archive}: entry {entry:?} {why}; nothing was written")]
    UnsafeArchive {
        archive: String,
        entry: String,
        why: String,
    },
    #[error("{0}")]
    Version(String),
    #[error("git {args} failed: {message}")]
    Git { args: String, message: String },
    #[error("{context}: {source}")]
    Io {
        context: String,
        source: std::io::Error,
    },
}

fn io(context: impl Into<String>) -> impl FnOnce(std::io::Error) -> FetchError {
    let context = context.into();
    move |source| FetchError::Io { context, source }
}

/// The registry endpoints, overridable for tests.
pub struct Registry {
    /// Base URL of the sparse index, ending in `/`.
    pub index: String,
    /// Download URL template with `{crate}` and `{version}`.
    pub download: String,
}

impl Registry {
    /// `YEP_SPARSE_INDEX` and `YEP_CRATE_DOWNLOAD`, else crates.io.
    pub fn from_env() -> Registry {
        let mut index =
            std::env::var("YEP_SPARSE_INDEX").unwrap_or_else(|_| "https://index.crates.io/".into());
        if !index.ends_with('/') {
            index.push('/');
        }
        let download = std::env::var("YEP_CRATE_DOWNLOAD").unwrap_or_else(|_| {
            "https://static.crates.io/crates/{crate}/{crate}-{version}.crate".into()
        });
        Registry { index, download }
    }
}

/// The index path of a crate: `1/a`, `2/ab`, `3/a/abc`, `ab/cd/abcd…`.
pub fn sparse_path(name: &str) -> String {
    let name = name.to_ascii_lowercase();
    match name.len() {
        1 => format!("1/{name}"),
        2 => format!("2/{name}"),
        3 => format!("3/{}/{name}", &name[..1]),
        _ => format!("{}/{}/{name}", &name[..2], &name[2..4]),
    }
}

fn agent() -> ureq::Agent {
    // The operating system's trust store (which honours SSL_CERT_FILE), not a bundled copy:
    // behind a proxy with its own certificate authority, that is what works.
    let tls = ureq::tls::TlsConfig::builder()
        .root_certs(ureq::tls::RootCerts::PlatformVerifier)
        .build();
    ureq::Agent::config_builder()
        .tls_config(tls)
        .timeout_global(Some(Duration::from_secs(120)))
        .user_agent("yep-extension-install (https://github.com/yep-dev/yep)")
        .build()
        .into()
}

/// GET a URL into memory; a progress bar on stderr when it is a terminal.
pub fn http_get(url: &str, label: &str) -> Result<Vec<u8>, FetchError> {
    let err = |message: String| FetchError::Http {
        url: url.to_string(),
        message,
    };
    let mut response = match agent().get(url).call() {
        Ok(r) => r,
        Err(ureq::Error::StatusCode(404)) => return Err(FetchError::NotFound(url.to_string())),
        Err(e) => return Err(err(e.to_string())),
    };
    let total = response
        .headers()
        .get("content-length")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    let bar = progress_bar(label, total);
    let mut reader = response
        .body_mut()
        .with_config()
        .limit(512 * 1024 * 1024)
        .reader();
    let mut out = Vec::with_capacity(total.unwrap_or(0).min(64 << 20) as usize);
    let mut chunk = vec![0u8; 64 * 1024];
    loop {
        let n = reader.read(&mut chunk).map_err(|e| err(e.to_string()))?;
        if n == 0 {
            break;
        }
        out.extend_from_slice(&chunk[..n]);
        if let Some(bar) = &bar {
            bar.inc(n as u64);
        }
    }
    if let Some(bar) = bar {
        bar.finish_and_clear();
    }
    Ok(out)
}

fn progress_bar(label: &str, total: Option<u64>) -> Option<indicatif::ProgressBar> {
    use std::io::IsTerminal;
    if !std::io::stderr().is_terminal() {
        return None;
    }
    let bar = match total {
        Some(n) => indicatif::ProgressBar::new(n),
        None => indicatif::ProgressBar::new_spinner(),
    };
    let style = indicatif::ProgressStyle::with_template("{msg} {bar:30} {bytes}/{total_bytes}")
        .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar());
    bar.set_style(style);
    bar.set_message(label.to_string());
    Some(bar)
}

/// One version line of the sparse index.
#[derive(Debug, Clone)]
pub struct IndexVersion {
    pub version: String,
    pub checksum: String,
    pub yanked: bool,
}

/// The versions the index lists for a crate.
pub fn index_versions(registry: &Registry, name: &str) -> Result<Vec<IndexVersion>, FetchError> {
    let url = format!("{}{}", registry.index, sparse_path(name));
    let body = http_get(&url, name).map_err(|e| match e {
        FetchError::NotFound(_) => FetchError::NotFound(format!("crate `{name}` in the index")),
        other => other,
    })?;
    let text = String::from_utf8_lossy(&body);
    Ok(text
        .lines()
        .filter_map(|line| serde_json::from_str::<Value>(line).ok())
        .filter_map(|v| {
            Some(IndexVersion {
                version: v.get("vers")?.as_str()?.to_string(),
                checksum: v.get("cksum")?.as_str()?.to_ascii_lowercase(),
                yanked: v.get("yanked").and_then(Value::as_bool).unwrap_or(false),
            })
        })
        .collect())
}

/// Numeric `MAJOR.MINOR.PATCH` ordering key; `None` for pre-releases.
fn stable_key(version: &str) -> Option<Vec<u64>> {
    let core = version.split('+').next()?;
    if core.contains('-') {
        return None;
    }
    core.split('.').map(|p| p.parse().ok()).collect()
}

/// The named version (yanked allowed when named), or the highest stable, non-yanked one.
pub fn pick_version(
    name: &str,
    versions: &[IndexVersion],
    wanted: Option<&str>,
) -> Result<IndexVersion, FetchError> {
    if let Some(wanted) = wanted {
        return versions
            .iter()
            .find(|v| v.version == wanted)
            .cloned()
            .ok_or_else(|| {
                let known: Vec<_> = versions.iter().map(|v| v.version.as_str()).collect();
                FetchError::Version(format!(
                    "crate `{name}` has no version {wanted} (known: {})",
                    known.join(", ")
                ))
            });
    }
    versions
        .iter()
        .filter(|v| !v.yanked)
        .filter_map(|v| stable_key(&v.version).map(|k| (k, v)))
        .max_by(|a, b| a.0.cmp(&b.0))
        .map(|(_, v)| v.clone())
        .ok_or_else(|| {
            let all: Vec<String> = versions
                .iter()
                .map(|v| format!("{}{}", v.version, if v.yanked { " (yanked)" } else { "" }))
                .collect();
            FetchError::Version(format!(
                "crate `{name}` has no stable, non-yanked version ({}); name one with @<version>",
                all.join(", ")
            ))
        })
}

/// Download a crate, verify it against the index checksum, unpack it into `dest`.
pub fn fetch_crate(
    registry: &Registry,
    name: &str,
    version: &IndexVersion,
    dest: &Path,
) -> Result<(), FetchError> {
    let url = registry
        .download
        .replace("{crate}", name)
        .replace("{version}", &version.version);
    let bytes = http_get(&url, &format!("{name} {}", version.version))?;
    let actual = sha256_hex(&bytes);
    if actual != version.checksum {
        return Err(FetchError::Checksum {
            what: format!("{name} {}", version.version),
            expected: version.checksum.clone(),
            actual,
        });
    }
    unpack_tar_gz(
        &bytes,
        dest,
        1,
        &format!("{name}-{}.crate", version.version),
    )
}

/// How much an archive may unpack to: checked against each entry's declared size before its
/// data is read, so a decompression bomb costs nothing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct UnpackLimits {
    /// Total bytes of file data (`YEP_MAX_UNPACKED_BYTES`).
    pub max_bytes: u64,
    /// Entries of any kind (`YEP_MAX_ARCHIVE_ENTRIES`).
    pub max_entries: u64,
}

impl Default for UnpackLimits {
    fn default() -> Self {
        UnpackLimits {
            max_bytes: 256 << 20,
            max_entries: 20_000,
        }
    }
}

impl UnpackLimits {
    /// The defaults, raised (or lowered) by `YEP_MAX_UNPACKED_BYTES` and
    /// `YEP_MAX_ARCHIVE_ENTRIES`; a value that is not a number is ignored with a warning.
    pub fn from_env() -> UnpackLimits {
        let mut limits = UnpackLimits::default();
        for (var, slot) in [
            ("YEP_MAX_UNPACKED_BYTES", &mut limits.max_bytes),
            ("YEP_MAX_ARCHIVE_ENTRIES", &mut limits.max_entries),
        ] {
            if let Ok(raw) = std::env::var(var) {
                match raw.trim().parse::<u64>() {
                    Ok(n) => *slot = n,
                    Err(_) => tracing::warn!("ignoring {var}={raw:?}: not a whole number"),
                }
            }
        }
        limits
    }
}

/// Unpack a `.tar.gz`, dropping `strip` leading path components, within
/// [`UnpackLimits::from_env`]. Refuses absolute paths, `..`, hard links, symlinks that point
/// outside `dest` or through another link, and archives past the limits; writes into `dest`
/// only, and on any refusal leaves it empty.
pub fn unpack_tar_gz(
    bytes: &[u8],
    dest: &Path,
    strip: usize,
    archive: &str,
) -> Result<(), FetchError> {
    unpack_tar_gz_limited(bytes, dest, strip, archive, UnpackLimits::from_env())
}

/// [`unpack_tar_gz`] with explicit limits.
pub fn unpack_tar_gz_limited(
    bytes: &[u8],
    dest: &Path,
    strip: usize,
    archive: &str,
    limits: UnpackLimits,
) -> Result<(), FetchError> {
    let result = unpack_streaming(bytes, dest, strip, archive, limits);
    if result.is_err() {
        clear_dir(dest);
    }
    result
}

/// Remove everything inside `dir` (not `dir` itself).
fn clear_dir(dir: &Path) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        let _ = match entry.file_type() {
            Ok(t) if t.is_dir() => std::fs::remove_dir_all(&path),
            _ => std::fs::remove_file(&path),
        };
    }
}

/// Files and directories are written as they stream by (nothing is buffered whole); links are
/// created last, once every entry is known to be safe, so nothing is ever written through one.
fn unpack_streaming(
    bytes: &[u8],
    dest: &Path,
    strip: usize,
    archive: &str,
    limits: UnpackLimits,
) -> Result<(), FetchError> {
    let unsafe_entry = |entry: &str, why: &str| FetchError::UnsafeArchive {
        archive: archive.to_string(),
        entry: entry.to_string(),
        why: why.to_string(),
    };
    let mut pending_links: Vec<(PathBuf, PathBuf)> = Vec::new();
    let mut links: std::collections::HashSet<PathBuf> = std::collections::HashSet::new();
    let (mut total, mut count) = (0u64, 0u64);
    let mut tar = tar::Archive::new(flate2::read::GzDecoder::new(bytes));
    for entry in tar
        .entries()
        .map_err(io(format!("failed to read {archive}")))?
    {
        let mut entry = entry.map_err(io(format!("failed to read {archive}")))?;
        let raw = entry
            .path()
            .map_err(io(format!("failed to read {archive}")))?
            .into_owned();
        let shown = raw.display().to_string();
        count += 1;
        if count > limits.max_entries {
            return Err(unsafe_entry(
                &shown,
                &format!(
                    "is past the limit of {} entries (raise YEP_MAX_ARCHIVE_ENTRIES to allow more)",
                    limits.max_entries
                ),
            ));
        }
        let mut rel = PathBuf::new();
        for (i, c) in raw.components().enumerate() {
            match c {
                Component::Normal(part) if i >= strip => rel.push(part),
                Component::Normal(_) | Component::CurDir => {}
                Component::ParentDir => return Err(unsafe_entry(&shown, "climbs out with `..`")),
                Component::RootDir | Component::Prefix(_) => {
                    return Err(unsafe_entry(&shown, "is an absolute path"));
                }
            }
        }
        if rel.as_os_str().is_empty() {
            continue;
        }
        // Nothing may be written through a link the archive itself made: chained links
        // (`a/b -> ..`, then `a/b/c -> ..`) would otherwise climb out one level at a time.
        if rel.ancestors().skip(1).any(|a| links.contains(a)) || links.contains(&rel) {
            return Err(unsafe_entry(
                &shown,
                "goes through a link the archive created",
            ));
        }
        let kind = entry.header().entry_type();
        if kind.is_hard_link() {
            return Err(unsafe_entry(&shown, "is a hard link"));
        }
        if kind.is_symlink() {
            let target = entry
                .link_name()
                .map_err(io(format!("failed to read {archive}")))?
                .unwrap_or_default()
                .into_owned();
            if !link_stays_inside(&rel, &target) {
                return Err(unsafe_entry(
                    &shown,
                    &format!("links outside the package (to {})", target.display()),
                ));
            }
            links.insert(rel.clone());
            pending_links.push((rel, target));
            continue;
        }
        if !kind.is_dir() && !kind.is_file() {
            continue;
        }
        let path = dest.join(&rel);
        // Belt and braces: never write below a symlink already on disk.
        if rel
            .ancestors()
            .skip(1)
            .filter(|a| !a.as_os_str().is_empty())
            .any(|a| {
                dest.join(a)
                    .symlink_metadata()
                    .is_ok_and(|m| m.file_type().is_symlink())
            })
        {
            return Err(unsafe_entry(&shown, "would be written through a symlink"));
        }
        if kind.is_dir() {
            std::fs::create_dir_all(&path)
                .map_err(io(format!("failed to create {}", path.display())))?;
            continue;
        }
        // Judged by the declared size, before a byte of it is inflated.
        let size = entry.size();
        if total.saturating_add(size) > limits.max_bytes {
            return Err(unsafe_entry(
                &shown,
                &format!(
                    "would unpack the archive past {} bytes (raise YEP_MAX_UNPACKED_BYTES to allow more)",
                    limits.max_bytes
                ),
            ));
        }
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent)
                .map_err(io(format!("failed to create {}", parent.display())))?;
        }
        let mode = entry.header().mode().unwrap_or(0o644);
        let mut file = std::fs::File::create(&path)
            .map_err(io(format!("failed to write {}", path.display())))?;
        let written = std::io::copy(&mut (&mut entry).take(size), &mut file)
            .map_err(io(format!("failed to write {}", path.display())))?;
        total += written;
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let _ = std::fs::set_permissions(&path, std::fs::Permissions::from_mode(mode & 0o755));
        }
    }
    // Each link was checked lexically from where it sits; a target that walks through another
    // link would be resolved through that link's target instead (`d/e -> ..`, then
    // `d/t -> e/../..` lands outside), so such targets are refused.
    for (rel, target) in &pending_links {
        if let Some(via) = through_link(rel, target, &links) {
            return Err(unsafe_entry(
                &rel.display().to_string(),
                &format!(
                    "links through another link of the archive ({} via {})",
                    target.display(),
                    via.display()
                ),
            ));
        }
    }
    for (rel, target) in pending_links {
        let path = dest.join(&rel);
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent)
                .map_err(io(format!("failed to create {}", parent.display())))?;
        }
        #[cfg(unix)]
        std::os::unix::fs::symlink(&target, &path)
            .map_err(io(format!("failed to link {}", path.display())))?;
    }
    Ok(())
}

/// The first link of `links` that resolving `target` from the link at `at` passes through
/// before its last component, if any.
fn through_link(
    at: &Path,
    target: &Path,
    links: &std::collections::HashSet<PathBuf>,
) -> Option<PathBuf> {
    let mut here: PathBuf = at.parent().map(Path::to_path_buf).unwrap_or_default();
    let parts: Vec<Component> = target.components().collect();
    for (i, c) in parts.iter().enumerate() {
        match c {
            Component::Normal(part) => here.push(part),
            Component::ParentDir => {
                here.pop();
            }
            _ => {}
        }
        if i + 1 < parts.len() && links.contains(&here) {
            return Some(here);
        }
    }
    None
}

/// Whether a relative symlink at `at` pointing to `target` stays inside the package root.
fn link_stays_inside(at: &Path, target: &Path) -> bool {
    if target.is_absolute() {
        return false;
    }
    let mut depth: i64 = at.components().count() as i64 - 1;
    for c in target.components() {
        match c {
            Component::ParentDir => depth -= 1,
            Component::Normal(_) => depth += 1,
            Component::CurDir => {}
            _ => return false,
        }
        if depth < 0 {
            return false;
        }
    }
    true
}

/// Clone `url` into `dest` and check out `rev`; returns the resolved commit. `.git` is removed
/// afterwards: the package is the content, not the history.
pub fn fetch_git(url: &str, rev: Option<&str>, dest: &Path) -> Result<String, FetchError> {
    let git = |args: &[&str], cwd: Option<&Path>| -> Result<String, FetchError> {
        let out = crate::process::run_tool("git", args, cwd).map_err(|e| FetchError::Git {
            args: args.join(" "),
            message: e.to_string(),
        })?;
        if !out.status.success() {
            return Err(FetchError::Git {
                args: args.join(" "),
                message: String::from_utf8_lossy(&out.stderr).trim().to_string(),
            });
        }
        Ok(String::from_utf8_lossy(&out.stdout).trim().to_string())
    };
    let dest_str = dest.to_string_lossy();
    let args = clone_args(url, rev.is_some(), &dest_str);
    git(&args.iter().map(String::as_str).collect::<Vec<_>>(), None)?;
    if let Some(rev) = rev {
        // `--end-of-options`: a rev such as `--output=…` is a rev, never an option.
        git(
            &[
                "-c",
                "advice.detachedHead=false",
                "checkout",
                "--quiet",
                "--end-of-options",
                rev,
                "--",
            ],
            Some(dest),
        )?;
    }
    let commit = git(&["rev-parse", "HEAD"], Some(dest))?;
    super::fsutil::remove_tree(&dest.join(".git"))
        .map_err(io("failed to drop the clone's .git"))?;
    Ok(commit)
}

/// `git clone` arguments: the URL and destination after `--`, so neither is read as an option
/// (`--upload-pack=…` would run a command).
fn clone_args(url: &str, full: bool, dest: &str) -> Vec<String> {
    let mut args = vec!["clone".to_string(), "--quiet".to_string()];
    if !full {
        args.extend(["--depth".to_string(), "1".to_string()]);
    }
    args.extend(["--".to_string(), url.to_string(), dest.to_string()]);
    args
}

/// Copy a local package.
pub fn fetch_path(from: &Path, dest: &Path) -> Result<(), FetchError> {
    copy_tree(from, dest).map_err(io(format!("failed to copy {}", from.display())))
}

/// This host's target triple, as prebuilt binaries are named.
pub fn host_target() -> String {
    let os = match std::env::consts::OS {
        "linux" => "unknown-linux-gnu",
        "macos" => "apple-darwin",
        "windows" => "pc-windows-msvc",
        other => other,
    };
    format!("{}-{os}", std::env::consts::ARCH)
}

/// Fetch the prebuilt server binary named by `template` into `<package>/bin/<command>`.
/// The archive must have a `.sha256` sibling that matches; on any failure nothing is written.
pub fn fetch_binary(
    template: &str,
    name: &str,
    version: &str,
    command: &str,
    package: &Path,
) -> Result<String, FetchError> {
    let target = host_target();
    let url = template
        .replace("{name}", name)
        .replace("{version}", version)
        .replace("{target}", &target);
    let archive = http_get(&url, &format!("{command} for {target}"))?;
    let sum = http_get(&format!("{url}.sha256"), "checksum")?;
    let expected = String::from_utf8_lossy(&sum)
        .split_whitespace()
        .next()
        .unwrap_or("")
        .to_ascii_lowercase();
    let actual = sha256_hex(&archive);
    if expected != actual {
        return Err(FetchError::Checksum {
            what: url,
            expected,
            actual,
        });
    }
    let scratch = package.join(".bin-unpack");
    let result = (|| {
        unpack_tar_gz(&archive, &scratch, 0, &url)?;
        let found = find_file(&scratch, command)
            .ok_or_else(|| FetchError::NotFound(format!("`{command}` inside {url}")))?;
        let bin = package.join("bin");
        std::fs::create_dir_all(&bin).map_err(io("failed to create bin/"))?;
        std::fs::rename(&found, bin.join(command)).map_err(io("failed to place the binary"))?;
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let _ =
                std::fs::set_permissions(bin.join(command), std::fs::Permissions::from_mode(0o755));
        }
        Ok(target.clone())
    })();
    let _ = super::fsutil::remove_tree(&scratch);
    result
}

fn find_file(dir: &Path, name: &str) -> Option<PathBuf> {
    for entry in std::fs::read_dir(dir).ok()?.flatten() {
        let path = entry.path();
        if path.is_dir() {
            if let Some(found) = find_file(&path, name) {
                return Some(found);
            }
        } else if entry.file_name() == name {
            return Some(path);
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sparse_paths_follow_the_index_layout() {
        assert_eq!(sparse_path("a"), "1/a");
        assert_eq!(sparse_path("ab"), "2/ab");
        assert_eq!(sparse_path("abc"), "3/a/abc");
        assert_eq!(
            sparse_path("Yolop-Extension-Logfire"),
            "yo/lo/yolop-extension-logfire"
        );
    }

    #[test]
    fn the_highest_stable_unyanked_version_wins_unless_one_is_named() {
        let v = |version: &str, yanked| IndexVersion {
            version: version.into(),
            checksum: String::new(),
            yanked,
        };
        let versions = [
            v("0.9.0", false),
            v("0.10.0", false),
            v("0.11.0", true),
            v("1.0.0-rc.1", false),
        ];
        assert_eq!(
            pick_version("x", &versions, None).unwrap().version,
            "0.10.0"
        );
        assert_eq!(
            pick_version("x", &versions, Some("0.11.0"))
                .unwrap()
                .version,
            "0.11.0"
        );
        let err = pick_version("x", &[v("1.0.0", true)], None)
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("no stable, non-yanked version") && err.contains("1.0.0 (yanked)"),
            "{err}"
        );
    }

    #[test]
    fn chained_links_cannot_carry_a_file_out() {
        let gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
        let mut b = tar::Builder::new(gz);
        let mut link = |path: &str, target: &str| {
            let mut h = tar::Header::new_gnu();
            h.set_entry_type(tar::EntryType::Symlink);
            h.set_size(0);
            b.append_link(&mut h, path, target).unwrap();
        };
        link("pkg/a/b", "..");
        link("pkg/a/b/c", "..");
        let mut h = tar::Header::new_gnu();
        h.set_size(3);
        h.set_mode(0o644);
        b.append_data(&mut h, "pkg/a/b/c/escaped.txt", &b"bad"[..])
            .unwrap();
        let bytes = b.into_inner().unwrap().finish().unwrap();
        let dir = tempfile::tempdir().unwrap();
        let dest = dir.path().join("inner/dest");
        std::fs::create_dir_all(&dest).unwrap();
        let err = unpack_tar_gz(&bytes, &dest, 1, "evil.crate")
            .unwrap_err()
            .to_string();
        assert!(err.contains("goes through a link"), "{err}");
        assert!(
            !dir.path().join("escaped.txt").exists()
                && !dir.path().join("inner/escaped.txt").exists()
        );
        assert!(
            std::fs::read_dir(&dest).unwrap().next().is_none(),
            "nothing is written when any entry is refused"
        );
    }

    fn archive(entries: &[(&str, Option<&str>)]) -> Vec<u8> {
        let gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
        let mut b = tar::Builder::new(gz);
        for (path, link) in entries {
            let mut h = tar::Header::new_gnu();
            h.set_mode(0o644);
            match link {
                Some(target) => {
                    h.set_entry_type(tar::EntryType::Symlink);
                    h.set_size(0);
                    b.append_link(&mut h, path, target).unwrap();
                }
                None => {
                    h.set_size(1);
                    b.append_data(&mut h, path, &b"x"[..]).unwrap();
                }
            }
        }
        b.into_inner().unwrap().finish().unwrap()
    }

    #[test]
    fn a_link_that_resolves_through_another_link_is_refused_in_either_order() {
        for entries in [
            [("pkg/d/e", Some("..")), ("pkg/d/t", Some("e/../.."))],
            [("pkg/d/t", Some("e/../..")), ("pkg/d/e", Some(".."))],
        ] {
            let dir = tempfile::tempdir().unwrap();
            let dest = dir.path().join("dest");
            std::fs::create_dir_all(&dest).unwrap();
            let err = unpack_tar_gz(&archive(&entries), &dest, 1, "chain.crate")
                .unwrap_err()
                .to_string();
            assert!(err.contains("links through another link"), "{err}");
            assert!(std::fs::read_dir(&dest).unwrap().next().is_none());
        }
        // A link to a link, or through a plain directory, is fine.
        let dir = tempfile::tempdir().unwrap();
        let ok = [
            ("pkg/lib/s", None),
            ("pkg/bin/s", Some("../lib/s")),
            ("pkg/alias", Some("bin/s")),
        ];
        unpack_tar_gz(&archive(&ok), dir.path(), 1, "ok.crate").unwrap();
    }

    #[test]
    fn a_bomb_is_refused_by_its_declared_size_and_leaves_nothing() {
        let fixture = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../../tests/fixtures/hostile/decompression-bomb/bomb.json");
        let spec: Value = serde_json::from_str(&std::fs::read_to_string(fixture).unwrap()).unwrap();
        let (count, each) = (
            spec["files"].as_u64().unwrap() as usize,
            spec["bytes_per_file"].as_u64().unwrap(),
        );
        let gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
        let mut b = tar::Builder::new(gz);
        for i in 0..count {
            let mut h = tar::Header::new_gnu();
            h.set_size(each);
            h.set_mode(0o644);
            b.append_data(&mut h, format!("pkg/z{i}"), std::io::repeat(0).take(each))
                .unwrap();
        }
        let bytes = b.into_inner().unwrap().finish().unwrap();
        let limits = UnpackLimits {
            max_bytes: each * count as u64 - 1,
            max_entries: 1000,
        };
        let dir = tempfile::tempdir().unwrap();
        let err = unpack_tar_gz_limited(&bytes, dir.path(), 1, "bomb.crate", limits)
            .unwrap_err()
            .to_string();
        assert!(
            err.contains(&format!("\"pkg/z{}\"", count - 1))
                && err.contains("YEP_MAX_UNPACKED_BYTES"),
            "{err}"
        );
        assert!(std::fs::read_dir(dir.path()).unwrap().next().is_none());
        let few = UnpackLimits {
            max_entries: count as u64 - 1,
            ..UnpackLimits::default()
        };
        let err = unpack_tar_gz_limited(&bytes, dir.path(), 1, "bomb.crate", few)
            .unwrap_err()
            .to_string();
        assert!(err.contains("YEP_MAX_ARCHIVE_ENTRIES"), "{err}");
        assert!(std::fs::read_dir(dir.path()).unwrap().next().is_none());
        unpack_tar_gz_limited(&bytes, dir.path(), 1, "bomb.crate", UnpackLimits::default())
            .unwrap();
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), count);
    }

    #[test]
    fn git_urls_are_passed_after_double_dash() {
        let args = clone_args("--upload-pack=touch pwned", false, "/tmp/dest");
        let dash = args.iter().position(|a| a == "--").unwrap();
        let url = args
            .iter()
            .position(|a| a == "--upload-pack=touch pwned")
            .unwrap();
        assert!(dash < url, "{args:?}");
        let err = fetch_git(
            "--upload-pack=touch pwned",
            Some("--output=/tmp/x"),
            &tempfile::tempdir().unwrap().path().join("d"),
        )
        .unwrap_err()
        .to_string();
        assert!(err.starts_with("git clone"), "{err}");
    }

    #[test]
    fn links_must_stay_inside_the_package() {
        assert!(link_stays_inside(Path::new("bin/s"), Path::new("../lib/s")));
        assert!(!link_stays_inside(
            Path::new("bin/s"),
            Path::new("../../etc/passwd")
        ));
        assert!(!link_stays_inside(Path::new("s"), Path::new("/etc/passwd")));
    }
}
