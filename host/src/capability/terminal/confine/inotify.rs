//! One inotify instance for the whole process. Every watch of the grants
//! ([`super::watch::Watch`]) subscribes to it, adds its paths, and takes the
//! events of its own watch descriptors, so the number of terminal sessions
//! is not bounded by the kernel's per-user limit of instances
//! (`fs.inotify.max_user_instances`, 128 by default). A thread moves events
//! from the kernel's queue to the subscribers' as they come; taking events
//! first reads what the kernel has queued, so a change completed before is
//! always seen. An instance that cannot be made is tried again next time.

use std::collections::HashMap;
use std::ffi::CStr;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::sync::{Arc, Mutex};

/// Most bytes of events kept for one subscriber between two takes; past
/// it, the subscriber is told events were lost.
const MAX_QUEUED: usize = 256 << 10;

/// Flags an event carries whatever was asked.
const ALWAYS: u32 = libc::IN_IGNORED | libc::IN_Q_OVERFLOW | libc::IN_UNMOUNT;

/// The process's instance, once made.
static SHARED: Mutex<Option<Arc<Shared>>> = Mutex::new(None);

/// The inotify instance and who listens to what.
struct Shared {
    fd: OwnedFd,
    state: Mutex<State>,
}

#[derive(Default)]
struct State {
    /// For each watch descriptor, its subscribers and the events each asked for.
    watches: HashMap<i32, Vec<(u64, u32)>>,
    /// Each subscriber's events not yet taken, in the kernel's layout.
    queues: HashMap<u64, Queue>,
    next: u64,
}

#[derive(Default)]
struct Queue {
    bytes: Vec<u8>,
    lost: bool,
}

/// One subscriber: the watch descriptors it added and its queue of events.
pub(crate) struct Subscriber {
    shared: Arc<Shared>,
    id: u64,
    wds: Vec<i32>,
}

/// A new subscriber of the process's instance (made now if there is none).
pub(crate) fn subscribe() -> std::io::Result<Subscriber> {
    let shared = {
        let mut slot = SHARED.lock().unwrap_or_else(|e| e.into_inner());
        match &*slot {
            Some(shared) => shared.clone(),
            None => {
                let shared = Shared::new()?;
                *slot = Some(shared.clone());
                shared
            }
        }
    };
    let id = {
        let mut state = shared.lock();
        state.next += 1;
        let id = state.next;
        state.queues.insert(id, Queue::default());
        id
    };
    Ok(Subscriber {
        shared,
        id,
        wds: Vec::new(),
    })
}

impl Shared {
    fn new() -> std::io::Result<Arc<Self>> {
        // SAFETY: inotify_init1 returns a new descriptor owned here, or -1.
        let fd = unsafe { libc::inotify_init1(libc::IN_NONBLOCK | libc::IN_CLOEXEC) };
        if fd < 0 {
            return Err(std::io::Error::last_os_error());
        }
        let shared = Arc::new(Self {
            // SAFETY: `fd` was just created and nothing else owns it.
            fd: unsafe { OwnedFd::from_raw_fd(fd) },
            state: Mutex::default(),
        });
        let pump = shared.clone();
        std::thread::Builder::new()
            .name("toolhost-inotify".into())
            .spawn(move || pump.run())?;
        Ok(shared)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Moves events to the subscribers whenever the kernel has some.
    fn run(&self) {
        loop {
            let mut poll = libc::pollfd {
                fd: self.fd.as_raw_fd(),
                events: libc::POLLIN,
                revents: 0,
            };
            // SAFETY: one valid pollfd.
            let ready = unsafe { libc::poll(&mut poll, 1, -1) };
            if ready < 0
                && std::io::Error::last_os_error().kind() != std::io::ErrorKind::Interrupted
            {
                tracing::warn!(
                    error = %std::io::Error::last_os_error(),
                    "waiting for inotify events failed; the grants' watches are read when used"
                );
                return;
            }
            if let Err(error) = self.pump() {
                tracing::warn!(%error, "reading inotify events failed");
            }
        }
    }

    /// Reads every event the kernel has queued and gives each to the
    /// subscribers of its watch descriptor that asked for it.
    fn pump(&self) -> std::io::Result<()> {
        self.pump_locked(&mut self.lock())
    }

    /// [`Self::pump`] with the state already locked.
    fn pump_locked(&self, state: &mut State) -> std::io::Result<()> {
        // Aligned for `struct inotify_event`.
        let mut buffer = vec![0u64; 16384 / 8];
        loop {
            // SAFETY: reads into a buffer of the given length.
            let read = unsafe {
                libc::read(
                    self.fd.as_raw_fd(),
                    buffer.as_mut_ptr().cast(),
                    buffer.len() * size_of::<u64>(),
                )
            };
            if read < 0 {
                let error = std::io::Error::last_os_error();
                return match error.kind() {
                    std::io::ErrorKind::WouldBlock => Ok(()),
                    std::io::ErrorKind::Interrupted => continue,
                    _ => Err(error),
                };
            }
            // SAFETY: the kernel wrote `read` bytes of whole events.
            let bytes =
                unsafe { std::slice::from_raw_parts(buffer.as_ptr().cast::<u8>(), read as usize) };
            state.deliver(bytes);
        }
    }
}

impl State {
    fn deliver(&mut self, mut bytes: &[u8]) {
        const HEADER: usize = size_of::<libc::inotify_event>();
        while bytes.len() >= HEADER {
            // SAFETY: a whole event header lies at the start of `bytes`.
            let event: libc::inotify_event =
                unsafe { std::ptr::read_unaligned(bytes.as_ptr().cast()) };
            let end = (HEADER + event.len as usize).min(bytes.len());
            let (whole, rest) = bytes.split_at(end);
            bytes = rest;
            if event.mask & libc::IN_Q_OVERFLOW != 0 {
                for queue in self.queues.values_mut() {
                    queue.lost = true;
                }
                continue;
            }
            let Some(subscribers) = self.watches.get(&event.wd) else {
                continue;
            };
            for (id, asked) in subscribers {
                if event.mask & (asked & libc::IN_ALL_EVENTS | ALWAYS) == 0 {
                    continue;
                }
                if let Some(queue) = self.queues.get_mut(id) {
                    if queue.bytes.len() + whole.len() > MAX_QUEUED {
                        queue.lost = true;
                    } else {
                        queue.bytes.extend_from_slice(whole);
                    }
                }
            }
            // The kernel has let go of the watch (its file is gone).
            if event.mask & libc::IN_IGNORED != 0 {
                self.watches.remove(&event.wd);
            }
        }
    }
}

impl Subscriber {
    /// Watches `path` for `events` (with inotify's flags); its watch
    /// descriptor, shared with other subscribers of the same file.
    pub(crate) fn add(&mut self, path: &CStr, events: u32) -> std::io::Result<i32> {
        let mut state = self.shared.lock();
        // What the kernel queued before goes to those who watched then: a
        // file others watch already shares its watch descriptor.
        self.shared.pump_locked(&mut state)?;
        // The events others asked of the same file stay asked.
        let mask = events | libc::IN_MASK_ADD;
        // SAFETY: a NUL-terminated path and a descriptor owned by `shared`.
        let wd =
            unsafe { libc::inotify_add_watch(self.shared.fd.as_raw_fd(), path.as_ptr(), mask) };
        if wd < 0 {
            return Err(std::io::Error::last_os_error());
        }
        let subscribers = state.watches.entry(wd).or_default();
        if !subscribers.iter().any(|(id, _)| *id == self.id) {
            subscribers.push((self.id, events));
            self.wds.push(wd);
        }
        Ok(wd)
    }

    /// The events of this subscriber since the last take, in the kernel's
    /// layout, and whether some were lost. Reads the kernel's queue first.
    pub(crate) fn take(&self) -> std::io::Result<(Vec<u8>, bool)> {
        self.shared.pump()?;
        let mut state = self.shared.lock();
        let queue = state.queues.entry(self.id).or_default();
        Ok((
            std::mem::take(&mut queue.bytes),
            std::mem::take(&mut queue.lost),
        ))
    }
}

impl Drop for Subscriber {
    fn drop(&mut self) {
        let mut state = self.shared.lock();
        state.queues.remove(&self.id);
        for wd in &self.wds {
            let Some(subscribers) = state.watches.get_mut(wd) else {
                continue;
            };
            subscribers.retain(|(id, _)| *id != self.id);
            if subscribers.is_empty() {
                state.watches.remove(wd);
                // SAFETY: a watch descriptor of the instance `shared` owns.
                unsafe { libc::inotify_rm_watch(self.shared.fd.as_raw_fd(), *wd) };
            }
        }
    }
}

/// How many inotify instances this process holds open (for tests).
#[cfg(test)]
pub(crate) fn instances() -> usize {
    std::fs::read_dir("/proc/self/fd")
        .into_iter()
        .flatten()
        .flatten()
        .filter(|entry| {
            std::fs::read_link(entry.path())
                .is_ok_and(|target| target.to_string_lossy().contains("inotify"))
        })
        .count()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn subscribers_share_one_instance_and_see_only_their_own_events() {
        let dir = tempfile::tempdir().unwrap();
        let (a_dir, b_dir) = (dir.path().join("a"), dir.path().join("b"));
        std::fs::create_dir(&a_dir).unwrap();
        std::fs::create_dir(&b_dir).unwrap();
        let path =
            |p: &std::path::Path| std::ffi::CString::new(p.as_os_str().as_encoded_bytes()).unwrap();
        let mut a = subscribe().unwrap();
        let mut b = subscribe().unwrap();
        let mut both = subscribe().unwrap();
        a.add(&path(&a_dir), libc::IN_CREATE).unwrap();
        b.add(&path(&b_dir), libc::IN_CREATE).unwrap();
        both.add(&path(&a_dir), libc::IN_DELETE).unwrap();
        let before = instances();
        let many: Vec<Subscriber> = (0..300).map(|_| subscribe().unwrap()).collect();
        assert_eq!(instances(), before, "subscribers make no instance");
        drop(many);

        std::fs::write(a_dir.join("x"), "").unwrap();
        assert!(!a.take().unwrap().0.is_empty(), "a sees its creation");
        assert!(b.take().unwrap().0.is_empty(), "b does not");
        assert!(both.take().unwrap().0.is_empty(), "a creation is not asked");
        std::fs::remove_file(a_dir.join("x")).unwrap();
        assert!(!both.take().unwrap().0.is_empty(), "the deletion is seen");
        assert!(
            a.take().unwrap().0.is_empty(),
            "a did not ask for deletions"
        );
        // One subscriber leaving keeps the other's watch on the same file.
        drop(both);
        std::fs::write(a_dir.join("y"), "").unwrap();
        assert!(!a.take().unwrap().0.is_empty());
    }
}
