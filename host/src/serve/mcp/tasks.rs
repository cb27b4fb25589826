//! MCP's Tasks extension (`io.modelcontextprotocol/tasks`, 2026-07-28): a
//! `tools/call` of a client that declared it and still runs after `[tasks]
//! after` is answered with a task, which `tasks/get` polls, `tasks/update`
//! answers (approvals) and `tasks/cancel` ends; the store is the host's.

use std::sync::Arc;

use rmcp::model::{
    CallToolResponse, CallToolResult, ContentBlock, CreateTaskResult, DetailedTask, ErrorData,
    GetTaskResult, InputRequests, JsonObject, Task, TaskPayload, TaskStatus,
};
use serde_json::{Value, json};

use super::ask::{self, AskTheRequest, Event, Running};
use crate::caller::Caller;
use crate::hooks::BoxFuture;
use crate::host::Host;
use crate::serve::answers::Held;
use crate::tasks::{Payload, Status, TaskError, TaskView, Tasks};

/// Whether the request declared the Tasks extension.
pub(super) fn declared(meta: &rmcp::model::RequestMetaObject) -> bool {
    meta.client_capabilities()
        .is_some_and(|capabilities| capabilities.supports_tasks())
}

/// Serves a `tools/call` of `tool` as a task: the call `start` makes runs
/// in a task of its own; if it ends within `[tasks] after` its result is the
/// answer, otherwise a task is. Its result, kept until the task goes, is
/// held in `held` against the caller's `answers_held`. Until it is a task,
/// the call ends when `cancelled` is (the client gave up).
pub(super) async fn call<F>(
    host: &Host,
    caller: &Caller,
    tool: &str,
    held: Option<Held>,
    timeout: std::time::Duration,
    cancelled: tokio_util::sync::CancellationToken,
    start: F,
) -> Result<CallToolResponse, ErrorData>
where
    F: FnOnce(AskTheRequest) -> BoxFuture<'static, Result<CallToolResult, ErrorData>>,
{
    let (tasks, settings) = host.tasks();
    let made = match tasks.create(
        host.handles(),
        &settings,
        caller.tenant_name(),
        caller.profile(),
        tool,
        &|| host.running_generation(),
    ) {
        Ok(made) => made,
        // Nothing ran: the tenant holds as many tasks as it may.
        Err(refused) => {
            let text = ContentBlock::text(refused.to_string());
            return Ok(CallToolResult::error(vec![text]).into());
        }
    };
    let (cancel, id) = (made.cancel.clone(), Arc::<str>::from(made.id.as_str()));
    // Its progress reports become its status message.
    let sink = crate::serve::tasks::progress_sink(tasks, made.key);
    let mut running = ask::spawn(
        move |ask| -> BoxFuture<'static, _> {
            let call = crate::tasks::cancellable(cancel, id, start(ask));
            Box::pin(crate::capability::with_progress_sink(sink, call))
        },
        timeout,
    );
    // Until the driver has it, the task goes if the request does (the call
    // with it), so that it does not hold a place of the tenant's forever.
    let mut unclaimed = Unclaimed {
        tasks,
        key: made.key,
        armed: true,
    };
    let first = tokio::select! {
        first = tokio::time::timeout(settings.after, running.events.recv()) => first,
        // The client gave up on the request: the call ends with it.
        () = cancelled.cancelled() => {
            return Err(ErrorData::internal_error("the call was cancelled by the client", None));
        }
    };
    let pending = match first {
        Ok(Some(Event::Done(result))) => {
            let result = result?;
            return Ok(match held.map(|held| held.keep_serialized(&result)) {
                Some(Err(refused)) => {
                    CallToolResult::error(vec![ContentBlock::text(refused.model_text())])
                }
                _ => result,
            }
            .into());
        }
        Ok(Some(asked)) => Some(asked),
        Ok(None) => {
            return Err(ErrorData::internal_error(
                "the call ended without an answer",
                None,
            ));
        }
        Err(_) => None,
    };
    unclaimed.armed = false;
    let driver = tokio::spawn(drive(tasks.clone(), made.key, running, pending, held));
    tasks.drive(&made.key, driver.abort_handle());
    let view = tasks
        .get(
            host.handles(),
            &made.id,
            caller.tenant_name(),
            caller.profile(),
        )
        .map_err(|e| ErrorData::internal_error(e.to_string(), None))?;
    Ok(CallToolResponse::Task(CreateTaskResult::new(task_of(
        &view,
    ))))
}

/// A task whose call no driver follows yet: removed when dropped armed.
struct Unclaimed<'a> {
    tasks: &'a Arc<Tasks>,
    key: [u8; 16],
    armed: bool,
}

impl Drop for Unclaimed<'_> {
    fn drop(&mut self) {
        if self.armed {
            self.tasks.remove(&self.key);
        }
    }
}

/// Follows the running call of task `key`: its questions and its end go to
/// the store.
async fn drive(
    tasks: Arc<Tasks>,
    key: [u8; 16],
    mut running: Running,
    mut pending: Option<Event>,
    held: Option<Held>,
) {
    loop {
        let event = match pending.take() {
            Some(event) => Some(event),
            None => running.events.recv().await,
        };
        match event {
            Some(Event::Asked(question, answer)) => {
                running.asked += 1;
                let asked = format!("approval-{}", running.asked);
                let responder = Box::new(move |response: &Value| {
                    let _ = answer.send(ask::decision(response));
                });
                tasks.ask(&key, asked, ask::form(&question), responder);
            }
            Some(Event::Done(Ok(result))) => {
                // Kept until the task goes, counted in answers_held.
                let result = match held.as_ref().map(|held| held.keep_serialized(&result)) {
                    Some(Err(refused)) => {
                        CallToolResult::error(vec![ContentBlock::text(refused.model_text())])
                    }
                    _ => result,
                };
                let value = serde_json::to_value(&result).unwrap_or(Value::Null);
                let guard = held.map(|held| Box::new(held) as Box<dyn Send>);
                tasks.finish(&key, Payload::Result(value), guard);
                return;
            }
            Some(Event::Done(Err(error))) => {
                let value = serde_json::to_value(&error).unwrap_or(Value::Null);
                tasks.finish(&key, Payload::Error(value), None);
                return;
            }
            None => {
                let error = json!({"code": -32603, "message": "the call ended without an answer"});
                tasks.finish(&key, Payload::Error(error), None);
                return;
            }
        }
    }
}

/// The task's fields as the extension writes them.
fn task_of(view: &TaskView) -> Task {
    let status = match view.status {
        Status::Working => TaskStatus::Working,
        Status::InputRequired => TaskStatus::InputRequired,
        Status::Completed => TaskStatus::Completed,
        Status::Failed => TaskStatus::Failed,
        Status::Cancelled => TaskStatus::Cancelled,
    };
    let mut task = Task::new(
        view.id.clone(),
        status,
        view.created_at.clone(),
        view.last_updated_at.clone(),
    )
    .with_ttl_ms(millis(view.ttl))
    .with_poll_interval_ms(millis(view.poll));
    if let Some(message) = &view.message {
        task = task.with_status_message(message.clone());
    }
    task
}

fn millis(duration: std::time::Duration) -> u64 {
    u64::try_from(duration.as_millis()).unwrap_or(u64::MAX)
}

/// The error of a task that is not there (or not the caller's).
fn not_found(error: TaskError) -> ErrorData {
    ErrorData::invalid_params(error.to_string(), None)
}

/// `tasks/get`.
pub(super) fn get(host: &Host, caller: &Caller, id: &str) -> Result<GetTaskResult, ErrorData> {
    let (tasks, _) = host.tasks();
    let view = tasks
        .get(host.handles(), id, caller.tenant_name(), caller.profile())
        .map_err(not_found)?;
    Ok(GetTaskResult::new(detailed(&view)?))
}

/// The most bytes of a status notice: a task whose result is larger is
/// not announced (the client polls it, as it may always).
const NOTICE_MAX: usize = 1 << 20;

/// The task ids a `subscriptions/listen` request of a client that declared
/// the Tasks extension asks status notices of (`notifications.taskIds`).
pub(super) fn listened(request: &rmcp::service::RequestContext<rmcp::RoleServer>) -> Vec<String> {
    if !declared(&request.meta) {
        return Vec::new();
    }
    // Over stdio in the request's extensions; over HTTP in its parts'.
    use crate::serve::jsonrpc::ListenTasks;
    let parts = request.extensions.get::<axum::http::request::Parts>();
    request
        .extensions
        .get::<ListenTasks>()
        .or_else(|| parts.and_then(|parts| parts.extensions.get::<ListenTasks>()))
        .map(|tasks| tasks.0.clone())
        .unwrap_or_default()
}

/// Sends task `id`'s state on the `subscriptions/listen` stream of
/// `context` (`notifications/tasks`, as `tasks/get` would answer it) if it
/// is `caller`'s; `Err` when the stream is gone.
pub(super) async fn notice(
    host: &Host,
    caller: &Caller,
    id: &str,
    context: &rmcp::service::SubscriptionContext,
) -> Result<(), ()> {
    use rmcp::model::{
        NotificationMetaObject, ServerNotification, TaskStatusNotification,
        TaskStatusNotificationParams,
    };
    let (tasks, _) = host.tasks();
    // Another's task, or one that is gone: nothing to say, nor that it is.
    let Ok(view) = tasks.get(host.handles(), id, caller.tenant_name(), caller.profile()) else {
        return Ok(());
    };
    let Ok(task) = detailed(&view) else {
        return Ok(());
    };
    let mut notice = TaskStatusNotification::new(TaskStatusNotificationParams::new(task));
    let Some(size) = serde_json::to_vec(&notice)
        .ok()
        .map(|bytes| bytes.len())
        .filter(|size| *size <= NOTICE_MAX)
    else {
        return Ok(());
    };
    let request = context.request_context();
    // Over HTTP a notice counts in the caller's answers_held until its
    // stream ends (a client that does not read holds it); past the cap it
    // is not sent: the client polls.
    let held = request
        .extensions
        .get::<axum::http::request::Parts>()
        .and_then(|parts| parts.extensions.get::<Held>());
    if held.is_some_and(|held| held.keep(size).is_err()) {
        return Ok(());
    }
    let mut meta = NotificationMetaObject::new();
    // The listen request's id as rmcp knows it (on stdio the transport's,
    // which it turns into the client's).
    meta.set_subscription_id(request.id.clone());
    notice.extensions.insert(meta);
    request
        .peer
        .send_notification(ServerNotification::TaskStatusNotification(notice))
        .await
        .map_err(|_| ())
}

/// A task as `tasks/get` and its notices show it.
fn detailed(view: &TaskView) -> Result<DetailedTask, ErrorData> {
    let object = |value: &Value| -> JsonObject { value.as_object().cloned().unwrap_or_default() };
    let payload = match &view.payload {
        Payload::None if view.status == Status::Cancelled => TaskPayload::Cancelled,
        Payload::None => TaskPayload::Working,
        Payload::Asking { key, question } => {
            let requests: InputRequests = serde_json::from_value(json!({ key: question }))
                .map_err(|e| ErrorData::internal_error(format!("inputRequests: {e}"), None))?;
            TaskPayload::InputRequired {
                input_requests: requests,
            }
        }
        Payload::Result(result) => TaskPayload::Completed {
            result: object(result),
        },
        Payload::Error(error) => TaskPayload::Failed {
            error: object(error),
        },
    };
    Ok(DetailedTask::new(task_of(view), payload))
}

/// `tasks/update`: answers to the task's question.
pub(super) fn update(
    host: &Host,
    caller: &Caller,
    id: &str,
    responses: &rmcp::model::InputResponses,
) -> Result<(), ErrorData> {
    let (tasks, _) = host.tasks();
    let responses: serde_json::Map<String, Value> = responses
        .iter()
        .map(|(key, value)| (key.clone(), value.clone()))
        .collect();
    tasks
        .answer(
            host.handles(),
            id,
            caller.tenant_name(),
            caller.profile(),
            &responses,
        )
        .map_err(not_found)
}

/// `tasks/cancel`.
pub(super) fn cancel(host: &Host, caller: &Caller, id: &str) -> Result<(), ErrorData> {
    let (tasks, _) = host.tasks();
    tasks
        .cancel(host.handles(), id, caller.tenant_name(), caller.profile())
        .map_err(not_found)
}
