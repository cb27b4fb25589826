//! `terminal`: runs a guest's command line with `bash -c`, in the kernel
//! sandbox of [`crate::confine`] (unless the profile says
//! `terminal.sandbox = "none"`), after checking it against the profile, in
//! this order: the tool declared
//! `terminal:execute` and the profile allows it; `terminal.deny_commands` and
//! `terminal.allow_commands`; the working directory; the dangerous-command
//! detector under `terminal.dangerous` (`deny`, `approve` asks the approver,
//! `allow`). Every command line, run or refused, goes to the audit record.
//!
//! What a command gets:
//! - a working directory inside a directory the profile grants for reading
//!   (`file.read` or `file.write`, minus `file.deny`), checked as written and
//!   again with symlinks resolved. A relative `cwd` is taken relative to the
//!   workspace; without one, commands start in the workspace when it is
//!   granted, else in the first granted directory. A profile that grants no
//!   directory cannot run commands. Write access is not required: the
//!   directory check only decides where a command starts; what the command
//!   can touch is decided by the sandbox, built from the same profile.
//! - an empty environment plus the host variables named (exactly, no
//!   wildcards) in `terminal.env` that are set;
//!   `PATH=/usr/local/bin:/usr/bin:/bin` unless `terminal.env` passes `PATH`;
//!   `HOME` set to the default working directory unless `terminal.env`
//!   passes `HOME`, so programs looking in `~` find the workspace rather than
//!   the host user's dotfiles and credentials.
//! - the smaller of the guest's timeout and `terminal.timeout`; at expiry,
//!   when the shell exits, or when the call is abandoned, every process it
//!   started is gone (the sandbox's PID namespace ends).
//! - stdout and stderr kept up to `terminal.max_output` bytes each.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

mod ahead;

use super::http::proxy::Proxy;
use super::process_group::{self, Captured, Finished, ShellCommand};
use crate::approval::{ApprovalRequest, Subject};
use crate::confine;
use crate::contract::bindings::toolhost::plugin::terminal::{
    self as wit, Command, Host, Output, TerminalError,
};
use crate::policy::{
    Access, DangerousMode, PermissionDecision, PermissionRefusal, Profile, TerminalSandbox,
    dangerous, paths,
};
use crate::runtime::grants::{ApprovalScope, Grants};
use crate::runtime::sandbox::{Capability, CapabilityInfo, Identity, InRoom, Room, Sandbox};

/// The shell that runs command lines where it exists.
const BASH: &str = "/bin/bash";

/// `PATH` of commands unless the profile passes the host's.
const DEFAULT_PATH: &str = "/usr/local/bin:/usr/bin:/bin";

/// The permission a tool must declare to use this import.
pub(crate) const PERMISSION: &str = "terminal:execute";

/// Command lines, run in the kernel sandbox built from the profile.
pub(crate) struct Terminal;

impl Capability for Terminal {
    const INFO: CapabilityInfo = CapabilityInfo {
        name: "terminal",
        permissions: &[PERMISSION],
        section: Some("terminal"),
        description: "command lines the profile's terminal rules allow, in a kernel sandbox \
                      that sees only the profile's file grants",
    };
    type State = ();

    fn state(_: &Grants, _: &mut wasmtime_wasi::WasiCtxBuilder) {}

    fn add_to_linker(linker: &mut wasmtime::component::Linker<Sandbox>) -> wasmtime::Result<()> {
        wit::add_to_linker::<_, InRoom<Self>>(linker, Sandbox::room::<Self>)
    }
}

/// Most characters of a command line quoted in refusals and audit records.
const MAX_QUOTED: usize = 1000;

impl Host for Room<'_, Terminal> {
    async fn run(&mut self, command: Command) -> wasmtime::Result<Result<Output, TerminalError>> {
        // `Sandbox` is not `Sync`: nothing borrowed from it lives across an await.
        let grants = self.call.grants.clone();
        let identity = self.call.identity.clone();
        let granted = self.granted();
        let line = command.command_line.as_str();
        let quoted = quote(line);
        let cwd = match authorize(granted, &grants, &identity, line, command.cwd.as_deref()).await {
            Ok(cwd) => cwd,
            Err(reason) => {
                let message = format!("command {quoted:?} refused: {reason}");
                self.refused(quoted, reason);
                return Ok(Err(TerminalError::Denied(message)));
            }
        };
        self.allowed(quoted.clone());

        let profile = &grants.profile;
        let settings = &profile.terminal;
        let timeout = command.timeout_ms.map_or(settings.timeout, |ms| {
            settings.timeout.min(Duration::from_millis(ms.into()))
        });
        let mut env = environment(profile, &cwd.home);
        let sandboxed = settings.sandbox == TerminalSandbox::Kernel;
        let built = if sandboxed {
            match confinement(&grants.profile).await {
                Ok(built) => Some(built),
                Err(reason) => {
                    let message = format!("command {quoted:?} refused: {reason}");
                    return Ok(Err(TerminalError::Failed(message)));
                }
            }
        } else {
            None
        };
        // The pids group is held until the command has ended.
        let (launched, proxy, _pids) = match built {
            Some(built) => (Some(built.launched), built.proxy, built.pids),
            None => (None, None, None),
        };
        if proxy.is_some() {
            proxy_env(&mut env);
        }
        let shell_path = shell_path();
        let shell = ShellCommand {
            shell: shell_path,
            line,
            confined: launched,
            cwd: &cwd.dir,
            env: &env,
            stdin: command.stdin,
            timeout,
            max_output: settings.max_output,
        };
        let finished = shell.run().await;
        for used in proxy.iter().flat_map(Proxy::take_uses) {
            self.call.record(used);
        }
        // A sandbox that could not be built now would not be built ahead
        // either: no background attempt after each refusal.
        let built = !matches!(finished, Ok(Finished::Unbuilt(_)));
        if sandboxed
            && built
            && let Ok(launcher) = confine::launcher()
        {
            ahead::build_next(&grants.profile, launcher);
        }
        Ok(match finished {
            Ok(Finished::Unbuilt(reason)) => Err(TerminalError::Failed(format!(
                "command {quoted:?} refused: its sandbox could not be built: {reason}"
            ))),
            Ok(Finished::Exited(captured)) => Ok(output(captured)),
            Ok(Finished::TimedOut) => {
                tracing::debug!(
                    plugin = %identity.plugin,
                    ?timeout,
                    "command killed at its time limit"
                );
                Err(TerminalError::Timeout)
            }
            Err(e) => Err(TerminalError::Failed(format!(
                "could not run {} in {}: {e}",
                shell_path.display(),
                cwd.dir.display()
            ))),
        })
    }
}

/// What a command printed and how it ended.
fn output(captured: Captured) -> Output {
    Output {
        exit_code: captured.exit_code,
        stdout: process_group::decode(&captured.stdout, captured.stdout_cut),
        stderr: process_group::decode(&captured.stderr, captured.stderr_cut),
        truncated: captured.stdout_cut || captured.stderr_cut,
    }
}

/// The shell that runs command lines: bash, whose grammar the command rules
/// and the detector read, or `/bin/sh` on a system without it.
fn shell_path() -> &'static Path {
    static SHELL: std::sync::OnceLock<&'static Path> = std::sync::OnceLock::new();
    SHELL.get_or_init(|| {
        [BASH, "/usr/bin/bash"]
            .into_iter()
            .map(Path::new)
            .find(|path| path.is_file())
            .unwrap_or(Path::new("/bin/sh"))
    })
}

/// The sandbox a command runs in under `profile`: the one built ahead if it
/// still holds, else one built now. `Err` says why the command may not run.
async fn confinement(profile: &Arc<Profile>) -> Result<ahead::Built, String> {
    if let Some(built) = ahead::take(profile).await {
        return Ok(built);
    }
    let launcher = confine::launcher()?;
    ahead::build(profile, &launcher, false).await
}

/// Points programs at the command's network proxy (under
/// `terminal.network = "proxy"`), replacing any such variable passed from
/// the host.
fn proxy_env(env: &mut Vec<(String, OsString)>) {
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
    // The command's own servers on its loopback are reached directly.
    let local = "localhost,127.0.0.1,::1";
    env.push(("NO_PROXY".into(), local.into()));
    env.push(("no_proxy".into(), local.into()));
}

/// Where a command runs, and its `HOME`.
struct WorkingDir {
    /// The working directory, symlinks resolved.
    dir: PathBuf,
    /// The default working directory, symlinks resolved.
    home: PathBuf,
}

/// Checks a command line against the grants and the profile, asking the
/// approver if it is dangerous and the profile says so. `Ok` has where it
/// runs; `Err` says why it may not run, which setting refused it and how to
/// allow it.
async fn authorize(
    granted: bool,
    grants: &Grants,
    identity: &Identity,
    line: &str,
    cwd: Option<&str>,
) -> Result<WorkingDir, String> {
    let profile = &grants.profile;
    if !granted {
        return Err(not_granted(identity, profile));
    }
    profile
        .commands
        .check(line)
        .map_err(|refusal| format!("profile {:?}: {refusal}", profile.name))?;
    let dir = working_dir(profile, cwd)?;

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
                },
            };
            scope
                .approvals
                .check(&scope.scope, &request)
                .await
                .map_err(|refusal| {
                    format!(
                        "profile {:?} sets terminal.dangerous = \"approve\": {refusal}",
                        profile.name
                    )
                })?;
            Ok(dir)
        }
    }
}

/// Why a call without the terminal grant may not run commands: the tool did
/// not declare the permission, or the profile does not allow it.
fn not_granted(identity: &Identity, profile: &Profile) -> String {
    let refusal = match profile.permissions.decide(PERMISSION) {
        PermissionDecision::Allowed | PermissionDecision::NeedsApproval { .. } => {
            return format!(
                "tool {:?} of plugin {:?} did not declare permission {PERMISSION:?}; \
                     a tool may only use what it declares, so add {PERMISSION:?} to its \
                     permissions",
                identity.tool.as_deref().unwrap_or("-"),
                identity.plugin
            );
        }
        PermissionDecision::Denied { pattern } => PermissionRefusal::Denied {
            permission: PERMISSION.to_string(),
            pattern,
        },
        PermissionDecision::NotGranted => PermissionRefusal::NotGranted {
            permission: PERMISSION.to_string(),
        },
    };
    format!("profile {:?}: {refusal}", profile.name)
}

/// The working directory for `requested` (relative to the workspace) or the
/// default one, with symlinks resolved; both must lie in a directory the
/// profile grants for reading.
fn working_dir(profile: &Profile, requested: Option<&str>) -> Result<WorkingDir, String> {
    let Some(requested) = requested else {
        let dir = resolve_dir(profile, &default_dir(profile)?)?;
        return Ok(WorkingDir {
            home: dir.clone(),
            dir,
        });
    };
    let dir = resolve_dir(
        profile,
        &paths::normalize(&profile.workspace().join(requested)),
    )?;
    let home = default_dir(profile)
        .and_then(|home| resolve_dir(profile, &home))
        .unwrap_or_else(|_| dir.clone());
    Ok(WorkingDir { dir, home })
}

/// The workspace if the profile grants it, else the first granted directory.
fn default_dir(profile: &Profile) -> Result<PathBuf, String> {
    let workspace = paths::normalize(profile.workspace());
    if profile.paths.check(&workspace, Access::Read).is_ok() {
        return Ok(workspace);
    }
    profile
        .paths
        .grants()
        .map(|(dir, _)| dir)
        .find(|dir| profile.paths.check(dir, Access::Read).is_ok())
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
fn resolve_dir(profile: &Profile, dir: &Path) -> Result<PathBuf, String> {
    profile
        .paths
        .check(dir, Access::Read)
        .map_err(|refusal| format!("working directory: {refusal}"))?;
    let real = std::fs::canonicalize(dir)
        .map_err(|e| format!("working directory {:?} cannot be used: {e}", dir))?;
    if real != dir {
        profile.paths.check(&real, Access::Read).map_err(|refusal| {
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
fn environment(profile: &Profile, home: &Path) -> Vec<(String, OsString)> {
    let mut env: Vec<(String, OsString)> = profile
        .terminal
        .env
        .iter()
        .filter(|name| !name.is_empty() && !name.contains(['=', '\0']))
        .filter_map(|name| std::env::var_os(name).map(|value| (name.clone(), value)))
        .collect();
    let has = |env: &[(String, OsString)], name: &str| env.iter().any(|(n, _)| n == name);
    if !has(&env, "PATH") {
        env.push(("PATH".into(), DEFAULT_PATH.into()));
    }
    if !has(&env, "HOME") {
        env.push(("HOME".into(), home.into()));
    }
    env
}

/// The session of an approval scope (`tenant/session`, `-` for none).
fn session_of(scope: &ApprovalScope) -> Option<String> {
    let tenant = scope.tenant.as_deref().unwrap_or("-");
    let session = scope.scope.strip_prefix(tenant)?.strip_prefix('/')?;
    (session != "-").then(|| session.to_string())
}

/// A command line for a message or the audit: at most [`MAX_QUOTED`]
/// characters.
fn quote(line: &str) -> String {
    match line.char_indices().nth(MAX_QUOTED) {
        Some((end, _)) => format!("{}...", &line[..end]),
        None => line.to_string(),
    }
}
