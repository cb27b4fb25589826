//! `toolhost call` with a content result: text blocks printed as they are,
//! images, audio and binary resources as their type and size, or written
//! to files with `--save-content DIR` (never over an existing file).

use std::io::Write as _;
use std::path::Path;

use anyhow::{Context as _, Result};
use serde_json::{Value, json};

use crate::contract::Content;
use crate::contract::content::{Block, Resource};
use crate::serve::content::file_name;

/// What `toolhost call` prints for `content`; with `save`, the binary
/// blocks are written there and each names its file.
pub(super) fn printed(content: &Content, save: Option<&Path>) -> Result<Value> {
    let mut blocks = Vec::with_capacity(content.blocks().len());
    for (index, block) in content.blocks().iter().enumerate() {
        let mut shown = match block {
            Block::Text(text) => json!({ "type": "text", "text": text }),
            Block::ResourceLink(_) => block.to_mcp(),
            Block::Resource(Resource {
                uri,
                mime_type,
                contents: Ok(text),
            }) => json!({ "type": "resource", "uri": uri, "mimeType": mime_type, "text": text }),
            other => {
                let summary = other.summary();
                json!({ "type": summary.kind, "mimeType": summary.mime_type, "bytes": summary.bytes })
            }
        };
        if let (Some(dir), Some((data, uri, mime_type))) = (save, binary(block)) {
            let path = dir.join(file_name(index, uri, mime_type));
            write_new(&path, data)?;
            shown["file"] = json!(path.display().to_string());
        }
        blocks.push(shown);
    }
    let mut printed = json!({ "content": blocks });
    if let Some(structured) = content.structured() {
        printed["structuredContent"] = structured.clone();
    }
    Ok(printed)
}

/// The data of a binary block, with its URI (if any) and MIME type.
fn binary(block: &Block) -> Option<(&[u8], Option<&str>, &str)> {
    match block {
        Block::Image(media) | Block::Audio(media) => Some((&media.data, None, &media.mime_type)),
        Block::Resource(Resource {
            uri,
            mime_type,
            contents: Err(blob),
        }) => Some((blob, Some(uri), mime_type)),
        _ => None,
    }
}

/// Writes `data` to a new file at `path`.
fn write_new(path: &Path, data: &[u8]) -> Result<()> {
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(path)
        .with_context(|| {
            format!(
                "writing a content block to {} (it must not exist yet; choose an empty \
                 directory for --save-content)",
                path.display()
            )
        })?;
    file.write_all(data)
        .with_context(|| format!("writing {}", path.display()))
}
