//! toolhost's own paths: the configuration, the approvals allowlist, the
//! audit log, the compile cache, the plugin directory, credentials and the
//! binary. One list, built from the running configuration, that the file
//! capability and the terminal sandbox both consult whatever the grants say.

use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};

use super::lexical::{Access, normalize};

/// What tools and commands may do with one of toolhost's paths.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Protection {
    /// Neither read nor written (the config, the allowlist, the audit log,
    /// credentials): masked in the terminal sandbox.
    Hidden,
    /// Read but never written (the binary, the compile cache, the plugin
    /// directory): read-only in the terminal sandbox.
    ReadOnly,
}

/// What the terminal sandbox makes at a missing own path inside a writable
/// grant, with the directories leading to it, to protect it there: what
/// toolhost would make itself when it first uses the path.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Placeholder {
    /// A file with this content, readable by its owner only.
    File(&'static str),
    /// An empty directory.
    Dir,
}

/// One of toolhost's paths.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OwnPath {
    /// What it is, in words (`the approvals allowlist`).
    pub what: String,
    /// Where the configuration names it (`approvals.allowlist`).
    pub key: String,
    /// The path as named, absolute and normalized.
    pub path: PathBuf,
    /// Where it really is: symlinks resolved as far as the path exists.
    pub real: PathBuf,
    /// What tools and commands may do with it.
    pub protection: Protection,
    /// A profile whose `file.write` names this directory (or a directory
    /// in it) may write it: the plugin directory of an agent that builds
    /// plugins.
    pub writable_when_granted: bool,
    /// What the terminal sandbox makes when the path is missing, so that
    /// it can be masked or mounted read-only (what toolhost would make
    /// anyway: the allowlist, the plugin directory); with `None` the name
    /// is kept absent instead (a command's sandbox ends, and what it made
    /// there is removed, as soon as it appears).
    pub placeholder: Option<Placeholder>,
    /// `path` and `real` without regard to case, as compared.
    folded: Vec<PathBuf>,
}

/// toolhost's own files that a new file took the name of (a rename over it,
/// a removal and a new file) while a command's sandbox lived that had the
/// old one masked or read-only: in the sandbox the name then shows the new
/// file, which the command could have written or replaced again. Each with
/// where the sandbox's guard set aside what it found there.
static REPLACED: std::sync::Mutex<std::collections::BTreeMap<PathBuf, Vec<PathBuf>>> =
    std::sync::Mutex::new(std::collections::BTreeMap::new());

/// Notes that the own file kept at `kept` (its real path as the plan had it)
/// was replaced while a sandbox that could write the new file lived, and
/// where what was at the name went (`None`: nothing was there, or it could
/// not be moved).
pub fn note_replaced(kept: &Path, aside: Option<PathBuf>) {
    tracing::error!(
        path = %kept.display(),
        aside = ?aside,
        "toolhost's own file was replaced while a command that could write the new one ran: \
         that command's sandbox is ended, and toolhost does not read what was at the name \
         (it was moved aside); save it in place, or when no command runs"
    );
    let mut replaced = REPLACED.lock().unwrap_or_else(|e| e.into_inner());
    let asides = replaced.entry(kept.to_path_buf()).or_default();
    asides.extend(aside);
}

/// What checks every live sandbox's guard at once, noting the own files
/// replaced (set by the terminal sandbox when its first guard is watched).
static CHECK_SANDBOXES: OnceLock<fn()> = OnceLock::new();

/// Sets what [`set_aside_if_replaced`] runs first.
pub fn on_check(check: fn()) {
    let _ = CHECK_SANDBOXES.set(check);
}

/// Before toolhost reads its own file `path` (the configuration at a
/// reload, the approvals allowlist): `Some` when it was replaced while a
/// command's sandbox lived that could write the new file (ending that
/// sandbox first, if its guard had not yet seen the change). The file is
/// then not to be read: what was at its name was moved aside, beside it,
/// to the paths given (whatever is there now too), so that no later start
/// reads it either; `Err` says what could not be moved. The name is looked
/// up as the sandboxes kept it: its directory resolved, not its last name
/// (a link a command put there leads elsewhere).
pub fn set_aside_if_replaced(path: &Path) -> Option<Result<Vec<PathBuf>, String>> {
    let path = normalize(path);
    let kept = match (path.parent(), path.file_name()) {
        (Some(dir), Some(name)) => real_path(dir).join(name),
        _ => path.clone(),
    };
    // What the guards noted before was set aside then (and logged): what
    // is at the name now is judged by the check below alone, so that the
    // operator's file, moved back once no such sandbox is left, is read.
    REPLACED
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .remove(&kept);
    if let Some(check) = CHECK_SANDBOXES.get() {
        check();
    }
    let mut asides = REPLACED
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .remove(&kept)?;
    // Something at the name since (a command's sandbox that was ending).
    if kept.symlink_metadata().is_ok() {
        let mut random = [0u8; 8];
        // SAFETY: fills a local buffer of its length.
        unsafe { libc::getrandom(random.as_mut_ptr().cast(), random.len(), 0) };
        let hex: String = random.iter().map(|b| format!("{b:02x}")).collect();
        let name = kept.file_name().unwrap_or_default().to_string_lossy();
        let aside = kept.with_file_name(format!("{name}.toolhost-planted-{hex}"));
        if let Err(e) = std::fs::rename(&kept, &aside) {
            return Some(Err(format!("{}: {e}", kept.display())));
        }
        asides.push(aside);
    }
    tracing::error!(
        path = %kept.display(),
        aside = ?asides,
        "toolhost's own file was replaced while commands that could write it ran: not read"
    );
    Some(Ok(asides))
}

impl OwnPath {
    /// Whether `path` (absolute, normalized) is this path or lies inside it.
    pub fn covers(&self, path: &Path) -> bool {
        self.covers_folded(&folded(path))
    }

    fn covers_folded(&self, path: &Path) -> bool {
        self.folded.iter().any(|own| path.starts_with(own))
    }

    /// Whether this path is `dir` or lies inside it.
    pub fn lies_in(&self, dir: &Path) -> bool {
        let dir = folded(dir);
        self.folded.iter().any(|own| own.starts_with(&dir))
    }

    /// How it is protected, in words, for `check` and `doctor`.
    pub fn described(&self) -> String {
        match self.protection {
            Protection::Hidden => "hidden from every tool and command".into(),
            Protection::ReadOnly if self.writable_when_granted => {
                "read-only to every tool and command, unless a profile's file.write names it".into()
            }
            Protection::ReadOnly => "read-only to every tool and command".into(),
        }
    }
}

/// The path compared without regard to ASCII case: on a case-insensitive
/// filesystem `TOOLHOST.TOML` is `toolhost.toml`.
fn folded(path: &Path) -> PathBuf {
    let bytes = path.as_os_str().as_bytes().to_ascii_lowercase();
    PathBuf::from(std::ffi::OsString::from(
        <std::ffi::OsStr as OsStrExt>::from_bytes(&bytes),
    ))
}

/// Where `path` really is: canonical if it exists, else its nearest
/// existing ancestor canonical and the rest as named.
pub fn real_path(path: &Path) -> PathBuf {
    let path = normalize(path);
    let mut rest = Vec::new();
    let mut base = path.as_path();
    loop {
        if let Ok(real) = base.canonicalize() {
            return rest.iter().rev().fold(real, |dir, name| dir.join(name));
        }
        match (base.parent(), base.file_name()) {
            (Some(parent), Some(name)) => {
                rest.push(name.to_os_string());
                base = parent;
            }
            _ => return path,
        }
    }
}

/// toolhost's own paths. Defaults to the binary alone.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OwnPaths {
    paths: Vec<OwnPath>,
}

impl Default for OwnPaths {
    fn default() -> Self {
        Self::process().as_ref().clone()
    }
}

impl OwnPaths {
    /// No paths at all.
    pub fn none() -> Self {
        Self { paths: Vec::new() }
    }

    /// The running binary (what `/proc/self/exe` leads to), read-only.
    pub fn process() -> Arc<OwnPaths> {
        static PROCESS: OnceLock<Arc<OwnPaths>> = OnceLock::new();
        PROCESS
            .get_or_init(|| {
                let mut own = OwnPaths::none();
                if let Ok(exe) = std::env::current_exe() {
                    own.add("binary", "the running toolhost", &exe, Protection::ReadOnly);
                }
                Arc::new(own)
            })
            .clone()
    }

    /// Adds `path` (made absolute against the current directory), unless
    /// it is there already; returns it for further settings.
    pub fn add(
        &mut self,
        what: &str,
        key: &str,
        path: &Path,
        protection: Protection,
    ) -> &mut OwnPath {
        let absolute = std::path::absolute(path).unwrap_or_else(|_| path.to_path_buf());
        let path = normalize(&absolute);
        let real = real_path(&path);
        let index =
            match self.paths.iter().position(|own| {
                (own.path == path || own.real == real) && own.protection == protection
            }) {
                Some(index) => index,
                None => {
                    let mut folded = vec![folded(&path)];
                    if real != path {
                        folded.push(self::folded(&real));
                    }
                    self.paths.push(OwnPath {
                        what: what.to_string(),
                        key: key.to_string(),
                        path,
                        real,
                        protection,
                        writable_when_granted: false,
                        placeholder: None,
                        folded,
                    });
                    self.paths.len() - 1
                }
            };
        &mut self.paths[index]
    }

    /// These paths and those of `other` (a reloaded configuration keeps
    /// protecting what the running host still uses).
    pub fn merged(&self, other: &OwnPaths) -> OwnPaths {
        let mut merged = self.clone();
        for own in &other.paths {
            if !merged
                .paths
                .iter()
                .any(|p| p.path == own.path && p.protection == own.protection)
            {
                merged.paths.push(own.clone());
            }
        }
        merged
    }

    /// Every path.
    pub fn iter(&self) -> impl Iterator<Item = &OwnPath> {
        self.paths.iter()
    }

    /// The paths as they apply to a profile whose write grants are
    /// `write_grants`: a path writable when granted, and named by one of
    /// them, is left out.
    pub fn for_write_grants<'a>(
        self: &Arc<Self>,
        write_grants: impl IntoIterator<Item = &'a Path>,
    ) -> Arc<OwnPaths> {
        let grants: Vec<&Path> = write_grants.into_iter().collect();
        let opted_in = |own: &OwnPath| {
            own.writable_when_granted && grants.iter().any(|grant| own.covers(grant))
        };
        if !self.paths.iter().any(opted_in) {
            return self.clone();
        }
        Arc::new(OwnPaths {
            paths: self
                .paths
                .iter()
                .filter(|p| !opted_in(p))
                .cloned()
                .collect(),
        })
    }

    /// The own path that refuses `access` to `path` (absolute, normalized),
    /// if one does.
    pub fn refusing(&self, path: &Path, access: Access) -> Option<&OwnPath> {
        let path = folded(path);
        self.paths.iter().find(|own| {
            (own.protection == Protection::Hidden || access == Access::Write)
                && own.covers_folded(&path)
        })
    }

    /// An own path at or inside `path`, which renaming `path` would move.
    pub fn held_in(&self, path: &Path) -> Option<&OwnPath> {
        self.paths.iter().find(|own| own.lies_in(path))
    }

    /// The own file that the file `meta` describes is, if any: a hard link
    /// reaches it under another name. (A file with one name is reached only
    /// by that name, which the path checks judge.)
    pub fn by_identity(&self, meta: &std::fs::Metadata) -> Option<&OwnPath> {
        use std::os::unix::fs::MetadataExt;
        if !meta.is_file() || meta.nlink() < 2 {
            return None;
        }
        let identity = (meta.dev(), meta.ino());
        self.paths.iter().find(|own| {
            std::fs::metadata(&own.real)
                .is_ok_and(|own| own.is_file() && (own.dev(), own.ino()) == identity)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn own(dir: &Path) -> OwnPaths {
        let mut own = OwnPaths::none();
        own.add(
            "configuration",
            "--config",
            &dir.join("toolhost.toml"),
            Protection::Hidden,
        );
        own.add(
            "plugin directory",
            "plugins",
            &dir.join("plugins"),
            Protection::ReadOnly,
        )
        .writable_when_granted = true;
        own
    }

    #[test]
    fn hidden_paths_refuse_both_ways_and_read_only_ones_writing() {
        let dir = Path::new("/srv/th");
        let own = own(dir);
        let config = dir.join("toolhost.toml");
        assert!(own.refusing(&config, Access::Read).is_some());
        assert!(own.refusing(&config, Access::Write).is_some());
        let plugin = dir.join("plugins/a.wasm");
        assert!(own.refusing(&plugin, Access::Read).is_none());
        assert_eq!(
            own.refusing(&plugin, Access::Write).map(|p| p.key.as_str()),
            Some("plugins")
        );
        assert!(own.refusing(&dir.join("notes.md"), Access::Write).is_none());
        // Another case of the same name, on a case-insensitive filesystem.
        assert!(
            own.refusing(&dir.join("TOOLHOST.TOML"), Access::Read)
                .is_some()
        );
        // The directory holding them may not be moved.
        assert!(own.held_in(dir).is_some());
        assert!(own.held_in(&dir.join("other")).is_none());
    }

    #[test]
    fn a_profile_naming_the_plugin_directory_may_write_it() {
        let dir = Path::new("/srv/th");
        let own = Arc::new(own(dir));
        let workspace = dir.to_path_buf();
        let same = own.for_write_grants([workspace.as_path()]);
        assert!(Arc::ptr_eq(&same, &own), "the workspace does not name it");
        let plugins = dir.join("plugins");
        let builder = own.for_write_grants([plugins.as_path()]);
        assert!(
            builder
                .refusing(&plugins.join("a.wasm"), Access::Write)
                .is_none()
        );
        assert!(
            builder
                .refusing(&dir.join("toolhost.toml"), Access::Write)
                .is_some()
        );
    }

    #[test]
    fn real_paths_resolve_what_exists() {
        let dir = tempfile::tempdir().unwrap();
        let real = dir.path().canonicalize().unwrap();
        std::os::unix::fs::symlink(&real, real.join("link")).unwrap();
        assert_eq!(
            real_path(&real.join("link/missing/file")),
            real.join("missing/file")
        );
    }
}
