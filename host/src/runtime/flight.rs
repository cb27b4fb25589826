//! Calls in flight on one plugin version, so that a replaced or removed
//! version can be drained: no new calls start on it, calls in progress run
//! to completion up to a grace period, and the rest are cancelled. Also the
//! pace of its calls: how long the version was idle before the latest began.

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use tokio::sync::{Notify, watch};

/// How a drain went.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Drained {
    /// Calls in flight when the drain began.
    pub in_flight: usize,
    /// Of those, how many were cancelled at the end of the grace period.
    pub cancelled: usize,
}

/// The in-flight calls of one version.
#[derive(Debug)]
pub(crate) struct Flights {
    count: AtomicUsize,
    closed: watch::Sender<bool>,
    cancelled: watch::Sender<bool>,
    idle: Notify,
    /// Calls begun so far.
    begun: AtomicU64,
    /// When the version last became idle (its last call in flight ended), in
    /// nanoseconds since [`origin`] (0: never).
    ended: AtomicU64,
    /// How long the version had been idle when the latest call began, in
    /// nanoseconds: 0 when other calls were in flight, `u64::MAX` for the
    /// first call.
    pause: AtomicU64,
}

impl Default for Flights {
    fn default() -> Self {
        // Every instant measured later is after the origin.
        origin();
        Self {
            count: AtomicUsize::new(0),
            closed: watch::Sender::new(false),
            cancelled: watch::Sender::new(false),
            idle: Notify::new(),
            begun: AtomicU64::new(0),
            ended: AtomicU64::new(0),
            pause: AtomicU64::new(u64::MAX),
        }
    }
}

/// The instant the pace of every version is measured from.
fn origin() -> Instant {
    static ORIGIN: OnceLock<Instant> = OnceLock::new();
    *ORIGIN.get_or_init(Instant::now)
}

/// Nanoseconds from [`origin`] to now, at least 1.
fn since_origin() -> u64 {
    let nanos = Instant::now()
        .saturating_duration_since(origin())
        .as_nanos();
    u64::try_from(nanos).unwrap_or(u64::MAX).max(1)
}

/// Held for the duration of one call.
#[derive(Debug)]
pub struct Flight {
    flights: Arc<Flights>,
}

impl Drop for Flight {
    fn drop(&mut self) {
        if self.flights.count.fetch_sub(1, Ordering::AcqRel) == 1 {
            self.flights.ended.store(since_origin(), Ordering::Relaxed);
            self.flights.idle.notify_waiters();
        }
    }
}

impl Flights {
    /// Registers a call; `None` once the version is closed.
    pub(crate) fn begin(self: &Arc<Self>) -> Option<Flight> {
        self.begun.fetch_add(1, Ordering::Relaxed);
        // The clock is read only when the version turns busy or idle.
        let pause = match self.count.fetch_add(1, Ordering::AcqRel) {
            0 => match self.ended.load(Ordering::Relaxed) {
                0 => u64::MAX,
                ended => since_origin().saturating_sub(ended),
            },
            _ => 0,
        };
        self.pause.store(pause, Ordering::Relaxed);
        let flight = Flight {
            flights: self.clone(),
        };
        if *self.closed.borrow() {
            return None;
        }
        Some(flight)
    }

    /// Calls in flight now.
    pub(crate) fn count(&self) -> usize {
        self.count.load(Ordering::Acquire)
    }

    /// Calls begun so far.
    pub(crate) fn begun(&self) -> u64 {
        self.begun.load(Ordering::Relaxed)
    }

    /// How long the version had been idle when the latest call began: the
    /// pause of a caller that makes one call after another (zero when other
    /// calls were in flight, the longest duration for the first call).
    pub(crate) fn pause(&self) -> Duration {
        Duration::from_nanos(self.pause.load(Ordering::Relaxed))
    }

    /// Resolves when the version's remaining calls are cancelled.
    pub(crate) async fn cancelled(&self) {
        let mut receiver = self.cancelled.subscribe();
        let _ = receiver.wait_for(|cancelled| *cancelled).await;
    }

    /// Stops new calls, waits up to `grace` for the calls in flight, then
    /// cancels the rest and waits for them to stop.
    pub(crate) async fn drain(&self, grace: Duration) -> Drained {
        self.closed.send_replace(true);
        let in_flight = self.count();
        let finished = tokio::time::timeout(grace, self.wait_idle()).await.is_ok();
        let mut cancelled = 0;
        if !finished {
            cancelled = self.count();
            self.cancelled.send_replace(true);
            self.wait_idle().await;
        }
        Drained {
            in_flight,
            cancelled,
        }
    }

    async fn wait_idle(&self) {
        loop {
            let notified = self.idle.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            if self.count() == 0 {
                return;
            }
            notified.await;
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;

    #[tokio::test]
    async fn drain_waits_for_calls_then_refuses_new_ones() {
        let flights = Arc::new(Flights::default());
        let worker = {
            let flights = flights.clone();
            tokio::spawn(async move {
                let _flight = flights.begin().unwrap();
                tokio::time::sleep(Duration::from_millis(50)).await;
            })
        };
        tokio::time::sleep(Duration::from_millis(10)).await;
        let drained = flights.drain(Duration::from_secs(5)).await;
        assert_eq!(
            drained,
            Drained {
                in_flight: 1,
                cancelled: 0
            }
        );
        worker.await.unwrap();
        assert!(flights.begin().is_none());
        assert_eq!(flights.count(), 0);
    }

    #[tokio::test]
    async fn calls_past_the_grace_period_are_cancelled() {
        let flights = Arc::new(Flights::default());
        let worker = {
            let flights = flights.clone();
            tokio::spawn(async move {
                let _flight = flights.begin().unwrap();
                tokio::select! {
                    _ = tokio::time::sleep(Duration::from_secs(60)) => "finished",
                    _ = flights.cancelled() => "cancelled",
                }
            })
        };
        tokio::time::sleep(Duration::from_millis(10)).await;
        let drained = flights.drain(Duration::from_millis(50)).await;
        assert_eq!(
            drained,
            Drained {
                in_flight: 1,
                cancelled: 1
            }
        );
        assert_eq!(worker.await.unwrap(), "cancelled");
    }
}
