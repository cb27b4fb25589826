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
//! - metadata (`stat`, `stat-at`, `metadata-hash[-at]`, `get-type`,
//!   `get-flags`) is read on the calling thread when what it reaches lives
//!   on a filesystem on a block device (ext4 or xfs on a disk): an inode,
//!   with no server to answer. FUSE, NFS, CIFS and every other filesystem on
//!   no device (tmpfs, overlay and btrfs too) go to the pool: a server that
//!   stops answering would hold the worker for good. Which filesystem holds
//!   a descriptor or path is read from what the kernel has cached
//!   (`statx` with `AT_STATX_DONT_SYNC`), asking no filesystem;
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
use std::sync::{Arc, LazyLock};
use std::task::{Context, Poll, Waker};

use bytes::Bytes;
use wasmtime::component::Resource;
use wasmtime_wasi::filesystem::{Descriptor, Dir, File, WasiFilesystemCtxView};
use wasmtime_wasi::p2::bindings::filesystem::types::PathFlags;
use wasmtime_wasi::p2::{FsResult, InputStream, Pollable, StreamError, StreamResult};
use wasmtime_wasi::runtime::{AbortOnDropJoinHandle, spawn_blocking};
use wasmtime_wasi::{FsPerms, OpenMode};

use super::policed::PolicedFs;
use crate::policy::Access;

/// Most bytes one read returns, as wasmtime-wasi's reads.
const MAX_READ: usize = 64 * 1024;

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
fn on_a_block_device(fd: libc::c_int, path: &std::ffi::CStr, nofollow: bool) -> bool {
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

/// True when `real` (where a path the rules checked leads) and the
/// directory it is in live on block devices, and the path walks no `..`
/// (which could step through another filesystem on the way). The directory
/// is looked at first (the look at `real` walks into it), once per call
/// (`seen`). `real` not being there is judged by its directory: the lookup
/// that finds nothing is done there.
fn reaches_a_block_device(
    path: &str,
    real: &Path,
    nofollow: bool,
    seen: &mut HashMap<PathBuf, bool>,
) -> bool {
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
    dir_on
        && c(real).is_some_and(
            |real| match block_device_of(libc::AT_FDCWD, &real, nofollow) {
                Ok(on) => on,
                Err(e) => e.raw_os_error() == Some(libc::ENOENT),
            },
        )
}

/// What a metadata operation reaches besides its descriptor: the path it
/// names, where the rules found it leads, and whether a final symlink is
/// left unfollowed.
struct Reach<'p> {
    path: &'p str,
    real: &'p Path,
    nofollow: bool,
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
                    reaches_a_block_device(
                        r.path,
                        r.real,
                        r.nofollow,
                        &mut self.files.on_block_devices,
                    )
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
            nofollow: !follow,
        };
        let lent = self.lend_for_metadata(&fd, Some(reach));
        let done = op(&mut self.inner, lent.fd(), path_flags, path).await;
        self.give_back(lent);
        done
    }

    /// Reads up to `len` bytes at `offset` of the file `fd` on the calling
    /// thread, if the kernel has them in memory; `None` if it would wait
    /// (or `fd` is not a file on a block device).
    pub(super) fn read_now(
        &mut self,
        fd: &Resource<Descriptor>,
        len: u64,
        offset: u64,
    ) -> Option<io::Result<Vec<u8>>> {
        let Ok(Descriptor::File(file)) = self.inner.table.get(fd) else {
            return None;
        };
        if !on_a_block_device(file.file.as_raw_fd(), c"", false) {
            return None;
        }
        let len = usize::try_from(len).unwrap_or(MAX_READ).min(MAX_READ);
        let mut buffer = Vec::with_capacity(len);
        Some(read_now_into(&file.file, offset, &mut buffer, len)?.map(|()| buffer))
    }
}

/// Reads up to `max` bytes at `offset` into `buffer`'s spare capacity (its
/// length is set to what was read) without waiting: `None` when the kernel
/// would wait for the disk or a lock (`EAGAIN`), or cannot read without
/// waiting (`EOPNOTSUPP`).
fn read_now_into(
    file: &std::fs::File,
    offset: u64,
    buffer: &mut Vec<u8>,
    max: usize,
) -> Option<io::Result<()>> {
    let Ok(offset) = libc::off_t::try_from(offset) else {
        return Some(Err(io::Error::from_raw_os_error(libc::EINVAL)));
    };
    buffer.clear();
    let spare = buffer.spare_capacity_mut();
    let iov = libc::iovec {
        iov_base: spare.as_mut_ptr().cast(),
        iov_len: spare.len().min(max),
    };
    loop {
        // SAFETY: one iovec over `buffer`'s spare capacity, which the kernel
        // writes at most `iov_len` bytes of.
        let read = unsafe { libc::preadv2(file.as_raw_fd(), &iov, 1, offset, libc::RWF_NOWAIT) };
        if let Ok(read) = usize::try_from(read) {
            // SAFETY: the kernel wrote `read <= capacity` bytes.
            unsafe { buffer.set_len(read) };
            return Some(Ok(()));
        }
        let error = io::Error::last_os_error();
        match error.raw_os_error() {
            Some(libc::EINTR) => {}
            Some(libc::EAGAIN | libc::EOPNOTSUPP) => return None,
            _ => return Some(Err(error)),
        }
    }
}

/// Reads at `offset` on the blocking pool, waiting as long as it takes.
fn read_waiting(
    file: Arc<std::fs::File>,
    offset: u64,
    size: usize,
) -> AbortOnDropJoinHandle<io::Result<Bytes>> {
    spawn_blocking(move || {
        let mut buffer = vec![0; size.min(MAX_READ)];
        loop {
            match std::os::unix::fs::FileExt::read_at(&*file, &mut buffer, offset) {
                Ok(read) => {
                    buffer.truncate(read);
                    return Ok(Bytes::from(buffer));
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
    })
}

/// A file's bytes from `position` on, as `read-via-stream` gives them:
/// read on the calling thread when the kernel has them in memory, else on
/// the blocking pool (as wasmtime-wasi's file streams read).
pub(super) struct FileReads {
    file: Arc<std::fs::File>,
    position: u64,
    state: Reading,
    /// What reads on the calling thread go into, kept for the next.
    buffer: Vec<u8>,
}

enum Reading {
    Idle,
    /// A read on the pool.
    Waiting(AbortOnDropJoinHandle<io::Result<Bytes>>),
    Ready(Bytes),
    Failed(io::Error),
    Closed,
}

impl FileReads {
    /// A stream of `file` from `position`, if it is on a block device
    /// (elsewhere wasmtime-wasi's, which reads on the pool, serves).
    pub(super) fn of(file: &File, position: u64) -> Option<Self> {
        on_a_block_device(file.file.as_raw_fd(), c"", false).then(|| Self::new(file, position))
    }

    fn new(file: &File, position: u64) -> Self {
        Self {
            file: file.file.clone(),
            position,
            state: Reading::Idle,
            buffer: Vec::new(),
        }
    }

    /// What a finished read leaves.
    fn settled(read: io::Result<Bytes>) -> Reading {
        match read {
            Ok(bytes) if bytes.is_empty() => Reading::Closed,
            Ok(bytes) => Reading::Ready(bytes),
            Err(error) => Reading::Failed(error),
        }
    }

    /// Starts a read of up to `size` bytes: done at once when the kernel
    /// has them, else begun on the pool.
    fn start(&mut self, size: usize) {
        let size = size.min(MAX_READ);
        self.buffer.reserve(size);
        self.state = match read_now_into(&self.file, self.position, &mut self.buffer, size) {
            Some(read) => Self::settled(read.map(|()| Bytes::copy_from_slice(&self.buffer))),
            None => Reading::Waiting(read_waiting(self.file.clone(), self.position, size)),
        };
    }
}

#[wasmtime_wasi::async_trait]
impl InputStream for FileReads {
    fn read(&mut self, size: usize) -> StreamResult<Bytes> {
        if let Reading::Waiting(task) = &mut self.state {
            // Finished since: take what it read.
            let mut context = Context::from_waker(Waker::noop());
            if let Poll::Ready(read) = std::pin::Pin::new(task).poll(&mut context) {
                self.state = Self::settled(read);
            }
        }
        if let Reading::Idle = self.state {
            if size == 0 {
                return Ok(Bytes::new());
            }
            self.start(size);
        }
        match &mut self.state {
            Reading::Idle | Reading::Waiting(_) => Ok(Bytes::new()),
            Reading::Ready(bytes) => {
                let chunk = bytes.split_to(bytes.len().min(size));
                if bytes.is_empty() {
                    self.state = Reading::Idle;
                }
                self.position += chunk.len() as u64;
                Ok(chunk)
            }
            Reading::Failed(_) => match std::mem::replace(&mut self.state, Reading::Closed) {
                Reading::Failed(error) => Err(StreamError::LastOperationFailed(error.into())),
                _ => unreachable!("the state was just matched"),
            },
            Reading::Closed => Err(StreamError::Closed),
        }
    }

    /// A read begun on the pool is waited for, as wasmtime-wasi's file
    /// streams do: a guest dropping streams mid-read cannot pile up reads.
    async fn cancel(&mut self) {
        if let Reading::Waiting(task) = std::mem::replace(&mut self.state, Reading::Closed) {
            task.cancel().await;
        }
    }
}

#[wasmtime_wasi::async_trait]
impl Pollable for FileReads {
    async fn ready(&mut self) {
        if let Reading::Idle = self.state {
            self.start(MAX_READ);
        }
        if let Reading::Waiting(task) = &mut self.state {
            self.state = Self::settled(task.await);
        }
    }
}

#[cfg(test)]
mod tests {
    use std::io::Write as _;
    use std::os::fd::AsRawFd as _;

    use super::*;

    /// A file of `len` bytes that are not all alike, written through to
    /// the disk.
    fn file_of(dir: &Path, len: usize) -> (std::fs::File, Vec<u8>) {
        let bytes: Vec<u8> = (0..len).map(|i| (i * 7 + i / 251) as u8).collect();
        let path = dir.join(format!("f{len}"));
        let mut file = std::fs::File::create(&path).unwrap();
        file.write_all(&bytes).unwrap();
        file.sync_all().unwrap();
        (std::fs::File::open(&path).unwrap(), bytes)
    }

    /// Lets the kernel forget the file's cached bytes, so a read must wait
    /// for the disk (where the filesystem keeps files on one: not tmpfs).
    fn forget_cached(file: &std::fs::File) {
        // SAFETY: advice on a descriptor we own.
        unsafe { libc::posix_fadvise(file.as_raw_fd(), 0, 0, libc::POSIX_FADV_DONTNEED) };
    }

    /// Everything a stream gives, read as wasmtime-wasi's guests read: a
    /// non-blocking read, and waiting when it gives nothing.
    async fn drain(mut reads: FileReads, size: usize) -> Vec<u8> {
        let mut got = Vec::new();
        loop {
            match reads.read(size) {
                Ok(bytes) if bytes.is_empty() => reads.ready().await,
                Ok(bytes) => got.extend_from_slice(&bytes),
                Err(StreamError::Closed) => return got,
                Err(e) => panic!("read failed: {e:?}"),
            }
        }
    }

    fn descriptor(file: std::fs::File) -> File {
        File::new(file, FsPerms::ReadOnly, OpenMode::READ, false)
    }

    #[tokio::test]
    async fn a_stream_gives_a_files_bytes_whether_cached_or_not() {
        let dir = tempfile::tempdir().unwrap();
        for len in [
            0,
            1,
            4095,
            MAX_READ - 1,
            MAX_READ,
            MAX_READ + 1,
            3 * MAX_READ + 17,
        ] {
            for cached in [true, false] {
                for size in [1, 4096, MAX_READ, 4 * MAX_READ] {
                    let (file, bytes) = file_of(dir.path(), len);
                    if !cached {
                        forget_cached(&file);
                    }
                    let got = drain(FileReads::new(&descriptor(file), 0), size).await;
                    assert!(
                        got == bytes,
                        "{len} bytes (cached: {cached}, reads of {size})"
                    );
                }
            }
        }
        // From an offset, as `read-via-stream` takes one.
        let (file, bytes) = file_of(dir.path(), 100_000);
        let got = drain(FileReads::new(&descriptor(file), 70_000), 4096).await;
        assert_eq!(got, bytes[70_000..]);
    }

    #[tokio::test]
    async fn a_read_the_kernel_would_wait_for_goes_to_the_pool() {
        let dir = tempfile::tempdir().unwrap();
        let (file, bytes) = file_of(dir.path(), 200_000);
        forget_cached(&file);
        let mut probe = [0u8; 16];
        let iov = libc::iovec {
            iov_base: probe.as_mut_ptr().cast(),
            iov_len: probe.len(),
        };
        // SAFETY: one iovec over `probe`.
        let probed = unsafe { libc::preadv2(file.as_raw_fd(), &iov, 1, 0, libc::RWF_NOWAIT) };
        if probed >= 0 {
            // A filesystem whose files are always in memory (tmpfs): nothing
            // here ever waits.
            return;
        }
        let mut reads = FileReads::new(&descriptor(file.try_clone().unwrap()), 0);
        // Not read on this thread: begun on the pool, nothing yet.
        assert!(reads.read(4096).unwrap().is_empty());
        assert!(matches!(reads.state, Reading::Waiting(_)));
        reads.ready().await;
        assert_eq!(reads.read(4096).unwrap(), bytes[..4096]);
        // Now in memory: read on this thread.
        let mut now = Vec::with_capacity(4096);
        assert!(read_now_into(&file, 0, &mut now, 4096).unwrap().is_ok());
        assert_eq!(now, bytes[..4096]);
    }

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
        let (file, _) = file_of(dir.path(), 1);
        let root_on_a_disk = on("/", false);
        // Wherever the temporary directory is, a file there says the same
        // as its directory, by path and by descriptor.
        let here = on(dir.path().to_str().unwrap(), false);
        assert_eq!(on_a_block_device(file.as_raw_fd(), c"", false), here);
        let real = dir.path().join("f1");
        let mut seen = HashMap::new();
        assert_eq!(reaches_a_block_device("f1", &real, true, &mut seen), here);
        // Judged by its directory when not there, which is remembered.
        let absent = dir.path().join("absent");
        assert_eq!(
            reaches_a_block_device("absent", &absent, true, &mut seen),
            here
        );
        assert_eq!(seen.get(dir.path()), Some(&here));
        // A `..` on the way is never walked in place.
        assert!(!reaches_a_block_device("x/../f1", &real, true, &mut seen));
        // Nor a file in a directory on no device.
        assert!(!reaches_a_block_device(
            "status",
            Path::new("/proc/self/status"),
            true,
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

    #[test]
    fn an_offset_past_what_the_kernel_takes_is_an_error() {
        let dir = tempfile::tempdir().unwrap();
        let (file, _) = file_of(dir.path(), 10);
        let mut buffer = Vec::with_capacity(10);
        let read = read_now_into(&file, u64::MAX, &mut buffer, 10).unwrap();
        assert_eq!(read.unwrap_err().raw_os_error(), Some(libc::EINVAL));
    }
}
