//! `toolhost.toml` as written: the serde types of each section (each
//! capability's own table is in its folder, `capability/<name>/section.rs`).

use std::collections::BTreeMap;
use std::path::PathBuf;

use serde::Deserialize;

use crate::capability::list::foreach_capability;
use crate::capability::section::Section;
use crate::policy::{ByteSize, Span};
use crate::toolsets::CompositeToolset;

/// `toolhost.toml` as written.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ConfigFile {
    /// Directory watched for plugin `.wasm` files.
    #[serde(default)]
    pub plugins: Option<PathBuf>,
    /// Also offer the plugins bundled in the binary (default true).
    #[serde(default)]
    pub bundled: Option<bool>,
    /// Profile of callers that are not tenants.
    #[serde(default)]
    pub default_profile: Option<String>,
    /// The workspace of callers that are not tenants (default: the config
    /// file's directory).
    #[serde(default)]
    pub workspace: Option<PathBuf>,
    /// Where compiled plugins are cached (`"off"` disables the cache).
    #[serde(default)]
    pub cache_dir: Option<PathBuf>,
    /// Where audit lines go: `"off"` (default), `"stderr"`, or a file path.
    #[serde(default)]
    pub audit: Option<String>,
    /// How approvals are asked and remembered.
    #[serde(default)]
    pub approvals: ApprovalsConfig,
    /// Rules every profile gets on top of its own.
    #[serde(default)]
    pub global: GlobalConfig,
    /// Composite toolsets.
    #[serde(default)]
    pub toolsets: BTreeMap<String, CompositeToolset>,
    /// Permission profiles.
    #[serde(default)]
    pub profiles: BTreeMap<String, ProfileConfig>,
    /// Tenants of the HTTP server.
    #[serde(default)]
    pub tenants: BTreeMap<String, TenantConfig>,
    /// Calls of one batch in flight at once.
    #[serde(default)]
    pub batch_concurrency: Option<usize>,
    /// Idle time before a stateful session is torn down.
    #[serde(default)]
    pub session_idle: Option<Span>,
    /// Memory all stateful sessions may hold together.
    #[serde(default)]
    pub sessions_memory: Option<ByteSize>,
    /// The host ids sandboxed commands run as when toolhost runs as root
    /// (`"FIRST-LAST"`).
    #[serde(default)]
    pub sandbox_ids: Option<String>,
    /// How much each tenant may make a server hold.
    #[serde(default)]
    pub tenant_caps: super::caps::TenantCapsConfig,
    /// What results may carry beyond JSON.
    #[serde(default)]
    pub results: super::results::ResultsConfig,
    /// Handles: their key, lifetime and cap.
    #[serde(default)]
    pub state: super::state::StateConfig,
    /// Long calls as tasks: when, how long kept, how many.
    #[serde(default)]
    pub tasks: super::tasks::TasksConfig,
    /// MCP: `tools_ttl`.
    #[serde(default)]
    pub mcp: super::tasks::McpConfig,
}

/// `[approvals]`.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ApprovalsConfig {
    /// File where `always` answers are kept (default: next to the config,
    /// `toolhost-approvals.json`).
    #[serde(default)]
    pub allowlist: Option<PathBuf>,
    /// How long to wait for an answer before denying (default 60s).
    #[serde(default)]
    pub timeout: Option<Span>,
    /// SHA-256 (hex) of a token that may list and answer every tenant's
    /// pending approvals.
    #[serde(default)]
    pub approver_token_sha256: Option<String>,
    /// Environment variable holding that token.
    #[serde(default)]
    pub approver_token_env: Option<String>,
    /// Rule sets that answer approvals before anyone is asked
    /// (`"build-dirs"`).
    #[serde(default)]
    pub auto: Vec<String>,
}

/// `[tenants.NAME.approvals]`.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TenantApprovalsConfig {
    /// URL every pending approval of the tenant is POSTed to.
    #[serde(default)]
    pub webhook: Option<String>,
    /// Environment variable holding the webhook's HMAC secret.
    #[serde(default)]
    pub secret_env: Option<String>,
}

macro_rules! profile_config {
    (sections: [$($(#[$sm:meta])* $skey:ident: $scap:path [$($g:ident)?]),* $(,)?],
     others: [$($rest:tt)*] $(,)?) => {
        /// `[profiles.NAME]` as written: the permission patterns, one table
        /// per capability with one (in the list's order), the limits and
        /// the tool layer. The field order is the order of `expected one of
        /// ...` in messages.
        #[derive(Debug, Clone, Default, Deserialize)]
        #[serde(deny_unknown_fields)]
        pub struct ProfileConfig {
            /// Permission patterns tools may have (`file:*`, `network:fetch`, `*`).
            #[serde(default)]
            pub allow: Vec<String>,
            /// Permission patterns tools may not have; deny wins over allow.
            #[serde(default)]
            pub deny: Vec<String>,
            /// Permission patterns whose calls a human must approve first.
            #[serde(default)]
            pub approval_required: Vec<String>,
            $(
                $(#[$sm])*
                #[doc = concat!("`", stringify!($skey), ".*`, as written.")]
                #[serde(default)]
                pub $skey: <$scap as Section>::Written,
            )*
            /// Per-call limits.
            #[serde(default)]
            pub limits: LimitsConfig,
            /// The tool and parameter layers: rules for single tools, by name.
            #[serde(default)]
            pub tools: BTreeMap<String, ToolConfig>,
        }

        global_config!(@ [] $($(#[$sm])* $skey: $scap [$($g)?],)*);
    };
}

/// `GlobalConfig`, with a field for each capability marked `[global]` in
/// the list (a muncher: `macro_rules!` cannot filter a repetition).
macro_rules! global_config {
    (@ [$($fields:tt)*]) => {
        /// `[global]`: the layer under every profile. It can only take away:
        /// deny patterns, approvals, file deny globs, denied commands, and
        /// tool rules.
        #[derive(Debug, Clone, Default, Deserialize)]
        #[serde(deny_unknown_fields)]
        pub struct GlobalConfig {
            /// Permission patterns no profile may grant.
            #[serde(default)]
            pub deny: Vec<String>,
            /// Permission patterns every profile asks approval for.
            #[serde(default)]
            pub approval_required: Vec<String>,
            $($fields)*
            /// Rules for single tools under every profile.
            #[serde(default)]
            pub tools: BTreeMap<String, ToolConfig>,
        }
    };
    (@ [$($fields:tt)*] $(#[$m:meta])* $key:ident: $cap:path [global], $($rest:tt)*) => {
        global_config!(@ [
            $($fields)*
            $(#[$m])*
            #[doc = concat!("`[global.", stringify!($key), "]`: on top of every profile's.")]
            #[serde(default)]
            pub $key: <$cap as Section>::Global,
        ] $($rest)*);
    };
    (@ [$($fields:tt)*] $(#[$m:meta])* $key:ident: $cap:path [], $($rest:tt)*) => {
        global_config!(@ [$($fields)*] $($rest)*);
    };
}
foreach_capability!(profile_config);

/// `[profiles.P.tools.T]` or `[global.tools.T]`: one tool's rules.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ToolConfig {
    /// `false` hides and refuses the tool.
    #[serde(default)]
    pub enabled: Option<bool>,
    /// Permission patterns granted to this tool only.
    #[serde(default)]
    pub allow: Vec<String>,
    /// Permission patterns refused to this tool.
    #[serde(default)]
    pub deny: Vec<String>,
    /// Permission patterns this tool asks approval for.
    #[serde(default)]
    pub approval_required: Vec<String>,
    /// Restrictions by JSON pointer: a list of globs, or a table with one of
    /// `glob`, `regex`, `enum`, `min`/`max`.
    #[serde(default)]
    pub arguments: BTreeMap<String, serde_json::Value>,
}

/// `limits` of a profile.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LimitsConfig {
    /// Memory per instance (default 64MiB).
    #[serde(default)]
    pub memory: Option<ByteSize>,
    /// Time per call (default 30s).
    #[serde(default)]
    pub timeout: Option<Span>,
    /// Largest result (default 1MiB).
    #[serde(default)]
    pub max_output: Option<ByteSize>,
    /// Largest arguments (default 1MiB).
    #[serde(default)]
    pub max_arguments: Option<ByteSize>,
    /// Calls at once under this profile (default 16).
    #[serde(default)]
    pub concurrency: Option<usize>,
}

/// `[tenants.NAME]` as written.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TenantConfig {
    /// SHA-256 of the tenant's bearer token, in hex.
    #[serde(default)]
    pub token_sha256: Option<String>,
    /// Environment variable holding the bearer token.
    #[serde(default)]
    pub token_env: Option<String>,
    /// The tenant's profile.
    pub profile: String,
    /// Directory the profile's file grants are rooted in.
    #[serde(default)]
    pub workspace: Option<PathBuf>,
    /// Calls at once (default: the profile's concurrency).
    #[serde(default)]
    pub concurrency: Option<usize>,
    /// Calls per minute (default unlimited).
    #[serde(default)]
    pub calls_per_minute: Option<u32>,
    /// Where the tenant's pending approvals are sent.
    #[serde(default)]
    pub approvals: TenantApprovalsConfig,
}
