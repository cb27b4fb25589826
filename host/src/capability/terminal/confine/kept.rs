//! What the terminal's plan keeps from commands inside the writable grants,
//! for the file tools: one decision for both doors, so that neither writes
//! what the other keeps.

use std::path::{Path, PathBuf};

use super::guard::Guard;
use super::spec::{Mount, MountKind};
use crate::capability::Profile;

/// What a command of `profile` may not change inside its writable grants
/// (not counting toolhost's own files, which the file tools know): the
/// repository metadata its plan keeps, where a kept link leads and what a
/// configuration names among it. The file tools refuse to write these too,
/// so that neither door opens what the other keeps. Blocking: it walks the
/// grants; `Err` is the refusal a command would get.
pub(crate) fn kept_from_commands(profile: &Profile) -> Result<Vec<PathBuf>, String> {
    let (mounts, guard) = grants_walked(profile)?;
    let writable: Vec<&Path> = mounts
        .iter()
        .filter(|mount| mount.kind == MountKind::ReadWrite)
        .map(|mount| mount.path.as_path())
        .collect();
    // The grants and `terminal.read` directories themselves are mounted
    // for what the profile says of them, which the file rules judge.
    let granted: Vec<PathBuf> = profile
        .terminal
        .read
        .iter()
        .map(PathBuf::as_path)
        .chain(profile.file.grants().map(|(dir, _)| dir))
        .filter_map(|dir| dir.canonicalize().ok())
        .collect();
    let inside = |path: &Path| {
        writable
            .iter()
            .any(|grant| path != *grant && path.starts_with(grant))
    };
    let mut kept: Vec<PathBuf> = mounts
        .iter()
        .filter(|mount| mount.kind == MountKind::ReadOnly)
        .filter(|mount| inside(&mount.path) && !granted.contains(&mount.path))
        .filter(|mount| !profile.file.own().iter().any(|own| own.covers(&mount.path)))
        .map(|mount| mount.path.clone())
        .collect();
    kept.extend(
        guard
            .paths()
            .filter(|path| inside(path))
            .map(Path::to_path_buf),
    );
    kept.sort();
    kept.dedup();
    Ok(kept)
}

/// What a command's plan of `profile` keeps inside the grants, without
/// toolhost's own files (whose placeholders it would make): `terminal.read`,
/// the grants, masks and repository metadata. Blocking: it walks the grants.
fn grants_walked(profile: &Profile) -> Result<(Vec<Mount>, Guard), String> {
    let mut mounts = super::plan::Mounts::default();
    super::plan::add_grants(profile, None, &mut mounts, super::plan::Purpose::FileTools)?;
    mounts.refusal()?;
    Ok(mounts.into_list())
}
