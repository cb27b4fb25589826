//! What a call's arguments and a tool's output must be: a JSON object
//! within the size limit that matches the tool's schema, and JSON (matching
//! the output schema, if the tool has one); the error for an unknown tool.

use serde_json::value::RawValue;
use serde_json::{Value, json};

use super::request::Arguments;
use crate::contract::spec::ToolSpec;
use crate::error::{CallError, ErrorKind, bounded};
use crate::registry::Generation;

/// The error for a call of a tool that does not exist. It names the tools
/// `profile` offers, never those it hides (another tenant's, say).
pub(super) fn unknown_tool(
    name: &str,
    snapshot: &Generation,
    profile: &crate::capability::Profile,
) -> CallError {
    let mut known: Vec<&str> = snapshot
        .tools()
        .filter(|t| crate::availability::check(&t.spec, profile).is_ok())
        .map(|t| t.spec.name.as_str())
        .collect();
    let shown = bounded(name, 80);
    let hint = if known.is_empty() {
        "no tools are offered to this caller".to_string()
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
pub(super) fn parse_arguments(
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
                let (value, repeated) = super::unique::read(&text).map_err(|e| {
                    CallError::new(
                        ErrorKind::InvalidJson,
                        format!("arguments of tool {:?} are not valid JSON: {e}", spec.name),
                    )
                })?;
                // The guest gets the text: the value checked must be the
                // one it spells. A key given twice spells two (readers keep
                // either), so the guest gets the value checked instead.
                let text = if repeated {
                    written_again(spec, &value, max_bytes)?
                } else {
                    text
                };
                if crate::policy::reserved::has_reserved_key(&text) {
                    return Err(CallError::new(
                        ErrorKind::InvalidJson,
                        format!(
                            "arguments of tool {:?} have a key beginning with {:?}, which the \
                             JSON reader gives a meaning of its own (it would read the key's \
                             string as JSON); rename the key",
                            spec.name,
                            crate::policy::reserved::RESERVED
                        ),
                    ));
                }
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

/// The arguments checked, written as the guest gets them when their text
/// is not what was checked, within the size limit too: written out, a
/// number (`1e15` is `1000000000000000.0`) can be longer than it was
/// given.
pub(super) fn written_again(
    spec: &ToolSpec,
    arguments: &Value,
    max: usize,
) -> Result<String, CallError> {
    let text = arguments.to_string();
    if text.len() > max {
        return Err(CallError::new(
            ErrorKind::InvalidArguments,
            format!(
                "arguments of tool {:?} are {} bytes as the host writes them for the guest \
                 (numbers written out), more than the limit of {max} bytes; send them shorter",
                spec.name,
                text.len()
            ),
        ));
    }
    Ok(text)
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

pub(super) fn schema_error(spec: &ToolSpec, violations: &[String]) -> CallError {
    CallError::new(
        ErrorKind::InvalidArguments,
        format!(
            "arguments of tool {:?} do not match its schema {}",
            spec.name,
            listed_problems(violations)
        ),
    )
}

/// `(2 problems): a; b`.
fn listed_problems(violations: &[String]) -> String {
    let count = violations.len();
    format!(
        "({count} problem{}): {}",
        if count == 1 { "" } else { "s" },
        violations.join("; ")
    )
}

/// A tool's output as JSON: valid JSON passes through; text that does not
/// start like JSON becomes a JSON string; text that starts like JSON but does
/// not parse is an error (a broken result, not prose). The result of a tool
/// with an output schema must match it.
pub(super) fn normalize_output(
    spec: &ToolSpec,
    output: String,
) -> Result<Box<RawValue>, CallError> {
    if spec.output_schema.is_some() {
        return structured_output(spec, output);
    }
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

/// The output of a tool with an output schema: JSON that matches it, or an
/// `invalid_output` error listing every violation.
fn structured_output(spec: &ToolSpec, output: String) -> Result<Box<RawValue>, CallError> {
    let mismatch = |problems: String| {
        CallError::new(
            ErrorKind::InvalidOutput,
            format!(
                "tool {:?} (plugin {:?}) returned a result that does not match its output \
                 schema {problems}",
                spec.name, &*spec.plugin
            ),
        )
    };
    let value = serde_json::from_str::<Value>(&output)
        .map_err(|e| mismatch(format!("(it is not JSON: {e})")))?;
    if let Err(violations) = spec.validate_output(&value) {
        return Err(mismatch(listed_problems(&violations)));
    }
    Ok(RawValue::from_string(output).expect("the text parsed as JSON above"))
}
