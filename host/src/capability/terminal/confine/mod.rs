//! The kernel sandbox of terminal commands. Every command runs in fresh user,
//! mount, PID, IPC, UTS and (unless the profile shares the host's) network
//! namespaces built from the caller's profile: the system directories and the
//! profile's grants mounted at their own paths (read-only unless writable),
//! `file.deny` matches masked, a private `/proc`, `/dev` and `/tmp`, nothing
//! else of the host. Inside, the command runs in a session of its own with no
//! terminal of the host's, as an unprivileged uid ([`identity`]) with no
//! capabilities, `no_new_privs`, Landlock as a second filesystem layer, a
//! seccomp filter and resource limits; when its shell exits, or the call ends,
//! the PID namespace ends and every process in it.
//!
//! The host builds this by starting its own binary again (the *launcher*)
//! with [`LAUNCH_ARG`]: a fresh single-threaded process can enter a user
//! namespace, which the multi-threaded server cannot. A binary that hosts
//! toolhost calls [`enter_if_requested`] first thing in `main`; a program that
//! embeds the library without doing so names a binary that does with
//! [`use_launcher`].

mod beneath;
mod child;
pub(crate) mod control;
pub(crate) mod cpu;
mod forward;
mod git;
pub(crate) mod guard;
mod harmless;
mod identity;
mod init;
mod inotify;
pub(crate) mod kept;
mod own;
mod parent;
pub(crate) mod pids;
pub(crate) mod plan;
mod rlimit;
mod root;
mod seccomp;
mod shell;
mod spec;
mod sys;
mod walk;
pub(crate) mod watch;

use std::path::{Path, PathBuf};
use std::sync::RwLock;

pub(crate) use plan::plan;
pub(crate) use rlimit::hard_limit;
pub use spec::Spec;
pub(crate) use spec::{MOVED, Mount, MountKind, PROXY_CONNECTIONS, PROXY_PORT, Run, host_id};

/// The first argument that makes a toolhost binary act as the launcher.
pub const LAUNCH_ARG: &str = "__toolhost-sandbox";

/// The first argument that makes a toolhost binary run the program named
/// next (with the arguments after it) in a new session without a
/// controlling terminal: an unconfined command, started with `posix_spawn`
/// and still out of reach of the terminal toolhost runs on.
pub const SESSION_ARG: &str = "__toolhost-session";

/// The argument that makes a binary calling [`enter_if_requested`] hold
/// the containers' lifeline FIFO named next (see `parent.rs`).
pub const LIFELINE_ARG: &str = "__toolhost-lifeline";

/// The binary started as the launcher, when set or known.
static LAUNCHER: RwLock<Option<PathBuf>> = RwLock::new(None);

/// Call first in `main` of a binary that runs toolhost: when the process was
/// started as a sandbox launcher it builds the sandbox and runs the command
/// (and never returns); otherwise it records that this binary can launch
/// sandboxes, so terminal commands use it.
pub fn enter_if_requested() {
    match std::env::args_os().nth(1) {
        Some(arg) if arg == LAUNCH_ARG => child::main(),
        Some(arg) if arg == SESSION_ARG => in_new_session(),
        Some(arg) if arg == LIFELINE_ARG => parent::hold_lifeline(),
        _ => {}
    }
    let mut launcher = LAUNCHER.write().unwrap_or_else(|e| e.into_inner());
    if launcher.is_none() {
        // The running binary, even if its file is replaced meanwhile.
        *launcher = Some(PathBuf::from("/proc/self/exe"));
    }
}

/// Runs the program after [`SESSION_ARG`] in a new session; never returns.
fn in_new_session() -> ! {
    use std::os::unix::ffi::OsStringExt;
    let args: Vec<std::ffi::CString> = std::env::args_os()
        .skip(2)
        .filter_map(|arg| std::ffi::CString::new(arg.into_vec()).ok())
        .collect();
    let mut pointers: Vec<*const libc::c_char> = args.iter().map(|a| a.as_ptr()).collect();
    pointers.push(std::ptr::null());
    // SAFETY: setsid on this process, then exec with NULL-terminated
    // arrays of C strings that outlive the call.
    unsafe {
        if libc::setsid() >= 0 && !args.is_empty() {
            libc::execvp(args[0].as_ptr(), pointers.as_ptr());
        }
        let error = std::io::Error::last_os_error();
        let program = args
            .first()
            .map(|a| a.to_string_lossy())
            .unwrap_or_default();
        let message = format!("toolhost: running {program} in a new session: {error}\n");
        libc::write(2, message.as_ptr().cast(), message.len());
        libc::_exit(127)
    }
}

/// Names the binary that launches sandboxes: one whose `main` calls
/// [`enter_if_requested`] (the `toolhost` binary does).
pub fn use_launcher(path: impl Into<PathBuf>) {
    *LAUNCHER.write().unwrap_or_else(|e| e.into_inner()) = Some(path.into());
}

/// The launcher, or why there is none.
pub(crate) fn launcher() -> Result<PathBuf, String> {
    LAUNCHER
        .read()
        .unwrap_or_else(|e| e.into_inner())
        .clone()
        .ok_or_else(|| {
            "no sandbox launcher: this program did not call \
             toolhost::capability::terminal::confine::enter_if_requested() in main, nor name a \
             toolhost binary with toolhost::capability::terminal::confine::use_launcher()"
                .to_string()
        })
}

/// What the kernel offers the sandbox, as `toolhost check` reports it.
#[derive(Debug, Clone)]
pub struct KernelSupport {
    /// The sandbox can be built (user, mount, PID and network namespaces).
    pub namespaces: Result<(), String>,
    /// The Landlock ABI version, if Landlock is enabled.
    pub landlock_abi: Option<i32>,
    /// What holds `terminal.max_processes`, or why nothing can.
    pub process_limit: Result<String, String>,
    /// What gives each tenant's commands a share of the CPU, or (`Err`) the
    /// fallback and why.
    pub cpu_share: Result<String, String>,
}

/// Checks what the kernel offers by building a sandbox around `true`.
pub async fn probe() -> KernelSupport {
    let landlock_abi = child::landlock_abi();
    let namespaces = async {
        let (spec, run) = probe_spec();
        let group = pids::PidsGroup::for_command(spec.limits.processes, false)?;
        let tenant = crate::capability::terminal::TerminalRules::default().sandbox_id;
        let share = cpu::CpuGroup::for_tenant(tenant);
        let spec = Spec {
            pids: group.as_ref().map(pids::PidsGroup::procs),
            cpu: share.as_deref().map(cpu::CpuGroup::procs),
            ..spec
        };
        let launcher = launcher()?;
        let started = format!(
            "could not start the sandbox launcher {}",
            launcher.display()
        );
        let (mut command, mut control) =
            command(&launcher, None, None).map_err(|e| format!("{started}: {e}"))?;
        let _child = command.spawn().map_err(|e| format!("{started}: {e}"))?;
        let spec = serde_json::to_vec(&spec).map_err(|e| format!("sandbox spec: {e}"))?;
        let _ = control.send_spec(&spec).await;
        let null = std::fs::File::options()
            .write(true)
            .open("/dev/null")
            .map_err(|e| format!("opening /dev/null: {e}"))?;
        use std::os::fd::AsFd;
        let _ = control
            .send_run(&run_bytes(&run)?, &[null.as_fd(), null.as_fd()])
            .await;
        match control.outcome().await {
            control::Outcome::Done(0) => Ok(()),
            control::Outcome::Done(status) => Err(format!(
                "`true` in the sandbox ended with wait status {status}"
            )),
            control::Outcome::Failed(reason) => Err(reason),
            control::Outcome::Vanished => Err(format!(
                "the launcher {} ended without a report",
                launcher.display()
            )),
        }
    }
    .await;
    KernelSupport {
        namespaces,
        landlock_abi,
        process_limit: pids::PidsGroup::mechanism(),
        cpu_share: cpu::mechanism(),
    }
}

/// The sandbox of `true` with nothing granted, for [`probe`].
fn probe_spec() -> (Spec, Run) {
    let mut mounts = plan::Mounts::default();
    mounts.system();
    let run = Run::new(
        Path::new("/bin/sh"),
        "true",
        Path::new("/"),
        &[("PATH".into(), "/usr/bin:/bin".into())],
        false,
    );
    let spec = Spec {
        mounts: mounts.into_list().0,
        guard: guard::Guard::default(),
        host_network: false,
        proxy: None,
        limits: spec::CommandLimits {
            processes: 16,
            memory: 1 << 30,
            file_size: 1 << 20,
            open_files: 64,
            tmp_size: 1 << 20,
        },
        pids: None,
        cpu: None,
        session: false,
        identity: host_id(crate::capability::terminal::TerminalRules::default().sandbox_id),
        landlock: true,
    };
    (spec, run)
}

/// `run` as the launcher reads it.
pub(crate) fn run_bytes(run: &Run) -> Result<Vec<u8>, String> {
    serde_json::to_vec(run).map_err(|e| format!("sandbox command: {e}"))
}

/// The command that starts `launcher` as a sandbox launcher, and the host's
/// end of its channel (see [`control`]): after spawning it, send the spec.
/// With `pids`, the `cgroup.procs` of the sandbox's pids cgroup, and
/// `cpu`, its tenant's cpu cgroup's, the launcher joins those groups first
/// thing, before the spec comes. Nothing
/// runs between fork and exec, so it is spawned with `posix_spawn`.
pub(crate) fn command(
    launcher: &Path,
    pids: Option<&Path>,
    cpu: Option<&Path>,
) -> std::io::Result<(tokio::process::Command, control::Control)> {
    let (control, theirs) = control::Control::pair()?;
    let mut command = tokio::process::Command::new(launcher);
    // An empty argument stands for a group not joined ahead.
    let ahead =
        |group: Option<&Path>| group.map_or_else(Default::default, |p| p.as_os_str().to_owned());
    command.arg(LAUNCH_ARG).arg(ahead(pids)).arg(ahead(cpu));
    command
        .env_clear()
        .current_dir("/")
        .stdin(std::process::Stdio::from(theirs))
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .kill_on_drop(true);
    Ok((command, control))
}
