//! toolhost's own paths in a command's sandbox: hidden ones masked,
//! read-only ones mounted read-only where a writable grant shows them, and
//! each directory leading to them inside a writable grant made a mount
//! point of its own, so that no rename can move it or put another file in
//! an own path's place (the kernel refuses to rename over a mount point or
//! move one, in the namespace that has it).

use std::io::Write as _;
use std::os::unix::fs::OpenOptionsExt as _;
use std::path::{Path, PathBuf};

use super::spec::MountKind;
use super::watch::Watch;
use crate::policy::{OwnPath, OwnPaths, Placeholder, Protection};

/// The mounts of a sandbox being planned, one per path.
pub(super) trait MountTable {
    /// Puts `kind` at `path`, replacing what was planned there.
    fn add(&mut self, path: PathBuf, kind: MountKind);
    /// Masks `path` if it exists.
    fn mask(&mut self, path: &Path);
    /// Whether something is mounted at `path`.
    fn has(&self, path: &Path) -> bool;
    /// The deepest mount at or above `path`, when it shows the host's
    /// files there (read-only or read-write), with its kind.
    fn covering(&self, path: &Path) -> Option<(PathBuf, MountKind)>;
    /// Mounts strictly inside `dir` made read-only, or left out when
    /// `hidden`.
    fn restrict_inside(&mut self, dir: &Path, hidden: bool);
    /// Keeps `path` absent: what a command makes there is removed, and its
    /// sandbox ended, as soon as it appears.
    fn keep_absent(&mut self, path: PathBuf);
    /// Keeps the own path `path` absent (see [`Self::keep_absent`]): what
    /// appears there beside a sandbox built ahead that ran no command is
    /// the operator's, not a command's.
    fn keep_own_absent(&mut self, path: PathBuf) {
        self.keep_absent(path);
    }
    /// Keeps the own file `path`, found as `meta` in the writable grant
    /// `grant`, as it is (see `Guard::own_file`).
    fn keep_own(&mut self, grant: &Path, path: PathBuf, meta: &std::fs::Metadata);
}

/// Adds to `mounts` what keeps `own` out of reach: call after every grant
/// and mask is planned. A missing own path inside a writable grant is made
/// as toolhost would make it (the allowlist, the plugin directory, with the
/// directories leading to them) and then protected; one toolhost would not
/// make (the configuration a later start reads) is kept absent from the
/// first missing directory down. `Err` when an own path is named through a
/// symlink a command could replace, or cannot be made.
pub(super) fn protect(
    own: &OwnPaths,
    mounts: &mut impl MountTable,
    mut watch: Option<&mut Watch>,
) -> Result<(), String> {
    for path in own.iter() {
        refuse_replaceable_link(path, mounts)?;
        let real = &path.real;
        // A grant inside it gets no more than the path itself allows.
        mounts.restrict_inside(real, path.protection == Protection::Hidden);
        let Some((cover, kind)) = mounts.covering(real) else {
            continue;
        };
        let writable = kind == MountKind::ReadWrite;
        // The first name on the way that is missing, or the path itself.
        let missing = real
            .ancestors()
            .take_while(|at| at.starts_with(&cover) && at.symlink_metadata().is_err())
            .last()
            .unwrap_or(real)
            .to_path_buf();
        if let (Some(watch), Some(parent)) = (watch.as_deref_mut(), missing.parent()) {
            watch.dir(parent, parent);
        }
        if real.symlink_metadata().is_err() {
            if !writable {
                continue;
            }
            match path.placeholder {
                Some(made) => make(real, made).map_err(|e| {
                    format!(
                        "{} ({}) {} does not exist and could not be made to protect it from \
                         commands: {e}; create it, or take its directory out of file.write",
                        path.what,
                        path.key,
                        real.display()
                    )
                })?,
                None => {
                    mounts.keep_own_absent(missing.clone());
                    pin_between(&cover, &missing, mounts);
                    continue;
                }
            }
        }
        match path.protection {
            Protection::Hidden => mounts.mask(real),
            Protection::ReadOnly if writable => mounts.add(real.clone(), MountKind::ReadOnly),
            Protection::ReadOnly => {}
        }
        if writable {
            pin_between(&cover, real, mounts);
            if let Ok(meta) = real.symlink_metadata()
                && meta.is_file()
            {
                mounts.keep_own(&cover, real.clone(), &meta);
            }
        }
    }
    Ok(())
}

/// The own files in the directories a sandbox shows (`shown`: its grants
/// and `terminal.read`) that have another name (a hard link a command made
/// to one, or to the copy the guard set aside, which the operator then
/// moved back; the other name may lie in a grant of another profile), by
/// device and inode: the walk masks them under every name.
pub(super) fn linked(own: &OwnPaths, shown: &[PathBuf]) -> Vec<(u64, u64)> {
    use std::os::unix::fs::MetadataExt as _;
    own.iter()
        .filter(|path| shown.iter().any(|dir| path.real.starts_with(dir)))
        .filter_map(|path| path.real.symlink_metadata().ok())
        .filter(|meta| meta.is_file() && meta.nlink() > 1)
        .map(|meta| (meta.dev(), meta.ino()))
        .collect()
}

/// `Err` when `own` is named through a symbolic link that lies in a
/// writable grant: toolhost opens the path by that name, and a command
/// could make the link lead elsewhere (or replace it with a file).
fn refuse_replaceable_link(own: &OwnPath, mounts: &impl MountTable) -> Result<(), String> {
    for at in own.path.ancestors() {
        let is_link = at
            .symlink_metadata()
            .is_ok_and(|meta| meta.file_type().is_symlink());
        let Some(parent) = at.parent().filter(|_| is_link) else {
            continue;
        };
        let parent = parent
            .canonicalize()
            .unwrap_or_else(|_| parent.to_path_buf());
        if let Some((grant, MountKind::ReadWrite)) = mounts.covering(&parent) {
            return Err(format!(
                "{} ({}) is named as {}, through the symbolic link {}, which lies in the \
                 writable grant {}: a command could replace the link; name the real path \
                 ({}) in the configuration, or move the link out of the grant",
                own.what,
                own.key,
                own.path.display(),
                at.display(),
                grant.display(),
                own.real.display()
            ));
        }
    }
    Ok(())
}

/// Makes every directory strictly between `cover` (a writable mount) and
/// `path` a mount point of its own, read-write as before.
fn pin_between(cover: &Path, path: &Path, mounts: &mut impl MountTable) {
    for dir in path.ancestors().skip(1) {
        if dir == cover || !dir.starts_with(cover) {
            break;
        }
        let is_dir = dir
            .symlink_metadata()
            .is_ok_and(|meta| meta.file_type().is_dir());
        if is_dir && !mounts.has(dir) {
            mounts.add(dir.to_path_buf(), MountKind::ReadWrite);
        }
    }
}

/// Makes `path` as `made` says, with the directories leading to it; one
/// that appeared meanwhile is taken as it is.
fn make(path: &Path, made: Placeholder) -> std::io::Result<()> {
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent)?;
    }
    let created = match made {
        Placeholder::Dir => std::fs::create_dir(path),
        Placeholder::File(content) => std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(path)
            .and_then(|mut file| file.write_all(content.as_bytes())),
    };
    match created {
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => Ok(()),
        other => other,
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;

    /// Mounts as a plain map, as the plan keeps them.
    #[derive(Default)]
    struct Table(BTreeMap<PathBuf, MountKind>, Vec<PathBuf>);

    impl MountTable for Table {
        fn add(&mut self, path: PathBuf, kind: MountKind) {
            self.0.insert(path, kind);
        }
        fn mask(&mut self, path: &Path) {
            if path.exists() {
                let kind = if path.is_dir() {
                    MountKind::MaskDir
                } else {
                    MountKind::MaskFile
                };
                self.0.insert(path.to_path_buf(), kind);
            }
        }
        fn has(&self, path: &Path) -> bool {
            self.0.contains_key(path)
        }
        fn covering(&self, path: &Path) -> Option<(PathBuf, MountKind)> {
            let (mounted, kind) = self
                .0
                .iter()
                .filter(|(mounted, _)| path.starts_with(mounted))
                .max_by_key(|(mounted, _)| mounted.components().count())?;
            matches!(kind, MountKind::ReadOnly | MountKind::ReadWrite)
                .then(|| (mounted.clone(), *kind))
        }
        fn keep_absent(&mut self, path: PathBuf) {
            self.1.push(path);
        }
        fn keep_own(&mut self, _: &Path, _: PathBuf, _: &std::fs::Metadata) {}
        fn restrict_inside(&mut self, dir: &Path, hidden: bool) {
            self.0.retain(|mounted, kind| {
                let inside = mounted != dir && mounted.starts_with(dir);
                if inside && *kind == MountKind::ReadWrite {
                    *kind = MountKind::ReadOnly;
                }
                !(inside && hidden)
            });
        }
    }

    #[test]
    fn own_paths_are_masked_made_read_only_and_their_directories_pinned() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().canonicalize().unwrap();
        std::fs::create_dir_all(root.join("conf/plugins/sub")).unwrap();
        std::fs::write(root.join("conf/toolhost.toml"), "").unwrap();
        let mut own = OwnPaths::none();
        own.add(
            "configuration",
            "--config",
            &root.join("conf/toolhost.toml"),
            Protection::Hidden,
        );
        own.add(
            "approvals allowlist",
            "approvals.allowlist",
            &root.join("conf/toolhost-approvals.json"),
            Protection::Hidden,
        )
        .placeholder = Some(Placeholder::File("{}\n"));
        own.add(
            "plugin directory",
            "plugins",
            &root.join("conf/plugins"),
            Protection::ReadOnly,
        );
        let mut mounts = Table::default();
        mounts.add(root.clone(), MountKind::ReadWrite);
        mounts.add(root.join("conf/plugins/sub"), MountKind::ReadWrite);
        protect(&own, &mut mounts, None).unwrap();
        let kind = |path: &str| mounts.0.get(&root.join(path)).copied();
        assert_eq!(kind("conf/toolhost.toml"), Some(MountKind::MaskFile));
        // The missing allowlist was made, to be masked.
        assert_eq!(
            kind("conf/toolhost-approvals.json"),
            Some(MountKind::MaskFile)
        );
        assert_eq!(
            std::fs::read_to_string(root.join("conf/toolhost-approvals.json")).unwrap(),
            "{}\n"
        );
        assert_eq!(kind("conf/plugins"), Some(MountKind::ReadOnly));
        // A grant inside a read-only own directory is read-only too.
        assert_eq!(kind("conf/plugins/sub"), Some(MountKind::ReadOnly));
        // The directory holding them cannot be moved aside.
        assert_eq!(kind("conf"), Some(MountKind::ReadWrite));
        assert_eq!(kind(""), Some(MountKind::ReadWrite));
    }

    #[test]
    fn missing_own_paths_are_made_or_kept_absent_and_links_to_them_refused() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().canonicalize().unwrap();
        let mut own = OwnPaths::none();
        own.add(
            "approvals allowlist",
            "approvals.allowlist",
            &root.join(".toolhost/approvals.json"),
            Protection::Hidden,
        )
        .placeholder = Some(Placeholder::File("{}\n"));
        own.add(
            "plugin directory",
            "plugins",
            &root.join("plugins"),
            Protection::ReadOnly,
        )
        .placeholder = Some(Placeholder::Dir);
        own.add(
            "configuration",
            "--config",
            &root.join("conf/toolhost.toml"),
            Protection::Hidden,
        );
        let mut mounts = Table::default();
        mounts.add(root.clone(), MountKind::ReadWrite);
        protect(&own, &mut mounts, None).unwrap();
        let kind = |path: &str| mounts.0.get(&root.join(path)).copied();
        assert_eq!(kind(".toolhost/approvals.json"), Some(MountKind::MaskFile));
        assert_eq!(kind(".toolhost"), Some(MountKind::ReadWrite));
        assert_eq!(kind("plugins"), Some(MountKind::ReadOnly));
        assert!(root.join("plugins").is_dir());
        // The configuration is not made: its first missing name is kept.
        assert_eq!(mounts.1, vec![root.join("conf")]);
        assert!(!root.join("conf").exists());

        // Named through a symlink in the writable grant: refused.
        std::fs::create_dir(root.join("real")).unwrap();
        std::os::unix::fs::symlink(root.join("real"), root.join("link")).unwrap();
        let mut linked = OwnPaths::none();
        linked.add(
            "configuration",
            "--config",
            &root.join("link/toolhost.toml"),
            Protection::Hidden,
        );
        let mut mounts = Table::default();
        mounts.add(root.clone(), MountKind::ReadWrite);
        let refused = protect(&linked, &mut mounts, None).unwrap_err();
        assert!(refused.contains("symbolic link"), "{refused}");
        // Outside any writable grant, the link is nobody's to replace.
        let mut mounts = Table::default();
        mounts.add(root.clone(), MountKind::ReadOnly);
        protect(&linked, &mut mounts, None).unwrap();
    }
}
