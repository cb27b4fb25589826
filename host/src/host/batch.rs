//! Many calls at once: a batch runs in one lane per worker thread, each lane
//! taking the next call from a shared queue.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::task::Poll;

use futures::StreamExt as _;
use futures::stream::FuturesUnordered;

use super::request::CallRequest;
use crate::caller::Caller;
use crate::contract::CallOutput;
use crate::error::{CallError, ErrorKind};
use crate::host::Host;

/// The outcome of one call.
pub(crate) type Outcome = Result<CallOutput, CallError>;

/// What becomes of each outcome as its call finishes (an answer past a
/// cap is dropped there, not held until the batch ends).
pub(crate) type Admit = Arc<dyn Fn(Outcome) -> Outcome + Send + Sync>;

impl Host {
    /// Runs `requests` as `caller` with at most the host's batch concurrency
    /// in flight, and returns their outcomes in request order: one per
    /// request, whatever happens to the others.
    pub async fn dispatch_many(&self, caller: &Caller, requests: Vec<CallRequest>) -> Vec<Outcome> {
        self.dispatch_admitting(caller, requests, Arc::new(|outcome| outcome))
            .await
    }

    /// [`Host::dispatch_many`], each outcome passed through `admit` as its
    /// call finishes.
    pub(crate) async fn dispatch_admitting(
        &self,
        caller: &Caller,
        requests: Vec<CallRequest>,
        admit: Admit,
    ) -> Vec<Outcome> {
        let count = requests.len();
        // One call (the usual request of an agent's turn) needs no lanes.
        if count <= 1 {
            let mut outcomes = Vec::with_capacity(count);
            for request in requests {
                outcomes.push(admit(self.dispatch_output_as(caller, request).await));
            }
            return outcomes;
        }
        let concurrency = self.batch_concurrency().clamp(1, count);
        let lanes = lane_count().min(concurrency);
        // The lanes' widths add up to the batch's concurrency bound.
        let width = |lane: usize| concurrency / lanes + usize::from(lane < concurrency % lanes);
        let queue = Arc::new(Mutex::new(
            requests.into_iter().enumerate().collect::<VecDeque<_>>(),
        ));
        // One lane per worker thread: each runs up to `width` calls at once,
        // taking the next entry from the shared queue as one finishes. Calls
        // stay on their lane's thread (no task per call handed between
        // workers), and a lane stuck on slow calls leaves the rest of the
        // queue to the others. This task runs lane 0.
        let spawned: Vec<_> = (1..lanes)
            .map(|lane| {
                let (host, caller, queue) = (self.clone(), caller.clone(), queue.clone());
                let (width, admit) = (width(lane), admit.clone());
                tokio::spawn(async move { host.batch_lane(&caller, &queue, width, &admit).await })
            })
            .collect();
        let mut finished = self.batch_lane(caller, &queue, width(0), &admit).await;
        for lane in spawned {
            match lane.await {
                Ok(done) => finished.extend(done),
                // `dispatch_as` turns every failure into an error, so a lane
                // cannot fail; if its task is lost all the same, its entries
                // get an internal error below.
                Err(e) => tracing::error!(error = %e, "a batch lane failed"),
            }
        }
        let mut outcomes: Vec<Option<Outcome>> = (0..count).map(|_| None).collect();
        for (index, outcome) in finished {
            outcomes[index] = Some(outcome);
        }
        outcomes
            .into_iter()
            .map(|outcome| {
                outcome.unwrap_or_else(|| {
                    Err(CallError::new(
                        ErrorKind::Internal,
                        "the call's task failed",
                    ))
                })
            })
            .collect()
    }

    /// Runs entries from `queue` until it is empty: one call at a time
    /// while calls keep the thread busy, more (up to `width`) while every
    /// call in progress is waiting (on the network, a process, a slot). Many
    /// instances alive at once on one thread only cost cache misses when
    /// the calls are CPU-bound.
    async fn batch_lane(
        &self,
        caller: &Caller,
        queue: &Mutex<VecDeque<(usize, CallRequest)>>,
        width: usize,
        admit: &Admit,
    ) -> Vec<(usize, Outcome)> {
        let next = || queue.lock().unwrap_or_else(|e| e.into_inner()).pop_front();
        let start = |(index, request): (usize, CallRequest)| async move {
            (index, admit(self.dispatch_output_as(caller, request).await))
        };
        let mut running = FuturesUnordered::new();
        let mut done = Vec::new();
        loop {
            if running.is_empty() {
                match next() {
                    Some(entry) => running.push(start(entry)),
                    None => return done,
                }
            }
            let polled = std::future::poll_fn(|cx| Poll::Ready(running.poll_next_unpin(cx))).await;
            match polled {
                Poll::Ready(Some(outcome)) => done.push(outcome),
                Poll::Ready(None) => {}
                Poll::Pending => {
                    let more = (running.len() < width).then(next).flatten();
                    match more {
                        Some(entry) => running.push(start(entry)),
                        None => done.extend(running.next().await),
                    }
                }
            }
        }
    }
}

/// How many lanes a batch runs on: one per worker thread of the runtime.
fn lane_count() -> usize {
    tokio::runtime::Handle::try_current()
        .map(|handle| handle.metrics().num_workers())
        .unwrap_or(1)
        .max(1)
}
