//! `file_diff`: a unified diff of two files, or of a file and proposed
//! content.

use std::time::Duration;

use similar::{ChangeTag, TextDiff};
use toolhost_sdk::prelude::*;

use crate::fsio::read_text;

/// Largest file `file_diff` compares.
const MAX_FILE_BYTES: u64 = 4 << 20;
/// Most bytes of diff returned by default and at most.
const DEFAULT_DIFF_BYTES: usize = 64 * 1024;
const MAX_DIFF_BYTES: usize = 512 * 1024;
/// After this long the diff algorithm settles for a coarser diff.
const DIFF_TIME: Duration = Duration::from_secs(2);

/// A unified diff and its counts.
pub(crate) struct Diff {
    pub(crate) text: String,
    pub(crate) truncated: bool,
    pub(crate) added: usize,
    pub(crate) removed: usize,
}

/// The unified diff of `old` and `new` with `context` lines around changes,
/// cut at a line boundary before `max` bytes.
pub(crate) fn unified(
    old: &str,
    new: &str,
    old_label: &str,
    new_label: &str,
    context: usize,
    max: usize,
) -> Diff {
    let diff = TextDiff::configure()
        .timeout(DIFF_TIME)
        .diff_lines(old, new);
    let (mut added, mut removed) = (0, 0);
    for change in diff.iter_all_changes() {
        match change.tag() {
            ChangeTag::Insert => added += 1,
            ChangeTag::Delete => removed += 1,
            ChangeTag::Equal => {}
        }
    }
    let mut text = String::new();
    let mut truncated = false;
    if added + removed > 0 {
        let full = diff
            .unified_diff()
            .context_radius(context)
            .header(&format!("a/{old_label}"), &format!("b/{new_label}"))
            .to_string();
        if full.len() > max {
            let cut = memchr::memrchr(b'\n', &full.as_bytes()[..max]).map_or(0, |i| i + 1);
            text = full[..cut].to_string();
            truncated = true;
        } else {
            text = full;
        }
    }
    Diff {
        text,
        truncated,
        added,
        removed,
    }
}

/// Arguments of `file_diff`.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct FileDiffArgs {
    /// The original file.
    path: String,
    /// The file to compare it with. Give this or `content`, not both.
    #[serde(default)]
    other_path: Option<String>,
    /// Proposed new content for `path`, to preview a change before writing
    /// it. Give this or `other_path`, not both.
    #[serde(default)]
    content: Option<String>,
    /// Unchanged lines shown around each change (default 3, at most 100).
    #[serde(default)]
    context: Option<usize>,
    /// The most bytes of diff to return (default 65536, at most 524288); a
    /// longer diff is cut at a line boundary.
    #[serde(default)]
    max_bytes: Option<usize>,
}

/// Show the differences between two text files, or between a file and
/// proposed new content, as a unified diff (`---`/`+++` headers, `@@` hunks,
/// `-` removed and `+` added lines). Returns `diff` (empty when `identical`),
/// the numbers of lines `added` and `removed`, and `truncated` when the diff
/// was cut at `max_bytes`. Files up to 4 MiB; binary files are refused.
#[tool(toolset = "file", permissions = ["file:read"], read_only, emoji = "🔀")]
pub(crate) fn file_diff(args: FileDiffArgs) -> Result<Value, ToolError> {
    let context = args.context.unwrap_or(3);
    if context > 100 {
        return Err(ToolError::invalid_arguments(
            "context must be at most 100 lines",
        ));
    }
    let max = args.max_bytes.unwrap_or(DEFAULT_DIFF_BYTES);
    if !(1..=MAX_DIFF_BYTES).contains(&max) {
        return Err(ToolError::invalid_arguments(format!(
            "max_bytes must be between 1 and {MAX_DIFF_BYTES}"
        )));
    }
    let old = read_text(&args.path, MAX_FILE_BYTES)?;
    let (new, new_label) = match (args.other_path, args.content) {
        (Some(other), None) => (read_text(&other, MAX_FILE_BYTES)?, other),
        (None, Some(content)) => (content, args.path.clone()),
        (Some(_), Some(_)) => {
            return Err(ToolError::invalid_arguments(
                "give other_path (compare two files) or content (compare the file with \
                 proposed content), not both",
            ));
        }
        (None, None) => {
            return Err(ToolError::invalid_arguments(
                "give other_path (compare two files) or content (compare the file with \
                 proposed content)",
            ));
        }
    };
    let diff = unified(&old, &new, &args.path, &new_label, context, max);
    Ok(json!({
        "diff": diff.text,
        "identical": diff.added + diff.removed == 0,
        "added": diff.added,
        "removed": diff.removed,
        "truncated": diff.truncated,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unified_diff_with_counts() {
        let d = unified("a\nb\nc\n", "a\nB\nc\nd\n", "x", "y", 1, 1000);
        assert_eq!(
            d.text,
            "--- a/x\n+++ b/y\n@@ -1,3 +1,4 @@\n a\n-b\n+B\n c\n+d\n"
        );
        assert_eq!((d.added, d.removed, d.truncated), (2, 1, false));
        let d = unified("a\n", "a\n", "x", "x", 3, 1000);
        assert_eq!((d.text.as_str(), d.added, d.removed), ("", 0, 0));
        let d = unified("a\nb\n", "c\nd\n", "x", "x", 3, 20);
        assert!(d.truncated && d.text.len() <= 20 && d.text.ends_with('\n'));
    }
}
