//! `yep-otlp-trace`: a trace exporter on `yep-sdk`. Each `*.started` event opens a span, the
//! matching `*.completed` (or `*.failed`) closes it, and the closed span is POSTed as OTLP/HTTP
//! JSON to `<endpoint>/v1/traces`. The endpoint and service name come from config; the token is
//! a secret the host injects as `OTLP_TOKEN`.
#![deny(clippy::print_stdout)]

use serde_json::{Value, json};
use std::collections::HashMap;
use std::hash::{Hash, Hasher};
use std::sync::{Arc, Mutex};
use std::time::{SystemTime, UNIX_EPOCH};
use yep_sdk::{ConfigStatus, Server, TraceEventParams};

#[derive(Default)]
struct Settings {
    endpoint: Option<String>,
    service: String,
}

struct Open {
    name: String,
    trace_id: String,
    parent: String,
    start_ns: u128,
    attributes: Vec<Value>,
}

/// A stable hex id of `bytes` length from any string.
fn hex_id(seed: &str, bytes: usize) -> String {
    let mut out = String::new();
    let mut round = 0u64;
    while out.len() < bytes * 2 {
        let mut h = std::collections::hash_map::DefaultHasher::new();
        (seed, round).hash(&mut h);
        out.push_str(&format!("{:016x}", h.finish()));
        round += 1;
    }
    out.truncate(bytes * 2);
    out
}

fn nanos(ts: &str) -> u128 {
    humantime::parse_rfc3339_weak(ts)
        .unwrap_or_else(|_| SystemTime::now())
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or(0)
}

/// The span a started event opens: keyed by its span id (or the event family and turn).
fn span_key(ev: &TraceEventParams) -> String {
    ev.span_id()
        .map(String::from)
        .unwrap_or_else(|| format!("{}:{}", ev.family(), ev.turn_id().unwrap_or("")))
}

fn span_name(ev: &TraceEventParams) -> String {
    match ev
        .data
        .get("tool_name")
        .or_else(|| ev.data.get("name"))
        .and_then(Value::as_str)
    {
        Some(tool) => format!("{} {tool}", ev.family()),
        None => ev.family().to_string(),
    }
}

fn export(settings: &Settings, span: Value) {
    let Some(endpoint) = &settings.endpoint else {
        return;
    };
    let body = json!({
        "resourceSpans": [{
            "resource": { "attributes": [{ "key": "service.name", "value": { "stringValue": settings.service } }] },
            "scopeSpans": [{ "scope": { "name": "yep-otlp-trace" }, "spans": [span] }]
        }]
    });
    let url = format!("{}/v1/traces", endpoint.trim_end_matches('/'));
    let mut request = ureq::post(&url).header("Content-Type", "application/json");
    if let Ok(token) = std::env::var("OTLP_TOKEN") {
        request = request.header("Authorization", &format!("Bearer {token}"));
    }
    if let Err(err) = request.send(body.to_string().as_bytes()) {
        eprintln!("otlp-trace: export to {url} failed: {err}");
    }
}

fn main() -> std::io::Result<()> {
    let settings = Arc::new(Mutex::new(Settings {
        service: "yep".into(),
        ..Settings::default()
    }));
    let configured = Arc::clone(&settings);
    let mut open: HashMap<String, Open> = HashMap::new();
    Server::new("otlp-trace")
        .on_config(move |config| {
            let mut s = configured.lock().unwrap_or_else(|p| p.into_inner());
            s.endpoint = config
                .get("endpoint")
                .and_then(Value::as_str)
                .map(String::from);
            s.service = config
                .get("service_name")
                .and_then(Value::as_str)
                .unwrap_or("yep")
                .to_string();
            ConfigStatus::Ok
        })
        .on_trace(move |ev| {
            let key = span_key(ev);
            let phase = ev.phase();
            if phase.ends_with("started") {
                let trace_id = ev
                    .trace_id()
                    .map(String::from)
                    .filter(|t| t.len() == 32)
                    .unwrap_or_else(|| hex_id(ev.turn_id().unwrap_or(&ev.session_id), 16));
                let parent = ev
                    .parent_span_id()
                    .map(|p| hex_id(p, 8))
                    .unwrap_or_default();
                let attributes =
                    vec![json!({ "key": "yep.event_id", "value": { "stringValue": ev.id } })];
                open.insert(
                    key,
                    Open {
                        name: span_name(ev),
                        trace_id,
                        parent,
                        start_ns: nanos(&ev.ts),
                        attributes,
                    },
                );
            } else if (phase.ends_with("completed") || phase.ends_with("failed"))
                && let Some(span) = open.remove(&key)
            {
                let status = if phase.ends_with("failed") { 2 } else { 1 };
                let span = json!({
                    "traceId": span.trace_id,
                    "spanId": hex_id(&key, 8),
                    "parentSpanId": span.parent,
                    "name": span.name,
                    "kind": 1,
                    "startTimeUnixNano": span.start_ns.to_string(),
                    "endTimeUnixNano": nanos(&ev.ts).to_string(),
                    "attributes": span.attributes,
                    "status": { "code": status },
                });
                export(&settings.lock().unwrap_or_else(|p| p.into_inner()), span);
            }
        })
        .serve()
}
