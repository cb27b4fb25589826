//! A call's output in each API's shape: MCP content blocks (with
//! `structuredContent`), a Chat Completions tool message's `content` (text
//! parts; images, audio and binary resources described, since tool messages
//! carry only text), and a Responses `function_call_output`'s `output`
//! (images as `input_image`, audio and binary resources as `input_file`).

use base64::Engine as _;
use rmcp::model::{CallToolResult, ContentBlock};
use serde_json::{Value, json};

use crate::contract::content::{Block, Media, Resource, ResourceLink};
use crate::contract::{CallOutput, Content};

/// The shape of a `/v1/tool_calls` answer, chosen by the batch's `format`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Format {
    /// Chat Completions (`"chat"`, the default): each result a `role: "tool"`
    /// message.
    #[default]
    Chat,
    /// Responses (`"responses"`): each result a `function_call_output` item.
    Responses,
}

impl Format {
    /// The format named `name`, or why there is none.
    pub fn parse(name: &str) -> Result<Self, String> {
        match name {
            "chat" => Ok(Self::Chat),
            "responses" => Ok(Self::Responses),
            other => Err(format!(
                "unknown format {other:?}; use \"chat\" (Chat Completions tool messages, the \
                 default) or \"responses\" (Responses function_call_output items)"
            )),
        }
    }
}

/// The MCP answer to a successful call. A JSON result is one text block,
/// and also `structuredContent` when `structured` (the tool declares an
/// output schema) and it is an object.
pub(crate) fn mcp_result(output: &CallOutput, structured: bool) -> CallToolResult {
    match output {
        CallOutput::Json(raw) => {
            let mut answer = CallToolResult::success(vec![ContentBlock::text(raw.get())]);
            if structured {
                answer.structured_content = serde_json::from_str(raw.get())
                    .ok()
                    .filter(Value::is_object);
            }
            answer
        }
        CallOutput::Content(content) => {
            let blocks = content
                .blocks()
                .iter()
                .map(|block| {
                    serde_json::from_value(block.to_mcp()).unwrap_or_else(|e| {
                        ContentBlock::text(format!("internal: a content block did not map: {e}"))
                    })
                })
                .collect();
            let mut answer = CallToolResult::success(blocks);
            answer.structured_content = content.structured().cloned();
            answer
        }
    }
}

/// The `content` of a Chat Completions tool message: a JSON result as its
/// text; content as text parts.
pub fn chat_content(output: &CallOutput) -> Value {
    parts(
        output,
        "text",
        |_, block| json!({ "type": "text", "text": described(block) }),
    )
}

/// The `output` of a Responses `function_call_output`: a JSON result as its
/// text; content as input parts.
pub fn responses_output(output: &CallOutput) -> Value {
    parts(output, "input_text", response_part)
}

/// A JSON result as its text; content as the parts `part` makes of each
/// block (by index), with the structured content as a `text_kind` part when
/// no block is text.
fn parts(output: &CallOutput, text_kind: &str, part: impl Fn(usize, &Block) -> Value) -> Value {
    match output {
        CallOutput::Json(raw) => Value::String(raw.get().to_string()),
        CallOutput::Content(content) => {
            let mut parts: Vec<Value> = content
                .blocks()
                .iter()
                .enumerate()
                .map(|(index, block)| part(index, block))
                .collect();
            structured_part(content, &mut parts, text_kind);
            Value::Array(parts)
        }
    }
}

/// The structured content as a text part (of `kind`), when no block is text.
fn structured_part(content: &Content, parts: &mut Vec<Value>, kind: &str) {
    let has_text = content.blocks().iter().any(|b| matches!(b, Block::Text(_)));
    if let Some(structured) = content.structured().filter(|_| !has_text) {
        parts.push(json!({ "type": kind, "text": structured.to_string() }));
    }
}

/// A block as text: text as it is, anything else described.
pub(crate) fn described(block: &Block) -> String {
    match block {
        Block::Text(text) => text.clone(),
        Block::Image(media) => media_note("image", media),
        Block::Audio(media) => media_note("audio", media),
        Block::ResourceLink(link) => link_note(link),
        Block::Resource(Resource {
            uri,
            mime_type,
            contents: Ok(text),
        }) => format!("[resource {uri} ({mime_type})]\n{text}"),
        Block::Resource(Resource {
            uri,
            mime_type,
            contents: Err(blob),
        }) => format!(
            "[resource {uri}: {mime_type}, {} bytes; not included: a tool message carries text \
             only]",
            blob.len()
        ),
    }
}

fn media_note(kind: &str, media: &Media) -> String {
    format!(
        "[{kind}: {}, {} bytes; not included: a tool message carries text only]",
        media.mime_type,
        media.data.len()
    )
}

fn link_note(link: &ResourceLink) -> String {
    let mut note = format!("[resource link: {} <{}>", link.name, link.uri);
    if let Some(mime_type) = &link.mime_type {
        note.push_str(&format!(", {mime_type}"));
    }
    if let Some(size) = link.size {
        note.push_str(&format!(", {size} bytes"));
    }
    note.push(']');
    for extra in [&link.title, &link.description].into_iter().flatten() {
        note.push_str(&format!(" {extra}"));
    }
    note
}

/// A block as a Responses input part.
fn response_part(index: usize, block: &Block) -> Value {
    let data_uri = |mime_type: &str, data: &[u8]| {
        let encoded = base64::engine::general_purpose::STANDARD.encode(data);
        format!("data:{mime_type};base64,{encoded}")
    };
    match block {
        Block::Image(media) => {
            json!({ "type": "input_image", "image_url": data_uri(&media.mime_type, &media.data) })
        }
        Block::Audio(media) => json!({
            "type": "input_file",
            "filename": file_name(index, &media.mime_type),
            "file_data": data_uri(&media.mime_type, &media.data),
        }),
        Block::Resource(Resource {
            mime_type,
            contents: Err(blob),
            ..
        }) => json!({
            "type": "input_file",
            "filename": file_name(index, mime_type),
            "file_data": data_uri(mime_type, blob),
        }),
        other => json!({ "type": "input_text", "text": described(other) }),
    }
}

/// A file name for block `index`: `block-N` with the usual extension of its
/// (checked) MIME type. Never taken from the plugin (a URI's last segment
/// could name `toolhost.toml` or `index.html`).
pub(crate) fn file_name(index: usize, mime_type: &str) -> String {
    format!("block-{index}.{}", extension(mime_type))
}

/// The usual file extension of a MIME type.
pub(crate) fn extension(mime_type: &str) -> &'static str {
    match mime_type {
        "image/png" => "png",
        "image/jpeg" => "jpg",
        "image/gif" => "gif",
        "image/webp" => "webp",
        "audio/wav" => "wav",
        "audio/mpeg" => "mp3",
        "audio/ogg" => "ogg",
        "audio/webm" => "webm",
        "audio/flac" => "flac",
        "text/plain" => "txt",
        "text/markdown" => "md",
        "text/csv" => "csv",
        "application/json" => "json",
        "application/pdf" => "pdf",
        _ => "bin",
    }
}
