//! The requests the line transport hands rmcp, by the client's id and by
//! the id rmcp knows each by.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use rmcp::model::RequestId;
use tokio::sync::{Notify, OwnedSemaphorePermit, Semaphore};

/// The requests handed to rmcp and not yet answered, each holding a slot.
pub(super) struct Pending {
    pub(super) slots: Arc<Semaphore>,
    requests: Mutex<Requests>,
    idle: Notify,
}

/// rmcp keeps the requests it serves by id: a cancelled request's answer,
/// arriving late, would be taken for that of a request that reused its id.
/// So rmcp is given ids of the transport's own (numbers, one per request,
/// never reused), and answers go out under the client's.
#[derive(Default)]
struct Requests {
    /// By the client's id: the request's own, its slot, and whether it was
    /// cancelled while its answer waited for the writer.
    by_client: HashMap<RequestId, InFlight>,
    /// The client's id of each request rmcp has not answered yet.
    by_own: HashMap<i64, RequestId>,
    last: i64,
}

struct InFlight {
    own: i64,
    _slot: Option<OwnedSemaphorePermit>,
    cancelled: bool,
}

impl Pending {
    /// At most `max_pending` requests read and not yet answered.
    pub(super) fn new(max_pending: usize) -> Self {
        Self {
            slots: Arc::new(Semaphore::new(max_pending.max(1))),
            requests: Mutex::default(),
            idle: Notify::new(),
        }
    }

    /// Whether a request of the client's named `client` is in flight.
    pub(super) fn in_flight(&self, client: &RequestId) -> bool {
        self.requests().by_client.contains_key(client)
    }

    fn requests(&self) -> std::sync::MutexGuard<'_, Requests> {
        self.requests.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Notes a request the client sent as `client`; answers the id rmcp is
    /// to know it by.
    pub(super) fn begin(&self, client: RequestId, slot: Option<OwnedSemaphorePermit>) -> RequestId {
        let mut requests = self.requests();
        requests.last += 1;
        let own = requests.last;
        requests.by_own.insert(own, client.clone());
        let request = InFlight {
            own,
            _slot: slot,
            cancelled: false,
        };
        requests.by_client.insert(client, request);
        RequestId::Number(own)
    }

    /// The client's id of the request rmcp knows as `own`, while rmcp has
    /// not answered it.
    pub(super) fn client_of(&self, own: &RequestId) -> Option<RequestId> {
        let RequestId::Number(own) = *own else {
            return None;
        };
        self.requests().by_own.get(&own).cloned()
    }

    /// Whether the answer to `client`'s request `own` is still to be
    /// written: not cancelled while it waited for the writer.
    pub(super) fn wanted(&self, client: &RequestId, own: i64) -> bool {
        self.requests()
            .by_client
            .get(client)
            .is_some_and(|request| request.own == own && !request.cancelled)
    }

    /// The client's id of the request rmcp answers as `own`, and the
    /// transport's; `None` for an id rmcp was given no request under.
    pub(super) fn answering(&self, own: &RequestId) -> Option<(RequestId, i64)> {
        let RequestId::Number(own) = *own else {
            return None;
        };
        let client = self.requests().by_own.remove(&own)?;
        Some((client, own))
    }

    /// The answer to `client`'s request `own` is written: its id and slot
    /// are free (unless it was cancelled and the id is in use again).
    pub(super) fn answered(&self, client: &RequestId, own: i64) {
        let mut requests = self.requests();
        if requests
            .by_client
            .get(client)
            .is_some_and(|request| request.own == own)
        {
            requests.by_client.remove(client);
            if requests.by_client.is_empty() {
                self.idle.notify_waiters();
            }
        }
    }

    /// The client cancelled its request `client`: it is never answered.
    /// While rmcp serves it, its id and slot are free now, and the id rmcp
    /// knows it by is answered (to cancel it there). Once rmcp answered it,
    /// the answer waits for the writer: it is not written, and the id and
    /// slot stay in use until the writer is past it.
    pub(super) fn cancelled(&self, client: &RequestId) -> Option<i64> {
        let mut requests = self.requests();
        let requests = &mut *requests;
        let request = requests.by_client.get_mut(client)?;
        let own = request.own;
        if requests.by_own.remove(&own).is_none() {
            request.cancelled = true;
            return None;
        }
        requests.by_client.remove(client);
        if requests.by_client.is_empty() {
            self.idle.notify_waiters();
        }
        Some(own)
    }

    pub(super) fn count(&self) -> usize {
        self.requests().by_client.len()
    }

    pub(super) async fn until_idle(&self) {
        crate::serve::until_none(&self.idle, || self.count()).await;
    }
}
