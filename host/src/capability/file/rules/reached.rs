//! What a name `file.deny` matches reaches under other names: what a denied
//! symbolic link leads to, and the other names of a denied regular file
//! (or of one inside a denied directory) with more than one. Writing
//! through the denied name lands there, so those are denied by identity.

use std::collections::HashMap;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use super::PathRules;

/// Device and inode of files and directories a denied name reaches, each
/// with a denied name that reaches it (for the refusal).
pub type Identities = HashMap<(u64, u64), PathBuf>;

/// Why the write grants could not be searched whole.
#[derive(Debug, PartialEq, Eq)]
pub enum Unsearched {
    /// More entries than the budget.
    TooMany(usize),
    /// A directory that can be entered (by name) but not listed.
    Unlistable(PathBuf, String),
}

/// Whether toolhost's user can enter `dir` (search permission).
fn searchable(dir: &Path) -> bool {
    use std::os::unix::ffi::OsStrExt;
    let Ok(path) = std::ffi::CString::new(dir.as_os_str().as_bytes()) else {
        return false;
    };
    // SAFETY: `path` is a valid NUL-terminated string.
    unsafe { libc::faccessat(libc::AT_FDCWD, path.as_ptr(), libc::X_OK, libc::AT_EACCESS) == 0 }
}

/// Whether `dir` belongs to toolhost's user (whose commands may change
/// its mode back and forth).
fn ours(dir: &Path) -> bool {
    use std::os::unix::fs::MetadataExt as _;
    // SAFETY: geteuid cannot fail.
    let me = unsafe { libc::geteuid() };
    dir.symlink_metadata().is_ok_and(|meta| meta.uid() == me)
}

impl PathRules {
    /// The files and directories that a name `file.deny` matches inside
    /// the write grants (where links can be made) reaches (see the module),
    /// looking at no more than `max_entries` (`Err` past it). Symbolic
    /// links are followed only from denied names.
    pub fn reached_by_denied(&self, max_entries: usize) -> Result<Identities, Unsearched> {
        let mut found = Identities::new();
        if self.deny_patterns.is_empty() {
            return Ok(found);
        }
        // Where links can be made: a read-only grant holds the owner's.
        let grants: Vec<&Path> = self
            .grants
            .iter()
            .filter(|(_, access)| *access == super::Access::Write)
            .map(|(dir, _)| dir.as_path())
            .collect();
        let mut stack: Vec<(PathBuf, bool)> = grants
            .iter()
            .filter(|dir| {
                !grants
                    .iter()
                    .any(|other| other != *dir && dir.starts_with(other))
            })
            .map(|dir| (dir.to_path_buf(), false))
            .collect();
        let mut seen = 0;
        while let Some((dir, inside_denied)) = stack.pop() {
            let listed = std::fs::read_dir(&dir).or_else(|e| {
                // One of toolhost's user's a command made unlistable is
                // given back (see `give_back_own_dir`).
                if e.raw_os_error() == Some(libc::EACCES)
                    && crate::capability::file::fd_path::give_back_own_dir(&dir).unwrap_or(false)
                {
                    std::fs::read_dir(&dir)
                } else {
                    Err(e)
                }
            });
            let entries = match listed {
                Ok(entries) => entries,
                // Another user's directory toolhost's user cannot enter
                // either hides nothing a command could have reached (one of
                // its own, a command may have closed after linking out).
                Err(_) if !searchable(&dir) && !ours(&dir) => continue,
                Err(e) => return Err(Unsearched::Unlistable(dir, e.to_string())),
            };
            for entry in entries {
                let entry =
                    entry.map_err(|e| Unsearched::Unlistable(dir.clone(), e.to_string()))?;
                seen += 1;
                if seen > max_entries {
                    return Err(Unsearched::TooMany(max_entries));
                }
                let kind = entry
                    .file_type()
                    .map_err(|e| Unsearched::Unlistable(dir.clone(), e.to_string()))?;
                let path = entry.path();
                let denied = inside_denied || self.denies_entry(&path).is_some();
                if !denied {
                    if kind.is_dir() {
                        stack.push((path, false));
                    }
                    continue;
                }
                // A denied entry that cannot be looked at (its directory
                // listable but not searchable) refuses: what it reaches
                // cannot be told.
                let unseen = |e: std::io::Error| Unsearched::Unlistable(dir.clone(), e.to_string());
                if kind.is_symlink() {
                    match std::fs::metadata(&path) {
                        Ok(meta) => {
                            found.insert((meta.dev(), meta.ino()), path.clone());
                        }
                        // A directory on the way a command may open again.
                        Err(e) if e.kind() == std::io::ErrorKind::PermissionDenied => {
                            return Err(unseen(e));
                        }
                        // Leads nowhere (yet), or nowhere the kernel follows
                        // (a loop, a file on the way): nothing is reached
                        // through it, by the owner either.
                        Err(_) => {}
                    }
                } else if kind.is_dir() {
                    stack.push((path, true));
                } else {
                    let meta = entry.metadata().map_err(unseen)?;
                    if meta.is_file() && meta.nlink() > 1 {
                        found.insert((meta.dev(), meta.ino()), path.clone());
                    }
                }
            }
        }
        Ok(found)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn denied_links_and_other_names_are_found_in_write_grants_only() {
        let dir = tempfile::tempdir().unwrap();
        let w = dir.path().canonicalize().unwrap();
        let identity = |path: &Path| {
            let meta = std::fs::metadata(path).unwrap();
            (meta.dev(), meta.ino())
        };
        std::fs::create_dir_all(w.join("secrets/deep")).unwrap();
        std::fs::create_dir_all(w.join("notes")).unwrap();
        std::fs::write(w.join("env.local"), "x").unwrap();
        std::fs::write(w.join("plain"), "x").unwrap();
        std::os::unix::fs::symlink("env.local", w.join(".env")).unwrap();
        std::fs::write(w.join("secrets/deep/k"), "x").unwrap();
        std::fs::hard_link(w.join("secrets/deep/k"), w.join("notes/k")).unwrap();
        std::os::unix::fs::symlink("../../notes", w.join("secrets/deep/to-notes")).unwrap();
        let deny = ["**/.env", "**/secrets/**"];
        let rules = PathRules::new([&w], [&w], deny).unwrap();
        let reached = rules.reached_by_denied(1000).unwrap();
        for path in ["env.local", "notes/k", "notes"] {
            assert!(reached.contains_key(&identity(&w.join(path))), "{path}");
        }
        assert!(!reached.contains_key(&identity(&w.join("plain"))));
        assert_eq!(rules.reached_by_denied(3), Err(Unsearched::TooMany(3)));
        let read_only = PathRules::new([&w], Vec::<&Path>::new(), deny).unwrap();
        assert_eq!(read_only.reached_by_denied(1000), Ok(Identities::new()));
    }
}
