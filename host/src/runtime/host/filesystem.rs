//! `wasi:filesystem/types` with the profile's `file.deny` rules enforced on
//! every path-taking call, delegating the work to wasmtime-wasi.
//!
//! Preopens alone confine a guest to its granted directories, but cannot carve
//! `.env` or `secrets/**` out of them. Here each descriptor remembers the host
//! path it was opened at; every path a guest names is resolved against it,
//! normalized, checked, and checked again after following symlinks, before
//! wasmtime-wasi (and cap-std beneath it) performs the operation. Directory
//! listings leave denied entries out.

use std::path::{Component, Path, PathBuf};

use wasmtime::component::{HasData, Resource};
use wasmtime_wasi::filesystem::{Descriptor, WasiFilesystemCtxView};
use wasmtime_wasi::p2::FsResult;
use wasmtime_wasi::p2::bindings::filesystem::types::{
    ErrorCode, HostDescriptor, HostDirectoryEntryStream,
};
use wasmtime_wasi::p2::bindings::filesystem::{preopens, types};
use wasmtime_wasi::p2::{DynInputStream, DynOutputStream};

use crate::policy::{Access, PathRefusal, paths};
use crate::runtime::sandbox::{FileGrants, Sandbox};

/// The filesystem view of a sandbox: wasmtime-wasi's, plus the rules.
pub(crate) struct PolicedFs<'a> {
    inner: WasiFilesystemCtxView<'a>,
    grants: &'a mut FileGrants,
}

/// Links [`PolicedFs`] as the implementation of `wasi:filesystem`.
pub(crate) struct PolicedFsData;

impl HasData for PolicedFsData {
    type Data<'a> = PolicedFs<'a>;
}

impl Sandbox {
    pub(crate) fn policed_fs(&mut self) -> PolicedFs<'_> {
        let (inner, grants) = self.filesystem_parts();
        PolicedFs { inner, grants }
    }
}

/// Adds the policed `wasi:filesystem/{types,preopens}`, replacing
/// wasmtime-wasi's (the linker must allow shadowing).
pub(crate) fn add_to_linker(
    linker: &mut wasmtime::component::Linker<Sandbox>,
) -> wasmtime::Result<()> {
    types::add_to_linker::<Sandbox, PolicedFsData>(linker, Sandbox::policed_fs)?;
    preopens::add_to_linker::<Sandbox, PolicedFsData>(linker, Sandbox::policed_fs)?;
    Ok(())
}

impl PolicedFs<'_> {
    /// The host path of a directory descriptor: where the directory is now
    /// (renaming one of its ancestors moves it), else where it was opened.
    fn dir_path(&self, fd: &Resource<Descriptor>) -> Result<PathBuf, ErrorCode> {
        let opened = self
            .grants
            .descriptors
            .get(&fd.rep())
            .cloned()
            .ok_or(ErrorCode::BadDescriptor)?;
        let now = self.inner.table.get(fd).ok().and_then(descriptor_path);
        match now {
            // Removed: nothing can be made in it.
            Some(now) if now.as_os_str().as_encoded_bytes().ends_with(b" (deleted)") => {
                Err(ErrorCode::NoEntry)
            }
            Some(now) => Ok(now),
            None => Ok(opened),
        }
    }

    /// Resolves `path` against the descriptor and checks it for `access`,
    /// following a symlink in the last component (most operations do).
    fn check(
        &mut self,
        fd: &Resource<Descriptor>,
        path: &str,
        access: Access,
        operation: &'static str,
    ) -> Result<PathBuf, ErrorCode> {
        Ok(self.check_with(fd, path, access, operation, true)?.0)
    }

    /// [`Self::check`], following a final symlink only when `follow`
    /// (`stat` of a link describes the link itself). Returns the normalised
    /// path and where the kernel really goes (the normalised path when that
    /// does not resolve).
    fn check_with(
        &mut self,
        fd: &Resource<Descriptor>,
        path: &str,
        access: Access,
        operation: &'static str,
        follow: bool,
    ) -> Result<(PathBuf, PathBuf), ErrorCode> {
        // The path as the kernel will walk it: `link/..` is the parent of
        // where `link` leads, not the directory `link` is in.
        let written = self.dir_path(fd)?.join(path);
        let target = paths::normalize(&written);
        self.check_path(&target, &written, access, operation, follow)?;
        let real = real_path(&written, follow).unwrap_or_else(|| target.clone());
        Ok((target, real))
    }

    /// Checks `target` (the lexically normalised path) and where `written`
    /// really leads once the kernel resolves it, symlinks and `..` in order.
    fn check_path(
        &mut self,
        target: &Path,
        written: &Path,
        access: Access,
        operation: &'static str,
        follow: bool,
    ) -> Result<(), ErrorCode> {
        let refusal = self.grants.refusal(target, access).or_else(|| {
            // Where the path really leads must be allowed too.
            let real = real_path(written, follow)?;
            (real != target)
                .then(|| self.grants.refusal(&real, access))
                .flatten()
        });
        self.refuse(target, operation, refusal)
    }

    /// Refuses opening one more descriptor past [`MAX_OPEN`], with the
    /// guest's "too many open files" (`quota`) and an audit record.
    fn check_open_quota(&mut self, target: &Path) -> Result<(), ErrorCode> {
        let open = self.grants.descriptors.len() + self.grants.streams.len();
        if open < MAX_OPEN {
            return Ok(());
        }
        self.grants.record_refused(
            "open",
            target,
            &format!("the call already holds {MAX_OPEN} open files and directories, the most one call may"),
        );
        Err(ErrorCode::Quota)
    }

    /// Refuses moving `path` when it is, or holds, something `file.deny`
    /// matches: under the new name no rule would cover it. (A symlink needs
    /// no such check: paths through it are judged where they lead. A hard
    /// link is to one file, checked as such.)
    fn check_carries_nothing_denied(
        &mut self,
        path: &Path,
        operation: &'static str,
    ) -> Result<(), ErrorCode> {
        let Some(rules) = self.grants.rules() else {
            return Ok(());
        };
        let refusal = match rules.denied_within(path, MAX_RENAME_ENTRIES) {
            Ok(None) => None,
            Ok(Some(pattern)) => Some(PathRefusal::Denied {
                path: path.to_path_buf(),
                pattern: format!("{pattern} (inside what would be given a new name)"),
            }),
            Err(max) => Some(PathRefusal::Denied {
                path: path.to_path_buf(),
                pattern: format!(
                    "{} (more than {max} entries inside, too many to check)",
                    rules.deny_patterns().next().unwrap_or_default()
                ),
            }),
        };
        self.refuse(path, operation, refusal)
    }

    /// Refuses moving `from` to `to` when either is, or holds, a granted
    /// directory: the call's handles to it would follow it to its new name
    /// (or to nowhere), while paths through them are judged by the old one.
    fn check_moves_no_grant(
        &mut self,
        from: &[&Path],
        to: &[&Path],
        operation: &'static str,
    ) -> Result<(), ErrorCode> {
        let granted = self.grants.preopens.iter().cloned().chain(
            self.grants
                .rules()
                .into_iter()
                .flat_map(|rules| rules.grants().map(|(dir, _)| dir.to_path_buf())),
        );
        let mut held = None;
        for dir in granted {
            if let Some(path) = from.iter().chain(to).find(|path| dir.starts_with(path)) {
                held = Some((path.to_path_buf(), dir));
                break;
            }
        }
        let Some((path, dir)) = held else {
            return Ok(());
        };
        self.grants.record_refused(
            operation,
            &path,
            &format!(
                "it is or holds the granted directory {}, which keeps its name in the profile",
                dir.display()
            ),
        );
        Err(ErrorCode::Access)
    }

    /// `Err` with the guest's error code for `refusal` (recorded for the
    /// audit), `Ok` when there is none.
    fn refuse(
        &mut self,
        target: &Path,
        operation: &'static str,
        refusal: Option<PathRefusal>,
    ) -> Result<(), ErrorCode> {
        match refusal {
            None => Ok(()),
            Some(refusal) => {
                let code = match &refusal {
                    PathRefusal::Denied { .. } => ErrorCode::Access,
                    PathRefusal::NotGranted {
                        access: Access::Write,
                        ..
                    } if self.grants.refusal(target, Access::Read).is_none() => {
                        ErrorCode::NotPermitted
                    }
                    _ => ErrorCode::NoEntry,
                };
                self.grants.record_refusal(operation, target, &refusal);
                Err(code)
            }
        }
    }
}

/// Where `written` leads, resolved component by component as the kernel
/// does (a symlink before `..` is followed first): canonical if it exists
/// (and `follow`, or it ends in `.` or `..`), else its canonical parent
/// joined with its name. `None` if neither resolves (the operation then
/// fails in the kernel too).
fn real_path(written: &Path, follow: bool) -> Option<PathBuf> {
    real_path_within(written, follow, MAX_SYMLINKS)
}

/// Most symlinks followed in a path, as the kernel's `ELOOP` limit.
const MAX_SYMLINKS: usize = 40;

fn real_path_within(written: &Path, follow: bool, links_left: usize) -> Option<PathBuf> {
    let names_entry = matches!(written.components().next_back(), Some(Component::Normal(_)));
    if (follow || !names_entry)
        && let Ok(real) = std::fs::canonicalize(written)
    {
        return Some(real);
    }
    if !names_entry {
        return None;
    }
    let parent = std::fs::canonicalize(written.parent()?).ok()?;
    let entry = parent.join(written.file_name()?);
    // A dangling symlink, followed: creating through it makes its target.
    if follow && let Ok(target) = std::fs::read_link(&entry) {
        return real_path_within(&parent.join(target), follow, links_left.checked_sub(1)?);
    }
    Some(entry)
}

/// The host path an open descriptor really refers to.
fn descriptor_path(descriptor: &Descriptor) -> Option<PathBuf> {
    use std::os::fd::AsRawFd;
    let fd = match descriptor {
        Descriptor::File(file) => file.file.as_raw_fd(),
        Descriptor::Dir(dir) => dir.dir.as_raw_fd(),
    };
    std::fs::read_link(format!("/proc/self/fd/{fd}")).ok()
}

/// Most files and directories one instance may hold open at once (listings
/// included): a guest cannot run the host out of descriptors.
pub(crate) const MAX_OPEN: usize = 256;

/// Most entries looked at to find a denied path inside a directory that is
/// renamed or linked.
const MAX_RENAME_ENTRIES: usize = 10_000;

fn wants_write(oflags: types::OpenFlags, flags: types::DescriptorFlags) -> bool {
    oflags.intersects(types::OpenFlags::CREATE | types::OpenFlags::TRUNCATE)
        || flags
            .intersects(types::DescriptorFlags::WRITE | types::DescriptorFlags::MUTATE_DIRECTORY)
}

impl preopens::Host for PolicedFs<'_> {
    fn get_directories(&mut self) -> wasmtime::Result<Vec<(Resource<Descriptor>, String)>> {
        let dirs = self.inner.get_directories()?;
        // Preopens come back in the order they were made, which is the order
        // of the host paths the sandbox recorded.
        for ((fd, _), host_path) in dirs.iter().zip(&self.grants.preopens) {
            self.grants.descriptors.insert(fd.rep(), host_path.clone());
        }
        Ok(dirs)
    }
}

impl types::Host for PolicedFs<'_> {
    fn convert_error_code(
        &mut self,
        err: wasmtime_wasi::p2::FsError,
    ) -> wasmtime::Result<ErrorCode> {
        types::Host::convert_error_code(&mut self.inner, err)
    }

    fn filesystem_error_code(
        &mut self,
        err: Resource<wasmtime::Error>,
    ) -> wasmtime::Result<Option<ErrorCode>> {
        types::Host::filesystem_error_code(&mut self.inner, err)
    }
}

impl HostDescriptor for PolicedFs<'_> {
    async fn advise(
        &mut self,
        fd: Resource<Descriptor>,
        offset: types::Filesize,
        len: types::Filesize,
        advice: types::Advice,
    ) -> FsResult<()> {
        self.inner.advise(fd, offset, len, advice).await
    }

    async fn sync_data(&mut self, fd: Resource<Descriptor>) -> FsResult<()> {
        self.inner.sync_data(fd).await
    }

    async fn get_flags(&mut self, fd: Resource<Descriptor>) -> FsResult<types::DescriptorFlags> {
        self.inner.get_flags(fd).await
    }

    async fn get_type(&mut self, fd: Resource<Descriptor>) -> FsResult<types::DescriptorType> {
        self.inner.get_type(fd).await
    }

    async fn set_size(&mut self, fd: Resource<Descriptor>, size: types::Filesize) -> FsResult<()> {
        self.inner.set_size(fd, size).await
    }

    async fn set_times(
        &mut self,
        fd: Resource<Descriptor>,
        atim: types::NewTimestamp,
        mtim: types::NewTimestamp,
    ) -> FsResult<()> {
        self.inner.set_times(fd, atim, mtim).await
    }

    async fn read(
        &mut self,
        fd: Resource<Descriptor>,
        len: types::Filesize,
        offset: types::Filesize,
    ) -> FsResult<(Vec<u8>, bool)> {
        self.inner.read(fd, len, offset).await
    }

    async fn write(
        &mut self,
        fd: Resource<Descriptor>,
        buf: Vec<u8>,
        offset: types::Filesize,
    ) -> FsResult<types::Filesize> {
        self.inner.write(fd, buf, offset).await
    }

    async fn read_directory(
        &mut self,
        fd: Resource<Descriptor>,
    ) -> FsResult<Resource<types::DirectoryEntryStream>> {
        let dir = self.dir_path(&fd)?;
        self.check_open_quota(&dir)?;
        let stream = self.inner.read_directory(fd).await?;
        self.grants.streams.insert(stream.rep(), dir);
        Ok(stream)
    }

    async fn sync(&mut self, fd: Resource<Descriptor>) -> FsResult<()> {
        self.inner.sync(fd).await
    }

    async fn create_directory_at(
        &mut self,
        fd: Resource<Descriptor>,
        path: String,
    ) -> FsResult<()> {
        self.check(&fd, &path, Access::Write, "create directory")?;
        self.inner.create_directory_at(fd, path).await
    }

    async fn stat(&mut self, fd: Resource<Descriptor>) -> FsResult<types::DescriptorStat> {
        self.inner.stat(fd).await
    }

    async fn stat_at(
        &mut self,
        fd: Resource<Descriptor>,
        path_flags: types::PathFlags,
        path: String,
    ) -> FsResult<types::DescriptorStat> {
        let follow = path_flags.contains(types::PathFlags::SYMLINK_FOLLOW);
        self.check_with(&fd, &path, Access::Read, "stat", follow)?;
        self.inner.stat_at(fd, path_flags, path).await
    }

    async fn set_times_at(
        &mut self,
        fd: Resource<Descriptor>,
        path_flags: types::PathFlags,
        path: String,
        atim: types::NewTimestamp,
        mtim: types::NewTimestamp,
    ) -> FsResult<()> {
        let follow = path_flags.contains(types::PathFlags::SYMLINK_FOLLOW);
        self.check_with(&fd, &path, Access::Write, "set times", follow)?;
        self.inner
            .set_times_at(fd, path_flags, path, atim, mtim)
            .await
    }

    async fn link_at(
        &mut self,
        fd: Resource<Descriptor>,
        old_path_flags: types::PathFlags,
        old_path: String,
        new_descriptor: Resource<Descriptor>,
        new_path: String,
    ) -> FsResult<()> {
        // A hard link to a file makes it reachable under the new name, so the
        // file itself must be writable and not denied: the entry linked (a
        // symlink is linked itself), and where it leads.
        self.check_with(&fd, &old_path, Access::Write, "link", false)?;
        self.check(&fd, &old_path, Access::Write, "link")?;
        self.check_with(&new_descriptor, &new_path, Access::Write, "link", false)?;
        self.inner
            .link_at(fd, old_path_flags, old_path, new_descriptor, new_path)
            .await
    }

    async fn open_at(
        &mut self,
        fd: Resource<Descriptor>,
        path_flags: types::PathFlags,
        path: String,
        oflags: types::OpenFlags,
        flags: types::DescriptorFlags,
    ) -> FsResult<Resource<Descriptor>> {
        let access = if wants_write(oflags, flags) {
            Access::Write
        } else {
            Access::Read
        };
        let follow = path_flags.contains(types::PathFlags::SYMLINK_FOLLOW);
        let (target, _) = self.check_with(&fd, &path, access, "open", follow)?;
        self.check_open_quota(&target)?;
        let opened = self
            .inner
            .open_at(fd, path_flags, path, oflags, flags)
            .await?;
        // Judge what was opened, not the name: a symlink swapped in between
        // the check and the open leads somewhere the check never saw.
        let real = self.inner.table.get(&opened).ok().and_then(descriptor_path);
        let refusal = match &real {
            Some(real) if *real != target => self.grants.refusal(real, access),
            Some(_) => None,
            None => Some(PathRefusal::NotGranted {
                path: target.clone(),
                access,
            }),
        };
        if let Err(code) = self.refuse(&target, "open", refusal) {
            HostDescriptor::drop(&mut self.inner, opened)
                .map_err(wasmtime_wasi::p2::FsError::trap)?;
            return Err(code.into());
        }
        // Paths under the descriptor, and its listing, are judged where it
        // really is: a directory opened through a symlink lists and opens
        // entries of the directory the symlink leads to.
        self.grants
            .descriptors
            .insert(opened.rep(), real.unwrap_or(target));
        Ok(opened)
    }

    fn drop(&mut self, fd: Resource<Descriptor>) -> wasmtime::Result<()> {
        self.grants.descriptors.remove(&fd.rep());
        HostDescriptor::drop(&mut self.inner, fd)
    }

    async fn readlink_at(&mut self, fd: Resource<Descriptor>, path: String) -> FsResult<String> {
        self.check_with(&fd, &path, Access::Read, "readlink", false)?;
        self.inner.readlink_at(fd, path).await
    }

    async fn remove_directory_at(
        &mut self,
        fd: Resource<Descriptor>,
        path: String,
    ) -> FsResult<()> {
        self.check(&fd, &path, Access::Write, "remove directory")?;
        self.inner.remove_directory_at(fd, path).await
    }

    async fn rename_at(
        &mut self,
        fd: Resource<Descriptor>,
        old_path: String,
        new_fd: Resource<Descriptor>,
        new_path: String,
    ) -> FsResult<()> {
        let (from, from_real) = self.check_with(&fd, &old_path, Access::Write, "rename", false)?;
        // The destination is replaced, not followed: a symlink there is
        // judged as itself.
        let (to, to_real) = self.check_with(&new_fd, &new_path, Access::Write, "rename", false)?;
        // What moves is what the kernel finds, which may not be the
        // directory the name as written suggests.
        self.check_carries_nothing_denied(&from, "rename")?;
        if from_real != from {
            self.check_carries_nothing_denied(&from_real, "rename")?;
        }
        self.check_moves_no_grant(&[&from, &from_real], &[&to, &to_real], "rename")?;
        self.inner.rename_at(fd, old_path, new_fd, new_path).await
    }

    async fn symlink_at(
        &mut self,
        fd: Resource<Descriptor>,
        src_path: String,
        dest_path: String,
    ) -> FsResult<()> {
        let (_, link) = self.check_with(&fd, &dest_path, Access::Write, "symlink", false)?;
        // Where the link points must be readable: no links into denied
        // places. It points from the directory it really is in.
        let parent = link.parent().unwrap_or(Path::new("/"));
        let pointee_written = parent.join(&src_path);
        let pointee = paths::normalize(&pointee_written);
        self.check_path(&pointee, &pointee_written, Access::Read, "symlink", true)?;
        self.inner.symlink_at(fd, src_path, dest_path).await
    }

    async fn unlink_file_at(&mut self, fd: Resource<Descriptor>, path: String) -> FsResult<()> {
        self.check_with(&fd, &path, Access::Write, "unlink", false)?;
        self.inner.unlink_file_at(fd, path).await
    }

    fn read_via_stream(
        &mut self,
        fd: Resource<Descriptor>,
        offset: types::Filesize,
    ) -> FsResult<Resource<DynInputStream>> {
        self.inner.read_via_stream(fd, offset)
    }

    fn write_via_stream(
        &mut self,
        fd: Resource<Descriptor>,
        offset: types::Filesize,
    ) -> FsResult<Resource<DynOutputStream>> {
        self.inner.write_via_stream(fd, offset)
    }

    fn append_via_stream(
        &mut self,
        fd: Resource<Descriptor>,
    ) -> FsResult<Resource<DynOutputStream>> {
        self.inner.append_via_stream(fd)
    }

    async fn is_same_object(
        &mut self,
        a: Resource<Descriptor>,
        b: Resource<Descriptor>,
    ) -> wasmtime::Result<bool> {
        self.inner.is_same_object(a, b).await
    }

    async fn metadata_hash(
        &mut self,
        fd: Resource<Descriptor>,
    ) -> FsResult<types::MetadataHashValue> {
        self.inner.metadata_hash(fd).await
    }

    async fn metadata_hash_at(
        &mut self,
        fd: Resource<Descriptor>,
        path_flags: types::PathFlags,
        path: String,
    ) -> FsResult<types::MetadataHashValue> {
        let follow = path_flags.contains(types::PathFlags::SYMLINK_FOLLOW);
        self.check_with(&fd, &path, Access::Read, "stat", follow)?;
        self.inner.metadata_hash_at(fd, path_flags, path).await
    }
}

impl HostDirectoryEntryStream for PolicedFs<'_> {
    async fn read_directory_entry(
        &mut self,
        stream: Resource<types::DirectoryEntryStream>,
    ) -> FsResult<Option<types::DirectoryEntry>> {
        let dir = self.grants.streams.get(&stream.rep()).cloned();
        loop {
            let entry = self
                .inner
                .read_directory_entry(Resource::new_borrow(stream.rep()))
                .await?;
            match (&entry, &dir) {
                (Some(e), Some(dir)) if self.grants.is_hidden(&dir.join(&e.name)) => continue,
                _ => return Ok(entry),
            }
        }
    }

    fn drop(&mut self, stream: Resource<types::DirectoryEntryStream>) -> wasmtime::Result<()> {
        self.grants.streams.remove(&stream.rep());
        HostDirectoryEntryStream::drop(&mut self.inner, stream)
    }
}
