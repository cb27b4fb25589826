//! What every part of the bench uses: percentiles, CPU time, the state of
//! the machine, and a running `toolhost serve`.

use std::io::Write as _;
use std::process::{Child, Command};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use super::toolhost;

pub(crate) fn percentile(sorted: &[Duration], p: f64) -> Duration {
    let index = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[index]
}

pub(crate) fn median(values: &mut [f64]) -> f64 {
    values.sort_by(f64::total_cmp);
    values[values.len() / 2]
}

pub(crate) fn us(d: Duration) -> String {
    format!("{:.1} µs", d.as_secs_f64() * 1e6)
}

/// User plus system CPU time of process `pid` so far.
pub(crate) fn cpu_time(pid: u32) -> Duration {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    // Fields after the command name: state is field 3, utime 14, stime 15.
    let fields: Vec<&str> = stat[stat.rfind(')').unwrap() + 2..]
        .split_whitespace()
        .collect();
    let ticks: u64 = fields[11].parse::<u64>().unwrap() + fields[12].parse::<u64>().unwrap();
    // SAFETY: sysconf only reads a configuration value.
    let per_second = unsafe { libc::sysconf(libc::_SC_CLK_TCK) } as u64;
    Duration::from_nanos(ticks * 1_000_000_000 / per_second)
}

/// How busy and how fast the machine is now: the 1-minute load average,
/// the time of a fixed single-threaded loop, and the median round trip of a
/// byte between two threads over two pipes (the floor of a stdio round
/// trip). On this shared virtual machine both vary by 2x or more from one
/// minute to the next.
pub(crate) fn machine() -> String {
    let load = std::fs::read_to_string("/proc/loadavg")
        .ok()
        .and_then(|l| l.split_whitespace().next().map(String::from))
        .unwrap_or_default();
    let started = Instant::now();
    let mut x = 1u64;
    for _ in 0..50_000_000 {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
    }
    std::hint::black_box(x);
    let gauge = started.elapsed();
    format!(
        "load average {load}, speed gauge {:.0} ms, pipe round trip {}",
        gauge.as_secs_f64() * 1000.0,
        us(pipe_round_trip())
    )
}

/// Median time for one byte to go to another thread and back over pipes.
fn pipe_round_trip() -> Duration {
    use std::io::Read as _;
    let (mut there_rx, mut there_tx) = std::io::pipe().unwrap();
    let (mut back_rx, mut back_tx) = std::io::pipe().unwrap();
    let echo = std::thread::spawn(move || {
        let mut byte = [0u8];
        while there_rx.read_exact(&mut byte).is_ok() {
            back_tx.write_all(&byte).unwrap();
        }
    });
    let mut samples = Vec::with_capacity(20_000);
    let mut byte = [0u8];
    for _ in 0..20_000 {
        let started = Instant::now();
        there_tx.write_all(&byte).unwrap();
        back_rx.read_exact(&mut byte).unwrap();
        samples.push(started.elapsed());
    }
    drop(there_tx);
    echo.join().unwrap();
    samples.sort();
    percentile(&samples, 0.5)
}

/// A running `toolhost serve`, in a directory of its own (built-in config,
/// an empty `plugins/`, so the bundled plugins), and its stderr lines.
pub(crate) struct Serving {
    pub(crate) child: Child,
    stderr: mpsc::Receiver<String>,
    _dir: tempfile::TempDir,
}

impl Serving {
    pub(crate) fn start(args: &[&str]) -> Self {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join("plugins")).unwrap();
        let (child, stderr) = toolhost_tests::spawn_piped(
            Command::new(toolhost())
                .arg("serve")
                .args(args)
                .current_dir(dir.path()),
        );
        Self {
            child,
            stderr,
            _dir: dir,
        }
    }

    /// Waits for a stderr line containing `needle`.
    pub(crate) fn wait_for(&self, needle: &str) -> String {
        let deadline = Instant::now() + Duration::from_secs(60);
        let mut seen = Vec::new();
        while let Some(left) = deadline.checked_duration_since(Instant::now()) {
            match self.stderr.recv_timeout(left) {
                Ok(line) if line.contains(needle) => return line,
                Ok(line) => seen.push(line),
                Err(_) => break,
            }
        }
        panic!("no {needle:?} on stderr; got:\n{}", seen.join("\n"));
    }

    pub(crate) fn pid(&self) -> u32 {
        self.child.id()
    }
}

impl Drop for Serving {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
