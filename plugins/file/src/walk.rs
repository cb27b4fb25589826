//! A depth-first walk of a directory tree in name order, without following
//! symbolic links, that stops at a deadline.

use std::fs::{self, FileType};
use std::path::PathBuf;
use std::time::Instant;

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

/// Walk settings and state.
pub(crate) struct Walk {
    root: PathBuf,
    max_depth: usize,
    include_hidden: bool,
    deadline: Option<Instant>,
    /// Directories still to read, with their depth, deepest last.
    pending: Vec<(Entry, usize)>,
    /// Entries read but not yet returned, in reverse order.
    queue: Vec<(Entry, usize)>,
    /// Directories that could not be read (denied or vanished).
    pub(crate) unreadable: usize,
    /// True when the walk stopped at its deadline.
    pub(crate) timed_out: bool,
}

impl Walk {
    /// A walk of the entries under `root` (not `root` itself), `max_depth`
    /// levels deep (1: the root's entries only). Hidden entries (names that
    /// start with `.`) are skipped, with their contents, unless included.
    pub(crate) fn new(root: &str, max_depth: usize, include_hidden: bool) -> Self {
        let root = PathBuf::from(root);
        let start = Entry {
            path: root.clone(),
            relative: String::new(),
            shown: String::new(),
            kind: Kind::Dir,
        };
        Self {
            root,
            max_depth,
            include_hidden,
            deadline: None,
            pending: vec![(start, 0)],
            queue: Vec::new(),
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

    /// Reads one directory and queues its entries in name order.
    fn expand(&mut self, dir: &Entry, depth: usize) {
        let entries = match fs::read_dir(&dir.path) {
            Ok(entries) => entries,
            Err(_) => {
                self.unreadable += 1;
                return;
            }
        };
        let mut children = Vec::new();
        for entry in entries {
            let Ok(entry) = entry else {
                self.unreadable += 1;
                continue;
            };
            let name = entry.file_name().to_string_lossy().into_owned();
            if !self.include_hidden && name.starts_with('.') {
                continue;
            }
            let kind = entry.file_type().map_or(Kind::Other, Kind::of);
            let relative = if dir.relative.is_empty() {
                name
            } else {
                format!("{}/{name}", dir.relative)
            };
            children.push(Entry {
                path: entry.path(),
                shown: self.shown(&relative),
                relative,
                kind,
            });
        }
        children.sort_by(|a, b| b.relative.cmp(&a.relative));
        self.queue
            .extend(children.into_iter().map(|c| (c, depth + 1)));
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
                self.queue.clear();
                self.pending.clear();
                return None;
            }
            if let Some((dir, depth)) = self.pending.pop() {
                self.expand(&dir, depth);
                continue;
            }
            let (entry, depth) = self.queue.pop()?;
            if entry.kind == Kind::Dir && depth < self.max_depth {
                // Its children come right after it: read them before the
                // rest of the queue.
                let stub = Entry {
                    path: entry.path.clone(),
                    relative: entry.relative.clone(),
                    shown: String::new(),
                    kind: Kind::Dir,
                };
                self.pending.push((stub, depth));
            }
            return Some(entry);
        }
    }
}
