//! Approvals asked of a client without sessions (2026-07-28) that declared
//! `elicitation` on the request: the call runs in a task of its own; when it
//! needs an approval it is parked and the request is answered
//! `input_required` with an `elicitation/create` form and a request state;
//! the client's retry of the same request carries the answer, which goes to
//! the parked call, and the request waits for it again.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use rmcp::model::{CallToolRequestParams, CallToolResponse, CallToolResult, ErrorData};
use serde_json::{Value, json};
use sha2::Digest as _;
use tokio::sync::{mpsc, oneshot};

use crate::approval::{Approval, ApprovalRequest, Approver};
use crate::caller::Caller;
use crate::hooks::BoxFuture;

/// Most calls one tenant (or the local caller) may have parked at once.
const MAX_PARKED_PER_TENANT: usize = 32;

/// The one error of a request state that cannot be used: altered, expired,
/// of another caller or request, or already answered.
const INVALID_STATE: &str = "invalid requestState: it was altered, expired, already answered, or \
                             belongs to another call; call the tool again without it";

/// What a running call tells the request waiting for it.
pub(super) enum Event {
    /// It needs this approval; the answer goes to the sender.
    Asked(ApprovalRequest, oneshot::Sender<Approval>),
    /// It ended with this result.
    Done(Result<CallToolResult, ErrorData>),
}

/// A call running in a task of its own, aborted when dropped.
pub(super) struct Running {
    pub(super) events: mpsc::Receiver<Event>,
    task: tokio::task::JoinHandle<()>,
    /// Questions asked so far (each gets a key of its own).
    pub(super) asked: usize,
}

/// Starts the call `start` makes, in a task of its own; its questions are
/// asked through the events of the [`Running`] call, and wait for an
/// answer up to `timeout`.
pub(super) fn spawn<F>(start: F, timeout: Duration) -> Running
where
    F: FnOnce(AskTheRequest) -> BoxFuture<'static, Result<CallToolResult, ErrorData>>,
{
    let (events, received) = mpsc::channel(1);
    let ask = AskTheRequest {
        events: events.clone(),
        timeout,
    };
    let call = start(ask);
    Running {
        events: received,
        task: tokio::spawn(async move {
            let _ = events.send(Event::Done(call.await)).await;
        }),
        asked: 0,
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// A call waiting for an answer.
struct Parked {
    running: Running,
    answer: oneshot::Sender<Approval>,
    /// The key of the question in `inputRequests`, and the question.
    key: String,
    question: Value,
    tenant: String,
    /// The profile the call runs under: an answer that comes when the
    /// caller's profile is another (the configuration was reloaded) does
    /// not let it go on.
    profile: Arc<crate::capability::Profile>,
    expires: Instant,
}

/// The calls waiting for an answer, shared by every request of a server.
#[derive(Default)]
pub(crate) struct ParkedCalls {
    calls: Mutex<HashMap<[u8; 16], Parked>>,
}

impl ParkedCalls {
    /// Parks `parked` under `id`; false (and the call dropped, which aborts
    /// it) when its tenant has [`MAX_PARKED_PER_TENANT`] parked already.
    fn park(&self, id: [u8; 16], parked: Parked) -> bool {
        let mut calls = self.calls.lock().unwrap_or_else(|e| e.into_inner());
        let now = Instant::now();
        // Dropping an expired call aborts it.
        calls.retain(|_, call| call.expires > now);
        let held = calls
            .values()
            .filter(|call| call.tenant == parked.tenant)
            .count();
        if held >= MAX_PARKED_PER_TENANT {
            return false;
        }
        calls.insert(id, parked);
        true
    }

    /// Takes parked call `id` out (an answer is used once).
    fn take(&self, id: &[u8; 16]) -> Option<Parked> {
        let mut calls = self.calls.lock().unwrap_or_else(|e| e.into_inner());
        calls
            .remove(id)
            .filter(|call| call.expires > Instant::now())
    }
}

/// Asks through the request waiting on the call.
pub(super) struct AskTheRequest {
    events: mpsc::Sender<Event>,
    timeout: Duration,
}

impl Approver for AskTheRequest {
    fn approve<'a>(&'a self, request: &'a ApprovalRequest) -> BoxFuture<'a, Approval> {
        Box::pin(async move {
            let (answer, answered) = oneshot::channel();
            if self
                .events
                .send(Event::Asked(request.clone(), answer))
                .await
                .is_err()
            {
                return Approval::Deny;
            }
            match tokio::time::timeout(self.timeout, answered).await {
                Ok(Ok(approval)) => approval,
                _ => Approval::Deny,
            }
        })
    }

    fn how_to_allow(&self) -> &str {
        "the user declined or did not answer"
    }
}

/// Whether approvals of this request can be asked through `input_required`:
/// it has no session and declares `elicitation`.
pub(super) fn can_ask(meta: &rmcp::model::RequestMetaObject) -> bool {
    meta.client_capabilities()
        .is_some_and(|capabilities| capabilities.elicitation.is_some())
}

/// Serves a `tools/call` whose approvals are asked through `input_required`.
/// `start` runs the call with the approver it is given.
pub(super) async fn call<F>(
    parked: &Arc<ParkedCalls>,
    host: &crate::host::Host,
    caller: &Caller,
    request: &CallToolRequestParams,
    timeout: Duration,
    cancelled: tokio_util::sync::CancellationToken,
    start: F,
) -> Result<CallToolResponse, ErrorData>
where
    F: FnOnce(AskTheRequest) -> BoxFuture<'static, Result<CallToolResult, ErrorData>>,
{
    let bound = digest(request);
    let tenant = caller.tenant_name();
    let handles = host.handles();
    let mut running = match &request.request_state {
        Some(state) => {
            let invalid = || ErrorData::invalid_params(INVALID_STATE, None);
            let id = handles
                .open_request(state, tenant, caller.profile(), &bound)
                .ok_or_else(invalid)?;
            let call = parked.take(&id).ok_or_else(invalid)?;
            if !Arc::ptr_eq(&call.profile, caller.profile()) {
                // Dropping the call aborts it: what it was allowed to do
                // was judged under a profile that is no longer this caller's.
                drop(call);
                return Err(ErrorData::invalid_params(
                    "the configuration changed while the call waited for its answer, so it did \
                     not run; call the tool again without requestState, it is judged under the \
                     new configuration",
                    None,
                ));
            }
            let answer = request
                .input_responses
                .as_ref()
                .and_then(|responses| responses.get(&call.key));
            let Some(answer) = answer else {
                // Not answered: the same question again, under a new state.
                let question = call.question.clone();
                let key = call.key.clone();
                return park_again(parked, host, caller, &bound, timeout, call, key, question);
            };
            let _ = call.answer.send(decision(answer));
            let Parked { running, .. } = call;
            running
        }
        None => spawn(start, timeout),
    };
    let event = tokio::select! {
        event = running.events.recv() => event,
        // The client gave up on the request: the call ends with it.
        () = cancelled.cancelled() => {
            return Err(ErrorData::internal_error("the call was cancelled by the client", None));
        }
    };
    match event {
        Some(Event::Done(result)) => result.map(Into::into),
        Some(Event::Asked(question, answer)) => {
            running.asked += 1;
            let key = format!("approval-{}", running.asked);
            let form = form(&question);
            let call = Parked {
                running,
                answer,
                key: key.clone(),
                question: form.clone(),
                tenant: tenant.unwrap_or_default().to_string(),
                profile: caller.profile().clone(),
                expires: Instant::now() + timeout,
            };
            park_again(parked, host, caller, &bound, timeout, call, key, form)
        }
        None => Err(ErrorData::internal_error(
            "the call ended without an answer",
            None,
        )),
    }
}

/// Parks `call` and answers `input_required` with `question` under `key`.
#[allow(clippy::too_many_arguments)]
fn park_again(
    parked: &Arc<ParkedCalls>,
    host: &crate::host::Host,
    caller: &Caller,
    bound: &[u8; 32],
    timeout: Duration,
    call: Parked,
    key: String,
    question: Value,
) -> Result<CallToolResponse, ErrorData> {
    let id = crate::handles::Handles::random_id();
    if !parked.park(id, call) {
        return Err(ErrorData::invalid_request(
            format!(
                "too many calls wait for an answer ({MAX_PARKED_PER_TENANT}); answer or abandon \
                 some first"
            ),
            None,
        ));
    }
    let state =
        host.handles()
            .seal_request(&id, timeout, caller.tenant_name(), caller.profile(), bound);
    let result = json!({
        "resultType": "input_required",
        "inputRequests": { key: question },
        "requestState": state,
    });
    serde_json::from_value::<rmcp::model::InputRequiredResult>(result)
        .map(Into::into)
        .map_err(|e| ErrorData::internal_error(format!("input_required result: {e}"), None))
}

/// The `elicitation/create` form of an approval question.
pub(super) fn form(question: &ApprovalRequest) -> Value {
    json!({
        "method": "elicitation/create",
        "params": {
            "mode": "form",
            "message": format!("Approval needed: {question}"),
            "requestedSchema": {
                "type": "object",
                "properties": {
                    "decision": {
                        "type": "string",
                        "enum": ["once", "always", "deny"],
                        "description": "once: allow this call; always: allow from now on; \
                                        deny: refuse",
                    },
                },
                "required": ["decision"],
            },
        },
    })
}

/// The approval an `ElicitResult` gives: `accept` with a decision; anything
/// else refuses.
pub(super) fn decision(answer: &Value) -> Approval {
    if answer["action"] != "accept" {
        return Approval::Deny;
    }
    match answer["content"]["decision"].as_str() {
        Some("once") => Approval::Once,
        Some("always") => Approval::Always,
        _ => Approval::Deny,
    }
}

/// What a request state is bound to besides its caller: the tool and its
/// arguments, as sent (the handle included).
fn digest(request: &CallToolRequestParams) -> [u8; 32] {
    let mut hash = sha2::Sha256::new();
    hash.update(b"tools/call\0");
    hash.update(request.name.as_bytes());
    hash.update([0]);
    let arguments = request
        .arguments
        .as_ref()
        .map(|a| Value::Object(a.clone()).to_string())
        .unwrap_or_default();
    hash.update(arguments.as_bytes());
    hash.finalize().into()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_an_accepted_known_decision_allows() {
        let accept = |d: &str| json!({"action": "accept", "content": {"decision": d}});
        assert_eq!(decision(&accept("once")), Approval::Once);
        assert_eq!(decision(&accept("always")), Approval::Always);
        for refused in [
            accept("deny"),
            accept("session"),
            accept("ONCE"),
            json!({"action": "decline", "content": {"decision": "once"}}),
            json!({"action": "cancel"}),
            json!("once"),
        ] {
            assert_eq!(decision(&refused), Approval::Deny, "{refused}");
        }
    }
}
