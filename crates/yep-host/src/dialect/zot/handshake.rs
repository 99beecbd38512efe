//! Opening a zot extension: its `hello` first, the host's `hello_ack`, then registrations
//! until it is ready (or idle), and how long each step is waited for.

use super::codec::ZotCodec;
use super::frames::{PROTOCOL_VERSION, ToExtension};
use super::peer::ZotPeer;
use super::router::{Router, State};
use super::{
    AUTO_READY_IDLE, HELLO_WAIT, HELLO_WAIT_ENV, HOST_VERSION, PROGRESS_TARGET, READY_WAIT,
    SLOW_START_HELLO_WAIT, SLOW_START_NOTICE,
};
use crate::capability::{Events, Offer};
use crate::dialect::{HandshakeError, Hello, Streams};
use crate::launcher::said;
use crate::rpc::{CallError, CloseReason, Codec, Connection, ConnectionOptions, Handler};
use crate::store::zot::ZotPin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::{Notify, oneshot};
use tokio::time::Instant;

/// Connect to a zot extension and shake hands: the [`Zot`](super::Zot) dialect's `open`, with the
/// extension's own type (and so [`ZotPeer::registrations`]). `pin` is what it was approved to
/// register beyond tools and commands (`None`: not pinned).
pub(crate) async fn open(
    streams: Streams,
    hello: Hello,
    pin: Option<ZotPin>,
    events: Arc<dyn Events>,
    opts: ConnectionOptions,
) -> Result<Arc<ZotPeer>, HandshakeError> {
    let (said_hello, heard) = oneshot::channel();
    let router = Arc::new(Router {
        extension: hello.extension.clone(),
        events,
        conn: std::sync::OnceLock::new(),
        outbox: Arc::default(),
        nested: Arc::default(),
        session_id: hello.session_id.clone(),
        cwd: hello.workspace_root.clone(),
        interactive_ui: hello.interactive_ui,
        pin,
        sequence: AtomicU64::new(0),
        state: Mutex::new(State {
            said_hello: Some(said_hello),
            ..State::default()
        }),
        frame: Notify::new(),
    });
    let codec = Arc::new(ZotCodec::default());
    let conn = streams.connect(
        Arc::clone(&router) as Arc<dyn Handler>,
        Arc::clone(&codec) as Arc<dyn Codec>,
        opts,
    )?;
    let _ = router.conn.set(conn.downgrade());
    match handshake(&conn, &router, &codec, heard, &hello).await {
        Ok(offer) => {
            let outbox = Arc::clone(&router.outbox);
            Ok(Arc::new(ZotPeer {
                conn,
                offer,
                router,
                outbox,
            }))
        }
        Err(err) => {
            conn.close(CloseReason::Shutdown);
            Err(err)
        }
    }
}

/// What the extension said in its first line.
pub(super) struct Greeting {
    pub(super) capabilities: Vec<String>,
}

/// The extension's first frame was something else than its hello (`method`: what it was;
/// `line`: the line itself when it is no frame at all, escaped and cut short).
#[derive(Debug, thiserror::Error)]
#[error("first frame must be hello (got {:?})", crate::text::escape(method))]
pub(super) struct NotHello {
    pub(super) method: String,
    pub(super) line: Option<String>,
}

/// hello → hello_ack → registrations until ready (or idle); the offer.
async fn handshake(
    conn: &Connection,
    router: &Router,
    codec: &ZotCodec,
    heard: oneshot::Receiver<Result<Greeting, NotHello>>,
    hello: &Hello,
) -> Result<Offer, HandshakeError> {
    let waits = HelloWaits::new(
        hello.timeout,
        hello.slow_start.is_some(),
        std::env::var(HELLO_WAIT_ENV).ok().as_deref(),
    );
    // A launcher that builds first is waited for longer, and the user told why.
    let notice = async {
        if let (Some(slow), Some(after)) = (&hello.slow_start, waits.notice) {
            tokio::time::sleep(after).await;
            tracing::info!(
                target: PROGRESS_TARGET,
                "waiting for {}'s hello: {slow} (up to {})",
                crate::text::escape(&hello.extension),
                said(waits.hello)
            );
        }
        std::future::pending::<std::convert::Infallible>().await
    };
    // An extension that exits (or closes its stdout) before its hello fails at once.
    let heard = tokio::select! {
        biased;
        heard = tokio::time::timeout(waits.hello, heard) => heard,
        reason = conn.closed() => return Err(HandshakeError::Call(CallError::Closed(reason))),
        never = notice => match never {},
    };
    let greeting = match heard {
        Err(_) => {
            let why = hello
                .slow_start
                .as_ref()
                .map(|slow| format!(" ({slow})"))
                .unwrap_or_default();
            return Err(HandshakeError::Malformed(format!(
                "no hello within {}{why}",
                said(waits.hello)
            )));
        }
        Ok(Err(_)) => {
            let reason = conn.closed().await;
            return Err(HandshakeError::Call(CallError::Closed(reason)));
        }
        Ok(Ok(Err(why))) => {
            let error = HandshakeError::Malformed(why.to_string());
            return Err(match why.line {
                // Output before the hello (a log line, most likely): say which.
                Some(line) => HandshakeError::StrayOutput {
                    expected: "a zot frame",
                    line,
                    error: Box::new(error),
                },
                None => error,
            });
        }
        Ok(Ok(Ok(greeting))) => greeting,
    };
    codec.tool_cancel.store(
        greeting.capabilities.iter().any(|c| c == "tool_cancel"),
        Ordering::Release,
    );
    router.lock().capabilities = greeting.capabilities;
    let ack = ToExtension::HelloAck {
        protocol_version: PROTOCOL_VERSION,
        capabilities: vec!["call_tool".into()],
        zot_version: HOST_VERSION.into(),
        provider: String::new(),
        model: String::new(),
        cwd: hello.workspace_root.clone(),
        extension_dir: hello.package_dir.clone(),
        data_dir: hello.data_dir.clone(),
    };
    conn.send(ack.line()).await.map_err(HandshakeError::Call)?;
    // `hello_ack` is the host's first frame: what is queued goes after it.
    tokio::spawn(Arc::clone(&router.outbox).write(conn.downgrade()));
    // Ready, or idle for a while, or the cap; an extension that ends first fails its start.
    let cap = Instant::now() + READY_WAIT;
    loop {
        if router.lock().ready {
            break;
        }
        if let Some(reason) = conn.close_reason() {
            return Err(HandshakeError::NotReady(reason));
        }
        let idle = Instant::now() + AUTO_READY_IDLE;
        tokio::select! {
            biased;
            _ = conn.closed() => {}
            next = tokio::time::timeout_at(idle.min(cap), router.frame.notified()) => {
                if next.is_err() {
                    if Instant::now() >= cap {
                        tracing::info!(extension = %hello.extension, "timed out waiting for ready frame; proceeding");
                    } else {
                        tracing::debug!(extension = %hello.extension, "no ready frame; auto-ready after idle");
                    }
                    break;
                }
            }
        }
    }
    router.lock().open = true;
    router.report_beyond_pin();
    let state = router.lock();
    Ok(Offer {
        // The manifest's name is the identity; the hello's is only informational.
        name: hello.extension.clone(),
        wire: format!("zot {PROTOCOL_VERSION}"),
        tools: state.tools.clone(),
        commands: state.commands.clone(),
        ..Offer::default()
    })
}

/// How long the host waits for an extension's `hello`, and when it says why.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct HelloWaits {
    hello: Duration,
    /// When to tell the user why it takes long (a slow start only).
    notice: Option<Duration>,
}

impl HelloWaits {
    /// For a handshake timeout of `timeout`, a `slow` start or not, and `env`, the value of
    /// [`HELLO_WAIT_ENV`] (milliseconds; anything else is ignored): the ordinary wait is that,
    /// else the longer of [`HELLO_WAIT`] and `timeout`; a slow start gets the longer of
    /// [`SLOW_START_HELLO_WAIT`] and the ordinary wait, and is told after [`SLOW_START_NOTICE`]
    /// or the ordinary wait, whichever comes first (past the ordinary wait, it would have
    /// failed).
    fn new(timeout: Duration, slow: bool, env: Option<&str>) -> HelloWaits {
        let ordinary = env
            .and_then(|ms| ms.trim().parse().ok())
            .map(Duration::from_millis)
            .unwrap_or_else(|| timeout.max(HELLO_WAIT));
        match slow {
            true => HelloWaits {
                hello: SLOW_START_HELLO_WAIT.max(ordinary),
                notice: Some(SLOW_START_NOTICE.min(ordinary)),
            },
            false => HelloWaits {
                hello: ordinary,
                notice: None,
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_launcher_that_builds_first_is_waited_for_longer_and_told_of_early() {
        let ten = Duration::from_secs(10);
        let ordinary = HelloWaits::new(ten, false, None);
        assert_eq!(
            ordinary,
            HelloWaits {
                hello: HELLO_WAIT,
                notice: None
            }
        );
        let slow = HelloWaits::new(ten, true, None);
        assert_eq!(slow.hello, SLOW_START_HELLO_WAIT);
        assert_eq!(slow.notice, Some(SLOW_START_NOTICE));
        // A longer handshake timeout (an embedder's) is never cut short.
        let hour = Duration::from_secs(3600);
        assert_eq!(HelloWaits::new(hour, false, None).hello, hour);
        assert_eq!(HelloWaits::new(hour, true, None).hello, hour);
    }

    #[test]
    fn the_ordinary_hello_wait_is_set_by_its_variable_and_a_slow_start_keeps_its_own() {
        let ten = Duration::from_secs(10);
        let short = Duration::from_millis(300);
        assert_eq!(
            HelloWaits::new(ten, false, Some("300")),
            HelloWaits {
                hello: short,
                notice: None
            }
        );
        // Told of once the ordinary wait is past, where it would otherwise have failed.
        assert_eq!(
            HelloWaits::new(ten, true, Some("300")),
            HelloWaits {
                hello: SLOW_START_HELLO_WAIT,
                notice: Some(short)
            }
        );
        for junk in ["", "soon", "-1", "1.5"] {
            assert_eq!(
                HelloWaits::new(ten, false, Some(junk)).hello,
                HELLO_WAIT,
                "{junk:?}"
            );
        }
    }

    #[test]
    fn waits_read_as_people_say_them() {
        assert_eq!(said(Duration::from_millis(300)), "300 ms");
        assert_eq!(said(HELLO_WAIT), "60 s");
        assert_eq!(said(Duration::from_secs(90)), "90 s");
        assert_eq!(said(SLOW_START_HELLO_WAIT), "10 min");
        assert_eq!(said(Duration::from_secs(3600)), "60 min");
    }
}
