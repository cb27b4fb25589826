//! PID 1 of a terminal session's sandbox: runs every command the host sends
//! until the host closes the channel, each in a process group of its own
//! (or, on a pseudo-terminal, a session of its own), reports each shell's
//! end with its run's id, signals a run's group when asked, and reaps
//! orphans. Nothing is killed when one command ends: background processes
//! live on until the session ends, when PID 1 exits and the kernel ends
//! every process of the namespace.
//!
//! PID 1 enters the Landlock domain itself, before the first command, so
//! that every command of the session lives in one domain and may signal
//! the processes of the earlier ones (`kill %1` across calls), and nothing
//! outside.

use super::control;
use super::shell::{check_descriptors, control, drop_capabilities, fork, run_shell};
use super::spec::{Run, SETUP_EXIT, Spec};
use super::sys::{check, os_error};

/// Serves the session; returns only when it could not start.
pub(super) fn serve(
    spec: &Spec,
    ruleset: Option<landlock::RulesetCreated>,
    filters: &[seccompiler::BpfProgram],
) -> Result<std::convert::Infallible, String> {
    // SAFETY: plain prctl on this process.
    check(
        unsafe { libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) },
        "prctl(PR_SET_NO_NEW_PRIVS)",
    )?;
    if let Some(ruleset) = ruleset {
        ruleset
            .restrict_self()
            .map_err(|e| format!("Landlock: {e}"))?;
    }
    drop_capabilities()?;
    let children = ChildSignals::block()?;
    // Run ids of the shells still running, by pid.
    let mut running: Vec<(libc::pid_t, u32)> = Vec::new();
    loop {
        let (host, children_ended) = children.wait(libc::POLLIN)?;
        if children_ended {
            children.drain();
            reap(&mut running);
        }
        if host == 0 {
            continue;
        }
        let frame = match control().receive() {
            Ok(Some(frame)) => frame,
            // The host ended the session (or is gone): PID 1's exit takes
            // every process of the namespace with it.
            // SAFETY: ends PID 1.
            Ok(None) | Err(_) => unsafe { libc::_exit(0) },
        };
        match frame.tag {
            control::RUN => {
                let run: Run = match serde_json::from_slice(&frame.payload) {
                    Ok(run) => run,
                    Err(e) => {
                        return Err(format!("the command sent to the sandbox is invalid: {e}"));
                    }
                };
                if let Err(reason) = check_descriptors(&run, &frame.fds) {
                    refuse(run.id, &reason);
                    continue;
                }
                let shell = fork()?;
                if shell == 0 {
                    let reason = children
                        .unblock()
                        .and_then(|()| run_shell(spec, &run, &frame.fds, None, filters))
                        .unwrap_err();
                    refuse(run.id, &reason);
                    // SAFETY: ends the failed shell.
                    unsafe { libc::_exit(SETUP_EXIT) }
                }
                running.push((shell, run.id));
            }
            control::KILL => {
                let Some((id, signal)) = control::unpair(&frame.payload) else {
                    continue;
                };
                if let Some(&(pid, _)) = running.iter().find(|(_, run)| *run == id) {
                    // SAFETY: signals the run's group (the shell leads it);
                    // the shell itself if the group is gone.
                    unsafe {
                        if libc::kill(-pid, signal) < 0 {
                            libc::kill(pid, signal);
                        }
                    }
                }
            }
            tag => return Err(format!("the host sent an unknown message ({tag})")),
        }
    }
}

/// Tells the host why run `id` could not start.
fn refuse(id: u32, reason: &str) {
    let mut payload = id.to_le_bytes().to_vec();
    payload.extend_from_slice(reason.as_bytes());
    let _ = control().send(control::REFUSED, &payload);
}

/// Reaps every ended child; reports the shells among them.
fn reap(running: &mut Vec<(libc::pid_t, u32)>) {
    loop {
        let mut status = 0;
        // SAFETY: reaps any ended child of PID 1 without waiting.
        let pid = unsafe { libc::waitpid(-1, &mut status, libc::WNOHANG) };
        if pid <= 0 {
            return;
        }
        if let Some(index) = running.iter().position(|&(shell, _)| shell == pid) {
            let (_, id) = running.swap_remove(index);
            let _ = control().send(control::DONE, &control::pair(id, status));
        }
    }
}

/// `SIGCHLD`, blocked and read from a signalfd, so PID 1 waits for the
/// host and its children in one `poll`.
pub(super) struct ChildSignals {
    pub(super) fd: libc::c_int,
    mask: libc::sigset_t,
}

impl ChildSignals {
    pub(super) fn block() -> Result<Self, String> {
        // SAFETY: builds a signal set, blocks it and opens a signalfd on it.
        unsafe {
            let mut mask: libc::sigset_t = std::mem::zeroed();
            libc::sigemptyset(&mut mask);
            libc::sigaddset(&mut mask, libc::SIGCHLD);
            check(
                libc::sigprocmask(libc::SIG_BLOCK, &mask, std::ptr::null_mut()),
                "blocking SIGCHLD",
            )?;
            let fd = libc::signalfd(-1, &mask, libc::SFD_CLOEXEC | libc::SFD_NONBLOCK);
            if fd < 0 {
                return os_error("signalfd");
            }
            Ok(Self { fd, mask })
        }
    }

    /// Waits until the host's channel has one of `events` or a child
    /// ended: the channel's events, and whether a child did.
    pub(super) fn wait(&self, events: libc::c_short) -> Result<(libc::c_short, bool), String> {
        loop {
            let mut polls = [
                libc::pollfd {
                    fd: control().0,
                    events,
                    revents: 0,
                },
                libc::pollfd {
                    fd: self.fd,
                    events: libc::POLLIN,
                    revents: 0,
                },
            ];
            // SAFETY: polls two descriptors this process owns.
            if unsafe { libc::poll(polls.as_mut_ptr(), 2, -1) } >= 0 {
                return Ok((polls[0].revents, polls[1].revents != 0));
            }
            if std::io::Error::last_os_error().kind() != std::io::ErrorKind::Interrupted {
                return os_error("poll");
            }
        }
    }

    /// Reads the pending notices (the reap finds the children).
    pub(super) fn drain(&self) {
        let mut info = [0u8; 128];
        // SAFETY: reads into a buffer of the size of one siginfo.
        while unsafe { libc::read(self.fd, info.as_mut_ptr().cast(), info.len()) } > 0 {}
    }

    /// In a forked shell: `SIGCHLD` delivered again, as programs expect.
    pub(super) fn unblock(&self) -> Result<(), String> {
        // SAFETY: unblocks the signal set on this process.
        check(
            unsafe { libc::sigprocmask(libc::SIG_UNBLOCK, &self.mask, std::ptr::null_mut()) },
            "unblocking SIGCHLD",
        )
    }
}
