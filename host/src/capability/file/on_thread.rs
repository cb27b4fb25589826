//! File operations that never wait on another party, done on the calling
//! thread instead of a hop to the blocking pool and back.
//!
//! wasmtime-wasi runs every filesystem operation of a descriptor on tokio's
//! blocking pool unless the descriptor allows blocking the current thread.
//! Ours do not (see `pinned`): a runtime worker that waits stalls other
//! tenants' calls. But a hop costs two thread wake-ups, more than the
//! operation when it is a `stat` or a read the page cache answers, and a
//! search makes a few per file. So:
//!
//! - metadata is read on the calling thread only where nothing is read from
//!   a device: of an open descriptor (`stat`, `metadata-hash`, `get-type`,
//!   `get-flags`: its inode is in memory), or of a path whose names the
//!   kernel has in its cache (`stat-at`, `metadata-hash-at`: looked up with
//!   `RESOLVE_CACHED`, which fails rather than read; the lookup then goes
//!   to the pool, since a device that stops answering, a network block
//!   device say, would hold the worker for good); and only where what it
//!   reaches lives on a
//!   filesystem on a block device, whose metadata no server answers. FUSE,
//!   NFS, CIFS and every other filesystem on no device (tmpfs, overlay and
//!   btrfs too) go to the pool: a server that stops answering would hold the
//!   worker. Which filesystem holds a descriptor or path is read from what
//!   the kernel has cached (`statx` with `AT_STATX_DONT_SYNC`), asking no
//!   filesystem;
//! - a file's bytes are read on the calling thread with `RWF_NOWAIT`, which
//!   the kernel refuses (`EAGAIN`) when the bytes are not in memory or it
//!   would wait for a lock, and refuses on every filesystem that cannot
//!   read without waiting (`EOPNOTSUPP`: FUSE, NFS, tmpfs...); then, and
//!   only then, the read goes to the pool;
//! - everything else (opening, listing, writing, syncing, renaming) stays on
//!   the pool.

use std::collections::HashMap;
use std::io;
use std::os::fd::AsRawFd as _;
use std::path::{Path, PathBuf};
use std::sync::LazyLock;

use wasmtime::component::Resource;
use wasmtime_wasi::filesystem::{Descriptor, Dir, File, WasiFilesystemCtxView};
use wasmtime_wasi::p2::FsResult;
use wasmtime_wasi::p2::bindings::filesystem::types::PathFlags;
use wasmtime_wasi::{FsPerms, OpenMode};

use super::policed::PolicedFs;
use crate::policy::Access;

/// A directory and a file descriptor that allow blocking the current
/// thread. Never used for what they hold: an operation clones one and puts
/// the handle and rights of the descriptor it names in it. `None` if `/`
/// cannot be opened: then every operation goes to the pool.
static ON_THREAD: LazyLock<Option<(Dir, File)>> = LazyLock::new(|| {
    let dir = std::fs::File::open("/").ok()?;
    let file = dir.try_clone().ok()?;
    let perms = FsPerms::ReadOnly;
    Some((
        Dir::new(dir, perms, OpenMode::empty(), true),
        File::new(file, perms, OpenMode::empty(), true),
    ))
});

/// `descriptor`, the same handle and rights, with wasmtime-wasi doing its
/// operations on the calling thread.
fn on_thread(descriptor: &Descriptor) -> Option<Descriptor> {
    let (dir, file) = ON_THREAD.as_ref()?;
    Some(match descriptor {
        Descriptor::Dir(like) => {
            let mut dir = dir.clone();
            dir.dir = like.dir.clone();
            dir.perms = like.perms;
            dir.open_mode = like.open_mode;
            Descriptor::Dir(dir)
        }
        Descriptor::File(like) => {
            let mut file = file.clone();
            file.file = like.file.clone();
            file.perms = like.perms;
            file.open_mode = like.open_mode;
            Descriptor::File(file)
        }
    })
}

/// A descriptor lent for one metadata operation: the guest's own, or its
/// copy read on the calling thread, which [`PolicedFs::give_back`] drops.
struct Lent {
    copy: Option<Resource<Descriptor>>,
    rep: u32,
}

impl Lent {
    /// The descriptor the operation names.
    fn fd(&self) -> Resource<Descriptor> {
        Resource::new_borrow(self.copy.as_ref().map_or(self.rep, Resource::rep))
    }
}

/// True when the filesystem `fd` is on lives on a block device, as the
/// kernel's cached view says (the device is the superblock's; no filesystem
/// is asked). FUSE, NFS and the other filesystems on no device say no.
pub(super) fn on_a_block_device(fd: libc::c_int, path: &std::ffi::CStr, nofollow: bool) -> bool {
    block_device_of(fd, path, nofollow).is_ok_and(|on| on)
}

/// [`on_a_block_device`], or why it could not be looked at.
fn block_device_of(fd: libc::c_int, path: &std::ffi::CStr, nofollow: bool) -> io::Result<bool> {
    let mut flags = libc::AT_STATX_DONT_SYNC;
    if path.is_empty() {
        flags |= libc::AT_EMPTY_PATH;
    }
    if nofollow {
        flags |= libc::AT_SYMLINK_NOFOLLOW;
    }
    // SAFETY: `statx` is plain integers, for which zero is valid.
    let mut found: libc::statx = unsafe { std::mem::zeroed() };
    // SAFETY: a NUL-terminated path and a `statx` to fill.
    let done = unsafe { libc::statx(fd, path.as_ptr(), flags, 0, &mut found) };
    if done != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(found.stx_dev_major != 0)
}

/// The descriptor's own handle.
fn raw_fd(descriptor: &Descriptor) -> libc::c_int {
    match descriptor {
        Descriptor::Dir(dir) => dir.dir.as_raw_fd(),
        Descriptor::File(file) => file.file.as_raw_fd(),
    }
}

/// Most directories whose filesystem a call remembers; past it, forgotten
/// and looked at again.
const MAX_REMEMBERED: usize = 4096;

/// True when `real` (where a path the rules checked, to its end, leads;
/// itself no symlink) and the directory it is in live on block devices,
/// and the path walks no `..` (which could step through another filesystem
/// on the way). Both were just looked up by the check: this asks the
/// kernel's cache, not a device. The directory's answer is kept for the
/// call (`seen`). `real` not being there is judged by its directory.
fn reaches_a_block_device(path: &str, real: &Path, seen: &mut HashMap<PathBuf, bool>) -> bool {
    use std::os::unix::ffi::OsStrExt as _;
    let c = |path: &Path| std::ffi::CString::new(path.as_os_str().as_bytes()).ok();
    if path.split('/').any(|name| name == "..") {
        return false;
    }
    let Some(dir) = real.parent() else {
        return false;
    };
    let dir_on = match seen.get(dir) {
        Some(on) => *on,
        None => {
            let on = c(dir).is_some_and(|dir| on_a_block_device(libc::AT_FDCWD, &dir, false));
            if seen.len() >= MAX_REMEMBERED {
                seen.clear();
            }
            seen.insert(dir.to_path_buf(), on);
            on
        }
    };
    // Looked up only from the kernel's cache (`RESOLVE_CACHED`): a name
    // whose entry or inode would have to be read from the device is not
    // looked at here (`EAGAIN`), and the operation goes to the pool.
    let cached = c(real).map(|real| {
        super::pinned::openat2(
            libc::AT_FDCWD,
            &real,
            libc::O_PATH | libc::O_NOFOLLOW | libc::O_CLOEXEC,
            libc::RESOLVE_CACHED | libc::RESOLVE_NO_MAGICLINKS,
        )
    });
    dir_on
        && match cached {
            Some(Ok(found)) => on_a_block_device(found.as_raw_fd(), c"", false),
            // Known not to be there: the lookup ends in the directory.
            Some(Err(e)) => e.raw_os_error() == Some(libc::ENOENT),
            None => false,
        }
}

/// What a metadata operation reaches besides its descriptor: the path it
/// names, where the rules found it leads.
struct Reach<'p> {
    path: &'p str,
    real: &'p Path,
}

impl PolicedFs<'_> {
    /// `fd` to read metadata through: a copy that does it on the calling
    /// thread when `fd` and what the operation reaches are on block
    /// devices, else `fd` itself.
    fn lend_for_metadata(&mut self, fd: &Resource<Descriptor>, reach: Option<Reach<'_>>) -> Lent {
        let copy = self
            .inner
            .table
            .get(fd)
            .ok()
            .filter(|descriptor| on_a_block_device(raw_fd(descriptor), c"", false))
            .filter(|_| {
                reach.is_none_or(|r| {
                    reaches_a_block_device(r.path, r.real, &mut self.files.on_block_devices)
                })
            })
            .and_then(on_thread)
            .and_then(|copy| self.inner.table.push(copy).ok());
        Lent {
            copy,
            rep: fd.rep(),
        }
    }

    /// Drops the copy [`Self::lend_for_metadata`] made.
    fn give_back(&mut self, lent: Lent) {
        if let Some(copy) = lent.copy {
            let _ = self.inner.table.delete(copy);
        }
    }

    /// Runs `op`, a metadata operation of wasmtime-wasi on `fd` alone
    /// (`stat`, `metadata-hash`, `get-type`, `get-flags`), on the calling
    /// thread where that cannot wait on another party.
    pub(super) async fn metadata<R>(
        &mut self,
        fd: &Resource<Descriptor>,
        op: impl AsyncFnOnce(&mut WasiFilesystemCtxView<'_>, Resource<Descriptor>) -> R,
    ) -> R {
        let lent = self.lend_for_metadata(fd, None);
        let done = op(&mut self.inner, lent.fd()).await;
        self.give_back(lent);
        done
    }

    /// [`Self::metadata`] of `path` beneath `fd` (`stat-at`,
    /// `metadata-hash-at`), once the rules allow reading it.
    pub(super) async fn metadata_at<R>(
        &mut self,
        fd: Resource<Descriptor>,
        path_flags: PathFlags,
        path: String,
        op: impl AsyncFnOnce(
            &mut WasiFilesystemCtxView<'_>,
            Resource<Descriptor>,
            PathFlags,
            String,
        ) -> FsResult<R>,
    ) -> FsResult<R> {
        let follow = path_flags.contains(PathFlags::SYMLINK_FOLLOW);
        let (_, real) = self.check_with(&fd, &path, Access::Read, "stat", follow)?;
        let reach = Reach {
            path: &path,
            real: &real,
        };
        let lent = self.lend_for_metadata(&fd, Some(reach));
        let done = op(&mut self.inner, lent.fd(), path_flags, path).await;
        self.give_back(lent);
        done
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Only what lives on a block device is done on the calling thread:
    /// not what lives on tmpfs or procfs (nor FUSE or NFS, on no device
    /// either; `attack::on_thread` mounts a FUSE filesystem).
    #[test]
    fn only_block_devices_are_waited_on_in_place() {
        let on = |path: &str, nofollow| {
            on_a_block_device(
                libc::AT_FDCWD,
                &std::ffi::CString::new(path).unwrap(),
                nofollow,
            )
        };
        assert!(!on("/proc/self/status", false));
        assert!(!on("/dev/shm", false));
        assert!(!on("/nowhere/at/all", false));
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("f1"), "1").unwrap();
        let file = std::fs::File::open(dir.path().join("f1")).unwrap();
        let root_on_a_disk = on("/", false);
        // Wherever the temporary directory is, a file there says the same
        // as its directory, by path and by descriptor.
        let here = on(dir.path().to_str().unwrap(), false);
        assert_eq!(on_a_block_device(file.as_raw_fd(), c"", false), here);
        let real = dir.path().join("f1");
        let mut seen = HashMap::new();
        assert_eq!(reaches_a_block_device("f1", &real, &mut seen), here);
        // A name never looked up is not looked up here: it could mean
        // reading the device.
        let absent = dir.path().join("absent");
        assert!(!reaches_a_block_device("absent", &absent, &mut seen));
        // Once known not to be there, judged by its directory, which is
        // remembered.
        std::fs::metadata(&absent).unwrap_err();
        assert_eq!(reaches_a_block_device("absent", &absent, &mut seen), here);
        assert_eq!(seen.get(dir.path()), Some(&here));
        // A `..` on the way is never walked in place.
        assert!(!reaches_a_block_device("x/../f1", &real, &mut seen));
        // Nor a file in a directory on no device.
        assert!(!reaches_a_block_device(
            "status",
            Path::new("/proc/self/status"),
            &mut seen
        ));
        // The root of a machine on a disk is on one.
        if std::fs::read_to_string("/proc/self/mountinfo").is_ok_and(|mounts| {
            mounts
                .lines()
                .any(|m| m.split(' ').nth(4) == Some("/") && m.contains(" - ext4 /dev/"))
        }) {
            assert!(root_on_a_disk);
        }
    }
}
