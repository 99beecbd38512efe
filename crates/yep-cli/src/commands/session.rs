//! `yep session`: a live host session over the enabled extensions, for trying and debugging
//! them. At a terminal: a prompt with line editing and history, a status line, questions asked
//! inline. With `--json` (or no terminal): one command per stdin line, one JSON object per
//! stdout line.

use super::prompt::TerminalAsk;
use crate::output::{eline, stdout_line};
use serde_json::{Value, json};
use std::io::{BufRead, IsTerminal};
use std::process::ExitCode;
use std::sync::{Arc, Mutex};
use tokio_util::sync::CancellationToken;
use yep_host::capability::{Answer, Question};
use yep_host::runtime::{AgentEvent, AskSink, DynAskSink, HookNote, TraceEvent, Verdict};
use yep_host::{
    CallOutcome, ExtensionHost, HostError, HostOptions, PreDecision, Session, UpdateSink,
};
use yep_store::Home;
use yep_store::text::{escape, escape_multiline};

#[derive(clap::Args)]
pub struct Args {
    /// One JSON object per line, even at a terminal.
    #[arg(long)]
    json: bool,
    /// Answers to `ui/ask`, used in order (JSON mode); after them questions are cancelled.
    #[arg(long = "answer", value_name = "TEXT")]
    answers: Vec<String>,
    /// Refuse tool calls whose arguments or results carry what looks like a credential (an
    /// AWS key id, a GitHub, Slack, Google, OpenAI or Anthropic token, a PEM private key).
    /// On as well when settings.toml says `[audit] block_secrets = true`.
    #[arg(long)]
    block_secrets: bool,
}

/// Scripted answers for JSON mode.
struct Scripted(Mutex<std::collections::VecDeque<String>>);

impl AskSink for Scripted {
    async fn ask(&self, _: &str, _: Question) -> Answer {
        let next = self.0.lock().unwrap_or_else(|p| p.into_inner()).pop_front();
        next.map_or_else(Answer::cancelled, Answer::answered)
    }
}

/// `help`: one verb a line, with what it does.
const HELP: &str = "\
help                          this list
tools                         the tools the session offers
run <tool> <json>             a tool as an agent runs it: pre hooks, the call, post hooks
call <tool> <json>            the tool alone, past every hook
pre <tool> <json>             only the pre hooks: their decision, no call
post <tool> <json>            only the post hooks
prompt                        the system-prompt text the extensions add
system-prompt <text>          the agent's own prompt, through the extensions' intercepts
turn [step]                   a turn starts (step 1 unless given): the turn intercepts
message <text>                the model's message, through the message intercepts
submit <text>                 a prompt submitted, through the prompt-submit hooks
stop [again]                  the stop hooks, as when the agent would stop
emit <event> [json]           an event to the extensions that observe it
panel                         the active panel, if an extension shows one
key <name> [text]             a key pressed in the panel
commands                      the slash commands the extensions offer
command <ext:name> [args]     run a slash command
status                        each extension's status line
skills                        the skills the session sees
agents                        the agent definitions plugins ship (listed, never run)
mcp                           the MCP servers, with their state
mcp status                    each MCP server's approval, state and withheld tools
mcp list-tools <server>       an MCP server's tools as listed now
reload <name>                 restart an extension
enable <name>                 enable an installed extension (in settings too)
disable <name>                disable an extension (in settings too)
quit                          end the session (Ctrl-D too)";

pub async fn run(args: Args, home: &Home) -> anyhow::Result<ExitCode> {
    let interactive =
        !args.json && std::io::stdin().is_terminal() && std::io::stdout().is_terminal();
    let terminal = interactive.then(|| Arc::new(TerminalAsk::default()));
    let ask: Arc<dyn DynAskSink> = match &terminal {
        Some(terminal) => Arc::clone(terminal) as Arc<dyn DynAskSink>,
        None => Arc::new(Scripted(Mutex::new(args.answers.into()))),
    };
    let session = Session {
        id: format!("yep-session-{}", std::process::id()),
        workspace_root: std::env::current_dir()?,
    };
    let mut opts = HostOptions {
        ask_sink: Some(ask),
        status_sink: Some(Arc::new(Submitted { json: !interactive })),
        supervisor: yep_host::SupervisorOptions::for_home(home),
        block_secrets: args.block_secrets,
        mcp_list_deadline: yep_host::runtime::mcp_list_deadline_setting(home)?,
        ..HostOptions::default()
    };
    // Tools that wait on the user at a panel run only where there is one.
    opts.supervisor.interactive_ui = interactive;
    let host = Arc::new(ExtensionHost::start(home.clone(), session, opts).await?);
    let mut s = Shell {
        host: Arc::clone(&host),
        home: home.clone(),
        terminal,
        turn: 0,
        warned: 0,
    };
    s.show_new_warnings(None);
    host.emit(lifecycle("session_start", json!({})));
    if interactive {
        interactive_loop(&mut s, home).await?;
    } else {
        let stdin = std::io::stdin();
        for line in stdin.lock().lines() {
            let line = line?;
            if line.trim().is_empty() {
                continue;
            }
            if !s.run_line(&line).await {
                break;
            }
        }
    }
    host.emit(lifecycle("session_end", json!({ "reason": "shutdown" })));
    host.flush(std::time::Duration::from_secs(5)).await;
    host.shutdown().await;
    Ok(ExitCode::SUCCESS)
}

/// Shows what an extension submits as the next prompt (this session has no model to send it
/// to): a JSON line, or a line on stderr at a terminal.
struct Submitted {
    json: bool,
}

impl yep_host::runtime::StatusSink for Submitted {
    fn status_changed(&self, _: &str, _: Option<&yep_host::runtime::StatusEntry>) {}

    fn submit(&self, extension: &str, text: &str) {
        if self.json {
            stdout_line(
                &json!({ "submitted": { "extension": extension, "text": text } }).to_string(),
            );
        } else {
            eline!("{} submits: {}", escape(extension), escape(text));
        }
    }
}

/// A lifecycle event of this session, as extensions that observe it get it.
fn lifecycle(event_type: &str, data: Value) -> TraceEvent {
    static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);
    let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    TraceEvent {
        event_type: event_type.to_string(),
        id: format!("yep-session-event-{n}"),
        ts: String::new(),
        context: Value::Null,
        data,
        metadata: Value::Null,
    }
}

/// The prompt at a terminal. Ctrl-C at the prompt clears the line, Ctrl-D (or `quit`) ends.
///
/// While rustyline's editor exists it owns SIGINT (its handler only queues the signal for the
/// next read), so an editor lives for one read only: between reads SIGINT belongs to tokio,
/// and Ctrl-C during a call cancels that call instead of being swallowed.
async fn interactive_loop(s: &mut Shell, home: &Home) -> anyhow::Result<()> {
    use rustyline::history::{FileHistory, History};
    // From here on a Ctrl-C between reads never ends the session: the running call (if any)
    // sees it, otherwise nothing does. tokio keeps the handler for the rest of the process.
    let _sigint = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::interrupt())?;
    eline!(
        "yep session: {} extension(s) enabled: {}. {HELP}",
        s.host.extensions().len(),
        s.host.extensions().join(", ")
    );
    let path = home.root.join("session_history");
    let mut history = FileHistory::new();
    let _ = history.load(&path);
    loop {
        let prompt = format!("{}yep> ", status_line(&s.host));
        // Reading the terminal blocks; keep it off the runtime's threads.
        let (back, line) = tokio::task::block_in_place(|| -> anyhow::Result<_> {
            if let Some(terminal) = &s.terminal {
                terminal.wait_until_no_question();
            }
            let mut editor: rustyline::Editor<(), FileHistory> =
                rustyline::Editor::with_history(rustyline::Config::default(), history)?;
            let line = editor.readline(&prompt);
            Ok((
                std::mem::replace(editor.history_mut(), FileHistory::new()),
                line,
            ))
        })?;
        history = back;
        let line = match line {
            Ok(line) => line,
            // Ctrl-C at the prompt: the line is dropped, the session goes on.
            Err(rustyline::error::ReadlineError::Interrupted) => continue,
            // Ctrl-D, or the terminal went away.
            Err(_) => break,
        };
        if line.trim().is_empty() {
            continue;
        }
        let _ = history.add(&line);
        if !s.run_line(&line).await {
            break;
        }
    }
    let _ = history.save(&path);
    Ok(())
}

/// One session's state and how it answers: JSON lines for a program, text for a person.
struct Shell {
    host: Arc<ExtensionHost>,
    home: Home,
    /// Where questions are asked, when a person is at a terminal.
    terminal: Option<Arc<TerminalAsk>>,
    turn: u64,
    /// How many of the host's warnings were already shown.
    warned: usize,
}

/// What a command produced.
enum Reply {
    /// A value: JSON mode prints it as it is; a person sees its one field, pretty-printed.
    Value(Value),
    /// A verb's outcome: JSON mode prints `json`, a person reads `text`.
    Said {
        json: Value,
        text: String,
    },
    Error(String),
    /// A tool answered with an error: JSON mode prints its own words (as
    /// `CallOutcome::ToolError` does), a person reads the whole sentence.
    ToolError {
        message: String,
        sentence: String,
    },
    Quit,
}

impl Shell {
    fn interactive(&self) -> bool {
        self.terminal.is_some()
    }

    /// Run one command line and show what it produced; false when the session should end.
    async fn run_line(&mut self, line: &str) -> bool {
        let reply = self.execute(line).await;
        let go_on = !matches!(reply, Reply::Quit);
        let error = match &reply {
            Reply::Error(e) | Reply::ToolError { sentence: e, .. } => Some(e.clone()),
            _ => None,
        };
        match (reply, self.interactive()) {
            (Reply::Quit, _) => {}
            (Reply::Value(v), false) => stdout_line(&v.to_string()),
            (Reply::Value(v), true) => print_human(&v),
            (Reply::Said { json, .. }, false) => stdout_line(&json.to_string()),
            (Reply::Said { text, .. }, true) => stdout_line(&text),
            (Reply::Error(e), false) => stdout_line(&json!({ "error": e }).to_string()),
            (Reply::Error(e), true) => eline!("error: {}", escape_multiline(&e)),
            (Reply::ToolError { message, .. }, false) => {
                stdout_line(&json!({ "error": message }).to_string())
            }
            (Reply::ToolError { sentence, .. }, true) => {
                eline!("error: {}", escape_multiline(&sentence))
            }
        }
        self.show_new_warnings(error.as_deref());
        go_on
    }

    /// Warnings the host recorded since the last look: a skipped or drifted package, a refused
    /// or renamed tool, a server that did not start, a hook that could not run. A person reads
    /// `warning: …`, a program gets `{"warning": …}`. The failure `shown` was just told as the
    /// command's error: it is not told again.
    fn show_new_warnings(&mut self, shown: Option<&str>) {
        let all = self.host.warnings();
        for w in all.iter().skip(self.warned) {
            if shown.is_some_and(|e| e.starts_with(w.as_str())) {
                continue;
            }
            if self.interactive() {
                eline!("warning: {}", escape_multiline(w));
            } else {
                stdout_line(&json!({ "warning": w }).to_string());
            }
        }
        self.warned = all.len();
    }

    async fn execute(&mut self, line: &str) -> Reply {
        let line = line.trim();
        let (verb, rest) = line
            .split_once(' ')
            .map_or((line, ""), |(v, r)| (v, r.trim()));
        let (first, tail) = rest
            .split_once(' ')
            .map_or((rest, ""), |(a, b)| (a, b.trim()));
        match verb {
            "quit" | "exit" => Reply::Quit,
            "help" => Reply::Said {
                json: json!({ "help": HELP }),
                text: HELP.to_string(),
            },
            "tools" => Reply::Value(json!({ "tools": self.host.tools() })),
            "call" | "run" | "pre" | "post" => self.tool_verb(verb, first, tail).await,
            "prompt" | "system-prompt" | "turn" | "message" | "submit" | "stop" | "emit" => {
                self.turn_verb(verb, rest, first, tail).await
            }
            "panel" | "key" | "commands" | "command" => self.ui_verb(verb, first, tail).await,
            "status" | "skills" | "agents" | "mcp" => self.inspect_verb(verb, first, tail).await,
            "reload" | "enable" | "disable" => self.package_verb(verb, first).await,
            other => unknown(other),
        }
    }

    /// `call`, `run`, `pre` and `post`: a tool called, run with its hooks, or its hooks fired.
    async fn tool_verb(&self, verb: &str, first: &str, tail: &str) -> Reply {
        let host = &self.host;
        match verb {
            "call" => {
                let args = match parse_json(tail) {
                    Ok(a) => a,
                    Err(e) => return Reply::Error(e),
                };
                self.call(first, args).await
            }
            "run" => {
                let args = match parse_json(tail) {
                    Ok(a) => a,
                    Err(e) => return Reply::Error(e),
                };
                self.run(first, args).await
            }
            "pre" => {
                let args = match parse_json(tail) {
                    Ok(a) => a,
                    Err(e) => return Reply::Error(e),
                };
                let tool = self.tool_name(first);
                Reply::Value(match host.pre_tool_use(&tool, args.clone()).await {
                    PreDecision::Allow {
                        args: after,
                        rewritten_by,
                        unavailable,
                        context,
                    } => {
                        let modified = (!rewritten_by.is_empty()).then_some(after);
                        let mut decision = json!({ "decision": "allow", "reason": null, "modified_args": modified, "rewritten_by": rewritten_by, "unavailable_hooks": unavailable });
                        if !context.is_empty() {
                            decision["context"] = json!(context);
                        }
                        decision
                    }
                    PreDecision::Block {
                        extension,
                        reason,
                        user_message,
                    } => {
                        json!({ "decision": "block", "reason": reason, "user_message": user_message, "extension": extension })
                    }
                })
            }
            "post" => {
                let args = match parse_json(tail) {
                    Ok(a) => a,
                    Err(e) => return Reply::Error(e),
                };
                // As `yep hook` does: the answers of hooks that answer (a plugin's warning)
                // are shown; the others observe.
                let after = host
                    .agent_event(AgentEvent::PostTool {
                        tool: self.tool_name(first),
                        args,
                        id: None,
                        result: Value::Null,
                        error: None,
                    })
                    .await;
                let decided = json!({ "decision": "allow", "reason": null, "modified_args": null });
                with_notes(Reply::Value(decided), &after.context, &after.feedback)
            }
            other => unknown(other),
        }
    }

    /// The agent's turn as the host sees it: `prompt`, `system-prompt`, `turn`, `message`,
    /// `submit`, `stop` and `emit`.
    async fn turn_verb(&mut self, verb: &str, rest: &str, first: &str, tail: &str) -> Reply {
        match verb {
            "prompt" => {
                self.turn += 1;
                let prompt = self.host.prompt(self.turn).await;
                Reply::Said {
                    json: json!({ "prompt": prompt }),
                    text: if prompt.is_empty() {
                        "(no prompt text this turn)".to_string()
                    } else {
                        prompt
                    },
                }
            }
            "system-prompt" => {
                let prompt = self.host.system_prompt(rest, "", "").await;
                Reply::Said {
                    json: json!({ "system_prompt": prompt }),
                    text: prompt,
                }
            }
            "turn" => {
                let step = match first {
                    "" => 1,
                    n => match n.parse::<u64>() {
                        Ok(n) => n,
                        Err(_) => return Reply::Error(format!("`{n}` is not a step number")),
                    },
                };
                Reply::Value(
                    serde_json::to_value(self.host.turn_start(step).await).unwrap_or_default(),
                )
            }
            "message" => Reply::Value(
                serde_json::to_value(self.host.assistant_message(rest).await).unwrap_or_default(),
            ),
            "submit" => Reply::Value(
                serde_json::to_value(self.host.prompt_submit(rest).await).unwrap_or_default(),
            ),
            "stop" => Reply::Value(
                serde_json::to_value(self.host.stop(first == "again").await).unwrap_or_default(),
            ),
            "emit" => {
                let data = match tail {
                    "" => json!({}),
                    json => match parse_json(json) {
                        Ok(data) => data,
                        Err(e) => return Reply::Error(e),
                    },
                };
                self.host.emit(lifecycle(first, data));
                done(format!("emitted {first}"))
            }
            other => unknown(other),
        }
    }

    /// `panel`, `key`, `commands` and `command`: what a user sees and types.
    async fn ui_verb(&self, verb: &str, first: &str, tail: &str) -> Reply {
        let host = &self.host;
        match verb {
            "panel" => Reply::Value(json!({ "panel": host.panel() })),
            "key" => match host.panel_key(first, Some(tail)).await {
                Ok(panel) => Reply::Value(json!({ "panel": panel })),
                Err(e) => Reply::Error(self.session_error(&e)),
            },
            "commands" => Reply::Value(json!({ "commands": host.commands() })),
            "command" => match host.execute_command(first, tail).await {
                Ok(r) => Reply::Said {
                    json: json!({ "success": r.success, "message": r.message }),
                    text: if r.success {
                        r.message
                    } else {
                        format!("`{first}` failed: {}", r.message)
                    },
                },
                Err(e) => Reply::Error(self.session_error(&e)),
            },
            other => unknown(other),
        }
    }

    /// `status`, `skills`, `agents` and `mcp`: what the host holds.
    async fn inspect_verb(&self, verb: &str, first: &str, tail: &str) -> Reply {
        let host = &self.host;
        match verb {
            "status" => Reply::Value(
                json!({ "status": host.status(), "trace_dropped": host.trace_dropped() }),
            ),
            // Skills are files of the packages: read off the runtime's threads.
            "skills" => {
                Reply::Value(json!({ "skills": tokio::task::block_in_place(|| host.skills()) }))
            }
            "agents" => {
                Reply::Value(json!({ "agents": tokio::task::block_in_place(|| host.agents()) }))
            }
            "mcp" if first == "list-tools" => match host.mcp_list_tools(tail).await {
                Ok(tools) => {
                    let names: Vec<_> = tools.into_iter().map(|t| t.name).collect();
                    Reply::Value(json!({ "mcp_tools": names }))
                }
                Err(e) => Reply::Error(format!("{e:#}")),
            },
            "mcp" if first == "status" => Reply::Value(json!({ "mcp_status": host.mcp_status() })),
            "mcp" => Reply::Value(json!({ "mcp": host.mcp_servers_unexpanded() })),
            other => unknown(other),
        }
    }

    /// `reload`, `enable` and `disable`: a package restarted, turned on or off.
    async fn package_verb(&self, verb: &str, first: &str) -> Reply {
        let host = &self.host;
        match verb {
            "reload" => match host.reload(first).await {
                Ok(()) => done(format!("reloaded {first}")),
                Err(e) => Reply::Error(self.session_error(&e)),
            },
            "enable" => match host.activate(first).await {
                Ok(missing) if missing.is_empty() => done(format!("enabled {first}")),
                Ok(missing) => Reply::Said {
                    text: format!(
                        "enabled {first}; still to set up: {}",
                        self.setup_commands(first, &missing)
                    ),
                    json: json!({ "ok": true, "setup_incomplete": missing }),
                },
                Err(e) => Reply::Error(self.session_error(&e)),
            },
            "disable" => match host.deactivate(first).await {
                Ok(()) => done(format!("disabled {first}")),
                Err(e) => Reply::Error(self.session_error(&e)),
            },
            other => unknown(other),
        }
    }

    /// Where a call's progress goes: a line each, at a terminal or as JSON.
    fn progress_sink(&self) -> UpdateSink {
        if self.interactive() {
            Arc::new(|p: &yep_host::capability::Progress| eline!("  … {}", escape(&p.message)))
        } else {
            Arc::new(|p: &yep_host::capability::Progress| {
                stdout_line(&json!({ "update": p.message }).to_string())
            })
        }
    }

    /// Await `call`; at a terminal, Ctrl-C meanwhile cancels `cancel` (and so the call, on
    /// the wire) and still waits for its end.
    async fn interruptible<F: std::future::IntoFuture>(
        &self,
        call: F,
        cancel: &CancellationToken,
    ) -> F::Output {
        let call = call.into_future();
        if !self.interactive() {
            return call.await;
        }
        tokio::pin!(call);
        tokio::select! {
            r = &mut call => r,
            _ = tokio::signal::ctrl_c() => {
                // The terminal echoed `^C` mid-line.
                eline!("");
                cancel.cancel();
                // A question it asked is not waiting at the terminal any more.
                if let Some(terminal) = &self.terminal {
                    terminal.abandon();
                }
                call.await
            }
        }
    }

    /// Call a tool directly, without the hooks; at a terminal, Ctrl-C while it runs cancels
    /// it on the wire.
    async fn call(&self, tool: &str, args: Value) -> Reply {
        let cancel = CancellationToken::new();
        let call =
            self.host
                .call_tool(tool, args, Some(self.progress_sink()), Some(cancel.clone()));
        match self.interruptible(call, &cancel).await {
            Ok(v) => Reply::Value(json!({ "result": v })),
            Err(e) if is_cancelled(&e) => Reply::Said {
                json: json!({ "error": e.to_string() }),
                text: format!("cancelled `{tool}`"),
            },
            Err(HostError::Extension(ext)) if ext.remote().is_some() => Reply::ToolError {
                message: ext.remote().map(|r| r.message.clone()).unwrap_or_default(),
                sentence: ext.to_string(),
            },
            Err(e) => Reply::Error(self.session_error(&e)),
        }
    }

    /// Run a tool as an agent does: the pre hooks (a block ends it there, a rewrite is what
    /// runs), the call, then the post hooks.
    async fn run(&self, tool: &str, args: Value) -> Reply {
        if !self.serves(tool) && yep_serve::agents::Agent::Claude.owns(tool) {
            return self.run_agents_own(tool, args).await;
        }
        let cancel = CancellationToken::new();
        let sink = self.progress_sink();
        let call = self
            .host
            .run_tool(tool, args)
            .on_progress(move |p| sink(p))
            .cancel_on(cancel.clone())
            .report();
        let report = self.interruptible(call, &cancel).await;
        let reply = self.ran(tool, report.outcome);
        with_notes(reply, &report.context, &report.feedback)
    }

    /// Whether `tool` is one of the tools this session's extensions and MCP servers serve.
    fn serves(&self, tool: &str) -> bool {
        self.host.tools().iter().any(|t| t.name == tool)
    }

    /// yep's name for `tool`: a tool it serves keeps its name; the agent's own tools are
    /// named as `yep hook claude` names them (`Write` is `write`, `Bash` is `bash`), so the
    /// hooks see here what they see in the agent.
    fn tool_name(&self, tool: &str) -> String {
        match self.serves(tool) {
            true => tool.to_string(),
            false => yep_serve::agents::Agent::Claude.tool(tool),
        }
    }

    /// `run` of one of the agent's own tools (`Write`, `Bash`) that no extension serves. Its hooks fire
    /// exactly as `yep hook` fires them for an agent: the pre hooks decide, then (the agent
    /// would run it here) the post hooks answer with what they found.
    async fn run_agents_own(&self, tool: &str, args: Value) -> Reply {
        let name = self.tool_name(tool);
        let before = self
            .host
            .agent_event(AgentEvent::PreTool {
                tool: name.clone(),
                args: args.clone(),
                id: None,
            })
            .await;
        let by = before.by.clone().unwrap_or_default();
        let reason = before.reason.clone().unwrap_or_default();
        let reply = match before.verdict {
            Verdict::Block => {
                return with_notes(
                    self.ran(
                        tool,
                        CallOutcome::Blocked {
                            extension: by,
                            reason,
                            user_message: before.user_message.clone(),
                        },
                    ),
                    &before.context,
                    &[],
                );
            }
            Verdict::Ask => {
                return Reply::Said {
                    json: json!({ "asks": {"extension": by, "reason": reason} }),
                    text: format!(
                        "`{}` asks before `{}` runs: {}",
                        escape(&by),
                        escape(tool),
                        escape(&reason)
                    ),
                };
            }
            Verdict::Go => {
                let args = before.args.clone().unwrap_or(args);
                let after = self
                    .host
                    .agent_event(AgentEvent::PostTool {
                        tool: name,
                        args: args.clone(),
                        id: None,
                        result: Value::Null,
                        error: None,
                    })
                    .await;
                let mut context = before.context;
                context.extend(after.context);
                let said = Reply::Said {
                    json: json!({ "agent_runs": {"tool": tool, "args": args} }),
                    text: format!(
                        "the agent's own `{}`: the hooks let it run with {}",
                        escape(tool),
                        escape(&args.to_string())
                    ),
                };
                (said, context, after.feedback)
            }
        };
        with_notes(reply.0, &reply.1, &reply.2)
    }

    /// A `run`'s outcome as this session says it.
    fn ran(&self, tool: &str, outcome: CallOutcome) -> Reply {
        match outcome {
            CallOutcome::Ok(v) => Reply::Value(json!({ "result": v })),
            CallOutcome::Blocked {
                extension,
                reason,
                user_message,
            } => Reply::Said {
                json: json!({ "blocked": {"extension": extension, "reason": reason, "user_message": user_message} }),
                text: match extension.is_empty() {
                    // yep's own refusal (`--block-secrets`) says so itself.
                    true => escape(&reason).into_owned(),
                    false => format!(
                        "blocked by `{}`: {}",
                        escape(&extension),
                        escape(user_message.as_deref().unwrap_or(&reason))
                    ),
                },
            },
            CallOutcome::ToolError { extension, message } => Reply::ToolError {
                sentence: format!("`{extension}` answered `{tool}` with an error: {message}"),
                message,
            },
            CallOutcome::Cancelled => Reply::Said {
                json: json!({ "error": "cancelled" }),
                text: format!("cancelled `{tool}`"),
            },
            CallOutcome::TimedOut { after } => {
                Reply::Error(format!("`{tool}` timed out after {} ms", after.as_millis()))
            }
            CallOutcome::Failed { error, .. } => Reply::Error(self.session_error(&error)),
            other => Reply::Value(json!({ "error": other.for_model() })),
        }
    }

    /// A host error as this session says it: where the host points an embedder at its API,
    /// the session points at its own commands.
    fn session_error(&self, e: &HostError) -> String {
        match e {
            HostError::UnknownTool(name) => {
                format!("no tool named `{name}`; type `tools` to list them")
            }
            HostError::UnknownCommand(name) => format!(
                "no command named `{name}` (commands are `<extension>:<name>`, a trusted workspace's own `<name>`); type `commands` to list them"
            ),
            HostError::NotLoaded(name)
                if self
                    .home
                    .lockfile()
                    .is_ok_and(|lock| lock.get(name).is_some()) =>
            {
                format!(
                    "extension `{name}` is not enabled in this session; `enable {name}` enables it"
                )
            }
            HostError::NotLoaded(name) => self.home.not_installed(name).to_string(),
            other => other.to_string(),
        }
    }

    /// Each missing field with the command that sets it.
    fn setup_commands(&self, name: &str, missing: &[String]) -> String {
        let manifest = self.home.installed_manifest(name).ok();
        let secret = |field: &str| {
            manifest.as_ref().is_some_and(|m| {
                yep_store::summary::config_fields(m)
                    .iter()
                    .any(|f| f.name == field && f.secret)
            })
        };
        missing
            .iter()
            .map(|field| {
                if secret(field) {
                    format!("{field} (`yep secret set {name} {field}`)")
                } else {
                    format!("{field} (`yep config set {name} {field} <value>`)")
                }
            })
            .collect::<Vec<_>>()
            .join(", ")
    }
}

/// The reply to a verb the session does not know.
fn unknown(verb: &str) -> Reply {
    Reply::Error(format!(
        "unknown command `{verb}`; type `help` to list the commands"
    ))
}

fn done(text: String) -> Reply {
    Reply::Said {
        json: json!({ "ok": true }),
        text,
    }
}

fn is_cancelled(e: &HostError) -> bool {
    matches!(e, HostError::Extension(e) if e.is_cancelled())
}

fn status_line(host: &ExtensionHost) -> String {
    let status = host.status();
    if status.is_empty() {
        return String::new();
    }
    let parts: Vec<String> = status
        .iter()
        .map(|(ext, s)| format!("{ext}: {}", escape(&s.text)))
        .collect();
    format!("[{}] ", parts.join(" | "))
}

fn print_human(v: &Value) {
    match v {
        Value::Object(map) if map.len() == 1 => {
            let (_, inner) = map.iter().next().expect("one entry");
            stdout_line(&serde_json::to_string_pretty(inner).unwrap_or_default());
        }
        other => stdout_line(&serde_json::to_string_pretty(other).unwrap_or_default()),
    }
}

fn parse_json(text: &str) -> Result<Value, String> {
    if text.trim().is_empty() {
        return Ok(json!({}));
    }
    serde_json::from_str(text).map_err(|e| format!("arguments are not JSON: {e}"))
}

/// `reply` with what the hooks said for the model beside it (`context`) and what post hooks
/// found wrong with what the tool did (`feedback`): fields of the JSON, and lines a person
/// reads after the outcome, escaped.
fn with_notes(reply: Reply, context: &[HookNote], feedback: &[HookNote]) -> Reply {
    if context.is_empty() && feedback.is_empty() {
        return reply;
    }
    let (mut json, mut text) = match reply {
        Reply::Value(value) => {
            let text = value
                .as_object()
                .and_then(|o| o.values().next())
                .map(|v| serde_json::to_string_pretty(v).unwrap_or_default())
                .unwrap_or_default();
            (value, text)
        }
        Reply::Said { json, text } => (json, text),
        Reply::ToolError { message, sentence } => (json!({ "error": message }), sentence),
        other => return other,
    };
    let lines = |label: &str, notes: &[HookNote]| {
        notes
            .iter()
            .map(|n| {
                format!(
                    "\n{label} from `{}`: {}",
                    escape(&n.extension),
                    escape_multiline(&n.text)
                )
            })
            .collect::<String>()
    };
    text.push_str(&lines("context", context));
    text.push_str(&lines("feedback", feedback));
    if !context.is_empty() {
        json["context"] = json!(context);
    }
    if !feedback.is_empty() {
        json["feedback"] = json!(feedback);
    }
    Reply::Said { json, text }
}
