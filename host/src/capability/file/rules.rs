//! Filesystem grants: the directories a profile may read or write, the deny
//! globs carved out of them (on `policy::lexical`'s normalized paths).

mod reached;
mod repository;

use std::path::{Path, PathBuf};
use std::sync::Arc;

use globset::{GlobBuilder, GlobSet, GlobSetBuilder};

pub use crate::policy::confinement::Confinement;
pub use crate::policy::lexical::{Access, normalize};
pub use reached::{Identities, Unsearched};
pub use repository::{
    GITDIR_KEPT, WORKTREE_KEPT, is_git_dir, is_git_dir_by, kept_metadata, wrote_by_git,
};

use crate::policy::own::{OwnPath, OwnPaths, Protection};

/// A profile's filesystem rules: absolute directories granted for reading or
/// writing, minus deny globs and toolhost's own paths, and for a tool with
/// path rules, within their globs. Defaults deny: with no grants nothing is
/// reachable.
#[derive(Debug, Clone)]
pub struct PathRules {
    grants: Vec<(PathBuf, Access)>,
    /// Deny patterns as written in the config, for messages.
    deny_patterns: Vec<String>,
    deny_set: GlobSet,
    /// For each glob in `deny_set`, the index of the pattern it came from.
    deny_sources: Vec<usize>,
    /// toolhost's own paths, out of every grant.
    own: Arc<OwnPaths>,
    /// The globs a tool's parameter rules confine its paths to.
    confinement: Option<Arc<Confinement>>,
}

impl Default for PathRules {
    fn default() -> Self {
        Self {
            grants: Vec::new(),
            deny_patterns: Vec::new(),
            deny_set: GlobSet::empty(),
            deny_sources: Vec::new(),
            own: OwnPaths::process(),
            confinement: None,
        }
    }
}

impl PathRules {
    /// Builds the rules from `file.read` and `file.write` directories and
    /// `file.deny` globs, all already resolved against the config's directory.
    ///
    /// Grants are absolute directories; a trailing `/**` is accepted and
    /// stripped. Deny globs are absolute or start with `**/`; `*` stays within
    /// one path component and `**` crosses them. A glob that names a directory
    /// (`/w/secrets`, `/w/secrets/**`) denies the directory and everything in it.
    pub fn new<R, W, D>(read: R, write: W, deny: D) -> Result<Self, PathRuleError>
    where
        R: IntoIterator<Item: AsRef<Path>>,
        W: IntoIterator<Item: AsRef<Path>>,
        D: IntoIterator<Item: AsRef<str>>,
    {
        let mut grants: Vec<(PathBuf, Access)> = Vec::new();
        for (paths, access, key) in [
            (collect_paths(write), Access::Write, "file.write"),
            (collect_paths(read), Access::Read, "file.read"),
        ] {
            for path in paths {
                let dir = grant_dir(&path, key)?;
                match grants.iter_mut().find(|(existing, _)| *existing == dir) {
                    Some((_, existing)) => *existing = (*existing).max(access),
                    None => grants.push((dir, access)),
                }
            }
        }

        let mut deny_patterns = Vec::new();
        let mut deny_sources = Vec::new();
        let mut builder = GlobSetBuilder::new();
        for (index, pattern) in deny.into_iter().enumerate() {
            let pattern = pattern.as_ref();
            let normalized = normalize_deny(pattern)?;
            let mut globs = vec![normalized.clone()];
            // `dir/**` matches what is inside `dir`; deny `dir` itself as well.
            if let Some(dir) = normalized.strip_suffix("/**") {
                globs.push(if dir.is_empty() {
                    "/".to_owned()
                } else {
                    dir.to_owned()
                });
            }
            for glob in globs {
                let glob = GlobBuilder::new(&glob)
                    .literal_separator(true)
                    .backslash_escape(true)
                    .build()
                    .map_err(|error| PathRuleError::InvalidDeny {
                        pattern: pattern.to_owned(),
                        reason: error.kind().to_string(),
                    })?;
                builder.add(glob);
                deny_sources.push(index);
            }
            deny_patterns.push(pattern.to_owned());
        }
        let deny_set = builder
            .build()
            .map_err(|error| PathRuleError::InvalidDeny {
                pattern: deny_patterns.join(", "),
                reason: error.kind().to_string(),
            })?;
        Ok(Self {
            grants,
            deny_patterns,
            deny_set,
            deny_sources,
            own: OwnPaths::process(),
            confinement: None,
        })
    }

    /// The same rules with `own` as toolhost's own paths (left out where a
    /// write grant names a path that allows it, such as the plugin
    /// directory).
    pub fn with_own(mut self, own: &Arc<OwnPaths>) -> Self {
        let writable = self
            .grants
            .iter()
            .filter(|(_, access)| *access == Access::Write)
            .map(|(dir, _)| dir.as_path());
        self.own = own.for_write_grants(writable);
        self
    }

    /// toolhost's own paths as these rules keep them out.
    pub fn own(&self) -> &OwnPaths {
        &self.own
    }

    /// The same rules, every path also confined to `confinement`.
    pub fn confined(&self, confinement: Confinement) -> Self {
        let mut confined = self.clone();
        confined.confinement = Some(Arc::new(confinement));
        confined
    }

    /// The globs paths are confined to, if any.
    pub fn confinement(&self) -> Option<&Confinement> {
        self.confinement.as_deref()
    }

    /// Checks an absolute host path for `access`. The path is normalized
    /// lexically first, so `..` cannot climb out of a grant; symlinks must be
    /// resolved by the caller.
    pub fn check(&self, path: &Path, access: Access) -> Result<(), PathRefusal> {
        self.check_remembering(path, access, None)
    }

    /// [`Self::check`], taking what `file.deny` says of the directory `path`
    /// lies in from `memo` (and remembering it there): the globs judge
    /// names, so a directory's answer holds for every entry in it.
    pub fn check_remembering(
        &self,
        path: &Path,
        access: Access,
        memo: Option<&mut DenyMemo>,
    ) -> Result<(), PathRefusal> {
        if !path.is_absolute() {
            return Err(PathRefusal::NotAbsolute {
                path: path.to_owned(),
            });
        }
        let path = normalize(path);
        if let Some(own) = self.own.refusing(&path, access) {
            return Err(PathRefusal::own(path, own));
        }
        let denied = match memo {
            Some(memo) => self.denied_remembering(&path, memo),
            None => self.denied_by(&path),
        };
        if let Some(pattern) = denied {
            return Err(PathRefusal::Denied {
                path,
                pattern: pattern.to_owned(),
            });
        }
        if access == Access::Write
            && let Some(kept) = kept_metadata(&path)
        {
            return Err(PathRefusal::RepositoryMetadata { path, kept });
        }
        let granted = self
            .grants
            .iter()
            .any(|(dir, granted)| granted.covers(access) && path.starts_with(dir));
        if !granted {
            return Err(PathRefusal::NotGranted { path, access });
        }
        match &self.confinement {
            Some(confinement) if !confinement.allows(&path, access) => {
                Err(PathRefusal::OutsideRule {
                    path,
                    keys: confinement.keys.join(", "),
                    globs: confinement.written.clone(),
                })
            }
            _ => Ok(()),
        }
    }

    /// The deny pattern that covers `path` (after normalization), if any; used
    /// to hide denied entries from directory listings.
    pub fn is_denied(&self, path: &Path) -> Option<&str> {
        self.denied_by(&normalize(path))
    }

    /// The deny pattern that matches `path` itself (not its ancestors), if
    /// any: for walks that descend only into directories already allowed.
    pub fn denies_entry(&self, path: &Path) -> Option<&str> {
        if self.deny_patterns.is_empty() {
            return None;
        }
        let source = self
            .deny_set
            .matches(path)
            .into_iter()
            .filter_map(|glob| self.deny_sources.get(glob).copied())
            .min()?;
        self.deny_patterns.get(source).map(String::as_str)
    }

    /// The deny pattern that matches something inside the directory `dir`
    /// (or `dir` itself), if any: a pattern naming a path under `dir`, or an
    /// entry found under it (looking at no more than `max_entries`; a larger
    /// tree is reported as `Err`). Symlinks inside are not followed: what
    /// they lead to keeps its own name. Used to refuse renames and links
    /// that would carry a denied path to a name no rule covers.
    pub fn denied_within(&self, dir: &Path, max_entries: usize) -> Result<Option<&str>, usize> {
        if self.deny_patterns.is_empty() {
            return Ok(None);
        }
        let dir = normalize(dir);
        if let Some(pattern) = self.denied_by(&dir) {
            return Ok(Some(pattern));
        }
        for pattern in &self.deny_patterns {
            let literal = pattern
                .split(['*', '?', '[', '{'])
                .next()
                .unwrap_or_default()
                .trim_end_matches('/');
            if !literal.is_empty() && Path::new(literal).starts_with(&dir) {
                return Ok(Some(pattern));
            }
        }
        // A symlink is moved as itself: what it leads to stays where it is.
        if !std::fs::symlink_metadata(&dir).is_ok_and(|meta| meta.is_dir()) {
            return Ok(None);
        }
        let mut stack = vec![dir];
        let mut seen = 0;
        while let Some(next) = stack.pop() {
            let Ok(entries) = std::fs::read_dir(&next) else {
                continue;
            };
            for entry in entries.flatten() {
                seen += 1;
                if seen > max_entries {
                    return Err(max_entries);
                }
                let path = entry.path();
                if let Some(pattern) = self.denies_entry(&path) {
                    return Ok(Some(pattern));
                }
                if entry.file_type().is_ok_and(|t| t.is_dir()) {
                    stack.push(path);
                }
            }
        }
        Ok(None)
    }

    /// The granted directories with their access, for preopening. A directory
    /// granted both ways appears once, as `Write`.
    pub fn grants(&self) -> impl Iterator<Item = (&Path, Access)> {
        self.grants
            .iter()
            .map(|(dir, access)| (dir.as_path(), *access))
    }

    /// The deny patterns as written.
    pub fn deny_patterns(&self) -> impl Iterator<Item = &str> {
        self.deny_patterns.iter().map(String::as_str)
    }

    /// Checks `path` and each of its ancestors, so a denied directory denies
    /// everything beneath it. Reports the first pattern in config order.
    fn denied_by(&self, path: &Path) -> Option<&str> {
        let source = self.denied_source(path)?;
        self.deny_patterns.get(source).map(String::as_str)
    }

    /// The index of the first pattern that matches `path` or an ancestor.
    fn denied_source(&self, path: &Path) -> Option<usize> {
        if self.deny_patterns.is_empty() {
            return None;
        }
        path.ancestors()
            .filter(|candidate| !candidate.as_os_str().is_empty())
            .flat_map(|candidate| self.deny_set.matches(candidate))
            .filter_map(|glob| self.deny_sources.get(glob).copied())
            .min()
    }

    /// [`Self::denied_by`] of a normalized path, with its directory's
    /// answer from `memo`.
    fn denied_remembering(&self, path: &Path, memo: &mut DenyMemo) -> Option<&str> {
        if self.deny_patterns.is_empty() {
            return None;
        }
        let Some(dir) = path.parent().filter(|dir| !dir.as_os_str().is_empty()) else {
            return self.denied_by(path);
        };
        let above = match memo.dirs.get(dir) {
            Some(above) => *above,
            None => {
                let above = self.denied_source(dir);
                if memo.dirs.len() >= DenyMemo::MOST {
                    memo.dirs.clear();
                }
                memo.dirs.insert(dir.to_path_buf(), above);
                above
            }
        };
        let own = self
            .deny_set
            .matches(path)
            .into_iter()
            .filter_map(|glob| self.deny_sources.get(glob).copied())
            .min();
        let source = own.into_iter().chain(above).min()?;
        self.deny_patterns.get(source).map(String::as_str)
    }
}

/// What `file.deny` says of directories, remembered for the entries in
/// them (see [`PathRules::check_remembering`]). Hold one per set of rules:
/// it is keyed by path only.
#[derive(Debug, Default)]
pub struct DenyMemo {
    /// Each directory's first matching pattern, its ancestors included.
    dirs: std::collections::HashMap<PathBuf, Option<usize>>,
}

impl DenyMemo {
    /// Directories remembered at most (it starts again past that).
    const MOST: usize = 4096;
}

fn collect_paths<I: IntoIterator<Item: AsRef<Path>>>(paths: I) -> Vec<PathBuf> {
    paths.into_iter().map(|p| p.as_ref().to_owned()).collect()
}

/// A grant as a normalized absolute directory, with a trailing `/**` removed.
fn grant_dir(path: &Path, key: &'static str) -> Result<PathBuf, PathRuleError> {
    let dir = if path.file_name().is_some_and(|name| name == "**") {
        path.parent().unwrap_or(path)
    } else {
        path
    };
    let has_glob = dir
        .components()
        .any(|c| c.as_os_str().as_encoded_bytes().contains(&b'*'));
    if has_glob {
        return Err(PathRuleError::GlobInGrant {
            key,
            path: path.to_owned(),
        });
    }
    if !dir.is_absolute() {
        return Err(PathRuleError::RelativeGrant {
            key,
            path: path.to_owned(),
        });
    }
    Ok(normalize(dir))
}

/// Validates a deny glob and resolves `.`, `..`, repeated and trailing slashes.
fn normalize_deny(pattern: &str) -> Result<String, PathRuleError> {
    let absolute = pattern.starts_with('/');
    if !absolute && !pattern.starts_with("**/") && pattern != "**" {
        return Err(PathRuleError::RelativeDeny {
            pattern: pattern.to_owned(),
        });
    }
    let mut parts: Vec<&str> = Vec::new();
    for part in pattern.split('/') {
        match part {
            "" | "." => {}
            ".." => {
                let literal = parts.last().is_some_and(|last| {
                    *last != "**" && !last.contains(['*', '?', '[', ']', '{', '}'])
                });
                if !literal {
                    return Err(PathRuleError::InvalidDeny {
                        pattern: pattern.to_owned(),
                        reason: "'..' follows a wildcard or climbs above '/'".to_owned(),
                    });
                }
                parts.pop();
            }
            _ => parts.push(part),
        }
    }
    let joined = parts.join("/");
    Ok(if absolute {
        format!("/{joined}")
    } else {
        joined
    })
}

/// A filesystem rule in the config that cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PathRuleError {
    /// A grant that is not absolute after resolution.
    #[error(
        "{key} entry {path:?} is not an absolute path; resolve it against the config directory"
    )]
    RelativeGrant {
        /// `file.read` or `file.write`.
        key: &'static str,
        /// The grant as given.
        path: PathBuf,
    },
    /// A grant with a wildcard other than a trailing `/**`.
    #[error(
        "{key} entry {path:?} contains a wildcard; grants are directories \
         (a trailing \"/**\" is accepted), use file.deny to exclude files"
    )]
    GlobInGrant {
        /// `file.read` or `file.write`.
        key: &'static str,
        /// The grant as given.
        path: PathBuf,
    },
    /// A deny glob that could only ever match relative paths.
    #[error(
        "file.deny pattern {pattern:?} is relative; resolve it against the config directory \
         or start it with \"**/\" to match at any depth"
    )]
    RelativeDeny {
        /// The pattern as given.
        pattern: String,
    },
    /// A deny glob that does not parse.
    #[error("file.deny pattern {pattern:?} is not a valid glob: {reason}")]
    InvalidDeny {
        /// The pattern as given.
        pattern: String,
        /// What the glob parser said.
        reason: String,
    },
}

/// Why a path was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PathRefusal {
    /// The path was not absolute (a caller bug: resolve it first).
    #[error("path {path:?} is not absolute; resolve it against the sandbox's directories first")]
    NotAbsolute {
        /// The path as given.
        path: PathBuf,
    },
    /// A `file.deny` glob covers the path or one of its parent directories.
    #[error(
        "path {path:?} matches file.deny pattern {pattern:?}; \
         remove or narrow that pattern to allow it"
    )]
    Denied {
        /// The normalized path.
        path: PathBuf,
        /// The deny pattern as written.
        pattern: String,
    },
    /// No grant with enough access contains the path.
    #[error("{}", not_granted_message(path, *access))]
    NotGranted {
        /// The normalized path.
        path: PathBuf,
        /// The access that was asked for.
        access: Access,
    },
    /// The path is one of toolhost's own, out of every grant.
    #[error("path {path:?} is toolhost's {what} ({key}): {rule}")]
    Own {
        /// The normalized path.
        path: PathBuf,
        /// What it is.
        what: String,
        /// Where the configuration names it.
        key: String,
        /// What may not be done with it, and what to change.
        rule: String,
    },
    /// Repository metadata that makes git run programs (a repository's
    /// configuration, hooks, ...): the file tools write it no more than
    /// commands may.
    #[error(
        "path {path:?} is repository metadata ({kept}) that makes git outside the sandbox run \
         programs or read its metadata elsewhere; tools and commands may change a repository's \
         work and history but not that: the owner edits it"
    )]
    RepositoryMetadata {
        /// The normalized path.
        path: PathBuf,
        /// The kept part.
        kept: String,
    },
    /// What the writable grants keep from commands could not be found, so
    /// nothing is written.
    #[error(
        "path {path:?} is not written: what the writable grants keep from commands (repository \
         metadata and what it names) could not be found: {why}"
    )]
    Unplanned {
        /// The normalized path.
        path: PathBuf,
        /// Why, as a command would be told.
        why: String,
    },
    /// A parameter rule of the tool confines its paths elsewhere.
    #[error(
        "path {path:?} is outside what {keys} lets the tool touch ({globs:?}, resolved in the \
         workspace, symlinks followed); widen the rule to allow it"
    )]
    OutsideRule {
        /// The normalized path.
        path: PathBuf,
        /// The rules' config keys.
        keys: String,
        /// Their globs as written.
        globs: Vec<String>,
    },
}

impl PathRefusal {
    /// The refusal of `path`, which is (or lies in) toolhost's `own` path.
    pub fn own(path: PathBuf, own: &OwnPath) -> Self {
        let rule = match own.protection {
            Protection::Hidden => "no tool or command may read or write it".to_string(),
            Protection::ReadOnly if own.writable_when_granted => "no tool or command may write \
                it, unless the profile's file.write names the directory"
                .to_string(),
            Protection::ReadOnly => "no tool or command may write it".to_string(),
        };
        Self::Own {
            path,
            what: own.what.clone(),
            key: own.key.clone(),
            rule,
        }
    }
}

fn not_granted_message(path: &Path, access: Access) -> String {
    match access {
        Access::Read => format!(
            "path {path:?} is outside the profile's file.read and file.write directories; \
             add a directory containing it to file.read to allow reading it"
        ),
        Access::Write => format!(
            "path {path:?} is outside the profile's file.write directories; \
             add a directory containing it to file.write to allow writing it"
        ),
    }
}

#[cfg(test)]
mod tests;
