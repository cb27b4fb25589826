//! Declarative HTTP tools: a `*.toml` file in the plugin directory that wraps
//! an HTTP API without code. The host parses and validates the file here
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

use std::collections::{BTreeMap, HashMap};
use std::time::Duration;

use serde::Deserialize;
use serde_json::{Map, Value, json};

use crate::config::{parse_duration, parse_toml};
use crate::contract::bindings::toolhost::plugin::types::ToolSpec as WitToolSpec;
use crate::contract::spec::{is_valid_env_name, is_valid_tool_name};
use crate::runtime::{ENV_READ, NETWORK_FETCH};

/// A validated declarative file: the tools' specs and, per tool, the
/// definition the wrapper plugin executes.
#[derive(Debug)]
pub(crate) struct Declared {
    pub(crate) specs: Vec<WitToolSpec>,
    pub(crate) definitions: Adapter,
}

/// Turns a call of a declarative tool into a call of the wrapper's `invoke`.
#[derive(Debug, Default)]
pub(crate) struct Adapter {
    definitions: HashMap<String, Box<str>>,
}

impl Adapter {
    /// The wrapper's tool.
    pub(crate) const TOOL: &'static str = "invoke";

    /// The wrapper's arguments for a call of `tool` with `arguments` (a JSON
    /// object, already validated against the tool's schema).
    pub(crate) fn arguments(&self, tool: &str, arguments: &str) -> String {
        let definition = self.definitions.get(tool).map_or("null", |d| d);
        format!("{{\"definition\":{definition},\"arguments\":{arguments}}}")
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct File {
    toolset: Option<String>,
    base_url: Option<String>,
    #[serde(default)]
    headers: BTreeMap<String, String>,
    auth: Option<Auth>,
    timeout: Option<String>,
    #[serde(default)]
    tools: Vec<Tool>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Tool {
    name: String,
    description: String,
    toolset: Option<String>,
    method: Option<String>,
    url: String,
    #[serde(default)]
    headers: BTreeMap<String, String>,
    auth: Option<Auth>,
    timeout: Option<String>,
    emoji: Option<String>,
    title: Option<String>,
    read_only: Option<bool>,
    destructive: Option<bool>,
    #[serde(default)]
    parameters: toml::map::Map<String, toml::Value>,
    #[serde(default)]
    response: Response,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Parameter {
    #[serde(rename = "type", default = "string")]
    ty: String,
    description: Option<String>,
    #[serde(default)]
    required: bool,
    #[serde(rename = "in")]
    location: Option<String>,
    #[serde(rename = "enum")]
    values: Option<Vec<toml::Value>>,
    default: Option<toml::Value>,
    /// Element type of an array.
    items: Option<String>,
}

fn string() -> String {
    "string".into()
}

#[derive(Deserialize, Clone)]
#[serde(deny_unknown_fields)]
struct Auth {
    #[serde(rename = "type")]
    kind: String,
    env: Option<String>,
    name: Option<String>,
    username_env: Option<String>,
    password_env: Option<String>,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct Response {
    format: Option<String>,
    pointer: Option<String>,
}

const METHODS: &[&str] = &["GET", "POST", "PUT", "PATCH", "DELETE", "HEAD"];
const TYPES: &[&str] = &["string", "integer", "number", "boolean", "array", "object"];
const LOCATIONS: &[&str] = &["path", "query", "header", "body"];
const FORMATS: &[&str] = &["json", "text", "raw"];

/// Parses and validates a declarative file. `plugin` (the file's name) is the
/// default toolset. Every problem is `key: what is wrong`.
pub(crate) fn parse(plugin: &str, text: &str) -> Result<Declared, Vec<String>> {
    let file: File = parse_toml(text).map_err(|(key, message)| {
        vec![if key.is_empty() {
            message
        } else {
            format!("{key}: {message}")
        }]
    })?;
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
                vec![NETWORK_FETCH.into()]
            } else {
                vec![NETWORK_FETCH.into(), ENV_READ.into()]
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
            definitions: Adapter { definitions },
        })
    } else {
        Err(problems)
    }
}

/// `{name}` placeholders in a URL template.
fn placeholders(url: &str) -> Vec<String> {
    let mut found = Vec::new();
    let mut rest = url;
    while let Some(start) = rest.find('{') {
        let Some(end) = rest[start..].find('}') else {
            break;
        };
        found.push(rest[start + 1..start + end].to_string());
        rest = &rest[start + end + 1..];
    }
    found
}

fn check_url(url: &str, key: &str, problem: &mut impl FnMut(String, String)) {
    let concrete: String = {
        let mut text = url.to_string();
        for placeholder in placeholders(url) {
            text = text.replace(&format!("{{{placeholder}}}"), "x");
        }
        text
    };
    match reqwest::Url::parse(&concrete) {
        Ok(parsed) if matches!(parsed.scheme(), "http" | "https") && parsed.host().is_some() => {}
        Ok(parsed) => problem(
            key.into(),
            format!(
                "{url:?} must be an http:// or https:// URL with a host (scheme {:?})",
                parsed.scheme()
            ),
        ),
        Err(e) => problem(key.into(), format!("{url:?} is not a valid URL: {e}")),
    }
}

fn check_headers(
    headers: &BTreeMap<String, String>,
    key: &str,
    problem: &mut impl FnMut(String, String),
) {
    for (name, value) in headers {
        if reqwest::header::HeaderName::from_bytes(name.as_bytes()).is_err() {
            problem(format!("{key}.{name}"), "is not a valid header name".into());
        } else if reqwest::header::HeaderValue::from_str(value).is_err() {
            problem(
                format!("{key}.{name}"),
                "is not a valid header value (control characters?)".into(),
            );
        }
    }
}

fn check_auth(auth: &Auth, key: &str, problem: &mut impl FnMut(String, String)) {
    let mut need = |field: &str, value: &Option<String>| match value {
        None => problem(
            format!("{key}.{field}"),
            format!("is required for {:?} authentication", auth.kind),
        ),
        Some(name) if !is_valid_env_name(name) => problem(
            format!("{key}.{field}"),
            format!("{name:?} is not an environment variable name"),
        ),
        Some(_) => {}
    };
    match auth.kind.as_str() {
        "bearer" => need("env", &auth.env),
        "basic" => {
            need("username_env", &auth.username_env);
            need("password_env", &auth.password_env);
        }
        "header" => {
            need("env", &auth.env);
            match &auth.name {
                Some(name) if reqwest::header::HeaderName::from_bytes(name.as_bytes()).is_ok() => {}
                Some(name) => problem(
                    format!("{key}.name"),
                    format!("{name:?} is not a valid header name"),
                ),
                None => problem(
                    format!("{key}.name"),
                    "is required for \"header\" authentication: the header to send".into(),
                ),
            }
        }
        other => problem(
            format!("{key}.type"),
            format!("{other:?} is not an authentication type: use bearer, basic or header"),
        ),
    }
}

fn auth_env(auth: &Auth) -> Vec<String> {
    [&auth.env, &auth.username_env, &auth.password_env]
        .into_iter()
        .flatten()
        .cloned()
        .collect()
}

fn auth_json(auth: &Auth) -> Value {
    match auth.kind.as_str() {
        "basic" => json!({
            "type": "basic",
            "username_env": auth.username_env,
            "password_env": auth.password_env,
        }),
        "header" => json!({ "type": "header", "name": auth.name, "env": auth.env }),
        _ => json!({ "type": "bearer", "env": auth.env }),
    }
}

fn check_timeout(
    text: &str,
    key: &str,
    problem: &mut impl FnMut(String, String),
) -> Option<Duration> {
    match parse_duration(text) {
        Ok(timeout) => Some(timeout),
        Err(e) => {
            problem(key.into(), e);
            None
        }
    }
}

/// The JSON Schema of one parameter, or `None` after reporting problems.
fn parameter_schema(
    parameter: &Parameter,
    key: &str,
    problem: &mut impl FnMut(String, String),
) -> Option<Value> {
    let mut ok = true;
    if !TYPES.contains(&parameter.ty.as_str()) {
        problem(
            format!("{key}.type"),
            format!(
                "{:?} is not a type: use one of {}",
                parameter.ty,
                TYPES.join(", ")
            ),
        );
        return None;
    }
    let mut schema = json!({ "type": parameter.ty });
    if let Some(description) = &parameter.description {
        schema["description"] = Value::String(description.clone());
    }
    match (&parameter.items, parameter.ty.as_str()) {
        (Some(items), "array") if TYPES.contains(&items.as_str()) => {
            schema["items"] = json!({ "type": items });
        }
        (Some(items), "array") => {
            problem(
                format!("{key}.items"),
                format!("{items:?} is not a type: use one of {}", TYPES.join(", ")),
            );
            ok = false;
        }
        (Some(_), _) => {
            problem(
                format!("{key}.items"),
                "applies only to parameters of type \"array\"".into(),
            );
            ok = false;
        }
        (None, _) => {}
    }
    if let Some(values) = &parameter.values {
        if values.is_empty() {
            problem(format!("{key}.enum"), "must list at least one value".into());
            ok = false;
        }
        let values: Vec<Value> = values.iter().map(to_json).collect();
        for value in &values {
            if !has_type(value, &parameter.ty) {
                problem(
                    format!("{key}.enum"),
                    format!("{value} is not of type {}", parameter.ty),
                );
                ok = false;
            }
        }
        schema["enum"] = Value::Array(values);
    }
    if let Some(default) = &parameter.default {
        let default = to_json(default);
        if !has_type(&default, &parameter.ty) {
            problem(
                format!("{key}.default"),
                format!("{default} is not of type {}", parameter.ty),
            );
            ok = false;
        } else if schema
            .get("enum")
            .and_then(Value::as_array)
            .is_some_and(|values| !values.contains(&default))
        {
            problem(
                format!("{key}.default"),
                format!("{default} is not one of the enum values"),
            );
            ok = false;
        }
        if parameter.required {
            problem(
                format!("{key}.default"),
                "a required parameter never uses its default; drop one of them".into(),
            );
            ok = false;
        }
        schema["default"] = default;
    }
    ok.then_some(schema)
}

fn has_type(value: &Value, ty: &str) -> bool {
    match ty {
        "string" => value.is_string(),
        "integer" => value.is_i64() || value.is_u64(),
        "number" => value.is_number(),
        "boolean" => value.is_boolean(),
        "array" => value.is_array(),
        _ => value.is_object(),
    }
}

fn to_json(value: &toml::Value) -> Value {
    match value {
        toml::Value::String(s) => Value::String(s.clone()),
        toml::Value::Integer(i) => json!(i),
        toml::Value::Float(f) => json!(f),
        toml::Value::Boolean(b) => Value::Bool(*b),
        toml::Value::Datetime(d) => Value::String(d.to_string()),
        toml::Value::Array(items) => Value::Array(items.iter().map(to_json).collect()),
        toml::Value::Table(table) => {
            Value::Object(table.iter().map(|(k, v)| (k.clone(), to_json(v))).collect())
        }
    }
}

#[cfg(test)]
mod tests;
