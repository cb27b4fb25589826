//! Tasks under `/v1`: `POST /tool_calls` with `"async": true` starts each
//! call as a task and answers `202` with their ids; `GET /tasks/{id}` is a
//! task's status and result, `GET /tasks` the caller's tasks, `DELETE
//! /tasks/{id}` cancels one. The store and caps are the host's, as over MCP.

use axum::Router;
use axum::extract::{Extension, Path, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use serde_json::{Value, json};

use tokio_util::sync::CancellationToken;

use super::answers::Answers;
use super::tenants::Authenticated;
use crate::caller::Caller;
use crate::host::Host;
use crate::tasks::{Created, Payload, TaskError, TaskView, Tasks, progress_text};
use std::sync::Arc;

/// `{"error": message}` with `status`, as every `/v1` error.
fn error_response(status: StatusCode, message: impl Into<String>) -> Response {
    (status, axum::Json(json!({ "error": message.into() }))).into_response()
}

/// A batch to run as tasks.
pub(crate) struct Batch<'a> {
    /// The tenant's own caller, which the task ids are bound to.
    pub(crate) owner: &'a Caller,
    /// The caller the calls run as (a narrowed session's, it may be).
    pub(crate) caller: &'a Caller,
    /// The batch, with `tool_calls` and `format`.
    pub(crate) batch: &'a Value,
    /// Its session.
    pub(crate) session: Option<String>,
    /// The trace of its request.
    pub(crate) trace: Option<crate::trace::Trace>,
}

/// Where the progress reports of task `key`'s call go: its status message.
pub(crate) fn progress_sink(tasks: &Arc<Tasks>, key: [u8; 16]) -> crate::capability::ProgressSink {
    let tasks = tasks.clone();
    Arc::new(move |report: crate::capability::Progress| {
        let text = progress_text(report.progress, report.total, report.message.as_deref());
        tasks.report(&key, text);
    })
}

/// `/tasks` and `/tasks/{id}`; what they answer is held in `answers`.
pub(crate) fn routes(answers: Answers) -> Router<Host> {
    Router::new()
        .route("/tasks", get(list))
        .route("/tasks/{id}", get(show).delete(cancel))
        .layer(Extension(answers))
}

/// Whether a batch asks to run as tasks (`"async": true`), or why its
/// `async` cannot be read.
pub(crate) fn is_async(batch: &Value) -> Result<bool, String> {
    match batch.get("async") {
        None | Some(Value::Null) => Ok(false),
        Some(Value::Bool(run_async)) => Ok(*run_async),
        Some(_) => Err("invalid_request: \"async\" must be true or false".into()),
    }
}

/// Starts each call of `batch` as a task: `202` with the task ids, or
/// `429` and nothing run when the tenant's cap has no room for them all.
/// Their results are held in `answers`; `abandon` ends them at shutdown.
pub(crate) fn start(
    host: &Host,
    answers: &Answers,
    abandon: &CancellationToken,
    batch: Batch<'_>,
) -> Response {
    let Batch {
        owner,
        caller,
        batch,
        session,
        trace,
    } = batch;
    let calls = batch
        .get("tool_calls")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    let (tasks, settings) = host.tasks();
    let mut made: Vec<Created> = Vec::with_capacity(calls.len());
    for call in &calls {
        let tool = call
            .pointer("/function/name")
            .or_else(|| call.get("name"))
            .and_then(Value::as_str)
            .unwrap_or_default();
        // A task keeps its tool's name until it goes: no longer than a
        // tool's name may be.
        if tool.len() > crate::contract::spec::MAX_TOOL_NAME {
            for created in &made {
                tasks.remove(&created.key);
            }
            return error_response(
                StatusCode::BAD_REQUEST,
                format!(
                    "invalid_request: a tool name of {} bytes, longer than any tool's ({} at \
                     most); name a tool of GET /v1/tools",
                    tool.len(),
                    crate::contract::spec::MAX_TOOL_NAME
                ),
            );
        }
        match tasks.create(
            host.handles(),
            &settings,
            owner.tenant_name(),
            owner.profile(),
            tool,
            &|| host.running_generation(),
        ) {
            Ok(created) => made.push(created),
            Err(refused) => {
                // All or nothing: the tasks made for this batch go.
                for created in &made {
                    tasks.remove(&created.key);
                }
                let status = match refused {
                    TaskError::Reloaded => StatusCode::CONFLICT,
                    _ => StatusCode::TOO_MANY_REQUESTS,
                };
                return error_response(status, refused.to_string());
            }
        }
    }
    let mut started = Vec::with_capacity(calls.len());
    for (call, created) in calls.into_iter().zip(made) {
        started.push(json!({
            "tool_call_id": call.get("id").cloned().unwrap_or(Value::Null),
            "task_id": created.id,
            "status": "working",
            "poll_interval_ms": millis(settings.poll),
        }));
        let one = json!({ "tool_calls": [call], "format": batch.get("format") });
        let (host, caller, session) = (host.clone(), caller.clone(), session.clone());
        let held = answers.hold(caller.tenant_name(), host.tenant_caps().answers_held);
        let admit = held.admit();
        let abandon = abandon.clone();
        let (key, id) = (created.key, created.id.as_str().into());
        let (trace, sink) = (trace.clone(), progress_sink(tasks, key));
        let call = crate::tasks::cancellable(created.cancel, id, async move {
            let call = crate::serve::openai::dispatch_batch_admitting(
                &host,
                &caller,
                &one,
                session.as_deref(),
                admit,
            );
            let call = crate::capability::with_progress_sink(sink, call);
            crate::trace::Trace::scope(trace, call).await
        });
        // The result's bytes stay counted in answers_held while it is kept.
        let kept: Box<dyn Send> = Box::new(held.clone());
        let driver = tokio::spawn({
            let tasks = tasks.clone();
            async move {
                let payload = tokio::select! {
                    answer = call => match answer.error() {
                        Some(error) => Payload::Error(json!({ "error": error })),
                        None => Payload::Result(answer.into_value()["tool_results"][0].take()),
                    },
                    () = abandon.cancelled() => Payload::Error(json!({
                        "error": "unavailable: the server shut down before the task ended",
                    })),
                };
                tasks.finish(&key, payload, Some(kept));
            }
        });
        tasks.drive(&key, driver.abort_handle());
    }
    (
        StatusCode::ACCEPTED,
        axum::Json(json!({ "tool_results": started })),
    )
        .into_response()
}

fn millis(duration: std::time::Duration) -> u64 {
    u64::try_from(duration.as_millis()).unwrap_or(u64::MAX)
}

/// A task as `/v1` shows it; with its result, error or question when
/// `whole`.
fn shown(view: &TaskView, whole: bool) -> Value {
    let mut task = json!({
        "task_id": view.id,
        "tool": view.tool,
        "status": view.status.as_str(),
        "created_at": view.created_at,
        "last_updated_at": view.last_updated_at,
        "ttl_ms": millis(view.ttl),
        "poll_interval_ms": millis(view.poll),
    });
    if let Some(message) = &view.message {
        task["status_message"] = json!(message);
    }
    if whole {
        match &view.payload {
            Payload::None => {}
            Payload::Asking { question, .. } => task["approval"] = question.clone(),
            Payload::Result(result) => task["result"] = result.clone(),
            Payload::Error(error) => task["error"] = error.clone(),
        }
    }
    task
}

fn refused(error: &TaskError) -> Response {
    let message = match error {
        TaskError::Expired => "expired: the task's time to live ([tasks] ttl) has passed and it \
                               is gone"
            .to_string(),
        _ => "not_found: no task of this caller has this id (an id works only with the token \
              that made it, exactly as it was returned, until its result is dropped: [tasks] \
              keep)"
            .to_string(),
    };
    error_response(StatusCode::NOT_FOUND, message)
}

/// `GET /v1/tasks/{id}`. The answer, a copy of the result, counts in the
/// tenant's `answers_held` until it is sent, as every answer does.
async fn show(
    State(host): State<Host>,
    Extension(auth): Extension<Authenticated>,
    Extension(answers): Extension<Answers>,
    Path(id): Path<String>,
) -> Response {
    let (tasks, _) = host.tasks();
    let caller = &auth.caller;
    match tasks.get(host.handles(), &id, caller.tenant_name(), caller.profile()) {
        Ok(view) => {
            let body = serde_json::to_vec(&shown(&view, true)).unwrap_or_default();
            let held = answers.hold(caller.tenant_name(), host.tenant_caps().answers_held);
            match held.keep(body.len()) {
                Ok(()) => (
                    [(axum::http::header::CONTENT_TYPE, "application/json")],
                    held.body(body),
                )
                    .into_response(),
                Err(refusal) => error_response(StatusCode::TOO_MANY_REQUESTS, refusal.model_text()),
            }
        }
        Err(error) => refused(&error),
    }
}

/// `DELETE /v1/tasks/{id}`: cancels it; the task as it is then.
async fn cancel(
    State(host): State<Host>,
    Extension(auth): Extension<Authenticated>,
    Path(id): Path<String>,
) -> Response {
    let (tasks, _) = host.tasks();
    let caller = &auth.caller;
    let (tenant, profile) = (caller.tenant_name(), caller.profile());
    let done = tasks
        .cancel(host.handles(), &id, tenant, profile)
        .and_then(|()| tasks.get(host.handles(), &id, tenant, profile));
    match done {
        Ok(view) => axum::Json(shown(&view, false)).into_response(),
        Err(error) => refused(&error),
    }
}

/// `GET /v1/tasks`: the caller's tasks, oldest first, without results.
async fn list(State(host): State<Host>, Extension(auth): Extension<Authenticated>) -> Response {
    let (tasks, _) = host.tasks();
    let caller = &auth.caller;
    let listed: Vec<Value> = tasks
        .list(caller.tenant_name(), caller.profile())
        .iter()
        .map(|view| shown(view, false))
        .collect();
    axum::Json(json!({ "tasks": listed })).into_response()
}
