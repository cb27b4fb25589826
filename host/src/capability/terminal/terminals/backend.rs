//! Where a session's commands run: in one kernel sandbox that lives as long
//! as the session (its PID 1 starts each command, see
//! `crate::capability::terminal::confine::init`), or as host processes under
//! `terminal.sandbox = "none"`; either way after an optional wrapper's
//! argument list (`terminal.wrapper`). A command gets pipes (or one
//! pseudo-terminal) and, for the session's script, its state pipe.

use std::collections::HashMap;
use std::io;
use std::os::fd::{AsFd, AsRawFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::{Arc, Mutex};

use futures::future::BoxFuture;
use tokio::net::unix::pipe;
use tokio::sync::oneshot;

use super::container::ContainerBackend;
use super::launch::{Launch, Signals, Started};
use super::pty::Pty;
use super::ssh::SshBackend;
use crate::capability::Profile;
use crate::capability::terminal::ahead;
use crate::capability::terminal::confine::control::{Control, Report};
use crate::capability::terminal::confine::guard::{Watched, kill};
use crate::capability::terminal::confine::plan::{Planned, still_holds};
use crate::capability::terminal::confine::{self, Run};
use crate::capability::terminal::process_group::{
    End, GroupGuard, ProcessGroup, Reader, Writer, boxed_reader, boxed_writer, new_session,
};
use crate::capability::terminal::proxy::{Gate, Proxy};
use crate::capability::terminal::{TerminalBackend, TerminalSandbox};

/// The place a session's commands run.
pub(crate) enum Backend {
    Sandbox(Box<SessionSandbox>),
    Host(HostProcesses),
    Ssh(Box<SshBackend>),
    Container(Box<ContainerBackend>),
}

impl Backend {
    /// The backend of `profile`'s sessions, with `prefix` before every
    /// command (resolved to a program); its proxy serves while `gate` is
    /// open.
    pub(crate) async fn start(profile: &Arc<Profile>, gate: &Gate) -> Result<Self, String> {
        if let (TerminalBackend::Ssh, Some(ssh)) = (profile.terminal.backend, &profile.terminal.ssh)
        {
            return Ok(Self::Ssh(Box::new(SshBackend::connect(ssh).await?)));
        }
        if let (TerminalBackend::Container, Some(container)) =
            (profile.terminal.backend, &profile.terminal.container)
        {
            return Ok(Self::Container(Box::new(
                ContainerBackend::start(profile, container, gate).await?,
            )));
        }
        let prefix = wrapper(profile)?;
        Ok(match profile.terminal.sandbox {
            TerminalSandbox::Kernel => Self::Sandbox(Box::new(
                SessionSandbox::start(profile, prefix, gate).await?,
            )),
            TerminalSandbox::None => Self::Host(HostProcesses {
                prefix,
                groups: Mutex::new(Vec::new()),
            }),
        })
    }

    /// Starts one command.
    pub(crate) async fn launch(&self, launch: Launch<'_>) -> io::Result<Started> {
        match self {
            Self::Sandbox(sandbox) => sandbox.launch(launch).await,
            Self::Host(host) => host.launch(launch),
            Self::Ssh(ssh) => ssh.launch(launch).await,
            Self::Container(container) => container.launch(launch).await,
        }
    }

    /// The network proxy the session's commands use, if any.
    pub(crate) fn proxy(&self) -> Option<&Proxy> {
        match self {
            Self::Sandbox(sandbox) => sandbox.proxy.as_ref(),
            Self::Container(container) => container.proxy(),
            Self::Host(_) | Self::Ssh(_) => None,
        }
    }

    /// Why the backend's mounts no longer hold the profile, if they do not
    /// (a path `file.deny` matches appeared in a grant): then it is
    /// replaced before the next command. Blocking work off the async
    /// threads.
    pub(crate) async fn stale(&self) -> Option<String> {
        match self {
            Self::Sandbox(sandbox) => match &sandbox.planned {
                Some(planned) => still_holds(planned, &sandbox.profile).await,
                None => None,
            },
            Self::Container(container) => container.stale().await,
            // Nothing of this machine is mounted.
            Self::Host(_) | Self::Ssh(_) => None,
        }
    }

    /// Puts back what a command planted that git outside the sandbox would
    /// read (see [`Guard`](crate::capability::terminal::confine::guard::Guard)); `Err` says what.
    pub(crate) fn undo_planted(&self) -> Result<(), String> {
        let (planned, watched) = match self {
            Self::Sandbox(sandbox) => (sandbox.planned.as_ref(), sandbox.watched.as_ref()),
            Self::Container(container) => (Some(container.planned()), container.watched()),
            Self::Host(_) | Self::Ssh(_) => (None, None),
        };
        match (watched, planned) {
            (Some(watched), _) => watched.settle(),
            (None, Some(planned)) => planned
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .guard()
                .undo(),
            (None, None) => Ok(()),
        }
    }

    /// Why the backend can no longer start commands, if it cannot.
    /// Ends every process of the backend now, while a command in flight
    /// still holds it (the session ended: narrowed, its profile changed);
    /// its commands end, and what runs next is told `reason`. An ssh
    /// backend's remote processes are the remote host's to end.
    pub(crate) fn end(&self, reason: &str) {
        match self {
            Self::Sandbox(sandbox) => sandbox.end(reason),
            Self::Host(host) => host.end(),
            Self::Ssh(_) => {}
            Self::Container(container) => container.end(reason),
        }
    }

    pub(crate) fn broken(&self) -> Option<String> {
        match self {
            Self::Sandbox(sandbox) => sandbox.reports.lock().ok()?.broken.clone(),
            Self::Host(_) => None,
            Self::Ssh(ssh) => ssh.broken(),
            Self::Container(container) => container.broken(),
        }
    }
}

/// `terminal.wrapper` with its program found on the commands' `PATH`.
fn wrapper(profile: &Profile) -> Result<Vec<String>, String> {
    let Some((program, rest)) = profile.terminal.wrapper.split_first() else {
        return Ok(Vec::new());
    };
    let found = if program.contains('/') {
        Some(PathBuf::from(program))
    } else {
        super::script::DEFAULT_PATH
            .split(':')
            .map(|dir| Path::new(dir).join(program))
            .find(|path| path.is_file())
    };
    let found = found.filter(|path| path.is_file()).ok_or_else(|| {
        format!(
            "terminal.wrapper of profile {:?} names {program:?}, which is not a file nor found \
             in {}",
            profile.name,
            super::script::DEFAULT_PATH
        )
    })?;
    let mut prefix = vec![found.to_string_lossy().into_owned()];
    prefix.extend(rest.iter().cloned());
    Ok(prefix)
}

/// The reports of a session's sandbox, by run id.
#[derive(Default)]
struct Reports {
    waiting: HashMap<u32, oneshot::Sender<Report>>,
    /// Why the sandbox ended, once it has.
    broken: Option<String>,
}

/// A session's kernel sandbox: its launcher, the channel to its PID 1, and
/// a task that routes each report to the command it is about.
pub(crate) struct SessionSandbox {
    prefix: Vec<String>,
    sender: Arc<tokio::sync::Mutex<Control>>,
    reports: Arc<Mutex<Reports>>,
    next_id: std::sync::atomic::AtomicU32,
    reader: tokio::task::JoinHandle<()>,
    proxy: Option<Proxy>,
    /// Its mounts, checked against the grants before each command.
    planned: Option<Arc<Mutex<Planned>>>,
    profile: Arc<Profile>,
    /// The repository guard, watched while the sandbox lives.
    watched: Option<Watched>,
    /// A pidfd of its PID 1: killed, every process in it goes.
    init: Option<OwnedFd>,
    // Dropped last: the launcher's group, then the cgroups.
    _launcher: ProcessGroup,
    _pids: ahead::Groups,
}

impl SessionSandbox {
    async fn start(
        profile: &Arc<Profile>,
        prefix: Vec<String>,
        gate: &Gate,
    ) -> Result<Self, String> {
        let launcher = confine::launcher()?;
        let built = ahead::build_session(profile, &launcher, gate).await?;
        let reports = Arc::new(Mutex::new(Reports::default()));
        // A change to what the guard keeps ends the sandbox, and says why
        // to the session's next command.
        let told = reports.clone();
        let watched = built.launched.watch_guard(
            built.guard.clone(),
            Some(Box::new(move |reason| {
                told.lock().unwrap_or_else(|e| e.into_inner()).broken = Some(reason.to_string());
            })),
        )?;
        let init = built.launched.init();
        let (group, control) = built.launched.into_parts();
        let mut receiver = control
            .try_clone()
            .map_err(|e| format!("the session's sandbox channel: {e}"))?;
        let routed = reports.clone();
        let reader = tokio::spawn(async move {
            loop {
                let report = receiver.report().await;
                let mut reports = routed.lock().unwrap_or_else(|e| e.into_inner());
                let id = match &report {
                    Report::Done { id, .. } | Report::Refused { id, .. } => *id,
                    Report::Init(_) | Report::Built => continue,
                    Report::Failed(reason) => {
                        reports.broken.get_or_insert_with(|| reason.clone());
                        reports.waiting.clear();
                        return;
                    }
                    Report::Vanished => {
                        reports
                            .broken
                            .get_or_insert_with(|| "the session's sandbox has ended".into());
                        reports.waiting.clear();
                        return;
                    }
                };
                if let Some(waiting) = reports.waiting.remove(&id) {
                    let _ = waiting.send(report);
                }
            }
        });
        Ok(Self {
            prefix,
            sender: Arc::new(tokio::sync::Mutex::new(control)),
            reports,
            next_id: std::sync::atomic::AtomicU32::new(1),
            reader,
            proxy: built.proxy,
            planned: built.planned.map(|planned| Arc::new(Mutex::new(planned))),
            profile: profile.clone(),
            watched,
            init,
            _launcher: group,
            _pids: built.pids,
        })
    }

    async fn launch(&self, launch: Launch<'_>) -> io::Result<Started> {
        let id = self
            .next_id
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let argv = full_argv(&self.prefix, &launch);
        let mut run = Run::new(
            Path::new(&argv[0]),
            "",
            launch.dir,
            launch.env,
            launch.stdin,
        );
        run.argv = argv;
        run.id = id;
        run.pty = launch.pty.is_some();
        run.state = launch.state;
        let ends = Ends::new(&launch)?;
        let bytes = confine::run_bytes(&run).map_err(io::Error::other)?;
        let (sender, receiver) = oneshot::channel();
        {
            let mut reports = self.reports.lock().unwrap_or_else(|e| e.into_inner());
            if let Some(broken) = &reports.broken {
                return Err(io::Error::other(broken.clone()));
            }
            reports.waiting.insert(id, sender);
        }
        let fds: Vec<_> = ends.theirs.iter().map(AsFd::as_fd).collect();
        self.sender.lock().await.send_run(&bytes, &fds).await?;
        drop(fds);
        let end = Box::pin(async move {
            use std::os::unix::process::ExitStatusExt;
            match receiver.await {
                Ok(Report::Done { status, .. }) => {
                    Ok(End::Exited(std::process::ExitStatus::from_raw(status)))
                }
                Ok(Report::Refused { reason, .. } | Report::Failed(reason)) => {
                    Ok(End::Unbuilt(reason))
                }
                Ok(Report::Vanished | Report::Init(_) | Report::Built) | Err(_) => Err(
                    io::Error::other("the session's sandbox ended before the command did"),
                ),
            }
        });
        Ok(ends.started(
            end,
            Signals::Sandbox {
                sender: self.sender.clone(),
                id,
            },
        ))
    }
}

impl SessionSandbox {
    /// Kills every process in the sandbox now, whoever still holds it (a
    /// command in flight): its commands end, the next is told `reason`.
    fn end(&self, reason: &str) {
        self.reports
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .broken
            .get_or_insert_with(|| reason.to_string());
        if let Some(init) = &self.init {
            kill(init);
        }
    }
}

impl Drop for SessionSandbox {
    fn drop(&mut self) {
        self.reader.abort();
    }
}

/// Commands run as host processes (`terminal.sandbox = "none"`); every
/// group started is killed when the session ends.
pub(crate) struct HostProcesses {
    prefix: Vec<String>,
    groups: Mutex<Vec<Arc<GroupGuard>>>,
}

impl HostProcesses {
    /// Kills every group it started.
    fn end(&self) {
        for group in self.groups.lock().unwrap_or_else(|e| e.into_inner()).iter() {
            group.signal(libc::SIGKILL);
        }
    }

    fn launch(&self, launch: Launch<'_>) -> io::Result<Started> {
        let argv = full_argv(&self.prefix, &launch);
        let mut ends = Ends::new(&launch)?;
        let mut command = tokio::process::Command::new(&argv[0]);
        command
            .args(&argv[1..])
            .current_dir(launch.dir)
            .env_clear()
            .envs(launch.env.iter().map(|(name, value)| (name, value)))
            .kill_on_drop(false);
        let (stdio, state) = ends.for_child();
        let pty = launch.pty.is_some();
        match stdio {
            [Some(input), Some(output), Some(error)] => {
                command
                    .stdin(Stdio::from(input))
                    .stdout(Stdio::from(output))
                    .stderr(Stdio::from(error));
            }
            [input, output, error] => {
                command
                    .stdin(input.map_or_else(Stdio::null, Stdio::from))
                    .stdout(output.map_or_else(Stdio::null, Stdio::from))
                    .stderr(error.map_or_else(Stdio::null, Stdio::from));
            }
        }
        let state_fd = state.as_ref().map(AsRawFd::as_raw_fd);
        // A session of its own: a process group the host signals whole, and
        // no terminal but the pseudo-terminal toolhost opened for it.
        new_session(&mut command, pty);
        // SAFETY: only async-signal-safe calls (dup2, fcntl) between fork
        // and exec.
        unsafe {
            command.pre_exec(move || {
                if let Some(fd) = state_fd {
                    let placed = if fd == 3 {
                        libc::fcntl(3, libc::F_SETFD, 0)
                    } else {
                        libc::dup2(fd, 3)
                    };
                    if placed < 0 {
                        return Err(io::Error::last_os_error());
                    }
                }
                Ok(())
            });
        }
        let group = ProcessGroup::spawn(&mut command)?;
        drop(command);
        drop(state);
        let (mut child, guard) = group.split();
        let guard = Arc::new(guard);
        {
            let mut groups = self.groups.lock().unwrap_or_else(|e| e.into_inner());
            groups.retain(|group| group.alive());
            groups.push(guard.clone());
        }
        let end = Box::pin(async move { child.wait().await.map(End::Exited) });
        Ok(ends.started(end, Signals::Group(guard)))
    }
}

/// The wrapper's prefix, the shell, then the shell's arguments.
fn full_argv(prefix: &[String], launch: &Launch<'_>) -> Vec<String> {
    let mut argv = prefix.to_vec();
    argv.push(launch.shell.to_string_lossy().into_owned());
    argv.extend(launch.args.iter().cloned());
    argv
}

/// The pipes (or pseudo-terminal) of one command: the host's ends and the
/// command's.
struct Ends {
    stdin: Option<Writer>,
    stdout: Option<Reader>,
    stderr: Option<Reader>,
    state: Option<Reader>,
    /// The command's ends, in the order of [`Run::descriptors`].
    theirs: Vec<OwnedFd>,
    pty: bool,
}

impl Ends {
    fn new(launch: &Launch<'_>) -> io::Result<Self> {
        let mut ends = Self {
            stdin: None,
            stdout: None,
            stderr: None,
            state: None,
            theirs: Vec::new(),
            pty: launch.pty.is_some(),
        };
        if let Some((rows, cols)) = launch.pty {
            let pty = Pty::open(rows, cols)?;
            ends.stdin = Some(Box::new(pty.writer()?));
            ends.stdout = Some(Box::new(pty.reader()?));
            ends.theirs.push(pty.into_terminal());
        } else {
            let (out_write, out_read) = pipe::pipe()?;
            let (err_write, err_read) = pipe::pipe()?;
            ends.theirs
                .extend([out_write.into_blocking_fd()?, err_write.into_blocking_fd()?]);
            ends.stdout = boxed_reader(Some(out_read));
            ends.stderr = boxed_reader(Some(err_read));
            if launch.stdin {
                let (sender, receiver) = pipe::pipe()?;
                ends.theirs.push(receiver.into_blocking_fd()?);
                ends.stdin = boxed_writer(Some(sender));
            }
        }
        if launch.state {
            let (write, read) = pipe::pipe()?;
            ends.theirs.push(write.into_blocking_fd()?);
            ends.state = boxed_reader(Some(read));
        }
        Ok(ends)
    }

    /// The command's ends as its stdin, stdout and stderr (a pseudo-terminal
    /// is all three), and its state pipe.
    fn for_child(&mut self) -> ([Option<OwnedFd>; 3], Option<OwnedFd>) {
        let mut theirs = std::mem::take(&mut self.theirs).into_iter();
        let state = if self.state.is_some() {
            theirs.next_back()
        } else {
            None
        };
        if self.pty {
            let terminal = theirs.next();
            let copy = |fd: &Option<OwnedFd>| fd.as_ref().and_then(|fd| fd.try_clone().ok());
            return ([copy(&terminal), copy(&terminal), terminal], state);
        }
        let output = theirs.next();
        let error = theirs.next();
        let input = theirs.next();
        ([input, output, error], state)
    }

    fn started(self, end: BoxFuture<'static, io::Result<End>>, signals: Signals) -> Started {
        Started {
            stdin: self.stdin,
            stdout: self.stdout,
            stderr: self.stderr,
            state: self.state,
            end,
            signals,
        }
    }
}
