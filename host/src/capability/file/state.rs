//! What one store may do with files: the profile's rules, whether it may
//! write, and the host path behind each of its open directory descriptors
//! and listings.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, OnceLock};

use wasmtime_wasi::{FsPerms, WasiCtxBuilder};

use crate::capability::Profile;
use crate::capability::file::{PathRefusal, PathRules, rules as paths};
use crate::capability::grants::Grants;
use crate::policy::Access;

/// Most entries of the grants looked at to find what denied names reach
/// under other names.
const MAX_REACHED_ENTRIES: usize = 200_000;

/// Preopens the profile's grants at their own host paths (write grants
/// read-write when the tool may write, everything else read-only), and the
/// workspace once more as `.`, so relative paths resolve in it (wasi-libc
/// starts in `/` and resolves relative paths through a `.` preopen), whether
/// or not the workspace itself is granted: the policy decides each path, and
/// a listing of an ungranted workspace shows only what is granted. Returns
/// the host path of each preopen, in order.
fn preopen(wasi: &mut WasiCtxBuilder, profile: &Profile, write: bool) -> Vec<PathBuf> {
    let mut opened = Vec::new();
    let mut writes_in_workspace = false;
    for (dir, access) in profile.file.grants() {
        let writable = write && access == Access::Write;
        let guest_path = dir.to_string_lossy();
        if let Err(e) = wasi.preopened_dir(dir, guest_path.as_ref(), perms(writable)) {
            tracing::debug!(dir = %dir.display(), error = %e, "granted directory not preopened");
            continue;
        }
        opened.push(dir.to_path_buf());
        writes_in_workspace |= writable
            && (dir.starts_with(profile.workspace()) || profile.workspace().starts_with(dir));
    }
    // Through `.` the guest reaches every grant under the workspace, so it is
    // writable when one of them is.
    match wasi.preopened_dir(profile.workspace(), ".", perms(writes_in_workspace)) {
        Ok(_) => opened.push(profile.workspace().to_path_buf()),
        Err(e) => tracing::debug!(
            workspace = %profile.workspace().display(),
            error = %e,
            "workspace not preopened as ."
        ),
    }
    opened
}

fn perms(writable: bool) -> FsPerms {
    if writable {
        FsPerms::ReadWrite
    } else {
        FsPerms::ReadOnly
    }
}

/// What the guest may do with files, and the host path behind each of its
/// open directory descriptors and listings.
#[derive(Default)]
pub(crate) struct FileState {
    profile: Option<Arc<Profile>>,
    write: bool,
    pub(crate) preopens: Vec<PathBuf>,
    pub(crate) descriptors: HashMap<u32, PathBuf>,
    pub(crate) streams: HashMap<u32, PathBuf>,
    /// What denied names reach under other names, found at the first
    /// open of the call (`Err` with the most entries looked at).
    reached: Option<Result<paths::Identities, paths::Unsearched>>,
    /// What `file.deny` says of the directories looked in so far.
    deny_memo: Mutex<paths::DenyMemo>,
    /// What commands of the profile may not change inside the writable
    /// grants, found at the first write of the call (`Err`: why it could
    /// not be found).
    kept: OnceLock<Result<Vec<PathBuf>, String>>,
    /// Directories looked at this call, and whether each lives on a block
    /// device (see `on_thread`).
    pub(super) on_block_devices: HashMap<PathBuf, bool>,
}

impl FileState {
    /// The state of a store whose calls have `grants`: the granted
    /// directories preopened when the call may read or write files.
    pub(super) fn new(grants: &Grants, wasi: &mut WasiCtxBuilder) -> Self {
        let read = grants.allows(super::FILE_READ.as_str());
        let write = grants.allows(super::FILE_WRITE.as_str());
        let mut files = Self::default();
        if read || write {
            files.profile = Some(grants.profile.clone());
            files.write = write;
            files.preopens = preopen(wasi, &grants.profile, write);
        }
        files
    }

    /// Why `path` may not be used for `access`, if it may not.
    pub(crate) fn refusal(&self, path: &Path, access: Access) -> Option<PathRefusal> {
        let not_granted = || PathRefusal::NotGranted {
            path: path.to_path_buf(),
            access,
        };
        let Some(profile) = &self.profile else {
            return Some(not_granted());
        };
        if access == Access::Write && !self.write {
            return Some(not_granted());
        }
        let refusal = match self.check(profile, path, access) {
            Ok(()) if access == Access::Write => return self.kept_refusal(profile, path),
            Ok(()) => return None,
            Err(refusal) => refusal,
        };
        // The workspace is where relative paths start, so it may be read as
        // a directory even when not granted; its listing shows only what may
        // be read (see `is_hidden`).
        let workspace = access == Access::Read
            && matches!(refusal, PathRefusal::NotGranted { .. })
            && paths::normalize(path) == paths::normalize(profile.workspace());
        (!workspace).then_some(refusal)
    }

    /// Why writing `path` is refused where a command could not write it
    /// either: it is (or lies in) what the terminal's plan of the profile
    /// keeps, such as where a link of a repository's metadata leads.
    fn kept_refusal(&self, profile: &Profile, path: &Path) -> Option<PathRefusal> {
        let kept = self
            .kept
            .get_or_init(|| profile.kept_by.map_or(Ok(Vec::new()), |kept| kept(profile)));
        match kept {
            Ok(kept) => {
                let at = kept.partition_point(|kept| kept.as_path() < path);
                // Sorted: `path` itself, or the nearest kept path before it
                // that it lies in.
                let hit = kept
                    .get(at)
                    .filter(|kept| kept.as_path() == path)
                    .or_else(|| kept[..at].iter().rev().find(|kept| path.starts_with(kept)))?;
                Some(PathRefusal::RepositoryMetadata {
                    path: path.to_path_buf(),
                    kept: if hit == path {
                        "a path a repository's metadata links to or its configuration names"
                            .to_string()
                    } else {
                        format!(
                            "inside {}, which a repository's metadata links to or its \
                             configuration names",
                            hit.display()
                        )
                    },
                })
            }
            Err(why) => Some(PathRefusal::Unplanned {
                path: path.to_path_buf(),
                why: why.clone(),
            }),
        }
    }

    /// What names `file.deny` matches reach under other names (see
    /// [`PathRules::reached_by_denied`]), looked for once per call.
    pub(crate) fn reached(&mut self) -> Option<&Result<paths::Identities, paths::Unsearched>> {
        if self.reached.is_none() {
            let rules = &self.profile.as_ref()?.file;
            self.reached = Some(rules.reached_by_denied(MAX_REACHED_ENTRIES));
        }
        self.reached.as_ref()
    }

    /// Finds what [`Self::reached`] gives, on the blocking pool: it lists
    /// the write grants and looks at each entry, which a runtime worker must
    /// not wait for (a large tree, a device that stops answering).
    pub(super) async fn find_reached(&mut self) {
        if self.reached.is_some() {
            return;
        }
        let Some(profile) = self.profile.clone() else {
            return;
        };
        let found = tokio::task::spawn_blocking(move || {
            profile.file.reached_by_denied(MAX_REACHED_ENTRIES)
        })
        .await;
        match found {
            Ok(found) => self.reached = Some(found),
            Err(e) => {
                if let Ok(panic) = e.try_into_panic() {
                    std::panic::resume_unwind(panic);
                }
            }
        }
    }

    /// Forgets what [`Self::reached`] and the deny memo found, so that the
    /// next call looks again.
    pub(super) fn forget_reached(&mut self) {
        self.reached = None;
        self.kept.take();
        self.on_block_devices.clear();
        *self.deny_memo.get_mut().unwrap_or_else(|e| e.into_inner()) = Default::default();
    }

    /// The profile's path rules, if files are granted at all.
    pub(crate) fn rules(&self) -> Option<&PathRules> {
        self.profile.as_ref().map(|p| &p.file)
    }

    /// Whether a listing should leave `path` out: it is denied, or not
    /// granted (in the listing of an ungranted workspace).
    pub(crate) fn is_hidden(&self, path: &Path) -> bool {
        self.profile
            .as_ref()
            .is_some_and(|profile| self.check(profile, path, Access::Read).is_err())
    }

    /// The profile's rules on `path`, with what is known of its directory.
    fn check(&self, profile: &Profile, path: &Path, access: Access) -> Result<(), PathRefusal> {
        let mut memo = self.deny_memo.lock().unwrap_or_else(|e| e.into_inner());
        profile
            .file
            .check_remembering(path, access, Some(&mut memo))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A stateful plugin's instance serves many calls: what denied names
    /// reach is looked for again at each, so that a link made to a denied
    /// file after the first call (`ln -s env.local .env`, the owner then
    /// writing through `.env`) is refused in the next.
    #[test]
    fn each_call_of_a_reused_instance_looks_again_at_what_denied_names_reach() {
        use crate::capability::sandbox::Capability;
        use crate::config::{Config, ConfigSource};
        let dir = tempfile::tempdir().unwrap();
        let text = format!(
            "default_profile = \"p\"\n[profiles.p]\nallow = [\"file:read\", \"file:write\"]\n\
             file.write = [{:?}]\nfile.deny = [\"**/.env\"]\n",
            dir.path().display().to_string()
        );
        let config = Config::parse(&text, ConfigSource::Embedded, dir.path()).unwrap();
        let mut grants = Grants::none(config.profile("p", None).unwrap());
        grants.declared = vec![crate::policy::PermissionPattern::parse("file:read").unwrap()];
        let mut files = FileState::new(&grants, &mut WasiCtxBuilder::new());
        let local = dir.path().join("env.local");
        std::fs::write(&local, "KEY=owner\n").unwrap();
        let meta = std::fs::metadata(&local).unwrap();
        let id = {
            use std::os::unix::fs::MetadataExt;
            (meta.dev(), meta.ino())
        };
        let reaches = |files: &mut FileState| match files.reached() {
            Some(Ok(found)) => found.contains_key(&id),
            other => panic!("{:?}", other.map(|r| r.is_ok())),
        };
        assert!(!reaches(&mut files));
        std::os::unix::fs::symlink("env.local", dir.path().join(".env")).unwrap();
        // The same call keeps what it found; the next looks again.
        assert!(!reaches(&mut files));
        super::super::FileAccess::begin_call(&mut files);
        assert!(reaches(&mut files));
    }

    /// A write the terminal's plan walk cannot judge (more entries than
    /// it looks at) is refused, saying why, as a command would be; a
    /// small grant is written.
    #[test]
    fn a_write_the_plan_walk_cannot_judge_is_refused_saying_why() {
        use crate::capability::sandbox::Capability;
        use crate::config::{Config, ConfigSource};
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().canonicalize().unwrap();
        let text = format!(
            "default_profile = \"p\"\n[profiles.p]\nallow = [\"file:read\", \"file:write\"]\n\
             file.write = [{:?}]\n",
            root.display().to_string()
        );
        let config = Config::parse(&text, ConfigSource::Embedded, &root).unwrap();
        let grants = Grants::none(config.profile("p", None).unwrap());
        let mut files = FileState {
            profile: Some(grants.profile.clone()),
            write: true,
            ..FileState::default()
        };
        assert!(files.refusal(&root.join("a.txt"), Access::Write).is_none());
        let many = root.join("many");
        std::fs::create_dir(&many).unwrap();
        for i in 0..2_100 {
            std::fs::write(many.join(i.to_string()), "").unwrap();
        }
        // The same call keeps what it found; the next looks again.
        assert!(files.refusal(&root.join("a.txt"), Access::Write).is_none());
        super::super::FileAccess::begin_call(&mut files);
        let refused = files.refusal(&root.join("a.txt"), Access::Write);
        assert!(
            matches!(&refused, Some(PathRefusal::Unplanned { why, .. }) if why.contains("2000")),
            "{refused:?}"
        );
        // Reading is not judged by it.
        assert!(files.refusal(&root.join("a.txt"), Access::Read).is_none());
    }
}
