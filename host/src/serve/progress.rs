//! The progress reports of one MCP call on their way to the client, as
//! `notifications/progress` with the call's `progressToken`: only values
//! that increase, and at most one every [`INTERVAL`]. A report that comes
//! sooner is held back, replaced by any later one, and sent when its turn
//! comes or before the answer, so the client always sees the last one.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rmcp::Peer;
use rmcp::model::{ProgressNotificationParam, ProgressToken};
use rmcp::service::RoleServer;
use tokio::sync::Notify;
use tokio::time::Instant;

use crate::capability::progress::{Progress, ProgressSink};

/// The shortest time between two notifications of one call.
pub(crate) const INTERVAL: Duration = Duration::from_millis(50);

/// One call's reports, and the task that sends them (started by the first).
pub(crate) struct ProgressForward {
    pace: Mutex<Pace>,
    wake: Notify,
    sender: Mutex<Option<tokio::task::JoinHandle<()>>>,
    token: ProgressToken,
    peer: Peer<RoleServer>,
}

/// What is to be sent, and when the next report may go.
#[derive(Default)]
struct Pace {
    /// The last progress accepted: the next must be greater.
    last: Option<f64>,
    /// Reports to send now, in order.
    ready: VecDeque<Progress>,
    /// The latest report that came too soon, to send at `free_at`.
    held: Option<Progress>,
    /// When the next report may be sent.
    free_at: Option<Instant>,
    /// The call has ended: send what is held, then stop.
    done: bool,
}

impl Pace {
    /// Takes in a report made at `now`; false if it is dropped.
    fn offer(&mut self, mut report: Progress, now: Instant) -> bool {
        let increases = self.last.is_none_or(|last| report.progress > last);
        if self.done || !report.progress.is_finite() || !increases {
            return false;
        }
        report.total = report.total.filter(|t| t.is_finite());
        self.last = Some(report.progress);
        match self.free_at {
            Some(free_at) if now < free_at => self.held = Some(report),
            _ => {
                self.held = None;
                self.ready.push_back(report);
                self.free_at = Some(now + INTERVAL);
            }
        }
        true
    }

    /// The reports to send at `now`, and when to look again for one held
    /// back (`None`: when woken).
    fn due(&mut self, now: Instant) -> (Vec<Progress>, Option<Instant>) {
        let mut due: Vec<Progress> = self.ready.drain(..).collect();
        let free = self.free_at.is_none_or(|free_at| free_at <= now);
        if (free || self.done)
            && let Some(held) = self.held.take()
        {
            due.push(held);
            self.free_at = Some(now + INTERVAL);
        }
        let next = self.held.as_ref().and(self.free_at);
        (due, next)
    }
}

/// The forwarding of one call, held by the call: [`Self::finish`] it before
/// answering; dropped without that (the call was cancelled), it stops.
pub(crate) struct ProgressCall(Arc<ProgressForward>);

impl ProgressCall {
    /// Sends what is still held back, and waits until every report has gone
    /// to the client.
    pub(crate) async fn finish(self) {
        self.0.pace().done = true;
        let sender = self.0.sender().take();
        if let Some(sender) = sender {
            self.0.wake.notify_one();
            let _ = sender.await;
        }
    }
}

impl Drop for ProgressCall {
    fn drop(&mut self) {
        if let Some(sender) = self.0.sender().take() {
            sender.abort();
        }
    }
}

impl ProgressForward {
    /// The sink a call with `token` reports into, and the forwarding to
    /// finish before answering.
    pub(crate) fn start(
        token: ProgressToken,
        peer: Peer<RoleServer>,
    ) -> (ProgressSink, ProgressCall) {
        let forward = Arc::new(Self {
            pace: Mutex::default(),
            wake: Notify::new(),
            sender: Mutex::new(None),
            token,
            peer,
        });
        let reports = forward.clone();
        let sink: ProgressSink = Arc::new(move |report| reports.offer(report));
        (sink, ProgressCall(forward))
    }

    fn sender(&self) -> std::sync::MutexGuard<'_, Option<tokio::task::JoinHandle<()>>> {
        self.sender.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn pace(&self) -> std::sync::MutexGuard<'_, Pace> {
        self.pace.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn offer(self: &Arc<Self>, report: Progress) {
        if !self.pace().offer(report, Instant::now()) {
            return;
        }
        let mut sender = self.sender();
        if sender.is_none() {
            let forward = self.clone();
            *sender = Some(tokio::spawn(async move { forward.send_all().await }));
        }
        self.wake.notify_one();
    }

    async fn send_all(&self) {
        loop {
            let (due, next, done) = {
                let mut pace = self.pace();
                let (due, next) = pace.due(Instant::now());
                (due, next, pace.done)
            };
            for report in due {
                let mut param = ProgressNotificationParam::new(self.token.clone(), report.progress);
                param.total = report.total;
                param.message = report.message;
                if self.peer.notify_progress(param).await.is_err() {
                    return;
                }
            }
            if done && next.is_none() {
                return;
            }
            match next {
                Some(at) => {
                    tokio::select! {
                        () = self.wake.notified() => {}
                        () = tokio::time::sleep_until(at) => {}
                    }
                }
                None => self.wake.notified().await,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn report(progress: f64) -> Progress {
        Progress {
            progress,
            total: Some(10.0),
            message: None,
        }
    }

    fn progress_of(due: &[Progress]) -> Vec<f64> {
        due.iter().map(|r| r.progress).collect()
    }

    #[test]
    fn only_increasing_finite_values_are_kept() {
        let mut pace = Pace::default();
        let now = Instant::now();
        assert!(pace.offer(report(1.0), now));
        for dropped in [1.0, 0.5, f64::NAN, f64::INFINITY] {
            assert!(!pace.offer(report(dropped), now + INTERVAL), "{dropped}");
        }
        let mut infinite_total = report(2.0);
        infinite_total.total = Some(f64::INFINITY);
        assert!(pace.offer(infinite_total, now + INTERVAL));
        let (due, _) = pace.due(now + INTERVAL);
        assert_eq!(progress_of(&due), [1.0, 2.0]);
        assert_eq!(due[1].total, None);
    }

    #[test]
    fn reports_closer_than_the_interval_are_held_and_the_latest_sent_in_its_turn() {
        let mut pace = Pace::default();
        let start = Instant::now();
        pace.offer(report(1.0), start);
        for (i, step) in [2.0, 3.0, 4.0].into_iter().enumerate() {
            pace.offer(report(step), start + INTERVAL / 10 * (i as u32 + 1));
        }
        let (due, next) = pace.due(start);
        assert_eq!(progress_of(&due), [1.0]);
        assert_eq!(next, Some(start + INTERVAL));
        // Not yet its turn.
        let (due, _) = pace.due(start + INTERVAL / 2);
        assert!(due.is_empty());
        let (due, next) = pace.due(start + INTERVAL);
        assert_eq!(progress_of(&due), [4.0]);
        assert_eq!(next, None);
        // A report spaced by the interval goes at once.
        pace.offer(report(5.0), start + INTERVAL * 2);
        let (due, _) = pace.due(start + INTERVAL * 2);
        assert_eq!(progress_of(&due), [5.0]);
    }

    #[test]
    fn a_held_report_goes_before_the_answer() {
        let mut pace = Pace::default();
        let start = Instant::now();
        pace.offer(report(1.0), start);
        pace.offer(report(2.0), start);
        let (due, _) = pace.due(start);
        assert_eq!(progress_of(&due), [1.0]);
        pace.done = true;
        let (due, next) = pace.due(start);
        assert_eq!(progress_of(&due), [2.0]);
        assert_eq!(next, None);
    }
}
