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
//!   [`crate::confine::plan`];
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

use std::collections::HashMap;
use std::io::{self, Read, Write};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicI32, AtomicU32, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use bollard::Docker;
use bollard::exec::{CreateExecOptions, StartExecOptions, StartExecResults};
use bollard::query_parameters::{CreateContainerOptions, CreateImageOptions};
use futures::StreamExt;
use tokio::io::AsyncWriteExt;

use super::super::super::http::proxy::{Gate, Proxy};
use super::super::super::process_group::{End, Reader, Writer};
use super::launch::{Launch, Signaller, Signals, Started};
use super::trailer::{Found, Trailer};
use crate::confine::guard::Watched;
use crate::confine::plan::{Planned, still_holds};
use crate::confine::{PROXY_CONNECTIONS, PROXY_PORT};
use crate::policy::{ContainerSettings, Profile, TerminalNetwork};

mod body;
/// Most times a container is made again because the grants changed while
/// it was made, before the command is refused.
const TRIES: usize = 3;

/// Bytes a pipe between an exec's stream and its reader holds.
const PIPE: usize = 64 * 1024;

/// Seconds an engine request may take (pulling an image takes longer and is
/// not bound by it).
const REQUEST_TIMEOUT: u64 = 120;

/// The label every container of toolhost carries, with the host process's
/// id and boot, so that one left by a process that died is removed.
const LABEL: &str = "toolhost.session";

/// Where the engine's socket usually is, after `DOCKER_HOST`.
const SOCKETS: &[&str] = &["/var/run/docker.sock", "/run/podman/podman.sock"];

/// Longest a `kill` in a container may take to start and answer before
/// the container is given up.
const KILL_TIMEOUT: Duration = Duration::from_secs(2);

/// What the shell of a `kill` in a container prints first.
const KILL_RAN: &str = "toolhost-kill-ran";

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
                backend.relay = Some(Relay::start(&backend, profile, gate.clone()).await?);
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
        let body = body::container_body(profile, settings, &mounts, &engine, labels)?;
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

/// The way out of a container under `terminal.network = "proxy"`: a
/// listener on the container's loopback at [`PROXY_PORT`], made by a thread
/// of this process that entered the container's network namespace (so
/// nothing needs to run in the image), whose connections go to the
/// session's proxy of the allowed hosts. The container has no other
/// interface.
struct Relay {
    proxy: Proxy,
    task: tokio::task::JoinHandle<()>,
}

impl Relay {
    async fn start(
        backend: &ContainerBackend,
        profile: &Profile,
        gate: Gate,
    ) -> Result<Self, String> {
        let fail = |e: String| {
            format!(
                "terminal.network = \"proxy\" in a container: {e}; toolhost reaches into the \
                 container's network namespace, which needs a rootful engine on this machine and \
                 toolhost running as root (or set terminal.network = \"none\")"
            )
        };
        let path = format!("/containers/{}/json", backend.id);
        let socket = backend.socket.clone();
        let inspected = tokio::task::spawn_blocking(move || request(&socket, "GET", &path))
            .await
            .map_err(|e| fail(e.to_string()))?
            .map_err(|e| fail(e.to_string()))?;
        let pid = serde_json::from_slice::<serde_json::Value>(&inspected.1)
            .ok()
            .and_then(|c| c["State"]["Pid"].as_i64())
            .filter(|&pid| pid > 0)
            .ok_or_else(|| fail("the engine names no process of the container".into()))?;
        let listener = tokio::task::spawn_blocking(move || listen_in(pid))
            .await
            .map_err(|e| fail(e.to_string()))?
            .map_err(|e| fail(e.to_string()))?;
        let listener =
            tokio::net::TcpListener::from_std(listener).map_err(|e| fail(e.to_string()))?;
        let proxy = Proxy::start(profile.hosts.clone(), gate)
            .map_err(|e| format!("could not start the network proxy of the session: {e}"))?;
        let target = proxy.socket();
        let task = tokio::spawn(async move {
            let permits = Arc::new(tokio::sync::Semaphore::new(PROXY_CONNECTIONS));
            while let Ok((mut client, _)) = listener.accept().await {
                // Past the cap a connection is closed at once.
                let Ok(permit) = permits.clone().try_acquire_owned() else {
                    continue;
                };
                let target = target.clone();
                tokio::spawn(async move {
                    if let Ok(mut proxy) = tokio::net::UnixStream::connect(&target).await {
                        let _ = tokio::io::copy_bidirectional(&mut client, &mut proxy).await;
                    }
                    drop(permit);
                });
            }
        });
        Ok(Self { proxy, task })
    }
}

impl Drop for Relay {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// A listener on `127.0.0.1:PROXY_PORT` in the network namespace of
/// process `pid`, made on a thread of its own (a namespace is a thread's;
/// the socket stays in the one it was made in).
fn listen_in(pid: i64) -> io::Result<std::net::TcpListener> {
    use std::os::fd::AsRawFd;
    let namespace = std::fs::File::open(format!("/proc/{pid}/ns/net"))?;
    std::thread::spawn(move || {
        // SAFETY: changes the network namespace of this thread only, which
        // ends once the listener is made.
        if unsafe { libc::setns(namespace.as_raw_fd(), libc::CLONE_NEWNET) } != 0 {
            return Err(io::Error::last_os_error());
        }
        let listener = std::net::TcpListener::bind((std::net::Ipv4Addr::LOCALHOST, PROXY_PORT))?;
        listener.set_nonblocking(true)?;
        Ok(listener)
    })
    .join()
    .map_err(|_| io::Error::other("the thread entering the namespace panicked"))?
}

/// How a command in a container is signalled: `kill` of its process group,
/// run in the container. A container that cannot run the `kill` (its
/// process limit taken by a fork bomb, say) is removed with everything in
/// it, so no command outlives its deadline; the session's next command gets
/// a new one.
struct ContainerSignals {
    docker: Docker,
    socket: PathBuf,
    container: String,
    pid_file: String,
    /// The last signal sent, to tell a job it ended from an exit code.
    signalled: Arc<AtomicI32>,
    broken: Arc<Mutex<Option<String>>>,
}

impl Signaller for ContainerSignals {
    fn send(&self, signal: libc::c_int) -> futures::future::BoxFuture<'_, ()> {
        Box::pin(self.signal(signal))
    }
}

impl ContainerSignals {
    async fn signal(&self, signal: libc::c_int) {
        self.signalled.store(signal, Ordering::Relaxed);
        let file = &self.pid_file;
        // The group id is written as the command starts: wait for it a
        // little. Reading it and the kill are built into the shell, so they
        // need no process of their own (a fork bomb leaves none); whatever
        // kill answers, the shell prints a line starting with KILL_RAN.
        let script = format!(
            "for i in 1 2 3 4 5 6 7 8 9 10; do [ -s '{file}' ] && break; sleep 0.1; done; \
             read group < '{file}'; [ \"$group\" = done ] && {{ echo {KILL_RAN} ended; exit; }}; \
             kill -{signal} -\"$group\" 2>/dev/null; echo {KILL_RAN} $?"
        );
        let ran = tokio::time::timeout(
            KILL_TIMEOUT,
            capture(&self.docker, &self.container, &script),
        )
        .await;
        // The engine may put its own error in the output: the shell's line
        // is the proof that it ran.
        if let Ok(Ok(out)) = &ran
            && out.starts_with(KILL_RAN.as_bytes())
        {
            return;
        }
        let reason = "the session's container could not run kill (its process limit reached?) \
                      and was removed with everything in it"
            .to_string();
        tracing::warn!(container = %self.container, "{reason}");
        *self.broken.lock().unwrap_or_else(|e| e.into_inner()) = Some(reason);
        let (socket, id) = (self.socket.clone(), self.container.clone());
        let _ = tokio::task::spawn_blocking(move || remove(&socket, &id)).await;
    }
}

/// What `toolhost doctor` says of a profile's container engine: `Ok` names
/// the engine and its version and whether the image is there; `Err` says
/// why no command could run.
pub(crate) async fn check_engine(settings: &ContainerSettings) -> Result<String, String> {
    let (docker, path) = connect(settings).await?;
    let version = docker
        .version()
        .await
        .map_err(|e| format!("the container engine at {}: {e}", path.display()))?;
    let engine = version
        .components
        .as_ref()
        .and_then(|c| c.first())
        .map(|c| format!("{} {}", c.name, c.version))
        .or(version.version.clone())
        .unwrap_or_else(|| "an engine".into());
    let image = if docker.inspect_image(&settings.image).await.is_ok() {
        format!("image {:?} present", settings.image)
    } else {
        format!(
            "image {:?} not there yet: pulled at the first command",
            settings.image
        )
    };
    Ok(format!("{engine} at {}; {image}", path.display()))
}

/// A client of the engine of `settings`, its API version agreed, and the
/// engine's socket.
async fn connect(settings: &ContainerSettings) -> Result<(Docker, PathBuf), String> {
    let socket = socket(settings)?;
    Docker::connect_with_unix(
        &socket.to_string_lossy(),
        REQUEST_TIMEOUT,
        bollard::API_DEFAULT_VERSION,
    )
    .map_err(|e| format!("the container engine at {}: {e}", socket.display()))?
    .negotiate_version()
    .await
    .map(|docker| (docker, socket.clone()))
    .map_err(|e| {
        format!(
            "the container engine at {} does not answer: {e} (terminal.container.socket)",
            socket.display()
        )
    })
}

/// The engine's socket: the configured one, `DOCKER_HOST`, or the first of
/// [`SOCKETS`] that exists.
fn socket(settings: &ContainerSettings) -> Result<PathBuf, String> {
    let written = settings
        .socket
        .clone()
        .or_else(|| std::env::var("DOCKER_HOST").ok());
    if let Some(written) = written {
        let Some(path) = written
            .strip_prefix("unix://")
            .or_else(|| written.starts_with('/').then_some(written.as_str()))
        else {
            return Err(format!(
                "the container engine at {written:?}: only a local socket (a path or unix://) \
                 serves, since the grants are bind-mounted from this machine"
            ));
        };
        return Ok(PathBuf::from(path));
    }
    SOCKETS
        .iter()
        .map(PathBuf::from)
        .find(|path| path.exists())
        .ok_or_else(|| {
            format!(
                "no container engine: none of {} exists and DOCKER_HOST is not set; start \
                 Docker or `podman system service`, or set terminal.container.socket",
                SOCKETS.join(", ")
            )
        })
}

/// Pulls `image` unless the engine has it.
async fn ensure_image(docker: &Docker, image: &str) -> Result<(), String> {
    if docker.inspect_image(image).await.is_ok() {
        return Ok(());
    }
    tracing::info!(%image, "pulling the terminal container's image");
    let mut pull = docker.create_image(
        Some(CreateImageOptions {
            from_image: Some(image.to_string()),
            ..Default::default()
        }),
        None,
        None,
    );
    while let Some(step) = pull.next().await {
        step.map_err(|e| {
            format!("the image {image:?} is not on the container engine and pulling it failed: {e}")
        })?;
    }
    docker
        .inspect_image(image)
        .await
        .map(|_| ())
        .map_err(|e| format!("the image {image:?} after pulling it: {e}"))
}

/// The exit code of exec `id`, once it has one.
async fn exit_code(docker: &Docker, id: &str) -> Option<i64> {
    for _ in 0..50 {
        match docker.inspect_exec(id).await {
            Ok(inspected) if inspected.running != Some(true) => return inspected.exit_code,
            Ok(_) => tokio::time::sleep(Duration::from_millis(20)).await,
            Err(_) => return None,
        }
    }
    None
}

/// Runs `script` with sh in `container`; its stdout.
async fn capture(docker: &Docker, container: &str, script: &str) -> Result<Vec<u8>, String> {
    let exec = docker
        .create_exec(
            container,
            CreateExecOptions {
                attach_stdout: Some(true),
                cmd: Some(vec!["sh", "-c", script]),
                ..Default::default()
            },
        )
        .await
        .map_err(|e| e.to_string())?;
    let StartExecResults::Attached { mut output, .. } = docker
        .start_exec(&exec.id, None)
        .await
        .map_err(|e| e.to_string())?
    else {
        return Err("detached".into());
    };
    let mut bytes = Vec::new();
    while let Some(Ok(chunk)) = output.next().await {
        bytes.extend_from_slice(&chunk.into_bytes());
    }
    Ok(bytes)
}

/// This process and boot, as the [`LABEL`] value.
fn owner() -> String {
    let boot = std::fs::read_to_string("/proc/sys/kernel/random/boot_id").unwrap_or_default();
    format!("{}@{}", std::process::id(), boot.trim())
}

/// Removes, once per socket and process, the containers a toolhost process
/// of this boot left when it died. Blocking.
fn sweep_once(socket: &Path) {
    static SWEPT: Mutex<Vec<PathBuf>> = Mutex::new(Vec::new());
    {
        let mut swept = SWEPT.lock().unwrap_or_else(|e| e.into_inner());
        if swept.iter().any(|done| done == socket) {
            return;
        }
        swept.push(socket.to_path_buf());
    }
    // Listed as JSON values: engines name container states beyond those
    // the API's models know (Podman's `stopped`).
    let filter = format!("{{\"label\":[\"{LABEL}\"]}}");
    let path = format!("/containers/json?all=true&filters={}", percent(&filter));
    let Ok((200, body)) = request(socket, "GET", &path) else {
        return;
    };
    let Ok(serde_json::Value::Array(found)) = serde_json::from_slice(&body) else {
        return;
    };
    let boot = owner();
    let boot = boot
        .split_once('@')
        .map(|(_, boot)| boot)
        .unwrap_or_default();
    for container in found {
        let Some((pid, of_boot)) = container["Labels"][LABEL]
            .as_str()
            .and_then(|owner| owner.split_once('@'))
        else {
            continue;
        };
        let dead = pid.parse::<libc::pid_t>().is_ok_and(|pid| {
            // SAFETY: signal 0 only checks that the process exists.
            let failed = unsafe { libc::kill(pid, 0) } != 0;
            failed && io::Error::last_os_error().raw_os_error() == Some(libc::ESRCH)
        });
        if let (true, true, Some(id)) = (of_boot == boot, dead, container["Id"].as_str()) {
            tracing::info!(container = %id, "removing a terminal container a dead toolhost left");
            let _ = remove(socket, id);
        }
    }
}

/// `text` percent-encoded for a query string.
fn percent(text: &str) -> String {
    text.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' => (b as char).to_string(),
            _ => format!("%{b:02X}"),
        })
        .collect()
}

/// The containers of sessions not yet removed, with their engine's socket.
fn live() -> &'static Mutex<HashMap<String, PathBuf>> {
    static LIVE: OnceLock<Mutex<HashMap<String, PathBuf>>> = OnceLock::new();
    LIVE.get_or_init(Default::default)
}

/// Removes every container of this process's sessions, for a process about
/// to exit without dropping them.
pub(crate) fn remove_all() {
    let live = std::mem::take(&mut *live().lock().unwrap_or_else(|e| e.into_inner()));
    for (id, socket) in live {
        let _ = remove(&socket, &id);
    }
}

/// Removes container `id` with everything running in it. Blocking.
fn remove(socket: &Path, id: &str) -> io::Result<()> {
    match request(
        socket,
        "DELETE",
        &format!("/containers/{id}?force=true&v=true"),
    )? {
        (200..300 | 404, _) => Ok(()),
        (status, body) => Err(io::Error::other(format!(
            "{status}: {}",
            String::from_utf8_lossy(&body)
        ))),
    }
}

/// One HTTP/1.0 request on the engine's socket, without a body: the
/// status and the body of the answer. Blocking; for what must work without
/// an async runtime (a session dropped as the host exits).
fn request(socket: &Path, method: &str, path: &str) -> io::Result<(u16, Vec<u8>)> {
    let mut stream = UnixStream::connect(socket)?;
    stream.set_read_timeout(Some(Duration::from_secs(30)))?;
    write!(stream, "{method} {path} HTTP/1.0\r\nHost: docker\r\n\r\n")?;
    let mut answer = Vec::new();
    stream.read_to_end(&mut answer)?;
    let split = answer
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .ok_or_else(|| io::Error::other("the engine's answer has no header"))?;
    let status = answer
        .split(|&b| b == b' ')
        .nth(1)
        .and_then(|s| std::str::from_utf8(s).ok()?.parse().ok())
        .ok_or_else(|| io::Error::other("the engine's answer has no status"))?;
    Ok((status, answer[split + 4..].to_vec()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_local_socket_serves() {
        let settings = |socket: &str| ContainerSettings {
            image: "i".into(),
            socket: Some(socket.into()),
            user: None,
        };
        assert_eq!(
            socket(&settings("unix:///run/x.sock")).unwrap(),
            PathBuf::from("/run/x.sock")
        );
        assert_eq!(
            socket(&settings("/run/y.sock")).unwrap(),
            PathBuf::from("/run/y.sock")
        );
        let refused = socket(&settings("tcp://10.0.0.1:2375")).unwrap_err();
        assert!(refused.contains("only a local socket"), "{refused}");
    }
}
