//! Approvals of callers who cannot be asked in the call itself (tenants of
//! the HTTP API): each question becomes a pending approval, published on
//! the approvals API (`GET /v1/approvals`, `POST /v1/approvals/{id}`), as a
//! server-sent event, and to the tenant's webhook, and the call waits for
//! the first answer (or `approvals.timeout`, which denies).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use futures::future::BoxFuture;
use serde_json::{Value, json};
use sha2::Digest as _;
use tokio::sync::{broadcast, oneshot};

use super::request::{Approval, ApprovalRequest, Approver, Subject};
use super::webhook::Webhook;

/// The approvals waiting for an answer, of every tenant of a server.
#[derive(Debug)]
pub struct Pending {
    table: Mutex<HashMap<String, Entry>>,
    events: broadcast::Sender<Event>,
    counter: std::sync::atomic::AtomicU64,
    seed: [u8; 16],
}

#[derive(Debug)]
struct Entry {
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
        let mut seed = [0u8; 16];
        let now = SystemTime::now()
            .duration_since(SystemTime::UNIX_EPOCH)
            .unwrap_or_default();
        let entropy = sha2::Sha256::digest(format!("{now:?} {} {:p}", std::process::id(), &seed));
        if let Ok(mut random) = std::fs::File::open("/dev/urandom") {
            let _ = std::io::Read::read_exact(&mut random, &mut seed);
        }
        for (byte, mix) in seed.iter_mut().zip(entropy) {
            *byte ^= mix;
        }
        Self {
            table: Mutex::default(),
            events: broadcast::channel(256).0,
            counter: Default::default(),
            seed,
        }
    }
}

impl Pending {
    /// The pending approvals `tenant` may see (all of them when `None` is
    /// an approver's view).
    pub fn list(&self, tenant: Option<&str>, everyone: bool) -> Vec<Value> {
        let table = self.table.lock().unwrap_or_else(|e| e.into_inner());
        let mut views: Vec<Value> = table
            .values()
            .filter(|entry| everyone || entry.tenant.as_deref() == tenant)
            .map(|entry| entry.view.clone())
            .collect();
        views.sort_by(|a, b| {
            a["created"]
                .as_f64()
                .partial_cmp(&b["created"].as_f64())
                .unwrap_or(std::cmp::Ordering::Equal)
        });
        views
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

    /// An id nobody can guess from another.
    fn new_id(&self) -> String {
        let n = self
            .counter
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let mut hash = sha2::Sha256::new();
        hash.update(self.seed);
        hash.update(n.to_le_bytes());
        hash.finalize()[..12]
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect()
    }

    /// Publishes `request` and waits for its answer. Dropping the future
    /// (the timeout) takes the approval off the list.
    async fn ask(
        self: Arc<Self>,
        request: &ApprovalRequest,
        timeout: Duration,
        webhook: Option<&Webhook>,
    ) -> Approval {
        let id = self.new_id();
        let created = SystemTime::now()
            .duration_since(SystemTime::UNIX_EPOCH)
            .unwrap_or_default();
        let view = view(&id, request, created, timeout);
        let (sender, receiver) = oneshot::channel();
        self.table.lock().unwrap_or_else(|e| e.into_inner()).insert(
            id.clone(),
            Entry {
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
                    Some(answer) = webhook.deliver(&view) => {
                        self.table.lock().unwrap_or_else(|e| e.into_inner()).remove(&id);
                        answer
                    }
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

/// The JSON an approver sees of a request.
fn view(id: &str, request: &ApprovalRequest, created: Duration, timeout: Duration) -> Value {
    let subject = match &request.subject {
        Subject::Permission(permission) => json!({ "permission": permission }),
        Subject::DangerousCommand {
            command, findings, ..
        } => json!({
            "command": command,
            "findings": findings
                .iter()
                .map(|(category, reason)| json!({ "category": category, "reason": reason }))
                .collect::<Vec<_>>(),
        }),
    };
    json!({
        "id": id,
        "tenant": request.tenant,
        "session": request.session,
        "tool": request.tool,
        "profile": request.profile,
        "subject": subject,
        "question": request.to_string(),
        "created": created.as_secs_f64(),
        "expires": (created + timeout).as_secs_f64(),
        "answer": format!("POST /v1/approvals/{id} with {{\"decision\": \"once\" | \"session\" | \"always\" | \"deny\"}}"),
    })
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
