//! `write_file` and `edit_file`: whole-file writes and exact
//! search-and-replace edits, both written atomically.

use std::fs;

use toolhost_sdk::prelude::*;

use crate::diff::{Diff, unified};
use crate::fsio::{create_parents, io_error, read_utf8, write_atomically};

/// Largest file `edit_file` edits.
const MAX_EDIT_BYTES: u64 = 8 << 20;
/// Most bytes of the diff `edit_file` shows.
const EDIT_DIFF_BYTES: usize = 4096;

/// Arguments of `write_file`.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct WriteFileArgs {
    /// The file to write: relative to the workspace, or absolute inside a
    /// directory the caller may write.
    path: String,
    /// The complete new content of the file.
    content: String,
    /// Create missing parent directories (default true).
    #[serde(default = "yes")]
    create_dirs: bool,
    /// Replace the file if it exists (default true); false refuses to touch
    /// an existing file.
    #[serde(default = "yes")]
    overwrite: bool,
}

fn yes() -> bool {
    true
}

/// Write a text file with the given content, replacing it if it exists.
/// The write is atomic (a temporary file in the same directory renamed over
/// the target), so the file is never left half-written; missing parent
/// directories are created. To change part of an existing file, prefer
/// edit_file. Returns the `bytes` and `lines` written and whether the file was
/// `created`. Only directories the caller's profile grants for writing accept
/// writes.
#[tool(
    toolset = "file",
    permissions = ["file:read", "file:write"],
    destructive,
    emoji = "✏️"
)]
pub(crate) fn write_file(args: WriteFileArgs) -> Result<Value, ToolError> {
    let path = args.path.as_str();
    let existed = match fs::symlink_metadata(path) {
        Ok(metadata) if metadata.is_dir() => {
            return Err(ToolError::invalid_arguments(format!(
                "{path} is a directory; give the path of a file"
            )));
        }
        Ok(_) if !args.overwrite => {
            return Err(ToolError::invalid_arguments(format!(
                "{path} already exists and overwrite is false; pass overwrite: true to \
                 replace it, or use edit_file to change part of it"
            )));
        }
        Ok(_) => true,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => false,
        Err(e) => return Err(io_error("writing", path, &e)),
    };
    if args.create_dirs {
        create_parents(path)?;
    }
    write_atomically(path, args.content.as_bytes())?;
    Ok(json!({
        "path": path,
        "bytes": args.content.len(),
        "lines": line_count(&args.content),
        "created": !existed,
    }))
}

fn line_count(text: &str) -> usize {
    text.lines().count()
}

/// Arguments of `edit_file`.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct EditFileArgs {
    /// The file to edit.
    path: String,
    /// The exact text to replace, including whitespace and indentation. It
    /// must occur exactly once unless `replace_all` is true; include a few
    /// surrounding lines to make it unique.
    old_text: String,
    /// The text to put in its place (may be empty to delete).
    new_text: String,
    /// Replace every occurrence instead of requiring exactly one (default
    /// false).
    #[serde(default)]
    replace_all: bool,
}

/// Edit a text file by exact search and replace: `old_text` must occur
/// exactly once (or pass `replace_all`), matched character for character,
/// whitespace included. Fails without changing anything when the text is not
/// found or is found several times, saying where. The file is rewritten
/// atomically. Returns the number of `replacements`, the `line` of the first
/// one, and a unified `diff` of the change.
#[tool(
    toolset = "file",
    permissions = ["file:read", "file:write"],
    destructive,
    emoji = "🩹"
)]
pub(crate) fn edit_file(args: EditFileArgs) -> Result<Value, ToolError> {
    let path = args.path.as_str();
    if args.old_text.is_empty() {
        return Err(ToolError::invalid_arguments(
            "old_text is empty; give the exact text to replace (use write_file to write a \
             whole file)",
        ));
    }
    if args.old_text == args.new_text {
        return Err(ToolError::invalid_arguments(
            "old_text and new_text are the same; there is nothing to change",
        ));
    }
    let text = read_utf8(path, MAX_EDIT_BYTES)?;
    let starts: Vec<usize> = text.match_indices(&args.old_text).map(|(i, _)| i).collect();
    match starts.len() {
        0 => return Err(not_found(path, &text, &args.old_text)),
        1 => {}
        n if !args.replace_all => {
            let lines: Vec<String> = starts
                .iter()
                .take(10)
                .map(|&i| line_of(&text, i).to_string())
                .collect();
            return Err(ToolError::invalid_arguments(format!(
                "old_text was found {n} times in {path} (at lines {}{}); include more \
                 surrounding lines in old_text so that it matches once, or pass \
                 replace_all: true to replace every occurrence",
                lines.join(", "),
                if n > 10 { ", ..." } else { "" }
            )));
        }
        _ => {}
    }
    let edited = if args.replace_all {
        text.replace(&args.old_text, &args.new_text)
    } else {
        text.replacen(&args.old_text, &args.new_text, 1)
    };
    write_atomically(path, edited.as_bytes())?;
    let Diff {
        text: diff,
        truncated,
        ..
    } = unified(&text, &edited, path, path, 2, EDIT_DIFF_BYTES);
    Ok(json!({
        "path": path,
        "replacements": starts.len(),
        "line": line_of(&text, starts[0]),
        "diff": diff,
        "diff_truncated": truncated,
    }))
}

/// The 1-based line number of a byte offset.
fn line_of(text: &str, offset: usize) -> usize {
    memchr::memchr_iter(b'\n', &text.as_bytes()[..offset]).count() + 1
}

/// The error for `old_text` not found, with a hint where a near match is.
fn not_found(path: &str, text: &str, old_text: &str) -> ToolError {
    let mut hint = String::new();
    let first = old_text.lines().map(str::trim).find(|l| !l.is_empty());
    if let Some(first) = first {
        let lines: Vec<String> = text
            .lines()
            .enumerate()
            .filter(|(_, line)| line.contains(first))
            .take(5)
            .map(|(i, _)| (i + 1).to_string())
            .collect();
        if !lines.is_empty() {
            hint = format!(
                " Its first line (ignoring indentation) appears at line {} of the file: \
                 read_file there and copy the text exactly, whitespace included.",
                lines.join(", ")
            );
        }
    }
    if hint.is_empty() && old_text.contains("\r\n") != text.contains("\r\n") {
        hint = " The file and old_text use different line endings (\\r\\n vs \\n).".into();
    }
    ToolError::invalid_arguments(format!(
        "old_text was not found in {path}; nothing was changed. It must match the file \
         exactly, including whitespace and indentation.{hint}{}",
        if hint.is_empty() {
            " Read the file again with read_file and copy the text to replace."
        } else {
            ""
        }
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_of_offsets() {
        assert_eq!(line_of("a\nb\nc", 0), 1);
        assert_eq!(line_of("a\nb\nc", 2), 2);
        assert_eq!(line_of("a\nb\nc", 4), 3);
    }

    #[test]
    fn not_found_points_at_near_matches() {
        let e = not_found(
            "f",
            "fn main() {\n    let x = 1;\n}\n",
            "  let x = 1;\n  let y",
        );
        assert!(e.to_string().contains("line 2"), "{e}");
        let e = not_found("f", "abc", "xyz");
        assert!(e.to_string().contains("read_file"), "{e}");
    }
}
