//! One command line run as the leader of its own process group, either in
//! the kernel sandbox (the launcher of [`crate::confine`], which ends every
//! process of the sandbox with the shell) or, unconfined, by the shell
//! directly: only the environment it is given, optional stdin, stdout and
//! stderr read concurrently and capped, and the whole group killed when the
//! shell exits, at the deadline, or when the caller stops waiting. Unconfined,
//! a process that starts a session of its own (`setsid`) leaves the group and
//! is not killed.

use std::collections::BTreeSet;
use std::ffi::OsString;
use std::io;
use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWriteExt};
use tokio::process::{Child, ChildStdin};
use tokio::time::Instant;

/// How long output is still read after the shell has exited and its group
/// was killed. Only a process that left the group (`setsid`) can keep a pipe
/// open that long; its output is then cut off.
const DRAIN_GRACE: Duration = Duration::from_millis(250);

/// How long a killed shell is waited for, so it is reaped before returning.
const REAP_GRACE: Duration = Duration::from_millis(250);

/// Bytes read from a pipe at a time.
const CHUNK: usize = 16 * 1024;

/// A command line ready to run.
pub(crate) struct ShellCommand<'a> {
    /// The shell, run as `shell -c line`.
    pub(crate) shell: &'a Path,
    /// The command line.
    pub(crate) line: &'a str,
    /// The sandbox to run it in (a launcher started on its spec), or `None`
    /// to run the shell directly.
    pub(crate) confined: Option<Launched>,
    /// The working directory.
    pub(crate) cwd: &'a Path,
    /// The whole environment of the shell; nothing is inherited.
    pub(crate) env: &'a [(String, OsString)],
    /// Written to stdin, which is then closed; `None`: stdin is `/dev/null`.
    pub(crate) stdin: Option<Vec<u8>>,
    /// Time limit, from spawn to exit.
    pub(crate) timeout: Duration,
    /// Most bytes kept of stdout and of stderr each; the rest is read and
    /// discarded so the command never blocks on a full pipe.
    pub(crate) max_output: usize,
}

/// How a command ended.
pub(crate) enum Finished {
    /// The shell exited (or was killed by a signal) before the deadline.
    Exited(Captured),
    /// The deadline passed; the group was killed.
    TimedOut,
}

/// What an exited command produced.
pub(crate) struct Captured {
    /// The shell's exit code; `None` when a signal ended it.
    pub(crate) exit_code: Option<i32>,
    /// Stdout, at most `max_output` bytes.
    pub(crate) stdout: Vec<u8>,
    /// True when stdout was cut at the cap.
    pub(crate) stdout_cut: bool,
    /// Stderr, at most `max_output` bytes.
    pub(crate) stderr: Vec<u8>,
    /// True when stderr was cut at the cap.
    pub(crate) stderr_cut: bool,
}

impl ShellCommand<'_> {
    /// Runs the command line and waits for it, at most until the deadline.
    /// An error means the shell could not be started or waited for. If the
    /// returned future is dropped, the process group is killed.
    pub(crate) async fn run(self) -> io::Result<Finished> {
        let deadline = Instant::now() + self.timeout;
        let (mut group, send) = match self.confined {
            Some(launched) => {
                let run = crate::confine::Run::new(
                    self.shell,
                    self.line,
                    self.cwd,
                    self.env,
                    self.stdin.is_some(),
                );
                let bytes = crate::confine::run_bytes(&run).map_err(io::Error::other)?;
                let pipe = tokio::net::unix::pipe::Sender::from_owned_fd(launched.run)?;
                (launched.group, Some((pipe, bytes)))
            }
            None => {
                let mut command = tokio::process::Command::new(self.shell);
                command
                    .arg("-c")
                    .arg(self.line)
                    .current_dir(self.cwd)
                    .env_clear()
                    .envs(self.env.iter().map(|(name, value)| (name, value)))
                    .stdin(if self.stdin.is_some() {
                        Stdio::piped()
                    } else {
                        Stdio::null()
                    })
                    .stdout(Stdio::piped())
                    .stderr(Stdio::piped())
                    .process_group(0)
                    .kill_on_drop(true);
                (ProcessGroup::spawn(&mut command)?, None)
            }
        };

        let stdin = group.child.stdin.take();
        let stdout = group.child.stdout.take();
        let stderr = group.child.stderr.take();
        let mut out = CappedBuffer::new(self.max_output);
        let mut err = CappedBuffer::new(self.max_output);
        let input = self.stdin;
        let mut io = Box::pin(async {
            tokio::join!(
                send_run(send),
                feed(stdin, input),
                out.read_all(stdout),
                err.read_all(stderr)
            );
        });

        let mut io_done = false;
        let status = loop {
            tokio::select! {
                status = group.child.wait() => break Some(status?),
                () = &mut io, if !io_done => io_done = true,
                () = tokio::time::sleep_until(deadline) => break None,
            }
        };
        // Whatever the shell left running goes with it.
        group.kill();
        let Some(status) = status else {
            drop(io);
            let _ = tokio::time::timeout(REAP_GRACE, group.child.wait()).await;
            return Ok(Finished::TimedOut);
        };
        if !io_done {
            let _ = tokio::time::timeout(DRAIN_GRACE, &mut io).await;
        }
        drop(io);
        Ok(Finished::Exited(Captured {
            exit_code: status.code(),
            stdout: out.bytes,
            stdout_cut: out.truncated,
            stderr: err.bytes,
            stderr_cut: err.truncated,
        }))
    }
}

/// A sandbox launcher started on its spec: it builds the sandbox, then
/// waits for the command to run in it, so it can be started ahead.
pub(crate) struct Launched {
    group: ProcessGroup,
    /// Where the command goes (see [`crate::confine::prepare`]).
    run: std::os::fd::OwnedFd,
}

impl Launched {
    /// Starts `launcher` building the sandbox of `spec`, its stdin, stdout
    /// and stderr piped (stdin is closed at once for a command given none).
    pub(crate) fn start(launcher: &Path, spec: &crate::confine::Spec) -> io::Result<Self> {
        let mut command = tokio::process::Command::new(launcher);
        let run = crate::confine::prepare(&mut command, spec).map_err(io::Error::other)?;
        command
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .process_group(0)
            .kill_on_drop(true);
        let group = ProcessGroup::spawn(&mut command)?;
        Ok(Self { group, run })
    }

    /// The launcher has not exited: its sandbox is built or being built.
    pub(crate) fn alive(&mut self) -> bool {
        matches!(self.group.child.try_wait(), Ok(None))
    }
}

/// Sends a sandbox its command, then closes the pipe. A launcher that is
/// gone is not an error here: its exit status says why.
async fn send_run(send: Option<(tokio::net::unix::pipe::Sender, Vec<u8>)>) {
    if let Some((mut pipe, bytes)) = send {
        let _ = pipe.write_all(&bytes).await;
    }
}

/// A spawned shell that leads its own process group; the group is killed
/// with `SIGKILL` by [`ProcessGroup::kill`] or on drop.
struct ProcessGroup {
    child: Child,
    /// The group to kill; `None` once killed.
    pgid: Option<libc::pid_t>,
}

impl ProcessGroup {
    fn spawn(command: &mut tokio::process::Command) -> io::Result<Self> {
        let child = command.spawn()?;
        // `process_group(0)` made the shell's pid its group id; the spawn has
        // returned, so the shell has exec'd and the group exists.
        let pgid = child
            .id()
            .and_then(|id| libc::pid_t::try_from(id).ok())
            .filter(|&id| id > 1);
        if let Some(pgid) = pgid {
            live_groups().insert(pgid);
        }
        Ok(Self { child, pgid })
    }

    /// Kills every process still in the group, once.
    ///
    /// Called before the shell is reaped (drop, deadline) or right after
    /// reaping it in the same poll: a group id stays taken while any member
    /// lives, and an empty group's id would have to be handed out again by a
    /// full turn of the pid counter in between for this to hit anyone else.
    fn kill(&mut self) {
        if let Some(pgid) = self.pgid.take() {
            let mut live = live_groups();
            live.remove(&pgid);
            // SAFETY: killpg only sends a signal; `pgid` is a positive group
            // id (never 0, which would mean our own group).
            unsafe {
                libc::killpg(pgid, libc::SIGKILL);
            }
        }
    }
}

/// The groups of the commands running now, for [`kill_all`].
fn live_groups() -> std::sync::MutexGuard<'static, BTreeSet<libc::pid_t>> {
    static LIVE: std::sync::Mutex<BTreeSet<libc::pid_t>> = std::sync::Mutex::new(BTreeSet::new());
    LIVE.lock().unwrap_or_else(|e| e.into_inner())
}

/// Kills the process group of every command still running, for a process
/// about to exit without dropping the calls that run them (so that no
/// command, nor its sandbox, outlives toolhost).
pub(crate) fn kill_all() {
    let mut live = live_groups();
    for pgid in std::mem::take(&mut *live) {
        // SAFETY: as in `ProcessGroup::kill`: a positive group id of a
        // command this process started and has not reaped the group of.
        unsafe {
            libc::killpg(pgid, libc::SIGKILL);
        }
    }
}

impl Drop for ProcessGroup {
    fn drop(&mut self) {
        // Runs before `child` is dropped (which kills and reaps the shell in
        // the background), so the group id is still the shell's.
        self.kill();
    }
}

/// Writes `input` to the command's stdin, then closes it. A command that
/// does not read its input is not an error.
async fn feed(stdin: Option<ChildStdin>, input: Option<Vec<u8>>) {
    if let (Some(mut stdin), Some(input)) = (stdin, input) {
        let _ = stdin.write_all(&input).await;
        let _ = stdin.shutdown().await;
    }
}

/// Output kept up to a cap; the rest is counted as truncation.
struct CappedBuffer {
    bytes: Vec<u8>,
    cap: usize,
    truncated: bool,
}

impl CappedBuffer {
    fn new(cap: usize) -> Self {
        Self {
            bytes: Vec::new(),
            cap,
            truncated: false,
        }
    }

    /// Reads `pipe` to its end (or first error), keeping what fits.
    async fn read_all(&mut self, pipe: Option<impl AsyncRead + Unpin>) {
        let Some(mut pipe) = pipe else {
            return;
        };
        let mut chunk = vec![0u8; CHUNK];
        loop {
            match pipe.read(&mut chunk).await {
                Ok(0) | Err(_) => break,
                Ok(n) => self.push(&chunk[..n]),
            }
        }
    }

    fn push(&mut self, data: &[u8]) {
        let room = self.cap.saturating_sub(self.bytes.len());
        if data.len() > room {
            self.truncated = true;
        }
        self.bytes.extend_from_slice(&data[..data.len().min(room)]);
    }
}

/// Decodes output lossily as UTF-8; when it was cut at the cap, a character
/// split by the cut is dropped rather than shown as a replacement character.
pub(crate) fn decode(bytes: &[u8], truncated: bool) -> String {
    let bytes = match std::str::from_utf8(bytes) {
        Err(e) if truncated && e.error_len().is_none() => &bytes[..e.valid_up_to()],
        _ => bytes,
    };
    String::from_utf8_lossy(bytes).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decode_drops_a_character_split_by_the_cap() {
        let text = "aé".as_bytes();
        assert_eq!(decode(&text[..2], true), "a");
        assert_eq!(decode(&text[..2], false), "a\u{fffd}");
        assert_eq!(decode(b"a\xffb", true), "a\u{fffd}b");
    }

    #[test]
    fn capped_buffer_keeps_the_first_bytes() {
        let mut buffer = CappedBuffer::new(4);
        buffer.push(b"abc");
        assert!(!buffer.truncated);
        buffer.push(b"def");
        buffer.push(b"ghi");
        assert_eq!(buffer.bytes, b"abcd");
        assert!(buffer.truncated);
    }
}
