//! Repository metadata that makes git run programs or read its metadata
//! elsewhere: one list, which the terminal's planner keeps read-only for
//! commands and the file tools refuse to write, so neither door opens what
//! the other keeps.

use std::path::{Component, Path};

/// Paths in a repository's git directory that make git run programs or read
/// its metadata from elsewhere. Git writes the rest of the directory in
/// normal work (objects, refs, the index, `HEAD`, logs, lock files), so
/// that stays writable.
pub const GITDIR_KEPT: &[&str] = &[
    "config",
    "config.worktree",
    "commondir",
    "hooks",
    "info",
    "modules",
    "objects/info/alternates",
];

/// The same in a linked worktree's git directory (`.git/worktrees/<id>`).
pub const WORKTREE_KEPT: &[&str] = &["commondir", "gitdir", "config.worktree"];

/// The kept metadata `path` is (or lies in), if it is: a name of
/// [`GITDIR_KEPT`] in a `.git` directory, or of [`WORKTREE_KEPT`] in one of
/// its worktrees' directories; the part that is kept, for messages.
pub fn kept_metadata(path: &Path) -> Option<String> {
    let names: Vec<&std::ffi::OsStr> = path
        .components()
        .filter_map(|c| match c {
            Component::Normal(name) => Some(name),
            _ => None,
        })
        .collect();
    let at = names.iter().rposition(|name| *name == ".git")?;
    let rest: Vec<&str> = names[at + 1..].iter().filter_map(|n| n.to_str()).collect();
    let joined = rest.join("/");
    let under =
        |kept: &str, inside: &str| inside == kept || inside.starts_with(&format!("{kept}/"));
    if let Some(kept) = GITDIR_KEPT.iter().find(|kept| under(kept, &joined)) {
        return Some(format!(".git/{kept}"));
    }
    if let ["worktrees", id, ..] = rest.as_slice() {
        let inside = rest[2..].join("/");
        if let Some(kept) = WORKTREE_KEPT.iter().find(|kept| under(kept, &inside)) {
            return Some(format!(".git/worktrees/{id}/{kept}"));
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn what_git_runs_programs_from_is_kept_and_its_work_is_not() {
        for kept in [
            "/w/p/.git/config",
            "/w/p/.git/hooks/pre-commit",
            "/w/p/.git/info/attributes",
            "/w/p/.git/objects/info/alternates",
            "/w/p/.git/worktrees/t/gitdir",
            "/w/p/sub/.git/modules/x/config",
        ] {
            assert!(kept_metadata(Path::new(kept)).is_some(), "{kept}");
        }
        for free in [
            "/w/p/.git/HEAD",
            "/w/p/.git/index",
            "/w/p/.git/objects/ab/cdef",
            "/w/p/.git/refs/heads/main",
            "/w/p/.git/configx",
            "/w/p/.git/worktrees/t/HEAD",
            "/w/p/src/config",
            "/w/p/.gitconfig",
        ] {
            assert!(kept_metadata(Path::new(free)).is_none(), "{free}");
        }
    }
}
