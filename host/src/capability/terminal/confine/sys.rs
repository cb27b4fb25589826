//! System call results as the launcher reports them (the call and the
//! kernel's reason), and the calls the launcher makes its processes with.

use std::os::fd::{FromRawFd, OwnedFd};

pub(super) fn os_error<T>(what: impl std::fmt::Display) -> Result<T, String> {
    Err(format!("{what}: {}", std::io::Error::last_os_error()))
}

pub(super) fn check(result: libc::c_int, what: impl std::fmt::Display) -> Result<(), String> {
    if result < 0 { os_error(what) } else { Ok(()) }
}

/// A path as a C string; `Err` when it holds a NUL byte.
pub(crate) fn cstring(path: impl AsRef<std::ffi::OsStr>) -> Result<std::ffi::CString, String> {
    use std::os::unix::ffi::OsStrExt;
    std::ffi::CString::new(path.as_ref().as_bytes())
        .map_err(|_| "a path holds a NUL byte".to_string())
}

/// Why the sandbox cannot be built when the kernel refuses namespaces.
pub(super) fn refused(error: std::io::Error) -> String {
    format!(
        "the kernel refused to create user, mount, PID and network namespaces \
         ({error}); unprivileged user namespaces are off or restricted here \
         (kernel.unprivileged_userns_clone, user.max_user_namespaces, an AppArmor or \
         container policy). Enable them, or set terminal.sandbox = \"none\" in the \
         profile to run commands unconfined"
    )
}

/// A child in new namespaces of `flags`, as `fork` makes one: 0 in the
/// child, its pid in the parent, or the kernel's reason.
pub(super) fn clone(flags: libc::c_int) -> Result<libc::pid_t, std::io::Error> {
    // SAFETY: the launcher is single-threaded; without a new stack the
    // child continues on a copy of this one, as after `fork`, with this
    // program's own code only, then execs or exits.
    let pid = unsafe {
        libc::syscall(
            libc::SYS_clone,
            libc::c_ulong::from((flags | libc::SIGCHLD) as u32),
            0usize,
            0usize,
            0usize,
            0usize,
        )
    };
    if pid < 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(pid as libc::pid_t)
}

pub(super) fn pipe() -> Result<(OwnedFd, OwnedFd), String> {
    let mut fds = [0; 2];
    // SAFETY: pipe2 fills the two descriptors, which are then owned here.
    unsafe {
        check(libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC), "pipe")?;
        Ok((OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])))
    }
}
