//! Repository metadata inside writable grants, planned as a unit: `.git` and
//! every directory from its grant down to it become mount points (a rename
//! or removal gets `EBUSY`), what git reads to run programs or to find its
//! metadata elsewhere is mounted read-only, and what of that does not exist
//! (or is a symbolic link) goes to the plan's [`Guard`], which the host
//! checks and puts back.

use std::path::{Component, Path, PathBuf};

use super::beneath::read_small;
use super::plan::Walk;
use super::spec::MountKind;
use crate::policy::Access;

use crate::capability::file::rules::{GITDIR_KEPT, WORKTREE_KEPT};

/// Most repositories kept in one sandbox; past it the command is refused
/// rather than run with one unprotected.
const MOST_REPOSITORIES: usize = 512;

/// Most configuration files read for one repository (its own and the
/// user's, and what they include); past it the command is refused.
const MOST_CONFIGS: usize = 64;

/// Most paths one configuration file may name (`include.path`,
/// `includeIf.*.path`, `core.hooksPath`); past it the command is refused.
const MOST_NAMED: usize = 64;

/// Most bytes of metadata one plan reads; past it the command is refused
/// rather than planned for long.
const MOST_PLAN_BYTES: u64 = 64 << 20;

/// Most paths one plan keeps; past it the command is refused rather than
/// planned for long.
const MOST_KEPT: usize = 16_384;

/// Largest metadata file read (a configuration, a `gitdir:` file, a
/// `commondir`): git's own are a few kilobytes.
const MOST_BYTES: u64 = 1 << 20;

impl Walk<'_> {
    /// Keeps the repository whose `.git` (a directory, or a `gitdir:` file)
    /// the walk found in a writable grant. A write grant that names its git
    /// directory itself keeps that writable.
    pub(super) fn protect_git(&mut self, dot_git: &Path) -> Result<(), String> {
        self.repositories += 1;
        if self.repositories > MOST_REPOSITORIES {
            return Err(format!(
                "the writable grants hold more than {MOST_REPOSITORIES} repositories, too many \
                 to protect each one's metadata; grant smaller directories to commands"
            ));
        }
        if let Some(watch) = self.watch.as_deref_mut() {
            watch.file(dot_git);
        }
        let Ok(meta) = dot_git.symlink_metadata() else {
            return Ok(());
        };
        let git_dir = if meta.is_dir() {
            dot_git.to_path_buf()
        } else {
            // A `gitdir:` file, or a link, stays as it is.
            if meta.file_type().is_symlink() {
                self.keep_link(dot_git);
            } else {
                self.keep(dot_git);
            }
            match dot_git.canonicalize() {
                Ok(dir) if dir.is_dir() => dir,
                _ => {
                    let Some(target) = self.read(dot_git)?.and_then(|text| {
                        let dir = text.strip_prefix("gitdir:")?.trim().to_string();
                        dot_git.parent()?.join(dir).canonicalize().ok()
                    }) else {
                        return Ok(());
                    };
                    target
                }
            }
        };
        let named = self
            .profile
            .file
            .grants()
            .any(|(dir, access)| access == Access::Write && dir.starts_with(&git_dir));
        if named {
            return Ok(());
        }
        self.pin(&git_dir);
        // A worktree's metadata names the repository's common directory.
        let common = self
            .read(&git_dir.join("commondir"))?
            .and_then(|dir| git_dir.join(dir.trim()).canonicalize().ok());
        // A repository without its configuration is one being made (`git
        // init` and `git clone` write it after the rest), by a command or by
        // you: not yet anyone's to keep. A plan made meanwhile (a parallel
        // command's, one built ahead) would otherwise take what the maker
        // writes next for a plant. It is kept once whole, by the plans made
        // after; its configuration appearing makes a plan made before stale.
        let whole = std::iter::once(&git_dir)
            .chain(common.as_ref())
            .any(|dir| dir.join("config").symlink_metadata().is_ok());
        if !whole {
            if let Some(watch) = self.watch.as_deref_mut() {
                watch.file(&git_dir.join("config"));
            }
            return Ok(());
        }
        let mut configs = Vec::new();
        for dir in std::iter::once(&git_dir).chain(common.as_ref()) {
            self.keep_all(dir, GITDIR_KEPT);
            configs.extend([dir.join("config"), dir.join("config.worktree")]);
            let worktrees = dir.join("worktrees");
            if let Some(watch) = self.watch.as_deref_mut() {
                watch.dir(&worktrees, &worktrees);
            }
            for entry in std::fs::read_dir(&worktrees)
                .into_iter()
                .flatten()
                .flatten()
            {
                if entry.file_type().is_ok_and(|t| t.is_dir()) {
                    self.keep_all(&entry.path(), WORKTREE_KEPT);
                }
            }
        }
        let work_tree = dot_git.parent().unwrap_or(dot_git);
        self.keep_named(&configs, work_tree)?;
        match self.refused.take() {
            Some(why) => Err(why),
            None => Ok(()),
        }
    }

    /// The text of the metadata file `path` (see [`read_small`]), within
    /// the plan's budget of bytes read.
    fn read(&mut self, path: &Path) -> Result<Option<String>, String> {
        let text = read_small(path, MOST_BYTES)?;
        self.read_bytes += text.as_ref().map_or(0, |t| t.len() as u64);
        if self.read_bytes > MOST_PLAN_BYTES {
            return Err(format!(
                "the repositories in the writable grants hold more than {} MiB of git \
                 configuration (the last read: {}), more than toolhost reads to plan a command; \
                 make it smaller or grant smaller directories to commands",
                MOST_PLAN_BYTES >> 20,
                crate::escape::escape(&path.to_string_lossy())
            ));
        }
        Ok(text)
    }

    /// Keeps `names` of the git directory `dir` (symlinks resolved).
    fn keep_all(&mut self, dir: &Path, names: &[&str]) {
        if self.root_of(dir).is_none() {
            return;
        }
        self.pin(dir);
        if let Some(watch) = self.watch.as_deref_mut() {
            watch.dir(dir, dir);
        }
        for name in names {
            self.keep(&dir.join(name));
        }
    }

    /// Keeps `path` (its directories' symlinks resolved) as it is for the
    /// life of the sandbox, where a writable grant exposes it: read-only
    /// where it exists, in the guard where it is missing or a symbolic
    /// link, and every directory from its grant down to it pinned.
    fn keep(&mut self, path: &Path) {
        let Some(root) = self.root_of(path).map(Path::to_path_buf) else {
            return;
        };
        if let Some(why) = super::guard::unsettled(path) {
            self.refused.get_or_insert(why);
        }
        if let Some(parent) = path.parent() {
            self.pin_between(&root, parent);
        }
        if let Some(watch) = self.watch.as_deref_mut() {
            watch.kept(path);
        }
        match path.symlink_metadata() {
            Ok(meta) if meta.file_type().is_symlink() => {
                self.keep_link(path);
                // What it points to, where a writable grant exposes that:
                // read-only, or kept absent where it leads nowhere yet (a
                // command would write the owner's git configuration there).
                match path.canonicalize() {
                    Ok(target) => {
                        if target != path
                            && self.root_of(&target).is_some()
                            && let Ok(meta) = target.symlink_metadata()
                        {
                            self.mounts.bind(target, MountKind::ReadOnly, &meta);
                        }
                    }
                    Err(_) => {
                        if let Some(target) = super::walk::dangling(path)
                            && target != path
                        {
                            self.keep(&target);
                        }
                    }
                }
            }
            Ok(meta) => {
                self.mounts
                    .bind(path.to_path_buf(), MountKind::ReadOnly, &meta);
                self.mounts.guard.mounted(&root, path.to_path_buf(), &meta);
            }
            // Absent, or a file where a directory above it should be (which
            // a command may replace with one): kept absent.
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::NotFound | std::io::ErrorKind::NotADirectory
                ) =>
            {
                self.mounts.guard.absent(&root, path.to_path_buf());
            }
            Err(e) => {
                self.refused.get_or_insert_with(|| {
                    format!(
                        "{} is repository metadata git outside the sandbox reads, and cannot be \
                         looked at ({e}); make its directory searchable, or its path shorter",
                        crate::escape::escape(&path.to_string_lossy())
                    )
                });
            }
        }
    }

    /// Keeps the symbolic link `path` pointing where it does (and the
    /// directories down to it pinned), where a writable grant exposes it.
    pub(super) fn keep_link(&mut self, path: &Path) {
        let Some(root) = self.writable_grant(path).map(Path::to_path_buf) else {
            return;
        };
        if let Some(why) = super::guard::unsettled(path) {
            self.refused.get_or_insert(why);
        }
        if let Some(parent) = path.parent() {
            self.pin_between(&root, parent);
        }
        if let Some(watch) = self.watch.as_deref_mut() {
            watch.kept(path);
        }
        if let Ok(text) = std::fs::read_link(path) {
            self.mounts.guard.link(&root, path.to_path_buf(), text);
        }
    }

    /// Pins the directory `dir` and every directory above it up to (not
    /// including) its grant.
    fn pin(&mut self, dir: &Path) {
        if let Some(root) = self.root_of(dir).map(Path::to_path_buf) {
            self.pin_between(&root, dir);
        }
    }

    /// Pins `dir` and the directories above it up to (not including) the
    /// grant `root`: a command cannot rename or remove them.
    pub(super) fn pin_between(&mut self, root: &Path, dir: &Path) {
        for ancestor in dir.ancestors() {
            if ancestor == root || !ancestor.starts_with(root) {
                break;
            }
            // Pinned already, and so is everything above it (the grant
            // nearest a path is the nearest of its directories too).
            if !self.pinned.insert(ancestor.to_path_buf()) {
                break;
            }
            match ancestor.symlink_metadata() {
                Ok(meta) if meta.file_type().is_symlink() => {
                    if let Ok(text) = std::fs::read_link(ancestor) {
                        self.mounts.guard.link(root, ancestor.to_path_buf(), text);
                    }
                }
                Ok(meta) if meta.is_dir() => self.mounts.pin(ancestor.to_path_buf(), &meta),
                _ => {}
            }
        }
    }

    /// The writable grant that exposes `path` (lexically, symlinks as they
    /// are): the nearest grant or `terminal.read` directory above it must be
    /// a writable grant, and no deny rule may cover it.
    pub(super) fn root_of(&self, path: &Path) -> Option<&Path> {
        self.writable_grant(path)
            .filter(|_| self.profile.file.is_denied(path).is_none())
    }

    /// The writable grant nearest above `path` (lexically), if the nearest
    /// grant or `terminal.read` directory above it is one, denied or not.
    pub(super) fn writable_grant(&self, path: &Path) -> Option<&Path> {
        let nearest = self
            .roots
            .iter()
            .map(PathBuf::as_path)
            .chain(self.read.iter().map(PathBuf::as_path))
            .filter(|root| path.starts_with(root))
            .max_by_key(|root| root.as_os_str().len())?;
        self.writable
            .iter()
            .any(|root| root == nearest)
            .then_some(nearest)
    }

    /// Keeps what the repository's configuration, and the user's and the
    /// system's, name for git to read or run from: `core.hooksPath` and the
    /// files `include.path` and `includeIf.*.path` include (conditions
    /// aside), as far as they lie in writable grants.
    fn keep_named(&mut self, configs: &[PathBuf], work_tree: &Path) -> Result<(), String> {
        let home = std::env::var_os("HOME").map(PathBuf::from);
        let mut queue: Vec<PathBuf> = home
            .iter()
            .flat_map(|home| [home.join(".gitconfig"), home.join(".config/git/config")])
            .chain([PathBuf::from("/etc/gitconfig")])
            .chain(configs.iter().cloned())
            .collect();
        let mut read = 0;
        while let Some(file) = queue.pop() {
            // Only regular files, within a size: a command's repository
            // may include a device or a FIFO.
            let Some(text) = self.read(&file)? else {
                continue;
            };
            read += 1;
            if read > MOST_CONFIGS {
                return Err(format!(
                    "{} is one of more than {MOST_CONFIGS} git configuration files that \
                     include each other, more than toolhost follows to keep what they name; \
                     include fewer files",
                    crate::escape::escape(&file.to_string_lossy())
                ));
            }
            let named = named_paths(&text);
            if named.includes.len() + named.hooks.len() > MOST_NAMED {
                return Err(format!(
                    "{} names more than {MOST_NAMED} paths to include or to take hooks from, \
                     more than toolhost keeps for one git configuration; remove the extra \
                     include.path and core.hooksPath entries or take the repository out of \
                     the writable grants",
                    crate::escape::escape(&file.to_string_lossy())
                ));
            }
            let base = file.parent().unwrap_or(Path::new("/"));
            for include in named.includes {
                if let Some(path) = expand(&include, base, home.as_deref()) {
                    let path = self.follow(&path);
                    self.keep(&path);
                    queue.push(path);
                }
            }
            for hooks in named.hooks {
                if let Some(path) = expand(&hooks, work_tree, home.as_deref()) {
                    let path = self.follow(&path);
                    self.keep(&path);
                }
            }
            if self.mounts.guard.len() > MOST_KEPT {
                return Err(format!(
                    "the repositories in the writable grants name more than {MOST_KEPT} paths \
                     to keep (the last read from {}); grant smaller directories to commands",
                    crate::escape::escape(&file.to_string_lossy())
                ));
            }
        }
        Ok(())
    }

    /// `path` with `.` and `..` taken out and the symbolic links of its
    /// directories followed; each link followed that lies in a writable
    /// grant is guarded, so it keeps pointing where it did.
    fn follow(&mut self, path: &Path) -> PathBuf {
        let path = normalize(path);
        let mut real = PathBuf::from("/");
        let mut components = path.components().skip(1).peekable();
        while let Some(component) = components.next() {
            let next = real.join(component);
            let last = components.peek().is_none();
            match next.symlink_metadata() {
                Ok(meta) if meta.file_type().is_symlink() && !last => {
                    // Kept as it points, and the directories down to it
                    // pinned, so that it stays where it was found.
                    self.keep_link(&next);
                    real = next.canonicalize().unwrap_or(next);
                }
                _ => real = next,
            }
        }
        real
    }
}

/// What a git configuration file names, as written.
#[derive(Debug, Default, PartialEq, Eq)]
struct Named {
    hooks: Vec<String>,
    includes: Vec<String>,
}

/// The `core.hooksPath` values and the `include.path` and
/// `includeIf.<condition>.path` values of a configuration file.
fn named_paths(text: &str) -> Named {
    let mut named = Named::default();
    let mut section = String::new();
    let mut lines = text.lines();
    while let Some(line) = lines.next() {
        let mut line = line.to_string();
        // A backslash at the end of a line continues it.
        while line.ends_with('\\') && !line.ends_with("\\\\") {
            line.pop();
            match lines.next() {
                Some(next) => line.push_str(next),
                None => break,
            }
        }
        let mut rest = line.trim_start();
        if let Some(header) = rest.strip_prefix('[') {
            let Some(end) = header.find(']') else {
                continue;
            };
            let name_end = header[..end]
                .find(|c: char| c.is_whitespace() || c == '"' || c == '.')
                .unwrap_or(end);
            section = header[..name_end].to_ascii_lowercase();
            rest = header[end + 1..].trim_start();
        }
        if rest.is_empty() || rest.starts_with(['#', ';']) {
            continue;
        }
        let key_end = rest
            .find(|c: char| c == '=' || c.is_whitespace())
            .unwrap_or(rest.len());
        let key = rest[..key_end].to_ascii_lowercase();
        let Some(value) = rest[key_end..].trim_start().strip_prefix('=') else {
            continue;
        };
        let value = config_value(value);
        match (section.as_str(), key.as_str()) {
            ("core", "hookspath") => named.hooks.push(value),
            ("include" | "includeif", "path") => named.includes.push(value),
            _ => {}
        }
    }
    named
}

/// A configuration value as git reads it: quotes removed, escapes
/// replaced, a comment outside quotes cut off, outer blanks trimmed.
fn config_value(raw: &str) -> String {
    let mut value = String::new();
    let mut quoted = false;
    let mut kept = 0;
    let mut chars = raw.trim_start().chars();
    while let Some(c) = chars.next() {
        match c {
            '"' => quoted = !quoted,
            '\\' => {
                value.push(match chars.next() {
                    Some('n') => '\n',
                    Some('t') => '\t',
                    Some('b') => '\u{8}',
                    Some(other) => other,
                    None => break,
                });
                kept = value.len();
                continue;
            }
            '#' | ';' if !quoted => break,
            c => value.push(c),
        }
        if quoted || !c.is_whitespace() {
            kept = value.len();
        }
    }
    value.truncate(kept);
    value
}

/// A path from a configuration value: `~/` is the user's home, a relative
/// path lies in `base`; `None` for what cannot be known here (`~user/`,
/// `%(prefix)/`).
fn expand(value: &str, base: &Path, home: Option<&Path>) -> Option<PathBuf> {
    if value.is_empty() || value.starts_with("%(") {
        return None;
    }
    if let Some(rest) = value.strip_prefix("~/") {
        return Some(home?.join(rest));
    }
    if value.starts_with('~') {
        return None;
    }
    Some(base.join(value))
}

/// `path` with `.` and `..` resolved lexically.
fn normalize(path: &Path) -> PathBuf {
    let mut out = PathBuf::from("/");
    for component in path.components() {
        match component {
            Component::ParentDir => {
                out.pop();
            }
            Component::Normal(name) => out.push(name),
            Component::RootDir | Component::CurDir | Component::Prefix(_) => {}
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_paths_a_configuration_names_are_read_as_git_reads_them() {
        let text = "[core]\n\tbare = false\n\thooksPath = \"my hooks\" # a comment\n\
                    [Include]\n\tpath = ../shared.cfg\n\
                    [includeIf \"gitdir:~/work/\"]\n\tPATH = ~/work.cfg ; why\n\
                    [core] hookspath = a\\\\b\n\
                    [alias]\n\tpath = not-this\n\
                    [include]\n\tpath = con\\\ntinued\n";
        assert_eq!(
            named_paths(text),
            Named {
                hooks: vec!["my hooks".into(), "a\\b".into()],
                includes: vec![
                    "../shared.cfg".into(),
                    "~/work.cfg".into(),
                    "continued".into()
                ],
            }
        );
    }

    #[test]
    fn configured_paths_expand_from_their_base_and_the_home() {
        let home = Path::new("/home/u");
        let base = Path::new("/w/repo/.git");
        assert_eq!(
            expand("../x.cfg", base, Some(home)).map(|p| normalize(&p)),
            Some(PathBuf::from("/w/repo/x.cfg"))
        );
        assert_eq!(
            expand("~/x", base, Some(home)),
            Some(PathBuf::from("/home/u/x"))
        );
        assert_eq!(expand("~other/x", base, Some(home)), None);
        assert_eq!(expand("%(prefix)/x", base, Some(home)), None);
        assert_eq!(expand("/abs", base, None), Some(PathBuf::from("/abs")));
    }
}
