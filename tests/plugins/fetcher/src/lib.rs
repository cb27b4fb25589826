//! Test guest: outbound HTTP through the host's `http` import, with and
//! without the `network:fetch` permission declared.

use toolhost_sdk::http::{HttpError, Request, Response};
use toolhost_sdk::prelude::*;

/// Arguments of `fetch` and `sneaky_fetch`.
#[derive(Deserialize, JsonSchema)]
struct FetchArgs {
    /// Absolute http:// or https:// URL.
    url: String,
    /// HTTP method (default GET).
    #[serde(default)]
    method: Option<String>,
    /// Request headers as [name, value] pairs.
    #[serde(default)]
    headers: Vec<(String, String)>,
    /// Request body as text.
    #[serde(default)]
    body: Option<String>,
    /// Time limit in milliseconds.
    #[serde(default)]
    timeout_ms: Option<u64>,
}

/// Arguments of `fetch_text`.
#[derive(Deserialize, JsonSchema)]
struct UrlArgs {
    /// Absolute http:// or https:// URL.
    url: String,
}

/// Sends the request; answers with the response, or with the kind of error.
#[tool(toolset = "fetcher", permissions = ["network:fetch"])]
fn fetch(args: FetchArgs) -> Result<Value, ToolError> {
    Ok(outcome(send(args)))
}

/// Like `fetch`, but without declaring the `network:fetch` permission.
#[tool(toolset = "fetcher")]
fn sneaky_fetch(args: FetchArgs) -> Result<Value, ToolError> {
    Ok(outcome(send(args)))
}

/// Gets a URL with the SDK's `get` and returns its body as text; HTTP errors
/// become tool errors.
#[tool(toolset = "fetcher", permissions = ["network:fetch"], read_only)]
fn fetch_text(args: UrlArgs) -> Result<Value, ToolError> {
    let response = toolhost_sdk::http::get(args.url)?;
    Ok(json!({ "status": response.status, "text": response.text() }))
}

fn send(args: FetchArgs) -> Result<Response, HttpError> {
    let mut request = Request::new(args.method.unwrap_or_else(|| "GET".into()), args.url);
    for (name, value) in args.headers {
        request = request.header(name, value);
    }
    if let Some(body) = args.body {
        request = request.body(body);
    }
    if let Some(ms) = args.timeout_ms {
        request = request.timeout(std::time::Duration::from_millis(ms));
    }
    request.send()
}

fn outcome(result: Result<Response, HttpError>) -> Value {
    match result {
        Ok(response) => {
            let mut headers = serde_json::Map::new();
            for (name, value) in &response.headers {
                headers.insert(name.clone(), Value::String(value.clone()));
            }
            json!({
                "status": response.status,
                "headers": headers,
                "body": response.text(),
                "body_bytes": response.body.len(),
            })
        }
        Err(error) => {
            let (kind, limit) = match &error {
                HttpError::Denied(_) => ("denied", None),
                HttpError::InvalidRequest(_) => ("invalid_request", None),
                HttpError::Timeout => ("timeout", None),
                HttpError::TooLarge(limit) => ("too_large", Some(*limit)),
                HttpError::Failed(_) => ("failed", None),
            };
            json!({ "error_kind": kind, "message": error.to_string(), "limit": limit })
        }
    }
}

export_plugin!(fetch, sneaky_fetch, fetch_text);
