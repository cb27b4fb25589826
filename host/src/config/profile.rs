//! A profile as written, resolved against a workspace into the policy's
//! [`Profile`].

use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::file::{GlobalConfig, ProfileConfig};
use crate::capability::Profile;
use crate::capability::file::{PathRules, rules as paths};
use crate::capability::network::{HostRules, NetworkLimits};
use crate::capability::terminal::{
    CommandRules, TerminalBackend, TerminalNetwork, TerminalSettings,
};
use crate::policy::MAX_MEMORY;
use crate::policy::{Limits, OwnPaths, PermissionRules};

/// Resolves a written profile against `workspace`, pushing every problem.
/// Returns a usable (possibly partial) profile either way.
pub(super) fn resolve_profile(
    name: &str,
    written: &ProfileConfig,
    global: &GlobalConfig,
    workspace: &Path,
    own: &Arc<OwnPaths>,
    problems: &mut Vec<(String, String)>,
) -> Profile {
    let key = |field: &str| format!("profiles.{name}.{field}");
    let mut profile = Profile::deny_all(name, workspace);

    match PermissionRules::parse(&written.allow, &written.deny, &written.approval_required) {
        Ok(rules) => {
            for overlap in rules.overlaps() {
                problems.push((
                    key("deny"),
                    format!("{overlap:?} is both allowed and denied (overlapping rules); keep one"),
                ));
            }
            profile.permissions = rules;
        }
        Err(e) => problems.push((key_of_permission(name, written, &e.pattern), e.to_string())),
    }
    // The global layer's denies and approvals go on top (its patterns are
    // checked where it is validated).
    let none: [String; 0] = [];
    if let Ok(global_rules) = PermissionRules::parse(&none, &global.deny, &global.approval_required)
    {
        profile.permissions = profile.permissions.layered(&global_rules);
    }

    let resolve = |entries: &[String]| -> Vec<PathBuf> {
        entries
            .iter()
            .map(|entry| {
                let trimmed = entry.strip_suffix("/**").unwrap_or(entry);
                let trimmed = if trimmed.is_empty() { "/" } else { trimmed };
                paths::normalize(&workspace.join(trimmed))
            })
            .collect()
    };
    let deny: Vec<String> = written
        .file
        .deny
        .iter()
        .chain(&global.file.deny)
        .map(|pattern| {
            if pattern.starts_with('/') || pattern.starts_with("**") {
                pattern.clone()
            } else {
                let joined = workspace.join(pattern.trim_start_matches("./"));
                joined.to_string_lossy().into_owned()
            }
        })
        .collect();
    for (field, entries) in [
        ("file.read", &written.file.read),
        ("file.write", &written.file.write),
    ] {
        for (i, entry) in entries.iter().enumerate() {
            if written.file.deny.contains(entry) {
                problems.push((
                    format!("profiles.{name}.{field}[{i}]"),
                    format!("{entry:?} is both granted and denied (overlapping rules)"),
                ));
            }
        }
    }
    match PathRules::new(
        resolve(&written.file.read),
        resolve(&written.file.write),
        &deny,
    ) {
        Ok(rules) => profile.paths = rules.with_own(own),
        Err(e) => problems.push((key("file"), e.to_string())),
    }

    match HostRules::parse(&written.network.allow_hosts) {
        Ok(rules) => profile.hosts = rules,
        Err(e) => problems.push((key("network.allow_hosts"), e.to_string())),
    }
    let defaults = NetworkLimits::default();
    profile.network = NetworkLimits {
        url_rules: Vec::new(),
        timeout: written
            .network
            .timeout
            .map(|s| s.0)
            .unwrap_or(defaults.timeout),
        max_response: written
            .network
            .max_response
            .map(|s| s.0)
            .unwrap_or(defaults.max_response),
        max_redirects: written
            .network
            .max_redirects
            .unwrap_or(defaults.max_redirects),
    };

    let terminal = &written.terminal;
    let deny_commands: Vec<String> = terminal
        .deny_commands
        .iter()
        .chain(&global.terminal.deny_commands)
        .cloned()
        .collect();
    match CommandRules::parse(&terminal.allow_commands, &deny_commands) {
        Ok(rules) => profile.commands = rules,
        Err(e) => problems.push((key("terminal"), e.to_string())),
    }
    for command in &terminal.allow_commands {
        if terminal.deny_commands.contains(command) {
            problems.push((
                key("terminal.deny_commands"),
                format!("{command:?} is both allowed and denied (overlapping rules)"),
            ));
        }
    }
    if terminal
        .wrapper
        .first()
        .is_some_and(|program| program.trim().is_empty())
    {
        problems.push((
            key("terminal.wrapper"),
            "the first entry is the wrapper's program and may not be empty".into(),
        ));
    }
    match (terminal.backend, &terminal.ssh) {
        (Some(TerminalBackend::Ssh), None) => problems.push((
            key("terminal.ssh"),
            "terminal.backend = \"ssh\" needs a terminal.ssh table (host, user, key_file, \
             host_key)"
                .into(),
        )),
        (Some(TerminalBackend::Ssh), Some(ssh)) => {
            if let Err(e) = russh::keys::PublicKey::from_openssh(ssh.host_key.trim()) {
                problems.push((
                    key("terminal.ssh.host_key"),
                    format!(
                        "{:?} is not an OpenSSH public key (\"ssh-ed25519 AAAA...\"): {e}",
                        ssh.host_key
                    ),
                ));
            }
        }
        (_, Some(_)) => problems.push((
            key("terminal.ssh"),
            "is used only with terminal.backend = \"ssh\"".into(),
        )),
        _ => {}
    }
    match (terminal.backend, &terminal.container) {
        (Some(TerminalBackend::Container), None) => problems.push((
            key("terminal.container"),
            "terminal.backend = \"container\" needs a terminal.container table (image, and \
             optionally socket and user)"
                .into(),
        )),
        (Some(TerminalBackend::Container), Some(container)) => {
            if container.image.trim().is_empty() {
                problems.push((key("terminal.container.image"), "names no image".into()));
            }
            let user = container.user.as_deref();
            if user.is_some_and(|user| !valid_user(user)) {
                problems.push((
                    key("terminal.container.user"),
                    format!(
                        "{:?} is not \"uid\" or \"uid:gid\" (numbers)",
                        user.unwrap_or_default()
                    ),
                ));
            } else if user.is_some_and(|user| user.split(':').any(|id| id.parse::<u32>() == Ok(0)))
            {
                problems.push((
                    key("terminal.container.user"),
                    format!(
                        "{:?} runs commands as root or in root's group, and the files they make \
                         in the grants would be root's; name an unprivileged uid and gid",
                        user.unwrap_or_default()
                    ),
                ));
            }
        }
        (_, Some(_)) => problems.push((
            key("terminal.container"),
            "is used only with terminal.backend = \"container\"".into(),
        )),
        _ => {}
    }
    let remote = match terminal.backend {
        Some(TerminalBackend::Ssh) => Some("ssh"),
        Some(TerminalBackend::Container) => Some("container"),
        _ => None,
    };
    if let (Some(backend), false) = (remote, terminal.wrapper.is_empty()) {
        problems.push((
            key("terminal.wrapper"),
            format!(
                "a wrapper runs on this machine; it does not go with terminal.backend = \
                 \"{backend}\""
            ),
        ));
    }
    let defaults = TerminalSettings::default();
    profile.terminal = TerminalSettings {
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
        landlock: terminal.landlock != Some(crate::capability::terminal::TerminalLandlock::Off),
        sandbox_id: defaults.sandbox_id,
        network: terminal
            .network
            .unwrap_or(if profile.hosts.allow_hosts.is_empty() {
                TerminalNetwork::None
            } else {
                TerminalNetwork::Proxy
            }),
        read: terminal
            .read
            .iter()
            .map(|dir| paths::normalize(&workspace.join(dir)))
            .collect(),
        max_processes: terminal.max_processes.unwrap_or(defaults.max_processes),
        memory: terminal.memory.map_or(defaults.memory, |s| s.0),
        max_file_size: terminal
            .max_file_size
            .map_or(defaults.max_file_size, |s| s.0),
        tmp_size: terminal.tmp_size.map_or(defaults.tmp_size, |s| s.0),
    };

    for (i, pattern) in written.env.allow.iter().enumerate() {
        if pattern.is_empty()
            || !pattern
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'*')
        {
            problems.push((
                format!("profiles.{name}.env.allow[{i}]"),
                format!("{pattern:?} is not a variable name or a pattern like \"GITHUB_*\""),
            ));
        }
    }
    profile.env = written.env.allow.clone();

    let limits = &written.limits;
    let defaults = Limits::default();
    profile.limits = Limits {
        memory: limits
            .memory
            .map(|s| s.0 as usize)
            .unwrap_or(defaults.memory),
        timeout: limits.timeout.map(|s| s.0).unwrap_or(defaults.timeout),
        max_output: limits
            .max_output
            .map(|s| s.0 as usize)
            .unwrap_or(defaults.max_output),
        max_arguments: limits
            .max_arguments
            .map(|s| s.0 as usize)
            .unwrap_or(defaults.max_arguments),
        concurrency: limits.concurrency.unwrap_or(defaults.concurrency),
    };
    if profile.limits.memory > MAX_MEMORY {
        problems.push((
            key("limits.memory"),
            format!(
                "{} is more than the host's maximum of 4GiB",
                profile.limits.memory
            ),
        ));
    }
    if profile.limits.memory < (1 << 20) {
        problems.push((key("limits.memory"), "must be at least 1MiB".into()));
    }
    if profile.limits.concurrency == 0 {
        problems.push((key("limits.concurrency"), "must be at least 1".into()));
    }
    if profile.limits.timeout.is_zero() {
        problems.push((key("limits.timeout"), "must be more than 0".into()));
    }
    profile.tools = super::tools::resolve_tools(name, &written.tools, global, &profile, problems);
    profile
}

/// The key of the list an invalid permission pattern is in.
fn key_of_permission(name: &str, written: &ProfileConfig, pattern: &str) -> String {
    for (field, list) in [
        ("allow", &written.allow),
        ("deny", &written.deny),
        ("approval_required", &written.approval_required),
    ] {
        if let Some(i) = list.iter().position(|p| p == pattern) {
            return format!("profiles.{name}.{field}[{i}]");
        }
    }
    format!("profiles.{name}")
}

/// `uid` or `uid:gid`, in numbers.
fn valid_user(user: &str) -> bool {
    let number = |part: &str| !part.is_empty() && part.bytes().all(|b| b.is_ascii_digit());
    match user.split_once(':') {
        Some((uid, gid)) => number(uid) && number(gid),
        None => number(user),
    }
}
