//! The HTTP server's connection slots, and who gives one up when they are
//! all taken: a connection that has not yet sent a request (an idle or
//! half-open socket, as a slow-loris flood holds) is closed to make room for
//! a new one, oldest first, so a flood of idle sockets cannot keep callers
//! out. Connections serving requests are never closed for room; when every
//! slot is busy with them, new connections wait.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
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
    /// Set once it has sent a request.
    proven: Arc<AtomicBool>,
    /// Closes it.
    abort: Option<AbortHandle>,
}

/// A connection's place: its slot, and the flag its first request sets.
pub(super) struct Slot {
    id: u64,
    _permit: OwnedSemaphorePermit,
    /// Set by the connection's first request.
    pub(super) proven: Arc<AtomicBool>,
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
    /// oldest connection that has sent nothing yet (which is closed), or the
    /// next one to come free.
    pub(super) async fn slot(&self) -> Slot {
        let permit = match self.slots.clone().try_acquire_owned() {
            Ok(permit) => permit,
            Err(_) => {
                if let Some(abort) = self.oldest_unproven() {
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
        let proven = Arc::new(AtomicBool::new(false));
        self.open.lock().unwrap_or_else(|e| e.into_inner()).insert(
            id,
            Open {
                proven: proven.clone(),
                abort: None,
            },
        );
        Slot {
            id,
            _permit: permit,
            proven,
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

    /// Takes the oldest connection that has not sent a request yet.
    fn oldest_unproven(&self) -> Option<AbortHandle> {
        let mut open = self.open.lock().unwrap_or_else(|e| e.into_inner());
        let id = open
            .iter()
            .find(|(_, c)| c.abort.is_some() && !c.proven.load(Ordering::Relaxed))
            .map(|(id, _)| *id)?;
        open.remove(&id).and_then(|c| c.abort)
    }
}
