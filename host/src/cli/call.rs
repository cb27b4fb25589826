//! `toolhost call`: one call, or a batch in the OpenAI shape, printed as
//! JSON.

use std::io::Read;
use std::process::ExitCode;

use anyhow::{Context as _, Result};
use serde_json::json;

use super::args::Global;
use super::setup::host;
use crate::dispatch::CallRequest;
use crate::escape;
use crate::host::Host;

/// `toolhost call TOOL [ARGUMENTS]`, or `toolhost call --batch FILE`.
pub(super) async fn run(
    global: &Global,
    tool: Option<String>,
    arguments: Option<String>,
    session: Option<String>,
    batch: Option<String>,
) -> Result<ExitCode> {
    if let Some(batch) = batch {
        let text = read_input(&batch, "the batch")?;
        let batch: serde_json::Value = serde_json::from_str(&text)
            .with_context(|| format!("the batch in {batch} is not valid JSON"))?;
        let host = host(global).await?;
        let results = host.dispatch_batch(&batch, session.as_deref()).await;
        println!("{}", escape::json_pretty(&results)?);
        return Ok(if results.get("error").is_some() {
            ExitCode::FAILURE
        } else {
            ExitCode::SUCCESS
        });
    }
    let tool = tool.context("a tool name is required")?;
    let arguments = match arguments {
        Some(arguments) => read_input(&arguments, "ARGS")?,
        None => "{}".to_string(),
    };
    let host = host(global).await?;
    let mut request = CallRequest::new(tool, arguments);
    request.session = session;
    Ok(call_one(&host, request).await)
}

/// `-` reads stdin; text that starts as JSON (`{`, `[`) is the text itself;
/// anything else names a file (`what` says what it holds, for errors).
fn read_input(arg: &str, what: &str) -> Result<String> {
    if arg == "-" {
        let mut text = String::new();
        std::io::stdin()
            .read_to_string(&mut text)
            .context("reading stdin")?;
        return Ok(text);
    }
    let trimmed = arg.trim_start();
    if trimmed.starts_with('{') || trimmed.starts_with('[') || trimmed.is_empty() {
        return Ok(arg.to_string());
    }
    std::fs::read_to_string(arg).with_context(|| {
        format!(
            "{what} {arg:?} is neither JSON (an object starts with '{{') nor a file that can be \
             read"
        )
    })
}

/// Runs one call and prints its result, or its error as JSON.
async fn call_one(host: &Host, request: CallRequest) -> ExitCode {
    match host.dispatch(request).await {
        Ok(result) => {
            let pretty = serde_json::from_str::<serde_json::Value>(result.get())
                .and_then(|v| escape::json_pretty(&v))
                .unwrap_or_else(|_| escape::escape(result.get()).into_owned());
            println!("{pretty}");
            ExitCode::SUCCESS
        }
        Err(e) => {
            tracing::debug!(error = %e, "call failed");
            let error = json!({"error": e.model_text()});
            println!("{}", escape::json(&error).unwrap_or_default());
            ExitCode::FAILURE
        }
    }
}
