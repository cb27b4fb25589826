//! What a refused approval names: the exact change after which it is no
//! longer asked, as the line to add to the allowlist file and the key to
//! change in the configuration file, each with the file's path.

use std::path::Path;

use crate::config::{Config, ConfigSource};

use super::ApprovalRequest;
#[cfg(test)]
use super::Subject;

/// Where an approval rule is written: the TOML table that holds
/// `approval_required` with `pattern`, matched for `tool` under `profile`
/// (the tool's layers first, then the profile's, then `[global]`).
pub(crate) fn approval_table(
    config: Option<&Config>,
    profile: &str,
    tool: &str,
    pattern: &str,
) -> String {
    let holds = |patterns: &[String]| patterns.iter().any(|p| p == pattern);
    let written = config.and_then(|c| c.profiles.get(profile));
    let global = config.map(|c| &c.global);
    if written
        .and_then(|w| w.tools.get(tool))
        .is_some_and(|t| holds(&t.approval_required))
    {
        return format!("[profiles.{profile}.tools.{tool}]");
    }
    if global
        .and_then(|g| g.tools.get(tool))
        .is_some_and(|t| holds(&t.approval_required))
    {
        return format!("[global.tools.{tool}]");
    }
    if written.is_none_or(|w| holds(&w.approval_required)) {
        return format!("[profiles.{profile}]");
    }
    if global.is_some_and(|g| holds(&g.approval_required)) {
        return "[global]".into();
    }
    format!("[profiles.{profile}]")
}

/// `change` made in the configuration `source` came from (`None`: a host
/// built without one, where the change is made in code).
pub(crate) fn in_config(change: &str, source: Option<&ConfigSource>) -> String {
    match source {
        Some(ConfigSource::File(path)) => {
            let path = std::path::absolute(path).unwrap_or_else(|_| path.clone());
            format!("{change} in {}", path.display())
        }
        None => change.to_string(),
        Some(ConfigSource::Embedded) => format!(
            "{change} in a toolhost.toml (the built-in configuration cannot be edited: start \
             from `toolhost config show > toolhost.toml`)"
        ),
    }
}

/// The allowlist entry that approves `request` from now on, and where it
/// goes in `file` (the local caller's under `approved`, a tenant's under
/// `tenants.NAME`); the whole file when it does not exist yet.
pub(crate) fn allowlist_entry(request: &ApprovalRequest, file: &Path) -> String {
    let key = serde_json::Value::String(request.key()).to_string();
    let (list, whole) = match &request.tenant {
        None => (
            "the \"approved\" list".to_string(),
            format!("{{\"approved\": [{key}]}}"),
        ),
        Some(tenant) => {
            let name = serde_json::Value::String(tenant.clone()).to_string();
            (
                format!("\"tenants\".{name}"),
                format!("{{\"tenants\": {{{name}: [{key}]}}}}"),
            )
        }
    };
    if file.exists() {
        format!("add {key} to {list} in {}", file.display())
    } else {
        format!("create {} holding {whole}", file.display())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request(tenant: Option<&str>) -> ApprovalRequest {
        ApprovalRequest {
            tool: "run".into(),
            profile: "dev".into(),
            tenant: tenant.map(String::from),
            session: None,
            subject: Subject::Permission("terminal:execute".into()),
            config_change: None,
        }
    }

    #[test]
    fn the_allowlist_entry_is_the_literal_line_in_the_callers_list() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("toolhost-approvals.json");
        assert_eq!(
            allowlist_entry(&request(None), &file),
            format!(
                "create {} holding {{\"approved\": [\"tool run terminal:execute\"]}}",
                file.display()
            )
        );
        std::fs::write(&file, "{}").unwrap();
        assert_eq!(
            allowlist_entry(&request(Some("acme")), &file),
            format!(
                "add \"tool run terminal:execute\" to \"tenants\".\"acme\" in {}",
                file.display()
            )
        );
    }

    #[test]
    fn the_rule_is_found_in_the_layer_that_writes_it() {
        let config = Config::parse(
            "default_profile = \"dev\"\n[global]\napproval_required = [\"network:*\"]\n\
             [global.tools.fetch]\napproval_required = [\"env:*\"]\n\
             [profiles.dev]\nallow = [\"*\"]\napproval_required = [\"terminal:*\"]\n\
             [profiles.dev.tools.run]\napproval_required = [\"file:write\"]\n",
            ConfigSource::Embedded,
            Path::new("/ws"),
        )
        .unwrap();
        let table = |tool: &str, pattern: &str| approval_table(Some(&config), "dev", tool, pattern);
        assert_eq!(table("run", "file:write"), "[profiles.dev.tools.run]");
        assert_eq!(table("fetch", "env:*"), "[global.tools.fetch]");
        assert_eq!(table("run", "terminal:*"), "[profiles.dev]");
        assert_eq!(table("run", "network:*"), "[global]");
        assert_eq!(approval_table(None, "p", "run", "x"), "[profiles.p]");
    }
}
