//! One extension under supervision: its server started on first use (after a backoff once
//! starts fail), handed out to calls, and stopped gracefully, on close or when idle.

use super::error::ExtensionError;
use super::options::SupervisorOptions;
use super::spec::ServerSpec;
use crate::capability::{Events, Granted, Offer};
use crate::dialect::Peer;
use crate::health::HealthEvent;
use crate::process::{ServerProcess, describe_status};
use crate::rpc::CloseReason;
use serde_json::Value;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Nanoseconds on a clock that only moves forward, for when a server was last used: Linux's
/// coarse monotonic clock, which the vDSO reads without the timestamp counter (a tick's
/// resolution, a few ms, is plenty for idle stops of seconds or minutes, and two reads per
/// call of the precise clock were ~2% of a host's CPU under many calls at once); elsewhere,
/// or should that read fail, the time since `born`. It reads up to a tick behind the precise
/// clock, more while a loaded machine delays its tick, so an idle time may read that much
/// off: nothing may depend on it to better than that (the idle tests allow half an idle stop).
pub(super) fn use_clock(born: Instant) -> u64 {
    #[cfg(target_os = "linux")]
    {
        let mut ts = libc::timespec {
            tv_sec: 0,
            tv_nsec: 0,
        };
        // SAFETY: `ts` is a valid timespec for the call to fill; the clock id is a constant
        // every Linux since 2.6.32 has.
        if unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC_COARSE, &mut ts) } == 0 {
            return (ts.tv_sec as u64)
                .saturating_mul(1_000_000_000)
                .saturating_add(ts.tv_nsec as u64);
        }
    }
    u64::try_from(born.elapsed().as_nanos()).unwrap_or(u64::MAX)
}

/// The delay before the next start after `failures` consecutive failures: `base`, doubling
/// per failure, capped at `max`.
pub(crate) fn backoff_delay(base: Duration, max: Duration, failures: u32) -> Duration {
    if failures == 0 {
        return Duration::ZERO;
    }
    base.saturating_mul(1u32 << (failures - 1).min(16)).min(max)
}

/// A started server: its peer (the dialect's view of it) and its process, if it is one.
pub struct Live {
    pub(super) peer: Arc<dyn Peer>,
    pub(super) process: Option<ServerProcess>,
    pub(super) pid: Option<u32>,
    pub(super) crash_counted: AtomicBool,
}

impl Live {
    /// What the server offered in its handshake.
    pub(crate) fn offer(&self) -> &Offer {
        self.peer.offer()
    }

    /// Whether it serves `tool` now (a tool registered after the handshake counts).
    pub(crate) fn serves(&self, tool: &str) -> bool {
        self.peer.serves(tool)
    }

    /// The dialect's live server, for conformance tools that look past the capability model.
    pub fn peer(&self) -> &Arc<dyn Peer> {
        &self.peer
    }

    fn is_closed(&self) -> bool {
        self.peer.close_reason().is_some()
    }
}

/// One extension's server under supervision.
pub struct Extension {
    pub(super) spec: ServerSpec,
    pub(super) opts: SupervisorOptions,
    pub(super) events: Arc<dyn Events>,
    pub(super) current: Mutex<Option<Arc<Live>>>,
    /// Serialises starts so concurrent first calls share one spawn.
    pub(super) starting: tokio::sync::Mutex<()>,
    pub(super) failures: AtomicU32,
    /// Servers started so far: the next start after the first is a restart.
    pub(super) starts: AtomicU32,
    pub(super) last_failure: Mutex<Option<Instant>>,
    /// `initialize.config` and the injected env for the next start (config can change live).
    pub(super) inputs: Mutex<(Value, Vec<(String, String)>)>,
    /// The cwd and workspace root for the next start (the workspace can move).
    pub(super) workspace: Mutex<PathBuf>,
    /// Closed for good (the host shut down or deactivated it): nothing may start it again.
    pub(super) closed: AtomicBool,
    /// What `last_used` counts from where there is no coarse clock ([`use_clock`]).
    pub(super) born: Instant,
    /// When it was last used, on [`use_clock`] (at least 1); 0 for never. A use is
    /// [`Extension::live`] handing out the server, and a call on it finishing.
    pub(super) last_used: AtomicU64,
    /// Its last server was stopped for want of use ([`Extension::stop_if_idle`]) and none has
    /// started since.
    pub(super) idle_stopped: AtomicBool,
    /// Failures told as the sandbox's likely doing ([`Extension::sandbox_note`]) so far: a
    /// tool call whose failure adds one is kept as its last denied call
    /// ([`DeniedCall`](super::DeniedCall)).
    pub(super) denials: AtomicU64,
}

impl Extension {
    /// Tell the host's health stream something about this extension.
    pub(crate) fn report(&self, event: HealthEvent) {
        self.events.health(event);
    }

    /// `events` get what the server pushes, held to the spec's grants.
    pub fn new(spec: ServerSpec, opts: SupervisorOptions, events: Arc<dyn Events>) -> Extension {
        let inputs = Mutex::new((spec.config.clone(), spec.env.clone()));
        let events = Arc::new(Granted {
            grants: spec.grants,
            inner: events,
        });
        Extension {
            closed: AtomicBool::new(false),
            inputs,
            workspace: Mutex::new(spec.workspace_root.clone()),
            spec,
            opts,
            events,
            current: Mutex::new(None),
            starting: tokio::sync::Mutex::new(()),
            failures: AtomicU32::new(0),
            starts: AtomicU32::new(0),
            last_failure: Mutex::new(None),
            born: Instant::now(),
            last_used: AtomicU64::new(0),
            idle_stopped: AtomicBool::new(false),
            denials: AtomicU64::new(0),
        }
    }

    pub(crate) fn name(&self) -> &str {
        &self.spec.name
    }

    /// How it is supervised.
    pub(crate) fn opts(&self) -> &SupervisorOptions {
        &self.opts
    }

    pub(crate) fn spec(&self) -> &ServerSpec {
        &self.spec
    }

    /// Whether it was approved to be asked at the intercept point named `point`, as its
    /// dialect says ([`Dialect::intercepts`](crate::dialect::Dialect::intercepts)).
    pub(crate) fn intercepts(&self, point: &str) -> bool {
        self.opts.dialect.intercepts(point)
    }

    /// Whether its post hooks answer
    /// ([`Dialect::post_hooks_answer`](crate::dialect::Dialect::post_hooks_answer)).
    pub(crate) fn post_hooks_answer(&self) -> bool {
        self.opts.dialect.post_hooks_answer()
    }

    pub fn log_path(&self) -> PathBuf {
        self.spec.log_path()
    }

    /// The running server's pid, if one is running.
    pub fn pid(&self) -> Option<u32> {
        self.live_now().and_then(|l| l.pid)
    }

    /// Whether a server is running now.
    pub(crate) fn is_running(&self) -> bool {
        self.live_now().is_some()
    }

    /// The live server, if one runs now; never starts one.
    pub(crate) fn running(&self) -> Option<Arc<Live>> {
        self.live_now()
    }

    /// How many starts or runs failed in a row.
    pub fn failures(&self) -> u32 {
        self.failures.load(Ordering::Relaxed)
    }

    /// Whether a server of it ever started (the next start is a restart).
    pub(crate) fn has_started(&self) -> bool {
        self.starts.load(Ordering::Relaxed) > 0
    }

    /// Whether its server runs as a child process of the host: not when a transport supplies
    /// its streams (a Claude Code plugin's dialect, an MCP server over HTTP, an embedder's own),
    /// nor for a package that declares no server.
    pub(crate) fn spawns_process(&self) -> bool {
        self.opts.transport.is_none() && !self.spec.command.is_empty()
    }

    /// How long since it was last used (the server handed out by [`Extension::live`], or a
    /// call on it finished); `None` if it never was.
    pub(crate) fn idle_for(&self) -> Option<Duration> {
        match self.last_used.load(Ordering::Relaxed) {
            0 => None,
            at => Some(Duration::from_nanos(
                use_clock(self.born).saturating_sub(at),
            )),
        }
    }

    /// Whether a call holds its running server now: one in flight, or about to be sent.
    pub(crate) fn in_use(&self) -> bool {
        let current = self.current.lock().unwrap_or_else(|p| p.into_inner());
        // Every call holds an `Arc<Live>` from `live()` until it settles; the slot holds one.
        current.as_ref().is_some_and(|l| Arc::strong_count(l) > 1)
    }

    /// Whether its last server was stopped by [`Extension::stop_if_idle`], and none started
    /// since.
    pub(crate) fn is_idle_stopped(&self) -> bool {
        self.idle_stopped.load(Ordering::Relaxed) && !self.is_running()
    }

    /// Note a use now: twice per call, so on the coarse clock.
    pub(super) fn touch(&self) {
        self.last_used
            .store(use_clock(self.born).max(1), Ordering::Relaxed);
    }

    pub(super) fn live_now(&self) -> Option<Arc<Live>> {
        let current = self.current.lock().unwrap_or_else(|p| p.into_inner());
        current.as_ref().filter(|l| !l.is_closed()).cloned()
    }

    /// The delay owed before the next start, given the failures so far.
    fn backoff(&self) -> Option<Duration> {
        let failures = self.failures();
        let last = (*self.last_failure.lock().unwrap_or_else(|p| p.into_inner()))?;
        if failures == 0 {
            return None;
        }
        backoff_delay(self.opts.backoff_base, self.opts.backoff_max, failures)
            .checked_sub(last.elapsed())
    }

    pub(super) fn note_failure(&self) {
        self.failures.fetch_add(1, Ordering::Relaxed);
        *self.last_failure.lock().unwrap_or_else(|p| p.into_inner()) = Some(Instant::now());
    }

    pub(super) fn shut_down(&self) -> ExtensionError {
        ExtensionError::ShutDown {
            extension: self.spec.name.clone(),
        }
    }

    /// Stop the server and refuse to start it again (the session is over, or the extension
    /// was deactivated). A start in progress is not waited for: it sees the flag and discards
    /// its server itself. Calls in flight fail.
    pub async fn close(&self) -> Option<String> {
        self.closed.store(true, Ordering::Release);
        let _start = self.starting.try_lock().ok()?;
        self.stop_current().await
    }

    /// Whether [`Extension::close`] was called.
    pub(crate) fn is_closed(&self) -> bool {
        self.closed.load(Ordering::Acquire)
    }

    /// The live server, started (with its handshake) if none runs.
    pub async fn live(&self) -> Result<Arc<Live>, ExtensionError> {
        if self.is_closed() {
            return Err(self.shut_down());
        }
        if let Some(live) = self.live_now() {
            self.touch();
            return Ok(live);
        }
        let _start = self.starting.lock().await;
        if let Some(live) = self.live_now() {
            self.touch();
            return Ok(live);
        }
        if self.is_closed() {
            return Err(self.shut_down());
        }
        if let Some(wait) = self.backoff() {
            if wait > self.opts.request_timeout {
                return Err(ExtensionError::BackingOff {
                    extension: self.spec.name.clone(),
                    failures: self.failures(),
                    retry_in: wait,
                });
            }
            tracing::info!(extension = %self.spec.name, "waiting {} ms before restarting after {} failures", wait.as_millis(), self.failures());
            tokio::time::sleep(wait).await;
        }
        match self.start().await {
            Ok(live) => {
                self.touch();
                self.idle_stopped.store(false, Ordering::Relaxed);
                *self.current.lock().unwrap_or_else(|p| p.into_inner()) = Some(Arc::clone(&live));
                if self.is_closed() {
                    // Closed while this start ran: the new server goes straight away.
                    self.stop_current().await;
                    return Err(self.shut_down());
                }
                let (extension, pid) = (self.spec.name.clone(), live.pid);
                let wire = live.offer().wire.clone();
                self.events
                    .health(match self.starts.fetch_add(1, Ordering::Relaxed) {
                        0 => HealthEvent::Started {
                            extension,
                            pid,
                            wire,
                        },
                        _ => HealthEvent::Restarted {
                            extension,
                            pid,
                            wire,
                        },
                    });
                Ok(live)
            }
            Err(err) => {
                // Failed to start again: what it is now is failed, not asleep.
                self.idle_stopped.store(false, Ordering::Relaxed);
                self.note_failure();
                self.events.health(HealthEvent::Failed {
                    extension: self.spec.name.clone(),
                    message: crate::error::report(&err),
                    log: err.log_path().map(PathBuf::from),
                });
                Err(err)
            }
        }
    }

    /// What the server offers, starting it if needed.
    pub async fn handshake(&self) -> Result<Offer, ExtensionError> {
        Ok(self.live().await?.offer().clone())
    }

    /// Graceful stop: the dialect's goodbye (`shutdown`, `exit`, stdin closed in YEP), grace,
    /// SIGTERM, grace, SIGKILL, reap. Every step is bounded, so a server that stopped reading
    /// cannot hold it up. Returns the exit status, if a server was running. A later call
    /// starts a fresh server.
    pub async fn stop(&self) -> Option<String> {
        // Wait out a start in progress, so it cannot install a server after we return.
        let _start = self.starting.lock().await;
        self.stop_current().await
    }

    /// [`Extension::stop`], for a caller that expects the server to run until it is stopped
    /// (doctor, a zot extension's registration run): one that ended on its own first is an
    /// [`ExtensionError::EndedEarly`], with its exit status, last stderr lines and log.
    #[allow(clippy::result_large_err)] // the same error type as every call here
    pub async fn stop_running(&self) -> Result<Option<String>, ExtensionError> {
        let _start = self.starting.lock().await;
        let current = self
            .current
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone();
        let ended = match current {
            Some(live) => match live.peer.close_reason() {
                Some(reason) if reason != CloseReason::Shutdown => {
                    let (status, stderr_tail, log_path) = self.last_words(&live).await;
                    Some(ExtensionError::EndedEarly {
                        extension: self.spec.name.clone(),
                        reason,
                        status,
                        stderr_tail,
                        log_path,
                    })
                }
                _ => None,
            },
            None => None,
        };
        let status = self.stop_current().await;
        match ended {
            Some(err) => Err(err),
            None => Ok(status),
        }
    }

    /// Stop the running server if it is a child process that nothing has used for `idle` and
    /// no call holds: gracefully, as [`Extension::stop`] does, without counting a failure or
    /// closing the extension, so the next use starts it again (as `Restarted`). A start in
    /// progress is never waited for: it is a use. Tells [`HealthEvent::Idle`] once the
    /// process is gone, and returns whether it stopped one.
    pub(crate) async fn stop_if_idle(&self, idle: Duration) -> bool {
        if self.is_closed() {
            return false;
        }
        let Ok(_start) = self.starting.try_lock() else {
            return false;
        };
        // Decided and taken under the slot's lock: a call that gets the server (through
        // `live_now`, under the same lock) either holds it before, and is seen, or finds none
        // after and waits on `starting` for a new one.
        let (live, after) = {
            let mut current = self.current.lock().unwrap_or_else(|p| p.into_inner());
            let Some(live) = current.as_ref() else {
                return false;
            };
            // A server that ended on its own is the crash path's; one with no process costs
            // nothing to keep.
            if live.is_closed() || live.process.is_none() || Arc::strong_count(live) > 1 {
                return false;
            }
            let after = self.idle_for().unwrap_or(Duration::ZERO);
            if after < idle {
                return false;
            }
            match current.take() {
                Some(live) => (live, after),
                None => return false,
            }
        };
        self.idle_stopped.store(true, Ordering::Relaxed);
        let status = self.stop_live(live).await;
        tracing::debug!(extension = %self.spec.name, status, "stopped after {} ms unused", after.as_millis());
        // Closed meanwhile: it is no longer idle but gone, as its closer records.
        if !self.is_closed() {
            self.events.health(HealthEvent::Idle {
                extension: self.spec.name.clone(),
                after,
            });
        }
        true
    }

    async fn stop_current(&self) -> Option<String> {
        let live = self
            .current
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .take()?;
        Some(self.stop_live(live).await)
    }

    /// Stop `live`, already taken from the slot: the graceful ladder, then its last words.
    async fn stop_live(&self, live: Arc<Live>) -> String {
        // Calls cut short by this stop are not crashes.
        live.crash_counted.store(true, Ordering::Relaxed);
        let grace = self.opts.grace;
        live.peer.shutdown(grace).await;
        let status = match &live.process {
            Some(proc_) => proc_.terminate_in(grace, self.opts.term_wait).await,
            None => None,
        };
        live.peer.close(CloseReason::Shutdown);
        // Its last words are in the log by the time a stop returns.
        if let Some(proc_) = &live.process {
            proc_.stderr.drained(Duration::from_millis(500)).await;
        }
        describe_status(status)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_doubles_per_failure_up_to_the_cap() {
        let (base, max) = (Duration::from_millis(250), Duration::from_secs(30));
        let delays: Vec<_> = (0..10)
            .map(|n| backoff_delay(base, max, n).as_millis())
            .collect();
        assert_eq!(
            delays,
            [0, 250, 500, 1000, 2000, 4000, 8000, 16000, 30000, 30000]
        );
        assert_eq!(backoff_delay(base, max, 400), max);
    }
}
