//! The sandbox's way out under `terminal.network = "proxy"`: a process of the
//! sandbox listening on `127.0.0.1:`[`PROXY_PORT`](super::PROXY_PORT) in its
//! network namespace, relaying each connection to the host's proxy socket.
//! The socket's directory is opened before the sandbox's root replaces the
//! host's, so the command never sees the host's path; the relay holds no
//! privilege and nothing the command could not reach through its port.

use std::ffi::OsString;
use std::fs::File;
use std::io;
use std::net::{Ipv4Addr, Shutdown, TcpListener, TcpStream};
use std::os::fd::AsRawFd;
use std::os::unix::fs::OpenOptionsExt;
use std::os::unix::net::UnixStream;
use std::path::Path;

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use super::spec::{PROXY_CONNECTIONS, PROXY_PORT};

/// Stack of each relaying thread: they only copy, with 8 KiB buffers.
const STACK: usize = 128 * 1024;

/// The host's proxy socket, reachable from inside the sandbox.
pub(super) struct Way {
    /// The socket's directory (`O_PATH`).
    dir: File,
    /// The socket's name in it.
    name: OsString,
}

impl Way {
    /// Opens the directory of `socket`; call before the root is replaced.
    pub(super) fn open(socket: &Path) -> Result<Self, String> {
        let (Some(dir), Some(name)) = (socket.parent(), socket.file_name()) else {
            return Err(format!(
                "the proxy socket {} has no directory",
                socket.display()
            ));
        };
        let dir = std::fs::OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_PATH | libc::O_DIRECTORY | libc::O_CLOEXEC)
            .open(dir)
            .map_err(|e| format!("opening the proxy's directory {}: {e}", dir.display()))?;
        Ok(Self {
            dir,
            name: name.to_owned(),
        })
    }

    /// Listens on the proxy port of the sandbox's loopback; call once `lo`
    /// is up and before the command starts, so the port is never its.
    pub(super) fn listen(self) -> Result<Relay, String> {
        let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, PROXY_PORT))
            .map_err(|e| format!("listening on 127.0.0.1:{PROXY_PORT} for the proxy: {e}"))?;
        Ok(Relay {
            way: self,
            listener,
        })
    }
}

/// A bound listener, ready to relay.
pub(super) struct Relay {
    way: Way,
    listener: TcpListener,
}

impl Relay {
    /// Relays connections until the sandbox ends; never returns. Runs in a
    /// process of its own.
    pub(super) fn run(self) -> ! {
        // Connecting by the socket's name, relative to its directory.
        // SAFETY: changes this process's working directory to an open one.
        if unsafe { libc::fchdir(self.way.dir.as_raw_fd()) } < 0 {
            // SAFETY: ends this process; the command then finds no proxy.
            unsafe { libc::_exit(1) }
        }
        let name = self.way.name;
        // Each connection holds four descriptors (both sockets, each with a
        // clone for the other direction); the soft limit inherited from the
        // host may be lower than that, the hard limit rarely is. Where even
        // that is too low, connections past it are closed like those past
        // the cap.
        super::rlimit::raise_soft_limit(libc::RLIMIT_NOFILE, (4 * PROXY_CONNECTIONS + 16) as u64);
        // A command opening connections without end gets no more relaying
        // threads than the host's proxy would serve; the rest are closed.
        let live = Arc::new(AtomicUsize::new(0));
        for client in self.listener.incoming().flatten() {
            if live.fetch_add(1, Ordering::AcqRel) >= PROXY_CONNECTIONS {
                live.fetch_sub(1, Ordering::AcqRel);
                continue;
            }
            let (name, held) = (name.clone(), live.clone());
            let spawned = std::thread::Builder::new()
                .stack_size(STACK)
                .spawn(move || {
                    let _ = relay(client, &name);
                    held.fetch_sub(1, Ordering::AcqRel);
                });
            if spawned.is_err() {
                live.fetch_sub(1, Ordering::AcqRel);
            }
        }
        // SAFETY: ends this process.
        unsafe { libc::_exit(0) }
    }
}

/// Copies both ways between a command's connection and the host's proxy.
fn relay(client: TcpStream, socket: &std::ffi::OsStr) -> io::Result<()> {
    let upstream = UnixStream::connect(socket)?;
    let (mut from_client, mut to_upstream) = (client.try_clone()?, upstream.try_clone()?);
    let outbound = std::thread::Builder::new()
        .stack_size(STACK)
        .spawn(move || {
            let _ = io::copy(&mut from_client, &mut to_upstream);
            let _ = to_upstream.shutdown(Shutdown::Write);
        })?;
    let (mut from_upstream, mut to_client) = (upstream, client);
    let _ = io::copy(&mut from_upstream, &mut to_client);
    let _ = to_client.shutdown(Shutdown::Write);
    let _ = outbound.join();
    Ok(())
}
