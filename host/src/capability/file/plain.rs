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

use super::policed::{PolicedFs, descriptor_path};
use super::rules as paths;
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
    // Without waiting on a command's lease (see `pinned`).
    let file = super::fd_path::reopen(
        found.as_raw_fd(),
        libc::O_RDONLY | libc::O_NOCTTY | libc::O_NONBLOCK | directory,
    )
    .map_err(|_| Unopened::Elsewhere)?;
    // On the blocking pool, as every file operation (see `pinned`).
    let descriptor = if is_dir {
        Descriptor::Dir(Dir::new(file, dir.perms, OpenMode::READ, false))
    } else {
        Descriptor::File(File::new(file, dir.perms, OpenMode::READ, false))
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

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::*;

    fn dir_at(path: &Path) -> Dir {
        let file = std::fs::File::open(path).unwrap();
        Dir::new(
            file,
            wasmtime_wasi::FsPerms::ReadOnly,
            OpenMode::READ,
            false,
        )
    }

    /// What `open_beneath` made of `path`: `file`, `dir`, an error code it
    /// answers itself, or `elsewhere` (left to the general path).
    fn outcome(dir: &Dir, path: &str, follow: bool, want_dir: bool) -> String {
        match open_beneath(dir, path, follow, want_dir) {
            Ok(Plain {
                descriptor: Descriptor::File(_),
                ..
            }) => "file".into(),
            Ok(Plain {
                descriptor: Descriptor::Dir(_),
                ..
            }) => "dir".into(),
            Err(Unopened::Answer(ErrorCode::NoEntry)) => "NoEntry".into(),
            Err(Unopened::Answer(ErrorCode::NotDirectory)) => "NotDirectory".into(),
            Err(Unopened::Answer(code)) => format!("{code:?}"),
            Err(Unopened::Elsewhere) => "elsewhere".into(),
        }
    }

    #[test]
    fn only_plain_paths_to_regular_files_and_directories_are_opened() {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path().canonicalize().unwrap();
        std::fs::create_dir_all(root.join("a/b")).unwrap();
        std::fs::write(root.join("a/b/f.txt"), "x").unwrap();
        std::os::unix::fs::symlink("a", root.join("to-a")).unwrap();
        std::os::unix::fs::symlink("b/f.txt", root.join("a/to-f")).unwrap();
        let fifo = CString::new(root.join("a/pipe").to_str().unwrap()).unwrap();
        // SAFETY: a valid NUL-terminated path.
        assert_eq!(unsafe { libc::mkfifo(fifo.as_ptr(), 0o600) }, 0);
        let dir = dir_at(&root);
        for (path, follow, want_dir, expected) in [
            ("a/b/f.txt", true, false, "file"),
            ("a/./b/../b/f.txt", true, false, "file"),
            ("a/b", true, true, "dir"),
            ("a/b", false, false, "dir"),
            ("a/b/f.txt", true, true, "NotDirectory"),
            ("a/b/missing", true, false, "NoEntry"),
            ("a/b/f.txt/x", true, false, "NotDirectory"),
            // Links on the way or at the end, followed or not: elsewhere.
            ("to-a/b/f.txt", true, false, "elsewhere"),
            ("to-a/b/f.txt", false, false, "elsewhere"),
            ("a/to-f", true, false, "elsewhere"),
            ("a/to-f", false, false, "elsewhere"),
            ("to-a/missing", true, false, "elsewhere"),
            // A FIFO is never opened (this would wait for a writer).
            ("a/pipe", true, false, "elsewhere"),
            // Nothing above the directory, nor absolute.
            ("..", true, true, "elsewhere"),
            ("a/../../x", true, false, "elsewhere"),
            ("/etc/passwd", true, false, "elsewhere"),
        ] {
            assert_eq!(
                outcome(&dir, path, follow, want_dir),
                expected,
                "{path} follow={follow} want_dir={want_dir}"
            );
        }
        // What was opened knows where it is.
        let Ok(plain) = open_beneath(&dir, "a/./b/f.txt", true, false) else {
            panic!("a/b/f.txt not opened");
        };
        assert_eq!(plain.real, root.join("a/b/f.txt"));
    }
}
