//! What a path is opened for, and lexical normalization: the words the
//! path rules and toolhost's own paths share, with no rules of their own.

use std::fmt;
use std::path::{Component, Path, PathBuf};

/// What a path is opened for. `Write` covers reading too.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Access {
    /// Read files and list directories.
    Read,
    /// Create, modify, rename and remove, as well as read.
    Write,
}

impl Access {
    /// `"read"` or `"write"`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Read => "read",
            Self::Write => "write",
        }
    }

    /// True if a grant of `self` permits `wanted`.
    pub fn covers(self, wanted: Access) -> bool {
        self >= wanted
    }
}

impl fmt::Display for Access {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Lexically normalizes a path: drops `.`, resolves `..` against the preceding
/// component and never climbs above `/`. No filesystem access, so symlinks are
/// not resolved; callers canonicalize where a link could lead elsewhere.
///
/// A relative path stays relative and keeps leading `..` components.
pub fn normalize(path: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for component in path.components() {
        match component {
            Component::Prefix(_) | Component::RootDir => out.push(component.as_os_str()),
            Component::CurDir => {}
            Component::ParentDir => match out.components().next_back() {
                Some(Component::Normal(_)) => {
                    out.pop();
                }
                Some(Component::RootDir | Component::Prefix(_)) => {}
                Some(Component::ParentDir | Component::CurDir) | None => out.push(".."),
            },
            Component::Normal(name) => out.push(name),
        }
    }
    if out.as_os_str().is_empty() {
        out.push(".");
    }
    out
}
