//! Operations done on what was checked: the directory holding the entry a
//! call acts on is opened by its checked real path, following no symlink,
//! and the operation names only the entry in it. A symlink swapped in
//! between the check and the operation makes the open fail; it never leads
//! the operation elsewhere.

use std::collections::VecDeque;
use std::ffi::CString;
use std::os::fd::{AsRawFd as _, FromRawFd as _};
use std::os::unix::ffi::OsStrExt as _;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use wasmtime::component::Resource;
use wasmtime_wasi::filesystem::Descriptor;
use wasmtime_wasi::p2::bindings::filesystem::types::ErrorCode;

use super::{MAX_SYMLINKS, PolicedFs};

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

/// Where `path` leads from the directory `root`, resolved as cap-std
/// resolves it for wasmtime-wasi: name by name, symlinks followed (the last
/// one only when `follow`), never above `root`. `None` when it would leave
/// `root` (by `..`, an absolute path or symlink, or too many symlinks),
/// which cap-std refuses too.
pub(super) fn beneath(root: &Path, path: &str, follow: bool) -> Option<PathBuf> {
    if path.starts_with('/') {
        return None;
    }
    let names = |text: &str| -> VecDeque<String> {
        text.split('/')
            .filter(|name| !name.is_empty() && *name != ".")
            .map(str::to_string)
            .collect()
    };
    // `file/` and `file/.` name a directory: the name keeps its slash.
    let last = path.rsplit('/').next().unwrap_or_default();
    let trailing = path.contains('/') && matches!(last, "" | ".");
    let follow = follow || trailing;
    let mut pending = names(path);
    let mut at = root.to_path_buf();
    let mut links = 0;
    while let Some(name) = pending.pop_front() {
        if name == ".." {
            if at == root {
                return None;
            }
            if at.is_dir() {
                at.pop();
            } else {
                // Not there, or not a directory: kept, to fail as the
                // kernel fails it.
                at.push("..");
            }
            continue;
        }
        let next = at.join(&name);
        let is_link = next
            .symlink_metadata()
            .is_ok_and(|meta| meta.file_type().is_symlink());
        if is_link && (follow || !pending.is_empty()) {
            links += 1;
            let target = std::fs::read_link(&next).ok()?;
            let target = target.to_str()?;
            if links > MAX_SYMLINKS || target.starts_with('/') {
                return None;
            }
            let mut expanded = names(target);
            expanded.extend(pending);
            pending = expanded;
        } else {
            at = next;
        }
    }
    if trailing {
        at.as_mut_os_string().push("/");
    }
    Some(at)
}
