//! `pre_tool_use` and `post_tool_use` around every tool call, for the subscriptions the
//! manifests approved.

use super::{ExtensionHost, HostError, Loaded};
use crate::capability::{HookAnswer, HookFiring, HookOutcome, ToolResult};
use crate::health::HealthEvent;
use crate::manifest::{HookEvent, OnError};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use std::sync::Arc;
use std::time::Duration;
use tokio::time::Instant;

/// The longest a hook may hold a tool call, whatever its manifest asks for: a package's
/// `timeout_ms` is clamped to this, start-up included (the consent summary shows the clamp).
pub use crate::manifest::MAX_HOOK_TIMEOUT_MS;
pub(crate) use crate::manifest::hook_timeout;

/// One warning per hook of `loaded` whose `timeout_ms` is over the host maximum.
pub(crate) fn clamp_warnings(name: &str, manifest: &crate::Manifest) -> Vec<String> {
    manifest
        .yolop
        .hooks
        .iter()
        .filter(|h| h.timeout_ms > MAX_HOOK_TIMEOUT_MS)
        .map(|h| {
            format!(
                "extension `{name}`: hook timeout_ms {} is clamped to the host maximum of {MAX_HOOK_TIMEOUT_MS} ms",
                h.timeout_ms
            )
        })
        .collect()
}

/// What the pre hooks decided. Shown (`Display`) as `allowed`, `allowed: hook unavailable
/// (…)` or `blocked by extension `…`: …`.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "decision", rename_all = "snake_case")]
pub enum PreDecision {
    /// Go ahead, with these arguments (rewritten by the extensions listed, in order).
    /// `unavailable`: hooks that should have had a say but could not run (their server did
    /// not start, they failed or timed out) and whose `on_error` is `warn`. The call is
    /// allowed without them: show it, or refuse the call yourself.
    /// `context`: text the hooks gave for the model beside their decision (a Claude Code
    /// hook's `additionalContext`), in the order they ran: put it where the model reads it.
    Allow {
        args: Value,
        rewritten_by: Vec<String>,
        #[serde(skip_serializing_if = "Vec::is_empty")]
        unavailable: Vec<UnavailableHook>,
        #[serde(skip_serializing_if = "Vec::is_empty")]
        context: Vec<HookNote>,
    },
    /// Do not run the tool.
    Block {
        extension: String,
        reason: String,
        user_message: Option<String>,
    },
}

/// Text a hook gave for the model (unescaped: it goes to the model, and is escaped before a
/// terminal sees it), and which extension's hook gave it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct HookNote {
    pub extension: String,
    pub text: String,
}

/// What the post hooks that answer said of a call that ran ([`Dialect::post_hooks_answer`]).
///
/// [`Dialect::post_hooks_answer`]: crate::dialect::Dialect::post_hooks_answer
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub(crate) struct PostAnswers {
    /// Text for the model beside the tool's answer.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub context: Vec<HookNote>,
    /// What a hook found wrong with what the tool did (Claude Code's `decision: "block"` after
    /// a call): feedback for the model, since the call already ran.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub feedback: Vec<HookNote>,
}

/// A hook that could not run for a decision: which extension's, and why.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct UnavailableHook {
    pub extension: String,
    pub error: String,
}

impl PreDecision {
    /// Whether the tool may run.
    pub fn is_allowed(&self) -> bool {
        matches!(self, PreDecision::Allow { .. })
    }
}

impl std::fmt::Display for PreDecision {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            PreDecision::Allow { unavailable, .. } if unavailable.is_empty() => {
                f.write_str("allowed")
            }
            PreDecision::Allow { unavailable, .. } => {
                f.write_str("allowed: hook unavailable (")?;
                for (i, hook) in unavailable.iter().enumerate() {
                    let sep = if i == 0 { "" } else { "; " };
                    write!(f, "{sep}extension `{}`: {}", hook.extension, hook.error)?;
                }
                f.write_str(")")
            }
            PreDecision::Block {
                extension, reason, ..
            } => write!(
                f,
                "blocked by extension `{extension}`: {}",
                crate::text::escape(reason)
            ),
        }
    }
}

/// `*` is the only wildcard; the pattern is anchored at both ends.
pub(crate) fn glob_matches(pattern: &str, name: &str) -> bool {
    let parts: Vec<&str> = pattern.split('*').collect();
    if parts.len() == 1 {
        return pattern == name;
    }
    let (first, last) = (parts[0], parts[parts.len() - 1]);
    if !name.starts_with(first) || name.len() < first.len() + last.len() || !name.ends_with(last) {
        return false;
    }
    let mut rest = &name[first.len()..name.len() - last.len()];
    for middle in &parts[1..parts.len() - 1] {
        match rest.find(middle) {
            Some(i) => rest = &rest[i + middle.len()..],
            None => return false,
        }
    }
    true
}

impl ExtensionHost {
    /// Whether any loaded extension's post hook would see a call of `tool`: a call keeps its
    /// arguments for them only then.
    pub(crate) fn wants_post_tool_use(&self, tool: &str) -> bool {
        self.snapshot().loaded().any(|l| {
            hooks_on(&l.manifest, HookEvent::PostToolUse, tool)
                .next()
                .is_some()
        })
    }
}

/// The subscriptions of `loaded` for this event and tool: `(timeout, on_error)` each, the
/// timeout clamped to [`MAX_HOOK_TIMEOUT_MS`].
fn subscriptions(loaded: &Loaded, event: HookEvent, tool: &str) -> Vec<(Duration, OnError)> {
    subscribed(&loaded.manifest, event, tool)
}

/// What [`subscriptions`] says, for any manifest.
fn subscribed(
    manifest: &crate::Manifest,
    event: HookEvent,
    tool: &str,
) -> Vec<(Duration, OnError)> {
    hooks_on(manifest, event, tool)
        .map(|h| (hook_timeout(h.timeout_ms), h.on_error))
        .collect()
}

/// `manifest`'s hooks on `event` whose glob takes `tool`.
fn hooks_on<'a>(
    manifest: &'a crate::Manifest,
    event: HookEvent,
    tool: &'a str,
) -> impl Iterator<Item = &'a crate::manifest::HookDef> + 'a {
    manifest
        .yolop
        .hooks
        .iter()
        .filter(move |h| h.event == event && glob_matches(&h.tool_name_glob, tool))
}

/// Why one hook subscription gave no decision.
#[derive(Debug, thiserror::Error)]
enum HookFailure {
    /// Its extension's budget for this tool call was gone before it was sent.
    #[error(
        "not sent: the extension's hooks used up their budget of {} ms for this tool call",
        budget.as_millis()
    )]
    OverBudget { budget: Duration },
    /// The server could not be reached, or answered an error.
    #[error(transparent)]
    Extension(#[from] crate::supervisor::ExtensionError),
    /// No answer within `bound` (its timeout, cut to what was left of the budget).
    #[error(
        "timed out after {} ms (including start-up; the extension's hooks have {} ms per tool call in all)",
        bound.as_millis(),
        budget.as_millis()
    )]
    TimedOut { bound: Duration, budget: Duration },
}

/// Fire one subscription of `loaded` within `timeout`, cut to what is left before `deadline`
/// (the extension's budget for this tool call). Past the deadline nothing is sent.
async fn fire_within(
    loaded: &Loaded,
    firing: &HookFiring,
    timeout: Duration,
    deadline: Instant,
    budget: Duration,
) -> Result<HookAnswer, HookFailure> {
    let left = deadline.saturating_duration_since(Instant::now());
    if left.is_zero() {
        return Err(HookFailure::OverBudget { budget });
    }
    // The bound covers starting the server too (a backoff or a slow handshake). The request's
    // own timeout stays the subscription's, so a cut one ends here, naming the budget.
    let bound = timeout.min(left);
    match tokio::time::timeout(
        bound,
        loaded.ext.with_peer(|p, _| p.fire_hook(firing, timeout)),
    )
    .await
    {
        Ok(answer) => Ok(answer?),
        Err(_) => Err(HookFailure::TimedOut { bound, budget }),
    }
}

/// The health event for a hook of `extension` that could not run.
fn hook_error(
    extension: &str,
    tool: &str,
    event: HookEvent,
    blocked: bool,
    error: &dyn std::fmt::Display,
) -> HealthEvent {
    let verb = match event {
        HookEvent::PreToolUse => "pre_tool_use",
        HookEvent::PostToolUse => "post_tool_use",
    };
    let outcome = if blocked {
        "the call is blocked (on_error: block)"
    } else {
        "continuing without it"
    };
    HealthEvent::HookError {
        extension: extension.to_string(),
        tool: tool.to_string(),
        event,
        blocked,
        message: format!(
            "extension `{extension}`: {verb} hook for `{tool}` could not run ({error}); {outcome}"
        ),
    }
}

/// Whose pre hook answered, for which tool, failing how.
struct Said<'a> {
    loaded: &'a Loaded,
    tool: &'a str,
    on_error: OnError,
    /// Asked again, on the final arguments.
    again: bool,
}

/// What the pre hooks said beside their decisions, kept for the decision.
struct Kept<'a> {
    context: Vec<HookNote>,
    unavailable: Vec<UnavailableHook>,
    asks: &'a mut Asks,
}

/// Where a pre hook's question goes.
enum Asks {
    /// To the host's ask sink: the user answers, and a "no" blocks.
    User,
    /// Back to the caller, which asks its user itself: the first question (the extension
    /// that asked, and why).
    Caller(Option<(String, String)>),
}

/// What one pre hook's answer means for the call.
enum Heard {
    /// The call is decided: blocked.
    Decided(PreDecision),
    /// It runs with these arguments instead.
    Rewrite(Value),
    /// Nothing said against it.
    GoOn,
}

/// What the user answers a hook that asks before a call, to let the call go on.
pub(crate) const ALLOW: &str = "allow";

/// What the user answers a hook that asks before a call, to stop it.
pub(crate) const DENY: &str = "deny";

impl ExtensionHost {
    /// A hook of `extension` asks before `tool` runs, saying `reason`: the user is asked
    /// through the host's questions, and anything but [`ALLOW`] (a deny, a dismissal, no one
    /// to ask) blocks the call, saying which.
    async fn asked(&self, extension: &str, tool: &str, reason: &str) -> Option<PreDecision> {
        use crate::capability::{Events as _, Question};
        let question = Question {
            prompt: format!(
                "{} asks before `{}` runs: {}",
                crate::text::escape(extension),
                crate::text::escape(tool),
                crate::text::escape(reason)
            ),
            placeholder: None,
            secret: false,
            options: vec![ALLOW.into(), DENY.into()],
        };
        let answer = self.core.events.ask(extension, question).await;
        if !answer.cancelled && answer.answer == ALLOW {
            return None;
        }
        let why = match (&answer.reason, answer.cancelled) {
            (Some(why), _) => format!("it could not be asked: {why}"),
            (None, true) => "the question was dismissed".to_string(),
            (None, false) => "the user denied it".to_string(),
        };
        Some(PreDecision::Block {
            extension: extension.to_string(),
            reason: format!(
                "extension `{extension}` asked before `{tool}` runs ({reason}), and {why}"
            ),
            user_message: None,
        })
    }
}

impl ExtensionHost {
    /// The most one extension's subscriptions may hold one tool call, together.
    fn hook_budget(&self) -> Duration {
        self.core
            .opts
            .hook_budget
            .min(Duration::from_millis(MAX_HOOK_TIMEOUT_MS))
    }

    /// Fire `pre_tool_use` for `tool` on every matching subscription, in enable order. Each
    /// extension sees the previous one's rewrite; the first block wins. A tool nobody
    /// subscribed to costs no RPC.
    ///
    /// Every guard decides on the arguments that run (mutators, then validators, as the
    /// draft MCP interceptors SEP orders them): when a call was rewritten, each subscription
    /// that accepted other arguments (one before the last rewrite) is fired again with the
    /// final ones, its extension with a fresh budget. Its block, question or failure counts
    /// as in the first pass; a rewrite it asks for then is not applied.
    ///
    /// Each extension has one budget per call ([`HostOptions::hook_budget`], at most
    /// [`MAX_HOOK_TIMEOUT_MS`]) shared by its subscriptions: each gets its own timeout cut to
    /// what is left, and those past the budget are not sent and count as timed out (their
    /// `on_error` decides). The budget is per extension, not per call, so that one slow
    /// extension cannot use up the time of the extensions after it and have their hooks
    /// skipped.
    ///
    /// [`HostOptions::hook_budget`]: super::HostOptions::hook_budget
    ///
    /// A hook that cannot run is reported on the decision ([`PreDecision::Allow`]'s
    /// `unavailable`), in `warnings()` and on the health stream ([`HealthEvent::HookError`]).
    /// After [`ExtensionHost::shutdown`] every call is blocked.
    pub async fn pre_tool_use(&self, tool: &str, args: Value) -> PreDecision {
        self.pre_tool_use_with(tool, args, &mut Asks::User).await
    }

    /// [`ExtensionHost::pre_tool_use`] for a caller that asks its user itself (an agent
    /// running its own tool): a hook's question is not put to the ask sink; the first one is
    /// handed back beside the decision (which extension asked, and why). A block still wins.
    pub(crate) async fn pre_tool_use_asking_caller(
        &self,
        tool: &str,
        args: Value,
    ) -> (PreDecision, Option<(String, String)>) {
        let mut asks = Asks::Caller(None);
        let decision = self.pre_tool_use_with(tool, args, &mut asks).await;
        match asks {
            Asks::Caller(asked) => (decision, asked),
            Asks::User => (decision, None),
        }
    }

    async fn pre_tool_use_with(&self, tool: &str, args: Value, asks: &mut Asks) -> PreDecision {
        if self.core.is_shut() {
            return PreDecision::Block {
                extension: String::new(),
                reason: HostError::ShutDown.to_string(),
                user_message: None,
            };
        }
        let mut args = args;
        let mut rewritten_by = Vec::new();
        let mut kept = Kept {
            context: Vec::new(),
            unavailable: Vec::new(),
            asks,
        };
        if let Some(blocked) = self.unloaded_pre_hooks(tool, &mut kept.unavailable) {
            return blocked;
        }
        let budget = self.hook_budget();
        // Mutators, then validators: the first pass applies each rewrite in enable order,
        // each subscription seeing the arguments as rewritten so far. A subscription that
        // accepted arguments other than those that will run (it saw them, or a rewriter
        // produced them) is asked again in the second, on the final ones.
        let mut accepted: Vec<(Arc<Loaded>, Duration, OnError, Value)> = Vec::new();
        for loaded in self.loaded() {
            let subscribed = subscriptions(&loaded, HookEvent::PreToolUse, tool);
            if subscribed.is_empty() {
                continue;
            }
            let deadline = Instant::now() + budget;
            for (timeout, on_error) in subscribed {
                let firing = HookFiring {
                    event: HookEvent::PreToolUse,
                    tool: tool.into(),
                    args: args.clone(),
                    result: None,
                };
                let answer = fire_within(&loaded, &firing, timeout, deadline, budget).await;
                let said = Said {
                    loaded: &loaded,
                    tool,
                    on_error,
                    again: false,
                };
                match self.heard(said, answer, &mut kept).await {
                    Heard::Decided(decision) => return decision,
                    Heard::Rewrite(new) => {
                        args = new;
                        rewritten_by.push(loaded.name.clone());
                    }
                    Heard::GoOn => {}
                }
                accepted.push((Arc::clone(&loaded), timeout, on_error, args.clone()));
            }
        }
        // After a rewrite, the guards that allowed other arguments decide on these.
        if !rewritten_by.is_empty()
            && let Some(decision) = self
                .pre_hooks_again(tool, &args, accepted, budget, &mut kept)
                .await
        {
            return decision;
        }
        PreDecision::Allow {
            args,
            rewritten_by,
            unavailable: kept.unavailable,
            context: kept.context,
        }
    }

    /// The pre hooks of enabled packages that could not be loaded: their approved hooks still
    /// count. One set to block on error blocks; the others are named in `unavailable`.
    fn unloaded_pre_hooks(
        &self,
        tool: &str,
        unavailable: &mut Vec<UnavailableHook>,
    ) -> Option<PreDecision> {
        for gone in self.snapshot().unloaded() {
            for (_, on_error) in subscribed(&gone.manifest, HookEvent::PreToolUse, tool) {
                let err = format!("the extension could not be loaded: {}", gone.reason);
                let blocked = on_error == OnError::Block;
                self.core.report(hook_error(
                    &gone.name,
                    tool,
                    HookEvent::PreToolUse,
                    blocked,
                    &err,
                ));
                if blocked {
                    return Some(PreDecision::Block {
                        extension: gone.name.clone(),
                        reason: format!(
                            "extension `{}` hook could not run ({err}); it is set to block on error",
                            gone.name
                        ),
                        user_message: None,
                    });
                }
                unavailable.push(UnavailableHook {
                    extension: gone.name.clone(),
                    error: err,
                });
            }
        }
        None
    }

    /// The second pass of [`ExtensionHost::pre_tool_use`] after a rewrite: each subscription
    /// in `accepted` that saw arguments other than `args` is fired again on them, its
    /// extension with a fresh `budget`. The decision that ends the call, if one does.
    async fn pre_hooks_again(
        &self,
        tool: &str,
        args: &Value,
        accepted: Vec<(Arc<Loaded>, Duration, OnError, Value)>,
        budget: Duration,
        kept: &mut Kept<'_>,
    ) -> Option<PreDecision> {
        // Every guard decides on the arguments that run: here only a block, a question
        // or a failure counts. A rewrite asked for now is not applied, since the others
        // allowed these arguments (a guard refuses by blocking, never by rewriting).
        let mut deadlines: Vec<(String, Instant)> = Vec::new();
        for (loaded, timeout, on_error, seen) in accepted {
            if seen == *args {
                continue;
            }
            let deadline = match deadlines.iter().find(|(n, _)| *n == loaded.name) {
                Some((_, d)) => *d,
                None => {
                    let d = Instant::now() + budget;
                    deadlines.push((loaded.name.clone(), d));
                    d
                }
            };
            let firing = HookFiring {
                event: HookEvent::PreToolUse,
                tool: tool.into(),
                args: args.clone(),
                result: None,
            };
            let answer = fire_within(&loaded, &firing, timeout, deadline, budget).await;
            let said = Said {
                loaded: &loaded,
                tool,
                on_error,
                again: true,
            };
            if let Heard::Decided(decision) = self.heard(said, answer, kept).await {
                return Some(decision);
            }
        }
        None
    }

    /// What one pre hook's answer means for the call: a decision that ends it (a block, a
    /// refused question, a failure set to block), a rewrite, or go on. Its context and a
    /// failure set to warn are kept.
    async fn heard(
        &self,
        said: Said<'_>,
        answer: Result<HookAnswer, HookFailure>,
        kept: &mut Kept<'_>,
    ) -> Heard {
        let Said {
            loaded,
            tool,
            on_error,
            again,
        } = said;
        let answer = answer.map(|a| {
            if let Some(text) = a.context {
                let note = HookNote {
                    extension: loaded.name.clone(),
                    text,
                };
                // Asked again, a hook often says the same again.
                if !(again && kept.context.contains(&note)) {
                    kept.context.push(note);
                }
            }
            a.outcome
        });
        match answer {
            Ok(HookOutcome::Block {
                reason,
                user_message,
            }) => {
                let reason = if reason.is_empty() {
                    format!("blocked by extension `{}`", loaded.name)
                } else {
                    reason
                };
                Heard::Decided(PreDecision::Block {
                    extension: loaded.name.clone(),
                    reason,
                    user_message,
                })
            }
            Ok(HookOutcome::Rewrite(new)) => Heard::Rewrite(new),
            Ok(HookOutcome::Allow) => Heard::GoOn,
            Ok(HookOutcome::Ask { reason }) => {
                if let Asks::Caller(asked) = &mut kept.asks {
                    asked.get_or_insert_with(|| (loaded.name.clone(), reason));
                    return Heard::GoOn;
                }
                match self.asked(&loaded.name, tool, &reason).await {
                    Some(refused) => Heard::Decided(refused),
                    None => Heard::GoOn,
                }
            }
            Err(err) if on_error == OnError::Block => {
                self.core.report(hook_error(
                    &loaded.name,
                    tool,
                    HookEvent::PreToolUse,
                    true,
                    &err,
                ));
                Heard::Decided(PreDecision::Block {
                    extension: loaded.name.clone(),
                    reason: format!(
                        "extension `{}` hook failed ({err}); it is set to block on error",
                        loaded.name
                    ),
                    user_message: None,
                })
            }
            Err(err) => {
                self.core.report(hook_error(
                    &loaded.name,
                    tool,
                    HookEvent::PreToolUse,
                    false,
                    &err,
                ));
                let gone = UnavailableHook {
                    extension: loaded.name.clone(),
                    error: err.to_string(),
                };
                if !(again && kept.unavailable.contains(&gone)) {
                    kept.unavailable.push(gone);
                }
                Heard::GoOn
            }
        }
    }

    /// Fire `post_tool_use` in the background: observers only, never awaited by the caller.
    /// `result` is the tool's value, or its error message. One task per extension fires its
    /// subscriptions in turn within the same per-extension budget as pre hooks, so no task
    /// outlives it.
    pub fn post_tool_use(&self, tool: &str, args: &Value, result: Result<&ToolResult, &str>) {
        drop(self.post_hooks(tool, args, result));
    }

    /// Fire `post_tool_use` as [`ExtensionHost::post_tool_use`] does, and await the answers of
    /// the extensions whose post hooks answer ([`Dialect::post_hooks_answer`]), each within
    /// its budget; the others observe in the background, not awaited.
    ///
    /// [`Dialect::post_hooks_answer`]: crate::dialect::Dialect::post_hooks_answer
    pub(crate) async fn post_tool_use_answered(
        &self,
        tool: &str,
        args: &Value,
        result: Result<&ToolResult, &str>,
    ) -> PostAnswers {
        let mut answers = PostAnswers::default();
        for (extension, task) in self.post_hooks(tool, args, result) {
            for answer in task.await.unwrap_or_default() {
                let note = |text| HookNote {
                    extension: extension.clone(),
                    text,
                };
                if let HookOutcome::Block { reason, .. } = answer.outcome {
                    answers.feedback.push(note(reason));
                }
                if let Some(text) = answer.context {
                    answers.context.push(note(text));
                }
            }
        }
        answers
    }

    /// One task per subscribed extension; those whose post hooks answer are handed back.
    fn post_hooks(
        &self,
        tool: &str,
        args: &Value,
        result: Result<&ToolResult, &str>,
    ) -> Vec<(String, tokio::task::JoinHandle<Vec<HookAnswer>>)> {
        // The answer is read (parsed, copied) only for a hook that subscribed.
        let mut shown: Option<Value> = None;
        let budget = self.hook_budget();
        let mut answering = Vec::new();
        for loaded in self.loaded() {
            let subscribed = subscriptions(&loaded, HookEvent::PostToolUse, tool);
            if subscribed.is_empty() {
                continue;
            }
            let result = shown.get_or_insert_with(|| match result {
                Ok(v) => v.value().clone(),
                Err(message) => json!({ "error": message }),
            });
            let firing = HookFiring {
                event: HookEvent::PostToolUse,
                tool: tool.into(),
                args: args.clone(),
                result: Some(result.clone()),
            };
            let deadline = Instant::now() + budget;
            let core = Arc::clone(&self.core);
            let name = loaded.name.clone();
            let answers = loaded.ext.post_hooks_answer();
            let fired = async move {
                let mut said = Vec::new();
                for (timeout, _) in subscribed {
                    match fire_within(&loaded, &firing, timeout, deadline, budget).await {
                        Ok(answer) => said.push(answer),
                        Err(err) => {
                            let event = HookEvent::PostToolUse;
                            core.report(hook_error(&loaded.name, &firing.tool, event, false, &err));
                        }
                    }
                }
                said
            };
            // The agent session whose event this is goes with it onto the task.
            let task = match crate::capability::agent_session() {
                Some(session) => {
                    tokio::spawn(crate::capability::AGENT_SESSION.scope(session, fired))
                }
                None => tokio::spawn(fired),
            };
            if answers {
                answering.push((name, task));
            }
        }
        answering
    }
}

#[cfg(test)]
mod tests {
    use super::{MAX_HOOK_TIMEOUT_MS, glob_matches, hook_timeout};
    use std::time::Duration;

    #[test]
    fn hook_timeouts_are_clamped_to_the_host_maximum() {
        assert_eq!(hook_timeout(100), Duration::from_millis(100));
        assert_eq!(
            hook_timeout(86_400_000),
            Duration::from_millis(MAX_HOOK_TIMEOUT_MS)
        );
        assert_eq!(hook_timeout(u64::MAX), Duration::from_secs(30));
    }

    #[test]
    fn globs_use_only_star_and_are_anchored() {
        assert!(glob_matches("*", "bash"));
        assert!(glob_matches("git_*", "git_commit"));
        assert!(!glob_matches("git_*", "my_git_commit"));
        assert!(glob_matches("*_file", "read_file"));
        assert!(glob_matches("a*b*c", "a_x_b_y_c"));
        assert!(!glob_matches("a*b*c", "a_x_c"));
        assert!(glob_matches("bash", "bash"));
        assert!(!glob_matches("bash", "bash2"));
        assert!(glob_matches("ba?h", "ba?h"), "`?` is literal");
        assert!(!glob_matches("ab*ba", "aba"), "the ends must not overlap");
    }
}
