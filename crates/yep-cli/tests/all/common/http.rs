//! A small HTTP/1.1 client over a plain `TcpStream`, for the tests of `yep mcp serve --http`:
//! keep-alive, chunked and SSE bodies, and an MCP session on top.

use serde_json::{Value, json};
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

/// One response: its status, headers (names lowercased) and body.
pub struct Reply {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

impl Reply {
    pub fn header(&self, name: &str) -> Option<&str> {
        let name = name.to_ascii_lowercase();
        self.headers
            .iter()
            .find(|(n, _)| *n == name)
            .map(|(_, v)| v.as_str())
    }

    /// The JSON messages in the body: each SSE `data:` line, or the body itself.
    pub fn messages(&self) -> Vec<Value> {
        let text = String::from_utf8_lossy(&self.body);
        if self
            .header("content-type")
            .is_some_and(|t| t.starts_with("text/event-stream"))
        {
            return text
                .lines()
                .filter_map(|l| l.strip_prefix("data:"))
                .filter_map(|d| serde_json::from_str(d.trim()).ok())
                .collect();
        }
        serde_json::from_str(&text).into_iter().collect()
    }
}

/// Send one request on `stream` and read its whole response.
pub fn request(
    stream: &mut TcpStream,
    method: &str,
    host: &str,
    headers: &[(&str, &str)],
    body: &str,
) -> std::io::Result<Reply> {
    let mut head = format!("{method} /mcp HTTP/1.1\r\nHost: {host}\r\n");
    for (name, value) in headers {
        head.push_str(&format!("{name}: {value}\r\n"));
    }
    head.push_str(&format!("Content-Length: {}\r\n\r\n", body.len()));
    // One write, without Nagle: no delayed-ACK wait between the head and the body.
    head.push_str(body);
    stream.set_nodelay(true)?;
    stream.write_all(head.as_bytes())?;
    let mut reader = BufReader::new(&*stream);
    let mut line = String::new();
    reader.read_line(&mut line)?;
    let status = line
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .ok_or_else(|| std::io::Error::other(format!("not an HTTP status line: {line:?}")))?;
    let mut headers = Vec::new();
    loop {
        line.clear();
        reader.read_line(&mut line)?;
        let l = line.trim_end();
        if l.is_empty() {
            break;
        }
        if let Some((n, v)) = l.split_once(':') {
            headers.push((n.trim().to_ascii_lowercase(), v.trim().to_string()));
        }
    }
    let find = |n: &str| headers.iter().find(|(h, _)| h == n).map(|(_, v)| v.clone());
    let mut body = Vec::new();
    if find("transfer-encoding").is_some_and(|t| t.contains("chunked")) {
        loop {
            line.clear();
            reader.read_line(&mut line)?;
            let size = usize::from_str_radix(line.trim(), 16)
                .map_err(|_| std::io::Error::other(format!("bad chunk size {line:?}")))?;
            let mut chunk = vec![0; size + 2];
            reader.read_exact(&mut chunk)?;
            if size == 0 {
                break;
            }
            body.extend_from_slice(&chunk[..size]);
        }
    } else if let Some(len) = find("content-length").and_then(|l| l.parse::<usize>().ok()) {
        body.resize(len, 0);
        reader.read_exact(&mut body)?;
    } else {
        reader.read_to_end(&mut body)?;
    }
    Ok(Reply {
        status,
        headers,
        body,
    })
}

/// Whether the server closes `stream` within `within` (reads EOF or a reset).
pub fn closed_within(stream: &mut TcpStream, within: Duration) -> bool {
    stream.set_read_timeout(Some(within)).unwrap();
    let mut byte = [0u8; 1];
    loop {
        match stream.read(&mut byte) {
            Ok(0) => return true,
            Ok(_) => continue,
            Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => return true,
            Err(_) => return false,
        }
    }
}

/// An MCP session over one keep-alive connection.
pub struct McpSession {
    pub stream: TcpStream,
    host: String,
    token: String,
    pub id: String,
    next: u64,
}

impl McpSession {
    /// Connect to `addr`, initialize with `token`, and send `initialized`.
    pub fn open(addr: SocketAddr, token: &str) -> std::io::Result<Self> {
        let mut stream = TcpStream::connect(addr)?;
        stream.set_read_timeout(Some(Duration::from_secs(30)))?;
        let host = addr.to_string();
        let auth = format!("Bearer {token}");
        let init = json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {},
            "clientInfo": {"name": "test", "version": "1"}}});
        let reply = request(
            &mut stream,
            "POST",
            &host,
            &[
                ("Authorization", &auth),
                ("Content-Type", "application/json"),
                ("Accept", "application/json, text/event-stream"),
            ],
            &init.to_string(),
        )?;
        let id = reply
            .header("mcp-session-id")
            .ok_or_else(|| std::io::Error::other(format!("no session (HTTP {})", reply.status)))?
            .to_string();
        let mut session = McpSession {
            stream,
            host,
            token: token.to_string(),
            id,
            next: 1,
        };
        let note = json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
        session.post(&note)?;
        Ok(session)
    }

    /// POST `message` in this session.
    pub fn post(&mut self, message: &Value) -> std::io::Result<Reply> {
        let auth = format!("Bearer {}", self.token);
        request(
            &mut self.stream,
            "POST",
            &self.host,
            &[
                ("Authorization", &auth),
                ("Content-Type", "application/json"),
                ("Accept", "application/json, text/event-stream"),
                ("Mcp-Session-Id", &self.id),
                ("MCP-Protocol-Version", "2025-06-18"),
            ],
            &message.to_string(),
        )
    }

    /// Call `method` and return its response message, or the HTTP status it failed with.
    pub fn call(&mut self, method: &str, params: Value) -> Result<Value, u16> {
        self.next += 1;
        let id = self.next;
        let message = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
        let reply = self.post(&message).map_err(|_| 0u16)?;
        if reply.status != 200 {
            return Err(reply.status);
        }
        reply
            .messages()
            .into_iter()
            .find(|m| m["id"] == json!(id))
            .ok_or(reply.status)
    }
}
