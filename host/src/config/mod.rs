//! `toolhost.toml`: its types, the embedded default, and validation that
//! reports every problem with the key it is at and why.

mod parse;
mod units;

use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde::Deserialize;

pub(crate) use parse::parse_toml;
pub use units::{ByteSize, Span, parse_duration, parse_size};

use crate::policy::{
    CommandRules, DangerousMode, HostRules, Limits, NetworkLimits, PathRules, PermissionRules,
    Profile, TerminalNetwork, TerminalSandbox, TerminalSettings, paths,
};
use crate::runtime::MAX_MEMORY;
use crate::toolsets::{CompositeToolset, Toolsets};

/// The configuration used when there is no `toolhost.toml`.
pub const EMBEDDED: &str = include_str!("default.toml");

/// The file name looked for in the current directory.
pub const FILE_NAME: &str = "toolhost.toml";

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
    /// Where compiled plugins are cached (`"off"` disables the cache).
    #[serde(default)]
    pub cache_dir: Option<PathBuf>,
    /// Where audit lines go: `"off"` (default), `"stderr"`, or a file path.
    #[serde(default)]
    pub audit: Option<String>,
    /// How approvals are asked and remembered.
    #[serde(default)]
    pub approvals: ApprovalsConfig,
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
}

/// `[profiles.NAME]` as written.
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
    /// Files.
    #[serde(default)]
    pub file: FileConfig,
    /// Outbound HTTP.
    #[serde(default)]
    pub network: NetworkConfig,
    /// Shell commands.
    #[serde(default)]
    pub terminal: TerminalConfig,
    /// Host environment variables.
    #[serde(default)]
    pub env: EnvConfig,
    /// Per-call limits.
    #[serde(default)]
    pub limits: LimitsConfig,
}

/// `file.*` of a profile.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FileConfig {
    /// Directories readable (relative to the workspace).
    #[serde(default)]
    pub read: Vec<String>,
    /// Directories readable and writable.
    #[serde(default)]
    pub write: Vec<String>,
    /// Globs refused inside the grants (`**/.env`, `secrets/**`).
    #[serde(default)]
    pub deny: Vec<String>,
}

/// `network.*` of a profile.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NetworkConfig {
    /// Hosts tools may reach: names, `*.suffix`, `*`, addresses, CIDRs, with
    /// optional `:port`. Private and loopback addresses need an explicit
    /// address entry.
    #[serde(default)]
    pub allow_hosts: Vec<String>,
    /// Longest request (default 30s).
    #[serde(default)]
    pub timeout: Option<Span>,
    /// Largest response body (default 10MiB).
    #[serde(default)]
    pub max_response: Option<ByteSize>,
    /// Most redirects followed (default 5).
    #[serde(default)]
    pub max_redirects: Option<usize>,
}

/// `terminal.*` of a profile.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TerminalConfig {
    /// When not empty, every command must match one of these patterns.
    #[serde(default)]
    pub allow_commands: Vec<String>,
    /// Commands refused (`rm -rf /*`).
    #[serde(default)]
    pub deny_commands: Vec<String>,
    /// What to do with dangerous commands: `deny` (default), `approve`, `allow`.
    #[serde(default)]
    pub dangerous: Option<DangerousMode>,
    /// Longest a command may run (default 60s).
    #[serde(default)]
    pub timeout: Option<Span>,
    /// Most output kept per stream (default 256KiB).
    #[serde(default)]
    pub max_output: Option<ByteSize>,
    /// Host environment variables passed to commands.
    #[serde(default)]
    pub env: Vec<String>,
    /// What confines commands: `kernel` (default) or `none`.
    #[serde(default)]
    pub sandbox: Option<TerminalSandbox>,
    /// What network commands get: `none`, `proxy` (the allowed hosts through
    /// the host's proxy) or `host`; by default `proxy` when the profile
    /// allows any host, else `none`.
    #[serde(default)]
    pub network: Option<TerminalNetwork>,
    /// Directories commands may read besides the file grants.
    #[serde(default)]
    pub read: Vec<PathBuf>,
    /// Most processes of one command at once (default 256).
    #[serde(default)]
    pub max_processes: Option<u64>,
    /// Most address space of each process (default 4GiB).
    #[serde(default)]
    pub memory: Option<ByteSize>,
    /// Largest file a command may write (default 1GiB).
    #[serde(default)]
    pub max_file_size: Option<ByteSize>,
    /// Size of the private /tmp (default 256MiB).
    #[serde(default)]
    pub tmp_size: Option<ByteSize>,
}

/// `env.*` of a profile.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EnvConfig {
    /// Host variables (names, `*` wildcards) that tools requiring them receive.
    #[serde(default)]
    pub allow: Vec<String>,
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
}

/// Where the configuration came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ConfigSource {
    /// A file.
    File(PathBuf),
    /// The built-in [`EMBEDDED`] configuration.
    Embedded,
}

impl fmt::Display for ConfigSource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::File(path) => write!(f, "{}", path.display()),
            Self::Embedded => f.write_str("the built-in configuration"),
        }
    }
}

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
    /// SHA-256 of its token (from `token_sha256`, or hashed from `token_env`).
    pub token_sha256: [u8; 32],
    /// Its profile's name.
    pub profile: String,
    /// Its workspace.
    pub workspace: PathBuf,
    /// Calls at once.
    pub concurrency: usize,
    /// Calls per minute, if limited.
    pub calls_per_minute: Option<u32>,
}

/// A validated configuration.
#[derive(Debug, Clone)]
pub struct Config {
    /// Where it came from.
    pub source: ConfigSource,
    /// Directory relative paths are resolved against.
    pub base_dir: PathBuf,
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
    /// Composite toolsets.
    pub toolsets: Toolsets,
    /// The profiles as written, by name (resolve them with [`Config::profile`]).
    pub profiles: BTreeMap<String, ProfileConfig>,
    /// Tenants, by name.
    pub tenants: BTreeMap<String, Tenant>,
    /// Calls of one batch in flight at once.
    pub batch_concurrency: usize,
    /// Idle time before a stateful session is torn down.
    pub session_idle: std::time::Duration,
    /// Memory all stateful sessions may hold together, in bytes.
    pub sessions_memory: usize,
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

impl Config {
    /// The built-in configuration, with the current directory as base.
    pub fn embedded() -> Config {
        let base = std::env::current_dir().unwrap_or_else(|_| PathBuf::from("/"));
        Self::parse(EMBEDDED, ConfigSource::Embedded, &base)
            .expect("the embedded configuration is valid")
    }

    /// Loads `path`.
    pub fn load(path: &Path) -> Result<Config, ConfigError> {
        let source = ConfigSource::File(path.to_path_buf());
        let text = std::fs::read_to_string(path).map_err(|e| ConfigError {
            source: source.clone(),
            problems: vec![(String::new(), format!("cannot read the file: {e}"))],
        })?;
        let base = path
            .parent()
            .map(|p| {
                if p.as_os_str().is_empty() {
                    Path::new(".")
                } else {
                    p
                }
            })
            .unwrap_or(Path::new("."));
        let base = std::path::absolute(base).unwrap_or_else(|_| base.to_path_buf());
        Self::parse(&text, source, &base)
    }

    /// `explicit` if given, else `./toolhost.toml` if it exists, else the
    /// embedded configuration.
    pub fn discover(explicit: Option<&Path>) -> Result<Config, ConfigError> {
        match explicit {
            Some(path) => Self::load(path),
            None if Path::new(FILE_NAME).is_file() => Self::load(Path::new(FILE_NAME)),
            None => Ok(Self::embedded()),
        }
    }

    /// Parses and validates `text`; relative paths resolve against `base`.
    pub fn parse(text: &str, source: ConfigSource, base: &Path) -> Result<Config, ConfigError> {
        let file = parse_file(text).map_err(|problem| ConfigError {
            source: source.clone(),
            problems: vec![problem],
        })?;
        let mut problems = Vec::new();
        let config = validate(file, source.clone(), base, &mut problems);
        if problems.is_empty() {
            Ok(config)
        } else {
            Err(ConfigError { source, problems })
        }
    }

    /// Profiles that run terminal commands outside the kernel sandbox
    /// (`terminal.sandbox = "none"`), by name.
    pub fn unconfined_terminal_profiles(&self) -> Vec<&str> {
        self.profiles
            .iter()
            .filter(|(_, p)| p.terminal.sandbox == Some(TerminalSandbox::None))
            .map(|(name, _)| name.as_str())
            .collect()
    }

    /// The profile `name` with its file grants rooted in `workspace` (the
    /// base directory when `None`).
    pub fn profile(&self, name: &str, workspace: Option<&Path>) -> Result<Arc<Profile>, String> {
        let written = self
            .profiles
            .get(name)
            .ok_or_else(|| format!("unknown profile {name:?}; known: {}", self.profile_names()))?;
        let workspace = workspace.unwrap_or(&self.base_dir);
        let mut problems = Vec::new();
        let profile = resolve_profile(name, written, workspace, &mut problems);
        match problems.first() {
            None => Ok(Arc::new(profile)),
            Some((key, problem)) => Err(format!("{key}: {problem}")),
        }
    }

    fn profile_names(&self) -> String {
        self.profiles.keys().cloned().collect::<Vec<_>>().join(", ")
    }
}

/// Parses the TOML into [`ConfigFile`]; the one error names its key and line.
fn parse_file(text: &str) -> Result<ConfigFile, (String, String)> {
    parse_toml(text)
}

fn validate(
    file: ConfigFile,
    source: ConfigSource,
    base: &Path,
    problems: &mut Vec<(String, String)>,
) -> Config {
    let mut problem = |key: &str, message: String| problems.push((key.to_string(), message));
    let default_profile = file
        .default_profile
        .unwrap_or_else(|| "default".to_string());
    if file.profiles.is_empty() {
        problem(
            "profiles",
            "no profiles are defined; define at least the default profile".into(),
        );
    } else if !file.profiles.contains_key(&default_profile) {
        problem(
            "default_profile",
            format!(
                "unknown profile {default_profile:?}; known: {}",
                file.profiles.keys().cloned().collect::<Vec<_>>().join(", ")
            ),
        );
    }
    let mut profile_problems = Vec::new();
    for (name, written) in &file.profiles {
        resolve_profile(name, written, base, &mut profile_problems);
    }
    problems.append(&mut profile_problems);

    let toolsets = match Toolsets::new(file.toolsets) {
        Ok(toolsets) => toolsets,
        Err(errors) => {
            for error in errors {
                let (key, message) = error.split_once(": ").unwrap_or(("toolsets", &error));
                problems.push((key.to_string(), message.to_string()));
            }
            Toolsets::default()
        }
    };

    let mut tenants = BTreeMap::new();
    for (name, written) in &file.tenants {
        if let Some(tenant) = validate_tenant(name, written, &file.profiles, base, problems) {
            tenants.insert(name.clone(), tenant);
        }
    }

    let audit = match file.audit.as_deref() {
        None | Some("off") => AuditTarget::Off,
        Some("stderr") => AuditTarget::Stderr,
        Some(path) => AuditTarget::File(base.join(path)),
    };
    let cache_dir = match &file.cache_dir {
        Some(dir) if dir.as_os_str() == "off" => None,
        Some(dir) => Some(base.join(dir)),
        None => crate::runtime::ArtifactCache::default_dir(),
    };
    let batch_concurrency = file
        .batch_concurrency
        .unwrap_or(crate::DEFAULT_BATCH_CONCURRENCY);
    if batch_concurrency == 0 {
        problems.push(("batch_concurrency".into(), "must be at least 1".into()));
    }
    Config {
        source,
        base_dir: base.to_path_buf(),
        plugins: file.plugins.map(|p| base.join(p)),
        bundled: file.bundled.unwrap_or(true),
        default_profile,
        pinned_profile: None,
        cache_dir,
        audit,
        allowlist: file
            .approvals
            .allowlist
            .map(|p| base.join(p))
            .unwrap_or_else(|| base.join("toolhost-approvals.json")),
        approval_timeout: file
            .approvals
            .timeout
            .map(|s| s.0)
            .unwrap_or(std::time::Duration::from_secs(60)),
        toolsets,
        profiles: file.profiles,
        tenants,
        batch_concurrency: batch_concurrency.max(1),
        session_idle: file
            .session_idle
            .map(|s| s.0)
            .unwrap_or(crate::DEFAULT_SESSION_IDLE),
        sessions_memory: file
            .sessions_memory
            .map_or(crate::DEFAULT_SESSIONS_MEMORY, |s| s.0 as usize),
    }
}

fn validate_tenant(
    name: &str,
    written: &TenantConfig,
    profiles: &BTreeMap<String, ProfileConfig>,
    base: &Path,
    problems: &mut Vec<(String, String)>,
) -> Option<Tenant> {
    let key = |field: &str| format!("tenants.{name}.{field}");
    let before = problems.len();
    if !profiles.contains_key(&written.profile) {
        problems.push((
            key("profile"),
            format!(
                "unknown profile {:?}; known: {}",
                written.profile,
                profiles.keys().cloned().collect::<Vec<_>>().join(", ")
            ),
        ));
    }
    let token = match (&written.token_sha256, &written.token_env) {
        (Some(_), Some(_)) => {
            problems.push((
                key("token_sha256"),
                "give token_sha256 or token_env, not both".into(),
            ));
            None
        }
        (None, None) => {
            problems.push((
                format!("tenants.{name}"),
                "needs token_sha256 (hex SHA-256 of the bearer token) or token_env (a variable holding it)"
                    .into(),
            ));
            None
        }
        (Some(hex), None) => match decode_sha256(hex) {
            Some(hash) => Some(hash),
            None => {
                problems.push((key("token_sha256"), "must be 64 hex digits".into()));
                None
            }
        },
        (None, Some(var)) => match std::env::var(var) {
            Ok(token) if !token.is_empty() => {
                use sha2::Digest;
                Some(sha2::Sha256::digest(token.as_bytes()).into())
            }
            _ => {
                problems.push((
                    key("token_env"),
                    format!("environment variable {var:?} is not set or empty"),
                ));
                None
            }
        },
    };
    if written.concurrency == Some(0) {
        problems.push((key("concurrency"), "must be at least 1".into()));
    }
    if written.calls_per_minute == Some(0) {
        problems.push((
            key("calls_per_minute"),
            "must be at least 1 (omit it for no limit)".into(),
        ));
    }
    let workspace = written
        .workspace
        .as_ref()
        .map(|w| paths::normalize(&base.join(w)))
        .unwrap_or_else(|| base.to_path_buf());
    if problems.len() > before {
        return None;
    }
    let concurrency = written.concurrency.unwrap_or_else(|| {
        profiles
            .get(&written.profile)
            .and_then(|p| p.limits.concurrency)
            .unwrap_or(Limits::default().concurrency)
    });
    Some(Tenant {
        name: name.to_string(),
        token_sha256: token?,
        profile: written.profile.clone(),
        workspace,
        concurrency,
        calls_per_minute: written.calls_per_minute,
    })
}

fn decode_sha256(hex: &str) -> Option<[u8; 32]> {
    let hex = hex.trim();
    if hex.len() != 64 {
        return None;
    }
    let mut out = [0u8; 32];
    for (i, byte) in out.iter_mut().enumerate() {
        *byte = u8::from_str_radix(hex.get(2 * i..2 * i + 2)?, 16).ok()?;
    }
    Some(out)
}

/// Resolves a written profile against `workspace`, pushing every problem.
/// Returns a usable (possibly partial) profile either way.
fn resolve_profile(
    name: &str,
    written: &ProfileConfig,
    workspace: &Path,
    problems: &mut Vec<(String, String)>,
) -> Profile {
    let key = |field: &str| format!("profiles.{name}.{field}");
    let mut profile = Profile::deny_all(name, workspace);

    match PermissionRules::parse(&written.allow, &written.deny, &written.approval_required) {
        Ok(rules) => {
            for overlap in rules.overlaps() {
                problems.push((
                    key("deny"),
                    format!("{overlap:?} is both allowed and denied (overlapping rules); keep one"),
                ));
            }
            profile.permissions = rules;
        }
        Err(e) => problems.push((key_of_permission(name, written, &e.pattern), e.to_string())),
    }

    let resolve = |entries: &[String]| -> Vec<PathBuf> {
        entries
            .iter()
            .map(|entry| {
                let trimmed = entry.strip_suffix("/**").unwrap_or(entry);
                let trimmed = if trimmed.is_empty() { "/" } else { trimmed };
                paths::normalize(&workspace.join(trimmed))
            })
            .collect()
    };
    let deny: Vec<String> = written
        .file
        .deny
        .iter()
        .map(|pattern| {
            if pattern.starts_with('/') || pattern.starts_with("**") {
                pattern.clone()
            } else {
                let joined = workspace.join(pattern.trim_start_matches("./"));
                joined.to_string_lossy().into_owned()
            }
        })
        .collect();
    for (field, entries) in [
        ("file.read", &written.file.read),
        ("file.write", &written.file.write),
    ] {
        for (i, entry) in entries.iter().enumerate() {
            if written.file.deny.contains(entry) {
                problems.push((
                    format!("profiles.{name}.{field}[{i}]"),
                    format!("{entry:?} is both granted and denied (overlapping rules)"),
                ));
            }
        }
    }
    match PathRules::new(
        resolve(&written.file.read),
        resolve(&written.file.write),
        &deny,
    ) {
        Ok(rules) => profile.paths = rules,
        Err(e) => problems.push((key("file"), e.to_string())),
    }

    match HostRules::parse(&written.network.allow_hosts) {
        Ok(rules) => profile.hosts = rules,
        Err(e) => problems.push((key("network.allow_hosts"), e.to_string())),
    }
    let defaults = NetworkLimits::default();
    profile.network = NetworkLimits {
        timeout: written
            .network
            .timeout
            .map(|s| s.0)
            .unwrap_or(defaults.timeout),
        max_response: written
            .network
            .max_response
            .map(|s| s.0)
            .unwrap_or(defaults.max_response),
        max_redirects: written
            .network
            .max_redirects
            .unwrap_or(defaults.max_redirects),
    };

    let terminal = &written.terminal;
    match CommandRules::parse(&terminal.allow_commands, &terminal.deny_commands) {
        Ok(rules) => profile.commands = rules,
        Err(e) => problems.push((key("terminal"), e.to_string())),
    }
    for command in &terminal.allow_commands {
        if terminal.deny_commands.contains(command) {
            problems.push((
                key("terminal.deny_commands"),
                format!("{command:?} is both allowed and denied (overlapping rules)"),
            ));
        }
    }
    let defaults = TerminalSettings::default();
    profile.terminal = TerminalSettings {
        dangerous: terminal.dangerous.unwrap_or(defaults.dangerous),
        timeout: terminal.timeout.map(|s| s.0).unwrap_or(defaults.timeout),
        max_output: terminal
            .max_output
            .map(|s| s.0 as usize)
            .unwrap_or(defaults.max_output),
        env: terminal.env.clone(),
        sandbox: terminal.sandbox.unwrap_or(defaults.sandbox),
        network: terminal
            .network
            .unwrap_or(if profile.hosts.allow_hosts.is_empty() {
                TerminalNetwork::None
            } else {
                TerminalNetwork::Proxy
            }),
        read: terminal
            .read
            .iter()
            .map(|dir| paths::normalize(&workspace.join(dir)))
            .collect(),
        max_processes: terminal.max_processes.unwrap_or(defaults.max_processes),
        memory: terminal.memory.map_or(defaults.memory, |s| s.0),
        max_file_size: terminal
            .max_file_size
            .map_or(defaults.max_file_size, |s| s.0),
        tmp_size: terminal.tmp_size.map_or(defaults.tmp_size, |s| s.0),
    };

    for (i, pattern) in written.env.allow.iter().enumerate() {
        if pattern.is_empty()
            || !pattern
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'*')
        {
            problems.push((
                format!("profiles.{name}.env.allow[{i}]"),
                format!("{pattern:?} is not a variable name or a pattern like \"GITHUB_*\""),
            ));
        }
    }
    profile.env = written.env.allow.clone();

    let limits = &written.limits;
    let defaults = Limits::default();
    profile.limits = Limits {
        memory: limits
            .memory
            .map(|s| s.0 as usize)
            .unwrap_or(defaults.memory),
        timeout: limits.timeout.map(|s| s.0).unwrap_or(defaults.timeout),
        max_output: limits
            .max_output
            .map(|s| s.0 as usize)
            .unwrap_or(defaults.max_output),
        max_arguments: limits
            .max_arguments
            .map(|s| s.0 as usize)
            .unwrap_or(defaults.max_arguments),
        concurrency: limits.concurrency.unwrap_or(defaults.concurrency),
    };
    if profile.limits.memory > MAX_MEMORY {
        problems.push((
            key("limits.memory"),
            format!(
                "{} is more than the host's maximum of 4GiB",
                profile.limits.memory
            ),
        ));
    }
    if profile.limits.memory < (1 << 20) {
        problems.push((key("limits.memory"), "must be at least 1MiB".into()));
    }
    if profile.limits.concurrency == 0 {
        problems.push((key("limits.concurrency"), "must be at least 1".into()));
    }
    if profile.limits.timeout.is_zero() {
        problems.push((key("limits.timeout"), "must be more than 0".into()));
    }
    profile
}

/// The key of the list an invalid permission pattern is in.
fn key_of_permission(name: &str, written: &ProfileConfig, pattern: &str) -> String {
    for (field, list) in [
        ("allow", &written.allow),
        ("deny", &written.deny),
        ("approval_required", &written.approval_required),
    ] {
        if let Some(i) = list.iter().position(|p| p == pattern) {
            return format!("profiles.{name}.{field}[{i}]");
        }
    }
    format!("profiles.{name}")
}
