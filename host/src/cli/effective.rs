//! `toolhost config show --effective [--profile P] [--tenant T]`: the
//! configuration as it will be enforced, on one screen: where it came from,
//! the settings every caller shares, and each profile's grants, denies,
//! hosts and terminal rules, resolved (global layer merged, paths absolute).

use std::fmt::Write as _;

use anyhow::{Context as _, Result};

use crate::capability::Profile;
use crate::config::{AuditTarget, Config, ConfigSource};
use crate::policy::human_bytes;
use crate::policy::{Access, PermissionPattern};

/// The report: the shared settings, then each profile (only `profile`, or
/// `tenant`'s profile in its workspace, when given).
pub(super) fn report(
    config: &Config,
    profile: Option<&str>,
    tenant: Option<&str>,
) -> Result<String> {
    let mut out = String::new();
    let source = match &config.source {
        ConfigSource::File(path) => std::path::absolute(path)
            .unwrap_or_else(|_| path.clone())
            .display()
            .to_string(),
        ConfigSource::Embedded => config.source.to_string(),
    };
    let _ = writeln!(out, "# the configuration as enforced");
    let _ = writeln!(out, "config      {source}");
    let _ = writeln!(out, "base_dir    {}", config.base_dir.display());
    let _ = writeln!(out, "workspace   {}", config.workspace.display());
    let _ = writeln!(
        out,
        "plugins     {} (bundled plugins {})",
        config
            .plugins
            .as_ref()
            .map_or("none".into(), |p| p.display().to_string()),
        if config.bundled { "on" } else { "off" }
    );
    let _ = writeln!(out, "default     profile {:?}", config.default_profile);
    let _ = writeln!(
        out,
        "cache       {}",
        config
            .cache_dir
            .as_ref()
            .map_or("off".into(), |p| p.display().to_string())
    );
    let audit = match &config.audit {
        AuditTarget::Off => "off".to_string(),
        AuditTarget::Stderr => "stderr".to_string(),
        AuditTarget::File(path) => path.display().to_string(),
    };
    let _ = writeln!(out, "audit       {audit}");
    let _ = writeln!(
        out,
        "approvals   allowlist {}, timeout {:?}, auto [{}]",
        config.allowlist.display(),
        config.approval_timeout,
        config.approvals_auto.join(", ")
    );
    for tenant in config.tenants.values() {
        let _ = writeln!(
            out,
            "tenant      {} (profile {:?}, workspace {})",
            tenant.name,
            tenant.profile,
            tenant.workspace.display()
        );
    }
    let chosen: Vec<(String, Option<std::path::PathBuf>, Option<&str>)> = match (tenant, profile) {
        (Some(name), _) => {
            let t = config.tenants.get(name).with_context(|| {
                format!(
                    "unknown tenant {name:?}; known: {}",
                    config
                        .tenants
                        .keys()
                        .cloned()
                        .collect::<Vec<_>>()
                        .join(", ")
                )
            })?;
            vec![(t.profile.clone(), Some(t.workspace.clone()), Some(name))]
        }
        (None, Some(name)) => vec![(name.to_string(), None, None)],
        (None, None) => config
            .profiles
            .keys()
            .map(|p| (p.clone(), None, None))
            .collect(),
    };
    for (name, workspace, tenant) in chosen {
        let resolved = config
            .profile(&name, workspace.as_deref())
            .map_err(anyhow::Error::msg)?;
        let _ = writeln!(out);
        describe(&mut out, &resolved, tenant);
    }
    Ok(out)
}

/// One profile as enforced.
fn describe(out: &mut String, profile: &Profile, tenant: Option<&str>) {
    let whose = tenant.map_or(String::new(), |t| format!(", tenant {t:?}"));
    let _ = writeln!(
        out,
        "[profiles.{}]{whose} workspace {}",
        profile.name,
        profile.workspace.display()
    );
    let rules = &profile.permissions;
    list(out, "allow", &patterns(&rules.allow));
    list(out, "deny", &patterns(&rules.deny));
    list(
        out,
        "approval_required",
        &patterns(&rules.approval_required),
    );
    let grants = |access: Access| -> Vec<String> {
        profile
            .file
            .grants()
            .filter(|(_, a)| *a == access)
            .map(|(dir, _)| dir.display().to_string())
            .collect()
    };
    list(out, "file.read", &grants(Access::Read));
    list(out, "file.write", &grants(Access::Write));
    let deny: Vec<String> = profile.file.deny_patterns().map(String::from).collect();
    list(out, "file.deny", &deny);
    let hosts: Vec<String> = profile
        .network
        .hosts
        .allow_hosts
        .iter()
        .map(ToString::to_string)
        .collect();
    list(out, "network.allow_hosts", &hosts);
    let commands = |rules: &[crate::capability::terminal::CommandPattern]| -> Vec<String> {
        rules.iter().map(ToString::to_string).collect()
    };
    list(
        out,
        "terminal.allow_commands",
        &commands(&profile.terminal.commands.allow),
    );
    list(
        out,
        "terminal.deny_commands",
        &commands(&profile.terminal.commands.deny),
    );
    let terminal = &profile.terminal;
    let _ = writeln!(
        out,
        "  terminal: dangerous {}, sandbox {}, network {}, backend {}, timeout {:?}",
        word(&terminal.dangerous),
        word(&terminal.sandbox),
        word(&terminal.network),
        word(&terminal.backend),
        terminal.timeout
    );
    let read: Vec<String> = terminal
        .read
        .iter()
        .map(|p| p.display().to_string())
        .collect();
    list(out, "terminal.read", &read);
    list(out, "env.allow", &profile.env.allow);
    let limits = &profile.limits;
    let _ = writeln!(
        out,
        "  limits: memory {}, timeout {:?}, max_output {}, concurrency {}",
        human_bytes(limits.memory),
        limits.timeout,
        human_bytes(limits.max_output),
        limits.concurrency
    );
    for rules in profile.tools.values() {
        let mut parts = Vec::new();
        if let Some(key) = &rules.disabled_by {
            parts.push(format!("off ({key})"));
        }
        for (name, values) in [
            ("allow", &rules.permissions.allow),
            ("deny", &rules.permissions.deny),
            ("approval_required", &rules.permissions.approval_required),
        ] {
            if !values.is_empty() {
                parts.push(format!("{name} {}", patterns(values).join(", ")));
            }
        }
        for rule in &rules.arguments {
            parts.push(format!("{} {}", rule.pointer, rule.matcher));
        }
        let _ = writeln!(out, "  tool {}: {}", rules.tool, parts.join("; "));
    }
}

fn patterns(values: &[PermissionPattern]) -> Vec<String> {
    values.iter().map(ToString::to_string).collect()
}

fn list(out: &mut String, key: &str, values: &[String]) {
    let shown = if values.is_empty() {
        "(none)".to_string()
    } else {
        values.join(", ")
    };
    let _ = writeln!(out, "  {key}: {shown}");
}

/// A setting as written in the configuration (`"approve"`, `"proxy"`).
fn word<T: serde::Serialize + std::fmt::Debug>(value: &T) -> String {
    match serde_json::to_value(value) {
        Ok(serde_json::Value::String(text)) => text,
        _ => format!("{value:?}").to_lowercase(),
    }
}
