//! Operations done on what was checked: the directory holding the entry a
//! call acts on is opened by its checked real path, following no symlink,
//! and the operation names only the entry in it. A symlink swapped in
//! between the check and the operation makes the open fail; it never leads
//! the operation elsewhere.

use std::ffi::CString;
use std::os::fd::{AsRawFd as _, FromRawFd as _};
use std::os::unix::ffi::OsStrExt as _;
use std::path::Path;
use std::sync::Arc;

use wasmtime::component::Resource;
use wasmtime_wasi::filesystem::Descriptor;
use wasmtime_wasi::p2::bindings::filesystem::types::ErrorCode;

use super::PolicedFs;

/// A checked directory, held open as a descriptor of the call's table for
/// the one operation, and the name of the entry in it.
pub(super) struct Pinned {
    fd: Resource<Descriptor>,
    pub(super) name: String,
}

impl Pinned {
    /// The directory, as the operation takes it.
    pub(super) fn dir(&self) -> Resource<Descriptor> {
        Resource::new_borrow(self.fd.rep())
    }
}

impl PolicedFs<'_> {
    /// Opens the directory holding `real` (a path whose directories are
    /// resolved: no symlink, no `..`), with the rights of the guest's
    /// descriptor `like`; `Err` when a symlink now stands on the way or it
    /// is no longer the directory checked.
    pub(super) fn pin(
        &mut self,
        like: &Resource<Descriptor>,
        real: &Path,
        operation: &'static str,
    ) -> Result<Pinned, ErrorCode> {
        let (dir, name) = match (real.parent(), real.file_name()) {
            (Some(dir), Some(name)) => (dir.to_path_buf(), name.to_str()),
            _ => (real.to_path_buf(), Some(".")),
        };
        let mut name = name.ok_or(ErrorCode::IllegalByteSequence)?.to_string();
        if real.as_os_str().as_bytes().ends_with(b"/") {
            name.push('/');
        }
        let opened = open_no_symlinks(&dir).and_then(|file| {
            // Renamed between the check and the open: not what was checked.
            let now = std::fs::read_link(format!("/proc/self/fd/{}", file.as_raw_fd()))?;
            if now == dir {
                Ok(file)
            } else {
                Err(std::io::Error::from_raw_os_error(libc::ESTALE))
            }
        });
        let file = match opened {
            Ok(file) => file,
            Err(e) if e.raw_os_error() == Some(libc::ENOENT) => return Err(ErrorCode::NoEntry),
            Err(e) if e.raw_os_error() == Some(libc::ENOTDIR) => {
                return Err(ErrorCode::NotDirectory);
            }
            Err(e) => {
                let reason = format!(
                    "its directory {} changed while the call was checked ({e}); nothing was done",
                    dir.display()
                );
                self.record_refused(operation, real, &reason);
                return Err(ErrorCode::Access);
            }
        };
        let mut pinned = match self.inner.table.get(like) {
            Ok(Descriptor::Dir(dir)) => dir.clone(),
            Ok(Descriptor::File(_)) => return Err(ErrorCode::NotDirectory),
            Err(_) => return Err(ErrorCode::BadDescriptor),
        };
        pinned.dir = Arc::new(file);
        let fd = self
            .inner
            .table
            .push(Descriptor::Dir(pinned))
            .map_err(|_| ErrorCode::Quota)?;
        Ok(Pinned { fd, name })
    }

    /// Lets go of a pinned directory.
    pub(super) fn unpin(&mut self, pinned: Pinned) {
        let _ = self.inner.table.delete(pinned.fd);
    }
}

/// `dir` opened as a directory, refusing every symlink on the way.
fn open_no_symlinks(dir: &Path) -> std::io::Result<std::fs::File> {
    let path = CString::new(dir.as_os_str().as_bytes())?;
    // SAFETY: `open_how` is plain integers, for which zero is valid.
    let mut how: libc::open_how = unsafe { std::mem::zeroed() };
    how.flags = (libc::O_RDONLY | libc::O_DIRECTORY | libc::O_CLOEXEC) as u64;
    how.resolve = libc::RESOLVE_NO_SYMLINKS | libc::RESOLVE_NO_MAGICLINKS;
    // SAFETY: a NUL-terminated path and an `open_how` of the size given.
    let fd = unsafe {
        libc::syscall(
            libc::SYS_openat2,
            libc::AT_FDCWD,
            path.as_ptr(),
            &how as *const libc::open_how,
            size_of::<libc::open_how>(),
        )
    };
    if fd < 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: a descriptor the kernel just opened for us.
    Ok(unsafe { std::fs::File::from_raw_fd(fd as i32) })
}
