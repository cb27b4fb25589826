//! `toolhost call`: one call, or a batch in the OpenAI shape, printed as
//! JSON.

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{Context as _, Result};
use serde_json::json;

use super::args::Global;
use super::setup::host;
use crate::contract::CallOutput;
use crate::escape;
use crate::host::CallRequest;
use crate::host::Host;

/// The arguments of `toolhost call`.
pub(super) struct Call {
    pub(super) tool: Option<String>,
    pub(super) arguments: Option<String>,
    pub(super) session: Option<String>,
    pub(super) batch: Option<String>,
    pub(super) save_content: Option<PathBuf>,
}

/// `toolhost call TOOL [ARGUMENTS]`, or `toolhost call --batch FILE`.
pub(super) async fn run(global: &Global, call: Call) -> Result<ExitCode> {
    let Call {
        tool,
        arguments,
        session,
        batch,
        save_content,
    } = call;
    if let Some(session) = &session {
        crate::runtime::check_session_name(session)
            .map_err(|e| anyhow::anyhow!("--session: {e}"))?;
    }
    if let Some(batch) = batch {
        let text = read_input(&batch, "the batch")?;
        // Only what a batch uses is built, as for `POST /v1/tool_calls`.
        let (batch, _) = crate::serve::batch_body::parse(text.as_bytes(), usize::MAX)
            .with_context(|| format!("the batch in {batch} is not valid JSON"))?;
        drop(text);
        let host = host(global).await?;
        let caller = host.caller();
        let admit: crate::host::call::Admit = std::sync::Arc::new(|outcome| outcome);
        let answer = crate::serve::openai::dispatch_batch_admitting(
            &host,
            &caller,
            &batch,
            session.as_deref(),
            admit,
        )
        .await;
        println!("{}", escape::json_pretty(&answer)?);
        return Ok(if answer.error().is_some() {
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
    call_one(&host, request, save_content.as_deref()).await
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

/// Runs one call and prints its result (content blocks as
/// [`super::content::printed`] shows them), or its error as JSON.
async fn call_one(host: &Host, request: CallRequest, save: Option<&Path>) -> Result<ExitCode> {
    let caller = host.caller();
    let tool = request.tool.clone();
    match host.dispatch_output_as(&caller, request).await {
        Ok(CallOutput::Json(result)) => {
            let pretty = serde_json::from_str::<serde_json::Value>(result.get())
                .and_then(|v| escape::json_pretty(&v))
                .unwrap_or_else(|_| escape::escape(result.get()).into_owned());
            println!("{pretty}");
            Ok(ExitCode::SUCCESS)
        }
        Ok(CallOutput::Content(content)) => {
            let printed = super::content::printed(&content, &tool, save)?;
            println!("{}", escape::json_pretty(&printed)?);
            Ok(ExitCode::SUCCESS)
        }
        Err(e) => {
            tracing::debug!(error = %e, "call failed");
            let error = json!({"error": e.model_text()});
            println!("{}", escape::json(&error).unwrap_or_default());
            Ok(ExitCode::FAILURE)
        }
    }
}
