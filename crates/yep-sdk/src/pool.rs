//! A pool of request workers that grows on demand up to a bound and keeps idle threads warm.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc::{Receiver, Sender, channel};
use std::sync::{Arc, Mutex};

type Job = Box<dyn FnOnce() + Send>;

pub(crate) struct Pool {
    tx: Sender<Job>,
    rx: Arc<Mutex<Receiver<Job>>>,
    idle: Arc<AtomicUsize>,
    threads: AtomicUsize,
    max: usize,
}

impl Pool {
    pub(crate) fn new(max: usize) -> Self {
        let (tx, rx) = channel();
        Pool {
            tx,
            rx: Arc::new(Mutex::new(rx)),
            idle: Arc::new(AtomicUsize::new(0)),
            threads: AtomicUsize::new(0),
            max: max.max(1),
        }
    }

    /// Run `job` on a worker. When every worker is busy and the bound allows, a new one starts;
    /// past the bound the job waits for the next free worker.
    pub(crate) fn submit(&self, job: Job) {
        if self.idle.load(Ordering::Acquire) == 0 && self.threads.load(Ordering::Relaxed) < self.max
        {
            self.spawn_worker();
        }
        // The receiver lives as long as the pool's workers; a send can only fail at teardown.
        let _ = self.tx.send(job);
    }

    fn spawn_worker(&self) {
        let rx = Arc::clone(&self.rx);
        let idle = Arc::clone(&self.idle);
        let n = self.threads.fetch_add(1, Ordering::Relaxed);
        let spawned = std::thread::Builder::new()
            .name(format!("yep-worker-{n}"))
            .spawn(move || {
                loop {
                    idle.fetch_add(1, Ordering::AcqRel);
                    let job = rx.lock().unwrap_or_else(|p| p.into_inner()).recv();
                    idle.fetch_sub(1, Ordering::AcqRel);
                    match job {
                        Ok(job) => job(),
                        Err(_) => return,
                    }
                }
            });
        if let Err(err) = spawned {
            self.threads.fetch_sub(1, Ordering::Relaxed);
            eprintln!("yep-sdk: failed to start a worker thread: {err}");
        }
    }
}
