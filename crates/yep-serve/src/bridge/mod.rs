//! The host as one MCP server (`yep mcp serve`): every agent that speaks MCP gets the enabled
//! extensions' and MCP servers' tools, under the same hooks and pins as an embedding agent.
//!
//! - `initialize`: the extensions' prompt text as `instructions`; nothing more is started.
//! - `tools/list` is the host's table; `tools/call` is [`ExtensionHost::run_tool`]: the pre
//!   hooks (a block is `isError` with the reason, a rewrite is what runs), the call, the post
//!   hooks. Progress becomes `notifications/progress`; `notifications/cancelled` cancels it.
//! - Slash commands are prompts (`prompts/get` runs one); skills are served as MCP's skills
//!   extension serves them (`skills`: `skills/list`, `skills/get`, their files as read-only
//!   resources); status changes go out as `notifications/message`.
//! - A question from an extension becomes `elicitation/create` to a client that declared
//!   elicitation; a secret one never does (the user is pointed at `yep secret set`).
//! - A table change (an extension enabled elsewhere, an MCP server's new list) is
//!   `notifications/tools/list_changed` and `prompts/list_changed` to every client.

mod clients;
mod http;
mod rounds;
mod skills;

pub use clients::{
    AMBIGUOUS_CALLER, AskClients, Clients, NO_CALLER, NO_ELICITATION, NO_ELICITATION_CALLER,
    SECRET_REFUSED, StatusToClients,
};
pub use http::{
    Access, DEFAULT_HEADER_TIMEOUT, DEFAULT_MAX_SESSIONS, DEFAULT_SESSION_IDLE, HttpLimits,
    bearer_token, default_max_connections, serve_http, serve_http_with, token_path,
};

use clients::ClientId;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, GetPromptRequestParams,
    GetPromptResponse, ListPromptsResult, ListResourcesResult, ListToolsResult,
    PaginatedRequestParams, ProgressNotificationParam, ReadResourceRequestParams,
    ReadResourceResponse, ServerCapabilities,
};
use rmcp::service::{RequestContext, RoleServer};
use rmcp::{ErrorData as McpError, ServerHandler};
use serde_json::{Value, json};
use std::sync::{Arc, Mutex};
use yep_host::capability::ToolResult;
use yep_host::runtime::{CallOutcome, ExtensionHost, SEARCH_TOOLS, ToolDefinition};

/// The scheme of a skill's resource URIs: `skill://<extension>/<name>/SKILL.md` and the
/// skill's other files under `skill://<extension>/<name>/` (SEP-2640).
pub const SKILL_SCHEME: &str = "skill://";
pub use skills::INDEX_URI;

/// One client's view of the host. Each MCP session gets its own ([`Bridge::for_client`]),
/// so the host can tell whose call a question belongs to.
#[derive(Clone)]
pub struct Bridge {
    host: ExtensionHost,
    clients: Clients,
    /// The client this bridge serves, among `clients`.
    client: ClientId,
    /// The extensions' prompt text, as of the last table change ([`forward_changes`]).
    instructions: Arc<Mutex<String>>,
    /// List only the always-loaded tools and `search_tools`.
    deferred: bool,
    /// 2026-07-28 clients' calls waiting for the answer to a question.
    rounds: rounds::Rounds,
}

impl Bridge {
    /// A bridge over `host` for `clients`, with the extensions' prompt text as it is now.
    pub async fn new(host: ExtensionHost, clients: Clients, deferred: bool) -> Self {
        let instructions = host.prompt(0).await;
        Bridge {
            host,
            clients,
            client: clients::next_client(),
            instructions: Arc::new(Mutex::new(instructions)),
            deferred,
            rounds: rounds::Rounds::default(),
        }
    }

    /// This bridge for another client (a new MCP session), sharing its host and clients.
    pub fn for_client(&self) -> Self {
        Bridge {
            client: clients::next_client(),
            ..self.clone()
        }
    }

    /// This bridge for another client, listing tools deferred or not as that client asked.
    pub fn for_session(&self, deferred: bool) -> Self {
        Bridge {
            deferred,
            ..self.for_client()
        }
    }

    fn instructions(&self) -> String {
        self.instructions
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    fn listed(&self) -> Vec<ToolDefinition> {
        let tools = self.host.tools();
        if !self.deferred {
            return tools;
        }
        let mut shown: Vec<ToolDefinition> = tools.into_iter().filter(|t| !t.deferred).collect();
        shown.push(ToolDefinition::search_tools());
        shown
    }
}

/// A new span id for one call through the bridge.
fn trace_span() -> String {
    static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);
    let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    format!("yep-mcp-serve-{}-{n}", std::process::id())
}

/// `value` as the rmcp type it deserializes into, or an internal error naming `what`. A
/// result says it is whole (`resultType: complete`), as revision 2026-07-28 requires; rmcp
/// takes that out again for a client on an earlier revision.
fn from_json<T: serde::de::DeserializeOwned>(what: &str, mut value: Value) -> Result<T, McpError> {
    if let Value::Object(fields) = &mut value {
        fields
            .entry("resultType")
            .or_insert_with(|| Value::String("complete".into()));
    }
    serde_json::from_value(value)
        .map_err(|e| McpError::internal_error(format!("{what}: {e}"), None))
}

/// A tool as MCP lists it.
fn tool_json(t: &ToolDefinition) -> Value {
    let mut tool = json!({
        "name": t.name,
        "description": t.description,
        "inputSchema": t.parameters(),
    });
    if let Some(schema) = t.output_schema.as_ref().filter(|s| s.is_object()) {
        tool["outputSchema"] = schema.clone();
    }
    if let Some(hints) = t.annotations.as_ref().filter(|a| a.is_object()) {
        tool["annotations"] = hints.clone();
    }
    tool
}

/// A tool's answer as an MCP result: one shaped as an MCP result (an MCP server's, a zot
/// extension's content blocks) passes through as it came, its fields spelled as MCP spells
/// them; any other is its JSON as text (the text the server wrote, for a YEP server: no
/// serializing), and `structuredContent` when it is an object.
fn result_json(result: ToolResult) -> Value {
    let written = (!result.is_parsed()).then(|| result.json().into_owned());
    let mut value = result.into_value();
    if value.get("content").is_some_and(Value::is_array) {
        // The host spells a content result's fields as the session shows them (a zot
        // extension's `structured_content`); an MCP client reads only its own spelling.
        if let Value::Object(fields) = &mut value {
            for (host, mcp) in [
                ("structured_content", "structuredContent"),
                ("is_error", "isError"),
            ] {
                if let Some(v) = fields.remove(host) {
                    fields.entry(mcp).or_insert(v);
                }
            }
            // And a block's (a zot image's `mime_type`).
            let blocks = fields.get_mut("content").and_then(Value::as_array_mut);
            for block in blocks.into_iter().flatten() {
                if let Some(block) = block.as_object_mut()
                    && let Some(v) = block.remove("mime_type")
                {
                    block.entry("mimeType").or_insert(v);
                }
            }
        }
        return value;
    }
    match value {
        Value::String(s) => text_result(s, None),
        Value::Object(_) => {
            let text = written.unwrap_or_else(|| value.to_string());
            text_result(text, Some(value))
        }
        other => text_result(written.unwrap_or_else(|| other.to_string()), None),
    }
}

/// An MCP result of one text block, with `structuredContent` when there is one.
fn text_result(text: String, structured: Option<Value>) -> Value {
    let mut result = json!({"content": [{"type": "text", "text": text}], "isError": false});
    if let Some(structured) = structured {
        result["structuredContent"] = structured;
    }
    result
}

/// An error result the model reads.
fn error_result(message: &str) -> CallToolResult {
    CallToolResult::error(vec![rmcp::model::ContentBlock::text(message)])
}

impl Bridge {
    /// One call through the host, to its result: progress to `peer` under `progress`, a
    /// cancel of `ct` cancels it, and its questions go to `questions` when they ride its
    /// answer (a 2026-07-28 client's).
    async fn run(
        self,
        request: CallToolRequestParams,
        ct: tokio_util::sync::CancellationToken,
        peer: rmcp::service::Peer<RoleServer>,
        progress: Option<rmcp::model::ProgressToken>,
        questions: Option<clients::Questions>,
    ) -> Result<CallToolResult, McpError> {
        let args = Value::Object(request.arguments.unwrap_or_default());
        // The meta-tool is the bridge's only when it lists it (the host then keeps the name
        // from every extension: [`SEARCH_TOOLS`] is a builtin under `--deferred`).
        if self.deferred && request.name == SEARCH_TOOLS {
            let found = self.host.dispatch_search_tools(&args);
            let result: CallToolResult = from_json("tools/call", result_json(found.into()))?;
            return Ok(result);
        }
        // A question the tool's extension asks meanwhile goes to this client.
        let extension = self
            .host
            .snapshot()
            .tools()
            .iter()
            .find(|t| t.name == request.name)
            .map(|t| t.extension.clone())
            .unwrap_or_default();
        let _in_flight = self.clients.calling(extension, self.client, questions);
        // Trace extensions see the agent's tool use through the bridge (the runtime tells
        // them; the span is named after the bridge).
        let mut call = self
            .host
            .run_tool(&request.name, args)
            .cancel_on(ct)
            .trace_span(trace_span());
        // Progress goes out in order, off the tool's thread, through one bounded forwarding
        // task per call; the result waits until it has sent all of it, so a client that
        // drops progress arriving after the result (the MCP SDKs do) loses none.
        let mut forwarding = None;
        if let Some(token) = progress {
            let (tx, mut rx) = tokio::sync::mpsc::channel::<ProgressNotificationParam>(
                yep_host::runtime::PROGRESS_BUFFER,
            );
            let task = tokio::spawn(async move {
                while let Some(p) = rx.recv().await {
                    let _ = peer.notify_progress(p).await;
                }
            });
            let sender = Arc::new(Mutex::new(Some(tx)));
            forwarding = Some((task, Arc::clone(&sender)));
            let count = std::sync::atomic::AtomicU64::new(0);
            call = call.on_progress(move |p| {
                let n = count.fetch_add(1, std::sync::atomic::Ordering::Relaxed) + 1;
                let mut params = json!({
                    "progressToken": token,
                    "progress": p.progress.unwrap_or(n as f64),
                });
                if let Some(total) = p.total {
                    params["total"] = json!(total);
                }
                if !p.message.is_empty() {
                    params["message"] = json!(p.message);
                }
                let Ok(params) = serde_json::from_value(params) else {
                    return;
                };
                if let Some(tx) = sender.lock().unwrap_or_else(|e| e.into_inner()).as_ref() {
                    // A client slower than the server's progress misses some, never the result.
                    let _ = tx.try_send(params);
                }
            });
        }
        let report = call.report().await;
        let outcome = report.outcome;
        if let Some((task, sender)) = forwarding {
            sender.lock().unwrap_or_else(|e| e.into_inner()).take();
            let _ = task.await;
        }
        let mut result = self.result_of(outcome)?;
        // What hooks said for the model beside the outcome (a Claude Code hook's
        // `additionalContext`, a post hook's feedback) is more text for it.
        let notes = report.context.iter().map(|n| ("context", n));
        for (what, note) in notes.chain(report.feedback.iter().map(|n| ("feedback", n))) {
            result.content.push(rmcp::model::ContentBlock::text(format!(
                "[{what} from extension `{}`] {}",
                note.extension, note.text
            )));
        }
        Ok(result)
    }

    /// A call's outcome as the MCP result the model reads.
    fn result_of(&self, outcome: CallOutcome) -> Result<CallToolResult, McpError> {
        Ok(match outcome {
            CallOutcome::Ok(value) => from_json("tools/call", result_json(value))?,
            CallOutcome::ToolError { message, .. } => error_result(&message),
            // yep's own refusal (`--block-secrets`) says so itself.
            CallOutcome::Blocked {
                extension, reason, ..
            } if extension.is_empty() => error_result(&reason),
            CallOutcome::Blocked {
                extension, reason, ..
            } => error_result(&format!("blocked by extension `{extension}`: {reason}")),
            CallOutcome::Cancelled => error_result("cancelled"),
            CallOutcome::TimedOut { after } => {
                error_result(&format!("timed out after {} ms", after.as_millis()))
            }
            // Said in MCP's terms: the host's API names mean nothing to this client.
            CallOutcome::Failed {
                error: yep_host::runtime::HostError::UnknownTool(name),
                ..
            } => error_result(&format!(
                "no tool named `{}`; {}",
                yep_host::text::escape(&name),
                if self.deferred {
                    "tools/list lists the always-loaded ones, and search_tools finds the rest"
                } else {
                    "tools/list lists them"
                }
            )),
            CallOutcome::Failed { error, .. } => error_result(&yep_host::error::report(&error)),
            // An ending a newer host knows and this bridge does not.
            _ => error_result("the call did not complete"),
        })
    }
}

impl ServerHandler for Bridge {
    #[allow(deprecated)] // logging: see `StatusToClients`
    fn get_info(&self) -> rmcp::model::ServerConfig {
        let capabilities = ServerCapabilities::builder()
            .enable_tools()
            .enable_tool_list_changed()
            .enable_prompts()
            .enable_prompts_list_changed()
            .enable_resources()
            .enable_logging()
            .build();
        let mut capabilities = capabilities;
        // Skills (SEP-2640), at every revision, with their directories readable.
        capabilities.extensions = Some(
            [(
                rmcp::model::SKILLS_EXTENSION_ID.to_string(),
                serde_json::Map::from_iter([("directoryRead".to_string(), Value::Bool(true))]),
            )]
            .into(),
        );
        // `completion/complete` is answered (rmcp's default, once advertised) with no
        // suggestions: a command's argument is free text.
        capabilities.completions = Some(rmcp::model::JsonObject::new());
        // Said so a yep host meeting this server as one of its own knows it and skips it.
        capabilities.experimental = Some(
            [(
                yep_host::dialect::mcp::SERVE_MARKER.to_string(),
                serde_json::Map::from_iter([(
                    "home".to_string(),
                    Value::String(yep_host::dialect::mcp::home_id(self.host.home())),
                )]),
            )]
            .into(),
        );
        let mut info = rmcp::model::ServerConfig::new(capabilities);
        info.server_info = rmcp::model::Implementation::new("yep", env!("CARGO_PKG_VERSION"));
        let instructions = self.instructions();
        if !instructions.is_empty() {
            info.instructions = Some(instructions);
        }
        info
    }

    /// `logging/setLevel`: what it advertises (`logging`), it answers. Statuses go out at
    /// `info`; a client that asks for less hears none until it asks for `info` again.
    #[allow(deprecated)] // logging: see `StatusToClients`
    async fn set_level(
        &self,
        request: rmcp::model::SetLevelRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<(), McpError> {
        self.clients.set_level(self.client, request.level);
        Ok(())
    }

    async fn on_initialized(&self, context: rmcp::service::NotificationContext<RoleServer>) {
        self.clients.add(self.client, context.peer);
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, McpError> {
        let tools: Vec<Value> = self.listed().iter().map(tool_json).collect();
        from_json("tools/list", json!({ "tools": tools }))
    }

    /// Before 2026-07-28 a call is answered when it ends. A 2026-07-28 client's call runs in
    /// a task of its own, so that a question it asks can go out in its answer and the call
    /// wait for the client to come back with the reply (`rounds`).
    async fn call_tool(
        &self,
        mut request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, McpError> {
        let modern = context
            .protocol_version()
            .is_some_and(|v| !v.has_initialize());
        let (ct, peer) = (context.ct.clone(), context.peer.clone());
        let progress = context.meta.get_progress_token();
        if !modern {
            let result = self.clone().run(request, ct, peer, progress, None).await?;
            return Ok(CallToolResponse::Complete(result));
        }
        let running = match request.request_state.take() {
            Some(state) => self
                .rounds
                .resume(&state, request.input_responses.as_ref())
                .ok_or_else(|| McpError::invalid_params(rounds::UNKNOWN_STATE, None))?,
            None => {
                let asks = context
                    .client_capabilities()
                    .is_some_and(|c| c.elicitation.is_some());
                let (sender, questions) = tokio::sync::mpsc::channel(1);
                let cancel = tokio_util::sync::CancellationToken::new();
                let run = self.clone().run(
                    request,
                    cancel.clone(),
                    peer,
                    progress,
                    asks.then_some(sender),
                );
                let task =
                    tokio::spawn(
                        async move { run.await.unwrap_or_else(|e| error_result(&e.message)) },
                    );
                rounds::Running {
                    task,
                    questions,
                    cancel,
                }
            }
        };
        Ok(self.rounds.next(running, &context.ct).await)
    }

    async fn list_skills(
        &self,
        request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<rmcp::model::ListSkillsResult, McpError> {
        skills::list(&self.host, request).await
    }

    async fn get_skill(
        &self,
        request: rmcp::model::GetSkillRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<rmcp::model::GetSkillResult, McpError> {
        skills::get(&self.host, request).await
    }

    async fn read_resource_directory(
        &self,
        request: rmcp::model::ReadResourceDirectoryRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListResourcesResult, McpError> {
        skills::read_directory(&self.host, request).await
    }

    async fn list_prompts(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListPromptsResult, McpError> {
        let prompts: Vec<Value> = self
            .host
            .commands()
            .into_iter()
            .map(|c| {
                // A Claude Code command's argument-hint says what its argument text is.
                let about = c
                    .argument_hint
                    .unwrap_or_else(|| "the command's argument text".into());
                json!({
                    "name": c.name,
                    "description": c.description,
                    "arguments": [{"name": "arguments", "description": about, "required": false}],
                })
            })
            .collect();
        from_json("prompts/list", json!({ "prompts": prompts }))
    }

    async fn get_prompt(
        &self,
        request: GetPromptRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<GetPromptResponse, McpError> {
        let arguments = request
            .arguments
            .as_ref()
            .and_then(|a| a.get("arguments"))
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string();
        // A question the command's extension asks meanwhile goes to this client.
        // A name with no extension is the workspace's own command (`hello`).
        let extension = request
            .name
            .trim_start_matches('/')
            .split_once(':')
            .map_or(yep_host::store::claude::project::PROJECT, |(e, _)| e)
            .to_string();
        let _in_flight = self.clients.calling(extension, self.client, None);
        let ran = self
            .host
            .execute_command(&request.name, &arguments)
            .await
            .map_err(|e| McpError::invalid_params(yep_host::error::report(&e), None))?;
        let text = match ran.success {
            true => ran.message,
            false => format!("{} failed: {}", request.name, ran.message),
        };
        let result = json!({
            "description": request.name,
            "messages": [{"role": "user", "content": {"type": "text", "text": text}}],
        });
        Ok(GetPromptResponse::Complete(from_json(
            "prompts/get",
            result,
        )?))
    }

    async fn list_resources(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListResourcesResult, McpError> {
        // Skills are files of the packages: read on a blocking thread, never a runtime worker
        // (a slow disk, or a file an extension swapped, must not stall every client).
        let resources = skills::resources(&self.host).await?;
        from_json("resources/list", json!({ "resources": resources }))
    }

    /// One template: every skill is `skill://<extension>/<name>/SKILL.md`, read as
    /// `resources/read` reads it.
    async fn list_resource_templates(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<rmcp::model::ListResourceTemplatesResult, McpError> {
        let template = json!({
            "uriTemplate": format!("{SKILL_SCHEME}{{extension}}/{{name}}/SKILL.md"),
            "name": "skill",
            "description": "A skill of an enabled extension (its SKILL.md)",
            "mimeType": "text/markdown",
        });
        from_json(
            "resources/templates/list",
            json!({ "resourceTemplates": [template] }),
        )
    }

    async fn read_resource(
        &self,
        request: ReadResourceRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<ReadResourceResponse, McpError> {
        let contents = skills::read(&self.host, &request.uri)
            .await?
            .ok_or_else(|| {
                McpError::resource_not_found(format!("no skill file at {}", request.uri), None)
            })?;
        let result = json!({ "contents": [contents] });
        Ok(ReadResourceResponse::Complete(from_json(
            "resources/read",
            result,
        )?))
    }
}

/// Tell `bridge`'s clients of every table change its host publishes from now on (an
/// extension enabled elsewhere, an MCP server's new list), and take the extensions' prompt
/// text again for the clients that connect next, until the host is gone.
pub fn forward_changes(bridge: &Bridge) -> tokio::task::JoinHandle<()> {
    let mut changes = bridge.host.subscribe();
    let weak = bridge.host.weak();
    let (clients, instructions) = (bridge.clients.clone(), Arc::clone(&bridge.instructions));
    tokio::spawn(async move {
        while changes.changed().await.is_ok() {
            changes.borrow_and_update();
            clients.lists_changed().await;
            let Some(host) = weak.upgrade() else {
                return;
            };
            let text = host.prompt(0).await;
            *instructions.lock().unwrap_or_else(|p| p.into_inner()) = text;
        }
    })
}

/// How often [`watch_home`] looks at the home's settings and lock.
pub const WATCH_EVERY: std::time::Duration = std::time::Duration::from_millis(300);

/// Follow another `yep` changing the home (`yep enable`/`disable`, `yep trust`, `yep mcp
/// add`): when `settings.toml` or the lock changes, and has been still for one more look, the
/// host loads what it enables now ([`ExtensionHost::refresh`]). Stops with the host.
pub fn watch_home(
    host: &ExtensionHost,
    home: yep_host::store::Home,
) -> tokio::task::JoinHandle<()> {
    let weak = host.weak();
    tokio::spawn(async move {
        let stamp = |home: &yep_host::store::Home| {
            [home.settings_path(), home.lock_path()].map(|path| {
                let meta = std::fs::metadata(path).ok()?;
                Some((meta.modified().ok()?, meta.len()))
            })
        };
        let mut seen = stamp(&home);
        loop {
            tokio::time::sleep(WATCH_EVERY).await;
            let now = stamp(&home);
            if now == seen {
                continue;
            }
            // Debounced: a burst of writes is one refresh, after it settles.
            tokio::time::sleep(WATCH_EVERY).await;
            seen = stamp(&home);
            let Some(host) = weak.upgrade() else {
                return;
            };
            if let Err(e) = host.refresh().await {
                tracing::warn!("could not follow the home's change: {e}");
                if matches!(e, yep_host::runtime::HostError::ShutDown) {
                    return;
                }
            }
        }
    })
}

/// Serve `bridge` on this process's stdin and stdout until the client goes. When both are
/// pipes (as an agent spawns it) they are read and written on the runtime's reactor, with no
/// hand-off to a blocking thread per message.
pub async fn serve_stdio(bridge: Bridge) -> Result<(), ServeError> {
    let (read, write) = rmcp::transport::stdio_pipes();
    serve_on(bridge, read, write).await
}

/// Serve `bridge` as one MCP session on `read` and `write` until the client goes.
pub async fn serve_on<R, W>(bridge: Bridge, read: R, write: W) -> Result<(), ServeError>
where
    R: tokio::io::AsyncRead + Send + Unpin + 'static,
    W: tokio::io::AsyncWrite + Send + Unpin + 'static,
{
    serve_transport(bridge, (read, write)).await
}

/// Serve `bridge` as one MCP session on `transport` until the client goes.
pub(crate) async fn serve_transport<T, E, A>(bridge: Bridge, transport: T) -> Result<(), ServeError>
where
    T: rmcp::transport::IntoTransport<rmcp::RoleServer, E, A>,
    E: std::error::Error + Send + Sync + 'static,
{
    use rmcp::ServiceExt;
    let running = bridge
        .serve(transport)
        .await
        .map_err(|e| ServeError::Initialize(Box::new(e)))?;
    running
        .waiting()
        .await
        .map(drop)
        .map_err(ServeError::Connection)
}

/// Why [`serve_stdio`] ended with an error.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ServeError {
    /// The client's `initialize` failed: the connection never started.
    #[error("the MCP client's initialize failed: {0}")]
    Initialize(#[source] Box<rmcp::service::ServerInitializeError>),
    /// The connection failed after it started.
    #[error("the MCP connection failed: {0}")]
    Connection(#[source] tokio::task::JoinError),
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::value::RawValue;

    fn raw(text: &str) -> ToolResult {
        ToolResult::from_raw(RawValue::from_string(text.into()).unwrap())
    }

    #[test]
    fn an_answer_becomes_an_mcp_result_with_the_servers_own_text() {
        // A YEP server's object: its own text, and the object as structuredContent.
        let written = r#"{"echoed": "hi",  "n": 1}"#;
        let result = result_json(raw(written));
        assert_eq!(result["content"][0]["text"], written);
        assert_eq!(result["structuredContent"], json!({"echoed": "hi", "n": 1}));
        // A string is its text, unescaped; a number its JSON.
        assert_eq!(result_json(raw(r#""a\nb""#))["content"][0]["text"], "a\nb");
        let number = result_json(raw("42"));
        assert_eq!(number["content"][0]["text"], "42");
        assert!(number.get("structuredContent").is_none());
        // Shaped as an MCP result, raw or parsed: it passes through as it came.
        let shaped = json!({"content": [{"type": "text", "text": "x"}], "isError": false});
        assert_eq!(result_json(raw(&shaped.to_string())), shaped);
        assert_eq!(result_json(shaped.clone().into()), shaped);
        // Content in the host's spelling (a zot extension's): MCP's.
        let zot = json!({"content": [{"type": "text", "text": "x"}], "is_error": false,
            "structured_content": {"count": 1}});
        assert_eq!(
            result_json(zot.into()),
            json!({"content": [{"type": "text", "text": "x"}], "isError": false,
                "structuredContent": {"count": 1}})
        );
        // A zot image block: MCP's `mimeType`.
        let image =
            json!({"content": [{"type": "image", "data": "AA==", "mime_type": "image/png"}]});
        assert_eq!(
            result_json(image.into()),
            json!({"content": [{"type": "image", "data": "AA==", "mimeType": "image/png"}]})
        );
        // A parsed object (an MCP server's plain answer, a builtin's): its JSON as text.
        let parsed = result_json(json!({"a": 1}).into());
        assert_eq!(parsed["content"][0]["text"], r#"{"a":1}"#);
        assert_eq!(parsed["structuredContent"], json!({"a": 1}));
    }
}
