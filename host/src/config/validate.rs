//! Validation of the file as written into a [`Config`], reporting every
//! problem with the key it is at and why.

use std::collections::BTreeMap;
use std::path::Path;

use super::file::{ConfigFile, GlobalConfig, ProfileConfig, TenantConfig};
use super::profile::resolve_profile;
use super::{AuditTarget, Config, ConfigSource, Tenant};
use crate::capability::file::rules as paths;
use crate::capability::terminal::DEFAULT_SANDBOX_IDS;
use crate::policy::Limits;
use crate::toolsets::Toolsets;

pub(super) fn validate(
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
    let none: [String; 0] = [];
    if let Err(e) = crate::policy::PermissionRules::parse(
        &none,
        &file.global.deny,
        &file.global.approval_required,
    ) {
        profile_problems.push(("global".to_string(), e.to_string()));
    }
    let own = std::sync::Arc::new(crate::policy::OwnPaths::none());
    let workspace = file
        .workspace
        .as_ref()
        .map_or_else(|| base.to_path_buf(), |w| paths::normalize(&base.join(w)));
    for (name, written) in &file.profiles {
        resolve_profile(
            name,
            written,
            &file.global,
            &workspace,
            &own,
            &mut profile_problems,
        );
    }
    // The global layer's problems come once, not once per profile.
    let mut seen = std::collections::HashSet::new();
    profile_problems.retain(|problem| seen.insert(problem.clone()));
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

    let sandbox_ids = sandbox_ids(file.sandbox_ids.as_deref(), file.tenants.len(), problems);
    let mut tenants = BTreeMap::new();
    let mut unset = Vec::new();
    for (name, written) in &file.tenants {
        let context = TenantContext {
            profiles: &file.profiles,
            global: &file.global,
            base,
        };
        if let Some(mut tenant) = validate_tenant(name, written, &context, problems, &mut unset) {
            // The first id is the callers' that are not tenants.
            tenant.sandbox_id = sandbox_ids.0.saturating_add(1 + tenants.len() as u32);
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
        None => super::default_cache_dir(),
    };
    let batch_concurrency = file
        .batch_concurrency
        .unwrap_or(super::DEFAULT_BATCH_CONCURRENCY);
    if batch_concurrency == 0 {
        problems.push(("batch_concurrency".into(), "must be at least 1".into()));
    }
    if let Err(e) = crate::approval::auto::rules(&file.approvals.auto) {
        let message = e.trim_start_matches("approvals.auto: ").to_string();
        problems.push(("approvals.auto".into(), message));
    }
    let tenant_caps = tenant_caps(
        &file.tenant_caps,
        file.sessions_memory,
        file.tenants.len(),
        problems,
    );
    static GENERATIONS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);
    Config {
        generation: GENERATIONS.fetch_add(1, std::sync::atomic::Ordering::Relaxed),
        source,
        base_dir: base.to_path_buf(),
        workspace,
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
        approver_token_sha256: token_hash(
            file.approvals.approver_token_sha256.as_deref(),
            file.approvals.approver_token_env.as_deref(),
            (
                "approvals.approver_token_sha256",
                "approvals.approver_token_env",
            ),
            problems,
            &mut unset,
        ),
        approvals_auto: file.approvals.auto.clone(),
        toolsets,
        profiles: file.profiles,
        global: file.global,
        tenants,
        batch_concurrency: batch_concurrency.max(1),
        session_idle: file
            .session_idle
            .map(|s| s.0)
            .unwrap_or(super::DEFAULT_SESSION_IDLE),
        sessions_memory: file
            .sessions_memory
            .map_or(super::DEFAULT_SESSIONS_MEMORY, |s| s.0 as usize),
        sandbox_ids,
        tenant_caps,
        unset_variables: unset,
        mime_types: super::results::mime_types(&file.results, problems),
        state: super::state::settings(&file.state, base, problems),
        tasks: super::tasks::settings(&file.tasks, problems),
        tools_ttl: file
            .mcp
            .tools_ttl
            .map_or(std::time::Duration::ZERO, |s| s.0),
        retained_own: None,
    }
}

/// `[tenant_caps]`, with an explicit share of `sessions_memory` that every
/// tenant and the local caller hold at once still fitting in it.
fn tenant_caps(
    written: &super::caps::TenantCapsConfig,
    sessions_memory: Option<crate::policy::ByteSize>,
    tenants: usize,
    problems: &mut Vec<(String, String)>,
) -> super::TenantCaps {
    let caps = super::TenantCaps::validate(written, problems);
    let total = sessions_memory.map_or(super::DEFAULT_SESSIONS_MEMORY, |s| s.0 as usize);
    if let Some(share) = caps.sessions_memory
        && share.saturating_mul(tenants + 1) > total
    {
        problems.push((
            "tenant_caps.sessions_memory".into(),
            format!(
                "{share} bytes for each of {tenants} tenants and the local caller is more than \
                 sessions_memory = {total} bytes, so one tenant at its share could leave \
                 another none; set it to at most {} or raise sessions_memory",
                total / (tenants + 1)
            ),
        ));
    }
    caps
}

/// `sandbox_ids` as written (`"FIRST-LAST"`), checked: no id 0, room for
/// one id per tenant and one for the callers that are not tenants.
fn sandbox_ids(
    written: Option<&str>,
    tenants: usize,
    problems: &mut Vec<(String, String)>,
) -> (u32, u32) {
    let Some(written) = written else {
        return DEFAULT_SANDBOX_IDS;
    };
    let mut problem = |message: String| problems.push(("sandbox_ids".into(), message));
    let parsed = written
        .split_once('-')
        .and_then(|(first, last)| Some((first.trim().parse().ok()?, last.trim().parse().ok()?)));
    let Some((first, last)) = parsed else {
        problem(format!(
            "{written:?} is not a range of ids like \"{}-{}\"",
            DEFAULT_SANDBOX_IDS.0, DEFAULT_SANDBOX_IDS.1
        ));
        return DEFAULT_SANDBOX_IDS;
    };
    let (first, last): (u32, u32) = (first, last);
    if first == 0 || last < first {
        problem(format!(
            "{written:?} must run upwards from above 0: commands never run as root"
        ));
        return DEFAULT_SANDBOX_IDS;
    }
    let needed = tenants as u64 + 1;
    if u64::from(last - first) + 1 < needed {
        problem(format!(
            "{written:?} holds {} ids; {needed} are needed, one for each tenant and one for the \
             callers that are not tenants",
            u64::from(last - first) + 1
        ));
    }
    (first, last)
}

/// What a tenant is validated against.
struct TenantContext<'a> {
    profiles: &'a BTreeMap<String, ProfileConfig>,
    global: &'a GlobalConfig,
    base: &'a Path,
}

fn validate_tenant(
    name: &str,
    written: &TenantConfig,
    context: &TenantContext<'_>,
    problems: &mut Vec<(String, String)>,
    unset: &mut Vec<(String, String)>,
) -> Option<Tenant> {
    let TenantContext {
        profiles,
        global,
        base,
    } = *context;
    let key = |field: &str| format!("tenants.{name}.{field}");
    let before = problems.len();
    // The empty name is the local caller's, which owns what callers that
    // are not tenants keep (tasks, sessions).
    if name.is_empty() || name.chars().any(char::is_control) {
        problems.push((
            format!("tenants.{}", crate::escape::escape(name)),
            "a tenant's name must not be empty nor hold control characters; rename the table"
                .into(),
        ));
    }
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
        (None, None) => {
            problems.push((
                format!("tenants.{name}"),
                "needs token_sha256 (hex SHA-256 of the bearer token) or token_env (a variable holding it)"
                    .into(),
            ));
            None
        }
        (hex, var) => token_hash(
            hex.as_deref(),
            var.as_deref(),
            (&key("token_sha256"), &key("token_env")),
            problems,
            unset,
        ),
    };
    let webhook = match (&written.approvals.webhook, &written.approvals.secret_env) {
        (None, None) => None,
        (None, Some(_)) => {
            problems.push((
                key("approvals.secret_env"),
                "is used only with approvals.webhook".into(),
            ));
            None
        }
        (Some(_), None) => {
            problems.push((
                key("approvals.secret_env"),
                "approvals.webhook needs secret_env, the variable holding the HMAC secret its \
                 requests are signed with"
                    .into(),
            ));
            None
        }
        (Some(url), Some(var)) => {
            if !(url.starts_with("http://") || url.starts_with("https://")) {
                problems.push((
                    key("approvals.webhook"),
                    format!("{url:?} is not an http(s) URL"),
                ));
            }
            match std::env::var(var) {
                Ok(secret) if !secret.is_empty() => Some((url.clone(), secret.into_bytes())),
                _ => {
                    unset.push((key("approvals.secret_env"), unset_problem(var)));
                    None
                }
            }
        }
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
    let reaches = profiles
        .get(&written.profile)
        .and_then(|profile| reaches_files_or_terminal(profile, global));
    if let (None, Some(permission)) = (&written.workspace, reaches) {
        problems.push((
            key("workspace"),
            format!(
                "profile {:?} grants {permission:?}, so the tenant needs a workspace of its own \
                 (without one it would work in the config's directory, beside toolhost's own \
                 files); set workspace = \"tenants/{name}\" or another directory",
                written.profile
            ),
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
        token_sha256: token,
        profile: written.profile.clone(),
        workspace,
        concurrency,
        calls_per_minute: written.calls_per_minute,
        webhook,
        sandbox_id: 0,
    })
}

/// The first of `file:read`, `file:write` and `terminal:execute` that
/// `profile` (with the global layer, or one of its tools' own rules) allows
/// or asks approval for.
fn reaches_files_or_terminal(
    profile: &ProfileConfig,
    global: &GlobalConfig,
) -> Option<&'static str> {
    use crate::policy::{PermissionDecision, PermissionRules};
    let none: [String; 0] = [];
    let global_rules =
        PermissionRules::parse(&none, &global.deny, &global.approval_required).ok()?;
    let base = PermissionRules::parse(&profile.allow, &profile.deny, &profile.approval_required)
        .ok()?
        .layered(&global_rules);
    let mut layers = vec![base.clone()];
    for tool in profile.tools.values().chain(global.tools.values()) {
        if let Ok(own) = PermissionRules::parse(&tool.allow, &tool.deny, &tool.approval_required) {
            layers.push(base.layered(&own));
        }
    }
    ["file:read", "file:write", "terminal:execute"]
        .into_iter()
        .find(|permission| {
            layers.iter().any(|rules| {
                matches!(
                    rules.decide(permission),
                    PermissionDecision::Allowed | PermissionDecision::NeedsApproval { .. }
                )
            })
        })
}

/// Why the variable `var` the config names cannot be used.
fn unset_problem(var: &str) -> String {
    format!(
        "environment variable {var:?} is not set or empty; set it where `toolhost serve --http` \
         runs (only the HTTP server uses it)"
    )
}

/// SHA-256 of a token given as hex or in an environment variable (`keys`:
/// the hex key and the variable's key). A variable that is not set goes to
/// `unset`: only the HTTP server needs it.
pub(super) fn token_hash(
    hex: Option<&str>,
    var: Option<&str>,
    (hex_key, var_key): (&str, &str),
    problems: &mut Vec<(String, String)>,
    unset: &mut Vec<(String, String)>,
) -> Option<[u8; 32]> {
    match (hex, var) {
        (Some(_), Some(_)) => {
            let field = |key: &str| key.rsplit('.').next().unwrap_or(key).to_string();
            problems.push((
                hex_key.into(),
                format!("give {} or {}, not both", field(hex_key), field(var_key)),
            ));
            None
        }
        (None, None) => None,
        (Some(hex), None) => match decode_sha256(hex) {
            Some(hash) => Some(hash),
            None => {
                problems.push((hex_key.into(), "must be 64 hex digits".into()));
                None
            }
        },
        (None, Some(var)) => match std::env::var(var) {
            Ok(token) if !token.is_empty() => {
                use sha2::Digest;
                Some(sha2::Sha256::digest(token.as_bytes()).into())
            }
            _ => {
                unset.push((var_key.into(), unset_problem(var)));
                None
            }
        },
    }
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
