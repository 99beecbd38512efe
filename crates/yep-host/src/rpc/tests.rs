//! The connection's tests, over in-memory pipes and a small test wire of their own.

use super::*;
use serde_json::json;
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};
use tokio::io::AsyncWrite;
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader, DuplexStream, duplex};
use tokio::time::Instant;

#[test]
fn a_stray_line_is_escaped_and_cut_short() {
    assert_eq!(stray_preview(b"debug: up"), "debug: up");
    let long = format!("\u{1b}[2J{}", "\u{e9}".repeat(200));
    let shown = stray_preview(long.as_bytes());
    assert!(shown.starts_with("\\x1b[2J\u{e9}"), "{shown}");
    assert_eq!(shown.chars().count(), STRAY_CHARS + 1, "{shown}");
    assert!(shown.ends_with('…'));
    let exact = "x".repeat(STRAY_CHARS);
    assert_eq!(stray_preview(exact.as_bytes()), exact);
}

struct Silent;
impl Handler for Silent {
    fn notification(&self, _: &str, _: Value) {}
    fn request(&self, method: &str, _: Value) -> BoxFuture<Result<Value, RemoteError>> {
        let err = RemoteError::new(RemoteError::METHOD_NOT_FOUND, method);
        Box::pin(async move { Err(err) })
    }
}

/// A small JSON-RPC-shaped wire of the tests' own, with string ids (`"h1"`), progress as
/// `{"progress": id, "output": …}` and no cancel: the core needs no more than a codec.
struct TestWire;
impl Codec for TestWire {
    fn decode(&self, line: &[u8]) -> Result<Frame, Malformed> {
        let v: Value = serde_json::from_slice(line).map_err(Malformed::new)?;
        let id = |v: &Value| match v {
            Value::String(s) => Some(Id::Str(s.as_str().into())),
            Value::Number(n) => n.as_u64().map(Id::Num),
            _ => None,
        };
        if let Some(pid) = v.get("progress").and_then(id) {
            let update = Progress::message(v["output"].as_str().unwrap_or_default());
            return Ok(Frame::Progress { id: pid, update });
        }
        match (
            v.get("id").and_then(id),
            v.get("method").and_then(Value::as_str),
        ) {
            (Some(id), Some(method)) => Ok(Frame::Request {
                id,
                method: method.to_string(),
                params: v["params"].clone(),
            }),
            (None, Some(method)) => Ok(Frame::Notification {
                method: method.to_string(),
                params: v["params"].clone(),
            }),
            (Some(id), None) => Ok(Frame::Response {
                id,
                result: match v.get("error") {
                    Some(e) => Err(RemoteError::new(0, e.to_string())),
                    None => Ok(serde_json::value::to_raw_value(&v["result"]).unwrap()),
                },
            }),
            (None, None) => Err(Malformed::new("neither an id nor a method")),
        }
    }
    fn id(&self, n: u64) -> Id {
        Id::Str(format!("h{n}").into())
    }
    fn answer(&self, id: &Id, result: Result<Value, RemoteError>) -> String {
        let id = match id {
            Id::Num(n) => json!(n),
            Id::Str(s) => json!(&**s),
        };
        match result {
            Ok(v) => json!({"id": id, "result": v}).to_string(),
            Err(e) => json!({"id": id, "error": {"message": e.message}}).to_string(),
        }
    }
    fn cancel(&self, _: &Id, _: Id) -> Option<String> {
        None
    }
}

/// A result as a value.
fn value(raw: &RawValue) -> Value {
    serde_json::from_str(raw.get()).unwrap()
}

fn request(method: &'static str, params: Value) -> impl FnOnce(&Id) -> String {
    move |id| {
        let Id::Str(id) = id else { unreachable!() };
        json!({"id": &**id, "method": method, "params": params}).to_string()
    }
}

fn start(
    reader: tokio::io::ReadHalf<DuplexStream>,
    writer: tokio::io::WriteHalf<DuplexStream>,
    handler: Arc<dyn Handler>,
    opts: ConnectionOptions,
) -> Connection {
    Connection::start(reader, writer, handler, Arc::new(TestWire), opts)
}

/// A connection, and the read/write halves of the server's side of its pipe.
fn pair(
    cap: usize,
) -> (
    Connection,
    tokio::io::ReadHalf<DuplexStream>,
    tokio::io::WriteHalf<DuplexStream>,
) {
    let (a, b) = duplex(1 << 20);
    let (host_r, host_w) = tokio::io::split(a);
    let opts = ConnectionOptions {
        label: "t".into(),
        max_frame_bytes: cap,
        ..ConnectionOptions::default()
    };
    let conn = start(host_r, host_w, Arc::new(Silent), opts);
    let (server_r, server_w) = tokio::io::split(b);
    (conn, server_r, server_w)
}

#[cfg(target_os = "linux")]
#[tokio::test]
#[allow(clippy::disallowed_methods)] // a real child on real pipes
async fn both_pipes_of_a_child_grow_once_a_big_frame_crosses_them() {
    // Answers each request with its params, as this module's test wire reads them.
    let script = "import json,sys\nfor l in sys.stdin:\n    v=json.loads(l)\n    print(json.dumps({'id':v['id'],'result':v['params']}),flush=True)";
    let mut child = tokio::process::Command::new("python3")
        .args(["-c", script])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let (stdin, stdout) = (child.stdin.take().unwrap(), child.stdout.take().unwrap());
    let conn = Connection::start_pipe(
        stdout,
        stdin,
        Arc::new(Silent),
        Arc::new(TestWire),
        ConnectionOptions::default(),
    )
    .unwrap();
    let capacity = |fd: i32| unsafe { libc::fcntl(fd, libc::F_GETPIPE_SZ) } as usize;
    let stdin_fd = conn.inner.stdin_pipe.as_ref().unwrap().0;
    let stdout_fd = conn.inner.pipe.as_ref().unwrap().raw_fd();
    let small = conn
        .call(
            "t",
            request("t", json!({"text": "hi"})),
            CallOptions::default(),
        )
        .await
        .unwrap();
    assert_eq!(value(&small)["text"], "hi");
    assert!(capacity(stdin_fd) < pipe::BIG_PIPE && capacity(stdout_fd) < pipe::BIG_PIPE);
    let text = "x".repeat(200 * 1024);
    let big = conn
        .call(
            "t",
            request("t", json!({"text": text})),
            CallOptions::default(),
        )
        .await
        .unwrap();
    assert_eq!(value(&big)["text"].as_str().unwrap().len(), text.len());
    assert_eq!(capacity(stdin_fd), pipe::BIG_PIPE);
    assert_eq!(capacity(stdout_fd), pipe::BIG_PIPE);
}

/// A writer that counts its writes and passes them on.
struct CountedWrites {
    inner: tokio::io::WriteHalf<DuplexStream>,
    writes: Arc<AtomicUsize>,
}

impl AsyncWrite for CountedWrites {
    fn poll_write(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        buf: &[u8],
    ) -> std::task::Poll<std::io::Result<usize>> {
        self.writes.fetch_add(1, Ordering::SeqCst);
        std::pin::Pin::new(&mut self.inner).poll_write(cx, buf)
    }
    fn poll_flush(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        std::pin::Pin::new(&mut self.inner).poll_flush(cx)
    }
    fn poll_shutdown(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        std::pin::Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}

#[tokio::test]
async fn requests_sent_while_others_are_in_flight_share_writes() {
    let (a, b) = duplex(1 << 20);
    let (host_r, host_w) = tokio::io::split(a);
    let writes = Arc::new(AtomicUsize::new(0));
    let writer = CountedWrites {
        inner: host_w,
        writes: Arc::clone(&writes),
    };
    let conn = Connection::start(
        host_r,
        writer,
        Arc::new(Silent),
        Arc::new(TestWire),
        ConnectionOptions::default(),
    );
    let (server_r, mut server_w) = tokio::io::split(b);
    let calls: Vec<_> = (0..48)
        .map(|n| {
            let c = conn.clone();
            tokio::spawn(async move {
                c.call("t", request("t", json!({"n": n})), CallOptions::default())
                    .await
            })
        })
        .collect();
    let mut lines = BufReader::new(server_r).lines();
    for _ in 0..48 {
        let line = lines.next_line().await.unwrap().unwrap();
        let v: Value = serde_json::from_str(&line).unwrap();
        let answer = json!({"id": v["id"], "result": v["params"]["n"]});
        server_w
            .write_all(format!("{answer}\n").as_bytes())
            .await
            .unwrap();
    }
    for (n, call) in calls.into_iter().enumerate() {
        assert_eq!(value(&call.await.unwrap().unwrap()), json!(n));
    }
    // The first call, alone, writes at once; the rest queue behind one caller that lets
    // them run first, and each full batch of 16 goes without waiting for it: 1 + 3 here
    // on this one-thread runtime. One write per request would be 48; holding every
    // batch for the role's holder, 2.
    let writes = writes.load(Ordering::SeqCst);
    assert!(
        (3..=6).contains(&writes),
        "48 requests took {writes} writes"
    );
}

#[tokio::test]
async fn a_caller_dropped_before_its_write_leaves_the_queue_to_a_task_and_close_write_waits_for_it()
{
    let (conn, server_r, _server_w) = pair(DEFAULT_MAX_FRAME_BYTES);
    let mut lines = BufReader::new(server_r).lines();
    // One call in flight, so the next lets other tasks queue behind it first.
    let c = conn.clone();
    let _first = tokio::spawn(async move {
        c.call("t", request("t", json!(1)), CallOptions::default())
            .await
    });
    assert!(
        lines
            .next_line()
            .await
            .unwrap()
            .unwrap()
            .contains("\"params\":1")
    );
    // Polled once and dropped: it took the writing role and let other tasks run first,
    // so its write had not begun.
    tokio::select! {
        biased;
        _ = conn.call("t", request("t", json!(2)), CallOptions::default()) => {
            panic!("a call with no answer resolved")
        }
        () = std::future::ready(()) => {}
    }
    // A line sent now queues behind the role that was handed on.
    conn.send(json!({"method": "note", "params": 3}).to_string())
        .await
        .unwrap();
    tokio::time::timeout(Duration::from_secs(5), conn.close_write())
        .await
        .expect("close_write waits for the queue, which a task writes");
    let second = lines.next_line().await.unwrap().unwrap();
    assert!(second.contains("\"params\":2"), "{second}");
    let third = lines.next_line().await.unwrap().unwrap();
    assert!(third.contains("\"params\":3"), "{third}");
    assert_eq!(
        lines.next_line().await.unwrap(),
        None,
        "EOF after the queue"
    );
    assert!(!conn.is_closed(), "no line was torn");
}

#[tokio::test]
async fn responses_resolve_out_of_order() {
    let (conn, server_r, mut server_w) = pair(DEFAULT_MAX_FRAME_BYTES);
    let c1 = conn.clone();
    let c2 = conn.clone();
    let first = tokio::spawn(async move {
        c1.call("t", request("t", json!({"n": 1})), CallOptions::default())
            .await
    });
    let second = tokio::spawn(async move {
        c2.call("t", request("t", json!({"n": 2})), CallOptions::default())
            .await
    });
    let mut lines = BufReader::new(server_r).lines();
    let mut ids = Vec::new();
    for _ in 0..2 {
        let line = lines.next_line().await.unwrap().unwrap();
        let v: Value = serde_json::from_str(&line).unwrap();
        ids.push((
            v["id"].as_str().unwrap().to_string(),
            v["params"]["n"].as_u64().unwrap(),
        ));
    }
    // Answer in reverse order, with a blank and a malformed line in between.
    for (id, n) in ids.iter().rev() {
        server_w
            .write_all(format!("\nnot json\n{{\"id\":\"{id}\",\"result\":{n}}}\n").as_bytes())
            .await
            .unwrap();
    }
    assert_eq!(value(&first.await.unwrap().unwrap()), json!(1));
    assert_eq!(value(&second.await.unwrap().unwrap()), json!(2));
}

#[tokio::test]
async fn an_oversized_line_closes_the_connection_and_fails_pending_calls() {
    let (conn, _server_r, mut server_w) = pair(64);
    let c = conn.clone();
    let call = tokio::spawn(async move {
        c.call("t", request("t", Value::Null), CallOptions::default())
            .await
    });
    server_w
        .write_all(format!("{}\n", "x".repeat(200)).as_bytes())
        .await
        .unwrap();
    let err = call.await.unwrap().unwrap_err();
    assert!(
        matches!(
            err,
            CallError::Closed(CloseReason::FrameTooLarge { len: 200, cap: 64 })
        ),
        "{err}"
    );
    assert!(err.to_string().contains("frame cap"), "{err}");
    assert!(conn.is_closed());
}

#[tokio::test(start_paused = true)]
async fn progress_resets_the_timeout() {
    let (conn, server_r, mut server_w) = pair(DEFAULT_MAX_FRAME_BYTES);
    let seen = Arc::new(Mutex::new(Vec::<String>::new()));
    let sink_seen = Arc::clone(&seen);
    let opts = CallOptions {
        timeout: Some(Duration::from_millis(100)),
        updates: Some(Arc::new(move |p: &crate::capability::Progress| {
            sink_seen.lock().unwrap().push(p.message.clone())
        })),
        cancel: None,
    };
    let c = conn.clone();
    let call = tokio::spawn(async move { c.call("t", request("t", Value::Null), opts).await });
    let mut lines = BufReader::new(server_r).lines();
    let id =
        serde_json::from_str::<Value>(&lines.next_line().await.unwrap().unwrap()).unwrap()["id"]
            .as_str()
            .unwrap()
            .to_string();
    for i in 0..5 {
        tokio::time::sleep(Duration::from_millis(60)).await;
        server_w
            .write_all(format!("{{\"progress\":\"{id}\",\"output\":\"{i}\"}}\n").as_bytes())
            .await
            .unwrap();
    }
    server_w
        .write_all(format!("{{\"id\":\"{id}\",\"result\":\"done\"}}\n").as_bytes())
        .await
        .unwrap();
    assert_eq!(value(&call.await.unwrap().unwrap()), json!("done"));
    assert_eq!(seen.lock().unwrap().len(), 5);
}

/// One watchdog keeps every call's time: a call that runs out sooner than the one it
/// watches for wakes it, and each call fails at its own deadline, by its method's name.
#[tokio::test(start_paused = true)]
async fn each_call_times_out_at_its_own_deadline() {
    let (conn, server_r, mut server_w) = pair(DEFAULT_MAX_FRAME_BYTES);
    let start = Instant::now();
    let call = |method: &'static str, ms: u64| {
        let c = conn.clone();
        tokio::spawn(async move {
            let res = c
                .call(
                    method,
                    request(method, Value::Null),
                    CallOptions::timeout(Duration::from_millis(ms)),
                )
                .await;
            (res, start.elapsed())
        })
    };
    let mut lines = BufReader::new(server_r).lines();
    let long = call("long", 10_000);
    lines.next_line().await.unwrap().unwrap();
    let short = call("short", 100);
    lines.next_line().await.unwrap().unwrap();
    let answered = call("answered", 100);
    let id =
        serde_json::from_str::<Value>(&lines.next_line().await.unwrap().unwrap()).unwrap()["id"]
            .clone();
    server_w
        .write_all(format!("{}\n", json!({"id": id, "result": 1})).as_bytes())
        .await
        .unwrap();
    assert_eq!(value(&answered.await.unwrap().0.unwrap()), json!(1));

    let within = |task| tokio::time::timeout(Duration::from_secs(60), task);
    let (res, at) = within(short).await.expect("short never ran out").unwrap();
    match res {
        Err(CallError::Timeout { method, after }) => {
            assert_eq!(
                (method.as_str(), after),
                ("short", Duration::from_millis(100))
            );
        }
        other => panic!("short: {other:?}"),
    }
    assert!(
        at >= Duration::from_millis(100) && at < Duration::from_secs(1),
        "short timed out at {at:?}"
    );
    assert!(!long.is_finished(), "the long call ran out early");
    let (res, at) = within(long).await.expect("long never ran out").unwrap();
    assert!(
        matches!(&res, Err(CallError::Timeout { method, .. }) if method == "long"),
        "{res:?}"
    );
    assert!(
        at >= Duration::from_secs(10) && at < Duration::from_secs(11),
        "long timed out at {at:?}"
    );
    assert!(conn.lock_pending().slots.is_empty(), "a slot was left");
}

/// Answers no request, ever.
struct Stuck;
impl Handler for Stuck {
    fn notification(&self, _: &str, _: Value) {}
    fn request(&self, _: &str, _: Value) -> BoxFuture<Result<Value, RemoteError>> {
        Box::pin(std::future::pending())
    }
}

#[tokio::test]
async fn server_requests_past_the_cap_are_refused_then_the_server_is_cut_off() {
    let (a, b) = duplex(1 << 20);
    let (host_r, host_w) = tokio::io::split(a);
    let opts = ConnectionOptions {
        label: "t".into(),
        max_inbound_requests: 2,
        ..ConnectionOptions::default()
    };
    let conn = start(host_r, host_w, Arc::new(Stuck), opts);
    let (server_r, mut server_w) = tokio::io::split(b);
    let ask = |id: u64| format!("{{\"method\":\"question\",\"id\":{id},\"params\":{{}}}}\n");
    for id in 1..=3 {
        server_w.write_all(ask(id).as_bytes()).await.unwrap();
    }
    // Two are being handled; the third is answered at once with an error.
    let mut lines = BufReader::new(server_r).lines();
    let answer: Value = serde_json::from_str(&lines.next_line().await.unwrap().unwrap()).unwrap();
    assert_eq!(answer["id"], 3, "{answer}");
    assert!(
        answer["error"]["message"]
            .as_str()
            .unwrap()
            .contains("too many requests in flight"),
        "{answer}"
    );
    assert!(!conn.is_closed());
    // Two handled and two more refusals in flight: the next one is past every bound.
    for id in 4..=6 {
        server_w.write_all(ask(id).as_bytes()).await.unwrap();
    }
    assert_eq!(conn.closed().await, CloseReason::TooManyRequests { cap: 2 });
}
