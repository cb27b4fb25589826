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
/// [`GITDIR_KEPT`] in a git directory, or of [`WORKTREE_KEPT`] in one of
/// its worktrees' directories; the part that is kept, for messages. A git
/// directory is one named `.git`, or one git would take for one by what it
/// holds (a bare repository, `--separate-git-dir`), as the terminal's
/// planner knows it: only directories a kept name lies in are looked at.
pub fn kept_metadata(path: &Path) -> Option<String> {
    let names: Vec<&std::ffi::OsStr> = path
        .components()
        .filter_map(|c| match c {
            Component::Normal(name) => Some(name),
            _ => None,
        })
        .collect();
    let kept_in = |at: usize| -> Option<String> {
        let rest: Vec<&str> = names[at + 1..].iter().filter_map(|n| n.to_str()).collect();
        let joined = rest.join("/");
        let under =
            |kept: &str, inside: &str| inside == kept || inside.starts_with(&format!("{kept}/"));
        if let Some(kept) = GITDIR_KEPT.iter().find(|kept| under(kept, &joined)) {
            return Some((*kept).to_string());
        }
        if let ["worktrees", id, ..] = rest.as_slice() {
            let inside = rest[2..].join("/");
            if let Some(kept) = WORKTREE_KEPT.iter().find(|kept| under(kept, &inside)) {
                return Some(format!("worktrees/{id}/{kept}"));
            }
        }
        None
    };
    if let Some(at) = names.iter().rposition(|name| *name == ".git") {
        // `.git` itself: a `gitdir:` file (a submodule's, a linked
        // worktree's, `--separate-git-dir`) tells git where its metadata
        // is, so it is kept as a whole (a directory `.git` is not written
        // as a file anyway).
        if at + 1 == names.len() {
            return Some(".git".to_string());
        }
        return kept_in(at).map(|kept| format!(".git/{kept}"));
    }
    (0..names.len().saturating_sub(1)).rev().find_map(|at| {
        let kept = kept_in(at)?;
        let dir: std::path::PathBuf = std::iter::once(std::ffi::OsStr::new("/"))
            .chain(names[..=at].iter().copied())
            .collect();
        is_git_dir(&dir).then(|| format!("{}/{kept}", names[at].to_string_lossy()))
    })
}

/// Whether a directory is a git directory as git knows one: its own marks
/// (`objects/` and `refs/`, through links as git follows them, with or
/// without `HEAD`, which git needs but a command may take away for one plan
/// and put back), or a configuration git wrote (`[core]
/// repositoryformatversion`). `has` says whether an entry is there,
/// `is_dir` whether it is a directory, `config` gives the text of its
/// `config`, read as a small regular file.
pub fn is_git_dir_by(
    has: impl Fn(&str) -> bool,
    is_dir: impl Fn(&str) -> bool,
    config: impl FnOnce() -> Option<String>,
) -> bool {
    let is_dir = |name: &str| has(name) && is_dir(name);
    if (is_dir("objects") && is_dir("refs"))
        || (has("HEAD") && (is_dir("objects") || is_dir("refs")))
    {
        return true;
    }
    has("config") && config().is_some_and(|text| wrote_by_git(&text))
}

/// [`is_git_dir_by`] of the directory `dir` on disk.
pub fn is_git_dir(dir: &Path) -> bool {
    is_git_dir_by(
        |name| dir.join(name).symlink_metadata().is_ok(),
        |name| dir.join(name).metadata().is_ok_and(|m| m.is_dir()),
        || small_regular(&dir.join("config")),
    )
}

/// The text of `path` if it is a regular file of at most 64 KiB, opened
/// without waiting (a FIFO swapped in meanwhile holds nothing up).
fn small_regular(path: &Path) -> Option<String> {
    use std::io::Read;
    use std::os::unix::fs::OpenOptionsExt;
    const MOST: u64 = 1 << 16;
    let meta = path.metadata().ok()?;
    if !meta.is_file() || meta.len() > MOST {
        return None;
    }
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK)
        .open(path)
        .ok()?;
    if !file.metadata().ok()?.is_file() {
        return None;
    }
    let mut bytes = Vec::new();
    file.take(MOST).read_to_end(&mut bytes).ok()?;
    Some(String::from_utf8_lossy(&bytes).into_owned())
}

/// Whether a configuration's text has git's `[core]` section with
/// `repositoryformatversion`, which `git init` writes.
pub fn wrote_by_git(text: &str) -> bool {
    let mut core = false;
    for line in text.lines() {
        let line = line.trim().to_ascii_lowercase();
        if let Some(header) = line.strip_prefix('[') {
            core = header.starts_with("core") && header[4..].starts_with([']', ' ', '\t']);
        } else if core && line.starts_with("repositoryformatversion") {
            return true;
        }
    }
    false
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
            // A submodule's or worktree's `gitdir:` file.
            "/w/p/sub/.git",
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
