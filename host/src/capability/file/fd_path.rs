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

/// Gives the directory `path` (not a link to one) its owner's read, write
/// and search permission back, if it is toolhost's user's and lacks them:
/// whether it did. A command running as that user may take them away from
/// a directory in its write grant (`mkdir d && chmod 000 d`), which would
/// leave the walks that must see every entry (what `file.deny` masks, what
/// denied names reach) refusing every later call; the command could have
/// given them back itself.
pub(crate) fn give_back_own_dir(path: &std::path::Path) -> std::io::Result<bool> {
    use std::os::fd::OwnedFd;
    let cpath = CString::new(path.as_os_str().as_bytes())
        .map_err(|_| std::io::Error::from(std::io::ErrorKind::InvalidInput))?;
    // SAFETY: a NUL-terminated path; the result is checked.
    let fd = unsafe {
        libc::open(
            cpath.as_ptr(),
            libc::O_PATH | libc::O_NOFOLLOW | libc::O_DIRECTORY | libc::O_CLOEXEC,
        )
    };
    if fd < 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: a descriptor just opened, owned from here.
    let fd = unsafe { OwnedFd::from_raw_fd(fd) };
    // SAFETY: fills a zeroed stat of a descriptor of ours.
    let stat = unsafe {
        let mut stat: libc::stat = std::mem::zeroed();
        if libc::fstat(fd.as_raw_fd(), &mut stat) < 0 {
            return Err(std::io::Error::last_os_error());
        }
        stat
    };
    // SAFETY: geteuid cannot fail.
    if stat.st_uid != unsafe { libc::geteuid() } || stat.st_mode & 0o700 == 0o700 {
        return Ok(false);
    }
    // The descriptor's own directory, whatever its path now (`fchmod`
    // takes no `O_PATH` descriptor).
    let own = CString::new(format!("/proc/self/fd/{}", fd.as_raw_fd()))
        .map_err(|_| std::io::Error::from(std::io::ErrorKind::InvalidInput))?;
    let mode = (stat.st_mode & 0o7777) | 0o700;
    // SAFETY: a NUL-terminated path.
    if unsafe { libc::chmod(own.as_ptr(), mode) } < 0 {
        return Err(std::io::Error::last_os_error());
    }
    tracing::warn!(
        path = %path.display(),
        mode = format!("{mode:o}"),
        "gave a directory of toolhost's user in a write grant back its owner's permissions, \
         to see what it holds"
    );
    Ok(true)
}
