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

/// The approvals waiting for an answer, of every tenant of a server. Each
/// tenant has its own event channel, so one tenant's flood of approvals
/// never makes another's stream miss its own.
#[derive(Debug)]
pub struct Pending {
    table: Mutex<HashMap<String, Entry>>,
    /// Each tenant's events, and (under `None` of the outer option) every
    /// tenant's, for approvers.
    channels: Mutex<HashMap<Option<Option<String>>, broadcast::Sender<Event>>>,
    /// Event streams open, by whose events they carry.
    streams: Arc<Mutex<HashMap<Option<Option<String>>, usize>>>,
    counter: std::sync::atomic::AtomicU64,
    /// Randomly keyed hashes (seeded by the OS) that make ids unguessable.
    keys: [RandomState; 2],
}

/// Events of one channel, holding one of its tenant's event streams.
#[derive(Debug)]
pub struct Subscription {
    /// The events, as they happen.
    pub events: broadcast::Receiver<Event>,
    streams: Arc<Mutex<HashMap<Option<Option<String>>, usize>>>,
    key: Option<Option<String>>,
}

impl Drop for Subscription {
    fn drop(&mut self) {
        let mut streams = self.streams.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(open) = streams.get_mut(&self.key) {
            *open -= 1;
            if *open == 0 {
                streams.remove(&self.key);
            }
        }
    }
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

/// Events a stream may fall behind by before it skips some.
const CHANNEL: usize = 256;

impl Default for Pending {
    fn default() -> Self {
        Self {
            table: Mutex::default(),
            channels: Mutex::default(),
            streams: Arc::default(),
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

    /// New and resolved approvals of `tenant` (every tenant's when
    /// `everyone`), as they happen; refused when `max` streams of the same
    /// events are open already.
    pub fn subscribe(
        &self,
        tenant: Option<&str>,
        everyone: bool,
        max: usize,
    ) -> Result<Subscription, String> {
        let key = (!everyone).then(|| tenant.map(String::from));
        {
            let mut streams = self.streams.lock().unwrap_or_else(|e| e.into_inner());
            let open = streams.entry(key.clone()).or_default();
            if *open >= max {
                let whose = match &key {
                    None => "the approver".to_string(),
                    Some(Some(tenant)) => format!("tenant {tenant:?}"),
                    Some(None) => "the local caller".to_string(),
                };
                return Err(format!(
                    "{whose} holds {open} approval event streams open, its cap of \
                     tenant_caps.event_streams = {max}; close one first"
                ));
            }
            *open += 1;
        }
        let events = self
            .channels
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .entry(key.clone())
            .or_insert_with(|| broadcast::channel(CHANNEL).0)
            .subscribe();
        Ok(Subscription {
            events,
            streams: self.streams.clone(),
            key,
        })
    }

    /// Sends `event` to its tenant's streams and to the approvers'.
    fn publish(&self, event: Event) {
        let mut channels = self.channels.lock().unwrap_or_else(|e| e.into_inner());
        let tenant = Some(event.tenant.clone());
        for key in [tenant, None] {
            // A channel nobody listens to any more goes.
            if let Some(channel) = channels.get(&key)
                && channel.send(event.clone()).is_err()
            {
                channels.remove(&key);
            }
        }
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

    /// Publishes `request` and waits for its answer; refused when its
    /// tenant has `max` approvals waiting already. Dropping the future (the
    /// timeout) takes the approval off the list.
    async fn ask(
        self: Arc<Self>,
        request: &ApprovalRequest,
        timeout: Duration,
        max: usize,
        webhook: Option<&Webhook>,
    ) -> Result<Approval, String> {
        let (seq, id) = self.new_id();
        let created = SystemTime::now()
            .duration_since(SystemTime::UNIX_EPOCH)
            .unwrap_or_default();
        let view = view(&id, request, created, timeout);
        let (sender, receiver) = oneshot::channel();
        {
            let mut table = self.table.lock().unwrap_or_else(|e| e.into_inner());
            let waiting = table
                .values()
                .filter(|entry| entry.tenant == request.tenant)
                .count();
            if waiting >= max {
                let whose = match &request.tenant {
                    Some(tenant) => format!("tenant {tenant:?}"),
                    None => "the local caller".to_string(),
                };
                return Err(format!(
                    "{whose} has {waiting} approvals waiting for an answer, its cap of \
                     tenant_caps.pending_approvals = {max}; answer or wait for those first"
                ));
            }
            table.insert(
                id.clone(),
                Entry {
                    seq,
                    tenant: request.tenant.clone(),
                    view: view.clone(),
                    answer: sender,
                },
            );
        }
        self.publish(Event {
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
        Ok(answer)
    }
}

#[cfg(test)]
impl Pending {
    /// [`Pending::ask`] of an owned request, for spawned tasks.
    async fn ask_owned(
        self: Arc<Self>,
        request: ApprovalRequest,
        max: usize,
    ) -> Result<Approval, String> {
        self.ask(&request, Duration::from_secs(60), max, None).await
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
        self.pending.publish(Event {
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
    /// Most approvals of the tenant waiting at once
    /// (`tenant_caps.pending_approvals`).
    pub max_waiting: usize,
}

impl Approver for PendingApprover {
    fn approve<'a>(&'a self, request: &'a ApprovalRequest) -> BoxFuture<'a, Approval> {
        Box::pin(async move { self.ask(request).await.unwrap_or(Approval::Deny) })
    }

    fn ask<'a>(&'a self, request: &'a ApprovalRequest) -> BoxFuture<'a, Result<Approval, String>> {
        let webhook = self.webhook.as_deref();
        let pending = self.pending.clone();
        Box::pin(pending.ask(request, self.timeout, self.max_waiting, webhook))
    }

    fn how_to_allow(&self) -> &str {
        "the approver denied it; answer `once`, `session` or `always` on POST /v1/approvals/{id} \
         (or through the tenant's approvals webhook) to allow it"
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::approval::Subject;

    fn request(tenant: &str) -> ApprovalRequest {
        ApprovalRequest {
            tool: "write".into(),
            profile: "p".into(),
            tenant: Some(tenant.into()),
            session: None,
            subject: Subject::Permission("file:write".into()),
            config_change: None,
        }
    }

    #[tokio::test]
    async fn a_tenant_waits_for_at_most_its_cap_and_another_is_asked() {
        let pending = Arc::new(Pending::default());
        let a = request("a");
        let waiting = [
            tokio::spawn(pending.clone().ask_owned(a.clone(), 2)),
            tokio::spawn(pending.clone().ask_owned(a.clone(), 2)),
        ];
        while pending.list(Some("a"), false).len() < 2 {
            tokio::task::yield_now().await;
        }
        let refused = pending
            .clone()
            .ask(&a, Duration::from_secs(60), 2, None)
            .await;
        let refused = refused.unwrap_err();
        assert!(
            refused.contains("tenant_caps.pending_approvals = 2"),
            "{refused}"
        );
        let b = tokio::spawn(pending.clone().ask_owned(request("b"), 2));
        while pending.list(Some("b"), false).is_empty() {
            tokio::task::yield_now().await;
        }
        for view in pending.list(None, true) {
            let id = view["id"].as_str().unwrap();
            pending.answer(id, None, true, Approval::Deny).unwrap();
        }
        for task in waiting.into_iter().chain([b]) {
            assert_eq!(task.await.unwrap(), Ok(Approval::Deny));
        }
    }

    #[tokio::test]
    async fn one_tenants_events_never_crowd_out_anothers() {
        let pending = Pending::default();
        let mut theirs = pending.subscribe(Some("b"), false, 1).unwrap();
        let refused = pending.subscribe(Some("b"), false, 1).unwrap_err();
        assert!(
            refused.contains("tenant_caps.event_streams = 1"),
            "{refused}"
        );
        assert!(pending.subscribe(Some("a"), false, 1).is_ok());
        let event = |tenant: &str, n: u64| Event {
            tenant: Some(tenant.into()),
            kind: "approval",
            data: json!(n),
        };
        pending.publish(event("b", 0));
        for n in 0..10 * CHANNEL as u64 {
            pending.publish(event("a", n));
        }
        let got = theirs.events.try_recv().unwrap();
        assert_eq!((got.tenant.as_deref(), got.data), (Some("b"), json!(0)));
        // A stream closed makes room for another.
        drop(theirs);
        assert!(pending.subscribe(Some("b"), false, 1).is_ok());
    }
}
