//! YAML tool files (`*.yaml`, `*.yml`): the registration format of the
//! agent runtimes toolhost serves (`tools: - name, type: http_wrapper,
//! endpoint, method, auth: {type: basic, username_env, password_env},
//! parameters: [...], tags, timeout_seconds`), read into the same
//! [`File`] as a TOML file and validated the same way.
//!
//! ```yaml
//! tools:
//!   - name: jira_create_ticket
//!     type: http_wrapper
//!     description: Create a Jira ticket.
//!     endpoint: https://jira.example/rest/api/2/issue
//!     method: POST
//!     auth: { type: basic, username_env: JIRA_USER, password_env: JIRA_TOKEN }
//!     parameters:
//!       - { name: summary, type: string, required: true, description: One line. }
//!     tags: [jira, tickets]
//!     timeout_seconds: 30
//! ```
//!
//! Parsed by `serde-saphyr`: a maintained YAML reader in pure Rust (no
//! `unsafe-libyaml`, unlike `serde_yaml`'s forks), that does not panic on
//! hostile input, bounds aliases and nesting, and reports the line and
//! column of each error.

use std::collections::BTreeMap;

use serde::Deserialize;

use super::file::{Auth, File, Response, Tool};

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct YamlFile {
    toolset: Option<String>,
    base_url: Option<String>,
    #[serde(default)]
    headers: BTreeMap<String, String>,
    auth: Option<Auth>,
    timeout_seconds: Option<f64>,
    #[serde(default)]
    tools: Vec<YamlTool>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct YamlTool {
    name: String,
    description: String,
    /// `http_wrapper`, the only kind of tool a file declares.
    #[serde(rename = "type")]
    kind: Option<String>,
    endpoint: String,
    method: Option<String>,
    #[serde(default)]
    headers: BTreeMap<String, String>,
    auth: Option<Auth>,
    #[serde(default)]
    parameters: Vec<YamlParameter>,
    /// Labels; accepted, not used.
    #[serde(default)]
    #[allow(dead_code)]
    tags: Vec<String>,
    timeout_seconds: Option<f64>,
    toolset: Option<String>,
    emoji: Option<String>,
    title: Option<String>,
    read_only: Option<bool>,
    destructive: Option<bool>,
    #[serde(default)]
    response: Response,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct YamlParameter {
    name: String,
    #[serde(rename = "type")]
    ty: Option<String>,
    description: Option<String>,
    #[serde(default)]
    required: bool,
    #[serde(rename = "in")]
    location: Option<String>,
    #[serde(rename = "enum")]
    values: Option<Vec<serde_json::Value>>,
    default: Option<serde_json::Value>,
    items: Option<String>,
}

/// Reads a YAML tool file into the file format every declarative file
/// has; `Err` has the problems (`key: what is wrong`, a parse error with
/// its line and column).
pub(super) fn read(text: &str) -> Result<File, Vec<String>> {
    let yaml: YamlFile = serde_saphyr::from_str(text).map_err(|e| vec![e.to_string()])?;
    let mut problems = Vec::new();
    let mut tools = Vec::new();
    for (index, tool) in yaml.tools.into_iter().enumerate() {
        let key = |rest: &str| format!("tools[{index}].{rest}");
        if let Some(kind) = tool.kind.as_deref().filter(|kind| *kind != "http_wrapper") {
            problems.push(format!(
                "{}: {kind:?} tools are not supported; a tool file declares http_wrapper tools",
                key("type")
            ));
        }
        let mut parameters = toml::map::Map::new();
        for (position, parameter) in tool.parameters.into_iter().enumerate() {
            let pkey = key(&format!("parameters[{position}]"));
            if parameters.contains_key(&parameter.name) {
                problems.push(format!(
                    "{pkey}.name: parameter {:?} is listed twice",
                    parameter.name
                ));
                continue;
            }
            match parameter_table(&parameter) {
                Ok(table) => {
                    parameters.insert(parameter.name.clone(), toml::Value::Table(table));
                }
                Err(message) => problems.push(format!("{pkey}: {message}")),
            }
        }
        tools.push(Tool {
            name: tool.name,
            description: tool.description,
            toolset: tool.toolset,
            method: tool.method,
            url: tool.endpoint,
            headers: tool.headers,
            auth: tool.auth,
            timeout: seconds(tool.timeout_seconds, &key("timeout_seconds"), &mut problems),
            emoji: tool.emoji,
            title: tool.title,
            read_only: tool.read_only,
            destructive: tool.destructive,
            parameters,
            response: tool.response,
        });
    }
    let timeout = seconds(yaml.timeout_seconds, "timeout_seconds", &mut problems);
    if !problems.is_empty() {
        return Err(problems);
    }
    Ok(File {
        toolset: yaml.toolset,
        base_url: yaml.base_url,
        headers: yaml.headers,
        auth: yaml.auth,
        timeout,
        tools,
    })
}

/// The names a problem of a YAML file uses for keys the TOML format names
/// otherwise.
pub(super) fn yaml_key(problem: String) -> String {
    problem
        .replacen("].url:", "].endpoint:", 1)
        .replacen("].timeout:", "].timeout_seconds:", 1)
        .replacen(
            "timeout:",
            "timeout_seconds:",
            usize::from(problem.starts_with("timeout:")),
        )
}

/// `timeout_seconds` as the duration text the TOML format takes.
fn seconds(value: Option<f64>, key: &str, problems: &mut Vec<String>) -> Option<String> {
    let value = value?;
    if !(value.is_finite() && value > 0.0) {
        problems.push(format!("{key}: must be a positive number of seconds"));
        return None;
    }
    Some(format!("{}ms", (value * 1000.0).round() as u64))
}

/// A parameter as the TOML format's table.
fn parameter_table(parameter: &YamlParameter) -> Result<toml::Table, String> {
    let value = |json: &serde_json::Value| {
        toml::Value::try_from(json).map_err(|_| format!("{json} is not a value a parameter takes"))
    };
    let mut table = toml::Table::new();
    if let Some(ty) = &parameter.ty {
        table.insert("type".into(), ty.clone().into());
    }
    if let Some(description) = &parameter.description {
        table.insert("description".into(), description.clone().into());
    }
    table.insert("required".into(), parameter.required.into());
    if let Some(location) = &parameter.location {
        table.insert("in".into(), location.clone().into());
    }
    if let Some(values) = &parameter.values {
        let values = values.iter().map(value).collect::<Result<Vec<_>, _>>()?;
        table.insert("enum".into(), toml::Value::Array(values));
    }
    if let Some(default) = &parameter.default {
        table.insert("default".into(), value(default)?);
    }
    if let Some(items) = &parameter.items {
        table.insert("items".into(), items.clone().into());
    }
    Ok(table)
}
