//! What the host sends the launcher: the sandbox to build ([`Spec`]), then
//! the command to run in it ([`Run`]), and the constants both sides share.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

/// The port of the sandbox's loopback that leads to the host's proxy under
/// `terminal.network = "proxy"` (`HTTP_PROXY=http://127.0.0.1:3128`).
pub(crate) const PROXY_PORT: u16 = 3128;

/// Most connections of one command through the proxy at once, held by the
/// relay inside the sandbox and by the host's proxy alike.
pub(crate) const PROXY_CONNECTIONS: usize = 64;

/// What a launcher says when a path of its plan was moved or replaced
/// before it was mounted: the host plans the sandbox again.
pub(crate) const MOVED: &str = "moved or replaced since the sandbox was planned";

/// The exit code of a launcher (or shell) that could not build the sandbox
/// (or start); it said why on its channel first.
pub(crate) const SETUP_EXIT: i32 = 125;

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
    /// The `cgroup.procs` of the command's pids cgroup, which its shell
    /// joins (see [`super::pids`]).
    #[serde(default)]
    pub(crate) pids: Option<PathBuf>,
    /// The `cgroup.procs` of the tenant's cpu cgroup, which the launcher
    /// joins with the pids group (see [`super::cpu`]); without one, it
    /// lowers its own priority instead.
    #[serde(default)]
    pub(crate) cpu: Option<PathBuf>,
    /// The sandbox of a terminal session: PID 1 runs every command the
    /// host sends until the channel closes, each in its own process group,
    /// and reports each end ([`super::control::DONE`] with the run's id)
    /// without killing the rest; otherwise it runs one command and ends
    /// with it.
    #[serde(default)]
    pub(crate) session: bool,
    /// What the host checks and puts back; not sent to the launcher.
    #[serde(skip)]
    pub(crate) guard: super::guard::Guard,
    /// The host uid and gid the command runs as, when toolhost runs as
    /// root (see [`super::identity`]); `None`: toolhost's own.
    #[serde(default)]
    pub(crate) identity: Option<u32>,
    /// Landlock as a second filesystem layer, where the kernel has it.
    #[serde(default = "on")]
    pub(crate) landlock: bool,
}

/// Landlock unless a spec says otherwise.
fn on() -> bool {
    true
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
    /// When not empty, the whole argument list `shell` is started with
    /// (a session's script, after a wrapper's prefix); `line` is then unused.
    #[serde(default)]
    pub(crate) argv: Vec<String>,
    /// Which command of a session this is, named in its reports.
    #[serde(default)]
    pub(crate) id: u32,
    /// One descriptor, a pseudo-terminal, is the command's stdin, stdout,
    /// stderr and controlling terminal (it leads a new session); otherwise
    /// stdout, stderr and (when `stdin`) stdin come as three.
    #[serde(default)]
    pub(crate) pty: bool,
    /// One more descriptor, last, is placed at 3 for the shell (where a
    /// session's script writes its working directory and variables).
    #[serde(default)]
    pub(crate) state: bool,
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
            argv: Vec::new(),
            id: 0,
            pty: false,
            state: false,
        }
    }

    /// How many descriptors come with this command.
    pub(crate) fn descriptors(&self) -> usize {
        let io = if self.pty {
            1
        } else {
            2 + usize::from(self.stdin)
        };
        io + usize::from(self.state)
    }
}

/// One entry of the sandbox's filesystem. Paths are absolute and the same
/// inside as outside.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Mount {
    #[serde(with = "os_path")]
    pub(crate) path: PathBuf,
    pub(crate) kind: MountKind,
    /// The device and inode the plan found at `path`: what a bind must
    /// mount and a mask must cover, or the sandbox is not built.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) found: Option<(u64, u64)>,
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

/// The host id the sandbox's uid 1000 inside stands for when toolhost runs
/// as root: `sandbox_id`, the caller's of `sandbox_ids`; otherwise `None`
/// (toolhost's own ids).
pub(crate) fn host_id(sandbox_id: u32) -> Option<u32> {
    // SAFETY: geteuid cannot fail.
    (unsafe { libc::geteuid() } == 0).then_some(sandbox_id)
}

/// A path sent as text where it is UTF-8, else as its bytes: a grant may
/// hold any name.
mod os_path {
    use std::os::unix::ffi::{OsStrExt, OsStringExt};
    use std::path::{Path, PathBuf};

    use serde::{Deserialize, Deserializer, Serializer};

    pub(super) fn serialize<S: Serializer>(path: &Path, to: S) -> Result<S::Ok, S::Error> {
        match path.to_str() {
            Some(text) => to.serialize_str(text),
            None => to.serialize_bytes(path.as_os_str().as_bytes()),
        }
    }

    #[derive(Deserialize)]
    #[serde(untagged)]
    enum Either {
        Text(String),
        Bytes(Vec<u8>),
    }

    pub(super) fn deserialize<'de, D: Deserializer<'de>>(from: D) -> Result<PathBuf, D::Error> {
        Ok(match Either::deserialize(from)? {
            Either::Text(text) => PathBuf::from(text),
            Either::Bytes(bytes) => PathBuf::from(std::ffi::OsString::from_vec(bytes)),
        })
    }
}
