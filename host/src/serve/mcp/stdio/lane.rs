//! `tools/call` on stdio answered straight from the line transport, without
//! rmcp's per-request machinery: a request read from stdin is handled where
//! it is read until it waits, then in a task of its own, and its answer is
//! written to stdout by whichever runs it last, where rmcp would make two
//! cancellation tokens, spawn the handler, send its answer over a channel
//! to its loop and spawn a second task to write it.
//!
//! The request is still answered by rmcp's own request handling
//! ([`Service::handle_request`], with every check rmcp makes of a request
//! before the server's `call_tool`), on the session's peer, so what the call
//! sees (the peer, `_meta`, cancellation) is what rmcp gives it. What the
//! lane does in place of rmcp's loop, the same way:
//!
//! - `notifications/cancelled` for a call cancels its token, and its answer
//!   is then not sent;
//! - when stdin ends, the calls in flight are answered before the session
//!   ends, for as long as rmcp waits for its own ([`Lane::DRAIN`]), and then
//!   cancelled;
//! - a call holds one of the transport's slots until it ends, so the slots
//!   bound the calls in flight (a request reusing the id of one in flight
//!   is refused by the transport, on either path).
//!
//! One thing rmcp gives a handler cannot be given from outside it: the
//! task-local naming the protocol version the request's `_meta` names,
//! which decides whether a call may send the client requests of its own
//! (approvals through elicitation). So only requests whose `_meta` names no
//! protocol version take the lane, where rmcp's task-local would name none
//! either; the others go through rmcp.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Duration;

use futures::FutureExt as _;
use rmcp::Peer;
use rmcp::model::{ClientJsonRpcMessage, ClientRequest, JsonRpcMessage, JsonRpcRequest, RequestId};
use rmcp::model::{GetExtensions as _, GetMeta as _};
use rmcp::service::{RequestContext, RoleServer, Service as _, TxJsonRpcMessage};
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

use super::super::server::McpServer;

/// A call in flight.
struct Call {
    /// A number of its own, which a later call under its id does not have.
    number: u64,
    ct: CancellationToken,
    /// Its answer is handed to the writer.
    writing: bool,
    /// Cancelled while its answer waited for the writer: not written.
    cancelled: bool,
}

/// The lane of one stdio session, set once the session is initialized.
pub(crate) struct Lane {
    server: McpServer,
    peer: Peer<RoleServer>,
    /// The calls in flight by id (an id may be used again once its call is
    /// cancelled, while the cancelled call is still ending).
    calls: Mutex<HashMap<RequestId, Call>>,
    next: std::sync::atomic::AtomicU64,
    idle: Notify,
}

impl Lane {
    /// How long the calls in flight when stdin ends have to be answered, as
    /// rmcp waits for its own before it ends the session.
    pub(crate) const DRAIN: Duration = Duration::from_secs(5);

    pub(crate) fn new(server: McpServer, peer: Peer<RoleServer>) -> Self {
        Self {
            server,
            peer,
            calls: Mutex::default(),
            next: std::sync::atomic::AtomicU64::new(0),
            idle: Notify::new(),
        }
    }

    /// Whether `message` takes the lane: a `tools/call` whose `_meta` names
    /// no protocol version.
    pub(crate) fn takes(message: &ClientJsonRpcMessage) -> bool {
        match message {
            JsonRpcMessage::Request(JsonRpcRequest {
                request: request @ ClientRequest::CallToolRequest(_),
                ..
            }) => request.get_meta().protocol_version().is_none(),
            _ => false,
        }
    }

    /// Whether a call named `id` is in flight.
    pub(crate) fn has(&self, id: &RequestId) -> bool {
        self.lock().contains_key(id)
    }

    /// Starts answering `request` (one [`Lane::takes`] took): here until it
    /// waits, then in a task of its own; the call holds `slot` until it
    /// ends, and `send` writes the answer
    /// unless, when the writer is free, the check it is given says the call
    /// was cancelled meanwhile.
    pub(crate) fn start<F>(
        self: &std::sync::Arc<Self>,
        request: JsonRpcRequest<ClientRequest>,
        slot: Option<tokio::sync::OwnedSemaphorePermit>,
        send: impl FnOnce(TxJsonRpcMessage<RoleServer>, Box<dyn Fn() -> bool + Send>) -> F
        + Send
        + 'static,
    ) where
        F: Future<Output = std::io::Result<()>> + Send + 'static,
    {
        let JsonRpcRequest {
            id, mut request, ..
        } = request;
        tracing::debug!(%id, "received request");
        let ct = CancellationToken::new();
        let number = self.next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let call = Call {
            number,
            ct: ct.clone(),
            writing: false,
            cancelled: false,
        };
        self.lock().insert(id.clone(), call);
        let mut context = RequestContext::new(id.clone(), self.peer.clone());
        context.ct = ct.clone();
        context.meta = std::mem::take(request.get_meta_mut());
        context.extensions = std::mem::take(request.extensions_mut());
        let lane = self.clone();
        let mut answering = Box::pin(async move {
            let _slot = slot;
            // Boxed: rmcp's handling of any request (KiB) would otherwise be
            // the size of this task, copied in and out of the runtime whole.
            let handled = Box::pin(lane.server.handle_request(request, context));
            let answer = match handled.await {
                Ok(result) => JsonRpcMessage::response(result, id.clone()),
                Err(error) => {
                    tracing::warn!(%id, ?error, "response error");
                    JsonRpcMessage::error(error, Some(id.clone()))
                }
            };
            ct.cancel();
            // A cancelled call's entry is gone: its answer is not sent. The
            // id stays in use until the answer is written (or, cancelled
            // while it waits for the writer, not written).
            if lane.writing(&id, number) {
                let wanted = {
                    let (lane, id) = (lane.clone(), id.clone());
                    Box::new(move || lane.wanted(&id, number))
                };
                if let Err(error) = send(answer, wanted).await {
                    tracing::error!(%error, "fail to response message");
                }
            }
            lane.finish(&id, number);
        });
        // Polled once here first: a call that has nothing to wait for (most
        // calls of a quick tool; a guest yields at the first epoch tick) is
        // answered now, without a task of its own. One that waits goes on
        // in its own task, whose first poll gives it that task's waker. A
        // panic ends only this call, as it would end only its task.
        let polled = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            answering.as_mut().now_or_never().is_some()
        }));
        match polled {
            Ok(true) => {}
            Ok(false) => {
                tokio::spawn(answering);
            }
            Err(_) => {
                tracing::error!("answering a call panicked");
                // Dropped here too, so that a panic in what it held cannot
                // reach the reader either.
                let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(move || {
                    drop(answering);
                }));
            }
        }
    }

    /// Cancels the call named `id` (`notifications/cancelled`). One whose
    /// answer waits for the writer keeps its id until the writer is past
    /// it, and is not written.
    pub(crate) fn cancel(&self, id: &RequestId) {
        let removed = {
            let mut calls = self.lock();
            if let Some(call) = calls.get_mut(id)
                && call.writing
            {
                call.cancelled = true;
                return;
            }
            let removed = calls.remove(id);
            if calls.is_empty() {
                self.idle.notify_waiters();
            }
            removed
        };
        if let Some(call) = removed {
            tracing::info!(%id, "cancelled");
            call.ct.cancel();
        }
    }

    /// Whether call `number` is still the one named `id` (not cancelled);
    /// if so, its answer is handed to the writer.
    fn writing(&self, id: &RequestId, number: u64) -> bool {
        let mut calls = self.lock();
        let Some(call) = calls.get_mut(id).filter(|call| call.number == number) else {
            return false;
        };
        call.writing = true;
        true
    }

    /// Whether the answer of call `number` named `id` is still to be
    /// written.
    fn wanted(&self, id: &RequestId, number: u64) -> bool {
        self.lock()
            .get(id)
            .is_some_and(|call| call.number == number && !call.cancelled)
    }

    /// Removes the entry of call `number` named `id`, if it is still there.
    fn finish(&self, id: &RequestId, number: u64) {
        let mut calls = self.lock();
        if calls.get(id).is_some_and(|call| call.number == number) {
            calls.remove(id);
            if calls.is_empty() {
                self.idle.notify_waiters();
            }
        }
    }

    /// Waits until no call is in flight.
    pub(crate) async fn until_idle(&self) {
        crate::serve::until_none(&self.idle, || self.count()).await;
    }

    fn count(&self) -> usize {
        self.lock().len()
    }

    /// Waits until no call is in flight or `deadline` passes; then cancels
    /// the calls still running.
    pub(crate) async fn drain(&self, deadline: tokio::time::Instant) {
        if tokio::time::timeout_at(deadline, self.until_idle())
            .await
            .is_err()
        {
            tracing::warn!("calls still running when stdin ended; cancelling them");
            let calls = std::mem::take(&mut *self.lock());
            for call in calls.into_values() {
                call.ct.cancel();
            }
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<RequestId, Call>> {
        self.calls.lock().unwrap_or_else(|e| e.into_inner())
    }
}
