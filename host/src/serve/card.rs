//! The MCP server card (SEP-2127, experimental) at `GET /mcp/server-card`:
//! what a client needs to know before it connects, the same for every caller
//! and readable without a token: no tenant, tool or plugin appears in it.
//! Cacheable (`ETag`, `If-None-Match`), readable from any web origin.

use axum::extract::State;
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};
use sha2::Digest as _;

use crate::host::Host;

/// Where the card is: the Streamable HTTP endpoint's URL and `/server-card`.
pub(crate) const PATH: &str = "/mcp/server-card";

/// Its media type.
const MEDIA_TYPE: &str = "application/mcp-server+json";

/// The card's route.
pub(crate) fn route(host: Host) -> axum::routing::MethodRouter {
    axum::routing::get(card).with_state(host)
}

/// The card of `host`: from the build and whether tenants need a token.
fn body(host: &Host) -> Value {
    let versions: Vec<&str> =
        rmcp::model::ProtocolVersion::known_up_to(&rmcp::model::ProtocolVersion::LATEST)
            .iter()
            .map(|version| version.as_str())
            .collect();
    let mut remote = json!({
        "type": "streamable-http",
        "url": "{base_url}/mcp",
        "variables": {"base_url": {
            "description": "The address toolhost serves at, e.g. https://tools.example.com",
            "isRequired": true,
        }},
        "supportedProtocolVersions": versions,
    });
    if host
        .config()
        .is_some_and(|config| !config.tenants.is_empty())
    {
        remote["headers"] = json!([{
            "name": "Authorization",
            "description": "Bearer <token> of a tenant",
            "isRequired": true,
            "isSecret": true,
        }]);
    }
    json!({
        "$schema": "https://static.modelcontextprotocol.io/schemas/v1/server-card.schema.json",
        "name": "dev.toolhost/toolhost",
        "version": env!("CARGO_PKG_VERSION"),
        "description": "Sandboxed WebAssembly tools over MCP",
        "title": "toolhost",
        "remotes": [remote],
        "_meta": {"dev.toolhost/experimental": "SEP-2127 server card (draft); its shape follows \
                  modelcontextprotocol/experimental-ext-server-card and may change"},
    })
}

/// `GET /mcp/server-card` (and `HEAD`).
async fn card(State(host): State<Host>, headers: HeaderMap) -> Response {
    let body = serde_json::to_vec(&body(&host)).unwrap_or_default();
    let digest = sha2::Sha256::digest(&body);
    let hex: String = digest[..16].iter().map(|b| format!("{b:02x}")).collect();
    let etag = format!("\"{hex}\"");
    let unchanged = headers
        .get(header::IF_NONE_MATCH)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|tags| tags.split(',').any(|t| t.trim() == etag || t.trim() == "*"));
    let mut response = if unchanged {
        StatusCode::NOT_MODIFIED.into_response()
    } else {
        let mut response = body.into_response();
        response
            .headers_mut()
            .insert(header::CONTENT_TYPE, HeaderValue::from_static(MEDIA_TYPE));
        response
    };
    let set = response.headers_mut();
    if let Ok(etag) = HeaderValue::from_str(&etag) {
        set.insert(header::ETAG, etag);
    }
    for (name, value) in [
        (header::CACHE_CONTROL, "public, max-age=3600"),
        (header::ACCESS_CONTROL_ALLOW_ORIGIN, "*"),
        (header::ACCESS_CONTROL_ALLOW_METHODS, "GET"),
        (
            header::ACCESS_CONTROL_ALLOW_HEADERS,
            "Content-Type, If-None-Match",
        ),
        (header::ACCESS_CONTROL_EXPOSE_HEADERS, "ETag"),
    ] {
        set.insert(name, HeaderValue::from_static(value));
    }
    response
}
