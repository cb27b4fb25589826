//! The way out of a session's container under `terminal.network =
//! "proxy"`: a listener in the container's network namespace relaying to
//! the session's proxy of the allowed hosts.

use std::io;
use std::path::Path;
use std::sync::Arc;

use super::engine::request;
use crate::capability::Profile;
use crate::capability::terminal::confine::{PROXY_CONNECTIONS, PROXY_PORT};
use crate::capability::terminal::proxy::{Gate, Proxy};

/// The way out of a container under `terminal.network = "proxy"`: a
/// listener on the container's loopback at [`PROXY_PORT`], made by a thread
/// of this process that entered the container's network namespace (so
/// nothing needs to run in the image), whose connections go to the
/// session's proxy of the allowed hosts. The container has no other
/// interface.
pub(super) struct Relay {
    pub(super) proxy: Proxy,
    task: tokio::task::JoinHandle<()>,
}

impl Relay {
    pub(super) async fn start(
        socket: &Path,
        id: &str,
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
        let path = format!("/containers/{id}/json");
        let socket = socket.to_path_buf();
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
        let proxy = Proxy::start(profile.network.hosts.clone(), gate)
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
