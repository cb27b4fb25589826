//! The planner's walk of the grants: every entry is listed (a directory
//! that cannot be listed refuses the command, unless no command could read
//! it either), what `file.deny` matches is masked, and repositories found
//! in writable grants are kept (see [`super::git`]).

use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use super::plan::Mounts;
use super::spec::MOVED;
use super::watch::Watch;
use crate::capability::Profile;
use crate::capability::file::rules::is_git_dir_by;

/// Most entries looked at inside the grants to find what `file.deny` masks;
/// past it the command is refused rather than run with a mask missing.
#[cfg(not(test))]
const MAX_ENTRIES: usize = 200_000;
/// The same, small enough for a unit test to pass.
#[cfg(test)]
const MAX_ENTRIES: usize = 2_000;

/// A walk of the grants for what to mask or protect.
pub(super) struct Walk<'a> {
    pub(super) profile: &'a Profile,
    pub(super) mounts: &'a mut Mounts,
    /// Told of every directory before it is read.
    pub(super) watch: Option<&'a mut Watch>,
    pub(super) entries: usize,
    /// Denied regular files with more than one name: device and inode.
    pub(super) linked: Vec<(u64, u64)>,
    /// Repositories found in writable grants.
    pub(super) repositories: usize,
    /// The writable grants, symlinks resolved.
    pub(super) writable: Vec<PathBuf>,
    /// Every grant, symlinks resolved: each is walked once, from its own
    /// root.
    pub(super) roots: Vec<PathBuf>,
    /// `terminal.read`, symlinks resolved.
    pub(super) read: Vec<PathBuf>,
    /// Why a path met while keeping a repository refuses the command.
    pub(super) refused: Option<String>,
    /// Why a denied link hiding a grant whole refuses the command (the
    /// file tools, which judge such links by what they reach, go on).
    pub(super) hides_grant: Option<String>,
    /// Bytes of repository metadata read so far.
    pub(super) read_bytes: u64,
    /// The directories with the most entries seen so far, most first: the
    /// refusal past [`MAX_ENTRIES`] names them.
    pub(super) largest: Vec<(PathBuf, usize)>,
    /// The directories kept repository paths lie below that are pinned
    /// already, with every one above them up to their grant: repositories
    /// deep in one tree share them, and each is looked at once.
    pub(super) pinned: std::collections::HashSet<PathBuf>,
}

/// How many of the largest directories a refusal names.
const NAMED: usize = 3;

impl Walk<'_> {
    /// Walks `real` (the grant `written` with symlinks resolved): deny rules
    /// are matched against both spellings, as the file rules would see them.
    pub(super) fn dir(
        &mut self,
        written: &Path,
        real: &Path,
        writable: bool,
    ) -> Result<(), String> {
        if let Some(watch) = self.watch.as_deref_mut() {
            watch.dir(real, written);
        }
        let listed = std::fs::read_dir(real).or_else(|e| {
            // A directory of toolhost's user a command made unlistable in
            // its write grant is given back (see `give_back_own_dir`).
            if writable
                && e.raw_os_error() == Some(libc::EACCES)
                && crate::capability::file::fd_path::give_back_own_dir(real).unwrap_or(false)
            {
                std::fs::read_dir(real)
            } else {
                Err(e)
            }
        });
        let entries = match listed {
            Ok(entries) => entries,
            // Listed a moment ago, gone now: what it held is not known.
            Err(e) if matches!(e.raw_os_error(), Some(libc::ENOENT | libc::ENOTDIR)) => {
                return Err(format!("{}: {MOVED} ({e})", real.display()));
            }
            Err(e) => {
                return match out_of_reach(real, writable, &e) {
                    Reach::None => Ok(()),
                    // Names inside are reachable if known: hidden whole.
                    Reach::Search => {
                        self.mounts.mask(real);
                        Ok(())
                    }
                    Reach::Owner => Err(unlisted(real, &e)),
                };
            }
        };
        // Listed whole before anything is planned from it.
        let mut listed = Vec::new();
        for entry in entries {
            let entry = entry.map_err(|e| unlisted(real, &e))?;
            let file_type = entry.file_type().map_err(|e| unlisted(real, &e))?;
            listed.push((entry.file_name(), file_type));
        }
        self.note_size(real, listed.len());
        // A git directory other than `.git` (a bare repository, a separate
        // git directory), known by what it holds, as git knows it.
        if writable
            && real.file_name().is_some_and(|name| name != ".git")
            && is_git_dir(real, &listed)
        {
            self.protect_git(real)?;
        }
        for (name, file_type) in listed {
            self.entries += 1;
            if self.entries > MAX_ENTRIES {
                return Err(self.too_many("every path file.deny masks"));
            }
            let real_path = real.join(&name);
            let written_path = written.join(&name);
            // The directory walked is allowed (else it is masked whole, not
            // walked), so only the entry itself needs matching.
            let rules = &self.profile.file;
            let denied = rules.denies_entry(&real_path).is_some()
                || (written_path != real_path && rules.denies_entry(&written_path).is_some());
            if denied {
                // A rule that matches because of a directory above the entry
                // (`config/master.key`, `**/.aws/credentials`) would stop
                // matching were that directory renamed: it is pinned.
                if writable
                    && !self.denied_anywhere(&name)
                    && let Some(root) = self.root_of(real).map(Path::to_path_buf)
                {
                    self.pin_between(&root, real);
                }
                if file_type.is_symlink() {
                    self.mask_target(&real_path);
                } else {
                    self.mounts.mask(&real_path);
                }
                if file_type.is_file() {
                    self.note_linked(&real_path);
                } else if file_type.is_dir() {
                    self.look_inside(&real_path, writable)?;
                }
                continue;
            }
            if writable && name == ".git" {
                self.protect_git(&real_path)?;
            }
            if file_type.is_dir() && !self.roots.contains(&real_path) {
                self.dir(&written_path, &real_path, writable)?;
            }
        }
        Ok(())
    }
}

impl Walk<'_> {
    /// Masks what the denied symbolic link `link` leads to, where a grant
    /// or `terminal.read` shows it: what is written through the denied
    /// name lands there. A link that leads nowhere yet is watched where it
    /// would lead, so that a plan made before that appears is not used
    /// after.
    fn mask_target(&mut self, link: &Path) {
        self.hold_way(link);
        let shown = |path: &Path| {
            self.roots
                .iter()
                .chain(&self.read)
                .any(|root| path.starts_with(root))
        };
        match link.canonicalize() {
            Ok(target) => {
                // Leading to a grant or above one, it would hide the
                // grant whole (and with it the command's directory): the
                // refusal says which link, for whoever can remove it.
                if self.roots.iter().any(|root| root.starts_with(&target)) {
                    self.hides_grant.get_or_insert_with(|| {
                        format!(
                            "{} is a name file.deny denies and a symbolic link to {}, which holds \
                             a granted directory: a command would see that directory hidden \
                             whole; remove the link from outside the sandbox (no command may)",
                            crate::escape::escape(&link.to_string_lossy()),
                            crate::escape::escape(&target.to_string_lossy())
                        )
                    });
                }
                if shown(&target) {
                    self.mounts.mask(&target);
                    if target.is_file() {
                        self.note_linked(&target);
                    }
                }
            }
            Err(_) => {
                if let Some(target) = dangling(link)
                    && shown(&target)
                    && let Some(watch) = self.watch.as_deref_mut()
                {
                    watch.target(&target);
                }
            }
        }
    }

    /// Keeps `link` leading where it does for the life of the sandbox:
    /// resolving it as the kernel would, each symbolic link met (`link`
    /// itself first) is kept as it reads where a command could change it
    /// (the guard puts it back), and each directory passed through there is
    /// pinned (it cannot be renamed or removed). Otherwise a command that
    /// removes or re-points the owner's denied `.env -> env.local`, or moves
    /// a directory on its way, unmasks `env.local` for the next plan, which
    /// finds the link as the command left it. What is masked (beneath a
    /// denied directory) is out of a command's reach already.
    fn hold_way(&mut self, link: &Path) {
        use std::ffi::OsString;
        let mut real = PathBuf::from("/");
        let mut rest: Vec<OsString> = link
            .components()
            .rev()
            .map(|c| c.as_os_str().to_os_string())
            .collect();
        let mut hops = 0;
        while let Some(name) = rest.pop() {
            if name == "/" || name == "." {
                continue;
            }
            if name == ".." {
                real.pop();
                continue;
            }
            let next = real.join(&name);
            let Ok(meta) = next.symlink_metadata() else {
                return;
            };
            let masked = |path: &Path| self.profile.file.is_denied(path).is_some();
            if meta.file_type().is_symlink() {
                hops += 1;
                let Ok(text) = std::fs::read_link(&next) else {
                    return;
                };
                // The kernel gives up past 40 links; so does the plan.
                if hops > 40 {
                    return;
                }
                if !next.parent().is_some_and(masked) {
                    self.keep_link(&next);
                }
                if text.is_absolute() {
                    real = PathBuf::from("/");
                }
                rest.extend(
                    text.components()
                        .rev()
                        .map(|c| c.as_os_str().to_os_string()),
                );
            } else {
                if meta.is_dir()
                    && !rest.is_empty()
                    && !masked(&next)
                    && let Some(root) = self.writable_grant(&next).map(Path::to_path_buf)
                {
                    self.pin_between(&root, &next);
                }
                real = next;
            }
        }
    }

    /// Notes the regular file `path` if it has more than one name, so
    /// that [`Self::other_names`] masks the others.
    fn note_linked(&mut self, path: &Path) {
        if let Ok(meta) = path.symlink_metadata()
            && meta.is_file()
            && meta.nlink() > 1
        {
            self.linked.push((meta.dev(), meta.ino()));
        }
    }

    /// Looks inside the denied directory `dir` (masked whole, so not
    /// walked) for what is reached under other names: regular files with
    /// more than one name, and what symbolic links in it lead to.
    fn look_inside(&mut self, dir: &Path, writable: bool) -> Result<(), String> {
        let mut stack = vec![dir.to_path_buf()];
        while let Some(dir) = stack.pop() {
            // A name made in it later has the plan made again.
            if let Some(watch) = self.watch.as_deref_mut() {
                watch.dir(&dir, &dir);
            }
            let entries = match std::fs::read_dir(&dir) {
                Ok(entries) => entries,
                Err(e) if matches!(e.raw_os_error(), Some(libc::ENOENT | libc::ENOTDIR)) => {
                    return Err(format!("{}: {MOVED} ({e})", dir.display()));
                }
                Err(e) => match out_of_reach(&dir, writable, &e) {
                    Reach::None | Reach::Search => continue,
                    Reach::Owner => return Err(unlisted(&dir, &e)),
                },
            };
            let mut here = 0;
            for entry in entries {
                let entry = entry.map_err(|e| unlisted(&dir, &e))?;
                let file_type = entry.file_type().map_err(|e| unlisted(&dir, &e))?;
                self.entries += 1;
                here += 1;
                if self.entries > MAX_ENTRIES {
                    self.note_size(&dir, here);
                    return Err(self.too_many("every path file.deny masks"));
                }
                let path = entry.path();
                if file_type.is_dir() {
                    stack.push(path);
                } else if file_type.is_symlink() {
                    self.mask_target(&path);
                } else if file_type.is_file() {
                    self.note_linked(&path);
                }
            }
            self.note_size(&dir, here);
        }
        Ok(())
    }

    /// Whether a deny rule matches an entry named `name` wherever it lies
    /// (`**/.env`), so that renaming a directory above it takes nothing out
    /// of the rule's reach.
    fn denied_anywhere(&self, name: &std::ffi::OsStr) -> bool {
        let elsewhere = Path::new("/\u{1}toolhost-elsewhere").join(name);
        self.profile.file.denies_entry(&elsewhere).is_some()
    }

    /// Notes that `dir` holds `entries`, keeping the largest few.
    fn note_size(&mut self, dir: &Path, entries: usize) {
        if self.largest.len() == NAMED && self.largest[NAMED - 1].1 >= entries {
            return;
        }
        self.largest.retain(|(seen, _)| seen != dir);
        self.largest.push((dir.to_path_buf(), entries));
        self.largest.sort_by_key(|(_, n)| std::cmp::Reverse(*n));
        self.largest.truncate(NAMED);
    }

    /// The refusal past [`MAX_ENTRIES`], when looking for `what`: it names
    /// where the entries are, so whoever owns the files knows what to
    /// remove (a command that made them cannot: no command runs in these
    /// grants until the count is under the budget again).
    fn too_many(&self, what: &str) -> String {
        let largest: Vec<String> = self
            .largest
            .iter()
            .map(|(dir, n)| format!("{} ({n} entries)", dir.display()))
            .collect();
        format!(
            "the granted directories hold more than {MAX_ENTRIES} entries, too many to find {what}; \
             the largest: {}; remove entries there from outside the sandbox, or grant smaller \
             directories (file.write, file.read, terminal.read)",
            largest.join(", ")
        )
    }

    /// Masks every other name in the grants of a denied file with more
    /// than one (a hard link made to read it by another name). Only where
    /// there is such a file: this walk looks at each file's inode.
    pub(super) fn other_names(&mut self) -> Result<(), String> {
        if self.linked.is_empty() {
            return Ok(());
        }
        let mut stack = self.roots.clone();
        let mut seen = 0;
        while let Some(dir) = stack.pop() {
            let entries = std::fs::read_dir(&dir).map_err(|e| unlisted(&dir, &e))?;
            let mut here = 0;
            for entry in entries {
                let entry = entry.map_err(|e| unlisted(&dir, &e))?;
                seen += 1;
                here += 1;
                if seen > MAX_ENTRIES {
                    self.note_size(&dir, here);
                    return Err(self.too_many("every name of a denied file"));
                }
                let path = entry.path();
                let Ok(meta) = path.symlink_metadata() else {
                    continue;
                };
                if meta.is_dir() && !self.roots.contains(&path) {
                    stack.push(path);
                } else if meta.is_file() && self.linked.contains(&(meta.dev(), meta.ino())) {
                    self.mounts.mask(&path);
                }
            }
        }
        Ok(())
    }
}

/// Whether `dir`, whose entries are `listed`, is a git directory (see
/// [`is_git_dir_by`]). A repository once kept has its configuration
/// read-only, so a command cannot take every mark away.
fn is_git_dir(dir: &Path, listed: &[(std::ffi::OsString, std::fs::FileType)]) -> bool {
    is_git_dir_by(
        |name| listed.iter().any(|(found, _)| found == name),
        |name| dir.join(name).metadata().is_ok_and(|m| m.is_dir()),
        || {
            super::beneath::read_small(&dir.join("config"), 1 << 16)
                .ok()
                .flatten()
        },
    )
}

/// Where the denied link `link`, which leads nowhere, would lead: its
/// links followed while they exist, the last name's directory resolved.
pub(super) fn dangling(link: &Path) -> Option<PathBuf> {
    let mut path = link.to_path_buf();
    for _ in 0..40 {
        let text = std::fs::read_link(&path).ok()?;
        let parent = path.parent()?.canonicalize().ok()?;
        let next = normalize(&parent.join(text));
        match next.symlink_metadata() {
            Ok(meta) if meta.file_type().is_symlink() => path = next,
            Ok(_) => return None,
            // Its directory may be missing too (`cfgdir/gitcfg` before
            // `cfgdir` is made): the nearest directory that exists, and the
            // rest as written.
            Err(_) => return existing_prefix(&next),
        }
    }
    None
}

/// `path` (absolute, without `.` or `..`) with its longest existing
/// ancestor's symbolic links resolved and the rest as written.
fn existing_prefix(path: &Path) -> Option<PathBuf> {
    let base = path
        .ancestors()
        .skip(1)
        .find(|a| a.symlink_metadata().is_ok())?;
    let real = base.canonicalize().ok()?;
    Some(real.join(path.strip_prefix(base).ok()?))
}

/// `path` with `.` and `..` taken out lexically.
fn normalize(path: &Path) -> PathBuf {
    let mut out = PathBuf::from("/");
    for component in path.components() {
        match component {
            std::path::Component::ParentDir => {
                out.pop();
            }
            std::path::Component::Normal(name) => out.push(name),
            _ => {}
        }
    }
    out
}

/// Who may reach into a directory the walk could not list.
enum Reach {
    /// No command: it is passed over.
    None,
    /// Commands may search it (a name inside is reachable if known): it
    /// is masked whole.
    Search,
    /// Its owner, toolhost's user, could make it readable: the command is
    /// refused.
    Owner,
}

/// Who may reach into the directory `path`, which could not be listed
/// (`error`). In a read-only grant (a mode change there is refused), or,
/// as a user other than root, owned by another user, no command can make
/// it readable: it is passed over if commands (which run as toolhost's
/// user there) cannot search it either, else masked whole. A directory of
/// toolhost's user in a writable grant is not: a command could have made
/// it unreadable, to hide it from the plan, and make it readable again.
fn out_of_reach(path: &Path, writable: bool, error: &std::io::Error) -> Reach {
    if !matches!(error.raw_os_error(), Some(libc::EACCES | libc::EPERM)) {
        return Reach::Owner;
    }
    // SAFETY: geteuid cannot fail.
    let euid = unsafe { libc::geteuid() };
    let theirs = euid != 0 && path.symlink_metadata().is_ok_and(|m| m.uid() != euid);
    if writable && !theirs {
        return Reach::Owner;
    }
    let searchable = std::ffi::CString::new(path.as_os_str().as_encoded_bytes()).is_ok_and(|c| {
        // SAFETY: a NUL-terminated path.
        unsafe { libc::faccessat(libc::AT_FDCWD, c.as_ptr(), libc::X_OK, libc::AT_EACCESS) == 0 }
    });
    if searchable {
        Reach::Search
    } else {
        Reach::None
    }
}

/// Why the command is refused when `dir` of a grant could not be listed.
fn unlisted(dir: &Path, error: &std::io::Error) -> String {
    format!(
        "{} could not be listed ({error}), so what file.deny masks and the repositories to keep \
         in it are not known; commands are refused until it can be: give it back its owner's \
         read and search permission (chmod u+rx), move it to a path shorter than {} bytes, or \
         take it out of the grants",
        crate::escape::escape(&dir.to_string_lossy()),
        libc::PATH_MAX
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::capability::file::rules::wrote_by_git;

    fn listed(dir: &Path) -> Vec<(std::ffi::OsString, std::fs::FileType)> {
        std::fs::read_dir(dir)
            .unwrap()
            .map(|e| {
                let e = e.unwrap();
                (e.file_name(), e.file_type().unwrap())
            })
            .collect()
    }

    #[test]
    fn a_git_directory_is_known_whichever_marks_a_command_left() {
        use proptest::prelude::*;
        proptest!(ProptestConfig::with_cases(64), |(
            head in any::<bool>(),
            objects in 0u8..3,
            refs in 0u8..3,
            config in any::<bool>(),
        )| {
            // 0: missing, 1: a directory, 2: a link to one.
            let dir = tempfile::tempdir().unwrap();
            let d = dir.path();
            for (name, how) in [("objects", objects), ("refs", refs)] {
                match how {
                    1 => std::fs::create_dir(d.join(name)).unwrap(),
                    2 => {
                        std::fs::create_dir(d.join(format!("{name}.d"))).unwrap();
                        std::os::unix::fs::symlink(format!("{name}.d"), d.join(name)).unwrap();
                    }
                    _ => {}
                }
            }
            if head {
                std::fs::write(d.join("HEAD"), "ref: refs/heads/main\n").unwrap();
            }
            if config {
                std::fs::write(
                    d.join("config"),
                    "[core]\n\trepositoryformatversion = 0\n\tbare = true\n",
                )
                .unwrap();
            }
            let both = objects > 0 && refs > 0;
            let git_knows = both || (head && (objects > 0 || refs > 0));
            prop_assert_eq!(is_git_dir(d, &listed(d)), git_knows || config);
        });
    }

    #[test]
    fn past_the_budget_the_refusal_names_where_the_entries_are() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().canonicalize().unwrap();
        for (name, files) in [("junk", MAX_ENTRIES), ("src", 10)] {
            std::fs::create_dir(root.join(name)).unwrap();
            for n in 0..files {
                std::fs::write(root.join(name).join(n.to_string()), "").unwrap();
            }
        }
        let mut profile = Profile::deny_all("p", &root);
        let none: [&str; 0] = [];
        profile.file = crate::capability::file::PathRules::new(none, [&root], ["**/.env"]).unwrap();
        let refused = super::super::plan::plan(&profile, None).err().unwrap();
        let junk = root.join("junk").display().to_string();
        assert!(refused.contains(&junk), "{refused}");
        assert!(refused.contains("remove entries there"), "{refused}");
        // Under the budget again, the command runs.
        std::fs::remove_dir_all(root.join("junk")).unwrap();
        assert!(super::super::plan::plan(&profile, None).is_ok());
    }

    #[test]
    fn only_gits_own_configuration_marks_a_git_directory() {
        assert!(wrote_by_git("[core]\n\trepositoryformatversion = 0\n"));
        assert!(wrote_by_git("[Core]\nRepositoryFormatVersion=1\n"));
        assert!(!wrote_by_git("[corefoo]\nrepositoryformatversion = 0\n"));
        assert!(!wrote_by_git("[server]\nport = 80\n"));
        assert!(!wrote_by_git("repositoryformatversion = 0\n"));
    }
}
