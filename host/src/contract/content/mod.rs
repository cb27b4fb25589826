//! A tool's result beyond JSON text (contract 0.2.2): content blocks (text,
//! images, audio, resource links, embedded resources) and structured
//! content, checked against the MIME types the host allows, sized as clients
//! receive them (binary data as base64), and written in MCP's shape.

use std::sync::Arc;

use base64::Engine as _;
use serde::Serialize;
use serde_json::value::RawValue;
use serde_json::{Map, Value, json};

use super::bindings::toolhost::plugin::types as wit;

/// The most blocks one result may have.
pub const MAX_BLOCKS: usize = 1024;

/// What each block adds to a result's size besides its data: about what its
/// JSON envelope (`{"type":"image","mimeType":"","data":""}`) takes.
const BLOCK_OVERHEAD: usize = 48;

/// The longest URI of a link or resource, in bytes.
const MAX_URI: usize = 4096;

/// What a successful call returned.
#[derive(Debug, Clone)]
pub enum CallOutput {
    /// JSON, the result of a tool that returned JSON text.
    Json(Box<RawValue>),
    /// Content blocks.
    Content(Arc<Content>),
}

impl CallOutput {
    /// The result as JSON: a JSON result as it is; content in MCP's shape,
    /// `{"content": [...], "structuredContent": {...}}`, binary data as
    /// base64.
    pub fn to_json(&self) -> Box<RawValue> {
        match self {
            Self::Json(raw) => raw.clone(),
            Self::Content(content) => {
                let text = content.to_mcp().to_string();
                RawValue::from_string(text).expect("a serialized Value is valid JSON")
            }
        }
    }

    /// The content blocks, when the tool returned some.
    pub fn content(&self) -> Option<&Content> {
        match self {
            Self::Json(_) => None,
            Self::Content(content) => Some(content),
        }
    }
}

/// Content blocks and structured content, checked.
#[derive(Debug, Clone, PartialEq)]
pub struct Content {
    blocks: Vec<Block>,
    structured: Option<Value>,
}

/// One block of a result.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum Block {
    /// Text.
    Text(String),
    /// An image.
    Image(Media),
    /// An audio clip.
    Audio(Media),
    /// A link to a resource.
    ResourceLink(ResourceLink),
    /// A resource's contents.
    Resource(Resource),
}

/// Bytes with their MIME type (its essence, lower case).
#[derive(Debug, Clone, PartialEq)]
pub struct Media {
    /// The bytes.
    pub data: Vec<u8>,
    /// `image/png`, `audio/wav`, ...
    pub mime_type: String,
}

/// A link to a resource.
#[derive(Debug, Clone, PartialEq)]
pub struct ResourceLink {
    /// The resource's URI.
    pub uri: String,
    /// Its name.
    pub name: String,
    /// A human-readable title.
    pub title: Option<String>,
    /// What it is.
    pub description: Option<String>,
    /// Its MIME type.
    pub mime_type: Option<String>,
    /// Its size in bytes.
    pub size: Option<u64>,
}

/// A resource embedded in the result.
#[derive(Debug, Clone, PartialEq)]
pub struct Resource {
    /// The resource's URI.
    pub uri: String,
    /// Its MIME type (`text/plain` or `application/octet-stream` when the
    /// tool gave none).
    pub mime_type: String,
    /// Text, or bytes.
    pub contents: Result<String, Vec<u8>>,
}

/// What the audit records of one block: its type and size, never content.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct BlockSummary {
    /// `text`, `image`, `audio`, `resource_link` or `resource`.
    #[serde(rename = "type")]
    pub kind: &'static str,
    /// Its MIME type, if it has one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub mime_type: Option<String>,
    /// The size of its text or data, in bytes (before base64).
    pub bytes: usize,
}

/// The MIME types a result's images, audio and resources may have
/// (`results.mime_types`). Exact types only: no wildcards, so that a type
/// clients render as a document (`image/svg+xml`, `text/html`) is allowed
/// only by name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MimeTypes(Arc<[String]>);

/// The MIME types allowed when the configuration names none. Left out:
/// `image/svg+xml` and `text/html` (and every other type a client or a
/// console would render as a document, with scripts).
pub const DEFAULT_MIME_TYPES: &[&str] = &[
    "image/png",
    "image/jpeg",
    "image/gif",
    "image/webp",
    "audio/wav",
    "audio/mpeg",
    "audio/ogg",
    "audio/webm",
    "audio/flac",
    "text/plain",
    "text/markdown",
    "text/csv",
    "application/json",
    "application/pdf",
    "application/octet-stream",
];

impl Default for MimeTypes {
    fn default() -> Self {
        Self(DEFAULT_MIME_TYPES.iter().map(|t| t.to_string()).collect())
    }
}

impl MimeTypes {
    /// The allowlist of `types`, each `type/subtype` in lower case; every
    /// problem found, one per entry.
    pub fn new(types: &[String]) -> Result<Self, Vec<String>> {
        let mut problems = Vec::new();
        for (index, written) in types.iter().enumerate() {
            match essence(written) {
                Some(essence) if &essence == written => {}
                _ => problems.push(format!(
                    "[{index}]: {written:?} is not a MIME type; write `type/subtype` in lower \
                     case without parameters or wildcards, like \"image/png\""
                )),
            }
            if types[..index].contains(written) {
                problems.push(format!("[{index}]: {written:?} is listed twice"));
            }
        }
        if problems.is_empty() {
            Ok(Self(types.iter().cloned().collect()))
        } else {
            Err(problems)
        }
    }

    /// The allowed types.
    pub fn types(&self) -> &[String] {
        &self.0
    }

    /// The essence of `mime_type` (`Image/PNG; x=y` → `image/png`) when it
    /// is allowed; otherwise why not.
    pub fn check(&self, mime_type: &str) -> Result<String, String> {
        let Some(essence) = essence(mime_type) else {
            return Err(format!("{mime_type:?} is not a MIME type (`type/subtype`)"));
        };
        if self.0.contains(&essence) {
            Ok(essence)
        } else {
            Err(format!(
                "MIME type {essence:?} is not allowed; the host's results.mime_types allows {}",
                self.0.join(", ")
            ))
        }
    }
}

/// `type/subtype` of a MIME type in lower case, without parameters; `None`
/// when it is not one.
fn essence(mime_type: &str) -> Option<String> {
    let essence = mime_type.split(';').next()?.trim().to_ascii_lowercase();
    let (kind, subtype) = essence.split_once('/')?;
    let token = |s: &str| {
        !s.is_empty()
            && s.len() <= 127
            && s.bytes()
                .all(|b| b.is_ascii_alphanumeric() || b"!#$&^_.+-".contains(&b))
    };
    (token(kind) && token(subtype)).then_some(essence)
}

/// Checks a link's or resource's URI: a scheme, no spaces or control
/// characters, not one that carries code or data itself (`javascript:`,
/// `vbscript:`, `data:`).
fn check_uri(uri: &str) -> Result<(), String> {
    if uri.len() > MAX_URI {
        return Err(format!(
            "a URI of {} bytes is longer than the {MAX_URI} allowed",
            uri.len()
        ));
    }
    if uri.chars().any(|c| c.is_whitespace() || c.is_control()) {
        return Err(format!("URI {uri:?} contains spaces or control characters"));
    }
    let scheme = uri.split_once(':').map(|(scheme, _)| scheme).unwrap_or("");
    let valid = scheme.starts_with(|c: char| c.is_ascii_alphabetic())
        && scheme
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "+.-".contains(c));
    if !valid {
        return Err(format!(
            "URI {uri:?} has no scheme; write an absolute URI like \"https://...\" or \"file:///...\""
        ));
    }
    if ["javascript", "vbscript", "data"].contains(&scheme.to_ascii_lowercase().as_str()) {
        return Err(format!(
            "URI scheme {scheme:?} is not allowed in results: it carries code or data, not a \
             resource's name"
        ));
    }
    Ok(())
}

/// The length of `n` bytes in base64.
pub(crate) fn base64_len(n: usize) -> usize {
    n.div_ceil(3) * 4
}

/// The length of `text` as a JSON string's contents, as clients receive it:
/// `"`, `\` and the controls with a short escape take 2 bytes, the other C0
/// controls 6 (`\u0000`), everything else its UTF-8 length.
pub(crate) fn json_len(text: &str) -> usize {
    text.bytes()
        .map(|b| match b {
            b'"' | b'\\' | b'\n' | b'\r' | b'\t' | 0x08 | 0x0c => 2,
            0..0x20 => 6,
            _ => 1,
        })
        .sum()
}

/// The size of a guest's content result as clients receive it: each block's
/// text and strings as JSON-escaped, binary data as base64, a fixed overhead
/// per block, and the structured content's JSON text.
pub(crate) fn encoded_size(result: &wit::ToolResult) -> usize {
    let opt = |s: &Option<String>| s.as_deref().map_or(0, json_len);
    let blocks: usize = result
        .content
        .iter()
        .map(|block| {
            BLOCK_OVERHEAD
                + match block {
                    wit::ContentBlock::Text(text) => json_len(text),
                    wit::ContentBlock::Image(media) | wit::ContentBlock::Audio(media) => {
                        base64_len(media.data.len()) + json_len(&media.mime_type)
                    }
                    wit::ContentBlock::ResourceLink(link) => {
                        json_len(&link.uri)
                            + json_len(&link.name)
                            + opt(&link.title)
                            + opt(&link.description)
                            + opt(&link.mime_type)
                            + 20
                    }
                    wit::ContentBlock::Resource(resource) => {
                        json_len(&resource.uri)
                            + opt(&resource.mime_type)
                            + match &resource.contents {
                                wit::ResourceContents::Text(text) => json_len(text),
                                wit::ResourceContents::Blob(blob) => base64_len(blob.len()),
                            }
                    }
                }
        })
        .sum();
    blocks + result.structured.as_ref().map_or(0, String::len)
}

impl Content {
    /// Checks a guest's content result: at most [`MAX_BLOCKS`] blocks, MIME
    /// types from `allowed`, URIs with a scheme, structured content a JSON
    /// object. Returns why not, naming the block.
    pub(crate) fn from_guest(result: wit::ToolResult, allowed: &MimeTypes) -> Result<Self, String> {
        if result.content.len() > MAX_BLOCKS {
            return Err(format!(
                "returned {} content blocks, more than the {MAX_BLOCKS} a result may have",
                result.content.len()
            ));
        }
        let mut blocks = Vec::with_capacity(result.content.len());
        for (index, block) in result.content.into_iter().enumerate() {
            let at = |problem: String| format!("content block {index}: {problem}");
            blocks.push(Block::from_guest(block, allowed).map_err(at)?);
        }
        let structured = match result.structured {
            None => None,
            Some(text) => match serde_json::from_str::<Value>(&text) {
                Ok(value) if value.is_object() => Some(value),
                Ok(_) => return Err("structured content must be a JSON object".into()),
                Err(e) => return Err(format!("structured content is not valid JSON: {e}")),
            },
        };
        Ok(Self { blocks, structured })
    }

    /// The blocks, in order.
    pub fn blocks(&self) -> &[Block] {
        &self.blocks
    }

    /// The structured content, if the tool gave one.
    pub fn structured(&self) -> Option<&Value> {
        self.structured.as_ref()
    }

    /// The result in MCP's `CallToolResult` shape (without `isError`).
    pub fn to_mcp(&self) -> Value {
        let mut result = Map::new();
        result.insert(
            "content".into(),
            Value::Array(self.blocks.iter().map(Block::to_mcp).collect()),
        );
        if let Some(structured) = &self.structured {
            result.insert("structuredContent".into(), structured.clone());
        }
        Value::Object(result)
    }

    /// Each block's type and size, for the audit.
    pub fn summary(&self) -> Vec<BlockSummary> {
        self.blocks.iter().map(Block::summary).collect()
    }
}

impl Block {
    fn from_guest(block: wit::ContentBlock, allowed: &MimeTypes) -> Result<Self, String> {
        let media = |media: wit::Media| -> Result<Media, String> {
            Ok(Media {
                mime_type: allowed.check(&media.mime_type)?,
                data: media.data,
            })
        };
        Ok(match block {
            wit::ContentBlock::Text(text) => Self::Text(text),
            wit::ContentBlock::Image(image) => Self::Image(media(image)?),
            wit::ContentBlock::Audio(audio) => Self::Audio(media(audio)?),
            wit::ContentBlock::ResourceLink(link) => {
                check_uri(&link.uri)?;
                if link.name.trim().is_empty() {
                    return Err("a resource link needs a name".into());
                }
                Self::ResourceLink(ResourceLink {
                    mime_type: link.mime_type.map(|t| allowed.check(&t)).transpose()?,
                    uri: link.uri,
                    name: link.name,
                    title: link.title,
                    description: link.description,
                    size: link.size,
                })
            }
            wit::ContentBlock::Resource(resource) => {
                check_uri(&resource.uri)?;
                let (default, contents) = match resource.contents {
                    wit::ResourceContents::Text(text) => ("text/plain", Ok(text)),
                    wit::ResourceContents::Blob(blob) => ("application/octet-stream", Err(blob)),
                };
                let mime_type = resource.mime_type.as_deref().unwrap_or(default);
                Self::Resource(Resource {
                    mime_type: allowed.check(mime_type)?,
                    uri: resource.uri,
                    contents,
                })
            }
        })
    }

    /// The block in MCP's `ContentBlock` shape.
    pub fn to_mcp(&self) -> Value {
        let b64 = |data: &[u8]| base64::engine::general_purpose::STANDARD.encode(data);
        match self {
            Self::Text(text) => json!({ "type": "text", "text": text }),
            Self::Image(media) => {
                json!({ "type": "image", "data": b64(&media.data), "mimeType": media.mime_type })
            }
            Self::Audio(media) => {
                json!({ "type": "audio", "data": b64(&media.data), "mimeType": media.mime_type })
            }
            Self::ResourceLink(link) => {
                let mut block =
                    json!({ "type": "resource_link", "uri": link.uri, "name": link.name });
                let fields = [
                    ("title", link.title.clone().map(Value::from)),
                    ("description", link.description.clone().map(Value::from)),
                    ("mimeType", link.mime_type.clone().map(Value::from)),
                    ("size", link.size.map(Value::from)),
                ];
                for (key, value) in fields {
                    if let Some(value) = value {
                        block[key] = value;
                    }
                }
                block
            }
            Self::Resource(resource) => {
                let mut inner = json!({ "uri": resource.uri, "mimeType": resource.mime_type });
                match &resource.contents {
                    Ok(text) => inner["text"] = json!(text),
                    Err(blob) => inner["blob"] = json!(b64(blob)),
                }
                json!({ "type": "resource", "resource": inner })
            }
        }
    }

    /// Its type and size, never its content.
    pub fn summary(&self) -> BlockSummary {
        let (kind, mime_type, bytes) = match self {
            Self::Text(text) => ("text", None, text.len()),
            Self::Image(media) => ("image", Some(&media.mime_type), media.data.len()),
            Self::Audio(media) => ("audio", Some(&media.mime_type), media.data.len()),
            Self::ResourceLink(link) => ("resource_link", link.mime_type.as_ref(), 0),
            Self::Resource(resource) => (
                "resource",
                Some(&resource.mime_type),
                match &resource.contents {
                    Ok(text) => text.len(),
                    Err(blob) => blob.len(),
                },
            ),
        };
        BlockSummary {
            kind,
            mime_type: mime_type.cloned(),
            bytes,
        }
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    proptest! {
        /// Text counts exactly as serde_json sends it (less the quotes).
        #[test]
        fn json_len_is_the_length_serde_json_sends(text in "[\\x00-\\x7f\\u{80}-\\u{10ffff}]{0,64}") {
            let sent = serde_json::to_string(&text).unwrap().len() - 2;
            prop_assert_eq!(super::json_len(&text), sent);
        }
    }
}
