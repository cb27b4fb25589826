//! The `container` backend: a session's commands run in one OCI container,
//! created through the Docker Engine API (the `bollard` crate; Docker or
//! Podman's compatible socket) at the session's first command and removed,
//! with every process in it, when the session ends.
//!
//! The container is at least as strict as the kernel sandbox, or it does
//! not start:
//! - the image's filesystem read-only, a private `/tmp` of
//!   `terminal.tmp_size`;
//! - the profile's grants bind-mounted at their own paths (read-write only
//!   where writing is granted, `nosuid,nodev` on Podman), `terminal.read`
//!   read-only, and everything `file.deny` matches inside them masked by an
//!   empty unreadable file or directory: the mounts of
//!   [`crate::capability::terminal::confine::plan`];
//! - no network (`--network none`) unless `terminal.network = "host"`;
//! - every capability dropped, `no-new-privileges`, an unprivileged uid
//!   (toolhost's own, or as root the caller's of `sandbox_ids`), and on
//!   Podman its seccomp profile refusing set-id modes (see [`body`]);
//! - `pids.max` from `terminal.max_processes`, a memory cgroup and (set
//!   by each command's shell) `RLIMIT_AS` from `terminal.memory`,
//!   `RLIMIT_FSIZE` from `terminal.max_file_size`.
//!
//! Each command is one exec running the session's script under the image's
//! bash. Its process group id goes to a file in the container's `/tmp`, so a
//! signal reaches the whole group (through another exec); its state is
//! written to a second file and read back when it ends, as over ssh.
//!
//! What the container is made of is in `body`; talking to the engine in
//! `engine`; the way out under `terminal.network = "proxy"` in `relay`;
//! signalling a command's group in `signals`.

use std::collections::HashMap;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicI32, AtomicU32, Ordering};
use std::sync::{Arc, Mutex};

use bollard::Docker;
use bollard::exec::{CreateExecOptions, StartExecOptions, StartExecResults};
use bollard::query_parameters::CreateContainerOptions;
use futures::StreamExt;
use tokio::io::AsyncWriteExt;

use super::launch::{Launch, Signals, Started};
use super::trailer::{Found, Trailer};
use crate::capability::Profile;
use crate::capability::terminal::confine::guard::Watched;
use crate::capability::terminal::confine::plan::{Planned, still_holds};
use crate::capability::terminal::process_group::{End, Reader, Writer};
use crate::capability::terminal::proxy::{Gate, Proxy};
use crate::capability::terminal::{ContainerSettings, TerminalNetwork};

mod body;
mod engine;
mod relay;
mod signals;

use engine::{LABEL, connect, ensure_image, exit_code, live, owner, remove, request, sweep_once};
pub(crate) use engine::{check_engine, remove_all};
use relay::Relay;
use signals::ContainerSignals;

/// Most times a container is made again because the grants changed while
/// it was made, before the command is refused.
const TRIES: usize = 3;

/// Bytes a pipe between an exec's stream and its reader holds.
const PIPE: usize = 64 * 1024;

/// One session's container.
pub(crate) struct ContainerBackend {
    docker: Docker,
    socket: PathBuf,
    id: String,
    next_id: AtomicU32,
    /// `terminal.memory`: most address space of each process, in bytes.
    memory: u64,
    /// Why the container can no longer serve, once it cannot.
    broken: Arc<Mutex<Option<String>>>,
    /// The session's proxy and its relay into the container
    /// (`terminal.network = "proxy"`).
    relay: Option<Relay>,
    /// Its mounts, checked against the grants before each command.
    planned: Arc<Mutex<Planned>>,
    profile: Arc<Profile>,
    /// The repository guard, watched while the container lives.
    watched: Option<Watched>,
    /// Who its commands run as; its first process runs as another id
    /// ([`body::keeper`]), which no command may signal.
    user: String,
}

impl ContainerBackend {
    /// Creates and starts the container of a session under `profile`;
    /// `Err` says which step failed. The grants are planned again, and the
    /// container made again, when they changed while it was created.
    pub(crate) async fn start(
        profile: &Arc<Profile>,
        settings: &ContainerSettings,
        gate: &Gate,
    ) -> Result<Self, String> {
        let (docker, socket) = connect(settings).await?;
        let swept = socket.clone();
        let _ = tokio::task::spawn_blocking(move || sweep_once(&swept)).await;
        ensure_image(&docker, &settings.image).await?;
        let mut last = String::new();
        for _ in 0..TRIES {
            let mut backend = Self::create(&docker, &socket, profile, settings).await?;
            let planned = backend.planned.clone();
            let checking = profile.clone();
            let verified = tokio::task::spawn_blocking(move || {
                planned
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .verify(&checking)
            })
            .await
            .map_err(|e| format!("checking the container's mounts: {e}"))?;
            if let Err(reason) = verified {
                // Dropped: removed.
                last = reason;
                continue;
            }
            backend.watch_guard()?;
            if profile.terminal.network == TerminalNetwork::Proxy {
                backend.relay =
                    Some(Relay::start(&backend.socket, &backend.id, profile, gate.clone()).await?);
            }
            return Ok(backend);
        }
        Err(format!(
            "the granted directories changed while the session's container was made, {TRIES} \
             times in a row (last: {last}); the command is refused rather than run with \
             something file.deny masks, or repository metadata, unprotected. Try again once \
             they settle"
        ))
    }

    /// Plans the mounts, creates the container and starts it.
    async fn create(
        docker: &Docker,
        socket: &Path,
        profile: &Arc<Profile>,
        settings: &ContainerSettings,
    ) -> Result<Self, String> {
        let planning = profile.clone();
        let (planned, mounts) = tokio::task::spawn_blocking(move || Planned::new(&planning, true))
            .await
            .map_err(|e| format!("planning the container's mounts: {e}"))??;
        let engine = body::Engine::of(docker).await;
        let labels = HashMap::from([(LABEL.to_string(), owner())]);
        let user = body::command_user(profile, settings);
        let body = body::container_body(profile, settings, &mounts, &engine, labels, &user)?;
        let created = docker
            .create_container(
                Some(CreateContainerOptions {
                    name: Some(format!(
                        "toolhost-{}-{:x}",
                        std::process::id(),
                        super::script::nonce() & 0xffff_ffff
                    )),
                    ..Default::default()
                }),
                body,
            )
            .await
            .map_err(|e| format!("creating a container of {:?}: {e}", settings.image))?;
        // An engine that drops a limit it cannot apply says so in a
        // warning: such a container does not hold the profile.
        let dropped: Vec<&String> = created
            .warnings
            .iter()
            .filter(|w| w.to_ascii_lowercase().contains("limit"))
            .collect();
        if !dropped.is_empty() {
            let (socket, id) = (socket.to_path_buf(), created.id.clone());
            let _ = tokio::task::spawn_blocking(move || remove(&socket, &id)).await;
            return Err(format!(
                "the container engine cannot apply the profile's limits: {}",
                dropped
                    .iter()
                    .map(|w| w.as_str())
                    .collect::<Vec<_>>()
                    .join("; ")
            ));
        }
        let backend = Self {
            docker: docker.clone(),
            socket: socket.to_path_buf(),
            id: created.id,
            next_id: AtomicU32::new(1),
            memory: profile.terminal.memory,
            broken: Arc::default(),
            relay: None,
            planned: Arc::new(Mutex::new(planned)),
            profile: profile.clone(),
            watched: None,
            user,
        };
        live()
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(backend.id.clone(), socket.to_path_buf());
        backend
            .docker
            .start_container(&backend.id, None)
            .await
            .map_err(|e| format!("starting a container of {:?}: {e}", settings.image))?;
        Ok(backend)
    }

    /// Watches the guard of the container's mounts: a change is put back,
    /// and the container removed (its next command gets a new one).
    fn watch_guard(&mut self) -> Result<(), String> {
        let guard = self
            .planned
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .guard()
            .clone();
        let (socket, id, broken) = (self.socket.clone(), self.id.clone(), self.broken.clone());
        self.watched = guard.watch(
            Box::new(move |reason| {
                *broken.lock().unwrap_or_else(|e| e.into_inner()) = Some(reason.to_string());
                let (socket, id) = (socket.clone(), id.clone());
                std::thread::spawn(move || remove(&socket, &id));
            }),
            None,
        )?;
        Ok(())
    }

    /// Its mounts, their guard and watch.
    pub(crate) fn planned(&self) -> &Arc<Mutex<Planned>> {
        &self.planned
    }

    /// The guard's watch.
    pub(crate) fn watched(&self) -> Option<&Watched> {
        self.watched.as_ref()
    }

    /// Why the container's mounts no longer hold the profile, if they do
    /// not (see [`Planned`]).
    pub(crate) async fn stale(&self) -> Option<String> {
        still_holds(&self.planned, &self.profile).await
    }

    /// The network proxy the session's commands use, if any.
    pub(crate) fn proxy(&self) -> Option<&Proxy> {
        self.relay.as_ref().map(|relay| &relay.proxy)
    }

    /// Why no more commands can start, once the container is gone.
    /// Removes the container, and every process in it, now (on a thread:
    /// an engine request blocks); what runs next is told `reason`.
    pub(crate) fn end(&self, reason: &str) {
        self.broken
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get_or_insert_with(|| reason.to_string());
        let (socket, id) = (self.socket.clone(), self.id.clone());
        std::thread::spawn(move || {
            let _ = remove(&socket, &id);
        });
    }

    pub(crate) fn broken(&self) -> Option<String> {
        self.broken
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// The container is there and running (as far as the engine says).
    async fn running(&self) -> bool {
        let path = format!("/containers/{}/json", self.id);
        let socket = self.socket.clone();
        let answer = tokio::task::spawn_blocking(move || request(&socket, "GET", &path)).await;
        // Read as a JSON value: engines name states the models do not know.
        match answer {
            Ok(Ok((200, body))) => serde_json::from_slice::<serde_json::Value>(&body)
                .is_ok_and(|c| c["State"]["Running"] == true),
            _ => false,
        }
    }

    /// Starts one command in the container.
    pub(crate) async fn launch(&self, launch: Launch<'_>) -> io::Result<Started> {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let pid_file = format!("/tmp/.toolhost-pgid-{id}");
        let state_file = launch.state.then(|| format!("/tmp/.toolhost-state-{id}"));
        // The address space limit (not among the engines' ulimits) is set
        // by the shell, or the command does not run.
        let limit = format!(
            "ulimit -v {} || {{ echo 'toolhost: cannot limit the address space' >&2; exit 125; }}; ",
            self.memory / 1024
        );
        let start = if launch.pty.is_some() {
            // On a terminal the exec leads its own session and group; its
            // end is the engine's to tell.
            r#"echo $$ > "$1"; shift 2; exec "$@""#
        } else {
            // A job of its own: a process group that a signal reaches whole
            // (job control off again, so that no job notice is printed).
            // Then "done" in place of the group, and the trailer.
            r#"p=$1; s=$2; shift 2; set -m; "$@" & set +m; echo $! > "$p"; wait $!; c=$?
echo done > "$p"
{ printf '\0toolhost-end\0%s\0' "$c"
  if [ -n "$s" ]; then cat -- "$s" 2>/dev/null; rm -f -- "$s"; fi
  printf '\0toolhost-done\0'; } >&2
exit "$c""#
        };
        let mut cmd = vec!["bash".to_string(), "-c".into(), limit + start];
        let state_arg = state_file.clone().unwrap_or_default();
        cmd.extend([
            "toolhost".into(),
            pid_file.clone(),
            state_arg.clone(),
            "bash".into(),
        ]);
        cmd.extend(launch.args.iter().cloned());
        cmd.push(state_arg);
        let env = launch
            .env
            .iter()
            .map(|(name, value)| format!("{name}={}", value.to_string_lossy()))
            .collect();
        let tty = launch.pty.is_some();
        let exec = self
            .docker
            .create_exec(
                &self.id,
                CreateExecOptions {
                    attach_stdin: Some(launch.stdin || tty),
                    attach_stdout: Some(true),
                    attach_stderr: Some(true),
                    tty: Some(tty),
                    user: Some(self.user.clone()),
                    env: Some(env),
                    cmd: Some(cmd),
                    working_dir: Some(launch.dir.to_string_lossy().into_owned()),
                    ..Default::default()
                },
            )
            .await
            .map_err(|e| io::Error::other(format!("the session's container: {e}")));
        let exec = match exec {
            Ok(exec) => exec,
            Err(e) => {
                // Gone or stopped: the next command gets a new container.
                if !self.running().await {
                    *self.broken.lock().unwrap_or_else(|e| e.into_inner()) = Some(e.to_string());
                }
                return Err(e);
            }
        };
        let started = self
            .docker
            .start_exec(
                &exec.id,
                Some(StartExecOptions {
                    detach: false,
                    tty,
                    output_capacity: None,
                }),
            )
            .await
            .map_err(|e| io::Error::other(format!("the container: {e}")))?;
        let StartExecResults::Attached { mut output, input } = started else {
            return Err(io::Error::other(
                "the container engine detached the command",
            ));
        };
        if let Some((rows, cols)) = launch.pty {
            let _ = self
                .docker
                .resize_exec(
                    &exec.id,
                    bollard::exec::ResizeExecOptions {
                        height: rows,
                        width: cols,
                    },
                )
                .await;
        }
        let (mut out, out_read) = tokio::io::duplex(PIPE);
        let (mut err, err_read) = tokio::io::duplex(PIPE);
        let (mut state, state_read) = tokio::io::duplex(PIPE);
        let (ended, end) = tokio::sync::oneshot::channel();
        let signalled = Arc::new(AtomicI32::new(0));
        let docker = self.docker.clone();
        let exec_id = exec.id.clone();
        tokio::spawn(async move {
            use bollard::container::LogOutput;
            let mut trailer = Trailer::default();
            let mut ended = Some(ended);
            while let Some(Ok(chunk)) = output.next().await {
                match chunk {
                    LogOutput::StdOut { message } | LogOutput::Console { message } => {
                        let _ = out.write_all(&message).await;
                    }
                    LogOutput::StdErr { message } => {
                        for found in trailer.feed(&message) {
                            match found {
                                Found::Stderr(bytes) => {
                                    let _ = err.write_all(&bytes).await;
                                }
                                Found::End { code, state: bytes } => {
                                    // The state first: the end lets the
                                    // caller stop reading.
                                    let _ = state.write_all(&bytes).await;
                                    let _ = state.shutdown().await;
                                    if let Some(ended) = ended.take() {
                                        let _ = ended.send(Some(code));
                                    }
                                }
                            }
                        }
                    }
                    LogOutput::StdIn { .. } => {}
                }
            }
            if let Some(rest) = trailer.rest() {
                let _ = err.write_all(&rest).await;
            }
            drop((out, err, state));
            // No trailer (a terminal's output, or a wrapper that was
            // killed): the engine knows the code.
            if let Some(ended) = ended {
                let _ = ended.send(exit_code(&docker, &exec_id).await);
            }
        });
        let mapped = signalled.clone();
        let end = Box::pin(async move {
            use std::os::unix::process::ExitStatusExt;
            match end.await {
                Ok(Some(code)) => {
                    // A shell reports a job a signal ended as 128 + signal.
                    let signal = mapped.load(Ordering::Relaxed);
                    let status = if signal > 0 && code == 128 + i64::from(signal) {
                        signal
                    } else {
                        code.clamp(0, 255) as i32 * 256
                    };
                    Ok(End::Exited(std::process::ExitStatus::from_raw(status)))
                }
                Ok(None) | Err(_) => Err(io::Error::other(
                    "the container's command ended without an exit status (the container is gone)",
                )),
            }
        });
        let reader = |pipe: tokio::io::DuplexStream| Some(Box::new(pipe) as Reader);
        let stdin: Writer = Box::new(input);
        Ok(Started {
            stdin: (launch.stdin || tty).then_some(stdin),
            stdout: reader(out_read),
            stderr: (!tty).then(|| reader(err_read)).flatten(),
            state: launch.state.then(|| Box::new(state_read) as Reader),
            end,
            signals: Signals::Other(Arc::new(ContainerSignals {
                docker: self.docker.clone(),
                socket: self.socket.clone(),
                container: self.id.clone(),
                pid_file,
                user: self.user.clone(),
                signalled,
                broken: self.broken.clone(),
            })),
        })
    }
}

impl Drop for ContainerBackend {
    /// Removes the container, and every process in it, on a thread of its
    /// own (an engine request blocks); a host about to exit removes what is
    /// left with [`remove_all`].
    fn drop(&mut self) {
        let id = self.id.clone();
        let socket = self.socket.clone();
        // Once nothing in the container runs, what it planted is put back.
        let guard = self
            .planned
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .guard()
            .clone();
        let watched = self.watched.take();
        std::thread::spawn(move || {
            if remove(&socket, &id).is_ok() {
                live().lock().unwrap_or_else(|e| e.into_inner()).remove(&id);
            }
            drop(watched);
            if let Err(reason) = guard.undo() {
                tracing::warn!(%reason, "a container planted repository metadata");
            }
        });
    }
}
