//! The turn's intercept points beyond a tool call: a turn about to start, an assistant
//! message about to be shown, and the assembled system prompt (zot's `turn_start`,
//! `assistant_message` and `before_agent_start`; a tool call's is the pre hook).
//!
//! Only extensions approved to intercept a point are asked (a zot extension's pin), one at a
//! time in load order. zot itself orders only `before_agent_start`; load order is stricter and
//! no extension can tell. The first block wins; rewrites chain, each extension seeing the one
//! before's. An extension that times out (5 s), fails or answers nonsense lets it go ahead
//! unchanged, and the embedder hears why.

use super::{ExtensionHost, HookNote, Loaded};
use crate::capability::{Intercept, InterceptOutcome};
use crate::health::HealthEvent;
use serde::Serialize;
use serde_json::Value;
use std::sync::Arc;
use std::time::Duration;

/// How long one extension may take to answer at an intercept point.
pub(crate) const INTERCEPT_TIMEOUT: Duration = Duration::from_secs(5);
/// The longest system prompt an extension may put in place of the one assembled.
pub(crate) const MAX_SYSTEM_PROMPT_BYTES: usize = 1024 * 1024;

/// How long one extension may take at a lifecycle point (a submitted prompt, a stop): a
/// Claude Code hook's longest, as its consent screen shows it.
pub(crate) const LIFECYCLE_TIMEOUT: Duration =
    Duration::from_secs(crate::store::claude::hooks::MAX_LIFECYCLE_TIMEOUT_S);

/// Whether a submitted prompt goes to the model.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "decision", rename_all = "snake_case")]
pub enum PromptDecision {
    /// Send it, with `context` for the model beside it.
    Submit {
        #[serde(skip_serializing_if = "Vec::is_empty")]
        context: Vec<HookNote>,
    },
    /// Do not: `reason` is for the user.
    Block { extension: String, reason: String },
}

/// Whether the agent stops answering.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "decision", rename_all = "snake_case")]
pub enum StopDecision {
    Stop,
    /// Keep going: `reason` is for the model, as what to do next.
    Continue {
        extension: String,
        reason: String,
    },
}

/// Whether a turn may start.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "decision", rename_all = "snake_case")]
pub enum TurnDecision {
    Start,
    /// Not this turn: `reason` is for the user.
    Block {
        extension: String,
        reason: String,
    },
}

/// What to show of an assistant message.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "decision", rename_all = "snake_case")]
pub enum MessageDecision {
    /// Show `text` (the model's, or what the extensions in `rewritten_by` made of it; the
    /// transcript keeps the original).
    Show {
        text: String,
        rewritten_by: Vec<String>,
    },
    /// Hide it from the user.
    Hide { extension: String, reason: String },
}

impl ExtensionHost {
    /// A turn is about to start (`step` counts the model calls of this prompt): the first
    /// extension that blocks it stops it.
    pub async fn turn_start(&self, step: u64) -> TurnDecision {
        let point = Intercept::TurnStart { step };
        for l in self.interceptors(&point) {
            if let Some(InterceptOutcome::Block { reason }) = self.ask_at(&l, &point).await {
                return TurnDecision::Block {
                    extension: l.name.clone(),
                    reason,
                };
            }
        }
        TurnDecision::Start
    }

    /// The model said `text`: what to show of it. Replacements chain; the first block hides
    /// it.
    pub async fn assistant_message(&self, text: &str) -> MessageDecision {
        let mut text = text.to_string();
        let mut rewritten_by = Vec::new();
        for l in self.interceptors(&Intercept::AssistantMessage {
            text: String::new(),
        }) {
            let point = Intercept::AssistantMessage { text: text.clone() };
            match self.ask_at(&l, &point).await {
                Some(InterceptOutcome::Block { reason }) => {
                    return MessageDecision::Hide {
                        extension: l.name.clone(),
                        reason,
                    };
                }
                Some(InterceptOutcome::ReplaceText(new)) if new != text => {
                    text = new;
                    rewritten_by.push(l.name.clone());
                }
                _ => {}
            }
        }
        MessageDecision::Show { text, rewritten_by }
    }

    /// The assembled system prompt, as the extensions that replace it leave it: each sees
    /// the one before's. A replacement over `MAX_SYSTEM_PROMPT_BYTES` is refused (the
    /// prompt stays as it was) and reported.
    pub async fn system_prompt(&self, base: &str, provider: &str, model: &str) -> String {
        let mut prompt = base.to_string();
        let asking = Intercept::SystemPrompt {
            prompt: String::new(),
            provider: String::new(),
            model: String::new(),
        };
        for l in self.interceptors(&asking) {
            let point = Intercept::SystemPrompt {
                prompt: prompt.clone(),
                provider: provider.to_string(),
                model: model.to_string(),
            };
            match self.ask_at(&l, &point).await {
                // Measured as it came, a JSON string.
                Some(InterceptOutcome::SystemPrompt(new))
                    if Value::from(new.as_str()).to_string().len() > MAX_SYSTEM_PROMPT_BYTES =>
                {
                    self.core.report(HealthEvent::Warning {
                        extension: Some(l.name.clone()),
                        message: format!(
                            "extension `{}`: its system prompt ({} bytes) is over the {MAX_SYSTEM_PROMPT_BYTES}-byte cap; keeping the prompt as it was",
                            l.name,
                            new.len()
                        ),
                    });
                }
                Some(InterceptOutcome::SystemPrompt(new)) => prompt = new,
                _ => {}
            }
        }
        prompt
    }

    /// The user submitted `prompt`: the first extension that blocks it keeps it from the
    /// model; what the others say for the model goes beside it. Each may take up to
    /// `LIFECYCLE_TIMEOUT` (a Claude Code hook's own timeout, clamped as its consent
    /// screen showed).
    pub async fn prompt_submit(&self, prompt: &str) -> PromptDecision {
        let point = Intercept::PromptSubmit {
            prompt: prompt.to_string(),
        };
        let mut context = Vec::new();
        for l in self.interceptors(&point) {
            match self.ask_within(&l, &point, LIFECYCLE_TIMEOUT).await {
                Some(InterceptOutcome::Block { reason }) => {
                    return PromptDecision::Block {
                        extension: l.name.clone(),
                        reason,
                    };
                }
                Some(InterceptOutcome::Context(text)) => context.push(HookNote {
                    extension: l.name.clone(),
                    text,
                }),
                _ => {}
            }
        }
        PromptDecision::Submit { context }
    }

    /// The agent is about to stop (`active`: a stop hook kept it going already): the first
    /// extension that blocks keeps it going, with its reason for the model.
    pub async fn stop(&self, active: bool) -> StopDecision {
        let point = Intercept::Stop { active };
        for l in self.interceptors(&point) {
            if let Some(InterceptOutcome::Block { reason }) =
                self.ask_within(&l, &point, LIFECYCLE_TIMEOUT).await
            {
                return StopDecision::Continue {
                    extension: l.name.clone(),
                    reason,
                };
            }
        }
        StopDecision::Stop
    }

    /// The enabled extensions approved to intercept `point`, in load order.
    fn interceptors(&self, point: &Intercept) -> Vec<Arc<Loaded>> {
        let name = point.name();
        self.loaded()
            .into_iter()
            .filter(|l| l.ext.intercepts(name))
            .collect()
    }

    /// One extension's answer at `point`; `None` (go ahead) when it could not give one,
    /// which is reported.
    async fn ask_at(&self, l: &Loaded, point: &Intercept) -> Option<InterceptOutcome> {
        self.ask_within(l, point, INTERCEPT_TIMEOUT).await
    }

    /// [`ExtensionHost::ask_at`] within `bound`.
    async fn ask_within(
        &self,
        l: &Loaded,
        point: &Intercept,
        bound: Duration,
    ) -> Option<InterceptOutcome> {
        // The bound whatever it takes: starting a server that is not up counts too.
        let asked = tokio::time::timeout(bound, l.ext.with_peer(|p, _| p.intercept(point, bound)))
            .await
            .map_err(|_| format!("no answer within {} s", bound.as_secs()))
            .and_then(|answer| answer.map_err(|e| e.to_string()));
        match asked {
            Ok(outcome) => Some(outcome),
            Err(err) => {
                self.core.report(HealthEvent::Warning {
                    extension: Some(l.name.clone()),
                    message: format!(
                        "extension `{}`: its {} intercept could not run, so it goes ahead unchanged: {err}",
                        l.name,
                        point.name()
                    ),
                });
                None
            }
        }
    }
}
