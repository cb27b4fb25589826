//! `toolhost check`: loads one plugin file the way the host would and reports,
//! on one screen, what it is, what it offers and what is wrong with it.

use std::fmt::{self, Write as _};
use std::path::Path;
use std::sync::Arc;

use anyhow::{Context as _, Result};
use serde_json::Value;

use crate::contract::{CONTRACT_SERIES, CONTRACT_VERSION, ContentHash};
use crate::policy::{PermissionPattern, human_bytes};
use crate::runtime::{ArtifactCache, PluginVersion, Runtime};
use crate::source::{LoadError, PluginSource, is_declarative_file, plugin_name_for};

/// The outcome of checking a plugin file.
#[derive(Debug, Clone)]
pub struct Report {
    text: String,
    problems: usize,
    warnings: usize,
}

impl Report {
    /// True when the plugin would load.
    pub fn is_ok(&self) -> bool {
        self.problems == 0
    }

    /// How many problems stop the plugin from loading.
    pub fn problems(&self) -> usize {
        self.problems
    }

    /// How many things are worth fixing but do not stop it.
    pub fn warnings(&self) -> usize {
        self.warnings
    }
}

impl fmt::Display for Report {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.text)
    }
}

/// Checks the plugin at `path`, compiling it through the default cache
/// (`config::default_cache_dir`), so that its first load after the check
/// finds it compiled.
pub async fn check_file(path: &Path) -> Result<Report> {
    check_file_with(
        path,
        crate::config::default_cache_dir().map(ArtifactCache::new),
    )
    .await
}

/// [`check_file`], through `cache` (`None`: compiled and not kept).
pub async fn check_file_with(path: &Path, cache: Option<ArtifactCache>) -> Result<Report> {
    let bytes = tokio::fs::read(path)
        .await
        .with_context(|| format!("reading {}", path.display()))?;
    let runtime = Runtime::shared()?;
    Ok(check_bytes(&runtime, path, bytes.into(), cache.as_ref()).await)
}

async fn check_bytes(
    runtime: &Arc<Runtime>,
    path: &Path,
    bytes: Arc<[u8]>,
    cache: Option<&ArtifactCache>,
) -> Report {
    let name = plugin_name_for(path);
    let mut text = String::new();
    let _ = writeln!(text, "plugin    {name}");
    let _ = writeln!(
        text,
        "file      {} ({}, sha256 {})",
        path.display(),
        human_bytes(bytes.len()),
        ContentHash::of(&bytes).short()
    );
    let _ = writeln!(
        text,
        "host      speaks toolhost:plugin@{CONTRACT_VERSION} (loads any {CONTRACT_SERIES})"
    );
    let source = PluginSource::File(path.to_path_buf());
    let declarative = is_declarative_file(path);
    let loaded = if declarative {
        match std::str::from_utf8(&bytes) {
            Ok(text) => PluginVersion::declarative(runtime, &name, source, text, cache).await,
            Err(e) => Err(LoadError::new(
                &name,
                &source,
                format!("is not UTF-8 text: {e}"),
            )),
        }
    } else {
        PluginVersion::load(runtime, &name, source, bytes, cache).await
    };
    match loaded {
        Err(error) => {
            let _ = writeln!(text, "\n✗ does not load:");
            for problem in &error.problems {
                let _ = writeln!(text, "  - {problem}");
            }
            Report {
                text,
                problems: error.problems.len(),
                warnings: 0,
            }
        }
        Ok(version) => {
            let warnings = describe_version(&mut text, runtime, &version, declarative);
            let _ = writeln!(
                text,
                "\n✓ ok: {} tool{} would load{}",
                version.tools().len(),
                if version.tools().len() == 1 { "" } else { "s" },
                match warnings {
                    0 => String::new(),
                    n => format!(" ({n} warning{})", if n == 1 { "" } else { "s" }),
                }
            );
            Report {
                text,
                problems: 0,
                warnings,
            }
        }
    }
}

/// Writes the plugin's imports and tools; returns how many warnings it wrote.
fn describe_version(
    text: &mut String,
    runtime: &Runtime,
    version: &PluginVersion,
    declarative: bool,
) -> usize {
    let _ = writeln!(
        text,
        "contract  built against toolhost:plugin@{}",
        version.contract()
    );
    let capabilities: Vec<&str> = version
        .imports()
        .iter()
        .filter_map(|i| i.strip_prefix("toolhost:plugin/"))
        .filter_map(|i| i.split('@').next())
        .filter(|i| *i != "types")
        .collect();
    let wasi = version
        .imports()
        .iter()
        .filter(|i| i.starts_with("wasi:"))
        .count();
    let _ = writeln!(
        text,
        "imports   {}{}",
        if capabilities.is_empty() {
            "no toolhost capabilities".to_string()
        } else {
            format!("toolhost {}", capabilities.join(", "))
        },
        match wasi {
            0 => String::new(),
            n => format!("; {n} WASI interfaces"),
        }
    );
    let _ = writeln!(
        text,
        "state     {}",
        if version.is_stateful() {
            "stateful (one instance per session id)"
        } else {
            "stateless (a fresh instance per call)"
        }
    );
    describe_capabilities(text, runtime, version);
    let _ = writeln!(text, "\ntools");
    let mut warnings = 0;
    for tool in version.tools() {
        let mut flags = Vec::new();
        if tool.read_only {
            flags.push("read-only");
        }
        if tool.destructive {
            flags.push("destructive");
        }
        let _ = writeln!(
            text,
            "  {}{}  [{}]{}",
            tool.emoji
                .as_deref()
                .map(|e| format!("{e} "))
                .unwrap_or_default(),
            tool.name,
            tool.toolset,
            if flags.is_empty() {
                String::new()
            } else {
                format!(" {}", flags.join(", "))
            }
        );
        let _ = writeln!(
            text,
            "      {}",
            tool.description.lines().next().unwrap_or_default()
        );
        let permissions = if tool.permissions.is_empty() {
            "none".to_string()
        } else {
            tool.permissions.join(", ")
        };
        let _ = writeln!(text, "      permissions: {permissions}");
        if !tool.requires_env.is_empty() {
            let _ = writeln!(text, "      requires env: {}", tool.requires_env.join(", "));
        }
        let _ = writeln!(
            text,
            "      arguments: {}",
            summarize_schema(&tool.parameters)
        );
        for warning in schema_warnings(&tool.parameters, declarative) {
            warnings += 1;
            let _ = writeln!(text, "      ! {warning}");
        }
    }
    warnings
}

/// The capabilities the plugin's tools declare a permission of, each with
/// what it lets a tool do when the profile allows it.
fn describe_capabilities(text: &mut String, runtime: &Runtime, version: &PluginVersion) {
    let declared: Vec<PermissionPattern> = version
        .tools()
        .iter()
        .flat_map(|tool| &tool.permissions)
        .filter_map(|p| PermissionPattern::parse(p).ok())
        .collect();
    let mut label = "may use";
    for info in runtime.capability_infos() {
        let permissions: Vec<&str> = info
            .permissions
            .iter()
            .map(|permission| permission.as_str())
            .filter(|permission| declared.iter().any(|p| p.matches(permission)))
            .collect();
        if permissions.is_empty() {
            continue;
        }
        let _ = writeln!(
            text,
            "{label:<9} {} ({}): {}",
            info.name,
            permissions.join(", "),
            info.describe(&permissions)
        );
        label = "";
    }
}

/// `text: string (required), upper: boolean`.
fn summarize_schema(schema: &Value) -> String {
    let required: Vec<&str> = schema["required"]
        .as_array()
        .map(|r| r.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    let Some(properties) = schema["properties"].as_object().filter(|p| !p.is_empty()) else {
        return "none".into();
    };
    properties
        .iter()
        .map(|(name, property)| {
            let ty = match &property["type"] {
                Value::String(t) => t.clone(),
                Value::Array(ts) => ts
                    .iter()
                    .filter_map(Value::as_str)
                    .collect::<Vec<_>>()
                    .join("|"),
                _ if property.get("enum").is_some() => "enum".into(),
                _ => "any".into(),
            };
            let required = if required.contains(&name.as_str()) {
                " (required)"
            } else {
                ""
            };
            format!("{name}: {ty}{required}")
        })
        .collect::<Vec<_>>()
        .join(", ")
}

/// Things a model would trip over: parameters without descriptions (the
/// fix named in the terms of a declarative file, or of a compiled plugin).
fn schema_warnings(schema: &Value, declarative: bool) -> Vec<String> {
    let Some(properties) = schema["properties"].as_object() else {
        return Vec::new();
    };
    properties
        .iter()
        .filter(|(_, p)| p.get("description").is_none())
        .map(|(name, _)| {
            let fix = if declarative {
                format!("give parameter {name:?} a description in the file")
            } else {
                "add a description to its schema (in Rust, a doc comment on the field)".into()
            };
            format!("argument {name:?} has no description; {fix} so models know what to pass")
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn summarizes_arguments() {
        let schema = json!({
            "type": "object",
            "properties": {"text": {"type": "string", "description": "t"}, "n": {"type": ["integer", "null"]}},
            "required": ["text"]
        });
        assert_eq!(
            summarize_schema(&schema),
            "n: integer|null, text: string (required)"
        );
        assert_eq!(schema_warnings(&schema, false).len(), 1);
        assert!(schema_warnings(&schema, true)[0].contains("a description in the file"));
        assert!(!schema_warnings(&schema, true)[0].contains("doc comment"));
        assert_eq!(summarize_schema(&json!({"type": "object"})), "none");
    }
}
