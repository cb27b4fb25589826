//! The terminal capability's table: its name and permission,
//! `[profiles.P.terminal]` and `[global.terminal]` as written, and how they
//! resolve into the profile's [`TerminalRules`], each problem at its key.
//! No wasmtime here; its imports are in `imports`.

use std::path::PathBuf;

use serde::Deserialize;

use super::rules::{
    CommandRules, ContainerSettings, DangerousMode, SshSettings, TerminalBackend, TerminalLandlock,
    TerminalNetwork, TerminalRules, TerminalSandbox,
};
use crate::capability::file::rules as paths;
use crate::capability::network::Network;
use crate::capability::section::{Resolve, Section};
use crate::contract::Permission;
use crate::policy::{ByteSize, Span};

/// The permission a tool must declare to run commands.
pub(crate) const TERMINAL_EXECUTE: Permission = Permission::new("terminal:execute");

/// Command lines, run in the kernel sandbox built from the profile.
pub struct Terminal;

/// `terminal.*` of a profile.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TerminalConfig {
    /// When not empty, every command must match one of these patterns.
    #[serde(default)]
    pub allow_commands: Vec<String>,
    /// Commands refused (`rm -rf /*`).
    #[serde(default)]
    pub deny_commands: Vec<String>,
    /// What to do with dangerous commands: `deny` (default), `approve`, `allow`.
    #[serde(default)]
    pub dangerous: Option<DangerousMode>,
    /// Longest a command may run (default 60s).
    #[serde(default)]
    pub timeout: Option<Span>,
    /// Most output kept per stream (default 256KiB).
    #[serde(default)]
    pub max_output: Option<ByteSize>,
    /// Host environment variables passed to commands.
    #[serde(default)]
    pub env: Vec<String>,
    /// An argument list every command runs after (a wrapper such as
    /// `["apptainer", "exec", "image.sif"]`).
    #[serde(default)]
    pub wrapper: Vec<String>,
    /// Where commands run: `local` (default), `ssh` or `container`.
    #[serde(default)]
    pub backend: Option<TerminalBackend>,
    /// The remote host of the `ssh` backend.
    #[serde(default)]
    pub ssh: Option<SshSettings>,
    /// The image and engine of the `container` backend.
    #[serde(default)]
    pub container: Option<ContainerSettings>,
    /// What confines commands: `kernel` (default) or `none`.
    #[serde(default)]
    pub sandbox: Option<TerminalSandbox>,
    /// Landlock in the kernel sandbox: `auto` (default, where the kernel
    /// has it) or `off`.
    #[serde(default)]
    pub landlock: Option<TerminalLandlock>,
    /// What network commands get: `none`, `proxy` (the allowed hosts through
    /// the host's proxy) or `host`; by default `proxy` when the profile
    /// allows any host, else `none`.
    #[serde(default)]
    pub network: Option<TerminalNetwork>,
    /// Directories commands may read besides the file grants.
    #[serde(default)]
    pub read: Vec<PathBuf>,
    /// Most processes of one command at once (default 256).
    #[serde(default)]
    pub max_processes: Option<u64>,
    /// Most address space of each process (default 4GiB).
    #[serde(default)]
    pub memory: Option<ByteSize>,
    /// Largest file a command may write (default 1GiB).
    #[serde(default)]
    pub max_file_size: Option<ByteSize>,
    /// Size of the private /tmp (default 256MiB).
    #[serde(default)]
    pub tmp_size: Option<ByteSize>,
}

/// `[global.terminal]`.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GlobalTerminalConfig {
    /// Commands every profile refuses.
    #[serde(default)]
    pub deny_commands: Vec<String>,
}

impl Section for Terminal {
    const KEY: &'static str = "terminal";
    // Its sandbox mounts the file grants (and names `file:write`); its proxy
    // connects through the network's rules; its default `terminal.network`
    // reads the network's allowed hosts.
    const NEEDS: &'static [&'static str] = &["file", "network"];
    type Written = TerminalConfig;
    type Global = GlobalTerminalConfig;
    type Rules = TerminalRules;

    fn deny_all() -> TerminalRules {
        TerminalRules::default()
    }

    fn resolve(
        terminal: &TerminalConfig,
        global: &GlobalTerminalConfig,
        cx: &mut Resolve<'_>,
    ) -> TerminalRules {
        let defaults = TerminalRules::default();
        let deny_commands: Vec<String> = terminal
            .deny_commands
            .iter()
            .chain(&global.deny_commands)
            .cloned()
            .collect();
        let commands = match CommandRules::parse(&terminal.allow_commands, &deny_commands) {
            Ok(rules) => rules,
            Err(e) => {
                cx.problem(cx.key("terminal"), e.to_string());
                defaults.commands.clone()
            }
        };
        for command in &terminal.allow_commands {
            if terminal.deny_commands.contains(command) {
                cx.problem(
                    cx.key("terminal.deny_commands"),
                    format!("{command:?} is both allowed and denied (overlapping rules)"),
                );
            }
        }
        if terminal
            .wrapper
            .first()
            .is_some_and(|program| program.trim().is_empty())
        {
            cx.problem(
                cx.key("terminal.wrapper"),
                "the first entry is the wrapper's program and may not be empty",
            );
        }
        check_backend(terminal, cx);
        let allows_hosts = !cx.needs::<Network>().hosts.allow_hosts.is_empty();
        TerminalRules {
            commands,
            dangerous: terminal.dangerous.unwrap_or(defaults.dangerous),
            timeout: terminal.timeout.map(|s| s.0).unwrap_or(defaults.timeout),
            max_output: terminal
                .max_output
                .map(|s| s.0 as usize)
                .unwrap_or(defaults.max_output),
            env: terminal.env.clone(),
            wrapper: terminal.wrapper.clone(),
            backend: terminal.backend.unwrap_or_default(),
            ssh: terminal.ssh.clone(),
            container: terminal.container.clone(),
            sandbox: terminal.sandbox.unwrap_or(defaults.sandbox),
            landlock: terminal.landlock != Some(TerminalLandlock::Off),
            sandbox_id: defaults.sandbox_id,
            network: terminal.network.unwrap_or(if allows_hosts {
                TerminalNetwork::Proxy
            } else {
                TerminalNetwork::None
            }),
            read: terminal
                .read
                .iter()
                .map(|dir| paths::normalize(&cx.workspace.join(dir)))
                .collect(),
            max_processes: terminal.max_processes.unwrap_or(defaults.max_processes),
            memory: terminal.memory.map_or(defaults.memory, |s| s.0),
            max_file_size: terminal
                .max_file_size
                .map_or(defaults.max_file_size, |s| s.0),
            tmp_size: terminal.tmp_size.map_or(defaults.tmp_size, |s| s.0),
        }
    }
}

/// The problems of `terminal.backend` with its `ssh` and `container`
/// tables, and with a wrapper.
fn check_backend(terminal: &TerminalConfig, cx: &mut Resolve<'_>) {
    match (terminal.backend, &terminal.ssh) {
        (Some(TerminalBackend::Ssh), None) => cx.problem(
            cx.key("terminal.ssh"),
            "terminal.backend = \"ssh\" needs a terminal.ssh table (host, user, key_file, \
             host_key)",
        ),
        (Some(TerminalBackend::Ssh), Some(ssh)) => {
            if let Err(e) = russh::keys::PublicKey::from_openssh(ssh.host_key.trim()) {
                cx.problem(
                    cx.key("terminal.ssh.host_key"),
                    format!(
                        "{:?} is not an OpenSSH public key (\"ssh-ed25519 AAAA...\"): {e}",
                        ssh.host_key
                    ),
                );
            }
        }
        (_, Some(_)) => cx.problem(
            cx.key("terminal.ssh"),
            "is used only with terminal.backend = \"ssh\"",
        ),
        _ => {}
    }
    match (terminal.backend, &terminal.container) {
        (Some(TerminalBackend::Container), None) => cx.problem(
            cx.key("terminal.container"),
            "terminal.backend = \"container\" needs a terminal.container table (image, and \
             optionally socket and user)",
        ),
        (Some(TerminalBackend::Container), Some(container)) => {
            if container.image.trim().is_empty() {
                cx.problem(cx.key("terminal.container.image"), "names no image");
            }
            let user = container.user.as_deref();
            if user.is_some_and(|user| !valid_user(user)) {
                cx.problem(
                    cx.key("terminal.container.user"),
                    format!(
                        "{:?} is not \"uid\" or \"uid:gid\" (numbers)",
                        user.unwrap_or_default()
                    ),
                );
            } else if user.is_some_and(|user| user.split(':').any(|id| id.parse::<u32>() == Ok(0)))
            {
                cx.problem(
                    cx.key("terminal.container.user"),
                    format!(
                        "{:?} runs commands as root or in root's group, and the files they make \
                         in the grants would be root's; name an unprivileged uid and gid",
                        user.unwrap_or_default()
                    ),
                );
            }
        }
        (_, Some(_)) => cx.problem(
            cx.key("terminal.container"),
            "is used only with terminal.backend = \"container\"",
        ),
        _ => {}
    }
    let remote = match terminal.backend {
        Some(TerminalBackend::Ssh) => Some("ssh"),
        Some(TerminalBackend::Container) => Some("container"),
        _ => None,
    };
    if let (Some(backend), false) = (remote, terminal.wrapper.is_empty()) {
        cx.problem(
            cx.key("terminal.wrapper"),
            format!(
                "a wrapper runs on this machine; it does not go with terminal.backend = \
                 \"{backend}\""
            ),
        );
    }
}

/// `uid` or `uid:gid`, in numbers.
fn valid_user(user: &str) -> bool {
    let number = |part: &str| !part.is_empty() && part.bytes().all(|b| b.is_ascii_digit());
    match user.split_once(':') {
        Some((uid, gid)) => number(uid) && number(gid),
        None => number(user),
    }
}
