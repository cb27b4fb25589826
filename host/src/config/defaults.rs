//! What a configuration leaves out defaults to: the compile cache's
//! directory (and its key's file), and the host-wide batch and session
//! settings.

use std::path::{Path, PathBuf};
use std::time::Duration;

/// Default number of calls of one batch in flight at once.
pub const DEFAULT_BATCH_CONCURRENCY: usize = 16;

/// Default idle time after which a stateful session's instance is torn down.
pub const DEFAULT_SESSION_IDLE: Duration = Duration::from_secs(600);

/// Default memory all stateful sessions of a host may hold together.
pub const DEFAULT_SESSIONS_MEMORY: usize = 1 << 30;

/// The key's file name in the cache directory.
const CACHE_KEY_FILE: &str = "key";

/// The compile cache's directory: `$TOOLHOST_CACHE_DIR`, else
/// `$XDG_CACHE_HOME/toolhost`, else `~/.cache/toolhost`.
pub fn default_cache_dir() -> Option<PathBuf> {
    if let Some(dir) = std::env::var_os("TOOLHOST_CACHE_DIR") {
        return Some(PathBuf::from(dir));
    }
    if let Some(dir) = std::env::var_os("XDG_CACHE_HOME") {
        return Some(PathBuf::from(dir).join("toolhost"));
    }
    std::env::var_os("HOME").map(|home| PathBuf::from(home).join(".cache").join("toolhost"))
}

/// Where the key of a compile cache in `dir` is kept.
pub fn cache_key_path(dir: &Path) -> PathBuf {
    dir.join(CACHE_KEY_FILE)
}
