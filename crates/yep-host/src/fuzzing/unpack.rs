//! The `unpack` target: the store's `.tar.gz` unpacker (only with the `fetch` feature).

use super::Scratch;
use crate::store::fetch;
use std::io::Write;
use std::path::{Component, Path, PathBuf};

/// The archive unpacker. The first byte picks how many leading components to strip; the rest is
/// a tar, gzipped here so mutations reach the tar reader rather than the deflate checksum.
/// Nothing may be written outside the destination, and no link in it may resolve outside it.
pub(super) fn unpack(data: &[u8]) {
    let Some((&strip, tar)) = data.split_first() else {
        return;
    };
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    gz.write_all(tar).expect("gzip in memory");
    let bytes = gz.finish().expect("gzip in memory");
    let dir = Scratch::new();
    let dest = dir.0.join("dest");
    std::fs::create_dir(&dest).expect("create the scratch destination");
    let _ = fetch::unpack_tar_gz(&bytes, &dest, usize::from(strip % 3), "fuzz.tar.gz");
    let beside: Vec<_> = std::fs::read_dir(&dir.0)
        .expect("list the scratch dir")
        .map(|e| e.expect("list the scratch dir").file_name())
        .collect();
    assert_eq!(
        beside,
        ["dest"],
        "the unpacker wrote beside its destination"
    );
    let dest = dest.canonicalize().expect("canonical destination");
    check_links_inside(&dest, &dest);
}

fn check_links_inside(root: &Path, dir: &Path) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        let Ok(kind) = entry.file_type() else {
            continue;
        };
        if kind.is_symlink() {
            let real = resolve(&path);
            assert!(
                real.starts_with(root),
                "{} resolves to {}, outside the destination",
                path.display(),
                real.display()
            );
        } else if kind.is_dir() {
            check_links_inside(root, &path);
        }
    }
}

/// Where `path` really points, following every link on the way, whether or not it exists.
fn resolve(path: &Path) -> PathBuf {
    fn steps(path: &Path) -> impl DoubleEndedIterator<Item = Option<std::ffi::OsString>> + '_ {
        // `None` climbs one level; a root restarts at `/`.
        path.components().filter_map(|c| match c {
            Component::Normal(part) => Some(Some(part.to_os_string())),
            Component::ParentDir => Some(None),
            Component::RootDir => Some(Some("/".into())),
            Component::CurDir | Component::Prefix(_) => None,
        })
    }
    let mut todo: Vec<_> = steps(path).rev().collect();
    let mut out = PathBuf::from("/");
    let mut hops = 0;
    while let Some(step) = todo.pop() {
        let Some(part) = step else {
            out.pop();
            continue;
        };
        if part == "/" {
            out = PathBuf::from("/");
            continue;
        }
        let next = out.join(&part);
        match std::fs::read_link(&next) {
            Ok(target) if hops < 40 => {
                hops += 1;
                todo.extend(steps(&target).rev());
            }
            _ => out = next,
        }
    }
    out
}
