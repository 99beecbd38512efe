//! Getting a package's bytes into a staging directory: a local copy or a git clone (here), or,
//! with the `fetch` feature, a crate from the crates.io sparse index and the optional prebuilt
//! server binary (`fetch/download.rs`: checksum verified before anything is written, unpacked
//! by `fetch/archive.rs` without trusting archive paths).

use std::path::Path;

// The downloads (ureq, with its TLS stack) and the archives (tar, flate2) are the store's
// heaviest dependencies, and a runtime-only embedder needs neither: they sit behind the `fetch`
// feature, on by default. Without it, whatever needs them fails with
// `FetchError::NoFetchFeature`; directories and git work as before.
#[cfg(feature = "fetch")]
mod archive;
#[cfg(feature = "fetch")]
mod download;
#[cfg(feature = "fetch")]
pub use archive::{MAX_HEADER_BODY, UnpackLimits, unpack_tar_gz, unpack_tar_gz_limited};
#[cfg(feature = "fetch")]
pub use download::{fetch_binary, fetch_crate, http_get, http_get_limited, index_versions};
#[cfg(not(feature = "fetch"))]
pub use unavailable::{fetch_binary, fetch_crate, index_versions};

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
    /// A package directory inside a repository that leads out of it.
    #[error("subdirectory {0:?} leaves the repository")]
    SubdirLeaves(String),
    /// A source that needs a download or an archive, in a build without the `fetch` feature.
    #[error(
        "cannot fetch {0}: this build of yep-store has no `fetch` feature (downloads and .tar.gz archives); install from a directory or a git URL instead"
    )]
    NoFetchFeature(String),
    #[error("{context}: {error}")]
    Io {
        context: String,
        error: std::io::Error,
    },
}

fn io(context: impl Into<String>) -> impl FnOnce(std::io::Error) -> FetchError {
    let context = context.into();
    move |error| FetchError::Io { context, error }
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

/// One version line of the sparse index.
#[derive(Debug, Clone)]
pub struct IndexVersion {
    pub version: String,
    pub checksum: String,
    pub yanked: bool,
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

/// Run `git` to completion and collect its output. Blocking. The store's one child process:
/// it needs no process group or log file, since it is waited for right here.
fn run_git(args: &[&str], cwd: Option<&Path>) -> std::io::Result<std::process::Output> {
    #[allow(clippy::disallowed_methods)] // a short-lived tool run to completion, not a server
    let mut cmd = std::process::Command::new("git");
    cmd.args(args).stdin(std::process::Stdio::null());
    if let Some(cwd) = cwd {
        cmd.current_dir(cwd);
    }
    cmd.output()
}

/// Clone `url` into `dest` and check out `rev`; returns the resolved commit. `.git` is removed
/// afterwards: the package is the content, not the history.
pub fn fetch_git(url: &str, rev: Option<&str>, dest: &Path) -> Result<String, FetchError> {
    let git = |args: &[&str], cwd: Option<&Path>| -> Result<String, FetchError> {
        let out = run_git(args, cwd).map_err(|e| FetchError::Git {
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
    super::fsutil::check_links(dest).map_err(io(format!("failed to use the checkout of {url}")))?;
    Ok(commit)
}

/// [`fetch_git`], keeping only the directory `subdir` of the repository at `dest`: the
/// package a monorepo or a marketplace entry (`git-subdir`) names. `subdir` must stay inside
/// the repository and be a directory there, not a link. The commit.
pub fn fetch_git_subdir(
    url: &str,
    rev: Option<&str>,
    subdir: &str,
    dest: &Path,
) -> Result<String, FetchError> {
    let inside = !subdir.is_empty()
        && Path::new(subdir).components().all(|c| {
            matches!(
                c,
                std::path::Component::Normal(_) | std::path::Component::CurDir
            )
        });
    if !inside {
        return Err(FetchError::SubdirLeaves(
            crate::text::escape(subdir).into_owned(),
        ));
    }
    let clone = dest.with_file_name(".clone");
    super::fsutil::remove_tree(&clone).map_err(io("failed to clear the clone's place"))?;
    let commit = fetch_git(url, rev, &clone)?;
    let from = clone.join(subdir);
    // `fetch_git` refused a link that leaves the clone; a link inside it on the way is
    // followed, and where it leads must still be inside.
    let inside_clone = match (from.canonicalize(), clone.canonicalize()) {
        (Ok(from), Ok(clone)) => from.starts_with(&clone),
        _ => false,
    };
    let is_dir = inside_clone && from.symlink_metadata().is_ok_and(|m| m.is_dir());
    if !is_dir {
        let _ = super::fsutil::remove_tree(&clone);
        return Err(FetchError::NotFound(format!(
            "directory {} in {url}",
            crate::text::escape(subdir)
        )));
    }
    std::fs::rename(&from, dest).map_err(io(format!("failed to take {subdir} from the clone")))?;
    super::fsutil::remove_tree(&clone).map_err(io("failed to drop the clone"))?;
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

/// A path install that copies more than this into the home is warned of.
pub const LARGE_COPY: u64 = 50 * 1024 * 1024;

/// Copy a local package, without what its `.gitignore` and `.yepignore` leave out
/// ([`crate::fsutil::copy_package`]); past [`LARGE_COPY`] the copy is warned of.
pub fn fetch_path(from: &Path, dest: &Path) -> Result<(), FetchError> {
    let copied = crate::fsutil::copy_package(from, dest)
        .map_err(io(format!("failed to copy {}", from.display())))?;
    if copied > LARGE_COPY {
        tracing::warn!(
            "copied {} MiB of {} into the home: a `.yepignore` (as .gitignore) in it leaves out \
             what the package does not need to run",
            copied >> 20,
            crate::text::escape(&from.display().to_string())
        );
    }
    Ok(())
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

/// The calls the store makes that need a download, in a build without the `fetch` feature.
#[cfg(not(feature = "fetch"))]
mod unavailable {
    use super::{FetchError, IndexVersion, Registry};
    use crate::progress::Progress;
    use std::path::Path;

    pub fn index_versions(
        registry: &Registry,
        name: &str,
        _: &Progress,
    ) -> Result<Vec<IndexVersion>, FetchError> {
        Err(FetchError::NoFetchFeature(format!(
            "crate `{name}` from {}",
            registry.index
        )))
    }

    pub fn fetch_crate(
        _: &Registry,
        name: &str,
        version: &IndexVersion,
        _: &Path,
        _: &Progress,
    ) -> Result<(), FetchError> {
        Err(FetchError::NoFetchFeature(format!(
            "crate `{name}` {}",
            version.version
        )))
    }

    pub fn fetch_binary(
        _: &str,
        _: &str,
        _: &str,
        command: &str,
        _: &Path,
        _: &Progress,
    ) -> Result<String, FetchError> {
        Err(FetchError::NoFetchFeature(format!(
            "the prebuilt binary `{command}`"
        )))
    }
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
}
