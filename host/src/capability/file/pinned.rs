//! Operations done on what was checked: the directory holding the entry a
//! call acts on is opened by its checked real path, following no symlink,
//! and the operation names only the entry in it. A symlink swapped in
//! between the check and the operation makes the open fail; it never leads
//! the operation elsewhere. An entry is opened only once its descriptor
//! says it is a regular file or a directory: a FIFO, socket or device is
//! never opened (that could wait for ever, or reach a driver).

use std::ffi::CString;
use std::os::fd::{AsRawFd as _, FromRawFd as _};
use std::os::unix::ffi::OsStrExt as _;
use std::path::Path;
use std::sync::Arc;

use wasmtime::component::Resource;
use wasmtime_wasi::filesystem::{Descriptor, Dir, File};
use wasmtime_wasi::p2::bindings::filesystem::types::{DescriptorFlags, ErrorCode, OpenFlags};
use wasmtime_wasi::{FsPerms, OpenMode};

use super::policed::PolicedFs;

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
            let now = super::fd_path::path_of(file.as_raw_fd())?;
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

    /// Opens the entry of `pinned` as `open_at` with `oflags` and `flags`
    /// asks (`target` names it for the audit), as wasmtime-wasi would, but
    /// only once the entry's own descriptor (`O_PATH`, opened without
    /// following a symlink) says it is a regular file or a directory, and
    /// by reopening that descriptor: a name swapped to a FIFO after the
    /// look is not what is opened. A file this creates is new (`O_EXCL`).
    pub(super) fn open_pinned(
        &mut self,
        pinned: &Pinned,
        target: &Path,
        oflags: OpenFlags,
        flags: DescriptorFlags,
    ) -> Result<Resource<Descriptor>, ErrorCode> {
        let (dir, perms) = match self.inner.table.get(&pinned.dir()) {
            Ok(Descriptor::Dir(dir)) => (dir.dir.clone(), dir.perms),
            Ok(Descriptor::File(_)) => return Err(ErrorCode::NotDirectory),
            Err(_) => return Err(ErrorCode::BadDescriptor),
        };
        let want = Want::of(oflags, flags, perms)?;
        let opened = match open_entry(dir.as_raw_fd(), &pinned.name, &want) {
            Ok(opened) => opened,
            Err(Refused::Special(kind)) => {
                let reason = format!(
                    "it is {kind}, not a regular file or a directory; file tools open only \
                     those (opening it could wait for ever or reach a device)"
                );
                self.record_refused("open", target, &reason);
                return Err(ErrorCode::Unsupported);
            }
            Err(Refused::Code(code)) => return Err(code),
        };
        // Operations run on the blocking pool, never on a runtime worker:
        // even a regular file can make one wait on another party (a
        // command's file lease holds an open for up to lease-break-time),
        // and a worker waiting would stall other tenants' calls. What
        // cannot wait (metadata, and reads the page cache answers) is done
        // on the calling thread by `on_thread`.
        let descriptor = match opened {
            Entry::File(file) => Descriptor::File(File::new(file, perms, want.mode, false)),
            Entry::Dir(dir) => Descriptor::Dir(Dir::new(dir, perms, want.mode, false)),
        };
        self.inner
            .table
            .push(descriptor)
            .map_err(|_| ErrorCode::Quota)
    }

    /// Lets go of a pinned directory.
    pub(super) fn unpin(&mut self, pinned: Pinned) {
        let _ = self.inner.table.delete(pinned.fd);
    }
}

/// `dir` opened as a directory, refusing every symlink on the way.
fn open_no_symlinks(dir: &Path) -> std::io::Result<std::fs::File> {
    let path = CString::new(dir.as_os_str().as_bytes())?;
    openat2(
        libc::AT_FDCWD,
        &path,
        libc::O_RDONLY | libc::O_DIRECTORY | libc::O_CLOEXEC,
        libc::RESOLVE_NO_SYMLINKS | libc::RESOLVE_NO_MAGICLINKS,
    )
}

/// `path` opened from `dir` with `flags` (a file created `0666` less the
/// umask), resolved as `resolve` says.
pub(super) fn openat2(
    dir: libc::c_int,
    path: &CString,
    flags: libc::c_int,
    resolve: u64,
) -> std::io::Result<std::fs::File> {
    // SAFETY: `open_how` is plain integers, for which zero is valid.
    let mut how: libc::open_how = unsafe { std::mem::zeroed() };
    how.flags = flags as u64;
    if flags & libc::O_CREAT != 0 {
        how.mode = 0o666;
    }
    how.resolve = resolve;
    // SAFETY: a NUL-terminated path and an `open_how` of the size given.
    let fd = unsafe {
        libc::syscall(
            libc::SYS_openat2,
            dir,
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

/// How `open_at` wants an entry opened, as wasmtime-wasi reads its flags.
struct Want {
    create: bool,
    exclusive: bool,
    directory: bool,
    mode: OpenMode,
    /// `O_RDONLY`, `O_WRONLY` or `O_RDWR`.
    access: libc::c_int,
}

impl Want {
    fn of(oflags: OpenFlags, flags: DescriptorFlags, perms: FsPerms) -> Result<Self, ErrorCode> {
        let create = oflags.contains(OpenFlags::CREATE);
        let directory = oflags.contains(OpenFlags::DIRECTORY);
        let exclusive = oflags.contains(OpenFlags::EXCLUSIVE);
        let write = create || flags.contains(DescriptorFlags::WRITE);
        // Not opened to write: opened to read (the guest's flags say what
        // it may do with it).
        let read = flags.contains(DescriptorFlags::READ) || !flags.contains(DescriptorFlags::WRITE);
        if flags.intersects(
            DescriptorFlags::FILE_INTEGRITY_SYNC
                | DescriptorFlags::DATA_INTEGRITY_SYNC
                | DescriptorFlags::REQUESTED_WRITE_SYNC,
        ) {
            return Err(ErrorCode::Unsupported);
        }
        if directory && (create || exclusive) {
            return Err(ErrorCode::Invalid);
        }
        if write && perms.write_not_permitted() {
            return Err(ErrorCode::NotPermitted);
        }
        let mut mode = OpenMode::empty();
        mode.set(OpenMode::READ, read);
        mode.set(OpenMode::WRITE, write);
        let access = match (read, write) {
            (true, true) => libc::O_RDWR,
            (false, true) => libc::O_WRONLY,
            _ => libc::O_RDONLY,
        };
        Ok(Self {
            create,
            exclusive,
            directory,
            mode,
            access,
        })
    }
}

/// What was opened.
enum Entry {
    File(std::fs::File),
    Dir(std::fs::File),
}

/// Why nothing was opened.
enum Refused {
    /// Not a regular file or a directory: what it is.
    Special(&'static str),
    Code(ErrorCode),
}

impl From<std::io::Error> for Refused {
    fn from(error: std::io::Error) -> Self {
        Self::Code(ErrorCode::from(error))
    }
}

/// Times a name that vanishes between being found and created is tried
/// again.
const OPEN_TRIES: usize = 4;

/// Opens `name` in the directory `dir` as `want` says: created new, or
/// else found by an `O_PATH` descriptor (which opens nothing), judged by
/// its type and reopened through it.
fn open_entry(dir: libc::c_int, name: &str, want: &Want) -> Result<Entry, Refused> {
    let name = CString::new(name).map_err(|_| Refused::Code(ErrorCode::IllegalByteSequence))?;
    let flags = want.access | libc::O_CLOEXEC | libc::O_NOCTTY | libc::O_NOFOLLOW;
    for _ in 0..OPEN_TRIES {
        if want.create {
            match openat_beneath(dir, &name, flags | libc::O_CREAT | libc::O_EXCL) {
                Ok(file) => return Ok(Entry::File(file)),
                Err(e) if e.raw_os_error() == Some(libc::EEXIST) && !want.exclusive => {}
                Err(e) => return Err(e.into()),
            }
        }
        let found = match openat_beneath(
            dir,
            &name,
            libc::O_PATH | libc::O_NOFOLLOW | libc::O_CLOEXEC,
        ) {
            Ok(found) => found,
            // Removed since: made again.
            Err(e) if e.raw_os_error() == Some(libc::ENOENT) && want.create => continue,
            Err(e) => return Err(e.into()),
        };
        let kind = found.metadata()?.file_type();
        use std::os::unix::fs::FileTypeExt as _;
        let special = [
            (kind.is_fifo(), "a FIFO (named pipe)"),
            (kind.is_socket(), "a socket"),
            (kind.is_char_device(), "a character device"),
            (kind.is_block_device(), "a block device"),
        ];
        if let Some((_, what)) = special.iter().find(|(is, _)| *is) {
            return Err(Refused::Special(what));
        }
        if kind.is_symlink() {
            // Swapped in since the check: not followed.
            return Err(Refused::Code(ErrorCode::Loop));
        }
        let is_dir = kind.is_dir();
        if want.directory && !is_dir {
            return Err(Refused::Code(ErrorCode::NotDirectory));
        }
        if is_dir && want.access != libc::O_RDONLY {
            return Err(Refused::Code(ErrorCode::IsDirectory));
        }
        // The very file looked at: its descriptor's magic link opens it,
        // whatever its name leads to now. Without waiting: a command's lease
        // on it would hold the open until it gives way (lease-break-time).
        let directory = if is_dir { libc::O_DIRECTORY } else { 0 };
        let file = super::fd_path::reopen(
            found.as_raw_fd(),
            want.access | libc::O_NOCTTY | libc::O_NONBLOCK | directory,
        )?;
        return Ok(if is_dir {
            Entry::Dir(file)
        } else {
            Entry::File(file)
        });
    }
    Err(Refused::Code(ErrorCode::Busy))
}

/// `name` opened with `flags` in the directory `dir`, never above it nor
/// through a symlink.
fn openat_beneath(
    dir: libc::c_int,
    name: &CString,
    flags: libc::c_int,
) -> std::io::Result<std::fs::File> {
    let resolve = libc::RESOLVE_BENEATH | libc::RESOLVE_NO_SYMLINKS | libc::RESOLVE_NO_MAGICLINKS;
    openat2(dir, name, flags, resolve)
}
