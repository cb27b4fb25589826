//! `toolhost call` with a content result: text blocks printed as they are,
//! images, audio and binary resources as their type and size, or written
//! to new files with `--save-content DIR`, named by toolhost (`TOOL-N.EXT`,
//! the extension from the checked MIME type), never by the plugin.

use std::io::{ErrorKind, Write as _};
use std::path::{Path, PathBuf};

use anyhow::{Context as _, Result};
use serde_json::{Value, json};

use crate::contract::Content;
use crate::contract::content::{Block, Resource};
use crate::serve::content::extension;

/// How many names `--save-content` tries for one block before it gives up.
const MAX_TRIES: usize = 10_000;

/// What `toolhost call` prints for `content` of `tool`; with `save`, the
/// binary blocks are written there and each names its file.
pub(super) fn printed(content: &Content, tool: &str, save: Option<&Path>) -> Result<Value> {
    let mut blocks = Vec::with_capacity(content.blocks().len());
    let mut number = 1;
    for block in content.blocks() {
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
        if let (Some(dir), Some((data, mime_type))) = (save, binary(block)) {
            let path = write_new(dir, tool, &mut number, extension(mime_type), data)?;
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

/// The data of a binary block, with its (checked) MIME type.
fn binary(block: &Block) -> Option<(&[u8], &str)> {
    match block {
        Block::Image(media) | Block::Audio(media) => Some((&media.data, &media.mime_type)),
        Block::Resource(Resource {
            mime_type,
            contents: Err(blob),
            ..
        }) => Some((blob, mime_type)),
        _ => None,
    }
}

/// Writes `data` to a new file `DIR/TOOL-N.EXT`, from `N = number` up to
/// the first name that does not exist yet (an existing file or link is
/// never followed or replaced), and returns its path; `number` moves past it.
fn write_new(
    dir: &Path,
    tool: &str,
    number: &mut usize,
    extension: &str,
    data: &[u8],
) -> Result<PathBuf> {
    let stem: String = tool
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' || c == '-' {
                c
            } else {
                '_'
            }
        })
        .collect();
    for _ in 0..MAX_TRIES {
        let path = dir.join(format!("{stem}-{number}.{extension}"));
        *number += 1;
        let mut options = std::fs::OpenOptions::new();
        options.write(true).create_new(true);
        #[cfg(unix)]
        std::os::unix::fs::OpenOptionsExt::custom_flags(&mut options, libc::O_NOFOLLOW);
        let mut file = match options.open(&path) {
            Ok(file) => file,
            Err(e) if e.kind() == ErrorKind::AlreadyExists => continue,
            Err(e) => {
                return Err(e).with_context(|| {
                    format!(
                        "writing a content block to {} (choose a directory that exists and can \
                         be written for --save-content)",
                        path.display()
                    )
                });
            }
        };
        file.write_all(data)
            .with_context(|| format!("writing {}", path.display()))?;
        return Ok(path);
    }
    anyhow::bail!(
        "writing a content block to {}: {MAX_TRIES} names {stem}-N.{extension} are taken there; \
         choose an empty directory for --save-content",
        dir.display()
    )
}
