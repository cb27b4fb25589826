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
        let mut command = Command::new(toolhost());
        command.arg("serve").args(args);
        Self::spawn(&mut command)
    }

    /// Another MCP server on stdio, to measure beside toolhost: `command`
    /// split at whitespace, or `floor` for [`floor_server`] (this bench
    /// answering every request at once: the floor of a round trip).
    pub(crate) fn start_peer(command: &str) -> Self {
        let mut words = command.split_whitespace();
        let mut command = match words.next() {
            Some("floor") | None => {
                let mut command = Command::new(std::env::current_exe().unwrap());
                command.arg("--floor-server");
                command
            }
            Some(program) => Command::new(program),
        };
        command.args(words);
        Self::spawn(&mut command)
    }

    fn spawn(command: &mut Command) -> Self {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join("plugins")).unwrap();
        let (child, stderr) = toolhost_tests::spawn_piped(command.current_dir(dir.path()));
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

    /// What is measured: `toolhost serve`, or the peer's command line.
    pub(crate) fn name(&self) -> String {
        std::env::var("SERVE_BENCH_PEER").unwrap_or_else(|_| "toolhost serve".into())
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

/// The floor of an MCP round trip on stdio: answers each request line at
/// once with a fixed result (an `echo` of `hi` for `tools/call`), with no
/// JSON parsing beyond finding the id, and polls stdin for the next line
/// for as long as `toolhost serve` does (50 µs) before it sleeps in `read`.
pub(crate) fn floor_server() {
    use std::io::{BufRead as _, BufReader};
    use std::os::fd::AsFd as _;
    let stdin = std::io::stdin();
    let fd = stdin.as_fd().try_clone_to_owned().unwrap();
    let mut input = BufReader::new(std::fs::File::from(fd));
    let mut output = std::io::stdout().lock();
    let mut line = String::new();
    loop {
        if input.buffer().is_empty() {
            toolhost::serve::mcp::poll_readable(stdin.as_fd(), Duration::from_micros(50));
        }
        line.clear();
        if input.read_line(&mut line).unwrap_or(0) == 0 {
            return;
        }
        let Some(at) = line.find("\"id\":") else {
            continue;
        };
        let id: String = line[at + 5..]
            .chars()
            .take_while(|c| c.is_ascii_digit())
            .collect();
        let result = if line.contains("\"initialize\"") {
            r#"{"protocolVersion":"2025-06-18","capabilities":{"tools":{}},"serverInfo":{"name":"floor","version":"0"}}"#
        } else if line.contains("\"tools/call\"") {
            r#"{"content":[{"type":"text","text":"{\"text\":\"hi\"}"}],"isError":false}"#
        } else {
            "{}"
        };
        let answer = format!("{{\"jsonrpc\":\"2.0\",\"id\":{id},\"result\":{result}}}\n");
        if output.write_all(answer.as_bytes()).is_err() || output.flush().is_err() {
            return;
        }
    }
}
