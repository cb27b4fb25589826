//! Idle CPUs kept busy (`SERVE_BENCH_AWAKE=1`), so that wake-ups are quick.

use std::process::{Child, Command};
use std::time::Duration;

/// Keeps every CPU busy at the lowest priority (`SCHED_IDLE`), so that no
/// virtual CPU halts and every wake-up of a server or client thread is
/// quick, as on a busy or bare-metal server; yields to any other work.
pub(crate) fn spin_when_idle() -> ! {
    let param = libc::sched_param { sched_priority: 0 };
    // SAFETY: changes this process's own scheduling policy.
    let set = unsafe { libc::sched_setscheduler(0, libc::SCHED_IDLE, &param) };
    assert_eq!(set, 0, "cannot set SCHED_IDLE");
    let cpus = std::thread::available_parallelism().map_or(2, |n| n.get());
    for _ in 1..cpus {
        std::thread::spawn(|| {
            loop {
                std::hint::spin_loop();
            }
        });
    }
    loop {
        std::hint::spin_loop();
    }
}

/// The idle spinners while the bench runs (`SERVE_BENCH_AWAKE=1`).
pub(crate) struct Spinners(Child);

impl Spinners {
    pub(crate) fn start() -> Option<Self> {
        std::env::var("SERVE_BENCH_AWAKE")
            .ok()
            .filter(|v| !v.is_empty() && v != "0")?;
        let child = Command::new(std::env::current_exe().unwrap())
            .arg("--spin-when-idle")
            .spawn()
            .unwrap();
        println!("(idle CPUs kept busy at SCHED_IDLE priority: SERVE_BENCH_AWAKE is set)");
        std::thread::sleep(Duration::from_millis(200));
        Some(Self(child))
    }
}

impl Drop for Spinners {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}
