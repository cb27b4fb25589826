//! Precompiled components cached on disk, keyed by the wasm's content hash
//! and the engine's compatibility hash, so a restart or a re-added file skips
//! compilation. Entries carry a checksum; a corrupt, truncated or stale entry
//! is detected, removed and rebuilt, never trusted.

use std::hash::{DefaultHasher, Hash, Hasher};
use std::io::Write as _;
use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};
use wasmtime::Engine;
use wasmtime::component::Component;

use super::plugin::ContentHash;

const MAGIC: &[u8; 8] = b"THCACHE1";
const HEADER: usize = MAGIC.len() + 32;

/// A directory of precompiled components.
#[derive(Debug, Clone)]
pub struct ArtifactCache {
    dir: PathBuf,
}

/// Where a component came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Compiled {
    /// Read from the cache.
    Cached,
    /// Compiled now (and stored, when the cache is writable).
    Fresh,
}

impl ArtifactCache {
    /// A cache in `dir` (created on first store).
    pub fn new(dir: impl Into<PathBuf>) -> Self {
        Self { dir: dir.into() }
    }

    /// `$TOOLHOST_CACHE_DIR`, else `$XDG_CACHE_HOME/toolhost`, else
    /// `~/.cache/toolhost`.
    pub fn default_dir() -> Option<PathBuf> {
        if let Some(dir) = std::env::var_os("TOOLHOST_CACHE_DIR") {
            return Some(PathBuf::from(dir));
        }
        if let Some(dir) = std::env::var_os("XDG_CACHE_HOME") {
            return Some(PathBuf::from(dir).join("toolhost"));
        }
        std::env::var_os("HOME").map(|home| PathBuf::from(home).join(".cache").join("toolhost"))
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
            .join(format!("{hash}-{:016x}.cwasm", hasher.finish()))
    }

    /// The component for `bytes`: from the cache when a valid entry exists,
    /// otherwise compiled and stored. Blocking; run it off the async executor.
    pub fn load_or_compile(
        &self,
        engine: &Engine,
        hash: &ContentHash,
        bytes: &[u8],
    ) -> wasmtime::Result<(Component, Compiled)> {
        let path = self.entry(engine, hash);
        match self.read(engine, &path) {
            Ok(Some(component)) => return Ok((component, Compiled::Cached)),
            Ok(None) => {}
            Err(reason) => {
                tracing::warn!(entry = %path.display(), "discarding cache entry: {reason}");
                let _ = std::fs::remove_file(&path);
            }
        }
        let component = Component::new(engine, bytes)?;
        match component.serialize() {
            Ok(artifact) => {
                if let Err(e) = self.write(&path, &artifact) {
                    tracing::debug!(dir = %self.dir.display(), error = %e, "cannot store compiled plugin");
                }
            }
            Err(e) => tracing::debug!(error = %e, "cannot serialize compiled plugin"),
        }
        Ok((component, Compiled::Fresh))
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
        if Sha256::digest(artifact)[..] != header[MAGIC.len()..] {
            return Err("checksum mismatch (corrupt or truncated)".into());
        }
        // SAFETY: `deserialize` trusts the bytes to be an artifact produced by
        // `Component::serialize` of a compatible engine. This one was written
        // by `write` below (atomically, into the user's own cache directory),
        // its checksum matches, and wasmtime itself checks the engine
        // compatibility header before using it.
        let component = unsafe { Component::deserialize(engine, artifact) }
            .map_err(|e| format!("rejected by wasmtime: {e}"))?;
        Ok(Some(component))
    }

    fn write(&self, path: &Path, artifact: &[u8]) -> std::io::Result<()> {
        std::fs::create_dir_all(&self.dir)?;
        let mut file = tempfile::NamedTempFile::new_in(&self.dir)?;
        file.write_all(MAGIC)?;
        file.write_all(&Sha256::digest(artifact))?;
        file.write_all(artifact)?;
        file.as_file().sync_data()?;
        file.persist(path).map_err(|e| e.error)?;
        Ok(())
    }
}
