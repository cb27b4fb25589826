//! The terminal rules of a profile ([`TerminalRules`]): which commands, and
//! how they run: the sandbox, the backend (kernel sandbox, host, ssh,
//! container), their network, ids and what the dangerous-command detector
//! does.

use std::path::PathBuf;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::commands::CommandRules;

/// What to do with a command the dangerous-command detector flags.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum DangerousMode {
    /// Refuse it.
    #[default]
    Deny,
    /// Ask the approver; refuse unless approved.
    Approve,
    /// Run it (the profile's deny_commands still apply).
    Allow,
}

/// What confines terminal commands.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum TerminalSandbox {
    /// The kernel sandbox (namespaces, Landlock, seccomp, limits); commands
    /// are refused where the kernel cannot build it.
    #[default]
    Kernel,
    /// No confinement: commands run as plain host processes. Explicit only.
    None,
}

/// Where terminal commands run.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum TerminalBackend {
    /// On this machine, per `terminal.sandbox`.
    #[default]
    Local,
    /// On a remote host over SSH (`terminal.ssh`).
    Ssh,
    /// In an OCI container through the Docker Engine API
    /// (`terminal.container`).
    Container,
}

/// The container of `terminal.backend = "container"`.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct ContainerSettings {
    /// The image (`docker.io/library/python:3.12-slim`); pulled if the
    /// engine does not have it. It needs `bash` and `sleep`.
    pub image: String,
    /// The engine's socket: a path or `unix://` address (default:
    /// `DOCKER_HOST`, then Docker's and Podman's usual sockets).
    #[serde(default)]
    pub socket: Option<String>,
    /// `uid[:gid]` commands run as (default: toolhost's own, so that files
    /// written in the grants belong to it).
    #[serde(default)]
    pub user: Option<String>,
}

/// The remote host of `terminal.backend = "ssh"`.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct SshSettings {
    /// `host` or `host:port` (port 22 by default).
    pub host: String,
    /// The user to log in as.
    pub user: String,
    /// The private key file (OpenSSH format, without a passphrase).
    pub key_file: PathBuf,
    /// The server's public host key, as in `known_hosts` or a `.pub` file
    /// (`ssh-ed25519 AAAA...`): any other key is refused.
    pub host_key: String,
    /// The remote directory commands start in (default: the login
    /// directory); a command's relative `cwd` is taken in it.
    #[serde(default)]
    pub workdir: Option<String>,
}

/// What network sandboxed commands get.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum TerminalNetwork {
    /// A network namespace of their own with only a loopback interface.
    #[default]
    None,
    /// A network namespace of their own whose only way out is a proxy run by
    /// the host, which lets through requests to `network.allow_hosts` under
    /// the same rules as `http_request` (`HTTP_PROXY` and friends point at
    /// it). The default when the profile allows any host.
    Proxy,
    /// The host's network, unfiltered. Explicit only.
    Host,
}

/// Whether the kernel sandbox adds Landlock as a second filesystem layer.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum TerminalLandlock {
    /// Where the kernel has it.
    #[default]
    Auto,
    /// Never: the mounts, the seccomp filter and the command's ids alone
    /// hold (as on a kernel without Landlock).
    Off,
}

/// The host ids (uids and gids alike) commands run as when toolhost runs
/// as root, unless `sandbox_ids` says otherwise: the callers that are not
/// tenants get the first, each tenant one of the rest. Above the ranges
/// that `useradd` hands out as subordinate ids and below 2^31.
pub const DEFAULT_SANDBOX_IDS: (u32, u32) = (1_879_048_192, 1_879_113_727);

/// The terminal rules of a profile: which commands, and how they run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TerminalRules {
    /// Which commands tools may run.
    pub commands: CommandRules,
    /// What confines commands.
    pub sandbox: TerminalSandbox,
    /// Landlock as a second layer of the kernel sandbox, where the kernel
    /// has it (`terminal.landlock`).
    pub landlock: bool,
    /// The host uid and gid the kernel sandbox runs commands as when
    /// toolhost runs as root: the caller's of `sandbox_ids`.
    pub sandbox_id: u32,
    /// What network commands get.
    pub network: TerminalNetwork,
    /// Host directories commands may read besides the file grants
    /// (toolchains, say); absolute.
    pub read: Vec<PathBuf>,
    /// Most processes a command may run at once.
    pub max_processes: u64,
    /// Most address space of each process of a command, in bytes.
    pub memory: u64,
    /// Largest file a command may write, in bytes.
    pub max_file_size: u64,
    /// Size of a command's private `/tmp`, in bytes.
    pub tmp_size: u64,
    /// What to do with dangerous commands.
    pub dangerous: DangerousMode,
    /// Longest a command may run (the guest may ask for less).
    pub timeout: Duration,
    /// Most bytes kept of stdout and of stderr each.
    pub max_output: usize,
    /// Host environment variables passed to commands (besides a default
    /// `PATH`); everything else is scrubbed.
    pub env: Vec<String>,
    /// An argument list every command runs after (`["apptainer", "exec",
    /// "image.sif"]`): the program, found on the commands' `PATH`, gets the
    /// shell and its arguments. Inside the kernel sandbox unless `sandbox`
    /// is `none`.
    pub wrapper: Vec<String>,
    /// Where commands run.
    pub backend: TerminalBackend,
    /// The remote host when `backend` is `ssh`.
    pub ssh: Option<SshSettings>,
    /// The container when `backend` is `container`.
    pub container: Option<ContainerSettings>,
}

impl Default for TerminalRules {
    /// No command patterns; the kernel sandbox with no network, 256 processes, 4 GiB of
    /// address space per process, files up to 1 GiB, a 256 MiB `/tmp`;
    /// deny dangerous commands, 60 s, 256 KiB of output, no environment.
    fn default() -> Self {
        Self {
            commands: CommandRules::default(),
            sandbox: TerminalSandbox::Kernel,
            landlock: true,
            sandbox_id: DEFAULT_SANDBOX_IDS.0,
            network: TerminalNetwork::None,
            read: Vec::new(),
            max_processes: 256,
            memory: 4 << 30,
            max_file_size: 1 << 30,
            tmp_size: 256 << 20,
            dangerous: DangerousMode::Deny,
            timeout: Duration::from_secs(60),
            max_output: 256 << 10,
            env: Vec::new(),
            wrapper: Vec::new(),
            backend: TerminalBackend::Local,
            ssh: None,
            container: None,
        }
    }
}
