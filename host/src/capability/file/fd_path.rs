//! An open descriptor's magic link in `/proc/self/fd`: where the kernel says
//! the file is now, and the very file opened again (an `O_PATH` descriptor
//! made readable). The directory is opened once for the process, so each
//! use looks up one name rather than walking `/proc/self/fd/N`.

use std::ffi::CString;
use std::os::fd::{AsRawFd as _, FromRawFd as _, RawFd};
use std::os::unix::ffi::OsStrExt as _;
use std::path::PathBuf;
use std::sync::OnceLock;

/// `/proc/self/fd` of this process, held open (`ENOENT` without procfs).
fn fd_dir() -> std::io::Result<RawFd> {
    use std::os::unix::fs::OpenOptionsExt as _;
    static DIR: OnceLock<Option<std::fs::File>> = OnceLock::new();
    let dir = DIR.get_or_init(|| {
        std::fs::OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_DIRECTORY)
            .open("/proc/self/fd")
            .ok()
    });
    dir.as_ref()
        .map(|dir| dir.as_raw_fd())
        .ok_or_else(|| std::io::Error::from_raw_os_error(libc::ENOENT))
}

fn name(fd: RawFd) -> CString {
    CString::new(fd.to_string()).expect("a number holds no NUL")
}

/// Where the file open as `fd` is now, as the kernel reports it (with
/// ` (deleted)` after it once removed).
pub(super) fn path_of(fd: RawFd) -> std::io::Result<PathBuf> {
    let dir = fd_dir()?;
    let mut buffer = vec![0u8; libc::PATH_MAX as usize + 1];
    // SAFETY: a NUL-terminated name and a buffer of the length given.
    let length = unsafe {
        libc::readlinkat(
            dir,
            name(fd).as_ptr(),
            buffer.as_mut_ptr().cast(),
            buffer.len(),
        )
    };
    let length = usize::try_from(length).map_err(|_| std::io::Error::last_os_error())?;
    if length >= buffer.len() {
        return Err(std::io::Error::from_raw_os_error(libc::ENAMETOOLONG));
    }
    buffer.truncate(length);
    Ok(PathBuf::from(std::ffi::OsStr::from_bytes(&buffer)))
}

/// The file open as `fd` (an `O_PATH` descriptor) opened again with
/// `flags` (`O_RDONLY`, `O_WRONLY` or `O_RDWR`, and more): the very file,
/// whatever its name leads to now.
pub(super) fn reopen(fd: RawFd, flags: libc::c_int) -> std::io::Result<std::fs::File> {
    let dir = fd_dir()?;
    // SAFETY: a NUL-terminated name; a non-negative result is ours.
    let opened = unsafe { libc::openat(dir, name(fd).as_ptr(), flags | libc::O_CLOEXEC) };
    if opened < 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: a descriptor the kernel just opened for us.
    Ok(unsafe { std::fs::File::from_raw_fd(opened) })
}
