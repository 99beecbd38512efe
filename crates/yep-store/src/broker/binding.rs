//! Where a brokered secret may go ([`Binding`]): data and its check only, which the manifest,
//! the consent screens and the store's bindings all read.

use crate::grants::NetEntry;
use serde::{Deserialize, Serialize};

/// Where a brokered secret may go, and how it is put into a request.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Binding {
    /// The hosts it belongs to: `api.github.com`, `*.example.com`, `example.org:8443`
    /// (without a port, 80 and 443).
    #[serde(default)]
    pub hosts: Vec<String>,
    /// A header the proxy sets on every request to those hosts, after removing any
    /// `Authorization` and any header of this name the client sent. Without one, the proxy
    /// swaps the placeholder wherever the client put it (a header's value, the URL).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub header: Option<String>,
    /// The header's value, `{}` standing for the secret (`Bearer {}`); `{}` alone by default.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub format: Option<String>,
    /// The user chose to give this secret in the environment, in the clear, though its
    /// manifest declares it brokered (`yep secret set … --in-env`): for a client that pins
    /// certificates. No hosts then.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub in_env: bool,
}

/// The most hosts one binding names.
const MAX_HOSTS: usize = 16;

impl Binding {
    /// Whether it is well formed: one to 16 host names (no address, no request
    /// rule, no `*`), a header name of token characters, and a format holding `{}` once.
    pub fn validate(&self) -> Result<(), String> {
        if self.in_env {
            return match self.hosts.is_empty() && self.header.is_none() {
                true => Ok(()),
                false => Err("a secret given in the environment names no hosts".into()),
            };
        }
        if self.hosts.is_empty() || self.hosts.len() > MAX_HOSTS {
            return Err(format!(
                "a brokered secret names 1 to {MAX_HOSTS} hosts, not {}",
                self.hosts.len()
            ));
        }
        for host in &self.hosts {
            if !matches!(
                NetEntry::parse(host),
                Some(NetEntry::Host { rule: None, .. })
            ) {
                return Err(format!(
                    "{:?} is no host name (api.github.com, *.example.com, example.org:8443)",
                    crate::text::escape(host)
                ));
            }
        }
        if let Some(header) = &self.header {
            let token = !header.is_empty()
                && header.len() <= 64
                && header
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b"-_".contains(&b));
            if !token {
                return Err(format!(
                    "{:?} is no header name",
                    crate::text::escape(header)
                ));
            }
        }
        if let Some(format) = &self.format {
            if format.matches("{}").count() != 1 || format.len() > 256 {
                return Err(format!(
                    "the format {:?} must hold `{{}}` once, where the secret goes",
                    crate::text::escape(format)
                ));
            }
            if self.header.is_none() {
                return Err("a format needs a header to put it in (--header)".into());
            }
        }
        Ok(())
    }

    /// How it reads on a consent screen or in `yep config show`:
    /// `api.github.com (as Authorization: Bearer {})`.
    pub fn describe(&self) -> String {
        let hosts = self.hosts.join(", ");
        match &self.header {
            Some(h) => format!(
                "{hosts} (as {h}: {})",
                self.format.as_deref().unwrap_or("{}")
            ),
            None => format!("{hosts} (where the placeholder is)"),
        }
    }
}
