//! OAuth for remote MCP servers (`yep mcp login`), on rmcp's auth support: discovery
//! through protected-resource and authorization-server metadata, client registration
//! (pre-registered, a client metadata document, or dynamic), the authorization code with
//! PKCE and a loopback redirect, refresh, and scope step-up.
//!
//! The tokens are secrets: they live in `connections.toml` (owner-only) beside the URL they
//! were got for, and are used for that URL only, never shown, logged or sent elsewhere.

use std::future::Future;
use std::pin::Pin;
use std::time::Duration;

use rmcp::transport::auth::{AuthError, AuthorizationManager, AuthorizationRequest, OAuthState};
use yep_host::dialect::mcp::credentials::{Credentials, tls};
use yep_host::store::Home;

/// Why a login failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum LoginError {
    #[error("{0}")]
    Auth(String),
    #[error("the authorization server said no: {0}")]
    Denied(String),
    #[error("no answer came back to {redirect} within {} s (was the page opened and approved?)", .waited.as_secs())]
    NoCallback { redirect: String, waited: Duration },
    #[error("could not open the page: {0}")]
    Browser(std::io::Error),
    #[error("{0}")]
    Io(#[from] std::io::Error),
}

impl From<AuthError> for LoginError {
    fn from(e: AuthError) -> Self {
        LoginError::Auth(yep_host::text::escape(&e.to_string()).into_owned())
    }
}

/// How a login page is opened: the user's browser (`yep mcp login`), or a test's client.
pub trait Browser: Send + Sync {
    /// Open `url`, whose answer comes back to the loopback redirect.
    fn open<'a>(
        &'a self,
        url: &'a str,
    ) -> Pin<Box<dyn Future<Output = std::io::Result<()>> + Send + 'a>>;
}

/// What a login asks for beyond what discovery finds.
#[derive(Debug, Clone)]
pub struct LoginOptions {
    /// Scopes to ask for; none: as the server's challenge or metadata suggest.
    pub scopes: Vec<String>,
    /// The server's `WWW-Authenticate` challenge, when one was heard (it names the scope and
    /// where the metadata is).
    pub challenge: Option<String>,
    /// A client registered beforehand with the authorization server, and its secret.
    pub client_id: Option<String>,
    pub client_secret: Option<String>,
    /// A client metadata document URL (used when the server supports them).
    pub client_metadata_url: Option<String>,
    /// How long to wait for the page's answer (5 minutes unless set).
    pub wait: Duration,
}

impl Default for LoginOptions {
    fn default() -> Self {
        LoginOptions {
            scopes: Vec::new(),
            challenge: None,
            client_id: None,
            client_secret: None,
            client_metadata_url: None,
            wait: Duration::from_secs(300),
        }
    }
}

/// The `WWW-Authenticate` challenge `url` answers without a token, if it wants a login: to
/// `initialize`, or, where only that is open to all, to `tools/list`.
pub async fn challenge(url: &str) -> Option<String> {
    tls();
    let client = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .timeout(Duration::from_secs(30))
        .build()
        .ok()?;
    let initialize = serde_json::json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {},
        "clientInfo": {"name": "yep", "version": env!("CARGO_PKG_VERSION")}}});
    let list = serde_json::json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}});
    for request in [initialize, list] {
        let answer = client
            .post(url)
            .header("accept", "application/json, text/event-stream")
            .header("content-type", "application/json")
            .header("mcp-protocol-version", "2025-11-25")
            .body(request.to_string())
            .send()
            .await
            .ok()?;
        if answer.status() == reqwest::StatusCode::UNAUTHORIZED {
            return answer
                .headers()
                .get(reqwest::header::WWW_AUTHENTICATE)
                .and_then(|v| v.to_str().ok())
                .map(String::from);
        }
    }
    None
}

/// Log in to MCP server `name` at `url`: discover its authorization server, register or
/// name the client, open the authorization page through `browser`, take the code at a
/// loopback redirect and exchange it (PKCE). The credentials are kept in the home. The
/// scopes granted.
pub async fn login(
    home: &Home,
    name: &str,
    url: &str,
    browser: &dyn Browser,
    opts: LoginOptions,
) -> Result<Vec<String>, LoginError> {
    tls();
    let listener = tokio::net::TcpListener::bind(("127.0.0.1", 0)).await?;
    let port = listener.local_addr()?.port();
    let redirect = format!("http://127.0.0.1:{port}/callback");
    let credentials = Credentials::new(home, name, url);
    // Scopes asked for before and still wanted (a step-up asks for them and more).
    let mut scopes = credentials
        .stored()
        .map(|c| c.granted_scopes)
        .unwrap_or_default();
    // And what the server's challenges name: this one, and the last refusal for want of
    // scope (a step-up's `insufficient_scope`).
    let refused = yep_host::store::mcp::oauth_challenge(home, name);
    let challenged: Vec<String> = [opts.challenge.as_deref(), refused.as_deref()]
        .into_iter()
        .flatten()
        .filter_map(|c| {
            let base = reqwest::Url::parse(url).ok()?;
            rmcp::transport::auth::WWWAuthenticateParams::parse(c, &base).scope
        })
        .collect();
    let wanted = challenged
        .iter()
        .flat_map(|s| s.split_whitespace().map(String::from))
        .chain(opts.scopes.iter().cloned());
    for scope in wanted {
        if !scopes.contains(&scope) {
            scopes.push(scope);
        }
    }
    let mut manager = AuthorizationManager::new(url).await?;
    manager.set_credential_store(credentials);
    let mut state = OAuthState::Unauthorized(manager);
    let mut request = AuthorizationRequest::new(&redirect).with_client_name("yep");
    request = match scopes.is_empty() {
        true => request.with_initial_scope_selection(),
        false => request.with_scopes(scopes.iter().map(String::as_str)),
    };
    if let Some(challenge) = &opts.challenge {
        request = request.with_challenge(challenge.as_str());
    }
    if let Some(id) = &opts.client_id {
        request = request.with_preregistered_client(id.as_str());
        if let Some(secret) = &opts.client_secret {
            request = request.with_client_secret(secret.as_str());
        }
    }
    if let Some(document) = &opts.client_metadata_url {
        request = request.with_client_metadata_url(document.as_str());
    }
    state.start_authorization(request).await?;
    let page = state.get_authorization_url().await?;
    // The page is opened while the redirect is awaited: its answer may come before `open`
    // returns (a client that follows the redirect itself).
    // Only an answer that carries the state the page was opened with is this login's.
    let expected = reqwest::Url::parse(&page).ok().and_then(|page| {
        page.query_pairs()
            .find_map(|(k, v)| (k == "state").then(|| v.into_owned()))
    });
    let (opened, answered) = tokio::join!(browser.open(&page), async {
        tokio::time::timeout(opts.wait, callback(&listener, expected.as_deref())).await
    });
    opened.map_err(LoginError::Browser)?;
    let query = match answered {
        Ok(query) => query?,
        Err(_) => {
            return Err(LoginError::NoCallback {
                redirect,
                waited: opts.wait,
            });
        }
    };
    let params: Vec<(String, String)> = url_query(&query);
    if let Some((_, error)) = params.iter().find(|(k, _)| k == "error") {
        let about = params
            .iter()
            .find(|(k, _)| k == "error_description")
            .map(|(_, v)| format!(": {v}"))
            .unwrap_or_default();
        return Err(LoginError::Denied(
            yep_host::text::escape(&format!("{error}{about}")).into_owned(),
        ));
    }
    state
        .handle_callback_url(&format!("{redirect}?{query}"))
        .await?;
    let granted = Credentials::new(home, name, url)
        .stored()
        .map(|c| c.granted_scopes)
        .unwrap_or_default();
    Ok(granted)
}

/// How long one connection to the loopback redirect has to send its request line.
const CALLBACK_READ_TIMEOUT: Duration = Duration::from_secs(3);

/// The most connections to the loopback redirect served at once; past it, new ones are
/// closed unanswered.
const MAX_CALLBACK_CONNECTIONS: usize = 16;

/// The query of the first request to come to `listener`'s `/callback` with the `state` the
/// page was opened with (`expected`; any when the page had none), answered with a page that
/// says the login can be closed. Connections are served concurrently, each given
/// [`CALLBACK_READ_TIMEOUT`] to ask: one that idles, asks for another path or carries another
/// state is answered or dropped, and the login goes on waiting.
async fn callback(
    listener: &tokio::net::TcpListener,
    expected: Option<&str>,
) -> Result<String, LoginError> {
    let (found, mut answers) = tokio::sync::mpsc::channel::<String>(1);
    // Dropped on return: the connections still being served are closed.
    let mut serving = tokio::task::JoinSet::new();
    loop {
        tokio::select! {
            Some(query) = answers.recv() => return Ok(query),
            Some(_) = serving.join_next(), if !serving.is_empty() => {}
            accepted = listener.accept() => {
                let (stream, _) = accepted?;
                if serving.len() >= MAX_CALLBACK_CONNECTIONS {
                    continue;
                }
                let expected = expected.map(String::from);
                let found = found.clone();
                serving.spawn(async move {
                    if let Some(query) = serve_callback(stream, expected.as_deref()).await {
                        let _ = found.send(query).await;
                    }
                });
            }
        }
    }
}

/// Answer one connection to the loopback redirect; the query when it is this login's
/// callback.
async fn serve_callback(stream: tokio::net::TcpStream, expected: Option<&str>) -> Option<String> {
    use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
    let mut reader = BufReader::new(stream);
    let mut line = String::new();
    // A request line is short; a peer that sends more is not the browser.
    let read = tokio::time::timeout(
        CALLBACK_READ_TIMEOUT,
        (&mut reader).take(8192).read_line(&mut line),
    )
    .await
    .ok()?
    .ok()?;
    let target = line
        .split_whitespace()
        .nth(1)
        .unwrap_or_default()
        .to_string();
    let mut stream = reader.into_inner();
    let answer = |status: &str, body: &str| {
        format!(
            "HTTP/1.1 {status}\r\ncontent-type: text/plain; charset=utf-8\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
            body.len()
        )
    };
    let Some(query) = target.strip_prefix("/callback?").filter(|_| read > 0) else {
        let _ = stream
            .write_all(answer("404 Not Found", "").as_bytes())
            .await;
        return None;
    };
    let state = url_query(query)
        .into_iter()
        .find_map(|(k, v)| (k == "state").then_some(v));
    if expected.is_some_and(|expected| state.as_deref() != Some(expected)) {
        let body = "yep: this answer is not for the login yep is waiting for (its state does not match); the login goes on waiting.\n";
        let _ = stream
            .write_all(answer("400 Bad Request", body).as_bytes())
            .await;
        return None;
    }
    let body = "yep: the login is done; this page can be closed.\n";
    let _ = stream.write_all(answer("200 OK", body).as_bytes()).await;
    Some(query.to_string())
}

/// `k=v&…`, percent-decoded.
fn url_query(query: &str) -> Vec<(String, String)> {
    reqwest::Url::parse(&format!("http://127.0.0.1/?{query}"))
        .map(|u| {
            u.query_pairs()
                .map(|(k, v)| (k.into_owned(), v.into_owned()))
                .collect()
        })
        .unwrap_or_default()
}
