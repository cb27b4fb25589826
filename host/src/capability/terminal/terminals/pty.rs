//! A pseudo-terminal for a command: the host keeps the master (read and
//! written through tokio), the command gets the terminal as its stdin,
//! stdout, stderr and controlling terminal.

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

use tokio::net::unix::pipe;

/// A pseudo-terminal pair.
pub(crate) struct Pty {
    master: OwnedFd,
    terminal: OwnedFd,
}

impl Pty {
    /// Opens a pair of `rows` by `cols` characters.
    pub(crate) fn open(rows: u16, cols: u16) -> io::Result<Self> {
        let size = libc::winsize {
            ws_row: rows.max(1),
            ws_col: cols.max(1),
            ws_xpixel: 0,
            ws_ypixel: 0,
        };
        let (mut master, mut terminal) = (-1, -1);
        // SAFETY: openpty fills two descriptors; the name buffer and
        // termios are not asked for.
        let opened = unsafe {
            libc::openpty(
                &mut master,
                &mut terminal,
                std::ptr::null_mut(),
                std::ptr::null(),
                &size,
            )
        };
        if opened < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: both descriptors are new and ours.
        let (master, terminal) =
            unsafe { (OwnedFd::from_raw_fd(master), OwnedFd::from_raw_fd(terminal)) };
        for fd in [&master, &terminal] {
            // SAFETY: sets close-on-exec on our own descriptor.
            unsafe {
                libc::fcntl(fd.as_raw_fd(), libc::F_SETFD, libc::FD_CLOEXEC);
            }
        }
        // SAFETY: makes our master non-blocking, as tokio needs.
        unsafe {
            let flags = libc::fcntl(master.as_raw_fd(), libc::F_GETFL);
            libc::fcntl(master.as_raw_fd(), libc::F_SETFL, flags | libc::O_NONBLOCK);
        }
        Ok(Self { master, terminal })
    }

    /// What the command writes (`EIO` once every copy of the terminal is
    /// closed, which readers take as the end).
    pub(crate) fn reader(&self) -> io::Result<pipe::Receiver> {
        pipe::Receiver::from_owned_fd_unchecked(self.master.try_clone()?)
    }

    /// The command's input (keys typed).
    pub(crate) fn writer(&self) -> io::Result<pipe::Sender> {
        pipe::Sender::from_owned_fd_unchecked(self.master.try_clone()?)
    }

    /// The command's end.
    pub(crate) fn into_terminal(self) -> OwnedFd {
        self.terminal
    }
}
