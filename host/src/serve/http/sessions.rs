//! MCP sessions kept to the tenant that opened them.

use std::sync::Arc;

use axum::extract::{Request, State};
use axum::http::{Method, StatusCode};
use axum::middleware::Next;
use axum::response::Response;

use crate::serve::api::error_response;
use crate::serve::mcp::streamable::MCP_SESSION;

/// The tenant (or `None`, the local caller) that opened each MCP session.
#[derive(Debug, Default)]
pub(super) struct SessionOwners(
    std::sync::Mutex<std::collections::HashMap<String, Option<String>>>,
);

/// An MCP session belongs to the tenant that opened it: to any other caller
/// its id is unknown (404), so no one can post into, listen to or close
/// another tenant's session.
pub(super) async fn keep_sessions_to_their_tenant(
    State(owners): State<Arc<SessionOwners>>,
    request: Request,
    next: Next,
) -> Response {
    let tenant = request
        .extensions()
        .get::<crate::Caller>()
        .and_then(|caller| caller.tenant_name().map(str::to_owned));
    let session = request
        .headers()
        .get(MCP_SESSION)
        .and_then(|value| value.to_str().ok())
        .map(str::to_owned);
    let owned_by_another = session.as_ref().is_some_and(|id| {
        let owners = owners.0.lock().unwrap_or_else(|e| e.into_inner());
        owners.get(id).is_some_and(|owner| *owner != tenant)
    });
    if owned_by_another {
        return error_response(StatusCode::NOT_FOUND, "no such MCP session");
    }
    let closing = request.method() == Method::DELETE;
    let response = next.run(request).await;
    let mut owners = owners.0.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(opened) = response
        .headers()
        .get(MCP_SESSION)
        .and_then(|value| value.to_str().ok())
    {
        owners.entry(opened.to_owned()).or_insert(tenant);
    }
    if closing
        && response.status().is_success()
        && let Some(id) = session
    {
        owners.remove(&id);
    }
    response
}
