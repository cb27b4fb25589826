//! The guards' watcher: one inotify descriptor and one thread for every
//! guard of the process, putting back what changed as soon as it is seen
//! and ending the sandboxes that keep it.

use std::collections::HashMap;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, OnceLock};

use crate::capability::terminal::confine::guard::{End, Guard};

impl Guard {
    /// Watches the guard while a sandbox lives: any change is put back at
    /// once and `end` is called with why (it ends the sandbox). After the
    /// returned registration is dropped, the watch goes on until `gone`
    /// (the sandbox's PID 1) has exited, then checks one last time.
    ///
    /// Fails closed: `Err` says why the guard cannot be watched (no inotify
    /// instance or watch left for toolhost's user), and the sandbox must
    /// not run. A kept path whose directory does not exist yet is watched
    /// at the nearest directory that does, and its own directory from the
    /// moment it appears.
    pub(crate) fn watch(self, end: End, gone: Option<OwnedFd>) -> Result<Option<Watched>, String> {
        if self.is_empty() {
            return Ok(None);
        }
        let watcher = watcher().ok_or_else(|| {
            "the repository guard has no inotify instance: toolhost's user has none left \
             (fs.inotify.max_user_instances), so no command may run beside kept repository \
             metadata until one is free"
                .to_string()
        })?;
        let mut state = watcher.state.lock().unwrap_or_else(|e| e.into_inner());
        state.next += 1;
        let id = state.next;
        let undone = Arc::new(Mutex::new(None));
        state.guards.insert(
            id,
            Entry {
                guard: Arc::new(self),
                end,
                wds: Vec::new(),
                gone,
                ending: false,
                undone: undone.clone(),
            },
        );
        if let Err(e) = state.rewatch(id, watcher.fd.as_raw_fd()) {
            state.remove(id, watcher.fd.as_raw_fd());
            return Err(e);
        }
        Ok(Some(Watched { id, undone }))
    }
}

/// Checks every guard of the process now, as the watcher's thread does on
/// a change it sees, ending the sandboxes whose kept paths changed: before
/// toolhost reads one of its own files, a replacement its thread has not
/// seen yet is seen (see [`crate::policy::own::take_replaced`]).
pub(crate) fn check_all() {
    let Some(watcher) = watcher() else {
        return;
    };
    let state = watcher.state.lock().unwrap_or_else(|e| e.into_inner());
    for entry in state.guards.values() {
        act(entry, entry.guard.check());
    }
}

/// Before the process exits: waits (up to `wait` in all) for the sandboxes
/// whose guards are watched to be gone, then checks each guard one last
/// time, so that what a command put at a kept name (one of toolhost's own
/// files among them) is set aside even when toolhost exits at once, before
/// its thread would have looked.
pub(crate) fn settle_at_exit(wait: std::time::Duration) {
    let Some(watcher) = WATCHER.get() else {
        return;
    };
    let deadline = std::time::Instant::now() + wait;
    let state = watcher.state.lock().unwrap_or_else(|e| e.into_inner());
    for entry in state.guards.values() {
        let Some(gone) = &entry.gone else { continue };
        let left = deadline.saturating_duration_since(std::time::Instant::now());
        let mut poll = libc::pollfd {
            fd: gone.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        };
        // SAFETY: one pollfd of a descriptor the entry owns.
        unsafe { libc::poll(&mut poll, 1, left.as_millis().min(i32::MAX as u128) as i32) };
    }
    for entry in state.guards.values() {
        act(entry, entry.guard.check());
    }
}

/// Ends the sandbox of `entry` when `checked` found a change: told what
/// was put back, or why a read-only mount was replaced; whether it was put
/// back.
fn act(entry: &Entry, checked: super::Checked) -> Option<(Vec<PathBuf>, String)> {
    match checked.undone {
        Err(reason) => {
            tracing::warn!(%reason, "a sandbox planted repository metadata; ending it");
            tell(entry, &reason);
            Some((checked.changed, reason))
        }
        Ok(()) => {
            if let Some(reason) = checked.replaced {
                (entry.end)(&reason);
            }
            None
        }
    }
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
    /// Adds a watch on each directory guard `id` needs that it has none
    /// on yet (one that appeared since); whether any was added. `Err` when
    /// one cannot be added (no watch left for toolhost's user).
    fn rewatch(&mut self, id: u64, inotify: i32) -> Result<bool, String> {
        let Some(entry) = self.guards.get(&id) else {
            return Ok(false);
        };
        let dirs: Vec<PathBuf> = entry.guard.dirs().map(PathBuf::from).collect();
        let mut added = false;
        for dir in dirs {
            let Ok(c) = std::ffi::CString::new(dir.as_os_str().as_bytes()) else {
                continue;
            };
            // SAFETY: a NUL-terminated path and the watcher's descriptor.
            let wd = unsafe { libc::inotify_add_watch(inotify, c.as_ptr(), EVENTS) };
            if wd < 0 {
                let e = std::io::Error::last_os_error();
                // Gone since it was found: its parent's watch sees it.
                if matches!(e.raw_os_error(), Some(libc::ENOENT | libc::ENOTDIR)) {
                    continue;
                }
                return Err(format!(
                    "the repository guard cannot watch {}: {e} (fs.inotify.max_user_watches of \
                     toolhost's user), so no command may run beside kept repository metadata \
                     until watches are free",
                    dir.display()
                ));
            }
            let Some(entry) = self.guards.get_mut(&id) else {
                return Ok(added);
            };
            if !entry.wds.contains(&wd) {
                entry.wds.push(wd);
                self.by_wd.entry(wd).or_default().push(id);
                added = true;
            }
        }
        Ok(added)
    }

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

/// Starts the process's watcher now, before any command runs, so that no
/// command can take the inotify instance it needs first; false (and a
/// warning) where it cannot be had yet.
pub(crate) fn start() -> bool {
    let started = watcher().is_some();
    if !started {
        tracing::warn!(
            "no inotify instance for the repository guard yet: commands beside kept repository \
             metadata are refused until one is free"
        );
    }
    started
}

/// The process's watcher, started at first use; `None` where inotify or a
/// thread is not to be had now (not remembered: a later call tries again).
static WATCHER: OnceLock<Watcher> = OnceLock::new();

fn watcher() -> Option<&'static Watcher> {
    static STARTING: Mutex<()> = Mutex::new(());
    if let Some(watcher) = WATCHER.get() {
        return Some(watcher);
    }
    let _starting = STARTING.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(watcher) = WATCHER.get() {
        return Some(watcher);
    }
    // SAFETY: new descriptors owned here, or -1.
    let fd = unsafe { libc::inotify_init1(libc::IN_CLOEXEC) };
    if fd < 0 {
        return None;
    }
    // SAFETY: `fd` was just created and is owned here.
    let fd = unsafe { OwnedFd::from_raw_fd(fd) };
    let mut pipe = [0; 2];
    // SAFETY: pipe2 fills two descriptors.
    if unsafe { libc::pipe2(pipe.as_mut_ptr(), libc::O_CLOEXEC) } < 0 {
        return None;
    }
    // SAFETY: each descriptor was just created and is owned here.
    let (read, write) = unsafe { (OwnedFd::from_raw_fd(pipe[0]), OwnedFd::from_raw_fd(pipe[1])) };
    let inotify = fd.as_raw_fd();
    // toolhost checks every guard before it reads one of its own files.
    crate::policy::own::on_check(check_all);
    let watcher = Watcher {
        fd,
        wake: write,
        state: Mutex::new(State::default()),
    };
    // The thread waits for `WATCHER` to be set (it asks for it under
    // `STARTING`).
    std::thread::Builder::new()
        .name("toolhost-guard".into())
        .spawn(move || run(inotify, read))
        .ok()?;
    let _ = WATCHER.set(watcher);
    WATCHER.get()
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
        let mut put_back: Vec<(PathBuf, String)> = Vec::new();
        let mut told = Vec::new();
        for id in ids {
            // A directory that appeared (above a kept path) is watched from
            // now on, then everything is checked again: what was made in it
            // before its watch is seen too. A watch that cannot be added
            // ends the sandbox.
            match state.rewatch(id, inotify) {
                Ok(_) => {}
                Err(reason) => {
                    if let Some(entry) = state.guards.get(&id) {
                        tell(entry, &reason);
                    }
                    continue;
                }
            }
            let Some(entry) = state.guards.get(&id) else {
                continue;
            };
            if let Some((changed, reason)) = act(entry, entry.guard.check()) {
                put_back.extend(changed.into_iter().map(|p| (p, reason.clone())));
                told.push(id);
            }
        }
        // Every other sandbox keeping what was put back may have planted
        // it (one of a caller's, or one built ahead, saw it first): each is
        // told and ended the same.
        for (id, entry) in &state.guards {
            if told.contains(id) {
                continue;
            }
            if let Some((_, reason)) = put_back.iter().find(|(path, _)| entry.guard.keeps(path)) {
                tell(entry, reason);
            }
        }
        for id in gone {
            state.remove(id, inotify);
        }
    }
}

/// Tells the sandbox of `entry` what was put back (its command's result
/// says it) and ends it.
fn tell(entry: &Entry, reason: &str) {
    *entry.undone.lock().unwrap_or_else(|e| e.into_inner()) = Some(reason.to_string());
    (entry.end)(reason);
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
