//! The intended policy: grants, `file.deny` globs, and the preopened
//! directories the guest sees.

use std::path::{Path, PathBuf};

use toolhost::policy::normalize;

use super::inputs::Case;

/// A `file.deny` glob of [`DENY_GLOBS`](super::DENY_GLOBS), as the model reads it.
#[derive(Debug, Clone)]
pub(super) enum Deny {
    /// `dir/**`: the directory and everything in it.
    Under(PathBuf),
    /// `**/name`: any entry with that name.
    Name(String),
    /// `dir/*suffix`: entries of `dir` whose name ends so.
    ChildSuffix(PathBuf, String),
    /// `**/*suffix`
    AnySuffix(String),
}

impl Deny {
    fn parse(glob: &str, workspace: &Path) -> Self {
        if let Some(name) = glob.strip_prefix("**/") {
            return match name.strip_prefix('*') {
                Some(suffix) => Self::AnySuffix(suffix.to_owned()),
                None => Self::Name(name.to_owned()),
            };
        }
        if let Some(dir) = glob.strip_suffix("/**") {
            return Self::Under(workspace.join(dir));
        }
        let (dir, name) = glob.rsplit_once('/').unwrap_or(("", glob));
        let suffix = name.strip_prefix('*').expect("a `*suffix` glob");
        Self::ChildSuffix(workspace.join(dir), suffix.to_owned())
    }

    fn matches(&self, path: &Path) -> bool {
        let name = path
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        match self {
            Self::Under(dir) => path == dir,
            Self::Name(wanted) => name == *wanted,
            Self::ChildSuffix(dir, suffix) => {
                path.parent() == Some(dir.as_path()) && name.ends_with(suffix.as_str())
            }
            Self::AnySuffix(suffix) => !name.is_empty() && name.ends_with(suffix.as_str()),
        }
    }

    /// The directory the glob names literally, if any: renaming it, or one
    /// of its ancestors, would leave the glob behind.
    pub(super) fn literal(&self) -> Option<&Path> {
        match self {
            Self::Under(dir) | Self::ChildSuffix(dir, _) => Some(dir),
            Self::Name(_) | Self::AnySuffix(_) => None,
        }
    }
}

/// One directory the guest sees, as wasi-libc and cap-std use it.
#[derive(Debug, Clone)]
pub(super) struct Preopen {
    /// The guest's name for it (`.` for the workspace).
    pub(super) name: String,
    pub(super) host: PathBuf,
    pub(super) writable: bool,
}

/// The intended policy on canonical paths, and the guest's view of the
/// grants.
#[derive(Debug)]
pub(super) struct Policy {
    pub(super) workspace: PathBuf,
    pub(super) grants: Vec<(PathBuf, bool)>,
    pub(super) deny: Vec<Deny>,
    pub(super) preopens: Vec<Preopen>,
}

impl Policy {
    pub(super) fn new(case: &Case, workspace: &Path) -> Self {
        let mut grants: Vec<(PathBuf, bool)> = Vec::new();
        for (dirs, writable) in [(&case.write, true), (&case.read, false)] {
            for dir in dirs {
                let dir = normalize(&workspace.join(dir));
                match grants.iter_mut().find(|(d, _)| *d == dir) {
                    Some((_, w)) => *w |= writable,
                    None => grants.push((dir, writable)),
                }
            }
        }
        let mut preopens: Vec<Preopen> = grants
            .iter()
            .map(|(dir, writable)| Preopen {
                name: dir.to_string_lossy().into_owned(),
                host: dir.clone(),
                writable: *writable,
            })
            .collect();
        // The workspace, where relative paths start, whether or not it is
        // granted itself.
        preopens.push(Preopen {
            name: ".".to_owned(),
            host: workspace.to_path_buf(),
            writable: grants
                .iter()
                .any(|(dir, w)| *w && dir.starts_with(workspace)),
        });
        Self {
            workspace: workspace.to_path_buf(),
            grants,
            deny: case
                .deny
                .iter()
                .map(|g| Deny::parse(g, workspace))
                .collect(),
            preopens,
        }
    }

    pub(super) fn denied(&self, path: &Path) -> bool {
        path.ancestors()
            .any(|a| self.deny.iter().any(|rule| rule.matches(a)))
    }

    /// Whether `path` may be read (or written, with `write`). The workspace
    /// itself may always be read as a directory (its listing shows only what
    /// may be read).
    pub(super) fn allows(&self, path: &Path, write: bool) -> Result<(), String> {
        if self.denied(path) {
            return Err(format!("{} is denied", path.display()));
        }
        if self
            .grants
            .iter()
            .any(|(dir, w)| (*w || !write) && path.starts_with(dir))
            || (!write && path == self.workspace)
        {
            Ok(())
        } else {
            Err(format!(
                "{} is outside the {} grants",
                path.display(),
                if write { "write" } else { "read" }
            ))
        }
    }

    /// The directory wasi-libc opens `path` in, and the rest of the path:
    /// the longest preopen name that is a prefix of it (leading slashes
    /// ignored), `.` (named "") matching any path.
    pub(super) fn route(&self, path: &str) -> Option<(&Preopen, String)> {
        let stripped = path.trim_start_matches('/');
        let (preopen, length) = self
            .preopens
            .iter()
            .filter_map(|p| {
                let prefix = p.name.trim_start_matches('/');
                let prefix = if prefix == "." { "" } else { prefix };
                let matches = prefix.is_empty()
                    || (stripped.starts_with(prefix)
                        && matches!(stripped.as_bytes().get(prefix.len()), None | Some(b'/')));
                matches.then_some((p, prefix.len()))
            })
            .rev()
            .max_by_key(|(_, length)| *length)?;
        let rest = stripped[length..].trim_start_matches('/');
        Some((
            preopen,
            if rest.is_empty() {
                ".".into()
            } else {
                rest.into()
            },
        ))
    }
}
