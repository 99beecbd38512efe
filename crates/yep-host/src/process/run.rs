//! One-shot commands: a hook or an inline command runs to its end, spawned as a server is
//! (contained, in its own process group, stderr to its log), with its stdout capped and the
//! whole group killed past its timeout.

use super::{SpawnError, SpawnSpec, Spawned, spawn};
use std::path::PathBuf;
use std::process::ExitStatus;
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// What a one-shot command ([`run_to_end`]) may take.
#[derive(Clone, Copy, Debug)]
pub(crate) struct RunLimits {
    /// From the start to its end: past it the whole process group is killed.
    pub(crate) timeout: Duration,
    /// The most stdout kept; the rest is read and dropped, so the command never blocks on a
    /// full pipe.
    pub(crate) max_stdout: usize,
}

/// How a one-shot command ended.
#[derive(Debug)]
pub(crate) struct RunOutput {
    /// Its exit status; `None` when it was killed at its timeout.
    pub(crate) status: Option<ExitStatus>,
    /// Its stdout, up to [`RunLimits::max_stdout`].
    pub(crate) stdout: Vec<u8>,
    /// How many bytes of stdout past the cap were dropped.
    pub(crate) dropped: u64,
    /// Its last lines of stderr (all of it went to the log).
    pub(crate) stderr_tail: Vec<String>,
    pub(crate) log_path: PathBuf,
}

impl RunOutput {
    /// Killed at its timeout.
    pub(crate) fn timed_out(&self) -> bool {
        self.status.is_none()
    }
}

/// Run a short-lived command to its end, as a server is spawned (contained by `spec.sandbox`,
/// in its own process group, stderr to its log): `stdin` is written and closed, stdout read
/// up to the cap, and past `limits.timeout` the whole group is killed. A hook command or an
/// inline command runs this way.
pub(crate) async fn run_to_end(
    spec: &SpawnSpec,
    stdin: &[u8],
    limits: RunLimits,
) -> Result<RunOutput, SpawnError> {
    let deadline = tokio::time::Instant::now() + limits.timeout;
    let Spawned {
        process,
        stdin: mut input,
        stdout: mut output,
    } = spawn(spec)?;
    // Written beside the reading: a command that answers before it has read all of its
    // input never waits on us. One that does not read it at all ends the write early.
    let given = stdin.to_vec();
    let writing = tokio::spawn(async move {
        let _ = input.write_all(&given).await;
        let _ = input.shutdown().await;
    });
    let mut stdout = Vec::new();
    let mut dropped = 0u64;
    let mut chunk = vec![0u8; 16 * 1024];
    let read = async {
        loop {
            match output.read(&mut chunk).await {
                Ok(0) | Err(_) => break,
                Ok(n) => {
                    let room = limits.max_stdout.saturating_sub(stdout.len()).min(n);
                    stdout.extend_from_slice(&chunk[..room]);
                    dropped += (n - room) as u64;
                }
            }
        }
    };
    let read_in_time = tokio::time::timeout_at(deadline, read).await.is_ok();
    let status = match read_in_time {
        // Its stdout ended: it has ended, or is about to (a child of its own holding stdout
        // open would not let it end here).
        true => {
            let left = deadline.saturating_duration_since(tokio::time::Instant::now());
            match process.wait_for_exit(left).await {
                Some(status) => Some(status),
                None => {
                    let _ = process.terminate(Duration::from_millis(100)).await;
                    None
                }
            }
        }
        false => {
            let _ = process.terminate(Duration::from_millis(100)).await;
            None
        }
    };
    writing.abort();
    process.stderr.drained(Duration::from_millis(200)).await;
    Ok(RunOutput {
        status,
        stdout,
        dropped,
        stderr_tail: process.stderr.lines(),
        log_path: process.log_path.clone(),
    })
}
