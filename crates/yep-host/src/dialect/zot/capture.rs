//! The zot dialect for a run that reads what an extension registers (at install, and in
//! `yep doctor`): [`Capture`] keeps each handshake's registrations, in the store's terms.

use super::{Registrations, Zot, open};
use crate::capability::Events;
use crate::dialect::{Dialect, HandshakeError, Hello, Peer, PeerFuture, Streams};
use crate::manifest::{CommandDef, ToolDef};
use crate::rpc::ConnectionOptions;
use crate::store::zot;
use serde_json::json;
use std::sync::{Arc, Mutex};

/// The zot dialect (of an extension not pinned yet), keeping what the extension registered
/// in its handshake.
#[derive(Default)]
pub struct Capture {
    zot: Zot,
    seen: Arc<Mutex<Option<Registrations>>>,
}

impl Capture {
    /// `zot`, keeping what each handshake registered.
    pub fn new(zot: Zot) -> Capture {
        Capture {
            zot,
            seen: Arc::default(),
        }
    }

    /// What the last handshake registered.
    pub fn take(&self) -> Option<Registrations> {
        self.seen.lock().unwrap_or_else(|p| p.into_inner()).take()
    }
}

impl Dialect for Capture {
    fn name(&self) -> &'static str {
        self.zot.name()
    }

    fn command_key(&self) -> &'static str {
        self.zot.command_key()
    }

    fn sandbox_learnable(&self) -> bool {
        self.zot.sandbox_learnable()
    }

    fn workspace_files(&self) -> Option<&'static str> {
        self.zot.workspace_files()
    }

    fn open(
        &self,
        streams: Streams,
        hello: Hello,
        events: Arc<dyn Events>,
        opts: ConnectionOptions,
    ) -> PeerFuture<'static, Result<Arc<dyn Peer>, HandshakeError>> {
        let seen = Arc::clone(&self.seen);
        let pin = self.zot.pin.clone();
        Box::pin(async move {
            let peer = open(streams, hello, pin, events, opts).await?;
            *seen.lock().unwrap_or_else(|p| p.into_inner()) = Some(peer.registrations());
            Ok(peer as Arc<dyn Peer>)
        })
    }
}

/// What a run registered, in the store's terms.
pub(crate) fn pinned(seen: Registrations) -> zot::Registrations {
    let pin = seen.pin();
    zot::Registrations {
        tools: seen
            .tools
            .into_iter()
            .map(|t| ToolDef {
                name: t.name,
                description: t.description.unwrap_or_default(),
                schema: t.schema.unwrap_or_else(|| json!({"type": "object"})),
                // zot's `direct` tools are loaded up front; its deferred ones are searched.
                never_defer: !t.deferred,
                output_schema: t.output_schema,
            })
            .collect(),
        commands: seen
            .commands
            .into_iter()
            .map(|c| CommandDef {
                name: c.name,
                description: c.description,
                args: Vec::new(),
            })
            .collect(),
        pin,
    }
}
