//! `[state]`: handles, the names of a conversation's state that clients
//! without sessions pass back (see [`crate::handles`]): the key that
//! authenticates them, how long they live, how many a tenant may hold.

use std::path::{Path, PathBuf};
use std::time::Duration;

use base64::Engine as _;
use serde::Deserialize;
use sha2::Digest as _;

use crate::policy::Span;

/// How long a handle lives at most, however busy (`[state] handle_max_age`).
pub const DEFAULT_MAX_AGE: Duration = Duration::from_secs(24 * 3600);

/// The longest `handle_max_age`: ten years, so that the expiry (seconds
/// since 1970 in the handle's 4-byte field) fits until the year 2096.
const MAX_MAX_AGE: Duration = Duration::from_secs(10 * 365 * 24 * 3600);

/// Most live handles per tenant (`[state] max_handles_per_tenant`): as many
/// sessions as one tenant may hold of one stateful plugin.
pub const DEFAULT_MAX_PER_TENANT: usize = 64;

/// Where the key that authenticates handles comes from.
#[derive(Debug, Clone)]
pub enum KeySource {
    /// Given (`TOOLHOST_STATE_KEY`).
    Key([u8; 32]),
    /// Read from a file, made (32 random bytes, mode 0600) if missing.
    File(PathBuf),
    /// Random, for this process only: a restart turns every handle invalid.
    Random,
}

/// `[state]` as the host uses it.
#[derive(Debug, Clone)]
pub struct HandleSettings {
    /// The key.
    pub key: KeySource,
    /// A handle's hard expiry, from when it was made.
    pub max_age: Duration,
    /// Most live handles per tenant.
    pub max_per_tenant: usize,
    /// This replica's id, carried in every handle it makes.
    pub replica: u16,
}

impl Default for HandleSettings {
    /// A random key, 24 hours, 64 handles per tenant, replica 0.
    fn default() -> Self {
        Self {
            key: KeySource::Random,
            max_age: DEFAULT_MAX_AGE,
            max_per_tenant: DEFAULT_MAX_PER_TENANT,
            replica: 0,
        }
    }
}

/// The variable that gives the handle key (base64 of at least 32 bytes); it
/// wins over `[state] key_file`.
pub const KEY_VARIABLE: &str = "TOOLHOST_STATE_KEY";

/// `[state]` as written.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StateConfig {
    /// File of the key (32 bytes, made with mode 0600 if missing).
    #[serde(default)]
    pub key_file: Option<PathBuf>,
    /// Hard expiry of a handle, from when it is made.
    #[serde(default)]
    pub handle_max_age: Option<Span>,
    /// Most live handles per tenant.
    #[serde(default)]
    pub max_handles_per_tenant: Option<usize>,
    /// This replica's id (0-65535).
    #[serde(default)]
    pub replica: Option<u16>,
}

/// The settings of `[state]`, relative paths under `base`; problems go to
/// `problems`.
pub(super) fn settings(
    written: &StateConfig,
    base: &Path,
    problems: &mut Vec<(String, String)>,
) -> HandleSettings {
    let max_age = written.handle_max_age.map_or(DEFAULT_MAX_AGE, |s| s.0);
    if max_age.as_secs() == 0 {
        problems.push(("state.handle_max_age".into(), "must be at least 1s".into()));
    }
    if max_age > MAX_MAX_AGE {
        problems.push((
            "state.handle_max_age".into(),
            "must be at most 87600h (ten years): a handle's expiry is kept in 32 bits".into(),
        ));
    }
    let max_per_tenant = written
        .max_handles_per_tenant
        .unwrap_or(DEFAULT_MAX_PER_TENANT);
    if max_per_tenant == 0 {
        problems.push((
            "state.max_handles_per_tenant".into(),
            "must be at least 1".into(),
        ));
    }
    HandleSettings {
        key: key_source(written, base, problems),
        max_age: max_age.min(MAX_MAX_AGE),
        max_per_tenant: max_per_tenant.max(1),
        replica: written.replica.unwrap_or(0),
    }
}

/// `TOOLHOST_STATE_KEY`, else `key_file`, else a file in the user's state
/// directory; a random key of this process when there is none.
fn key_source(
    written: &StateConfig,
    base: &Path,
    problems: &mut Vec<(String, String)>,
) -> KeySource {
    if let Some(value) = std::env::var_os(KEY_VARIABLE) {
        let text = value.to_string_lossy();
        let text = text.trim();
        let decoded = base64::engine::general_purpose::STANDARD
            .decode(text)
            .or_else(|_| base64::engine::general_purpose::URL_SAFE_NO_PAD.decode(text));
        return match decoded {
            Ok(bytes) if bytes.len() >= 32 => KeySource::Key(sha2::Sha256::digest(&bytes).into()),
            _ => {
                problems.push((
                    KEY_VARIABLE.into(),
                    "must be base64 of at least 32 random bytes (`head -c 32 /dev/urandom | \
                     base64`)"
                        .into(),
                ));
                KeySource::Random
            }
        };
    }
    if let Some(file) = &written.key_file {
        return KeySource::File(base.join(file));
    }
    default_key_file().map_or(KeySource::Random, KeySource::File)
}

/// `$XDG_STATE_HOME/toolhost/state-key`, else
/// `~/.local/state/toolhost/state-key`.
pub(crate) fn default_key_file() -> Option<PathBuf> {
    let dir = std::env::var_os("XDG_STATE_HOME")
        .map(PathBuf::from)
        .filter(|dir| dir.is_absolute())
        .or_else(|| {
            std::env::var_os("HOME")
                .map(PathBuf::from)
                .filter(|home| home.is_absolute())
                .map(|home| home.join(".local/state"))
        })?;
    Some(dir.join("toolhost/state-key"))
}
