//! What a sandbox must leave as the plan found it but no mount can hold: a
//! name git would read that did not exist (a planted `.git/commondir`, a
//! `hooks` directory made where there was none), symbolic links among
//! repository metadata, and the links by which a denied name reaches a
//! file (the owner's `.env -> env.local`). Git writes new files in its directory, so that
//! directory stays writable and such a name can appear; the host puts back
//! what changed when each command ends and, while a sandbox lives, as soon
//! as inotify sees a change, and then ends the sandbox.

use std::ffi::OsStr;
use std::os::fd::{AsRawFd, OwnedFd};
use std::os::unix::fs::OpenOptionsExt as _;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use super::beneath::{self, Parent};

/// Kept paths of this process's guards that something was planted at and
/// could not be put back: no later plan takes them in as the owner's.
static UNSETTLED: Mutex<std::collections::BTreeSet<PathBuf>> =
    Mutex::new(std::collections::BTreeSet::new());

/// Why `path`, which a plan would keep as it finds it, must not be: a
/// guard could not put back what a command planted there.
pub(super) fn unsettled(path: &Path) -> Option<String> {
    let unsettled = UNSETTLED.lock().unwrap_or_else(|e| e.into_inner());
    unsettled.contains(path).then(|| {
        format!(
            "{} was planted by a command and could not be taken away (see the log); commands \
             are refused until it is removed",
            crate::escape::escape(&path.to_string_lossy())
        )
    })
}

/// Held while a guard is checked. Several guards keep the same path (a
/// caller's sandboxes, one built ahead) and several threads check them (the
/// watcher, a command's end, a plan about to be used): one at a time, so
/// that two never both move aside or link again what one command changed,
/// and a second finds the first's work done rather than failing on it.
static CHECKING: Mutex<()> = Mutex::new(());

/// What ends a sandbox whose guard saw a change, told why.
pub(crate) type End = Box<dyn Fn(&str) + Send + Sync>;

/// The paths of one plan that must stay as they were, each beneath the
/// writable grant that exposes it. The host acts on them only through a
/// descriptor of that grant, opened when the plan was made, and through
/// directories alone: a directory a command made a link leads nowhere.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Guard {
    kept: Vec<(PathBuf, Kept)>,
    /// The paths of `kept`, to find one at once.
    known: std::collections::HashSet<PathBuf>,
    roots: Roots,
    /// The kept paths that are toolhost's own files (see
    /// [`Guard::own_file`]).
    own: std::collections::HashSet<PathBuf>,
    /// The sandbox was built ahead and has run no command yet: nothing in
    /// it could have written an own file that was replaced.
    idle: Idle,
    /// The own files kept, held open: a file no longer named (replaced by
    /// a rename) keeps its inode, so a new file at the name never gets its
    /// number and passes for it.
    held: Held,
    /// What the plan masked, by device and inode: the owner's, left whole
    /// where what a command planted is emptied (see
    /// [`super::harmless::neutralise`]).
    spared: std::collections::HashSet<(u64, u64)>,
}

/// The grants the guarded paths lie in, held open (`None` where that
/// failed: then what lies beneath counts as changed).
#[derive(Debug, Clone, Default)]
struct Roots(Vec<(PathBuf, Option<Arc<OwnedFd>>)>);

/// Plans compare by what they keep; the descriptors are the same grants.
impl PartialEq for Roots {
    fn eq(&self, _: &Self) -> bool {
        true
    }
}
impl Eq for Roots {}

/// Descriptors held only to keep their files' inodes in use.
#[derive(Debug, Clone, Default)]
struct Held(Vec<Arc<OwnedFd>>);

/// Plans compare by what they keep.
impl PartialEq for Held {
    fn eq(&self, _: &Self) -> bool {
        true
    }
}
impl Eq for Held {}

/// Whether a sandbox built ahead is still waiting for its first command,
/// shared by every clone of its guard.
#[derive(Debug, Clone, Default)]
struct Idle(Arc<std::sync::atomic::AtomicBool>);

/// Plans compare by what they keep.
impl PartialEq for Idle {
    fn eq(&self, _: &Self) -> bool {
        true
    }
}
impl Eq for Idle {}

/// How a guarded path was found.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Kept {
    Absent,
    /// A symbolic link with this text.
    Link(PathBuf),
    /// Mounted read-only in the sandbox, as this device and inode. Only the
    /// host can replace it (a rename over it outside the sandbox takes the
    /// mount away); it is not put back, but the sandbox ends.
    Mounted(u64, u64),
}

/// What a check of a guard found.
struct Checked {
    /// `Err` names what changed and was put back.
    undone: Result<(), String>,
    /// Why a read-only mount was replaced from outside, if it was.
    replaced: Option<String>,
    /// The kept paths that changed.
    changed: Vec<PathBuf>,
}

/// Where a guarded path's directory was found, beneath its grant.
enum Found {
    /// Its directory, and its last name.
    At(OwnedFd, PathBuf),
    /// A directory on the way is missing (or not a directory).
    Missing,
    /// A directory on the way is a link, which is set aside: where to, or
    /// `Err` if that failed.
    LinkRemoved(Result<PathBuf, String>),
    /// Not to be checked: why.
    Unknown(String),
}

impl Guard {
    pub(super) fn mounted(&mut self, root: &Path, path: PathBuf, meta: &std::fs::Metadata) {
        use std::os::unix::fs::MetadataExt;
        self.add(root, path, Kept::Mounted(meta.dev(), meta.ino()));
    }

    /// Keeps toolhost's own file `path`, masked or read-only in the
    /// sandbox, as it was found: a new file at its name (the operator's
    /// editor saving by a rename) is one the sandbox sees and could write,
    /// so the sandbox ends and toolhost does not read that file as its own
    /// (see [`crate::policy::own::note_replaced`]).
    pub(super) fn own_file(&mut self, root: &Path, path: PathBuf, meta: &std::fs::Metadata) {
        use std::os::unix::fs::MetadataExt;
        self.own.insert(path.clone());
        // Held open, and kept as what is held: found as `meta` a moment
        // before, it may have been replaced since.
        let held = std::fs::OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_PATH | libc::O_NOFOLLOW)
            .open(&path)
            .and_then(|file| Ok((file.metadata()?, OwnedFd::from(file))));
        match held {
            Ok((found, fd)) => {
                self.held.0.push(Arc::new(fd));
                self.add(root, path, Kept::Mounted(found.dev(), found.ino()));
            }
            Err(_) => self.add(root, path, Kept::Mounted(meta.dev(), meta.ino())),
        }
    }

    /// Keeps toolhost's own path `path`, missing, absent (see
    /// [`Guard::absent`]); beside a sandbox built ahead that has run no
    /// command, what appears there is left (the operator's: the sandbox is
    /// planned anew before it runs one).
    pub(super) fn own_absent(&mut self, root: &Path, path: PathBuf) {
        self.own.insert(path.clone());
        self.absent(root, path);
    }

    /// Marks the sandbox as built ahead and waiting (`true`), or as given
    /// its first command (`false`).
    pub(crate) fn set_idle(&self, idle: bool) {
        self.idle.0.store(idle, std::sync::atomic::Ordering::SeqCst);
    }

    /// Notes a path the plan masks, by device and inode.
    pub(super) fn spare(&mut self, meta: &std::fs::Metadata) {
        use std::os::unix::fs::MetadataExt;
        self.spared.insert((meta.dev(), meta.ino()));
    }

    pub(super) fn absent(&mut self, root: &Path, path: PathBuf) {
        self.add(root, path, Kept::Absent);
    }

    pub(super) fn link(&mut self, root: &Path, path: PathBuf, text: PathBuf) {
        self.add(root, path, Kept::Link(text));
    }

    fn add(&mut self, root: &Path, path: PathBuf, kept: Kept) {
        if path == root || !path.starts_with(root) {
            return;
        }
        if !self.roots.0.iter().any(|(known, _)| known == root) {
            let fd = beneath::open_root(root).ok().map(Arc::new);
            self.roots.0.push((root.to_path_buf(), fd));
        }
        if self.known.insert(path.clone()) {
            self.kept.push((path, kept));
        }
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.kept.is_empty()
    }

    /// The paths kept, whatever each was found to be.
    pub(crate) fn paths(&self) -> impl Iterator<Item = &Path> {
        self.kept.iter().map(|(path, _)| path.as_path())
    }

    /// How many paths are kept.
    pub(super) fn len(&self) -> usize {
        self.kept.len()
    }

    /// Puts back every guarded path that changed: moves aside what appeared,
    /// makes a link again; `Err` names what the sandbox had changed.
    pub(crate) fn undo(&self) -> Result<(), String> {
        self.check().undone
    }

    /// The directory of `path` beneath its grant's descriptor.
    fn find(&self, path: &Path) -> Found {
        let Some((root, fd)) = self
            .roots
            .0
            .iter()
            .filter(|(root, _)| path.starts_with(root))
            .max_by_key(|(root, _)| root.as_os_str().len())
        else {
            return Found::Unknown("not in a grant".into());
        };
        let Some(fd) = fd else {
            return Found::Unknown(format!("its grant {} could not be opened", root.display()));
        };
        let Ok(rel) = path.strip_prefix(root) else {
            return Found::Unknown("not in a grant".into());
        };
        let Some(name) = rel.file_name() else {
            return Found::Unknown("no name".into());
        };
        match beneath::parent(fd, rel) {
            Ok(Parent::Dir(dir)) => Found::At(dir, PathBuf::from(name)),
            Ok(Parent::Missing) => Found::Missing,
            Ok(Parent::Link(dir, link, way)) => Found::LinkRemoved(
                beneath::set_aside(dir.as_raw_fd(), &link)
                    .map(|aside| root.join(way).with_file_name(aside))
                    .map_err(|e| e.to_string()),
            ),
            Err(e) => Found::Unknown(e.to_string()),
        }
    }

    /// [`Self::undo`], and whether a read-only mount of the sandbox was
    /// replaced from outside (which ends the sandbox).
    fn check(&self) -> Checked {
        let _one = CHECKING.lock().unwrap_or_else(|e| e.into_inner());
        let mut changed = Vec::new();
        let mut aside = Vec::new();
        let mut failed = Vec::new();
        let mut replaced = None;
        for (path, kept) in &self.kept {
            let found = self.find(path);
            // Changed: `Ok` with where what was there was set aside, or why
            // it could not be put back.
            let what: Option<Result<Option<PathBuf>, String>> = match (kept, found) {
                (Kept::Mounted(dev, ino), found) => {
                    let same = match &found {
                        Found::At(dir, name) => beneath::lstat(dir.as_raw_fd(), name.as_os_str())
                            .is_ok_and(|s| (s.st_dev, s.st_ino) == (*dev, *ino)),
                        _ => false,
                    };
                    if !same && self.own.contains(path) {
                        // What is at the name now may be a command's (it
                        // could rename its own file, or a link, over the
                        // name once the old file left it): set aside at
                        // once, so that neither this toolhost nor a later
                        // start reads it.
                        if !self.idle.0.load(std::sync::atomic::Ordering::SeqCst) {
                            let aside = match &found {
                                Found::At(dir, name) => {
                                    beneath::lstat(dir.as_raw_fd(), name.as_os_str())
                                        .ok()
                                        .and_then(|_| {
                                            beneath::set_aside(dir.as_raw_fd(), name.as_os_str())
                                                .ok()
                                        })
                                        .map(|to| path.with_file_name(to))
                                }
                                _ => None,
                            };
                            crate::policy::own::note_replaced(path, aside);
                        }
                        replaced = Some(format!(
                            "{} (toolhost's own) was replaced outside the sandbox, which could \
                             then write the new file",
                            path.display()
                        ));
                    } else if !same {
                        replaced = Some(format!(
                            "{} was replaced outside the sandbox, which had it read-only",
                            path.display()
                        ));
                    }
                    None
                }
                (_, Found::LinkRemoved(moved)) => Some(moved.map(Some)),
                (_, Found::Unknown(why)) => Some(Err(format!("could not be checked: {why}"))),
                (Kept::Absent, Found::Missing) => None,
                (Kept::Link(_), Found::Missing) => Some(Err("its directory is gone".into())),
                (Kept::Absent, Found::At(..))
                    if self.own.contains(path)
                        && self.idle.0.load(std::sync::atomic::Ordering::SeqCst) =>
                {
                    None
                }
                (Kept::Absent, Found::At(dir, name)) => {
                    match beneath::lstat(dir.as_raw_fd(), name.as_os_str()) {
                        Err(e) if e.raw_os_error() == Some(libc::ENOENT) => None,
                        Err(e) => Some(Err(format!("could not be checked: {e}"))),
                        Ok(_) => Some(
                            beneath::set_aside(dir.as_raw_fd(), name.as_os_str())
                                .map(|to| Some(path.with_file_name(to)))
                                .map_err(|e| self.unmovable(dir.as_raw_fd(), name.as_os_str(), &e)),
                        ),
                    }
                }
                (Kept::Link(text), Found::At(dir, name)) => {
                    let (dir, name) = (dir.as_raw_fd(), name.as_os_str());
                    if beneath::readlink(dir, name).ok().as_ref() == Some(text) {
                        None
                    } else {
                        Some(
                            self.relink(dir, name, text)
                                .map(|to| to.map(|to| path.with_file_name(to))),
                        )
                    }
                }
            };
            let mut unsettled = UNSETTLED.lock().unwrap_or_else(|e| e.into_inner());
            match &what {
                Some(Err(_)) if *kept != Kept::Absent || self.is_there(path) => {
                    unsettled.insert(path.clone());
                }
                Some(Err(_)) => {}
                _ => {
                    unsettled.remove(path);
                }
            }
            drop(unsettled);
            match what {
                None => continue,
                Some(Err(error)) => {
                    tracing::warn!(path = %path.display(), %error, "could not put back repository metadata");
                    failed.push(format!("{}: {error}", path.display()));
                }
                Some(Ok(Some(to))) => {
                    tracing::warn!(path = %path.display(), to = %to.display(), "set aside what a command planted at repository metadata");
                    aside.push(format!("{} is now {}", path.display(), to.display()));
                }
                Some(Ok(None)) => {}
            }
            changed.push(path.clone());
        }
        if changed.is_empty() {
            return Checked {
                undone: Ok(()),
                replaced,
                changed: Vec::new(),
            };
        }
        let list = |paths: &[PathBuf]| {
            let paths: Vec<_> = paths.iter().map(|p| p.display().to_string()).collect();
            paths.join(", ")
        };
        let mut undone = format!(
            "the command made or changed what the sandbox keeps as it was ({}), which a command \
             may not: repository metadata git outside the sandbox would read (a command may \
             change a repository's work and history, but not what makes git run programs or \
             read its metadata elsewhere), and the way a name file.deny denies leads to a file, \
             which would show the file once changed",
            list(&changed)
        );
        if failed.len() < changed.len() {
            undone.push_str("; toolhost put it back as it was");
        }
        if !aside.is_empty() {
            undone.push_str(&format!(
                "; what it left there was moved aside whole, nothing in it removed ({}): look \
                 through it, then remove it",
                aside.join(", ")
            ));
        }
        if !failed.is_empty() {
            undone.push_str(&format!(
                "; toolhost could not put back {}: remove what is there before running git in \
                 that repository",
                failed.join("; ")
            ));
        }
        Checked {
            undone: Err(undone),
            replaced,
            changed,
        }
    }

    /// Whether `path` is one this guard keeps.
    fn keeps(&self, path: &Path) -> bool {
        self.known.contains(path)
    }

    /// Whether something is at `path` (or it cannot be told).
    fn is_there(&self, path: &Path) -> bool {
        match self.find(path) {
            Found::At(dir, name) => !matches!(
                beneath::lstat(dir.as_raw_fd(), name.as_os_str()),
                Err(e) if e.raw_os_error() == Some(libc::ENOENT)
            ),
            Found::Missing => false,
            Found::LinkRemoved(_) | Found::Unknown(_) => true,
        }
    }

    /// The directories whose entries hold the guarded paths, or where
    /// those are missing the nearest that exists (a trigger only: what
    /// is found is checked beneath the grant's descriptor).
    fn dirs(&self) -> impl Iterator<Item = &Path> {
        self.kept.iter().filter_map(|(path, _)| {
            path.ancestors()
                .skip(1)
                .find(|dir| dir.symlink_metadata().is_ok_and(|m| m.is_dir()))
        })
    }
}

impl Guard {
    /// What `name` in `dir`, which could not be moved aside (`error`: no
    /// room for the longer name, say), became: made harmless where it is,
    /// which needs no room, or why not.
    fn unmovable(&self, dir: i32, name: &OsStr, error: &std::io::Error) -> String {
        let spared = |dev, ino| self.spared.contains(&(dev, ino));
        let done = super::harmless::neutralise(dir, name, &spared)
            .unwrap_or_else(|e| format!("nor could it be made harmless: {e}"));
        format!("it could not be moved aside ({error}); {done}")
    }

    /// Makes `name` in `dir` the link `text` again, after setting aside
    /// what is there; the name it was set aside to, if any.
    fn relink(
        &self,
        dir: i32,
        name: &OsStr,
        text: &Path,
    ) -> Result<Option<std::ffi::OsString>, String> {
        let aside = match beneath::lstat(dir, name) {
            Ok(_) => {
                Some(beneath::set_aside(dir, name).map_err(|e| self.unmovable(dir, name, &e))?)
            }
            Err(_) => None,
        };
        beneath::symlink(text, dir, name).map_err(|e| e.to_string())?;
        Ok(aside)
    }
}

mod watcher;
pub(crate) use watcher::settle_at_exit;

pub(crate) use watcher::{Watched, kill, pidfd, start as start_watcher};

#[cfg(test)]
mod tests;
