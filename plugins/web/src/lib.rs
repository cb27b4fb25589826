//! Web tools: HTTP requests, and web pages as readable text. Every request
//! goes through the host's `http` import, which checks it (and each redirect)
//! against the caller's profile: only hosts in `network.allow_hosts` are
//! reached, and responses are capped at `network.max_response`.

mod body;
mod html;
mod url;

use std::collections::BTreeMap;
use std::time::Duration;

use toolhost_sdk::http::{HttpError, Request, Response};
use toolhost_sdk::prelude::*;

use crate::body::{ContentType, decode, is_binary, truncate_bytes, truncate_chars};
use crate::html::{Format, extract};

/// Response bytes returned by `http_request` when `max_bytes` is not given.
const DEFAULT_BODY_BYTES: usize = 100_000;
/// Most response bytes `http_request` returns.
const MAX_BODY_BYTES: usize = 512 * 1024;
/// Characters of content `web_extract` returns when `max_length` is not given.
const DEFAULT_PAGE_CHARS: usize = 20_000;
/// Most characters of content `web_extract` returns.
const MAX_PAGE_CHARS: usize = 200_000;
/// Most links `web_extract` lists.
const MAX_LINKS: usize = 200;

/// An HTTP method.
#[derive(Deserialize, JsonSchema, Clone, Copy, Default)]
#[serde(rename_all = "UPPERCASE")]
enum Method {
    #[default]
    Get,
    Post,
    Put,
    Patch,
    Delete,
    Head,
    Options,
}

impl Method {
    fn as_str(self) -> &'static str {
        match self {
            Self::Get => "GET",
            Self::Post => "POST",
            Self::Put => "PUT",
            Self::Patch => "PATCH",
            Self::Delete => "DELETE",
            Self::Head => "HEAD",
            Self::Options => "OPTIONS",
        }
    }
}

/// How `http_request` returns the response body.
#[derive(Deserialize, JsonSchema, Clone, Copy, Default, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
enum ResponseFormat {
    /// Parsed JSON when the response is JSON, else text.
    #[default]
    Auto,
    /// Parsed JSON; fails when the body is not JSON.
    Json,
    /// Text, as received.
    Text,
}

/// Arguments of `http_request`.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct HttpRequestArgs {
    /// Absolute `http://` or `https://` URL.
    url: String,
    /// HTTP method (default `GET`).
    #[serde(default)]
    method: Method,
    /// Request headers, name to value, e.g. `{"accept": "application/json"}`.
    #[serde(default)]
    headers: BTreeMap<String, String>,
    /// Request body as text. Give `body` or `json`, not both.
    #[serde(default)]
    body: Option<String>,
    /// Request body as JSON; sets `content-type: application/json` unless
    /// `headers` has a content-type.
    #[serde(default)]
    json: Option<Value>,
    /// `auto` (default): parsed JSON if the response is JSON, else text;
    /// `json`: parsed JSON or an error; `text`: the body as text.
    #[serde(default)]
    response_format: ResponseFormat,
    /// Most bytes of response body returned (default 100000, at most
    /// 524288); a longer body is returned as text, cut, with `truncated`.
    #[serde(default)]
    max_bytes: Option<usize>,
    /// Time limit in seconds (the profile's `network.timeout` caps it).
    #[serde(default)]
    timeout_secs: Option<u32>,
}

/// Send an HTTP request and return the response: `status`, `ok` (2xx),
/// `headers` (lower-case names), `content_type`, `body` (parsed JSON for
/// JSON responses, else text; `null` for binary content) and `body_bytes`.
/// Redirects are followed. Only hosts the caller's profile allows can be
/// reached; a refused host is an error that says so. Use web_extract to read
/// a web page.
#[tool(
    toolset = "web",
    permissions = ["network:fetch"],
    destructive,
    emoji = "🌐"
)]
fn http_request(args: HttpRequestArgs) -> Result<Value, ToolError> {
    let max_bytes = args.max_bytes.unwrap_or(DEFAULT_BODY_BYTES);
    if !(1..=MAX_BODY_BYTES).contains(&max_bytes) {
        return Err(ToolError::invalid_arguments(format!(
            "max_bytes must be between 1 and {MAX_BODY_BYTES}"
        )));
    }
    let mut request = Request::new(args.method.as_str(), args.url.as_str());
    let has_content_type = args
        .headers
        .keys()
        .any(|name| name.eq_ignore_ascii_case("content-type"));
    for (name, value) in args.headers {
        request = request.header(name, value);
    }
    match (args.body, args.json) {
        (Some(_), Some(_)) => {
            return Err(ToolError::invalid_arguments(
                "give body (text) or json, not both",
            ));
        }
        (Some(body), None) => request = request.body(body),
        (None, Some(json)) => {
            if !has_content_type {
                request = request.header("content-type", "application/json");
            }
            request = request.body(serde_json::to_vec(&json)?);
        }
        (None, None) => {}
    }
    if let Some(secs) = args.timeout_secs {
        request = request.timeout(Duration::from_secs(secs.into()));
    }
    let response = send(request, args.method.as_str(), &args.url)?;

    let content_type = ContentType::parse(response.header("content-type"));
    let mut headers = serde_json::Map::new();
    for (name, value) in &response.headers {
        match headers.get_mut(name) {
            Some(Value::String(joined)) => {
                joined.push_str(", ");
                joined.push_str(value);
            }
            _ => {
                headers.insert(name.clone(), Value::String(value.clone()));
            }
        }
    }
    let mut result = json!({
        "status": response.status,
        "ok": response.is_success(),
        "headers": headers,
        "content_type": response.header("content-type"),
        "body_bytes": response.body.len(),
    });
    let (body, note) = response_body(&response, &content_type, args.response_format, max_bytes)?;
    result["body"] = body;
    result["truncated"] = json!(note.is_some());
    if let Some(note) = note {
        result["note"] = json!(note);
    }
    Ok(result)
}

/// The body as `http_request` returns it, and a note when it is not all there.
fn response_body(
    response: &Response,
    content_type: &ContentType,
    format: ResponseFormat,
    max_bytes: usize,
) -> Result<(Value, Option<String>), ToolError> {
    let bytes = &response.body;
    let wants_json = format == ResponseFormat::Json
        || (format == ResponseFormat::Auto && content_type.is_json());
    if wants_json {
        match serde_json::from_slice::<Value>(bytes) {
            Ok(value) if bytes.len() <= max_bytes => return Ok((value, None)),
            // Too long to return whole: fall through to cut text.
            Ok(_) => {}
            Err(e) if format == ResponseFormat::Json => {
                let mut start = decode(content_type, bytes);
                truncate_chars(&mut start, 200);
                return Err(ToolError::failed(format!(
                    "the response (status {}) is not JSON: {e}; it starts with {start:?}",
                    response.status
                )));
            }
            Err(_) => {}
        }
    } else if format == ResponseFormat::Auto && !bytes.is_empty() && is_binary(content_type, bytes)
    {
        return Ok((
            Value::Null,
            Some(format!(
                "binary body ({} bytes of {}) not shown",
                bytes.len(),
                if content_type.media.is_empty() {
                    "unknown type"
                } else {
                    &content_type.media
                }
            )),
        ));
    }
    let mut text = decode(content_type, bytes);
    let note = truncate_bytes(&mut text, max_bytes).then(|| {
        format!(
            "body cut at {max_bytes} of {} bytes (max_bytes)",
            bytes.len()
        )
    });
    Ok((Value::String(text), note))
}

/// Sends a request; failures become tool errors that name the request.
fn send(request: Request, method: &str, url: &str) -> Result<Response, ToolError> {
    request.send().map_err(|e| match e {
        HttpError::Denied(m) => ToolError::denied(m),
        HttpError::InvalidRequest(m) => {
            ToolError::invalid_arguments(format!("{method} {url}: {m}"))
        }
        HttpError::Timeout => ToolError::failed(format!(
            "{method} {url} timed out (the limit is timeout_secs, capped by the profile's \
             network.timeout)"
        )),
        HttpError::TooLarge(limit) => ToolError::failed(format!(
            "{method} {url}: the response is larger than {limit} bytes, the profile's \
             network.max_response"
        )),
        HttpError::Failed(m) => ToolError::failed(format!("{method} {url} failed: {m}")),
    })
}

/// How `web_extract` writes a page.
#[derive(Deserialize, JsonSchema, Clone, Copy, Default, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
enum ExtractFormat {
    /// Markdown: headings, lists, inline links, code blocks and tables.
    #[default]
    Markdown,
    /// Plain text; the page's links are listed in `links`.
    Text,
}

/// Arguments of `web_extract`.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct WebExtractArgs {
    /// Absolute `http://` or `https://` URL of the page.
    url: String,
    /// `markdown` (default; links inline) or `text` (links listed in `links`).
    #[serde(default)]
    format: ExtractFormat,
    /// Most characters of content returned (default 20000, at most 200000).
    #[serde(default)]
    max_length: Option<usize>,
}

/// Fetch a web page (GET) and return its readable content: `title` and
/// `content` as Markdown (default) or plain text, without scripts, styles,
/// navigation, forms and other page furniture; the main content (`<main>`,
/// `<article>`) is preferred. Relative links are made absolute. Content is
/// cut at `max_length` characters with `truncated: true`. Plain-text
/// responses are returned as they are; binary ones are refused. Only hosts
/// the caller's profile allows can be reached.
#[tool(toolset = "web", permissions = ["network:fetch"], read_only, emoji = "📰")]
fn web_extract(args: WebExtractArgs) -> Result<Value, ToolError> {
    let max_chars = args.max_length.unwrap_or(DEFAULT_PAGE_CHARS);
    if !(1..=MAX_PAGE_CHARS).contains(&max_chars) {
        return Err(ToolError::invalid_arguments(format!(
            "max_length must be between 1 and {MAX_PAGE_CHARS}"
        )));
    }
    let request = Request::get(args.url.as_str()).header(
        "accept",
        "text/html,application/xhtml+xml;q=0.9,text/plain;q=0.8,*/*;q=0.5",
    );
    let response = send(request, "GET", &args.url)?;
    if !response.is_success() {
        return Err(ToolError::failed(format!(
            "GET {} answered with status {}; there is no page to extract",
            args.url, response.status
        )));
    }
    let content_type = ContentType::parse(response.header("content-type"));
    if is_binary(&content_type, &response.body) {
        return Err(ToolError::invalid_arguments(format!(
            "{} is not a web page but {} bytes of {}; http_request returns raw responses",
            args.url,
            response.body.len(),
            response.header("content-type").unwrap_or("binary data")
        )));
    }
    let text = decode(&content_type, &response.body);
    let looks_html = content_type.is_html()
        || (content_type.media.is_empty() && text.trim_start().starts_with('<'));
    let format = match args.format {
        ExtractFormat::Markdown => Format::Markdown,
        ExtractFormat::Text => Format::Text,
    };
    let (title, mut content, links) = if looks_html {
        // Characters are at most 4 bytes: converting this much is enough.
        let page = extract(&text, &args.url, format, max_chars.saturating_mul(4));
        (page.title, page.content, page.links)
    } else {
        (None, text, Vec::new())
    };
    let truncated = truncate_chars(&mut content, max_chars);
    let mut result = json!({
        "url": args.url,
        "status": response.status,
        "title": title,
        "content": content,
        "truncated": truncated,
    });
    if format == Format::Text && !links.is_empty() {
        let listed: Vec<Value> = links
            .iter()
            .take(MAX_LINKS)
            .map(|(text, url)| json!({ "text": text, "url": url }))
            .collect();
        result["links"] = Value::Array(listed);
        if links.len() > MAX_LINKS {
            result["links_truncated"] = json!(true);
        }
    }
    Ok(result)
}

export_plugin!(http_request, web_extract);
