//! The approvals API under `/v1`: a tenant's pending approvals listed
//! (`GET /approvals`), answered (`POST /approvals/{id}` with `{"decision":
//! "once" | "session" | "always" | "deny"}`) and watched as server-sent
//! events (`GET /approvals/events`). A tenant's token sees its own; the
//! approver token (`approvals.approver_token_sha256`) sees every tenant's.
//! Also `POST /sessions`: a client narrows its own session's permissions.

use std::convert::Infallible;

use axum::Router;
use axum::extract::{Extension, Path, State};
use axum::http::StatusCode;
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use futures::StreamExt as _;
use serde_json::{Value, json};

use super::api::{Api, error_response};
use super::narrowings::Refusal;
use super::tenants::Authenticated;
use crate::approval::Approval;
use crate::approval::pending::AnswerError;
use crate::policy::Narrowing;

/// `/approvals`, `/approvals/events` and `/approvals/{id}`.
pub(crate) fn routes() -> Router<Api> {
    Router::new()
        .route("/approvals", get(list))
        .route("/approvals/events", get(events))
        .route("/approvals/{id}", post(answer))
        .route("/sessions", post(narrow))
}

/// `POST /v1/sessions` with `{"session": ID, "allow": [...], "deny": [...]}`:
/// the session's calls (`Toolhost-Session: ID`) keep only what `allow`
/// matches and lose what `deny` matches. Narrowing again narrows further.
/// The session's terminal ends at once (its processes, and every
/// connection through its proxy); a stateful plugin's instance is started
/// again under the new rules at its next call (it is kept only for the
/// profile it was made under).
async fn narrow(
    State(api): State<Api>,
    Extension(auth): Extension<Authenticated>,
    body: axum::body::Bytes,
) -> Response {
    #[derive(serde::Deserialize)]
    #[serde(deny_unknown_fields)]
    struct Request {
        session: String,
        #[serde(flatten)]
        narrowing: Narrowing,
    }
    let request: Request = match serde_json::from_slice(&body) {
        Ok(request) => request,
        Err(e) => {
            return error_response(
                StatusCode::BAD_REQUEST,
                format!(
                    "invalid_request: send {{\"session\": ID, \"allow\": [patterns], \"deny\": \
                     [patterns]}}: {e}"
                ),
            );
        }
    };
    if request.session.is_empty() || request.session.len() > 256 {
        return error_response(
            StatusCode::BAD_REQUEST,
            "invalid_request: the session id must be 1 to 256 characters",
        );
    }
    if let Err(e) = crate::runtime::check_session_name(&request.session) {
        return error_response(StatusCode::BAD_REQUEST, format!("invalid_request: {e}"));
    }
    let caps = api.host.tenant_caps();
    let tenant = auth.caller.tenant_name();
    let narrowed = match api
        .narrowings
        .narrow(tenant, &request.session, request.narrowing, &caps)
    {
        Ok(session) => session.apply(&auth.caller),
        Err(Refusal::Full(message)) => {
            return error_response(StatusCode::TOO_MANY_REQUESTS, format!("busy: {message}"));
        }
        Err(Refusal::TooLarge(message)) => {
            return error_response(
                StatusCode::PAYLOAD_TOO_LARGE,
                format!("payload_too_large: {message}"),
            );
        }
    };
    api.host
        .end_session(auth.caller.tenant_name(), &request.session);
    let offered: Vec<String> = api
        .host
        .listing(&narrowed, &crate::toolsets::Selection::default())
        .unwrap_or_default()
        .into_iter()
        .filter(|listed| listed.hidden.is_none())
        .map(|listed| listed.spec.name.clone())
        .collect();
    axum::Json(json!({ "session": request.session, "offered": offered })).into_response()
}

/// The tenant the caller answers for, and whether it answers for everyone.
fn whose(auth: &Authenticated) -> (Option<String>, bool) {
    (auth.caller.tenant_name().map(String::from), auth.approver)
}

async fn list(State(api): State<Api>, Extension(auth): Extension<Authenticated>) -> Response {
    let (tenant, everyone) = whose(&auth);
    let pending = api.pending.list(tenant.as_deref(), everyone);
    axum::Json(json!({ "approvals": pending })).into_response()
}

async fn answer(
    State(api): State<Api>,
    Extension(auth): Extension<Authenticated>,
    Path(id): Path<String>,
    body: axum::body::Bytes,
) -> Response {
    let decision = serde_json::from_slice::<Value>(&body)
        .ok()
        .and_then(|v| v.get("decision").and_then(Value::as_str).map(String::from));
    let decision = match decision.as_deref() {
        Some("once") => Approval::Once,
        Some("session") => Approval::Session,
        Some("always") => Approval::Always,
        Some("deny") => Approval::Deny,
        _ => {
            return error_response(
                StatusCode::BAD_REQUEST,
                "invalid_request: send {\"decision\": \"once\" | \"session\" | \"always\" | \"deny\"}",
            );
        }
    };
    let (tenant, everyone) = whose(&auth);
    match api
        .pending
        .answer(&id, tenant.as_deref(), everyone, decision)
    {
        Ok(()) => axum::Json(json!({ "id": id, "decision": decision.as_str() })).into_response(),
        Err(AnswerError::NotFound) => error_response(
            StatusCode::NOT_FOUND,
            format!(
                "not_found: no pending approval {id:?} for this caller (answered, timed out, or \
                 never asked)"
            ),
        ),
    }
}

/// New approvals as `event: approval` (the ones already waiting first) and
/// answered or expired ones as `event: resolved`, until the server drains
/// or the token the stream was opened with no longer holds.
async fn events(State(api): State<Api>, Extension(auth): Extension<Authenticated>) -> Response {
    let (tenant, everyone) = whose(&auth);
    let max = api.host.tenant_caps().event_streams;
    let subscription = match api.pending.subscribe(tenant.as_deref(), everyone, max) {
        Ok(subscription) => subscription,
        Err(message) => {
            return error_response(StatusCode::TOO_MANY_REQUESTS, format!("busy: {message}"));
        }
    };
    let waiting: Vec<Result<Event, Infallible>> = api
        .pending
        .list(tenant.as_deref(), everyone)
        .into_iter()
        .map(|view| Ok(Event::default().event("approval").data(view.to_string())))
        .collect();
    // The subscription (and its place among the tenant's streams) lives as
    // long as the stream.
    let live = futures::stream::unfold(subscription, |mut subscription| async move {
        loop {
            match subscription.events.recv().await {
                Ok(event) => return Some((event, subscription)),
                Err(tokio::sync::broadcast::error::RecvError::Lagged(_)) => continue,
                Err(tokio::sync::broadcast::error::RecvError::Closed) => return None,
            }
        }
    })
    .map(|event| {
        Ok::<_, Infallible>(
            Event::default()
                .event(event.kind)
                .data(event.data.to_string()),
        )
    });
    // Until the server drains, or the token it was opened with no longer
    // holds (a reload removed the tenant or changed the token).
    let draining = api.draining.clone();
    let revoked = auth.revoked.clone();
    let stream = futures::stream::iter(waiting)
        .chain(live)
        .take_until(async move {
            tokio::select! {
                () = draining.cancelled() => {}
                () = revoked.cancelled() => {}
            }
        });
    Sse::new(stream)
        .keep_alive(KeepAlive::default())
        .into_response()
}
