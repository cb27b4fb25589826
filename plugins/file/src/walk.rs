//! A depth-first walk of a directory tree in name order, without following
//! symbolic links, that stops at a deadline. The `ignore` crate (ripgrep's
//! walker) does the walking: hidden entries and what `.gitignore`, `.ignore`
//! and `.git/info/exclude` files exclude are left out unless asked for.

use std::fs::FileType;
use std::path::PathBuf;
use std::time::Instant;

use ignore::WalkBuilder;

/// What kind of entry a path is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    File,
    Dir,
    Symlink,
    Other,
}

impl Kind {
    fn of(file_type: FileType) -> Self {
        if file_type.is_symlink() {
            Self::Symlink
        } else if file_type.is_dir() {
            Self::Dir
        } else if file_type.is_file() {
            Self::File
        } else {
            Self::Other
        }
    }

    /// The name the tools report.
    pub(crate) fn name(self) -> &'static str {
        match self {
            Self::File => "file",
            Self::Dir => "dir",
            Self::Symlink => "symlink",
            Self::Other => "other",
        }
    }
}

/// One entry found by the walk.
pub(crate) struct Entry {
    /// The path to open: the root joined with `relative`.
    pub(crate) path: PathBuf,
    /// The path relative to the root, `/`-separated.
    pub(crate) relative: String,
    /// The path as tools report it: `relative` when the root is `.`, else
    /// the root joined with it, so it can be passed to another tool as is.
    pub(crate) shown: String,
    pub(crate) kind: Kind,
}

/// Which entries a walk leaves in.
#[derive(Clone, Copy)]
pub(crate) struct Include {
    /// Entries whose names start with `.`.
    pub(crate) hidden: bool,
    /// Entries that `.gitignore`, `.ignore` or `.git/info/exclude` files
    /// exclude.
    pub(crate) ignored: bool,
}

/// Walk settings and state.
pub(crate) struct Walk {
    root: PathBuf,
    walk: ignore::Walk,
    deadline: Option<Instant>,
    /// Directories that could not be read (denied or vanished).
    pub(crate) unreadable: usize,
    /// True when the walk stopped at its deadline.
    pub(crate) timed_out: bool,
}

impl Walk {
    /// A walk of the entries under `root` (not `root` itself), `max_depth`
    /// levels deep (1: the root's entries only). Hidden entries (names that
    /// start with `.`) and ignored ones are skipped, with their contents,
    /// unless included. Ignore files apply from `root`, the directories
    /// below it and those above it, in any directory (not only in a git
    /// repository); the user's global git excludes file is not read. `root`
    /// itself is walked even when ignored, as ripgrep does.
    pub(crate) fn new(root: &str, max_depth: usize, include: Include) -> Self {
        let root = PathBuf::from(root);
        let honour = !include.ignored;
        let walk = WalkBuilder::new(&root)
            .max_depth(Some(max_depth))
            .follow_links(false)
            .hidden(!include.hidden)
            .ignore(honour)
            .git_ignore(honour)
            .git_exclude(honour)
            .git_global(false)
            .require_git(false)
            .sort_by_file_name(|a, b| a.cmp(b))
            .build();
        Self {
            root,
            walk,
            deadline: None,
            unreadable: 0,
            timed_out: false,
        }
    }

    /// Stops the walk when this instant passes.
    pub(crate) fn deadline(mut self, deadline: Instant) -> Self {
        self.deadline = Some(deadline);
        self
    }

    fn shown(&self, relative: &str) -> String {
        let root = self.root.to_string_lossy();
        match root.trim_end_matches('/') {
            "." | "" if root != "/" => relative.to_string(),
            "" => format!("/{relative}"),
            root => format!("{root}/{relative}"),
        }
    }

    fn entry(&self, path: PathBuf, file_type: Option<FileType>) -> Entry {
        let relative = path
            .strip_prefix(&self.root)
            .unwrap_or(&path)
            .components()
            .map(|c| c.as_os_str().to_string_lossy())
            .collect::<Vec<_>>()
            .join("/");
        Entry {
            shown: self.shown(&relative),
            relative,
            kind: file_type.map_or(Kind::Other, Kind::of),
            path,
        }
    }
}

impl Iterator for Walk {
    type Item = Entry;

    fn next(&mut self) -> Option<Entry> {
        loop {
            if let Some(deadline) = self.deadline
                && Instant::now() >= deadline
            {
                self.timed_out = true;
                return None;
            }
            match self.walk.next()? {
                Ok(entry) if entry.depth() == 0 => {}
                Ok(entry) => {
                    let file_type = entry.file_type();
                    return Some(self.entry(entry.into_path(), file_type));
                }
                // A directory that could not be read. An ignore file that
                // could not be parsed is used for what it holds.
                Err(e) if e.is_io() => self.unreadable += 1,
                Err(_) => {}
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::*;

    fn walk(root: &Path, include: Include) -> Vec<String> {
        Walk::new(&root.to_string_lossy(), 10, include)
            .map(|e| format!("{} {}", e.relative, e.kind.name()))
            .collect()
    }

    #[test]
    fn honours_ignore_files_unless_asked_not_to() {
        let dir = std::env::temp_dir().join(format!("plugin-file-walk-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        for (path, content) in [
            (".gitignore", "*.log\n/build/\n!keep.log\n"),
            ("a.log", ""),
            ("keep.log", ""),
            ("build/out.txt", ""),
            ("src/build/kept.txt", ""),
            ("src/.ignore", "generated.rs\n"),
            ("src/generated.rs", ""),
            ("src/main.rs", ""),
            (".hidden/x", ""),
        ] {
            let path = dir.join(path);
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(path, content).unwrap();
        }
        let honoured = walk(
            &dir,
            Include {
                hidden: false,
                ignored: false,
            },
        );
        assert_eq!(
            honoured,
            [
                "keep.log file",
                "src dir",
                "src/build dir",
                "src/build/kept.txt file",
                "src/main.rs file",
            ]
        );
        let everything = walk(
            &dir,
            Include {
                hidden: true,
                ignored: true,
            },
        );
        assert_eq!(everything.len(), 13, "{everything:?}");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
