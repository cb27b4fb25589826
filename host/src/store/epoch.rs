//! Epoch interruption: a ticker thread per engine advances the epoch in
//! each tick in which guest code ran anywhere, so a call's deadline can stop
//! a spinning guest (or one that lives in host calls), and sleeps while
//! nothing runs.

use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::time::Duration;

use wasmtime::Engine;

/// How often the epoch advances. Guests yield to the async executor at each
/// tick, which is what lets a call's timeout stop a spinning guest.
pub const EPOCH_TICK: Duration = Duration::from_millis(1);

/// How many stores run guest code now.
static RUNNING: AtomicUsize = AtomicUsize::new(0);
/// How many times guest code began to run where none ran.
static BEGUN: AtomicU64 = AtomicU64::new(0);
/// How many ticker threads sleep (or are about to): only a guest that starts
/// while one does wakes them.
static ASLEEP: AtomicUsize = AtomicUsize::new(0);
/// The ticker threads to wake.
static TICKERS: Mutex<Vec<std::thread::Thread>> = Mutex::new(Vec::new());

/// Held by a store while it runs guest code: the epoch advances only in
/// ticks in which one was held somewhere, so an idle host never wakes up
/// for it.
///
/// Entering is two atomic operations while the ticker is awake. Guests of
/// back-to-back calls enter and leave many times a millisecond (at each
/// call and each host import); the ticker stays awake until a whole tick
/// passes with no guest code begun, so they do not each wake it.
#[derive(Debug)]
pub(crate) struct Running(());

impl Running {
    pub(crate) fn enter() -> Self {
        if RUNNING.fetch_add(1, Ordering::SeqCst) == 0 {
            BEGUN.fetch_add(1, Ordering::Relaxed);
            // Paired with a ticker's count in `ASLEEP` and its load of
            // `RUNNING` (all sequentially consistent): either it sees this
            // guest running, or this sees it asleep and wakes it.
            if ASLEEP.load(Ordering::SeqCst) > 0 {
                for ticker in TICKERS.lock().unwrap_or_else(|e| e.into_inner()).iter() {
                    ticker.unpark();
                }
            }
        }
        Running(())
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        RUNNING.fetch_sub(1, Ordering::SeqCst);
    }
}

/// Advances the engine's epoch every [`EPOCH_TICK`] in which guest code ran
/// anywhere (see [`Running`]), and sleeps once a tick has passed with none.
pub(crate) fn start_epoch_ticker(engine: &Engine) {
    let engine = engine.weak();
    std::thread::Builder::new()
        .name("toolhost-epoch".into())
        .spawn(move || {
            // Listed before it first looks at `RUNNING`, so no wake-up is lost.
            TICKERS
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .push(std::thread::current());
            let mut seen = BEGUN.load(Ordering::Relaxed);
            loop {
                if BEGUN.load(Ordering::Relaxed) == seen && RUNNING.load(Ordering::SeqCst) == 0 {
                    ASLEEP.fetch_add(1, Ordering::SeqCst);
                    if RUNNING.load(Ordering::SeqCst) == 0 {
                        // Woken by the next guest to start (or spuriously).
                        std::thread::park();
                    }
                    ASLEEP.fetch_sub(1, Ordering::SeqCst);
                }
                seen = BEGUN.load(Ordering::Relaxed);
                // A whole tick first: a call that starts now is not made to
                // yield at once, and one shorter than a tick never is.
                std::thread::sleep(EPOCH_TICK);
                let Some(engine) = engine.upgrade() else {
                    break;
                };
                // Guest code ran in this tick if some runs now or one began
                // since it started: a guest that spends nearly all its time
                // in host calls is seldom running at the tick's instant, and
                // it must yield (and meet its time limit) all the same.
                if RUNNING.load(Ordering::SeqCst) > 0 || BEGUN.load(Ordering::Relaxed) != seen {
                    engine.increment_epoch();
                }
            }
        })
        .expect("spawning the epoch thread");
}
