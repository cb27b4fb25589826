//! One command line run as the leader of its own process group, either in
//! the kernel sandbox (the launcher of [`crate::capability::terminal::confine`], which ends every
//! process of the sandbox with the shell) or, unconfined, by the shell
//! directly: only the environment it is given, optional stdin, stdout and
//! stderr read concurrently and capped, and the whole group killed when the
//! shell exits, at the deadline, or when the caller stops waiting. Unconfined,
//! the shell leads a session of its own without a controlling terminal; a
//! process that starts another session (`setsid`) leaves the group and is
//! not killed.

use std::collections::BTreeSet;
use std::ffi::OsString;
use std::io;
use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::process::Child;

use crate::capability::terminal::confine::control::{Control, Outcome};
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
    /// The sandbox could not be built or the shell not started: why.
    Unbuilt(String),
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
        let mut started = match self.confined {
            Some(launched) => {
                let run = crate::capability::terminal::confine::Run::new(
                    self.shell,
                    self.line,
                    self.cwd,
                    self.env,
                    self.stdin.is_some(),
                );
                launched.run(&run).await?
            }
            None => self.spawn_unconfined()?,
        };

        let mut out = CappedBuffer::new(self.max_output);
        let mut err = CappedBuffer::new(self.max_output);
        let input = self.stdin;
        let (stdin, stdout, stderr) = (
            started.stdin.take(),
            started.stdout.take(),
            started.stderr.take(),
        );
        let mut io = Box::pin(async {
            tokio::join!(
                feed(stdin, input),
                out.read_all(stdout),
                err.read_all(stderr)
            );
        });

        let mut io_done = false;
        let mut group = started.group;
        // Made once: reading the report is not cancellation-safe.
        let mut control = started.control;
        let mut ending = Box::pin(end(&mut group.child, control.as_mut()));
        let end = loop {
            tokio::select! {
                end = &mut ending => break Some(end),
                () = &mut io, if !io_done => io_done = true,
                () = tokio::time::sleep_until(deadline) => break None,
            }
        };
        drop(ending);
        let Some(end) = end else {
            group.kill();
            drop(io);
            let _ = tokio::time::timeout(REAP_GRACE, group.child.wait()).await;
            return Ok(Finished::TimedOut);
        };
        // Whatever the shell left running goes with it (a sandbox has
        // killed what ran in it before reporting).
        group.kill();
        drop(control);
        let status = match end? {
            End::Unbuilt(reason) => return Ok(Finished::Unbuilt(reason)),
            End::Exited(status) => status,
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

    /// Starts the shell directly, in a process group of its own.
    fn spawn_unconfined(&self) -> io::Result<Started> {
        let mut command = session_command(self.shell);
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
            .kill_on_drop(true);
        let mut group = ProcessGroup::spawn(&mut command)?;
        Ok(Started {
            stdin: boxed_writer(group.child.stdin.take()),
            stdout: boxed_reader(group.child.stdout.take()),
            stderr: boxed_reader(group.child.stderr.take()),
            group,
            control: None,
        })
    }
}

/// util-linux's `setsid`, which starts a program in a new session: 0.6 ms
/// to exec against 2 ms for the toolhost binary.
const SETSID: &str = "/usr/bin/setsid";

/// A command that runs `program` in a new session without a controlling
/// terminal, started with `posix_spawn` (code run between fork and exec
/// would make the host fork whole, 10 ms a command): through `setsid` or
/// the toolhost binary (see [`crate::capability::terminal::confine::SESSION_ARG`]), which take a
/// moment to call `setsid(2)` (a kill meanwhile reaches it by its pid, see
/// [`GroupGuard::kill`]); without either, by code between fork and exec.
fn session_command(program: &Path) -> tokio::process::Command {
    static HAS_SETSID: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    if *HAS_SETSID.get_or_init(|| Path::new(SETSID).is_file()) {
        let mut command = tokio::process::Command::new(SETSID);
        command.arg(program);
        return command;
    }
    match crate::capability::terminal::confine::launcher() {
        Ok(launcher) => {
            let mut command = tokio::process::Command::new(launcher);
            command
                .arg(crate::capability::terminal::confine::SESSION_ARG)
                .arg(program);
            command
        }
        Err(_) => {
            let mut command = tokio::process::Command::new(program);
            new_session(&mut command, false);
            command
        }
    }
}

/// Makes `command` lead a new session (and so a process group of its own)
/// with no controlling terminal: it never reaches the terminal toolhost was
/// started from, whose `/dev/tty` it cannot open. With `terminal`, its
/// stdin (a pseudo-terminal toolhost opened for it) becomes its
/// controlling terminal.
pub(crate) fn new_session(command: &mut tokio::process::Command, terminal: bool) {
    // SAFETY: only async-signal-safe calls (setsid, ioctl) between fork and
    // exec.
    unsafe {
        command.pre_exec(move || {
            if libc::setsid() < 0 || (terminal && libc::ioctl(0, libc::TIOCSCTTY, 0) < 0) {
                return Err(io::Error::last_os_error());
            }
            Ok(())
        });
    }
}

pub(crate) type Reader = Box<dyn AsyncRead + Unpin + Send>;
pub(crate) type Writer = Box<dyn AsyncWrite + Unpin + Send>;

pub(crate) fn boxed_reader(
    pipe: Option<impl AsyncRead + Unpin + Send + 'static>,
) -> Option<Reader> {
    pipe.map(|pipe| Box::new(pipe) as Reader)
}

pub(crate) fn boxed_writer(
    pipe: Option<impl AsyncWrite + Unpin + Send + 'static>,
) -> Option<Writer> {
    pipe.map(|pipe| Box::new(pipe) as Writer)
}

/// A command started: its group, its pipes, and for a sandboxed one the
/// channel its end is reported on.
struct Started {
    group: ProcessGroup,
    control: Option<Control>,
    stdin: Option<Writer>,
    stdout: Option<Reader>,
    stderr: Option<Reader>,
}

/// How a started command ended.
pub(crate) enum End {
    Exited(std::process::ExitStatus),
    Unbuilt(String),
}

/// Waits for a command's end: the shell's exit or, for a sandboxed command,
/// its sandbox's report on `control` (which comes before the sandbox is torn
/// down).
async fn end(child: &mut Child, control: Option<&mut Control>) -> io::Result<End> {
    use std::os::unix::process::ExitStatusExt;
    let Some(control) = control else {
        return child.wait().await.map(End::Exited);
    };
    match control.outcome().await {
        Outcome::Done(status) => Ok(End::Exited(std::process::ExitStatus::from_raw(status))),
        Outcome::Failed(reason) => Ok(End::Unbuilt(reason)),
        Outcome::Vanished => Err(io::Error::other(
            "the sandbox ended without reporting how the command ended",
        )),
    }
}

/// A sandbox launcher started on its spec: it builds the sandbox, then
/// waits for the command to run in it, so it can be started ahead.
pub(crate) struct Launched {
    group: ProcessGroup,
    control: Control,
    /// A pidfd of the sandbox's PID 1, once it is built.
    init: Option<std::os::fd::OwnedFd>,
}

impl Launched {
    /// Starts `launcher`, which joins the pids cgroup whose `cgroup.procs`
    /// is `pids` (if any) at once and then waits for its spec.
    pub(crate) fn spawn(
        launcher: &Path,
        pids: Option<&Path>,
        cpu: Option<&Path>,
    ) -> io::Result<Self> {
        let (mut command, control) =
            crate::capability::terminal::confine::command(launcher, pids, cpu)?;
        command.process_group(0);
        let group = ProcessGroup::spawn(&mut command)?;
        Ok(Self {
            group,
            control,
            init: None,
        })
    }

    /// Sends the launcher the spec of the sandbox to build.
    pub(crate) async fn send_spec(
        &mut self,
        spec: &crate::capability::terminal::confine::Spec,
    ) -> io::Result<()> {
        let spec = serde_json::to_vec(spec).map_err(io::Error::other)?;
        // A launcher that cannot take it has failed; its report says why.
        let _ = self.control.send_spec(&spec).await;
        Ok(())
    }

    /// Waits until the sandbox's mounts are made; `Err` says why they
    /// could not be.
    pub(crate) async fn built(&mut self) -> Result<(), String> {
        let init = self.control.built().await?;
        self.init = init.and_then(crate::capability::terminal::confine::guard::pidfd);
        Ok(())
    }

    /// Watches `guard` while the sandbox lives (see
    /// [`Guard::watch`](crate::capability::terminal::confine::guard::Guard::watch)): a change is
    /// put back and ends the sandbox, after `tell` learns why.
    pub(crate) fn watch_guard(
        &self,
        guard: crate::capability::terminal::confine::guard::Guard,
        tell: Option<crate::capability::terminal::confine::guard::End>,
    ) -> Result<Option<crate::capability::terminal::confine::guard::Watched>, String> {
        let kill = self.init.as_ref().and_then(|init| init.try_clone().ok());
        let gone = self.init.as_ref().and_then(|init| init.try_clone().ok());
        guard.watch(
            Box::new(move |reason| {
                if let Some(tell) = &tell {
                    tell(reason);
                }
                if let Some(kill) = &kill {
                    crate::capability::terminal::confine::guard::kill(kill);
                }
            }),
            gone,
        )
    }

    /// A pidfd of the sandbox's PID 1 (once built), to end it with.
    pub(crate) fn init(&self) -> Option<std::os::fd::OwnedFd> {
        self.init.as_ref().and_then(|init| init.try_clone().ok())
    }

    /// The launcher has not exited: its sandbox is built or being built.
    pub(crate) fn alive(&mut self) -> bool {
        matches!(self.group.child.try_wait(), Ok(None))
    }

    /// The launcher's group and its channel, for a session that sends it
    /// many commands.
    pub(crate) fn into_parts(self) -> (ProcessGroup, Control) {
        (self.group, self.control)
    }

    /// Sends the sandbox its command with new pipes for its output (and
    /// its input, when it has some).
    async fn run(mut self, run: &crate::capability::terminal::confine::Run) -> io::Result<Started> {
        use std::os::fd::AsFd;
        use tokio::net::unix::pipe;
        let bytes =
            crate::capability::terminal::confine::run_bytes(run).map_err(io::Error::other)?;
        let (out_write, out_read) = pipe::pipe()?;
        let (err_write, err_read) = pipe::pipe()?;
        let mut theirs = vec![out_write.into_blocking_fd()?, err_write.into_blocking_fd()?];
        let stdin = if run.stdin {
            let (sender, receiver) = pipe::pipe()?;
            theirs.push(receiver.into_blocking_fd()?);
            Some(sender)
        } else {
            None
        };
        let fds: Vec<_> = theirs.iter().map(AsFd::as_fd).collect();
        // A sandbox that failed meanwhile says why on the channel.
        let _ = self.control.send_run(&bytes, &fds).await;
        // Only the command holds these ends now.
        drop(theirs);
        Ok(Started {
            group: self.group,
            control: Some(self.control),
            stdin: boxed_writer(stdin),
            stdout: boxed_reader(Some(out_read)),
            stderr: boxed_reader(Some(err_read)),
        })
    }
}

/// A spawned shell that leads its own process group; the group is killed
/// with `SIGKILL` by [`ProcessGroup::kill`] or on drop.
pub(crate) struct ProcessGroup {
    /// Dropped first, so the group id is still the shell's when it is
    /// killed (dropping `child` kills and reaps the shell in the background).
    guard: GroupGuard,
    pub(crate) child: Child,
}

impl ProcessGroup {
    pub(crate) fn spawn(command: &mut tokio::process::Command) -> io::Result<Self> {
        let child = command.spawn()?;
        // `process_group(0)` (or `setsid`) made the shell's pid its group
        // id; the spawn has returned, so the shell has exec'd and the group
        // exists.
        let pgid = child
            .id()
            .and_then(|id| libc::pid_t::try_from(id).ok())
            .filter(|&id| id > 1);
        Ok(Self {
            guard: GroupGuard::new(pgid),
            child,
        })
    }

    /// Kills every process still in the group, once.
    pub(crate) fn kill(&mut self) {
        self.guard.kill();
    }

    /// The shell, and the guard that kills its group when dropped.
    pub(crate) fn split(self) -> (Child, GroupGuard) {
        (self.child, self.guard)
    }
}

/// A process group of a command, killed with `SIGKILL` when dropped.
pub(crate) struct GroupGuard {
    /// The group to kill; `None` once killed.
    pgid: Option<libc::pid_t>,
}

impl GroupGuard {
    fn new(pgid: Option<libc::pid_t>) -> Self {
        if let Some(pgid) = pgid {
            live_groups().insert(pgid);
        }
        Self { pgid }
    }

    /// Sends `signal` to the group, if it was not killed.
    pub(crate) fn signal(&self, signal: libc::c_int) {
        if let Some(pgid) = self.pgid {
            // SAFETY: killpg only sends a signal to a positive group id of
            // ours (never 0, which would mean our own group).
            unsafe {
                libc::killpg(pgid, signal);
            }
        }
    }

    /// Some process of the group still runs.
    pub(crate) fn alive(&self) -> bool {
        // SAFETY: signal 0 only checks that the group exists.
        self.pgid
            .is_some_and(|pgid| unsafe { libc::killpg(pgid, 0) } == 0)
    }

    /// Kills every process still in the group, once.
    ///
    /// Called before the shell is reaped (drop, deadline) or right after
    /// reaping it in the same poll: a group id stays taken while any member
    /// lives, and an empty group's id would have to be handed out again by a
    /// full turn of the pid counter in between for this to hit anyone else.
    pub(crate) fn kill(&mut self) {
        if let Some(pgid) = self.pgid.take() {
            let mut live = live_groups();
            live.remove(&pgid);
            // SAFETY: as in `signal`; a group not there yet (its leader
            // has not called setsid) is its leader alone, our unreaped child.
            unsafe {
                if libc::killpg(pgid, libc::SIGKILL) < 0 {
                    libc::kill(pgid, libc::SIGKILL);
                }
            }
        }
    }
}

impl Drop for GroupGuard {
    fn drop(&mut self) {
        self.kill();
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

/// Writes `input` to the command's stdin, then closes it. A command that
/// does not read its input is not an error.
pub(crate) async fn feed(stdin: Option<Writer>, input: Option<Vec<u8>>) {
    if let (Some(mut stdin), Some(input)) = (stdin, input) {
        let _ = stdin.write_all(&input).await;
        let _ = stdin.shutdown().await;
    }
}

/// Output kept up to a cap; the rest is counted as truncation.
pub(crate) struct CappedBuffer {
    pub(crate) bytes: Vec<u8>,
    cap: usize,
    pub(crate) truncated: bool,
}

impl CappedBuffer {
    pub(crate) fn new(cap: usize) -> Self {
        Self {
            bytes: Vec::new(),
            cap,
            truncated: false,
        }
    }

    /// Reads `pipe` to its end (or first error), keeping what fits.
    pub(crate) async fn read_all(&mut self, pipe: Option<Reader>) {
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
