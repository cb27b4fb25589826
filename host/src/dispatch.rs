//! One tool call end to end (resolve, validate, hooks, run, normalize), and
//! batches of calls in the OpenAI shape run concurrently.

use std::sync::Arc;
use std::time::Instant;

use serde_json::value::RawValue;
use serde_json::{Value, json};

use crate::error::{CallError, ErrorKind, bounded};
use crate::hooks::CallInfo;
use crate::host::Host;
use crate::registry::Generation;
use crate::spec::ToolSpec;

/// A call's arguments: JSON text (as models send them, possibly malformed)
/// or an already parsed value.
#[derive(Debug, Clone)]
pub enum Arguments {
    /// JSON text; empty text means `{}`.
    Text(String),
    /// A parsed JSON value.
    Value(Value),
}

impl From<&str> for Arguments {
    fn from(text: &str) -> Self {
        Self::Text(text.to_string())
    }
}

impl From<String> for Arguments {
    fn from(text: String) -> Self {
        Self::Text(text)
    }
}

impl From<Value> for Arguments {
    fn from(value: Value) -> Self {
        Self::Value(value)
    }
}

/// One tool call.
#[derive(Debug, Clone)]
pub struct CallRequest {
    /// The tool's name.
    pub tool: String,
    /// Its arguments.
    pub arguments: Arguments,
    /// Session (or task) id: calls of a stateful plugin with the same id
    /// share an instance.
    pub session: Option<String>,
    /// The model's `tool_call_id`, for hooks and logs.
    pub call_id: Option<String>,
}

impl CallRequest {
    /// A call of `tool` with `arguments`, without session or call id.
    pub fn new(tool: impl Into<String>, arguments: impl Into<Arguments>) -> Self {
        Self {
            tool: tool.into(),
            arguments: arguments.into(),
            session: None,
            call_id: None,
        }
    }

    /// Sets the session id.
    pub fn session(mut self, session: impl Into<String>) -> Self {
        self.session = Some(session.into());
        self
    }

    /// Sets the call id.
    pub fn call_id(mut self, call_id: impl Into<String>) -> Self {
        self.call_id = Some(call_id.into());
        self
    }
}

impl Host {
    /// Calls `tool` with `arguments` in a fresh sandbox. The result is JSON:
    /// a tool's plain-text result becomes a JSON string.
    pub async fn call(
        &self,
        tool: &str,
        arguments: impl Into<Arguments>,
    ) -> Result<Box<RawValue>, CallError> {
        self.dispatch(CallRequest::new(tool, arguments)).await
    }

    /// Runs one call end to end. Every failure, at any stage, is a
    /// [`CallError`]; nothing panics.
    pub async fn dispatch(&self, request: CallRequest) -> Result<Box<RawValue>, CallError> {
        let snapshot = self.snapshot();
        let Some(entry) = snapshot.tool(&request.tool) else {
            return Err(unknown_tool(&request.tool, &snapshot));
        };
        let limits = self.limits();
        let (arguments, text) =
            parse_arguments(&entry.spec, request.arguments, limits.max_arguments)?;
        if let Err(violations) = entry.spec.validate_arguments(&arguments) {
            return Err(schema_error(&entry.spec, &violations));
        }
        let info = CallInfo {
            tool: &entry.spec,
            plugin: &entry.plugin,
            arguments: &arguments,
            session: request.session.as_deref(),
            call_id: request.call_id.as_deref(),
            tenant: None,
            profile: "default",
        };
        let started = Instant::now();
        for hook in self.hooks() {
            if let Err(message) = hook.before_call(&info).await {
                let error = CallError::new(ErrorKind::Blocked, message);
                self.after_call(&info, Err(&error), started);
                return Err(error);
            }
        }
        let output = match (&request.session, entry.plugin.is_stateful()) {
            (Some(session), true) => {
                entry
                    .plugin
                    .call_in_session(self.runtime(), &entry.spec, &text, limits, session)
                    .await
            }
            _ => {
                entry
                    .plugin
                    .call(self.runtime(), &entry.spec, &text, limits)
                    .await
            }
        };
        let result = output.and_then(|output| normalize_output(&entry.spec, output));
        if let Err(error) = &result {
            tracing::debug!(tool = %entry.spec.name, plugin = %entry.plugin.name(), %error, "call failed");
        }
        self.after_call(&info, result.as_deref().map_err(|e| e), started);
        result
    }

    fn after_call(
        &self,
        info: &CallInfo<'_>,
        result: Result<&RawValue, &CallError>,
        started: Instant,
    ) {
        let elapsed = started.elapsed();
        for hook in self.hooks() {
            hook.after_call(info, result, elapsed);
        }
    }

    /// Runs a batch in the OpenAI shape,
    /// `{"tool_calls": [{"id", "type": "function", "function": {"name", "arguments"}}]}`,
    /// with at most the host's batch concurrency in flight, and returns
    /// `{"tool_results": [{"tool_call_id", "role": "tool", "name", "content"}]}`
    /// in request order: one result per call, whatever happens to the others.
    /// `session` applies to every call of the batch.
    pub async fn dispatch_batch(&self, batch: &Value, session: Option<&str>) -> Value {
        let Some(calls) = batch.get("tool_calls").and_then(Value::as_array) else {
            let error = CallError::new(
                ErrorKind::InvalidRequest,
                "a batch is an object with a \"tool_calls\" array",
            );
            return json!({ "error": error.model_text() });
        };
        let semaphore = Arc::new(tokio::sync::Semaphore::new(self.batch_concurrency()));
        let tasks: Vec<_> = calls
            .iter()
            .enumerate()
            .map(|(index, call)| {
                let host = self.clone();
                let call = call.clone();
                let session = session.map(String::from);
                let semaphore = semaphore.clone();
                tokio::spawn(async move {
                    let _permit = semaphore.acquire_owned().await;
                    host.batch_item(index, &call, session).await
                })
            })
            .collect();
        let mut results = Vec::with_capacity(tasks.len());
        for (index, task) in tasks.into_iter().enumerate() {
            results.push(task.await.unwrap_or_else(|e| {
                let error = CallError::new(ErrorKind::Internal, format!("call task failed: {e}"));
                tool_result(&calls[index], error_content(&error))
            }));
        }
        json!({ "tool_results": results })
    }

    async fn batch_item(&self, index: usize, call: &Value, session: Option<String>) -> Value {
        let request = match batch_request(index, call) {
            Ok(request) => request,
            Err(error) => return tool_result(call, error_content(&error)),
        };
        let mut request = request;
        request.session = session;
        let content = match self.dispatch(request).await {
            Ok(result) => result.get().to_string(),
            Err(error) => error_content(&error),
        };
        tool_result(call, content)
    }
}

/// A batch entry as a [`CallRequest`], or why it is malformed.
fn batch_request(index: usize, call: &Value) -> Result<CallRequest, CallError> {
    let malformed = |what: &str| {
        CallError::new(
            ErrorKind::InvalidRequest,
            format!("tool_calls[{index}] {what}"),
        )
    };
    let function = call
        .get("function")
        .and_then(Value::as_object)
        .ok_or_else(|| malformed("has no \"function\" object"))?;
    let name = function
        .get("name")
        .and_then(Value::as_str)
        .ok_or_else(|| malformed("has no function name"))?;
    let arguments = match function.get("arguments") {
        None | Some(Value::Null) => Arguments::Text(String::new()),
        Some(Value::String(text)) => Arguments::Text(text.clone()),
        Some(value) => Arguments::Value(value.clone()),
    };
    let mut request = CallRequest::new(name, arguments);
    request.call_id = call.get("id").and_then(Value::as_str).map(String::from);
    Ok(request)
}

fn tool_result(call: &Value, content: String) -> Value {
    json!({
        "tool_call_id": call.get("id").cloned().unwrap_or(Value::Null),
        "role": "tool",
        "name": call.pointer("/function/name").cloned().unwrap_or(Value::Null),
        "content": content,
    })
}

fn error_content(error: &CallError) -> String {
    error.to_json().to_string()
}

pub(crate) fn unknown_tool(name: &str, snapshot: &Generation) -> CallError {
    let mut known: Vec<&str> = snapshot.tools().map(|t| t.spec.name.as_str()).collect();
    let shown = bounded(name, 80);
    let hint = if known.is_empty() {
        "no tools are loaded".to_string()
    } else {
        known.truncate(30);
        format!("available tools: {}", known.join(", "))
    };
    CallError::new(
        ErrorKind::UnknownTool,
        format!("no tool named {shown:?}; {hint}"),
    )
}

/// Parses the arguments into a JSON object within the size limit. Returns
/// the value (for validation and hooks) and the text to pass to the guest.
fn parse_arguments(
    spec: &ToolSpec,
    arguments: Arguments,
    max_bytes: usize,
) -> Result<(Value, String), CallError> {
    let (value, text) = match arguments {
        Arguments::Text(text) => {
            check_size(spec, text.len(), max_bytes)?;
            if text.trim().is_empty() {
                (json!({}), "{}".to_string())
            } else {
                let value = serde_json::from_str::<Value>(&text).map_err(|e| {
                    CallError::new(
                        ErrorKind::InvalidJson,
                        format!("arguments of tool {:?} are not valid JSON: {e}", spec.name),
                    )
                })?;
                (value, text)
            }
        }
        Arguments::Value(value) => {
            let text = value.to_string();
            check_size(spec, text.len(), max_bytes)?;
            (value, text)
        }
    };
    if !value.is_object() {
        return Err(CallError::new(
            ErrorKind::InvalidJson,
            format!(
                "arguments of tool {:?} must be a JSON object, got {}",
                spec.name,
                json_type_name(&value)
            ),
        ));
    }
    Ok((value, text))
}

fn check_size(spec: &ToolSpec, len: usize, max: usize) -> Result<(), CallError> {
    if len > max {
        return Err(CallError::new(
            ErrorKind::InvalidArguments,
            format!(
                "arguments of tool {:?} are {len} bytes, more than the limit of {max} bytes",
                spec.name
            ),
        ));
    }
    Ok(())
}

fn json_type_name(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

fn schema_error(spec: &ToolSpec, violations: &[String]) -> CallError {
    let count = violations.len();
    CallError::new(
        ErrorKind::InvalidArguments,
        format!(
            "arguments of tool {:?} do not match its schema ({count} problem{}): {}",
            spec.name,
            if count == 1 { "" } else { "s" },
            violations.join("; ")
        ),
    )
}

/// A tool's output as JSON: valid JSON passes through; text that does not
/// start like JSON becomes a JSON string; text that starts like JSON but does
/// not parse is an error (a broken result, not prose).
fn normalize_output(spec: &ToolSpec, output: String) -> Result<Box<RawValue>, CallError> {
    match serde_json::from_str::<Box<RawValue>>(&output) {
        Ok(raw) => Ok(raw),
        Err(e) if output.trim_start().starts_with(['{', '[', '"']) => Err(CallError::new(
            ErrorKind::InvalidOutput,
            format!(
                "tool {:?} (plugin {:?}) returned malformed JSON: {e}",
                spec.name, &*spec.plugin
            ),
        )),
        Err(_) => {
            let text = serde_json::to_string(&output).expect("strings serialize");
            Ok(RawValue::from_string(text).expect("a JSON string is valid JSON"))
        }
    }
}
