//! The channel between the host and a sandbox launcher: one Unix socket,
//! the launcher's stdin. Frames of an 8-byte header (a tag byte, three zero
//! bytes, the payload's length as a little-endian `u32`) and a payload;
//! descriptors travel with the header (`SCM_RIGHTS`).
//!
//! - host → launcher, at once: [`SPEC`], the [`Spec`](super::Spec) as JSON;
//! - host → PID 1, when the command is known: [`RUN`], the
//!   [`Run`](super::Run) as JSON, with the command's stdout, stderr and
//!   (when it has input) stdin;
//! - launcher → host: [`INIT`] with PID 1's pid (4 bytes), so the host can
//!   tell when the sandbox is gone; PID 1 → host: [`BUILT`] once the
//!   sandbox's mounts are made and it waits for its command;
//! - sandbox → host: [`DONE`] with the run's id and the shell's wait status
//!   (4 + 4 bytes), after every other process of the sandbox was killed
//!   (in a session, only when the shell has ended); or [`FAILED`] with why
//!   the sandbox could not be built or the shell not started.
//! - in a session, host → PID 1: more [`RUN`]s, each with its id, and
//!   [`KILL`] (id, signal: 4 + 4 bytes) to signal a run's process group;
//!   sandbox → host: [`REFUSED`] (id, then why) for a run whose shell could
//!   not start. Closing the channel ends the session and every process in it.
//!
//! Passing the descriptors this way lets the host start launchers without
//! running code between fork and exec, so the standard library spawns them
//! with `posix_spawn` (no copy of the host's page tables), and lets the
//! command's result reach the host before the sandbox's namespaces are torn
//! down.

use std::io::{self, Read, Write};
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, OwnedFd, RawFd};

pub(crate) const SPEC: u8 = 1;
pub(crate) const RUN: u8 = 2;
pub(crate) const DONE: u8 = 3;
pub(crate) const FAILED: u8 = 4;
pub(crate) const KILL: u8 = 5;
pub(crate) const REFUSED: u8 = 6;
pub(crate) const INIT: u8 = 7;
pub(crate) const BUILT: u8 = 8;

/// Most descriptors one frame carries.
const MOST_FDS: usize = 4;

/// Largest payload accepted.
const MOST_BYTES: u32 = 64 << 20;

fn header(tag: u8, len: usize) -> io::Result<[u8; 8]> {
    let len = u32::try_from(len)
        .ok()
        .filter(|&len| len <= MOST_BYTES)
        .ok_or_else(|| io::Error::other("a sandbox message is too large"))?;
    let mut header = [0u8; 8];
    header[0] = tag;
    header[4..].copy_from_slice(&len.to_le_bytes());
    Ok(header)
}

/// Sends `bytes` (a whole header, or its rest) on `socket` with `fds`
/// attached; returns how many bytes went.
fn send_with_fds(socket: RawFd, bytes: &[u8], fds: &[RawFd]) -> io::Result<usize> {
    assert!(fds.len() <= MOST_FDS);
    // SAFETY: CMSG_SPACE only computes a size.
    let space = unsafe { libc::CMSG_SPACE((MOST_FDS * size_of::<RawFd>()) as u32) } as usize;
    let mut control = vec![0u8; space];
    let mut iov = libc::iovec {
        iov_base: bytes.as_ptr() as *mut libc::c_void,
        iov_len: bytes.len(),
    };
    // SAFETY: an all-zero msghdr is valid; the pointers set below outlive
    // the call, and the control buffer is large enough for `fds`.
    unsafe {
        let mut message: libc::msghdr = std::mem::zeroed();
        message.msg_iov = &mut iov;
        message.msg_iovlen = 1;
        if !fds.is_empty() {
            let data_len = size_of_val(fds);
            message.msg_control = control.as_mut_ptr().cast();
            message.msg_controllen = libc::CMSG_SPACE(data_len as u32) as _;
            let cmsg = libc::CMSG_FIRSTHDR(&message);
            (*cmsg).cmsg_level = libc::SOL_SOCKET;
            (*cmsg).cmsg_type = libc::SCM_RIGHTS;
            (*cmsg).cmsg_len = libc::CMSG_LEN(data_len as u32) as _;
            std::ptr::copy_nonoverlapping(
                fds.as_ptr().cast::<u8>(),
                libc::CMSG_DATA(cmsg),
                data_len,
            );
        }
        let sent = libc::sendmsg(socket, &message, libc::MSG_NOSIGNAL);
        if sent < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(sent as usize)
    }
}

/// Receives into `buffer` from `socket`, collecting descriptors that came
/// with it (close-on-exec). Returns how many bytes came (0 at the end).
fn receive_with_fds(socket: RawFd, buffer: &mut [u8], fds: &mut Vec<OwnedFd>) -> io::Result<usize> {
    // SAFETY: CMSG_SPACE only computes a size.
    let space = unsafe { libc::CMSG_SPACE((MOST_FDS * size_of::<RawFd>()) as u32) } as usize;
    let mut control = vec![0u8; space];
    let mut iov = libc::iovec {
        iov_base: buffer.as_mut_ptr().cast(),
        iov_len: buffer.len(),
    };
    // SAFETY: as in `send_with_fds`; every descriptor the kernel put in the
    // control buffer is new in this process and owned here.
    unsafe {
        let mut message: libc::msghdr = std::mem::zeroed();
        message.msg_iov = &mut iov;
        message.msg_iovlen = 1;
        message.msg_control = control.as_mut_ptr().cast();
        message.msg_controllen = space as _;
        let got = libc::recvmsg(socket, &mut message, libc::MSG_CMSG_CLOEXEC);
        if got < 0 {
            return Err(io::Error::last_os_error());
        }
        let mut cmsg = libc::CMSG_FIRSTHDR(&message);
        while !cmsg.is_null() {
            if (*cmsg).cmsg_level == libc::SOL_SOCKET && (*cmsg).cmsg_type == libc::SCM_RIGHTS {
                let data = libc::CMSG_DATA(cmsg);
                let len = (*cmsg).cmsg_len as usize - (data as usize - cmsg as usize);
                for i in 0..len / size_of::<RawFd>() {
                    let fd = std::ptr::read_unaligned(data.cast::<RawFd>().add(i));
                    fds.push(OwnedFd::from_raw_fd(fd));
                }
            }
            cmsg = libc::CMSG_NXTHDR(&message, cmsg);
        }
        if message.msg_flags & libc::MSG_CTRUNC != 0 {
            return Err(io::Error::other(
                "a sandbox message carried too many descriptors",
            ));
        }
        Ok(got as usize)
    }
}

/// One frame received: its tag, payload and the descriptors that came
/// with it.
pub(crate) struct Frame {
    pub(crate) tag: u8,
    pub(crate) payload: Vec<u8>,
    pub(crate) fds: Vec<OwnedFd>,
}

/// The sandbox's end of the channel, used blocking by the launcher and by
/// PID 1 (single-threaded processes).
pub(crate) struct Blocking(pub(crate) RawFd);

impl Blocking {
    /// Sends one frame, in one write: in a session, PID 1 and a shell that
    /// failed to start may both be sending.
    pub(crate) fn send(&self, tag: u8, payload: &[u8]) -> io::Result<()> {
        let mut frame = header(tag, payload.len())?.to_vec();
        frame.extend_from_slice(payload);
        // SAFETY: the descriptor stays open for the life of this process;
        // the `File` is not dropped (so not closed).
        let mut file = std::mem::ManuallyDrop::new(unsafe { std::fs::File::from_raw_fd(self.0) });
        file.write_all(&frame)
    }

    /// Receives one frame and the descriptors that came with it; `None` at
    /// the end of the stream before a frame starts.
    pub(crate) fn receive(&self) -> io::Result<Option<Frame>> {
        let mut header = [0u8; 8];
        let mut fds = Vec::new();
        let mut got = 0;
        while got < header.len() {
            match receive_with_fds(self.0, &mut header[got..], &mut fds) {
                Ok(0) if got == 0 => return Ok(None),
                Ok(0) => return Err(io::ErrorKind::UnexpectedEof.into()),
                Ok(n) => got += n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        let len = u32::from_le_bytes(header[4..].try_into().unwrap_or_default());
        if len > MOST_BYTES {
            return Err(io::Error::other("a sandbox message is too large"));
        }
        let mut payload = vec![0u8; len as usize];
        // SAFETY: as in `send`.
        let mut file = std::mem::ManuallyDrop::new(unsafe { std::fs::File::from_raw_fd(self.0) });
        file.read_exact(&mut payload)?;
        Ok(Some(Frame {
            tag: header[0],
            payload,
            fds,
        }))
    }
}

/// Two numbers as a frame's payload.
pub(crate) fn pair(first: u32, second: i32) -> [u8; 8] {
    let mut bytes = [0u8; 8];
    bytes[..4].copy_from_slice(&first.to_le_bytes());
    bytes[4..].copy_from_slice(&second.to_le_bytes());
    bytes
}

/// The two numbers of a [`pair`] payload.
pub(crate) fn unpair(bytes: &[u8]) -> Option<(u32, i32)> {
    let first = u32::from_le_bytes(bytes.get(..4)?.try_into().ok()?);
    let second = i32::from_le_bytes(bytes.get(4..8)?.try_into().ok()?);
    Some((first, second))
}

/// One report of a sandbox.
#[derive(Debug)]
pub(crate) enum Report {
    /// Run `id`'s shell ended with this wait status.
    Done { id: u32, status: libc::c_int },
    /// Run `id`'s shell could not be started: why.
    Refused { id: u32, reason: String },
    /// The sandbox could not be built (or, outside a session, the shell
    /// not started): why.
    Failed(String),
    /// The channel ended: the sandbox is gone.
    Vanished,
    /// PID 1 of the sandbox has this pid (in the host's PID namespace).
    Init(libc::pid_t),
    /// The sandbox's mounts are made.
    Built,
}

/// How a sandbox reported back.
#[derive(Debug)]
pub(crate) enum Outcome {
    /// The shell ended with this wait status; every other process of the
    /// sandbox was killed before.
    Done(libc::c_int),
    /// The sandbox could not be built or the shell not started: why.
    Failed(String),
    /// The channel ended without a report: the sandbox was killed.
    Vanished,
}

/// The host's end of the channel.
pub(crate) struct Control(tokio::net::UnixStream);

impl Control {
    /// A connected pair: the host's end, and the launcher's (its stdin).
    pub(crate) fn pair() -> io::Result<(Self, OwnedFd)> {
        let (host, launcher) = std::os::unix::net::UnixStream::pair()?;
        host.set_nonblocking(true)?;
        Ok((
            Self(tokio::net::UnixStream::from_std(host)?),
            launcher.into(),
        ))
    }

    async fn send(&mut self, tag: u8, payload: &[u8], fds: &[BorrowedFd<'_>]) -> io::Result<()> {
        use tokio::io::AsyncWriteExt;
        let header = header(tag, payload.len())?;
        let raw: Vec<RawFd> = fds.iter().map(AsRawFd::as_raw_fd).collect();
        let socket = self.0.as_raw_fd();
        let mut sent = 0;
        while sent < header.len() {
            // Descriptors go with the first byte only.
            let attach: &[RawFd] = if sent == 0 { &raw } else { &[] };
            sent += self
                .0
                .async_io(tokio::io::Interest::WRITABLE, || {
                    send_with_fds(socket, &header[sent..], attach)
                })
                .await?;
        }
        self.0.write_all(payload).await
    }

    /// Sends the sandbox's spec (right after the launcher started).
    pub(crate) async fn send_spec(&mut self, spec: &[u8]) -> io::Result<()> {
        self.send(SPEC, spec, &[]).await
    }

    /// Sends the command and its descriptors ([`super::Run::descriptors`]).
    pub(crate) async fn send_run(&mut self, run: &[u8], fds: &[BorrowedFd<'_>]) -> io::Result<()> {
        self.send(RUN, run, fds).await
    }

    /// Sends `signal` to the process group of a session's run `id`.
    pub(crate) async fn send_kill(&mut self, id: u32, signal: i32) -> io::Result<()> {
        self.send(KILL, &pair(id, signal), &[]).await
    }

    /// A second end on the same channel, so one task reads the reports of
    /// a session while others send it commands.
    pub(crate) fn try_clone(&self) -> io::Result<Self> {
        let fd = self.0.as_fd().try_clone_to_owned()?;
        let stream = std::os::unix::net::UnixStream::from(fd);
        Ok(Self(tokio::net::UnixStream::from_std(stream)?))
    }

    /// Waits for the sandbox's next report. Not cancellation-safe: a
    /// report half read is lost.
    pub(crate) async fn report(&mut self) -> Report {
        use tokio::io::AsyncReadExt;
        let mut header = [0u8; 8];
        if self.0.read_exact(&mut header).await.is_err() {
            return Report::Vanished;
        }
        let len = u32::from_le_bytes(header[4..].try_into().unwrap_or_default());
        if len > MOST_BYTES {
            return Report::Failed("the sandbox sent a message too large".into());
        }
        let mut payload = vec![0u8; len as usize];
        if self.0.read_exact(&mut payload).await.is_err() {
            return Report::Vanished;
        }
        let text = |bytes: &[u8]| String::from_utf8_lossy(bytes).trim().to_string();
        let id = payload
            .get(..4)
            .and_then(|bytes| bytes.try_into().ok())
            .map(u32::from_le_bytes);
        match (header[0], unpair(&payload), id) {
            (DONE, Some((id, status)), _) => Report::Done { id, status },
            (REFUSED, _, Some(id)) => Report::Refused {
                id,
                reason: text(&payload[4..]),
            },
            (FAILED, ..) => Report::Failed(text(&payload)),
            (INIT, _, Some(pid)) => Report::Init(pid as libc::pid_t),
            (BUILT, ..) => Report::Built,
            (tag, ..) => Report::Failed(format!("the sandbox sent an unknown message ({tag})")),
        }
    }

    /// Waits for the report of a sandbox that runs one command.
    pub(crate) async fn outcome(&mut self) -> Outcome {
        loop {
            return match self.report().await {
                Report::Done { status, .. } => Outcome::Done(status),
                Report::Refused { reason, .. } | Report::Failed(reason) => Outcome::Failed(reason),
                Report::Vanished => Outcome::Vanished,
                Report::Init(_) | Report::Built => continue,
            };
        }
    }

    /// Waits until the sandbox's mounts are made; `Err` says why they
    /// could not be. PID 1's pid comes with it when the launcher sent it
    /// first. Not cancellation-safe, as [`Self::report`].
    pub(crate) async fn built(&mut self) -> Result<Option<libc::pid_t>, String> {
        let mut init = None;
        loop {
            match self.report().await {
                Report::Init(pid) => init = Some(pid),
                Report::Built => return Ok(init),
                Report::Failed(reason) | Report::Refused { reason, .. } => return Err(reason),
                Report::Done { .. } => return Err("the sandbox ended before it was built".into()),
                Report::Vanished => {
                    return Err("the sandbox launcher ended without a report".into());
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn frames_and_descriptors_cross_the_channel() {
        let (mut host, sandbox_end) = Control::pair().unwrap();
        let sandbox = Blocking(sandbox_end.as_raw_fd());
        let (read, write) = io::pipe().unwrap();
        let write = OwnedFd::from(write);
        let large = vec![b'x'; 300_000];
        let sending = async {
            host.send_spec(b"{}").await.unwrap();
            host.send_run(&large, &[write.as_fd()]).await.unwrap();
        };
        let receiving = tokio::task::spawn_blocking(move || {
            let frame = sandbox.receive().unwrap().unwrap();
            assert_eq!(
                (frame.tag, frame.payload.as_slice(), frame.fds.len()),
                (SPEC, &b"{}"[..], 0)
            );
            let frame = sandbox.receive().unwrap().unwrap();
            assert_eq!(
                (frame.tag, frame.payload.len(), frame.fds.len()),
                (RUN, 300_000, 1)
            );
            let mut pipe = std::fs::File::from(frame.fds.into_iter().next().unwrap());
            pipe.write_all(b"through").unwrap();
            sandbox.send(DONE, &pair(0, 7)).unwrap();
            sandbox
        });
        sending.await;
        let sandbox = receiving.await.unwrap();
        drop(write);
        let mut text = String::new();
        std::fs::File::from(OwnedFd::from(read))
            .read_to_string(&mut text)
            .unwrap();
        assert_eq!(text, "through");
        assert!(matches!(host.outcome().await, Outcome::Done(7)));
        sandbox.send(FAILED, b"no namespaces\n").unwrap();
        assert!(matches!(host.outcome().await, Outcome::Failed(m) if m == "no namespaces"));
        drop(sandbox_end);
        assert!(matches!(host.outcome().await, Outcome::Vanished));
    }
}
