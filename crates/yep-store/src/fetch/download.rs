//! Downloads over HTTPS: the crates.io sparse index, a `.crate` (checksum verified before it is
//! unpacked), and the optional prebuilt server binary.

use super::archive::{UnpackLimits, unpack_tar_gz};
use super::{FetchError, IndexVersion, Registry, host_target, io, sparse_path};
use crate::hash::sha256_hex;
use crate::progress::{Progress, ProgressEvent};
use serde_json::Value;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::time::Duration;

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

/// GET a URL into memory, at most [`UnpackLimits::max_download`] bytes (an index file, a
/// `.crate` or a prebuilt-binary archive), reporting the bytes as they arrive to `progress`.
pub fn http_get(url: &str, label: &str, progress: &Progress) -> Result<Vec<u8>, FetchError> {
    http_get_limited(
        url,
        label,
        UnpackLimits::from_env().max_download(),
        progress,
    )
}

/// [`http_get`], refusing a body over `max` bytes (declared or received) before reading on.
pub fn http_get_limited(
    url: &str,
    label: &str,
    max: u64,
    progress: &Progress,
) -> Result<Vec<u8>, FetchError> {
    let err = |message: String| FetchError::Http {
        url: url.to_string(),
        message,
    };
    let too_big = || {
        err(format!(
            "the download is larger than {max} bytes (the cap follows YEP_MAX_UNPACKED_BYTES and YEP_MAX_ARCHIVE_ENTRIES)"
        ))
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
    if total.is_some_and(|n| n > max) {
        return Err(too_big());
    }
    let _download = progress.download(label, total);
    let mut reader = response
        .body_mut()
        .with_config()
        .limit(max.saturating_add(1))
        .reader()
        .take(max.saturating_add(1));
    let mut out = Vec::with_capacity(total.unwrap_or(0).min(64 << 20) as usize);
    let mut chunk = vec![0u8; 64 * 1024];
    loop {
        let n = reader.read(&mut chunk).map_err(|e| err(e.to_string()))?;
        if n == 0 {
            break;
        }
        out.extend_from_slice(&chunk[..n]);
        if out.len() as u64 > max {
            return Err(too_big());
        }
        progress.report(ProgressEvent::Bytes {
            received: out.len() as u64,
        });
    }
    Ok(out)
}

/// The versions the index lists for a crate.
pub fn index_versions(
    registry: &Registry,
    name: &str,
    progress: &Progress,
) -> Result<Vec<IndexVersion>, FetchError> {
    let url = format!("{}{}", registry.index, sparse_path(name));
    let body = http_get(&url, &format!("index of {name}"), progress).map_err(|e| match e {
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

/// Download a crate, verify it against the index checksum, unpack it into `dest`.
pub fn fetch_crate(
    registry: &Registry,
    name: &str,
    version: &IndexVersion,
    dest: &Path,
    progress: &Progress,
) -> Result<(), FetchError> {
    let url = registry
        .download
        .replace("{crate}", name)
        .replace("{version}", &version.version);
    let bytes = http_get(&url, &format!("{name} {}", version.version), progress)?;
    let actual = sha256_hex(&bytes);
    if actual != version.checksum {
        return Err(FetchError::Checksum {
            what: format!("{name} {}", version.version),
            expected: version.checksum.clone(),
            actual,
        });
    }
    let archive = format!("{name}-{}.crate", version.version);
    let _unpack = progress.step(format!("unpacking {archive}"));
    unpack_tar_gz(&bytes, dest, 1, &archive)
}

/// Fetch the prebuilt server binary named by `template` into `<package>/bin/<command>`.
/// The archive must have a `.sha256` sibling that matches; on any failure nothing is written.
pub fn fetch_binary(
    template: &str,
    name: &str,
    version: &str,
    command: &str,
    package: &Path,
    progress: &Progress,
) -> Result<String, FetchError> {
    let target = host_target();
    let url = template
        .replace("{name}", name)
        .replace("{version}", version)
        .replace("{target}", &target);
    let archive = http_get(&url, &format!("{command} for {target}"), progress)?;
    let sum = http_get(&format!("{url}.sha256"), "checksum", progress)?;
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
        let found = find_file(&scratch, command, FIND_DEPTH)
            .ok_or_else(|| FetchError::NotFound(format!("`{command}` inside {url}")))?;
        let bin = package.join("bin");
        if bin
            .symlink_metadata()
            .is_ok_and(|m| m.file_type().is_symlink())
        {
            return Err(FetchError::Io {
                context: format!("refusing to place `{command}`"),
                error: std::io::Error::other("the package's bin/ is a symlink"),
            });
        }
        std::fs::create_dir_all(&bin).map_err(io("failed to create bin/"))?;
        // Made executable through the file itself (never a path a link could redirect), then
        // moved: `rename` moves the entry, not what it might point to.
        let file = open_no_follow(&found)
            .map_err(io(format!("failed to open `{command}` inside {url}")))?;
        if !file.metadata().is_ok_and(|m| m.is_file()) {
            return Err(FetchError::NotFound(format!(
                "`{command}` as a regular file inside {url}"
            )));
        }
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            file.set_permissions(std::fs::Permissions::from_mode(0o755))
                .map_err(io(format!("failed to make `{command}` executable")))?;
        }
        std::fs::rename(&found, bin.join(command)).map_err(io("failed to place the binary"))?;
        Ok(target.clone())
    })();
    let _ = crate::fsutil::remove_tree(&scratch);
    result
}

/// How deep [`find_file`] looks inside a prebuilt-binary archive.
const FIND_DEPTH: usize = 8;

/// Open a file for reading, failing if the path's last component is a symlink.
fn open_no_follow(path: &Path) -> std::io::Result<std::fs::File> {
    let mut options = std::fs::OpenOptions::new();
    options.read(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        options.custom_flags(libc::O_NOFOLLOW);
    }
    options.open(path)
}

/// The first regular file called `name` under `dir`, at most `depth` directories down. Links
/// are never followed (neither into directories nor as the file found).
fn find_file(dir: &Path, name: &str, depth: usize) -> Option<PathBuf> {
    let mut dirs = Vec::new();
    for entry in std::fs::read_dir(dir).ok()?.flatten() {
        // `DirEntry::file_type` describes the entry itself, not a link's target.
        let Ok(kind) = entry.file_type() else {
            continue;
        };
        if kind.is_dir() {
            dirs.push(entry.path());
        } else if kind.is_file() && entry.file_name() == name {
            return Some(entry.path());
        }
    }
    if depth == 0 {
        return None;
    }
    dirs.sort();
    dirs.into_iter()
        .find_map(|d| find_file(&d, name, depth - 1))
}
