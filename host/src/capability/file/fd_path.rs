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

/// Gives the directory `path` its owner's read, write and search
/// permission back, if it is toolhost's user's and lacks them: whether it
/// did. A command running as that user may take them away from a directory
/// in its write grant (`mkdir d && chmod 000 d`), which would leave the
/// walks that must see every entry (what `file.deny` masks, what denied
/// names reach) refusing every later call; the command could have given
/// them back itself. `path` is a walk's (a grant's real path and the names
/// listed below it): a symbolic link anywhere on it is one a command
/// swapped in since (a directory on the way for a link elsewhere), so it is
/// opened following none, and nothing outside the grants is changed.
pub(crate) fn give_back_own_dir(path: &std::path::Path) -> std::io::Result<bool> {
    use std::os::fd::OwnedFd;
    let cpath = CString::new(path.as_os_str().as_bytes())
        .map_err(|_| std::io::Error::from(std::io::ErrorKind::InvalidInput))?;
    // SAFETY: `open_how` is plain integers, for which zero is valid.
    let mut how: libc::open_how = unsafe { std::mem::zeroed() };
    how.flags = (libc::O_PATH | libc::O_NOFOLLOW | libc::O_DIRECTORY | libc::O_CLOEXEC) as u64;
    how.resolve = libc::RESOLVE_NO_SYMLINKS | libc::RESOLVE_NO_MAGICLINKS;
    // SAFETY: a NUL-terminated path and an `open_how` of the size given.
    let fd = unsafe {
        libc::syscall(
            libc::SYS_openat2,
            libc::AT_FDCWD,
            cpath.as_ptr(),
            &how as *const libc::open_how,
            size_of::<libc::open_how>(),
        )
    };
    if fd < 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: a descriptor just opened, owned from here.
    let fd = unsafe { OwnedFd::from_raw_fd(fd as RawFd) };
    let given = give_back_fd(fd.as_raw_fd())?;
    if given {
        tracing::warn!(
            path = %path.display(),
            "gave a directory of toolhost's user in a write grant back its owner's \
             permissions, to see what it holds"
        );
    }
    Ok(given)
}

/// Gives the directory of `dir` (a descriptor, `O_PATH` or not) its
/// owner's read, write and search permission back, if it is toolhost's
/// user's and lacks them: whether it did.
pub(crate) fn give_back_fd(dir: RawFd) -> std::io::Result<bool> {
    // SAFETY: fills a zeroed stat of a descriptor of ours.
    let stat = unsafe {
        let mut stat: libc::stat = std::mem::zeroed();
        if libc::fstat(dir, &mut stat) < 0 {
            return Err(std::io::Error::last_os_error());
        }
        stat
    };
    // SAFETY: geteuid cannot fail.
    if stat.st_mode & libc::S_IFMT != libc::S_IFDIR
        || stat.st_uid != unsafe { libc::geteuid() }
        || stat.st_mode & 0o700 == 0o700
    {
        return Ok(false);
    }
    // The descriptor's own directory, whatever its path now (`fchmod`
    // takes no `O_PATH` descriptor).
    let own = CString::new(format!("/proc/self/fd/{dir}"))
        .map_err(|_| std::io::Error::from(std::io::ErrorKind::InvalidInput))?;
    let mode = (stat.st_mode & 0o7777) | 0o700;
    // SAFETY: a NUL-terminated path.
    if unsafe { libc::chmod(own.as_ptr(), mode) } < 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(true)
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::PermissionsExt;

    use super::*;

    fn mode(path: &std::path::Path) -> u32 {
        std::fs::symlink_metadata(path)
            .unwrap()
            .permissions()
            .mode()
            & 0o7777
    }

    /// A directory of the walk's path made unlistable is given back; the
    /// same path after a command swapped a directory on the way for a link
    /// out of the grant changes nothing out there (the walk listed `d1`, a
    /// directory, and then finds `d1 -> /outside`).
    #[test]
    fn only_a_directory_reached_without_a_link_is_given_back() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().canonicalize().unwrap();
        let ws = root.join("ws");
        std::fs::create_dir_all(ws.join("d1/b")).unwrap();
        std::fs::create_dir_all(root.join("outside/b")).unwrap();
        let set = |path: &std::path::Path, mode: u32| {
            std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).unwrap();
        };
        set(&ws.join("d1/b"), 0o000);
        assert!(give_back_own_dir(&ws.join("d1/b")).unwrap());
        assert_eq!(mode(&ws.join("d1/b")), 0o700);
        // Given back already: nothing to do.
        assert!(!give_back_own_dir(&ws.join("d1/b")).unwrap());

        set(&root.join("outside/b"), 0o000);
        std::fs::rename(ws.join("d1"), ws.join("d1.moved")).unwrap();
        std::os::unix::fs::symlink(root.join("outside"), ws.join("d1")).unwrap();
        let refused = give_back_own_dir(&ws.join("d1/b")).unwrap_err();
        assert_eq!(refused.raw_os_error(), Some(libc::ELOOP), "{refused}");
        assert_eq!(mode(&root.join("outside/b")), 0o000);
        // The last name a link to a directory of ours: the same.
        std::os::unix::fs::symlink(root.join("outside/b"), ws.join("lb")).unwrap();
        assert!(give_back_own_dir(&ws.join("lb")).is_err());
        assert_eq!(mode(&root.join("outside/b")), 0o000);
        set(&root.join("outside/b"), 0o700);
    }
}
