//! Precompiled components cached on disk, keyed by the wasm's content hash
//! and the engine's compatibility hash, so a restart or a re-added file skips
//! compilation. Entries are native code, so each carries an HMAC-SHA256 made
//! with a key only the host reads (a file in the cache directory, `0600`,
//! which no tool or command can read or write): an entry written by anyone
//! else, corrupt, truncated or stale is detected, removed and rebuilt,
//! never trusted. Every version of a
//! plugin hot-reloaded while it is written leaves an entry, so the cache is
//! bounded: past [`MAX_BYTES`] the least recently used entries go (a use
//! marks its entry's modification time).

use std::hash::{DefaultHasher, Hash, Hasher};
use std::io::Write as _;
use std::path::{Path, PathBuf};

use hmac::{Hmac, Mac};
use sha2::Sha256;
use wasmtime::Engine;
use wasmtime::component::Component;

use crate::config::cache_key_path;
use crate::contract::ContentHash;

const MAGIC: &[u8; 8] = b"THCACHE2";

/// Bytes of the key.
const KEY_BYTES: usize = 32;

/// Most bytes of entries a cache keeps.
pub(super) const MAX_BYTES: u64 = 512 << 20;

/// How an entry's file name ends.
const ENTRY_SUFFIX: &str = ".cwasm";
const HEADER: usize = MAGIC.len() + 32;

/// A directory of precompiled components.
#[derive(Debug, Clone)]
pub struct ArtifactCache {
    dir: PathBuf,
    max_bytes: u64,
    /// The key, once read or made; `None` inside when there is none to use.
    key: std::sync::Arc<std::sync::OnceLock<Option<[u8; KEY_BYTES]>>>,
}

/// Where a component came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Compiled {
    /// Read from the cache.
    Cached,
    /// Compiled now (and stored, when the cache is writable).
    Fresh,
    /// Not compiled yet: a bundled plugin listed from the specs captured
    /// when toolhost was built compiles at its first call.
    Pending,
}

impl ArtifactCache {
    /// A cache in `dir` (created on first store).
    pub fn new(dir: impl Into<PathBuf>) -> Self {
        Self {
            dir: dir.into(),
            max_bytes: MAX_BYTES,
            key: Default::default(),
        }
    }

    /// The key entries are authenticated with: read, or made on first use;
    /// `None` (and no cache) where it cannot be, or where others than the
    /// owner could read it.
    fn key(&self) -> Option<&[u8; KEY_BYTES]> {
        self.key
            .get_or_init(|| match load_key(&cache_key_path(&self.dir)) {
                Ok(key) => Some(key),
                Err(e) => {
                    tracing::warn!(dir = %self.dir.display(), "compile cache not used: {e}");
                    None
                }
            })
            .as_ref()
    }

    /// The MAC of `artifact` under the key.
    fn mac(&self, artifact: &[u8]) -> Option<Hmac<Sha256>> {
        let mut mac = Hmac::<Sha256>::new_from_slice(self.key()?).ok()?;
        mac.update(MAGIC);
        mac.update(artifact);
        Some(mac)
    }

    /// The same cache keeping at most `max_bytes` of entries.
    pub fn with_max_bytes(mut self, max_bytes: u64) -> Self {
        self.max_bytes = max_bytes;
        self
    }

    /// The directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    fn entry(&self, engine: &Engine, hash: &ContentHash) -> PathBuf {
        let mut hasher = DefaultHasher::new();
        engine.precompile_compatibility_hash().hash(&mut hasher);
        env!("CARGO_PKG_VERSION").hash(&mut hasher);
        self.dir
            .join(format!("{hash}-{:016x}{ENTRY_SUFFIX}", hasher.finish()))
    }

    /// The component for `bytes`: from the cache when a valid entry exists,
    /// otherwise compiled and stored. Blocking; run it off the async executor.
    pub fn load_or_compile(
        &self,
        engine: &Engine,
        hash: &ContentHash,
        bytes: &[u8],
    ) -> wasmtime::Result<(Component, Compiled)> {
        if let Some(component) = self.load(engine, hash) {
            return Ok((component, Compiled::Cached));
        }
        let path = self.entry(engine, hash);
        let component = Component::new(engine, bytes)?;
        match component.serialize() {
            Ok(artifact) => match self.write(&path, &artifact) {
                Ok(()) => self.prune(&path),
                Err(e) => {
                    tracing::debug!(dir = %self.dir.display(), error = %e, "cannot store compiled plugin");
                }
            },
            Err(e) => tracing::debug!(error = %e, "cannot serialize compiled plugin"),
        }
        Ok((component, Compiled::Fresh))
    }

    /// The component for `hash` when a valid entry exists (a bad one is
    /// removed). Blocking.
    pub(crate) fn load(&self, engine: &Engine, hash: &ContentHash) -> Option<Component> {
        let path = self.entry(engine, hash);
        match self.read(engine, &path) {
            Ok(Some(component)) => {
                // Marks the entry used, for pruning.
                let _ = std::fs::File::options()
                    .write(true)
                    .open(&path)
                    .and_then(|file| file.set_modified(std::time::SystemTime::now()));
                Some(component)
            }
            Ok(None) => None,
            Err(reason) => {
                tracing::warn!(entry = %path.display(), "discarding cache entry: {reason}");
                let _ = std::fs::remove_file(&path);
                None
            }
        }
    }

    /// `Ok(None)` when there is no entry; `Err` when there is a bad one.
    fn read(&self, engine: &Engine, path: &Path) -> Result<Option<Component>, String> {
        let data = match std::fs::read(path) {
            Ok(data) => data,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(format!("unreadable: {e}")),
        };
        if data.len() < HEADER || &data[..MAGIC.len()] != MAGIC {
            return Err("not a toolhost cache entry".into());
        }
        let (header, artifact) = data.split_at(HEADER);
        let Some(mac) = self.mac(artifact) else {
            // No key to check it with: compiled afresh, the entry left be.
            return Ok(None);
        };
        if mac.verify_slice(&header[MAGIC.len()..]).is_err() {
            return Err(
                "its MAC does not match (corrupt, truncated, or not written by this host)".into(),
            );
        }
        // SAFETY: `deserialize` trusts the bytes to be an artifact produced by
        // `Component::serialize` of a compatible engine. This one was written
        // by `write` below: its MAC, made with a key only this host reads,
        // matches, and wasmtime itself checks the engine compatibility header
        // before using it.
        let component = unsafe { Component::deserialize(engine, artifact) }
            .map_err(|e| format!("rejected by wasmtime: {e}"))?;
        Ok(Some(component))
    }

    /// Removes the least recently used entries until the cache holds at
    /// most its `max_bytes`; `keep` (just stored) stays whatever its size.
    fn prune(&self, keep: &Path) {
        let Ok(entries) = std::fs::read_dir(&self.dir) else {
            return;
        };
        let mut found: Vec<(std::time::SystemTime, u64, PathBuf)> = entries
            .flatten()
            .filter(|entry| entry.file_name().to_string_lossy().ends_with(ENTRY_SUFFIX))
            .filter_map(|entry| {
                let meta = entry.metadata().ok()?;
                Some((meta.modified().ok()?, meta.len(), entry.path()))
            })
            .collect();
        let mut total: u64 = found.iter().map(|(_, len, _)| len).sum();
        if total <= self.max_bytes {
            return;
        }
        found.sort();
        for (_, len, path) in found {
            if total <= self.max_bytes {
                break;
            }
            if path == keep {
                continue;
            }
            match std::fs::remove_file(&path) {
                Ok(()) => {
                    total -= len;
                    tracing::debug!(entry = %path.display(), "pruned from the compile cache");
                }
                Err(e) => tracing::debug!(entry = %path.display(), error = %e, "cannot prune"),
            }
        }
    }

    fn write(&self, path: &Path, artifact: &[u8]) -> std::io::Result<()> {
        std::fs::create_dir_all(&self.dir)?;
        let mac = self
            .mac(artifact)
            .ok_or_else(|| std::io::Error::other("the cache has no key"))?;
        let mut file = tempfile::NamedTempFile::new_in(&self.dir)?;
        file.write_all(MAGIC)?;
        file.write_all(&mac.finalize().into_bytes())?;
        file.write_all(artifact)?;
        file.as_file().sync_data()?;
        file.persist(path).map_err(|e| e.error)?;
        Ok(())
    }
}

/// The key at `path`, made (random, `0600`) if there is none yet.
pub(crate) fn load_key(path: &Path) -> Result<[u8; KEY_BYTES], String> {
    use std::io::Read as _;
    use std::os::unix::fs::{MetadataExt as _, OpenOptionsExt as _};
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).map_err(|e| format!("creating {}: {e}", dir.display()))?;
    }
    let made = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(path);
    if let Ok(mut file) = made {
        let mut key = [0u8; KEY_BYTES];
        std::fs::File::open("/dev/urandom")
            .and_then(|mut random| random.read_exact(&mut key))
            .map_err(|e| format!("reading /dev/urandom: {e}"))?;
        file.write_all(&key)
            .and_then(|()| file.sync_all())
            .map_err(|e| format!("writing the key {}: {e}", path.display()))?;
        return Ok(key);
    }
    let meta =
        std::fs::symlink_metadata(path).map_err(|e| format!("the key {}: {e}", path.display()))?;
    // SAFETY: geteuid has no preconditions.
    let me = unsafe { libc::geteuid() };
    if !meta.is_file() || meta.uid() != me || meta.mode() & 0o077 != 0 {
        return Err(format!(
            "the key {} is not a file of this user that only this user may read; remove it \
             (a new one is made)",
            path.display()
        ));
    }
    let bytes =
        std::fs::read(path).map_err(|e| format!("reading the key {}: {e}", path.display()))?;
    bytes.try_into().map_err(|_| {
        format!(
            "the key {} is not {KEY_BYTES} bytes; remove it",
            path.display()
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pruning_removes_the_least_recently_used_entries_past_the_bound() {
        let dir = tempfile::tempdir().unwrap();
        let cache = ArtifactCache::new(dir.path()).with_max_bytes(250);
        let now = std::time::SystemTime::now();
        let entry = |name: &str, age_s: u64| {
            let path = dir.path().join(format!("{name}{ENTRY_SUFFIX}"));
            std::fs::write(&path, [0u8; 100]).unwrap();
            let file = std::fs::File::options().write(true).open(&path).unwrap();
            file.set_modified(now - std::time::Duration::from_secs(age_s))
                .unwrap();
            path
        };
        let oldest = entry("a", 300);
        let old = entry("b", 200);
        let recent = entry("c", 100);
        let other = dir.path().join("notes.txt");
        std::fs::write(&other, [0u8; 1000]).unwrap();
        let fresh = entry("d", 0);
        cache.prune(&fresh);
        let exists = |p: &PathBuf| p.exists();
        assert!(!exists(&oldest) && !exists(&old), "the two oldest go");
        assert!(exists(&recent) && exists(&fresh) && exists(&other));

        // The entry just stored stays even when it alone passes the bound.
        let small = ArtifactCache::new(dir.path()).with_max_bytes(10);
        small.prune(&fresh);
        assert!(exists(&fresh) && !exists(&recent) && exists(&other));
    }
}
