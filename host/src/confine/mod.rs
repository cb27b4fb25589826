//! The kernel sandbox of terminal commands. Every command runs in fresh user,
//! mount, PID, IPC, UTS and (unless the profile shares the host's) network
//! namespaces built from the caller's profile: the system directories and the
//! profile's grants mounted at their own paths (read-only unless writable),
//! `file.deny` matches masked, a private `/proc`, `/dev` and `/tmp`, nothing
//! else of the host. Inside, the command runs as an unprivileged uid with no
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

mod child;
mod forward;
pub(crate) mod plan;
mod seccomp;
pub(crate) mod watch;

use std::path::{Path, PathBuf};
use std::sync::RwLock;

use serde::{Deserialize, Serialize};

pub(crate) use plan::plan;

/// The first argument that makes a toolhost binary act as the launcher.
pub const LAUNCH_ARG: &str = "__toolhost-sandbox";

/// The port of the sandbox's loopback that leads to the host's proxy under
/// `terminal.network = "proxy"` (`HTTP_PROXY=http://127.0.0.1:3128`).
pub(crate) const PROXY_PORT: u16 = 3128;

/// Most connections of one command through the proxy at once, held by the
/// relay inside the sandbox and by the host's proxy alike.
pub(crate) const PROXY_CONNECTIONS: usize = 64;

/// The exit code of a launcher that could not build the sandbox; its stderr
/// then starts with [`SETUP_FAILED`].
pub(crate) const SETUP_EXIT: i32 = 125;

/// How a launcher's stderr starts when the sandbox could not be built.
pub(crate) const SETUP_FAILED: &str = "toolhost sandbox: ";

/// The binary started as the launcher, when set or known.
static LAUNCHER: RwLock<Option<PathBuf>> = RwLock::new(None);

/// Call first in `main` of a binary that runs toolhost: when the process was
/// started as a sandbox launcher it builds the sandbox and runs the command
/// (and never returns); otherwise it records that this binary can launch
/// sandboxes, so terminal commands use it.
pub fn enter_if_requested() {
    if std::env::args_os()
        .nth(1)
        .is_some_and(|arg| arg == LAUNCH_ARG)
    {
        child::main();
    }
    let mut launcher = LAUNCHER.write().unwrap_or_else(|e| e.into_inner());
    if launcher.is_none() {
        // The running binary, even if its file is replaced meanwhile.
        *launcher = Some(PathBuf::from("/proc/self/exe"));
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
             toolhost::confine::enter_if_requested() in main, nor name a toolhost binary \
             with toolhost::confine::use_launcher()"
                .to_string()
        })
}

/// The sandbox the launcher builds, sent to it on file descriptor 3. What
/// runs in it comes later, as a [`Run`] on descriptor 4: a sandbox can be
/// built ahead, before its command is known.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Spec {
    /// What is mounted, in order (parents before what lies inside them).
    pub(crate) mounts: Vec<Mount>,
    /// Keep the host's network namespace (`terminal.network = "host"`).
    pub(crate) host_network: bool,
    /// The host's proxy socket, relayed to [`PROXY_PORT`] inside
    /// (`terminal.network = "proxy"`).
    #[serde(default)]
    pub(crate) proxy: Option<PathBuf>,
    /// Resource limits of the command.
    pub(crate) limits: CommandLimits,
}

/// The command a built sandbox runs, sent to the launcher on descriptor 4.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct Run {
    /// The shell that runs the line (`bash -c line`).
    pub(crate) shell: PathBuf,
    /// The command line.
    pub(crate) line: String,
    /// The working directory, as seen inside (the same path as outside).
    pub(crate) cwd: PathBuf,
    /// The whole environment of the command, as bytes.
    pub(crate) env: Vec<(Vec<u8>, Vec<u8>)>,
    /// The command reads the launcher's stdin; otherwise `/dev/null`.
    pub(crate) stdin: bool,
}

impl Run {
    pub(crate) fn new(
        shell: &Path,
        line: &str,
        cwd: &Path,
        env: &[(String, std::ffi::OsString)],
        stdin: bool,
    ) -> Self {
        use std::os::unix::ffi::OsStrExt;
        Self {
            shell: shell.to_path_buf(),
            line: line.to_string(),
            cwd: cwd.to_path_buf(),
            env: env
                .iter()
                .map(|(name, value)| (name.as_bytes().to_vec(), value.as_bytes().to_vec()))
                .collect(),
            stdin,
        }
    }
}

/// One entry of the sandbox's filesystem. Paths are absolute and the same
/// inside as outside.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Mount {
    pub(crate) path: PathBuf,
    pub(crate) kind: MountKind,
}

/// What a [`Mount`] puts at its path.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) enum MountKind {
    /// The host's file or directory, read-only.
    ReadOnly,
    /// The host's directory, read-write.
    ReadWrite,
    /// A symbolic link with the host's link text (`/bin -> usr/bin`).
    Symlink,
    /// An empty, unreadable, read-only file in place of a denied one.
    MaskFile,
    /// An empty, unreadable, read-only directory in place of a denied one.
    MaskDir,
    /// A private `/proc` of the PID namespace.
    Proc,
    /// A minimal `/dev`: null, zero, full, random, urandom, tty.
    Dev,
    /// An empty tmpfs of the size in [`CommandLimits::tmp_size`].
    Tmpfs,
}

/// Resource limits of one command (and everything it starts).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct CommandLimits {
    /// Most processes at once (`RLIMIT_NPROC`, per sandbox).
    pub(crate) processes: u64,
    /// Most address space of each process (`RLIMIT_AS`), in bytes.
    pub(crate) memory: u64,
    /// Largest file a process may write (`RLIMIT_FSIZE`), in bytes.
    pub(crate) file_size: u64,
    /// Most open files of each process (`RLIMIT_NOFILE`).
    pub(crate) open_files: u64,
    /// Size of the private `/tmp`, in bytes.
    pub(crate) tmp_size: u64,
}

/// What the kernel offers the sandbox, as `toolhost check` reports it.
#[derive(Debug, Clone)]
pub struct KernelSupport {
    /// The sandbox can be built (user, mount, PID and network namespaces).
    pub namespaces: Result<(), String>,
    /// The Landlock ABI version, if Landlock is enabled.
    pub landlock_abi: Option<i32>,
}

/// Checks what the kernel offers by building a sandbox around `true`.
pub async fn probe() -> KernelSupport {
    let landlock_abi = child::landlock_abi();
    let namespaces = async {
        let (spec, run) = plan::probe_spec();
        let launcher = launcher()?;
        let out = run_to_end(&launcher, &spec, &run).await?;
        if out.status.success() {
            return Ok(());
        }
        Err(setup_error(&out.stderr).unwrap_or_else(|| {
            format!(
                "the launcher {} exited with {} ({})",
                launcher.display(),
                out.status,
                String::from_utf8_lossy(&out.stderr).trim()
            )
        }))
    }
    .await;
    KernelSupport {
        namespaces,
        landlock_abi,
    }
}

/// Runs the launcher on `spec` and `run` with no input and waits for it.
async fn run_to_end(
    launcher: &Path,
    spec: &Spec,
    run: &Run,
) -> Result<std::process::Output, String> {
    let mut command = tokio::process::Command::new(launcher);
    let run_fd = prepare(&mut command, spec)?;
    command.stdin(std::process::Stdio::null());
    let output = command.output();
    let bytes = run_bytes(run)?;
    let send = async move {
        let mut pipe = tokio::net::unix::pipe::Sender::from_owned_fd(run_fd)?;
        tokio::io::AsyncWriteExt::write_all(&mut pipe, &bytes).await
    };
    let (output, sent) = tokio::join!(output, send);
    let output = output.map_err(|e| format!("could not start the sandbox launcher: {e}"))?;
    sent.map_err(|e| format!("passing the command to the sandbox: {e}"))?;
    Ok(output)
}

/// `run` as the launcher reads it.
pub(crate) fn run_bytes(run: &Run) -> Result<Vec<u8>, String> {
    serde_json::to_vec(run).map_err(|e| format!("sandbox command: {e}"))
}

/// Sets up `command` (a launcher) to build the sandbox of `spec`: the spec
/// on descriptor 3, an empty environment, and descriptor 4 the read end of
/// a pipe whose write end is returned: the [`Run`] written there (see
/// [`run_bytes`]) is what the sandbox runs once built. Closing it unwritten
/// makes the launcher exit without running anything.
pub(crate) fn prepare(
    command: &mut tokio::process::Command,
    spec: &Spec,
) -> Result<std::os::fd::OwnedFd, String> {
    let bytes = serde_json::to_vec(spec).map_err(|e| format!("sandbox spec: {e}"))?;
    let memfd = spec_file(&bytes).map_err(|e| format!("passing the sandbox spec: {e}"))?;
    let (run_read, run_write) =
        cloexec_pipe().map_err(|e| format!("passing the sandbox command: {e}"))?;
    command
        .arg(LAUNCH_ARG)
        .env_clear()
        .current_dir("/")
        .kill_on_drop(true);
    // SAFETY: the closure only calls dup2 and fcntl, which are
    // async-signal-safe, on descriptors the child inherits.
    unsafe {
        command.pre_exec(move || {
            use std::os::fd::AsRawFd;
            // Copied above both targets first, so that placing one cannot
            // overwrite the other where it happens to sit.
            let above = (child::RUN_FD + 1).max(child::SPEC_FD + 1);
            for (fd, target) in [
                (memfd.as_raw_fd(), child::SPEC_FD),
                (run_read.as_raw_fd(), child::RUN_FD),
            ]
            .map(|(fd, target)| (libc::fcntl(fd, libc::F_DUPFD_CLOEXEC, above), target))
            {
                if fd < 0 || libc::dup2(fd, target) < 0 {
                    return Err(std::io::Error::last_os_error());
                }
            }
            Ok(())
        });
    }
    Ok(run_write)
}

/// A pipe whose two ends close on exec.
fn cloexec_pipe() -> std::io::Result<(std::os::fd::OwnedFd, std::os::fd::OwnedFd)> {
    use std::os::fd::FromRawFd;
    let mut fds = [0; 2];
    // SAFETY: pipe2 fills the two descriptors, which are then owned here.
    unsafe {
        if libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) < 0 {
            return Err(std::io::Error::last_os_error());
        }
        Ok((
            std::os::fd::OwnedFd::from_raw_fd(fds[0]),
            std::os::fd::OwnedFd::from_raw_fd(fds[1]),
        ))
    }
}

/// A sealed in-memory file holding `bytes`, positioned at its start.
fn spec_file(bytes: &[u8]) -> std::io::Result<std::os::fd::OwnedFd> {
    use std::io::{Seek, Write};
    use std::os::fd::FromRawFd;
    // SAFETY: memfd_create takes a NUL-terminated name; a valid descriptor
    // it returns is owned by nobody else.
    let fd = unsafe { libc::memfd_create(c"toolhost-sandbox".as_ptr(), libc::MFD_CLOEXEC) };
    if fd < 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: `fd` was just created and is owned here.
    let mut file = unsafe { std::fs::File::from_raw_fd(fd) };
    file.write_all(bytes)?;
    file.rewind()?;
    Ok(file.into())
}

/// The reason in a launcher's stderr when it could not build the sandbox.
pub(crate) fn setup_error(stderr: &[u8]) -> Option<String> {
    let text = String::from_utf8_lossy(stderr);
    let reason = text.strip_prefix(SETUP_FAILED)?;
    Some(reason.lines().next().unwrap_or_default().trim().to_string())
}
