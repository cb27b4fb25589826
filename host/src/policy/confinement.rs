//! A parameter rule on a file tool's paths, enforced where files are
//! opened: every path the tool touches in a call, resolved (`..` and
//! symlinks), must match one of the rule's globs.

use std::path::{Path, PathBuf};

use super::lexical::{Access, normalize};
use crate::policy::wildcard;

/// The globs (absolute, `*` crossing `/`) a tool's paths must match, and
/// the rules they were written in.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Confinement {
    /// The config keys of the rules (`profiles.p.tools.t.arguments./path`).
    pub keys: Vec<String>,
    /// The globs as written.
    pub written: Vec<String>,
    /// The globs resolved against the workspace.
    pub globs: Vec<String>,
}

impl Confinement {
    /// The globs of `written` (relative ones resolved against `workspace`),
    /// from the rule at `key`.
    pub fn new(key: &str, written: &[String], workspace: &Path) -> Self {
        let mut confinement = Self {
            keys: Vec::new(),
            written: Vec::new(),
            globs: Vec::new(),
        };
        confinement.add(key, written, workspace);
        confinement
    }

    /// Adds another rule's globs: a path may match either rule's.
    pub fn add(&mut self, key: &str, written: &[String], workspace: &Path) {
        self.keys.push(key.to_string());
        for glob in written {
            self.written.push(glob.clone());
            self.globs.push(resolve(glob, workspace));
        }
    }

    /// Whether `path` (absolute, normalized) may be used for `access`: it
    /// matches a glob (a glob `dir/**` or `dir/*` also matches `dir`), or it
    /// is read as one of the directories that lead to a glob.
    pub fn allows(&self, path: &Path, access: Access) -> bool {
        let text = path.to_string_lossy();
        self.globs.iter().any(|glob| {
            let own_dir = glob
                .strip_suffix("/**")
                .or_else(|| glob.strip_suffix("/*"))
                .is_some_and(|dir| dir == text);
            wildcard::matches(glob, &text)
                || own_dir
                || (access == Access::Read && Path::new(&leading_dir(glob)).starts_with(path))
        })
    }
}

/// A glob made absolute in `workspace`, `.` and `..` resolved.
pub(crate) fn resolve(glob: &str, workspace: &Path) -> String {
    normalize(&workspace.join(glob))
        .to_string_lossy()
        .into_owned()
}

/// Whether the text `value` (a path as a tool's argument has it), resolved
/// in `workspace`, matches one of `globs` as [`Confinement::allows`] reads
/// them: what a call may be refused for before it runs.
pub(crate) fn value_allowed(value: &str, globs: &[String], workspace: &Path) -> bool {
    let confinement = Confinement::new("", globs, workspace);
    confinement.allows(&normalize(&workspace.join(value)), Access::Write)
}

/// The directory part of a glob before its first wildcard.
fn leading_dir(glob: &str) -> PathBuf {
    let literal = glob.split(['*', '?', '[']).next().unwrap_or_default();
    match literal.rfind('/') {
        Some(0) => PathBuf::from("/"),
        Some(end) => PathBuf::from(&literal[..end]),
        None => PathBuf::from(literal),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_match_the_globs_and_the_directories_leading_to_them_are_readable() {
        let workspace = Path::new("/w");
        let confinement = Confinement::new("k", &["docs/**".to_string()], workspace);
        let allows = |path: &str, access| confinement.allows(Path::new(path), access);
        assert!(allows("/w/docs/a.md", Access::Write));
        assert!(allows("/w/docs/deep/b.md", Access::Read));
        assert!(allows("/w/docs", Access::Write));
        assert!(allows("/w", Access::Read));
        assert!(!allows("/w", Access::Write));
        assert!(!allows("/w/secret", Access::Read));
        assert!(!allows("/w/docsx/a", Access::Read));
        assert!(value_allowed("docs/a.md", &["docs/**".into()], workspace));
        assert!(value_allowed(
            "/w/docs/a.md",
            &["docs/**".into()],
            workspace
        ));
        assert!(!value_allowed(
            "docs/../secret",
            &["docs/**".into()],
            workspace
        ));
    }
}
