//! The events of an agent that runs its own tools (Claude Code, Codex and Gemini CLI, through
//! `yep hook`), in the capability model's terms. The enabled extensions' hooks, zot's
//! intercepts and lifecycle events, and the Claude Code plugins' hooks decide on the agent's
//! own Bash and Write as they do on the tools yep serves. Each agent's own format is its
//! adapter's (yep-serve's `agents/`); this is what they share.

use super::trace::{call_span, tool_event};
use super::{ExtensionHost, HookNote, PreDecision, UnavailableHook};
use crate::audit::{self, AgentEntry, Carrier, Decision, Record};
use crate::capability::Status;
use crate::capability::TraceEvent;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use std::collections::{BTreeMap, HashMap};
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};

/// What the events of an agent that runs its own tools need kept between them (each comes
/// from a process of its own).
#[derive(Default)]
pub(crate) struct AgentState {
    /// The agent's turns so far: a session start or a prompt starts one.
    turn: AtomicU64,
    /// Lifecycle events sent, to name each.
    events: AtomicU64,
    /// Each extension's prompt block as the agent last got it.
    shown: Mutex<HashMap<String, String>>,
}

/// The trace span of the agent's tool call `id`, or one of the host's own.
fn span(id: Option<String>) -> String {
    match id {
        Some(id) => format!("agent-{id}"),
        None => call_span(),
    }
}

/// One event of the agent's. Its tools are named as yep's hooks know them: `bash`, `write`,
/// `edit` (what zot's guard sees); Claude Code plugins' hooks see `Bash`, `Write` and `Edit`
/// through [`HostOptions::claude_tool_names`](super::HostOptions::claude_tool_names).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "event", rename_all = "snake_case")]
pub enum AgentEvent {
    /// A session starts: the extensions' prompt text is for the model.
    SessionStart,
    /// The user submitted `prompt`.
    PromptSubmit { prompt: String },
    /// The agent is about to run its tool `tool` with `args`; `id` is the agent's for the
    /// call, when it gives one (the trace span of its `tool.started` and `tool.completed`).
    PreTool {
        tool: String,
        args: Value,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        id: Option<String>,
    },
    /// It ran: `result` is what the tool gave, or `error` why it failed.
    PostTool {
        tool: String,
        args: Value,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        id: Option<String>,
        #[serde(default)]
        result: Value,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        error: Option<String>,
    },
    /// The agent is about to stop (`active`: a stop hook kept it going already).
    Stop {
        #[serde(default)]
        active: bool,
    },
    /// The agent draws its status line: the extensions' status.
    Status,
}

/// What the hooks decided.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Verdict {
    /// Go ahead (with [`AgentAnswer::args`] when a hook rewrote them).
    #[default]
    Go,
    /// Ask the user first: the agent asks, in its own way.
    Ask,
    /// Do not: the tool does not run, the prompt is not sent, or (at Stop) the agent keeps
    /// going with the reason as what to do next.
    Block,
}

/// What yep answers an [`AgentEvent`], in its own terms: each agent's adapter renders it.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct AgentAnswer {
    pub verdict: Verdict,
    /// The extension whose hook decided an Ask or a Block.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub by: Option<String>,
    /// Why: for the model (a Block, Stop's "keep going") or the user (an Ask).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// For the user alone, when a hook gave one beside its reason.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub user_message: Option<String>,
    /// PreTool: the arguments to run instead, when a hook rewrote them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub args: Option<Value>,
    /// Who rewrote them, in order.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub rewritten_by: Vec<String>,
    /// Text for the model beside the event: the extensions' prompt text, a hook's context.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub context: Vec<HookNote>,
    /// PostTool: what the hooks found wrong with what the tool did, for the model.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub feedback: Vec<HookNote>,
    /// Hooks that should have had a say and could not; their `on_error` let it go on.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub unavailable: Vec<UnavailableHook>,
    /// Status: the latest status each extension pushed.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub status: BTreeMap<String, Status>,
}

impl AgentAnswer {
    fn blocked(by: String, reason: String, user_message: Option<String>) -> AgentAnswer {
        AgentAnswer {
            verdict: Verdict::Block,
            by: Some(by),
            reason: Some(reason),
            user_message,
            ..AgentAnswer::default()
        }
    }
}

/// What the hooks decided on an agent's tool call, as the audit trail says it: blocked, asked,
/// rewritten or allowed, and by whom.
fn decided(entry: &mut AgentEntry, decision: &PreDecision, asked: Option<&(String, String)>) {
    let (how, by) = match (decision, asked) {
        (PreDecision::Block { extension, .. }, _) => (Decision::Blocked, vec![extension.clone()]),
        (PreDecision::Allow { .. }, Some((by, _))) => (Decision::Asked, vec![by.clone()]),
        (PreDecision::Allow { rewritten_by, .. }, None) if !rewritten_by.is_empty() => {
            (Decision::Rewritten, rewritten_by.clone())
        }
        (PreDecision::Allow { .. }, None) => (Decision::Allowed, Vec::new()),
    };
    entry.decision = Some(how);
    entry.by = by;
}

/// A lifecycle event of the agent's session, as extensions that observe it get it.
fn lifecycle(host: &ExtensionHost, event_type: &str, data: Value) -> TraceEvent {
    let n = host.core.agent.events.fetch_add(1, Ordering::Relaxed) + 1;
    TraceEvent {
        event_type: event_type.to_string(),
        id: format!("yep-agent-event-{n}"),
        ts: String::new(),
        context: Value::Null,
        data,
        metadata: Value::Null,
    }
}

impl ExtensionHost {
    /// [`ExtensionHost::agent_event`] in the agent's session `session` (its own id, as its
    /// hooks know it): a plugin's hooks are told that session, so their per-session state is
    /// per agent session.
    ///
    /// A session id that is not a plain word (letters, digits, `_`, `-`, `.`; at most 128, not
    /// starting with `.`) is not passed on: plugins make paths of it.
    pub async fn agent_event_in(&self, session: Option<String>, event: AgentEvent) -> AgentAnswer {
        let plain = |s: &String| {
            (1..=128).contains(&s.len())
                && !s.starts_with('.')
                && s.bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b"_-.".contains(&b))
        };
        match session.filter(plain) {
            Some(session) => {
                crate::capability::AGENT_SESSION
                    .scope(session, self.agent_event(event))
                    .await
            }
            None => self.agent_event(event).await,
        }
    }

    /// Run the chain for one event of an agent that runs its own tools, and say what it
    /// decided. A hook that asks is answered [`Verdict::Ask`] (the agent asks its user), never
    /// put to this host's ask sink; a block after it still wins.
    pub async fn agent_event(&self, event: AgentEvent) -> AgentAnswer {
        match event {
            AgentEvent::SessionStart => {
                let turn = self.core.agent.turn.fetch_add(1, Ordering::AcqRel) + 1;
                self.emit(lifecycle(self, "session.started", json!({})));
                let mut context = self.agent_prompt(turn, false).await;
                let replaced = self.system_prompt("", "", "").await;
                if !replaced.trim().is_empty() {
                    context.push(HookNote {
                        extension: String::new(),
                        text: replaced.trim().to_string(),
                    });
                }
                AgentAnswer {
                    context,
                    ..AgentAnswer::default()
                }
            }
            AgentEvent::PromptSubmit { prompt } => {
                let turn = self.core.agent.turn.fetch_add(1, Ordering::AcqRel) + 1;
                self.emit(lifecycle(self, "turn.started", json!({ "turn": turn })));
                match self.prompt_submit(&prompt).await {
                    super::intercept::PromptDecision::Block { extension, reason } => {
                        AgentAnswer::blocked(extension, reason, None)
                    }
                    super::intercept::PromptDecision::Submit { mut context } => {
                        context.extend(self.agent_prompt(turn, true).await);
                        AgentAnswer {
                            context,
                            ..AgentAnswer::default()
                        }
                    }
                }
            }
            AgentEvent::PreTool { tool, args, id } => {
                self.emit(tool_event(
                    &span(id),
                    "tool.started",
                    json!({ "tool": tool }),
                ));
                let shape = self.core.audit.as_ref().map(|_| audit::shape(&args));
                if self.core.block_secrets
                    && let Some(found) = audit::find_in_value(&args, Carrier::Arguments)
                {
                    let refusal = found.to_string();
                    self.audit_agent(&tool, shape, |e| {
                        e.decision = Some(Decision::Blocked);
                        e.secret = Some(found);
                    });
                    return AgentAnswer::blocked("yep".into(), refusal, None);
                }
                let (decision, asked) = self.pre_tool_use_asking_caller(&tool, args.clone()).await;
                self.audit_agent(&tool, shape, |e| decided(e, &decision, asked.as_ref()));
                match decision {
                    PreDecision::Block {
                        extension,
                        reason,
                        user_message,
                    } => AgentAnswer::blocked(extension, reason, user_message),
                    PreDecision::Allow {
                        args: after,
                        rewritten_by,
                        unavailable,
                        context,
                    } => {
                        let (verdict, by, reason) = match asked {
                            Some((by, reason)) => (Verdict::Ask, Some(by), Some(reason)),
                            None => (Verdict::Go, None, None),
                        };
                        AgentAnswer {
                            verdict,
                            by,
                            reason,
                            args: (!rewritten_by.is_empty() && after != args).then_some(after),
                            rewritten_by,
                            context,
                            unavailable,
                            ..AgentAnswer::default()
                        }
                    }
                }
            }
            AgentEvent::PostTool {
                tool,
                args,
                id,
                result,
                error,
            } => {
                self.emit(tool_event(
                    &span(id),
                    "tool.completed",
                    json!({ "tool": tool }),
                ));
                let shape = self.core.audit.as_ref().map(|_| audit::shape(&args));
                self.audit_agent(&tool, shape, |e| {
                    e.phase = "post";
                    e.outcome = Some(match error.is_some() {
                        true => audit::Outcome::Error,
                        false => audit::Outcome::Ok,
                    });
                });
                let value = crate::capability::ToolResult::from(result);
                let outcome = match &error {
                    Some(message) => Err(message.as_str()),
                    None => Ok(&value),
                };
                let answers = self.post_tool_use_answered(&tool, &args, outcome).await;
                AgentAnswer {
                    context: answers.context,
                    feedback: answers.feedback,
                    ..AgentAnswer::default()
                }
            }
            AgentEvent::Status => AgentAnswer {
                status: self.status(),
                ..AgentAnswer::default()
            },
            AgentEvent::Stop { active } => {
                self.emit(lifecycle(self, "turn.completed", json!({})));
                match self.stop(active).await {
                    super::intercept::StopDecision::Stop => AgentAnswer::default(),
                    super::intercept::StopDecision::Continue { extension, reason } => {
                        AgentAnswer::blocked(extension, reason, None)
                    }
                }
            }
        }
    }

    /// Record one of the agent's own tool calls (`args`: its shape, `None` when the audit
    /// trail is off), as `fill` says it went.
    fn audit_agent(
        &self,
        tool: &str,
        args: Option<Box<serde_json::value::RawValue>>,
        fill: impl FnOnce(&mut AgentEntry),
    ) {
        let (Some(audit), Some(args)) = (&self.core.audit, args) else {
            return;
        };
        let mut entry = AgentEntry {
            extension: String::new(),
            tool: tool.to_string(),
            phase: "pre",
            args,
            decision: None,
            by: Vec::new(),
            outcome: None,
            secret: None,
        };
        fill(&mut entry);
        if let Some(first) = entry.by.first() {
            entry.extension = first.clone();
        }
        audit.record(Record::AgentTool(entry));
    }

    /// The extensions' prompt blocks for the agent's `turn`, one note each: all of them at a
    /// session's start, and at a prompt (`changed_only`) those whose text changed since the
    /// agent last got them.
    async fn agent_prompt(&self, turn: u64, changed_only: bool) -> Vec<HookNote> {
        let blocks = self.prompt_blocks(turn).await;
        let mut shown = self
            .core
            .agent
            .shown
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        blocks
            .into_iter()
            .filter(|(name, text)| {
                let same = shown.get(name) == Some(text);
                if !same {
                    shown.insert(name.clone(), text.clone());
                }
                !(changed_only && same)
            })
            .map(|(extension, text)| HookNote { extension, text })
            .collect()
    }
}
