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
//! Every sandbox is also checked once its mounts are made, so that what
//! moved between the walk and the mounts (which could have escaped a mask)
//! has it planned again (see [`super::plan::verify`]).
//!
//! Anything that cannot be watched (the inotify limits, say) makes the
//! sandbox unfit to be built ahead; the command then builds its own. Every
//! watch subscribes to the process's one inotify instance ([`inotify`]).

use std::collections::{HashMap, HashSet};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use super::inotify::{self, Subscriber};
use crate::capability::Profile;

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
    /// Its watch descriptors in the process's instance, and their events.
    inotify: Subscriber,
    /// Each granted path and what it resolved to when planned.
    roots: Vec<Root>,
    /// The watched directories: as found (symlinks resolved) and as the
    /// profile spells them.
    dirs: HashMap<i32, (PathBuf, PathBuf)>,
    /// The watched files.
    files: HashSet<i32>,
    /// Paths kept as they were (repository metadata, see [`super::git`]),
    /// whose directories are watched.
    kept: HashSet<PathBuf>,
    /// Where denied links that lead nowhere would lead (see
    /// [`super::walk`]), whose directories are watched.
    targets: HashSet<PathBuf>,
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
        Ok(Self {
            inotify: inotify::subscribe()?,
            roots: roots(profile),
            dirs: HashMap::new(),
            files: HashSet::new(),
            kept: HashSet::new(),
            targets: HashSet::new(),
            broken: None,
        })
    }

    /// Watches the entries of the directory `real` (symlinks resolved),
    /// which the profile spells `written`.
    pub(crate) fn dir(&mut self, real: &Path, written: &Path) {
        if let Some(wd) = self.add(real, DIR_EVENTS) {
            self.dirs
                .entry(wd)
                .or_insert_with(|| (real.to_path_buf(), written.to_path_buf()));
        }
    }

    /// Watches the content of the file `path`. One that does not exist is
    /// not an error: creating it is seen in its (watched) directory.
    pub(crate) fn file(&mut self, path: &Path) {
        if let Some(wd) = self.add(path, FILE_EVENTS) {
            self.files.insert(wd);
        }
    }

    /// Watches for `path` appearing, going or being replaced.
    pub(crate) fn kept(&mut self, path: &Path) {
        if let Some(parent) = path.parent() {
            self.dir(parent, parent);
            self.kept.insert(path.to_path_buf());
        }
    }

    /// Watches for `path`, where a denied link leads, appearing.
    pub(crate) fn target(&mut self, path: &Path) {
        if let Some(parent) = path.parent() {
            self.dir(parent, parent);
            self.targets.insert(path.to_path_buf());
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
        match self.inotify.add(&c, events) {
            Ok(wd) => Some(wd),
            // Gone or not a directory: the walk finds nothing there either,
            // and what appears later appears in a watched parent.
            Err(error) if matches!(error.raw_os_error(), Some(libc::ENOENT | libc::ENOTDIR)) => {
                None
            }
            Err(error) => {
                self.broken = Some(format!("watching {}: {error}", path.display()));
                None
            }
        }
    }

    /// Why the plan cannot be trusted later, if it cannot.
    pub(crate) fn broken(&self) -> Option<&str> {
        self.broken.as_deref()
    }

    /// `Ok` if nothing the plan was made from has changed since; else what
    /// did. Reads (and so forgets) the changes seen so far.
    pub(crate) fn unchanged(&self, profile: &Profile) -> Result<(), String> {
        match self.changes(profile)? {
            None => Ok(()),
            Some(change) => Err(change.reason),
        }
    }

    /// The weightiest change since the last read, if any: one that may
    /// have moved what the plan masks or keeps before, and a directory's
    /// new content after. Reads (and so forgets) the changes seen so far.
    pub(crate) fn changes(&self, profile: &Profile) -> Result<Option<Change>, String> {
        if let Some(broken) = &self.broken {
            return Err(broken.clone());
        }
        let (bytes, lost) = self
            .inotify
            .take()
            .map_err(|error| format!("reading the grants' watch: {error}"))?;
        let mut worst: Option<Change> = None;
        if lost {
            worst = Some(Change::moved(
                "more changes inside the grants than were queued",
            ));
        }
        self.judge(profile, &bytes, &mut worst);
        if roots(profile) != self.roots {
            worst = Some(Change::moved(
                "a granted path resolves to another directory",
            ));
        }
        Ok(worst)
    }

    /// Keeps in `worst` the weightiest event in `bytes` that can change the
    /// plan.
    fn judge(&self, profile: &Profile, mut bytes: &[u8], worst: &mut Option<Change>) {
        const HEADER: usize = size_of::<libc::inotify_event>();
        while bytes.len() >= HEADER {
            // SAFETY: a whole event header lies at the start of `bytes`.
            let event: libc::inotify_event =
                unsafe { std::ptr::read_unaligned(bytes.as_ptr().cast()) };
            let end = (HEADER + event.len as usize).min(bytes.len());
            let name = &bytes[HEADER..end];
            let name = &name[..name.iter().position(|&b| b == 0).unwrap_or(name.len())];
            bytes = &bytes[end..];
            if let Some((reason, moved)) = self.changes_plan(profile, &event, name)
                && !worst.as_ref().is_some_and(|w| w.moved)
            {
                *worst = Some(Change {
                    reason: reason.to_string(),
                    moved,
                });
            }
        }
    }

    /// Why one event can change the plan, if it can, and whether it may
    /// have moved what was planned (rather than added a directory to walk).
    fn changes_plan(
        &self,
        profile: &Profile,
        event: &libc::inotify_event,
        name: &[u8],
    ) -> Option<(&'static str, bool)> {
        let mask = event.mask;
        if mask & libc::IN_Q_OVERFLOW != 0 {
            return Some(("more changes inside the grants than were queued", true));
        }
        if self.files.contains(&event.wd) {
            return Some(("repository metadata changed", true));
        }
        if mask & libc::IN_MOVE_SELF != 0 {
            return Some(("a directory inside the grants moved", true));
        }
        if mask & (libc::IN_DELETE_SELF | libc::IN_IGNORED) != 0 {
            // A directory removed: what was in it is gone; what appears in
            // its place appears in its watched parent.
            return None;
        }
        let Some((real, written)) = self.dirs.get(&event.wd) else {
            return Some(("a change the watch does not know", true));
        };
        let moved = libc::IN_MOVED_TO | libc::IN_MOVED_FROM;
        if mask & libc::IN_ISDIR != 0 && mask & moved != 0 {
            return Some(("a directory was moved inside the grants", true));
        }
        if mask & libc::IN_ISDIR != 0 && mask & libc::IN_CREATE != 0 {
            return Some(("a directory was created inside the grants", false));
        }
        let name = std::ffi::OsStr::from_bytes(name);
        if name == ".git" || self.kept.contains(&real.join(name)) {
            return Some(("repository metadata appeared or went", true));
        }
        if self.targets.contains(&real.join(name)) {
            return Some(("what a denied link leads to appeared or went", true));
        }
        // What makes a directory a git directory (see `walk::is_git_dir`);
        // `.git` is one by its name.
        if (name == "HEAD" || name == "config") && real.file_name() != Some(".git".as_ref()) {
            return Some(("a file that marks a git directory appeared or went", false));
        }
        let rules = &profile.file;
        if rules.denies_entry(&real.join(name)).is_some()
            || rules.denies_entry(&written.join(name)).is_some()
        {
            return Some(("a path file.deny matches appeared or went", true));
        }
        if rules.own().held_in(&real.join(name)).is_some() {
            return Some((
                "one of toolhost's own paths appeared, went or was replaced",
                true,
            ));
        }
        None
    }
}

/// A change to what a plan was made from.
#[derive(Debug)]
pub(crate) struct Change {
    pub(crate) reason: String,
    /// It may have moved or replaced what the plan masks or keeps.
    pub(crate) moved: bool,
}

impl Change {
    fn moved(reason: &str) -> Self {
        Self {
            reason: reason.to_string(),
            moved: true,
        }
    }
}

/// What each of the profile's granted paths resolves to now.
fn roots(profile: &Profile) -> Vec<Root> {
    let grants = profile.file.grants().map(|(dir, _)| dir);
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
            watch.kept(&sub.join("config"));
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
