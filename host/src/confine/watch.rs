//! What a sandbox built ahead was planned from, so it is used only while
//! that still holds. A sandbox's mounts come from a walk of the grants
//! (which entries `file.deny` masks, which repository metadata is made
//! read-only); a sandbox built before its command is known must not run it
//! after the walk's answer changed. Two things are checked when it is taken:
//!
//! - every directory the walk read (and every file whose content it read)
//!   is watched with inotify from just before it was read. A change there
//!   queues an event in the kernel in the same system call that made it, so
//!   reading the queue when the sandbox is taken sees every change completed
//!   before. The changes that could alter the walk's answer make the
//!   sandbox stale: an entry `file.deny` matches created, removed or renamed;
//!   repository metadata (`.git`, its `config`, `hooks`, ...) appearing or
//!   changing; any directory created or moved in (its content was never
//!   walked); a watched directory moved; events lost. Other files coming
//!   and going (what most commands do) change nothing the sandbox shows
//!   differently, and it stays usable.
//! - each granted path still resolves to the same directory (device and
//!   inode), so a grant moved or replaced is not served from its old place.
//!
//! Anything that cannot be watched (the inotify limits, say) makes the
//! sandbox unfit to be built ahead; the command then builds its own.

use std::collections::{HashMap, HashSet};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use super::spec::GIT_PROTECTED as GIT_NAMES;
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
    /// `None` only while being dropped.
    inotify: Option<OwnedFd>,
    /// Each granted path and what it resolved to when planned.
    roots: Vec<Root>,
    /// The watched directories: as found (symlinks resolved) and as the
    /// profile spells them.
    dirs: HashMap<i32, (PathBuf, PathBuf)>,
    /// The watched files.
    files: HashSet<i32>,
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
            inotify: Some(unsafe { OwnedFd::from_raw_fd(fd) }),
            roots: roots(profile),
            dirs: HashMap::new(),
            files: HashSet::new(),
            broken: None,
        })
    }

    /// Watches the entries of the directory `real` (symlinks resolved),
    /// which the profile spells `written`.
    pub(crate) fn dir(&mut self, real: &Path, written: &Path) {
        if let Some(wd) = self.add(real, DIR_EVENTS) {
            self.dirs
                .insert(wd, (real.to_path_buf(), written.to_path_buf()));
        }
    }

    /// Watches the content of the file `path`. One that does not exist is
    /// not an error: creating it is seen in its (watched) directory.
    pub(crate) fn file(&mut self, path: &Path) {
        if let Some(wd) = self.add(path, FILE_EVENTS) {
            self.files.insert(wd);
        }
    }

    fn add(&mut self, path: &Path, events: u32) -> Option<i32> {
        if self.broken.is_some() {
            return None;
        }
        let Ok(c) = std::ffi::CString::new(path.as_os_str().as_bytes()) else {
            self.broken = Some(format!("{} holds a NUL byte", path.display()));
            return None;
        };
        // SAFETY: a NUL-terminated path and a descriptor owned here.
        let wd = unsafe { libc::inotify_add_watch(self.fd(), c.as_ptr(), events) };
        if wd < 0 {
            let error = std::io::Error::last_os_error();
            // Gone or not a directory: the walk finds nothing there either,
            // and what appears later appears in a watched parent.
            if !matches!(error.raw_os_error(), Some(libc::ENOENT | libc::ENOTDIR)) {
                self.broken = Some(format!("watching {}: {error}", path.display()));
            }
            return None;
        }
        Some(wd)
    }

    fn fd(&self) -> std::os::fd::RawFd {
        self.inotify.as_ref().map_or(-1, AsRawFd::as_raw_fd)
    }

    /// Why the plan cannot be trusted later, if it cannot.
    pub(crate) fn broken(&self) -> Option<&str> {
        self.broken.as_deref()
    }

    /// `Ok` if nothing the plan was made from has changed since; else what
    /// did. Reads (and so forgets) the changes seen so far.
    pub(crate) fn unchanged(&self, profile: &Profile) -> Result<(), String> {
        if let Some(broken) = &self.broken {
            return Err(broken.clone());
        }
        // Aligned for `struct inotify_event`.
        let mut buffer = vec![0u64; 4096 / 8];
        loop {
            // SAFETY: reads into a buffer of the given length.
            let read = unsafe {
                libc::read(
                    self.fd(),
                    buffer.as_mut_ptr().cast(),
                    buffer.len() * size_of::<u64>(),
                )
            };
            if read < 0 {
                let error = std::io::Error::last_os_error();
                if error.kind() == std::io::ErrorKind::WouldBlock {
                    break;
                }
                return Err(format!("reading the grants' watch: {error}"));
            }
            // SAFETY: the kernel wrote `read` bytes of whole events.
            let bytes =
                unsafe { std::slice::from_raw_parts(buffer.as_ptr().cast::<u8>(), read as usize) };
            self.judge(profile, bytes)?;
        }
        if roots(profile) != self.roots {
            return Err("a granted path resolves to another directory".into());
        }
        Ok(())
    }

    /// `Err` for the first event in `bytes` that can change the plan.
    fn judge(&self, profile: &Profile, mut bytes: &[u8]) -> Result<(), String> {
        const HEADER: usize = size_of::<libc::inotify_event>();
        while bytes.len() >= HEADER {
            // SAFETY: a whole event header lies at the start of `bytes`.
            let event: libc::inotify_event =
                unsafe { std::ptr::read_unaligned(bytes.as_ptr().cast()) };
            let end = (HEADER + event.len as usize).min(bytes.len());
            let name = &bytes[HEADER..end];
            let name = &name[..name.iter().position(|&b| b == 0).unwrap_or(name.len())];
            bytes = &bytes[end..];
            if let Some(reason) = self.changes_plan(profile, &event, name) {
                return Err(reason.to_string());
            }
        }
        Ok(())
    }

    /// Why one event can change the plan, if it can.
    fn changes_plan(
        &self,
        profile: &Profile,
        event: &libc::inotify_event,
        name: &[u8],
    ) -> Option<&'static str> {
        let mask = event.mask;
        if mask & libc::IN_Q_OVERFLOW != 0 {
            return Some("more changes inside the grants than were queued");
        }
        if self.files.contains(&event.wd) {
            return Some("repository metadata changed");
        }
        if mask & libc::IN_MOVE_SELF != 0 {
            return Some("a directory inside the grants moved");
        }
        if mask & (libc::IN_DELETE_SELF | libc::IN_IGNORED) != 0 {
            // A directory removed: what was in it is gone; what appears in
            // its place appears in its watched parent.
            return None;
        }
        let Some((real, written)) = self.dirs.get(&event.wd) else {
            return Some("a change the watch does not know");
        };
        let arrived = libc::IN_CREATE | libc::IN_MOVED_TO | libc::IN_MOVED_FROM;
        if mask & libc::IN_ISDIR != 0 && mask & arrived != 0 {
            return Some("a directory was created or moved inside the grants");
        }
        let name = std::ffi::OsStr::from_bytes(name);
        if name == ".git" || name == "commondir" || GIT_NAMES.iter().any(|n| name == *n) {
            return Some("repository metadata appeared or went");
        }
        let rules = &profile.paths;
        if rules.denies_entry(&real.join(name)).is_some()
            || rules.denies_entry(&written.join(name)).is_some()
        {
            return Some("a path file.deny matches appeared or went");
        }
        if rules.own().held_in(&real.join(name)).is_some() {
            return Some("one of toolhost's own paths appeared, went or was replaced");
        }
        None
    }
}

impl Drop for Watch {
    fn drop(&mut self) {
        // Closing an inotify instance waits for a grace period of the
        // kernel (milliseconds): not on the time of the call that drops it.
        if let (Some(fd), Ok(runtime)) =
            (self.inotify.take(), tokio::runtime::Handle::try_current())
        {
            runtime.spawn_blocking(move || drop(fd));
        }
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
            "default_profile = \"p\"\n[profiles.p]\nallow = [\"file:read\", \"terminal:execute\"]\n\
             file.read = [{:?}]\nfile.deny = [\"**/.env*\"]\n",
            dir.display().to_string()
        );
        let config = Config::parse(&text, ConfigSource::Embedded, dir).expect("config");
        config.profile("p", None).expect("profile")
    }

    #[test]
    fn changes_that_alter_the_plan_are_seen_and_others_are_not() {
        let dir = tempfile::tempdir().unwrap();
        let profile = profile(dir.path());
        let sub = dir.path().join("sub");
        let watched = |prepare: &dyn Fn(&Path)| {
            let _ = std::fs::remove_dir_all(&sub);
            std::fs::create_dir(&sub).unwrap();
            prepare(&sub);
            let mut watch = Watch::new(&profile).unwrap();
            watch.dir(dir.path(), dir.path());
            watch.dir(&sub, &sub);
            assert_eq!(watch.unchanged(&profile), Ok(()));
            watch
        };
        // Reading is not a change, nor are files the rules do not match
        // coming and going, nor a denied file rewritten in place.
        let watch = watched(&|sub| std::fs::write(sub.join(".env"), "X=1").unwrap());
        std::fs::read_dir(&sub).unwrap().for_each(drop);
        std::fs::write(sub.join("notes.txt"), "x").unwrap();
        std::fs::rename(sub.join("notes.txt"), sub.join("moved.txt")).unwrap();
        std::fs::remove_file(sub.join("moved.txt")).unwrap();
        std::fs::write(sub.join(".env"), "X=2").unwrap();
        assert_eq!(watch.unchanged(&profile), Ok(()));

        type Change = (&'static str, fn(&Path));
        let changes: [Change; 7] = [
            ("a denied file created", |sub| {
                std::fs::write(sub.join(".env"), "").unwrap()
            }),
            ("a file renamed to a denied name", |sub| {
                std::fs::rename(sub.join("a.txt"), sub.join(".env.local")).unwrap()
            }),
            ("a denied file removed", |sub| {
                std::fs::remove_file(sub.join(".envrc")).unwrap()
            }),
            ("a repository", |sub| {
                std::fs::create_dir(sub.join(".git")).unwrap()
            }),
            ("repository metadata", |sub| {
                std::fs::write(sub.join("config"), "").unwrap()
            }),
            ("a new directory", |sub| {
                std::fs::create_dir(sub.join("new")).unwrap()
            }),
            ("a watched directory moved", |sub| {
                std::fs::rename(sub, sub.with_extension("moved")).unwrap()
            }),
        ];
        for (what, change) in changes {
            let watch = watched(&|sub| {
                std::fs::write(sub.join("a.txt"), "").unwrap();
                std::fs::write(sub.join(".envrc"), "").unwrap();
            });
            change(&sub);
            assert!(watch.unchanged(&profile).is_err(), "{what} was not seen");
            let _ = std::fs::rename(sub.with_extension("moved"), &sub);
        }
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
