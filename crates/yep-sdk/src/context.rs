//! What a handler can do besides return: progress, cancellation, questions, status and logs.

use crate::framing::Wire;
use serde_json::Value;
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{Sender, channel};
use std::sync::{Arc, Condvar, Mutex};
use std::time::Duration;
use yep_protocol::methods::{LOG, STATUS_CHANGED, TOOL_UPDATE, UI_ASK};
use yep_protocol::{
    ErrorObject, LogParams, StatusChangedParams, StatusLevel, ToolUpdateParams, UiAskParams,
    UiAskResult, notification_line, request_line,
};

/// State shared by the serve loop and every handler.
pub(crate) struct Shared {
    pub(crate) wire: Wire,
    /// Reverse requests (`ui/ask`) awaiting the host's answer, by our own id space.
    pub(crate) asks: Mutex<HashMap<u64, Sender<Result<Value, ErrorObject>>>>,
    pub(crate) next_id: AtomicU64,
}

/// A cancellation flag a handler can poll or sleep on.
#[derive(Default)]
pub(crate) struct CancelFlag {
    cancelled: Mutex<bool>,
    cv: Condvar,
}

impl CancelFlag {
    pub(crate) fn cancel(&self) {
        *self.cancelled.lock().unwrap_or_else(|p| p.into_inner()) = true;
        self.cv.notify_all();
    }

    fn is_set(&self) -> bool {
        *self.cancelled.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Sleep up to `dur`; true when woken by cancellation.
    fn wait(&self, dur: Duration) -> bool {
        let guard = self.cancelled.lock().unwrap_or_else(|p| p.into_inner());
        let (guard, _) = self
            .cv
            .wait_timeout_while(guard, dur, |c| !*c)
            .unwrap_or_else(|p| p.into_inner());
        *guard
    }
}

/// Sends server → host notifications from anywhere: handlers, `on_start`, your own threads.
#[derive(Clone)]
pub struct Notifier {
    pub(crate) shared: Arc<Shared>,
}

impl Notifier {
    /// Push a status-bar string (`status/changed`). An empty `text` clears it.
    pub fn status(&self, text: impl Into<String>, level: StatusLevel) {
        let params = StatusChangedParams {
            status: text.into(),
            level,
            detail: None,
        };
        self.shared
            .wire
            .send(notification_line(STATUS_CHANGED, Some(&params)));
    }

    /// Send a log line to the host (`log`), at `info` level.
    pub fn log(&self, message: impl Into<String>) {
        self.log_at("info", message);
    }

    /// Send a log line at `error`, `warn`, `info`, `debug` or `trace`.
    pub fn log_at(&self, level: &str, message: impl Into<String>) {
        let params = LogParams {
            message: message.into(),
            level: Some(level.to_string()),
        };
        self.shared.wire.send(notification_line(LOG, Some(&params)));
    }
}

/// The context a request handler runs in.
pub struct Context {
    pub(crate) notifier: Notifier,
    pub(crate) request_id: u64,
    pub(crate) cancel: Arc<CancelFlag>,
}

impl std::ops::Deref for Context {
    type Target = Notifier;
    fn deref(&self) -> &Notifier {
        &self.notifier
    }
}

impl Context {
    /// The envelope id of the request being handled.
    pub fn request_id(&self) -> u64 {
        self.request_id
    }

    /// Stream one progress line for this call (`tool/update`, correlated by `request_id`).
    /// Nothing is sent once the call was cancelled.
    pub fn update(&self, output: impl Into<String>) {
        if self.is_cancelled() {
            return;
        }
        let params = ToolUpdateParams {
            request_id: self.request_id,
            output: output.into(),
        };
        self.shared
            .wire
            .send(notification_line(TOOL_UPDATE, Some(&params)));
    }

    /// Whether the host cancelled this call. The host already has its `cancelled` answer, so a
    /// handler that sees this should stop; whatever it returns is dropped.
    pub fn is_cancelled(&self) -> bool {
        self.cancel.is_set()
    }

    /// Sleep for `dur`, waking early on cancellation. Returns `true` when cancelled.
    pub fn sleep(&self, dur: Duration) -> bool {
        self.cancel.wait(dur)
    }

    /// Ask the user a question (`ui/ask`) and wait for the host's answer. A host without a
    /// prompt surface answers `cancelled: true`. Returns an error if this call is cancelled
    /// while waiting, or the host refuses the request.
    pub fn ask(&self, params: UiAskParams) -> Result<UiAskResult, ErrorObject> {
        let id = self.shared.next_id.fetch_add(1, Ordering::Relaxed);
        let (tx, rx) = channel();
        self.shared
            .asks
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(id, tx);
        self.shared
            .wire
            .send(request_line(id, UI_ASK, Some(&params)));
        let forget = || {
            self.shared
                .asks
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .remove(&id);
        };
        loop {
            if self.is_cancelled() {
                forget();
                return Err(ErrorObject::cancelled());
            }
            match rx.recv_timeout(Duration::from_millis(20)) {
                Ok(Ok(value)) => {
                    return Ok(
                        serde_json::from_value(value).unwrap_or_else(|_| UiAskResult::cancelled())
                    );
                }
                Ok(Err(err)) => return Err(err),
                Err(std::sync::mpsc::RecvTimeoutError::Timeout) => continue,
                Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => {
                    forget();
                    return Err(ErrorObject::message("the host closed the connection"));
                }
            }
        }
    }

    /// Ask a free-text question.
    pub fn ask_text(&self, prompt: impl Into<String>) -> Result<UiAskResult, ErrorObject> {
        self.ask(UiAskParams {
            prompt: prompt.into(),
            ..UiAskParams::default()
        })
    }
}
