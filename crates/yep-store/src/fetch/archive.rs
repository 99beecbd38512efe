//! Unpacking a `.tar.gz` without trusting it: sizes and entry counts capped before anything is
//! inflated, no absolute paths, `..`, hard links, or symlinks that lead out of the package.

use super::{FetchError, io};
use crate::fsutil::{LinkEscape, link_escape};
use std::io::Read;
use std::path::{Component, Path, PathBuf};

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

/// The most a GNU long-name or long-link body, or a PAX header body, may hold. The `tar` crate
/// reads these whole into memory, so they are checked (by their declared size) first.
pub const MAX_HEADER_BODY: u64 = 64 << 10;

impl UnpackLimits {
    /// The most an archive's decompressed stream may hold (file data plus headers, padding and
    /// long names): the unpacked-size cap plus 2 KiB per entry and 1 MiB.
    pub fn max_stream(&self) -> u64 {
        self.max_bytes
            .saturating_add(self.max_entries.saturating_mul(2048))
            .saturating_add(1 << 20)
    }

    /// The most a download may be: no archive that unpacks within the limits is larger
    /// compressed than its decompressed stream (plus a little framing, within the 1 MiB).
    pub fn max_download(&self) -> u64 {
        self.max_stream()
    }

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
    let result = scan_headers(bytes, archive, limits)
        .and_then(|()| unpack_streaming(bytes, dest, strip, archive, limits));
    if result.is_err() {
        clear_dir(dest);
    }
    result
}

/// One pass over the decompressed archive before anything is unpacked, in 512-byte blocks
/// with memory bounded by [`MAX_HEADER_BODY`]: refuses long-name, long-link and PAX header
/// bodies over that size (the `tar` crate would read them whole), sparse entries, more
/// entries than the limit (every header counts), more entry data than the unpacked-size cap,
/// and a stream longer than [`UnpackLimits::max_stream`]. Sizes are read as the `tar` crate
/// reads them (a PAX `size` overrides the next entry's header), so both passes agree.
fn scan_headers(bytes: &[u8], archive: &str, limits: UnpackLimits) -> Result<(), FetchError> {
    use tar::EntryType;
    let unsafe_entry = |entry: &[u8], why: String| FetchError::UnsafeArchive {
        archive: archive.to_string(),
        entry: String::from_utf8_lossy(entry).into_owned(),
        why,
    };
    let failed = || io(format!("failed to read {archive}"));
    let cap = limits.max_stream();
    let mut stream = flate2::read::GzDecoder::new(bytes).take(cap.saturating_add(1));
    let past_cap = |entry: &[u8]| {
        unsafe_entry(
            entry,
            format!(
                "inflates the archive past {cap} bytes of headers and data (raise YEP_MAX_UNPACKED_BYTES to allow more)"
            ),
        )
    };
    let (mut consumed, mut count, mut total) = (0u64, 0u64, 0u64);
    let mut pax_size: Option<u64> = None;
    let mut long_name: Option<Vec<u8>> = None;
    let mut block = [0u8; 512];
    loop {
        let filled = read_block(&mut stream, &mut block).map_err(failed())?;
        consumed += filled as u64;
        if consumed > cap {
            return Err(past_cap(b""));
        }
        // The end, or a torn block the unpacker reports itself.
        if filled < block.len() || block.iter().all(|b| *b == 0) {
            return Ok(());
        }
        let header = tar::Header::from_byte_slice(&block);
        let kind = header.entry_type();
        let raw_name = header.path_bytes().into_owned();
        let (meta, consumed_as_meta) = meta_kind(header);
        let shown = match (&long_name, meta) {
            (Some(name), false) => name.clone(),
            _ => raw_name,
        };
        count += 1;
        if count > limits.max_entries {
            return Err(unsafe_entry(
                &shown,
                format!(
                    "is past the limit of {} entries (raise YEP_MAX_ARCHIVE_ENTRIES to allow more)",
                    limits.max_entries
                ),
            ));
        }
        if kind == EntryType::GNUSparse {
            return Err(unsafe_entry(&shown, "is a sparse file".into()));
        }
        let mut size = header.entry_size().map_err(failed())?;
        if !meta && let Some(pax) = pax_size {
            size = pax;
        }
        if !consumed_as_meta {
            // As the `tar` crate does: PAX and long names describe the next plain entry only.
            pax_size = None;
            long_name = None;
        }
        let padded = size
            .checked_next_multiple_of(512)
            .ok_or_else(|| past_cap(&shown))?;
        if meta {
            if size > MAX_HEADER_BODY {
                return Err(unsafe_entry(
                    &shown,
                    format!(
                        "is a long-name or PAX header of {size} bytes (at most {MAX_HEADER_BODY})"
                    ),
                ));
            }
            let mut body = Vec::with_capacity(padded as usize);
            (&mut stream)
                .take(padded)
                .read_to_end(&mut body)
                .map_err(failed())?;
            consumed += body.len() as u64;
            if consumed > cap {
                return Err(past_cap(&shown));
            }
            body.truncate(size as usize);
            if consumed_as_meta {
                take_meta(kind, body, &mut long_name, &mut pax_size);
            }
            continue;
        }
        if total.saturating_add(size) > limits.max_bytes {
            return Err(unsafe_entry(
                &shown,
                format!(
                    "would unpack the archive past {} bytes (raise YEP_MAX_UNPACKED_BYTES to allow more)",
                    limits.max_bytes
                ),
            ));
        }
        total += size;
        let skipped = std::io::copy(&mut (&mut stream).take(padded), &mut std::io::sink())
            .map_err(failed())?;
        consumed += skipped;
        if consumed > cap {
            return Err(past_cap(&shown));
        }
        if skipped < padded {
            return Ok(());
        }
    }
}

/// Fill `block` from `stream`; fewer bytes than a block only at the end of the stream.
fn read_block(stream: &mut impl Read, block: &mut [u8; 512]) -> std::io::Result<usize> {
    let mut filled = 0;
    while filled < block.len() {
        match stream.read(&mut block[filled..])? {
            0 => break,
            n => filled += n,
        }
    }
    Ok(filled)
}

/// Whether `header`'s body describes other entries (a long name or link, a PAX header, a
/// global one included), and whether the `tar` crate applies it to the next plain entry (a
/// long name or link, or a PAX header, under a header it recognizes).
fn meta_kind(header: &tar::Header) -> (bool, bool) {
    use tar::EntryType;
    let kind = header.entry_type();
    let recognized = header.as_gnu().is_some() || header.as_ustar().is_some();
    let meta = matches!(
        kind,
        EntryType::GNULongName
            | EntryType::GNULongLink
            | EntryType::XHeader
            | EntryType::XGlobalHeader
    );
    let consumed_as_meta = recognized
        && matches!(
            kind,
            EntryType::GNULongName | EntryType::GNULongLink | EntryType::XHeader
        );
    (meta, consumed_as_meta)
}

/// What a long-name or PAX header's `body` says of the next plain entry: its name, or its
/// size.
fn take_meta(
    kind: tar::EntryType,
    mut body: Vec<u8>,
    long_name: &mut Option<Vec<u8>>,
    pax_size: &mut Option<u64>,
) {
    match kind {
        tar::EntryType::GNULongName => {
            let end = body.iter().position(|b| *b == 0).unwrap_or(body.len());
            body.truncate(end);
            *long_name = Some(body);
        }
        tar::EntryType::XHeader => *pax_size = pax_value(&body, "size"),
        _ => {}
    }
}

/// A numeric PAX record, read as the `tar` crate reads it: the first record with `key`, and
/// nothing when any record before it is malformed or its value is not a number.
fn pax_value(body: &[u8], key: &str) -> Option<u64> {
    for record in tar::PaxExtensions::new(body) {
        let record = record.ok()?;
        if record.key() == Ok(key) {
            return record.value().ok()?.parse().ok();
        }
    }
    None
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
    let unsafe_entry = |entry: &str, why: &str| refused(archive, entry, why);
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
        let rel = stripped(&raw, strip).map_err(|why| unsafe_entry(&shown, why))?;
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
        if below_symlink(dest, &rel) {
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
        total += write_file(&mut entry, &path, size)?;
    }
    place_links(dest, pending_links, &links, archive)
}

/// An entry refused: `why`, naming it as the archive does.
fn refused(archive: &str, entry: &str, why: &str) -> FetchError {
    FetchError::UnsafeArchive {
        archive: archive.to_string(),
        entry: entry.to_string(),
        why: why.to_string(),
    }
}

/// `raw` without its first `strip` components, nor any `.`; why not, when it climbs out or
/// is absolute.
fn stripped(raw: &Path, strip: usize) -> Result<PathBuf, &'static str> {
    let mut rel = PathBuf::new();
    for (i, c) in raw.components().enumerate() {
        match c {
            Component::Normal(part) if i >= strip => rel.push(part),
            Component::Normal(_) | Component::CurDir => {}
            Component::ParentDir => return Err("climbs out with `..`"),
            Component::RootDir | Component::Prefix(_) => return Err("is an absolute path"),
        }
    }
    Ok(rel)
}

/// Whether a directory `rel` would be written under is a symlink on disk in `dest`.
fn below_symlink(dest: &Path, rel: &Path) -> bool {
    rel.ancestors()
        .skip(1)
        .filter(|a| !a.as_os_str().is_empty())
        .any(|a| {
            dest.join(a)
                .symlink_metadata()
                .is_ok_and(|m| m.file_type().is_symlink())
        })
}

/// Write a file entry's `size` bytes (its declared size) to `path`, with its mode's
/// permission bits (no more than 0o755); returns how many were written.
fn write_file<R: Read>(
    entry: &mut tar::Entry<'_, R>,
    path: &Path,
    size: u64,
) -> Result<u64, FetchError> {
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent)
            .map_err(io(format!("failed to create {}", parent.display())))?;
    }
    let mode = entry.header().mode().unwrap_or(0o644);
    let mut file =
        std::fs::File::create(path).map_err(io(format!("failed to write {}", path.display())))?;
    let written = std::io::copy(&mut entry.take(size), &mut file)
        .map_err(io(format!("failed to write {}", path.display())))?;
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let _ = std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode & 0o755));
    }
    Ok(written)
}

/// Create the archive's links in `dest`, once every entry is known to be safe. Each link was
/// checked lexically from where it sits; a target that walks through another link would be
/// resolved through that link's target instead (`d/e -> ..`, then `d/t -> e/../..` lands
/// outside), so such targets are refused.
fn place_links(
    dest: &Path,
    pending_links: Vec<(PathBuf, PathBuf)>,
    links: &std::collections::HashSet<PathBuf>,
    archive: &str,
) -> Result<(), FetchError> {
    for (rel, target) in &pending_links {
        if let Some(LinkEscape::Through(via)) = link_escape(rel, target, |p| links.contains(p)) {
            return Err(refused(
                archive,
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

/// Whether a relative symlink at `at` pointing to `target` stays inside the package root,
/// judged lexically (links it may pass through are checked once all are known).
fn link_stays_inside(at: &Path, target: &Path) -> bool {
    link_escape(at, target, |_| false).is_none()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::Value;

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

    /// An archive whose first header is of `kind` and declares `declared` bytes, of which only
    /// `written` follow (the rest of the stream is a plain file).
    fn header_bomb(kind: u8, declared: u64, written: usize) -> Vec<u8> {
        let mut raw = Vec::new();
        let mut h = tar::Header::new_gnu();
        h.set_entry_type(tar::EntryType::new(kind));
        h.set_path("././@LongLink").unwrap();
        h.set_size(declared);
        h.set_mode(0o644);
        h.set_cksum();
        raw.extend_from_slice(h.as_bytes());
        raw.extend(std::iter::repeat_n(b'a', written));
        let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
        std::io::Write::write_all(&mut gz, &raw).unwrap();
        let mut b = tar::Builder::new(gz);
        let mut f = tar::Header::new_gnu();
        f.set_size(1);
        f.set_mode(0o644);
        b.append_data(&mut f, "pkg/plugin.json", &b"x"[..]).unwrap();
        b.into_inner().unwrap().finish().unwrap()
    }

    #[test]
    fn a_long_name_or_pax_header_bomb_is_refused_by_its_declared_size() {
        let fixture = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../../tests/fixtures/hostile/long-name-bomb/headers.json");
        let spec: Value = serde_json::from_str(&std::fs::read_to_string(fixture).unwrap()).unwrap();
        let declared = spec["declared_bytes"].as_u64().unwrap();
        let written = spec["written_bytes"].as_u64().unwrap() as usize;
        for kind in spec["kinds"].as_array().unwrap() {
            let kind = kind.as_str().unwrap().as_bytes()[0];
            let bytes = header_bomb(kind, declared, written);
            let dir = tempfile::tempdir().unwrap();
            let err = unpack_tar_gz(&bytes, dir.path(), 1, "bomb.crate")
                .unwrap_err()
                .to_string();
            assert!(
                err.contains(&format!("is a long-name or PAX header of {declared} bytes")),
                "{}: {err}",
                kind as char
            );
            assert!(std::fs::read_dir(dir.path()).unwrap().next().is_none());
        }
        // Long names and PAX records of a sane size still unpack, and a PAX `size` is honoured.
        let gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
        let mut b = tar::Builder::new(gz);
        let long = format!("pkg/{}/s", vec!["d".repeat(60); 5].join("/"));
        let mut h = tar::Header::new_gnu();
        h.set_size(2);
        h.set_mode(0o644);
        b.append_data(&mut h, &long, &b"ok"[..]).unwrap();
        let pax = b"17 comment=hello\n10 size=3\n";
        let mut x = tar::Header::new_ustar();
        x.set_entry_type(tar::EntryType::XHeader);
        x.set_path("PaxHeaders/after-pax").unwrap();
        x.set_size(pax.len() as u64);
        x.set_cksum();
        b.append(&x, &pax[..]).unwrap();
        // The header says 0 bytes; the PAX record says 3, and wins (as in the `tar` crate).
        let mut h = tar::Header::new_ustar();
        h.set_path("pkg/after-pax").unwrap();
        h.set_size(0);
        h.set_mode(0o644);
        h.set_cksum();
        b.append(&h, &b"yes"[..]).unwrap();
        let bytes = b.into_inner().unwrap().finish().unwrap();
        let dir = tempfile::tempdir().unwrap();
        unpack_tar_gz(&bytes, dir.path(), 1, "ok.crate").unwrap();
        assert_eq!(std::fs::read(dir.path().join(&long[4..])).unwrap(), b"ok");
        assert_eq!(std::fs::read(dir.path().join("after-pax")).unwrap(), b"yes");
    }

    #[test]
    fn data_of_entries_that_are_not_unpacked_still_counts_and_the_stream_is_capped() {
        // A fifo's "data" was inflated and skipped without counting against any cap.
        let gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
        let mut b = tar::Builder::new(gz);
        let mut h = tar::Header::new_gnu();
        h.set_entry_type(tar::EntryType::Fifo);
        h.set_size(4 << 20);
        h.set_mode(0o644);
        b.append_data(&mut h, "pkg/fifo", std::io::repeat(0).take(4 << 20))
            .unwrap();
        let bytes = b.into_inner().unwrap().finish().unwrap();
        let limits = UnpackLimits {
            max_bytes: 1 << 20,
            max_entries: 10,
        };
        let dir = tempfile::tempdir().unwrap();
        let err = unpack_tar_gz_limited(&bytes, dir.path(), 1, "fifo.crate", limits)
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("\"pkg/fifo\"") && err.contains("YEP_MAX_UNPACKED_BYTES"),
            "{err}"
        );
        // Headers count too: many long names, each under the body cap, pass the stream cap.
        let gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
        let mut b = tar::Builder::new(gz);
        for i in 0..40 {
            let mut h = tar::Header::new_gnu();
            h.set_size(1);
            h.set_mode(0o644);
            let name = format!("pkg/{i}/{}", "n".repeat(60_000));
            b.append_data(&mut h, name, &b"x"[..]).unwrap();
        }
        let bytes = b.into_inner().unwrap().finish().unwrap();
        let limits = UnpackLimits {
            max_bytes: 1 << 10,
            max_entries: 100,
        };
        let err = unpack_tar_gz_limited(&bytes, dir.path(), 1, "names.crate", limits)
            .unwrap_err()
            .to_string();
        assert!(
            err.contains(&format!("past {} bytes of headers", limits.max_stream())),
            "{err}"
        );
        assert!(std::fs::read_dir(dir.path()).unwrap().next().is_none());
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
