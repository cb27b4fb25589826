//! The Docker Engine API as the container backend uses it: connecting to
//! the engine's socket, images, execs, and listing and removing the
//! containers of toolhost's sessions (also without an async runtime).

use std::collections::HashMap;
use std::io::{self, Read, Write};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, OnceLock};
use std::time::Duration;

use bollard::Docker;
use bollard::exec::{CreateExecOptions, StartExecResults};
use bollard::query_parameters::CreateImageOptions;
use futures::StreamExt;

use crate::capability::terminal::ContainerSettings;

/// The label every container of toolhost carries, with the host process's
/// id and boot, so that one left by a process that died is removed.
pub(super) const LABEL: &str = "toolhost.session";

/// Seconds an engine request may take (pulling an image takes longer and is
/// not bound by it).
const REQUEST_TIMEOUT: u64 = 120;

/// Where the engine's socket usually is, after `DOCKER_HOST`.
const SOCKETS: &[&str] = &["/var/run/docker.sock", "/run/podman/podman.sock"];

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
pub(super) async fn connect(settings: &ContainerSettings) -> Result<(Docker, PathBuf), String> {
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
pub(super) fn socket(settings: &ContainerSettings) -> Result<PathBuf, String> {
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
pub(super) async fn ensure_image(docker: &Docker, image: &str) -> Result<(), String> {
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
pub(super) async fn exit_code(docker: &Docker, id: &str) -> Option<i64> {
    for _ in 0..50 {
        match docker.inspect_exec(id).await {
            Ok(inspected) if inspected.running != Some(true) => return inspected.exit_code,
            Ok(_) => tokio::time::sleep(Duration::from_millis(20)).await,
            Err(_) => return None,
        }
    }
    None
}

/// Runs `script` with sh in `container` as `user`; its stdout.
pub(super) async fn capture(
    docker: &Docker,
    container: &str,
    user: &str,
    script: &str,
) -> Result<Vec<u8>, String> {
    let exec = docker
        .create_exec(
            container,
            CreateExecOptions {
                attach_stdout: Some(true),
                user: Some(user),
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
pub(super) fn owner() -> String {
    let boot = std::fs::read_to_string("/proc/sys/kernel/random/boot_id").unwrap_or_default();
    format!("{}@{}", std::process::id(), boot.trim())
}

/// Removes, once per socket and process, the containers a toolhost process
/// of this boot left when it died. Blocking.
pub(super) fn sweep_once(socket: &Path) {
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
pub(super) fn percent(text: &str) -> String {
    text.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' => (b as char).to_string(),
            _ => format!("%{b:02X}"),
        })
        .collect()
}

/// The containers of sessions not yet removed, with their engine's socket.
pub(super) fn live() -> &'static Mutex<HashMap<String, PathBuf>> {
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
pub(super) fn remove(socket: &Path, id: &str) -> io::Result<()> {
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
pub(super) fn request(socket: &Path, method: &str, path: &str) -> io::Result<(u16, Vec<u8>)> {
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
