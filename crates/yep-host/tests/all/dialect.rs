//! The runtime needs nothing from YEP: a dialect of the tests' own, over in-memory streams with
//! a line format YEP does not share (string ids, `op` instead of methods), drives
//! `ExtensionHost` through tools with streamed progress, hooks that block and rewrite, static and
//! dynamic prompt text, a command, status and a question.

use crate::common;

use serde_json::{Value, json};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader, DuplexStream};
use yep_host::capability::{
    Answer, CommandResult, ConfigOutcome, Events, HookAnswer, HookEvent, HookFiring, HookOutcome,
    Offer, OfferedTool, Question, RemoteError, ToolCall, ToolResult, TraceEvent,
};
use yep_host::dialect::{Dialect, HandshakeError, Hello, Peer, PeerError, PeerFuture, Streams};
use yep_host::rpc::{
    BoxFuture, CallOptions, CloseReason, Codec, Connection, ConnectionOptions, Frame, Handler, Id,
    Malformed,
};
use yep_host::runtime::AskSink;
use yep_host::store::{AlwaysYes, Home, InstallOptions};
use yep_host::supervisor::{ServerSpec, Transport};
use yep_host::{ExtensionHost, HostOptions, PreDecision, Session, SupervisorOptions};

// ---- the wire: one JSON object per line ----------------------------------------------------
// host → server: {"ref": "h1", "op": "hello" | "call" | "hook" | "prompt" | "command", ...}
// server → host: {"re": "h1", "ok": …} | {"re": "h1", "err": "…"}
//                | {"re": "h1", "progress": "…", "done": 1, "of": 2} (figures optional)
//                {"op": "status", "text": "…"} | {"ref": "s1", "op": "ask", "prompt": "…"}

struct MemCodec;

fn id_of(v: &Value) -> Option<Id> {
    v.as_str().map(|s| Id::Str(s.into()))
}

impl Codec for MemCodec {
    fn decode(&self, line: &[u8]) -> Result<Frame, Malformed> {
        let v: Value = serde_json::from_slice(line).map_err(Malformed::new)?;
        if let Some(id) = v.get("re").and_then(id_of) {
            if let Some(p) = v.get("progress").and_then(Value::as_str) {
                // Figures where the line has them, as MCP's progress does.
                let update = yep_host::capability::Progress {
                    message: p.to_string(),
                    progress: v.get("done").and_then(Value::as_f64),
                    total: v.get("of").and_then(Value::as_f64),
                };
                return Ok(Frame::Progress { id, update });
            }
            let result = match v.get("err").and_then(Value::as_str) {
                Some(e) => Err(RemoteError::new(0, e)),
                None => Ok(serde_json::value::to_raw_value(&v["ok"]).unwrap()),
            };
            return Ok(Frame::Response { id, result });
        }
        let op = v["op"]
            .as_str()
            .ok_or_else(|| Malformed::new("no op"))?
            .to_string();
        Ok(match v.get("ref").and_then(id_of) {
            Some(id) => Frame::Request {
                id,
                method: op,
                params: v,
            },
            None => Frame::Notification {
                method: op,
                params: v,
            },
        })
    }

    fn id(&self, n: u64) -> Id {
        Id::Str(format!("h{n}").into())
    }

    fn answer(&self, id: &Id, result: Result<Value, RemoteError>) -> String {
        let Id::Str(id) = id else { unreachable!() };
        match result {
            Ok(v) => json!({"re": &**id, "ok": v}),
            Err(e) => json!({"re": &**id, "err": e.message}),
        }
        .to_string()
    }

    fn cancel(&self, _: &Id, _: Id) -> Option<String> {
        None
    }
}

fn render(op: &'static str, mut body: Value) -> impl FnOnce(&Id) -> String {
    move |id| {
        let Id::Str(id) = id else { unreachable!() };
        body["ref"] = json!(&**id);
        body["op"] = json!(op);
        body.to_string()
    }
}

// ---- the dialect ------------------------------------------------------------------------------

struct MemDialect;

struct Router {
    extension: String,
    events: Arc<dyn Events>,
}

impl Handler for Router {
    fn notification(&self, method: &str, params: Value) {
        if method == "status" {
            let text = params["text"].as_str().unwrap_or_default().to_string();
            self.events.status(
                &self.extension,
                Some(yep_host::capability::Status {
                    text,
                    level: Default::default(),
                    detail: None,
                }),
            );
        }
    }

    fn request(&self, method: &str, params: Value) -> BoxFuture<Result<Value, RemoteError>> {
        if method != "ask" {
            return Box::pin(async { Err(RemoteError::new(0, "unknown op")) });
        }
        let asked = self.events.ask(
            &self.extension,
            Question {
                prompt: params["prompt"].as_str().unwrap_or_default().into(),
                ..Question::default()
            },
        );
        Box::pin(async move {
            let a = asked.await;
            Ok(json!({"answer": a.answer, "cancelled": a.cancelled}))
        })
    }
}

impl Dialect for MemDialect {
    fn name(&self) -> &'static str {
        "mem"
    }

    fn open(
        &self,
        streams: Streams,
        hello: Hello,
        events: Arc<dyn Events>,
        opts: ConnectionOptions,
    ) -> PeerFuture<'static, Result<Arc<dyn Peer>, HandshakeError>> {
        Box::pin(async move {
            let router = Arc::new(Router {
                extension: hello.extension.clone(),
                events,
            });
            let conn = streams.connect(router, Arc::new(MemCodec), opts)?;
            let v = conn
                .call(
                    "hello",
                    render("hello", json!({"config": hello.config})),
                    CallOptions::timeout(hello.timeout),
                )
                .await?;
            let v: Value = serde_json::from_str(v.get()).unwrap();
            let offer = Offer {
                name: v["name"].as_str().unwrap_or_default().into(),
                wire: "mem 0".into(),
                tools: v["tools"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .filter_map(Value::as_str)
                    .map(OfferedTool::named)
                    .collect(),
                prompt: v["prompt"].as_str().map(str::to_string),
                dynamic_prompt: true,
                ..Offer::default()
            };
            Ok(Arc::new(MemPeer { conn, offer }) as Arc<dyn Peer>)
        })
    }
}

struct MemPeer {
    conn: Connection,
    offer: Offer,
}

impl MemPeer {
    async fn ask(
        &self,
        op: &'static str,
        body: Value,
        opts: CallOptions,
    ) -> Result<Value, PeerError> {
        let raw = self.raw(op, body, opts).await?;
        serde_json::from_str(raw.get()).map_err(|e| PeerError::malformed_text(op, e, raw.get()))
    }

    /// The answer as the server wrote it.
    async fn raw(
        &self,
        op: &'static str,
        body: Value,
        opts: CallOptions,
    ) -> Result<Box<yep_host::rpc::RawValue>, PeerError> {
        self.conn
            .call(op, render(op, body), opts)
            .await
            .map_err(|e| PeerError::call(op, e))
    }
}

impl Peer for MemPeer {
    fn offer(&self) -> &Offer {
        &self.offer
    }

    fn call_tool(
        &self,
        call: ToolCall,
        timeout: Duration,
    ) -> PeerFuture<'_, Result<ToolResult, PeerError>> {
        let opts = CallOptions {
            timeout: Some(timeout),
            updates: call.updates,
            cancel: call.cancel,
        };
        let body = json!({"tool": call.tool, "args": call.args});
        Box::pin(async move {
            // Passed on as the server wrote it.
            Ok(ToolResult::from_raw(self.raw("call", body, opts).await?))
        })
    }

    fn fire_hook(
        &self,
        firing: &HookFiring,
        timeout: Duration,
    ) -> PeerFuture<'_, Result<HookAnswer, PeerError>> {
        let body = json!({
            "pre": firing.event == HookEvent::PreToolUse,
            "tool": firing.tool,
            "args": firing.args,
        });
        Box::pin(async move {
            let v = self
                .ask("hook", body, CallOptions::timeout(timeout))
                .await?;
            Ok(if let Some(reason) = v["block"].as_str() {
                HookOutcome::Block {
                    reason: reason.into(),
                    user_message: None,
                }
            } else if let Some(args) = v.get("rewrite") {
                HookOutcome::Rewrite(args.clone())
            } else if let Some(reason) = v["ask"].as_str() {
                HookOutcome::Ask {
                    reason: reason.into(),
                }
            } else {
                HookOutcome::Allow
            }
            .into())
        })
    }

    fn prompt(&self, timeout: Duration) -> PeerFuture<'_, Result<String, PeerError>> {
        Box::pin(async move {
            let v = self
                .ask("prompt", json!({}), CallOptions::timeout(timeout))
                .await?;
            Ok(v.as_str().unwrap_or_default().to_string())
        })
    }

    fn command(
        &self,
        name: &str,
        arguments: &str,
        timeout: Duration,
    ) -> PeerFuture<'_, Result<CommandResult, PeerError>> {
        let body = json!({"name": name, "arguments": arguments});
        Box::pin(async move {
            let v = self
                .ask("command", body, CallOptions::timeout(timeout))
                .await?;
            Ok(CommandResult {
                success: true,
                message: v.as_str().unwrap_or_default().into(),
            })
        })
    }

    fn config_changed(
        &self,
        _: Value,
        _: Duration,
    ) -> PeerFuture<'_, Result<ConfigOutcome, PeerError>> {
        Box::pin(async { Ok(ConfigOutcome::RestartRequired) })
    }

    fn workspace_changed(&self, _: &str) -> PeerFuture<'_, Result<(), PeerError>> {
        Box::pin(async { Ok(()) })
    }

    fn trace(&self, _: &TraceEvent) -> PeerFuture<'_, Result<(), PeerError>> {
        Box::pin(async { Ok(()) })
    }

    fn barrier(&self, _: Duration) -> PeerFuture<'_, Result<(), PeerError>> {
        Box::pin(async { Ok(()) })
    }

    fn request(
        &self,
        _: &str,
        _: Option<Value>,
        _: Duration,
    ) -> PeerFuture<'_, Result<Value, PeerError>> {
        Box::pin(async { Ok(Value::Null) })
    }

    fn shutdown(&self, grace: Duration) -> PeerFuture<'_, ()> {
        Box::pin(async move {
            let _ = tokio::time::timeout(grace, self.conn.close_write()).await;
        })
    }

    fn close(&self, reason: CloseReason) {
        self.conn.close(reason);
    }

    fn close_reason(&self) -> Option<CloseReason> {
        self.conn.close_reason()
    }

    fn closed(&self) -> PeerFuture<'_, CloseReason> {
        Box::pin(self.conn.closed())
    }
}

// ---- the server, a task on the other end of an in-memory pipe ----------------------------------

/// Opens a duplex per start and runs the server on its far end; counts starts.
#[derive(Default)]
struct MemTransport {
    starts: Mutex<u32>,
}

impl Transport for MemTransport {
    fn open(&self, spec: &ServerSpec) -> std::io::Result<Streams> {
        *self.starts.lock().unwrap() += 1;
        let (host, server) = tokio::io::duplex(64 * 1024);
        tokio::spawn(serve(server, spec.name.clone()));
        let (reader, writer) = tokio::io::split(host);
        Ok(Streams::Other {
            reader: Box::new(reader),
            writer: Box::new(writer),
        })
    }
}

type Writer = Arc<tokio::sync::Mutex<tokio::io::WriteHalf<DuplexStream>>>;

async fn put(write: &Writer, v: Value) {
    let mut w = write.lock().await;
    let _ = w.write_all(format!("{v}\n").as_bytes()).await;
}

async fn serve(stream: DuplexStream, name: String) {
    let (read, write) = tokio::io::split(stream);
    let write: Writer = Arc::new(tokio::sync::Mutex::new(write));
    let send = |v: Value| put(&write, v);
    let mut lines = BufReader::new(read).lines();
    let mut waiting: Option<(String, tokio::sync::oneshot::Sender<Value>)> = None;
    let mut turn = 0;
    while let Ok(Some(line)) = lines.next_line().await {
        let msg: Value = serde_json::from_str(&line).unwrap();
        // An answer to the server's own question.
        if let Some(re) = msg["re"].as_str() {
            if let Some((id, tx)) = waiting.take() {
                assert_eq!(id, re);
                let _ = tx.send(msg["ok"].clone());
            }
            continue;
        }
        let id = msg["ref"].as_str().unwrap().to_string();
        let reply = |ok: Value| json!({"re": id, "ok": ok});
        match msg["op"].as_str().unwrap() {
            "hello" => {
                send(reply(json!({
                    "name": name,
                    "tools": ["greet", "colour"],
                    "prompt": "static mem text",
                })))
                .await;
                send(json!({"op": "status", "text": "mem ready"})).await;
            }
            "call" if msg["tool"] == "greet" => {
                send(json!({"re": id, "progress": "working", "done": 1, "of": 2})).await;
                let who = msg["args"]["who"].as_str().unwrap_or("nobody").to_string();
                send(reply(json!({"greeting": format!("hi {who}")}))).await;
            }
            "call" if msg["tool"] == "colour" => {
                let (tx, rx) = tokio::sync::oneshot::channel();
                waiting = Some(("s1".into(), tx));
                send(json!({"ref": "s1", "op": "ask", "prompt": "colour?"})).await;
                // Keep reading in a task of its own so the answer can arrive.
                let write = Arc::clone(&write);
                tokio::spawn(async move {
                    let answer = rx.await.unwrap_or(Value::Null);
                    put(
                        &write,
                        json!({"re": id, "ok": {"colour": answer["answer"]}}),
                    )
                    .await;
                });
            }
            "call" => send(json!({"re": id, "err": "no such tool"})).await,
            "hook" => {
                let command = msg["args"]["command"].as_str().unwrap_or_default();
                let outcome = if command.contains("rm ") {
                    json!({"block": "no rm here"})
                } else if msg["tool"] == "write" {
                    json!({"rewrite": {"path": "/safe/place"}})
                } else if msg["tool"] == "deploy" {
                    json!({"ask": format!("{} it", msg["args"]["how"].as_str().unwrap_or(""))})
                } else {
                    json!({})
                };
                send(reply(outcome)).await;
            }
            "prompt" => {
                turn += 1;
                send(reply(json!(format!("dynamic mem text {turn}")))).await;
            }
            "command" => send(reply(json!(format!("pong {}", msg["arguments"])))).await,
            other => send(json!({"re": id, "err": format!("unknown op {other}")})).await,
        }
    }
}

// ---- the runtime, driven through it ------------------------------------------------------------

/// Answers the server's colour question `blue`; allows a hook's ask about shipping, and
/// denies any other.
struct Blue;
impl AskSink for Blue {
    async fn ask(&self, _: &str, q: Question) -> Answer {
        if q.options == ["allow", "deny"] {
            return Answer::answered(match q.prompt.contains("ships it") {
                true => "allow",
                false => "deny",
            });
        }
        assert_eq!(q.prompt, "colour?");
        Answer::answered("blue")
    }
}

fn install(dir: &std::path::Path, home: &Home) {
    let pkg = dir.join("mem");
    std::fs::create_dir_all(&pkg).unwrap();
    let tool = |n: &str| json!({"name": n, "description": format!("the {n} tool")});
    let manifest = json!({
        "name": "mem",
        "version": "1.0.0",
        "description": "an extension spoken to in memory",
        "yolop": {
            "capabilityServer": {"command": "never-spawned"},
            "tools": [tool("greet"), tool("colour")],
            "prompt": true,
            "dynamic_prompt": true,
            "hooks": [{"event": "pre_tool_use", "tool_name_glob": "*", "timeout_ms": 5000}],
            "commands": [{"name": "ping", "description": "answer pong"}],
            "status": true,
            "ui_ask": true
        }
    });
    std::fs::write(pkg.join("plugin.json"), manifest.to_string()).unwrap();
    home.install(
        pkg.to_str().unwrap(),
        &InstallOptions::default(),
        &mut AlwaysYes,
    )
    .unwrap();
    home.set_enabled("mem", true).unwrap();
}

#[tokio::test]
async fn a_dialect_of_the_tests_own_drives_the_whole_runtime() {
    let dir = tempfile::tempdir().unwrap();
    let home = Home {
        root: dir.path().join("home"),
    };
    install(dir.path(), &home);
    let transport = Arc::new(MemTransport::default());
    let opts = HostOptions {
        supervisor: SupervisorOptions {
            dialect: Arc::new(MemDialect),
            transport: Some(Arc::clone(&transport) as Arc<dyn Transport>),
            ..common::quick_opts()
        },
        ask_sink: Some(Arc::new(Blue)),
        ..HostOptions::default()
    };
    let session = Session {
        id: "s".into(),
        workspace_root: dir.path().to_path_buf(),
    };
    let host = ExtensionHost::start(home, session, opts).await.unwrap();

    // Tools, from the manifest, served over the test wire with progress.
    let names: Vec<_> = host.tools().into_iter().map(|t| t.name).collect();
    assert_eq!(names, ["greet", "colour"]);
    let progress = Arc::new(Mutex::new(Vec::new()));
    let seen = Arc::clone(&progress);
    let out = host
        .call_tool(
            "greet",
            json!({"who": "ada"}),
            Some(Arc::new(move |p: &yep_host::capability::Progress| {
                seen.lock().unwrap().push(p.clone())
            })),
            None,
        )
        .await
        .unwrap();
    assert_eq!(out, json!({"greeting": "hi ada"}));
    // Progress is structured: the dialect's figures reach the embedder.
    let working = yep_host::capability::Progress {
        message: "working".into(),
        progress: Some(1.0),
        total: Some(2.0),
    };
    assert_eq!(*progress.lock().unwrap(), [working]);

    // A question goes to the embedder's sink and its answer back to the server.
    let out = host
        .call_tool("colour", json!({}), None, None)
        .await
        .unwrap();
    assert_eq!(out, json!({"colour": "blue"}));

    // Hooks: a block with its reason, a rewrite, an allow.
    match host
        .pre_tool_use("bash", json!({"command": "rm -rf /"}))
        .await
    {
        PreDecision::Block {
            extension, reason, ..
        } => assert_eq!((extension.as_str(), reason.as_str()), ("mem", "no rm here")),
        other => panic!("{other:?}"),
    }
    assert_eq!(
        host.pre_tool_use("write", json!({"path": "/etc/passwd"}))
            .await,
        PreDecision::Allow {
            args: json!({"path": "/safe/place"}),
            rewritten_by: vec!["mem".into()],
            unavailable: vec![],
            context: vec![],
        }
    );
    assert_eq!(
        host.pre_tool_use("ls", json!({})).await,
        PreDecision::Allow {
            args: json!({}),
            rewritten_by: vec![],
            unavailable: vec![],
            context: vec![],
        }
    );
    // A hook that asks: the user decides, through the embedder's questions.
    assert!(
        host.pre_tool_use("deploy", json!({"how": "ships"}))
            .await
            .is_allowed()
    );
    match host.pre_tool_use("deploy", json!({"how": "wipes"})).await {
        PreDecision::Block {
            extension, reason, ..
        } => assert_eq!(
            (extension.as_str(), reason.as_str()),
            (
                "mem",
                "extension `mem` asked before `deploy` runs (wipes it), and the user denied it"
            )
        ),
        other => panic!("{other:?}"),
    }

    // Prompt: the dynamic text per turn (it replaces the static one, as for any wire).
    let prompt = host.prompt(1).await;
    assert_eq!(
        prompt,
        "<capability id=\"ext:mem\">\ndynamic mem text 1\n</capability>"
    );

    // A command, and the status the server pushed.
    let pong = host.execute_command("mem:ping", "now").await.unwrap();
    assert_eq!(pong.message, "pong \"now\"");
    assert_eq!(host.status()["mem"].text, "mem ready");

    // One server served all of it, and the shutdown closes it.
    assert_eq!(*transport.starts.lock().unwrap(), 1);
    host.shutdown().await;
    assert!(
        host.call_tool("greet", json!({}), None, None)
            .await
            .is_err()
    );
}
