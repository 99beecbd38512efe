//! The credentials of remote MCP servers that need a login: kept in `connections.toml` beside
//! the URL they were got for ([`Credentials`], rmcp's credential store), and the authorization
//! manager a connection takes its tokens from (`manager`). Logging in (`yep mcp login`) is
//! `yep_serve::oauth`.
//!
//! The tokens are secrets: they are used for that URL only, never shown, logged or sent
//! elsewhere.

use crate::store::Home;
use rmcp::transport::auth::{AuthError, AuthorizationManager, CredentialStore, StoredCredentials};

/// The credentials of MCP server `name` at `url`, kept in the home's `connections.toml`.
#[derive(Clone)]
pub struct Credentials {
    home: Home,
    name: String,
    url: String,
}

impl Credentials {
    pub fn new(home: &Home, name: &str, url: &str) -> Credentials {
        Credentials {
            home: home.clone(),
            name: name.to_string(),
            url: url.to_string(),
        }
    }

    /// Those kept for this server at this URL.
    pub fn stored(&self) -> Option<StoredCredentials> {
        let (url, json) = crate::store::mcp::oauth_credentials(&self.home, &self.name).ok()??;
        (url == self.url)
            .then(|| serde_json::from_str(&json).ok())
            .flatten()
    }

    /// Whether a login is kept for this server at this URL.
    pub fn logged_in(&self) -> bool {
        self.stored().is_some_and(|c| c.token_response.is_some())
    }
}

fn store_error(e: impl std::fmt::Display) -> AuthError {
    AuthError::InternalError(format!("the credential store failed: {e}"))
}

#[async_trait::async_trait]
impl CredentialStore for Credentials {
    async fn load(&self) -> Result<Option<StoredCredentials>, AuthError> {
        let this = self.clone();
        tokio::task::spawn_blocking(move || this.stored())
            .await
            .map_err(store_error)
    }

    async fn save(&self, credentials: StoredCredentials) -> Result<(), AuthError> {
        let json = serde_json::to_string(&credentials).map_err(store_error)?;
        let this = self.clone();
        tokio::task::spawn_blocking(move || {
            crate::store::mcp::set_oauth_credentials(&this.home, &this.name, &this.url, &json)
        })
        .await
        .map_err(store_error)?
        .map_err(store_error)
    }

    async fn clear(&self) -> Result<(), AuthError> {
        let this = self.clone();
        tokio::task::spawn_blocking(move || {
            crate::store::mcp::clear_oauth_credentials(&this.home, &this.name)
        })
        .await
        .map_err(store_error)?
        .map(|_| ())
        .map_err(store_error)
    }
}

/// reqwest is built without a TLS provider of its own: ring, installed once for the process
/// (an embedder's own choice, installed first, stands).
pub fn tls() {
    let _ = rustls::crypto::ring::default_provider().install_default();
}

/// An authorization manager over the credentials kept for `name` at `url`, ready to give
/// tokens (refreshing them as they run out); `None` when no login is kept.
pub(crate) async fn manager(
    home: &Home,
    name: &str,
    url: &str,
) -> Result<Option<AuthorizationManager>, AuthError> {
    let credentials = Credentials::new(home, name, url);
    if !credentials.logged_in() {
        return Ok(None);
    }
    tls();
    let mut manager = AuthorizationManager::new(url).await?;
    manager.set_credential_store(credentials);
    Ok(manager.initialize_from_store().await?.then_some(manager))
}
