//! Acting on names beneath a directory held open, never through a symbolic
//! link: what the repository guard reads, removes and makes, so that a path
//! a command can change (a directory made a link) never leads the host
//! outside the grant it guards; and small regular files read with a cap.

use std::ffi::{CString, OsStr, OsString};
use std::io::{self, Read};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::path::{Component, Path, PathBuf};

pub(super) fn c(name: &OsStr) -> io::Result<CString> {
    CString::new(name.as_bytes()).map_err(|_| io::Error::from(io::ErrorKind::InvalidInput))
}

pub(super) fn fd_or_error(fd: libc::c_int) -> io::Result<OwnedFd> {
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: a descriptor the call just returned, owned from here.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// Opens the directory `path` (the grant, resolved when it was planned)
/// to act beneath it later.
pub(super) fn open_root(path: &Path) -> io::Result<OwnedFd> {
    let path = c(path.as_os_str())?;
    // SAFETY: a NUL-terminated path; the result is checked.
    fd_or_error(unsafe {
        libc::open(
            path.as_ptr(),
            libc::O_PATH | libc::O_DIRECTORY | libc::O_CLOEXEC,
        )
    })
}

/// The directory `name` of `at` (`O_PATH`), not following a link. Where
/// the search permission of `at` was taken away, it is given back first
/// (see [`permitted`]).
pub(super) fn open_dir(at: RawFd, name: &OsStr) -> io::Result<OwnedFd> {
    let cname = c(name)?;
    permitted(at, || {
        // SAFETY: a NUL-terminated name relative to a descriptor of ours.
        fd_or_error(unsafe {
            libc::openat(
                at,
                cname.as_ptr(),
                libc::O_PATH | libc::O_DIRECTORY | libc::O_NOFOLLOW | libc::O_CLOEXEC,
            )
        })
    })
}

/// The status of `name` in `at`, a last link not followed.
pub(super) fn lstat(at: RawFd, name: &OsStr) -> io::Result<libc::stat> {
    let name = c(name)?;
    permitted(at, || {
        // SAFETY: fills a zeroed stat from a NUL-terminated name.
        unsafe {
            let mut stat: libc::stat = std::mem::zeroed();
            if libc::fstatat(at, name.as_ptr(), &mut stat, libc::AT_SYMLINK_NOFOLLOW) < 0 {
                return Err(io::Error::last_os_error());
            }
            Ok(stat)
        }
    })
}

pub(super) fn is(stat: &libc::stat, kind: libc::mode_t) -> bool {
    stat.st_mode & libc::S_IFMT == kind
}

/// Where the parent directory of a path beneath a root was found.
pub(super) enum Parent {
    /// Reached through directories alone: the name's directory.
    Dir(OwnedFd),
    /// A directory on the way is missing or is not one: nothing can be at
    /// the path.
    Missing,
    /// A directory on the way is a symbolic link: `name` in `dir`, and its
    /// path beneath the root.
    Link(OwnedFd, OsString, PathBuf),
}

/// The parent directory of `rel` beneath `root`, through directories
/// only (no link followed, no `..`).
pub(super) fn parent(root: &OwnedFd, rel: &Path) -> io::Result<Parent> {
    let Some(dirs) = rel.parent() else {
        return Err(io::ErrorKind::InvalidInput.into());
    };
    let mut at = open_dir(root.as_raw_fd(), OsStr::new("."))?;
    let mut way = PathBuf::new();
    for component in dirs.components() {
        let Component::Normal(name) = component else {
            return Err(io::ErrorKind::InvalidInput.into());
        };
        way.push(name);
        match open_dir(at.as_raw_fd(), name) {
            Ok(next) => at = next,
            Err(e) if e.raw_os_error() == Some(libc::ENOENT) => return Ok(Parent::Missing),
            Err(e) if matches!(e.raw_os_error(), Some(libc::ENOTDIR | libc::ELOOP)) => {
                return Ok(match lstat(at.as_raw_fd(), name) {
                    Ok(stat) if is(&stat, libc::S_IFLNK) => Parent::Link(at, name.to_owned(), way),
                    _ => Parent::Missing,
                });
            }
            Err(e) => return Err(e),
        }
    }
    Ok(Parent::Dir(at))
}

/// The text of the link `name` in `at`.
pub(super) fn readlink(at: RawFd, name: &OsStr) -> io::Result<PathBuf> {
    let name = c(name)?;
    permitted(at, || {
        let mut buffer = vec![0u8; libc::PATH_MAX as usize + 1];
        // SAFETY: reads at most the buffer's length into it.
        let read = unsafe {
            libc::readlinkat(at, name.as_ptr(), buffer.as_mut_ptr().cast(), buffer.len())
        };
        if read < 0 {
            return Err(io::Error::last_os_error());
        }
        buffer.truncate(read as usize);
        Ok(PathBuf::from(OsString::from_vec(buffer)))
    })
}

/// Makes `name` in `at` a symbolic link with `text`.
pub(super) fn symlink(text: &Path, at: RawFd, name: &OsStr) -> io::Result<()> {
    let (text, name) = (c(text.as_os_str())?, c(name)?);
    permitted(at, || {
        // SAFETY: two NUL-terminated strings and a descriptor of ours.
        if unsafe { libc::symlinkat(text.as_ptr(), at, name.as_ptr()) } < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(())
    })
}

/// Moves `name` of `at`, whatever it is, out of its name to a new name
/// beside it (one step, never following a link, never over what is
/// there) and returns that name. Nothing is removed: what a command moved
/// to a kept name may be the owner's (a directory holding files the
/// command could neither read nor remove), so it is set aside whole for
/// the owner to look through.
pub(super) fn set_aside(at: RawFd, name: &OsStr) -> io::Result<OsString> {
    let aside = aside_name(name)?;
    rename(at, name, at, &aside)?;
    Ok(aside)
}

/// The status of the descriptor `fd`.
pub(super) fn fstat(fd: RawFd) -> io::Result<libc::stat> {
    // SAFETY: fills a zeroed stat of a descriptor of ours.
    unsafe {
        let mut stat: libc::stat = std::mem::zeroed();
        if libc::fstat(fd, &mut stat) < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(stat)
    }
}

/// What a set-aside entry's name adds to the name it had.
pub(super) const ASIDE: &str = ".toolhost-planted-";

/// `name` (cut to fit `NAME_MAX`), [`ASIDE`] and 64 random bits: a name
/// no command can have made ahead to stop the move.
fn aside_name(name: &OsStr) -> io::Result<OsString> {
    let mut random = [0u8; 8];
    // SAFETY: fills a local buffer of its length.
    let got = unsafe { libc::getrandom(random.as_mut_ptr().cast(), random.len(), 0) };
    if got != random.len() as isize {
        return Err(io::Error::other(format!(
            "getrandom failed: {}; no name to set a planted entry aside to",
            io::Error::last_os_error()
        )));
    }
    let suffix = format!("{ASIDE}{:016x}", u64::from_ne_bytes(random));
    // NAME_MAX, the longest name of an entry.
    let keep = 255 - suffix.len();
    let mut bytes = name.as_bytes()[..name.len().min(keep)].to_vec();
    bytes.extend_from_slice(suffix.as_bytes());
    Ok(OsString::from_vec(bytes))
}

/// Renames `name` of `at` to `to` of `into`, never over what is there.
fn rename(at: RawFd, name: &OsStr, into: RawFd, to: &OsStr) -> io::Result<()> {
    let (cname, cto) = (c(name)?, c(to)?);
    let once = || {
        // SAFETY: NUL-terminated names relative to descriptors of ours.
        let done = unsafe {
            libc::renameat2(
                at,
                cname.as_ptr(),
                into,
                cto.as_ptr(),
                libc::RENAME_NOREPLACE,
            )
        };
        if done == 0 {
            return Ok(());
        }
        let error = io::Error::last_os_error();
        if error.raw_os_error() != Some(libc::EINVAL) {
            return Err(error);
        }
        // A filesystem without RENAME_NOREPLACE: `to` is a name of
        // toolhost's, not there.
        // SAFETY: as above.
        match unsafe { libc::renameat(at, cname.as_ptr(), into, cto.as_ptr()) } {
            0 => Ok(()),
            _ => Err(io::Error::last_os_error()),
        }
    };
    permitted(at, || permitted(into, once))
}

/// `act` in the directory `dir`; where that was refused, the directory
/// is given back its owner's read, write and search permission (it is
/// toolhost's user's: a command running as that user took them away) and
/// `act` tried once more.
pub(super) fn permitted<T>(dir: RawFd, act: impl Fn() -> io::Result<T>) -> io::Result<T> {
    match act() {
        Err(e) if e.raw_os_error() == Some(libc::EACCES) => {
            give_back(dir)?;
            act()
        }
        done => done,
    }
}

/// Gives the directory `dir` (a descriptor, `O_PATH` or not) back its
/// owner's read, write and search permission, if it is toolhost's user's
/// (see [`crate::capability::file::fd_path::give_back_fd`]); `EACCES` where it is not, or has them.
fn give_back(dir: RawFd) -> io::Result<()> {
    if !crate::capability::file::fd_path::give_back_fd(dir)? {
        return Err(io::Error::from_raw_os_error(libc::EACCES));
    }
    tracing::warn!(
        "gave a directory in a grant back its owner's permissions to guard repository metadata"
    );
    Ok(())
}

/// The text of `path` if it is a regular file (a last link resolved first,
/// then opened without following one, without waiting on a FIFO) of at
/// most `cap` bytes; `Ok(None)` where it is missing or not a regular file;
/// `Err` past the cap.
pub(super) fn read_small(path: &Path, cap: u64) -> Result<Option<String>, String> {
    let Ok(real) = path.canonicalize() else {
        return Ok(None);
    };
    let Some(mut file) = open_regular(&real) else {
        return Ok(None);
    };
    let mut bytes = Vec::new();
    let read = (&mut file).take(cap + 1).read_to_end(&mut bytes);
    if bytes.len() as u64 > cap {
        return Err(format!(
            "{} is larger than {cap} bytes, more than toolhost reads of a git configuration to \
             find what it names; make it smaller or take it out of the writable grants",
            path.display()
        ));
    }
    Ok(read
        .ok()
        .map(|_| String::from_utf8_lossy(&bytes).into_owned()))
}

/// The regular file `path` opened to be read, looked at first without
/// opening it (`O_PATH`): opening a device reaches its driver, which may act
/// on it (a watchdog, a tape), and opening a FIFO waits.
fn open_regular(path: &Path) -> Option<std::fs::File> {
    let cpath = c(path.as_os_str()).ok()?;
    // SAFETY: a NUL-terminated path; the result is checked.
    let found = fd_or_error(unsafe {
        libc::open(
            cpath.as_ptr(),
            libc::O_PATH | libc::O_NOFOLLOW | libc::O_CLOEXEC,
        )
    })
    .ok()?;
    // SAFETY: fills a zeroed stat of a descriptor of ours.
    let stat = unsafe {
        let mut stat: libc::stat = std::mem::zeroed();
        (libc::fstat(found.as_raw_fd(), &mut stat) == 0).then_some(stat)?
    };
    if !is(&stat, libc::S_IFREG) {
        return None;
    }
    // The same file, opened through its descriptor.
    let again = c(OsStr::new(&format!("/proc/self/fd/{}", found.as_raw_fd()))).ok()?;
    // SAFETY: a NUL-terminated path; the result is checked.
    let opened = fd_or_error(unsafe {
        libc::open(
            again.as_ptr(),
            libc::O_RDONLY | libc::O_NONBLOCK | libc::O_NOCTTY | libc::O_CLOEXEC,
        )
    })
    .ok()?;
    let file = std::fs::File::from(opened);
    let meta = file.metadata().ok()?;
    use std::os::unix::fs::MetadataExt;
    (meta.is_file() && (meta.dev(), meta.ino()) == (stat.st_dev, stat.st_ino)).then_some(file)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The one entry of `dir` whose name starts with `name` and
    /// [`ASIDE`].
    fn set_aside_in(dir: &Path, name: &str) -> PathBuf {
        let prefix = format!("{name}{ASIDE}");
        let found: Vec<_> = std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|p| {
                p.file_name()
                    .unwrap()
                    .to_string_lossy()
                    .starts_with(&prefix)
            })
            .collect();
        assert_eq!(found.len(), 1, "{found:?}");
        found[0].clone()
    }

    #[test]
    fn nothing_is_reached_through_a_link_on_the_way() {
        let root = tempfile::tempdir().unwrap();
        let away = tempfile::tempdir().unwrap();
        std::fs::write(away.path().join("precious"), "x").unwrap();
        std::os::unix::fs::symlink(away.path(), root.path().join("lnk")).unwrap();
        let fd = open_root(root.path()).unwrap();
        let Parent::Link(dir, name, way) = parent(&fd, Path::new("lnk/precious")).unwrap() else {
            panic!("a link on the way was followed");
        };
        assert_eq!(way, Path::new("lnk"));
        let aside = set_aside(dir.as_raw_fd(), &name).unwrap();
        assert!(away.path().join("precious").exists());
        assert!(!root.path().join("lnk").exists());
        assert!(root.path().join(aside).is_symlink());
        // A directory holding a link to elsewhere is set aside, not what it
        // leads to.
        std::fs::create_dir(root.path().join("d")).unwrap();
        std::os::unix::fs::symlink(away.path(), root.path().join("d/in")).unwrap();
        let Parent::Dir(dir) = parent(&fd, Path::new("d/x")).unwrap() else {
            panic!("a directory not reached");
        };
        set_aside(dir.as_raw_fd(), OsStr::new("in")).unwrap();
        assert!(away.path().join("precious").exists());
        assert!(matches!(
            parent(&fd, Path::new("none/x")),
            Ok(Parent::Missing)
        ));
        assert!(parent(&fd, Path::new("../x/y")).is_err());
    }

    #[test]
    fn a_tree_is_set_aside_whole_in_one_step_beside_its_name() {
        let root = tempfile::tempdir().unwrap();
        let top = root.path().join("hooks");
        // Relative steps: the path grows past PATH_MAX.
        std::fs::create_dir(&top).unwrap();
        let mut dir = top.clone();
        for _ in 0..300 {
            std::fs::create_dir(dir.join("d")).unwrap();
            dir = dir.join("d");
            if dir.as_os_str().len() > 3000 {
                break;
            }
        }
        std::fs::write(dir.join("kept"), "x").unwrap();
        std::fs::write(top.join("pre-commit"), "x").unwrap();
        let fd = open_root(root.path()).unwrap();
        let aside = set_aside(fd.as_raw_fd(), OsStr::new("hooks")).unwrap();
        assert!(!top.exists());
        let moved = root.path().join(&aside);
        assert_eq!(moved, set_aside_in(root.path(), "hooks"));
        assert!(moved.join("pre-commit").exists());
        let rel = dir.strip_prefix(&top).unwrap();
        assert!(moved.join(rel).join("kept").exists());
        // Planted again: another name; a name as long as any still fits.
        std::fs::create_dir(&top).unwrap();
        let again = set_aside(fd.as_raw_fd(), OsStr::new("hooks")).unwrap();
        assert_ne!(again, aside);
        let long = "l".repeat(255);
        std::fs::write(root.path().join(&long), "x").unwrap();
        let cut = set_aside(fd.as_raw_fd(), OsStr::new(&long)).unwrap();
        assert!(cut.len() <= 255 && root.path().join(cut).exists());
    }

    #[test]
    fn what_a_command_made_unsearchable_is_set_aside_all_the_same() {
        use std::os::unix::fs::PermissionsExt;
        // SAFETY: geteuid cannot fail.
        if unsafe { libc::geteuid() } == 0 {
            eprintln!("skipped: root needs no permission given back");
            return;
        }
        let root = tempfile::tempdir().unwrap();
        let dir = root.path().join("proj/.git/hooks/deep");
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("pre-commit"), "x").unwrap();
        for (path, mode) in [
            (dir.clone(), 0o000),
            (root.path().join("proj/.git"), 0o555),
            (root.path().join("proj"), 0o000),
        ] {
            std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).unwrap();
        }
        let fd = open_root(root.path()).unwrap();
        let Parent::Dir(git) = parent(&fd, Path::new("proj/.git/hooks")).unwrap() else {
            panic!("the directory made unsearchable was not reached");
        };
        set_aside(git.as_raw_fd(), OsStr::new("hooks")).unwrap();
        assert!(!root.path().join("proj/.git/hooks").exists());
        set_aside_in(&root.path().join("proj/.git"), "hooks");
    }

    #[test]
    fn only_small_regular_files_are_read() {
        let dir = tempfile::tempdir().unwrap();
        let big = dir.path().join("big");
        std::fs::write(&big, vec![b'a'; 100]).unwrap();
        assert!(read_small(&big, 99).is_err());
        assert_eq!(read_small(&big, 100).unwrap().map(|t| t.len()), Some(100));
        assert_eq!(read_small(Path::new("/dev/zero"), 10), Ok(None));
        let fifo = dir.path().join("fifo");
        let name = CString::new(fifo.as_os_str().as_bytes()).unwrap();
        // SAFETY: a NUL-terminated path.
        assert_eq!(unsafe { libc::mkfifo(name.as_ptr(), 0o600) }, 0);
        assert_eq!(read_small(&fifo, 10), Ok(None));
    }
}
