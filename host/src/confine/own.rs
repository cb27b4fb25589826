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
use crate::policy::{OwnPaths, Protection};

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
}

/// Adds to `mounts` what keeps `own` out of reach: call after every grant
/// and mask is planned. A missing own file that toolhost would create
/// anyway (the allowlist) is created empty inside a writable grant, to be
/// masked; other missing files are not (nothing is there to read, and the
/// file capability refuses creating them).
pub(super) fn protect(own: &OwnPaths, mounts: &mut impl MountTable, mut watch: Option<&mut Watch>) {
    for path in own.iter() {
        let real = &path.real;
        // A grant inside it gets no more than the path itself allows.
        mounts.restrict_inside(real, path.protection == Protection::Hidden);
        let Some((cover, kind)) = mounts.covering(real) else {
            continue;
        };
        let writable = kind == MountKind::ReadWrite;
        if let (Some(watch), Some(parent)) = (watch.as_deref_mut(), real.parent()) {
            watch.dir(parent, parent);
        }
        let exists = match real.symlink_metadata() {
            Ok(_) => true,
            Err(_) => match (path.protection, path.placeholder) {
                (Protection::Hidden, Some(content)) if writable => placeholder(real, content),
                _ => false,
            },
        };
        if !exists {
            continue;
        }
        match path.protection {
            Protection::Hidden => mounts.mask(real),
            Protection::ReadOnly if writable => mounts.add(real.clone(), MountKind::ReadOnly),
            Protection::ReadOnly => {}
        }
        if writable {
            pin_between(&cover, real, mounts);
        }
    }
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

/// Creates `path` with `content`, readable by its owner only; true if it
/// exists now.
fn placeholder(path: &Path, content: &str) -> bool {
    let created = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(path)
        .and_then(|mut file| file.write_all(content.as_bytes()));
    match created {
        Ok(()) => true,
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => true,
        Err(e) => {
            tracing::debug!(path = %path.display(), error = %e, "cannot create a placeholder to mask");
            false
        }
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;

    /// Mounts as a plain map, as the plan keeps them.
    #[derive(Default)]
    struct Table(BTreeMap<PathBuf, MountKind>);

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
        .placeholder = Some("{}\n");
        own.add(
            "plugin directory",
            "plugins",
            &root.join("conf/plugins"),
            Protection::ReadOnly,
        );
        let mut mounts = Table::default();
        mounts.add(root.clone(), MountKind::ReadWrite);
        mounts.add(root.join("conf/plugins/sub"), MountKind::ReadWrite);
        protect(&own, &mut mounts, None);
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
}
