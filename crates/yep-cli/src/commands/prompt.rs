//! Server → host traffic for a terminal user: status and logs to stderr, `ui/ask` answered at
//! the terminal (masked for secrets, a numbered choice for options), refused without one.

use crate::output::eline;
use std::io::{BufRead, IsTerminal, Write};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use yep_host::Events;
use yep_host::capability::{Answer, LogLevel, Question, Status};
use yep_host::rpc::BoxFuture;
use yep_store::text::escape;

pub struct TerminalEvents {
    interactive: bool,
    /// One question at a time.
    asking: Arc<Mutex<()>>,
}

impl TerminalEvents {
    /// Questions are asked only when stdin and stderr are both terminals.
    pub fn new() -> Self {
        TerminalEvents {
            interactive: std::io::stdin().is_terminal() && std::io::stderr().is_terminal(),
            asking: Arc::default(),
        }
    }
}

impl Events for TerminalEvents {
    fn status(&self, extension: &str, status: Option<Status>) {
        match status {
            Some(status) => eline!(
                "[status] {extension}: {} ({:?})",
                escape(&status.text),
                status.level
            ),
            None => eline!("[status] {extension}: cleared"),
        }
    }

    fn log(&self, extension: &str, _level: LogLevel, message: &str) {
        eline!("[log] {extension}: {}", escape(message));
    }

    fn ask(&self, extension: &str, params: Question) -> BoxFuture<Answer> {
        if !self.interactive {
            eline!(
                "[ask] {extension} asked \"{}\"; no terminal to answer it, so it is refused (cancelled)",
                escape(&params.prompt)
            );
            return Box::pin(async { Answer::refused("no terminal to answer it") });
        }
        ask_on_thread(
            extension,
            params,
            Arc::clone(&self.asking),
            Box::new(|| false),
        )
    }
}

/// Whether the question being asked was given up on (the call that asked was cancelled).
type Abandoned = Box<dyn Fn() -> bool + Send>;

/// Ask at the terminal on a plain thread, one question at a time. Not the runtime's blocking
/// pool: a terminal read cannot be interrupted, and the runtime must be able to shut down (after
/// Ctrl-C) without it.
fn ask_on_thread(
    extension: &str,
    params: Question,
    asking: Arc<Mutex<()>>,
    abandoned: Abandoned,
) -> BoxFuture<Answer> {
    let extension = extension.to_string();
    let (tx, rx) = tokio::sync::oneshot::channel();
    let spawned = std::thread::Builder::new()
        .name("yep-ask".into())
        .spawn(move || {
            let _one = asking.lock().unwrap_or_else(|p| p.into_inner());
            let _ = tx.send(
                ask_at_terminal(&extension, &params, &*abandoned)
                    .unwrap_or_else(|_| Answer::cancelled()),
            );
        });
    Box::pin(async move {
        match spawned {
            Ok(_) => rx.await.unwrap_or_else(|_| Answer::cancelled()),
            Err(_) => Answer::cancelled(),
        }
    })
}

/// Questions from an `ExtensionHost`, answered at this terminal.
#[derive(Default)]
pub struct TerminalAsk {
    asking: Arc<Mutex<()>>,
    /// Bumped by `abandon`; a question asked before the bump stops waiting for its answer.
    generation: Arc<AtomicU64>,
}

impl TerminalAsk {
    /// Stop waiting at the terminal for an answer to the open question, if any (it is answered
    /// cancelled), so its read does not take the next line typed at the prompt.
    pub fn abandon(&self) {
        self.generation.fetch_add(1, Ordering::AcqRel);
    }

    /// Block until no question is waiting at the terminal (an abandoned one lets go within a
    /// poll interval), so a line editor that takes the terminal next gets every key.
    pub fn wait_until_no_question(&self) {
        drop(self.asking.lock().unwrap_or_else(|p| p.into_inner()));
    }
}

impl yep_host::runtime::AskSink for TerminalAsk {
    fn ask(
        &self,
        extension: &str,
        params: Question,
    ) -> impl std::future::Future<Output = Answer> + Send {
        let generation = Arc::clone(&self.generation);
        let asked_at = generation.load(Ordering::Acquire);
        let abandoned = Box::new(move || generation.load(Ordering::Acquire) != asked_at);
        ask_on_thread(extension, params, Arc::clone(&self.asking), abandoned)
    }
}

/// Ask at the terminal and return the answer, or `None` when dismissed.
pub fn read_answer(extension: &str, params: &Question) -> std::io::Result<Option<String>> {
    let r = ask_at_terminal(extension, params, &|| false)?;
    Ok((!r.cancelled).then_some(r.answer))
}

/// An answer that is not one of the options is asked again this many times in all.
const OPTION_ATTEMPTS: usize = 3;

fn ask_at_terminal(
    extension: &str,
    params: &Question,
    abandoned: &dyn Fn() -> bool,
) -> std::io::Result<Answer> {
    let mut err = std::io::stderr().lock();
    writeln!(
        err,
        "[ask] {} asks: {}",
        escape(extension),
        escape(&params.prompt)
    )?;
    for (i, option) in params.options.iter().enumerate() {
        writeln!(err, "  {}) {}", i + 1, escape(option))?;
    }
    let hint = params
        .placeholder
        .as_deref()
        .map(|p| format!(" ({})", escape(p)))
        .unwrap_or_default();
    // Not held while waiting: the session writes to stderr meanwhile (a Ctrl-C that cancels
    // the call that asked, its progress).
    drop(err);
    for _ in 0..OPTION_ATTEMPTS {
        eprint_flush(&format!("answer{hint} (empty line cancels): "))?;
        let line = if params.secret {
            read_masked(abandoned)?
        } else {
            read_line(abandoned)?
        };
        let Some(answer) = line.map(|l| l.trim().to_string()).filter(|l| !l.is_empty()) else {
            return Ok(Answer::cancelled());
        };
        if params.options.is_empty() {
            return Ok(Answer::answered(answer));
        }
        // A number picks by position; otherwise the text must be one of the options.
        let picked = answer
            .parse::<usize>()
            .ok()
            .and_then(|n| params.options.get(n.wrapping_sub(1)))
            .or_else(|| params.options.iter().find(|o| **o == answer));
        if let Some(option) = picked {
            return Ok(Answer::answered(option.clone()));
        }
        eline!(
            "{} is not one of: {}",
            escape(&format!("{answer:?}")),
            params
                .options
                .iter()
                .map(|o| escape(o))
                .collect::<Vec<_>>()
                .join(", ")
        );
    }
    eline!("no valid answer; left unanswered");
    Ok(Answer::cancelled())
}

/// Write `text` to stderr without a newline (a prompt), flushed.
fn eprint_flush(text: &str) -> std::io::Result<()> {
    let mut err = std::io::stderr().lock();
    write!(err, "{text}")?;
    err.flush()
}

/// Read a line from stdin; `None` at its end, or once the question is `abandoned` (checked
/// while waiting for input).
fn read_line(abandoned: &dyn Fn() -> bool) -> std::io::Result<Option<String>> {
    loop {
        if abandoned() {
            return Ok(None);
        }
        let mut fd = libc::pollfd {
            fd: 0,
            events: libc::POLLIN,
            revents: 0,
        };
        // SAFETY: one valid pollfd, for the length given.
        match unsafe { libc::poll(&mut fd, 1, 50) } {
            0 => continue,
            n if n > 0 && abandoned() => return Ok(None),
            n if n > 0 => break,
            _ => {
                let err = std::io::Error::last_os_error();
                if err.kind() != std::io::ErrorKind::Interrupted {
                    return Err(err);
                }
            }
        }
    }
    // A terminal in canonical mode hands over one line per read, so nothing typed later is
    // left in stdin's buffer where poll cannot see it.
    let mut line = String::new();
    let n = std::io::stdin().lock().read_line(&mut line)?;
    Ok((n > 0).then_some(line))
}

/// Read a line with terminal echo off, restoring it afterwards.
fn read_masked(abandoned: &dyn Fn() -> bool) -> std::io::Result<Option<String>> {
    // SAFETY: termios calls on fd 0 with a zero-initialised struct that tcgetattr fills.
    let saved = unsafe {
        let mut t: libc::termios = std::mem::zeroed();
        if libc::tcgetattr(0, &mut t) != 0 {
            return read_line(abandoned);
        }
        let saved = t;
        t.c_lflag &= !libc::ECHO;
        libc::tcsetattr(0, libc::TCSANOW, &t);
        saved
    };
    let line = read_line(abandoned);
    // SAFETY: restoring the attributes read above.
    unsafe {
        libc::tcsetattr(0, libc::TCSANOW, &saved);
    }
    if !abandoned() {
        eline!("(saved)");
    }
    line
}
