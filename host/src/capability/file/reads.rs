//! A file's bytes read on the calling thread when the kernel has them in
//! memory (`preadv2` with `RWF_NOWAIT`), else on the blocking pool: for
//! `descriptor.read` and the streams of `read-via-stream` (see
//! `on_thread` for why, and where).

use std::io;
use std::os::fd::AsRawFd as _;
use std::sync::Arc;
use std::task::{Context, Poll, Waker};

use bytes::Bytes;
use wasmtime::component::Resource;
use wasmtime_wasi::filesystem::{Descriptor, File};
use wasmtime_wasi::p2::{InputStream, Pollable, StreamError, StreamResult};
use wasmtime_wasi::runtime::{AbortOnDropJoinHandle, spawn_blocking};

use super::on_thread::on_a_block_device;
use super::policed::PolicedFs;

/// Most bytes one read returns, as wasmtime-wasi's reads.
const MAX_READ: usize = 64 * 1024;

impl PolicedFs<'_> {
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

    use std::path::Path;

    use wasmtime_wasi::{FsPerms, OpenMode};

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

    /// Whether the first page of `file` is in memory, asked without reading
    /// it: a read with `RWF_NOWAIT` that finds it missing starts reading it,
    /// and a fast disk has it in memory before the next read.
    fn first_page_resident(file: &std::fs::File) -> bool {
        const PAGE: usize = 4096;
        // SAFETY: a read-only map of the first page of a file we own (at
        // least that long), asked about with mincore and unmapped.
        unsafe {
            let map = libc::mmap(
                std::ptr::null_mut(),
                PAGE,
                libc::PROT_READ,
                libc::MAP_SHARED,
                file.as_raw_fd(),
                0,
            );
            assert_ne!(map, libc::MAP_FAILED);
            let mut resident = 0u8;
            assert_eq!(libc::mincore(map, PAGE, &mut resident), 0);
            libc::munmap(map, PAGE);
            resident & 1 == 1
        }
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
        if first_page_resident(&file) {
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

    #[test]
    fn an_offset_past_what_the_kernel_takes_is_an_error() {
        let dir = tempfile::tempdir().unwrap();
        let (file, _) = file_of(dir.path(), 10);
        let mut buffer = Vec::with_capacity(10);
        let read = read_now_into(&file, u64::MAX, &mut buffer, 10).unwrap();
        assert_eq!(read.unwrap_err().raw_os_error(), Some(libc::EINVAL));
    }
}
