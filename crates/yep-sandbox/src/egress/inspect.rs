//! What the proxy does with a request it can read (plain HTTP, or inside TLS it terminates):
//! check it against the host's request rules, refuse a placeholder sent where its secret
//! does not belong, and put the brokered secrets that do belong into it.

use super::rules::{Reason, Rule, parse_rule};
use super::*;

pub use yep_store::broker::Broker;

/// A brokered secret as the proxy matches it.
pub(super) struct Held {
    field: String,
    placeholder: String,
    value: String,
    hosts: Vec<Rule>,
    /// The header to set, and its value with the secret in it; `None` swaps the placeholder
    /// where it is.
    header: Option<(HeaderName, HeaderValue)>,
}

impl std::fmt::Debug for Held {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Held").field("field", &self.field).finish()
    }
}

impl Held {
    /// `brokered` as the proxy holds it; `None` (with a warning) when its binding does not
    /// read, or its value cannot be a header's: then nothing carries it anywhere.
    pub(super) fn of(package: &str, brokered: &yep_store::broker::Brokered) -> Option<Held> {
        let b = &brokered.binding;
        let hosts: Option<Vec<Rule>> = b.hosts.iter().map(|h| parse_rule(h)).collect();
        let value = brokered.value.expose().to_string();
        let header = match &b.header {
            None => None,
            Some(name) => {
                let text = b
                    .format
                    .as_deref()
                    .unwrap_or("{}")
                    .replacen("{}", &value, 1);
                match (
                    HeaderName::from_bytes(name.as_bytes()),
                    HeaderValue::from_str(&text),
                ) {
                    (Ok(name), Ok(mut value)) => {
                        value.set_sensitive(true);
                        Some((name, value))
                    }
                    _ => {
                        tracing::warn!(
                            "egress proxy of {}: the brokered secret `{}` makes no valid {} header (a control character in it?); it goes nowhere",
                            shown(package),
                            shown(&brokered.field),
                            shown(name)
                        );
                        return None;
                    }
                }
            }
        };
        let Some(hosts) = hosts.filter(|h| !h.is_empty()) else {
            tracing::warn!(
                "egress proxy of {}: the brokered secret `{}` names no host it can match; it goes nowhere",
                shown(package),
                shown(&brokered.field)
            );
            return None;
        };
        Some(Held {
            field: brokered.field.clone(),
            placeholder: brokered.placeholder.clone(),
            value,
            hosts,
            header,
        })
    }

    /// Its field's name.
    pub(super) fn field(&self) -> &str {
        &self.field
    }

    /// Whether it belongs to `host:port`.
    pub(super) fn belongs_to(&self, host: &str, port: u16) -> bool {
        self.hosts.iter().any(|r| r.matches(host, port))
    }
}

/// Check a request to `host:port` and put into it the secrets that belong there: the names
/// of the secrets put in, or what refused it.
pub(super) fn vet(
    shared: &Shared,
    host: &str,
    port: u16,
    parts: &mut http::request::Parts,
) -> Result<Vec<String>, Box<Refusal>> {
    let path = parts.uri.path().to_string();
    let refuse = |reason| Box::new(Refusal::of(&shared.package, host, port, reason));
    if let Err(rules) = shared
        .allowed
        .allows_request(host, port, parts.method.as_str(), &path)
    {
        return Err(refuse(Reason::Request {
            method: parts.method.as_str().to_string(),
            path,
            rules,
        }));
    }
    let (ours, others): (Vec<&Held>, Vec<&Held>) =
        shared.held.iter().partition(|h| h.belongs_to(host, port));
    if let Some(stray) = others.iter().find(|h| carries(parts, &h.placeholder)) {
        return Err(refuse(Reason::Placeholder {
            secret: stray.field.clone(),
        }));
    }
    let mut put = Vec::new();
    for held in ours {
        match &held.header {
            Some((name, value)) => {
                // What the client said of who it is, to this host, is not kept.
                parts.headers.remove(header::AUTHORIZATION);
                parts.headers.remove(name);
                parts.headers.insert(name.clone(), value.clone());
                put.push(held.field.clone());
            }
            None if carries(parts, &held.placeholder) => {
                swap(parts, &held.placeholder, &held.value);
                put.push(held.field.clone());
            }
            None => {}
        }
    }
    Ok(put)
}

/// Whether the request's target or a header's value holds `placeholder`.
fn carries(parts: &http::request::Parts, placeholder: &str) -> bool {
    let in_uri = parts
        .uri
        .path_and_query()
        .is_some_and(|pq| pq.as_str().contains(placeholder));
    in_uri
        || parts
            .headers
            .values()
            .any(|v| memmem(v.as_bytes(), placeholder.as_bytes()))
}

fn memmem(haystack: &[u8], needle: &[u8]) -> bool {
    haystack.windows(needle.len()).any(|w| w == needle)
}

/// Put `value` in place of `placeholder` in the request's target and headers' values. A
/// target or value the swap would make invalid is left as it was (the origin then sees the
/// placeholder, not the secret).
fn swap(parts: &mut http::request::Parts, placeholder: &str, value: &str) {
    if let Some(pq) = parts.uri.path_and_query()
        && pq.as_str().contains(placeholder)
    {
        let mut uri = http::uri::Parts::from(parts.uri.clone());
        if let Ok(swapped) = pq.as_str().replace(placeholder, value).parse() {
            uri.path_and_query = Some(swapped);
            if let Ok(uri) = http::Uri::from_parts(uri) {
                parts.uri = uri;
            }
        }
    }
    for v in parts.headers.values_mut() {
        let Ok(text) = v.to_str() else { continue };
        if text.contains(placeholder)
            && let Ok(mut swapped) = HeaderValue::from_str(&text.replace(placeholder, value))
        {
            swapped.set_sensitive(true);
            *v = swapped;
        }
    }
}
