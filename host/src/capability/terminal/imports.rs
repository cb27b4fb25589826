//! The terminal's imports: `impl Capability` for [`Terminal`], `run` (alone
//! in a sandbox of its own, built ahead when it can be, or in the caller's
//! session), and the background processes of the session.

use std::sync::Arc;
use std::time::Duration;

use super::command::{Start, admit, environment, output, proxy_env, quote, shell_path};
use super::process_group::{Finished, ShellCommand};
use super::proxy::Proxy;
use super::terminals::TerminalSession;
use crate::capability::Profile;
use crate::capability::grants::Grants;
use crate::capability::sandbox::{Capability, CapabilityInfo, InRoom, Room, Sandbox};
use crate::capability::terminal::confine;
use crate::capability::terminal::{TERMINAL_EXECUTE, Terminal, ahead, background};
use crate::capability::terminal::{TerminalBackend, TerminalSandbox};
use crate::contract::bindings::toolhost::plugin::terminal::{
    self as wit, Command, Host, Output, TerminalError,
};

impl Capability for Terminal {
    const INFO: CapabilityInfo = CapabilityInfo {
        name: "terminal",
        permissions: &[TERMINAL_EXECUTE],
        section: Some("terminal"),
        description: "command lines the profile's terminal rules allow, in a kernel sandbox \
                      that sees only the profile's file grants",
        each: &[],
    };
    /// The call's own terminal session, for a call without one: made at its
    /// first background process, ended with the call.
    type State = Option<Arc<TerminalSession>>;

    fn state(_: &Grants, _: &mut wasmtime_wasi::WasiCtxBuilder) -> Self::State {
        None
    }

    fn add_to_linker(linker: &mut wasmtime::component::Linker<Sandbox>) -> wasmtime::Result<()> {
        wit::add_to_linker::<_, InRoom<Self>>(linker, Sandbox::room::<Self>)?;
        // The same functions under contract 0.1's name.
        crate::contract::adapter::v0_1::add_terminal_to_linker::<_, InRoom<Self>>(
            linker,
            Sandbox::room::<Self>,
        )
    }
}

impl Host for Room<'_, Terminal> {
    async fn run(&mut self, command: Command) -> wasmtime::Result<Result<Output, TerminalError>> {
        let line = command.command_line.as_str();
        let quoted = quote(line);
        let grants = self.call.grants.clone();
        let settings = &grants.profile.terminal;
        // In the caller's session; or, with a wrapper, in one of the call's
        // own (only sessions run commands after a wrapper).
        let remote = settings.backend != TerminalBackend::Local;
        let in_session = grants.session.is_some() || !settings.wrapper.is_empty() || remote;
        // A command without a cwd starts where the session's last one left.
        let current = (in_session && command.cwd.is_none())
            .then(|| background::current_dir(self))
            .flatten();
        let start = current.as_deref().map_or(Start::Own, Start::Session);
        let cwd = match admit(self, line, command.cwd.as_deref(), start, "").await {
            Ok(cwd) => cwd,
            Err(refused) => return Ok(Err(refused)),
        };
        let identity = self.call.identity.clone();

        let profile = &grants.profile;
        let timeout = command.timeout_ms.map_or(settings.timeout, |ms| {
            settings.timeout.min(Duration::from_millis(ms.into()))
        });
        if in_session {
            let session = match background::session_of(self) {
                Ok(session) => session,
                Err(reason) => {
                    let message = format!("command {quoted:?} refused: {reason}");
                    return Ok(Err(TerminalError::Failed(message)));
                }
            };
            let (result, uses) = background::run_in_session(
                &session,
                line,
                &quoted,
                &cwd,
                command.cwd.as_deref(),
                command.stdin,
                timeout,
                settings.max_output,
            )
            .await;
            for used in uses {
                self.call.record(used);
            }
            return Ok(result);
        }
        let mut env = environment(profile, &cwd.home);
        let sandboxed = settings.sandbox == TerminalSandbox::Kernel;
        let (built, stale) = if sandboxed {
            match confinement(&grants.profile).await {
                Ok((built, stale)) => (Some(built), stale),
                Err(reason) => {
                    let message = format!("command {quoted:?} refused: {reason}");
                    return Ok(Err(TerminalError::Failed(message)));
                }
            }
        } else {
            (None, None)
        };
        // The cgroups and the guard's watch are held until the command
        // has ended.
        let (launched, proxy, pids, guard, watched) = match built {
            Some(built) => (
                Some(built.launched),
                built.proxy,
                built.pids,
                Some(built.guard),
                built.watched,
            ),
            None => (None, None, (None, None), None, None),
        };
        if proxy.is_some() {
            proxy_env(&mut env, &grants.profile.network.hosts);
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
        // The command's pids cgroup is removed, and a stale sandbox built
        // ahead killed, off the call's way: removing a cgroup waits while
        // another sandbox joins one (the kernel holds the cgroups' lock
        // for a grace period then), and tearing a sandbox down slows the
        // one being used.
        tokio::task::spawn_blocking(move || drop((pids, stale)));
        for used in proxy.iter().flat_map(Proxy::take_uses) {
            self.call.record(used);
        }
        // What the command planted that git outside would read is put back
        // before anything else runs there (every process of the sandbox
        // has ended).
        let undone = match (&watched, &guard) {
            (Some(watched), _) => watched.settle(),
            (None, Some(guard)) => guard.undo(),
            (None, None) => Ok(()),
        };
        if let Err(reason) = undone {
            return Ok(Err(TerminalError::Failed(format!(
                "command {quoted:?}: {reason}"
            ))));
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

    async fn spawn(
        &mut self,
        command: wit::BackgroundCommand,
    ) -> wasmtime::Result<Result<u32, TerminalError>> {
        Ok(background::spawn(self, command).await)
    }

    async fn read_output(
        &mut self,
        id: u32,
    ) -> wasmtime::Result<Result<wit::ProcessOutput, TerminalError>> {
        Ok(background::read_output(self, id))
    }

    async fn wait(
        &mut self,
        id: u32,
        timeout_ms: u32,
    ) -> wasmtime::Result<Result<wit::ProcessOutput, TerminalError>> {
        let timeout = Duration::from_millis(timeout_ms.into());
        Ok(background::wait(self, id, timeout).await)
    }

    async fn write_input(
        &mut self,
        id: u32,
        input: Vec<u8>,
        close: bool,
    ) -> wasmtime::Result<Result<(), TerminalError>> {
        Ok(background::write_input(self, id, input, close).await)
    }

    async fn send_signal(
        &mut self,
        id: u32,
        signal: wit::Signal,
    ) -> wasmtime::Result<Result<(), TerminalError>> {
        Ok(background::send_signal(self, id, signal).await)
    }

    async fn list_processes(&mut self) -> wasmtime::Result<Vec<wit::ProcessInfo>> {
        Ok(background::list(self))
    }
}

/// The sandbox a command runs in under `profile`: the one built ahead if it
/// still holds, else one built now; with it, a stale sandbox built ahead,
/// to drop once the command has run. `Err` says why the command may not run.
async fn confinement(
    profile: &Arc<Profile>,
) -> Result<(ahead::Built, Option<ahead::Built>), String> {
    let stale = match ahead::take(profile).await {
        ahead::Taken::Ready(built) => return Ok((built, None)),
        ahead::Taken::Stale(stale) => stale,
    };
    let launcher = confine::launcher()?;
    Ok((ahead::build(profile, &launcher, false).await?, stale))
}
