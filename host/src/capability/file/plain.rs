//! Read-only opens of paths that lead where they read: resolved by the
//! kernel beneath the guest's directory descriptor with no symbolic link on
//! the way (one `openat2`), so the lexical path the rules judge is the one
//! opened, in a handful of system calls. Anything else (a link on the way, a
//! special file, a missing entry, a rename seen mid-way) is left to the
//! general path of `open_at`, which judges it from scratch.

use std::ffi::CString;
use std::os::fd::{AsRawFd as _, FromRawFd as _, OwnedFd};
use std::path::PathBuf;

use wasmtime::component::Resource;
use wasmtime_wasi::OpenMode;
use wasmtime_wasi::filesystem::{Descriptor, Dir, File};
use wasmtime_wasi::p2::bindings::filesystem::types::{DescriptorFlags, ErrorCode, OpenFlags};

use super::{PolicedFs, descriptor_path, rules as paths};
use crate::policy::Access;

/// What a plain path led to: its descriptor, opened by its kernel-resolved
/// entry, and that entry's metadata.
struct Plain {
    descriptor: Descriptor,
    meta: std::fs::Metadata,
    real: PathBuf,
}

/// `path` beneath `dir` as an `O_PATH` descriptor (which opens nothing),
/// refusing every symbolic link (a final one is the entry itself when not
/// `follow`ed), magic link and escape from `dir` (`..` above it, an
/// absolute path).
fn locate_beneath(dir: &std::fs::File, path: &str, follow: bool) -> std::io::Result<OwnedFd> {
    let path = CString::new(path).map_err(|_| std::io::ErrorKind::InvalidInput)?;
    let nofollow = if follow { 0 } else { libc::O_NOFOLLOW };
    // SAFETY: `open_how` is plain integers, for which zero is valid.
    let mut how: libc::open_how = unsafe { std::mem::zeroed() };
    how.flags = (libc::O_PATH | libc::O_CLOEXEC | nofollow) as u64;
    how.resolve = libc::RESOLVE_BENEATH | libc::RESOLVE_NO_SYMLINKS | libc::RESOLVE_NO_MAGICLINKS;
    // SAFETY: a NUL-terminated path and an `open_how` of the size given.
    let fd = unsafe {
        libc::syscall(
            libc::SYS_openat2,
            dir.as_raw_fd(),
            path.as_ptr(),
            &how as *const libc::open_how,
            size_of::<libc::open_how>(),
        )
    };
    if fd < 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: a descriptor the kernel just opened for us.
    Ok(unsafe { OwnedFd::from_raw_fd(fd as libc::c_int) })
}

/// Why a plain open opened nothing.
enum Unopened {
    /// Not there, or a file on the way, with no link before it: the
    /// general path would fail the same way.
    Answer(ErrorCode),
    /// Anything else: for the general path to judge.
    Elsewhere,
}

/// Opens for reading the regular file or directory `path` leads to beneath
/// `dir` with no link on the way. The entry is found first by an `O_PATH`
/// descriptor and judged by its type, then that very entry is reopened: a
/// FIFO or device is never opened, even one swapped in after the look.
fn open_beneath(dir: &Dir, path: &str, follow: bool, want_dir: bool) -> Result<Plain, Unopened> {
    let found = match locate_beneath(&dir.dir, path, follow) {
        Ok(found) => std::fs::File::from(found),
        // With no symlink allowed, a name is found missing (or under a
        // file) only where no link came before it.
        Err(e) if e.raw_os_error() == Some(libc::ENOENT) => {
            return Err(Unopened::Answer(ErrorCode::NoEntry));
        }
        Err(e) if e.raw_os_error() == Some(libc::ENOTDIR) => {
            return Err(Unopened::Answer(ErrorCode::NotDirectory));
        }
        Err(_) => return Err(Unopened::Elsewhere),
    };
    let meta = found.metadata().map_err(|_| Unopened::Elsewhere)?;
    let is_dir = meta.is_dir();
    if want_dir && meta.is_file() {
        return Err(Unopened::Answer(ErrorCode::NotDirectory));
    }
    if !(meta.is_file() || is_dir) {
        return Err(Unopened::Elsewhere);
    }
    let directory = if is_dir { libc::O_DIRECTORY } else { 0 };
    let file = super::fd_path::reopen(
        found.as_raw_fd(),
        libc::O_RDONLY | libc::O_NOCTTY | directory,
    )
    .map_err(|_| Unopened::Elsewhere)?;
    // Regular files and directories only: an operation on them waits on
    // the disk, never on another party, so it runs on the calling thread.
    let descriptor = if is_dir {
        Descriptor::Dir(Dir::new(file, dir.perms, OpenMode::READ, true))
    } else {
        Descriptor::File(File::new(file, dir.perms, OpenMode::READ, true))
    };
    let real = descriptor_path(&descriptor).ok_or(Unopened::Elsewhere)?;
    Ok(Plain {
        descriptor,
        meta,
        real,
    })
}

impl PolicedFs<'_> {
    /// `open_at` for an open that only reads, when `path` leads with no
    /// symbolic link on the way to a regular file or a directory that is
    /// still where its name says once opened: judged by the rules as
    /// `open_at` judges any path (the name, then what was opened, by path
    /// and by identity). `Ok(None)` leaves the open to the general path.
    pub(super) fn open_plain(
        &mut self,
        fd: &Resource<Descriptor>,
        path: &str,
        follow: bool,
        oflags: OpenFlags,
        flags: DescriptorFlags,
    ) -> Result<Option<Resource<Descriptor>>, ErrorCode> {
        let reads_only = (oflags & !OpenFlags::DIRECTORY) == OpenFlags::empty()
            && (flags & !DescriptorFlags::READ) == DescriptorFlags::empty();
        if !reads_only || path.starts_with('/') {
            return Ok(None);
        }
        // Where the directory was opened: what is opened below is judged
        // again by where it really is, and must be there.
        let dir = self
            .files
            .descriptors
            .get(&fd.rep())
            .ok_or(ErrorCode::BadDescriptor)?;
        let target = paths::normalize(&dir.join(path));
        let refusal = self.files.refusal(&target, Access::Read);
        self.refuse(&target, "open", refusal)?;
        self.check_open_quota(&target)?;
        let Ok(Descriptor::Dir(parent)) = self.inner.table.get(fd) else {
            return Ok(None);
        };
        let want_dir = oflags.contains(OpenFlags::DIRECTORY);
        let plain = match open_beneath(parent, path, follow, want_dir) {
            Ok(plain) => plain,
            Err(Unopened::Answer(code)) => return Err(code),
            Err(Unopened::Elsewhere) => return Ok(None),
        };
        // Moved since its directory was looked up (or reached by another
        // route): the general path judges where it is now.
        if plain.real != target {
            return Ok(None);
        }
        self.check_opened_is_not_reached(&target, Some(&plain.real), Some(&plain.meta))?;
        self.check_opened_is_not_own(&target, Some(plain.meta))?;
        let opened = self
            .inner
            .table
            .push(plain.descriptor)
            .map_err(|_| ErrorCode::Quota)?;
        self.files.descriptors.insert(opened.rep(), target);
        Ok(Some(opened))
    }
}
