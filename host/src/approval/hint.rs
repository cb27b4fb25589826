//! What a refused approval names: the exact change after which it is no
//! longer asked, as the line to add to the allowlist file and the key to
//! change in the configuration file, each with the file's path.

use std::fmt;
use std::path::{Path, PathBuf};

use super::ApprovalRequest;
#[cfg(test)]
use super::Subject;

/// Where a configuration came from: what a refusal names as the file to
/// change (defined here, below the configuration, for that; `config`
/// re-exports it).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ConfigSource {
    /// A file.
    File(PathBuf),
    /// The built-in configuration (`config::EMBEDDED`).
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
}
