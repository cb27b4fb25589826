//! The OpenAI-style routes under `/v1`: the caller's tools as an OpenAI
//! `tools` array, batches of tool calls in the OpenAI shape, health, and
//! status. Every error is `{"error": "<kind>: <message>"}` with a fitting
//! HTTP status; a failed tool call is a result, not an HTTP error.

use std::collections::HashSet;
use std::time::Duration;

use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::rejection::QueryRejection;
use axum::extract::{Extension, Query, State};
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode, Uri, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use futures::StreamExt as _;
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use super::tenants::Authenticated;
use crate::host::Host;
use crate::toolsets::Selection;

/// Header that sets the session of a batch (same as its `session` field).
pub const SESSION_HEADER: &str = "toolhost-session";

/// What the routes share.
#[derive(Debug, Clone)]
pub(crate) struct Api {
    pub(crate) host: Host,
    pub(crate) max_body: usize,
    pub(crate) max_calls: usize,
    pub(crate) body_timeout: Duration,
    pub(crate) request_timeout: Duration,
    /// Cancelled when the server starts shutting down.
    pub(crate) draining: CancellationToken,
    /// Cancelled when shutdown stops waiting for the requests in flight.
    pub(crate) abandon: CancellationToken,
    /// The tenants' approvals waiting for an answer.
    pub(crate) pending: std::sync::Arc<crate::approval::pending::Pending>,
    /// Sessions' narrowings, by tenant and session.
    pub(crate) narrowings: super::narrowings::Narrowings,
    /// The answers each caller's requests hold.
    pub(crate) answers: super::answers::Answers,
}

/// `/tools`, `/tool_calls`, `/health` and `/status`, to nest under `/v1`.
pub(crate) fn routes(api: Api) -> Router {
    Router::new()
        .route("/tools", get(tools))
        .route("/tool_calls", post(tool_calls))
        .route("/health", get(health))
        .route("/status", get(status))
        .with_state(api)
}

/// `{"error": message}` with `status`.
pub(crate) fn error_response(status: StatusCode, message: impl Into<String>) -> Response {
    let body = json!({ "error": message.into() });
    (status, axum::Json(body)).into_response()
}

pub(crate) fn too_large(max: usize) -> Response {
    error_response(
        StatusCode::PAYLOAD_TOO_LARGE,
        format!(
            "payload_too_large: the request body is larger than the limit of {max} bytes; send \
             fewer or smaller calls per request"
        ),
    )
}

/// `503` for a request the server takes or stops while shutting down.
pub(crate) fn shutting_down() -> Response {
    error_response(
        StatusCode::SERVICE_UNAVAILABLE,
        "unavailable: the server is shutting down; requests still running after the drain \
         timeout are stopped, and no new ones are taken",
    )
}

/// Unknown routes.
pub(crate) async fn not_found(uri: Uri) -> Response {
    error_response(
        StatusCode::NOT_FOUND,
        format!(
            "not_found: no route {:?}; the routes are GET /v1/tools, POST /v1/tool_calls, \
             GET /v1/health, GET /v1/status, GET /v1/approvals, POST /v1/approvals/{{id}}, \
             GET /v1/approvals/events, POST /v1/sessions, GET /v1/tasks, GET and DELETE \
             /v1/tasks/{{id}} and /mcp",
            uri.path()
        ),
    )
}

/// Known routes with the wrong method.
pub(crate) async fn method_not_allowed(method: Method, uri: Uri) -> Response {
    error_response(
        StatusCode::METHOD_NOT_ALLOWED,
        format!(
            "method_not_allowed: {method} is not supported on {}; see the Allow header",
            uri.path()
        ),
    )
}

/// `GET /v1/tools?toolset=a,b&disable=c&strict=true`.
async fn tools(
    State(api): State<Api>,
    Extension(auth): Extension<Authenticated>,
    query: Result<Query<Vec<(String, String)>>, QueryRejection>,
) -> Response {
    let Ok(Query(query)) = query else {
        return error_response(
            StatusCode::BAD_REQUEST,
            "invalid_request: the query string is malformed",
        );
    };
    api.host.loaded().await;
    let mut selection = Selection::default();
    let mut strict = false;
    for (key, value) in query {
        let list = || {
            value
                .split(',')
                .map(str::trim)
                .filter(|s| !s.is_empty())
                .map(String::from)
                .collect::<Vec<_>>()
        };
        match key.as_str() {
            "toolset" => selection.enabled.extend(list()),
            "disable" => selection.disabled.extend(list()),
            "strict" => match value.as_str() {
                "true" | "1" | "" => strict = true,
                "false" | "0" => strict = false,
                other => {
                    return error_response(
                        StatusCode::BAD_REQUEST,
                        format!(
                            "invalid_request: strict={other:?}; use strict=true or strict=false"
                        ),
                    );
                }
            },
            other => {
                return error_response(
                    StatusCode::BAD_REQUEST,
                    format!(
                        "invalid_request: unknown query parameter {other:?}; use toolset, disable \
                         or strict"
                    ),
                );
            }
        }
    }
    match super::openai::tools_for(&api.host, &auth.caller, &selection, strict) {
        Ok(tools) => axum::Json(json!({ "tools": tools })).into_response(),
        Err(e) => error_response(StatusCode::BAD_REQUEST, format!("invalid_request: {e}")),
    }
}

/// `POST /v1/tool_calls` with `{"tool_calls": [...], "session": "..."}`.
async fn tool_calls(
    State(api): State<Api>,
    Extension(auth): Extension<Authenticated>,
    headers: HeaderMap,
    body: Body,
) -> Response {
    if !is_json(&headers) {
        return error_response(
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            "unsupported_media_type: send the batch as JSON with `Content-Type: application/json`",
        );
    }
    // Held while the body is read and parsed: a tenant's bodies beyond its
    // concurrency wait unread.
    let reading = match auth.caller.request_permit(api.body_timeout).await {
        Ok(permit) => permit,
        Err(message) => {
            return error_response(StatusCode::TOO_MANY_REQUESTS, format!("busy: {message}"));
        }
    };
    let bytes = match tokio::time::timeout(api.body_timeout, read_body(body, api.max_body)).await {
        Ok(Ok(bytes)) => bytes,
        Ok(Err(BodyError::TooLarge)) => return too_large(api.max_body),
        Ok(Err(BodyError::Read(e))) => {
            return error_response(
                StatusCode::BAD_REQUEST,
                format!("invalid_request: the request body could not be read: {e}"),
            );
        }
        Err(_) => {
            return error_response(
                StatusCode::REQUEST_TIMEOUT,
                format!(
                    "timeout: the request body did not arrive within {:?}",
                    api.body_timeout
                ),
            );
        }
    };
    // Only what a batch uses is built; the body's bytes go before the calls
    // run.
    // A large body is parsed off the async workers, which serve everyone.
    let most = api.max_calls;
    let batch = if bytes.len() > 64 << 10 {
        tokio::task::spawn_blocking(move || super::batch_body::parse(&bytes, most))
            .await
            .unwrap_or_else(|e| std::panic::resume_unwind(e.into_panic()))
    } else {
        let parsed = super::batch_body::parse(&bytes, most);
        drop(bytes);
        parsed
    };
    drop(reading);
    let (batch, calls) = match batch {
        Ok(parsed) => parsed,
        Err(e) => {
            return error_response(
                StatusCode::BAD_REQUEST,
                format!("invalid_json: the request body is not valid JSON: {e}"),
            );
        }
    };
    let session = match session(&batch, &headers) {
        Ok(session) => session,
        Err(message) => return error_response(StatusCode::BAD_REQUEST, message),
    };
    if calls > api.max_calls {
        return error_response(
            StatusCode::BAD_REQUEST,
            format!(
                "invalid_request: {calls} tool calls in one request, more than the limit of {}; \
                 split the batch",
                api.max_calls
            ),
        );
    }
    api.host.loaded().await;
    let caller = match &session {
        Some(session) => {
            let caps = api.host.tenant_caps();
            match api.narrowings.apply(&auth.caller, session, &caps) {
                Ok(caller) => caller,
                Err(message) => {
                    return error_response(
                        StatusCode::BAD_REQUEST,
                        format!("invalid_request: {message}"),
                    );
                }
            }
        }
        None => auth.caller.clone(),
    };
    match super::tasks::is_async(&batch) {
        Ok(true) => {
            let batch = super::tasks::Batch {
                owner: &auth.caller,
                caller: &caller,
                batch: &batch,
                session,
                trace: crate::trace::Trace::of_headers(&headers),
            };
            return super::tasks::start(&api.host, &api.answers, &api.abandon, batch);
        }
        Ok(false) => {}
        Err(message) => return error_response(StatusCode::BAD_REQUEST, message),
    }
    let cap = api.host.tenant_caps().answers_held;
    let held = api.answers.hold(caller.tenant_name(), cap);
    let dispatched = tokio::select! {
        dispatched = tokio::time::timeout(
            api.request_timeout,
            crate::trace::Trace::scope(
                crate::trace::Trace::of_headers(&headers),
                super::openai::dispatch_batch_admitting(
                    &api.host,
                    &caller,
                    &batch,
                    session.as_deref(),
                    held.admit(),
                ),
            ),
        ) => dispatched,
        () = api.abandon.cancelled() => return shutting_down(),
    };
    let Ok(results) = dispatched else {
        return error_response(
            StatusCode::SERVICE_UNAVAILABLE,
            format!(
                "timeout: the batch ran longer than the request limit of {:?}; send fewer calls \
                 per request",
                api.request_timeout
            ),
        );
    };
    if let Some(error) = results.error() {
        return error_response(StatusCode::BAD_REQUEST, error);
    }
    if let Some(refusal) = all_refused_as_busy(&results) {
        let results = results.into_value();
        let mut response = (
            StatusCode::TOO_MANY_REQUESTS,
            axum::Json(json!({ "error": refusal, "tool_results": results["tool_results"] })),
        )
            .into_response();
        response
            .headers_mut()
            .insert(header::RETRY_AFTER, HeaderValue::from(auth.retry_after));
        return response;
    }
    let answer = serde_json::to_vec(&results).unwrap_or_default();
    drop(results);
    let mut response = Response::new(held.body(answer));
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    response
}

/// The first error when every call of a non-empty batch was refused as
/// `busy` (rate or concurrency limit), so the whole request was refused.
fn all_refused_as_busy(answer: &super::openai::BatchAnswer) -> Option<String> {
    let results = answer.results();
    if results.is_empty() {
        return None;
    }
    let mut first = None;
    for result in results {
        let content = result.content().as_str()?;
        if !content.starts_with(r#"{"error":"busy: "#) {
            return None;
        }
        if first.is_none() {
            first = serde_json::from_str::<Value>(content)
                .ok()
                .and_then(|v| v["error"].as_str().map(String::from));
        }
    }
    first
}

/// The batch's session: its `session` field or the `Toolhost-Session`
/// header (they must agree when both are given).
fn session(batch: &Value, headers: &HeaderMap) -> Result<Option<String>, String> {
    let field = match batch.get("session") {
        None | Some(Value::Null) => None,
        Some(Value::String(s)) => Some(s.clone()),
        Some(_) => return Err("invalid_request: \"session\" must be a string".into()),
    };
    let header = match headers.get(SESSION_HEADER) {
        None => None,
        Some(value) => Some(
            value
                .to_str()
                .map_err(|_| "invalid_request: the Toolhost-Session header is not ASCII text")?
                .to_string(),
        ),
    };
    match (field, header) {
        (Some(field), Some(header)) if field != header => Err(format!(
            "invalid_request: the \"session\" field ({field:?}) and the Toolhost-Session header \
             ({header:?}) differ; give one"
        )),
        (field, header) => match field.or(header) {
            Some(name) => crate::runtime::check_session_name(&name)
                .map(|()| Some(name))
                .map_err(|e| format!("invalid_request: {e}")),
            None => Ok(None),
        },
    }
}

pub(crate) fn is_json(headers: &HeaderMap) -> bool {
    headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.split(';').next())
        .is_some_and(|essence| essence.trim().eq_ignore_ascii_case("application/json"))
}

pub(crate) enum BodyError {
    TooLarge,
    Read(axum::Error),
}

/// The whole body, refusing more than `max` bytes; one chunk is not copied.
pub(crate) async fn read_body(body: Body, max: usize) -> Result<Bytes, BodyError> {
    let mut stream = body.into_data_stream();
    let mut first: Option<Bytes> = None;
    let mut rest: Vec<u8> = Vec::new();
    while let Some(chunk) = stream.next().await {
        let chunk = chunk.map_err(BodyError::Read)?;
        // `rest` holds the first chunk too once there is a second.
        let so_far = if rest.is_empty() {
            first.as_ref().map_or(0, Bytes::len)
        } else {
            rest.len()
        };
        if so_far + chunk.len() > max {
            return Err(BodyError::TooLarge);
        }
        match &first {
            None => first = Some(chunk),
            Some(first) => {
                if rest.is_empty() {
                    rest.extend_from_slice(first);
                }
                rest.extend_from_slice(&chunk);
            }
        }
    }
    Ok(if rest.is_empty() {
        first.unwrap_or_default()
    } else {
        Bytes::from(rest)
    })
}

/// `GET /v1/health`: no token needed; 503 while shutting down. Names the
/// profiles whose terminal commands run outside the sandbox, if any.
async fn health(State(api): State<Api>) -> Response {
    if api.draining.is_cancelled() {
        return (
            StatusCode::SERVICE_UNAVAILABLE,
            axum::Json(json!({ "status": "shutting_down" })),
        )
            .into_response();
    }
    let mut body = json!({ "status": "ok" });
    if let Some(config) = api.host.config() {
        let unconfined = config.unconfined_terminal_profiles();
        if !unconfined.is_empty() {
            body["unconfined_terminal_profiles"] = json!(unconfined);
        }
    }
    axum::Json(body).into_response()
}

/// `GET /v1/status`: loaded plugins and their versions, calls in flight,
/// plugins that failed to load. A tenant sees only the plugins and tools its
/// profile offers it, and of load failures only the plugin names (the
/// reasons name server paths; they are in the server's log).
async fn status(State(api): State<Api>, Extension(auth): Extension<Authenticated>) -> Response {
    let host = &api.host;
    let caller = &auth.caller;
    let local = caller.tenant_name().is_none();
    let offered: Option<HashSet<String>> = (!local).then(|| {
        host.select_for(caller, &Selection::all())
            .unwrap_or_default()
            .iter()
            .map(|t| t.name.clone())
            .collect()
    });
    let mut in_flight = 0;
    let mut plugins = Vec::new();
    for plugin in host.plugins() {
        let tools: Vec<&str> = plugin
            .tools()
            .iter()
            .map(|t| t.name.as_str())
            .filter(|name| offered.as_ref().is_none_or(|o| o.contains(*name)))
            .collect();
        if !local && tools.is_empty() {
            continue;
        }
        in_flight += plugin.in_flight();
        let mut entry = json!({
            "plugin": &**plugin.name(),
            "version": plugin.hash().to_string(),
            "tools": tools,
            "stateful": plugin.is_stateful(),
            "in_flight": plugin.in_flight(),
        });
        if local {
            entry["source"] = json!(plugin.source().to_string());
        }
        plugins.push(entry);
    }
    let load_errors: Vec<Value> = host
        .load_errors()
        .iter()
        .map(|e| {
            if local {
                json!({
                    "plugin": e.plugin,
                    "source": e.source.to_string(),
                    "problems": e.problems,
                })
            } else {
                json!({ "plugin": e.plugin })
            }
        })
        .collect();
    // Whether plugin and config changes are picked up; the reason names
    // server paths, so only the local caller sees it.
    let watching = match host.not_watching() {
        None => json!({ "ok": true }),
        Some(why) if local => json!({ "ok": false, "error": why }),
        Some(_) => json!({ "ok": false }),
    };
    axum::Json(json!({
        "status": if api.draining.is_cancelled() { "shutting_down" } else { "ok" },
        "watching": watching,
        "generation": host.snapshot().number(),
        "caller": {
            "tenant": caller.tenant_name(),
            "profile": caller.profile().name,
            "in_flight": caller.in_flight(),
        },
        "plugins": plugins,
        "in_flight": in_flight,
        "load_errors": load_errors,
    }))
    .into_response()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn results(contents: &[&str]) -> super::super::openai::BatchAnswer {
        super::super::openai::BatchAnswer::of_contents(contents.iter().map(|c| json!(c)))
    }

    /// A body of exactly the limit is read whole, however it arrives; one
    /// byte more is refused.
    #[tokio::test]
    async fn a_body_is_read_up_to_its_limit_in_any_chunks() {
        let body = |sizes: &[usize]| {
            let chunks: Vec<Result<Bytes, std::io::Error>> = sizes
                .iter()
                .map(|&n| Ok(Bytes::from(vec![b'x'; n])))
                .collect();
            Body::from_stream(futures::stream::iter(chunks))
        };
        for sizes in [
            &[10][..],
            &[4, 6],
            &[4, 4, 2],
            &[1, 1, 1, 1, 1, 1, 1, 1, 1, 1],
        ] {
            let read = read_body(body(sizes), 10).await;
            assert!(matches!(&read, Ok(bytes) if bytes.len() == 10), "{sizes:?}");
        }
        for sizes in [&[11][..], &[4, 7], &[4, 4, 3], &[10, 1]] {
            let read = read_body(body(sizes), 10).await;
            assert!(matches!(read, Err(BodyError::TooLarge)), "{sizes:?}");
        }
    }

    #[test]
    fn a_batch_is_refused_only_when_every_call_was_busy() {
        let busy =
            r#"{"error":"busy: tenant \"a\" is limited to 1 calls per minute; retry later"}"#;
        assert_eq!(
            all_refused_as_busy(&results(&[busy, busy])).as_deref(),
            Some("busy: tenant \"a\" is limited to 1 calls per minute; retry later")
        );
        assert_eq!(
            all_refused_as_busy(&results(&[busy, r#"{"text":"hi"}"#])),
            None
        );
        assert_eq!(all_refused_as_busy(&results(&[])), None);
    }

    #[test]
    fn the_session_comes_from_the_field_or_the_header() {
        let mut headers = HeaderMap::new();
        assert_eq!(session(&json!({}), &headers), Ok(None));
        assert_eq!(
            session(&json!({"session": "s"}), &headers),
            Ok(Some("s".into()))
        );
        headers.insert(SESSION_HEADER, HeaderValue::from_static("h"));
        assert_eq!(session(&json!({}), &headers), Ok(Some("h".into())));
        assert!(session(&json!({"session": "s"}), &headers).is_err());
        assert!(session(&json!({"session": 1}), &HeaderMap::new()).is_err());
    }
}
