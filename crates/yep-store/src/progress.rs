//! What an install or update reports while it works. The store draws nothing: the caller
//! decides how (the CLI draws bars on a terminal), or drops the events.

use std::sync::Arc;

/// One step of an install or update. Every `Step` and `Download` is followed by exactly one
/// `Finished`, also when the step fails. Labels name a package, a crate, a URL or a path, and
/// may carry text from a registry: escape them before a terminal sees them.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum ProgressEvent {
    /// A step without a byte count began: copying a directory, cloning, unpacking.
    Step { label: String },
    /// A download began; `total` is its size when the server declared one.
    Download { label: String, total: Option<u64> },
    /// The current download has received `received` bytes so far.
    Bytes { received: u64 },
    /// The current step or download ended.
    Finished,
}

/// Where the store sends [`ProgressEvent`]s. The default drops them.
#[derive(Clone, Default)]
pub struct Progress(Option<Arc<dyn Fn(ProgressEvent) + Send + Sync>>);

impl Progress {
    /// Send every event to `report`.
    pub fn new(report: impl Fn(ProgressEvent) + Send + Sync + 'static) -> Progress {
        Progress(Some(Arc::new(report)))
    }

    pub(crate) fn report(&self, event: ProgressEvent) {
        if let Some(report) = &self.0 {
            report(event);
        }
    }

    /// Report `Step { label }` now and `Finished` when the guard drops.
    pub(crate) fn step(&self, label: impl Into<String>) -> Phase<'_> {
        self.report(ProgressEvent::Step {
            label: label.into(),
        });
        Phase(self)
    }

    /// Report `Download { label, total }` now and `Finished` when the guard drops.
    #[cfg(feature = "fetch")]
    pub(crate) fn download(&self, label: &str, total: Option<u64>) -> Phase<'_> {
        self.report(ProgressEvent::Download {
            label: label.to_string(),
            total,
        });
        Phase(self)
    }
}

impl std::fmt::Debug for Progress {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(if self.0.is_some() {
            "Progress(callback)"
        } else {
            "Progress(none)"
        })
    }
}

/// A step in progress: reports `Finished` on drop, so an early return still ends it.
pub(crate) struct Phase<'a>(&'a Progress);

impl Drop for Phase<'_> {
    fn drop(&mut self) {
        self.0.report(ProgressEvent::Finished);
    }
}
