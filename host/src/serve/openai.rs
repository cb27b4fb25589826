//! The OpenAI shape of a batch: `{"tool_calls": [...]}` turned into calls,
//! and their outcomes into `{"tool_results": [...]}`.

use serde_json::{Value, json};

use crate::caller::Caller;
use crate::dispatch::{Arguments, CallRequest};
use crate::error::{CallError, ErrorKind};
use crate::host::Host;

impl Host {
    /// Runs a batch in the OpenAI shape,
    /// `{"tool_calls": [{"id", "type": "function", "function": {"name", "arguments"}}]}`,
    /// with at most the host's batch concurrency in flight, and returns
    /// `{"tool_results": [{"tool_call_id", "role": "tool", "name", "content"}]}`
    /// in request order: one result per call, whatever happens to the others.
    /// `session` applies to every call of the batch.
    pub async fn dispatch_batch(&self, batch: &Value, session: Option<&str>) -> Value {
        let caller = self.caller();
        self.dispatch_batch_as(&caller, batch, session).await
    }

    /// [`Host::dispatch_batch`] as `caller`.
    pub async fn dispatch_batch_as(
        &self,
        caller: &Caller,
        batch: &Value,
        session: Option<&str>,
    ) -> Value {
        let Some(calls) = batch.get("tool_calls").and_then(Value::as_array) else {
            let error = CallError::new(
                ErrorKind::InvalidRequest,
                "a batch is an object with a \"tool_calls\" array",
            );
            return json!({ "error": error.model_text() });
        };
        // Every entry is parsed here, once: the well-formed ones run, the
        // others are answered with why.
        let mut requests = Vec::with_capacity(calls.len());
        let mut malformed = Vec::with_capacity(calls.len());
        for (index, call) in calls.iter().enumerate() {
            match batch_request(index, call, session) {
                Ok(request) => {
                    requests.push(request);
                    malformed.push(None);
                }
                Err(error) => malformed.push(Some(error_content(&error))),
            }
        }
        // `dispatch_many` answers every request, in order.
        let mut outcomes = self
            .dispatch_many(caller, requests)
            .await
            .into_iter()
            .map(|outcome| match outcome {
                Ok(result) => result.get().to_string(),
                Err(error) => error_content(&error),
            });
        let results: Vec<Value> = calls
            .iter()
            .zip(malformed)
            .map(|(call, malformed)| {
                let content = malformed.or_else(|| outcomes.next()).unwrap_or_default();
                tool_result(call, content)
            })
            .collect();
        json!({ "tool_results": results })
    }
}

/// A batch entry as a [`CallRequest`] in `session`, or why it is malformed.
fn batch_request(
    index: usize,
    call: &Value,
    session: Option<&str>,
) -> Result<CallRequest, CallError> {
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
    request.session = session.map(String::from);
    Ok(request)
}

/// One entry of `tool_results`, answering the batch entry `call`.
fn tool_result(call: &Value, content: String) -> Value {
    json!({
        "tool_call_id": call.get("id").cloned().unwrap_or(Value::Null),
        "role": "tool",
        "name": call.pointer("/function/name").cloned().unwrap_or(Value::Null),
        "content": content,
    })
}

/// A failed call's `content`: its error as JSON text.
fn error_content(error: &CallError) -> String {
    error.to_json().to_string()
}
