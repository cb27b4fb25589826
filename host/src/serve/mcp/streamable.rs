//! `/mcp`: MCP's Streamable HTTP transport, rmcp's, with what it answers
//! wrongly taken care of in front of it:
//!
//! - a POST body is read here (within the size limit) and checked as
//!   JSON-RPC ([`super::super::jsonrpc`]): what is not JSON is `400` with a `-32700`
//!   error, what is not a message `400` with `-32600`, params that do not fit
//!   a `-32602` error with the request's id; a body over the limit is `413`
//!   with a JSON-RPC error too;
//! - `DELETE` of a session that does not exist is `404`, of one that does
//!   `204` (rmcp answers `202`, which clients such as the official Python
//!   SDK report as a failed termination);
//! - SSE priming events (an event id with empty data, SEP-1699) go only to
//!   sessions that negotiated a protocol version that defines them
//!   (2025-11-25 and later): older clients log them as errors. Each kind of
//!   session has a service and a session manager of its own.

use std::sync::Arc;

use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::{HeaderMap, Method, StatusCode};
use axum::response::{IntoResponse, Response};
use rmcp::model::{ClientRequest, JsonRpcMessage};
use rmcp::transport::StreamableHttpServerConfig;
use rmcp::transport::streamable_http_server::StreamableHttpService;
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use serde_json::Value;
use tokio_util::sync::CancellationToken;

use super::super::answers::Answers;
use super::super::api::{BodyError, is_json, read_body};
use super::super::jsonrpc::{
    self, INTERNAL_ERROR, INVALID_PARAMS, INVALID_REQUEST, PARSE_ERROR, Refusal,
};
use super::server::McpServer;
use crate::caller::Caller;
use crate::host::Host;

/// Settings of the Streamable HTTP transport.
#[derive(Debug, Clone)]
pub struct McpHttp {
    /// `Host` header values accepted (DNS-rebinding protection).
    pub allowed_hosts: Vec<String>,
    /// `Origin` header values accepted; `http://localhost:*` style entries.
    pub allowed_origins: Vec<String>,
    /// Cancelled at shutdown: closes every session.
    pub cancel: CancellationToken,
    /// Cancelled when shutdown stops waiting: calls still running end with
    /// an error saying the server is shutting down.
    pub abandon: CancellationToken,
    /// Largest request body, in bytes.
    pub max_body: usize,
}

/// The `/mcp` endpoint, for any method . Each
/// request's caller is the [`Caller`] the HTTP layer put in the request
/// extensions.
pub fn http_service(host: Host, settings: McpHttp) -> axum::routing::MethodRouter {
    route(host, settings)
}

/// How long a tenant's request waits for room to have its body read (see
/// [`Caller::request_permit`]), as long as a body may take to arrive.
const REQUEST_WAIT: std::time::Duration = std::time::Duration::from_secs(30);

/// The first protocol version with SSE priming events.
const PRIMING_SINCE: &str = "2025-11-25";

/// The header that names an MCP session.
pub(crate) const MCP_SESSION: &str = "mcp-session-id";

/// The header of the negotiated protocol version (2025-06-18 and later).
const MCP_VERSION: &str = "mcp-protocol-version";

type Service = StreamableHttpService<McpServer, LocalSessionManager>;

/// The two services, with and without priming events.
pub(crate) struct McpEndpoint {
    primed: Service,
    primed_sessions: Arc<LocalSessionManager>,
    plain: Service,
    plain_sessions: Arc<LocalSessionManager>,
    max_body: usize,
    host: Host,
    /// What each caller's answers hold (`tools/call` results count).
    answers: Answers,
}

impl McpEndpoint {
    pub(crate) fn new(host: Host, settings: McpHttp, answers: Answers) -> Self {
        let parked = Arc::new(super::ask::ParkedCalls::default());
        let service = |priming: bool| {
            let mut sessions = LocalSessionManager::default();
            let retry = sessions.session_config.sse_retry.filter(|_| priming);
            sessions.session_config.sse_retry = retry;
            let sessions = Arc::new(sessions);
            let mut config = StreamableHttpServerConfig::default()
                .with_allowed_hosts(settings.allowed_hosts.clone())
                .with_allowed_origins(settings.allowed_origins.clone())
                .with_sse_retry(retry);
            config.cancellation_token = settings.cancel.clone();
            config.max_request_body_bytes = settings.max_body;
            config.json_response = true;
            let host = host.clone();
            let abandon = settings.abandon.clone();
            let parked = parked.clone();
            let service = StreamableHttpService::new(
                move || {
                    let server = McpServer::with_abandon(host.clone(), abandon.clone());
                    Ok(server.parking(parked.clone()))
                },
                sessions.clone(),
                config,
            );
            (service, sessions)
        };
        let (primed, primed_sessions) = service(true);
        let (plain, plain_sessions) = service(false);
        Self {
            primed,
            primed_sessions,
            plain,
            plain_sessions,
            max_body: settings.max_body,
            host,
            answers,
        }
    }

    /// Which service holds `session`: `Some(true)` the one with priming
    /// events, `Some(false)` the other, `None` neither.
    async fn holder(&self, session: &str) -> Option<bool> {
        let id: rmcp::transport::streamable_http_server::SessionId = session.to_owned().into();
        if self.primed_sessions.sessions.read().await.contains_key(&id) {
            Some(true)
        } else if self.plain_sessions.sessions.read().await.contains_key(&id) {
            Some(false)
        } else {
            None
        }
    }

    /// Whether the server holds MCP session `session` (it may have ended
    /// when idle, or been closed).
    pub(crate) async fn holds(&self, session: &str) -> bool {
        self.holder(session).await.is_some()
    }

    fn service(&self, primed: bool) -> &Service {
        if primed { &self.primed } else { &self.plain }
    }
}

/// The endpoint as a route (any method) with its state.
pub(crate) fn route(host: Host, settings: McpHttp) -> axum::routing::MethodRouter {
    route_to(Arc::new(McpEndpoint::new(
        host,
        settings,
        Answers::default(),
    )))
}

/// `mcp` as a route (any method).
pub(crate) fn route_to(mcp: Arc<McpEndpoint>) -> axum::routing::MethodRouter {
    axum::routing::any(endpoint).with_state(mcp)
}

/// Serves one request to `/mcp`.
pub(crate) async fn endpoint(State(mcp): State<Arc<McpEndpoint>>, request: Request) -> Response {
    let session = request
        .headers()
        .get(MCP_SESSION)
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned);
    let held = match &session {
        Some(id) => mcp.holder(id).await,
        None => None,
    };
    if request.method() == Method::DELETE && session.is_some() && held.is_none() {
        return refusal_response(
            StatusCode::NOT_FOUND,
            &Refusal::new(Value::Null, INVALID_REQUEST, "Session not found"),
        );
    }
    if request.method() != Method::POST || !is_json(request.headers()) {
        let primed = held.unwrap_or_else(|| version_header_primes(request.headers()));
        let closing = request.method() == Method::DELETE;
        let response = mcp.service(primed).handle(request).await;
        if closing && response.status().is_success() {
            return StatusCode::NO_CONTENT.into_response();
        }
        return into_axum(response);
    }
    let (mut parts, body) = request.into_parts();
    // Held while the body is read and decoded (not while its request is
    // handled: an answer to the server's own question may need a permit
    // of the same tenant).
    let caller = parts.extensions.get::<Caller>().cloned();
    let reading = match &caller {
        Some(caller) => match caller.request_permit(REQUEST_WAIT).await {
            Ok(permit) => permit,
            Err(message) => {
                return refusal_response(
                    StatusCode::TOO_MANY_REQUESTS,
                    &Refusal::new(Value::Null, INTERNAL_ERROR, format!("busy: {message}")),
                );
            }
        },
        None => None,
    };
    let bytes = match read_body(body, mcp.max_body).await {
        Ok(bytes) => bytes,
        Err(BodyError::TooLarge) => return too_large(mcp.max_body),
        Err(BodyError::Read(e)) => {
            return refusal_response(
                StatusCode::BAD_REQUEST,
                &Refusal::new(
                    Value::Null,
                    PARSE_ERROR,
                    format!("Parse error: the request body could not be read: {e}"),
                ),
            );
        }
    };
    // Every body is checked, whatever session it names: rmcp serves a
    // request of a revision without sessions whatever session id it
    // carries, so one the server does not know must not skip the check
    // (rmcp refuses it with 404 where sessions exist).
    let decoded = jsonrpc::decode(&bytes);
    let mut bytes = bytes;
    let initialize = match decoded {
        Ok(None) => None,
        Ok(Some(message)) => match &message {
            JsonRpcMessage::Request(request) => match &request.request {
                ClientRequest::SubscriptionsListenRequest(listen) => {
                    // rmcp reads the body again: what it would drop goes
                    // with the request's parts.
                    if let Some(tasks) = listen.extensions.get::<jsonrpc::ListenTasks>() {
                        parts.extensions.insert(tasks.clone());
                    }
                    None
                }
                ClientRequest::InitializeRequest(init) => {
                    // rmcp keeps the session's start for its life: as
                    // decoded, without what the server never reads.
                    if let Ok(trimmed) = serde_json::to_vec(&message) {
                        bytes = trimmed.into();
                    }
                    Some(init.params.protocol_version.clone())
                }
                _ => None,
            },
            _ => None,
        },
        Err(refusal) if refusal.code == INVALID_PARAMS => {
            return refusal_response(StatusCode::OK, &refusal);
        }
        Err(refusal) => return refusal_response(StatusCode::BAD_REQUEST, &refusal),
    };
    let primed = match (held, initialize) {
        (Some(primed), _) => primed,
        (None, Some(version)) => primes(version.as_str()),
        (None, None) => version_header_primes(&parts.headers),
    };
    drop(reading);
    // The answer's results are held against the caller's answers_held
    // (`tools/call` keeps its result's size) until its body is done.
    let tenant = caller.as_ref().and_then(Caller::tenant_name);
    let held = mcp
        .answers
        .hold(tenant, mcp.host.tenant_caps().answers_held);
    parts.extensions.insert(held.clone());
    let request = Request::from_parts(parts, Body::from(bytes));
    let response = into_axum(mcp.service(primed).handle(request).await);
    response.map(|body| held.keep_with(body))
}

/// Whether a session of `version` gets priming events: those that define
/// them, and versions newer than this server knows (it answers with one
/// that does).
fn primes(version: &str) -> bool {
    version >= PRIMING_SINCE
}

fn version_header_primes(headers: &HeaderMap) -> bool {
    headers
        .get(MCP_VERSION)
        .and_then(|v| v.to_str().ok())
        .is_some_and(primes)
}

fn into_axum<B>(response: axum::http::Response<B>) -> Response
where
    B: hyper::body::Body<Data = bytes::Bytes> + Send + 'static,
    B::Error: Into<axum::BoxError>,
{
    response.map(Body::new)
}

/// A JSON-RPC error as the body of an HTTP response.
pub(crate) fn refusal_response(status: StatusCode, refusal: &Refusal) -> Response {
    (status, axum::Json(refusal.to_json())).into_response()
}

/// `413` for `/mcp`: a JSON-RPC error.
pub(crate) fn too_large(max: usize) -> Response {
    refusal_response(
        StatusCode::PAYLOAD_TOO_LARGE,
        &Refusal::new(
            Value::Null,
            INVALID_REQUEST,
            format!("Invalid Request: the request body is larger than the limit of {max} bytes"),
        ),
    )
}

/// `503` for `/mcp` while the server shuts down.
pub(crate) fn shutting_down() -> Response {
    refusal_response(
        StatusCode::SERVICE_UNAVAILABLE,
        &Refusal::new(
            Value::Null,
            INVALID_REQUEST,
            "the server is shutting down; no new requests are taken",
        ),
    )
}
