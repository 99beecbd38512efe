//! The writer thread: takes records off the queue in batches, writes each batch with one
//! append to an owner-only file, and rotates the file at its cap. Several processes of one
//! home may append to the same file: each line is whole in one `write`, and a rotation is done
//! under a lock on the file, by whoever finds it full first.

use super::{Progress, Record, Stamped};
use std::fs::File;
use std::io::Write;
use std::os::unix::fs::{MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc;

/// The most records written in one append.
const BATCH: usize = 256;

/// How long the writer lets records gather after the first of a batch: while it waits, a
/// record costs its sender a push onto the queue and nothing more (no wake-up, no write), so
/// a busy host pays one write per batch, not one per call.
const GATHER: std::time::Duration = std::time::Duration::from_millis(10);

/// Rotated file `n` of the trail at `path`: `audit.jsonl.1` is the newest.
pub(super) fn rotated(path: &Path, n: usize) -> PathBuf {
    let mut name = path.as_os_str().to_os_string();
    name.push(format!(".{n}"));
    PathBuf::from(name)
}

/// Take records off `queue` until every handle is gone, writing them to `sink`; a batch is
/// followed by a `dropped` line when records were dropped meanwhile.
pub(super) fn run(
    queue: mpsc::Receiver<Stamped>,
    mut sink: Sink,
    dropped: &AtomicU64,
    progress: &Progress,
) {
    // Both kept from batch to batch: a record costs the writer no allocation of its own.
    let (mut buf, mut body) = (Vec::with_capacity(16 * 1024), Vec::with_capacity(1024));
    while let Ok(first) = queue.recv() {
        std::thread::sleep(GATHER);
        buf.clear();
        let mut n = 1;
        line(&mut buf, &mut body, &first);
        while n < BATCH {
            match queue.try_recv() {
                Ok(next) => {
                    line(&mut buf, &mut body, &next);
                    n += 1;
                }
                Err(_) => break,
            }
        }
        let lost = dropped.swap(0, Ordering::Relaxed);
        if lost > 0 {
            let note = Stamped {
                at: std::time::SystemTime::now(),
                record: Record::Dropped {
                    extension: String::new(),
                    count: lost,
                },
            };
            line(&mut buf, &mut body, &note);
        }
        if let Err(error) = sink.write(&buf) {
            tracing::debug!(
                "failed to write the audit trail {}: {error}",
                sink.path.display()
            );
        }
        progress.add(n as u64);
    }
}

/// `record` as one line, `{"ts":…,"kind":…,…}\n`, onto `buf`; `body` is scratch.
fn line(buf: &mut Vec<u8>, body: &mut Vec<u8>, stamped: &Stamped) {
    body.clear();
    if serde_json::to_writer(&mut *body, &stamped.record).is_err() || body.len() < 2 {
        return;
    }
    // The body is an object (`{"kind":…}`): the time goes first, inside it.
    let _ = write!(
        buf,
        "{{\"ts\":\"{}\",",
        humantime::format_rfc3339_millis(stamped.at)
    );
    buf.extend_from_slice(&body[1..]);
    buf.push(b'\n');
}

/// The file the writer appends to, and what it knows of it.
pub(super) struct Sink {
    path: PathBuf,
    cap: u64,
    /// The open file, and its device and inode: another process's rotation changes what the
    /// path names.
    file: Option<(File, u64, u64)>,
}

impl Sink {
    pub(super) fn new(path: PathBuf, cap: u64) -> Sink {
        Sink {
            path,
            cap,
            file: None,
        }
    }

    /// Append `buf` in one write, rotating first when the file is at its cap.
    fn write(&mut self, buf: &[u8]) -> std::io::Result<()> {
        let size = self.current()?;
        if size > 0 && size + buf.len() as u64 > self.cap {
            self.rotate()?;
        }
        match &mut self.file {
            Some((file, _, _)) => file.write_all(buf),
            None => Ok(()),
        }
    }

    /// The size of the file the path names now, opened (again) when it is not the one held.
    fn current(&mut self) -> std::io::Result<u64> {
        match std::fs::metadata(&self.path) {
            Ok(meta) if self.holds(&meta) => Ok(meta.len()),
            _ => {
                self.open()?;
                Ok(std::fs::metadata(&self.path).map_or(0, |m| m.len()))
            }
        }
    }

    fn holds(&self, meta: &std::fs::Metadata) -> bool {
        matches!(&self.file, Some((_, dev, ino)) if *dev == meta.dev() && *ino == meta.ino())
    }

    /// Open the path for appending, owner-only, creating it (and the home) if need be.
    fn open(&mut self) -> std::io::Result<()> {
        self.file = None;
        if let Some(dir) = self.path.parent() {
            std::fs::create_dir_all(dir)?;
        }
        let file = std::fs::OpenOptions::new()
            .append(true)
            .create(true)
            .mode(0o600)
            .open(&self.path)?;
        let meta = file.metadata()?;
        if meta.permissions().mode() & 0o077 != 0 {
            // A trail someone made readable by others is made owner-only again.
            file.set_permissions(std::fs::Permissions::from_mode(0o600))?;
        }
        self.file = Some((file, meta.dev(), meta.ino()));
        Ok(())
    }

    /// Move the full file to `.1` (and each older one down, the oldest dropped) and start a
    /// new one. Under a lock on the full file, and only if it is still the one the path
    /// names: another process may have rotated it first.
    fn rotate(&mut self) -> std::io::Result<()> {
        if let Some((file, _, _)) = &self.file {
            let fd = std::os::fd::AsRawFd::as_raw_fd(file);
            // SAFETY: flock(2) on a descriptor this struct owns; released at close or below.
            unsafe { libc::flock(fd, libc::LOCK_EX) };
            let still_full =
                std::fs::metadata(&self.path).is_ok_and(|meta| self.holds(&meta) && meta.len() > 0);
            let moved = match still_full {
                true => self.shift(),
                false => Ok(()),
            };
            // SAFETY: as above.
            unsafe { libc::flock(fd, libc::LOCK_UN) };
            moved?;
        }
        self.open()
    }

    /// `.2` to `.3` (over the oldest), `.1` to `.2`, the file to `.1`.
    fn shift(&self) -> std::io::Result<()> {
        for n in (1..super::ROTATED_FILES).rev() {
            let _ = std::fs::rename(rotated(&self.path, n), rotated(&self.path, n + 1));
        }
        std::fs::rename(&self.path, rotated(&self.path, 1))
    }
}
