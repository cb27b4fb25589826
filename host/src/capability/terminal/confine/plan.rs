//! What a command's sandbox contains, decided on the host from the profile:
//! the system directories read-only, each grant at its real path (read-write
//! only where the profile grants writing), a mask over everything inside the
//! grants that `file.deny` matches, read-only repository metadata inside
//! writable grants, and the private `/proc`, `/dev` and `/tmp`.

use std::collections::{BTreeMap, BTreeSet};
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use super::guard::Guard;
use super::spec::{CommandLimits, Mount, MountKind, Spec};
pub(super) use super::walk::Walk;
use super::watch::Watch;
use crate::capability::Profile;
use crate::policy::{Access, PermissionDecision};

/// Host directories every command sees read-only (those that exist): what
/// programs need to run. Home directories, `/root`, `/var`, `/run`, `/srv`,
/// `/mnt` and the host's `/tmp` are not among them.
const SYSTEM_DIRS: &[&str] = &[
    "/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/etc", "/opt",
];

/// One of [`SYSTEM_DIRS`]: mounted as the host has it, never idmapped.
pub(super) fn is_system(path: &Path) -> bool {
    SYSTEM_DIRS.iter().any(|dir| path == Path::new(dir))
}

/// The sandbox of a command under `profile`. Blocking: it walks the grants.
/// With a `watch`, every directory and file the plan is read from is
/// watched (before it is read), so a sandbox built ahead can tell when its
/// plan no longer holds.
pub(crate) fn plan(profile: &Profile, watch: Option<&mut Watch>) -> Result<Spec, String> {
    let settings = &profile.terminal;
    let mut mounts = Mounts::default();
    mounts.system();
    add_grants(profile, watch, &mut mounts, Purpose::Commands)?;
    mounts.refusal()?;
    let (mounts, guard) = mounts.into_list();
    Ok(Spec {
        mounts,
        guard,
        host_network: settings.network == crate::capability::terminal::TerminalNetwork::Host,
        proxy: None,
        limits: CommandLimits {
            processes: settings.max_processes,
            memory: settings.memory,
            file_size: settings.max_file_size,
            open_files: 1024,
            tmp_size: settings.tmp_size,
        },
        pids: None,
        cpu: None,
        session: false,
        identity: super::spec::host_id(settings.sandbox_id),
        landlock: settings.landlock,
    })
}

/// What a container of `profile` gets from the host, in order: the same
/// grants, `terminal.read` directories, masks and read-only repository
/// metadata as the kernel sandbox, without the host's system directories
/// (the image brings its own). Blocking: it walks the grants.
pub(crate) fn grant_mounts(
    profile: &Profile,
    watch: Option<&mut Watch>,
) -> Result<(Vec<Mount>, Guard), String> {
    let mut mounts = Mounts::default();
    add_grants(profile, watch, &mut mounts, Purpose::Commands)?;
    // The host's private `/etc` entries stay masked under any mount that
    // brings them in (`terminal.read = ["/etc"]`).
    for path in private_etc() {
        let covered = mounts.planned.iter().any(|(mounted, (kind, _))| {
            matches!(kind, MountKind::ReadOnly | MountKind::ReadWrite) && path.starts_with(mounted)
        });
        if covered {
            mounts.mask(path);
        }
    }
    mounts.refusal()?;
    Ok(mounts.into_list())
}

/// Whom a walk of the grants is for.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) enum Purpose {
    /// A command's sandbox.
    Commands,
    /// The file tools, for what commands may not write (see
    /// [`super::kept`]): a denied link that would hide a grant from a
    /// command does not refuse them, and toolhost's own files, which they
    /// know, are left out.
    FileTools,
}

/// Adds `terminal.read`, the grants and what lies masked or read-only
/// inside them; for commands, toolhost's own files too (whose placeholders
/// [`super::own::protect`] makes).
pub(super) fn add_grants(
    profile: &Profile,
    mut watch: Option<&mut Watch>,
    mounts: &mut Mounts,
    purpose: Purpose,
) -> Result<(), String> {
    let settings = &profile.terminal;
    let may_write = matches!(
        profile
            .permissions
            .decide(crate::capability::file::FILE_WRITE.as_str()),
        PermissionDecision::Allowed | PermissionDecision::NeedsApproval { .. }
    );
    let mut read = Vec::new();
    for dir in &settings.read {
        if let Ok(real) = dir.canonicalize()
            && let Ok(meta) = real.symlink_metadata()
        {
            mounts.bind(real.clone(), MountKind::ReadOnly, &meta);
            read.push(real);
        }
    }

    // The grants, at their real paths, unless a deny rule covers them.
    let mut grants = Vec::new();
    for (dir, access) in profile.file.grants() {
        if profile.file.is_denied(dir).is_some() {
            continue;
        }
        let Ok(real) = dir.canonicalize() else {
            continue;
        };
        let Ok(meta) = real.symlink_metadata() else {
            continue;
        };
        if !meta.is_dir() || profile.file.is_denied(&real).is_some() {
            continue;
        }
        let writable = may_write && access == Access::Write;
        let kind = if writable {
            MountKind::ReadWrite
        } else {
            MountKind::ReadOnly
        };
        mounts.bind(real.clone(), kind, &meta);
        grants.push((dir.to_path_buf(), real, writable));
    }

    // Inside them: what the deny rules match, and git metadata.
    let mut walk = Walk {
        profile,
        mounts,
        watch: watch.as_deref_mut(),
        entries: 0,
        repositories: 0,
        linked: Vec::new(),
        writable: grants
            .iter()
            .filter(|(_, _, writable)| *writable)
            .map(|(_, real, _)| real.clone())
            .collect(),
        roots: grants.iter().map(|(_, real, _)| real.clone()).collect(),
        read,
        refused: None,
        hides_grant: None,
        read_bytes: 0,
        largest: Vec::new(),
        pinned: Default::default(),
    };
    for (written, real, writable) in &grants {
        walk.dir(written, real, *writable)?;
    }
    let shown: Vec<PathBuf> = walk.roots.iter().chain(&walk.read).cloned().collect();
    walk.linked
        .extend(super::own::linked(profile.file.own(), &shown));
    walk.other_names()?;
    if let Some(why) = walk.refused.take() {
        return Err(why);
    }
    if let Some(why) = walk
        .hides_grant
        .take()
        .filter(|_| purpose == Purpose::Commands)
    {
        return Err(why);
    }
    for pattern in profile.file.deny_patterns() {
        // A deny rule naming one path outside the walked grants (a file in
        // `terminal.read`, say) is masked too.
        let path = Path::new(pattern);
        if path.is_absolute() && !pattern.contains(['*', '?', '[', '{']) {
            if let (Some(watch), Some(parent)) = (watch.as_deref_mut(), path.parent()) {
                watch.dir(parent, parent);
            }
            mounts.mask(path);
        }
    }
    match purpose {
        Purpose::Commands => super::own::protect(profile.file.own(), mounts, watch),
        Purpose::FileTools => Ok(()),
    }
}

/// The mounts being planned, one per path, with what each was found to be
/// (device and inode), and the paths no mount can keep.
#[derive(Default)]
pub(super) struct Mounts {
    planned: BTreeMap<PathBuf, (MountKind, Option<(u64, u64)>)>,
    /// Directories made mount points of their own so that they cannot be
    /// renamed or replaced (see [`super::git`]).
    pins: BTreeSet<PathBuf>,
    pub(super) guard: Guard,
    /// Why a path that had to be masked could not be looked at: the
    /// command is refused rather than run without that mask.
    refused: Option<String>,
}

impl Mounts {
    /// Why the plan cannot be used, if a mask could not be planned.
    pub(super) fn refusal(&mut self) -> Result<(), String> {
        self.refused.take().map_or(Ok(()), Err)
    }

    fn add(&mut self, path: PathBuf, kind: MountKind) {
        self.planned.insert(path, (kind, None));
    }

    /// Mounts `path` (found as `meta`, not following a last symlink) as
    /// `kind`: only that file or directory, or the sandbox is not built.
    pub(super) fn bind(&mut self, path: PathBuf, kind: MountKind, meta: &std::fs::Metadata) {
        self.planned
            .insert(path, (kind, Some((meta.dev(), meta.ino()))));
    }

    /// Makes the directory `path` (found as `meta`) a mount point of its
    /// own, writable as its grant is, unless something else is planned
    /// there.
    pub(super) fn pin(&mut self, path: PathBuf, meta: &std::fs::Metadata) {
        if !self.planned.contains_key(&path) {
            self.bind(path.clone(), MountKind::ReadWrite, meta);
            self.pins.insert(path);
        }
    }

    /// The system directories (or the links that stand for them), the
    /// host's unreadable `/etc` entries masked, and the private mounts.
    pub(super) fn system(&mut self) {
        for dir in SYSTEM_DIRS {
            let path = Path::new(dir);
            match path.symlink_metadata() {
                Ok(meta) if meta.file_type().is_symlink() => {
                    self.add(path.to_path_buf(), MountKind::Symlink);
                }
                Ok(meta) if meta.is_dir() => self.add(path.to_path_buf(), MountKind::ReadOnly),
                _ => {}
            }
        }
        for path in private_etc() {
            self.mask(path);
        }
        self.add("/proc".into(), MountKind::Proc);
        self.add("/dev".into(), MountKind::Dev);
        self.add("/tmp".into(), MountKind::Tmpfs);
    }

    /// Masks `path` if it exists (a directory or anything else).
    pub(super) fn mask(&mut self, path: &Path) {
        match path.symlink_metadata() {
            Ok(meta) if meta.is_dir() => {
                self.guard.spare(&meta);
                self.bind(path.to_path_buf(), MountKind::MaskDir, &meta)
            }
            Ok(meta) if !meta.file_type().is_symlink() => {
                self.guard.spare(&meta);
                self.bind(path.to_path_buf(), MountKind::MaskFile, &meta)
            }
            Ok(_) => {}
            // Gone since it was listed: nothing to mask.
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            // Past PATH_MAX, unsearchable, ...: whether it is there cannot
            // be told, so no command runs without its mask.
            Err(e) => {
                self.refused.get_or_insert_with(|| {
                    format!(
                        "{} must be masked, and cannot be looked at ({e}); move it where its \
                         path is shorter and its directory searchable, or deny its directory",
                        crate::escape::escape(&path.to_string_lossy())
                    )
                });
            }
        }
    }

    /// The mounts in the order they are made (by depth, so a directory is
    /// mounted before what lies inside it and masks come after their
    /// grant), and the guard. Nothing is mounted inside a mask, and a pin
    /// inside a read-only mount is left out (it would make it writable).
    pub(super) fn into_list(self) -> (Vec<Mount>, Guard) {
        // What a pin lies in: the nearest planned mount above it that is
        // not a pin itself.
        let enclosing = |path: &Path| {
            path.ancestors()
                .skip(1)
                .filter(|dir| !self.pins.contains(*dir))
                .find_map(|dir| self.planned.get(dir).map(|(kind, _)| *kind))
        };
        let masked = |path: &Path| {
            path.ancestors().skip(1).any(|dir| {
                matches!(
                    self.planned.get(dir),
                    Some((MountKind::MaskDir | MountKind::MaskFile, _))
                )
            })
        };
        let mut list: Vec<Mount> = self
            .planned
            .iter()
            .filter(|(path, _)| !masked(path))
            .filter(|(path, _)| {
                !self.pins.contains(*path) || enclosing(path) == Some(MountKind::ReadWrite)
            })
            .map(|(path, (kind, found))| Mount {
                path: path.clone(),
                kind: *kind,
                found: *found,
            })
            .collect();
        list.sort_by_key(|mount| mount.path.components().count());
        (list, self.guard)
    }
}

impl super::own::MountTable for Mounts {
    /// Planned against what is there now, so the launcher checks it is
    /// still the same file when it mounts it; a writable directory is a pin.
    fn add(&mut self, path: PathBuf, kind: MountKind) {
        match path.symlink_metadata() {
            Ok(meta) if kind == MountKind::ReadWrite && meta.is_dir() => self.pin(path, &meta),
            Ok(meta) => self.bind(path, kind, &meta),
            Err(_) => Mounts::add(self, path, kind),
        }
    }

    fn mask(&mut self, path: &Path) {
        Mounts::mask(self, path);
    }

    fn has(&self, path: &Path) -> bool {
        self.planned.contains_key(path)
    }

    fn covering(&self, path: &Path) -> Option<(PathBuf, MountKind)> {
        let (mounted, (kind, _)) = self
            .planned
            .iter()
            .filter(|(mounted, _)| path.starts_with(mounted))
            .max_by_key(|(mounted, _)| mounted.components().count())?;
        matches!(kind, MountKind::ReadOnly | MountKind::ReadWrite).then(|| (mounted.clone(), *kind))
    }

    fn keep_absent(&mut self, path: PathBuf) {
        // Guarded beneath the grant it would appear in (none: not visible).
        if let Some((grant, _)) = self.covering(&path) {
            self.guard.absent(&grant, path);
        }
    }

    fn keep_own_absent(&mut self, path: PathBuf) {
        if let Some((grant, _)) = self.covering(&path) {
            self.guard.own_absent(&grant, path);
        }
    }

    fn keep_own(&mut self, grant: &Path, path: PathBuf, meta: &std::fs::Metadata) {
        self.guard.own_file(grant, path, meta);
    }

    fn restrict_inside(&mut self, dir: &Path, hidden: bool) {
        self.planned.retain(|mounted, (kind, _)| {
            let inside = mounted != dir && mounted.starts_with(dir);
            if inside && *kind == MountKind::ReadWrite {
                *kind = MountKind::ReadOnly;
            }
            !(inside && hidden)
        });
    }
}

/// Entries of `/etc` that other users may not read (`shadow`, private
/// keys). Running as root, toolhost owns them, and so would the command's
/// uid; they are masked. Looked up once per process.
fn private_etc() -> &'static [PathBuf] {
    static PRIVATE: OnceLock<Vec<PathBuf>> = OnceLock::new();
    PRIVATE.get_or_init(|| {
        let mut found = Vec::new();
        let mut stack = vec![PathBuf::from("/etc")];
        while let Some(dir) = stack.pop() {
            let Ok(entries) = std::fs::read_dir(&dir) else {
                continue;
            };
            for entry in entries.flatten() {
                let Ok(meta) = entry.path().symlink_metadata() else {
                    continue;
                };
                let mode = meta.permissions().mode();
                if meta.file_type().is_symlink() {
                    continue;
                }
                let others = if meta.is_dir() { 0o005 } else { 0o004 };
                if mode & others != others {
                    found.push(entry.path());
                } else if meta.is_dir() {
                    stack.push(entry.path());
                }
            }
        }
        found
    })
}

/// The mounts a long-lived sandbox (a terminal session's, or its
/// container) was built with, and a watch that tells when a plan made now
/// might differ. A session checks before each command: where the walk's
/// answer may have changed (a new directory, an entry `file.deny` matches),
/// the grants are walked again, and mounts that no longer match the plan
/// (a path to mask that was not there) end the sandbox; the session's next
/// sandbox is built from the new plan.
pub(crate) struct Planned {
    mounts: Vec<Mount>,
    guard: Guard,
    watch: Option<Watch>,
    /// Planned by [`grant_mounts`] (a container) rather than [`plan`].
    grants_only: bool,
}

impl Planned {
    /// The mounts of `profile`'s long-lived sandbox, their guard and watch
    /// (none where the grants cannot be watched: then each check walks
    /// them). Blocking.
    pub(crate) fn new(profile: &Profile, grants_only: bool) -> Result<(Self, Vec<Mount>), String> {
        let (mounts, guard, watch) = Self::walk(profile, grants_only)?;
        let planned = Self {
            mounts: mounts.clone(),
            guard,
            watch,
            grants_only,
        };
        Ok((planned, mounts))
    }

    /// Of a sandbox planned elsewhere, from its `mounts`, `guard` and `watch`.
    pub(crate) fn of(mounts: Vec<Mount>, guard: Guard, watch: Option<Watch>) -> Self {
        Self {
            mounts,
            guard,
            watch,
            grants_only: false,
        }
    }

    fn walk(
        profile: &Profile,
        grants_only: bool,
    ) -> Result<(Vec<Mount>, Guard, Option<Watch>), String> {
        let mut watch = Watch::new(profile).ok();
        let (mounts, guard) = if grants_only {
            grant_mounts(profile, watch.as_mut())?
        } else {
            let spec = plan(profile, watch.as_mut())?;
            (spec.mounts, spec.guard)
        };
        if watch.as_ref().is_some_and(|w| w.broken().is_some()) {
            watch = None;
        }
        Ok((mounts, guard, watch))
    }

    /// What the host checks and puts back while the sandbox lives.
    pub(crate) fn guard(&self) -> &Guard {
        &self.guard
    }

    /// `Ok` if the sandbox, just built, holds the plan (see [`verify`]).
    /// Blocking.
    pub(crate) fn verify(&self, profile: &Profile) -> Result<(), String> {
        verify(profile, &self.mounts, self.watch.as_ref(), self.grants_only)
    }

    /// `Ok` while the sandbox's mounts are still those a plan made now
    /// would make; `Err` names what is not. What the guard keeps is put
    /// back first, so that a plan made now does not take it in. Blocking.
    pub(crate) fn still_holds(&mut self, profile: &Profile) -> Result<(), String> {
        self.guard.undo()?;
        if self
            .watch
            .as_ref()
            .is_some_and(|watch| watch.unchanged(profile).is_ok())
        {
            return Ok(());
        }
        let (mounts, guard, watch) = Self::walk(profile, self.grants_only)?;
        if let Some(new) = mounts.iter().find(|m| !self.mounts.contains(m)) {
            return Err(match new.kind {
                MountKind::MaskFile | MountKind::MaskDir => format!(
                    "file.deny now matches {}, which the session's sandbox shows",
                    new.path.display()
                ),
                _ => format!("{} is now mounted otherwise", new.path.display()),
            });
        }
        if let Some(gone) = self.mounts.iter().find(|m| !mounts.contains(m)) {
            return Err(format!("{} is no longer mounted so", gone.path.display()));
        }
        if guard != self.guard {
            return Err("repository metadata changed since the sandbox was built".into());
        }
        self.watch = watch;
        Ok(())
    }
}

/// Whether a sandbox whose mounts are made holds `mounts`, planned under
/// `watch`: nothing moved inside the grants between the walk and the end
/// of mounting (what was moved could have escaped a mask), and a plan made
/// now makes the same mounts (a directory created meanwhile holds nothing
/// the plan missed). Without a watch, the second alone. Blocking.
pub(crate) fn verify(
    profile: &Profile,
    mounts: &[Mount],
    watch: Option<&Watch>,
    grants_only: bool,
) -> Result<(), String> {
    match watch.map(|watch| watch.changes(profile)) {
        Some(Ok(None)) => return Ok(()),
        Some(Ok(Some(change))) if change.moved => return Err(change.reason),
        _ => {}
    }
    let now = if grants_only {
        grant_mounts(profile, None)?.0
    } else {
        plan(profile, None)?.mounts
    };
    if now == mounts {
        Ok(())
    } else {
        Err("the grants changed while the sandbox was built".into())
    }
}

/// [`Planned::still_holds`] off the async threads: `None` while it holds,
/// else why not.
pub(crate) async fn still_holds(
    planned: &std::sync::Arc<std::sync::Mutex<Planned>>,
    profile: &std::sync::Arc<Profile>,
) -> Option<String> {
    let (planned, profile) = (planned.clone(), profile.clone());
    tokio::task::spawn_blocking(move || {
        planned
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .still_holds(&profile)
            .err()
    })
    .await
    .unwrap_or_else(|e| Some(format!("checking the sandbox's mounts: {e}")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_container_reading_etc_gets_the_private_entries_masked() {
        let mut profile = Profile::deny_all("p", "/w");
        profile.terminal.read = vec![PathBuf::from("/etc")];
        let (mounts, _) = grant_mounts(&profile, None).unwrap();
        let first = mounts.first().unwrap();
        assert_eq!(
            (first.path.as_path(), first.kind),
            (Path::new("/etc"), MountKind::ReadOnly)
        );
        let mut masked: Vec<_> = mounts
            .iter()
            .filter(|m| matches!(m.kind, MountKind::MaskFile | MountKind::MaskDir))
            .map(|m| m.path.clone())
            .collect();
        let mut private = private_etc().to_vec();
        masked.sort();
        private.sort();
        assert_eq!(masked, private);
        // Nothing of the host's system comes with it.
        assert!(
            mounts.iter().all(|m| m.path.starts_with("/etc")),
            "{mounts:?}"
        );
    }
}
