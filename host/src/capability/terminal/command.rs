//! What every command line gets, run alone or in a session: the checks
//! against the profile ([`authorize`]), its working directory, its
//! environment, the shell, and its output as the guest receives it.

use std::ffi::OsString;
use std::path::{Path, PathBuf};

use super::TERMINAL_EXECUTE;
use super::Terminal;
use super::process_group::{self, Captured};
use super::proxy::network_refusal;
use super::terminals::script::DEFAULT_PATH;
use crate::approval::{ApprovalRequest, Subject};
use crate::capability::Profile;
use crate::capability::file::rules as paths;
use crate::capability::grants::{ApprovalScope, Grants};
use crate::capability::network::HostRules;
use crate::capability::sandbox::{Identity, Room};
use crate::capability::terminal::confine;
use crate::capability::terminal::rules::dangerous;
use crate::capability::terminal::{DangerousMode, TerminalBackend, TerminalNetwork};
use crate::contract::bindings::toolhost::plugin::terminal::Output;
use crate::contract::bindings::toolhost::plugin::terminal::TerminalError;
use crate::policy::{Access, PermissionDecision, PermissionRefusal};

/// The shell that runs command lines where it exists.
pub(super) const BASH: &str = "/bin/bash";

/// Most characters of a command line quoted in refusals and audit records.
pub(super) const MAX_QUOTED: usize = 1000;

/// What a command printed and how it ended.
pub(super) fn output(captured: Captured) -> Output {
    Output {
        exit_code: captured.exit_code,
        stdout: process_group::decode(&captured.stdout, captured.stdout_cut),
        stderr: process_group::decode(&captured.stderr, captured.stderr_cut),
        truncated: captured.stdout_cut || captured.stderr_cut,
    }
}

/// The shell that runs command lines: bash, whose grammar the command rules
/// and the detector read, or `/bin/sh` on a system without it.
pub(super) fn shell_path() -> &'static Path {
    static SHELL: std::sync::OnceLock<&'static Path> = std::sync::OnceLock::new();
    SHELL.get_or_init(|| {
        [BASH, "/usr/bin/bash"]
            .into_iter()
            .map(Path::new)
            .find(|path| path.is_file())
            .unwrap_or(Path::new("/bin/sh"))
    })
}

/// Points programs at the command's network proxy (under
/// `terminal.network = "proxy"`), replacing any such variable passed from
/// the host. The command's own loopback is reached directly, except the
/// loopback names and addresses `hosts` (`network.allow_hosts`) names:
/// those go to the proxy, which reaches the host's.
pub(super) fn proxy_env(env: &mut Vec<(String, OsString)>, hosts: &HostRules) {
    let url = format!("http://127.0.0.1:{}", confine::PROXY_PORT);
    let names = ["HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY"];
    env.retain(|(name, _)| {
        let upper = name.to_ascii_uppercase();
        !names.contains(&upper.as_str()) && upper != "NO_PROXY"
    });
    for name in names {
        env.push((name.into(), url.clone().into()));
        env.push((name.to_ascii_lowercase(), url.clone().into()));
    }
    let local: Vec<&str> = ["localhost", "127.0.0.1", "::1"]
        .into_iter()
        .filter(|name| !hosts.names(name))
        .collect();
    let local = local.join(",");
    env.push(("NO_PROXY".into(), local.clone().into()));
    env.push(("no_proxy".into(), local.into()));
}

/// Where a command runs, and its `HOME`.
pub(super) struct WorkingDir {
    /// The working directory, symlinks resolved.
    pub(super) dir: PathBuf,
    /// The default working directory, symlinks resolved.
    pub(super) home: PathBuf,
    /// The automatic approval rule that let a dangerous command run.
    pub(super) auto: Option<String>,
}

/// Where a command's relative paths start, as automatic approval rules
/// judge them.
#[derive(Debug, Clone, Copy)]
pub(super) enum Start<'a> {
    /// Its working directory: the one it asked for, or the default.
    Own,
    /// Its session's current directory, where the last command left it.
    Session(&'a Path),
    /// Not known: a line written to a shell, which may have moved.
    Unknown,
}

/// The directories commands under `profile` may write (none when the
/// profile does not allow `file:write`).
fn writable_dirs(profile: &Profile) -> Vec<PathBuf> {
    let may_write = matches!(
        profile
            .permissions
            .decide(crate::capability::file::FILE_WRITE.as_str()),
        PermissionDecision::Allowed | PermissionDecision::NeedsApproval { .. }
    );
    if !may_write {
        return Vec::new();
    }
    profile
        .file
        .grants()
        .filter(|(_, access)| *access == Access::Write)
        .filter_map(|(dir, _)| dir.canonicalize().ok())
        .collect()
}

/// Checks `line` as [`authorize`] does and records it in the audit, under
/// `label` and the quoted line: where it runs, or the refusal.
pub(super) async fn admit(
    room: &mut Room<'_, Terminal>,
    line: &str,
    cwd: Option<&str>,
    start: Start<'_>,
    label: &str,
) -> Result<WorkingDir, TerminalError> {
    // `Sandbox` is not `Sync`: nothing borrowed from it lives across an await.
    let grants = room.call.grants.clone();
    let identity = room.call.identity.clone();
    let granted = room.granted();
    let quoted = quote(line);
    match authorize(granted, &grants, &identity, line, cwd, start).await {
        Ok(cwd) => {
            match &cwd.auto {
                Some(rule) => room.allowed(format!("{label}{quoted} ({rule})")),
                None => room.allowed(format!("{label}{quoted}")),
            }
            Ok(cwd)
        }
        Err(reason) => {
            let message = format!("command {quoted:?} refused: {reason}");
            room.refused(format!("{label}{quoted}"), reason);
            Err(TerminalError::Denied(message))
        }
    }
}

/// Checks a command line against the grants and the profile, asking the
/// approver if it is dangerous and the profile says so (automatic rules
/// judge its paths from `start`). `Ok` has where it runs; `Err` says why it
/// may not run, which setting refused it and how to allow it.
pub(super) async fn authorize(
    granted: bool,
    grants: &Grants,
    identity: &Identity,
    line: &str,
    cwd: Option<&str>,
    start: Start<'_>,
) -> Result<WorkingDir, String> {
    let profile = &grants.profile;
    if !granted {
        return Err(not_granted(identity, profile));
    }
    // The rules the call was made under must still be the running ones
    // (a reload or a narrowing of its session may have come since it
    // started): every command it runs, a background one included, is
    // checked as it starts.
    if let Some(in_force) = grants.approvals.as_ref().and_then(|s| s.in_force.as_ref()) {
        in_force.check()?;
    }
    let shares_network = profile.terminal.network == TerminalNetwork::Host
        && profile.terminal.backend != TerminalBackend::Ssh;
    if shares_network && let Some(refusal) = network_refusal(profile) {
        return Err(format!(
            "terminal.network = \"host\" gives commands the host's whole network, and {refusal}; \
             allow \"network:fetch\" to the tool ([profiles.{}.tools.{}] allow = \
             [\"network:fetch\"]), or set terminal.network = \"proxy\" (the allowed hosts only) \
             or \"none\"",
            profile.name,
            identity.tool.as_deref().unwrap_or("TOOL"),
        ));
    }
    profile
        .terminal
        .commands
        .check(line)
        .map_err(|refusal| format!("profile {:?}: {refusal}", profile.name))?;
    let dir = match profile.terminal.backend {
        // A container mounts the grants at their own paths.
        TerminalBackend::Local | TerminalBackend::Container => working_dir(profile, cwd)?,
        // The directory is the remote host's, taken there (terminal.ssh.workdir).
        TerminalBackend::Ssh => WorkingDir {
            dir: PathBuf::from("/"),
            home: PathBuf::from("/"),
            auto: None,
        },
    };

    let dangers = dangerous::detect(line);
    if dangers.is_empty() {
        return Ok(dir);
    }
    let found = dangers
        .iter()
        .map(|d| format!("{}: {d}", d.category))
        .collect::<Vec<_>>()
        .join("; ");
    match profile.terminal.dangerous {
        DangerousMode::Allow => {
            tracing::info!(
                plugin = %identity.plugin,
                dangers = %found,
                "running a dangerous command: terminal.dangerous = \"allow\""
            );
            Ok(dir)
        }
        DangerousMode::Deny => Err(format!(
            "it looks dangerous ({found}) and profile {:?} sets terminal.dangerous = \"deny\"; \
                 set terminal.dangerous = \"approve\" to have such commands approved case by case \
                 (or \"allow\" to run them unasked)",
            profile.name
        )),
        DangerousMode::Approve => {
            let Some(scope) = &grants.approvals else {
                return Err(format!(
                    "it looks dangerous ({found}) and profile {:?} sets \
                         terminal.dangerous = \"approve\", but this call has no approver to ask; \
                         run it through a host with an approver",
                    profile.name
                ));
            };
            let request = ApprovalRequest {
                tool: identity
                    .tool
                    .as_deref()
                    .unwrap_or(&grants.subject)
                    .to_string(),
                profile: profile.name.clone(),
                tenant: scope.tenant.clone(),
                session: session_of(scope),
                subject: Subject::DangerousCommand {
                    command: line.to_string(),
                    findings: dangers
                        .iter()
                        .map(|d| (d.category.as_str().to_string(), d.reason.clone()))
                        .collect(),
                    workdir: match start {
                        // Elsewhere paths are the remote host's or the
                        // container's.
                        _ if profile.terminal.backend != TerminalBackend::Local => None,
                        Start::Own => Some(dir.dir.clone()),
                        Start::Session(current) => Some(current.to_path_buf()),
                        Start::Unknown => None,
                    },
                    writable: writable_dirs(profile),
                    fresh_shell: matches!(start, Start::Own),
                },
                config_change: Some(format!(
                    "set terminal.dangerous = \"allow\" under [profiles.{}]",
                    profile.name
                )),
            };
            let auto = scope
                .approvals
                .check(&scope.scope, &request)
                .await
                .map_err(|refusal| {
                    format!(
                        "profile {:?} sets terminal.dangerous = \"approve\": {refusal}",
                        profile.name
                    )
                })?;
            // Approved: the rules the call was made under must still be
            // the running ones.
            if let Some(in_force) = &scope.in_force {
                in_force.check()?;
            }
            Ok(WorkingDir { auto, ..dir })
        }
    }
}

/// Why a call without the terminal grant may not run commands: the tool did
/// not declare the permission, or the profile does not allow it.
pub(super) fn not_granted(identity: &Identity, profile: &Profile) -> String {
    let refusal = match profile.permissions.decide(TERMINAL_EXECUTE.as_str()) {
        PermissionDecision::Allowed | PermissionDecision::NeedsApproval { .. } => {
            return format!(
                "tool {:?} of plugin {:?} did not declare permission {TERMINAL_EXECUTE:?}; \
                     a tool may only use what it declares, so add {TERMINAL_EXECUTE:?} to its \
                     permissions",
                identity.tool.as_deref().unwrap_or("-"),
                identity.plugin
            );
        }
        PermissionDecision::Denied { pattern } => PermissionRefusal::Denied {
            permission: TERMINAL_EXECUTE.to_string(),
            pattern,
        },
        PermissionDecision::NotGranted => PermissionRefusal::NotGranted {
            permission: TERMINAL_EXECUTE.to_string(),
        },
        PermissionDecision::Narrowed { rule } => PermissionRefusal::Narrowed {
            permission: TERMINAL_EXECUTE.to_string(),
            rule,
        },
    };
    format!("profile {:?}: {refusal}", profile.name)
}

/// The working directory for `requested` (relative to the workspace) or the
/// default one, with symlinks resolved; both must lie in a directory the
/// profile grants for reading.
pub(super) fn working_dir(
    profile: &Profile,
    requested: Option<&str>,
) -> Result<WorkingDir, String> {
    let Some(requested) = requested else {
        if let Some(dir) = workspace_above_grants(profile) {
            return Ok(WorkingDir {
                home: dir.clone(),
                dir,
                auto: None,
            });
        }
        let dir = resolve_dir(profile, &default_dir(profile)?)?;
        return Ok(WorkingDir {
            home: dir.clone(),
            dir,
            auto: None,
        });
    };
    let dir = resolve_dir(
        profile,
        &paths::normalize(&profile.workspace().join(requested)),
    )?;
    let home = default_dir(profile)
        .and_then(|home| resolve_dir(profile, &home))
        .unwrap_or_else(|_| dir.clone());
    Ok(WorkingDir {
        dir,
        home,
        auto: None,
    })
}

/// The workspace, when the profile grants directories inside it but not the
/// workspace itself and commands run in the kernel sandbox on this machine:
/// there the workspace holds only the granted directories, so a relative
/// path means in a command what it means to the file tools
/// (`cat ws/notes.txt` and `read_file ws/notes.txt`).
fn workspace_above_grants(profile: &Profile) -> Option<PathBuf> {
    let terminal = &profile.terminal;
    if terminal.backend != TerminalBackend::Local
        || terminal.sandbox != crate::capability::terminal::TerminalSandbox::Kernel
    {
        return None;
    }
    let workspace = paths::normalize(profile.workspace());
    if profile.file.check(&workspace, Access::Read).is_ok()
        || !profile
            .file
            .grants()
            .any(|(dir, _)| dir.starts_with(&workspace))
    {
        return None;
    }
    std::fs::canonicalize(&workspace)
        .ok()
        .filter(|real| real.is_dir())
}

/// The workspace if the profile grants it, else the first granted directory.
pub(super) fn default_dir(profile: &Profile) -> Result<PathBuf, String> {
    let workspace = paths::normalize(profile.workspace());
    if profile.file.check(&workspace, Access::Read).is_ok() {
        return Ok(workspace);
    }
    profile
        .file
        .grants()
        .map(|(dir, _)| dir)
        .find(|dir| profile.file.check(dir, Access::Read).is_ok())
        .map(Path::to_path_buf)
        .ok_or_else(|| {
            format!(
                "profile {:?} grants no directory to run commands in; add the workspace \
                 (\".\") to file.read or file.write",
                profile.name
            )
        })
}

/// Checks `dir` as written and with symlinks resolved; returns the latter.
pub(super) fn resolve_dir(profile: &Profile, dir: &Path) -> Result<PathBuf, String> {
    profile
        .file
        .check(dir, Access::Read)
        .map_err(|refusal| format!("working directory: {refusal}"))?;
    let real = std::fs::canonicalize(dir)
        .map_err(|e| format!("working directory {:?} cannot be used: {e}", dir))?;
    if real != dir {
        profile.file.check(&real, Access::Read).map_err(|refusal| {
            format!(
                "working directory {dir:?} leads to {real:?} through a symbolic link, and {refusal}"
            )
        })?;
    }
    if !real.is_dir() {
        return Err(format!(
            "working directory {dir:?} is not a directory; pass a directory as cwd"
        ));
    }
    Ok(real)
}

/// The whole environment of a command: the variables `terminal.env` names
/// that the host has, and defaults for `PATH` and `HOME`.
pub(super) fn environment(profile: &Profile, home: &Path) -> Vec<(String, OsString)> {
    let mut env = passed_env(profile);
    let has = |env: &[(String, OsString)], name: &str| env.iter().any(|(n, _)| n == name);
    if !has(&env, "PATH") {
        env.push(("PATH".into(), DEFAULT_PATH.into()));
    }
    if !has(&env, "HOME") {
        env.push(("HOME".into(), home.into()));
    }
    env
}

/// The host variables `terminal.env` names that are set.
pub(super) fn passed_env(profile: &Profile) -> Vec<(String, OsString)> {
    profile
        .terminal
        .env
        .iter()
        .filter(|name| !name.is_empty() && !name.contains(['=', '\0']))
        .filter_map(|name| std::env::var_os(name).map(|value| (name.clone(), value)))
        .collect()
}

/// The session of an approval scope (`tenant/session`, `-` for none).
pub(super) fn session_of(scope: &ApprovalScope) -> Option<String> {
    let tenant = scope.tenant.as_deref().unwrap_or("-");
    let session = scope.scope.strip_prefix(tenant)?.strip_prefix('/')?;
    (session != "-").then(|| session.to_string())
}

/// A command line for a message or the audit: at most [`MAX_QUOTED`]
/// characters.
pub(super) fn quote(line: &str) -> String {
    match line.char_indices().nth(MAX_QUOTED) {
        Some((end, _)) => format!("{}...", &line[..end]),
        None => line.to_string(),
    }
}
