//! The planner's walk of the grants: every entry is listed (a directory
//! that cannot be listed refuses the command, unless no command could read
//! it either), what `file.deny` matches is masked, and repositories found
//! in writable grants are kept (see [`super::git`]).

use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use super::plan::Mounts;
use super::spec::MOVED;
use super::watch::Watch;
use crate::policy::Profile;

/// Most entries looked at inside the grants to find what `file.deny` masks;
/// past it the command is refused rather than run with a mask missing.
const MAX_ENTRIES: usize = 200_000;

/// A walk of the grants for what to mask or protect.
pub(super) struct Walk<'a> {
    pub(super) profile: &'a Profile,
    pub(super) mounts: &'a mut Mounts,
    /// Told of every directory before it is read.
    pub(super) watch: Option<&'a mut Watch>,
    pub(super) entries: usize,
    /// Denied regular files with more than one name: device and inode.
    pub(super) linked: Vec<(u64, u64)>,
    /// Repositories found in writable grants.
    pub(super) repositories: usize,
    /// The writable grants, symlinks resolved.
    pub(super) writable: Vec<PathBuf>,
    /// Every grant, symlinks resolved: each is walked once, from its own
    /// root.
    pub(super) roots: Vec<PathBuf>,
    /// `terminal.read`, symlinks resolved.
    pub(super) read: Vec<PathBuf>,
}

impl Walk<'_> {
    /// Walks `real` (the grant `written` with symlinks resolved): deny rules
    /// are matched against both spellings, as the file rules would see them.
    pub(super) fn dir(
        &mut self,
        written: &Path,
        real: &Path,
        writable: bool,
    ) -> Result<(), String> {
        if let Some(watch) = self.watch.as_deref_mut() {
            watch.dir(real, written);
        }
        let entries = match std::fs::read_dir(real) {
            Ok(entries) => entries,
            // Listed a moment ago, gone now: what it held is not known.
            Err(e) if matches!(e.raw_os_error(), Some(libc::ENOENT | libc::ENOTDIR)) => {
                return Err(format!("{}: {MOVED} ({e})", real.display()));
            }
            Err(e) if out_of_reach(real, writable, &e) => return Ok(()),
            Err(e) => return Err(unlisted(real, &e)),
        };
        // Listed whole before anything is planned from it.
        let mut listed = Vec::new();
        for entry in entries {
            let entry = entry.map_err(|e| unlisted(real, &e))?;
            let file_type = entry.file_type().map_err(|e| unlisted(real, &e))?;
            listed.push((entry.file_name(), file_type));
        }
        // A git directory other than `.git` (a bare repository, a separate
        // git directory), known by what it holds, as git knows it.
        if writable && real.file_name().is_some_and(|name| name != ".git") && is_git_dir(&listed) {
            self.protect_git(real)?;
        }
        for (name, file_type) in listed {
            self.entries += 1;
            if self.entries > MAX_ENTRIES {
                return Err(format!(
                    "the granted directories hold more than {MAX_ENTRIES} entries, too many to \
                     find every path file.deny masks; grant smaller directories to commands"
                ));
            }
            let real_path = real.join(&name);
            let written_path = written.join(&name);
            // The directory walked is allowed (else it is masked whole, not
            // walked), so only the entry itself needs matching.
            let rules = &self.profile.paths;
            let denied = rules.denies_entry(&real_path).is_some()
                || (written_path != real_path && rules.denies_entry(&written_path).is_some());
            if denied {
                if !file_type.is_symlink() {
                    self.mounts.mask(&real_path);
                }
                if file_type.is_file()
                    && let Ok(meta) = real_path.symlink_metadata()
                    && meta.nlink() > 1
                {
                    self.linked.push((meta.dev(), meta.ino()));
                }
                continue;
            }
            if writable && name == ".git" {
                self.protect_git(&real_path)?;
            }
            if file_type.is_dir() && !self.roots.contains(&real_path) {
                self.dir(&written_path, &real_path, writable)?;
            }
        }
        Ok(())
    }
}

impl Walk<'_> {
    /// Masks every other name in the grants of a denied file with more
    /// than one (a hard link made to read it by another name). Only where
    /// there is such a file: this walk looks at each file's inode.
    pub(super) fn other_names(&mut self) -> Result<(), String> {
        if self.linked.is_empty() {
            return Ok(());
        }
        let mut stack = self.roots.clone();
        let mut seen = 0;
        while let Some(dir) = stack.pop() {
            let entries = std::fs::read_dir(&dir).map_err(|e| unlisted(&dir, &e))?;
            for entry in entries {
                let entry = entry.map_err(|e| unlisted(&dir, &e))?;
                seen += 1;
                if seen > MAX_ENTRIES {
                    return Err(format!(
                        "the granted directories hold more than {MAX_ENTRIES} entries, too \
                         many to find every name of a denied file; grant smaller directories"
                    ));
                }
                let path = entry.path();
                let Ok(meta) = path.symlink_metadata() else {
                    continue;
                };
                if meta.is_dir() && !self.roots.contains(&path) {
                    stack.push(path);
                } else if meta.is_file() && self.linked.contains(&(meta.dev(), meta.ino())) {
                    self.mounts.mask(&path);
                }
            }
        }
        Ok(())
    }
}

/// Whether `listed` are the entries of a git directory: `HEAD`, `objects/`
/// and `refs/`.
fn is_git_dir(listed: &[(std::ffi::OsString, std::fs::FileType)]) -> bool {
    let has = |name: &str, dir: bool| {
        listed
            .iter()
            .any(|(found, kind)| found == name && (!dir || kind.is_dir()))
    };
    has("HEAD", false) && has("objects", true) && has("refs", true)
}

/// Whether the directory `path`, which could not be listed (`error`), is
/// one no command can read or make readable either: in a read-only grant
/// (a mode change there is refused), or, as a user other than root,
/// owned by another user. A directory of toolhost's user in a writable
/// grant is not: a command could have made it unreadable, to hide it from
/// the plan, and make it readable again.
fn out_of_reach(path: &Path, writable: bool, error: &std::io::Error) -> bool {
    if !matches!(error.raw_os_error(), Some(libc::EACCES | libc::EPERM)) {
        return false;
    }
    // SAFETY: geteuid cannot fail.
    let euid = unsafe { libc::geteuid() };
    !writable || (euid != 0 && path.symlink_metadata().is_ok_and(|m| m.uid() != euid))
}

/// Why the command is refused when `dir` of a grant could not be listed.
fn unlisted(dir: &Path, error: &std::io::Error) -> String {
    format!(
        "{} could not be listed ({error}), so what file.deny masks and the repositories to keep \
         in it are not known; commands are refused until it can be: give it back its owner's \
         read and search permission (chmod u+rx), move it to a path shorter than {} bytes, or \
         take it out of the grants",
        crate::escape::escape(&dir.to_string_lossy()),
        libc::PATH_MAX
    )
}
