//! The clients connected to one bridge: where status, questions and list changes go, and
//! whose calls are in flight.
//!
//! A question carries no call id on any wire (a YEP `ui/ask` names no call), so it goes to a
//! client only when exactly one client can have caused it; otherwise it is cancelled with
//! the reason. Status goes out through one coalescing queue per client: the latest status of
//! each extension wins, so a client that does not read costs one entry per extension.

use rmcp::service::{Peer, RoleServer};
use serde_json::json;
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use yep_host::capability::{Answer, Question};
use yep_host::runtime::{AskSink, StatusEntry, StatusSink};

/// Which client a bridge serves: one per MCP session ([`super::Bridge::for_client`]).
pub(crate) type ClientId = u64;

/// A new client id, unique in this process.
pub(crate) fn next_client() -> ClientId {
    static NEXT: AtomicU64 = AtomicU64::new(1);
    NEXT.fetch_add(1, Ordering::Relaxed)
}

/// The clients connected to one bridge (see the module docs).
#[derive(Clone, Default)]
pub struct Clients(Arc<Mutex<Connected>>);

#[derive(Default)]
struct Connected {
    /// In the order they connected.
    clients: Vec<Client>,
    /// Calls in flight: their number, the extension (or MCP server) whose tool or command
    /// runs, the client that made it, and, for a 2026-07-28 client, where its questions go
    /// (into the call's answer: [`super::rounds`]).
    calls: Vec<(u64, String, ClientId, Option<Questions>)>,
    next_call: u64,
}

/// Where the questions of a 2026-07-28 client's call go.
pub(crate) type Questions = tokio::sync::mpsc::Sender<super::rounds::Asked>;

struct Client {
    id: ClientId,
    peer: Peer<RoleServer>,
    status: Arc<StatusQueue>,
}

impl Connected {
    /// Drop the clients whose transport closed; their status queues stop.
    fn prune(&mut self) {
        self.clients.retain(|c| {
            let open = !c.peer.is_transport_closed();
            if !open {
                c.status.close();
            }
            open
        });
    }

    fn peer(&self, id: ClientId) -> Option<&Client> {
        self.clients.iter().find(|c| c.id == id)
    }

    /// The distinct clients with a call in flight, of `extension` only when given.
    fn callers(&self, extension: Option<&str>) -> Vec<ClientId> {
        let mut ids: Vec<ClientId> = Vec::new();
        for (_, e, id, _) in &self.calls {
            if extension.is_none_or(|x| x == e) && !ids.contains(id) {
                ids.push(*id);
            }
        }
        ids
    }

    /// Where client `id`'s questions of `extension` go when they ride its calls' answers:
    /// its call of that extension's, else any call of its that takes them.
    fn asking(&self, id: ClientId, extension: &str) -> Option<Questions> {
        let calls = || self.calls.iter().filter(|c| c.2 == id && c.3.is_some());
        let call = calls()
            .find(|c| c.1 == extension)
            .or_else(|| calls().next())?;
        call.3.clone()
    }
}

/// One call in flight through the bridge, from [`Clients::calling`]; dropped when it ends.
pub(crate) struct InFlight {
    clients: Clients,
    call: u64,
}

impl Drop for InFlight {
    fn drop(&mut self) {
        self.clients.lock().calls.retain(|(n, ..)| *n != self.call);
    }
}

/// Why a question is asked of nobody, or of one client (see [`Clients::asked`]).
#[derive(Debug, PartialEq)]
enum Askee {
    /// The one client whose call the question belongs to.
    Caller(ClientId),
    /// No call is in flight and this is the only client connected.
    Only(ClientId),
    /// Nobody: the reason.
    Nobody(&'static str),
}

/// Why a question is cancelled when clients of more than one session have calls in flight
/// that it may belong to: the wire does not say whose call asked, and a guess could let one
/// client's answer decide another's call.
pub const AMBIGUOUS_CALLER: &str = "more than one MCP client has a call in flight that this question may belong to, and the question does not say which: cancelled rather than asked of the wrong one";

/// Why a question outside any call is cancelled when several clients are connected.
pub const NO_CALLER: &str = "this question belongs to no call in flight and several MCP clients are connected: cancelled rather than asked of one of them";

/// Why a question during a call is cancelled when its client takes none.
pub const NO_ELICITATION_CALLER: &str =
    "the MCP client that made this call does not take questions (it declared no elicitation)";

/// Why a question outside any call is cancelled when no client takes one.
pub const NO_ELICITATION: &str =
    "no connected MCP client takes questions (none declared elicitation)";

/// What a secret question is answered with (cancelled), and what the user is told.
pub const SECRET_REFUSED: &str = "a secret is never asked over MCP (it would pass through the client): set it with `yep secret set <extension> <field>`";

impl Clients {
    fn lock(&self) -> std::sync::MutexGuard<'_, Connected> {
        self.0.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Client `id` finished its handshake as `peer`: its status queue starts.
    pub(crate) fn add(&self, id: ClientId, peer: Peer<RoleServer>) {
        let status = StatusQueue::start(peer.clone());
        let mut connected = self.lock();
        connected.prune();
        connected.clients.push(Client { id, peer, status });
    }

    /// Client `id` asked for `notifications/message` of `level` and more severe
    /// (`logging/setLevel`): statuses, sent at `info`, stop below it and resume at it.
    // MCP's logging is deprecated in its next version, but is what clients use today.
    #[allow(deprecated)]
    pub(crate) fn set_level(&self, id: ClientId, level: rmcp::model::LoggingLevel) {
        use rmcp::model::LoggingLevel;
        let quiet = !matches!(level, LoggingLevel::Debug | LoggingLevel::Info);
        let mut connected = self.lock();
        connected.prune();
        if let Some(client) = connected.peer(id) {
            client.status.quiet.store(quiet, Ordering::Release);
        }
    }

    fn all(&self) -> Vec<Peer<RoleServer>> {
        let mut connected = self.lock();
        connected.prune();
        connected.clients.iter().map(|c| c.peer.clone()).collect()
    }

    /// How many clients are connected (their transport open).
    pub fn len(&self) -> usize {
        let mut connected = self.lock();
        connected.prune();
        connected.clients.len()
    }

    /// Whether no client is connected.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Note that client `id` is calling a tool (or running a command) of `extension`, until
    /// the guard drops. `questions`: where the call's questions go, when they ride its answer.
    pub(crate) fn calling(
        &self,
        extension: String,
        id: ClientId,
        questions: Option<Questions>,
    ) -> InFlight {
        let mut connected = self.lock();
        connected.next_call += 1;
        let call = connected.next_call;
        connected.calls.push((call, extension, id, questions));
        InFlight {
            clients: self.clone(),
            call,
        }
    }

    /// Who `extension`'s question goes to. The clients calling its tools now, if that is
    /// one client; else, when none is, the clients with any call in flight (a hook asks
    /// during another's call), if that is one client; else, with no call in flight at all,
    /// the one connected client. Anything else is a guess, and is refused.
    fn askee(&self, extension: &str) -> Askee {
        let mut connected = self.lock();
        connected.prune();
        for callers in [connected.callers(Some(extension)), connected.callers(None)] {
            match callers.as_slice() {
                [] => continue,
                [one] => return Askee::Caller(*one),
                _ => return Askee::Nobody(AMBIGUOUS_CALLER),
            }
        }
        match connected.clients.as_slice() {
            [] => Askee::Nobody(NO_ELICITATION),
            [one] => Askee::Only(one.id),
            _ => Askee::Nobody(NO_CALLER),
        }
    }

    /// Tell every client its tool and prompt lists changed.
    pub async fn lists_changed(&self) {
        for peer in self.all() {
            let _ = peer.notify_tool_list_changed().await;
            let _ = peer.notify_prompt_list_changed().await;
        }
    }
}

/// One client's pending status changes: the latest per extension (`None` is cleared), sent
/// by one task per client, in extension-name order. A client that reads
/// nothing holds one entry per extension, however fast the extensions change.
struct StatusQueue {
    latest: Mutex<BTreeMap<String, Option<String>>>,
    wake: tokio::sync::Notify,
    closed: AtomicBool,
    /// The client asked (`logging/setLevel`) only for messages more severe than `info`, the
    /// level statuses are sent at.
    quiet: AtomicBool,
}

impl StatusQueue {
    fn start(peer: Peer<RoleServer>) -> Arc<Self> {
        let queue = Arc::new(StatusQueue {
            latest: Mutex::new(BTreeMap::new()),
            wake: tokio::sync::Notify::new(),
            closed: AtomicBool::new(false),
            quiet: AtomicBool::new(false),
        });
        let draining = Arc::clone(&queue);
        tokio::spawn(async move { draining.drain(peer).await });
        queue
    }

    fn push(&self, extension: &str, text: Option<String>) {
        self.latest
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(extension.to_string(), text);
        self.wake.notify_one();
    }

    fn close(&self) {
        self.closed.store(true, Ordering::Release);
        self.wake.notify_one();
    }

    // MCP's logging is deprecated in its next version, but is what clients show today.
    #[allow(deprecated)]
    async fn drain(&self, peer: Peer<RoleServer>) {
        loop {
            self.wake.notified().await;
            if self.closed.load(Ordering::Acquire) || peer.is_transport_closed() {
                return;
            }
            let batch = std::mem::take(&mut *self.latest.lock().unwrap_or_else(|p| p.into_inner()));
            if self.quiet.load(Ordering::Acquire) {
                continue;
            }
            for (extension, status) in batch {
                let data = json!({"extension": extension, "status": status});
                let params = json!({"level": "info", "logger": extension, "data": data});
                let Ok(params) = serde_json::from_value(params) else {
                    continue;
                };
                if peer.notify_logging_message(params).await.is_err() {
                    return;
                }
            }
        }
    }
}

/// Status changes as `notifications/message` (level `info`, logger the extension), through
/// each client's coalescing queue.
pub struct StatusToClients(pub Clients);

impl StatusSink for StatusToClients {
    fn status_changed(&self, extension: &str, status: Option<&StatusEntry>) {
        let text = status.map(|s| s.text.clone());
        let mut connected = self.0.lock();
        connected.prune();
        for client in &connected.clients {
            client.status.push(extension, text.clone());
        }
    }
}

/// Questions as `elicitation/create`, to the one client the question can belong to (see
/// [`Clients`]), when it declared elicitation. A secret is never asked this way: it would
/// pass through the client. A question nobody can take is cancelled, and the extension told
/// why.
pub struct AskClients(pub Clients);

impl AskSink for AskClients {
    async fn ask(&self, extension: &str, question: Question) -> Answer {
        if question.secret {
            tracing::warn!(extension, "{SECRET_REFUSED}");
            return Answer::refused(SECRET_REFUSED);
        }
        let (id, during_a_call) = match self.0.askee(extension) {
            Askee::Caller(id) => (id, true),
            Askee::Only(id) => (id, false),
            Askee::Nobody(why) => {
                tracing::warn!(extension, "{why}; cancelling: {}", question.prompt);
                return Answer::refused(why);
            }
        };
        let mut answer = json!({"type": "string", "description": question.prompt});
        if !question.options.is_empty() {
            answer["enum"] = json!(question.options);
        }
        let params = json!({
            "mode": "form",
            "message": format!("{extension}: {}", question.prompt),
            "requestedSchema": {
                "type": "object",
                "properties": {"answer": answer},
                "required": ["answer"],
            },
        });
        // A 2026-07-28 client is asked in its call's answer.
        let asking = self.0.lock().asking(id, extension);
        if let Some(questions) = asking.filter(|_| during_a_call) {
            let (answer, answered) = tokio::sync::oneshot::channel();
            let asked = super::rounds::Asked { params, answer };
            if questions.send(asked).await.is_err() {
                return Answer::cancelled();
            }
            return answered.await.unwrap_or_else(|_| Answer::cancelled());
        }
        let peer = self.0.lock().peer(id).map(|c| c.peer.clone()).filter(|p| {
            p.peer_info()
                .is_some_and(|info| info.capabilities.elicitation.is_some())
        });
        let Some(peer) = peer else {
            let why = match during_a_call {
                true => NO_ELICITATION_CALLER,
                false => NO_ELICITATION,
            };
            tracing::warn!(extension, "{why}; cancelling: {}", question.prompt);
            return Answer::refused(why);
        };
        let Ok(params) = serde_json::from_value(params) else {
            return Answer::cancelled();
        };
        match peer.create_elicitation(params).await {
            Ok(result) => {
                super::rounds::answer_of(&serde_json::to_value(&result).unwrap_or_default())
            }
            Err(e) => {
                tracing::warn!(extension, "the question could not be asked: {e}");
                Answer::refused(format!("the MCP client could not be asked: {e}"))
            }
        }
    }
}
