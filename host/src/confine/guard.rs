//! What a sandbox must leave as the plan found it but no mount can hold: a
//! name git would read that did not exist (a planted `.git/commondir`, a
//! `hooks` directory made where there was none), and symbolic links among
//! repository metadata. Git writes new files in its directory, so that
//! directory stays writable and such a name can appear; the host puts back
//! what changed when each command ends and, while a sandbox lives, as soon
//! as inotify sees a change, and then ends the sandbox.

use std::collections::HashMap;
use std::ffi::OsStr;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, OnceLock};

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

    /// How many paths are kept.
    pub(super) fn len(&self) -> usize {
        self.kept.len()
    }

    /// Puts back every guarded path that changed: removes what appeared,
    /// makes a link again; `Err` names what the sandbox had changed.
    pub(crate) fn undo(&self) -> Result<(), String> {
        self.check().0
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
    fn check(&self) -> (Result<(), String>, Option<String>) {
        let mut changed = Vec::new();
        let mut aside = Vec::new();
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
                    if !same {
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
                (Kept::Absent, Found::At(dir, name)) => {
                    match beneath::lstat(dir.as_raw_fd(), name.as_os_str()) {
                        Err(e) if e.raw_os_error() == Some(libc::ENOENT) => None,
                        Err(e) => Some(Err(format!("could not be checked: {e}"))),
                        Ok(_) => Some(
                            beneath::set_aside(dir.as_raw_fd(), name.as_os_str())
                                .map(|to| Some(path.with_file_name(to)))
                                .map_err(|e| e.to_string()),
                        ),
                    }
                }
                (Kept::Link(text), Found::At(dir, name)) => {
                    let (dir, name) = (dir.as_raw_fd(), name.as_os_str());
                    if beneath::readlink(dir, name).ok().as_ref() == Some(text) {
                        None
                    } else {
                        Some(relink(dir, name, text).map(|to| to.map(|to| path.with_file_name(to))))
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
                }
                Some(Ok(Some(to))) => {
                    tracing::warn!(path = %path.display(), to = %to.display(), "set aside what a command planted at repository metadata");
                    aside.push(format!("{} is now {}", path.display(), to.display()));
                }
                Some(Ok(None)) => {}
            }
            changed.push(path.display().to_string());
        }
        if changed.is_empty() {
            return (Ok(()), replaced);
        }
        let aside = if aside.is_empty() {
            String::new()
        } else {
            format!(
                "; what it left there was moved aside whole, nothing in it removed ({}): look \
                 through it, then remove it",
                aside.join(", ")
            )
        };
        let undone = format!(
            "the command made or changed repository metadata that git outside the sandbox would \
             read ({}); toolhost put it back as it was{aside}, since a command may change a \
             repository's work and history but not what makes git run programs or read its \
             metadata elsewhere",
            changed.join(", ")
        );
        (Err(undone), replaced)
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

    /// Watches the guard while a sandbox lives: any change is put back at
    /// once and `end` is called with why (it ends the sandbox). After the
    /// returned registration is dropped, the watch goes on until `gone`
    /// (the sandbox's PID 1) has exited, then checks one last time.
    pub(crate) fn watch(self, end: End, gone: Option<OwnedFd>) -> Option<Watched> {
        if self.is_empty() {
            return None;
        }
        let watcher = watcher()?;
        let mut state = watcher.state.lock().unwrap_or_else(|e| e.into_inner());
        state.next += 1;
        let id = state.next;
        let mut wds = Vec::new();
        for dir in self.dirs() {
            let Ok(c) = std::ffi::CString::new(dir.as_os_str().as_bytes()) else {
                continue;
            };
            // SAFETY: a NUL-terminated path and the watcher's descriptor.
            let wd = unsafe { libc::inotify_add_watch(watcher.fd.as_raw_fd(), c.as_ptr(), EVENTS) };
            if wd >= 0 && !wds.contains(&wd) {
                wds.push(wd);
                state.by_wd.entry(wd).or_default().push(id);
            }
        }
        let undone = Arc::new(Mutex::new(None));
        state.guards.insert(
            id,
            Entry {
                guard: Arc::new(self),
                end,
                wds,
                gone,
                ending: false,
                undone: undone.clone(),
            },
        );
        Some(Watched { id, undone })
    }
}

/// Makes `name` in `dir` the link `text` again, after setting aside what
/// is there; the name it was set aside to, if any.
fn relink(dir: i32, name: &OsStr, text: &Path) -> Result<Option<std::ffi::OsString>, String> {
    let aside = match beneath::lstat(dir, name) {
        Ok(_) => Some(beneath::set_aside(dir, name).map_err(|e| e.to_string())?),
        Err(_) => None,
    };
    beneath::symlink(text, dir, name).map_err(|e| e.to_string())?;
    Ok(aside)
}

/// Changes in a guarded path's directory.
const EVENTS: u32 = libc::IN_CREATE
    | libc::IN_ATTRIB
    | libc::IN_MOVED_TO
    | libc::IN_MOVED_FROM
    | libc::IN_DELETE
    | libc::IN_ONLYDIR
    | libc::IN_DONT_FOLLOW;

/// A guard watched while its sandbox lives; dropping it ends the watch
/// once the sandbox is gone.
pub(crate) struct Watched {
    id: u64,
    /// What the watcher put back, until taken.
    undone: Arc<Mutex<Option<String>>>,
}

impl Watched {
    /// Puts back what changed now, under the watcher's lock (so that what
    /// its thread is putting back meanwhile is not missed); `Err` names
    /// what was put back since last asked, by either.
    pub(crate) fn settle(&self) -> Result<(), String> {
        let now = watcher().and_then(|watcher| {
            let state = watcher.state.lock().unwrap_or_else(|e| e.into_inner());
            state.guards.get(&self.id).map(|entry| entry.guard.undo())
        });
        let before = self.undone.lock().unwrap_or_else(|e| e.into_inner()).take();
        match (now, before) {
            (Some(Err(reason)), _) | (_, Some(reason)) => Err(reason),
            _ => Ok(()),
        }
    }
}

impl Drop for Watched {
    fn drop(&mut self) {
        let Some(watcher) = watcher() else {
            return;
        };
        let mut state = watcher.state.lock().unwrap_or_else(|e| e.into_inner());
        let done = match state.guards.get_mut(&self.id) {
            Some(entry) if entry.gone.is_some() => {
                entry.ending = true;
                false
            }
            Some(_) => true,
            None => false,
        };
        if done {
            state.remove(self.id, watcher.fd.as_raw_fd());
        }
        drop(state);
        // The watcher's thread polls the ending sandbox's PID 1 from now.
        wake(watcher.wake.as_raw_fd());
    }
}

struct Entry {
    guard: Arc<Guard>,
    end: End,
    wds: Vec<i32>,
    /// A pidfd of the sandbox's PID 1.
    gone: Option<OwnedFd>,
    /// Its registration was dropped: removed once `gone` is readable.
    ending: bool,
    undone: Arc<Mutex<Option<String>>>,
}

#[derive(Default)]
struct State {
    next: u64,
    guards: HashMap<u64, Entry>,
    by_wd: HashMap<i32, Vec<u64>>,
}

impl State {
    fn remove(&mut self, id: u64, inotify: i32) {
        let Some(entry) = self.guards.remove(&id) else {
            return;
        };
        for wd in entry.wds {
            let ids = self.by_wd.entry(wd).or_default();
            ids.retain(|other| *other != id);
            if ids.is_empty() {
                self.by_wd.remove(&wd);
                // SAFETY: removes a watch of the watcher's own descriptor.
                unsafe {
                    libc::inotify_rm_watch(inotify, wd);
                }
            }
        }
    }
}

/// One inotify descriptor and one thread for every guard of the process.
struct Watcher {
    fd: OwnedFd,
    /// Written to wake the thread (a registration ending).
    wake: OwnedFd,
    state: Mutex<State>,
}

/// The process's watcher, started at first use; `None` where inotify or a
/// thread is not to be had (then guards are checked when commands end).
fn watcher() -> Option<&'static Watcher> {
    static WATCHER: OnceLock<Option<Watcher>> = OnceLock::new();
    WATCHER
        .get_or_init(|| {
            // SAFETY: new descriptors owned here, or -1.
            let fd = unsafe { libc::inotify_init1(libc::IN_CLOEXEC) };
            let mut pipe = [0; 2];
            // SAFETY: pipe2 fills two descriptors.
            let piped = unsafe { libc::pipe2(pipe.as_mut_ptr(), libc::O_CLOEXEC) };
            if fd < 0 || piped < 0 {
                tracing::warn!("no inotify for the repository guard: checked when commands end");
                return None;
            }
            // SAFETY: each descriptor was just created and is owned here.
            let (fd, read, write) = unsafe {
                (
                    OwnedFd::from_raw_fd(fd),
                    OwnedFd::from_raw_fd(pipe[0]),
                    OwnedFd::from_raw_fd(pipe[1]),
                )
            };
            let watcher = Watcher {
                fd,
                wake: write,
                state: Mutex::new(State::default()),
            };
            let inotify = watcher.fd.as_raw_fd();
            std::thread::Builder::new()
                .name("toolhost-guard".into())
                .spawn(move || run(inotify, read))
                .ok()?;
            Some(watcher)
        })
        .as_ref()
}

/// Wakes the watcher's thread through its pipe.
fn wake(fd: i32) {
    // SAFETY: writes one byte from a local to a pipe this process owns.
    unsafe {
        libc::write(fd, [0u8].as_ptr().cast(), 1);
    }
}

/// The watcher's thread: waits for changes in guarded directories, for the
/// end of sandboxes whose registration ended, and for wake-ups.
fn run(inotify: i32, wake: OwnedFd) {
    let mut buffer = vec![0u64; 4096 / 8];
    loop {
        let mut polls = vec![
            libc::pollfd {
                fd: inotify,
                events: libc::POLLIN,
                revents: 0,
            },
            libc::pollfd {
                fd: wake.as_raw_fd(),
                events: libc::POLLIN,
                revents: 0,
            },
        ];
        let Some(watcher) = watcher() else { return };
        let ending: Vec<(u64, i32)> = {
            let state = watcher.state.lock().unwrap_or_else(|e| e.into_inner());
            state
                .guards
                .iter()
                .filter(|(_, entry)| entry.ending)
                .filter_map(|(id, entry)| Some((*id, entry.gone.as_ref()?.as_raw_fd())))
                .collect()
        };
        polls.extend(ending.iter().map(|(_, fd)| libc::pollfd {
            fd: *fd,
            events: libc::POLLIN,
            revents: 0,
        }));
        // SAFETY: polls descriptors owned by the watcher's entries, which
        // stay registered (and open) until this thread removes them.
        let ready = unsafe { libc::poll(polls.as_mut_ptr(), polls.len() as libc::nfds_t, -1) };
        if ready < 0 {
            continue;
        }
        if polls[1].revents != 0 {
            let mut byte = [0u8; 64];
            // SAFETY: reads into a local buffer.
            unsafe {
                libc::read(wake.as_raw_fd(), byte.as_mut_ptr().cast(), byte.len());
            }
        }
        let mut touched: Vec<i32> = Vec::new();
        let mut overflow = false;
        if polls[0].revents != 0 {
            // SAFETY: reads whole events into an aligned buffer.
            let read = unsafe { libc::read(inotify, buffer.as_mut_ptr().cast(), buffer.len() * 8) };
            // SAFETY: the kernel wrote `read` bytes of whole events.
            let bytes = unsafe {
                std::slice::from_raw_parts(buffer.as_ptr().cast::<u8>(), read.max(0) as usize)
            };
            let mut rest = bytes;
            const HEADER: usize = size_of::<libc::inotify_event>();
            while rest.len() >= HEADER {
                // SAFETY: a whole event header lies at the start of `rest`.
                let event: libc::inotify_event =
                    unsafe { std::ptr::read_unaligned(rest.as_ptr().cast()) };
                overflow |= event.mask & libc::IN_Q_OVERFLOW != 0;
                touched.push(event.wd);
                rest = &rest[(HEADER + event.len as usize).min(rest.len())..];
            }
        }
        let mut state = watcher.state.lock().unwrap_or_else(|e| e.into_inner());
        let mut ids: Vec<u64> = if overflow {
            state.guards.keys().copied().collect()
        } else {
            touched
                .iter()
                .flat_map(|wd| state.by_wd.get(wd).into_iter().flatten().copied())
                .collect()
        };
        let gone: Vec<u64> = ending
            .iter()
            .zip(&polls[2..])
            .filter(|(_, poll)| poll.revents != 0)
            .map(|((id, _), _)| *id)
            .collect();
        ids.extend(&gone);
        ids.sort_unstable();
        ids.dedup();
        for id in ids {
            let Some(entry) = state.guards.get(&id) else {
                continue;
            };
            match entry.guard.check() {
                (Err(reason), _) => {
                    tracing::warn!(%reason, "a sandbox planted repository metadata; ending it");
                    *entry.undone.lock().unwrap_or_else(|e| e.into_inner()) = Some(reason.clone());
                    (entry.end)(&reason);
                }
                (Ok(()), Some(reason)) => (entry.end)(&reason),
                (Ok(()), None) => {}
            }
        }
        for id in gone {
            state.remove(id, inotify);
        }
    }
}

/// A pidfd of process `pid`, to learn when it has exited.
pub(crate) fn pidfd(pid: libc::pid_t) -> Option<OwnedFd> {
    // SAFETY: pidfd_open returns a new descriptor owned here, or -1.
    let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid, 0) };
    // SAFETY: as above.
    (fd >= 0).then(|| unsafe { OwnedFd::from_raw_fd(fd as i32) })
}

/// Sends SIGKILL to the process of `pidfd`.
pub(crate) fn kill(pidfd: &OwnedFd) {
    // SAFETY: a signal to the process the descriptor refers to.
    unsafe {
        libc::syscall(
            libc::SYS_pidfd_send_signal,
            pidfd.as_raw_fd(),
            libc::SIGKILL,
            std::ptr::null::<libc::siginfo_t>(),
            0,
        );
    }
}

#[cfg(test)]
mod tests;
