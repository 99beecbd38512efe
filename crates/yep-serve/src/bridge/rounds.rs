//! Questions to a 2026-07-28 client. That revision has no server-to-client requests: a
//! question rides the call's answer (`resultType: "input_required"`, with `inputRequests` and
//! a `requestState`), and the client calls again with the answer (`inputResponses`).
//!
//! An extension's call does not start over: it runs on in a task of its own, waiting for the
//! answer, and is parked under its `requestState` (32 random bytes, so only the client that
//! was given it can come back to it) until the client does. A call not come back to within
//! [`PARK_TIMEOUT`] is cancelled; at most [`MAX_PARKED`] wait at once, past which a question
//! is cancelled with the reason.

use rmcp::model::{CallToolResult, InputRequests};
use serde_json::{Value, json};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::{mpsc, oneshot};
use tokio_util::sync::CancellationToken;
use yep_host::capability::Answer;

/// How long a parked call waits for its client to come back with the answer.
pub const PARK_TIMEOUT: Duration = Duration::from_secs(600);

/// The most calls parked at once, over every client of one bridge.
pub const MAX_PARKED: usize = 64;

/// Why a question is cancelled when [`MAX_PARKED`] calls wait already.
pub const TOO_MANY_PARKED: &str =
    "too many calls wait for their MCP clients to answer a question: cancelled";

/// What a call again with a `requestState` that no call waits under is told.
pub const UNKNOWN_STATE: &str = "no call waits under this requestState (it was answered already, or waited too long): call the tool again";

/// The key of the one question in an `input_required` answer.
const QUESTION: &str = "question";

/// A question of a call in flight, to go out in its answer; `answer` takes the reply.
pub(crate) struct Asked {
    /// `elicitation/create`'s params.
    pub params: Value,
    pub answer: oneshot::Sender<Answer>,
}

/// A call of a 2026-07-28 client running in a task of its own: its result, its questions,
/// and what cancels it.
pub(crate) struct Running {
    pub task: tokio::task::JoinHandle<CallToolResult>,
    pub questions: mpsc::Receiver<Asked>,
    pub cancel: CancellationToken,
}

/// A call whose question went out, with where its answer goes.
type Parked = (Running, oneshot::Sender<Answer>);

/// The calls of one bridge whose question went out, by `requestState`.
#[derive(Clone, Default)]
pub(crate) struct Rounds(Arc<Mutex<HashMap<String, Parked>>>);

impl Rounds {
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, Parked>> {
        self.0.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Park `running` on `asked`: the `input_required` answer that asks it. When it cannot
    /// wait ([`MAX_PARKED`] do already), the question is cancelled with the reason and the
    /// call is given back to go on.
    pub fn park(
        &self,
        running: Running,
        asked: Asked,
    ) -> Result<rmcp::model::InputRequiredResult, Running> {
        let requests: Result<InputRequests, _> = serde_json::from_value(json!({
            QUESTION: {"method": "elicitation/create", "params": asked.params},
        }));
        let parked = {
            let mut waiting = self.lock();
            match (requests, token()) {
                (Ok(requests), Ok(state)) if waiting.len() < MAX_PARKED => {
                    waiting.insert(state.clone(), (running, asked.answer));
                    Ok((requests, state))
                }
                _ => Err((running, asked.answer)),
            }
        };
        let (requests, state) = match parked {
            Ok(parked) => parked,
            Err((running, answer)) => {
                let _ = answer.send(Answer::refused(TOO_MANY_PARKED));
                return Err(running);
            }
        };
        // Not come back to in time: cancelled, and its task ends.
        let rounds = self.clone();
        let key = state.clone();
        tokio::spawn(async move {
            tokio::time::sleep(PARK_TIMEOUT).await;
            if let Some((running, _)) = rounds.lock().remove(&key) {
                running.cancel.cancel();
            }
        });
        Ok(rmcp::model::InputRequiredResult::new(
            Some(requests),
            Some(state),
        ))
    }

    /// What `running` comes to next: its result, or its next question, in an
    /// `input_required` answer that parks it. A cancel of `ct` (this round's request)
    /// cancels the call; so does this round's end without either (the client went away).
    pub async fn next(
        &self,
        mut running: Running,
        ct: &CancellationToken,
    ) -> rmcp::model::CallToolResponse {
        use rmcp::model::CallToolResponse;
        enum Came {
            Result(Result<CallToolResult, tokio::task::JoinError>),
            Asked(Asked),
            Cancelled,
        }
        let guard = running.cancel.clone().drop_guard();
        let mut cancelled = false;
        loop {
            let came = tokio::select! {
                result = &mut running.task => Came::Result(result),
                Some(asked) = running.questions.recv() => Came::Asked(asked),
                () = ct.cancelled(), if !cancelled => Came::Cancelled,
            };
            match came {
                Came::Result(result) => {
                    guard.disarm();
                    let result = result.unwrap_or_else(|_| {
                        super::error_result("the call ended before its answer")
                    });
                    return CallToolResponse::Complete(result);
                }
                Came::Asked(asked) => match self.park(running, asked) {
                    Ok(input) => {
                        guard.disarm();
                        return CallToolResponse::InputRequired(input);
                    }
                    Err(back) => running = back,
                },
                Came::Cancelled => {
                    cancelled = true;
                    running.cancel.cancel();
                }
            }
        }
    }

    /// The call parked under `state`, its question answered by `responses` (no answer is a
    /// cancel); None when none is (never was, timed out, or was come back to already).
    pub fn resume(
        &self,
        state: &str,
        responses: Option<&rmcp::model::InputResponses>,
    ) -> Option<Running> {
        let (running, answer) = self.lock().remove(state)?;
        let reply = responses.and_then(|r| r.get(QUESTION));
        let _ = answer.send(reply.map_or_else(Answer::cancelled, answer_of));
        Some(running)
    }
}

/// A fresh `requestState`: 32 random bytes, in hex.
fn token() -> std::io::Result<String> {
    use std::io::Read;
    let mut bytes = [0u8; 32];
    std::fs::File::open("/dev/urandom")?.read_exact(&mut bytes)?;
    Ok(yep_host::store::hash::hex(&bytes))
}

/// What an `elicitation/create` result says, as the host's answer: the accepted `answer`
/// field's text; anything else is a cancel.
pub(crate) fn answer_of(result: &Value) -> Answer {
    match (result["action"].as_str(), &result["content"]["answer"]) {
        (Some("accept"), Value::String(text)) => Answer::answered(text.clone()),
        (Some("accept"), other) if !other.is_null() => Answer::answered(other.to_string()),
        _ => Answer::cancelled(),
    }
}
