//! The audit trail (`<home>/audit.jsonl`): one JSON object per line for each tool call, sandbox
//! denial, egress decision and brokered secret the host saw. It keeps the shape of what
//! passed, never its values: argument keys and JSON types, never arguments, results, env or
//! header values. Recording is a non-blocking send to a writer thread; when the writer falls
//! behind, records are dropped and counted, never waited for.

mod record;
mod secrets;
mod shape;
mod writer;

pub(crate) use record::{AgentEntry, Record};
pub use record::{Decision, Egress, Injection, Outcome, ToolEntry};
pub use secrets::{Carrier, SecretFound, find_in_text, find_in_value};
pub use shape::shape;

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, Weak, mpsc};
use std::time::{Duration, SystemTime};

/// The current file grows to this size, then moves to `audit.jsonl.1`: with
/// [`ROTATED_FILES`] kept, the trail costs at most four times this on disk.
pub const AUDIT_CAP_BYTES: u64 = 16 * 1024 * 1024;

/// How many rotated files are kept (`.1`, newest, to `.3`, oldest); the oldest is dropped.
pub const ROTATED_FILES: usize = 3;

/// Records waiting for the writer before new ones are dropped (and counted).
const QUEUE: usize = 4096;

/// A handle to one audit trail's writer. Cheap to clone: clones share the writer thread,
/// which ends (after writing what it was sent) when the last handle is dropped.
#[derive(Clone)]
pub struct AuditLog {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for AuditLog {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("AuditLog").field(&self.inner.path).finish()
    }
}

/// What the handles share: the writer's queue, what was dropped, and how far it got.
struct Inner {
    path: PathBuf,
    queue: Option<mpsc::SyncSender<Stamped>>,
    dropped: Arc<AtomicU64>,
    progress: Arc<Progress>,
    /// Records accepted by the queue, to wait for in [`AuditLog::flush`].
    sent: AtomicU64,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Drop for Inner {
    fn drop(&mut self) {
        // Closing the queue ends the writer once it wrote what it holds.
        drop(self.queue.take());
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

/// How many records the writer has handled, and a way to wait for more.
#[derive(Default)]
pub(crate) struct Progress {
    handled: Mutex<u64>,
    changed: Condvar,
}

impl Progress {
    /// `n` more records were written (or failed to be).
    pub(crate) fn add(&self, n: u64) {
        *self.handled.lock().unwrap_or_else(|p| p.into_inner()) += n;
        self.changed.notify_all();
    }

    /// Wait until at least `target` were handled, at most `within`.
    fn wait_for(&self, target: u64, within: Duration) {
        let handled = self.handled.lock().unwrap_or_else(|p| p.into_inner());
        let _ = self
            .changed
            .wait_timeout_while(handled, within, |n| *n < target);
    }
}

/// A record with the moment it happened.
pub(crate) struct Stamped {
    pub(crate) at: SystemTime,
    pub(crate) record: Record,
}

/// The writers this process runs, by file: every host of a home shares one.
static OPEN: Mutex<Vec<(PathBuf, Weak<Inner>)>> = Mutex::new(Vec::new());

impl AuditLog {
    /// The audit trail kept at `path` (a home's `audit_path()`; rotated at
    /// [`AUDIT_CAP_BYTES`]). One writer per file in a process: a second call while the first
    /// handle lives shares it. Whether a home keeps one is its settings' say
    /// (`yep_store::settings::audit`).
    pub fn open(path: PathBuf) -> AuditLog {
        let mut open = OPEN.lock().unwrap_or_else(|p| p.into_inner());
        open.retain(|(_, weak)| weak.strong_count() > 0);
        if let Some(inner) = open
            .iter()
            .find(|(p, _)| *p == path)
            .and_then(|(_, w)| w.upgrade())
        {
            return AuditLog { inner };
        }
        let log = AuditLog::with_cap(path.clone(), AUDIT_CAP_BYTES, QUEUE);
        open.push((path, Arc::downgrade(&log.inner)));
        log
    }

    /// A writer of its own for `path`, rotating at `cap` bytes, queueing at most `queue`
    /// records (tests choose small ones).
    pub(crate) fn with_cap(path: PathBuf, cap: u64, queue: usize) -> AuditLog {
        let (tx, rx) = mpsc::sync_channel(queue);
        let dropped = Arc::new(AtomicU64::new(0));
        let progress = Arc::new(Progress::default());
        let sink = writer::Sink::new(path.clone(), cap);
        let thread = {
            let (dropped, progress) = (Arc::clone(&dropped), Arc::clone(&progress));
            std::thread::Builder::new()
                .name("yep-audit".into())
                .spawn(move || writer::run(rx, sink, &dropped, &progress))
                .ok()
        };
        AuditLog {
            inner: Arc::new(Inner {
                path,
                queue: thread.is_some().then_some(tx),
                dropped,
                progress,
                sent: AtomicU64::new(0),
                thread,
            }),
        }
    }

    /// The file it writes.
    pub fn path(&self) -> &Path {
        &self.inner.path
    }

    /// Keep `record`, stamped now. Never blocks: with the writer behind, it is dropped and
    /// counted, and a `dropped` line says how many once the writer catches up.
    pub(crate) fn record(&self, record: Record) {
        let stamped = Stamped {
            at: SystemTime::now(),
            record,
        };
        let Some(queue) = &self.inner.queue else {
            return;
        };
        match queue.try_send(stamped) {
            Ok(()) => {
                self.inner.sent.fetch_add(1, Ordering::Relaxed);
            }
            Err(_) => {
                self.inner.dropped.fetch_add(1, Ordering::Relaxed);
            }
        }
    }

    /// One tool call, as [`ToolEntry`] tells it (for an embedder that calls a server's tools
    /// itself, as `yep call` does; the host records its own calls).
    pub fn tool(&self, entry: ToolEntry) {
        self.record(Record::Tool(entry));
    }

    /// A sandbox denial the host was told of (others are not recorded here).
    pub(crate) fn sandbox_denied(&self, event: &crate::health::HealthEvent) {
        if let crate::health::HealthEvent::SandboxDenied {
            extension,
            target,
            grant,
            ..
        } = event
        {
            self.record(Record::SandboxDenied {
                extension: extension.clone(),
                target: target.clone(),
                grant: grant.clone(),
            });
        }
    }

    /// One decision of a package's egress proxy: a request it let through or refused.
    pub fn egress(&self, egress: Egress) {
        self.record(Record::Egress(egress));
    }

    /// A brokered secret the egress proxy put into a request (its name, never its value).
    pub fn injection(&self, injection: Injection) {
        self.record(Record::Injection(injection));
    }

    /// Wait until what was recorded so far is written, at most `within`. Blocks the thread:
    /// from async code, run it off the async threads.
    pub fn flush(&self, within: Duration) {
        let target = self.inner.sent.load(Ordering::Relaxed);
        self.inner.progress.wait_for(target, within);
    }

    /// Records dropped because the writer was behind, not yet told in the file.
    pub fn dropped(&self) -> u64 {
        self.inner.dropped.load(Ordering::Relaxed)
    }
}

/// The files of the trail at `path` that exist, oldest first: `audit.jsonl.3` … `.1`, then
/// `audit.jsonl`.
pub fn files(path: &Path) -> Vec<PathBuf> {
    (1..=ROTATED_FILES)
        .rev()
        .map(|n| writer::rotated(path, n))
        .chain(std::iter::once(path.to_path_buf()))
        .filter(|p| p.is_file())
        .collect()
}

#[cfg(test)]
mod tests;
