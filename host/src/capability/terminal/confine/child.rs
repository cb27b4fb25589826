//! The launcher: a fresh, single-threaded toolhost process that builds the
//! sandbox of one command and runs it. It talks with the host over the
//! channel of [`super::control`], its stdin. Three processes:
//!
//! - the launcher reads the [`Spec`], starts PID 1 in new user, mount, PID,
//!   IPC, UTS and network namespaces, maps its uid and gid (see
//!   [`super::identity`]), and waits for it;
//! - its child is PID 1 of the new PID namespace, in a session of its own
//!   without a controlling terminal: it builds the filesystem,
//!   waits for the command (a [`Run`] with its stdout, stderr and stdin,
//!   which may come long after: sandboxes are built ahead), starts the
//!   shell and reaps orphans; when the shell exits it kills every other
//!   process of the namespace, reports the shell's wait status to the host
//!   and exits;
//! - the shell ([`super::shell`]) drops every privilege (Landlock,
//!   capabilities, `no_new_privs`, seccomp, resource limits) and runs the
//!   command line.
//!
//! In a terminal session's sandbox, PID 1 instead serves many commands
//! until the host closes the channel ([`super::init`]).
//!
//! When the sandbox cannot be built or the shell not started, the failing
//! process sends the host why (which step failed and the OS error) and
//! exits with [`SETUP_EXIT`](super::SETUP_EXIT).

use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::path::Path;
use std::sync::atomic::Ordering;

use super::control;
use super::root::build_root;
use super::shell::{CONTROL, check_descriptors, control, drop_capabilities, fork, run_shell};
use super::spec::{Mount, MountKind, Run, SETUP_EXIT, Spec};
use super::sys::{check, clone, os_error, pipe, refused};

/// Runs the launcher; never returns.
pub(crate) fn main() -> ! {
    let parent = super::parent::Parent::now();
    // SAFETY: moves the channel (stdin) above the standard descriptors,
    // close-on-exec, and puts /dev/null on stdin.
    unsafe {
        // Above 3, which a session's shell gets its state pipe on.
        let fd = libc::fcntl(0, libc::F_DUPFD_CLOEXEC, 10);
        if fd < 0 {
            libc::_exit(SETUP_EXIT);
        }
        CONTROL.store(fd, Ordering::Relaxed);
        let null = libc::open(c"/dev/null".as_ptr(), libc::O_RDWR | libc::O_CLOEXEC);
        if null < 0 || libc::dup2(null, 0) < 0 {
            fail(&format!(
                "opening /dev/null: {}",
                std::io::Error::last_os_error()
            ));
        }
        libc::close(null);
    }
    match launch(parent) {
        Ok(never) => match never {},
        Err(message) => fail(&message),
    }
}

/// Tells the host why the sandbox could not be built, and exits.
fn fail(message: &str) -> ! {
    let _ = control().send(control::FAILED, message.as_bytes());
    // SAFETY: `_exit` ends the process without running anything else.
    unsafe { libc::_exit(SETUP_EXIT) }
}

fn launch(parent: super::parent::Parent) -> Result<std::convert::Infallible, String> {
    // A launcher started before its spec joins its pids cgroup and its
    // tenant's cpu cgroup now, so that the kernel's grace period is past
    // when the spec comes (an empty argument: no group given ahead).
    let ahead = |n: usize| std::env::args_os().nth(n).filter(|arg| !arg.is_empty());
    if let Some(procs) = ahead(2) {
        join(Path::new(&procs), "command's pids")?;
    }
    let cpu_ahead = ahead(3);
    if let Some(procs) = &cpu_ahead {
        join(Path::new(procs), "tenant's cpu")?;
    }
    let spec: Spec = match control().receive() {
        Ok(Some(frame)) if frame.tag == control::SPEC => serde_json::from_slice(&frame.payload)
            .map_err(|e| format!("the sandbox spec is invalid: {e}"))?,
        Ok(_) => return Err("no sandbox spec came from the host".into()),
        Err(e) => return Err(format!("reading the sandbox spec: {e}")),
    };

    // The launcher joins the command's pids cgroup with the host's rights,
    // before the user namespace, so that everything of the sandbox is in it
    // from the start. Joining a cgroup waits for a kernel grace period
    // (around 10 ms after a pause, on cgroup v1): a launcher the host
    // starts ahead has joined already (see the start of this function);
    // one given its groups in the spec joins here. Without a cpu group,
    // a lower priority that everything of the sandbox inherits.
    if let Some(procs) = &spec.pids {
        join(procs, "command's pids")?;
    }
    match &spec.cpu {
        Some(procs) => join(procs, "tenant's cpu")?,
        None if cpu_ahead.is_none() => super::cpu::lower_priority()?,
        None => {}
    }
    // The command's ids on the host, and (as root) the grants it reaches
    // through idmapped clones, made while this process is still root.
    // SAFETY: plain system calls on this process.
    let (uid, gid) = match spec.identity {
        Some(id) => (id, id),
        None => unsafe { (libc::getuid(), libc::getgid()) },
    };
    let trees = match spec.identity {
        Some(id) => super::identity::idmapped(&spec.mounts, id)?,
        None => Vec::new(),
    };
    let mut flags = libc::CLONE_NEWUSER
        | libc::CLONE_NEWNS
        | libc::CLONE_NEWPID
        | libc::CLONE_NEWIPC
        | libc::CLONE_NEWUTS;
    if !spec.host_network {
        flags |= libc::CLONE_NEWNET;
    }
    // `lifeline` closes when the launcher dies, so PID 1 never outlives it;
    // `mapped` tells PID 1 its ids are mapped.
    let (lifeline_read, lifeline_write) = pipe()?;
    let (mapped_read, mapped_write) = pipe()?;
    let init = clone(flags).map_err(refused)?;
    if init == 0 {
        drop(lifeline_write);
        drop(mapped_write);
        let mut byte = 0u8;
        // SAFETY: reads one byte from our own pipe; without it the launcher
        // failed and said why.
        if unsafe { libc::read(mapped_read.as_raw_fd(), (&mut byte as *mut u8).cast(), 1) } != 1 {
            // SAFETY: ends this process.
            unsafe { libc::_exit(SETUP_EXIT) }
        }
        drop(mapped_read);
        if let Err(message) = super::identity::cap_inotify() {
            fail(&message);
        }
        if let Err(message) = super::identity::become_inside(spec.identity.is_some()) {
            fail(&message);
        }
        match run_init(&spec, lifeline_read, trees) {
            Ok(never) => match never {},
            Err(message) => fail(&message),
        }
    }
    drop(mapped_read);
    drop(trees);
    super::identity::write_maps(init, uid, gid, spec.identity.is_some())?;
    // SAFETY: writes one byte to our own pipe.
    if unsafe { libc::write(mapped_write.as_raw_fd(), [1u8].as_ptr().cast(), 1) } != 1 {
        return os_error("releasing the sandbox's first process");
    }
    drop(mapped_write);
    drop(lifeline_read);
    // The host learns PID 1's pid, to know when the sandbox is gone.
    let _ = control().send(control::INIT, &init.to_le_bytes());
    // SAFETY: PID 1 talks with the host from here; this process keeps no
    // copy of the channel, so it ends when PID 1 does.
    unsafe {
        libc::close(CONTROL.load(Ordering::Relaxed));
    }
    let _keep = lifeline_write;
    let status = wait_for_init(init, parent);
    // SAFETY: ends the process.
    unsafe {
        libc::_exit(if libc::WIFEXITED(status) {
            libc::WEXITSTATUS(status)
        } else {
            SETUP_EXIT
        })
    }
}

/// Waits for PID 1 and answers its wait status; ends it (and so the
/// sandbox) at once when toolhost can no longer act: gone, or stopped.
/// PID 1 also ends the sandbox when toolhost's channel closes; a stopped
/// toolhost keeps it open.
fn wait_for_init(init: libc::pid_t, parent: super::parent::Parent) -> libc::c_int {
    // SAFETY: pidfd_open returns a new descriptor owned here, or -1.
    let pidfd = unsafe { libc::syscall(libc::SYS_pidfd_open, init, 0) } as libc::c_int;
    let mut killed = false;
    loop {
        let mut status = 0;
        // SAFETY: reaps our own child if it ended.
        let reaped = unsafe { libc::waitpid(init, &mut status, libc::WNOHANG) };
        if reaped == init
            || (reaped < 0
                && std::io::Error::last_os_error().kind() != std::io::ErrorKind::Interrupted)
        {
            return status;
        }
        if !killed && parent.unable() {
            // SAFETY: signals our own child, PID 1 of the sandbox.
            unsafe { libc::kill(init, libc::SIGKILL) };
            killed = true;
        }
        let mut poll = libc::pollfd {
            fd: pidfd,
            events: libc::POLLIN,
            revents: 0,
        };
        let every = super::parent::EVERY.as_millis() as libc::c_int;
        if pidfd >= 0 {
            // SAFETY: polls a descriptor this process owns.
            unsafe { libc::poll(&mut poll, 1, every) };
        } else {
            std::thread::sleep(super::parent::EVERY);
        }
    }
}

/// Moves this process into the cgroup whose `cgroup.procs` is `procs` (the
/// `what` cgroup, for the error).
fn join(procs: &Path, what: &str) -> Result<(), String> {
    use std::io::Write;
    std::fs::OpenOptions::new()
        .write(true)
        .open(procs)
        .and_then(|mut file| file.write_all(b"0"))
        .map_err(|e| format!("joining the {what} cgroup {}: {e}", procs.display()))
}

/// PID 1: builds the filesystem, starts the shell, reaps, reports the shell's
/// status and exits (taking every other process of the namespace with it).
fn run_init(
    spec: &Spec,
    lifeline: OwnedFd,
    trees: Vec<Option<OwnedFd>>,
) -> Result<std::convert::Infallible, String> {
    // SAFETY: plain system calls on this process.
    unsafe {
        // A session of its own, without a controlling terminal: nothing of
        // the sandbox reaches the terminal toolhost was started from.
        check(libc::setsid(), "setsid")?;
        check(
            libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL),
            "prctl(PR_SET_PDEATHSIG)",
        )?;
        let mut poll = libc::pollfd {
            fd: lifeline.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        };
        if libc::poll(&mut poll, 1, 0) > 0 {
            libc::_exit(SETUP_EXIT);
        }
    }
    // The proxy's socket is reached through its directory, opened while
    // the host's root is still in place.
    let way = match (&spec.proxy, spec.host_network) {
        (Some(socket), false) => Some(super::forward::Way::open(socket)?),
        _ => None,
    };
    build_root(&spec.mounts, &trees, spec.limits.tmp_size)?;
    drop(trees);
    // SAFETY: sets this UTS namespace's host name.
    unsafe {
        let name = b"toolhost";
        check(
            libc::sethostname(name.as_ptr().cast(), name.len()),
            "sethostname",
        )?;
    }
    if !spec.host_network {
        loopback_up()?;
    }
    let relay = way.map(|way| way.listen()).transpose()?;
    // PID 1 keeps nothing the command could use: no capabilities, and its
    // /proc entries closed to the command. The relay inherits both.
    drop_capabilities()?;
    // SAFETY: plain system calls on this process.
    unsafe {
        libc::prctl(libc::PR_SET_DUMPABLE, 0);
    }
    if let Some(relay) = relay
        && fork()? == 0
    {
        drop(lifeline);
        // SAFETY: the relay has nothing to tell the host.
        unsafe {
            libc::close(CONTROL.load(Ordering::Relaxed));
        }
        relay.run();
    }
    // What the shell applies to itself, made now so that the command, when
    // it comes, only has to be started.
    let ruleset = if spec.landlock {
        Some(landlock(&spec.mounts)?)
    } else {
        None
    };
    let filters = super::seccomp::filters()?;
    // The host checks the plan still held while the mounts were made.
    control()
        .send(control::BUILT, &[])
        .map_err(|e| format!("telling the host the sandbox is built: {e}"))?;
    if spec.session {
        drop(lifeline);
        return super::init::serve(spec, ruleset, &filters);
    }

    let (run, stdio) = match control().receive() {
        Ok(Some(frame)) if frame.tag == control::RUN => {
            let run: Run = serde_json::from_slice(&frame.payload)
                .map_err(|e| format!("the command sent to the sandbox is invalid: {e}"))?;
            (run, frame.fds)
        }
        // SAFETY: the host let the sandbox go unused: ends PID 1, and so
        // the namespace.
        Ok(None) => unsafe { libc::_exit(0) },
        Ok(Some(_)) => return Err("the host sent something other than a command".into()),
        Err(e) => return Err(format!("reading the command: {e}")),
    };
    check_descriptors(&run, &stdio)?;
    // SIGCHLD read from a signalfd, so PID 1 waits for the shell and for
    // the host in one `poll`: a host that is gone (killed with SIGKILL,
    // say) ends the sandbox at once instead of leaving its command running
    // unguarded.
    let children = super::init::ChildSignals::block()?;
    let shell = fork()?;
    if shell == 0 {
        drop(lifeline);
        let message = children
            .unblock()
            .and_then(|()| run_shell(spec, &run, &stdio, ruleset, &filters))
            .unwrap_err();
        fail(&message);
    }
    // Only the command holds its output now: the host sees its end when
    // the command's processes end.
    drop(stdio);
    drop(ruleset);
    loop {
        let Ok((host, children_ended)) = children.wait(libc::POLLIN | libc::POLLRDHUP) else {
            end_namespace(None);
        };
        if children_ended {
            children.drain();
            loop {
                let mut wait_status = 0;
                // SAFETY: reaps any ended child of PID 1 (the shell and
                // orphans) without waiting.
                let pid = unsafe { libc::waitpid(-1, &mut wait_status, libc::WNOHANG) };
                if pid == shell {
                    end_namespace(Some((run.id, wait_status)));
                }
                if pid < 0 && std::io::Error::last_os_error().raw_os_error() == Some(libc::ECHILD) {
                    // SAFETY: ends PID 1.
                    unsafe { libc::_exit(SETUP_EXIT) }
                }
                if pid <= 0 {
                    break;
                }
            }
        }
        if host != 0 {
            // The host sends nothing while the command runs: what comes is
            // its end (or a closed channel's error).
            let gone = host & (libc::POLLRDHUP | libc::POLLHUP | libc::POLLERR) != 0;
            if gone || !matches!(control().receive(), Ok(Some(_))) {
                end_namespace(None);
            }
        }
    }
}

/// Ends every other process of this PID namespace (PID 1 is spared by
/// `kill(-1)`) and reaps them, so nothing the command started runs on and
/// no system call of it is still under way; then reports the shell's wait
/// status (`run`'s id and the status) if it ended, and ends PID 1, and so
/// the namespace.
fn end_namespace(report: Option<(u32, libc::c_int)>) -> ! {
    // SAFETY: signals every process of this PID namespace, reaps them, then
    // ends this process.
    unsafe {
        libc::kill(-1, libc::SIGKILL);
        while libc::waitpid(-1, std::ptr::null_mut(), 0) > 0
            || std::io::Error::last_os_error().kind() == std::io::ErrorKind::Interrupted
        {}
        if let Some((id, status)) = report {
            let _ = control().send(control::DONE, &control::pair(id, status));
        }
        libc::_exit(0)
    }
}

/// Brings up `lo` in the new network namespace, so commands can talk to
/// themselves on 127.0.0.1 (and nothing else).
fn loopback_up() -> Result<(), String> {
    #[repr(C)]
    struct IfReq {
        name: [u8; 16],
        flags: libc::c_short,
        _pad: [u8; 22],
    }
    let mut request = IfReq {
        name: [0; 16],
        flags: 0,
        _pad: [0; 22],
    };
    request.name[..2].copy_from_slice(b"lo");
    // SAFETY: a socket used only for the two ioctls on a valid `ifreq`.
    unsafe {
        let socket = libc::socket(libc::AF_INET, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0);
        if socket < 0 {
            return os_error("socket");
        }
        let socket = OwnedFd::from_raw_fd(socket);
        check(
            libc::ioctl(socket.as_raw_fd(), libc::SIOCGIFFLAGS, &mut request),
            "reading lo's flags",
        )?;
        request.flags |= libc::IFF_UP as libc::c_short;
        check(
            libc::ioctl(socket.as_raw_fd(), libc::SIOCSIFFLAGS, &request),
            "bringing up lo",
        )
    }
}

/// The Landlock ABI of the running kernel, if Landlock is enabled.
pub(crate) fn landlock_abi() -> Option<i32> {
    const LANDLOCK_CREATE_RULESET_VERSION: libc::c_uint = 1;
    // SAFETY: the documented version query: no attributes, size 0.
    let abi = unsafe {
        libc::syscall(
            libc::SYS_landlock_create_ruleset,
            std::ptr::null::<u8>(),
            0usize,
            LANDLOCK_CREATE_RULESET_VERSION,
        )
    };
    (abi > 0).then_some(abi as i32)
}

/// The second filesystem layer: reading only where something is mounted,
/// writing only in writable grants, `/tmp` and the devices; device
/// `ioctl`s (Landlock ABI 5 on) only on `/dev/tty`, the command's own
/// terminal if it has one; signals and abstract sockets only within the
/// sandbox. Made by PID 1, enforced by the shell on itself. A kernel
/// without Landlock (or a profile with `terminal.landlock = "off"`) runs
/// without this layer (the mounts still hold).
fn landlock(mounts: &[Mount]) -> Result<landlock::RulesetCreated, String> {
    use landlock::{
        ABI, Access, AccessFs, PathBeneath, PathFd, Ruleset, RulesetAttr, RulesetCreatedAttr, Scope,
    };
    let abi = ABI::V6;
    let read = AccessFs::from_read(abi);
    let all = AccessFs::from_all(abi);
    // Descriptors the host passed (a pseudo-terminal) keep their rights.
    let no_ioctl = all & !AccessFs::IoctlDev;
    let terminal = AccessFs::ReadFile | AccessFs::WriteFile | AccessFs::IoctlDev;
    let error = |e: landlock::RulesetError| format!("Landlock: {e}");
    let mut ruleset = Ruleset::default()
        .handle_access(all)
        .map_err(error)?
        .scope(Scope::from_all(abi))
        .map_err(error)?
        .create()
        .map_err(error)?;
    let mut rules: Vec<(&Path, _)> = vec![
        (Path::new("/dev"), no_ioctl),
        (Path::new("/dev/tty"), terminal),
        (Path::new("/proc"), read),
    ];
    for entry in mounts {
        match entry.kind {
            MountKind::ReadOnly => rules.push((&entry.path, read)),
            MountKind::ReadWrite | MountKind::Tmpfs => rules.push((&entry.path, no_ioctl)),
            _ => {}
        }
    }
    for (path, access) in rules {
        // Files inside grants (protected git metadata) are covered by their
        // grant; a path that is not there (removed meanwhile) has no rule.
        let device = path == Path::new("/dev/tty");
        if !path.is_dir() && !device {
            continue;
        }
        if let Ok(fd) = PathFd::new(path) {
            ruleset = ruleset
                .add_rule(PathBeneath::new(fd, access))
                .map_err(error)?;
        }
    }
    Ok(ruleset)
}
