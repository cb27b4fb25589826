//! Declarative HTTP tools: a `*.toml` (or `*.yaml`, see [`yaml`]) file in
//! the plugin directory that wraps an HTTP API without code. The host parses and validates the file here
//! (every problem names its key), turns each tool into a [`ToolSpec`] with a
//! JSON Schema built from its parameters, and runs its calls in the bundled
//! wrapper plugin (`plugins/declarative`), inside the sandbox and under the
//! caller's network policy like any plugin's `http` use.
//!
//! ```toml
//! toolset = "weather"
//! base_url = "https://api.weather.example/v1"
//! auth = { type = "bearer", env = "WEATHER_TOKEN" }
//!
//! [[tools]]
//! name = "current_weather"
//! description = "The current weather in a city."
//! url = "/current/{city}"
//! response = { pointer = "/current" }
//! parameters.city = { type = "string", description = "City name", required = true }
//! parameters.units = { type = "string", enum = ["metric", "imperial"], default = "metric" }
//! ```

mod adapter;
mod checks;
mod file;
mod yaml;

use std::collections::HashMap;

use serde::Deserialize;
use serde_json::{Map, Value, json};

use crate::capability::env::ENV_READ;
use crate::capability::network::NETWORK_FETCH;
use crate::config::parse_toml;
use crate::contract::bindings::toolhost::plugin::types::ToolSpec as WitToolSpec;
use crate::contract::spec::is_valid_tool_name;
use checks::{
    auth_env, auth_json, check_auth, check_headers, check_timeout, check_url, parameter_schema,
    placeholders, to_json,
};
use file::{FORMATS, File, LOCATIONS, METHODS, Parameter};

pub(crate) use adapter::Adapter;

/// A validated declarative file: the tools' specs and, per tool, the
/// definition the wrapper plugin executes.
#[derive(Debug)]
pub(crate) struct Declared {
    pub(crate) specs: Vec<WitToolSpec>,
    pub(crate) definitions: Adapter,
}

/// The syntax of a declarative file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Syntax {
    Toml,
    /// `*.yaml` and `*.yml`.
    Yaml,
}

impl Syntax {
    /// The syntax of the file at `path`, by its extension.
    pub(crate) fn of(path: &std::path::Path) -> Self {
        match path.extension().and_then(|e| e.to_str()) {
            Some("yaml" | "yml") => Self::Yaml,
            _ => Self::Toml,
        }
    }
}

/// Parses and validates a declarative file. `plugin` (the file's name) is the
/// default toolset. Every problem is `key: what is wrong`, in the syntax's
/// names.
pub(crate) fn parse(plugin: &str, text: &str, syntax: Syntax) -> Result<Declared, Vec<String>> {
    match syntax {
        Syntax::Toml => {
            let file: File = parse_toml(text).map_err(|(key, message)| {
                vec![if key.is_empty() {
                    message
                } else {
                    format!("{key}: {message}")
                }]
            })?;
            validate(plugin, &file)
        }
        Syntax::Yaml => validate(plugin, &yaml::read(text)?)
            .map_err(|problems| problems.into_iter().map(yaml::yaml_key).collect()),
    }
}

/// Validates a file read in either syntax.
fn validate(plugin: &str, file: &File) -> Result<Declared, Vec<String>> {
    let mut problems = Vec::new();
    let mut problem = |key: String, message: String| problems.push(format!("{key}: {message}"));
    if file.tools.is_empty() {
        problem(
            "tools".into(),
            "no tools are defined; add a [[tools]] table with name, description and url".into(),
        );
    }
    if let Some(base) = &file.base_url {
        check_url(base, "base_url", &mut problem);
    }
    check_headers(&file.headers, "headers", &mut problem);
    if let Some(auth) = &file.auth {
        check_auth(auth, "auth", &mut problem);
    }
    let file_timeout = file
        .timeout
        .as_deref()
        .and_then(|t| check_timeout(t, "timeout", &mut problem));
    let mut specs = Vec::new();
    let mut definitions = HashMap::new();
    for (index, tool) in file.tools.iter().enumerate() {
        let key = |rest: &str| format!("tools[{index}].{rest}");
        if !is_valid_tool_name(&tool.name) {
            problem(
                key("name"),
                format!(
                    "{:?} is not a valid tool name: use 1 to 64 characters of a-z, A-Z, 0-9, '_' or '-'",
                    tool.name
                ),
            );
        } else if definitions.contains_key(&tool.name) {
            problem(
                key("name"),
                format!("tool {:?} is defined twice in this file", tool.name),
            );
        }
        let method = tool.method.as_deref().unwrap_or("GET").to_ascii_uppercase();
        if !METHODS.contains(&method.as_str()) {
            problem(
                key("method"),
                format!("must be one of {}", METHODS.join(", ")),
            );
        }
        let url = match (&file.base_url, tool.url.starts_with('/')) {
            (Some(base), true) => format!("{}{}", base.trim_end_matches('/'), tool.url),
            (None, true) => {
                problem(
                    key("url"),
                    format!(
                        "{:?} is a path; set base_url at the top of the file or write a full \
                         https:// URL",
                        tool.url
                    ),
                );
                tool.url.clone()
            }
            _ => {
                check_url(&tool.url, &key("url"), &mut problem);
                tool.url.clone()
            }
        };
        let placeholders = placeholders(&url);
        check_headers(&tool.headers, &key("headers"), &mut problem);
        let auth = tool.auth.as_ref().or(file.auth.as_ref());
        if let Some(auth) = &tool.auth {
            check_auth(auth, &key("auth"), &mut problem);
        }
        let timeout = match &tool.timeout {
            Some(t) => check_timeout(t, &key("timeout"), &mut problem),
            None => file_timeout,
        };
        let format = tool.response.format.as_deref().unwrap_or("json");
        if !FORMATS.contains(&format) {
            problem(
                key("response.format"),
                format!("must be one of {}", FORMATS.join(", ")),
            );
        }
        if let Some(pointer) = &tool.response.pointer {
            if format != "json" {
                problem(
                    key("response.pointer"),
                    "applies only to the json response format".into(),
                );
            } else if !pointer.is_empty() && !pointer.starts_with('/') {
                problem(
                    key("response.pointer"),
                    format!("{pointer:?} is not a JSON pointer: write it like \"/items/0/name\""),
                );
            }
        }

        let mut properties = Map::new();
        let mut required = Vec::new();
        let mut wire = Map::new();
        for (name, value) in &tool.parameters {
            let pkey = key(&format!("parameters.{name}"));
            let parameter = match Parameter::deserialize(value.clone()) {
                Ok(p) => p,
                Err(e) => {
                    problem(pkey, e.message().trim().to_string());
                    continue;
                }
            };
            if !is_valid_tool_name(name) {
                problem(
                    pkey.clone(),
                    "parameter names use 1 to 64 characters of a-z, A-Z, 0-9, '_' or '-'".into(),
                );
            }
            let location = match parameter.location.as_deref() {
                Some(location) => location,
                None if placeholders.contains(name) => "path",
                None if matches!(method.as_str(), "GET" | "HEAD" | "DELETE") => "query",
                None => "body",
            };
            if !LOCATIONS.contains(&location) {
                problem(
                    format!("{pkey}.in"),
                    format!("must be one of {}", LOCATIONS.join(", ")),
                );
            } else if location == "path" && !placeholders.contains(name) {
                problem(
                    format!("{pkey}.in"),
                    format!("is \"path\" but the url has no {{{name}}} placeholder"),
                );
            } else if location == "body" && matches!(method.as_str(), "GET" | "HEAD") {
                problem(
                    format!("{pkey}.in"),
                    format!("a {method} request has no body; use \"query\" or another method"),
                );
            } else if location == "path" && !parameter.required && parameter.default.is_none() {
                problem(
                    format!("{pkey}.required"),
                    "a path parameter must be required or have a default".into(),
                );
            }
            let Some(schema) = parameter_schema(&parameter, &pkey, &mut problem) else {
                continue;
            };
            if parameter.required {
                required.push(Value::String(name.clone()));
            }
            properties.insert(name.clone(), schema);
            let mut entry = json!({ "in": location });
            if let Some(default) = &parameter.default {
                entry["default"] = to_json(default);
            }
            wire.insert(name.clone(), entry);
        }
        for placeholder in &placeholders {
            if !tool.parameters.contains_key(placeholder) {
                problem(
                    key("url"),
                    format!(
                        "placeholder {{{placeholder}}} has no parameter; add \
                         parameters.{placeholder}"
                    ),
                );
            }
        }

        let mut headers = file.headers.clone();
        headers.extend(tool.headers.clone());
        let mut requires_env: Vec<String> = auth.map(auth_env).unwrap_or_default();
        requires_env.dedup();
        let definition = json!({
            "method": method,
            "url": url,
            "headers": headers,
            "auth": auth.map(auth_json),
            "parameters": wire,
            "response": { "format": format, "pointer": tool.response.pointer },
            "timeout_ms": timeout.map(|t| u32::try_from(t.as_millis()).unwrap_or(u32::MAX)),
        });
        let read_only = tool
            .read_only
            .unwrap_or(matches!(method.as_str(), "GET" | "HEAD"));
        specs.push(WitToolSpec {
            name: tool.name.clone(),
            description: tool.description.clone(),
            parameters: json!({
                "type": "object",
                "properties": properties,
                "required": required,
                "additionalProperties": false,
            })
            .to_string(),
            toolset: tool
                .toolset
                .clone()
                .or_else(|| file.toolset.clone())
                .unwrap_or_else(|| plugin.to_string()),
            permissions: if requires_env.is_empty() {
                vec![NETWORK_FETCH.to_string()]
            } else {
                vec![NETWORK_FETCH.to_string(), ENV_READ.to_string()]
            },
            requires_env,
            emoji: tool.emoji.clone(),
            read_only,
            destructive: tool.destructive.unwrap_or(false),
            title: tool.title.clone(),
            output_schema: None,
        });
        definitions.insert(tool.name.clone(), definition.to_string().into_boxed_str());
    }
    if problems.is_empty() {
        Ok(Declared {
            specs,
            definitions: Adapter::new(definitions),
        })
    } else {
        Err(problems)
    }
}

#[cfg(test)]
mod tests;
