//! The file capability's imports: `impl Capability` for [`FileAccess`], and
//! the `wasi:filesystem` imports of the policed view, each path-taking call
//! checked by [`PolicedFs`] before wasmtime-wasi performs it.

use std::path::Path;

use wasmtime::component::{Linker, Resource};
use wasmtime_wasi::WasiCtxBuilder;
use wasmtime_wasi::filesystem::Descriptor;
use wasmtime_wasi::p2::FsResult;
use wasmtime_wasi::p2::bindings::filesystem::types::{
    ErrorCode, HostDescriptor, HostDirectoryEntryStream,
};
use wasmtime_wasi::p2::bindings::filesystem::{preopens, types};
use wasmtime_wasi::p2::{DynInputStream, DynOutputStream};

use crate::capability::file::policed::{
    PolicedFs, PolicedFsData, descriptor_metadata, descriptor_path, policed_fs, wants_write,
};
use crate::capability::file::reads::FileReads;
use crate::capability::file::{FILE_READ, FILE_WRITE, FileAccess, FileState};
use crate::capability::file::{PathRefusal, rules as paths};
use crate::capability::grants::Grants;
use crate::capability::sandbox::{Capability, CapabilityInfo, Sandbox};
use crate::policy::Access;

impl Capability for FileAccess {
    const INFO: CapabilityInfo = CapabilityInfo {
        name: "file",
        permissions: &[FILE_READ, FILE_WRITE],
        section: Some("file"),
        description: "read (file:read) and write (file:write) in the directories the profile's \
                      file.read and file.write grant, except what file.deny matches",
        each: &[
            "read in the directories the profile's file.read and file.write grant, except what \
             file.deny matches",
            "write in the directories the profile's file.write grants, except what file.deny \
             matches",
        ],
    };
    const REPLACES_WASI: bool = true;
    type State = FileState;

    fn state(grants: &Grants, wasi: &mut WasiCtxBuilder) -> FileState {
        FileState::new(grants, wasi)
    }

    /// A reused instance (a stateful plugin's) looks again at what denied
    /// names reach: a link or hard link made since its last call counts.
    fn begin_call(state: &mut FileState) {
        state.forget_reached();
    }

    /// Adds the policed `wasi:filesystem/{types,preopens}`, replacing
    /// wasmtime-wasi's.
    fn add_to_linker(linker: &mut Linker<Sandbox>) -> wasmtime::Result<()> {
        types::add_to_linker::<Sandbox, PolicedFsData>(linker, policed_fs)?;
        preopens::add_to_linker::<Sandbox, PolicedFsData>(linker, policed_fs)?;
        Ok(())
    }
}

impl preopens::Host for PolicedFs<'_> {
    fn get_directories(&mut self) -> wasmtime::Result<Vec<(Resource<Descriptor>, String)>> {
        let dirs = self.inner.get_directories()?;
        // Preopens come back in the order they were made, which is the order
        // of the host paths the sandbox recorded.
        for ((fd, _), host_path) in dirs.iter().zip(&self.files.preopens) {
            self.files.descriptors.insert(fd.rep(), host_path.clone());
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
        self.metadata(&fd, async |fs, fd| fs.get_flags(fd).await)
            .await
    }

    async fn get_type(&mut self, fd: Resource<Descriptor>) -> FsResult<types::DescriptorType> {
        self.metadata(&fd, async |fs, fd| fs.get_type(fd).await)
            .await
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
        match self.read_now(&fd, len, offset) {
            Some(read) => {
                let bytes = read?;
                let end = bytes.is_empty();
                Ok((bytes, end))
            }
            None => self.inner.read(fd, len, offset).await,
        }
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
        self.files.streams.insert(stream.rep(), dir);
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
        let operation = "create directory";
        let (target, real) = self.check_with(&fd, &path, Access::Write, operation, false)?;
        // What is there already is not made again, whatever it holds
        // (`create_dir_all` of the directory toolhost's configuration is in).
        if real.symlink_metadata().is_ok() {
            return Err(ErrorCode::Exist.into());
        }
        self.check_moves_nothing_own(&[&target, &real], operation)?;
        let pinned = self.pin(&fd, &real, operation)?;
        let done = self
            .inner
            .create_directory_at(pinned.dir(), pinned.name.clone())
            .await;
        self.unpin(pinned);
        done
    }

    async fn stat(&mut self, fd: Resource<Descriptor>) -> FsResult<types::DescriptorStat> {
        self.metadata(&fd, async |fs, fd| fs.stat(fd).await).await
    }

    async fn stat_at(
        &mut self,
        fd: Resource<Descriptor>,
        path_flags: types::PathFlags,
        path: String,
    ) -> FsResult<types::DescriptorStat> {
        self.metadata_at(fd, path_flags, path, async |fs, fd, flags, path| {
            fs.stat_at(fd, flags, path).await
        })
        .await
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
        let (_, real) = self.check_with(&fd, &path, Access::Write, "set times", follow)?;
        let pinned = self.pin(&fd, &real, "set times")?;
        let flags = types::PathFlags::empty();
        let done = self
            .inner
            .set_times_at(pinned.dir(), flags, pinned.name.clone(), atim, mtim)
            .await;
        self.unpin(pinned);
        done
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
        let follow = old_path_flags.contains(types::PathFlags::SYMLINK_FOLLOW);
        let (_, entry) = self.check_with(&fd, &old_path, Access::Write, "link", false)?;
        let (_, leads) = self.check_with(&fd, &old_path, Access::Write, "link", true)?;
        let old_real = if follow { leads } else { entry };
        let (to, to_real) =
            self.check_with(&new_descriptor, &new_path, Access::Write, "link", false)?;
        self.check_moves_nothing_own(&[&to, &to_real], "link")?;
        let from = self.pin(&fd, &old_real, "link")?;
        let into = match self.pin(&new_descriptor, &to_real, "link") {
            Ok(into) => into,
            Err(code) => {
                self.unpin(from);
                return Err(code.into());
            }
        };
        let flags = types::PathFlags::empty();
        let done = self
            .inner
            .link_at(
                from.dir(),
                flags,
                from.name.clone(),
                into.dir(),
                into.name.clone(),
            )
            .await;
        self.unpin(from);
        self.unpin(into);
        done
    }

    async fn open_at(
        &mut self,
        fd: Resource<Descriptor>,
        path_flags: types::PathFlags,
        path: String,
        oflags: types::OpenFlags,
        flags: types::DescriptorFlags,
    ) -> FsResult<Resource<Descriptor>> {
        let follow = path_flags.contains(types::PathFlags::SYMLINK_FOLLOW);
        // What every open is judged against, found before the first.
        self.files.find_reached().await;
        if let Some(opened) = self.open_plain(&fd, &path, follow, oflags, flags)? {
            return Ok(opened);
        }
        let access = if wants_write(oflags, flags) {
            Access::Write
        } else {
            Access::Read
        };
        let (target, real) = self.check_with(&fd, &path, access, "open", follow)?;
        self.check_open_quota(&target)?;
        if oflags.contains(types::OpenFlags::CREATE) && real.symlink_metadata().is_err() {
            self.check_moves_nothing_own(&[&target, &real], "create")?;
            // Nothing is made beneath a directory a denied name reaches
            // (judged again on what is opened, below).
            self.check_opened_is_not_reached(&target, Some(&real), None)?;
        }
        // Truncated only once what was opened is judged.
        let truncate = oflags.contains(types::OpenFlags::TRUNCATE);
        let oflags = [
            types::OpenFlags::CREATE,
            types::OpenFlags::DIRECTORY,
            types::OpenFlags::EXCLUSIVE,
        ]
        .into_iter()
        .filter(|flag| oflags.contains(*flag))
        .fold(types::OpenFlags::empty(), |all, flag| all | flag);
        let flags = if truncate {
            flags | types::DescriptorFlags::WRITE
        } else {
            flags
        };
        let pinned = self.pin(&fd, &real, "open")?;
        let opened = self.open_pinned(&pinned, &target, oflags, flags);
        self.unpin(pinned);
        let opened = opened?;
        // Judge what was opened, not the name: a symlink swapped in between
        // the check and the open leads somewhere the check never saw.
        let real = self.inner.table.get(&opened).ok().and_then(descriptor_path);
        let refusal = match &real {
            Some(real) if *real != target => self.files.refusal(real, access),
            Some(_) => None,
            None => Some(PathRefusal::NotGranted {
                path: target.clone(),
                access,
            }),
        };
        let opened_meta = self
            .inner
            .table
            .get(&opened)
            .ok()
            .and_then(descriptor_metadata);
        let refused = self
            .refuse(&target, "open", refusal)
            .and_then(|()| {
                self.check_opened_is_not_reached(&target, real.as_deref(), opened_meta.as_ref())
            })
            .and_then(|()| self.check_opened_is_not_own(&target, opened_meta));
        let truncated = match refused {
            Ok(()) if truncate => {
                self.inner
                    .set_size(Resource::new_borrow(opened.rep()), 0)
                    .await
            }
            Ok(()) => Ok(()),
            Err(code) => Err(code.into()),
        };
        if let Err(error) = truncated {
            HostDescriptor::drop(&mut self.inner, opened)
                .map_err(wasmtime_wasi::p2::FsError::trap)?;
            return Err(error);
        }
        // Paths under the descriptor, and its listing, are judged where it
        // really is: a directory opened through a symlink lists and opens
        // entries of the directory the symlink leads to.
        self.files
            .descriptors
            .insert(opened.rep(), real.unwrap_or(target));
        Ok(opened)
    }

    fn drop(&mut self, fd: Resource<Descriptor>) -> wasmtime::Result<()> {
        self.files.descriptors.remove(&fd.rep());
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
        let operation = "remove directory";
        let (target, real) = self.check_with(&fd, &path, Access::Write, operation, false)?;
        // What is there already is not made again, whatever it holds
        // (`create_dir_all` of the directory toolhost's configuration is in).
        if real.symlink_metadata().is_ok() {
            return Err(ErrorCode::Exist.into());
        }
        self.check_moves_nothing_own(&[&target, &real], operation)?;
        let pinned = self.pin(&fd, &real, operation)?;
        let done = self
            .inner
            .remove_directory_at(pinned.dir(), pinned.name.clone())
            .await;
        self.unpin(pinned);
        done
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
        self.check_moves_nothing_own(&[&from, &from_real, &to, &to_real], "rename")?;
        let source = self.pin(&fd, &from_real, "rename")?;
        let dest = match self.pin(&new_fd, &to_real, "rename") {
            Ok(dest) => dest,
            Err(code) => {
                self.unpin(source);
                return Err(code.into());
            }
        };
        let done = self
            .inner
            .rename_at(
                source.dir(),
                source.name.clone(),
                dest.dir(),
                dest.name.clone(),
            )
            .await;
        self.unpin(source);
        self.unpin(dest);
        done
    }

    async fn symlink_at(
        &mut self,
        fd: Resource<Descriptor>,
        src_path: String,
        dest_path: String,
    ) -> FsResult<()> {
        let (dest, link) = self.check_with(&fd, &dest_path, Access::Write, "symlink", false)?;
        // Nor a link in the way of an own path: `.toolhost -> elsewhere`
        // would move a missing allowlist where tools write.
        self.check_moves_nothing_own(&[&dest, &link], "symlink")?;
        // Where the link points must be readable: no links into denied
        // places. It points from the directory it really is in.
        let parent = link.parent().unwrap_or(Path::new("/"));
        let pointee_written = parent.join(&src_path);
        let pointee = paths::normalize(&pointee_written);
        let pointee_real = super::policed::real_path(&pointee_written, true);
        self.check_path(&pointee, pointee_real.as_deref(), Access::Read, "symlink")?;
        let pinned = self.pin(&fd, &link, "symlink")?;
        let done = self
            .inner
            .symlink_at(pinned.dir(), src_path, pinned.name.clone())
            .await;
        self.unpin(pinned);
        done
    }

    async fn unlink_file_at(&mut self, fd: Resource<Descriptor>, path: String) -> FsResult<()> {
        let (target, real) = self.check_with(&fd, &path, Access::Write, "unlink", false)?;
        self.check_moves_nothing_own(&[&target, &real], "unlink")?;
        let pinned = self.pin(&fd, &real, "unlink")?;
        let done = self
            .inner
            .unlink_file_at(pinned.dir(), pinned.name.clone())
            .await;
        self.unpin(pinned);
        done
    }

    fn read_via_stream(
        &mut self,
        fd: Resource<Descriptor>,
        offset: types::Filesize,
    ) -> FsResult<Resource<DynInputStream>> {
        let reads: DynInputStream = match self.inner.table.get(&fd)? {
            Descriptor::File(file) => match FileReads::of(file, offset) {
                Some(reads) => Box::new(reads),
                None => return self.inner.read_via_stream(fd, offset),
            },
            Descriptor::Dir(_) => return Err(ErrorCode::IsDirectory.into()),
        };
        Ok(self.inner.table.push(reads)?)
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
        self.metadata(&fd, async |fs, fd| fs.metadata_hash(fd).await)
            .await
    }

    async fn metadata_hash_at(
        &mut self,
        fd: Resource<Descriptor>,
        path_flags: types::PathFlags,
        path: String,
    ) -> FsResult<types::MetadataHashValue> {
        self.metadata_at(fd, path_flags, path, async |fs, fd, flags, path| {
            fs.metadata_hash_at(fd, flags, path).await
        })
        .await
    }
}

impl HostDirectoryEntryStream for PolicedFs<'_> {
    async fn read_directory_entry(
        &mut self,
        stream: Resource<types::DirectoryEntryStream>,
    ) -> FsResult<Option<types::DirectoryEntry>> {
        let dir = self.files.streams.get(&stream.rep()).cloned();
        loop {
            let entry = self
                .inner
                .read_directory_entry(Resource::new_borrow(stream.rep()))
                .await?;
            match (&entry, &dir) {
                (Some(e), Some(dir)) if self.files.is_hidden(&dir.join(&e.name)) => continue,
                _ => return Ok(entry),
            }
        }
    }

    fn drop(&mut self, stream: Resource<types::DirectoryEntryStream>) -> wasmtime::Result<()> {
        self.files.streams.remove(&stream.rep());
        HostDirectoryEntryStream::drop(&mut self.inner, stream)
    }
}
