//! A permission profile, resolved against a workspace: every rule a call is
//! checked against, and the limits it runs under.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::commands::CommandRules;
use super::hosts::HostRules;
use super::layers::ArgumentRule;
use super::paths::PathRules;
use super::permissions::{Narrowing, PermissionRules};
use super::wildcard;

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

/// Resource limits of one call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Limits {
    /// Largest linear memory of the instance, in bytes.
    pub memory: usize,
    /// Wall-clock time limit of one call.
    pub timeout: Duration,
    /// Largest result, in bytes.
    pub max_output: usize,
    /// Largest arguments, in bytes.
    pub max_arguments: usize,
    /// Most calls running at once under the profile.
    pub concurrency: usize,
}

impl Default for Limits {
    /// 64 MiB of memory, 30 s, 1 MiB of output, 1 MiB of arguments, 16 calls at once.
    fn default() -> Self {
        Self {
            memory: 64 << 20,
            timeout: Duration::from_secs(30),
            max_output: 1 << 20,
            max_arguments: 1 << 20,
            concurrency: 16,
        }
    }
}

/// Limits of outbound HTTP.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NetworkLimits {
    /// Longest a request may take (the guest may ask for less).
    pub timeout: Duration,
    /// Largest response body, in bytes.
    pub max_response: u64,
    /// Most redirects followed.
    pub max_redirects: usize,
}

impl Default for NetworkLimits {
    /// 30 s, 10 MiB, 5 redirects.
    fn default() -> Self {
        Self {
            timeout: Duration::from_secs(30),
            max_response: 10 << 20,
            max_redirects: 5,
        }
    }
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

/// How terminal commands run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TerminalSettings {
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

impl Default for TerminalSettings {
    /// The kernel sandbox with no network, 256 processes, 4 GiB of
    /// address space per process, files up to 1 GiB, a 256 MiB `/tmp`;
    /// deny dangerous commands, 60 s, 256 KiB of output, no environment.
    fn default() -> Self {
        Self {
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

/// Every rule of a profile, with file grants resolved against a workspace.
#[derive(Debug, Clone)]
pub struct Profile {
    /// The profile's name in the config.
    pub name: String,
    /// The directory relative file grants were resolved against.
    pub workspace: PathBuf,
    /// Which permissions tools may have.
    pub permissions: PermissionRules,
    /// Which files they may read and write.
    pub paths: PathRules,
    /// Which hosts they may reach.
    pub hosts: HostRules,
    /// Which commands they may run.
    pub commands: CommandRules,
    /// How commands run.
    pub terminal: TerminalSettings,
    /// Limits of outbound HTTP.
    pub network: NetworkLimits,
    /// Host environment variables (names, `*` wildcards) tools may receive.
    pub env: Vec<String>,
    /// Limits of each call.
    pub limits: Limits,
    /// What the tool and parameter layers say of single tools, by name.
    pub tools: BTreeMap<String, Arc<ToolRules>>,
}

/// What a profile says of one tool, beyond its permission rules.
#[derive(Debug, Clone)]
pub struct ToolRules {
    /// The tool.
    pub tool: String,
    /// Where each part was written (`global.tools.T`, `profiles.P.tools.T`).
    pub keys: Vec<String>,
    /// `Some(key)` when a layer switched the tool off (`enabled = false`).
    pub disabled_by: Option<String>,
    /// The tool's own permission patterns (allow, deny, approval), as written.
    pub permissions: PermissionRules,
    /// Restrictions on its arguments.
    pub arguments: Vec<ArgumentRule>,
    /// The profile as it applies to this tool: its permission rules with
    /// the tool's on top (the tool's denies win; its allows add).
    pub profile: Arc<Profile>,
    /// The same when the tool declares file permissions and has path rules
    /// (glob rules not written as URLs): every path it touches is confined
    /// to their globs.
    pub confined: Option<Arc<Profile>>,
}

impl Profile {
    /// A profile that allows nothing: no permissions, no files, no hosts.
    pub fn deny_all(name: impl Into<String>, workspace: impl Into<PathBuf>) -> Self {
        let none: [&str; 0] = [];
        Self {
            name: name.into(),
            workspace: workspace.into(),
            permissions: PermissionRules::parse(&none, &none, &none)
                .expect("empty rules are valid"),
            paths: PathRules::new(Vec::<PathBuf>::new(), Vec::<PathBuf>::new(), none)
                .expect("empty rules are valid"),
            hosts: HostRules::parse(&none).expect("empty rules are valid"),
            commands: CommandRules::parse(&none, &none).expect("empty rules are valid"),
            terminal: TerminalSettings::default(),
            network: NetworkLimits::default(),
            env: Vec::new(),
            limits: Limits::default(),
            tools: BTreeMap::new(),
        }
    }

    /// The profile as it applies to `tool`: with the tool layer's
    /// permission rules on top, if it has any.
    pub fn for_tool(self: &Arc<Self>, tool: &str) -> Arc<Profile> {
        match self.tools.get(tool) {
            Some(rules) => rules.profile.clone(),
            None => self.clone(),
        }
    }

    /// The profile a call of `tool` runs under: [`Profile::for_tool`], with
    /// its paths confined to the tool's path rules when the tool declares
    /// file permissions (`files`).
    pub fn for_call(self: &Arc<Self>, tool: &str, files: bool) -> Arc<Profile> {
        match self.tools.get(tool) {
            Some(rules) => match (&rules.confined, files) {
                (Some(confined), true) => confined.clone(),
                _ => rules.profile.clone(),
            },
            None => self.clone(),
        }
    }

    /// [`Profile::for_tool`] by reference.
    pub fn applied(&self, tool: &str) -> &Profile {
        match self.tools.get(tool) {
            Some(rules) => &rules.profile,
            None => self,
        }
    }

    /// Why `tool` is switched off, if a layer did.
    pub fn disabled(&self, tool: &str) -> Option<&str> {
        self.tools.get(tool)?.disabled_by.as_deref()
    }

    /// The parameter restrictions of `tool`.
    pub fn argument_rules(&self, tool: &str) -> &[ArgumentRule] {
        self.tools
            .get(tool)
            .map_or(&[], |rules| rules.arguments.as_slice())
    }

    /// This profile narrowed by a session: the same rules, and a permission
    /// must also pass `narrowing` (for every tool).
    pub fn narrowed(&self, narrowing: &Narrowing) -> Profile {
        self.narrowed_by(&[Arc::new(narrowing.clone())])
    }

    /// This profile with a session's `narrowings` on top, all at once: one
    /// copy of the profile (and of each tool's), whatever their number.
    pub fn narrowed_by(&self, narrowings: &[Arc<Narrowing>]) -> Profile {
        let mut narrowed = self.clone();
        narrowed.permissions = self.permissions.narrowed(narrowings);
        narrowed.tools = self
            .tools
            .iter()
            .map(|(name, rules)| {
                let mut rules = (**rules).clone();
                rules.profile = Arc::new(rules.profile.narrowed_by(narrowings));
                rules.confined = rules
                    .confined
                    .as_ref()
                    .map(|confined| Arc::new(confined.narrowed_by(narrowings)));
                (name.clone(), Arc::new(rules))
            })
            .collect();
        narrowed
    }

    /// Whether the profile lets tools receive the host variable `name`.
    pub fn allows_env(&self, name: &str) -> bool {
        self.env
            .iter()
            .any(|pattern| wildcard::matches(pattern, name))
    }

    /// The workspace.
    pub fn workspace(&self) -> &Path {
        &self.workspace
    }
}
