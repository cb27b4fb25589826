//! `read_file`: a window of lines of a text file, streamed so that a large
//! file is read only as far as needed, or raw bytes as base64.

use std::io::{BufRead, BufReader, Read, Seek, SeekFrom};

use base64::Engine;
use base64::engine::general_purpose::STANDARD as BASE64;

use toolhost_sdk::prelude::*;

use crate::fsio::{io_error, looks_binary, open_file};

/// Lines returned when `limit` is not given.
const DEFAULT_LINES: usize = 2000;
/// Most lines one call returns.
const MAX_LINES: usize = 20_000;
/// Content bytes returned when `max_bytes` is not given.
const DEFAULT_BYTES: usize = 256 * 1024;
/// Most content bytes one call returns.
const MAX_BYTES: usize = 512 * 1024;
/// Read buffer: large reads make skipping to a deep offset fast.
const BUFFER: usize = 256 * 1024;

/// How to return the content.
#[derive(Deserialize, JsonSchema, Default, PartialEq, Eq, Clone, Copy)]
#[serde(rename_all = "snake_case")]
enum Encoding {
    /// Text lines (default). Binary files are refused.
    #[default]
    Text,
    /// Raw bytes, base64-encoded; for binary files.
    Base64,
}

/// Arguments of `read_file`.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct ReadFileArgs {
    /// The file: relative to the workspace, or absolute inside a directory the
    /// caller is granted.
    path: String,
    /// The first line to return, counting from 1 (default 1). To continue a
    /// long file, pass the `next_offset` of the previous result. With
    /// `encoding: "base64"` it is a byte offset counting from 0.
    #[serde(default)]
    offset: Option<u64>,
    /// The most lines to return (default 2000, at most 20000). Ignored with
    /// `encoding: "base64"`.
    #[serde(default)]
    limit: Option<usize>,
    /// The most bytes of content to return (default 262144, at most 524288).
    /// Reading stops before the line that would pass it.
    #[serde(default)]
    max_bytes: Option<usize>,
    /// `text` (default) for lines of text, or `base64` for the raw bytes of a
    /// binary file.
    #[serde(default)]
    encoding: Encoding,
    /// Prefix each line with its number and a tab, like `cat -n` (default
    /// false). Leave it off when you will copy text into edit_file.
    #[serde(default)]
    line_numbers: bool,
}

/// Read a text file, or a window of its lines. Returns `content` (lines
/// `start_line` to `end_line`, with their line endings), the file's `size` in
/// bytes, and `eof`; when the file goes on, `next_offset` is the `offset` that
/// continues where this result stopped. By default up to 2000 lines and
/// 256 KiB are returned; only the lines asked for are read, so a window deep in
/// a large file is cheap. Binary files are refused unless `encoding` is
/// `base64`. Paths are relative to the workspace; paths the caller's profile
/// does not grant do not exist.
#[tool(toolset = "file", permissions = ["file:read"], read_only, emoji = "📄")]
pub(crate) fn read_file(args: ReadFileArgs) -> Result<Value, ToolError> {
    let max_bytes = args.max_bytes.unwrap_or(DEFAULT_BYTES);
    if !(1..=MAX_BYTES).contains(&max_bytes) {
        return Err(ToolError::invalid_arguments(format!(
            "max_bytes must be between 1 and {MAX_BYTES}"
        )));
    }
    let (file, size) = open_file(&args.path)?;
    match args.encoding {
        Encoding::Base64 => read_bytes(file, &args.path, size, args.offset.unwrap_or(0), max_bytes),
        Encoding::Text => {
            let limit = args.limit.unwrap_or(DEFAULT_LINES);
            if !(1..=MAX_LINES).contains(&limit) {
                return Err(ToolError::invalid_arguments(format!(
                    "limit must be between 1 and {MAX_LINES} lines"
                )));
            }
            let offset = args.offset.unwrap_or(1);
            if offset == 0 {
                return Err(ToolError::invalid_arguments(
                    "offset counts lines from 1; pass 1 (or leave it out) for the first line",
                ));
            }
            let window = Window {
                offset,
                limit,
                max_bytes,
                line_numbers: args.line_numbers,
            };
            read_lines(file, &args.path, size, &window)
        }
    }
}

/// Which lines to return.
struct Window {
    offset: u64,
    limit: usize,
    max_bytes: usize,
    line_numbers: bool,
}

fn read_lines(
    file: std::fs::File,
    path: &str,
    size: u64,
    window: &Window,
) -> Result<Value, ToolError> {
    let error = |e: std::io::Error| io_error("reading", path, &e);
    let mut reader = BufReader::with_capacity(BUFFER, file);
    if looks_binary(reader.fill_buf().map_err(error)?) {
        return Err(ToolError::invalid_arguments(format!(
            "{path} looks like a binary file ({size} bytes), not text; pass encoding \
             \"base64\" to read its raw bytes"
        )));
    }

    let skipped = skip_lines(&mut reader, window.offset - 1).map_err(error)?;
    if skipped < window.offset - 1 {
        return Err(ToolError::invalid_arguments(format!(
            "offset {} is past the end of {path}, which has {skipped} lines",
            window.offset
        )));
    }

    let mut content = String::new();
    let mut line = Vec::new();
    let mut returned = 0usize;
    let mut cut_line = false;
    let mut stopped_by_bytes = false;
    while returned < window.limit {
        let budget = window.max_bytes.saturating_sub(content.len());
        line.clear();
        let complete = match read_line_capped(&mut reader, &mut line, budget).map_err(error)? {
            None => break,
            Some(complete) => complete,
        };
        if !complete {
            if returned > 0 {
                // The line does not fit: the next call starts with it.
                stopped_by_bytes = true;
                break;
            }
            // A single line longer than the whole budget: return its start.
            cut_line = true;
        }
        let number = window.offset + returned as u64;
        if window.line_numbers {
            content.push_str(&format!("{number:>6}\t"));
        }
        content.push_str(&String::from_utf8_lossy(&line));
        returned += 1;
        if cut_line {
            skip_lines(&mut reader, 1).map_err(error)?;
            stopped_by_bytes = true;
            break;
        }
    }
    if returned == 0 && window.offset > 1 {
        return Err(ToolError::invalid_arguments(format!(
            "offset {} is past the end of {path}, which has {skipped} lines",
            window.offset
        )));
    }
    // A line that did not fit was partly read: the file goes on with it.
    let line_pending = stopped_by_bytes && !cut_line;
    let eof = !line_pending && reader.fill_buf().map_err(error)?.is_empty();
    let next_offset = window.offset + returned as u64;
    let end_line = next_offset - 1;
    let mut result = json!({
        "path": path,
        "size": size,
        "start_line": window.offset,
        "end_line": end_line,
        "content": content,
        "eof": eof,
    });
    if !eof {
        result["next_offset"] = json!(next_offset);
        result["note"] = json!(if stopped_by_bytes && cut_line {
            format!(
                "line {} is longer than max_bytes ({}) and was cut; the next call starts at \
                 line {next_offset}",
                window.offset, window.max_bytes
            )
        } else if stopped_by_bytes {
            format!(
                "stopped at {} bytes (max_bytes); call again with offset {next_offset} to \
                 continue",
                window.max_bytes
            )
        } else {
            format!(
                "stopped at the limit of {} lines; call again with offset {next_offset} to \
                 continue",
                window.limit
            )
        });
    } else if cut_line {
        result["note"] = json!(format!(
            "line {} is longer than max_bytes ({}) and was cut",
            window.offset, window.max_bytes
        ));
    }
    Ok(result)
}

/// Skips up to `count` lines without keeping them; returns how many it
/// skipped (fewer at the end of the file; a last line without a newline
/// counts).
fn skip_lines(reader: &mut impl BufRead, count: u64) -> std::io::Result<u64> {
    let mut skipped = 0;
    let mut in_line = false;
    while skipped < count {
        let buffer = reader.fill_buf()?;
        if buffer.is_empty() {
            return Ok(skipped + u64::from(in_line));
        }
        let mut consumed = buffer.len();
        in_line = true;
        for newline in memchr::memchr_iter(b'\n', buffer) {
            skipped += 1;
            if skipped == count {
                consumed = newline + 1;
                break;
            }
        }
        if consumed == buffer.len() && buffer.last() == Some(&b'\n') {
            in_line = false;
        }
        reader.consume(consumed);
    }
    Ok(skipped)
}

/// Appends the next line (with its newline) to `line`, keeping at most
/// `budget` bytes. `None` at the end of the file; `Some(false)` when the line
/// was longer than the budget (its rest is left unread).
fn read_line_capped(
    reader: &mut impl BufRead,
    line: &mut Vec<u8>,
    budget: usize,
) -> std::io::Result<Option<bool>> {
    let mut read_any = false;
    loop {
        let buffer = reader.fill_buf()?;
        if buffer.is_empty() {
            return Ok(read_any.then_some(true));
        }
        read_any = true;
        let room = budget - line.len();
        let (take, done) = match memchr::memchr(b'\n', buffer) {
            Some(newline) if newline < room => (newline + 1, true),
            _ if buffer.len() > room => {
                let take = room;
                line.extend_from_slice(&buffer[..take]);
                reader.consume(take);
                trim_partial_char(line);
                return Ok(Some(false));
            }
            _ => (buffer.len(), false),
        };
        line.extend_from_slice(&buffer[..take]);
        reader.consume(take);
        if done {
            return Ok(Some(true));
        }
    }
}

/// Drops an incomplete UTF-8 sequence at the end of a cut line.
fn trim_partial_char(line: &mut Vec<u8>) {
    if let Err(e) = std::str::from_utf8(line)
        && e.error_len().is_none()
    {
        line.truncate(e.valid_up_to());
    }
}

fn read_bytes(
    mut file: std::fs::File,
    path: &str,
    size: u64,
    offset: u64,
    max_bytes: usize,
) -> Result<Value, ToolError> {
    if offset > size {
        return Err(ToolError::invalid_arguments(format!(
            "offset {offset} is past the end of {path}, which has {size} bytes"
        )));
    }
    let error = |e: std::io::Error| io_error("reading", path, &e);
    file.seek(SeekFrom::Start(offset)).map_err(error)?;
    let mut bytes = Vec::with_capacity(max_bytes.min(1 << 20));
    file.take(max_bytes as u64)
        .read_to_end(&mut bytes)
        .map_err(error)?;
    let end = offset + bytes.len() as u64;
    let mut result = json!({
        "path": path,
        "size": size,
        "offset": offset,
        "bytes": bytes.len(),
        "base64": BASE64.encode(&bytes),
        "eof": end >= size,
    });
    if end < size {
        result["next_offset"] = json!(end);
    }
    Ok(result)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn skipping_counts_lines() {
        let mut r = BufReader::with_capacity(4, &b"a\nbb\nccc\nd"[..]);
        assert_eq!(skip_lines(&mut r, 2).unwrap(), 2);
        let mut line = Vec::new();
        assert_eq!(
            read_line_capped(&mut r, &mut line, 100).unwrap(),
            Some(true)
        );
        assert_eq!(line, b"ccc\n");
        let mut r = BufReader::with_capacity(4, &b"a\nbb\nccc\nd"[..]);
        assert_eq!(skip_lines(&mut r, 10).unwrap(), 4);
        let mut r = BufReader::with_capacity(4, &b"a\nbb\n"[..]);
        assert_eq!(skip_lines(&mut r, 10).unwrap(), 2);
    }

    #[test]
    fn long_lines_are_cut_at_the_budget() {
        let mut r = BufReader::with_capacity(3, &b"abcdefgh\nij"[..]);
        let mut line = Vec::new();
        assert_eq!(read_line_capped(&mut r, &mut line, 5).unwrap(), Some(false));
        assert_eq!(line, b"abcde");
        let mut r = BufReader::with_capacity(3, &b"ab\n"[..]);
        line.clear();
        assert_eq!(read_line_capped(&mut r, &mut line, 3).unwrap(), Some(true));
        assert_eq!(read_line_capped(&mut r, &mut line, 3).unwrap(), None);
    }
}
