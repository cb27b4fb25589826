//! The HTTP server's connection slots, and who gives one up when they are
//! all taken: a connection with no request in flight (one that has sent
//! nothing yet, as a slow-loris flood holds, first; then one idle between
//! keep-alive requests) is closed to make room for a new one, oldest first,
//! so a flood of idle sockets cannot keep callers out. A connection is
//! serving while a request's response (a stream included) is not done;
//! those are never closed for room, and when every slot serves, new
//! connections wait.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio::task::AbortHandle;

/// The slots, and the open connections in the order they were accepted.
pub(super) struct Connections {
    slots: Arc<Semaphore>,
    open: Mutex<BTreeMap<u64, Open>>,
    next_id: Mutex<u64>,
}

/// One open connection.
struct Open {
    activity: Arc<Activity>,
    /// Closes it.
    abort: Option<AbortHandle>,
}

/// What a connection is doing: whether it ever sent a request, and how many
/// of its requests are being served now.
#[derive(Default)]
pub(super) struct Activity {
    proven: AtomicBool,
    serving: AtomicUsize,
}

impl Activity {
    /// Counts a request as served until the returned guard is dropped
    /// (keep it with the response body).
    pub(super) fn serve(self: &Arc<Self>) -> Serving {
        self.proven.store(true, Ordering::Relaxed);
        self.serving.fetch_add(1, Ordering::AcqRel);
        Serving(self.clone())
    }
}

/// A request being served; dropped when its response is done.
pub(super) struct Serving(Arc<Activity>);

impl Serving {
    /// `response`, its body keeping this request counted as served until
    /// it is done or dropped (a stream is served while it is open).
    pub(super) fn keep_with(self, response: axum::response::Response) -> axum::response::Response {
        held_with_body(response, self)
    }
}

/// `response`, its body holding `guard` until the body is done or dropped
/// (a stream's for as long as it is open).
pub(super) fn held_with_body<G: Send + Unpin + 'static>(
    response: axum::response::Response,
    guard: G,
) -> axum::response::Response {
    response.map(|body| {
        axum::body::Body::new(Guarded {
            body,
            _guard: guard,
            until: None,
        })
    })
}

/// `response`, its body ending (a stream's: closed) when `token` is
/// cancelled.
pub(super) fn ended_by(
    response: axum::response::Response,
    token: tokio_util::sync::CancellationToken,
) -> axum::response::Response {
    response.map(|body| {
        axum::body::Body::new(Guarded {
            body,
            _guard: (),
            until: Some(Box::pin(token.cancelled_owned())),
        })
    })
}

/// A response body holding a guard, and ending early when `until` is
/// ready.
struct Guarded<G> {
    body: axum::body::Body,
    _guard: G,
    until: Option<std::pin::Pin<Box<tokio_util::sync::WaitForCancellationFutureOwned>>>,
}

impl<G: Unpin> hyper::body::Body for Guarded<G> {
    type Data = bytes::Bytes;
    type Error = axum::Error;

    fn poll_frame(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<Result<hyper::body::Frame<Self::Data>, Self::Error>>> {
        use std::future::Future as _;
        if let Some(until) = self.until.as_mut()
            && until.as_mut().poll(cx).is_ready()
        {
            return std::task::Poll::Ready(None);
        }
        hyper::body::Body::poll_frame(std::pin::Pin::new(&mut self.body), cx)
    }

    fn is_end_stream(&self) -> bool {
        hyper::body::Body::is_end_stream(&self.body)
    }

    fn size_hint(&self) -> hyper::body::SizeHint {
        hyper::body::Body::size_hint(&self.body)
    }
}

impl Drop for Serving {
    fn drop(&mut self) {
        self.0.serving.fetch_sub(1, Ordering::AcqRel);
    }
}

/// A connection's place: its slot, and what it is doing.
pub(super) struct Slot {
    id: u64,
    _permit: OwnedSemaphorePermit,
    /// Updated by the connection's requests.
    pub(super) activity: Arc<Activity>,
}

impl Slot {
    /// The connection's number.
    pub(super) fn id(&self) -> u64 {
        self.id
    }
}

impl Connections {
    pub(super) fn new(max: usize) -> Arc<Self> {
        Arc::new(Self {
            slots: Arc::new(Semaphore::new(max.max(1))),
            open: Mutex::new(BTreeMap::new()),
            next_id: Mutex::new(0),
        })
    }

    /// A slot for a connection just accepted: a free one, or the one of the
    /// oldest connection serving nothing (which is closed), or the next one
    /// to come free.
    pub(super) async fn slot(&self) -> Slot {
        let permit = match self.slots.clone().try_acquire_owned() {
            Ok(permit) => permit,
            Err(_) => {
                if let Some(abort) = self.oldest_idle() {
                    tracing::debug!("all connection slots taken: closing the oldest idle one");
                    abort.abort();
                }
                self.slots
                    .clone()
                    .acquire_owned()
                    .await
                    .expect("the semaphore is never closed")
            }
        };
        let id = {
            let mut next = self.next_id.lock().unwrap_or_else(|e| e.into_inner());
            *next += 1;
            *next
        };
        let activity = Arc::new(Activity::default());
        self.open.lock().unwrap_or_else(|e| e.into_inner()).insert(
            id,
            Open {
                activity: activity.clone(),
                abort: None,
            },
        );
        Slot {
            id,
            _permit: permit,
            activity,
        }
    }

    /// Records how to close the connection `id` (its slot's).
    pub(super) fn started(&self, id: u64, abort: AbortHandle) {
        if let Some(open) = self
            .open
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get_mut(&id)
        {
            open.abort = Some(abort);
        }
    }

    /// Forgets a connection that ended (its slot is freed with `slot`).
    pub(super) fn ended(&self, slot: Slot) {
        self.open
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(&slot.id);
    }

    /// Takes the oldest connection that has not sent a request yet, else
    /// the oldest one serving none now (idle between requests).
    fn oldest_idle(&self) -> Option<AbortHandle> {
        let mut open = self.open.lock().unwrap_or_else(|e| e.into_inner());
        let idle = |c: &Open| c.abort.is_some() && c.activity.serving.load(Ordering::Acquire) == 0;
        let id = open
            .iter()
            .find(|(_, c)| idle(c) && !c.activity.proven.load(Ordering::Relaxed))
            .or_else(|| open.iter().find(|(_, c)| idle(c)))
            .map(|(id, _)| *id)?;
        open.remove(&id).and_then(|c| c.abort)
    }
}
