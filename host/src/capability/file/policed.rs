//! The policed view of `wasi:filesystem`: each path a guest names is
//! resolved and checked before wasmtime-wasi performs the operation, and
//! every refusal is recorded (the imports are in `imports`, `plain` and
//! `pinned`).
//!
//! Preopens alone confine a guest to its granted directories, but cannot carve
//! `.env` or `secrets/**` out of them. Here each descriptor remembers the host
//! path it was opened at; every path a guest names is resolved against it,
//! normalized, checked, and checked again after following symlinks, before
//! wasmtime-wasi (and cap-std beneath it) performs the operation. Directory
//! listings leave denied entries out.

use std::collections::VecDeque;
use std::path::{Component, Path, PathBuf};

use wasmtime::component::{HasData, Resource};
use wasmtime_wasi::filesystem::{Descriptor, WasiFilesystemCtxView};
use wasmtime_wasi::p2::bindings::filesystem::types;
use wasmtime_wasi::p2::bindings::filesystem::types::ErrorCode;

use super::rules::{self as paths, Access, PathRefusal};
use super::state::FileState;
use super::{FileAccess, fd_path};
use crate::capability::sandbox::{CallScope, Capability, Sandbox, WasiRoom};
use crate::contract::CapabilityUse;

/// The filesystem view of a sandbox: wasmtime-wasi's, plus the rules.
pub(super) struct PolicedFs<'a> {
    pub(super) inner: WasiFilesystemCtxView<'a>,
    pub(super) files: &'a mut FileState,
    pub(super) call: &'a mut CallScope,
}

/// Links [`PolicedFs`] as the implementation of `wasi:filesystem`.
pub(super) struct PolicedFsData;

impl HasData for PolicedFsData {
    type Data<'a> = PolicedFs<'a>;
}

pub(super) fn policed_fs(sandbox: &mut Sandbox) -> PolicedFs<'_> {
    let WasiRoom { room, wasi } = sandbox.wasi_room::<FileAccess>();
    PolicedFs {
        inner: WasiFilesystemCtxView {
            ctx: wasi.filesystem(),
            table: room.table,
        },
        files: room.state,
        call: room.call,
    }
}

impl PolicedFs<'_> {
    /// The host path of a directory descriptor: where the directory is now
    /// (renaming one of its ancestors moves it), else where it was opened.
    pub(super) fn dir_path(&self, fd: &Resource<Descriptor>) -> Result<PathBuf, ErrorCode> {
        let opened = self
            .files
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
    /// following a final symlink only when `follow`
    /// (`stat` of a link describes the link itself). Returns the normalised
    /// path and where the kernel really goes (the normalised path when that
    /// does not resolve).
    pub(super) fn check_with(
        &mut self,
        fd: &Resource<Descriptor>,
        path: &str,
        access: Access,
        operation: &'static str,
        follow: bool,
    ) -> Result<(PathBuf, PathBuf), ErrorCode> {
        // The path as the kernel will walk it: `link/..` is the parent of
        // where `link` leads, not the directory `link` is in.
        let dir = self.dir_path(fd)?;
        let written = dir.join(path);
        let target = paths::normalize(&written);
        // Resolved once, beneath the descriptor as wasmtime-wasi would:
        // what is judged is what the operation is done on.
        let Some(real) = beneath(&dir, path, follow) else {
            // Refused by the rules (as not there, when outside the grants),
            // or else by wasmtime-wasi, which keeps paths beneath their
            // descriptor.
            let real = real_path(&written, follow);
            self.check_path(&target, real.as_deref(), access, operation)?;
            return Err(ErrorCode::NotPermitted);
        };
        self.check_path(&target, Some(&real), access, operation)?;
        Ok((target, real))
    }

    /// Checks `target` (the lexically normalised path) and `real`, where
    /// the kernel resolves it to, symlinks and `..` in order.
    pub(super) fn check_path(
        &mut self,
        target: &Path,
        real: Option<&Path>,
        access: Access,
        operation: &'static str,
    ) -> Result<(), ErrorCode> {
        let refusal = self.files.refusal(target, access).or_else(|| {
            // Where the path really leads must be allowed too.
            real.filter(|real| *real != target)
                .and_then(|real| self.files.refusal(real, access))
        });
        self.refuse(target, operation, refusal)
    }

    /// Refuses opening one more descriptor past [`MAX_OPEN`], with the
    /// guest's "too many open files" (`quota`) and an audit record.
    pub(super) fn check_open_quota(&mut self, target: &Path) -> Result<(), ErrorCode> {
        let open = self.files.descriptors.len() + self.files.streams.len();
        if open < MAX_OPEN {
            return Ok(());
        }
        self.record_refused(
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
    pub(super) fn check_carries_nothing_denied(
        &mut self,
        path: &Path,
        operation: &'static str,
    ) -> Result<(), ErrorCode> {
        let Some(rules) = self.files.rules() else {
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

    /// Refuses moving, replacing or removing `paths` when one is, or holds,
    /// one of toolhost's own paths (by name, or the entry named is one of
    /// its files under another name: a hard link, another case).
    pub(super) fn check_moves_nothing_own(
        &mut self,
        paths: &[&Path],
        operation: &'static str,
    ) -> Result<(), ErrorCode> {
        let Some(rules) = self.files.rules() else {
            return Ok(());
        };
        let own = rules.own();
        let held = paths.iter().find_map(|path| {
            let held = own.held_in(path).or_else(|| {
                let meta = std::fs::symlink_metadata(path).ok()?;
                own.by_identity(&meta)
            })?;
            Some(PathRefusal::own(path.to_path_buf(), held))
        });
        let target = paths.first().copied().unwrap_or(Path::new("/"));
        self.refuse(target, operation, held)
    }

    /// Refuses what was opened at `target` when it is one of toolhost's own
    /// files reached under another name (a hard link made before, another
    /// case on a case-insensitive filesystem).
    pub(super) fn check_opened_is_not_own(
        &mut self,
        target: &Path,
        opened: Option<std::fs::Metadata>,
    ) -> Result<(), ErrorCode> {
        let Some(rules) = self.files.rules() else {
            return Ok(());
        };
        let refusal = opened
            .and_then(|meta| rules.own().by_identity(&meta))
            .map(|own| PathRefusal::own(target.to_path_buf(), own));
        self.refuse(target, "open", refusal)
    }

    /// Refuses what was opened at `target` (found at `real`, as `opened`)
    /// when it, or a directory it lies in, is reached by a name
    /// `file.deny` matches: what a denied link leads to, another name of
    /// a denied file with more than one.
    pub(super) fn check_opened_is_not_reached(
        &mut self,
        target: &Path,
        real: Option<&Path>,
        opened: Option<&std::fs::Metadata>,
    ) -> Result<(), ErrorCode> {
        use std::os::unix::fs::MetadataExt;
        let refusal = match self.files.reached() {
            None => None,
            Some(Err(paths::Unsearched::TooMany(max))) => Some(format!(
                "the write grants hold more than {max} entries, too many to find what the \
                 names file.deny matches reach under other names; grant a narrower directory in \
                 file.write (or move large trees such as dependencies out of it)"
            )),
            Some(Err(paths::Unsearched::Unlistable(dir, why))) => Some(format!(
                "{} cannot be looked through ({why}), so what the names file.deny matches \
                 reach under other names cannot be found; give it back its owner's read and \
                 search permission (chmod u+rx)",
                dir.display()
            )),
            Some(Ok(reached)) if reached.is_empty() => None,
            Some(Ok(reached)) => {
                let by = |meta: &std::fs::Metadata| reached.get(&(meta.dev(), meta.ino()));
                let hit = opened.and_then(by).or_else(|| {
                    real.into_iter()
                        .flat_map(Path::ancestors)
                        .skip(1)
                        .find_map(|dir| std::fs::symlink_metadata(dir).ok().as_ref().and_then(by))
                });
                hit.map(|name| {
                    format!(
                        "{}, a name file.deny matches, reaches it (a link to it or to a \
                         directory it is in, or another name of it); a link a command made \
                         there is removed from outside the sandbox",
                        crate::escape::escape(&name.to_string_lossy())
                    )
                })
            }
        };
        let refusal = refusal.map(|why| PathRefusal::Denied {
            path: target.to_path_buf(),
            pattern: format!(
                "{} ({why})",
                self.files
                    .rules()
                    .and_then(|rules| rules.deny_patterns().next())
                    .unwrap_or_default()
            ),
        });
        self.refuse(target, "open", refusal)
    }

    /// Refuses moving `from` to `to` when either is, or holds, a granted
    /// directory: the call's handles to it would follow it to its new name
    /// (or to nowhere), while paths through them are judged by the old one.
    pub(super) fn check_moves_no_grant(
        &mut self,
        from: &[&Path],
        to: &[&Path],
        operation: &'static str,
    ) -> Result<(), ErrorCode> {
        let granted = self.files.preopens.iter().cloned().chain(
            self.files
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
        self.record_refused(
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
    pub(super) fn refuse(
        &mut self,
        target: &Path,
        operation: &'static str,
        refusal: Option<PathRefusal>,
    ) -> Result<(), ErrorCode> {
        match refusal {
            None => Ok(()),
            Some(refusal) => {
                let code = match &refusal {
                    PathRefusal::Denied { .. }
                    | PathRefusal::Own { .. }
                    | PathRefusal::RepositoryMetadata { .. }
                    | PathRefusal::Unplanned { .. }
                    | PathRefusal::OutsideRule { .. } => ErrorCode::Access,
                    PathRefusal::NotGranted {
                        access: Access::Write,
                        ..
                    } if self.files.refusal(target, Access::Read).is_none() => {
                        ErrorCode::NotPermitted
                    }
                    _ => ErrorCode::NoEntry,
                };
                self.record_refused(operation, target, &refusal.to_string());
                Err(code)
            }
        }
    }

    /// Records a refused file operation and why, for the audit line.
    pub(super) fn record_refused(&mut self, operation: &str, path: &Path, reason: &str) {
        self.call.record(CapabilityUse::refused(
            FileAccess::INFO.name,
            format!("{operation} {}", path.display()),
            reason,
        ));
    }
}

/// Where `written` leads, resolved component by component as the kernel
/// does (a symlink before `..` is followed first): canonical if it exists
/// (and `follow`, or it ends in `.` or `..`), else its canonical parent
/// joined with its name. `None` if neither resolves (the operation then
/// fails in the kernel too).
pub(super) fn real_path(written: &Path, follow: bool) -> Option<PathBuf> {
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

/// Where `path` leads from the directory `root`, resolved as cap-std
/// resolves it for wasmtime-wasi: name by name, symlinks followed (the last
/// one only when `follow`), never above `root`. `None` when it would leave
/// `root` (by `..`, an absolute path or symlink, or too many symlinks),
/// which cap-std refuses too.
fn beneath(root: &Path, path: &str, follow: bool) -> Option<PathBuf> {
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
        // Only a link that is followed matters (a final one not followed
        // is the entry itself).
        let is_link = (follow || !pending.is_empty())
            && next
                .symlink_metadata()
                .is_ok_and(|meta| meta.file_type().is_symlink());
        if is_link {
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

/// What an open descriptor refers to.
pub(super) fn descriptor_metadata(descriptor: &Descriptor) -> Option<std::fs::Metadata> {
    match descriptor {
        Descriptor::File(file) => file.file.metadata(),
        Descriptor::Dir(dir) => dir.dir.metadata(),
    }
    .ok()
}

/// The host path an open descriptor really refers to.
pub(super) fn descriptor_path(descriptor: &Descriptor) -> Option<PathBuf> {
    use std::os::fd::AsRawFd;
    let fd = match descriptor {
        Descriptor::File(file) => file.file.as_raw_fd(),
        Descriptor::Dir(dir) => dir.dir.as_raw_fd(),
    };
    fd_path::path_of(fd).ok()
}

/// Most files and directories one instance may hold open at once (listings
/// included): a guest cannot run the host out of descriptors.
const MAX_OPEN: usize = 256;

/// Most entries looked at to find a denied path inside a directory that is
/// renamed or linked.
const MAX_RENAME_ENTRIES: usize = 10_000;

pub(super) fn wants_write(oflags: types::OpenFlags, flags: types::DescriptorFlags) -> bool {
    oflags.intersects(types::OpenFlags::CREATE | types::OpenFlags::TRUNCATE)
        || flags
            .intersects(types::DescriptorFlags::WRITE | types::DescriptorFlags::MUTATE_DIRECTORY)
}
