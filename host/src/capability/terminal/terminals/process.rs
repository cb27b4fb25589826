//! A background process of a session: its output read as it comes into
//! bounded buffers (the oldest bytes go first when nobody reads), its end
//! watched, its input and signals at hand.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::sync::watch;

use super::launch::{Signals, Started};
use crate::capability::terminal::process_group::{End, Reader, Writer};

/// How a background process ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum ProcessEnd {
    Exited(i32),
    Killed(i32),
    /// It could not be started, or its sandbox went away: why.
    Failed(String),
}

/// Default of `tenant_caps.background_output`.
pub(crate) const DEFAULT_OUTPUT_BUDGET: usize = 16 << 20;

/// The unread output of one tenant's background processes, all together,
/// against its cap (`tenant_caps.background_output`): past it, the process
/// that writes loses its own oldest unread bytes.
#[derive(Debug)]
pub(crate) struct OutputBudget {
    used: AtomicUsize,
    cap: Arc<AtomicUsize>,
    /// Whose budget, for the log.
    owner: String,
}

impl OutputBudget {
    /// A budget of `cap` bytes (read at each write) for `owner`.
    pub(crate) fn new(owner: impl Into<String>, cap: Arc<AtomicUsize>) -> Arc<Self> {
        Arc::new(Self {
            used: AtomicUsize::new(0),
            cap,
            owner: owner.into(),
        })
    }

    /// The budget of a call's own session (its processes end with the
    /// call), of the default cap.
    pub(crate) fn alone() -> Arc<Self> {
        let cap = Arc::new(AtomicUsize::new(DEFAULT_OUTPUT_BUDGET));
        Self::new("a call's own session", cap)
    }

    fn charge(&self, bytes: usize) -> usize {
        let used = self.used.fetch_add(bytes, Ordering::Relaxed) + bytes;
        used.saturating_sub(self.cap.load(Ordering::Relaxed))
    }

    fn release(&self, bytes: usize) {
        self.used.fetch_sub(bytes, Ordering::Relaxed);
    }
}

/// Output waiting to be read, counted against its tenant's budget.
struct Unread {
    stdout: Vec<u8>,
    stderr: Vec<u8>,
    dropped: u64,
    budget: Arc<OutputBudget>,
    /// Whether this process already said it lost output to the budget.
    told: bool,
}

impl Drop for Unread {
    fn drop(&mut self) {
        self.budget.release(self.stdout.len() + self.stderr.len());
    }
}

/// What a read returns.
pub(crate) struct Output {
    pub(crate) stdout: String,
    pub(crate) stderr: String,
    pub(crate) dropped: u64,
    pub(crate) end: Option<ProcessEnd>,
}

/// One background process.
pub(crate) struct Process {
    pub(crate) id: u32,
    pub(crate) line: String,
    pub(crate) pty: bool,
    /// Its program is a shell: what is written to it is command lines.
    pub(crate) shell: bool,
    pub(crate) started: Instant,
    unread: Arc<Mutex<Unread>>,
    /// Bytes written to a shell since its last newline (checked with what
    /// completes them).
    pub(crate) pending_line: Mutex<String>,
    stdin: tokio::sync::Mutex<Option<Writer>>,
    end: watch::Receiver<Option<ProcessEnd>>,
    signals: Signals,
    tasks: Vec<tokio::task::JoinHandle<()>>,
}

impl Process {
    /// Starts reading `started`'s output, keeping at most `cap` unread bytes
    /// of each stream, and no more than the tenant's `budget` allows.
    pub(crate) fn new(
        id: u32,
        line: &str,
        pty: bool,
        started: Started,
        cap: usize,
        budget: Arc<OutputBudget>,
    ) -> Self {
        let unread = Arc::new(Mutex::new(Unread {
            stdout: Vec::new(),
            stderr: Vec::new(),
            dropped: 0,
            budget,
            told: false,
        }));
        let (ended, end) = watch::channel(None);
        let mut tasks = Vec::new();
        for (pipe, is_err) in [(started.stdout, false), (started.stderr, true)] {
            if let Some(pipe) = pipe {
                tasks.push(tokio::spawn(collect(pipe, unread.clone(), is_err, cap)));
            }
        }
        let ending = started.end;
        tasks.push(tokio::spawn(async move {
            let end = match ending.await {
                Ok(End::Exited(status)) => {
                    use std::os::unix::process::ExitStatusExt;
                    match (status.code(), status.signal()) {
                        (Some(code), _) => ProcessEnd::Exited(code),
                        (None, Some(signal)) => ProcessEnd::Killed(signal),
                        (None, None) => ProcessEnd::Failed("it ended in an unknown way".into()),
                    }
                }
                Ok(End::Unbuilt(reason)) => ProcessEnd::Failed(reason),
                Err(e) => ProcessEnd::Failed(e.to_string()),
            };
            let _ = ended.send(Some(end));
        }));
        Self {
            id,
            line: line.to_string(),
            pty,
            shell: is_shell(line),
            started: Instant::now(),
            unread,
            pending_line: Mutex::new(String::new()),
            stdin: tokio::sync::Mutex::new(started.stdin),
            end,
            signals: started.signals,
            tasks,
        }
    }

    /// How it ended, if it has.
    pub(crate) fn end(&self) -> Option<ProcessEnd> {
        self.end.borrow().clone()
    }

    /// Output since the last read.
    pub(crate) fn read(&self) -> Output {
        let end = self.end();
        let mut unread = self.unread.lock().unwrap_or_else(|e| e.into_inner());
        let before = unread.stdout.len() + unread.stderr.len();
        let output = Output {
            stdout: take_text(&mut unread.stdout, end.is_some()),
            stderr: take_text(&mut unread.stderr, end.is_some()),
            dropped: std::mem::take(&mut unread.dropped),
            end,
        };
        let after = unread.stdout.len() + unread.stderr.len();
        unread.budget.release(before - after);
        output
    }

    /// Waits until it ends or `timeout` passes, then reads. Output still in
    /// flight at the end gets a moment to arrive.
    pub(crate) async fn wait(&self, timeout: std::time::Duration) -> Output {
        let mut end = self.end.clone();
        if tokio::time::timeout(timeout, end.wait_for(Option::is_some))
            .await
            .is_ok()
        {
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        }
        self.read()
    }

    /// Writes `input`, then closes the input when `close`.
    pub(crate) async fn write(&self, input: &[u8], close: bool) -> Result<(), String> {
        let mut stdin = self.stdin.lock().await;
        let Some(writer) = stdin.as_mut() else {
            return Err(format!("process {}'s input is closed", self.id));
        };
        if !input.is_empty() {
            writer
                .write_all(input)
                .await
                .map_err(|e| format!("writing to process {}: {e}", self.id))?;
            let _ = writer.flush().await;
        }
        if close {
            let _ = writer.shutdown().await;
            *stdin = None;
        }
        Ok(())
    }

    /// Sends `signal` to its process group.
    pub(crate) async fn signal(&self, signal: libc::c_int) {
        self.signals.send(signal).await;
    }
}

impl Drop for Process {
    fn drop(&mut self) {
        for task in &self.tasks {
            task.abort();
        }
    }
}

/// Reads `pipe` into the unread buffer until its end.
async fn collect(mut pipe: Reader, unread: Arc<Mutex<Unread>>, is_err: bool, cap: usize) {
    let mut chunk = vec![0u8; 16 * 1024];
    loop {
        let n = match pipe.read(&mut chunk).await {
            Ok(0) | Err(_) => return,
            Ok(n) => n,
        };
        let mut unread = unread.lock().unwrap_or_else(|e| e.into_inner());
        let Unread {
            stdout,
            stderr,
            dropped,
            budget,
            told,
        } = &mut *unread;
        let buffer = if is_err { stderr } else { stdout };
        buffer.extend_from_slice(&chunk[..n]);
        let mut excess = buffer.len().saturating_sub(cap);
        let over = budget.charge(n);
        if over > excess {
            excess = over.min(buffer.len());
            if !*told {
                *told = true;
                tracing::warn!(
                    "{}'s background processes hold their cap of unread output \
                     (tenant_caps.background_output); the oldest unread output of a process \
                     that writes more is dropped",
                    budget.owner
                );
            }
        }
        if excess > 0 {
            buffer.drain(..excess);
            budget.release(excess);
            *dropped += excess as u64;
        }
    }
}

/// Takes the decodable text of `buffer`; a character still arriving stays
/// for the next read unless the stream has ended.
fn take_text(buffer: &mut Vec<u8>, ended: bool) -> String {
    let keep = match std::str::from_utf8(buffer) {
        Err(e) if !ended && e.error_len().is_none() => buffer.len() - e.valid_up_to(),
        _ => 0,
    };
    let rest = buffer.split_off(buffer.len() - keep);
    let text = String::from_utf8_lossy(buffer).into_owned();
    *buffer = rest;
    text
}

/// The shells whose input is command lines.
const SHELLS: &[&str] = &[
    "bash", "sh", "dash", "zsh", "ksh", "mksh", "ash", "fish", "busybox",
];

/// Words that run the next word as the program.
const RUNNERS: &[&str] = &[
    "exec", "env", "command", "nohup", "setsid", "stdbuf", "nice", "time",
];

/// The line's program is a shell (which then reads commands from its input).
pub(crate) fn is_shell(line: &str) -> bool {
    line.split_whitespace()
        .filter(|word| !word.contains('=') && !word.starts_with('-'))
        .find(|word| {
            let name = word.rsplit('/').next().unwrap_or(word);
            !RUNNERS.contains(&name)
        })
        .is_some_and(|word| SHELLS.contains(&word.rsplit('/').next().unwrap_or(word)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shells_are_found_behind_runners_and_assignments() {
        for line in [
            "bash",
            "/bin/sh -i",
            "exec bash --norc",
            "env X=1 zsh",
            "TERM=dumb bash",
        ] {
            assert!(is_shell(line), "{line}");
        }
        for line in [
            "python3",
            "cat",
            "bash-completion",
            "echo bash",
            "shellcheck x",
        ] {
            assert!(!is_shell(line), "{line}");
        }
    }

    #[test]
    fn a_character_split_between_reads_waits_for_its_rest() {
        let mut buffer = "aé".as_bytes()[..2].to_vec();
        assert_eq!(take_text(&mut buffer, false), "a");
        buffer.push("é".as_bytes()[1]);
        assert_eq!(take_text(&mut buffer, false), "é");
        assert!(buffer.is_empty());
    }
}
