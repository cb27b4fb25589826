//! Approvals of callers who cannot be asked in the call itself (tenants of
//! the HTTP API): each question becomes a pending approval, published on
//! the approvals API (`GET /v1/approvals`, `POST /v1/approvals/{id}`), as a
//! server-sent event, and to the tenant's webhook, and the call waits for
//! the first answer (or `approvals.timeout`, which denies).

use std::collections::HashMap;
use std::hash::{BuildHasher as _, RandomState};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use futures::future::BoxFuture;
use serde_json::{Value, json};
use tokio::sync::{broadcast, oneshot};

use super::request::{Approval, ApprovalRequest, Approver};
use super::webhook::Webhook;

/// The approvals waiting for an answer, of every tenant of a server.
#[derive(Debug)]
pub struct Pending {
    table: Mutex<HashMap<String, Entry>>,
    events: broadcast::Sender<Event>,
    counter: std::sync::atomic::AtomicU64,
    /// Randomly keyed hashes (seeded by the OS) that make ids unguessable.
    keys: [RandomState; 2],
}

#[derive(Debug)]
struct Entry {
    /// Order of asking.
    seq: u64,
    tenant: Option<String>,
    view: Value,
    answer: oneshot::Sender<Approval>,
}

/// Something that happened to a pending approval, for event streams.
#[derive(Debug, Clone)]
pub struct Event {
    /// The tenant it belongs to.
    pub tenant: Option<String>,
    /// `approval` (new, with the request) or `resolved`.
    pub kind: &'static str,
    /// The JSON sent.
    pub data: Value,
}

/// Why an answer was not taken.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AnswerError {
    /// No pending approval has that id for this caller (unknown, answered,
    /// timed out, or another tenant's).
    NotFound,
}

impl Default for Pending {
    fn default() -> Self {
        Self {
            table: Mutex::default(),
            events: broadcast::channel(256).0,
            counter: Default::default(),
            keys: [RandomState::new(), RandomState::new()],
        }
    }
}

impl Pending {
    /// The pending approvals `tenant` may see (all of them when `None` is
    /// an approver's view).
    pub fn list(&self, tenant: Option<&str>, everyone: bool) -> Vec<Value> {
        let table = self.table.lock().unwrap_or_else(|e| e.into_inner());
        let mut entries: Vec<&Entry> = table
            .values()
            .filter(|entry| everyone || entry.tenant.as_deref() == tenant)
            .collect();
        entries.sort_by_key(|entry| entry.seq);
        entries.iter().map(|entry| entry.view.clone()).collect()
    }

    /// Answers approval `id` for `tenant` (any tenant's when `everyone`).
    pub fn answer(
        &self,
        id: &str,
        tenant: Option<&str>,
        everyone: bool,
        answer: Approval,
    ) -> Result<(), AnswerError> {
        let entry = {
            let mut table = self.table.lock().unwrap_or_else(|e| e.into_inner());
            match table.get(id) {
                Some(entry) if everyone || entry.tenant.as_deref() == tenant => table.remove(id),
                _ => None,
            }
        };
        let entry = entry.ok_or(AnswerError::NotFound)?;
        let _ = entry.answer.send(answer);
        Ok(())
    }

    /// New and resolved approvals, as they happen.
    pub fn subscribe(&self) -> broadcast::Receiver<Event> {
        self.events.subscribe()
    }

    /// The next sequence number and an id nobody can guess from another.
    fn new_id(&self) -> (u64, String) {
        let n = self
            .counter
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let [a, b] = &self.keys;
        let id = format!("{:016x}{:016x}", a.hash_one(n), b.hash_one(n));
        (n, id)
    }

    /// Publishes `request` and waits for its answer. Dropping the future
    /// (the timeout) takes the approval off the list.
    async fn ask(
        self: Arc<Self>,
        request: &ApprovalRequest,
        timeout: Duration,
        webhook: Option<&Webhook>,
    ) -> Approval {
        let (seq, id) = self.new_id();
        let created = SystemTime::now()
            .duration_since(SystemTime::UNIX_EPOCH)
            .unwrap_or_default();
        let view = view(&id, request, created, timeout);
        let (sender, receiver) = oneshot::channel();
        self.table.lock().unwrap_or_else(|e| e.into_inner()).insert(
            id.clone(),
            Entry {
                seq,
                tenant: request.tenant.clone(),
                view: view.clone(),
                answer: sender,
            },
        );
        let _ = self.events.send(Event {
            tenant: request.tenant.clone(),
            kind: "approval",
            data: view.clone(),
        });
        let guard = Withdraw {
            pending: &self,
            id: &id,
            tenant: request.tenant.clone(),
        };
        let from_api = async { receiver.await.unwrap_or(Approval::Deny) };
        let answer = match webhook {
            Some(webhook) => {
                tokio::select! {
                    answer = from_api => answer,
                    Some(answer) = webhook.deliver(&view) => answer,
                }
            }
            None => from_api.await,
        };
        drop(guard);
        answer
    }
}

/// Takes an approval off the list and says it is resolved, however the wait
/// ends.
struct Withdraw<'a> {
    pending: &'a Pending,
    id: &'a str,
    tenant: Option<String>,
}

impl Drop for Withdraw<'_> {
    fn drop(&mut self) {
        self.pending
            .table
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(self.id);
        let _ = self.pending.events.send(Event {
            tenant: self.tenant.clone(),
            kind: "resolved",
            data: json!({ "id": self.id }),
        });
    }
}

/// The JSON an approver sees of a request: the request, its id, and when
/// it expires.
fn view(id: &str, request: &ApprovalRequest, created: Duration, timeout: Duration) -> Value {
    let mut view = request.to_json();
    view["id"] = json!(id);
    view["created"] = json!(created.as_secs_f64());
    view["expires"] = json!((created + timeout).as_secs_f64());
    view["answer"] = json!(format!(
        "POST /v1/approvals/{id} with {{\"decision\": \"once\" | \"session\" | \"always\" | \"deny\"}}"
    ));
    view
}

/// Asks through [`Pending`] (and the tenant's webhook, if it has one).
#[derive(Debug, Clone)]
pub struct PendingApprover {
    /// Where the question is published.
    pub pending: Arc<Pending>,
    /// The tenant's webhook.
    pub webhook: Option<Arc<Webhook>>,
    /// How long an approval stays listed (`approvals.timeout`).
    pub timeout: Duration,
}

impl Approver for PendingApprover {
    fn approve<'a>(&'a self, request: &'a ApprovalRequest) -> BoxFuture<'a, Approval> {
        Box::pin(
            self.pending
                .clone()
                .ask(request, self.timeout, self.webhook.as_deref()),
        )
    }

    fn how_to_allow(&self) -> &str {
        "the approver denied it; answer `once`, `session` or `always` on POST /v1/approvals/{id} \
         (or through the tenant's approvals webhook) to allow it"
    }
}
