//! What a name `file.deny` matches reaches under other names: what a denied
//! symbolic link leads to, and the other names of a denied regular file
//! (or of one inside a denied directory) with more than one. Writing
//! through the denied name lands there, so those are denied by identity.

use std::collections::HashSet;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use super::PathRules;

/// Device and inode of files and directories a denied name reaches.
pub type Identities = HashSet<(u64, u64)>;

impl PathRules {
    /// The files and directories, inside the grants, that a name
    /// `file.deny` matches reaches (see the module), looking at no more
    /// than `max_entries` (`Err` past it). Symbolic links are followed
    /// only from denied names.
    pub fn reached_by_denied(&self, max_entries: usize) -> Result<Identities, usize> {
        let mut found = Identities::new();
        if self.deny_patterns.is_empty() {
            return Ok(found);
        }
        let grants: Vec<&Path> = self.grants.iter().map(|(dir, _)| dir.as_path()).collect();
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
            let Ok(entries) = std::fs::read_dir(&dir) else {
                continue;
            };
            for entry in entries.flatten() {
                seen += 1;
                if seen > max_entries {
                    return Err(max_entries);
                }
                let Ok(kind) = entry.file_type() else {
                    continue;
                };
                let path = entry.path();
                let denied = inside_denied || self.denies_entry(&path).is_some();
                if !denied {
                    if kind.is_dir() {
                        stack.push((path, false));
                    }
                    continue;
                }
                if kind.is_symlink() {
                    if let Ok(meta) = std::fs::metadata(&path) {
                        found.insert((meta.dev(), meta.ino()));
                    }
                } else if kind.is_dir() {
                    stack.push((path, true));
                } else if let Ok(meta) = entry.metadata()
                    && meta.is_file()
                    && meta.nlink() > 1
                {
                    found.insert((meta.dev(), meta.ino()));
                }
            }
        }
        Ok(found)
    }
}
