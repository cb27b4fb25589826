//! Runs the tools of declarative `*.toml` files: the host loads a tool file,
//! validates it, and calls `invoke` here with the tool's definition and the
//! model's arguments; this builds the HTTP request, sends it through the
//! host's `http` import (under the caller's network policy) and shapes the
//! response. Not offered as a tool by itself.

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use std::collections::BTreeMap;

use toolhost_sdk::http::Request;
use toolhost_sdk::prelude::*;

/// One parameter of a declarative tool, as the host validated it.
#[derive(Deserialize, JsonSchema)]
struct Parameter {
    /// Where the argument goes: path, query, header or body.
    #[serde(rename = "in")]
    location: String,
    /// Value used when the model leaves the argument out.
    #[serde(default)]
    default: Option<Value>,
}

/// Authentication from environment variables.
#[derive(Deserialize, JsonSchema)]
#[serde(tag = "type", rename_all = "lowercase")]
enum Auth {
    /// `Authorization: Bearer <env>`.
    Bearer {
        /// Variable holding the token.
        env: String,
    },
    /// HTTP basic authentication.
    Basic {
        /// Variable holding the user name.
        username_env: String,
        /// Variable holding the password.
        password_env: String,
    },
    /// A header whose value comes from a variable.
    Header {
        /// Header name.
        name: String,
        /// Variable holding the value.
        env: String,
    },
}

/// How to shape the response.
#[derive(Deserialize, JsonSchema, Default)]
struct Response {
    /// `json` (parse the body), `text`, or `raw` (status, headers and body).
    #[serde(default)]
    format: Option<String>,
    /// JSON pointer into a JSON body (`/items/0/name`).
    #[serde(default)]
    pointer: Option<String>,
}

/// A declarative tool's definition.
#[derive(Deserialize, JsonSchema)]
struct Definition {
    /// HTTP method.
    method: String,
    /// URL template with `{name}` placeholders for path parameters.
    url: String,
    /// Fixed headers.
    #[serde(default)]
    headers: BTreeMap<String, String>,
    /// Authentication.
    #[serde(default)]
    auth: Option<Auth>,
    /// Parameters by name.
    #[serde(default)]
    parameters: BTreeMap<String, Parameter>,
    /// Response handling.
    #[serde(default)]
    response: Response,
    /// Time limit in milliseconds.
    #[serde(default)]
    timeout_ms: Option<u32>,
}

/// Arguments of `invoke`.
#[derive(Deserialize, JsonSchema)]
struct InvokeArgs {
    /// The tool definition.
    definition: Definition,
    /// The model's arguments.
    arguments: serde_json::Map<String, Value>,
}

/// Runs a declarative HTTP tool (called by the host, not by models).
#[tool(toolset = "declarative", permissions = ["network:fetch", "env:read"])]
fn invoke(args: InvokeArgs) -> Result<Value, ToolError> {
    let definition = args.definition;
    let mut url = definition.url.clone();
    let mut query = Vec::new();
    let mut headers: Vec<(String, String)> = definition.headers.clone().into_iter().collect();
    let mut body = serde_json::Map::new();
    for (name, parameter) in &definition.parameters {
        let Some(value) = args.arguments.get(name).or(parameter.default.as_ref()) else {
            // The host validated required arguments; an absent optional one is left out.
            if url.contains(&format!("{{{name}}}")) {
                return Err(ToolError::invalid_arguments(format!("{name} is required")));
            }
            continue;
        };
        let text = match value {
            Value::String(s) => s.clone(),
            other => other.to_string(),
        };
        match parameter.location.as_str() {
            "path" => url = url.replace(&format!("{{{name}}}"), &encode(&text)),
            // An array repeats the key: `tag=a&tag=b`.
            "query" if value.is_array() => {
                for item in value.as_array().into_iter().flatten() {
                    let item = match item {
                        Value::String(s) => s.clone(),
                        other => other.to_string(),
                    };
                    query.push(format!("{}={}", encode(name), encode(&item)));
                }
            }
            "query" => query.push(format!("{}={}", encode(name), encode(&text))),
            "header" => headers.push((name.clone(), text)),
            _ => {
                body.insert(name.clone(), value.clone());
            }
        }
    }
    if !query.is_empty() {
        url.push(if url.contains('?') { '&' } else { '?' });
        url.push_str(&query.join("&"));
    }
    if let Some(auth) = &definition.auth {
        headers.push(authorization(auth)?);
    }
    let mut request = Request::new(&definition.method, url);
    for (name, value) in headers {
        request = request.header(name, value);
    }
    if !body.is_empty() {
        request = request.json(&Value::Object(body));
    }
    if let Some(ms) = definition.timeout_ms {
        request = request.timeout(std::time::Duration::from_millis(u64::from(ms)));
    }
    let response = request.send()?;
    if !response.is_success() {
        let excerpt: String = response.text().chars().take(500).collect();
        return Err(ToolError::failed(format!(
            "the API answered {}: {excerpt}",
            response.status
        )));
    }
    shape(&definition.response, &response)
}

fn shape(spec: &Response, response: &toolhost_sdk::http::Response) -> Result<Value, ToolError> {
    match spec.format.as_deref().unwrap_or("json") {
        "raw" => Ok(json!({
            "status": response.status,
            "headers": response.headers.iter().map(|(k, v)| json!([k, v])).collect::<Vec<_>>(),
            "body": response.text(),
        })),
        "text" => Ok(Value::String(response.text())),
        _ => {
            let value: Value = response
                .json()
                .map_err(|e| ToolError::failed(format!("the API did not answer with JSON: {e}")))?;
            match &spec.pointer {
                None => Ok(value),
                Some(pointer) => value.pointer(pointer).cloned().ok_or_else(|| {
                    ToolError::failed(format!("the API's answer has nothing at {pointer}"))
                }),
            }
        }
    }
}

fn secret(name: &str) -> Result<String, ToolError> {
    std::env::var(name).map_err(|_| {
        ToolError::denied(format!(
            "environment variable {name} is not available to this tool"
        ))
    })
}

fn authorization(auth: &Auth) -> Result<(String, String), ToolError> {
    Ok(match auth {
        Auth::Bearer { env } => ("authorization".into(), format!("Bearer {}", secret(env)?)),
        Auth::Basic {
            username_env,
            password_env,
        } => {
            let credentials = format!("{}:{}", secret(username_env)?, secret(password_env)?);
            (
                "authorization".into(),
                format!("Basic {}", STANDARD.encode(credentials)),
            )
        }
        Auth::Header { name, env } => (name.clone(), secret(env)?),
    })
}

/// Percent-encodes everything but unreserved characters (RFC 3986).
fn encode(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for byte in text.bytes() {
        if byte.is_ascii_alphanumeric() || matches!(byte, b'-' | b'_' | b'.' | b'~') {
            out.push(byte as char);
        } else {
            out.push_str(&format!("%{byte:02X}"));
        }
    }
    out
}

export_plugin!(invoke);
