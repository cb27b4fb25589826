//! A tool's output as the caller gets it: JSON text normalized (see
//! `checks`), or content blocks checked against the host's MIME types, with
//! structured content that matches the tool's output schema.

use std::borrow::Cow;
use std::sync::Arc;

use serde_json::value::RawValue;

use super::checks::normalize_output;
use crate::contract::adapter::{GuestOutput, Raw};
use crate::contract::content::BlockSummary;
use crate::contract::spec::ToolSpec;
use crate::contract::{CallOutput, Content, MimeTypes};
use crate::error::{CallError, ErrorKind};

/// The caller's output of `spec`'s guest output; `allowed` gives the MIME
/// types content may have (only asked for content).
pub(super) fn normalize(
    spec: &ToolSpec,
    output: GuestOutput,
    allowed: impl FnOnce() -> MimeTypes,
) -> Result<CallOutput, CallError> {
    let invalid = |problem: String| {
        CallError::new(
            ErrorKind::InvalidOutput,
            format!(
                "tool {:?} (plugin {:?}) {problem}",
                spec.name, &*spec.plugin
            ),
        )
    };
    let raw = match output {
        GuestOutput(Raw::Text(text)) => return normalize_output(spec, text).map(CallOutput::Json),
        GuestOutput(Raw::Content(raw)) => raw,
    };
    let content = Content::from_guest(raw, &allowed()).map_err(invalid)?;
    if spec.output_schema.is_some() {
        let Some(structured) = content.structured() else {
            return Err(invalid(
                "returned content without structured content, which its output schema requires"
                    .into(),
            ));
        };
        if let Err(violations) = spec.validate_output(structured) {
            return Err(invalid(format!(
                "returned structured content that does not match its output schema: {}",
                violations.join("; ")
            )));
        }
    }
    Ok(CallOutput::Content(Arc::new(content)))
}

/// The output as JSON for hooks: borrowed for JSON, written out for content.
pub(super) fn as_json(output: &CallOutput) -> Cow<'_, RawValue> {
    match output {
        CallOutput::Json(raw) => Cow::Borrowed(raw),
        CallOutput::Content(_) => Cow::Owned(output.to_json()),
    }
}

/// What the audit records of the output: each block's type and size.
pub(super) fn summary(output: &CallOutput) -> Vec<BlockSummary> {
    output.content().map(Content::summary).unwrap_or_default()
}
