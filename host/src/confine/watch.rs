//! What a sandbox built ahead was planned from, so it is used only while
//! that still holds. A sandbox's mounts come from a walk of the grants
//! (which entries `file.deny` masks, which repository metadata is made
//! read-only); a sandbox built before its command is known must not run it
//! after the walk's answer changed. Two things are checked when it is taken:
//!
//! - every directory the walk read (and every file whose content it read)
//!   is watched with inotify from just before it was read: an entry created,
//!   deleted or renamed there since, or such a file written, queues an event
//!   in the kernel in the same system call that made the change, so a
//!   non-blocking read of the queue when the sandbox is taken sees every
//!   change completed before;
//! - each granted path still resolves to the same directory (device and
//!   inode), so a grant moved or replaced is not served from its old place.
//!
//! Anything that cannot be watched (the inotify limits, say) makes the
//! sandbox unfit to be built ahead; the command then builds its own.

use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use crate::policy::Profile;

/// Events that change what the walk of a directory finds.
const DIR_EVENTS: u32 = libc::IN_CREATE
    | libc::IN_DELETE
    | libc::IN_MOVED_FROM
    | libc::IN_MOVED_TO
    | libc::IN_DELETE_SELF
    | libc::IN_MOVE_SELF
    | libc::IN_ONLYDIR
    | libc::IN_DONT_FOLLOW;

/// Events that change a file the walk read.
const FILE_EVENTS: u32 = libc::IN_MODIFY
    | libc::IN_CLOSE_WRITE
    | libc::IN_DELETE_SELF
    | libc::IN_MOVE_SELF
    | libc::IN_DONT_FOLLOW;

/// The watches of one planned sandbox.
pub(crate) struct Watch {
    inotify: OwnedFd,
    /// Each granted path and what it resolved to when planned.
    roots: Vec<Root>,
    /// Why something could not be watched, if it could not.
    broken: Option<String>,
}

/// A granted path and the directory it resolved to.
#[derive(Debug, PartialEq, Eq)]
struct Root {
    path: PathBuf,
    /// Symlinks resolved, with its device and inode; `None` if it did not
    /// resolve.
    resolved: Option<(PathBuf, u64, u64)>,
}

impl Watch {
    /// Starts watching for a plan under `profile`; call before planning.
    pub(crate) fn new(profile: &Profile) -> std::io::Result<Self> {
        // SAFETY: inotify_init1 returns a new descriptor owned here, or -1.
        let fd = unsafe { libc::inotify_init1(libc::IN_NONBLOCK | libc::IN_CLOEXEC) };
        if fd < 0 {
            return Err(std::io::Error::last_os_error());
        }
        Ok(Self {
            // SAFETY: `fd` was just created and nothing else owns it.
            inotify: unsafe { OwnedFd::from_raw_fd(fd) },
            roots: roots(profile),
            broken: None,
        })
    }

    /// Watches the entries of the directory `path`.
    pub(crate) fn dir(&mut self, path: &Path) {
        self.add(path, DIR_EVENTS);
    }

    /// Watches the content of the file `path`. One that does not exist is
    /// not an error: creating it is seen in its (watched) directory.
    pub(crate) fn file(&mut self, path: &Path) {
        self.add(path, FILE_EVENTS);
    }

    fn add(&mut self, path: &Path, events: u32) {
        if self.broken.is_some() {
            return;
        }
        let Ok(c) = std::ffi::CString::new(path.as_os_str().as_bytes()) else {
            self.broken = Some(format!("{} holds a NUL byte", path.display()));
            return;
        };
        // SAFETY: a NUL-terminated path and a descriptor owned here.
        let added =
            unsafe { libc::inotify_add_watch(self.inotify.as_raw_fd(), c.as_ptr(), events) };
        if added < 0 {
            let error = std::io::Error::last_os_error();
            // Gone or not a directory: the walk finds nothing there either,
            // and what appears later appears in a watched parent.
            if !matches!(error.raw_os_error(), Some(libc::ENOENT | libc::ENOTDIR)) {
                self.broken = Some(format!("watching {}: {error}", path.display()));
            }
        }
    }

    /// Why the plan cannot be trusted later, if it cannot.
    pub(crate) fn broken(&self) -> Option<&str> {
        self.broken.as_deref()
    }

    /// `Ok` if nothing the plan was made from has changed since; else what
    /// did.
    pub(crate) fn unchanged(&self, profile: &Profile) -> Result<(), String> {
        if let Some(broken) = &self.broken {
            return Err(broken.clone());
        }
        let mut buffer = [0u8; 4096];
        // SAFETY: reads into a buffer of the given length.
        let read = unsafe {
            libc::read(
                self.inotify.as_raw_fd(),
                buffer.as_mut_ptr().cast(),
                buffer.len(),
            )
        };
        if read > 0 {
            return Err("an entry inside the grants changed".into());
        }
        let error = std::io::Error::last_os_error();
        if read < 0 && error.kind() != std::io::ErrorKind::WouldBlock {
            return Err(format!("reading the grants' watch: {error}"));
        }
        if roots(profile) != self.roots {
            return Err("a granted path resolves to another directory".into());
        }
        Ok(())
    }
}

/// What each of the profile's granted paths resolves to now.
fn roots(profile: &Profile) -> Vec<Root> {
    let grants = profile.paths.grants().map(|(dir, _)| dir);
    let read = profile.terminal.read.iter().map(PathBuf::as_path);
    grants
        .chain(read)
        .map(|path| Root {
            path: path.to_path_buf(),
            resolved: path.canonicalize().ok().and_then(|real| {
                let meta = real.metadata().ok()?;
                Some((real, meta.dev(), meta.ino()))
            }),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn profile(dir: &Path) -> std::sync::Arc<Profile> {
        use crate::config::{Config, ConfigSource};
        let text = format!(
            "default_profile = \"p\"\n[profiles.p]\nallow = [\"file:read\", \"terminal:execute\"]\nfile.read = [{:?}]\n",
            dir.display().to_string()
        );
        let config = Config::parse(&text, ConfigSource::Embedded, dir).expect("config");
        config.profile("p", None).expect("profile")
    }

    #[test]
    fn a_change_inside_a_watched_directory_is_seen() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join("sub")).unwrap();
        let profile = profile(dir.path());
        let mut watch = Watch::new(&profile).unwrap();
        watch.dir(dir.path());
        watch.dir(&dir.path().join("sub"));
        assert_eq!(watch.unchanged(&profile), Ok(()));
        // Reading is not a change.
        std::fs::read_dir(dir.path()).unwrap().for_each(drop);
        assert_eq!(watch.unchanged(&profile), Ok(()));
        std::fs::write(dir.path().join("sub/.env"), "X=1").unwrap();
        assert!(watch.unchanged(&profile).is_err());
    }

    #[test]
    fn a_grant_replaced_by_another_directory_is_seen() {
        let dir = tempfile::tempdir().unwrap();
        let ws = dir.path().join("ws");
        std::fs::create_dir(&ws).unwrap();
        let profile = profile(&ws);
        let watch = Watch::new(&profile).unwrap();
        assert_eq!(watch.unchanged(&profile), Ok(()));
        std::fs::rename(&ws, dir.path().join("old")).unwrap();
        std::fs::create_dir(&ws).unwrap();
        assert!(watch.unchanged(&profile).is_err());
    }

    #[test]
    fn a_rewritten_file_is_seen_and_a_missing_one_is_no_error() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join(".git");
        std::fs::write(&file, "gitdir: a").unwrap();
        let profile = profile(dir.path());
        let mut watch = Watch::new(&profile).unwrap();
        watch.file(&file);
        watch.file(&dir.path().join("missing"));
        assert_eq!(watch.broken(), None);
        assert_eq!(watch.unchanged(&profile), Ok(()));
        std::fs::write(&file, "gitdir: b").unwrap();
        assert!(watch.unchanged(&profile).is_err());
    }
}
