//! `toolhost.toml`: its types, the embedded default, and validation that
//! reports every problem with the key it is at and why.

mod caps;
mod defaults;
mod file;
mod load;
mod own;
mod parse;
mod profile;
mod results;
mod state;
mod tasks;
mod tools;
mod validate;

use std::collections::BTreeMap;
use std::fmt;
use std::path::PathBuf;

pub use crate::approval::ConfigSource;
pub use crate::capability::env::EnvConfig;
pub use crate::capability::file::{FileConfig, GlobalFileConfig};
pub use crate::capability::network::NetworkConfig;
pub use crate::capability::terminal::{GlobalTerminalConfig, TerminalConfig};
pub use crate::policy::{ByteSize, Span, parse_duration, parse_size};
pub use caps::{TenantCaps, TenantCapsConfig};
pub use defaults::{
    DEFAULT_BATCH_CONCURRENCY, DEFAULT_SESSION_IDLE, DEFAULT_SESSIONS_MEMORY, cache_key_path,
    default_cache_dir,
};
pub use file::{
    ApprovalsConfig, ConfigFile, GlobalConfig, LimitsConfig, ProfileConfig, TenantApprovalsConfig,
    TenantConfig, ToolConfig,
};
pub(crate) use parse::parse_toml;
pub use results::ResultsConfig;
pub use state::{
    DEFAULT_MAX_AGE, DEFAULT_MAX_PER_TENANT, HandleSettings, KEY_VARIABLE as STATE_KEY_VARIABLE,
    KeySource, StateConfig,
};
pub use tasks::{McpConfig, TaskSettings, TasksConfig};
pub(crate) use tools::approval_table;

use crate::toolsets::Toolsets;

/// The configuration used when there is no `toolhost.toml`.
pub const EMBEDDED: &str = include_str!("default.toml");

/// The file name looked for in the current directory.
pub const FILE_NAME: &str = "toolhost.toml";

/// Every problem found in a configuration.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigError {
    /// Where the configuration came from.
    pub source: ConfigSource,
    /// `(key, problem)` pairs; the key is a dotted path like
    /// `profiles.dev.file.deny[1]`.
    pub problems: Vec<(String, String)>,
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let n = self.problems.len();
        write!(
            f,
            "{}: {n} problem{}",
            self.source,
            if n == 1 { "" } else { "s" }
        )?;
        for (key, problem) in &self.problems {
            if key.is_empty() {
                write!(f, "\n  - {problem}")?;
            } else {
                write!(f, "\n  - {key}: {problem}")?;
            }
        }
        Ok(())
    }
}

impl std::error::Error for ConfigError {}

/// A tenant, validated.
#[derive(Debug, Clone)]
pub struct Tenant {
    /// The tenant's name.
    pub name: String,
    /// SHA-256 of its token (from `token_sha256`, or hashed from
    /// `token_env`); `None` when `token_env` names a variable that is not
    /// set (listed in [`Config::unset_variables`]: a server refuses to start).
    pub token_sha256: Option<[u8; 32]>,
    /// Its profile's name.
    pub profile: String,
    /// Its workspace.
    pub workspace: PathBuf,
    /// Calls at once.
    pub concurrency: usize,
    /// Calls per minute, if limited.
    pub calls_per_minute: Option<u32>,
    /// Its approvals webhook: URL and HMAC secret.
    pub webhook: Option<(String, Vec<u8>)>,
    /// The host uid and gid its commands run as when toolhost runs as
    /// root: its own of `sandbox_ids`.
    pub sandbox_id: u32,
}

/// A validated configuration.
#[derive(Debug, Clone)]
pub struct Config {
    /// Tells this configuration from every other one this process read
    /// (never 0): the profiles made from it carry it.
    pub generation: u64,
    /// Where it came from.
    pub source: ConfigSource,
    /// Directory relative paths are resolved against.
    pub base_dir: PathBuf,
    /// The workspace of callers that are not tenants (`workspace`, default
    /// the base directory): their relative file grants, the relative paths
    /// their file tools take and their commands' starting directory are all
    /// in it.
    pub workspace: PathBuf,
    /// The plugin directory, absolute.
    pub plugins: Option<PathBuf>,
    /// Whether the bundled plugins are offered.
    pub bundled: bool,
    /// The profile of callers that are not tenants.
    pub default_profile: String,
    /// A profile chosen on the command line (`--profile`): it stays the
    /// default profile when the file is reloaded.
    pub pinned_profile: Option<String>,
    /// Where compiled plugins are cached; `None` to compile every load.
    pub cache_dir: Option<PathBuf>,
    /// Where audit lines go.
    pub audit: AuditTarget,
    /// The approvals allowlist file.
    pub allowlist: PathBuf,
    /// How long a human has to answer an approval.
    pub approval_timeout: std::time::Duration,
    /// SHA-256 of the token that may answer every tenant's approvals.
    pub approver_token_sha256: Option<[u8; 32]>,
    /// Rule sets answering approvals before anyone is asked.
    pub approvals_auto: Vec<String>,
    /// Composite toolsets.
    pub toolsets: Toolsets,
    /// The profiles as written, by name (resolve them with [`Config::profile`]).
    pub profiles: BTreeMap<String, ProfileConfig>,
    /// The global layer, on top of every profile.
    pub global: GlobalConfig,
    /// Tenants, by name.
    pub tenants: BTreeMap<String, Tenant>,
    /// Calls of one batch in flight at once.
    pub batch_concurrency: usize,
    /// Idle time before a stateful session is torn down.
    pub session_idle: std::time::Duration,
    /// Memory all stateful sessions may hold together, in bytes.
    pub sessions_memory: usize,
    /// The host ids (first, last) sandboxed commands run as when toolhost
    /// runs as root: the first for callers that are not tenants, one of
    /// the next for each tenant.
    pub sandbox_ids: (u32, u32),
    /// How much each tenant may make a server hold (`[tenant_caps]`).
    pub tenant_caps: TenantCaps,
    /// Variables the configuration names that are not set (`token_env`,
    /// `approver_token_env`, `secret_env`), as `(key, problem)`. Only the
    /// HTTP server uses them: it refuses to start (or to reload) while any
    /// is missing; other commands warn.
    pub unset_variables: Vec<(String, String)>,
    /// The MIME types results may carry (`results.mime_types`).
    pub mime_types: crate::contract::MimeTypes,
    /// Handles (`[state]`).
    pub state: HandleSettings,
    /// Tasks (`[tasks]`).
    pub tasks: TaskSettings,
    /// `ttlMs` of `tools/list` results (`[mcp] tools_ttl`).
    pub tools_ttl: std::time::Duration,
    /// toolhost's own paths under the configuration the host runs with,
    /// kept protected after a reload (the allowlist, audit log, cache and
    /// plugin directory it started with stay in use).
    pub retained_own: Option<std::sync::Arc<crate::policy::OwnPaths>>,
}

/// Where audit lines go.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AuditTarget {
    /// Nowhere.
    Off,
    /// Standard error.
    Stderr,
    /// Appended to a file.
    File(PathBuf),
}

#[cfg(test)]
mod tests;
